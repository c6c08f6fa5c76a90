/* Slab morphing (paper Sec. 5.2): randomized single- and multi-threaded
 * stress against a reference model with morphing forced often (SU = 100%,
 * size classes that shift in phases, so slabs of the last phase morph while
 * their blocks live on), reopen, GC recovery of morphed slabs, corrupt
 * morphed-slab headers, the option that turns morphing off. */
#include "nm_test.h"

#include <pthread.h>
#include "nearmem/common/prng.h"
#include "nearmem/common/util.h"
#include "pm_testutil.h"

#define NSLOTS 600
#define ROOT0 16u

/* size bands that shift with the phase: each phase needs classes the last one left sparse */
static size_t band_size(nm_rng *r, unsigned phase)
{
    static const unsigned lo[] = {17, 100, 200, 500, 1000, 40}, hi[] = {32, 112, 256, 600, 1100, 64};
    unsigned b = phase % 6;
    return (size_t)nm_rng_range(r, lo[b], hi[b]);
}

typedef struct model {
    size_t size[NSLOTS];
    uint8_t pat[NSLOTS];
} model;

static bool contents_ok(pmalloc_heap *h, unsigned i, const model *m)
{
    const uint8_t *c = pmalloc_direct(h, pmalloc_get_root(h, ROOT0 + i));
    for (size_t k = 0; k < m->size[i]; k++)
        if (c[k] != m->pat[i]) return false;
    return true;
}

typedef struct spanv { uint64_t p, n; } spanv;
typedef struct walkst { spanv v[NSLOTS + 8]; size_t n; bool overflow; } walkst;
static int collect(void *arg, pmalloc_ptr p, size_t usable)
{
    walkst *w = arg;
    if (w->n == NM_ARRAY_LEN(w->v)) { w->overflow = true; return 1; }
    w->v[w->n++] = (spanv){p, usable};
    return 0;
}

/* allocated == the model's objects, in address order, no overlap */
static void check_walk(pmalloc_heap *h, const model *m)
{
    static walkst w;
    w.n = 0;
    w.overflow = false;
    assert_int_equal(pmalloc_walk(h, collect, &w), NM_OK);
    assert_false(w.overflow);
    size_t live = 0;
    for (unsigned i = 0; i < NSLOTS; i++) live += m->size[i] != 0;
    assert_int_equal(w.n, live);
    for (size_t k = 1; k < w.n; k++) assert_true(w.v[k - 1].p + w.v[k - 1].n <= w.v[k].p);
    for (unsigned i = 0; i < NSLOTS; i++) {
        if (!m->size[i]) continue;
        pmalloc_ptr p = pmalloc_get_root(h, ROOT0 + i);
        assert_true(pmalloc_usable_size(h, p) >= m->size[i]);
    }
}

static unsigned max_generation(const char *dir);

