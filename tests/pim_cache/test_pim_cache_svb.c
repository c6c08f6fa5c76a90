/* The DPU-side Stream VByte decoder against libstreamvbyte's own decoder, on host memory
 * with the mram_read/mram_write rules checked, and copy_u32 end to end. */
#include <streamvbyte.h>

#include "pimc_test_util.h"

static uint32_t draw(nm_rng *r, int dist)
{
    switch (dist) {
    case 0: return (uint32_t)nm_rng_below(r, 1u << 7);                       /* group 1 */
    case 1: return (uint32_t)nm_rng_range(r, 1u << 7, (1u << 14) - 1);       /* group 2 */
    case 2: return nm_rng_u32(r) >> nm_rng_below(r, 32);                     /* mixed lengths */
    default: return nm_rng_u32(r);
    }
}

static void decode_on_dpu(nm_pimc_memdev *m, uint32_t in_off, uint32_t in_len, uint32_t out_off, uint32_t count,
                          unsigned nt)
{
    test_io t = {m, 0, 0};
    nm_pimc_mram_io io = {&t, tio_read, tio_write};
    nm_pimc_svb_args a = {in_off, in_len, out_off, count};
    nm_pimc_svb_shared sh;
    for (unsigned i = 0; i < nt; i++) nm_pimc_svb_phase_sum(&io, &a, i, nt, &sh);
    for (unsigned i = 0; i < nt; i++) nm_pimc_svb_phase_decode(&io, &a, i, nt, &sh);
    assert_int_equal(t.violations, 0);
}

static void test_decoder_matches_libstreamvbyte(void **state)
{
    (void)state;
    nm_pimc_memdev *m;
    assert_int_equal(nm_pimc_memdev_create(1, 1 << 20, &m), NM_OK);
    uint8_t *mram = nm_pimc_memdev_mram(m, 0);
    nm_rng r;
    nm_rng_seed(&r, nm_test_seed(11));
    const uint32_t counts[] = {0, 1, 2, 3, 4, 5, 7, 63, 64, 65, 255, 1000, 4097, 20001};
    for (unsigned ci = 0; ci < NM_ARRAY_LEN(counts); ci++)
        for (int dist = 0; dist < 4; dist++)
            for (unsigned nt = 1; nt <= 24; nt += (nt < 4 ? 1 : 7)) {
                uint32_t n = counts[ci];
                uint32_t *in = malloc((n + 1) * 4), *ref = malloc((n + 1) * 4);
                for (uint32_t i = 0; i < n; i++) in[i] = draw(&r, dist);
                uint8_t *enc = calloc(1, streamvbyte_max_compressedbytes(n) + 16);
                size_t len = streamvbyte_encode(in, n, enc);
                assert_int_equal(streamvbyte_decode(enc, ref, n), len);
                assert_memory_equal(ref, in, (size_t)n * 4);
                uint32_t in_len = (uint32_t)((len + 7) & ~(size_t)7), in_off = 8192, out_off = 512 * 1024;
                memset(mram, 0xee, 1 << 20);
                memcpy(mram + in_off, enc, len);
                decode_on_dpu(m, in_off, in_len, out_off, n, nt);
                if (n) assert_memory_equal(mram + out_off, in, (size_t)n * 4);
                /* nothing written past the padded end */
                assert_int_equal(mram[out_off + ((n * 4 + 7) & ~7u)], 0xee);
                free(in);
                free(ref);
                free(enc);
            }
    nm_pimc_memdev_destroy(m);
}

static void test_copy_u32_compressed(void **state)
{
    (void)state;
    const unsigned nd = 4;
    for (int parallel = 0; parallel < 2; parallel++)
        for (int dist = 0; dist < 3; dist++) {
            nm_pimc_memdev *m;
            assert_int_equal(nm_pimc_memdev_create(nd, 1 << 20, &m), NM_OK);
            nm_pimc_transport t = nm_pimc_memdev_transport(m);
            nm_pimc_options o;
            nm_pimc_options_default(&o);
            o.compress = true;
            o.parallel = parallel;
            nm_pimc *c;
            assert_int_equal(nm_pimc_create(&t, &o, &c), NM_OK);
            nm_rng r;
            nm_rng_seed(&r, nm_test_seed(12 + dist));
            for (int round = 0; round < 6; round++) {
                uint32_t *bufs[4];
                size_t counts[4];
                for (unsigned d = 0; d < nd; d++) {
                    counts[d] = round == 0 && d == 1 ? 0 : (round % 2 ? 30000 : nm_rng_below(&r, 40000));
                    bufs[d] = malloc(counts[d] * 4 + 4);
                    for (size_t i = 0; i < counts[d]; i++) bufs[d][i] = draw(&r, dist);
                }
                nm_err e = nm_pimc_copy_u32(c, 1, (const uint32_t *const *)bufs, counts);
                if (e) fprintf(stderr, "%s\n", nm_last_errmsg());
                assert_int_equal(e, NM_OK);
                nm_pimc_stats st;
                nm_pimc_get_stats(c, &st);
                if (dist == 0 && round % 2) assert_true(st.last_sent_bytes * 3 < st.last_logical_bytes);
                for (unsigned d = 0; d < nd; d++) {
                    check_read_back(c, 1, d, (const uint8_t *)bufs[d], counts[d] * 4);
                    check_dpu_reader(c, m, 1, d, (const uint8_t *)bufs[d], counts[d] * 4, 2);
                    free(bufs[d]);
                }
            }
            /* too many integers for the BRB */
            size_t huge[4] = {1, 1, 1 << 20, 1};
            uint32_t one = 1;
            const uint32_t *pb[4] = {&one, &one, &one, &one};
            assert_int_equal(nm_pimc_copy_u32(c, 0, pb, huge), NM_ERANGE);
            nm_pimc_destroy(c);
            nm_pimc_memdev_destroy(m);
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decoder_matches_libstreamvbyte),
        cmocka_unit_test(test_copy_u32_compressed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
