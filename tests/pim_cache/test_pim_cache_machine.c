/* PIM-CACHE on the emulated UPMEM machine: the DPU program reads every logical buffer back
 * through the offset lists (checksum kernel), decodes Stream VByte streams, and adds two
 * deduplicated vectors; the results are compared with the host's. */
#include "nearmem/pim_cache_machine.h"
#include "pimc_test_util.h"

#define NDPU 8u
#define REGION (4u << 20) /* cache region per DPU; the vector-add output goes after it */

typedef struct fixture {
    struct dpu_set_t set;
    nm_pimc_transport t;
    nm_pimc *c;
} fixture;

static void setup(fixture *f, const nm_pimc_options *o)
{
    assert_int_equal(dpu_alloc(NDPU, NULL, &f->set), DPU_OK);
    assert_int_equal(dpu_load(f->set, NM_PIMC_PROGRAM, NULL), DPU_OK);
    assert_int_equal(nm_pimc_machine_transport(f->set, 0, REGION, &f->t), NM_OK);
    nm_err e = nm_pimc_create(&f->t, o, &f->c);
    if (e) fprintf(stderr, "%s\n", nm_last_errmsg());
    assert_int_equal(e, NM_OK);
}

static void teardown(fixture *f)
{
    nm_pimc_destroy(f->c);
    nm_pimc_machine_transport_free(&f->t);
    assert_int_equal(dpu_free(f->set), DPU_OK);
}

static void check_sums(fixture *f, unsigned slot, uint8_t **bufs, const size_t *lens)
{
    uint64_t sums[NDPU];
    nm_err e = nm_pimc_machine_sum(&f->t, (uint32_t)nm_pimc_slot_desc(f->c, slot), sums);
    if (e) fprintf(stderr, "%s\n", nm_last_errmsg());
    assert_int_equal(e, NM_OK);
    for (unsigned d = 0; d < NDPU; d++) {
        assert_true(sums[d] == nm_pimc_checksum(bufs[d], lens[d]));
        check_read_back(f->c, slot, d, bufs[d], lens[d]);
    }
}

static void test_machine_copy_and_kernel_reads(void **state)
{
    (void)state;
    for (int parallel = 0; parallel < 2; parallel++) {
        fixture f;
        nm_pimc_options o;
        nm_pimc_options_default(&o);
        o.parallel = parallel;
        o.threads = 2;
        o.fallback_threshold = 0; /* lockstep padding counts as sent and could trigger it */
        setup(&f, &o);
        nm_rng r;
        nm_rng_seed(&r, nm_test_seed(31));
        uint8_t *pool = malloc(4 * 1024);
        fill_blocks(&r, pool, 4096, 1024, 0, NULL, 0);
        uint8_t *bufs[NDPU];
        size_t lens[NDPU];
        for (unsigned d = 0; d < NDPU; d++) {
            lens[d] = d == 3 ? 0 : nm_rng_below(&r, 300 * 1024);
            bufs[d] = malloc(lens[d] + 1);
            fill_blocks(&r, bufs[d], lens[d], 1024, 0.6, pool, 4);
        }
        assert_int_equal(nm_pimc_copy(f.c, 0, (const void *const *)bufs, lens), NM_OK);
        nm_pimc_stats s1, s2;
        nm_pimc_get_stats(f.c, &s1);
        assert_true(s1.last_xfer_modeled_ns > 0);
        /* lockstep pads every DPU to the largest miss count, which the figure includes */
        if (!parallel) assert_true(s1.last_dedup_pct > 30.0);
        assert_true(s1.last_hits * 3 > s1.last_blocks);
        check_sums(&f, 0, bufs, lens);
        /* the same again into slot 1: only offsets travel, so it models much faster */
        assert_int_equal(nm_pimc_copy(f.c, 1, (const void *const *)bufs, lens), NM_OK);
        nm_pimc_get_stats(f.c, &s2);
        assert_int_equal(s2.last_sent_bytes, 0);
        assert_true(s2.last_xfer_modeled_ns * 10 < s1.last_xfer_modeled_ns);
        check_sums(&f, 1, bufs, lens);
        check_sums(&f, 0, bufs, lens);
        for (unsigned d = 0; d < NDPU; d++) free(bufs[d]);
        free(pool);
        teardown(&f);
    }
}

