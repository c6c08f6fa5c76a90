/* Multi-threaded stress of bmem (label `threads`, run under TSan by `make
 * tsan`): 8 threads (oversubscribed on small machines) allocate and free
 * random shapes on a device with fewer banks than threads, so banks are
 * shared, with the thread cache on (default) and off. A shared occupancy map,
 * claimed cell by cell with compare-and-swap, proves that no two live
 * allocations ever overlap; handles also pass between threads (frees land in
 * other threads' caches; stale handles freed by other threads are double
 * frees); after the threads exit (their caches flushed) the device is empty.
 * Racing double frees of one handle resolve to exactly one success with the
 * cache off (with it on they are the caller's data race: bmem.h). */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "nearmem/bmem.h"
#include "nearmem/common.h"
#include "nm_test.h"

#define NTHREADS 8
#ifdef NEARMEM_SANITIZED
#define OPS 3000
#else
#define OPS 20000
#endif

#define POOL 64

typedef struct shared {
    bmem_dev *d;
    bmem_config cfg;
    _Atomic uint32_t *own; /* [bank][row][sub] */
    _Atomic int errors;
    uint64_t seed;
    /* handles passed between threads, so that frees land in other threads'
     * caches (and stale handles are freed by threads that never held them) */
    pthread_mutex_t mu;
    bmem_ptr pool[POOL];
    bmem_geom pgeo[POOL];
    uint32_t ptag[POOL];
    unsigned npool;
    bmem_ptr stale[POOL]; /* freed handles: any later free is a double free */
    unsigned nstale;
} shared;

typedef struct targ {
    shared *sh;
    unsigned id;
} targ;

static _Atomic uint32_t *cellp(shared *sh, const bmem_geom *g, unsigned r, unsigned s)
{
    return &sh->own[((size_t)g->bank * sh->cfg.rows + r) * sh->cfg.subarrays + s];
}

static bool claim(shared *sh, const bmem_geom *g, uint32_t tag)
{
    bool ok = true;
    for (unsigned r = g->row; r < g->row + g->nrows; r++)
        for (unsigned s = g->sub; s < g->sub + g->nsubs; s++) {
            uint32_t z = 0;
            if (!atomic_compare_exchange_strong(cellp(sh, g, r, s), &z, tag)) ok = false;
        }
    return ok;
}

static bool release(shared *sh, const bmem_geom *g, uint32_t tag)
{
    bool ok = true;
    for (unsigned r = g->row; r < g->row + g->nrows; r++)
        for (unsigned s = g->sub; s < g->sub + g->nsubs; s++) {
            uint32_t t = tag;
            if (!atomic_compare_exchange_strong(cellp(sh, g, r, s), &t, 0)) ok = false;
        }
    return ok;
}

#define KEEP 24

