/* PIM-CACHE host library against the host-memory DPU set: every copy is read back twice
 * (through the transport and with the DPU-side reader on MRAM) and compared with the
 * original bytes. */
#include "pimc_test_util.h"

#define KiB 1024u

static nm_pimc_memdev *mkdev(unsigned nd, uint64_t mram)
{
    nm_pimc_memdev *m;
    assert_int_equal(nm_pimc_memdev_create(nd, mram, &m), NM_OK);
    return m;
}

static nm_pimc *mkcache(nm_pimc_memdev *m, const nm_pimc_options *o)
{
    nm_pimc_transport t = nm_pimc_memdev_transport(m);
    nm_pimc *c;
    nm_err e = nm_pimc_create(&t, o, &c);
    if (e) fprintf(stderr, "create: %s\n", nm_last_errmsg());
    assert_int_equal(e, NM_OK);
    return c;
}

static void check_all(nm_pimc *c, nm_pimc_memdev *m, unsigned slot, unsigned nd, uint8_t **bufs, const size_t *lens)
{
    for (unsigned d = 0; d < nd; d++) {
        assert_true(nm_pimc_slot_valid(c, slot, d));
        check_read_back(c, slot, d, bufs[d], lens[d]);
        check_dpu_reader(c, m, slot, d, bufs[d], lens[d], 1 + d % 4);
    }
}

/* Uneven sizes, sizes that are not multiples of the block, empty buffers. */
static void test_round_trip_uneven(void **state)
{
    (void)state;
    const unsigned nd = 8;
    nm_pimc_memdev *m = mkdev(nd, 1024 * KiB);
    nm_pimc_options o;
    nm_pimc_options_default(&o);
    o.fallback_threshold = 0;
    nm_pimc *c = mkcache(m, &o);
    const size_t sizes[8] = {0, 1, 1023, 1024, 1025, 7 * KiB + 5, 64 * KiB, 3};
    uint8_t *bufs[8];
    nm_rng r;
    nm_rng_seed(&r, nm_test_seed(1));
    for (unsigned d = 0; d < nd; d++) {
        bufs[d] = malloc(sizes[d] + 1);
        fill_blocks(&r, bufs[d], sizes[d], 1024, 0, NULL, 0);
    }
    assert_int_equal(nm_pimc_copy(c, 0, (const void *const *)bufs, sizes), NM_OK);
    check_all(c, m, 0, nd, bufs, sizes);
    nm_pimc_stats st;
    nm_pimc_get_stats(c, &st);
    size_t total = 0;
    for (unsigned d = 0; d < nd; d++) total += sizes[d];
    assert_int_equal(st.last_logical_bytes, total);
    assert_int_equal(st.last_mode, NM_PIMC_MODE_CAC);
    for (unsigned d = 0; d < nd; d++) free(bufs[d]);
    nm_pimc_destroy(c);
    nm_pimc_memdev_destroy(m);
}

/* Temporal redundancy: the same data twice costs no block bytes the second time; spatial:
 * a buffer of one repeated block costs one block. */
