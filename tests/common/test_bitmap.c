#include <stdbool.h>
#include <string.h>

#include "nearmem/common/bitmap.h"
#include "nearmem/common/prng.h"
#include "nm_test.h"

/* Reference model: one bool per bit, searched the obvious way. */
static size_t ref_find(const bool *m, size_t n, size_t from, bool want)
{
    for (size_t i = from; i < n; i++)
        if (m[i] == want) return i;
    return NM_BITMAP_NONE;
}
static size_t ref_run(const bool *m, size_t n, size_t len, size_t from, bool want)
{
    if (len == 0) return NM_BITMAP_NONE;
    for (size_t s = from; s + len <= n; s++) {
        size_t k = 0;
        while (k < len && m[s + k] == want) k++;
        if (k == len) return s;
    }
    return NM_BITMAP_NONE;
}

static void test_words(void **state)
{
    (void)state;
    assert_int_equal(nm_bitmap_words(0), 0);
    assert_int_equal(nm_bitmap_words(1), 1);
    assert_int_equal(nm_bitmap_words(64), 1);
    assert_int_equal(nm_bitmap_words(65), 2);
}

static void test_empty_bitmap(void **state)
{
    (void)state;
    uint64_t bm[1] = {0};
    assert_int_equal(nm_bitmap_find_first_set(bm, 0, 0), NM_BITMAP_NONE);
    assert_int_equal(nm_bitmap_find_first_clear(bm, 0, 0), NM_BITMAP_NONE);
    assert_int_equal(nm_bitmap_find_clear_run(bm, 0, 1, 0), NM_BITMAP_NONE);
    assert_true(nm_bitmap_range_is_clear(bm, 0, 0));
    assert_true(nm_bitmap_range_is_set(bm, 0, 0));
    assert_int_equal(nm_bitmap_count_range(bm, 0, 0), 0);
    nm_bitmap_fill(bm, 0); /* no words: must not write */
    assert_int_equal(bm[0], 0);
}

static void test_all_clear(void **state)
{
    (void)state;
    uint64_t bm[3];
    nm_bitmap_zero(bm, 150);
    assert_int_equal(nm_bitmap_find_first_set(bm, 150, 0), NM_BITMAP_NONE);
    assert_int_equal(nm_bitmap_find_first_clear(bm, 150, 0), 0);
    assert_int_equal(nm_bitmap_find_first_clear(bm, 150, 149), 149);
    assert_int_equal(nm_bitmap_find_first_clear(bm, 150, 150), NM_BITMAP_NONE);
    assert_int_equal(nm_bitmap_find_clear_run(bm, 150, 150, 0), 0);
    assert_int_equal(nm_bitmap_find_clear_run(bm, 150, 151, 0), NM_BITMAP_NONE);
    assert_int_equal(nm_bitmap_find_clear_run(bm, 150, 10, 140), 140); /* ends exactly at nbits */
    assert_int_equal(nm_bitmap_find_clear_run(bm, 150, 10, 141), NM_BITMAP_NONE);
    assert_int_equal(nm_bitmap_find_set_run(bm, 150, 1, 0), NM_BITMAP_NONE);
}

static void test_full(void **state)
{
    (void)state;
    uint64_t bm[3];
    nm_bitmap_fill(bm, 130);
    assert_int_equal(bm[2], 3); /* bits past nbits stay clear */
    assert_int_equal(nm_bitmap_find_first_clear(bm, 130, 0), NM_BITMAP_NONE);
    assert_int_equal(nm_bitmap_find_first_set(bm, 130, 129), 129);
    assert_int_equal(nm_bitmap_find_clear_run(bm, 130, 1, 0), NM_BITMAP_NONE);
    assert_int_equal(nm_bitmap_find_set_run(bm, 130, 130, 0), 0);
    assert_int_equal(nm_bitmap_count_range(bm, 0, 130), 130);
    assert_true(nm_bitmap_range_is_set(bm, 0, 130));
}

