/* Crash-testing kit for PMAlloc, shared by the tests and the pmalloc-crash suite.
 *
 * Workload: root slots [PMC_ROOT0, PMC_ROOT0 + PMC_NLISTS) hold linked lists
 * of self-checking objects. A seeded random mix appends (malloc_to into the
 * tail's `next` or into an empty root), frees tails (free_from on the
 * predecessor's `next` or the root), and moves lists between roots.
 * Objects are initialised after malloc_to returns (payload first, magic
 * last) and scrubbed (magic cleared, persisted) before free_from, so any
 * object with a valid magic is a finished, intact one.
 *
 * Invariants checked after recovery (pmc_check): the heap passes
 * pmalloc_check; every object reachable from the roots is allocated, does not
 * overlap another, and is intact (or, for a list's last object only, not yet
 * initialised); allocated == reachable (no leak); the free space can be
 * allocated again and released. */
#ifndef PM_CRASHLIB_H
#define PM_CRASHLIB_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include "nearmem/common/prng.h"
#include "nearmem/pmalloc.h"

#define PMC_ROOT0 8u
#define PMC_NLISTS 48u
#define PMC_MAXLEN 6u

typedef struct pmc_obj {
    uint64_t magic;
    uint64_t self;  /* its own pmalloc_ptr */
    uint64_t sizex; /* requested size ^ PMC_SIZEX (never looks like a pointer) */
    uint64_t seed;  /* payload generator */
    pmalloc_ptr next;
    uint64_t check; /* of the fields above */
} pmc_obj;

typedef struct pmc_config {
    unsigned large_pct;   /* % of allocations that are large (> 14 KiB) */
    size_t large_max;     /* largest large request */
    unsigned list_lo, list_n; /* lists this worker owns; list_n 0 = all */
    unsigned size_phase;  /* > 0: small sizes come from a band of classes that shifts every
                           * size_phase steps, so slabs go sparse and morph (Sec. 5.2) */
    pthread_mutex_t *locks;   /* [PMC_NLISTS]: workers share the lists (a block
                                 allocated by one thread is freed by another) */
    unsigned vnodes;      /* > 1: before 1 step in 4, move the thread to a random node (remote frees) */
} pmc_config;

/* One random operation; returns the pmalloc error of a failed call (NM_ENOMEM is
 * tolerated and reported as 0). */
int pmc_step(pmalloc_heap *h, nm_rng *r, const pmc_config *cfg);
/* Bring a recovered heap back to the workload's assumptions (drop duplicate
 * roots and unfinished tails) before running more steps on it. */
int pmc_repair(pmalloc_heap *h);

typedef struct pmc_result {
    uint64_t reachable, allocated, uninit;
    char msg[256];
} pmc_result;
/* Check the invariants; `full` adds the reuse check. Returns true when they hold. */
bool pmc_check(pmalloc_heap *h, bool full, pmc_result *res);

#endif

/* Crash campaigns. `tmpdir` must exist; results are added to the counters. */
typedef struct pmc_run {
    pmalloc_model model;
    size_t heap_size;
    unsigned points;             /* crash points to try */
    unsigned gap;                /* SIM: mean flushes between crash points */
    unsigned recovery_crash_pct; /* SIM: % of points whose recovery is crashed too */
    unsigned log_chunks;         /* small bookkeeping log, so its GC runs under crashes */
    unsigned evict_pct;          /* SIM: on half the points, unflushed lines persist with this % */
    unsigned threads;            /* workload threads: in the process-crash child, or in the live heap of a
                                  * power-failure run (crash points then land at arbitrary points of the
                                  * other threads; lists shared with locks in half the rounds) */
    bool crasher;                /* SIM: also crash at random moments (a timer thread), not at a flush */
    unsigned round_steps;        /* SIM: workload steps per thread and heap (0 = 100..600 at random) */
    unsigned morph_su;           /* pmalloc_options.morph_su of every open (0 = default 20%) */
    unsigned ckpt_records;       /* pmalloc_options.checkpoint_records of the workload's heaps; 0 = varied
                                  * (64, 256, 1024 or the default, by round or child): short rounds on a
                                  * small heap checkpoint often, so crashes land in checkpoints and in
                                  * rings given back and taken again */
    unsigned morph_target_pct;   /* SIM: % of the flushes inside a slab morph that become crash points */
    unsigned vnodes;             /* > 1: heaps with this many virtual NUMA nodes (16-entry deallocation-log
                                  * segments), workload threads hop between nodes; 0 = default topology */
    uint64_t seed;
    pmc_config cfg;
    const char *tmpdir;
    uint64_t tried, failures, recovery_tried, flush_points_seen;
    uint64_t log_gcs; /* SIM: runtime bookkeeping-log GCs in the live heaps */
    uint64_t morphs;  /* SIM: slab morphs in the live heaps */
    uint64_t checkpoints; /* SIM: checkpoints in the live heaps */
    uint64_t morph_points[4]; /* SIM: crash points inside a morph, by step (1 bitmap, 2 image, 3 commit) */
    uint64_t between_phases;   /* SIM: crash points with remote frees (blocks or extents) recorded, not synchronised */
    uint64_t replay_points;    /* recoveries checked that replayed deallocation-log entries */
    uint64_t replayed_entries; /* ... entries they replayed */
    uint64_t mt_points;        /* crash points while two or more workload threads ran (SIM) or were killed (process) */
    uint64_t timer_points;     /* SIM: taken by the crasher thread at a random moment */
    uint64_t user_flush_points;/* SIM: taken at a flush of the workload's own data */
    uint64_t create_points, close_points; /* SIM: inside pmalloc_open's create / pmalloc_close */
    uint64_t kills_in_close, kills_in_open; /* process: the child was closing / opening (recovering) the heap */
    char first_failure[512];
} pmc_run;
void pmc_run_defaults(pmc_run *r, pmalloc_model m, const char *tmpdir);
/* Power failure: a persisted image updated only by flush + drain; crash at
 * random flush points (torn fences included), recover the image, check. */
int pmc_run_sim(pmc_run *r);
/* Process crash: fork a child running the workload, SIGKILL it at a random
 * moment (sometimes during its own recovery), reopen and check. */
int pmc_run_proc(pmc_run *r);
