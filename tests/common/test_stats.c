#include <math.h>

#include "nearmem/common/stats.h"
#include "nm_test.h"

static void test_empty(void **state)
{
    (void)state;
    assert_true(isnan(nm_stats_mean(NULL, 0)));
    assert_true(isnan(nm_stats_median(NULL, 0)));
    assert_true(isnan(nm_stats_percentile(NULL, 0, 50)));
    assert_true(isnan(nm_stats_geomean(NULL, 0)));
    assert_true(isnan(nm_stats_stddev(NULL, 0)));
    assert_true(isnan(nm_stats_min(NULL, 0)));
    assert_true(isnan(nm_stats_max(NULL, 0)));
    nm_stats_summary s;
    nm_stats_summarize(NULL, 0, &s);
    assert_int_equal(s.n, 0);
    assert_true(isnan(s.median));
}

static void test_basic(void **state)
{
    (void)state;
    const double x[] = {5, 1, 4, 2, 3};
    assert_near(nm_stats_mean(x, 5), 3.0, 1e-12);
    assert_near(nm_stats_median(x, 5), 3.0, 1e-12);
    assert_near(nm_stats_min(x, 5), 1.0, 0);
    assert_near(nm_stats_max(x, 5), 5.0, 0);
    assert_near(nm_stats_stddev(x, 5), sqrt(2.5), 1e-12);
    assert_near(x[0], 5, 0); /* input untouched */
    const double even[] = {4, 1, 3, 2};
    assert_near(nm_stats_median(even, 4), 2.5, 1e-12);
    const double one[] = {7};
    assert_near(nm_stats_median(one, 1), 7, 0);
    assert_near(nm_stats_stddev(one, 1), 0, 0);
    assert_near(nm_stats_percentile(one, 1, 99), 7, 0);
}

static void test_percentile(void **state)
{
    (void)state;
    double x[101];
    for (int i = 0; i <= 100; i++) x[i] = 100 - i; /* 0..100 reversed */
    assert_near(nm_stats_percentile(x, 101, 0), 0, 1e-12);
    assert_near(nm_stats_percentile(x, 101, 100), 100, 1e-12);
    assert_near(nm_stats_percentile(x, 101, 95), 95, 1e-12);
    assert_near(nm_stats_percentile(x, 101, -5), 0, 1e-12);
    assert_near(nm_stats_percentile(x, 101, 150), 100, 1e-12);
    const double y[] = {10, 20};
    assert_near(nm_stats_percentile(y, 2, 25), 12.5, 1e-12); /* linear interpolation */
    nm_stats_summary s;
    nm_stats_summarize(x, 101, &s);
    assert_near(s.p5, 5, 1e-12);
    assert_near(s.p99, 99, 1e-12);
    assert_near(s.median, 50, 1e-12);
}

static void test_geomean(void **state)
{
    (void)state;
    const double x[] = {1, 4, 16};
    assert_near(nm_stats_geomean(x, 3), 4.0, 1e-12);
    const double ratios[] = {2.0, 0.5};
    assert_near(nm_stats_geomean(ratios, 2), 1.0, 1e-12);
    const double bad[] = {1, 0, 2};
    assert_true(isnan(nm_stats_geomean(bad, 3)));
    const double neg[] = {1, -2};
    assert_true(isnan(nm_stats_geomean(neg, 2)));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty), cmocka_unit_test(test_basic),
        cmocka_unit_test(test_percentile), cmocka_unit_test(test_geomean),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
