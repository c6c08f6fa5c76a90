#include "nearmem/common/sizeclass.h"
#include "nm_test.h"

static void test_pow2(void **state)
{
    (void)state;
    nm_sizeclasses sc;
    assert_int_equal(nm_sizeclass_init_pow2(&sc, 16, 2048), NM_OK);
    assert_int_equal(sc.count, 8);
    assert_int_equal(nm_sizeclass_lookup(&sc, 0), -1); /* size 0 has no class */
    assert_int_equal(nm_sizeclass_lookup(&sc, 1), 0);
    assert_int_equal(nm_sizeclass_lookup(&sc, 16), 0);
    assert_int_equal(nm_sizeclass_lookup(&sc, 17), 1);
    assert_int_equal(nm_sizeclass_lookup(&sc, 1024), 6);
    assert_int_equal(nm_sizeclass_lookup(&sc, 1025), 7); /* above the lookup table */
    assert_int_equal(nm_sizeclass_lookup(&sc, 2048), 7);
    assert_int_equal(nm_sizeclass_lookup(&sc, 2049), -1);
    assert_int_equal(nm_sizeclass_size(&sc, 7), 2048);
    assert_int_equal(nm_sizeclass_max(&sc), 2048);
}

static void test_pow2_bad(void **state)
{
    (void)state;
    nm_sizeclasses sc;
    assert_int_equal(nm_sizeclass_init_pow2(&sc, 24, 2048), NM_EINVAL);
    assert_int_equal(nm_sizeclass_init_pow2(&sc, 64, 32), NM_EINVAL);
    assert_int_equal(nm_sizeclass_init_pow2(&sc, 0, 32), NM_EINVAL);
    assert_int_equal(nm_sizeclass_init_pow2(&sc, 4, 32), NM_EINVAL);
    assert_int_equal(nm_sizeclass_init_pow2(&sc, 32, 32), NM_OK);
    assert_int_equal(sc.count, 1);
}

static void test_custom(void **state)
{
    (void)state;
    nm_sizeclasses sc;
    const size_t sizes[] = {8, 24, 40, 128, 1000 + 24, 5000};
    assert_int_equal(nm_sizeclass_init_custom(&sc, sizes, 6), NM_OK);
    for (size_t s = 1; s <= 5000; s++) { /* every size maps to the smallest class that fits */
        int c = nm_sizeclass_lookup(&sc, s);
        assert_true(c >= 0);
        assert_true(sc.size[c] >= s);
        if (c > 0) assert_true(sc.size[c - 1] < s);
    }
    assert_int_equal(nm_sizeclass_lookup(&sc, 5001), -1);
    const size_t unsorted[] = {16, 8};
    assert_int_equal(nm_sizeclass_init_custom(&sc, unsorted, 2), NM_EINVAL);
    const size_t dup[] = {16, 16};
    assert_int_equal(nm_sizeclass_init_custom(&sc, dup, 2), NM_EINVAL);
    const size_t zero[] = {0, 16};
    assert_int_equal(nm_sizeclass_init_custom(&sc, zero, 2), NM_EINVAL);
    const size_t odd[] = {12};
    assert_int_equal(nm_sizeclass_init_custom(&sc, odd, 1), NM_EALIGN);
    assert_int_equal(nm_sizeclass_init_custom(&sc, sizes, 0), NM_EINVAL);
    assert_int_equal(nm_sizeclass_init_custom(&sc, NULL, 3), NM_EINVAL);
}

static void test_geometric(void **state)
{
    (void)state;
    nm_sizeclasses sc;
    assert_int_equal(nm_sizeclass_init_geometric(&sc, 16, 16384, 4, 16), NM_OK);
    assert_int_equal(sc.size[0], 16);
    assert_true(nm_sizeclass_max(&sc) >= 16384);
    for (unsigned i = 1; i < sc.count; i++) {
        assert_true(sc.size[i] > sc.size[i - 1]);
        assert_int_equal(sc.size[i] % 16, 0);
        /* internal fragmentation bounded by the step: <= 25% above 64 B */
        if (sc.size[i - 1] >= 64) assert_true((double)sc.size[i] / (double)sc.size[i - 1] <= 1.25 + 1e-9);
    }
    for (size_t s = 1; s <= 16384; s += 7) {
        int c = nm_sizeclass_lookup(&sc, s);
        assert_true(c >= 0 && sc.size[c] >= s && (c == 0 || sc.size[c - 1] < s));
    }
    assert_int_equal(nm_sizeclass_init_geometric(&sc, 16, 8, 4, 16), NM_EINVAL);
    assert_int_equal(nm_sizeclass_init_geometric(&sc, 16, 1ull << 40, 16, 16), NM_ERANGE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pow2), cmocka_unit_test(test_pow2_bad),
        cmocka_unit_test(test_custom), cmocka_unit_test(test_geometric),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