static void test_dedup_temporal_spatial(void **state)
{
    (void)state;
    const unsigned nd = 4;
    nm_pimc_memdev *m = mkdev(nd, 2048 * KiB);
    nm_pimc_options o;
    nm_pimc_options_default(&o);
    o.fallback_threshold = 0; /* the first copy has no redundancy: stay in CAC */
    nm_pimc *c = mkcache(m, &o);
    size_t lens[4];
    uint8_t *bufs[4];
    nm_rng r;
    nm_rng_seed(&r, nm_test_seed(2));
    for (unsigned d = 0; d < nd; d++) {
        lens[d] = 100 * KiB + d * 100;
        bufs[d] = malloc(lens[d]);
        fill_blocks(&r, bufs[d], lens[d], 1024, 0, NULL, 0);
    }
    assert_int_equal(nm_pimc_copy(c, 0, (const void *const *)bufs, lens), NM_OK);
    nm_pimc_stats st;
    nm_pimc_get_stats(c, &st);
    assert_int_equal(st.last_hits, 0);
    uint64_t first_sent = st.last_sent_bytes;
    assert_int_equal(first_sent, (uint64_t)(100 + 3 * 101) * KiB); /* DPU 0: exactly 100 blocks */
    nm_pimc_memdev_stats ms0 = nm_pimc_memdev_get_stats(m);
    assert_int_equal(nm_pimc_copy(c, 1, (const void *const *)bufs, lens), NM_OK);
    nm_pimc_get_stats(c, &st);
    assert_int_equal(st.last_sent_bytes, 0);
    assert_int_equal(st.last_hits, st.last_blocks);
    assert_true(st.last_dedup_pct == 100.0);
    nm_pimc_memdev_stats ms1 = nm_pimc_memdev_get_stats(m);
    /* only offset buffers crossed the bus */
    assert_int_equal(ms1.serial_bytes - ms0.serial_bytes, st.last_meta_bytes);
    assert_int_equal(st.last_meta_bytes, (32 + 100 * 4) + 3 * (32 + 101 * 4 + 4)); /* odd counts pad to 8 */
    check_all(c, m, 0, nd, bufs, lens);
    check_all(c, m, 1, nd, bufs, lens);
    /* spatial: every block the same */
    for (unsigned d = 0; d < nd; d++) {
        for (size_t i = 0; i < lens[d]; i += 1024) memset(bufs[d] + i, 0x5a, lens[d] - i < 1024 ? lens[d] - i : 1024);
    }
    assert_int_equal(nm_pimc_copy(c, 0, (const void *const *)bufs, lens), NM_OK);
    nm_pimc_get_stats(c, &st);
    /* one full block per DPU + a distinct zero-padded tail block on DPUs 1..3 */
    assert_int_equal(st.last_sent_bytes, (uint64_t)(1 + 3 * 2) * 1024);
    check_all(c, m, 0, nd, bufs, lens);
    for (unsigned d = 0; d < nd; d++) free(bufs[d]);
    nm_pimc_destroy(c);
    nm_pimc_memdev_destroy(m);
}

/* A small BRB forces global invalidations; every copy still reads back, and a slot whose
 * blocks were invalidated by a later copy is reported stale instead of returning garbage. */
static void test_invalidation(void **state)
{
    (void)state;
    const unsigned nd = 3;
    nm_pimc_memdev *m = mkdev(nd, 64 * KiB);
    nm_pimc_options o;
    nm_pimc_options_default(&o);
    o.fallback_threshold = 0;
    nm_pimc *c = mkcache(m, &o);
    assert_int_equal(nm_pimc_brb_size(c), 57 * KiB);
    nm_rng r;
    nm_rng_seed(&r, nm_test_seed(3));
    uint8_t *bufs[3];
    size_t lens[3];
    for (int round = 0; round < 12; round++) {
        for (unsigned d = 0; d < nd; d++) {
            lens[d] = nm_rng_below(&r, 20 * KiB);
            bufs[d] = malloc(lens[d] + 1);
            fill_blocks(&r, bufs[d], lens[d], 1024, 0, NULL, 0);
        }
        assert_int_equal(nm_pimc_copy(c, 0, (const void *const *)bufs, lens), NM_OK);
        check_all(c, m, 0, nd, bufs, lens);
        for (unsigned d = 0; d < nd; d++) {
            assert_true(nm_pimc_brb_top(c, d) <= nm_pimc_brb_size(c));
            free(bufs[d]);
        }
    }
    nm_pimc_stats st;
    nm_pimc_get_stats(c, &st);
    assert_true(st.invalidations > 0);
    /* slot 1 written, then slot 0 fills the BRB: slot 1 becomes stale. */
    uint8_t *a = malloc(50 * KiB), *b = malloc(50 * KiB);
    fill_blocks(&r, a, 50 * KiB, 1024, 0, NULL, 0);
    fill_blocks(&r, b, 50 * KiB, 1024, 0, NULL, 0);
    const void *pa[3] = {a, a, a}, *pb[3] = {b, b, b};
    size_t l50[3] = {50 * KiB, 50 * KiB, 50 * KiB};
    assert_int_equal(nm_pimc_copy(c, 1, pa, l50), NM_OK);
    assert_int_equal(nm_pimc_copy(c, 0, pb, l50), NM_OK);
    assert_false(nm_pimc_slot_valid(c, 1, 0));
    uint8_t tmp[16];
    assert_int_equal(nm_pimc_read_back(c, 1, 0, tmp, 16), NM_ESTATE);
    uint8_t *bb[3] = {b, b, b};
    check_all(c, m, 0, nd, bb, l50);
    free(a);
    free(b);
    nm_pimc_destroy(c);
    nm_pimc_memdev_destroy(m);
}

