/* PMAlloc: the one-line commit's contract (pmalloc.h, "When a pointer word is
 * durable"), checked on power-failure images (PMALLOC_PERSIST_SIM):
 *  - malloc_to returns with the pointer word possibly stale in the heap file;
 *    pmalloc_open replays it;
 *  - pmalloc_sync writes it back;
 *  - set_ptr is ordered after malloc_to on the same word (a move);
 *  - a plain store to such a word before a checkpoint is replaced by the
 *    replay; after pmalloc_sync it is kept;
 *  - a word inside an object freed later is never written by recovery;
 *  - one line and one fence per operation (plus the checkpoints' share);
 *  - the redo rings are a pool: checkpoints come when the region fills up
 *    (not per thread's share, not per released slab), and checkpoint_records
 *    bounds the records a crash leaves to replay;
 *  - an empty LOG slab waits for the next checkpoint to be released, and is
 *    free space for an allocation that finds no pages meanwhile. */
#include "nm_test.h"

#include <pthread.h>

#include <fcntl.h>

#include "nearmem/common/util.h"
#include "pm_testutil.h"

#define MiB (1u << 20)

static pmalloc_options sim_opts(void)
{
    pmalloc_options o = pmt_opts(8 * MiB, PMALLOC_LOG, PMALLOC_PERSIST_SIM);
    o.narenas = 1;
    o.redo_records = 1024; /* no checkpoint within these few operations */
    return o;
}

/* The 8 bytes at heap offset `off` of the image in dir (a one-file heap). */
static uint64_t image_word(const char *dir, uint64_t off)
{
    char path[400];
    snprintf(path, sizeof path, "%s/%s", dir, PMALLOC_FILE_NAME);
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    uint64_t w = 0;
    assert_int_equal(pread(fd, &w, 8, (off_t)off), 8);
    close(fd);
    return w;
}

static uint64_t slot_off(pmalloc_heap *h, unsigned i) { return PMALLOC_PTR_OFFSET(pmalloc_ptr_of(h, pmalloc_root_slot(h, i))); }

static pmalloc_heap *recover(const char *img)
{
    pmalloc_options o = pmt_opts(8 * MiB, PMALLOC_LOG, PMALLOC_PERSIST_CPU);
    o.create = false;
    o.narenas = 1;
    pmalloc_heap *h;
    assert_int_equal(pmalloc_open(img, &o, &h), NM_OK);
    assert_int_equal(pmalloc_check(h), NM_OK);
    return h;
}

static void test_pointer_word_replayed(void **st)
{
    (void)st;
    char dir[256], img[256];
    pmt_tmpdir(dir, sizeof dir, "redo");
    pmt_tmpdir(img, sizeof img, "redoimg");
    pmalloc_options o = sim_opts();
    pmalloc_heap *h;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    assert_int_equal(pmalloc_malloc_to(h, 100, pmalloc_root_slot(h, 3)), NM_OK);
    pmalloc_ptr p = pmalloc_get_root(h, 3);
    assert_true(p != 0); /* the program sees it at once */
    uint64_t off = slot_off(h, 3);
    /* a crash now: the record is durable, the word is not written back yet */
    assert_int_equal(pmalloc_sim_snapshot(h, img, 1, 0), NM_OK);
    assert_int_equal(image_word(img, off), 0);
    pmalloc_heap *r = recover(img);
    pmalloc_recovery_info ri;
    pmalloc_recovery_info_get(r, &ri);
    assert_false(ri.was_clean);
    assert_int_equal(pmalloc_get_root(r, 3), p); /* replayed */
    assert_true(pmalloc_usable_size(r, p) >= 100);
    assert_int_equal(pmalloc_close(r), NM_OK);
    /* pmalloc_sync writes it back: the file holds what the program sees */
    assert_int_equal(pmalloc_sync(h), NM_OK);
    assert_int_equal(pmalloc_sim_snapshot(h, img, 2, 0), NM_OK);
    assert_int_equal(image_word(img, off), p);
    pmalloc_stats s;
    pmalloc_stats_get(h, &s);
    assert_true(s.checkpoints >= 1);
    pmalloc_abandon(h);
    pmt_rmdir(img);
    pmt_rmdir(dir);
}

