/* Allocation workloads in the spirit of mimalloc-bench, written for nearmem
 * (our own implementations, not copies): run as a separate process under
 * LD_PRELOAD of each allocator by suites `speedmalloc` and `speedmalloc-contention`.
 *
 *   nearmem-sm-workload NAME THREADS SCALE [SEED]
 *
 * prints "elapsed_ns=<n> cpu_ns=<c> checksum=<x>" on stdout (cpu_ns: user + system time of
 * the whole process, every thread, during the timed section). SCALE multiplies the
 * operation counts (1.0 = the full run). Every workload checks its result: blocks are
 * written and checked when freed, and the application-like workloads (cfrac, espresso,
 * barnes, bfs, bc, dc) verify what they computed; a wrong result exits 1 instead of
 * looking fast. This file: the main program and the synthetic workloads; sm_wl_apps.c:
 * cfrac, espresso, barnes; sm_wl_graph.c: GAPBS-style BFS and BC, NAS-DC-style. */
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "nearmem/common/prng.h"
#include "nearmem/common/timer.h"
#include "sm_wl.h"

unsigned g_threads;
double g_scale;
uint64_t g_seed;
int g_bad;
uint64_t g_sum;
pthread_barrier_t g_bar;
/* Wait-loop counters, printed with NEARMEM_WL_DETAIL=1 (see wl_detail below): how often a
 * workload waited for another thread instead of doing its own work. */
static int wl_detail;
static uint64_t bar_waits, bar_cpu_ns, bar_wall_ns; /* sh8bench's and larson's barriers */
static uint64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
static void wl_barrier(void)
{
    if (!wl_detail) { pthread_barrier_wait(&g_bar); return; }
    uint64_t c = thread_cpu_ns(), w = nm_now_ns();
    pthread_barrier_wait(&g_bar);
    __atomic_fetch_add(&bar_cpu_ns, thread_cpu_ns() - c, __ATOMIC_RELAXED);
    __atomic_fetch_add(&bar_wall_ns, nm_now_ns() - w, __ATOMIC_RELAXED);
    __atomic_fetch_add(&bar_waits, 1, __ATOMIC_RELAXED);
}

/* A block's check bytes: its size in its first and last byte, written when it is made,
 * checked when it is freed (xmalloc-floor does the same without an allocator). */
static inline void xmark(unsigned char *p, size_t n)
{
    p[n - 1] = (unsigned char)(n >> 3);
    p[0] = (unsigned char)n;
}
static inline void xcheck(const unsigned char *p, size_t n)
{
    if (p[0] != (unsigned char)n || (n > 1 && p[n - 1] != (unsigned char)(n >> 3))) __atomic_store_n(&g_bad, 1, __ATOMIC_RELAXED);
}
static inline void *xmalloc(size_t n)
{
    unsigned char *p = wl_malloc(n);
    xmark(p, n);
    return p;
}
static inline void xfree(void *v, size_t n)
{
    xcheck(v, n);
    free(v);
}

typedef struct { void *p; size_t n; } slot;

/* ---- larson: server-like churn; each round the slot arrays move to another thread ---- */
#define LARSON_SLOTS 1000
static slot *larson_arrays[64];
static void *larson(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg;
    nm_rng r;
    nm_rng_seed(&r, g_seed + id);
    size_t rounds = 20, ops = scaled(4000000) / rounds;
    for (size_t round = 0; round < rounds; round++) {
        slot *a = larson_arrays[(id + round) % g_threads];
        for (size_t i = 0; i < ops; i++) {
            slot *s = &a[nm_rng_below(&r, LARSON_SLOTS)];
            if (s->p) xfree(s->p, s->n);
            s->n = 16 + (size_t)nm_rng_below(&r, 113);
            s->p = xmalloc(s->n);
        }
        wl_barrier();
    }
    return NULL;
}

/* ---- xmalloc-test: blocks made by one thread are freed by the next ----
 * Each thread makes batches of blocks and hands them to the next thread through a bounded
 * queue; the next thread frees them. Lever and Boreham's test (as in mimalloc-bench) has
 * separate producer and consumer threads on one queue of at most 100 batches, and a thread
 * that finds the queue full (producer) or empty (consumer) blocks on a condition variable.
 * Ours has every thread do both, and waits the same way: a thread whose next thread's queue
 * is full frees what arrived for it, and when nothing did it sleeps on its condition
 * variable until its queue gets a batch, the full queue gets room, or the run ends. An
 * earlier version retried in a busy loop (lock, look, unlock) instead: under hogs a thread
 * spun for whole time slices while the next one waited for a CPU, 90-97% of the section's
 * CPU went into that loop for every allocator, and its length was the scheduler's choice
 * (docs/speedmalloc.md, "Where the contention spread comes from"). */
