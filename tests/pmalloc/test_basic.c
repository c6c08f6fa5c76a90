/* PMAlloc: API behaviour, sanity checks, format checks, randomized stress
 * against a reference model with clean reopens, flush accounting. */
#include "nm_test.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "nearmem/common/prng.h"
#include "nearmem/common/util.h"
#include "pm_testutil.h"

#include "nearmem/common/prng.h"

#define MiB (1u << 20)

static void test_roundtrip(void **state)
{
    (void)state;
    char dir[256];
    pmt_tmpdir(dir, sizeof dir, "rt");
    pmalloc_options o = pmt_opts(8 * MiB, PMALLOC_LOG, PMALLOC_PERSIST_CPU);
    pmalloc_heap *h;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    pmalloc_recovery_info ri;
    pmalloc_recovery_info_get(h, &ri);
    assert_true(ri.created);
    size_t sizes[] = {1, 16, 100, 4096, 14336, 14337, 100000, 2 * MiB + 1};
    for (unsigned i = 0; i < NM_ARRAY_LEN(sizes); i++) {
        assert_int_equal(pmalloc_malloc_to(h, sizes[i], pmalloc_root_slot(h, i)), NM_OK);
        pmalloc_ptr p = pmalloc_get_root(h, i);
        assert_true(p != 0);
        assert_true(pmalloc_usable_size(h, p) >= sizes[i]);
        assert_true(p % 16 == 0);
        memset(pmalloc_direct(h, p), (int)(0x10 + i), sizes[i]);
        pmalloc_persist(h, pmalloc_direct(h, p), sizes[i]);
    }
    pmalloc_stats st;
    assert_int_equal(pmalloc_stats_get(h, &st), NM_OK);
    assert_int_equal(st.objects_live, NM_ARRAY_LEN(sizes));
    assert_true(st.extents == 3 && st.slabs >= 1);
    assert_int_equal(pmalloc_check(h), NM_OK);
    void *old_base = pmalloc_direct(h, pmalloc_get_root(h, 0));
    assert_int_equal(pmalloc_close(h), NM_OK);

    /* occupy the old address range so the heap maps elsewhere */
    void *blocker = mmap(NULL, 16 * MiB, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    o.create = false;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    pmalloc_recovery_info_get(h, &ri);
    assert_true(ri.was_clean && !ri.created);
    (void)old_base;
    for (unsigned i = 0; i < NM_ARRAY_LEN(sizes); i++) {
        pmalloc_ptr p = pmalloc_get_root(h, i);
        const unsigned char *c = pmalloc_direct(h, p);
        for (size_t k = 0; k < sizes[i]; k += 97) assert_int_equal(c[k], 0x10 + i);
        assert_int_equal(c[sizes[i] - 1], 0x10 + i);
    }
    for (unsigned i = 0; i < NM_ARRAY_LEN(sizes); i++) {
        assert_int_equal(pmalloc_free_from(h, pmalloc_root_slot(h, i)), NM_OK);
        assert_int_equal(pmalloc_get_root(h, i), 0);
    }
    assert_int_equal(pmalloc_stats_get(h, &st), NM_OK);
    assert_int_equal(st.objects_live, 0);
    assert_int_equal(st.bytes_live, 0);
    assert_int_equal(pmalloc_check(h), NM_OK);
    assert_int_equal(pmalloc_close(h), NM_OK);
    munmap(blocker, 16 * MiB);
    pmt_rmdir(dir);
}

static void test_bad_input(void **state)
{
    (void)state;
    char dir[256];
    pmt_tmpdir(dir, sizeof dir, "bad");
    pmalloc_options o = pmt_opts(8 * MiB, PMALLOC_LOG, PMALLOC_PERSIST_CPU);
    pmalloc_heap *h;
    o.create = false;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_ENOENT);
    o.create = true;
    o.size = 1000;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_ERANGE);
    o.size = 8 * MiB;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    pmalloc_heap *h2;
    assert_int_equal(pmalloc_open(dir, &o, &h2), NM_EBUSY); /* already open */
    pmalloc_ptr *r0 = pmalloc_root_slot(h, 0), *r1 = pmalloc_root_slot(h, 1), *r2 = pmalloc_root_slot(h, 2);
    assert_int_equal(pmalloc_malloc_to(h, 0, r0), NM_ERANGE);
    assert_int_equal(pmalloc_malloc_to(h, 64 * MiB, r0), NM_ERANGE);
    pmalloc_ptr local = 0;
    assert_int_equal(pmalloc_malloc_to(h, 64, &local), NM_EINVAL); /* not in the heap */
    assert_int_equal(pmalloc_malloc_to(h, 64, (pmalloc_ptr *)((char *)r0 + 4)), NM_EINVAL);
    assert_null(pmalloc_root_slot(h, PMALLOC_NROOTS));
    assert_int_equal(pmalloc_set_root(h, PMALLOC_NROOTS, 0), NM_ERANGE);
    assert_int_equal(pmalloc_set_root(h, 3, 12345), NM_EINVAL);

    assert_int_equal(pmalloc_malloc_to(h, 64, r0), NM_OK);
    assert_int_equal(pmalloc_malloc_to(h, 100000, r1), NM_OK);
    pmalloc_ptr small = *r0, large = *r1;
    /* destinations must be roots or inside allocated objects */
    pmalloc_ptr *in_small = pmalloc_direct(h, small + 8), *in_large = pmalloc_direct(h, large + 4096);
    *in_small = 0;
    assert_int_equal(pmalloc_malloc_to(h, 32, in_small), NM_OK);
    assert_int_equal(pmalloc_free_from(h, in_small), NM_OK);
    *in_large = 0;
    assert_int_equal(pmalloc_malloc_to(h, 32, in_large), NM_OK);
    assert_int_equal(pmalloc_free_from(h, in_large), NM_OK);
    pmalloc_ptr *in_free = pmalloc_direct(h, small + 64 * 5); /* a free block of the same slab */
    assert_int_equal(pmalloc_malloc_to(h, 32, in_free), NM_EINVAL);
    assert_int_equal(pmalloc_malloc_to(h, 32, pmalloc_direct(h, small & ~(pmalloc_ptr)4095)), NM_EINVAL); /* slab header */
    assert_int_equal(pmalloc_malloc_to(h, 32, pmalloc_direct(h, large + 200 * 1024)), NM_EINVAL); /* free extent */
    assert_int_equal(pmalloc_free_from(h, in_free), NM_EINVAL);
    pmalloc_stats before, after;
    pmalloc_stats_get(h, &before);
    /* not at a block start / inside an extent / outside the data area */
    assert_int_equal(pmalloc_set_root(h, 2, small + 8), NM_OK);
    assert_int_equal(pmalloc_free_from(h, r2), NM_EBADFREE);
    assert_int_equal(*r2, small + 8);
    assert_int_equal(pmalloc_set_root(h, 2, large + 4096), NM_OK);
    assert_int_equal(pmalloc_free_from(h, r2), NM_EBADFREE);
    pmalloc_ptr in_sb = small - PMALLOC_PTR_OFFSET(small) + 64; /* this heap's tag, in the superblock */
    *r2 = in_sb;
    assert_int_equal(pmalloc_free_from(h, r2), NM_EBADFREE);
    assert_int_equal(*r2, in_sb);
    *r2 = 64; /* no tag: not a pointer of this heap */
    assert_int_equal(pmalloc_free_from(h, r2), NM_EINVAL);
    assert_int_equal(*r2, 64);
    /* double frees */
    assert_int_equal(pmalloc_set_root(h, 2, small), NM_OK);
    assert_int_equal(pmalloc_free_from(h, r0), NM_OK);
    assert_int_equal(pmalloc_free_from(h, r2), NM_EDOUBLEFREE);
    assert_int_equal(*r2, small);
    assert_int_equal(pmalloc_set_root(h, 2, large), NM_OK);
    assert_int_equal(pmalloc_free_from(h, r1), NM_OK);
    assert_int_equal(pmalloc_free_from(h, r2), NM_EDOUBLEFREE);
    assert_int_equal(*r2, large);
    pmalloc_stats_get(h, &after);
    assert_int_equal(after.objects_live, before.objects_live - 2);
    assert_int_equal(pmalloc_check(h), NM_OK);
    *r2 = 0;
    assert_int_equal(pmalloc_free_from(h, r2), NM_OK); /* NULL: nothing */
    assert_int_equal(pmalloc_close(h), NM_OK);

    /* a corrupt superblock and a foreign file are refused */
    char path[400];
    snprintf(path, sizeof path, "%s/%s", dir, PMALLOC_FILE_NAME);
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    uint32_t junk = 0xdeadbeef;
    assert_int_equal(pwrite(fd, &junk, 4, 16), 4); /* heap_size field */
    o.create = false;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_ECORRUPT);
    assert_int_equal(pwrite(fd, "NOTAHEAP", 8, 0), 8);
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_EFORMAT);
    close(fd);
    assert_int_equal(truncate(path, 100), 0);
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_EFORMAT);
    pmt_rmdir(dir);
}