static void *worker(void *arg)
{
    targ *ta = arg;
    shared *sh = ta->sh;
    nm_rng rng;
    nm_rng_seed_stream(&rng, sh->seed, ta->id);
    bmem_ptr mine[KEEP];
    bmem_geom geo[KEEP];
    unsigned n = 0;
    uint32_t tag = ta->id + 1;
    for (int op = 0; op < OPS; op++) {
        if (n < KEEP && (n == 0 || nm_rng_below(&rng, 2))) {
            bmem_ptr h;
            nm_err e;
            uint64_t k = nm_rng_below(&rng, 4);
            if (k == 0)
                e = bmem_dev_malloc(sh->d, 1 + nm_rng_below(&rng, 600), BMEM_HORIZ, &h);
            else if (k == 1)
                e = bmem_dev_malloc(sh->d, 1 + nm_rng_below(&rng, 8), BMEM_VERT, &h);
            else if (k == 2 && n)
                e = bmem_dev_malloc_near(sh->d, 0, BMEM_RAW, 1 + (unsigned)nm_rng_below(&rng, 2),
                                         1 + (unsigned)nm_rng_below(&rng, 8), mine[nm_rng_below(&rng, n)], 0, &h);
            else
                e = bmem_dev_malloc_raw(sh->d, 1 + (unsigned)nm_rng_below(&rng, 3), 1 + (unsigned)nm_rng_below(&rng, 12), &h);
            if (e == NM_ENOMEM) continue;
            if (e != NM_OK || bmem_dev_geom(sh->d, h, &geo[n]) != NM_OK || !claim(sh, &geo[n], tag)) {
                atomic_fetch_add(&sh->errors, 1);
                continue;
            }
            mine[n++] = h;
        } else if (nm_rng_below(&rng, 4) == 0) {
            /* hand one of mine to the pool, or free one from the pool (which
             * another thread allocated), or free a stale handle */
            unsigned i = (unsigned)nm_rng_below(&rng, n);
            pthread_mutex_lock(&sh->mu);
            if (sh->npool < POOL && nm_rng_below(&rng, 2)) {
                sh->pool[sh->npool] = mine[i];
                sh->pgeo[sh->npool] = geo[i];
                sh->ptag[sh->npool++] = tag;
                mine[i] = mine[--n];
                geo[i] = geo[n];
                pthread_mutex_unlock(&sh->mu);
            } else if (sh->npool) {
                unsigned k = (unsigned)nm_rng_below(&rng, sh->npool);
                bmem_ptr h = sh->pool[k];
                bmem_geom g = sh->pgeo[k];
                uint32_t t = sh->ptag[k];
                sh->pool[k] = sh->pool[--sh->npool];
                sh->pgeo[k] = sh->pgeo[sh->npool];
                sh->ptag[k] = sh->ptag[sh->npool];
                pthread_mutex_unlock(&sh->mu);
                if (!release(sh, &g, t)) atomic_fetch_add(&sh->errors, 1);
                if (bmem_dev_free(sh->d, h) != NM_OK) atomic_fetch_add(&sh->errors, 1);
                pthread_mutex_lock(&sh->mu);
                sh->stale[sh->nstale++ % POOL] = h;
                pthread_mutex_unlock(&sh->mu);
            } else if (sh->nstale) {
                bmem_ptr h = sh->stale[nm_rng_below(&rng, NM_MIN(sh->nstale, POOL))];
                pthread_mutex_unlock(&sh->mu);
                if (bmem_dev_free(sh->d, h) != NM_EDOUBLEFREE) atomic_fetch_add(&sh->errors, 1);
            } else {
                pthread_mutex_unlock(&sh->mu);
            }
        } else {
            unsigned i = (unsigned)nm_rng_below(&rng, n);
            /* give the cells back before the allocator can hand them out again */
            if (!release(sh, &geo[i], tag)) atomic_fetch_add(&sh->errors, 1);
            if (bmem_dev_free(sh->d, mine[i]) != NM_OK) atomic_fetch_add(&sh->errors, 1);
            if (bmem_dev_free(sh->d, mine[i]) != NM_EDOUBLEFREE) atomic_fetch_add(&sh->errors, 1);
            mine[i] = mine[--n];
            geo[i] = geo[n];
        }
    }
    for (unsigned i = 0; i < n; i++) {
        release(sh, &geo[i], tag);
        if (bmem_dev_free(sh->d, mine[i]) != NM_OK) atomic_fetch_add(&sh->errors, 1);
    }
    return NULL;
}