#define XM_BATCH 256
#define XM_QUEUE 64
typedef struct { void *p[XM_BATCH]; size_t n[XM_BATCH]; } xm_batch;
static struct {
    pthread_mutex_t lock;
    pthread_cond_t cv[64]; /* thread i sleeps on cv[i] */
    xm_batch *q[64][XM_QUEUE];
    unsigned head[64], tail[64], done;
} xm = {.lock = PTHREAD_MUTEX_INITIALIZER};
static uint64_t xm_waits;

/* xmalloc-floor: the same exchange with an allocator that costs nothing, the control that
 * tells what the workload's own traffic costs (the floor of xmalloc-test's time and of its
 * spread under hogs; docs/speedmalloc.md, "The floor of the spread, measured"). Each thread
 * owns batches made before the timed section, with 128-byte slots; a block is "allocated"
 * by writing its size into its first and last byte in a slot of a batch the thread owns,
 * and "freed" by the next thread, which checks those bytes and hands the whole batch back
 * (one list push per 256 blocks, in a lock section the exchange takes anyway). So the only
 * memory traffic left is the blocks' lines moving between the threads, as with any
 * allocator; no malloc or free runs in the timed section. */
#define XM_SLOT 128
#define XM_POOL (XM_QUEUE + 8) /* > batches a thread can have out: XM_QUEUE queued + 1 being freed */
typedef struct xm_fbatch { xm_batch b; struct xm_fbatch *next; } xm_fbatch;
static bool xm_floor;
static xm_fbatch *xm_back[64];           /* under xm.lock: batches handed back to thread i */
static xm_fbatch *xm_spare[64];          /* thread i's own: free batches */
static _Thread_local xm_fbatch *xm_freed; /* checked, to hand back at the next lock section */
static void xm_floor_setup(void)
{
    for (unsigned t = 0; t < g_threads; t++)
        for (int k = 0; k < XM_POOL; k++) {
            xm_fbatch *x = wl_calloc(1, sizeof *x);
            unsigned char *slots = wl_calloc(XM_BATCH, XM_SLOT); /* calloc writes or maps zero pages: touch them */
            memset(slots, 1, (size_t)XM_BATCH * XM_SLOT);
            for (int i = 0; i < XM_BATCH; i++) x->b.p[i] = slots + (size_t)i * XM_SLOT;
            x->next = xm_spare[t];
            xm_spare[t] = x;
        }
}
/* Under xm.lock: hand back what this thread checked since its last lock section, and take
 * what came back to it. */
static void xm_floor_locked(unsigned id)
{
    if (xm_freed) {
        unsigned owner = (id + g_threads - 1) % g_threads; /* only the previous thread sends to id */
        xm_fbatch *last = xm_freed;
        while (last->next) last = last->next;
        last->next = xm_back[owner];
        xm_back[owner] = xm_freed;
        xm_freed = NULL;
    }
    while (xm_back[id]) {
        xm_fbatch *x = xm_back[id];
        xm_back[id] = x->next;
        x->next = xm_spare[id];
        xm_spare[id] = x;
    }
}
static xm_batch *xm_new_batch(unsigned id, nm_rng *r)
{
    if (!xm_floor) {
        xm_batch *x = wl_malloc(sizeof *x); /* bookkeeping: not checked */
        for (int i = 0; i < XM_BATCH; i++) { x->n[i] = 8 + (size_t)nm_rng_below(r, 120); x->p[i] = xmalloc(x->n[i]); }
        return x;
    }
    xm_fbatch *f = xm_spare[id];
    if (!f) { fprintf(stderr, "xmalloc-floor: no spare batch (cannot happen: %d per thread)\n", XM_POOL); exit(1); }
    xm_spare[id] = f->next;
    for (int i = 0; i < XM_BATCH; i++) {
        f->b.n[i] = 8 + (size_t)nm_rng_below(r, 120);
        xmark(f->b.p[i], f->b.n[i]);
    }
    return &f->b;
}
/* Called without xm.lock: free (or, for the floor, check) a batch that arrived. */
static void xm_free_batch(xm_batch *x)
{
    if (!xm_floor) {
        for (int i = 0; i < XM_BATCH; i++) xfree(x->p[i], x->n[i]);
        free(x);
        return;
    }
    for (int i = 0; i < XM_BATCH; i++) xcheck(x->p[i], x->n[i]);
    xm_fbatch *f = (xm_fbatch *)x;
    f->next = xm_freed;
    xm_freed = f;
}
static void xm_lock(unsigned id)
{
    pthread_mutex_lock(&xm.lock);
    if (xm_floor) xm_floor_locked(id);
}
/* Under xm.lock: the next batch queued for thread id, or NULL. Taking one makes room in the
 * queue that the previous thread pushes to: wake it if it sleeps on a full queue. */
