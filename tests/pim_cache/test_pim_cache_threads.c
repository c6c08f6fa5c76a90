/* DRM host threads partition the DPUs: many DPUs, several threads, repeated and fresh
 * data; run under ThreadSanitizer by `make tsan`. */
#include "pimc_test_util.h"

static void test_threads(void **state)
{
    (void)state;
    const unsigned nd = 24;
    nm_pimc_memdev *m;
    assert_int_equal(nm_pimc_memdev_create(nd, 128 * 1024, &m), NM_OK);
    for (int parallel = 0; parallel < 2; parallel++) {
        nm_pimc_transport t = nm_pimc_memdev_transport(m);
        nm_pimc_options o;
        nm_pimc_options_default(&o);
        o.threads = 4;
        o.parallel = parallel;
        o.verify = parallel;
        o.probe_interval = 2;
        nm_pimc *c;
        assert_int_equal(nm_pimc_create(&t, &o, &c), NM_OK);
        nm_rng r;
        nm_rng_seed(&r, nm_test_seed(21));
        uint8_t *pool = malloc(4 * 1024);
        fill_blocks(&r, pool, 4 * 1024, 1024, 0, NULL, 0);
        uint8_t *bufs[24];
        size_t lens[24];
        for (int round = 0; round < 12; round++) {
            double rep = (round / 3) % 2 ? 0.9 : 0.0;
            for (unsigned d = 0; d < nd; d++) {
                lens[d] = nm_rng_below(&r, 40 * 1024);
                bufs[d] = malloc(lens[d] + 1);
                fill_blocks(&r, bufs[d], lens[d], 1024, rep, pool, 4);
            }
            assert_int_equal(nm_pimc_copy(c, round % 2, (const void *const *)bufs, lens), NM_OK);
            for (unsigned d = 0; d < nd; d++) {
                check_read_back(c, round % 2, d, bufs[d], lens[d]);
                free(bufs[d]);
            }
        }
        nm_pimc_stats st;
        nm_pimc_get_stats(c, &st);
        assert_int_equal(st.copies, 12);
        free(pool);
        nm_pimc_destroy(c);
    }
    nm_pimc_memdev_destroy(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_threads)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