static void test_set_ptr_and_plain_stores(void **st)
{
    (void)st;
    char dir[256], img[256];
    pmt_tmpdir(dir, sizeof dir, "redo2");
    pmt_tmpdir(img, sizeof img, "redo2img");
    pmalloc_options o = sim_opts();
    pmalloc_heap *h;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    pmalloc_ptr *r0 = pmalloc_root_slot(h, 0), *r1 = pmalloc_root_slot(h, 1), *r2 = pmalloc_root_slot(h, 2);
    /* a move through set_ptr is ordered after the malloc_to that wrote r0 */
    assert_int_equal(pmalloc_malloc_to(h, 64, r0), NM_OK);
    pmalloc_ptr p = *r0;
    assert_int_equal(pmalloc_set_ptr(h, r1, p), NM_OK);
    assert_int_equal(pmalloc_set_ptr(h, r0, 0), NM_OK);
    assert_int_equal(pmalloc_set_ptr(h, r2, 12345), NM_EINVAL); /* not a pointer of this heap */
    assert_int_equal(pmalloc_set_ptr(h, NULL, p), NM_EINVAL);
    /* a plain store (persisted) to a word malloc_to wrote, with no checkpoint
     * between: recovery replays the operation over it, as documented */
    assert_int_equal(pmalloc_malloc_to(h, 64, r2), NM_OK);
    pmalloc_ptr q = *r2;
    *r2 = 0;
    pmalloc_persist(h, r2, 8);
    assert_int_equal(pmalloc_sim_snapshot(h, img, 3, 0), NM_OK);
    pmalloc_heap *r = recover(img);
    assert_int_equal(pmalloc_get_root(r, 0), 0);
    assert_int_equal(pmalloc_get_root(r, 1), p);
    assert_int_equal(pmalloc_get_root(r, 2), q);
    assert_int_equal(pmalloc_close(r), NM_OK);
    /* after pmalloc_sync the word is the program's: a plain store survives */
    *r2 = q;
    assert_int_equal(pmalloc_sync(h), NM_OK);
    *r2 = 0;
    pmalloc_persist(h, r2, 8);
    assert_int_equal(pmalloc_set_root(h, 4, q), NM_OK); /* still reachable: no leak */
    assert_int_equal(pmalloc_sim_snapshot(h, img, 4, 0), NM_OK);
    r = recover(img);
    assert_int_equal(pmalloc_get_root(r, 2), 0);
    assert_int_equal(pmalloc_get_root(r, 4), q);
    assert_int_equal(pmalloc_close(r), NM_OK);
    pmalloc_abandon(h);
    pmt_rmdir(img);
    pmt_rmdir(dir);
}

/* A word inside an object that a later free_from released is not replayed:
 * that memory may hold another object by then. */