static xm_batch *xm_pop(unsigned id)
{
    if (xm.tail[id] == xm.head[id]) return NULL;
    xm_batch *x = xm.q[id][xm.head[id]++ % XM_QUEUE];
    pthread_cond_signal(&xm.cv[(id + g_threads - 1) % g_threads]);
    return x;
}
/* Under xm.lock, which it drops while freeing: free a batch that arrived. */
static void xm_take(unsigned id, xm_batch *mine)
{
    pthread_mutex_unlock(&xm.lock);
    xm_free_batch(mine);
    xm_lock(id);
}
static void *xmalloc_test(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg, to = (id + 1) % g_threads;
    nm_rng r;
    nm_rng_seed(&r, g_seed + id);
    size_t batches = scaled(20000);
    for (size_t b = 0; b < batches; b++) {
        xm_batch *x = xm_new_batch(id, &r);
        xm_lock(id);
        while (xm.tail[to] - xm.head[to] >= XM_QUEUE) { /* the next thread's queue is full */
            xm_batch *mine = xm_pop(id);
            if (mine) { /* free what arrived meanwhile (outside the lock) */
                xm_take(id, mine);
            } else {
                xm_waits++;
                pthread_cond_wait(&xm.cv[id], &xm.lock);
            }
        }
        xm.q[to][xm.tail[to]++ % XM_QUEUE] = x;
        pthread_cond_signal(&xm.cv[to]);
        for (xm_batch *mine; (mine = xm_pop(id));) xm_take(id, mine); /* free what arrived */
        pthread_mutex_unlock(&xm.lock);
    }
    /* keep consuming until every producer is done, so nobody waits on a full queue forever */
    xm_lock(id);
    if (++xm.done == g_threads)
        for (unsigned i = 0; i < g_threads; i++) pthread_cond_signal(&xm.cv[i]);
    for (;;) {
        xm_batch *mine = xm_pop(id);
        if (mine) {
            xm_take(id, mine);
        } else if (xm.done < g_threads) {
            xm_waits++;
            pthread_cond_wait(&xm.cv[id], &xm.lock);
        } else {
            break;
        }
    }
    pthread_mutex_unlock(&xm.lock);
    return NULL;
}
static void *xmalloc_floor(void *arg) { return xmalloc_test(arg); }

/* ---- cache-scratch: passive false sharing; the main thread made every first object ---- */
static void *scratch_first[64];
static void *cache_scratch(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg;
    xfree(scratch_first[id], 8);
    size_t iters = scaled(200000), writes = 200;
    uint64_t acc = 0;
    for (size_t i = 0; i < iters; i++) {
        volatile unsigned char *p = xmalloc(8);
        for (size_t w = 0; w < writes; w++) { p[1] = (unsigned char)(p[1] + 1); acc += p[1]; }
        xfree((void *)p, 8);
    }
    __atomic_fetch_add(&g_sum, acc, __ATOMIC_RELAXED);
    return NULL;
}

/* ---- sh6bench-like: batches of growing sizes, freed in mixed orders ---- */
static void sh_batch(nm_rng *r, slot *a, size_t n)
{
    size_t base = 1 + (size_t)nm_rng_below(r, 64);
    for (size_t i = 0; i < n; i++) { a[i].n = base + (i * 7) % 500; a[i].p = xmalloc(a[i].n); }
    for (size_t i = 1; i < n; i += 2) xfree(a[i].p, a[i].n);
    for (size_t i = 1; i < n; i += 2) { a[i].n = base + (i * 13) % 1000; a[i].p = xmalloc(a[i].n); }
}
static void *sh6bench(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg;
    nm_rng r;
    nm_rng_seed(&r, g_seed + id);
    size_t n = 2000, rounds = scaled(1500);
    slot *a = malloc(n * sizeof *a);
    for (size_t k = 0; k < rounds; k++) {
        sh_batch(&r, a, n);
        for (size_t i = n; i-- > 0;) xfree(a[i].p, a[i].n);
    }
    free(a);
    return NULL;
}
/* ---- sh8bench-like: the same batches, but each is freed by the next thread ---- */
static slot *sh8_box[64];
static void *sh8bench(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg;
    nm_rng r;
    nm_rng_seed(&r, g_seed + id);
    size_t n = 2000, rounds = scaled(1000);
    for (size_t k = 0; k < rounds; k++) {
        slot *a = malloc(n * sizeof *a);
        sh_batch(&r, a, n);
        sh8_box[id] = a;
        wl_barrier();
        slot *b = sh8_box[(id + 1) % g_threads];
        wl_barrier();
        for (size_t i = 0; i < n; i++) xfree(b[i].p, b[i].n);
        free(b);
    }
    return NULL;
}

