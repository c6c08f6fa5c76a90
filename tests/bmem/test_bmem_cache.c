/* bmem thread cache (docs/bmem.md "Thread cache"): reuse, statistics, bounds,
 * every error contract on cached handles, flushing (explicit, on NM_ENOMEM,
 * at thread exit, at device destroy), the cross-thread behaviour (no
 * stealing), and the off switch. Label `threads`: run under TSan too. */
#include <pthread.h>
#include <string.h>

#include "nearmem/bmem.h"
#include "nearmem/common.h"
#include "nm_test.h"

static bmem_dev *make(uint32_t rows, uint32_t subs, uint32_t banks, int cache)
{
    bmem_config c = {rows, 4096, subs, banks, BMEM_ALGO_FAST, cache};
    bmem_dev *d = NULL;
    assert_int_equal(bmem_dev_create(&c, &d), NM_OK);
    return d;
}

static bmem_stats stats(bmem_dev *d)
{
    bmem_stats s;
    assert_int_equal(bmem_dev_stats(d, &s, NULL), NM_OK);
    assert_int_equal(s.cells_allocated + s.cells_cached + s.cells_free, s.cells_total);
    return s;
}

static bmem_geom geom(bmem_dev *d, bmem_ptr h)
{
    bmem_geom g;
    assert_int_equal(bmem_dev_geom(d, h, &g), NM_OK);
    return g;
}

static void test_options(void **st)
{
    (void)st;
    bmem_config c = {64, 4096, 8, 2, BMEM_ALGO_FAST, BMEM_CACHE_MAX + 1};
    bmem_dev *d = (bmem_dev *)1;
    assert_int_equal(bmem_dev_create(&c, &d), NM_ERANGE);
    assert_null(d);
    c.cache = -2;
    assert_int_equal(bmem_dev_create(&c, &d), NM_ERANGE);
    assert_int_equal(bmem_dev_flush_thread_cache(NULL), NM_EINVAL);
    /* off: a free goes straight back to the bank */
    for (int k = 0; k < 3; k++) {
        c.cache = BMEM_CACHE_OFF;
        c.algo = k == 2 ? BMEM_ALGO_PAPER : BMEM_ALGO_FAST;
        if (k == 1) c.algo = BMEM_ALGO_PAPER, c.cache = 0; /* the paper baseline: off by default */
        assert_int_equal(bmem_dev_create(&c, &d), NM_OK);
        bmem_ptr h;
        assert_int_equal(bmem_dev_malloc(d, 8, BMEM_VERT, &h), NM_OK);
        assert_int_equal(bmem_dev_free(d, h), NM_OK);
        bmem_stats s = stats(d);
        assert_int_equal(s.cells_cached, 0);
        assert_int_equal(s.cells_free, s.cells_total);
        assert_int_equal(bmem_dev_flush_thread_cache(d), NM_OK);
        bmem_dev_destroy(d);
    }
    /* the paper baseline can have a cache when asked for one */
    c.algo = BMEM_ALGO_PAPER;
    c.cache = 2;
    assert_int_equal(bmem_dev_create(&c, &d), NM_OK);
    bmem_ptr h;
    assert_int_equal(bmem_dev_malloc_raw(d, 2, 3, &h), NM_OK);
    assert_int_equal(bmem_dev_free(d, h), NM_OK);
    assert_int_equal(stats(d).cells_cached, 6);
    bmem_dev_destroy(d);
}