static void test_ranges_cross_words(void **state)
{
    (void)state;
    uint64_t bm[4];
    nm_bitmap_zero(bm, 256);
    nm_bitmap_set_range(bm, 60, 70); /* 60..129: spans three words */
    assert_int_equal(bm[0], 0xF000000000000000ull);
    assert_int_equal(bm[1], ~0ull);
    assert_int_equal(bm[2], 0x3ull);
    assert_int_equal(nm_bitmap_count_range(bm, 0, 256), 70);
    assert_true(nm_bitmap_range_is_set(bm, 60, 70));
    assert_false(nm_bitmap_range_is_set(bm, 59, 2));
    assert_false(nm_bitmap_range_is_clear(bm, 129, 2));
    assert_true(nm_bitmap_range_is_clear(bm, 130, 126));
    assert_int_equal(nm_bitmap_find_first_set(bm, 256, 0), 60);
    assert_int_equal(nm_bitmap_find_first_clear(bm, 256, 60), 130);
    assert_int_equal(nm_bitmap_find_set_run(bm, 256, 70, 0), 60);
    assert_int_equal(nm_bitmap_find_set_run(bm, 256, 71, 0), NM_BITMAP_NONE);
    assert_int_equal(nm_bitmap_find_clear_run(bm, 256, 61, 0), 130);
    assert_int_equal(nm_bitmap_find_clear_run(bm, 256, 60, 0), 0);
    nm_bitmap_clear_range(bm, 64, 64); /* exactly word 1 */
    assert_int_equal(bm[1], 0);
    assert_int_equal(nm_bitmap_count_range(bm, 0, 256), 6);
    nm_bitmap_set_range(bm, 0, 0); /* empty range: no change */
    assert_int_equal(nm_bitmap_count_range(bm, 0, 256), 6);
}

static void test_single_bits(void **state)
{
    (void)state;
    uint64_t bm[2] = {0, 0};
    nm_bitmap_set(bm, 0);
    nm_bitmap_set(bm, 63);
    nm_bitmap_set(bm, 64);
    nm_bitmap_set(bm, 127);
    assert_true(nm_bitmap_test(bm, 63) && nm_bitmap_test(bm, 64));
    assert_false(nm_bitmap_test(bm, 1));
    nm_bitmap_clear(bm, 63);
    assert_false(nm_bitmap_test(bm, 63));
    assert_int_equal(nm_bitmap_find_first_set(bm, 128, 1), 64);
    assert_int_equal(nm_bitmap_find_first_set(bm, 127, 65), NM_BITMAP_NONE); /* 127 is out of range */
}

static void test_run_len_zero(void **state)
{
    (void)state;
    uint64_t bm[1] = {0};
    assert_int_equal(nm_bitmap_find_clear_run(bm, 64, 0, 0), NM_BITMAP_NONE);
    assert_int_equal(nm_bitmap_find_set_run(bm, 64, 0, 0), NM_BITMAP_NONE);
}

/* Randomized: every operation agrees with the bool-array model. */
static void test_random_vs_model(void **state)
{
    (void)state;
    enum { MAXN = 700 };
    nm_rng r;
    nm_rng_seed(&r, nm_test_seed(1234));
    for (int round = 0; round < 200; round++) {
        size_t n = 1 + (size_t)nm_rng_below(&r, MAXN);
        uint64_t bm[(MAXN + 63) / 64];
        bool m[MAXN];
        nm_bitmap_zero(bm, n);
        memset(m, 0, sizeof m);
        for (int op = 0; op < 60; op++) {
            size_t s = (size_t)nm_rng_below(&r, n), len = (size_t)nm_rng_below(&r, n - s + 1);
            bool set = nm_rng_below(&r, 2);
            if (set) nm_bitmap_set_range(bm, s, len);
            else nm_bitmap_clear_range(bm, s, len);
            for (size_t i = s; i < s + len; i++) m[i] = set;
            size_t from = (size_t)nm_rng_below(&r, n + 1), q = 1 + (size_t)nm_rng_below(&r, 80);
            assert_int_equal(nm_bitmap_find_first_set(bm, n, from), ref_find(m, n, from, true));
            assert_int_equal(nm_bitmap_find_first_clear(bm, n, from), ref_find(m, n, from, false));
            assert_int_equal(nm_bitmap_find_clear_run(bm, n, q, from), ref_run(m, n, q, from, false));
            assert_int_equal(nm_bitmap_find_set_run(bm, n, q, from), ref_run(m, n, q, from, true));
            size_t cs = (size_t)nm_rng_below(&r, n), cl = (size_t)nm_rng_below(&r, n - cs + 1), cnt = 0;
            bool all_set = true, all_clear = true;
            for (size_t i = cs; i < cs + cl; i++) {
                cnt += m[i];
                all_set &= m[i];
                all_clear &= !m[i];
            }
            assert_int_equal(nm_bitmap_count_range(bm, cs, cl), cnt);
            assert_int_equal(nm_bitmap_range_is_set(bm, cs, cl), all_set);
            assert_int_equal(nm_bitmap_range_is_clear(bm, cs, cl), all_clear);
        }
        /* Bits past n stay clear: a whole-word consumer must not see ghosts. */
        if (n & 63) assert_int_equal(bm[n / 64] >> (n & 63), 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_words),         cmocka_unit_test(test_empty_bitmap),
        cmocka_unit_test(test_all_clear),     cmocka_unit_test(test_full),
        cmocka_unit_test(test_ranges_cross_words), cmocka_unit_test(test_single_bits),
        cmocka_unit_test(test_run_len_zero),  cmocka_unit_test(test_random_vs_model),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