static void test_freed_container_not_written(void **st)
{
    (void)st;
    char dir[256], img[256];
    pmt_tmpdir(dir, sizeof dir, "redo3");
    pmt_tmpdir(img, sizeof img, "redo3img");
    pmalloc_options o = sim_opts();
    pmalloc_heap *h;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    pmalloc_ptr *r0 = pmalloc_root_slot(h, 0), *r1 = pmalloc_root_slot(h, 1);
    for (int large = 0; large < 2; large++) {
        size_t sz = large ? 40000 : 256;
        assert_int_equal(pmalloc_malloc_to(h, sz, r0), NM_OK); /* X */
        pmalloc_ptr x = *r0;
        pmalloc_ptr *field = pmalloc_direct(h, x + 64);
        *field = 0;
        assert_int_equal(pmalloc_malloc_to(h, 64, field), NM_OK); /* Y, its pointer inside X */
        assert_int_equal(pmalloc_free_from(h, field), NM_OK);
        assert_int_equal(pmalloc_free_from(h, r0), NM_OK);     /* X freed: the word inside it is dead */
        /* Z reuses X's memory (allocate until it does) */
        unsigned nz = 0;
        for (; nz < 64; nz++) {
            assert_int_equal(pmalloc_malloc_to(h, sz, pmalloc_root_slot(h, 10 + nz)), NM_OK);
            if (pmalloc_get_root(h, 10 + nz) == x) break;
        }
        assert_true(nz < 64);
        assert_int_equal(pmalloc_set_ptr(h, r1, x), NM_OK);
        assert_int_equal(pmalloc_set_root(h, 10 + nz, 0), NM_OK);
        memset(pmalloc_direct(h, *r1), 0x77, sz);
        pmalloc_persist(h, pmalloc_direct(h, *r1), sz);
        assert_int_equal(pmalloc_sim_snapshot(h, img, 5, 0), NM_OK);
        pmalloc_heap *r = recover(img);
        const unsigned char *z = pmalloc_direct(r, pmalloc_get_root(r, 1));
        for (size_t k = 0; k < sz; k++) assert_int_equal(z[k], 0x77);
        assert_int_equal(pmalloc_get_root(r, 0), 0);
        pmalloc_stats s;
        pmalloc_stats_get(r, &s);
        assert_int_equal(s.objects_live, 1 + nz); /* Z and the blocks taken on the way */
        assert_int_equal(pmalloc_close(r), NM_OK);
        assert_int_equal(pmalloc_free_from(h, r1), NM_OK);
        for (unsigned k = 0; k < nz; k++) assert_int_equal(pmalloc_free_from(h, pmalloc_root_slot(h, 10 + k)), NM_OK);
    }
    pmalloc_abandon(h);
    pmt_rmdir(img);
    pmt_rmdir(dir);
}

/* One line and one fence per committed operation, small and large, and the
 * checkpoints' share over a steady run. */
static void test_one_line(void **st)
{
    (void)st;
    char dir[256];
    pmt_tmpdir(dir, sizeof dir, "redo4");
    pmalloc_options o = pmt_opts(64 * MiB, PMALLOC_LOG, PMALLOC_PERSIST_CPU);
    o.narenas = 1;
    pmalloc_heap *h;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    assert_int_equal(pmalloc_malloc_to(h, 64 * 2000, pmalloc_root_slot(h, 0)), NM_OK);
    pmalloc_ptr *slots = pmalloc_direct(h, pmalloc_get_root(h, 0));
    memset(slots, 0, 64 * 2000);
    pmalloc_persist(h, slots, 64 * 2000);
    for (unsigned i = 0; i < 16; i++) assert_int_equal(pmalloc_malloc_to(h, 64, &slots[i * 8]), NM_OK); /* warm-up: slab */
    for (unsigned i = 0; i < 16; i++) assert_int_equal(pmalloc_free_from(h, &slots[i * 8]), NM_OK);
    assert_int_equal(pmalloc_sync(h), NM_OK);
    /* one operation: exactly its record */
    pmalloc_stats_reset_counters(h);
    assert_int_equal(pmalloc_malloc_to(h, 64, &slots[0]), NM_OK);
    pmalloc_stats s;
    pmalloc_stats_get(h, &s);
    assert_int_equal(s.flushes, 1);
    assert_int_equal(s.fences, 1);
    assert_int_equal(pmalloc_free_from(h, &slots[0]), NM_OK);
    /* a steady churn of small and large objects on an array of pointer
     * words (8 per line: a checkpoint writes each line back once) */
    pmalloc_stats_reset_counters(h);
    unsigned ops = 0;
    for (unsigned round = 0; round < 40; round++)
        for (unsigned i = 0; i < 2000; i++) {
            size_t sz = i % 50 == 0 ? 20000 : 64 + (i % 7) * 16;
            assert_int_equal(pmalloc_malloc_to(h, sz, &slots[i]), NM_OK);
            assert_int_equal(pmalloc_free_from(h, &slots[i]), NM_OK);
            ops += 2;
        }
    pmalloc_stats_get(h, &s);
    print_message("%u operations: %.3f flushed lines and %.3f fences per operation, %llu checkpoints\n", ops, (double)s.flushes / ops,
                  (double)s.fences / ops, (unsigned long long)s.checkpoints);
    assert_true(s.fences < ops * 1.05);
    assert_true(s.flushes < ops * 1.1);
    assert_true(s.checkpoints > 0);
    assert_int_equal(pmalloc_check(h), NM_OK);
    assert_int_equal(pmalloc_close(h), NM_OK);
    pmt_rmdir(dir);
}

