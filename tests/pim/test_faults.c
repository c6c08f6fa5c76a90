/* Every refused hardware rule stops the DPU that broke it with a fault the
 * host sees through dpu_status / nm_pim_get_fault; the other DPUs of the
 * launch finish normally, and the faulted DPU runs again after the fault. */
#include <string.h>

#include "nm_test.h"
#include "pim_test_kernels.h"

extern void *g_hostbuf;

static const struct {
    enum pim_test_fault kind;
    nm_pim_fault_code code;
} g_cases[] = {
    /* A read of 4 bytes is a 2048-byte DMA on the hardware (length field
     * 4/8 - 1 wraps): it would overwrite WRAM past the buffer. */
    {F_DMA_SIZE_SMALL, NM_PIM_FAULT_DMA_SIZE}, {F_MRAM_BELOW, NM_PIM_FAULT_MRAM_BOUNDS},
    {F_MRAM_ABOVE, NM_PIM_FAULT_MRAM_BOUNDS},  {F_MRAM_HOSTPTR, NM_PIM_FAULT_MRAM_BOUNDS},
    {F_WRITE_ABOVE, NM_PIM_FAULT_MRAM_BOUNDS}, {F_HEAP_OVERFLOW, NM_PIM_FAULT_WRAM_OVERFLOW},
    {F_DEADLOCK, NM_PIM_FAULT_DEADLOCK},       {F_BAD_UNLOCK, NM_PIM_FAULT_MUTEX},
    {F_BARRIER_COUNT, NM_PIM_FAULT_BARRIER},   {F_KERNEL, NM_PIM_FAULT_KERNEL},
    {F_HW_REFUSE, NM_PIM_FAULT_HW_UNIT},       {F_WRAM_HOSTPTR, NM_PIM_FAULT_WRAM_BOUNDS},
};

static void expect_fault_on_first(struct dpu_set_t set, nm_pim_fault_code code, uint32_t tasklet)
{
    struct dpu_set_t dpu;
    uint32_t i;
    bool done, fault;
    assert_int_equal(dpu_status(set, &done, &fault), DPU_OK);
    assert_true(done);
    assert_true(fault);
    DPU_FOREACH(set, dpu, i)
    {
        nm_pim_fault_info fi;
        assert_int_equal(nm_pim_get_fault(dpu, &fi), DPU_OK);
        assert_int_equal(dpu_status(dpu, &done, &fault), DPU_OK);
        assert_true(done);
        if (i == 0) {
            assert_true(fault);
            assert_int_equal(fi.code, code);
            assert_int_equal(fi.tasklet, tasklet);
            assert_true(strlen(fi.message) > 0);
            assert_string_not_equal(nm_pim_fault_name(fi.code), "unknown");
        } else {
            assert_false(fault);
            assert_int_equal(fi.code, NM_PIM_FAULT_NONE);
        }
    }
}

/* What the hardware accepts is done its way and counted as a warning
 * (docs: "Hardware semantics"): a 12-byte read moves 8 bytes, a 4096-byte
 * read 2048, a misaligned MRAM or WRAM address loses its low 3 bits. */
static void test_dma_warnings(void **state)
{
    (void)state;
    static const struct {
        enum pim_test_fault kind;
        bool size, unaligned;
    } w[] = {{F_DMA_SIZE_ODD, true, false},
             {F_DMA_SIZE_BIG, true, false},
             {F_DMA_MRAM_ALIGN, false, true},
             {F_DMA_WRAM_ALIGN, false, true}};
    struct dpu_set_t set, dpu;
    uint32_t i;
    assert_int_equal(dpu_alloc(2, "threads=2", &set), DPU_OK);
    assert_int_equal(dpu_load(set, "pim_test", NULL), DPU_OK);
    assert_int_equal(nm_pim_set_tasklets(set, 4), DPU_OK);
    for (size_t k = 0; k < sizeof(w) / sizeof(w[0]); k++) {
        DPU_FOREACH(set, dpu, i) pim_test_set_args(dpu, M_FAULT, i == 0 ? w[k].kind : F_COUNT, 0, 2);
        assert_int_equal(dpu_launch(set, DPU_SYNCHRONOUS), DPU_OK);
        DPU_FOREACH(set, dpu, i)
        {
            nm_pim_dpu_stats st;
            nm_pim_tasklet_stats ts;
            assert_int_equal(nm_pim_get_dpu_stats(dpu, &st), DPU_OK);
            assert_int_equal(nm_pim_get_tasklet_stats(dpu, 2, &ts), DPU_OK);
            bool culprit = i == 0;
            assert_int_equal(st.warn_dma_size, culprit && w[k].size ? 1 : 0);
            assert_int_equal(st.warn_dma_unaligned, culprit && w[k].unaligned ? 1 : 0);
            assert_int_equal(ts.warn_dma_size, st.warn_dma_size);
            if (culprit)
                assert_int_equal(ts.dma_read_bytes, w[k].kind == F_DMA_SIZE_BIG ? 2048 : 8);
        }
    }
    assert_int_equal(dpu_free(set), DPU_OK);
}