static void test_machine_vbyte(void **state)
{
    (void)state;
    fixture f;
    nm_pimc_options o;
    nm_pimc_options_default(&o);
    o.compress = true;
    setup(&f, &o);
    nm_rng r;
    nm_rng_seed(&r, nm_test_seed(32));
    uint32_t *bufs[NDPU];
    size_t counts[NDPU];
    for (unsigned d = 0; d < NDPU; d++) {
        counts[d] = d == 2 ? 0 : 1 + nm_rng_below(&r, 50000);
        bufs[d] = malloc(counts[d] * 4 + 4);
        for (size_t i = 0; i < counts[d]; i++) bufs[d][i] = nm_rng_u32(&r) >> nm_rng_below(&r, 32);
    }
    nm_err e = nm_pimc_copy_u32(f.c, 0, (const uint32_t *const *)bufs, counts);
    if (e) fprintf(stderr, "%s\n", nm_last_errmsg());
    assert_int_equal(e, NM_OK);
    size_t lens[NDPU];
    for (unsigned d = 0; d < NDPU; d++) lens[d] = counts[d] * 4;
    check_sums(&f, 0, (uint8_t **)bufs, lens);
    for (unsigned d = 0; d < NDPU; d++) free(bufs[d]);
    teardown(&f);
}

static void test_machine_vadd(void **state)
{
    (void)state;
    fixture f;
    nm_pimc_options o;
    nm_pimc_options_default(&o);
    setup(&f, &o);
    nm_rng r;
    nm_rng_seed(&r, nm_test_seed(33));
    const size_t n = 20000; /* uint32 per DPU: not a multiple of a block */
    uint32_t *a[NDPU], *b[NDPU];
    size_t lens[2 * NDPU];
    const void *bufs[2 * NDPU];
    for (unsigned d = 0; d < NDPU; d++) {
        a[d] = malloc(n * 4);
        b[d] = malloc(n * 4);
        for (size_t i = 0; i < n; i++) {
            a[d][i] = (uint32_t)(i % 7);
            b[d][i] = nm_rng_u32(&r);
        }
        bufs[d] = a[d];
        bufs[NDPU + d] = b[d];
        lens[d] = lens[NDPU + d] = n * 4;
    }
    unsigned slots[2] = {0, 1};
    assert_int_equal(nm_pimc_copy_multi(f.c, 2, slots, bufs, lens), NM_OK);
    uint32_t out = nm_pimc_machine_addr(&f.t, REGION);
    nm_err e = nm_pimc_machine_vadd(&f.t, (uint32_t)nm_pimc_slot_desc(f.c, 0), (uint32_t)nm_pimc_slot_desc(f.c, 1), out);
    if (e) fprintf(stderr, "%s\n", nm_last_errmsg());
    assert_int_equal(e, NM_OK);
    uint32_t *c = malloc(n * 4);
    for (unsigned d = 0; d < NDPU; d++) {
        assert_int_equal(dpu_copy_from(nm_pim_set_dpu(f.set, d), DPU_MRAM_HEAP_POINTER_NAME, REGION, c, n * 4), DPU_OK);
        for (size_t i = 0; i < n; i++) assert_int_equal(c[i], a[d][i] + b[d][i]);
        free(a[d]);
        free(b[d]);
    }
    free(c);
    teardown(&f);
}

/* Content-defined chunks read by the DPU kernel through the (address, start) list, serial
 * and parallel, shifted copies deduplicated. */
static void test_machine_cdc(void **state)
{
    (void)state;
    for (int parallel = 0; parallel < 2; parallel++) {
        fixture f;
        nm_pimc_options o;
        nm_pimc_options_default(&o);
        o.parallel = parallel;
        o.chunking = NM_PIMC_CDC;
        o.block_size = 512;
        o.threads = 2;
        o.fallback_threshold = 0;
        setup(&f, &o);
        nm_rng r;
        nm_rng_seed(&r, nm_test_seed(34));
        uint8_t *bufs[NDPU], *shifted[NDPU];
        size_t lens[NDPU], slens[NDPU];
        for (unsigned d = 0; d < NDPU; d++) {
            lens[d] = d == 5 ? 0 : 1 + nm_rng_below(&r, 200 * 1024);
            bufs[d] = malloc(lens[d] + 16);
            for (size_t i = 0; i < lens[d]; i++) bufs[d][i] = "ACGT"[nm_rng_below(&r, 4)];
            size_t cut = lens[d] / 3;
            slens[d] = lens[d] + 11;
            shifted[d] = malloc(slens[d]);
            memcpy(shifted[d], bufs[d], cut);
            memcpy(shifted[d] + cut, "TTAGGGTTAGG", 11);
            memcpy(shifted[d] + cut + 11, bufs[d] + cut, lens[d] - cut);
        }
        assert_int_equal(nm_pimc_copy(f.c, 0, (const void *const *)bufs, lens), NM_OK);
        check_sums(&f, 0, bufs, lens);
        assert_int_equal(nm_pimc_copy(f.c, 1, (const void *const *)shifted, slens), NM_OK);
        nm_pimc_stats st;
        nm_pimc_get_stats(f.c, &st);
        assert_true(st.last_hits * 2 > st.last_blocks);
        check_sums(&f, 1, shifted, slens);
        check_sums(&f, 0, bufs, lens);
        for (unsigned d = 0; d < NDPU; d++) {
            free(bufs[d]);
            free(shifted[d]);
        }
        teardown(&f);
    }
}

