/* PMAlloc per-arena extent stores (src/pmalloc/xcache.c): reuse, errors on
 * stored extents, coalescing, the bounds (size and idle time), space held in
 * stores is never lost to NM_ENOMEM (large allocations and slabs), crash with
 * stored extents, and a 2-thread stress of large objects with cross-thread
 * frees against a model. */
#include "nm_test.h"

#include <pthread.h>
#include <time.h>

#include "nearmem/common/prng.h"
#include "nearmem/common/util.h"
#include "pm_testutil.h"

#define KiB 1024u
#define MiB (1024u * 1024u)

static pmalloc_stats stats(pmalloc_heap *h)
{
    pmalloc_stats st;
    assert_int_equal(pmalloc_stats_get(h, &st), NM_OK);
    return st;
}

/* A fresh directory and the options of a LOG heap with one arena (one store). */
static pmalloc_options one_arena(char *dir, size_t n, const char *tag, size_t size)
{
    pmt_tmpdir(dir, n, tag);
    pmalloc_options o = pmt_opts(size, PMALLOC_LOG, PMALLOC_PERSIST_CPU);
    o.narenas = 1;
    return o;
}

/* The end of a test: roots 0..n-1 freed, nothing live, the heap checked,
 * closed and removed. */
static void free_roots_close(pmalloc_heap *h, unsigned n, const char *dir)
{
    for (unsigned i = 0; i < n; i++) assert_int_equal(pmalloc_free_from(h, pmalloc_root_slot(h, i)), NM_OK);
    assert_int_equal(stats(h).objects_live, 0);
    assert_int_equal(pmalloc_check(h), NM_OK);
    assert_int_equal(pmalloc_close(h), NM_OK);
    pmt_rmdir(dir);
}

static void test_reuse_and_errors(void **state)
{
    (void)state;
    char dir[256];
    pmalloc_options o = one_arena(dir, sizeof dir, "xc", 16 * MiB);
    pmalloc_heap *h;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    pmalloc_stats st0 = stats(h);
    assert_int_equal(st0.cached_bytes, 0);
    assert_int_equal(pmalloc_malloc_to(h, 100 * KiB, pmalloc_root_slot(h, 0)), NM_OK);
    assert_int_equal(pmalloc_malloc_to(h, 100 * KiB, pmalloc_root_slot(h, 1)), NM_OK);
    pmalloc_ptr a = pmalloc_get_root(h, 0);
    assert_int_equal(pmalloc_free_from(h, pmalloc_root_slot(h, 0)), NM_OK);
    pmalloc_stats st = stats(h);
    assert_int_equal(st.cached_bytes, 100 * KiB);
    assert_int_equal(st.free_bytes, st0.free_bytes - 100 * KiB); /* cached space counts as free */
    assert_int_equal(st.extents, 1);
    assert_int_equal(pmalloc_check(h), NM_OK);

    /* a second free of the cached extent, and a free inside it, fail and change nothing */
    assert_int_equal(pmalloc_set_root(h, 2, a), NM_OK);
    assert_int_equal(pmalloc_free_from(h, pmalloc_root_slot(h, 2)), NM_EDOUBLEFREE);
    assert_int_equal(pmalloc_get_root(h, 2), a);
    assert_int_equal(pmalloc_set_root(h, 3, a + 8 * KiB), NM_OK);
    assert_int_not_equal(pmalloc_free_from(h, pmalloc_root_slot(h, 3)), NM_OK);
    assert_int_equal(pmalloc_set_root(h, 3, a + 100), NM_OK);
    assert_int_equal(pmalloc_free_from(h, pmalloc_root_slot(h, 3)), NM_EBADFREE);
    /* nor may a cached extent hold a destination pointer */
    assert_int_equal(pmalloc_malloc_to(h, 64, (pmalloc_ptr *)pmalloc_direct(h, a)), NM_EINVAL);
    assert_int_equal(pmalloc_usable_size(h, a), 0);
    assert_int_equal(pmalloc_check(h), NM_OK);
    assert_int_equal(stats(h).cached_bytes, 100 * KiB);
    assert_int_equal(pmalloc_set_root(h, 2, 0), NM_OK);
    assert_int_equal(pmalloc_set_root(h, 3, 0), NM_OK);

    /* a smaller request takes the front of the cached extent; the rest stays cached */
    assert_int_equal(pmalloc_malloc_to(h, 80 * KiB, pmalloc_root_slot(h, 0)), NM_OK);
    assert_int_equal(pmalloc_get_root(h, 0), a);
    st = stats(h);
    assert_int_equal(st.cached_bytes, 20 * KiB);
    assert_int_equal(st.extents, 2);
    assert_int_equal(pmalloc_check(h), NM_OK);
    /* an exact fit takes the remainder */
    assert_int_equal(pmalloc_malloc_to(h, 20 * KiB, pmalloc_root_slot(h, 4)), NM_OK);
    assert_int_equal(pmalloc_get_root(h, 4), a + 80 * KiB);
    st = stats(h);
    assert_int_equal(st.cached_bytes, 0);
    assert_int_equal(st.extent_cache_hits, 2);
    assert_int_equal(st.extent_cache_misses, 2);
    for (unsigned i = 0; i < 5; i++) assert_int_equal(pmalloc_free_from(h, pmalloc_root_slot(h, i)), NM_OK);
    assert_int_equal(pmalloc_check(h), NM_OK);
    assert_int_equal(stats(h).objects_live, 0);
    assert_int_equal(pmalloc_close(h), NM_OK);

    /* a clean reopen: cached space is free space */
    o.create = false;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    st = stats(h);
    assert_int_equal(st.cached_bytes, 0);
    assert_int_equal(st.free_bytes, st0.free_bytes);
    assert_int_equal(pmalloc_close(h), NM_OK);
    pmt_rmdir(dir);
}