/* ---- mstress: random lifetimes, mostly small with some large, slots stolen across threads ---- */
#define MS_SLOTS 4096
static slot *ms_shared;
static void *mstress(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg;
    nm_rng r;
    nm_rng_seed(&r, g_seed + id);
    slot *a = calloc(MS_SLOTS, sizeof *a);
    size_t ops = scaled(2000000);
    for (size_t i = 0; i < ops; i++) {
        slot *s = &a[nm_rng_below(&r, MS_SLOTS)];
        if (s->p) xfree(s->p, s->n);
        unsigned k = (unsigned)nm_rng_below(&r, 1000);
        s->n = k < 900 ? 1 + (size_t)nm_rng_below(&r, 128) : k < 995 ? 128 + (size_t)nm_rng_below(&r, 4096)
                                                              : 4096 + (size_t)nm_rng_below(&r, 600000);
        s->p = xmalloc(s->n);
        if ((i & 15) == 0) { /* exchange with the shared pool: cross-thread frees */
            slot *t = &ms_shared[nm_rng_below(&r, MS_SLOTS)];
            slot tmp;
            pthread_mutex_lock(&xm.lock);
            tmp = *t;
            *t = *s;
            pthread_mutex_unlock(&xm.lock);
            *s = tmp;
        }
    }
    for (size_t i = 0; i < MS_SLOTS; i++) if (a[i].p) xfree(a[i].p, a[i].n);
    free(a);
    return NULL;
}

/* ---- alloc-test-like: a fixed working set, sizes spread over decades ---- */
static void *alloc_test(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg;
    nm_rng r;
    nm_rng_seed(&r, g_seed + id);
    const size_t ws = 8192;
    slot *a = calloc(ws, sizeof *a);
    size_t ops = scaled(2000000);
    for (size_t i = 0; i < ops; i++) {
        slot *s = &a[nm_rng_below(&r, ws)];
        if (s->p) xfree(s->p, s->n);
        unsigned bits = 3 + (unsigned)nm_rng_below(&r, 9); /* 8 B .. 4 KiB, log-uniform */
        s->n = ((size_t)1 << bits) + (size_t)nm_rng_below(&r, (uint64_t)1 << bits);
        s->p = xmalloc(s->n);
    }
    for (size_t i = 0; i < ws; i++) if (a[i].p) xfree(a[i].p, a[i].n);
    free(a);
    return NULL;
}

/* ---- glibc-thread: glibc's bench-malloc-thread pattern (random sizes, small working set) ---- */
static void *glibc_thread(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg;
    nm_rng r;
    nm_rng_seed(&r, g_seed + id);
    slot a[1000] = {{0}};
    size_t ops = scaled(4000000);
    for (size_t i = 0; i < ops; i++) {
        slot *s = &a[nm_rng_below(&r, 1000)];
        if (s->p) xfree(s->p, s->n);
        /* glibc's benchmark draws from a distribution weighted to small sizes, up to 32 KiB */
        unsigned k = (unsigned)nm_rng_below(&r, 100);
        s->n = k < 80 ? 4 + (size_t)nm_rng_below(&r, 252) : k < 97 ? 256 + (size_t)nm_rng_below(&r, 3840)
                                                            : 4096 + (size_t)nm_rng_below(&r, 28672);
        s->p = xmalloc(s->n);
    }
    for (size_t i = 0; i < 1000; i++) if (a[i].p) xfree(a[i].p, a[i].n);
    return NULL;
}


/* ---- rptest-like (rpmalloc's benchmark shape): each thread keeps a working set of blocks
 * with sizes from a fixed exponential-ish table (16 B .. 16 KiB), each round allocates a
 * batch into random free slots and frees a batch of random slots, touching every block;
 * every few rounds a run of its blocks is handed to the next thread, which frees them
 * (cross-thread frees). ---- */
