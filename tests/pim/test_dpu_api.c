/* DPU API and the cost model: exact modeled cycles for compute (revolver
 * pipeline), DMA (alpha + beta * bytes, one engine per DPU), perf counters,
 * hardware units, WRAM heap, and MRAM data paths. */
#include <string.h>

#include "nm_test.h"
#include "pim_test_kernels.h"

static struct dpu_set_t g_set, g_dpu;

static int setup(void **state)
{
    (void)state;
    if (dpu_alloc(1, "threads=1", &g_set) != DPU_OK || dpu_load(g_set, "pim_test", NULL) != DPU_OK)
        return -1;
    DPU_FOREACH(g_set, g_dpu) { break; }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    return dpu_free(g_set) == DPU_OK ? 0 : -1;
}

static void run(uint32_t tasklets, uint32_t mode, uint64_t a0, uint64_t a1, uint64_t a2)
{
    assert_int_equal(nm_pim_set_tasklets(g_set, tasklets), DPU_OK);
    pim_test_set_args(g_set, mode, a0, a1, a2);
    assert_int_equal(dpu_launch(g_set, DPU_SYNCHRONOUS), DPU_OK);
}

static void test_revolver(void **state)
{
    (void)state;
    /* One tasklet issues every 11 cycles. */
    run(1, M_CHARGE, 1000, 0, 0);
    assert_int_equal(pim_test_res(g_dpu, 0), 11000);
    /* Up to 11 tasklets: each still at 1/11, no slowdown. */
    run(11, M_CHARGE, 1000, 0, 0);
    for (uint32_t t = 0; t < 11; t++)
        assert_int_equal(pim_test_res(g_dpu, t), 11000);
    /* 16 tasklets share one issue slot per cycle: 16 cycles per instruction each. */
    run(16, M_CHARGE, 1000, 0, 0);
    for (uint32_t t = 0; t < 16; t++)
        assert_int_equal(pim_test_res(g_dpu, t), 16000);
    nm_pim_dpu_stats ds;
    assert_int_equal(nm_pim_get_dpu_stats(g_dpu, &ds), DPU_OK);
    assert_int_equal(ds.instructions, 16000);
    assert_int_equal(ds.cycles, 16000); /* IPC 1 */
    /* Unequal work: 2 tasklets, 100 and 1000 instructions: both at 1/11. */
    run(24, M_CHARGE, 500, 0, 0);
    assert_int_equal(pim_test_res(g_dpu, 23), 24 * 500);
}

/* Processor sharing, checked against its closed form: with charges
 * c_0 < c_1 < ... all starting at cycle 0, tasklet j finishes at
 * sum_{i<=j} (c_i - c_{i-1}) * max(11, n - i). Random sizes and counts. */
static void test_revolver_random(void **state)
{
    (void)state;
    uint64_t s = nm_test_seed(777) | 1;
    for (int round = 0; round < 40; round++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        uint32_t n = 1 + (uint32_t)(s % 24);
        uint64_t base = 1 + (s >> 8) % 5000, step = (s >> 24) % 300;
        run(n, M_CHARGE2, base, step, 0);
        uint64_t t = 0, prev = 0;
        for (uint32_t j = 0; j < n; j++) {
            uint64_t c = base + j * step;
            uint64_t k = n - j;
            t += (c - prev) * (k > 11 ? k : 11);
            prev = c;
            assert_int_equal(pim_test_res(g_dpu, j), t);
        }
    }
}

static void test_dma_cost(void **state)
{
    (void)state;
    static const uint32_t sizes[] = {8, 64, 512, 2048};
    for (size_t k = 0; k < 4; k++) {
        run(1, M_DMA_TIMING, sizes[k], 0, 0);
        /* one issued instruction (11 cycles) + alpha + beta * bytes (PrIM). */
        assert_int_equal(pim_test_res(g_dpu, 0), 11 + 77 + sizes[k] / 2);
        assert_int_equal(pim_test_res(g_dpu, 1), 11 + 61 + sizes[k] / 2);
    }
    /* One DMA engine: 4 tasklets reading 2 KiB at the same time are served
     * one after another; the last write finishes after 8 transfers. */
    run(4, M_COPY, 1, 0, 0);
    nm_pim_dpu_stats ds;
    assert_int_equal(nm_pim_get_dpu_stats(g_dpu, &ds), DPU_OK);
    assert_int_equal(ds.dma_busy_cycles, 4 * (77 + 1024) + 4 * (61 + 1024));
    assert_true(ds.cycles >= ds.dma_busy_cycles);
    nm_pim_tasklet_stats ts;
    assert_int_equal(nm_pim_get_tasklet_stats(g_dpu, 3, &ts), DPU_OK);
    /* Tasklet 3's read waits behind three others. */
    assert_true(ts.dma_wait_cycles >= 4 * (77 + 1024));
}

