#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nearmem/common/json.h"
#include "nm_test.h"

static char g_buf[4096];

static FILE *mem(void)
{
    memset(g_buf, 0, sizeof g_buf);
    FILE *f = fmemopen(g_buf, sizeof g_buf - 1, "w");
    assert_non_null(f);
    return f;
}

static void test_compact(void **state)
{
    (void)state;
    FILE *f = mem();
    nm_json j;
    nm_json_init(&j, f, false);
    nm_json_begin_object(&j);
    nm_json_key(&j, "s");
    nm_json_string(&j, "a\"b\\c\n\t\x01");
    nm_json_key(&j, "n");
    nm_json_number(&j, 0.1);
    nm_json_key(&j, "i");
    nm_json_int(&j, -3);
    nm_json_key(&j, "u");
    nm_json_uint(&j, UINT64_MAX);
    nm_json_key(&j, "whole");
    nm_json_number(&j, 42.0);
    nm_json_key(&j, "nan");
    nm_json_number(&j, NAN);
    nm_json_key(&j, "inf");
    nm_json_number(&j, -INFINITY);
    nm_json_key(&j, "a");
    nm_json_begin_array(&j);
    nm_json_bool(&j, true);
    nm_json_bool(&j, false);
    nm_json_null(&j);
    nm_json_begin_object(&j);
    nm_json_end_object(&j);
    nm_json_begin_array(&j);
    nm_json_end_array(&j);
    nm_json_raw(&j, "{\"x\":1}");
    nm_json_end_array(&j);
    nm_json_end_object(&j);
    assert_int_equal(nm_json_finish(&j), NM_OK);
    fclose(f);
    assert_string_equal(g_buf, "{\"s\":\"a\\\"b\\\\c\\n\\t\\u0001\",\"n\":0.1,\"i\":-3,\"u\":18446744073709551615,"
                               "\"whole\":42,\"nan\":null,\"inf\":null,\"a\":[true,false,null,{},[],{\"x\":1}]}");
}

static void test_pretty(void **state)
{
    (void)state;
    FILE *f = mem();
    nm_json j;
    nm_json_init(&j, f, true);
    nm_json_begin_object(&j);
    nm_json_key(&j, "a");
    nm_json_begin_array(&j);
    nm_json_int(&j, 1);
    nm_json_int(&j, 2);
    nm_json_end_array(&j);
    nm_json_end_object(&j);
    assert_int_equal(nm_json_finish(&j), NM_OK);
    fclose(f);
    assert_string_equal(g_buf, "{\n  \"a\": [\n    1,\n    2\n  ]\n}");
}

static void test_number_roundtrip(void **state)
{
    (void)state;
    const double vals[] = {1.0 / 3.0, 1e-300, 6.02214076e23, -2.5, 123456789.125};
    for (size_t i = 0; i < sizeof vals / sizeof *vals; i++) {
        FILE *f = mem();
        nm_json j;
        nm_json_init(&j, f, false);
        nm_json_number(&j, vals[i]);
        assert_int_equal(nm_json_finish(&j), NM_OK);
        fclose(f);
        assert_true(strtod(g_buf, NULL) == vals[i]);
    }
}

static void test_misuse(void **state)
{
    (void)state;
    nm_json j;
    FILE *f = mem();
    nm_json_init(&j, f, false);
    nm_json_begin_object(&j);
    nm_json_int(&j, 1); /* value without key */
    assert_int_equal(nm_json_finish(&j), NM_ESTATE);
    fclose(f);

    f = mem();
    nm_json_init(&j, f, false);
    nm_json_begin_array(&j);
    nm_json_key(&j, "k"); /* key inside array */
    assert_int_equal(nm_json_finish(&j), NM_ESTATE);
    fclose(f);

    f = mem();
    nm_json_init(&j, f, false);
    nm_json_begin_array(&j);
    nm_json_end_object(&j); /* mismatched close */
    assert_int_equal(nm_json_finish(&j), NM_ESTATE);
    fclose(f);

    f = mem();
    nm_json_init(&j, f, false);
    nm_json_begin_object(&j); /* unclosed */
    assert_int_equal(nm_json_finish(&j), NM_ESTATE);
    fclose(f);

    f = mem();
    nm_json_init(&j, f, false);
    for (int i = 0; i < NM_JSON_MAX_DEPTH + 1; i++) nm_json_begin_array(&j);
    assert_int_equal(nm_json_finish(&j), NM_ERANGE);
    fclose(f);

    f = mem();
    nm_json_init(&j, f, false);
    nm_json_int(&j, 1);
    nm_json_int(&j, 2); /* two top-level values */
    assert_int_equal(nm_json_finish(&j), NM_ESTATE);
    fclose(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_compact), cmocka_unit_test(test_pretty),
        cmocka_unit_test(test_number_roundtrip), cmocka_unit_test(test_misuse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