static void stress_one(pmalloc_model md, unsigned ops, uint64_t seed)
{
    char dir[256];
    pmt_tmpdir(dir, sizeof dir, "morph");
    pmalloc_options o = pmt_opts(8u << 20, md, PMALLOC_PERSIST_CPU);
    o.narenas = 1;
    o.morph_su = 100;
    pmalloc_heap *h;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    static model m;
    memset(&m, 0, sizeof m);
    nm_rng r;
    nm_rng_seed(&r, seed);
    uint64_t max_old = 0;
    for (unsigned it = 0; it < ops; it++) {
        unsigned phase = it / 400, i = (unsigned)nm_rng_below(&r, NSLOTS);
        pmalloc_ptr *slot = pmalloc_root_slot(h, ROOT0 + i);
        if (m.size[i]) {
            assert_true(contents_ok(h, i, &m));
            assert_int_equal(pmalloc_free_from(h, slot), NM_OK);
            assert_int_equal(*slot, 0);
            m.size[i] = 0;
        } else if (nm_rng_below(&r, 100) < 70) {
            size_t sz = band_size(&r, phase);
            assert_int_equal(pmalloc_malloc_to(h, sz, slot), NM_OK);
            m.size[i] = sz;
            m.pat[i] = (uint8_t)(nm_rng_u64(&r) | 1);
            memset(pmalloc_direct(h, *slot), m.pat[i], sz);
        }
        if (it % 97 == 0) {
            pmalloc_stats st;
            pmalloc_stats_get(h, &st);
            if (st.morph_old_live > max_old) max_old = st.morph_old_live;
        }
        if (it % 1000 == 999) {
            assert_int_equal(pmalloc_check(h), NM_OK);
            check_walk(h, &m);
        }
    }
    pmalloc_stats st;
    pmalloc_stats_get(h, &st);
    print_message("%s: %llu morphs, up to %llu old blocks live at once, %llu slabs\n", md == PMALLOC_LOG ? "LOG" : "GC",
                  (unsigned long long)st.morphs, (unsigned long long)max_old, (unsigned long long)st.slabs);
    assert_true(st.morphs >= 10);
    assert_true(max_old > 0);
    assert_int_equal(pmalloc_check(h), NM_OK);
    check_walk(h, &m);
    /* clean reopen rebuilds the morphed slabs from their header images */
    assert_int_equal(pmalloc_close(h), NM_OK);
    unsigned gen = max_generation(dir);
    print_message("%s: a slab was morphed %u times\n", md == PMALLOC_LOG ? "LOG" : "GC", gen);
    assert_true(gen >= 2); /* slab_after slabs morph again */
    o.create = false;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    assert_int_equal(pmalloc_check(h), NM_OK);
    check_walk(h, &m);
    for (unsigned i = 0; i < NSLOTS; i++)
        if (m.size[i]) assert_true(contents_ok(h, i, &m));
    /* a crash (no close) and recovery: LOG replays nothing, GC marks both bitmaps */
    pmalloc_abandon(h);
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    pmalloc_recovery_info ri;
    pmalloc_recovery_info_get(h, &ri);
    assert_false(ri.was_clean);
    assert_int_equal(pmalloc_check(h), NM_OK);
    check_walk(h, &m);
    for (unsigned i = 0; i < NSLOTS; i++) {
        if (!m.size[i]) continue;
        assert_true(contents_ok(h, i, &m));
        assert_int_equal(pmalloc_free_from(h, pmalloc_root_slot(h, ROOT0 + i)), NM_OK);
    }
    pmalloc_stats_get(h, &st);
    assert_int_equal(st.objects_live, 0);
    assert_int_equal(st.morph_old_live, 0);
    assert_int_equal(st.morph_slabs_in, 0);
    assert_int_equal(pmalloc_check(h), NM_OK);
    assert_int_equal(pmalloc_close(h), NM_OK);
    pmt_rmdir(dir);
}

static void test_stress_log(void **s) { (void)s; stress_one(PMALLOC_LOG, 40000, nm_test_seed(71)); }
static void test_stress_gc(void **s) { (void)s; stress_one(PMALLOC_GC, 40000, nm_test_seed(72)); }

/* ---- multi-threaded: shared slots, so old blocks are freed by other threads ---- */

#define NLOCKS 16
typedef struct shared {
    pmalloc_heap *h;
    unsigned vnodes; /* > 1: threads hop between virtual NUMA nodes (two-phase remote frees) */
    pthread_mutex_t lock[NLOCKS];
    model m;
    int errors;
} shared;
typedef struct targ { shared *s; uint64_t seed; } targ;