static void test_reuse_and_stats(void **st)
{
    (void)st;
    bmem_dev *d = make(64, 8, 2, 0);
    bmem_ptr a, b, a2;
    assert_int_equal(bmem_dev_malloc(d, 2, BMEM_VERT, &a), NM_OK); /* 16 rows */
    assert_int_equal(bmem_dev_malloc(d, 2, BMEM_VERT, &b), NM_OK);
    bmem_geom ga = geom(d, a), gb = geom(d, b);
    assert_int_equal(bmem_dev_free(d, a), NM_OK);
    bmem_stats s = stats(d);
    assert_int_equal(s.allocations, 1);
    assert_int_equal(s.cached, 1);
    assert_int_equal(s.cells_allocated, 16);
    assert_int_equal(s.cells_cached, 16);
    bmem_bank_stats bs[2];
    assert_int_equal(bmem_dev_stats(d, &s, bs), NM_OK);
    assert_int_equal(bs[ga.bank].cached, 1);
    assert_int_equal(bs[ga.bank].cells_cached, 16);
    assert_int_equal(bs[ga.bank].allocations, 1);
    /* cached cells are claimed: the largest free rectangle excludes them */
    assert_int_equal((uint64_t)bs[ga.bank].largest_free_rows * bs[ga.bank].largest_free_subs, 64 * 7);
    /* the snapshot shows them as cached, the text map as used */
    uint8_t snap[64 * 8];
    assert_int_equal(bmem_dev_snapshot(d, ga.bank, snap, sizeof snap), NM_OK);
    assert_int_equal(snap[ga.row * 8 + ga.sub], BMEM_SNAP_CACHED);
    assert_true(snap[gb.row * 8 + gb.sub] != 0 && snap[gb.row * 8 + gb.sub] != BMEM_SNAP_CACHED);
    /* a request of the same shape takes it back: same cells, new handle */
    assert_int_equal(bmem_dev_malloc(d, 2, BMEM_VERT, &a2), NM_OK);
    assert_true(a2 != a);
    bmem_geom g2 = geom(d, a2);
    assert_memory_equal(&g2, &ga, sizeof g2);
    s = stats(d);
    assert_int_equal(s.cached, 0);
    assert_int_equal(s.allocations, 2);
    /* the old handle is stale: double free, whatever state the cells are in */
    assert_int_equal(bmem_dev_free(d, a), NM_EDOUBLEFREE);
    assert_int_equal(bmem_dev_free(d, a2), NM_OK);
    assert_int_equal(bmem_dev_free(d, a), NM_EDOUBLEFREE);
    /* another shape does not take it: first fit below b */
    bmem_ptr c;
    assert_int_equal(bmem_dev_malloc(d, 1, BMEM_VERT, &c), NM_OK);
    bmem_geom gc = geom(d, c);
    assert_int_equal(gc.row, 32);
    /* raw shapes are cached too */
    bmem_ptr r1, r2;
    assert_int_equal(bmem_dev_malloc_raw(d, 3, 2, &r1), NM_OK);
    bmem_geom gr = geom(d, r1);
    assert_int_equal(bmem_dev_free(d, r1), NM_OK);
    assert_int_equal(bmem_dev_malloc_raw(d, 3, 2, &r2), NM_OK);
    bmem_geom gr2 = geom(d, r2);
    assert_memory_equal(&gr, &gr2, sizeof gr);
    /* flush: everything cached goes back */
    assert_int_equal(bmem_dev_free(d, b), NM_OK);
    assert_int_equal(bmem_dev_free(d, c), NM_OK);
    assert_int_equal(bmem_dev_free(d, r2), NM_OK);
    /* a2 and b (16 cells each) fill the budget of 64 * 8 / 16 = 32 cells; c
     * and r2 went straight back to the bank */
    assert_int_equal(stats(d).cells_cached, 32);
    assert_int_equal(bmem_dev_flush_thread_cache(d), NM_OK);
    s = stats(d);
    assert_int_equal(s.cells_cached, 0);
    assert_int_equal(s.cached, 0);
    assert_int_equal(s.allocations, 0);
    assert_int_equal(s.cells_free, s.cells_total);
    assert_int_equal(s.cache_conflicts, 0);
    /* the exact first fit again after the flush */
    assert_int_equal(bmem_dev_malloc(d, 2, BMEM_VERT, &a), NM_OK);
    assert_int_equal(geom(d, a).row, 0);
    bmem_dev_destroy(d); /* with a live allocation and an empty cache */
}

