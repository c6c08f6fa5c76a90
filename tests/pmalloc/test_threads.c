/* PMAlloc with 2+ threads: random malloc_to/free_from on shared slots (so
 * blocks are freed by other threads than their allocator), contents checked
 * against a reference model, then a clean reopen and a full check. */
#include "nm_test.h"

#include <pthread.h>
#include "nearmem/common/prng.h"
#include "nearmem/common/util.h"
#include "pm_testutil.h"

#define NSLOTS 256
#define NLOCKS 16

typedef struct shared {
    pmalloc_heap *h;
    pthread_mutex_t lock[NLOCKS];
    size_t size[NSLOTS];
    uint8_t pat[NSLOTS];
    int errors;
} shared;

typedef struct targ { shared *s; uint64_t seed; } targ;

static void *worker(void *p)
{
    targ *a = p;
    shared *s = a->s;
    nm_rng r;
    nm_rng_seed(&r, a->seed);
    for (int it = 0; it < 6000; it++) {
        unsigned i = (unsigned)nm_rng_below(&r, NSLOTS);
        pthread_mutex_t *l = &s->lock[i % NLOCKS];
        pthread_mutex_lock(l);
        pmalloc_ptr *slot = pmalloc_root_slot(s->h, i);
        if (s->size[i]) {
            const uint8_t *c = pmalloc_direct(s->h, *slot);
            if (c[0] != s->pat[i] || c[s->size[i] - 1] != s->pat[i]) s->errors++;
            if (pmalloc_free_from(s->h, slot) != NM_OK) s->errors++;
            s->size[i] = 0;
        } else {
            size_t sz = nm_rng_below(&r, 20) == 0 ? nm_rng_range(&r, 14337, 100000) : nm_rng_range(&r, 1, 2000);
            nm_err e = pmalloc_malloc_to(s->h, sz, slot);
            if (e == NM_OK) {
                s->size[i] = sz;
                s->pat[i] = (uint8_t)nm_rng_u64(&r);
                memset(pmalloc_direct(s->h, *slot), s->pat[i], sz);
            } else if (e != NM_ENOMEM) {
                s->errors++;
            }
        }
        pthread_mutex_unlock(l);
    }
    return NULL;
}

static void run(pmalloc_model m, unsigned nthreads)
{
    char dir[256];
    pmt_tmpdir(dir, sizeof dir, "thr");
    pmalloc_options o = pmt_opts(32u << 20, m, PMALLOC_PERSIST_CPU);
    static shared s;
    memset(&s, 0, sizeof s);
    for (int i = 0; i < NLOCKS; i++) pthread_mutex_init(&s.lock[i], NULL);
    assert_int_equal(pmalloc_open(dir, &o, &s.h), NM_OK);
    pthread_t t[8];
    targ a[8];
    for (unsigned i = 0; i < nthreads; i++) {
        a[i] = (targ){&s, nm_test_seed(31) * 100 + i};
        pthread_create(&t[i], NULL, worker, &a[i]);
    }
    for (unsigned i = 0; i < nthreads; i++) pthread_join(t[i], NULL);
    assert_int_equal(s.errors, 0);
    assert_int_equal(pmalloc_check(s.h), NM_OK);
    assert_int_equal(pmalloc_close(s.h), NM_OK);
    o.create = false;
    assert_int_equal(pmalloc_open(dir, &o, &s.h), NM_OK);
    assert_int_equal(pmalloc_check(s.h), NM_OK);
    pmalloc_stats st;
    pmalloc_stats_get(s.h, &st);
    uint64_t n = 0;
    for (unsigned i = 0; i < NSLOTS; i++) {
        if (!s.size[i]) { assert_int_equal(pmalloc_get_root(s.h, i), 0); continue; }
        n++;
        const uint8_t *c = pmalloc_direct(s.h, pmalloc_get_root(s.h, i));
        assert_int_equal(c[s.size[i] / 2], s.pat[i]);
        assert_int_equal(pmalloc_free_from(s.h, pmalloc_root_slot(s.h, i)), NM_OK);
    }
    assert_int_equal(st.objects_live, n);
    assert_int_equal(pmalloc_check(s.h), NM_OK);
    assert_int_equal(pmalloc_close(s.h), NM_OK);
    pmt_rmdir(dir);
}

/* Remote frees are buffered per thread and returned in batches: while
 * buffered, the heap checks clean; an allocation that finds its arena
 * exhausted returns them first (so no block is lost to ENOMEM); thread exit
 * returns them. */
#define RF_N 200
#define RF_CAP 80000
typedef struct rf_arg { pmalloc_heap *h; pmalloc_ptr *slots; pmalloc_ptr freed[RF_N / 2]; int ok; } rf_arg;

static void *rf_remote(void *p)
{
    rf_arg *a = p;
    pmalloc_heap *h = a->h;
    for (unsigned i = 0; i < RF_N / 2; i++) {
        a->freed[i] = a->slots[i];
        if (pmalloc_free_from(h, &a->slots[i])) return NULL;
    }
    if (pmalloc_check(h)) return NULL; /* buffered blocks are consistent */
    /* allocate 64 B until the heap is exhausted: every block freed above is reused */
    unsigned n = RF_N;
    while (n < RF_CAP && pmalloc_malloc_to(h, 64, &a->slots[n]) == NM_OK) n++;
    if (n == RF_CAP) return NULL;
    for (unsigned i = 0; i < RF_N / 2; i++)
        if (pmalloc_usable_size(h, a->freed[i]) == 0) return NULL;
    for (unsigned i = RF_N; i < n; i++)
        if (pmalloc_free_from(h, &a->slots[i])) return NULL;
    a->ok = 1;
    return NULL;
}