/* Randomized stress against a reference model, with clean reopens. */
static void stress(pmalloc_model model, uint64_t seed)
{
    char dir[256];
    pmt_tmpdir(dir, sizeof dir, "stress");
    pmalloc_options o = pmt_opts(16 * MiB, model, PMALLOC_PERSIST_CPU);
    pmalloc_heap *h;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    enum { N = 400 };
    static size_t msize[N];
    static uint8_t mpat[N];
    memset(msize, 0, sizeof msize);
    nm_rng r;
    nm_rng_seed(&r, seed);
    for (int it = 0; it < 12000; it++) {
        unsigned i = (unsigned)nm_rng_below(&r, N);
        pmalloc_ptr *slot = pmalloc_root_slot(h, i);
        if (msize[i]) {
            const uint8_t *c = pmalloc_direct(h, *slot);
            assert_true(pmalloc_usable_size(h, *slot) >= msize[i]);
            assert_int_equal(c[0], mpat[i]);
            assert_int_equal(c[msize[i] - 1], mpat[i]);
            assert_int_equal(c[msize[i] / 2], mpat[i]);
            assert_int_equal(pmalloc_free_from(h, slot), NM_OK);
            msize[i] = 0;
        } else {
            size_t sz = nm_rng_below(&r, 10) == 0 ? nm_rng_range(&r, 14337, 300000) : nm_rng_range(&r, 1, 3000);
            nm_err e = pmalloc_malloc_to(h, sz, slot);
            if (e == NM_ENOMEM) continue;
            assert_int_equal(e, NM_OK);
            msize[i] = sz;
            mpat[i] = (uint8_t)nm_rng_u64(&r);
            memset(pmalloc_direct(h, *slot), mpat[i], sz);
        }
        if (it % 3000 == 2999) {
            assert_int_equal(pmalloc_check(h), NM_OK);
            assert_int_equal(pmalloc_close(h), NM_OK);
            o.create = false;
            assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
            assert_int_equal(pmalloc_check(h), NM_OK);
        }
    }
    /* no two live objects overlap */
    struct { pmalloc_ptr p; size_t n; } *v = calloc(N, sizeof *v);
    unsigned nv = 0;
    for (unsigned i = 0; i < N; i++)
        if (msize[i]) { v[nv].p = pmalloc_get_root(h, i); v[nv].n = pmalloc_usable_size(h, v[nv].p); nv++; }
    for (unsigned a = 0; a < nv; a++)
        for (unsigned b = a + 1; b < nv; b++)
            assert_true(v[a].p + v[a].n <= v[b].p || v[b].p + v[b].n <= v[a].p);
    free(v);
    pmalloc_stats st;
    pmalloc_stats_get(h, &st);
    assert_int_equal(st.objects_live, nv);
    assert_int_equal(pmalloc_close(h), NM_OK);
    pmt_rmdir(dir);
}