/* GC model: a block allocated just before a crash still holds its previous
 * object's words; the conservative mark must not follow them. Objects X_i hold
 * a pointer to Y_i; both are freed; new blocks reuse X_i's memory and are
 * published without being written; after a power failure the mark must not
 * revive any Y_i (it did before malloc_to cleared the stale pointer words). */
static void test_gc_stale_words_not_followed(void **st)
{
    (void)st;
    char dir[256], img[256];
    pmt_tmpdir(dir, sizeof dir, "redogc");
    pmt_tmpdir(img, sizeof img, "redogcimg");
    pmalloc_options o = pmt_opts(8 * MiB, PMALLOC_GC, PMALLOC_PERSIST_SIM);
    o.narenas = 1;
    pmalloc_heap *h;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    enum { K = 24 };
    pmalloc_ptr *r0 = pmalloc_root_slot(h, 0), *r1 = pmalloc_root_slot(h, 1);
    assert_int_equal(pmalloc_malloc_to(h, K * 8, r0), NM_OK); /* C: the X_i, later the new blocks */
    assert_int_equal(pmalloc_malloc_to(h, K * 8, r1), NM_OK); /* D: the Y_i */
    pmalloc_ptr *c = pmalloc_direct(h, *r0), *d = pmalloc_direct(h, *r1);
    memset(c, 0, K * 8);
    memset(d, 0, K * 8);
    pmalloc_persist(h, c, K * 8);
    pmalloc_persist(h, d, K * 8);
    pmalloc_ptr x[K], y[K];
    for (unsigned i = 0; i < K; i++) {
        assert_int_equal(pmalloc_malloc_to(h, 96, &c[i]), NM_OK);
        assert_int_equal(pmalloc_malloc_to(h, 300, &d[i]), NM_OK);
        x[i] = c[i];
        y[i] = d[i];
        uint64_t *xw = pmalloc_direct(h, x[i]);
        memset(xw, 0x5a, 96);
        xw[3] = y[i]; /* X_i -> Y_i, a plain persisted store (the GC model's own data) */
        pmalloc_persist(h, xw, 96);
    }
    for (unsigned i = 0; i < K; i++) assert_int_equal(pmalloc_free_from(h, &c[i]), NM_OK); /* X_i keep Y_i's pointer */
    for (unsigned i = 0; i < K; i++) assert_int_equal(pmalloc_free_from(h, &d[i]), NM_OK);
    unsigned reused = 0;
    for (unsigned i = 0; i < K; i++) {
        assert_int_equal(pmalloc_malloc_to(h, 96, &c[i]), NM_OK); /* published, not written */
        for (unsigned j = 0; j < K; j++) reused += c[i] == x[j];
        const uint64_t *nw = pmalloc_direct(h, c[i]);
        for (unsigned k = 0; k < 96 / 8; k++) /* data words stay; pointer words of this heap are gone */
            if (k != 3) assert_int_equal(nw[k] == 0x5a5a5a5a5a5a5a5aull || nw[k] == 0, 1);
    }
    assert_true(reused > K / 2); /* the scenario happened */
    assert_int_equal(pmalloc_sim_snapshot(h, img, 7, 0), NM_OK);
    pmalloc_options ro = pmt_opts(8 * MiB, PMALLOC_GC, PMALLOC_PERSIST_CPU);
    ro.create = false;
    ro.narenas = 1;
    pmalloc_heap *r;
    assert_int_equal(pmalloc_open(img, &ro, &r), NM_OK);
    assert_int_equal(pmalloc_check(r), NM_OK);
    pmalloc_recovery_info ri;
    pmalloc_recovery_info_get(r, &ri);
    assert_false(ri.was_clean);
    unsigned revived = 0;
    for (unsigned i = 0; i < K; i++) revived += pmalloc_usable_size(r, y[i]) != 0;
    assert_int_equal(revived, 0);
    assert_int_equal(ri.gc_marked, 2 + K); /* C, D and the new blocks */
    assert_int_equal(pmalloc_close(r), NM_OK);
    pmalloc_abandon(h);
    pmt_rmdir(img);
    pmt_rmdir(dir);
}