static void test_remote_free_batches(void **st)
{
    (void)st;
    char dir[256];
    pmt_tmpdir(dir, sizeof dir, "rfree");
    pmalloc_options o = pmt_opts(4u << 20, PMALLOC_LOG, PMALLOC_PERSIST_CPU);
    o.create = true;
    pmalloc_heap *h;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    assert_int_equal(pmalloc_malloc_to(h, RF_CAP * sizeof(pmalloc_ptr), pmalloc_root_slot(h, 0)), NM_OK);
    rf_arg a = {h, pmalloc_direct(h, pmalloc_get_root(h, 0)), {0}, 0};
    memset(a.slots, 0, RF_CAP * sizeof(pmalloc_ptr));
    for (unsigned i = 0; i < RF_N; i++) assert_int_equal(pmalloc_malloc_to(h, 64, &a.slots[i]), NM_OK);
    pthread_t t; /* joins the other arena (fewest threads): its frees are remote */
    pthread_create(&t, NULL, rf_remote, &a);
    pthread_join(t, NULL);
    assert_true(a.ok);
    assert_int_equal(pmalloc_check(h), NM_OK); /* the exited thread's buffer went back */
    pmalloc_stats s;
    assert_int_equal(pmalloc_stats_get(h, &s), NM_OK);
    assert_int_equal(s.objects_live, 1 + RF_N / 2);
    for (unsigned i = RF_N / 2; i < RF_N; i++) assert_int_equal(pmalloc_free_from(h, &a.slots[i]), NM_OK);
    assert_int_equal(pmalloc_close(h), NM_OK);
    o.create = false;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    assert_int_equal(pmalloc_check(h), NM_OK);
    assert_int_equal(pmalloc_stats_get(h, &s), NM_OK);
    assert_int_equal(s.objects_live, 1);
    assert_int_equal(pmalloc_close(h), NM_OK);
    pmt_rmdir(dir);
}

/* Two threads free the same object through two roots at once: exactly one
 * succeeds, the other gets NM_EDOUBLEFREE, and the heap stays consistent
 * (large frees leave the extent lock between their steps: the `freeing` mark). */
typedef struct df_arg {
    pmalloc_heap *h;
    unsigned root;
    pthread_barrier_t *bar;
    nm_err err;
} df_arg;

static void *df_free(void *p)
{
    df_arg *a = p;
    pthread_barrier_wait(a->bar);
    a->err = pmalloc_free_from(a->h, pmalloc_root_slot(a->h, a->root));
    return NULL;
}

static void test_concurrent_double_free(void **st)
{
    (void)st;
    char dir[256];
    pmt_tmpdir(dir, sizeof dir, "dfree");
    /* msync persistence: each step takes long enough for the frees to overlap */
    pmalloc_options o = pmt_opts(16u << 20, PMALLOC_LOG, PMALLOC_PERSIST_MSYNC);
    o.create = true;
    pmalloc_heap *h;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, 2);
    for (unsigned round = 0; round < 400; round++) {
        size_t size = round % 2 ? 100 : 40000; /* small block, extent */
        assert_int_equal(pmalloc_malloc_to(h, size, pmalloc_root_slot(h, 0)), NM_OK);
        assert_int_equal(pmalloc_set_root(h, 1, pmalloc_get_root(h, 0)), NM_OK);
        df_arg a = {h, 0, &bar, NM_OK}, b = {h, 1, &bar, NM_OK};
        pthread_t t;
        pthread_create(&t, NULL, df_free, &a);
        df_free(&b);
        pthread_join(t, NULL);
        if (!((a.err == NM_OK && b.err == NM_EDOUBLEFREE) || (a.err == NM_EDOUBLEFREE && b.err == NM_OK)))
            print_message("round %u (%zu bytes): the frees returned %d and %d\n", round, size, (int)a.err, (int)b.err);
        assert_true((a.err == NM_OK && b.err == NM_EDOUBLEFREE) || (a.err == NM_EDOUBLEFREE && b.err == NM_OK));
        assert_int_equal(pmalloc_set_root(h, 0, 0), NM_OK);
        assert_int_equal(pmalloc_set_root(h, 1, 0), NM_OK);
    }
    pthread_barrier_destroy(&bar);
    pmalloc_stats s;
    assert_int_equal(pmalloc_stats_get(h, &s), NM_OK);
    assert_int_equal(s.objects_live, 0);
    assert_int_equal(pmalloc_check(h), NM_OK);
    assert_int_equal(pmalloc_close(h), NM_OK);
    o.create = false;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    assert_int_equal(pmalloc_check(h), NM_OK);
    assert_int_equal(pmalloc_close(h), NM_OK);
    pmt_rmdir(dir);
}

static void test_threads_log(void **st) { (void)st; run(PMALLOC_LOG, 2); }
static void test_threads_gc(void **st) { (void)st; run(PMALLOC_GC, 2); }
static void test_threads_log4(void **st) { (void)st; run(PMALLOC_LOG, 4); }

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_threads_log),
        cmocka_unit_test(test_threads_gc),
        cmocka_unit_test(test_threads_log4),
        cmocka_unit_test(test_remote_free_batches),
        cmocka_unit_test(test_concurrent_double_free),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