/* Every bad-handle case on cached handles: clear code, state unchanged. */
static void test_errors_on_cached(void **st)
{
    (void)st;
    bmem_dev *d = make(64, 8, 1, 0);
    bmem_ptr a, keep, z = 9;
    assert_int_equal(bmem_dev_malloc_raw(d, 2, 4, &a), NM_OK);
    assert_int_equal(bmem_dev_malloc_raw(d, 1, 1, &keep), NM_OK);
    bmem_geom g = geom(d, a);
    assert_int_equal(bmem_dev_free(d, a), NM_OK); /* now cached */
    bmem_stats s0 = stats(d), s1;
    assert_int_equal(s0.cached, 1);
    assert_int_equal(bmem_dev_free(d, a), NM_EDOUBLEFREE);
    assert_true(strstr(nm_last_errmsg(), "cache") != NULL);
    bmem_geom gg;
    assert_int_equal(bmem_dev_geom(d, a, &gg), NM_EDOUBLEFREE);
    assert_int_equal(bmem_dev_free(d, a + 1), NM_EBADFREE); /* generation never issued */
    bmem_ptr interior = ((bmem_ptr)g.bank << 56) | ((bmem_ptr)(g.row + 1) << 40) | ((bmem_ptr)g.sub << 30) | 1;
    assert_int_equal(bmem_dev_free(d, interior), NM_EBADFREE);
    interior = ((bmem_ptr)g.bank << 56) | ((bmem_ptr)g.row << 40) | ((bmem_ptr)(g.sub + 1) << 30) | 1;
    assert_int_equal(bmem_dev_free(d, interior), NM_EBADFREE);
    assert_int_equal(bmem_dev_malloc_near(d, 0, BMEM_RAW, 1, 1, a, 0, &z), NM_EINVAL);
    assert_int_equal(z, BMEM_NULL);
    s1 = stats(d);
    assert_memory_equal(&s0, &s1, sizeof s0);
    /* still served from the cache afterwards */
    bmem_ptr a2;
    assert_int_equal(bmem_dev_malloc_raw(d, 2, 4, &a2), NM_OK);
    bmem_geom g2 = geom(d, a2);
    assert_memory_equal(&g, &g2, sizeof g);
    assert_int_equal(bmem_dev_free(d, a), NM_EDOUBLEFREE);
    assert_int_equal(bmem_dev_free(d, a2), NM_OK);
    assert_int_equal(bmem_dev_free(d, keep), NM_OK);
    bmem_dev_destroy(d); /* with cached entries */
}

/* Bounds: at most `cache` entries per shape and 1/16 of a bank's cells. */
static void test_bounds(void **st)
{
    (void)st;
    bmem_dev *d = make(128, 16, 1, 3); /* 2048 cells per bank: budget 128 */
    bmem_ptr h[40];
    for (int i = 0; i < 10; i++) assert_int_equal(bmem_dev_malloc_raw(d, 1, 1, &h[i]), NM_OK);
    for (int i = 0; i < 10; i++) assert_int_equal(bmem_dev_free(d, h[i]), NM_OK);
    bmem_stats s = stats(d);
    assert_int_equal(s.cached, 3);
    assert_int_equal(s.cells_cached, 3);
    assert_int_equal(bmem_dev_flush_thread_cache(d), NM_OK);
    /* 2 x 40 = 80-cell rectangles: only one fits the budget of 128 cells */
    for (int i = 0; i < 3; i++) assert_int_equal(bmem_dev_malloc_raw(d, 2, 40, &h[i]), NM_OK);
    for (int i = 0; i < 3; i++) assert_int_equal(bmem_dev_free(d, h[i]), NM_OK);
    s = stats(d);
    assert_int_equal(s.cached, 1);
    assert_int_equal(s.cells_cached, 80);
    /* a whole-bank request flushes the cache and succeeds */
    bmem_ptr big;
    assert_int_equal(bmem_dev_malloc_raw(d, 16, 128, &big), NM_OK);
    s = stats(d);
    assert_int_equal(s.cells_cached, 0);
    assert_int_equal(s.cells_allocated, s.cells_total);
    /* a full bank: NM_ENOMEM, nothing changes */
    bmem_ptr z;
    assert_int_equal(bmem_dev_malloc_raw(d, 1, 1, &z), NM_ENOMEM);
    assert_int_equal(bmem_dev_free(d, big), NM_OK); /* 2048 cells: beyond the budget, straight back */
    s = stats(d);
    assert_int_equal(s.cells_free, s.cells_total);
    bmem_dev_destroy(d);
}