static void test_data_paths(void **state)
{
    (void)state;
    /* Host writes MRAM heap, kernel adds arg0 to every word, host reads back. */
    uint64_t in[4 * PIM_TEST_BLOCK / 8], out[4 * PIM_TEST_BLOCK / 8];
    for (size_t i = 0; i < sizeof(in) / 8; i++)
        in[i] = i * 3;
    assert_int_equal(dpu_copy_to(g_set, DPU_MRAM_HEAP_POINTER_NAME, 0, in, sizeof(in)), DPU_OK);
    run(4, M_COPY, 100, 0, 0);
    assert_int_equal(dpu_copy_from(g_set, DPU_MRAM_HEAP_POINTER_NAME, 0, out, sizeof(out)), DPU_OK);
    for (size_t i = 0; i < sizeof(in) / 8; i++)
        assert_int_equal(out[i], i * 3 + 100);
    /* The MRAM variable mvar sits below the heap and is untouched. */
    uint64_t mv[64];
    assert_int_equal(dpu_copy_from(g_set, "mvar", 0, mv, sizeof(mv)), DPU_OK);
}

static void test_heap_perf_hw(void **state)
{
    (void)state;
    /* mem_alloc: 8-byte aligned, disjoint per tasklet; mem_reset restarts at the base. */
    run(4, M_HEAP, 100, 0, 0);
    uint64_t p[4];
    for (uint32_t t = 0; t < 4; t++) {
        p[t] = pim_test_res(g_dpu, t);
        assert_int_equal(p[t] % 8, 0);
    }
    for (uint32_t t = 1; t < 4; t++)
        assert_int_equal(p[t] - p[t - 1], 104); /* 100 rounded up to 8, in tasklet order */
    uint64_t after_reset = 0;
    assert_int_equal(dpu_copy_from(g_set, "res2", 0, &after_reset, 8), DPU_OK);
    assert_int_equal(after_reset, p[0]);
    nm_pim_dpu_stats ds;
    assert_int_equal(nm_pim_get_dpu_stats(g_dpu, &ds), DPU_OK);
    assert_int_equal(ds.wram_high_water, ds.wram_static_bytes + 4 * 104);

    /* Perf counters: cycles, then instructions, then off. */
    run(1, M_PERF, 0, 0, 0);
    assert_int_equal(pim_test_res(g_dpu, 0), 101 * 11); /* 100 charged + perfcounter_get itself */
    assert_int_equal(pim_test_res(g_dpu, 1), 101);
    assert_int_equal(pim_test_res(g_dpu, 2), 0);
    assert_int_equal(pim_test_res(g_dpu, 3), 0);

    /* Hardware unit: per-DPU state, one instruction per exec plus latency. */
    run(1, M_HW, 10, 0, 0);
    assert_int_equal(pim_test_res(g_dpu, 0), 10 * 11);
    assert_int_equal(pim_test_res(g_dpu, 1), 10);
    run(1, M_HW, 10, 5, 0);
    assert_int_equal(pim_test_res(g_dpu, 0), 10 * (11 + 5));
    assert_int_equal(pim_test_res(g_dpu, 1), 20); /* state persists across launches */
    assert_int_equal(nm_pim_get_dpu_stats(g_dpu, &ds), DPU_OK);
    assert_int_equal(ds.hw_unit_ops, 10);
    /* dpu_load resets the unit. */
    assert_int_equal(dpu_load(g_set, "pim_test", NULL), DPU_OK);
    run(1, M_HW, 3, 0, 0);
    assert_int_equal(pim_test_res(g_dpu, 1), 3);
}

static void test_frequency(void **state)
{
    (void)state;
    struct dpu_set_t s;
    assert_int_equal(dpu_alloc(1, "frequency=400", &s), DPU_OK);
    assert_int_equal(dpu_load(s, "pim_test", NULL), DPU_OK);
    pim_test_set_args(s, M_CHARGE, 1000, 0, 0);
    assert_int_equal(dpu_launch(s, DPU_SYNCHRONOUS), DPU_OK);
    nm_pim_launch_stats ls;
    assert_int_equal(nm_pim_last_launch(s, &ls), DPU_OK);
    assert_int_equal(ls.max_cycles, 11000);
    assert_near(ls.modeled_seconds, 11000 / 400e6, 1e-15);
    assert_int_equal(dpu_free(s), DPU_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_revolver),   cmocka_unit_test(test_revolver_random), cmocka_unit_test(test_dma_cost),
        cmocka_unit_test(test_data_paths), cmocka_unit_test(test_heap_perf_hw),
        cmocka_unit_test(test_frequency),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
