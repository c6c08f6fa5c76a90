/* Internals of the emulated PIM machine (not installed). */
#ifndef NM_PIM_INTERNAL_H
#define NM_PIM_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "coro.h"
#include "nearmem/pim/dpu.h"
#include "nearmem/pim/host.h"

#define NM_PIM_CHUNK_SHIFT 16u /* MRAM is backed lazily in 64 KiB chunks */
#define NM_PIM_CHUNK_SIZE (1u << NM_PIM_CHUNK_SHIFT)
#define NM_PIM_NR_CHUNKS (NM_PIM_MRAM_SIZE / NM_PIM_CHUNK_SIZE)
#define NM_PIM_MAX_HW_UNITS 8u

typedef struct nm_pim_hw_slot {
    const nm_pim_hw_unit *unit;
    void *state;
} nm_pim_hw_slot;

typedef enum dpu_run_state { DPU_IDLE = 0, DPU_QUEUED, DPU_RUNNING, DPU_DONE, DPU_FAULTED } dpu_run_state;

typedef struct nm_pim_dpu {
    struct nm_pim_system *sys;
    uint32_t index;
    nm_pim_program_def *prog;
    uint8_t *wram_image;  /* the program's globals image */
    uint8_t **mram;       /* NM_PIM_NR_CHUNKS lazily allocated chunks */
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
    pthread_t *threads;
    pthread_mutex_t lock;
    pthread_cond_t work_cv, done_cv;
    bool shutdown;
    /* current launch */
    bool in_flight;
    uint32_t job_begin, job_count, job_remaining;
    uint64_t job_gen; /* incremented per launch */
    struct nm_pim_pool_arg *pool_args;
    uint64_t job_start_ns;
    nm_pim_launch_stats last_launch;
    nm_pim_xfer_stats last_xfer;
    nm_pim_totals totals;
} nm_pim_system;

/* registry.c */
int nm_pim__seal_program(nm_pim_program_def *p);
nm_pim_program_def *nm_pim__find_program_mut(const char *name);
const nm_pim_symbol *nm_pim__find_symbol(const nm_pim_program_def *p, const char *name);

/* machine.c */
void nm_pim__run_dpu(nm_pim_dpu *d);            /* on a pool thread */
void nm_pim__worker_release(void);              /* free the calling thread's worker state */
int nm_pim__mram_write_host(nm_pim_dpu *d, uint32_t off, const void *src, size_t n);
void nm_pim__mram_read_host(const nm_pim_dpu *d, uint32_t off, void *dst, size_t n);
void nm_pim__mram_free(nm_pim_dpu *d);
void nm_pim__hw_free(nm_pim_dpu *d);

#endif
