#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "nearmem/common/error.h"
#include "nearmem/common/fs.h"
#include "nearmem/common/timer.h"
#include "nearmem/common/util.h"
#include "nm_test.h"

static void test_errors(void **state)
{
    (void)state;
    for (int e = 0; e < NM_ERR_COUNT; e++) {
        assert_non_null(nm_strerror((nm_err)e));
        assert_true(strncmp(nm_errname((nm_err)e), "NM_", 3) == 0);
        assert_string_not_equal(nm_strerror((nm_err)e), "unknown error");
    }
    assert_string_equal(nm_strerror(NM_ERR_COUNT), "unknown error");
    assert_string_equal(nm_strerror((nm_err)-1), "unknown error");
    assert_string_equal(nm_errname(NM_EDOUBLEFREE), "NM_EDOUBLEFREE");
    nm_clear_errmsg();
    assert_string_equal(nm_last_errmsg(), "");
    assert_int_equal(nm_fail(NM_ERANGE, "size %d too big", 7), NM_ERANGE);
    assert_string_equal(nm_last_errmsg(), "size 7 too big");
}

static void test_timers(void **state)
{
    (void)state;
    uint64_t a = nm_now_ns();
    struct timespec ts = {0, 2000000};
    nanosleep(&ts, NULL);
    uint64_t b = nm_now_ns();
    assert_true(b - a >= 2000000); /* monotonic and at least the sleep; no upper bound (noisy hosts) */
    nm_stopwatch w;
    nm_stopwatch_start(&w);
    volatile uint64_t x = 0;
    for (int i = 0; i < 1000000; i++) x += (uint64_t)i;
    assert_true(nm_thread_cpu_ns() > 0);
    assert_true(nm_process_cpu_ns() > 0);
    assert_true(nm_stopwatch_ns(&w) > 0);
    assert_near(nm_ns_to_s(1500000000ull), 1.5, 1e-12);
}

static void test_process_facts(void **state)
{
    (void)state;
    assert_true(nm_nproc() >= 1);
    size_t before = nm_peak_rss_bytes();
    assert_true(before > 0);
    size_t n = 64u << 20;
    char *p = malloc(n);
    assert_non_null(p);
    memset(p, 1, n);
    assert_true(nm_peak_rss_bytes() >= before + n / 2);
    assert_true(nm_current_rss_bytes() >= n / 2);
    free(p);
}

/* The handoff probe: a plausible one-way time with two CPUs (NAN only when the
 * second thread never ran), NAN with one, and the caller's CPU affinity as it was. */
static void test_handoff_probe(void **state)
{
    (void)state;
    cpu_set_t before, after;
    assert_int_equal(pthread_getaffinity_np(pthread_self(), sizeof before, &before), 0);
    for (int k = 0; k < 3; k++) {
        double ns = nm_handoff_ns();
        if (CPU_COUNT(&before) < 2) assert_true(isnan(ns));
        else assert_true(isnan(ns) || (ns > 0.5 && ns < 1e6));
        assert_int_equal(pthread_getaffinity_np(pthread_self(), sizeof after, &after), 0);
        assert_true(CPU_EQUAL(&before, &after));
    }
    /* pinned to one CPU: nothing to hand off to */
    cpu_set_t one;
    CPU_ZERO(&one);
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &before)) { CPU_SET(c, &one); break; }
    assert_int_equal(pthread_setaffinity_np(pthread_self(), sizeof one, &one), 0);
    assert_true(isnan(nm_handoff_ns()));
    assert_int_equal(pthread_getaffinity_np(pthread_self(), sizeof after, &after), 0);
    assert_true(CPU_EQUAL(&one, &after));
    assert_int_equal(pthread_setaffinity_np(pthread_self(), sizeof before, &before), 0);
}

static void test_peak_rss_reset(void **state)
{
    (void)state;
    /* mmap, not malloc: ASan's quarantine and a preloaded allocator's decay
     * would keep freed memory resident. */
    size_t n = 96u << 20;
    char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(p != MAP_FAILED);
    memset(p, 1, n);
    size_t high = nm_peak_rss_hwm_bytes();
    assert_true(high >= n);
    assert_int_equal(munmap(p, n), 0);
    assert_int_equal(nm_peak_rss_reset(), NM_OK);
    size_t after = nm_peak_rss_hwm_bytes();
    assert_true(after > 0);
    assert_true(after + n / 2 <= high); /* the 96 MiB peak is forgotten */
}

static void test_util(void **state)
{
    (void)state;
    assert_true(nm_is_pow2(1) && nm_is_pow2(4096) && !nm_is_pow2(0) && !nm_is_pow2(12));
    assert_int_equal(nm_log2_floor(1), 0);
    assert_int_equal(nm_log2_floor(4097), 12);
    assert_int_equal(nm_log2_ceil(4097), 13);
    assert_int_equal(nm_log2_ceil(4096), 12);
    assert_int_equal(nm_log2_ceil(1), 0);
    assert_int_equal(nm_next_pow2(0), 1);
    assert_int_equal(nm_next_pow2(33), 64);
    assert_int_equal(nm_next_pow2((1ull << 63) + 1), 0);
    assert_int_equal(NM_ALIGN_UP((uint64_t)13, 8), 16);
    assert_int_equal(NM_ALIGN_DOWN((uint64_t)13, 8), 8);
    size_t out;
    assert_false(nm_mul_ok(SIZE_MAX / 2, 3, &out));
    assert_true(nm_mul_ok(3, 5, &out) && out == 15);
    assert_int_equal(nm_popcount64(0xF0F0), 8);
    assert_int_equal(nm_ctz64(8), 3);
}

static void test_tmpdir(void **state)
{
    (void)state;
    char dir[256], path[512];
    assert_int_equal(nm_tmpdir_create(dir, sizeof dir, "nm-test"), NM_OK);
    struct stat st;
    assert_int_equal(stat(dir, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    snprintf(path, sizeof path, "%s/sub", dir);
    assert_int_equal(mkdir(path, 0700), 0);
    snprintf(path, sizeof path, "%s/sub/f", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("x", f);
    fclose(f);
    assert_int_equal(nm_rmtree(dir), NM_OK);
    assert_int_not_equal(stat(dir, &st), 0);
    assert_int_equal(nm_rmtree(dir), NM_EIO); /* already gone: an error, not a crash */
    assert_int_equal(nm_rmtree(""), NM_EINVAL);
    char tiny[8];
    assert_int_equal(nm_tmpdir_create(tiny, sizeof tiny, "nm-test"), NM_ERANGE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_errors), cmocka_unit_test(test_timers),
        cmocka_unit_test(test_process_facts), cmocka_unit_test(test_util),
        cmocka_unit_test(test_tmpdir), cmocka_unit_test(test_peak_rss_reset), cmocka_unit_test(test_handoff_probe),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
