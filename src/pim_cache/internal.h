/* PIM-CACHE host library internals shared by cache.c (tables, slots, the DRM, serial and
 * plain copies, VByte), push.c (the parallel engine: sampling, decision, rank pipeline),
 * track.c (write tracking of registered buffers), cdc.c (content-defined chunking) and
 * pool.c (host threads). Not installed. */
#ifndef NEARMEM_PIM_CACHE_INTERNAL_H
#define NEARMEM_PIM_CACHE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "nearmem/common/util.h"
#include "nearmem/pim_cache.h"
#include "nearmem/pim_cache_dpu.h"

#define FALLBACK_WINDOW_MAX 16u
#define MAX_RUNS 8u
#define NO_GEN UINT64_MAX
#define PIMC_DEFAULT_DPUS_PER_RANK 64u

/* ------------------------------------------------------------------ thread pool (pool.c)
 * Threads created once per cache; pool_run runs fn(arg, tid, nt) on every thread (the
 * caller is tid 0) and returns when all are done. Each run adds the CPU time its threads
 * spent to *cpu_ns. */
typedef void (*pool_fn)(void *arg, unsigned tid, unsigned nt);
typedef struct pool {
    unsigned n; /* worker threads besides the caller */
    pthread_t *th;
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    uint64_t epoch;
    unsigned pending;
    bool stop;
    pool_fn fn;
    void *arg;
    _Atomic uint64_t cpu_ns, max_ns;
    _Atomic uint64_t last_start, last_end; /* wall clock: latest worker start and end of a run */
    uint64_t extra_cpu_ns, extra_crit_ns; /* see hclk_now */
    /* Wall ns a run costs the caller beyond its threads' CPU: waking the workers and being
     * woken by the last (the least of 16 empty runs at init: what a dedicated machine takes). */
    uint64_t sync_ns;
} pool;
int pool_init(pool *p, unsigned threads);
void pool_destroy(pool *p);
/* Returns the CPU nanoseconds all participating threads spent in fn. */
uint64_t pool_run(pool *p, pool_fn fn, void *arg);
/* The same, on the caller alone when the work (bytes to read) is too small to pay for
 * waking the others. */
uint64_t pool_run_work(pool *p, pool_fn fn, void *arg, uint64_t work_bytes);

/* Host clocks of a copy, read by the calling thread: wall time; the CPU time of every host
 * thread; and the critical path, i.e. the time the host work would take with each of its
 * threads on a core of its own: the calling thread's CPU time, plus for each parallel run
 * the part of its longest thread (with the run's wake-up and completion latency, sync_ns)
 * beyond the caller's share. On a quiet machine crit is about wall; on a shared one wall
 * also holds the time other programs had the cores (docs/pim-cache.md, "How totals are
 * formed"). */
typedef struct hclk {
    uint64_t wall, cpu, crit;
} hclk;

/* ------------------------------------------------------------------ CDC (cdc.c)
 * Gear rolling hash with FastCDC's normalized chunking (Xia et al., USENIX ATC 2016):
 * no cut before `min`, a harder mask (more bits) before `avg`, an easier one after it,
 * a forced cut at `max`. Returns the length of the chunk starting at p (<= n). */
typedef struct cdc_params {
    uint32_t min, avg, max;
    uint64_t mask_s, mask_l;
} cdc_params;
void cdc_init(cdc_params *p, uint32_t min, uint32_t avg, uint32_t max);
size_t cdc_cut(const cdc_params *p, const uint8_t *buf, size_t n);

/* ------------------------------------------------------------------ tables */
typedef struct table {
    uint64_t *fp;
    uint32_t *off1;
    uint32_t cap, n, shift;
} table;

/* A small set of sampled fingerprints (open addressing, 0 = empty). */
typedef struct fpset {
    uint64_t *k;
    uint32_t cap, n;
} fpset;