/* The drop-in: nm_pimc_prepare_xfer + nm_pimc_push_xfer with dpu_push_xfer's arguments;
 * the kernel reads the data through the slot written at the destination. */
static void test_machine_push_xfer(void **state)
{
    (void)state;
    fixture f;
    nm_pimc_options o;
    nm_pimc_options_default(&o);
    o.parallel = true;
    o.threads = 2;
    setup(&f, &o);
    nm_rng r;
    nm_rng_seed(&r, nm_test_seed(35));
    const size_t len = 96 * 1024;
    const uint32_t dest = REGION + (1u << 20); /* heap offset, after the cache's region */
    uint8_t *all = malloc(len * NDPU);
    uint8_t *bufs[NDPU];
    uint8_t *pool = malloc(4096);
    fill_blocks(&r, pool, 4096, 1024, 0, NULL, 0);
    for (unsigned d = 0; d < NDPU; d++) {
        bufs[d] = all + d * len;
        fill_blocks(&r, bufs[d], len, 1024, 0.7, pool, 4);
    }
    nm_pimc_reg *reg;
    assert_int_equal(nm_pimc_register(f.c, all, len * NDPU, &reg), NM_OK);
    struct dpu_set_t dpu;
    uint32_t i;
    uint32_t desc = nm_pimc_machine_addr(&f.t, dest);
    for (int round = 0; round < 3; round++) {
        if (round == 2) bufs[4][777] ^= 1; /* a write between copies arrives */
        DPU_FOREACH(f.set, dpu, i) assert_int_equal(nm_pimc_prepare_xfer(f.c, dpu, bufs[i]), DPU_OK);
        dpu_error_t de = nm_pimc_push_xfer(f.c, f.set, DPU_XFER_TO_DPU, DPU_MRAM_HEAP_POINTER_NAME, dest, len,
                                           DPU_XFER_DEFAULT);
        if (de) fprintf(stderr, "%s\n", nm_last_errmsg());
        assert_int_equal(de, DPU_OK);
        uint64_t sums[NDPU];
        assert_int_equal(nm_pimc_machine_sum(&f.t, desc, sums), NM_OK);
        for (unsigned d = 0; d < NDPU; d++) assert_true(sums[d] == nm_pimc_checksum(bufs[d], len));
        nm_pimc_stats st;
        nm_pimc_get_stats(f.c, &st);
        /* unchanged: nothing sent but the partial pages at the ends of the unaligned buffer
         * (never protected), padded to the rank */
        if (round == 1) assert_true(st.last_sent_bytes * 10 < len * NDPU);
    }
    /* refused: no prepared buffers (reset by the last push), a destination in the cache's
     * region, another set; FROM_DPU passes through (raw MRAM: the slot's descriptor) */
    assert_int_equal(nm_pimc_push_xfer(f.c, f.set, DPU_XFER_TO_DPU, DPU_MRAM_HEAP_POINTER_NAME, dest, len, 0),
                     DPU_ERR_INVALID_MEMORY_TRANSFER);
    DPU_FOREACH(f.set, dpu, i) nm_pimc_prepare_xfer(f.c, dpu, bufs[i]);
    assert_int_not_equal(nm_pimc_push_xfer(f.c, f.set, DPU_XFER_TO_DPU, DPU_MRAM_HEAP_POINTER_NAME, 4096, len,
                                           DPU_XFER_NO_RESET),
                         DPU_OK);
    assert_int_not_equal(nm_pimc_push_xfer(f.c, nm_pim_set_dpu(f.set, 0), DPU_XFER_TO_DPU,
                                           DPU_MRAM_HEAP_POINTER_NAME, dest, len, DPU_XFER_NO_RESET),
                         DPU_OK);
    uint64_t raw[NDPU][4];
    DPU_FOREACH(f.set, dpu, i) nm_pimc_prepare_xfer(f.c, dpu, raw[i]);
    assert_int_equal(nm_pimc_push_xfer(f.c, f.set, DPU_XFER_FROM_DPU, DPU_MRAM_HEAP_POINTER_NAME, dest, 32, 0), DPU_OK);
    for (unsigned d = 0; d < NDPU; d++) assert_int_equal((uint32_t)raw[d][0], NM_PIMC_DESC_MAGIC);
    free(all);
    free(pool);
    teardown(&f);
}

