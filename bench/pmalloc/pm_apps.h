/* The PMAlloc paper's applications (Sec. 8.5-8.6, issue 19) on PMAlloc-LOG,
 * PMAlloc-GC and PMDK's libpmemobj, written against one thin adapter.
 *
 * Adapter (pa_*): the only place that knows the allocators. Every persistent
 * pointer the applications store is a 16-byte pa_ptr (room for a PMEMoid, a
 * pmalloc_ptr, or a DRAM address for the volatile reference), so every
 * persistent structure has the same layout under every allocator. Rules, the
 * same for all (docs/pmalloc.md, "Applications"):
 *  - an allocation goes into a persistent destination (pmalloc_malloc_to /
 *    pmemobj_alloc into a PMEMoid inside the pool), a free goes through the
 *    pointer that holds the object (pmalloc_free_from / pmemobj_free), which
 *    nulls it; a destination is always null when an allocation goes into it;
 *  - the applications persist their own data with pa_persist (pmalloc_persist
 *    or pmemobj_persist, both ending in libpmem's flush);
 *  - where an application needs a multi-object atomic update (Vacation's
 *    transactions) it uses our own undo log (pa_tx_*), the same code for every
 *    allocator, allocating and freeing through the adapter inside it.
 * PA_MALLOC (glibc malloc into DRAM, nothing persisted) is a reference row: what
 * the application costs without a persistent allocator.
 *
 * Applications (pa_app): each has an untimed init, a per-thread worker whose
 * timed phase starts at pa_timed_begin, and a verify step that checks its own
 * result (tree contents, reservation counts, factors, MST weights, ...). */
#ifndef PM_APPS_H
#define PM_APPS_H

#include <libpmemobj.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "nearmem/common/prng.h"
#include "nearmem/pmalloc.h"

typedef enum pa_kind { PA_LOG = 0, PA_GC = 1, PA_PMDK = 2, PA_MALLOC = 3, PA_NKINDS = 4 } pa_kind;
const char *pa_kind_name(pa_kind k);   /* PMAlloc-LOG, PMAlloc-GC, PMDK, DRAM-malloc */
const char *pa_kind_short(pa_kind k);  /* log, gc, pmdk, malloc */

/* A persistent pointer slot, 16 bytes under every allocator. */
typedef union pa_ptr {
    PMEMoid oid;    /* PMDK */
    pmalloc_ptr pp; /* PMAlloc (the second word stays 0) */
    void *vp;       /* DRAM-malloc */
    uint64_t w[2];
} pa_ptr;
_Static_assert(sizeof(pmalloc_ptr) <= 16 && sizeof(PMEMoid) == 16, "pa_ptr holds both pointer kinds");

#define PA_ROOT_SIZE 4096u /* the application's root area (zeroed at creation) */

typedef struct pa_heap {
    pa_kind k;
    pmalloc_heap *h;
    PMEMobjpool *pop;
    void *root;      /* PA_ROOT_SIZE bytes inside the heap (DRAM for PA_MALLOC) */
    pmalloc_ptr root_pp;
} pa_heap;

typedef struct pa_open_opts {
    pa_kind kind;
    const char *dir;   /* must exist */
    size_t size;       /* pool size when creating */
    bool create;
    unsigned narenas;  /* PMAlloc: 0 = one per CPU */
    pmalloc_persist_mode persist; /* PMAlloc: 0 = PMALLOC_PERSIST_AUTO; the suites use CPU */
    unsigned log_chunks;          /* PMAlloc: 0 = default */
    bool eadr;                    /* PMAlloc: PMALLOC_EADR_ON (no flushes, fences kept: Sec. 8.9) */
} pa_open_opts;

/* Open or create; after an unclean shutdown this is the allocator's recovery.
 * 0 on success, else -1 with a message in err. */
int pa_open(pa_heap *a, const pa_open_opts *o, char *err, size_t errcap);
void pa_close(pa_heap *a);   /* clean shutdown (PA_MALLOC: objects still allocated stay allocated, as in a heap) */
void pa_remove(const char *dir); /* remove every allocator's files in dir (not dir) */
/* Set PMEM_IS_PMEM_FORCE=1 (before any libpmemobj call): CPU flushes on page-cache files. */
void pa_force_pmem(void);

/* Per-thread operation counters (allocator calls). */
typedef struct pa_tcount { uint64_t allocs, frees; } pa_tcount;
extern __thread pa_tcount pa_tl;

static inline void *pa_get(const pa_heap *a, pa_ptr p)
{
    switch (a->k) {
    case PA_PMDK: return pmemobj_direct(p.oid);
    case PA_MALLOC: return p.vp;
    default: return pmalloc_direct(a->h, p.pp);
    }
}