/* Single-threaded fill to full with the cache on: frees are reusable, the
 * request that would fail flushes, co-location ignores the caller's cache. */
static void test_enomem_flush_and_near(void **st)
{
    (void)st;
    bmem_dev *d = make(16, 4, 1, 0); /* 64 cells, budget 4 */
    bmem_ptr h[64], z;
    for (int i = 0; i < 64; i++) assert_int_equal(bmem_dev_malloc_raw(d, 1, 1, &h[i]), NM_OK);
    assert_int_equal(bmem_dev_malloc_raw(d, 1, 1, &z), NM_ENOMEM);
    for (int i = 0; i < 64; i++) assert_int_equal(bmem_dev_free(d, h[i]), NM_OK);
    assert_int_equal(stats(d).cells_cached, 4);
    /* 1 x 16 columns: the cached cells are in the way until the flush */
    for (int i = 0; i < 4; i++) assert_int_equal(bmem_dev_malloc_raw(d, 1, 16, &h[i]), NM_OK);
    assert_int_equal(stats(d).cells_free, 0);
    for (int i = 0; i < 4; i++) assert_int_equal(bmem_dev_free(d, h[i]), NM_OK);
    assert_int_equal(bmem_dev_flush_thread_cache(d), NM_OK);
    /* co-location: x at subarray 0; a cached 1-cell rectangle sits right of
     * it on x's row; the hint must still land next to x */
    bmem_ptr x, t, y;
    assert_int_equal(bmem_dev_malloc_raw(d, 1, 4, &x), NM_OK);
    assert_int_equal(bmem_dev_malloc_raw(d, 1, 1, &t), NM_OK); /* subarray 0, row 4 */
    assert_int_equal(bmem_dev_malloc_raw(d, 1, 16, &z), NM_OK); /* fills subarray 1 */
    assert_int_equal(bmem_dev_free(d, z), NM_OK);               /* 16 cells: beyond budget 4, freed */
    bmem_ptr w;
    assert_int_equal(bmem_dev_malloc_near(d, 0, BMEM_RAW, 1, 1, x, 0, &w), NM_OK); /* subarray 1, row 0 */
    assert_int_equal(geom(d, w).sub, 1);
    assert_int_equal(bmem_dev_free(d, w), NM_OK); /* cached, right next to x */
    assert_int_equal(stats(d).cached, 1);
    assert_int_equal(bmem_dev_malloc_near(d, 0, BMEM_RAW, 1, 4, x, BMEM_NEAR_STRICT, &y), NM_OK);
    bmem_geom gy = geom(d, y);
    assert_int_equal(gy.sub, 1);
    assert_int_equal(gy.row, 0);
    assert_int_equal(stats(d).cells_cached, 0);
    assert_int_equal(bmem_dev_free(d, t), NM_OK);
    assert_int_equal(bmem_dev_free(d, x), NM_OK);
    assert_int_equal(bmem_dev_free(d, y), NM_OK);
    bmem_dev_destroy(d);
}

/* ---- threads ---- */
typedef struct xarg {
    bmem_dev *d;
    pthread_barrier_t *bar;
    bmem_ptr h, h2;
    nm_err e1, e2, e3;
    int phase;
} xarg;

/* Allocate two, free one into this thread's cache, reuse it, free the
 * other: leaves one cached entry, then (after the barrier) exits. */
static void *cache_and_exit(void *p)
{
    xarg *x = p;
    bmem_ptr a, b, a2;
    x->e1 = bmem_dev_malloc(x->d, 4, BMEM_VERT, &a);
    x->e2 = bmem_dev_malloc(x->d, 4, BMEM_VERT, &b);
    bmem_dev_free(x->d, a);
    x->e3 = bmem_dev_malloc(x->d, 4, BMEM_VERT, &a2);
    x->h = a;  /* stale */
    x->h2 = a2;
    bmem_dev_free(x->d, b); /* cached */
    if (x->bar) pthread_barrier_wait(x->bar); /* main checks the cache here */
    if (x->bar) pthread_barrier_wait(x->bar);
    return NULL;
}