#define RP_SLOTS 2048
#define RP_XFER 64
static struct { pthread_mutex_t lock; slot box[64][RP_XFER]; unsigned n[64]; } rp = {.lock = PTHREAD_MUTEX_INITIALIZER};
static size_t rp_size(nm_rng *r)
{
    unsigned e = (unsigned)nm_rng_below(r, 10); /* 16 B .. 16 KiB, log-uniform, small sizes likelier */
    e = e < 6 ? e / 2 : e;
    return ((size_t)16 << e) + (size_t)nm_rng_below(r, (uint64_t)16 << e);
}
static void rp_take(unsigned id)
{
    slot got[RP_XFER];
    unsigned n;
    pthread_mutex_lock(&rp.lock);
    n = rp.n[id];
    memcpy(got, rp.box[id], n * sizeof *got);
    rp.n[id] = 0;
    pthread_mutex_unlock(&rp.lock);
    for (unsigned i = 0; i < n; i++) xfree(got[i].p, got[i].n);
}
static void *rptest(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg, to = (id + 1) % g_threads;
    nm_rng r;
    nm_rng_seed_stream(&r, g_seed, id);
    slot *a = wl_calloc(RP_SLOTS, sizeof *a);
    size_t rounds = scaled(20000);
    for (size_t k = 0; k < rounds; k++) {
        unsigned batch = 16 + (unsigned)nm_rng_below(&r, 48);
        for (unsigned i = 0; i < batch; i++) {
            slot *s = &a[nm_rng_below(&r, RP_SLOTS)];
            if (s->p) xfree(s->p, s->n);
            s->n = rp_size(&r);
            s->p = xmalloc(s->n);
            memset((char *)s->p + 1, (int)(k & 0x7f), s->n > 2 ? s->n - 2 > 64 ? 64 : s->n - 2 : 0);
        }
        for (unsigned i = 0; i < batch / 2; i++) {
            slot *s = &a[nm_rng_below(&r, RP_SLOTS)];
            if (s->p) { xfree(s->p, s->n); s->p = NULL; }
        }
        if (g_threads > 1 && k % 8 == 7) { /* hand a run of blocks to the next thread */
            slot give[RP_XFER];
            unsigned n = 0, start = (unsigned)nm_rng_below(&r, RP_SLOTS);
            for (unsigned i = 0; i < RP_SLOTS && n < RP_XFER / 2; i++) {
                slot *s = &a[(start + i) % RP_SLOTS];
                if (s->p) { give[n++] = *s; s->p = NULL; }
            }
            unsigned placed = 0;
            pthread_mutex_lock(&rp.lock);
            while (placed < n && rp.n[to] < RP_XFER) rp.box[to][rp.n[to]++] = give[placed++];
            pthread_mutex_unlock(&rp.lock);
            for (unsigned i = placed; i < n; i++) xfree(give[i].p, give[i].n); /* box full: free here */
            rp_take(id);
        }
    }
    for (size_t i = 0; i < RP_SLOTS; i++) if (a[i].p) xfree(a[i].p, a[i].n);
    free(a);
    pthread_barrier_wait(&g_bar);
    rp_take(id);
    return NULL;
}

/* ---- cache-thrash (Hoard's): each thread allocates a small object, writes it many times,
 * frees it; objects handed out concurrently to different threads must not share a cache
 * line (active false sharing). ---- */
static void *cache_thrash(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg;
    size_t iters = scaled(200000), writes = 200;
    uint64_t acc = 0;
    for (size_t i = 0; i < iters; i++) {
        volatile unsigned char *p = xmalloc(8);
        for (size_t w = 0; w < writes; w++) { p[1] = (unsigned char)(p[1] + 1 + id); acc += p[1]; }
        xfree((void *)p, 8);
    }
    __atomic_fetch_add(&g_sum, acc, __ATOMIC_RELAXED);
    return NULL;
}

/* ---- mleak (mimalloc-bench's): rounds of short-lived threads; each allocates a 128-byte
 * object, swaps it into a random slot of a shared array and frees what was there, then
 * exits. Measures thread start/exit costs and whether thread exit leaks memory. THREADS
 * threads live at a time (x5: the original runs 10). ---- */