/* Every option combination on a randomized sequence of copies mixing fresh, repeated and
 * partly repeated data, multi-slot batches included. */
static void run_combo(uint32_t bs, nm_pimc_hash h, unsigned threads, bool parallel, bool verify, double thr,
                      uint64_t seed)
{
    const unsigned nd = 5;
    nm_pimc_memdev *m = mkdev(nd, 256 * KiB);
    nm_pimc_options o;
    nm_pimc_options_default(&o);
    o.block_size = bs;
    o.hash = h;
    o.threads = threads;
    o.parallel = parallel;
    o.verify = verify;
    o.fallback_threshold = thr;
    o.probe_interval = 2;
    nm_pimc *c = mkcache(m, &o);
    nm_rng r;
    nm_rng_seed(&r, seed);
    uint8_t *pool = malloc(8 * bs);
    fill_blocks(&r, pool, 8 * bs, bs, 0, NULL, 0);
    uint8_t *bufs[2][5];
    size_t lens[2][5];
    for (int round = 0; round < 10; round++) {
        unsigned ns = 1 + (round % 3 == 2);
        double rep = round < 4 ? 0.0 : (round < 7 ? 1.0 : 0.5);
        bool equal = round % 2;
        size_t elen = nm_rng_below(&r, 24 * KiB);
        for (unsigned s = 0; s < ns; s++)
            for (unsigned d = 0; d < nd; d++) {
                lens[s][d] = equal ? elen : nm_rng_below(&r, 24 * KiB);
                bufs[s][d] = malloc(lens[s][d] + 1);
                fill_blocks(&r, bufs[s][d], lens[s][d], bs, rep, pool, 8);
            }
        unsigned slots[2] = {round % 2, 1 - round % 2};
        const void *pb[10];
        size_t pl[10];
        for (unsigned s = 0; s < ns; s++)
            for (unsigned d = 0; d < nd; d++) {
                pb[s * nd + d] = bufs[s][d];
                pl[s * nd + d] = lens[s][d];
            }
        nm_err e = nm_pimc_copy_multi(c, ns, slots, pb, pl);
        if (e) fprintf(stderr, "copy: %s\n", nm_last_errmsg());
        assert_int_equal(e, NM_OK);
        for (unsigned s = 0; s < ns; s++) {
            check_all(c, m, slots[s], nd, bufs[s], lens[s]);
            for (unsigned d = 0; d < nd; d++) free(bufs[s][d]);
        }
    }
    nm_pimc_stats st;
    nm_pimc_get_stats(c, &st);
    assert_int_equal(st.copies, 10);
    assert_int_equal(st.collisions, 0);
    if (thr > 0) assert_true(st.plain_copies > 0); /* the fresh rounds switched to plain */
    free(pool);
    nm_pimc_destroy(c);
    nm_pimc_memdev_destroy(m);
}