static void *worker(void *p)
{
    targ *a = p;
    shared *s = a->s;
    nm_rng r;
    nm_rng_seed(&r, a->seed);
    for (unsigned it = 0; it < 20000; it++) {
        if (s->vnodes > 1 && it % 64 == 0 && pmalloc_numa_set_node(s->h, (int)nm_rng_below(&r, s->vnodes)) != NM_OK) s->errors++;
        unsigned i = (unsigned)nm_rng_below(&r, NSLOTS);
        pthread_mutex_t *l = &s->lock[i % NLOCKS];
        pthread_mutex_lock(l);
        pmalloc_ptr *slot = pmalloc_root_slot(s->h, ROOT0 + i);
        if (s->m.size[i]) {
            if (!contents_ok(s->h, i, &s->m)) s->errors++;
            if (pmalloc_free_from(s->h, slot) != NM_OK) s->errors++;
            s->m.size[i] = 0;
        } else {
            size_t sz = band_size(&r, it / 500);
            nm_err e = pmalloc_malloc_to(s->h, sz, slot);
            if (e == NM_OK) {
                s->m.size[i] = sz;
                s->m.pat[i] = (uint8_t)(nm_rng_u64(&r) | 1);
                memset(pmalloc_direct(s->h, *slot), s->m.pat[i], sz);
            } else if (e != NM_ENOMEM) {
                s->errors++;
            }
        }
        pthread_mutex_unlock(l);
    }
    return NULL;
}

static void mt_one(pmalloc_model md, unsigned vnodes)
{
    char dir[256];
    pmt_tmpdir(dir, sizeof dir, "morphmt");
    pmalloc_options o = pmt_opts(16u << 20, md, PMALLOC_PERSIST_CPU);
    o.morph_su = 100;
    o.numa_vnodes = vnodes;
    static shared s;
    memset(&s, 0, sizeof s);
    s.vnodes = vnodes;
    for (int i = 0; i < NLOCKS; i++) pthread_mutex_init(&s.lock[i], NULL);
    assert_int_equal(pmalloc_open(dir, &o, &s.h), NM_OK);
    pthread_t t[3];
    targ a[3];
    for (unsigned i = 0; i < 3; i++) {
        a[i] = (targ){&s, nm_test_seed(73) * 100 + i + md * 10};
        pthread_create(&t[i], NULL, worker, &a[i]);
    }
    for (unsigned i = 0; i < 3; i++) pthread_join(t[i], NULL);
    assert_int_equal(s.errors, 0);
    pmalloc_stats st;
    pmalloc_stats_get(s.h, &st);
    print_message("3 threads %s, %u node(s): %llu morphs, %llu old blocks live at the end\n", md == PMALLOC_LOG ? "LOG" : "GC",
                  vnodes ? vnodes : 1, (unsigned long long)st.morphs, (unsigned long long)st.morph_old_live);
    if (vnodes > 1) {
        pmalloc_numa_stats ns;
        assert_int_equal(pmalloc_numa_stats_get(s.h, &ns), NM_OK);
        print_message("  %llu two-phase remote frees\n", (unsigned long long)ns.remote_frees);
        assert_true(ns.remote_frees > 0);
    }
    assert_true(st.morphs > 0);
    assert_int_equal(pmalloc_check(s.h), NM_OK);
    check_walk(s.h, &s.m);
    assert_int_equal(pmalloc_close(s.h), NM_OK);
    o.create = false;
    assert_int_equal(pmalloc_open(dir, &o, &s.h), NM_OK);
    assert_int_equal(pmalloc_check(s.h), NM_OK);
    check_walk(s.h, &s.m);
    for (unsigned i = 0; i < NSLOTS; i++)
        if (s.m.size[i]) assert_true(contents_ok(s.h, i, &s.m));
    assert_int_equal(pmalloc_close(s.h), NM_OK);
    for (int i = 0; i < NLOCKS; i++) pthread_mutex_destroy(&s.lock[i]);
    pmt_rmdir(dir);
}

static void test_mt_log(void **st) { (void)st; mt_one(PMALLOC_LOG, 0); }
static void test_mt_gc(void **st) { (void)st; mt_one(PMALLOC_GC, 0); }
static void test_mt_numa_log(void **st) { (void)st; mt_one(PMALLOC_LOG, 2); }
static void test_mt_numa_gc(void **st) { (void)st; mt_one(PMALLOC_GC, 2); }

