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

static void test_threads_log(void **st) { (void)st; run(PMALLOC_LOG, 2); }
static void test_threads_gc(void **st) { (void)st; run(PMALLOC_GC, 2); }
static void test_threads_log4(void **st) { (void)st; run(PMALLOC_LOG, 4); }

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_threads_log),
        cmocka_unit_test(test_threads_gc),
        cmocka_unit_test(test_threads_log4),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