static void run_stress(bmem_algo algo, unsigned banks, int cache)
{
    shared sh;
    memset(&sh, 0, sizeof sh);
    sh.cfg = (bmem_config){128, 4096, 16, banks, algo, cache};
    sh.seed = nm_test_seed(99) + banks;
    pthread_mutex_init(&sh.mu, NULL);
    assert_int_equal(bmem_dev_create(&sh.cfg, &sh.d), NM_OK);
    size_t cells = (size_t)banks * 128 * 16;
    sh.own = calloc(cells, sizeof *sh.own);
    pthread_t t[NTHREADS];
    targ ta[NTHREADS];
    for (unsigned i = 0; i < NTHREADS; i++) {
        ta[i] = (targ){&sh, i};
        assert_int_equal(pthread_create(&t[i], NULL, worker, &ta[i]), 0);
    }
    for (unsigned i = 0; i < NTHREADS; i++) pthread_join(t[i], NULL);
    assert_int_equal(atomic_load(&sh.errors), 0);
    bmem_stats s;
    assert_int_equal(bmem_dev_stats(sh.d, &s, NULL), NM_OK);
    assert_int_equal(s.allocations, sh.npool);
    for (unsigned i = 0; i < sh.npool; i++) {
        release(&sh, &sh.pgeo[i], sh.ptag[i]);
        assert_int_equal(bmem_dev_free(sh.d, sh.pool[i]), NM_OK);
    }
    /* the workers' caches were flushed when they exited; this thread's by hand */
    assert_int_equal(bmem_dev_flush_thread_cache(sh.d), NM_OK);
    assert_int_equal(bmem_dev_stats(sh.d, &s, NULL), NM_OK);
    assert_int_equal(s.cells_allocated, 0);
    assert_int_equal(s.allocations, 0);
    assert_int_equal(s.cells_cached, 0);
    assert_int_equal(s.cells_free, s.cells_total);
    assert_int_equal(s.cache_conflicts, 0);
    for (size_t i = 0; i < cells; i++) assert_int_equal(atomic_load(&sh.own[i]), 0);
    free(sh.own);
    pthread_mutex_destroy(&sh.mu);
    bmem_dev_destroy(sh.d);
}

static void test_stress_fast(void **st)
{
    (void)st;
    run_stress(BMEM_ALGO_FAST, 3, 0); /* default: thread caches on */
    run_stress(BMEM_ALGO_FAST, 1, 0);
    run_stress(BMEM_ALGO_FAST, 3, BMEM_CACHE_OFF);
}

static void test_stress_paper(void **st)
{
    (void)st;
    run_stress(BMEM_ALGO_PAPER, 3, 0); /* the paper baseline: no cache by default */
}

/* Racing frees of the same handles: exactly one wins each time. */
typedef struct race {
    bmem_dev *d;
    bmem_ptr *h;
    unsigned n;
    _Atomic unsigned ok, dbl, other;
    pthread_barrier_t bar;
} race;

static void *racer(void *arg)
{
    race *rc = arg;
    pthread_barrier_wait(&rc->bar);
    for (unsigned i = 0; i < rc->n; i++) {
        nm_err e = bmem_dev_free(rc->d, rc->h[i]);
        if (e == NM_OK)
            atomic_fetch_add(&rc->ok, 1);
        else if (e == NM_EDOUBLEFREE)
            atomic_fetch_add(&rc->dbl, 1);
        else
            atomic_fetch_add(&rc->other, 1);
    }
    return NULL;
}

static void test_racing_double_free(void **st)
{
    (void)st;
    bmem_config c = {64, 1024, 8, 2, BMEM_ALGO_FAST, BMEM_CACHE_OFF}; /* exactly one racing free wins: needs the cache off */
    race rc;
    memset(&rc, 0, sizeof rc);
    assert_int_equal(bmem_dev_create(&c, &rc.d), NM_OK);
    rc.n = 500;
    rc.h = calloc(rc.n, sizeof *rc.h);
    for (unsigned i = 0; i < rc.n; i++) assert_int_equal(bmem_dev_malloc_raw(rc.d, 1, 1, &rc.h[i]), NM_OK);
    pthread_barrier_init(&rc.bar, NULL, 4);
    pthread_t t[4];
    for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, racer, &rc);
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    assert_int_equal(rc.ok, rc.n);
    assert_int_equal(rc.dbl, 3 * rc.n);
    assert_int_equal(rc.other, 0);
    bmem_stats s;
    assert_int_equal(bmem_dev_stats(rc.d, &s, NULL), NM_OK);
    assert_int_equal(s.cells_allocated, 0);
    pthread_barrier_destroy(&rc.bar);
    free(rc.h);
    bmem_dev_destroy(rc.d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stress_fast),
        cmocka_unit_test(test_stress_paper),
        cmocka_unit_test(test_racing_double_free),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