/* ---- the paper's scenario (Fragbench W1 in miniature), with and without morphing ---- */

static uint64_t w1_slabs(bool morph, uint64_t *morphs)
{
    char dir[256];
    pmt_tmpdir(dir, sizeof dir, "morphw1");
    pmalloc_options o = pmt_opts(16u << 20, PMALLOC_LOG, PMALLOC_PERSIST_CPU);
    o.narenas = 1;
    o.morph_su = morph ? 0 : PMALLOC_MORPH_OFF;
    pmalloc_heap *h;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    /* a slot array of 8000 pointers in one extent */
    const unsigned n = 8000;
    assert_int_equal(pmalloc_malloc_to(h, n * sizeof(pmalloc_ptr), pmalloc_root_slot(h, 0)), NM_OK);
    pmalloc_ptr *slots = pmalloc_direct(h, pmalloc_get_root(h, 0));
    memset(slots, 0, n * sizeof *slots);
    nm_rng r;
    nm_rng_seed(&r, nm_test_seed(74));
    for (unsigned i = 0; i < n; i++) assert_int_equal(pmalloc_malloc_to(h, 100, &slots[i]), NM_OK);
    for (unsigned i = 0; i < n; i++) /* delete 90% */
        if (nm_rng_below(&r, 10)) assert_int_equal(pmalloc_free_from(h, &slots[i]), NM_OK);
    for (unsigned i = 0; i < n; i++) /* after: 130 B into the free slots */
        if (!slots[i]) assert_int_equal(pmalloc_malloc_to(h, 130, &slots[i]), NM_OK);
    pmalloc_stats st;
    pmalloc_stats_get(h, &st);
    *morphs = st.morphs;
    assert_int_equal(pmalloc_check(h), NM_OK);
    uint64_t slabs = st.slabs;
    if (morph) assert_true(st.morph_old_live > 0);
    for (unsigned i = 0; i < n; i++) assert_int_equal(pmalloc_free_from(h, &slots[i]), NM_OK);
    pmalloc_stats_get(h, &st);
    assert_int_equal(st.morph_old_live, 0);
    assert_int_equal(st.morph_slabs_in, 0); /* the last old block made each slab regular again */
    assert_int_equal(pmalloc_check(h), NM_OK);
    assert_int_equal(pmalloc_close(h), NM_OK);
    pmt_rmdir(dir);
    return slabs;
}

static void test_w1_mini(void **st)
{
    (void)st;
    uint64_t m1, m0;
    uint64_t with = w1_slabs(true, &m1), without = w1_slabs(false, &m0);
    print_message("W1 in miniature: %llu slabs with morphing (%llu morphs), %llu without\n", (unsigned long long)with,
                  (unsigned long long)m1, (unsigned long long)without);
    assert_int_equal(m0, 0);
    assert_true(m1 > 0);
    assert_true(with * 10 < without * 8); /* at least 20% fewer slabs */
}

/* ---- bad input ---- */

static void test_bad_option(void **st)
{
    (void)st;
    char dir[256];
    pmt_tmpdir(dir, sizeof dir, "morphopt");
    pmalloc_options o = pmt_opts(8u << 20, PMALLOC_LOG, PMALLOC_PERSIST_CPU);
    o.morph_su = 101;
    pmalloc_heap *h;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_EINVAL);
    pmt_rmdir(dir);
}

/* Find a morphed slab in a closed heap file: a page starting with the slab
 * magic whose morph word (header bytes 40-47) is set. */
static long find_morphed(const char *dir, uint64_t *word_off)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/%s", dir, PMALLOC_FILE_NAME);
    FILE *f = fopen(p, "rb");
    assert_non_null(f);
    static uint8_t page[4096];
    long found = -1;
    for (long off = 0; fread(page, 1, sizeof page, f) == sizeof page; off += 4096) {
        uint32_t magic;
        uint64_t w;
        memcpy(&magic, page, 4);
        memcpy(&w, page + 40, 8);
        if (off > 0 && magic == 0x42414c53u && w) {
            found = off;
            *word_off = w;
            break;
        }
    }
    fclose(f);
    return found;
}