static void test_stress_log(void **state) { (void)state; stress(PMALLOC_LOG, nm_test_seed(11)); }
static void test_stress_gc(void **state) { (void)state; stress(PMALLOC_GC, nm_test_seed(12)); }

/* Flush accounting: a LOG small malloc = one redo-record line and one fence,
 * plus its share of the checkpoints' write-backs (bitmap lines; the pointer
 * words are user lines); interleaving removes the reflushes that the
 * sequential layout causes (two records per line). */
static double reflush_pct(unsigned stripes, double *meta_per_op, double *fences_per_op)
{
    char dir[256];
    pmt_tmpdir(dir, sizeof dir, "flush");
    pmalloc_options o = pmt_opts(8 * MiB, PMALLOC_LOG, PMALLOC_PERSIST_SIM);
    o.stripes = stripes;
    o.redo_records = 1024; /* a checkpoint every 512 operations (the default for an 8 MiB heap is 64) */
    pmalloc_heap *h;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    pmalloc_stats st;
    /* warm up: the first fill creates the slab */
    assert_int_equal(pmalloc_malloc_to(h, 64, pmalloc_root_slot(h, 1000)), NM_OK);
    pmalloc_stats_reset_counters(h);
    unsigned n = 600;
    for (unsigned i = 0; i < n; i++) assert_int_equal(pmalloc_malloc_to(h, 64, pmalloc_root_slot(h, i)), NM_OK);
    pmalloc_stats_get(h, &st);
    *meta_per_op = (double)st.meta_flushes / n;
    *fences_per_op = (double)st.fences / n;
    double pct = 100.0 * (double)st.reflushes / (double)st.meta_flushes;
    pmalloc_abandon(h);
    pmt_rmdir(dir);
    return pct;
}