/* Ranks whose transfers overlap share the host-side limit of the machine's transfer model:
 * a CAC copy that sends everything (fresh data, fallback off) cannot take less than moving
 * its bytes at the aggregate of 4 ranks, and a default cache pushes such data plain (the
 * decision prices the push as the machine does: every rank at once, host-limited). A slow
 * link (0.01 GB/s a rank, slower serial copies) makes the host work negligible beside it. */
static void test_machine_rank_schedule(void **state)
{
    (void)state;
    enum { ND = 256, LEN = 64 * 1024 };
    struct dpu_set_t set;
    assert_int_equal(dpu_alloc(ND, "rank_to=0.01,serial_to=0.0002", &set), DPU_OK);
    assert_int_equal(dpu_load(set, NM_PIMC_PROGRAM, NULL), DPU_OK);
    nm_pim_cost cost;
    assert_int_equal(nm_pim_get_cost(set, &cost), DPU_OK);
    nm_pimc_transport t;
    assert_int_equal(nm_pimc_machine_transport(set, 0, 1u << 20, &t), NM_OK);
    assert_true(t.push_rank_growth == cost.bw_rank_growth && t.push_rank_growth < 1);
    nm_rng r;
    nm_rng_seed(&r, nm_test_seed(36));
    uint8_t *all = malloc((size_t)ND * LEN);
    const void *bufs[ND];
    size_t lens[ND];
    for (unsigned d = 0; d < ND; d++) {
        bufs[d] = all + (size_t)d * LEN;
        lens[d] = LEN;
        fill_blocks(&r, all + (size_t)d * LEN, LEN, 1024, 0, NULL, 0);
    }
    double agg4 = cost.bw_rank_to_dpu * (1 + 3 * cost.bw_rank_growth); /* GB/s = bytes/ns */
    double push_ns = (double)ND * LEN / agg4;
    for (int forced = 1; forced >= 0; forced--) {
        nm_pimc_options o;
        nm_pimc_options_default(&o);
        o.parallel = true;
        o.threads = 2;
        if (forced) o.fallback_threshold = 0;
        nm_pimc *c;
        assert_int_equal(nm_pimc_create(&t, &o, &c), NM_OK);
        assert_int_equal(nm_pimc_copy(c, 0, bufs, lens), NM_OK);
        nm_pimc_stats st;
        nm_pimc_get_stats(c, &st);
        double moved = (double)(st.last_sent_bytes + st.last_meta_bytes);
        if (forced) {
            assert_int_equal(st.last_mode, NM_PIMC_MODE_CAC);
            assert_true(moved >= (double)ND * LEN);
            /* the ranks went one by one, each alone at a rank's bandwidth; together they
             * cannot beat the aggregate (ranks fully parallel would give about a quarter) */
            assert_true(st.last_total_crit_ns >= moved / agg4 * 0.999);
            assert_true(st.last_total_ns >= moved / agg4 * 0.999);
        } else {
            assert_int_equal(st.last_mode, NM_PIMC_MODE_PLAIN);
            assert_true(st.last_total_crit_ns >= push_ns * 0.999);
            assert_true(st.last_total_crit_ns < push_ns * 1.05);
        }
        for (unsigned d = 0; d < ND; d++) check_read_back(c, 0, d, bufs[d], lens[d]);
        nm_pimc_destroy(c);
    }
    free(all);
    nm_pimc_machine_transport_free(&t);
    assert_int_equal(dpu_free(set), DPU_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_machine_cdc),
        cmocka_unit_test(test_machine_push_xfer),
        cmocka_unit_test(test_machine_rank_schedule),
        cmocka_unit_test(test_machine_copy_and_kernel_reads),
        cmocka_unit_test(test_machine_vbyte),
        cmocka_unit_test(test_machine_vadd),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