static void test_thread_exit_and_cross_thread(void **st)
{
    (void)st;
    bmem_dev *d = make(128, 8, 2, 0); /* budget 64 cells: two 32-row columns */
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, 2);
    xarg x = {d, &bar, 0, 0, 0, 0, 0, 0};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, cache_and_exit, &x), 0);
    pthread_barrier_wait(&bar);
    assert_int_equal(x.e1, NM_OK);
    assert_int_equal(x.e2, NM_OK);
    assert_int_equal(x.e3, NM_OK);
    bmem_stats s = stats(d);
    assert_int_equal(s.cached, 1); /* the other thread's cache */
    assert_int_equal(s.cells_cached, 32);
    assert_int_equal(s.allocations, 1);
    /* handles freed and reused by the other thread's cache: this thread sees
     * the stale one as a double free, frees the live one into its own cache */
    assert_int_equal(bmem_dev_free(d, x.h), NM_EDOUBLEFREE);
    assert_int_equal(bmem_dev_free(d, x.h2), NM_OK);
    assert_int_equal(bmem_dev_free(d, x.h2), NM_EDOUBLEFREE);
    s = stats(d);
    assert_int_equal(s.cached, 2);
    assert_int_equal(s.allocations, 0);
    pthread_barrier_wait(&bar);
    pthread_join(t, NULL); /* its key destructor flushed its cache */
    s = stats(d);
    assert_int_equal(s.cached, 1); /* this thread's own entry */
    assert_int_equal(s.cells_cached, 32);
    assert_int_equal(bmem_dev_flush_thread_cache(d), NM_OK);
    s = stats(d);
    assert_int_equal(s.cells_free, s.cells_total);
    pthread_barrier_destroy(&bar);
    bmem_dev_destroy(d);
}

/* No stealing: another thread's cached cells stay claimed until that thread
 * flushes or exits, even when this thread runs out of room. */
typedef struct holder {
    bmem_dev *d;
    pthread_barrier_t bar;
    int flush;
} holder;

static void *hold_one_cell(void *p)
{
    holder *ho = p;
    bmem_ptr h;
    if (bmem_dev_malloc_raw(ho->d, 1, 1, &h) == NM_OK) bmem_dev_free(ho->d, h); /* cached */
    pthread_barrier_wait(&ho->bar); /* 1: cached */
    pthread_barrier_wait(&ho->bar); /* 2: main filled the device */
    if (ho->flush) bmem_dev_flush_thread_cache(ho->d);
    pthread_barrier_wait(&ho->bar); /* 3 */
    return NULL;
}

static void test_no_stealing(void **st)
{
    (void)st;
    for (int flush = 0; flush < 2; flush++) {
        holder ho;
        ho.d = make(8, 2, 1, 0); /* 16 cells */
        ho.flush = flush;
        pthread_barrier_init(&ho.bar, NULL, 2);
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, hold_one_cell, &ho), 0);
        pthread_barrier_wait(&ho.bar);
        bmem_ptr h[16], z;
        int n = 0;
        while (bmem_dev_malloc_raw(ho.d, 1, 1, &h[n]) == NM_OK) n++;
        assert_int_equal(n, 15); /* one cell is in the other thread's cache */
        bmem_stats s = stats(ho.d);
        assert_int_equal(s.cells_cached, 1);
        assert_int_equal(bmem_dev_malloc_raw(ho.d, 1, 1, &z), NM_ENOMEM); /* still held */
        pthread_barrier_wait(&ho.bar);
        pthread_barrier_wait(&ho.bar);
        pthread_join(t, NULL); /* flushed by the thread itself, or by its exit */
        assert_int_equal(bmem_dev_malloc_raw(ho.d, 1, 1, &z), NM_OK);
        s = stats(ho.d);
        assert_int_equal(s.cells_free, 0);
        assert_int_equal(s.cells_cached, 0);
        pthread_barrier_destroy(&ho.bar);
        bmem_dev_destroy(ho.d);
    }
}