static void test_flush_accounting(void **state)
{
    (void)state;
    double m6, f6, m1, f1;
    double inter = reflush_pct(6, &m6, &f6), seq = reflush_pct(1, &m1, &f1);
    print_message("reflush interleaved %.1f%% sequential %.1f%%, meta flushes/op %.2f, fences/op %.2f\n", inter, seq, m6, f6);
    assert_true(seq > 40.0);
    assert_true(inter < 5.0);
    assert_true(m6 >= 1.0 && m6 < 1.1);
    assert_true(f6 >= 1.0 && f6 < 1.05);
}


/* Runtime slow GC of the bookkeeping log, and a clean reopen after it. */
static void test_bklog_gc(void **state)
{
    (void)state;
    char dir[256];
    pmt_tmpdir(dir, sizeof dir, "bkgc");
    pmalloc_options o = pmt_opts(4 * MiB, PMALLOC_LOG, PMALLOC_PERSIST_CPU);
    pmalloc_heap *h;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    assert_int_equal(pmalloc_malloc_to(h, 40000, pmalloc_root_slot(h, 7)), NM_OK); /* a survivor */
    nm_rng r;
    nm_rng_seed(&r, nm_test_seed(5));
    unsigned live = 1;
    for (int i = 0; i < 6000; i++) {
        /* GCs happen while an extent is being allocated or freed */
        pmalloc_ptr *slot = pmalloc_root_slot(h, (unsigned)nm_rng_below(&r, 6));
        if (*slot) { assert_int_equal(pmalloc_free_from(h, slot), NM_OK); live--; }
        else { assert_int_equal(pmalloc_malloc_to(h, (size_t)nm_rng_range(&r, 14337, 90000), slot), NM_OK); live++; }
        if (i % 1000 == 999) assert_int_equal(pmalloc_check(h), NM_OK);
    }
    pmalloc_stats st;
    pmalloc_stats_get(h, &st);
    print_message("bookkeeping-log GCs: %llu slow, %llu fast\n", (unsigned long long)st.bklog_gcs,
                  (unsigned long long)st.bklog_fast_gcs);
    /* the long-lived extent pins the chunks after it (their tombstones point
     * back into it), so this churn is reclaimed by slow GCs */
    assert_true(st.bklog_gcs >= 2);
    assert_int_equal(st.extents, live);
    assert_int_equal(pmalloc_check(h), NM_OK);
    assert_int_equal(pmalloc_close(h), NM_OK);
    o.create = false;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    assert_int_equal(pmalloc_usable_size(h, pmalloc_get_root(h, 7)), 40960);
    assert_int_equal(pmalloc_check(h), NM_OK);
    /* without long-lived entries, old chunks die whole: the fast GC unlinks them */
    assert_int_equal(pmalloc_free_from(h, pmalloc_root_slot(h, 7)), NM_OK);
    for (unsigned k = 0; k < 6; k++) assert_int_equal(pmalloc_free_from(h, pmalloc_root_slot(h, k)), NM_OK);
    pmalloc_stats_get(h, &st);
    uint64_t slow0 = st.bklog_gcs;
    for (int i = 0; i < 6000; i++) {
        pmalloc_ptr *slot = pmalloc_root_slot(h, (unsigned)nm_rng_below(&r, 6));
        if (*slot) assert_int_equal(pmalloc_free_from(h, slot), NM_OK);
        else assert_int_equal(pmalloc_malloc_to(h, (size_t)nm_rng_range(&r, 14337, 90000), slot), NM_OK);
    }
    pmalloc_stats_get(h, &st);
    print_message("then: %llu slow, %llu fast\n", (unsigned long long)(st.bklog_gcs - slow0), (unsigned long long)st.bklog_fast_gcs);
    assert_true(st.bklog_fast_gcs >= 1);
    assert_int_equal(pmalloc_check(h), NM_OK);
    assert_int_equal(pmalloc_close(h), NM_OK);
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    assert_int_equal(pmalloc_check(h), NM_OK);
    assert_int_equal(pmalloc_close(h), NM_OK);
    pmt_rmdir(dir);
}