static void test_option_matrix(void **state)
{
    (void)state;
    const uint32_t bss[] = {64, 1024, 4096};
    uint64_t seed = nm_test_seed(4);
    for (unsigned b = 0; b < 3; b++)
        for (int h = 0; h < 2; h++)
            for (unsigned th = 1; th <= 3; th += 2)
                for (int par = 0; par < 2; par++)
                    for (int ver = 0; ver < 2; ver++)
                        for (int fb = 0; fb < 2; fb++)
                            run_combo(bss[b], (nm_pimc_hash)h, th, par, ver, fb ? 0.3 : 0.0, seed++);
}

/* Verify mode: with an 8-bit fingerprint collisions are certain; verify mode keeps the
 * data right and counts them, without it the DPU would read wrong bytes. */
static void test_verify_collisions(void **state)
{
    (void)state;
    for (int verify = 1; verify >= 0; verify--) {
        nm_pimc_memdev *m = mkdev(1, 2048 * KiB);
        nm_pimc_options o;
        nm_pimc_options_default(&o);
        o.hash = NM_PIMC_WEAK8;
        o.verify = verify;
        o.block_size = 64;
        o.fallback_threshold = 0;
        nm_pimc *c = mkcache(m, &o);
        nm_rng r;
        nm_rng_seed(&r, nm_test_seed(5));
        size_t len = 64 * 1000;
        uint8_t *buf = malloc(len), *got = malloc(len);
        fill_blocks(&r, buf, len, 64, 0, NULL, 0);
        const void *pb[1] = {buf};
        assert_int_equal(nm_pimc_copy(c, 0, pb, &len), NM_OK);
        assert_int_equal(nm_pimc_read_back(c, 0, 0, got, len), NM_OK);
        nm_pimc_stats st;
        nm_pimc_get_stats(c, &st);
        if (verify) {
            assert_memory_equal(got, buf, len);
            assert_true(st.collisions > 500); /* 1000 blocks, 256 fingerprints */
            assert_true(st.verify_bytes >= st.collisions * 64);
            assert_true(st.shadow_bytes >= 1000 * 64);
            check_dpu_reader(c, m, 0, 0, buf, len, 3);
        } else {
            assert_true(memcmp(got, buf, len) != 0); /* the failure verify mode prevents */
            assert_int_equal(st.collisions, 0);
        }
        free(buf);
        free(got);
        nm_pimc_destroy(c);
        nm_pimc_memdev_destroy(m);
    }
}

/* Fallback: fresh data switches to plain copies (push when sizes are equal, serial when
 * not); a probe notices returning redundancy and switches back. */