static inline bool pa_isnull(const pa_heap *a, pa_ptr p) { return a->k == PA_PMDK ? p.oid.off == 0 : p.w[0] == 0; }

/* Allocate `size` bytes into *dst (which must be null and inside the heap). 0 or -1. */
static inline int pa_alloc(pa_heap *a, size_t size, pa_ptr *dst)
{
    pa_tl.allocs++;
    switch (a->k) {
    case PA_PMDK: return pmemobj_alloc(a->pop, &dst->oid, size, 0, NULL, NULL) ? -1 : 0;
    case PA_MALLOC: {
        void *p = malloc(size);
        if (!p) return -1;
        dst->vp = p;
        return 0;
    }
    default: return pmalloc_malloc_to(a->h, size, &dst->pp) ? -1 : 0;
    }
}

/* Free the object *src holds and null *src. 0 or -1. */
static inline int pa_free(pa_heap *a, pa_ptr *src)
{
    pa_tl.frees++;
    switch (a->k) {
    case PA_PMDK: pmemobj_free(&src->oid); return 0;
    case PA_MALLOC: free(src->vp); src->vp = NULL; return 0;
    default: return pmalloc_free_from(a->h, &src->pp) ? -1 : 0;
    }
}

static inline void pa_persist(pa_heap *a, const void *p, size_t n)
{
    if (a->k == PA_PMDK) pmemobj_persist(a->pop, p, n);
    else if (a->k != PA_MALLOC) pmalloc_persist(a->h, p, n);
}
static inline void pa_flush(pa_heap *a, const void *p, size_t n)
{
    if (a->k == PA_PMDK) pmemobj_flush(a->pop, p, n);
    else if (a->k != PA_MALLOC) pmalloc_flush(a->h, p, n);
}
static inline void pa_drain(pa_heap *a)
{
    if (a->k == PA_PMDK) pmemobj_drain(a->pop);
    else if (a->k != PA_MALLOC) pmalloc_drain(a->h);
}

/* Store pointer p into *loc, a word that an allocation or free may have written
 * before (a malloc_to destination, a free_from source). PMAlloc with the
 * one-line commit (issue 16; detected by PMALLOC_OVERWRITE in pmalloc.h) owns
 * such words until its next checkpoint, so the store goes through
 * pmalloc_set_ptr (ordered after the operations that wrote the word, durable on
 * return); otherwise a store and a flush, plus a drain when `drain`. */
static inline void pa_set_ptr(pa_heap *a, pa_ptr *loc, pa_ptr p, bool drain)
{
#ifdef PMALLOC_OVERWRITE
    if (a->k == PA_LOG || a->k == PA_GC) {
        if (pmalloc_set_ptr(a->h, &loc->pp, p.pp)) abort(); /* only a foreign pointer fails: a program bug */
        return;
    }
#endif
    *loc = p;
    pa_flush(a, loc, sizeof *loc);
    if (drain) pa_drain(a);
}

/* The pointer of the object at addr (an object start inside the heap). */
pa_ptr pa_ptr_of(const pa_heap *a, const void *addr);
/* Heap-relative offsets of addresses (for position-independent logs). */
uint64_t pa_off_of(const pa_heap *a, const void *addr);
void *pa_at_off(const pa_heap *a, uint64_t off);
/* Usable size of the allocated object starting at addr, 0 if none. */
size_t pa_usable(pa_heap *a, const void *addr);
/* Every allocated object but the root area, as addresses (not PA_MALLOC). */
typedef int (*pa_walk_fn)(void *arg, void *addr, size_t usable);
int pa_walk(pa_heap *a, pa_walk_fn fn, void *arg);

/* ---- the application's undo-log transactions (same for every allocator) ----
 * A per-thread log in the heap. pa_tx_add logs a range before it is changed
 * (its old bytes, persisted) and flushes it at commit; pa_tx_new marks a range
 * of a new object for flushing at commit; pa_tx_alloc allocates into a log slot
 * (freed by a rollback, handed to the structure by the caller, dropped from the
 * log at commit); pa_tx_free defers a free to after the commit. Recovery
 * (pa_tx_recover) rolls back an active transaction or finishes the frees of a
 * committed one. Not shared between threads: the caller serialises
 * transactions that touch the same data. */
#define PA_TX_SLOTS 256u
#define PA_TX_UNDO 32768u
typedef struct pa_txlog {
    uint64_t state; /* 0 idle, 1 active, 2 committed (deferred frees pending) */
    uint64_t gen;   /* undo entries of another generation are stale */
    uint64_t pad[6];
    pa_ptr alloc[PA_TX_SLOTS];
    pa_ptr frees[PA_TX_SLOTS];
    unsigned char undo[PA_TX_UNDO];
} pa_txlog;