/* eADR: no cache flushes at all, fences only, interleaving off; msync mode works. */
static void test_modes(void **state)
{
    (void)state;
    char dir[256];
    pmt_tmpdir(dir, sizeof dir, "modes");
    pmalloc_options o = pmt_opts(4 * MiB, PMALLOC_LOG, PMALLOC_PERSIST_CPU);
    o.eadr = PMALLOC_EADR_ON;
    pmalloc_heap *h;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    pmalloc_stats_reset_counters(h);
    for (unsigned i = 0; i < 50; i++) assert_int_equal(pmalloc_malloc_to(h, 100, pmalloc_root_slot(h, i)), NM_OK);
    pmalloc_stats st;
    pmalloc_stats_get(h, &st);
    assert_true(st.eadr);
    assert_int_equal(st.stripes, 1);
    assert_int_equal(st.flushes, 0);
    assert_true(st.fences >= 50); /* one per operation */
    assert_int_equal(pmalloc_close(h), NM_OK);
    o.eadr = PMALLOC_EADR_OFF;
    o.persist = PMALLOC_PERSIST_MSYNC;
    o.create = false;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    pmalloc_stats_get(h, &st);
    assert_int_equal(st.persist, PMALLOC_PERSIST_MSYNC);
    assert_int_equal(st.objects_live, 50);
    for (unsigned i = 0; i < 50; i++) assert_int_equal(pmalloc_free_from(h, pmalloc_root_slot(h, i)), NM_OK);
    assert_int_equal(pmalloc_check(h), NM_OK);
    assert_int_equal(pmalloc_close(h), NM_OK);
    pmt_rmdir(dir);
}