static void test_fallback(void **state)
{
    (void)state;
    const unsigned nd = 4;
    nm_pimc_memdev *m = mkdev(nd, 1024 * KiB);
    nm_pimc_options o;
    nm_pimc_options_default(&o);
    o.fallback_threshold = 0.3;
    o.fallback_window = 1;
    o.probe_interval = 3;
    nm_pimc *c = mkcache(m, &o);
    nm_rng r;
    nm_rng_seed(&r, nm_test_seed(6));
    uint8_t *bufs[4];
    size_t lens[4];
    for (unsigned d = 0; d < nd; d++) {
        lens[d] = 40 * KiB;
        bufs[d] = malloc(lens[d]);
    }
    nm_pimc_stats st;
    for (int i = 0; i < 5; i++) {
        for (unsigned d = 0; d < nd; d++) fill_blocks(&r, bufs[d], lens[d], 1024, 0, NULL, 0);
        nm_pimc_memdev_stats m0 = nm_pimc_memdev_get_stats(m);
        assert_int_equal(nm_pimc_copy(c, 0, (const void *const *)bufs, lens), NM_OK);
        nm_pimc_memdev_stats m1 = nm_pimc_memdev_get_stats(m);
        nm_pimc_get_stats(c, &st);
        check_all(c, m, 0, nd, bufs, lens);
        /* the first copy starts with a probe, which finds no redundancy */
        if (i == 0) assert_true(st.last_probe);
        assert_int_equal(st.last_mode, NM_PIMC_MODE_PLAIN);
        assert_int_equal(m1.serial_calls, m0.serial_calls); /* equal sizes: pushes only */
    }
    assert_int_equal(nm_pimc_current_mode(c), NM_PIMC_MODE_PLAIN);
    /* uneven sizes in fallback: serial */
    lens[1] -= 3;
    nm_pimc_memdev_stats m0 = nm_pimc_memdev_get_stats(m);
    for (unsigned d = 0; d < nd; d++) fill_blocks(&r, bufs[d], lens[d], 1024, 0, NULL, 0);
    assert_int_equal(nm_pimc_copy(c, 0, (const void *const *)bufs, lens), NM_OK);
    nm_pimc_memdev_stats m1 = nm_pimc_memdev_get_stats(m);
    nm_pimc_get_stats(c, &st);
    if (!st.last_probe) assert_true(m1.serial_calls > m0.serial_calls);
    check_all(c, m, 0, nd, bufs, lens);
    /* now the same data again and again: the next probe switches back to CAC */
    int back = -1;
    for (int i = 0; i < 8; i++) {
        assert_int_equal(nm_pimc_copy(c, 0, (const void *const *)bufs, lens), NM_OK);
        check_all(c, m, 0, nd, bufs, lens);
        nm_pimc_get_stats(c, &st);
        if (st.last_mode == NM_PIMC_MODE_CAC && back < 0) back = i;
    }
    assert_true(back >= 0 && back <= 3);
    /* a fresh cache given redundant data goes straight to CAC after its first probe */
    nm_pimc *c2 = mkcache(m, &o);
    for (unsigned d = 0; d < nd; d++) memset(bufs[d], 7, lens[d]);
    assert_int_equal(nm_pimc_copy(c2, 0, (const void *const *)bufs, lens), NM_OK);
    nm_pimc_stats st2;
    nm_pimc_get_stats(c2, &st2);
    assert_true(st2.last_probe);
    assert_int_equal(st2.last_mode, NM_PIMC_MODE_CAC);
    check_all(c2, m, 0, nd, bufs, lens);
    nm_pimc_destroy(c2);
    assert_int_equal(nm_pimc_current_mode(c), NM_PIMC_MODE_CAC);
    assert_int_equal(st.last_sent_bytes, 0); /* fully deduplicated once back */
    assert_true(st.probes >= 1);
    for (unsigned d = 0; d < nd; d++) free(bufs[d]);
    nm_pimc_destroy(c);
    nm_pimc_memdev_destroy(m);
}

/* Epochs: the same data again and again with the fallback on. The first copies find no
 * redundancy and go plain; the probe at copy probe_interval sees the samples of the first
 * probe again and switches to CAC; that first CAC copy must send everything (the plain
 * copies were not indexed) and is not held against CAC; later copies send no block. */
static void test_fallback_epochs(void **state)
{
    (void)state;
    const unsigned nd = 2;
    nm_pimc_memdev *m = mkdev(nd, 1024 * KiB);
    nm_pimc_options o;
    nm_pimc_options_default(&o);
    o.fallback_window = 1;
    o.probe_interval = 4;
    nm_pimc *c = mkcache(m, &o);
    nm_rng r;
    nm_rng_seed(&r, nm_test_seed(10));
    uint8_t *bufs[2];
    size_t lens[2] = {64 * KiB, 50 * KiB + 3};
    for (unsigned d = 0; d < nd; d++) {
        bufs[d] = malloc(lens[d]);
        fill_blocks(&r, bufs[d], lens[d], 1024, 0, NULL, 0);
    }
    const nm_pimc_mode want[8] = {NM_PIMC_MODE_PLAIN, NM_PIMC_MODE_PLAIN, NM_PIMC_MODE_PLAIN, NM_PIMC_MODE_PLAIN,
                                  NM_PIMC_MODE_CAC,   NM_PIMC_MODE_CAC,   NM_PIMC_MODE_CAC,   NM_PIMC_MODE_CAC};
    for (int i = 0; i < 8; i++) {
        assert_int_equal(nm_pimc_copy(c, 0, (const void *const *)bufs, lens), NM_OK);
        nm_pimc_stats st;
        nm_pimc_get_stats(c, &st);
        assert_int_equal(st.last_mode, want[i]);
        assert_int_equal(st.last_probe, i == 0 || i == 4);
        if (i == 4) assert_int_equal(st.last_hits, 0);
        if (i > 4) assert_int_equal(st.last_sent_bytes, 0);
        check_all(c, m, 0, nd, bufs, lens);
    }
    for (unsigned d = 0; d < nd; d++) free(bufs[d]);
    nm_pimc_destroy(c);
    nm_pimc_memdev_destroy(m);
}