#define ML_SLOTS 1000
static void *ml_slot[ML_SLOTS];
static uint64_t ml_rng;
static void *ml_thread(void *arg)
{
    uint64_t tag = (uint64_t)(uintptr_t)arg;
    uint64_t *p = wl_calloc(16, sizeof(uint64_t));
    for (int i = 0; i < 16; i++) if (p[i]) wl_fail("mleak: calloc memory not zero");
    p[0] = tag;
    p[15] = ~tag;
    uint64_t x = __atomic_add_fetch(&ml_rng, 0x9E3779B97F4A7C15ull, __ATOMIC_RELAXED);
    void *old = __atomic_exchange_n(&ml_slot[(x >> 33) % ML_SLOTS], p, __ATOMIC_ACQ_REL);
    if (old) {
        uint64_t *o = old;
        if (o[15] != ~o[0]) wl_fail("mleak: object corrupted");
        free(old);
    }
    return NULL;
}
static void *mleak(void *arg)
{
    if ((uintptr_t)arg != 0) return NULL; /* thread 0 runs the rounds */
    size_t rounds = scaled(1000), per = 5 * (size_t)g_threads;
    pthread_t *t = wl_malloc(per * sizeof *t);
    for (size_t k = 0; k < rounds; k++) {
        for (size_t i = 0; i < per; i++)
            if (pthread_create(&t[i], NULL, ml_thread, (void *)(uintptr_t)(k * per + i + 1)) != 0) { wl_fail("mleak: pthread_create"); per = i; break; }
        for (size_t i = 0; i < per; i++) pthread_join(t[i], NULL);
    }
    free(t);
    for (size_t i = 0; i < ML_SLOTS; i++) {
        uint64_t *o = ml_slot[i];
        if (o && o[15] != ~o[0]) wl_fail("mleak: object corrupted");
        free(o);
        ml_slot[i] = NULL;
    }
    return NULL;
}

/* ---- malloc-large (mimalloc-bench's): 2 MiB buffers allocated, filled byte by byte and
 * freed, one after the other (each thread on its own). ---- */
static void *malloc_large(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg;
    size_t n = scaled(3000), sz = (size_t)1 << 21;
    uint64_t acc = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char *a = wl_malloc(sz);
        memset(a, (int)('x' + id), sz);
        __asm__ __volatile__("" : : "r"(a) : "memory"); /* the fill must happen (no dead-store elision) */
        a[(i * 4099) % sz] = 1;
        acc += a[(i * 4099) % sz] + a[sz - 1] + a[0];
        if (a[sz - 1] != (unsigned char)('x' + id) || a[sz / 2 + 1 == (i * 4099) % sz ? 0 : sz / 2 + 1] != (unsigned char)('x' + id))
            wl_fail("malloc-large: contents");
        free(a);
    }
    __atomic_fetch_add(&g_sum, acc, __ATOMIC_RELAXED);
    return NULL;
}

/* ---- glibc-simple: glibc's bench-malloc-simple shape. Batches of n same-size blocks
 * (n = 25, 100, 400, 1600; sizes 16, 32, 64 B), every block filled with ints, freed in
 * allocation order; 2M blocks per (size, n) per phase; three phases: the main thread,
 * a new thread, the main thread again (as glibc's: main arena, thread arena, main arena
 * after a thread existed). Single-threaded: THREADS is ignored (the phases run in turn). */
static uint64_t gs_batches(size_t size, int n, size_t iters)
{
    int **arr = malloc(1600 * sizeof *arr);
    uint64_t sum = 0;
    size_t words = size / sizeof(int);
    for (size_t j = 0; j < iters; j++) {
        for (int i = 0; i < n; i++) {
            int *p = malloc(size);
            if (!p) { fprintf(stderr, "out of memory\n"); exit(1); }
            for (size_t k = 0; k < words; k++) p[k] = (int)(k + (size_t)i);
            arr[i] = p;
        }
        for (int i = 0; i < n; i++) {
            if (arr[i][0] != i || arr[i][words - 1] != (int)(words - 1 + (size_t)i)) __atomic_store_n(&g_bad, 1, __ATOMIC_RELAXED);
            sum += (uint64_t)arr[i][words / 2];
            free(arr[i]);
        }
    }
    free(arr);
    return sum;
}
static void gs_phase(void)
{
    static const int ns[4] = {25, 100, 400, 1600};
    for (size_t size = 16; size <= 64; size *= 2)
        for (int i = 0; i < 4; i++) g_sum += gs_batches(size, ns[i], scaled(2000000.0 / ns[i]));
}
static void *gs_thread(void *arg) { (void)arg; gs_phase(); return NULL; }
static void *glibc_simple(void *arg)
{
    if ((uintptr_t)arg != 0) return NULL; /* one thread does the work */
    gs_phase();
    pthread_t t;
    pthread_create(&t, NULL, gs_thread, NULL);
    pthread_join(t, NULL);
    gs_phase();
    return NULL;
}

static const struct { const char *name; void *(*fn)(void *); } k_work[] = {
    {"larson", larson}, {"xmalloc-test", xmalloc_test}, {"xmalloc-floor", xmalloc_floor}, {"cache-scratch", cache_scratch},
    {"sh6bench", sh6bench}, {"sh8bench", sh8bench}, {"mstress", mstress},
    {"alloc-test", alloc_test}, {"glibc-thread", glibc_thread}, {"glibc-simple", glibc_simple},
    {"rptest", rptest}, {"cache-thrash", cache_thrash}, {"mleak", mleak}, {"malloc-large", malloc_large},
    {"cfrac", wl_cfrac}, {"espresso", wl_espresso}, {"barnes", wl_barnes},
    {"bfs", wl_bfs}, {"bc", wl_bc}, {"dc", wl_dc},
};