/* ------------------------------------------------------------------ write tracking (track.c) */
typedef struct seg seg;
struct batch;
/* What the copy of one DPU's buffer knows from write tracking. */
typedef struct track_view {
    struct nm_pimc_reg *reg; /* NULL: the buffer is not (usably) registered */
    seg *sg;                 /* the record of this (buffer offset, DPU), created if missing */
    size_t off;              /* buffer start - registration base */
    bool seg_valid;          /* sg describes the last copy of exactly these bytes to this DPU */
    bool all_clean;          /* seg_valid and not one byte of the buffer was written since */
    uint64_t clean_bytes;    /* bytes of the buffer in granules not written since (seg_valid) */
} track_view;

/* Record of the last copy of [off, off + len) of a registration to one DPU. Block i of
 * that copy is at BRB address loc(i) on the DPU while the DPU's generation is `gen`. */
struct seg {
    size_t off, len;
    unsigned dpu;
    uint64_t gen;     /* NO_GEN: no valid record */
    bool plain;       /* contiguous at data_off */
    uint32_t data_off;
    uint32_t nb;      /* blocks (fixed) or list entries (CDC) */
    uint32_t *loc;    /* fixed: BRB address of block i; CDC: the (addr, start) list */
    uint64_t *fp;     /* fixed: fingerprint of block i (valid where fp_ok) */
    uint64_t *fp_ok;  /* bitmap */
    size_t cap;       /* entries allocated in loc / fp */
    unsigned slot;    /* slot written with this record, and its write epoch then */
    uint64_t slot_epoch;
    bool used;        /* hash map slot in use */
};

/* Tracking state of a registration (track.c). */
enum { TRK_NEW = 0, TRK_FULL, TRK_OFF, TRK_PROBE };
/* Protection to put in place after the copy (overlapping its transfers). */
enum { ARM_NONE = 0, ARM_FULL, ARM_OFF, ARM_PROBE };

struct nm_pimc_reg {
    nm_pimc *c;
    uintptr_t base;
    size_t len;
    int backend;          /* 1 uffd (page granule), 2 mprotect */
    int pid;              /* process that registered it (a fork child must register again) */
    int id;               /* mprotect: index in the process-wide handler table, -1 when not tracked */
    uintptr_t lo, hi;     /* tracked whole pages inside [base, base + len) */
    size_t granule;
    uint32_t ngran;
    uint64_t *cur;        /* dirty granules for the copy in progress (1 = written or unknown) */
    uint64_t *touched;    /* uffd: granules declared written (nm_pimc_reg_touch) since the last copy */
    uint64_t cur_epoch;   /* copy number cur belongs to */
    int state;            /* TRK_NEW (never protected), TRK_FULL (every page), TRK_OFF (none, waiting),
                           * TRK_PROBE (sample runs protected, measuring the write rate) */
    int arm;              /* ARM_* to do after this copy */
    bool protected_;      /* mprotect: some pages may be protected now */
    uint32_t probe_phase; /* first run of the probe sample */
    uint32_t wait, backoff; /* probe copies before full protection may come back, and the next such wait */
    uint64_t last_faults; /* write faults in the interval before this copy */
    double fault_ns;      /* backend's cost of one fault */
    seg **segs;       /* map (offset, DPU) -> record */
    uint32_t segs_cap, segs_n;
    struct nm_pimc_reg *next;
};

/* Before a copy: for each registration the batch reads, work out which granules were
 * written since its last copy (re-protecting them where tracking pays). NM_ESTATE with a
 * message when a registered buffer is no longer mapped. Returns the critical-path ns spent. */
nm_err track_begin_copy(nm_pimc *c);
/* After a successful copy (transfers issued): protection scheduled by track_begin_copy
 * (first protection, probe runs). Returns its host time, which overlaps the transfers. */