/* Bad options and bad calls: clear codes, nothing changed. */
static void test_errors(void **state)
{
    (void)state;
    nm_pimc_memdev *m = mkdev(2, 64 * KiB);
    nm_pimc_transport t = nm_pimc_memdev_transport(m);
    nm_pimc_options o;
    nm_pimc *c = NULL;
    nm_pimc_options_default(&o);
    o.block_size = 1000;
    assert_int_equal(nm_pimc_create(&t, &o, &c), NM_EINVAL);
    assert_null(c);
    nm_pimc_options_default(&o);
    o.brb_share = 1.0;
    assert_int_equal(nm_pimc_create(&t, &o, &c), NM_EINVAL);
    nm_pimc_options_default(&o);
    o.threads = 5000;
    assert_int_equal(nm_pimc_create(&t, &o, &c), NM_EINVAL);
    nm_pimc_options_default(&o);
    o.block_size = 4096;
    o.brb_share = 0.05; /* 3.2 KiB: not one block */
    assert_int_equal(nm_pimc_create(&t, &o, &c), NM_ERANGE);
    assert_non_null(strstr(nm_last_errmsg(), "one"));
    nm_pimc_options_default(&o);
    o.slots = 0;
    assert_int_equal(nm_pimc_create(&t, &o, &c), NM_EINVAL);
    nm_pimc_transport bad = t;
    bad.mram_base = 4;
    assert_int_equal(nm_pimc_create(&bad, NULL, &c), NM_EINVAL);
    bad = t;
    bad.copy_to = NULL;
    assert_int_equal(nm_pimc_create(&bad, NULL, &c), NM_EINVAL);

    nm_pimc_options_default(&o);
    o.fallback_threshold = 0;
    c = mkcache(m, &o);
    nm_rng r;
    nm_rng_seed(&r, nm_test_seed(7));
    uint8_t *a = malloc(100 * KiB);
    fill_blocks(&r, a, 100 * KiB, 1024, 0, NULL, 0);
    const void *pa[2] = {a, a};
    size_t ok[2] = {10 * KiB, 3000};
    assert_int_equal(nm_pimc_copy(c, 0, pa, ok), NM_OK);
    nm_pimc_stats before, after;
    nm_pimc_get_stats(c, &before);
    uint64_t top0 = nm_pimc_brb_top(c, 0);
    /* oversized */
    size_t big[2] = {10, nm_pimc_max_len(c) + 1};
    assert_int_equal(nm_pimc_copy(c, 1, pa, big), NM_ERANGE);
    /* NULL buffer with a length */
    const void *pn[2] = {a, NULL};
    assert_int_equal(nm_pimc_copy(c, 1, pn, ok), NM_EINVAL);
    /* bad slot, duplicate slot, empty batch */
    assert_int_equal(nm_pimc_copy(c, 7, pa, ok), NM_EINVAL);
    unsigned dup[2] = {0, 0};
    const void *p4[4] = {a, a, a, a};
    size_t l4[4] = {8, 8, 8, 8};
    assert_int_equal(nm_pimc_copy_multi(c, 2, dup, p4, l4), NM_EINVAL);
    assert_int_equal(nm_pimc_copy_multi(c, 0, dup, p4, l4), NM_EINVAL);
    /* a batch larger than the BRB together */
    unsigned two[2] = {0, 1};
    size_t l40[4] = {40 * KiB, 40 * KiB, 40 * KiB, 40 * KiB};
    assert_int_equal(nm_pimc_copy_multi(c, 2, two, p4, l40), NM_ERANGE);
    /* read back misuse */
    uint8_t tmp[64];
    assert_int_equal(nm_pimc_read_back(c, 1, 0, tmp, 8), NM_ESTATE); /* never written */
    assert_int_equal(nm_pimc_read_back(c, 0, 9, tmp, 8), NM_EINVAL);
    assert_int_equal(nm_pimc_read_back(c, 0, 1, tmp, 4000), NM_ERANGE);
    nm_pimc_get_stats(c, &after);
    assert_int_equal(after.copies, before.copies);
    assert_int_equal(after.table_entries, before.table_entries);
    assert_int_equal(nm_pimc_brb_top(c, 0), top0);
    uint8_t *pa2[2] = {a, a};
    check_all(c, m, 0, 2, pa2, ok);

    /* a transfer fault: error returned, the slot is not claimed valid, tables forgotten,
     * and the next copy works. */
    nm_pimc_memdev_fail_after(m, 2);
    size_t l2[2] = {20 * KiB, 20 * KiB};
    assert_int_equal(nm_pimc_copy(c, 0, pa, l2), NM_EFAULT);
    assert_false(nm_pimc_slot_valid(c, 0, 0));
    assert_false(nm_pimc_slot_valid(c, 0, 1));
    nm_pimc_get_stats(c, &after);
    assert_int_equal(after.table_entries, 0);
    assert_int_equal(nm_pimc_copy(c, 0, pa, l2), NM_OK);
    check_all(c, m, 0, 2, pa2, l2);
    free(a);
    nm_pimc_destroy(c);
    nm_pimc_memdev_destroy(m);
}

