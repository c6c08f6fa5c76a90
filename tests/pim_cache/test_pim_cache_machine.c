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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_machine_copy_and_kernel_reads),
        cmocka_unit_test(test_machine_vbyte),
        cmocka_unit_test(test_machine_vadd),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
