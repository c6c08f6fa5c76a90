/* dpu_load of a program from a shared object ("path.so:name"). */
#include "nm_test.h"
#include "nearmem/pim/host.h"

static void test_so(void **state)
{
    (void)state;
    struct dpu_set_t set, dpu;
    uint32_t i;
    assert_int_equal(dpu_alloc(4, "threads=2", &set), DPU_OK);
    assert_int_equal(dpu_load(set, "pim_so_kernel", NULL), DPU_ERR_ELF_NO_SUCH_FILE); /* not loaded yet */
    assert_int_equal(dpu_load(set, PIM_TEST_SO_PATH ":no_such_kernel", NULL), DPU_ERR_ELF_NO_SUCH_FILE);
    assert_int_equal(dpu_load(set, PIM_TEST_SO_PATH ":pim_so_kernel", NULL), DPU_OK);
    assert_int_equal(nm_pim_set_tasklets(set, 3), DPU_OK);
    DPU_FOREACH(set, dpu, i)
    {
        uint32_t v = 100 + i;
        assert_int_equal(dpu_copy_to(dpu, "so_in", 0, &v, 4), DPU_OK);
    }
    assert_int_equal(dpu_launch(set, DPU_SYNCHRONOUS), DPU_OK);
    DPU_FOREACH(set, dpu, i)
    {
        uint32_t out[3];
        uint64_t m = 0;
        assert_int_equal(dpu_copy_from(dpu, "so_out", 0, out, sizeof(out)), DPU_OK);
        for (uint32_t t = 0; t < 3; t++)
            assert_int_equal(out[t], (100 + i) * 2 + t);
        assert_int_equal(dpu_copy_from(dpu, "so_m", 0, &m, 8), DPU_OK);
        assert_int_equal(m, 100 + i);
    }
    /* Once loaded, the program is also found by its bare name. */
    assert_int_equal(dpu_load(set, "pim_so_kernel", NULL), DPU_OK);
    assert_int_equal(dpu_free(set), DPU_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_so)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