/* Fill the heap with 16 KiB extents, free some so that all free space is in
 * the cache, then ask for more than any single cached extent: the caches are
 * flushed (coalesced) and the request succeeds, for an extent and for a slab. */
static void test_no_enomem_from_caching(void **state)
{
    (void)state;
    char dir[256];
    pmalloc_options o = one_arena(dir, sizeof dir, "xcfull", 8 * MiB);
    pmalloc_heap *h;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    unsigned n = 0;
    while (n < PMALLOC_NROOTS && pmalloc_malloc_to(h, 16 * KiB, pmalloc_root_slot(h, n)) == NM_OK) n++;
    assert_true(n > 100 && n < PMALLOC_NROOTS);
    assert_int_equal(pmalloc_malloc_to(h, 16 * KiB, pmalloc_root_slot(h, n)), NM_ENOMEM);
    /* neighbours 10..13: four cached 16 KiB extents, nothing else free */
    for (unsigned i = 10; i < 14; i++) assert_int_equal(pmalloc_free_from(h, pmalloc_root_slot(h, i)), NM_OK);
    pmalloc_stats st = stats(h);
    assert_int_equal(st.cached_bytes, 64 * KiB);
    assert_int_equal(pmalloc_check(h), NM_OK);
    /* a 64 KiB slab needs the four of them coalesced */
    assert_int_equal(pmalloc_malloc_to(h, 64, pmalloc_root_slot(h, 10)), NM_OK);
    st = stats(h);
    assert_int_equal(st.cached_bytes, 0);
    assert_int_equal(st.slabs, 1);
    assert_int_equal(pmalloc_check(h), NM_OK);
    assert_int_equal(pmalloc_free_from(h, pmalloc_root_slot(h, 10)), NM_OK);

    /* the same for one extent larger than any cached one */
    for (unsigned i = 20; i < 24; i++) assert_int_equal(pmalloc_free_from(h, pmalloc_root_slot(h, i)), NM_OK);
    assert_int_equal(stats(h).cached_bytes, 64 * KiB);
    assert_int_equal(pmalloc_malloc_to(h, 64 * KiB, pmalloc_root_slot(h, 20)), NM_OK);
    assert_int_equal(pmalloc_check(h), NM_OK);
    /* and when nothing fits even after flushing: NM_ENOMEM, nothing lost */
    pmalloc_stats before = stats(h);
    assert_int_equal(pmalloc_malloc_to(h, 4 * MiB, pmalloc_root_slot(h, 21)), NM_ENOMEM);
    assert_int_equal(pmalloc_get_root(h, 21), 0);
    st = stats(h);
    assert_int_equal(st.free_bytes, before.free_bytes);
    assert_int_equal(st.objects_live, before.objects_live);
    assert_int_equal(pmalloc_check(h), NM_OK);
    free_roots_close(h, n, dir);
}