/* Damaged metadata is refused at open with NM_ECORRUPT, not misread. */
static void corrupt_and_open(const char *dir, long off, uint32_t val)
{
    char path[400];
    snprintf(path, sizeof path, "%s/%s", dir, PMALLOC_FILE_NAME);
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    uint32_t old;
    assert_int_equal(pread(fd, &old, 4, off), 4);
    assert_int_equal(pwrite(fd, &val, 4, off), 4);
    pmalloc_options o = pmt_opts(8 * MiB, PMALLOC_LOG, PMALLOC_PERSIST_CPU);
    o.create = false;
    pmalloc_heap *h;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_ECORRUPT);
    print_message("refused: %s\n", nm_last_errmsg());
    assert_int_equal(pwrite(fd, &old, 4, off), 4); /* repaired: opens again */
    close(fd);
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    assert_int_equal(pmalloc_check(h), NM_OK);
    assert_int_equal(pmalloc_close(h), NM_OK);
}

static void test_corrupt_metadata(void **state)
{
    (void)state;
    char dir[256];
    pmt_tmpdir(dir, sizeof dir, "corrupt");
    pmalloc_options o = pmt_opts(8 * MiB, PMALLOC_LOG, PMALLOC_PERSIST_CPU);
    pmalloc_heap *h;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    assert_int_equal(pmalloc_malloc_to(h, 64, pmalloc_root_slot(h, 0)), NM_OK);
    assert_int_equal(pmalloc_malloc_to(h, 50000, pmalloc_root_slot(h, 1)), NM_OK);
    long slab = (long)(PMALLOC_PTR_OFFSET(pmalloc_get_root(h, 0)) & ~(uint64_t)4095); /* the first slab starts the data area */
    assert_int_equal(pmalloc_close(h), NM_OK);
    long bk = 0; /* the first bookkeeping-log chunk: after superblock, roots and redo rings */
    {
        char path[400];
        snprintf(path, sizeof path, "%s/%s", dir, PMALLOC_FILE_NAME);
        int fd = open(path, O_RDONLY);
        assert_true(fd >= 0);
        for (long off = 3 * 4096; off < 4 * (long)MiB && !bk; off += 1024) {
            uint32_t w[2];
            assert_int_equal(pread(fd, w, 8, off), 8);
            if (w[0] == 0x4b4e4843u) bk = off; /* "CHNK": chunk 0, the list's head */
        }
        close(fd);
        assert_true(bk > 0);
    }
    corrupt_and_open(dir, bk, 0x12345678);         /* bookkeeping-log chunk magic */
    corrupt_and_open(dir, bk + 4, 0x7fffffff);     /* chunk id (header checksum) */
    corrupt_and_open(dir, bk + 16, 3);             /* chunk next pointer (its check) */
    corrupt_and_open(dir, slab, 0);                /* slab header magic */
    corrupt_and_open(dir, slab + 8, 12345);        /* slab block size (checksum) */
    corrupt_and_open(dir, 128, 0x0bad0bad);        /* session state */
    pmt_rmdir(dir);
}

/* Each slab keeps its own stripe count: a heap reopened with another one
 * still maps the old slabs' bits correctly. */
static void test_stripes_reopen(void **state)
{
    (void)state;
    char dir[256];
    pmt_tmpdir(dir, sizeof dir, "stripes");
    const unsigned seq[] = {16, 1, 3, 6};
    pmalloc_heap *h;
    for (unsigned round = 0; round < NM_ARRAY_LEN(seq); round++) {
        pmalloc_options o = pmt_opts(8 * MiB, PMALLOC_LOG, PMALLOC_PERSIST_CPU);
        o.stripes = seq[round];
        o.create = round == 0;
        assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
        assert_int_equal(pmalloc_check(h), NM_OK);
        for (unsigned i = 0; i < 200; i++) {
            unsigned slot = round * 200 + i;
            assert_int_equal(pmalloc_malloc_to(h, 16 + (i % 7) * 40, pmalloc_root_slot(h, slot)), NM_OK);
            *(uint64_t *)pmalloc_direct(h, pmalloc_get_root(h, slot)) = slot;
        }
        for (unsigned slot = 0; slot < (round + 1) * 200; slot++)
            assert_int_equal(*(uint64_t *)pmalloc_direct(h, pmalloc_get_root(h, slot)), slot);
        assert_int_equal(pmalloc_close(h), NM_OK);
    }
    pmalloc_options o = pmt_opts(8 * MiB, PMALLOC_LOG, PMALLOC_PERSIST_CPU);
    o.create = false;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    for (unsigned slot = 0; slot < 800; slot++) assert_int_equal(pmalloc_free_from(h, pmalloc_root_slot(h, slot)), NM_OK);
    pmalloc_stats st;
    pmalloc_stats_get(h, &st);
    assert_int_equal(st.objects_live, 0);
    assert_int_equal(pmalloc_check(h), NM_OK);
    assert_int_equal(pmalloc_close(h), NM_OK);
    pmt_rmdir(dir);
}