/* Sec. 6.7: in-memory metadata = 12 B per retained block (at the table's load factor) and
 * the offset buffer = 4 B per block; check the bytes the library reports. */
static void test_metadata_overhead(void **state)
{
    (void)state;
    const unsigned nd = 2;
    nm_pimc_memdev *m = mkdev(nd, 4096 * KiB);
    nm_pimc_options o;
    nm_pimc_options_default(&o);
    o.fallback_threshold = 0;
    nm_pimc *c = mkcache(m, &o);
    nm_rng r;
    nm_rng_seed(&r, nm_test_seed(8));
    size_t len = 1024 * KiB;
    uint8_t *a = malloc(len), *b = malloc(len);
    fill_blocks(&r, a, len, 1024, 0, NULL, 0);
    fill_blocks(&r, b, len, 1024, 0, NULL, 0);
    const void *pb[2] = {a, b};
    size_t lens[2] = {len, len};
    assert_int_equal(nm_pimc_copy(c, 0, pb, lens), NM_OK);
    nm_pimc_stats st;
    nm_pimc_get_stats(c, &st);
    assert_int_equal(st.table_entries, 2 * 1024);
    /* 12 B per slot; the table keeps its load <= 3/4, so <= 2x the paper's 12 N / 1024 */
    assert_true(st.table_bytes >= 12u * st.table_entries);
    assert_true(st.table_bytes <= 2 * 12u * st.table_entries + 12 * 64 * nd);
    /* N_D / 256 bytes of offsets per DPU plus the 32-byte descriptor */
    assert_int_equal(st.last_meta_bytes, nd * (len / 256 + 32));
    free(a);
    free(b);
    nm_pimc_destroy(c);
    nm_pimc_memdev_destroy(m);
}

/* Invariant across modes: a slot the cache calls valid reads back exactly the bytes of its
 * last copy, however later batches filled and invalidated the BRB. */
