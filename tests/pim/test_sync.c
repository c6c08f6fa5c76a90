/* Mutexes, barriers and semaphores under 24 tasklets, on several DPUs
 * emulated by a pool of host threads. */
#include "nm_test.h"
#include "pim_test_kernels.h"

static struct dpu_set_t g_set;
enum { NDPUS = 8 };

static int setup(void **state)
{
    (void)state;
    if (dpu_alloc(NDPUS, "threads=2", &g_set) != DPU_OK || dpu_load(g_set, "pim_test", NULL) != DPU_OK ||
        nm_pim_set_tasklets(g_set, 24) != DPU_OK)
        return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    return dpu_free(g_set) == DPU_OK ? 0 : -1;
}

static void test_mutex_24(void **state)
{
    (void)state;
    /* Reload so g_counter starts at its initial 0. */
    assert_int_equal(dpu_load(g_set, "pim_test", NULL), DPU_OK);
    assert_int_equal(nm_pim_set_tasklets(g_set, 24), DPU_OK);
    pim_test_set_args(g_set, M_MUTEX, 50, 0, 0);
    assert_int_equal(dpu_launch(g_set, DPU_SYNCHRONOUS), DPU_OK);
    struct dpu_set_t dpu;
    DPU_FOREACH(g_set, dpu)
    {
        /* Read-charge-write under the lock: any lost update would show. */
        assert_int_equal(pim_test_res(dpu, 0), 24 * 50);
        nm_pim_dpu_stats ds;
        assert_int_equal(nm_pim_get_dpu_stats(dpu, &ds), DPU_OK);
        assert_true(ds.lock_wait_cycles > 0);
        /* Spinning tasklets issue instructions: more than were charged. */
        assert_true(ds.instructions > 24 * 50 * (5 + 2 + 2));
        uint64_t waited = 0;
        for (uint32_t t = 0; t < 24; t++) {
            nm_pim_tasklet_stats ts;
            assert_int_equal(nm_pim_get_tasklet_stats(dpu, t, &ts), DPU_OK);
            waited += ts.lock_wait_cycles;
        }
        assert_int_equal(waited, ds.lock_wait_cycles);
    }
    /* Without the mutex the same kernel loses updates: the check above has teeth. */
    assert_int_equal(dpu_load(g_set, "pim_test", NULL), DPU_OK);
    assert_int_equal(nm_pim_set_tasklets(g_set, 24), DPU_OK);
    pim_test_set_args(g_set, M_MUTEX, 50, 1, 0);
    assert_int_equal(dpu_launch(g_set, DPU_SYNCHRONOUS), DPU_OK);
    DPU_FOREACH(g_set, dpu) assert_true(pim_test_res(dpu, 0) < 24 * 50);
}

static void test_trylock_24(void **state)
{
    (void)state;
    pim_test_set_args(g_set, M_TRYLOCK, 1000, 0, 0);
    assert_int_equal(dpu_launch(g_set, DPU_SYNCHRONOUS), DPU_OK);
    struct dpu_set_t dpu;
    DPU_FOREACH(g_set, dpu)
    {
        /* All try at the same cycle; exactly one wins (the lowest id). */
        uint64_t wins = 0;
        for (uint32_t t = 0; t < 24; t++)
            wins += pim_test_res(dpu, t);
        assert_int_equal(wins, 1);
        assert_int_equal(pim_test_res(dpu, 0), 1);
    }
}

static void test_barrier_24(void **state)
{
    (void)state;
    pim_test_set_args(g_set, M_BARRIER, 20, 0, 0);
    assert_int_equal(dpu_launch(g_set, DPU_SYNCHRONOUS), DPU_OK);
    struct dpu_set_t dpu;
    DPU_FOREACH(g_set, dpu)
    {
        assert_int_equal(pim_test_res(dpu, 0), 0); /* nobody ran ahead of a barrier */
        nm_pim_dpu_stats ds;
        assert_int_equal(nm_pim_get_dpu_stats(dpu, &ds), DPU_OK);
        assert_true(ds.sync_wait_cycles > 0);
        /* Tasklet 23 charges the most per phase, so it never waits at the first barrier of a phase. */
        nm_pim_tasklet_stats t0, t23;
        assert_int_equal(nm_pim_get_tasklet_stats(dpu, 0, &t0), DPU_OK);
        assert_int_equal(nm_pim_get_tasklet_stats(dpu, 23, &t23), DPU_OK);
        assert_true(t0.sync_wait_cycles > t23.sync_wait_cycles);
    }
}

static void test_semaphore_24(void **state)
{
    (void)state;
    pim_test_set_args(g_set, M_SEM, 0, 0, 0);
    assert_int_equal(dpu_launch(g_set, DPU_SYNCHRONOUS), DPU_OK);
    struct dpu_set_t dpu;
    DPU_FOREACH(g_set, dpu)
    {
        assert_int_equal(pim_test_res(dpu, 0), 23);
        nm_pim_tasklet_stats ts;
        assert_int_equal(nm_pim_get_tasklet_stats(dpu, 5, &ts), DPU_OK);
        assert_true(ts.sync_wait_cycles > 0); /* takers waited for tasklet 0 */
    }
    /* Semaphores are reset at boot: the same launch works again. */
    pim_test_set_args(g_set, M_SEM, 0, 0, 0);
    assert_int_equal(dpu_launch(g_set, DPU_SYNCHRONOUS), DPU_OK);
    DPU_FOREACH(g_set, dpu) assert_int_equal(pim_test_res(dpu, 0), 23);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mutex_24),
        cmocka_unit_test(test_trylock_24),
        cmocka_unit_test(test_barrier_24),
        cmocka_unit_test(test_semaphore_24),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