/* Frees of neighbours coalesce in the store: a request as large as the three
 * together is served from it (a hit) at the first one's address. */
static void test_store_coalesces(void **state)
{
    (void)state;
    char dir[256];
    pmalloc_options o = one_arena(dir, sizeof dir, "xcmerge", 64 * MiB);
    pmalloc_heap *h;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    for (unsigned i = 0; i < 5; i++) assert_int_equal(pmalloc_malloc_to(h, 64 * KiB, pmalloc_root_slot(h, i)), NM_OK);
    pmalloc_ptr first = pmalloc_get_root(h, 1);
    for (unsigned i = 1; i < 5; i++) assert_int_equal(pmalloc_get_root(h, i), first + (i - 1) * 64 * KiB);
    /* out of order: 3, then 1 (no neighbour stored yet), then 2 joins both */
    assert_int_equal(pmalloc_free_from(h, pmalloc_root_slot(h, 3)), NM_OK);
    assert_int_equal(pmalloc_free_from(h, pmalloc_root_slot(h, 1)), NM_OK);
    assert_int_equal(pmalloc_check(h), NM_OK);
    assert_int_equal(pmalloc_free_from(h, pmalloc_root_slot(h, 2)), NM_OK);
    assert_int_equal(stats(h).cached_bytes, 3 * 64 * KiB);
    assert_int_equal(pmalloc_check(h), NM_OK);
    /* every address of the merged extent is refused as a free */
    for (unsigned k = 0; k < 3; k++) {
        assert_int_equal(pmalloc_set_root(h, 9, first + k * 64 * KiB), NM_OK);
        assert_int_not_equal(pmalloc_free_from(h, pmalloc_root_slot(h, 9)), NM_OK);
    }
    assert_int_equal(pmalloc_set_root(h, 9, 0), NM_OK);
    uint64_t hits = stats(h).extent_cache_hits;
    assert_int_equal(pmalloc_malloc_to(h, 3 * 64 * KiB, pmalloc_root_slot(h, 1)), NM_OK);
    assert_int_equal(pmalloc_get_root(h, 1), first);
    assert_int_equal(stats(h).extent_cache_hits, hits + 1);
    assert_int_equal(stats(h).cached_bytes, 0);
    assert_int_equal(pmalloc_usable_size(h, first), 3 * 64 * KiB);
    assert_int_equal(pmalloc_check(h), NM_OK);
    free_roots_close(h, 5, dir);
}

/* A store holds at most a quarter of the data area (one arena): a free past
 * that gives its largest extents back; and extents idle for the decay time go
 * back too. */
