/* Smoke test of the PMAlloc-vs-PMDK suites: each runs in a reduced quick mode
 * through nearmem-bench and must report its summary keys as finite positive
 * numbers. Speeds are not asserted (benchmarks report them). */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nm_test.h"

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    size_t got = fread(s, 1, (size_t)n, f);
    s[got] = 0;
    fclose(f);
    return s;
}

static char *run_suite(const char *suite, const char *args, const char *const *keys)
{
    const char *bin = getenv("NEARMEM_BINARY_DIR");
    assert_non_null(bin);
    char json[256], cmd[1024];
    snprintf(json, sizeof json, "/tmp/nm-pmalloc-smoke-%d-%s.json", (int)getpid(), suite);
    snprintf(cmd, sizeof cmd, "%s/bin/nearmem-bench %s --quick --set reps=1 %s --json %s > /dev/null 2>&1", bin, suite,
             args, json);
    int rc = system(cmd);
    assert_int_equal(rc, 0);
    char *s = slurp(json);
    assert_non_null(s);
    char *sum = strstr(s, "\"summary\"");
    assert_non_null(sum);
    for (unsigned i = 0; keys[i]; i++) {
        char pat[128];
        snprintf(pat, sizeof pat, "\"%s\":", keys[i]);
        char *at = strstr(sum, pat);
        if (!at) fail_msg("%s: summary key %s missing", suite, keys[i]);
        char *end;
        double v = strtod(at + strlen(pat), &end);
        /* a flush share is 1 - (time without flushes) / (time with them), two single quick timings:
         * on a loaded machine it can come out <= 0 (one flushed line per LOG operation is a small
         * share), so it only has to be a finite share below 1 */
        bool share = strncmp(keys[i], "flush_share_", 12) == 0;
        if (end == at + strlen(pat) || !isfinite(v) || (share ? v >= 1 : v <= 0))
            fail_msg("%s: %s is not a finite %s", suite, keys[i], share ? "share below 1" : "positive number");
    }
    unlink(json);
    return s;
}

static void test_small(void **st)
{
    (void)st;
    static const char *const k[] = {"speedup_vs_pmdk_threadtest", "speedup_vs_pmdk_prodcon", "speedup_vs_pmdk_shbench",
                                    "speedup_vs_pmdk_larson_small", NULL};
    free(run_suite("pmalloc-small", "--set pool_mib=64", k));
}

static void test_large(void **st)
{
    (void)st;
    static const char *const k[] = {"speedup_vs_pmdk_larson_large", "speedup_vs_pmdk_dbmstest", NULL};
    free(run_suite("pmalloc-large", "--set dbms_objects=200", k));
}

static void test_recovery(void **st)
{
    (void)st;
    static const char *const k[] = {"recovery_ms_10m_log", "recovery_ms_10m_pmdk", "recovery_ms_10m_gc", NULL};
    free(run_suite("pmalloc-recovery", "--set nodes=20000", k));
}

static void test_kv(void **st)
{
    (void)st;
    static const char *const k[] = {"kv_speedup_vs_pmdk", NULL};
    free(run_suite("pmalloc-kv", "--set warmup=20000 --set ops=50000", k));
}

static double summary_num(const char *json, const char *key)
{
    char pat[128];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *sum = strstr(json, "\"summary\"");
    const char *at = sum ? strstr(sum, pat) : NULL;
    return at ? strtod(at + strlen(pat), NULL) : NAN;
}

/* pmalloc-fences on threadtest alone: the timing keys always; the counted keys
 * when the suite could count (gdb installed and allowed to trace), where gdb's
 * counts must equal PMAlloc's own flush/fence counters and PMDK must show at
 * least one fence and one flush per operation; otherwise a "skipped" reason. */
static void test_fences(void **st)
{
    (void)st;
    static const char *const k[] = {"flush_fence_ns", "fence_ns", "flush_share_pmdk_threadtest", "flush_share_log_threadtest",
                                    "speedup_log_vs_pmdk_threadtest", "speedup_noflush_log_vs_pmdk_threadtest", NULL};
    char *s = run_suite("pmalloc-fences", "--set only=threadtest --set count_scale=0.25", k);
    double measured = summary_num(s, "fence_counts_measured");
    assert_true(measured == 0.0 || measured == 1.0);
    if (measured == 1.0) {
        assert_true(summary_num(s, "count_vs_own_counters_max_rel_diff") == 0.0);
        assert_true(summary_num(s, "fences_per_op_pmdk_threadtest") >= 1.0);
        assert_true(summary_num(s, "flushes_per_op_pmdk_threadtest") >= 1.0);
        assert_true(summary_num(s, "fences_per_op_log_threadtest") >= 1.0);
        assert_true(summary_num(s, "flushes_per_op_gc_threadtest") > 0.0);
        assert_true(summary_num(s, "speedup_ceiling_threadtest") > 0.0);
    } else {
        assert_non_null(strstr(s, "skipped: "));
    }
    free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small),
        cmocka_unit_test(test_large),
        cmocka_unit_test(test_recovery),
        cmocka_unit_test(test_kv),
        cmocka_unit_test(test_fences),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