/* The highest morph generation (bits 16-31 of a morph word) in a closed heap file. */
static unsigned max_generation(const char *dir)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/%s", dir, PMALLOC_FILE_NAME);
    FILE *f = fopen(p, "rb");
    assert_non_null(f);
    static uint8_t page[4096];
    unsigned best = 0;
    for (long off = 0; fread(page, 1, sizeof page, f) == sizeof page; off += 4096) {
        uint32_t magic;
        uint64_t w;
        memcpy(&magic, page, 4);
        memcpy(&w, page + 40, 8);
        if (off > 0 && magic == 0x42414c53u && w && ((w >> 16) & 0xffff) > best) best = (unsigned)((w >> 16) & 0xffff);
    }
    fclose(f);
    return best;
}

static void patch(const char *dir, long off, uint8_t xor_byte)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/%s", dir, PMALLOC_FILE_NAME);
    FILE *f = fopen(p, "r+b");
    assert_non_null(f);
    uint8_t b;
    assert_int_equal(fseek(f, off, SEEK_SET), 0);
    assert_int_equal(fread(&b, 1, 1, f), 1);
    b ^= xor_byte;
    assert_int_equal(fseek(f, off, SEEK_SET), 0);
    assert_int_equal(fwrite(&b, 1, 1, f), 1);
    fclose(f);
}

static void test_corrupt_header(void **st)
{
    (void)st;
    /* three corruptions: the morph word, the image's geometry, the image's slab offset */
    for (int kind = 0; kind < 3; kind++) {
        char dir[256];
        pmt_tmpdir(dir, sizeof dir, "morphbad");
        pmalloc_options o = pmt_opts(8u << 20, PMALLOC_LOG, PMALLOC_PERSIST_CPU);
        o.narenas = 1;
        o.morph_su = 100;
        pmalloc_heap *h;
        assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
        nm_rng r;
        nm_rng_seed(&r, 75);
        for (unsigned it = 0; it < 3000; it++) {
            unsigned i = (unsigned)nm_rng_below(&r, 200);
            pmalloc_ptr *slot = pmalloc_root_slot(h, ROOT0 + i);
            if (*slot) assert_int_equal(pmalloc_free_from(h, slot), NM_OK);
            else assert_int_equal(pmalloc_malloc_to(h, band_size(&r, it / 300), slot), NM_OK);
        }
        pmalloc_stats s;
        pmalloc_stats_get(h, &s);
        assert_true(s.morphs > 0);
        assert_int_equal(pmalloc_close(h), NM_OK);
        uint64_t w = 0;
        long slab = find_morphed(dir, &w);
        assert_true(slab > 0);
        long line = slab + (long)(w & 0xffff) * 64;
        long target = kind == 0 ? slab + 41 : kind == 1 ? line + 12 : line + 40;
        patch(dir, target, 0x04);
        o.create = false;
        assert_int_equal(pmalloc_open(dir, &o, &h), NM_ECORRUPT);
        print_message("corruption %d refused: %s\n", kind, nm_last_errmsg());
        patch(dir, target, 0x04); /* undo: the heap opens again */
        assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
        assert_int_equal(pmalloc_check(h), NM_OK);
        assert_int_equal(pmalloc_close(h), NM_OK);
        pmt_rmdir(dir);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stress_log),
        cmocka_unit_test(test_stress_gc),
        cmocka_unit_test(test_mt_log),
        cmocka_unit_test(test_mt_gc),
        cmocka_unit_test(test_mt_numa_log),
        cmocka_unit_test(test_mt_numa_gc),
        cmocka_unit_test(test_w1_mini),
        cmocka_unit_test(test_bad_option),
        cmocka_unit_test(test_corrupt_header),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