static void test_store_bounds(void **state)
{
    (void)state;
    char dir[256];
    pmalloc_options o = one_arena(dir, sizeof dir, "xcbound", 32 * MiB);
    o.decay_ms = 100;
    pmalloc_heap *h;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    uint64_t bound = stats(h).data_bytes / 4;
    unsigned n = 0;
    /* every other 64 KiB extent freed: no two stored extents are neighbours */
    while (n < 300 && pmalloc_malloc_to(h, 64 * KiB, pmalloc_root_slot(h, n)) == NM_OK) n++;
    assert_true(n > 200);
    uint64_t peak = 0;
    for (unsigned i = 0; i < n; i += 2) {
        assert_int_equal(pmalloc_free_from(h, pmalloc_root_slot(h, i)), NM_OK);
        uint64_t c = stats(h).cached_bytes;
        assert_true(c <= bound);
        if (c > peak) peak = c;
    }
    assert_true(peak > bound / 2); /* it did fill up, and then gave back */
    assert_int_equal(pmalloc_check(h), NM_OK);
    /* idle: after the decay time, the next free gives back every older extent */
    struct timespec ts = {0, 250 * 1000 * 1000};
    nanosleep(&ts, NULL);
    assert_int_equal(pmalloc_free_from(h, pmalloc_root_slot(h, 1)), NM_OK);
    /* (root 1 joined its stored neighbours, if any: one fresh extent of up to 3 x 64 KiB) */
    assert_true(stats(h).cached_bytes >= 64 * KiB && stats(h).cached_bytes <= 3 * 64 * KiB);
    assert_int_equal(pmalloc_check(h), NM_OK);
    free_roots_close(h, n, dir);
}

/* A crash (no close) with extents in the caches: after recovery they are free
 * and the live objects are intact. */
static void test_crash_with_cached(void **state)
{
    (void)state;
    char dir[256];
    pmt_tmpdir(dir, sizeof dir, "xccrash");
    pmalloc_options o = pmt_opts(16 * MiB, PMALLOC_LOG, PMALLOC_PERSIST_CPU);
    pmalloc_heap *h;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    uint64_t free0 = stats(h).free_bytes;
    for (unsigned i = 0; i < 8; i++) {
        assert_int_equal(pmalloc_malloc_to(h, (i + 5) * 8 * KiB, pmalloc_root_slot(h, i)), NM_OK);
        memset(pmalloc_direct(h, pmalloc_get_root(h, i)), 0x40 + (int)i, (i + 5) * 8 * KiB);
        pmalloc_persist(h, pmalloc_direct(h, pmalloc_get_root(h, i)), (i + 5) * 8 * KiB);
    }
    for (unsigned i = 0; i < 8; i += 2) assert_int_equal(pmalloc_free_from(h, pmalloc_root_slot(h, i)), NM_OK);
    assert_true(stats(h).cached_bytes > 0);
    pmalloc_abandon(h); /* a process crash: nothing volatile survives */
    o.create = false;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    pmalloc_recovery_info ri;
    pmalloc_recovery_info_get(h, &ri);
    assert_false(ri.was_clean);
    assert_int_equal(pmalloc_check(h), NM_OK);
    pmalloc_stats st = stats(h);
    assert_int_equal(st.objects_live, 4);
    assert_int_equal(st.cached_bytes, 0);
    uint64_t live = 0;
    for (unsigned i = 1; i < 8; i += 2) {
        const unsigned char *c = pmalloc_direct(h, pmalloc_get_root(h, i));
        for (size_t k = 0; k < (i + 5) * 8 * KiB; k += 511) assert_int_equal(c[k], 0x40 + i);
        live += (i + 5) * 8 * KiB;
    }
    assert_int_equal(st.free_bytes, free0 - live);
    assert_int_equal(pmalloc_close(h), NM_OK);
    pmt_rmdir(dir);
}

/* Two threads, large objects only, half of the frees cross-thread (slots are
 * swapped between rounds), contents checked against a seed per object. */
#define XT_SLOTS 48
#define XT_ROUNDS 4
#define XT_OPS 600
typedef struct {
    pmalloc_heap *h;
    pmalloc_ptr *slots; /* [2][XT_SLOTS] inside the heap */
    uint64_t *seeds;    /* DRAM model: the seed of each slot's object, 0 if empty */
    pthread_barrier_t *bar;
    unsigned id;
    int errors;
} xt_arg;

static void fill(unsigned char *p, size_t n, uint64_t seed)
{
    for (size_t k = 0; k < n; k += 256) p[k] = (unsigned char)(seed + k / 256);
}
static bool same(const unsigned char *p, size_t n, uint64_t seed)
{
    for (size_t k = 0; k < n; k += 256)
        if (p[k] != (unsigned char)(seed + k / 256)) return false;
    return true;
}