/* user + system time of every thread of the process so far */
static uint64_t proc_cpu_ns(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ((uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec) * 1000000000ull +
           ((uint64_t)ru.ru_utime.tv_usec + (uint64_t)ru.ru_stime.tv_usec) * 1000ull;
}

/* ---- NEARMEM_WL_DETAIL=1: where the timed section's CPU went ----------------------------
 * Per workload thread: time on a CPU and time waiting on a run queue (the kernel's
 * /proc/thread-self/schedstat, in ns), its voluntary (blocked: barrier, futex, yield) and
 * involuntary (preempted) context switches; the process's other threads (SpeedMalloc's
 * server) from /proc/self/task/<tid>/schedstat around the section; the workloads' own
 * wait-loop counters. Off by default; the suites' figures never read it. */
typedef struct { uint64_t run, rq, slices, wall; long nv, niv; } wl_ts;
static wl_ts wl_thr[64];
static void *(*wl_fn)(void *);
static void read_schedstat(const char *path, uint64_t v[3])
{
    v[0] = v[1] = v[2] = 0;
    FILE *f = fopen(path, "r");
    if (!f) return;
    unsigned long long a = 0, b = 0, c = 0;
    if (fscanf(f, "%llu %llu %llu", &a, &b, &c) == 3) { v[0] = a; v[1] = b; v[2] = c; }
    fclose(f);
}
static void thread_sample(wl_ts *t)
{
    uint64_t v[3];
    read_schedstat("/proc/thread-self/schedstat", v);
    struct rusage ru;
    getrusage(RUSAGE_THREAD, &ru);
    *t = (wl_ts){v[0], v[1], v[2], nm_now_ns(), ru.ru_nvcsw, ru.ru_nivcsw};
}
static void *wl_trampoline(void *arg)
{
    /* NEARMEM_WL_PIN=c0,c1,...: workload thread i runs on CPU c[i % n] only (threads it
     * creates inherit that). It fixes the placement that the scheduler otherwise picks per run
     * (speedmalloc-contention --set pin=1; docs/speedmalloc.md, "Where the contention spread
     * comes from"). */
    const char *pin = getenv("NEARMEM_WL_PIN");
    if (pin && *pin) {
        int cpus[64], n = 0;
        for (const char *q = pin; *q && n < 64;) {
            cpus[n++] = atoi(q);
            q += strcspn(q, ",");
            if (*q) q++;
        }
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpus[(uintptr_t)arg % (unsigned)n], &set);
        if (sched_setaffinity(0, sizeof set, &set) != 0) perror("NEARMEM_WL_PIN");
    }
    if (!wl_detail) return wl_fn(arg);
    wl_ts a, b;
    thread_sample(&a);
    void *r = wl_fn(arg);
    thread_sample(&b);
    wl_thr[(uintptr_t)arg] = (wl_ts){b.run - a.run, b.rq - a.rq, b.slices - a.slices, b.wall - a.wall, b.nv - a.nv, b.niv - a.niv};
    return r;
}
#define WL_MAXTASK 16
typedef struct { int n; long tid[WL_MAXTASK]; uint64_t run[WL_MAXTASK], rq[WL_MAXTASK]; } wl_tasks;
static void tasks_sample(wl_tasks *t)
{
    t->n = 0;
    DIR *d = opendir("/proc/self/task");
    if (!d) return;
    long self = (long)syscall(SYS_gettid);
    for (struct dirent *e; (e = readdir(d)) && t->n < WL_MAXTASK;) {
        long tid = atol(e->d_name);
        if (tid <= 0 || tid == self) continue;
        char path[64];
        uint64_t v[3];
        snprintf(path, sizeof path, "/proc/self/task/%ld/schedstat", tid);
        read_schedstat(path, v);
        t->tid[t->n] = tid, t->run[t->n] = v[0], t->rq[t->n] = v[1], t->n++;
    }
    closedir(d);
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: %s NAME THREADS SCALE [SEED]\n", argv[0]);
        return 2;
    }
    g_threads = (unsigned)atoi(argv[2]);
    g_scale = atof(argv[3]);
    g_seed = argc > 4 ? strtoull(argv[4], NULL, 0) : 42;
    if (g_threads < 1 || g_threads > 64 || g_scale <= 0) return 2;
    void *(*fn)(void *) = NULL;
    for (size_t i = 0; i < sizeof k_work / sizeof k_work[0]; i++)
        if (strcmp(argv[1], k_work[i].name) == 0) fn = k_work[i].fn;
    if (!fn) { fprintf(stderr, "unknown workload %s\n", argv[1]); return 2; }

    pthread_barrier_init(&g_bar, NULL, g_threads);
    for (unsigned i = 0; i < g_threads; i++) pthread_cond_init(&xm.cv[i], NULL);
    for (unsigned i = 0; i < g_threads; i++) {
        larson_arrays[i] = calloc(LARSON_SLOTS, sizeof(slot));
        scratch_first[i] = xmalloc(8); /* neighbours in memory, handed to different threads */
    }
    ms_shared = calloc(MS_SLOTS, sizeof(slot));
    if (fn == xmalloc_floor) { xm_floor = true; xm_floor_setup(); }
    const char *dv = getenv("NEARMEM_WL_DETAIL");
    wl_detail = dv && *dv == '1';
    const char *pv = getenv("NEARMEM_WL_PIN");
    bool tramp = wl_detail || (pv && *pv);
    wl_fn = fn;
    wl_tasks tk0, tk1;
    wl_ts m0, m1;
    struct rusage ru0, ru1;
    if (wl_detail) { tasks_sample(&tk0); thread_sample(&m0); getrusage(RUSAGE_SELF, &ru0); }
    uint64_t c0 = proc_cpu_ns(), t0 = nm_now_ns();
    pthread_t t[64];
    for (unsigned i = 0; i < g_threads; i++) pthread_create(&t[i], NULL, tramp ? wl_trampoline : fn, (void *)(uintptr_t)i);
    for (unsigned i = 0; i < g_threads; i++) pthread_join(t[i], NULL);
    for (unsigned i = 0; i < g_threads; i++) {
        for (size_t k = 0; k < LARSON_SLOTS; k++) if (larson_arrays[i][k].p) xfree(larson_arrays[i][k].p, larson_arrays[i][k].n);
        free(larson_arrays[i]);
    }
    for (size_t k = 0; k < MS_SLOTS; k++) if (ms_shared[k].p) xfree(ms_shared[k].p, ms_shared[k].n);
    uint64_t dt = nm_now_ns() - t0, dc = proc_cpu_ns() - c0;
    if (wl_detail) { thread_sample(&m1); getrusage(RUSAGE_SELF, &ru1); tasks_sample(&tk1); }
    if (strcmp(argv[1], "cache-scratch") != 0)
        for (unsigned i = 0; i < g_threads; i++) xfree(scratch_first[i], 8);
    if (g_bad) { fprintf(stderr, "%s: wrong result (block contents or computed values)\n", argv[1]); return 1; }
    printf("elapsed_ns=%llu cpu_ns=%llu checksum=%llu\n", (unsigned long long)dt, (unsigned long long)dc,
           (unsigned long long)g_sum);
    if (wl_detail) {
        uint64_t orun = 0, orq = 0;
        for (int i = 0; i < tk1.n; i++) {
            uint64_t r0 = 0, q0 = 0;
            for (int j = 0; j < tk0.n; j++) if (tk0.tid[j] == tk1.tid[i]) r0 = tk0.run[j], q0 = tk0.rq[j];
            orun += tk1.run[i] - r0;
            orq += tk1.rq[i] - q0;
        }
        printf("detail: main_run_ns=%llu other_tasks=%d other_run_ns=%llu other_rq_ns=%llu proc_nvcsw=%ld proc_nivcsw=%ld "
               "xm_waits=%llu bar_waits=%llu bar_cpu_ns=%llu bar_wall_ns=%llu\n",
               (unsigned long long)(m1.run - m0.run), tk1.n, (unsigned long long)orun, (unsigned long long)orq,
               ru1.ru_nvcsw - ru0.ru_nvcsw, ru1.ru_nivcsw - ru0.ru_nivcsw, (unsigned long long)xm_waits,
               (unsigned long long)bar_waits, (unsigned long long)bar_cpu_ns, (unsigned long long)bar_wall_ns);
        for (unsigned i = 0; i < g_threads; i++)
            printf("thread %u: run_ns=%llu rq_ns=%llu wall_ns=%llu slices=%llu nvcsw=%ld nivcsw=%ld\n", i,
                   (unsigned long long)wl_thr[i].run, (unsigned long long)wl_thr[i].rq, (unsigned long long)wl_thr[i].wall,
                   (unsigned long long)wl_thr[i].slices, wl_thr[i].nv, wl_thr[i].niv);
    }
    return 0;
}