/* Threadtest's pattern (2 threads, each allocates 10,000 64 B objects into
 * consecutive pointer words, then frees them all, 4 rounds) on a 64 MiB heap:
 * with per-thread rings (8 rings of 512 records, a checkpoint at half) and a
 * checkpoint per released slab, a checkpoint came every ~2,500 operations and
 * every pointer line was written back in both phases (1.14 lines per
 * operation); the pool of rings covers ~28,000 operations per thread. */
typedef struct tt_arg {
    pmalloc_heap *h;
    pmalloc_ptr *slots;
    pthread_barrier_t *bar;
} tt_arg;
static void *tt_worker(void *p)
{
    tt_arg *a = p;
    pthread_barrier_wait(a->bar);
    for (unsigned round = 0; round < 4; round++) {
        for (unsigned i = 0; i < 10000; i++) assert_int_equal(pmalloc_malloc_to(a->h, 64, &a->slots[i]), NM_OK);
        for (unsigned i = 0; i < 10000; i++) assert_int_equal(pmalloc_free_from(a->h, &a->slots[i]), NM_OK);
    }
    return NULL;
}

static void test_ring_pool_threadtest(void **st)
{
    (void)st;
    char dir[256];
    pmt_tmpdir(dir, sizeof dir, "redo5");
    pmalloc_options o = pmt_opts(64 * MiB, PMALLOC_LOG, PMALLOC_PERSIST_CPU);
    o.narenas = 2;
    pmalloc_heap *h;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    assert_int_equal(pmalloc_malloc_to(h, 2 * 10000 * 8, pmalloc_root_slot(h, 0)), NM_OK);
    pmalloc_ptr *slots = pmalloc_direct(h, pmalloc_get_root(h, 0));
    memset(slots, 0, 2 * 10000 * 8);
    pmalloc_persist(h, slots, 2 * 10000 * 8);
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, 3);
    tt_arg a[2] = {{h, slots, &bar}, {h, slots + 10000, &bar}};
    pthread_t t[2];
    for (unsigned k = 0; k < 2; k++) pthread_create(&t[k], NULL, tt_worker, &a[k]);
    pmalloc_stats s0, s;
    pmalloc_stats_get(h, &s0);
    pmalloc_stats_reset_counters(h);
    pthread_barrier_wait(&bar);
    for (unsigned k = 0; k < 2; k++) pthread_join(t[k], NULL);
    pthread_barrier_destroy(&bar);
    pmalloc_stats_get(h, &s);
    double ops = 2.0 * 2 * 10000 * 4;
    unsigned long long ck = (unsigned long long)(s.checkpoints - s0.checkpoints);
    print_message("%.0f operations: %.3f lines and %.3f fences per operation, %llu checkpoints\n", ops, s.flushes / ops, s.fences / ops, ck);
    assert_true(ck * 8192 < ops);         /* was one per ~2,500 */
    assert_true(s.flushes < 1.1 * ops);   /* was 1.14 */
    assert_true(s.fences < 1.01 * ops);
    assert_int_equal(pmalloc_check(h), NM_OK);
    assert_int_equal(pmalloc_close(h), NM_OK);
    pmt_rmdir(dir);
}