static void *xt_worker(void *p)
{
    xt_arg *a = p;
    nm_rng r;
    nm_rng_seed_stream(&r, nm_test_seed(7), a->id);
    for (unsigned round = 0; round < XT_ROUNDS; round++) {
        unsigned set = (a->id + round) % 2; /* the other thread's objects every other round */
        pmalloc_ptr *sl = a->slots + set * XT_SLOTS;
        uint64_t *sd = a->seeds + set * XT_SLOTS;
        for (unsigned op = 0; op < XT_OPS; op++) {
            unsigned k = (unsigned)nm_rng_below(&r, XT_SLOTS);
            if (sl[k]) {
                size_t n = pmalloc_usable_size(a->h, sl[k]);
                if (n < 14337 || !same(pmalloc_direct(a->h, sl[k]), 14337, sd[k])) a->errors++; /* the part always written */
                if (pmalloc_free_from(a->h, &sl[k]) != NM_OK || sl[k] != 0) a->errors++;
                sd[k] = 0;
            }
            size_t n = (size_t)nm_rng_range(&r, 14337, 600 * KiB);
            if (pmalloc_malloc_to(a->h, n, &sl[k]) != NM_OK) { a->errors++; continue; }
            sd[k] = nm_rng_u64(&r) | 1;
            if (pmalloc_usable_size(a->h, sl[k]) < n) a->errors++;
            fill(pmalloc_direct(a->h, sl[k]), n, sd[k]);
        }
        pthread_barrier_wait(a->bar);
    }
    return NULL;
}

static void test_threads_large(void **state)
{
    (void)state;
    char dir[256];
    pmt_tmpdir(dir, sizeof dir, "xcthr");
    pmalloc_options o = pmt_opts(128 * MiB, PMALLOC_LOG, PMALLOC_PERSIST_CPU);
    pmalloc_heap *h;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    assert_int_equal(pmalloc_malloc_to(h, 2 * XT_SLOTS * sizeof(pmalloc_ptr), pmalloc_root_slot(h, 0)), NM_OK);
    pmalloc_ptr *slots = pmalloc_direct(h, pmalloc_get_root(h, 0));
    memset(slots, 0, 2 * XT_SLOTS * sizeof(pmalloc_ptr));
    pmalloc_persist(h, slots, 2 * XT_SLOTS * sizeof(pmalloc_ptr));
    uint64_t seeds[2 * XT_SLOTS] = {0};
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, 2);
    xt_arg args[2];
    pthread_t th[2];
    for (unsigned i = 0; i < 2; i++) {
        args[i] = (xt_arg){h, slots, seeds, &bar, i, 0};
        assert_int_equal(pthread_create(&th[i], NULL, xt_worker, &args[i]), 0);
    }
    for (unsigned i = 0; i < 2; i++) pthread_join(th[i], NULL);
    pthread_barrier_destroy(&bar);
    assert_int_equal(args[0].errors + args[1].errors, 0);
    assert_int_equal(pmalloc_check(h), NM_OK);
    /* no two live objects overlap */
    for (unsigned i = 0; i < 2 * XT_SLOTS; i++)
        for (unsigned j = i + 1; j < 2 * XT_SLOTS; j++) {
            if (!slots[i] || !slots[j]) continue;
            pmalloc_ptr a = slots[i], b = slots[j];
            assert_true(a + pmalloc_usable_size(h, a) <= b || b + pmalloc_usable_size(h, b) <= a);
        }
    for (unsigned i = 0; i < 2 * XT_SLOTS; i++) assert_int_equal(pmalloc_free_from(h, &slots[i]), NM_OK);
    assert_int_equal(stats(h).objects_live, 1);
    assert_int_equal(pmalloc_check(h), NM_OK);
    assert_int_equal(pmalloc_close(h), NM_OK);
    pmt_rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reuse_and_errors),
        cmocka_unit_test(test_no_enomem_from_caching),
        cmocka_unit_test(test_store_coalesces),
        cmocka_unit_test(test_store_bounds),
        cmocka_unit_test(test_crash_with_cached),
        cmocka_unit_test(test_threads_large),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