hclk track_end_copy(nm_pimc *c, const struct batch *b);
/* The view of DPU d's buffer buf[0, len) for this copy. */
void track_view_of(nm_pimc *c, const void *buf, size_t len, unsigned d, track_view *v);
/* Byte range [a, b) of the registration unwritten since its last copy? (cur bitmap) */
bool track_clean(const struct nm_pimc_reg *r, uintptr_t a, uintptr_t b);
uint64_t track_clean_bytes(const struct nm_pimc_reg *r, uintptr_t a, uintptr_t b);
/* First address in [a, b) that is not known unwritten (b if none). */
uintptr_t track_next_dirty(const struct nm_pimc_reg *r, uintptr_t a, uintptr_t b);
int seg_reserve(seg *s, uint32_t n, bool with_fp);
void track_destroy_all(nm_pimc *c);
uint64_t track_faults_total(void);

/* ------------------------------------------------------------------ per DPU */
typedef struct dpu_state {
    table t;
    uint32_t top;     /* BRB bytes in use (relative to the BRB start) */
    uint64_t gen;     /* bumped at every invalidation of this DPU */
    uint8_t *shadow;  /* verify mode: host copy of BRB [0, shadow_cap) */
    size_t shadow_cap;
    /* scratch of the current copy */
    uint8_t *bb;      /* block buffer (the paper's tau_BB) */
    size_t bb_cap;
    uint32_t nmiss;   /* blocks (fixed) gathered or sent */
    uint64_t miss_bytes; /* BRB bytes the missing blocks/chunks take */
    /* Serial mode sends up to MAX_RUNS runs of consecutive missing blocks straight from the
     * caller's buffer and gathers only beyond that (beyond the paper: saves a copy of
     * every missing byte when redundancy is low). */
    struct run {
        const uint8_t *src;
        uint32_t n;
    } runs[MAX_RUNS];
    unsigned nruns;
    bool gathered;
    uint8_t *tails;   /* zero-padded last blocks of the batch's buffers */
    size_t tails_cap;
    uint32_t **ob;    /* per batch entry: descriptor + offsets (tau_OB) */
    size_t *ob_cap;
    uint32_t *ob_len; /* bytes of ob[k] to send (multiple of 8) */
    bool *ob_skip;    /* write tracking: the slot already holds exactly this list */
    bool *ob_skip0;   /* the same before a rank push decided to send it anyway */
    uint64_t blocks, hits, invalidations, collisions, verify_bytes;
    uint64_t hashed_bytes, clean_bytes; /* this copy: bytes fingerprinted / skipped as unwritten */
    track_view *tv;   /* per batch entry */
    /* sampling (beyond the paper): fingerprints of the previous copy's sample */
    fpset prev, cur;
} dpu_state;

typedef struct batch {
    unsigned n;
    const unsigned *slots;
    const void *const *bufs; /* [i * nr_dpus + d] */
    const size_t *lens;
} batch;

struct nm_pimc {
    nm_pimc_transport t;
    nm_pimc_options o;
    uint32_t bs;
    uint32_t dpr;       /* DPUs per rank */
    unsigned nranks;
    uint64_t brb_base, brb_size, slot_area;
    dpu_state *d;
    /* slots: 0..o.slots-1 in the working area, more for push_xfer destinations */
    unsigned nslots, slots_cap;
    uint64_t *slot_addr;  /* MRAM address of the descriptor */
    uint64_t *slot_bytes; /* bytes available for descriptor + list */
    uint64_t *slot_gen;   /* [slot * nr_dpus + dpu]: DPU generation when the slot was written */
    uint64_t *slot_epoch; /* [slot * nr_dpus + dpu]: bumped at every write */
    nm_pimc_mode mode;
    unsigned plain_run;
    double hist[FALLBACK_WINDOW_MAX];
    unsigned hist_n;
    unsigned grace;     /* CAC copies not judged: the first one after a probe seeds the table */
    uint32_t seq;
    nm_pimc_stats st;
    pool pool;
    bool pool_ok;
    cdc_params cdc;
    /* parallel engine: learned host cost of the DRM, ns per byte (0 = unknown) */
    /* The DRM's host cost, predicted as (hash_ns x bytes fingerprinted + copy_ns x bytes
     * gathered + insert_ns x blocks inserted) / threads x drm_corr: the rates measured on
     * this host at create, the correction learned from every CAC copy (critical path over
     * prediction). */
    double hash_ns, copy_ns, insert_ns, touch_ns, drm_corr;
    unsigned drm_threads;
    double sample_ns, sample_ns0; /* critical-path ns per sample: learned, and first estimate */
    /* Predicted savings given up by plain copies that CAC would have won but for growing its
     * gather buffers (a one-time cost): once they reach that cost, CAC grows them (push.c). */
    double forgone_ns;
    /* write tracking */
    struct nm_pimc_reg *regs;
    uint64_t copy_no;
    const batch *cur_batch;
    uint8_t *plain_scratch; /* pimc_copy_plain's arrays */
    size_t plain_scratch_cap;
    /* drop-in push_xfer: recorded source buffers */
    const void **prepared;
};

