/* Internals of the emulated PIM machine (not installed). */
#ifndef NM_PIM_INTERNAL_H
#define NM_PIM_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "coro.h"
#include "dpurt/nm_dpu_abi.h"
#include "nearmem/pim/dpu.h"
#include "nearmem/pim/host.h"

#define NM_PIM_CHUNK_SHIFT 16u /* MRAM residency is tracked in 64 KiB chunks */
#define NM_PIM_CHUNK_SIZE (1u << NM_PIM_CHUNK_SHIFT)
#define NM_PIM_NR_CHUNKS (NM_PIM_MRAM_SIZE / NM_PIM_CHUNK_SIZE)
#define NM_PIM_MAX_HW_UNITS 8u

typedef struct nm_pim_hw_slot {
    const nm_pim_hw_unit *unit;
    void *state;
} nm_pim_hw_slot;

typedef enum dpu_run_state { DPU_IDLE = 0, DPU_QUEUED, DPU_RUNNING, DPU_DONE, DPU_FAULTED } dpu_run_state;

/* One mapping of a program file (loader.c). A system keeps one instance per
 * pool thread; DPU i always runs on thread i mod T with instance i mod T, so
 * the addresses of its WRAM globals stay the same from launch to launch. */
typedef struct nm_pim_instance {
    void *handle;      /* dlopen handle of a private memfd copy */
    int fd;            /* the memfd, open while mapped: its /proc/self/fd name stays unique */
    nm_dpu_info info;  /* addresses inside this instance */
    uint8_t *pristine; /* the WRAM data block as loaded (relocated for this instance) */
} nm_pim_instance;

/* A program file loaded into a system (cached by content: loading the same
 * program again reuses its instances). */
typedef struct nm_pim_loaded {
    struct nm_pim_system *sys;
    uint8_t *bytes; /* the file, for the cache check */
    size_t size;
    uint64_t hash;
    nm_dpu_header hdr;
    uint32_t nr_instances;
    nm_pim_instance *inst;
    nm_pim_program_def def; /* symbols, sizes; def.file points back here */
    char name[256];
    struct nm_pim_loaded *next;
} nm_pim_loaded;

/* struct dpu_rank_t of host.h: the ranks a set lists (SDK layout). */
struct dpu_rank_t {
    struct nm_pim_system *sys;
    uint32_t first, count; /* DPUs of the allocation */
};

/* struct dpu_t of host.h. */
typedef struct dpu_t {
    struct nm_pim_system *sys;
    uint32_t index;
    nm_pim_program_def *prog;
    uint8_t *wram_image;  /* the program's globals image */
    uint8_t *mram;        /* 64 MiB, mapped MAP_NORESERVE: pages are committed on first write */
    uint64_t written[NM_PIM_NR_CHUNKS / 64]; /* chunks ever written (the rest reads as zeros) */
    uint64_t mram_resident;
    uint32_t nr_tasklets;
    void *xfer_buf;       /* dpu_prepare_xfer */
    dpu_run_state state;  /* guarded by sys->lock while a launch is in flight */
    nm_pim_fault_info fault;
    nm_pim_dpu_stats stats;
    nm_pim_tasklet_stats tstats[NM_PIM_MAX_TASKLETS];
    nm_pim_hw_slot hw[NM_PIM_MAX_HW_UNITS];
    /* perfcounter */
    perfcounter_config_t pc_mode;
    double pc_base;
    /* DPU printf log (file programs), cleared at each launch */
    char *log;
    uint32_t log_len, log_cap, log_limit;
    uint64_t log_dropped;
} nm_pim_dpu;

struct nm_pim_pool_arg {
    struct nm_pim_system *sys;
    uint32_t k;
};

typedef struct nm_pim_system {
    uint32_t nr_dpus;
    nm_pim_dpu *dpus;
    nm_pim_cost cost;
    uint32_t nr_threads;
    /* NEARMEM_PIM_SCHED=reference at dpu_alloc: the straightforward scheduler
     * the fast one must match cycle for cycle (machine.c; tests compare them). */
    bool sched_reference;
    pthread_t *threads;
    pthread_mutex_t lock;
    pthread_cond_t work_cv, done_cv;
    bool shutdown;
    /* current launch */
    bool in_flight;
    uint32_t job_begin, job_count, job_remaining;
    uint64_t job_gen; /* incremented per launch or pool transfer */
    /* A large transfer is copied by the pool (DPU i on thread i mod T, as in
     * launches); the main thread waits for it. */
    bool job_is_xfer;
    struct nm_pim_xfer_job {
        const void *target; /* host.c's resolved symbol */
        uint32_t off;
        size_t len;
        bool to_dpu;
        void *buf; /* the common buffer, or NULL: each DPU's prepared buffer */
    } xjob;
    struct nm_pim_pool_arg *pool_args;
    uint64_t job_start_ns;
    nm_pim_launch_stats last_launch;
    nm_pim_xfer_stats last_xfer;
    nm_pim_totals totals;
    /* ranks (SDK layout of struct dpu_set_t) */
    struct dpu_rank_t *rank_objs;
    struct dpu_rank_t **rank_ptrs;
    uint32_t nr_ranks;
    /* profile */
    uint32_t want_tasklets; /* tasklets=N: programs must be built for N (0 = any) */
    /* program files loaded into this system */
    nm_pim_loaded *loaded;
} nm_pim_system;

/* registry.c */
int nm_pim__seal_program(nm_pim_program_def *p);
nm_pim_program_def *nm_pim__find_program_mut(const char *name);
const nm_pim_symbol *nm_pim__find_symbol(const nm_pim_program_def *p, const char *name);

/* loader.c */
dpu_error_t nm_pim__load_image(nm_pim_system *sys, const char *name, const uint8_t *bytes, size_t size,
                               nm_pim_loaded **out);
dpu_error_t nm_pim__load_path(nm_pim_system *sys, const char *path, nm_pim_loaded **out);
void nm_pim__unload_all(nm_pim_system *sys);
extern const nm_dpu_rt nm_pim__rt;

/* machine.c */
void nm_pim__run_dpu(nm_pim_dpu *d);            /* on a pool thread */
void nm_pim__worker_release(void);              /* free the calling thread's worker state */
int nm_pim__mram_write_host(nm_pim_dpu *d, uint32_t off, const void *src, size_t n);
/* src == NULL: zeros */
int nm_pim__mram_fill_host(nm_pim_dpu *d, uint32_t off, const void *src, size_t n);
void nm_pim__mram_read_host(const nm_pim_dpu *d, uint32_t off, void *dst, size_t n);
int nm_pim__mram_init(nm_pim_dpu *d);
void nm_pim__mram_free(nm_pim_dpu *d);
void nm_pim__hw_free(nm_pim_dpu *d);

#endif