/* checkpoint_records bounds what a crash leaves to replay: at most that many
 * records in full rings, plus two rings per thread. */
static unsigned replayed_after(unsigned ckpt_records, unsigned ops)
{
    char dir[256], img[256];
    pmt_tmpdir(dir, sizeof dir, "redo6");
    pmt_tmpdir(img, sizeof img, "redo6img");
    pmalloc_options o = pmt_opts(8 * MiB, PMALLOC_LOG, PMALLOC_PERSIST_SIM);
    o.narenas = 1;
    o.checkpoint_records = ckpt_records;
    pmalloc_heap *h;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    pmalloc_ptr *slots = pmalloc_root_slot(h, 0);
    for (unsigned i = 0; i < ops / 2; i++) {
        assert_int_equal(pmalloc_malloc_to(h, 64 + (i % 5) * 16, &slots[i % 64]), NM_OK);
        assert_int_equal(pmalloc_free_from(h, &slots[i % 64]), NM_OK);
    }
    assert_int_equal(pmalloc_sim_snapshot(h, img, 1, 0), NM_OK);
    pmalloc_file_info fi;
    assert_int_equal(pmalloc_inspect(dir, NULL, &fi), NM_OK);
    assert_int_equal(fi.ring_records, 64); /* the default for 8 MiB */
    pmalloc_heap *r = recover(img);
    pmalloc_recovery_info ri;
    pmalloc_recovery_info_get(r, &ri);
    assert_int_equal(pmalloc_close(r), NM_OK);
    pmalloc_abandon(h);
    pmt_rmdir(img);
    pmt_rmdir(dir);
    return ri.wal_entries;
}

static void test_replay_bound(void **st)
{
    (void)st;
    unsigned small = replayed_after(256, 3000), dflt = replayed_after(0, 3000);
    print_message("records replayed after 3000 operations: %u (checkpoint_records 256), %u (default)\n", small, dflt);
    assert_true(small <= 256 + 2 * 64);
    assert_true(dflt > 256 + 2 * 64); /* 128 rings of 64: no checkpoint needed yet */
    assert_true(dflt <= 128 * 64);
}

static uint64_t nslabs(pmalloc_heap *h)
{
    pmalloc_stats s;
    pmalloc_stats_get(h, &s);
    return s.slabs;
}

/* An empty slab waits for the checkpoint that settles its blocks' records,
 * on its arena's partial list; that checkpoint releases it. */
static void test_empty_slab_waits_for_checkpoint(void **st)
{
    (void)st;
    char dir[256];
    pmt_tmpdir(dir, sizeof dir, "redo7");
    pmalloc_options o = pmt_opts(64 * MiB, PMALLOC_LOG, PMALLOC_PERSIST_CPU);
    o.narenas = 1;
    o.morph_su = PMALLOC_MORPH_OFF;
    pmalloc_heap *h;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    enum { N = 5000 };
    assert_int_equal(pmalloc_malloc_to(h, N * 8, pmalloc_root_slot(h, 0)), NM_OK);
    pmalloc_ptr *slots = pmalloc_direct(h, pmalloc_get_root(h, 0));
    memset(slots, 0, N * 8);
    pmalloc_persist(h, slots, N * 8);
    uint64_t s0 = nslabs(h);
    for (unsigned i = 0; i < N; i++) assert_int_equal(pmalloc_malloc_to(h, 64, &slots[i]), NM_OK);
    uint64_t s1 = nslabs(h);
    assert_true(s1 >= s0 + 4); /* ~1000 blocks per slab */
    assert_int_equal(pmalloc_sync(h), NM_OK);
    for (unsigned i = 0; i < N; i++) assert_int_equal(pmalloc_free_from(h, &slots[i]), NM_OK);
    /* the frees' records are not settled: the empty slabs wait (their blocks
     * are still allocatable: no new slab for the same class) */
    uint64_t s2 = nslabs(h);
    assert_true(s2 > s0 + 1);
    for (unsigned i = 0; i < 100; i++) assert_int_equal(pmalloc_malloc_to(h, 64, &slots[i]), NM_OK);
    assert_true(nslabs(h) <= s2);
    for (unsigned i = 0; i < 100; i++) assert_int_equal(pmalloc_free_from(h, &slots[i]), NM_OK);
    /* the checkpoint settles them and releases all but the one kept per class
     * and one whose blocks the thread cache holds */
    assert_int_equal(pmalloc_sync(h), NM_OK);
    uint64_t s3 = nslabs(h);
    print_message("slabs: %llu before, %llu full, %llu empty and waiting, %llu after the checkpoint\n", (unsigned long long)s0,
                  (unsigned long long)s1, (unsigned long long)s2, (unsigned long long)s3);
    assert_true(s3 <= s0 + 2);
    assert_int_equal(pmalloc_check(h), NM_OK);
    assert_int_equal(pmalloc_close(h), NM_OK);
    pmt_rmdir(dir);
}