static void run_validity(double thr, bool parallel, uint64_t seed)
{
    enum { ND = 3, NS = 3 };
    nm_pimc_memdev *m = mkdev(ND, 64 * KiB);
    nm_pimc_options o;
    nm_pimc_options_default(&o);
    o.slots = NS;
    o.fallback_threshold = thr;
    o.parallel = parallel;
    o.probe_interval = 3;
    nm_pimc *c = mkcache(m, &o);
    nm_rng r;
    nm_rng_seed(&r, seed);
    uint8_t *last[NS][ND] = {{0}};
    size_t last_len[NS][ND] = {{0}};
    uint8_t *pool = malloc(4 * 1024);
    fill_blocks(&r, pool, 4 * 1024, 1024, 0, NULL, 0);
    for (int round = 0; round < 40; round++) {
        unsigned ns = 1 + (unsigned)nm_rng_below(&r, NS);
        unsigned slots[NS] = {0, 1, 2};
        nm_rng_shuffle(&r, slots, NS, sizeof slots[0]);
        const void *pb[NS * ND];
        size_t pl[NS * ND];
        uint8_t *nb[NS][ND];
        bool equal = nm_rng_below(&r, 2);
        for (unsigned k = 0; k < ns; k++) {
            size_t el = nm_rng_below(&r, 18 * KiB);
            for (unsigned d = 0; d < ND; d++) {
                pl[k * ND + d] = equal ? el : nm_rng_below(&r, 18 * KiB);
                nb[k][d] = malloc(pl[k * ND + d] + 1);
                fill_blocks(&r, nb[k][d], pl[k * ND + d], 1024, round % 4 == 3 ? 0.9 : 0.1, pool, 4);
                pb[k * ND + d] = nb[k][d];
            }
        }
        assert_int_equal(nm_pimc_copy_multi(c, ns, slots, pb, pl), NM_OK);
        for (unsigned k = 0; k < ns; k++)
            for (unsigned d = 0; d < ND; d++) {
                free(last[slots[k]][d]);
                last[slots[k]][d] = nb[k][d];
                last_len[slots[k]][d] = pl[k * ND + d];
                assert_true(nm_pimc_slot_valid(c, slots[k], d));
            }
        for (unsigned s2 = 0; s2 < NS; s2++)
            for (unsigned d = 0; d < ND; d++)
                if (last[s2][d] && nm_pimc_slot_valid(c, s2, d)) {
                    check_read_back(c, s2, d, last[s2][d], last_len[s2][d]);
                    check_dpu_reader(c, m, s2, d, last[s2][d], last_len[s2][d], 2);
                }
    }
    nm_pimc_stats st;
    nm_pimc_get_stats(c, &st);
    assert_true(st.invalidations > 0);
    if (thr >= 1.0) assert_true(st.plain_copies > 30);
    for (unsigned s2 = 0; s2 < NS; s2++)
        for (unsigned d = 0; d < ND; d++) free(last[s2][d]);
    free(pool);
    nm_pimc_destroy(c);
    nm_pimc_memdev_destroy(m);
}

static void test_slot_validity(void **state)
{
    (void)state;
    uint64_t seed = nm_test_seed(9);
    for (int par = 0; par < 2; par++) {
        run_validity(0.0, par, seed++);  /* always CAC */
        run_validity(1.0, par, seed++);  /* plain copies (probes never reach 100%) */
        run_validity(0.3, par, seed++);  /* switching */
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_uneven), cmocka_unit_test(test_dedup_temporal_spatial),
        cmocka_unit_test(test_invalidation),      cmocka_unit_test(test_option_matrix),
        cmocka_unit_test(test_verify_collisions), cmocka_unit_test(test_fallback),
        cmocka_unit_test(test_fallback_epochs),
        cmocka_unit_test(test_errors),            cmocka_unit_test(test_metadata_overhead),
        cmocka_unit_test(test_slot_validity),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
