/* DRM host threads partition the DPUs: many DPUs, several threads, repeated and fresh
 * data; run under ThreadSanitizer by `make tsan`. */
#include <pthread.h>

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

/* Write tracking with threads: a writer thread writes into a registered buffer between
 * copies (and its first writes fault into the handler on its own thread), while the
 * cache's host threads plan in parallel mode; every copy reads back right. */
typedef struct writer {
    uint8_t *data;
    size_t len;
    pthread_barrier_t *bar;
    int rounds;
    uint64_t seed;
} writer;

static void *write_rounds(void *arg)
{
    writer *w = arg;
    nm_rng r;
    nm_rng_seed(&r, w->seed);
    for (int i = 0; i < w->rounds; i++) {
        for (int k = 0; k < 20; k++) w->data[nm_rng_below(&r, w->len)] ^= (uint8_t)(1 + k);
        pthread_barrier_wait(w->bar); /* written: copy now */
        pthread_barrier_wait(w->bar); /* copied */
    }
    return NULL;
}

static void test_threads_tracking(void **state)
{
    (void)state;
    const unsigned nd = 16;
    const size_t per = 64 * 1024;
    nm_pimc_memdev *m;
    assert_int_equal(nm_pimc_memdev_create(nd, 512 * 1024, &m), NM_OK);
    for (int v = 0; v < 4; v++) {
        int ch = v & 1; /* fixed, CDC; write tracking by uffd (where available), mprotect */
        nm_pimc_transport t = nm_pimc_memdev_transport(m);
        t.dpus_per_rank = 4;
        nm_pimc_options o;
        nm_pimc_options_default(&o);
        o.threads = 4;
        o.parallel = true;
        o.chunking = (nm_pimc_chunking)ch;
        o.track_granule = 4096;
        o.track_mode = v & 2 ? NM_PIMC_TRACK_MPROTECT : NM_PIMC_TRACK_AUTO;
        nm_pimc *c;
        assert_int_equal(nm_pimc_create(&t, &o, &c), NM_OK);
        uint8_t *data = malloc(per * nd);
        nm_rng r;
        nm_rng_seed(&r, nm_test_seed(22));
        fill_blocks(&r, data, per * nd, 1024, 0, NULL, 0);
        nm_pimc_reg *reg;
        assert_int_equal(nm_pimc_register(c, data, per * nd, &reg), NM_OK);
        const void *bufs[16];
        size_t lens[16];
        for (unsigned d = 0; d < nd; d++) {
            bufs[d] = data + d * per;
            lens[d] = per;
        }
        pthread_barrier_t bar;
        pthread_barrier_init(&bar, NULL, 2);
        writer w = {data, per * nd, &bar, 6, nm_test_seed(23)};
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, write_rounds, &w), 0);
        for (int i = 0; i < 6; i++) {
            pthread_barrier_wait(&bar);
            assert_int_equal(nm_pimc_copy(c, 0, bufs, lens), NM_OK);
            for (unsigned d = 0; d < nd; d++) check_read_back(c, 0, d, bufs[d], lens[d]);
            pthread_barrier_wait(&bar);
        }
        pthread_join(th, NULL);
        pthread_barrier_destroy(&bar);
        nm_pimc_destroy(c);
        free(data);
    }
    nm_pimc_memdev_destroy(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_threads), cmocka_unit_test(test_threads_tracking)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