/* Waiting empty slabs are free space: a heap filled with small objects, all
 * freed (fewer records than a checkpoint waits for: every slab waits), has
 * room for extents at once (the allocation that finds no pages checkpoints
 * and releases them). */
static void test_waiting_slabs_are_free_space(void **st)
{
    (void)st;
    char dir[256];
    pmt_tmpdir(dir, sizeof dir, "redo8");
    pmalloc_options o = pmt_opts(8 * MiB, PMALLOC_LOG, PMALLOC_PERSIST_CPU);
    o.narenas = 1;
    o.morph_su = PMALLOC_MORPH_OFF;
    o.redo_records = 256; /* 128 rings of 256: no checkpoint for ~28,000 records */
    pmalloc_heap *h;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    enum { N = 1 << 15 };
    assert_int_equal(pmalloc_malloc_to(h, N * 8, pmalloc_root_slot(h, 0)), NM_OK);
    pmalloc_ptr *slots = pmalloc_direct(h, pmalloc_get_root(h, 0));
    memset(slots, 0, N * 8);
    pmalloc_persist(h, slots, N * 8);
    unsigned n = 0;
    for (; n < N; n++) {
        nm_err e = pmalloc_malloc_to(h, 512, &slots[n]);
        if (e == NM_ENOMEM) break;
        assert_int_equal(e, NM_OK);
    }
    assert_true(n > 10000 && n < N);
    assert_int_equal(pmalloc_sync(h), NM_OK);
    uint64_t full = nslabs(h);
    for (unsigned i = 0; i < n; i++) assert_int_equal(pmalloc_free_from(h, &slots[i]), NM_OK);
    uint64_t waiting = nslabs(h);
    assert_true(waiting + 2 >= full); /* none released yet */
    pmalloc_ptr *big = pmalloc_root_slot(h, 1);
    unsigned m = 0;
    for (; m < 8; m++) {
        nm_err e = pmalloc_malloc_to(h, 512 * 1024, &big[m]);
        if (e == NM_ENOMEM) break;
        assert_int_equal(e, NM_OK);
    }
    print_message("%u objects of 512 B filled the heap (%llu slabs); freed, %llu slabs waited; then %u extents of 512 KiB (%llu slabs)\n",
                  n, (unsigned long long)full, (unsigned long long)waiting, m, (unsigned long long)nslabs(h));
    assert_int_equal(m, 8);
    assert_int_equal(pmalloc_check(h), NM_OK);
    assert_int_equal(pmalloc_close(h), NM_OK);
    pmt_rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pointer_word_replayed),
        cmocka_unit_test(test_set_ptr_and_plain_stores),
        cmocka_unit_test(test_freed_container_not_written),
        cmocka_unit_test(test_one_line),
        cmocka_unit_test(test_gc_stale_words_not_followed),
        cmocka_unit_test(test_ring_pool_threadtest),
        cmocka_unit_test(test_replay_bound),
        cmocka_unit_test(test_empty_slab_waits_for_checkpoint),
        cmocka_unit_test(test_waiting_slabs_are_free_space),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