hclk hclk_now(const nm_pimc *c);
static inline hclk hclk_sub(hclk a, hclk b) { return (hclk){a.wall - b.wall, a.cpu - b.cpu, a.crit - b.crit}; }
static inline hclk hclk_add(hclk a, hclk b) { return (hclk){a.wall + b.wall, a.cpu + b.cpu, a.crit + b.crit}; }

/* cache.c internals used by push.c and machine.c */
int pimc_add_slots(nm_pimc *c, unsigned n);
uint64_t pimc_run_plan(nm_pimc *c, const batch *b, unsigned d0, unsigned d1, int mode, uint32_t from, int *overflow,
                       int *oom, uint64_t *samples, uint64_t *hits);
/* Bytes DPUs [d0, d1) may read in this copy (buffers not known unwritten). */
uint64_t pimc_work_bytes(const nm_pimc *c, const batch *b, unsigned d0, unsigned d1);
uint32_t pimc_nblocks(const nm_pimc *c, size_t len);
size_t pimc_list_cap(const nm_pimc *c, size_t len); /* descriptor + worst-case list, bytes */
int pimc_reserve(void **p, size_t *cap, size_t need);
/* Bytes of scratch buffers and tables grown (any cache): fresh memory a copy touched. */
extern _Atomic uint64_t pimc_grown_bytes;
void pimc_invalidate(nm_pimc *c, unsigned dpu);
void pimc_poison(nm_pimc *c, const batch *b);
void pimc_mark_written(nm_pimc *c, const batch *b);
double pimc_modeled_now(const nm_pimc *c);
int pimc_plan_dpu(nm_pimc *c, unsigned d, const batch *b, uint32_t from);
void pimc_finish_lists(nm_pimc *c, const batch *b, unsigned d);
void pimc_commit_tracking(nm_pimc *c, const batch *b, unsigned d, bool plain, const uint32_t *data_off);
nm_err pimc_copy_plain(nm_pimc *c, const batch *b, hclk start); /* start: clock at the copy's start */
/* Copy statistics: host time and total (serial: host + transfers). */
void pimc_set_host(nm_pimc *c, hclk host);
uint64_t fpset_fix(uint64_t fp);
bool fpset_has(const fpset *s, uint64_t fp);
int fpset_add(fpset *s, uint64_t fp, uint32_t max);
void fpset_clear(fpset *s);
uint32_t pimc_table_get(const table *t, uint64_t fp);

/* push.c */
nm_err pimc_copy_parallel(nm_pimc *c, const batch *b, hclk start);
/* Predicted critical-path ns of the DRM fingerprinting `hashed` bytes, gathering and
 * indexing `missed` bytes and touching `grown` bytes of fresh scratch (0 without rates). */
double pimc_drm_predict(const nm_pimc *c, double hashed, double missed, double grown);
/* Modeled ns of pushes to `active` ranks at once moving `total` bytes, `max_rank` of them to
 * the busiest rank: the transport's multi-rank model (0 without a model). */
double pimc_push_ns(const nm_pimc *c, double max_rank, double total, unsigned active);

#endif
