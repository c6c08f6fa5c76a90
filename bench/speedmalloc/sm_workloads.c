/* Allocation workloads in the spirit of mimalloc-bench, written for nearmem
 * (our own implementations, not copies): run as a separate process under
 * LD_PRELOAD of each allocator by suite `speedmalloc`.
 *
 *   nearmem-sm-workload NAME THREADS SCALE [SEED]
 *
 * prints "elapsed_ns=<n> checksum=<c>" on stdout. SCALE multiplies the
 * operation counts (1.0 = the full run). Every block is written, and its first
 * and last bytes are checked when it is freed, so a broken allocator fails
 * (exit 1) instead of looking fast. */
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nearmem/common/prng.h"
#include "nearmem/common/timer.h"

static unsigned g_threads;
static double g_scale;
static uint64_t g_seed;
static int g_bad;
static uint64_t g_sum;

static size_t scaled(double n) { size_t v = (size_t)(n * g_scale); return v ? v : 1; }

static inline void *xmalloc(size_t n)
{
    unsigned char *p = malloc(n);
    if (!p) { fprintf(stderr, "out of memory (%zu)\n", n); exit(1); }
    p[n - 1] = (unsigned char)(n >> 3);
    p[0] = (unsigned char)n;
    return p;
}
static inline void xfree(void *v, size_t n)
{
    unsigned char *p = v;
    if (p[0] != (unsigned char)n || (n > 1 && p[n - 1] != (unsigned char)(n >> 3))) __atomic_store_n(&g_bad, 1, __ATOMIC_RELAXED);
    free(p);
}

typedef struct { void *p; size_t n; } slot;

/* A reusable barrier (pthread_barrier_t is fine, but keep one code path). */
static pthread_barrier_t g_bar;

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
        pthread_barrier_wait(&g_bar);
    }
    return NULL;
}

/* ---- xmalloc-test: blocks made by one thread are freed by the next ---- */
#define XM_BATCH 256
typedef struct { void *p[XM_BATCH]; size_t n[XM_BATCH]; } xm_batch;
static struct { pthread_mutex_t lock; xm_batch *q[64][64]; unsigned head[64], tail[64]; } xm = {.lock = PTHREAD_MUTEX_INITIALIZER};
static unsigned xm_done;
static void *xmalloc_test(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg, to = (id + 1) % g_threads;
    nm_rng r;
    nm_rng_seed(&r, g_seed + id);
    size_t batches = scaled(20000);
    for (size_t b = 0; b < batches; b++) {
        xm_batch *x = malloc(sizeof *x); /* bookkeeping: not checked */
        for (int i = 0; i < XM_BATCH; i++) { x->n[i] = 8 + (size_t)nm_rng_below(&r, 120); x->p[i] = xmalloc(x->n[i]); }
        for (;;) { /* push to the next thread (bounded queue) */
            pthread_mutex_lock(&xm.lock);
            if (xm.tail[to] - xm.head[to] < 64) { xm.q[to][xm.tail[to]++ % 64] = x; pthread_mutex_unlock(&xm.lock); break; }
            xm_batch *mine = xm.tail[id] != xm.head[id] ? xm.q[id][xm.head[id]++ % 64] : NULL;
            pthread_mutex_unlock(&xm.lock);
            if (mine) { for (int i = 0; i < XM_BATCH; i++) xfree(mine->p[i], mine->n[i]); free(mine); }
        }
        for (;;) { /* free what arrived */
            pthread_mutex_lock(&xm.lock);
            xm_batch *mine = xm.tail[id] != xm.head[id] ? xm.q[id][xm.head[id]++ % 64] : NULL;
            pthread_mutex_unlock(&xm.lock);
            if (!mine) break;
            for (int i = 0; i < XM_BATCH; i++) xfree(mine->p[i], mine->n[i]);
            free(mine);
        }
    }
    /* keep consuming until every producer is done, so nobody waits on a full queue */
    __atomic_fetch_add(&xm_done, 1, __ATOMIC_ACQ_REL);
    while (__atomic_load_n(&xm_done, __ATOMIC_ACQUIRE) < g_threads) {
        pthread_mutex_lock(&xm.lock);
        xm_batch *mine = xm.tail[id] != xm.head[id] ? xm.q[id][xm.head[id]++ % 64] : NULL;
        pthread_mutex_unlock(&xm.lock);
        if (!mine) { sched_yield(); continue; }
        for (int i = 0; i < XM_BATCH; i++) xfree(mine->p[i], mine->n[i]);
        free(mine);
    }
    pthread_mutex_lock(&xm.lock);
    while (xm.tail[id] != xm.head[id]) {
        xm_batch *mine = xm.q[id][xm.head[id]++ % 64];
        for (int i = 0; i < XM_BATCH; i++) xfree(mine->p[i], mine->n[i]);
        free(mine);
    }
    pthread_mutex_unlock(&xm.lock);
    return NULL;
}

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
        pthread_barrier_wait(&g_bar);
        slot *b = sh8_box[(id + 1) % g_threads];
        pthread_barrier_wait(&g_bar);
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
    {"larson", larson}, {"xmalloc-test", xmalloc_test}, {"cache-scratch", cache_scratch},
    {"sh6bench", sh6bench}, {"sh8bench", sh8bench}, {"mstress", mstress},
    {"alloc-test", alloc_test}, {"glibc-thread", glibc_thread}, {"glibc-simple", glibc_simple},
};

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
    for (unsigned i = 0; i < g_threads; i++) {
        larson_arrays[i] = calloc(LARSON_SLOTS, sizeof(slot));
        scratch_first[i] = xmalloc(8); /* neighbours in memory, handed to different threads */
    }
    ms_shared = calloc(MS_SLOTS, sizeof(slot));
    uint64_t t0 = nm_now_ns();
    pthread_t t[64];
    for (unsigned i = 0; i < g_threads; i++) pthread_create(&t[i], NULL, fn, (void *)(uintptr_t)i);
    for (unsigned i = 0; i < g_threads; i++) pthread_join(t[i], NULL);
    for (unsigned i = 0; i < g_threads; i++) {
        for (size_t k = 0; k < LARSON_SLOTS; k++) if (larson_arrays[i][k].p) xfree(larson_arrays[i][k].p, larson_arrays[i][k].n);
        free(larson_arrays[i]);
    }
    for (size_t k = 0; k < MS_SLOTS; k++) if (ms_shared[k].p) xfree(ms_shared[k].p, ms_shared[k].n);
    uint64_t dt = nm_now_ns() - t0;
    if (strcmp(argv[1], "cache-scratch") != 0)
        for (unsigned i = 0; i < g_threads; i++) xfree(scratch_first[i], 8);
    if (g_bad) { fprintf(stderr, "%s: block contents were corrupted\n", argv[1]); return 1; }
    printf("elapsed_ns=%llu checksum=%llu\n", (unsigned long long)dt, (unsigned long long)g_sum);
    return 0;
}
