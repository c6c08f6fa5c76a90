#include "nm_test.h"
#include "nearmem/pim/examples.h"

static void test_va(void **state)
{
    (void)state;
    struct dpu_set_t set;
    assert_int_equal(dpu_alloc(4, NULL, &set), DPU_OK);
    enum { N = 10000 };
    static int32_t a[N], b[N], c[N];
    for (int i = 0; i < N; i++) {
        a[i] = i;
        b[i] = 3 * i;
    }
    nm_pim_run_report r;
    assert_int_equal(nm_pim_va_run(set, 16, a, b, c, N, &r), DPU_OK);
    for (int i = 0; i < N; i++)
        assert_int_equal(c[i], 4 * i);
    printf("cycles %llu kernel %g s\n", (unsigned long long)r.max_cycles, r.modeled_kernel_s);
    assert_int_equal(dpu_free(set), DPU_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_va)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