/* Decay: a free extent left alone gives its pages back to the file system;
 * space never handed out since the heap was created is left alone (it holds
 * nothing of ours: punching it only refaulted pages a user had prefaulted). */
static void test_decay(void **state)
{
    (void)state;
    char dir[256], path[400];
    pmt_tmpdir(dir, sizeof dir, "decay");
    snprintf(path, sizeof path, "%s/%s", dir, PMALLOC_FILE_NAME);
    pmalloc_options o = pmt_opts(16 * MiB, PMALLOC_LOG, PMALLOC_PERSIST_CPU);
    o.decay_ms = 1;
    pmalloc_heap *h;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    pmalloc_ptr *r0 = pmalloc_root_slot(h, 0), *guard = pmalloc_root_slot(h, 2);
    assert_int_equal(pmalloc_malloc_to(h, 4 * MiB, r0), NM_OK);
    /* a guard keeps the freed extent from merging with the never-used rest */
    assert_int_equal(pmalloc_malloc_to(h, 20000, guard), NM_OK);
    memset(pmalloc_direct(h, *r0), 0x5a, 4 * MiB);
    pmalloc_persist(h, pmalloc_direct(h, *r0), 4 * MiB);
    msync(pmalloc_direct(h, *r0 & ~(pmalloc_ptr)4095), 4 * MiB, MS_SYNC);
    struct stat st0, st1;
    assert_int_equal(stat(path, &st0), 0);
    assert_int_equal(pmalloc_free_from(h, r0), NM_OK);
    usleep(120 * 1000);
    assert_int_equal(pmalloc_free_from(h, guard), NM_OK); /* a free runs the decay pass (this one goes to a cache) */
    pmalloc_stats st;
    pmalloc_stats_get(h, &st);
    print_message("retained %llu bytes; file blocks %lld -> ", (unsigned long long)st.retained_bytes, (long long)st0.st_blocks);
    /* r0's extent, and not the never-used rest of the heap (older than the decay time too) */
    assert_int_equal(st.retained_bytes, 4 * MiB);
    assert_int_equal(stat(path, &st1), 0);
    print_message("%lld\n", (long long)st1.st_blocks);
    assert_true(st1.st_blocks < st0.st_blocks);
    /* the space is allocatable again and holds data */
    assert_int_equal(pmalloc_malloc_to(h, 4 * MiB, r0), NM_OK);
    memset(pmalloc_direct(h, *r0), 0x33, 4 * MiB);
    assert_int_equal(((uint8_t *)pmalloc_direct(h, *r0))[4 * MiB - 1], 0x33);
    assert_int_equal(pmalloc_check(h), NM_OK);
    assert_int_equal(pmalloc_close(h), NM_OK);
    pmt_rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_stress_log),
        cmocka_unit_test(test_stress_gc),
        cmocka_unit_test(test_flush_accounting),
        cmocka_unit_test(test_bklog_gc),
        cmocka_unit_test(test_modes),
        cmocka_unit_test(test_corrupt_metadata),
        cmocka_unit_test(test_stripes_reopen),
        cmocka_unit_test(test_decay),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