typedef struct pa_tx {
    pa_heap *a;
    pa_txlog *log;
    size_t undo_used;
    unsigned nalloc, nfree, nranges;
    struct { void *p; size_t n; } ranges[1024];
    bool overflow, state_durable;
} pa_tx;

void pa_tx_init(pa_tx *t, pa_heap *a, pa_txlog *log);
void pa_tx_begin(pa_tx *t);
int pa_tx_add(pa_tx *t, void *p, size_t n);
void pa_tx_new(pa_tx *t, void *p, size_t n);
/* Allocate into a log slot; returns the slot (copy its value into the structure) or NULL. */
pa_ptr *pa_tx_alloc(pa_tx *t, size_t size);
/* Defer freeing the object p (whose holder the transaction changes with pa_tx_add). */
int pa_tx_free(pa_tx *t, pa_ptr p);
int pa_tx_commit(pa_tx *t);
/* Roll back a transaction that failed (an overflow, an allocation that failed)
 * at once, before the caller releases its lock: left for recovery, its changes
 * would stay visible to the next transaction of another thread, and recovery,
 * which rolls the logs back one after the other, could then restore them from
 * that transaction's images. 0 or -1. */
int pa_tx_abort(pa_tx *t);
/* After an unclean open: finish or roll back what the log holds. Returns 1 if it
 * rolled back, 2 if it finished a commit, 0 if idle, -1 on error. */
int pa_tx_recover(pa_heap *a, pa_txlog *log);

/* ---- applications ---- */

typedef struct pa_cfg {
    unsigned threads;
    uint64_t n, ops, iters; /* sizes, meaning per application (docs) */
    uint64_t seed;
} pa_cfg;

typedef struct pa_ctx pa_ctx;
typedef struct pa_app {
    const char *name;
    const char *op_name; /* what one application operation is */
    bool mt;             /* multi-threaded (run at 1 and 2 threads) */
    size_t (*pool_size)(const pa_cfg *c);
    int (*init)(pa_ctx *x);                           /* untimed, one thread */
    int (*work)(pa_ctx *x, unsigned tid, uint64_t *app_ops); /* calls pa_timed_begin once */
    int (*verify)(pa_ctx *x);                         /* after the join */
    void (*fini)(pa_ctx *x);                          /* DRAM state */
} pa_app;

struct pa_ctx {
    const pa_app *app;
    pa_heap *a;
    const pa_cfg *c;
    void *st; /* the application's DRAM state */
    pthread_barrier_t bar;
    uint64_t t_start, t_end;
    uint64_t pm_flushes0; /* PMAlloc's flush counter when the timed phase started */
    char msg[256];
};

/* Record a failure message (first one wins); returns -1. */
int pa_fail(pa_ctx *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Every worker calls this once, when its timed phase starts (a barrier of the workers). */
void pa_timed_begin(pa_ctx *x);
/* Thread-safe per-thread seeds. */
void pa_rng(const pa_ctx *x, unsigned tid, nm_rng *r);

const pa_app *pa_app_find(const char *name);
extern const pa_app *const pa_apps[]; /* NULL-terminated, in the paper's order */

/* Flush counting: the helper nearmem-pmalloc-apprun defines this (it interposes
 * libpmem's exported persistence functions and counts per thread); elsewhere it
 * is absent and lines come from PMAlloc's own counters. */
extern void pa_count_read(uint64_t *lines, uint64_t *streamed, uint64_t *fences) __attribute__((weak));

typedef struct pa_result {
    int err;
    char msg[256];
    double seconds;    /* timed phase (wall clock, first worker start to last worker end) */
    double cpu_seconds; /* CPU time of the workers over their timed phases (immune to being descheduled) */
    double app_ops;    /* application operations in it */
    double allocs, frees;
    double lines, nt_lines, fences; /* through libpmem: lines flushed, lines streamed (pmem_memcpy & co.), fences; -1 unknown */
    double pm_lines;   /* PMAlloc's own flush counter over the timed phase (cross-check of `lines`) */
    double peak_bytes; /* peak RSS growth (DRAM + pool pages touched) */
    double pmem;       /* the pool is persisted with CPU flushes (pmem_is_pmem or PERSIST_CPU) */
} pa_result;

typedef struct pa_run_opts {
    const pa_app *app;
    pa_kind kind;
    pa_cfg cfg;
    const char *dir;
    size_t pool; /* 0 = app->pool_size */
    bool prefault;
    bool eadr;   /* PMAlloc without flushes (for PMDK the helper is run with PMEM_NO_FLUSH=1) */
} pa_run_opts;
/* Run one measurement in this process. */
int pa_run_inproc(const pa_run_opts *o, pa_result *r);
void pa_result_print(const pa_result *r);
int pa_result_parse(const char *out, pa_result *r);

/* Shared helpers for the applications. */
static inline uint64_t pa_mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

#endif