static void test_dma_and_sync_faults(void **state)
{
    (void)state;
    struct dpu_set_t set, dpu;
    uint32_t i;
    assert_int_equal(dpu_alloc(3, "threads=2", &set), DPU_OK);
    assert_int_equal(dpu_load(set, "pim_test", NULL), DPU_OK);
    assert_int_equal(nm_pim_set_tasklets(set, 4), DPU_OK);
    for (size_t k = 0; k < sizeof(g_cases) / sizeof(g_cases[0]); k++) {
        /* DPU 0 breaks the rule in tasklet 2; DPUs 1 and 2 do nothing wrong. */
        DPU_FOREACH(set, dpu, i) pim_test_set_args(dpu, M_FAULT, i == 0 ? g_cases[k].kind : F_COUNT, 0, 2);
        dpu_error_t e = dpu_launch(set, DPU_SYNCHRONOUS);
        assert_int_equal(e, DPU_ERR_DPU_FAULT);
        expect_fault_on_first(set, g_cases[k].code, 2);
        nm_pim_launch_stats ls;
        assert_int_equal(nm_pim_last_launch(set, &ls), DPU_OK);
        assert_int_equal(ls.faulted_dpus, 1);
        /* The faulted DPU boots again cleanly. */
        pim_test_set_args(set, M_ME, 0, 0, 0);
        assert_int_equal(dpu_launch(set, DPU_SYNCHRONOUS), DPU_OK);
        bool done, fault;
        assert_int_equal(dpu_status(set, &done, &fault), DPU_OK);
        assert_false(fault);
        DPU_FOREACH(set, dpu) assert_int_equal(pim_test_res(dpu, 3), 3);
        free(g_hostbuf);
        g_hostbuf = NULL;
    }
    /* DMA to a tasklet's stack buffer and to globals is fine. */
    pim_test_set_args(set, M_FAULT, F_STACK_DMA, 0, 1);
    assert_int_equal(dpu_launch(set, DPU_SYNCHRONOUS), DPU_OK);
    /* Asynchronous launch: the fault shows in dpu_status and dpu_sync. */
    DPU_FOREACH(set, dpu, i) pim_test_set_args(dpu, M_FAULT, i == 0 ? F_KERNEL : F_COUNT, 0, 0);
    assert_int_equal(dpu_launch(set, DPU_ASYNCHRONOUS), DPU_OK);
    assert_int_equal(dpu_sync(set), DPU_ERR_DPU_FAULT);
    expect_fault_on_first(set, NM_PIM_FAULT_KERNEL, 0);
    assert_int_equal(dpu_free(set), DPU_OK);
}

static void test_tasklet_and_wram_limits(void **state)
{
    (void)state;
    struct dpu_set_t set, dpu;
    nm_pim_fault_info fi;
    assert_int_equal(dpu_alloc(1, NULL, &set), DPU_OK);
    DPU_FOREACH(set, dpu) { break; }
    assert_int_equal(dpu_load(set, "pim_test", NULL), DPU_OK);
    pim_test_set_args(set, M_ME, 0, 0, 0);
    /* 24 tasklets run; 25 is a fault, as a 25-tasklet binary cannot run. */
    assert_int_equal(nm_pim_set_tasklets(set, 24), DPU_OK);
    assert_int_equal(dpu_launch(set, DPU_SYNCHRONOUS), DPU_OK);
    assert_int_equal(pim_test_res(dpu, 23), 23);
    assert_int_equal(nm_pim_set_tasklets(set, 25), DPU_OK);
    assert_int_equal(dpu_launch(set, DPU_SYNCHRONOUS), DPU_ERR_DPU_FAULT);
    assert_int_equal(nm_pim_get_fault(dpu, &fi), DPU_OK);
    assert_int_equal(fi.code, NM_PIM_FAULT_TASKLETS);

    /* Globals + stacks beyond 64 KiB: 60000 B + 5 x 1 KiB fits, 6 do not. */
    assert_int_equal(dpu_load(set, "pim_test_fat", NULL), DPU_OK);
    assert_int_equal(nm_pim_set_tasklets(set, 5), DPU_OK);
    assert_int_equal(dpu_launch(set, DPU_SYNCHRONOUS), DPU_OK);
    nm_pim_dpu_stats ds;
    assert_int_equal(nm_pim_get_dpu_stats(dpu, &ds), DPU_OK);
    assert_true(ds.wram_static_bytes >= 60000 + 5 * 1024);
    assert_int_equal(nm_pim_set_tasklets(set, 6), DPU_OK);
    assert_int_equal(dpu_launch(set, DPU_SYNCHRONOUS), DPU_ERR_DPU_FAULT);
    assert_int_equal(nm_pim_get_fault(dpu, &fi), DPU_OK);
    assert_int_equal(fi.code, NM_PIM_FAULT_WRAM_OVERFLOW);

    /* mem_alloc up to the last byte works, one more block faults. */
    assert_int_equal(dpu_load(set, "pim_test", NULL), DPU_OK);
    assert_int_equal(nm_pim_set_tasklets(set, 1), DPU_OK);
    assert_int_equal(dpu_launch(set, DPU_SYNCHRONOUS), DPU_OK); /* M_NOTHING */
    assert_int_equal(nm_pim_get_dpu_stats(dpu, &ds), DPU_OK);
    uint32_t heap = NM_PIM_WRAM_SIZE - ds.wram_static_bytes;
    pim_test_set_args(set, M_HEAP, heap, 0, 0);
    assert_int_equal(dpu_launch(set, DPU_SYNCHRONOUS), DPU_OK);
    assert_int_equal(nm_pim_get_dpu_stats(dpu, &ds), DPU_OK);
    assert_int_equal(ds.wram_high_water, NM_PIM_WRAM_SIZE);
    pim_test_set_args(set, M_HEAP, heap + 8, 0, 0);
    assert_int_equal(dpu_launch(set, DPU_SYNCHRONOUS), DPU_ERR_DPU_FAULT);
    assert_int_equal(nm_pim_get_fault(dpu, &fi), DPU_OK);
    assert_int_equal(fi.code, NM_PIM_FAULT_WRAM_OVERFLOW);
    assert_int_equal(dpu_free(set), DPU_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dma_and_sync_faults), cmocka_unit_test(test_dma_warnings),
        cmocka_unit_test(test_tasklet_and_wram_limits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