/* Destroy while threads that cached entries on the device are still alive:
 * their caches are detached, never matched with a new device (even at the
 * same address), and freed when the thread exits. */
typedef struct survivor {
    bmem_dev *d;
    pthread_barrier_t bar;
    bmem_geom g;
    nm_err e;
} survivor;

static void *survive(void *p)
{
    survivor *sv = p;
    bmem_ptr h;
    bmem_dev_malloc(sv->d, 1, BMEM_VERT, &h);
    bmem_dev_free(sv->d, h); /* cached in the old device */
    pthread_barrier_wait(&sv->bar); /* 1 */
    pthread_barrier_wait(&sv->bar); /* 2: main destroyed it and made a new one */
    sv->e = bmem_dev_malloc(sv->d, 1, BMEM_VERT, &h);
    if (!sv->e) sv->e = bmem_dev_geom(sv->d, h, &sv->g);
    if (!sv->e) sv->e = bmem_dev_free(sv->d, h);
    return NULL;
}

static void test_destroy_with_live_caches(void **st)
{
    (void)st;
    survivor sv;
    memset(&sv, 0, sizeof sv);
    sv.d = make(32, 4, 1, 0);
    pthread_barrier_init(&sv.bar, NULL, 2);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, survive, &sv), 0);
    pthread_barrier_wait(&sv.bar);
    bmem_ptr mine;
    assert_int_equal(bmem_dev_malloc(sv.d, 1, BMEM_VERT, &mine), NM_OK);
    assert_int_equal(bmem_dev_free(sv.d, mine), NM_OK); /* main's cache too */
    bmem_dev_destroy(sv.d);
    sv.d = make(32, 4, 1, 0); /* often the same address */
    bmem_ptr h;
    assert_int_equal(bmem_dev_malloc(sv.d, 4, BMEM_VERT, &h), NM_OK); /* rows 0..31 of subarray 0 */
    pthread_barrier_wait(&sv.bar);
    pthread_join(t, NULL);
    assert_int_equal(sv.e, NM_OK);
    assert_int_equal(sv.g.sub, 1); /* first fit in the new device, not a stale entry */
    assert_int_equal(sv.g.row, 0);
    bmem_stats s = stats(sv.d);
    assert_int_equal(s.allocations, 1);
    assert_int_equal(s.cells_cached, 0); /* its exit flushed its new cache */
    pthread_barrier_destroy(&sv.bar);
    bmem_dev_destroy(sv.d);
}

/* Many threads, one device each round: every thread caches, exits; the
 * device returns to empty without any explicit flush. */
static void *churn(void *p)
{
    bmem_dev *d = p;
    bmem_ptr h[8];
    for (int r = 0; r < 50; r++) {
        int n = 0;
        for (int i = 0; i < 8; i++)
            if (bmem_dev_malloc(d, 1 + (size_t)(i % 3), i % 2 ? BMEM_VERT : BMEM_HORIZ, &h[n]) == NM_OK) n++;
        for (int i = 0; i < n; i++) bmem_dev_free(d, h[i]);
    }
    return NULL;
}

static void test_exit_flush_many(void **st)
{
    (void)st;
    bmem_dev *d = make(128, 8, 2, 0);
    for (int round = 0; round < 3; round++) {
        pthread_t t[6];
        for (int i = 0; i < 6; i++) assert_int_equal(pthread_create(&t[i], NULL, churn, d), 0);
        for (int i = 0; i < 6; i++) pthread_join(t[i], NULL);
        bmem_stats s = stats(d);
        assert_int_equal(s.cells_free, s.cells_total);
        assert_int_equal(s.cached, 0);
        assert_int_equal(s.allocations, 0);
    }
    bmem_dev_destroy(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_options),
        cmocka_unit_test(test_reuse_and_stats),
        cmocka_unit_test(test_errors_on_cached),
        cmocka_unit_test(test_bounds),
        cmocka_unit_test(test_enomem_flush_and_near),
        cmocka_unit_test(test_thread_exit_and_cross_thread),
        cmocka_unit_test(test_no_stealing),
        cmocka_unit_test(test_destroy_with_live_caches),
        cmocka_unit_test(test_exit_flush_many),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
