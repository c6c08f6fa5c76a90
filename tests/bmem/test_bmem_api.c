/* bmem API: size mapping, geometry queries, co-location, statistics, the
 * paper-style interface, and every bad-input case (clear code, state kept). */
#include <string.h>

#include "nearmem/bmem.h"
#include "nm_test.h"

/* Table 3 of the paper: 1024 rows x 65536 columns x 16 subarrays x 8 banks. */
static const bmem_config k_paper_dev = {1024, 65536, 16, 8, BMEM_ALGO_FAST, 0};

static void shape_is(const bmem_config *c, size_t size, bmem_dim dim, unsigned p, unsigned q)
{
    unsigned gp = 0, gq = 0;
    assert_int_equal(bmem_size_to_shape(c, size, dim, &gp, &gq), NM_OK);
    assert_int_equal(gp, p);
    assert_int_equal(gq, q);
}

static void test_size_mapping(void **st)
{
    (void)st;
    const bmem_config *c = &k_paper_dev;
    /* horizontal: bits along a row; a cell holds 65536 bits = 8 KiB */
    shape_is(c, 1, BMEM_HORIZ, 1, 1);
    shape_is(c, 4096, BMEM_HORIZ, 1, 1);
    shape_is(c, 8192, BMEM_HORIZ, 1, 1);
    shape_is(c, 8193, BMEM_HORIZ, 2, 1);
    shape_is(c, 16 * 8192, BMEM_HORIZ, 16, 1);     /* one full bank row */
    shape_is(c, 16 * 8192 + 1, BMEM_HORIZ, 16, 2); /* whole bank rows beyond */
    shape_is(c, 1 << 20, BMEM_HORIZ, 16, 8);       /* Table 1: 1 MiB = 8 bank rows */
    shape_is(c, (size_t)128 << 20, BMEM_HORIZ, 16, 1024); /* a whole bank */
    /* vertical: one row per bit down a column */
    shape_is(c, 8, BMEM_VERT, 1, 64);
    shape_is(c, 128, BMEM_VERT, 1, 1024); /* Table 2: 128 B = one full subarray */
    shape_is(c, 129, BMEM_VERT, 1, 1024);
    shape_is(c, (size_t)8 << 20, BMEM_VERT, 1, 1024);     /* 2^26 bits = one subarray */
    shape_is(c, ((size_t)8 << 20) + 1, BMEM_VERT, 2, 1024);
    shape_is(c, (size_t)128 << 20, BMEM_VERT, 16, 1024);
    unsigned p, q;
    assert_int_equal(bmem_size_to_shape(c, 0, BMEM_HORIZ, &p, &q), NM_ERANGE);
    assert_int_equal(bmem_size_to_shape(c, ((size_t)128 << 20) + 1, BMEM_HORIZ, &p, &q), NM_ERANGE);
    assert_int_equal(bmem_size_to_shape(c, ((size_t)128 << 20) + 1, BMEM_VERT, &p, &q), NM_ERANGE);
    assert_int_equal(bmem_size_to_shape(c, SIZE_MAX, BMEM_VERT, &p, &q), NM_ERANGE);
    assert_int_equal(bmem_size_to_shape(c, 8, BMEM_RAW, &p, &q), NM_EINVAL);
    assert_int_equal(bmem_size_to_shape(c, 8, (bmem_dim)7, &p, &q), NM_EINVAL);
}

static void test_bad_geometry(void **st)
{
    (void)st;
    bmem_dev *d = (bmem_dev *)1;
    bmem_config c = k_paper_dev;
    assert_int_equal(bmem_dev_create(NULL, &d), NM_EINVAL);
    assert_null(d);
    assert_int_equal(bmem_dev_create(&c, NULL), NM_EINVAL);
    uint32_t *fields[] = {&c.rows, &c.columns, &c.subarrays, &c.banks};
    for (unsigned i = 0; i < 4; i++) {
        c = k_paper_dev;
        *fields[i] = 0;
        assert_int_equal(bmem_dev_create(&c, &d), NM_ERANGE);
        assert_null(d);
        *fields[i] = UINT32_MAX;
        assert_int_equal(bmem_dev_create(&c, &d), NM_ERANGE);
        assert_true(strlen(nm_last_errmsg()) > 0);
    }
    c = k_paper_dev;
    c.rows = BMEM_MAX_ROWS;
    c.subarrays = BMEM_MAX_SUBARRAYS;
    c.banks = 2; /* each limit respected, but 2^27 cells in all */
    assert_int_equal(bmem_dev_create(&c, &d), NM_ERANGE);
    c = k_paper_dev;
    c.algo = (bmem_algo)9;
    assert_int_equal(bmem_dev_create(&c, &d), NM_EINVAL);
    /* the largest row count works: a full 65536-row column, then cells around it */
    for (int algo = 0; algo < 2; algo++) {
        bmem_config tall = {BMEM_MAX_ROWS, 64, 3, 1, (bmem_algo)algo, 0};
        assert_int_equal(bmem_dev_create(&tall, &d), NM_OK);
        bmem_ptr col, a, b2;
        bmem_geom g;
        assert_int_equal(bmem_dev_malloc_raw(d, 1, 100, &a), NM_OK);
        assert_int_equal(bmem_dev_malloc(d, BMEM_MAX_ROWS / 8, BMEM_VERT, &col), NM_OK);
        assert_int_equal(bmem_dev_geom(d, col, &g), NM_OK);
        assert_int_equal(g.sub, 1);
        assert_int_equal(g.nrows, BMEM_MAX_ROWS);
        assert_int_equal(bmem_dev_malloc_raw(d, 2, 70, &b2), NM_ENOMEM); /* subarray 1 is full */
        assert_int_equal(bmem_dev_malloc_raw(d, 1, BMEM_MAX_ROWS - 100, &b2), NM_OK);
        assert_int_equal(bmem_dev_geom(d, b2, &g), NM_OK);
        assert_int_equal(g.sub, 0);
        assert_int_equal(g.row, 100);
        assert_int_equal(bmem_dev_free(d, col), NM_OK);
        assert_int_equal(bmem_dev_malloc_raw(d, 2, 70, &b2), NM_OK);
        assert_int_equal(bmem_dev_geom(d, b2, &g), NM_OK);
        assert_int_equal(g.sub, 1);
        assert_int_equal(g.row, 0);
        bmem_dev_destroy(d);
    }
    /* the smallest device works */
    bmem_config one = {1, 1, 1, 1, BMEM_ALGO_PAPER, 0};
    assert_int_equal(bmem_dev_create(&one, &d), NM_OK);
    bmem_ptr p;
    assert_int_equal(bmem_dev_malloc(d, 1, BMEM_VERT, &p), NM_ERANGE); /* 8 bits > 1 bit */
    assert_int_equal(bmem_dev_malloc_raw(d, 1, 1, &p), NM_OK);
    assert_int_equal(bmem_dev_malloc_raw(d, 1, 1, &p), NM_ENOMEM);
    assert_int_equal(p, BMEM_NULL);
    bmem_dev_destroy(d);
}

static void stats_of(bmem_dev *d, bmem_stats *s) { assert_int_equal(bmem_dev_stats(d, s, NULL), NM_OK); }

static void test_bad_requests_keep_state(void **st)
{
    (void)st;
    for (int algo = 0; algo < 2; algo++) {
        bmem_config c = {64, 512, 8, 2, (bmem_algo)algo, 0};
        bmem_dev *d;
        assert_int_equal(bmem_dev_create(&c, &d), NM_OK);
        bmem_ptr a, b, x = 123;
        assert_int_equal(bmem_dev_malloc(d, 64, BMEM_HORIZ, &a), NM_OK);
        assert_int_equal(bmem_dev_malloc(d, 4, BMEM_VERT, &b), NM_OK);
        bmem_stats s0, s1;
        stats_of(d, &s0);
        assert_int_equal(s0.allocations, 2);
        assert_int_equal(s0.cells_allocated, 1 + 32);

        assert_int_equal(bmem_dev_malloc(d, 0, BMEM_HORIZ, &x), NM_ERANGE);
        assert_int_equal(x, BMEM_NULL);
        assert_int_equal(bmem_dev_malloc(d, 64 * 8 * 512 / 8 + 1, BMEM_HORIZ, &x), NM_ERANGE);
        assert_int_equal(bmem_dev_malloc(d, 10, (bmem_dim)0, &x), NM_EINVAL);
        assert_int_equal(bmem_dev_malloc(d, 10, BMEM_RAW, &x), NM_EINVAL);
        assert_int_equal(bmem_dev_malloc(NULL, 10, BMEM_HORIZ, &x), NM_EINVAL);
        assert_int_equal(bmem_dev_malloc(d, 10, BMEM_HORIZ, NULL), NM_EINVAL);
        assert_int_equal(bmem_dev_malloc_raw(d, 0, 1, &x), NM_ERANGE);
        assert_int_equal(bmem_dev_malloc_raw(d, 1, 0, &x), NM_ERANGE);
        assert_int_equal(bmem_dev_malloc_raw(d, 9, 1, &x), NM_ERANGE);
        assert_int_equal(bmem_dev_malloc_raw(d, 1, 65, &x), NM_ERANGE);
        /* a whole bank fits once per bank, then not */
        bmem_ptr big1, big2;
        assert_int_equal(bmem_dev_malloc_raw(d, 8, 64, &big1), NM_OK); /* the empty bank */
        assert_int_equal(bmem_dev_malloc_raw(d, 8, 64, &big2), NM_ENOMEM);
        assert_int_equal(big2, BMEM_NULL);
        assert_int_equal(bmem_dev_free(d, big1), NM_OK);

        /* frees of things that are not live allocations */
        assert_int_equal(bmem_dev_free(d, BMEM_NULL), NM_EBADFREE);
        assert_int_equal(bmem_dev_free(d, ~(bmem_ptr)0), NM_EBADFREE);
        assert_int_equal(bmem_dev_free(d, a + 1), NM_EBADFREE);         /* generation never issued */
        assert_int_equal(bmem_dev_free(d, a & ~(bmem_ptr)0x3fffffff), NM_EBADFREE); /* generation 0 */
        bmem_geom g;
        assert_int_equal(bmem_dev_geom(d, b, &g), NM_OK);
        /* interior cell of b (never a first cell): forged */
        bmem_ptr interior = ((bmem_ptr)g.bank << 56) | ((bmem_ptr)(g.row + 1) << 40) | ((bmem_ptr)g.sub << 30) | 1;
        assert_int_equal(bmem_dev_free(d, interior), NM_EBADFREE);
        assert_int_equal(bmem_dev_free(NULL, a), NM_EINVAL);
        stats_of(d, &s1);
        assert_memory_equal(&s0, &s1, sizeof s0);

        /* double free, then a stale handle after the cell was reused */
        assert_int_equal(bmem_dev_free(d, a), NM_OK);
        assert_int_equal(bmem_dev_free(d, a), NM_EDOUBLEFREE);
        assert_int_equal(bmem_dev_geom(d, a, &g), NM_EDOUBLEFREE);
        bmem_ptr a2;
        assert_int_equal(bmem_dev_malloc(d, 64, BMEM_HORIZ, &a2), NM_OK);
        assert_true(a2 != a); /* same first cell, next generation */
        assert_int_equal(bmem_dev_free(d, a), NM_EDOUBLEFREE);
        assert_int_equal(bmem_dev_geom(d, a2, &g), NM_OK);
        stats_of(d, &s1);
        assert_memory_equal(&s0, &s1, sizeof s0);
        assert_int_equal(bmem_dev_free(d, a2), NM_OK);
        assert_int_equal(bmem_dev_free(d, b), NM_OK);
        stats_of(d, &s1);
        assert_int_equal(s1.cells_allocated, 0);
        assert_int_equal(s1.allocations, 0);
        bmem_dev_destroy(d);
    }
}

static void test_geometry_and_stats(void **st)
{
    (void)st;
    bmem_config c = {128, 1024, 8, 2, BMEM_ALGO_FAST, 0};
    bmem_dev *d;
    assert_int_equal(bmem_dev_create(&c, &d), NM_OK);
    bmem_ptr h, v, r;
    assert_int_equal(bmem_dev_malloc(d, 300, BMEM_HORIZ, &h), NM_OK); /* 2400 bits -> 3 subarrays */
    assert_int_equal(bmem_dev_malloc(d, 2, BMEM_VERT, &v), NM_OK);    /* 16 rows */
    assert_int_equal(bmem_dev_malloc_raw(d, 2, 17, &r), NM_OK);       /* the paper's example */
    bmem_geom g;
    assert_int_equal(bmem_dev_geom(d, h, &g), NM_OK);
    unsigned home = g.bank; /* first fit in an empty bank: the caller's home bank */
    assert_int_equal(g.sub, 0);
    assert_int_equal(g.nsubs, 3);
    assert_int_equal(g.row, 0);
    assert_int_equal(g.nrows, 1);
    assert_int_equal(g.dim, BMEM_HORIZ);
    /* column-major first fit: subarray 0 has rows 1.. free */
    assert_int_equal(bmem_dev_geom(d, v, &g), NM_OK);
    assert_int_equal(g.bank, home);
    assert_int_equal(g.sub, 0);
    assert_int_equal(g.row, 1);
    assert_int_equal(g.nrows, 16);
    assert_int_equal(g.nsubs, 1);
    assert_int_equal(g.dim, BMEM_VERT);
    assert_int_equal(bmem_dev_geom(d, r, &g), NM_OK);
    assert_int_equal(g.sub, 0); /* subarrays 0-1 are both free from row 17 */
    assert_int_equal(g.row, 17);
    assert_int_equal(g.nsubs, 2);
    assert_int_equal(g.nrows, 17);
    assert_int_equal(g.dim, BMEM_RAW);

    bmem_stats s;
    bmem_bank_stats bs[2];
    assert_int_equal(bmem_dev_stats(d, &s, bs), NM_OK);
    assert_int_equal(s.cells_total, 2 * 128 * 8);
    assert_int_equal(s.cells_allocated, 3 + 16 + 34);
    assert_int_equal(s.cells_free, s.cells_total - s.cells_allocated);
    assert_int_equal(s.allocations, 3);
    assert_int_equal(s.bytes_total, 2 * 128 * 8 * 1024 / 8);
    assert_int_equal(bs[home].allocations, 3);
    assert_int_equal(bs[home].cells_allocated, 53);
    /* rows 1..127 of subarrays 2..7 (762 cells) beat rows 34..127 x 8 (752) */
    assert_int_equal(bs[home].largest_free_rows, 127);
    assert_int_equal(bs[home].largest_free_subs, 6);
    assert_int_equal(bs[1 - home].largest_free_rows, 128);
    assert_int_equal(bs[1 - home].largest_free_subs, 8);

    char map[1024];
    assert_int_equal(bmem_dev_text_map(d, home, 8, map, sizeof map), NM_OK);
    assert_int_equal(strlen(map), 8 * 9);
    assert_int_equal(map[0], '#'); /* rows 0..15 of subarray 0: all allocated */
    assert_int_equal(map[7], ' '); /* subarray 7 untouched */
    assert_int_equal(bmem_dev_text_map(d, home, 8, map, 10), NM_ERANGE);
    assert_int_equal(bmem_dev_text_map(d, 5, 8, map, sizeof map), NM_ERANGE);
    uint8_t snap[128 * 8];
    assert_int_equal(bmem_dev_snapshot(d, home, snap, sizeof snap), NM_OK);
    assert_int_not_equal(snap[0], 0);
    assert_int_equal(snap[7], 0);
    assert_int_equal(snap[0], snap[2]);     /* h spans subarrays 0..2 of row 0 */
    assert_int_not_equal(snap[8], snap[0]); /* v is another allocation */
    assert_int_equal(bmem_dev_snapshot(d, home, snap, 5), NM_ERANGE);
    bmem_dev_destroy(d);
}

static void test_colocation(void **st)
{
    (void)st;
    for (int algo = 0; algo < 2; algo++) {
        bmem_config c = {256, 8192, 16, 2, (bmem_algo)algo, 0};
        bmem_dev *d;
        assert_int_equal(bmem_dev_create(&c, &d), NM_OK);
        /* AXPY: R = a*X + Y, all vertical 32-bit elements, same rows */
        bmem_ptr pad, x, y, r;
        assert_int_equal(bmem_dev_malloc(d, 2, BMEM_VERT, &pad), NM_OK); /* subarray 0, rows 0..15 */
        assert_int_equal(bmem_dev_malloc(d, 4, BMEM_VERT, &x), NM_OK);   /* subarray 0, rows 16..47 */
        assert_int_equal(bmem_dev_malloc_near(d, 4, BMEM_VERT, 0, 0, x, BMEM_NEAR_STRICT, &y), NM_OK);
        assert_int_equal(bmem_dev_malloc_near(d, 4, BMEM_VERT, 0, 0, y, 0, &r), NM_OK);
        bmem_geom gx, gy, gr;
        assert_int_equal(bmem_dev_geom(d, x, &gx), NM_OK);
        assert_int_equal(bmem_dev_geom(d, y, &gy), NM_OK);
        assert_int_equal(bmem_dev_geom(d, r, &gr), NM_OK);
        assert_int_equal(gx.row, 16);
        assert_int_equal(gy.bank, gx.bank);
        assert_int_equal(gy.row, gx.row);
        assert_int_equal(gy.sub, gx.sub + 1);
        assert_int_equal(gr.row, gx.row);
        assert_int_equal(gr.sub, gx.sub + 2);
        /* without the hint, first fit would put it below x in subarray 0 */
        bmem_ptr plain;
        assert_int_equal(bmem_dev_malloc(d, 4, BMEM_VERT, &plain), NM_OK);
        bmem_geom gp;
        assert_int_equal(bmem_dev_geom(d, plain, &gp), NM_OK);
        assert_int_equal(gp.sub, 0);
        assert_int_equal(gp.row, 48);
        /* raw shape next to r */
        bmem_ptr l;
        assert_int_equal(bmem_dev_malloc_near(d, 0, BMEM_RAW, 1, 8, r, BMEM_NEAR_STRICT, &l), NM_OK);
        bmem_geom gl;
        assert_int_equal(bmem_dev_geom(d, l, &gl), NM_OK);
        assert_int_equal(gl.sub, gr.sub + 1);
        /* strict failure: taller than the rows left below near's first row */
        bmem_ptr z = 5;
        bmem_stats s0, s1;
        stats_of(d, &s0);
        assert_int_equal(bmem_dev_malloc_near(d, 0, BMEM_RAW, 1, 250, x, BMEM_NEAR_STRICT, &z), NM_ENOMEM);
        assert_int_equal(z, BMEM_NULL);
        stats_of(d, &s1);
        assert_memory_equal(&s0, &s1, sizeof s0);
        /* non-strict falls back to first fit */
        assert_int_equal(bmem_dev_malloc_near(d, 0, BMEM_RAW, 1, 250, x, 0, &z), NM_OK);
        /* bad near handles and flags */
        assert_int_equal(bmem_dev_malloc_near(d, 4, BMEM_VERT, 0, 0, BMEM_NULL, 0, &z), NM_EINVAL);
        assert_int_equal(bmem_dev_malloc_near(d, 4, BMEM_VERT, 0, 0, x, 0x10, &z), NM_EINVAL);
        assert_int_equal(bmem_dev_free(d, pad), NM_OK);
        assert_int_equal(bmem_dev_malloc_near(d, 4, BMEM_VERT, 0, 0, pad, 0, &z), NM_EINVAL);
        assert_int_equal(bmem_dev_malloc_near(d, 0, BMEM_VERT, 0, 0, x, 0, &z), NM_ERANGE);
        stats_of(d, &s1);
        assert_int_equal(s1.allocations, 6);
        bmem_dev_destroy(d);
    }
}

static void test_paper_interface(void **st)
{
    (void)st;
    assert_int_equal(bmem_malloc(8, BMEM_HORIZ), BMEM_NULL); /* not initialised */
    assert_int_equal(bmem_free(1), NM_ESTATE);
    /* the paper's example (Sec. 4.3) */
    assert_int_equal(bmem_init(1024, 65536, 16, 8), NM_OK);
    assert_int_equal(bmem_init(1024, 65536, 16, 8), NM_ESTATE);
    bmem_ptr p1 = bmem_malloc(4096, BMEM_HORIZ);
    bmem_ptr p2 = bmem_malloc(128, BMEM_VERT);
    bmem_ptr p3 = bmem_malloc_raw(2, 17);
    assert_true(p1 && p2 && p3);
    assert_int_equal(bmem_malloc(0, BMEM_HORIZ), BMEM_NULL);
    assert_true(strstr(nm_last_errmsg(), "size 0") != NULL);
    bmem_geom g;
    assert_int_equal(bmem_dev_geom(bmem_global(), p3, &g), NM_OK);
    assert_int_equal(g.nsubs, 2);
    assert_int_equal(g.nrows, 17);
    assert_int_equal(bmem_free(p1), NM_OK);
    assert_int_equal(bmem_free(p2), NM_OK);
    assert_int_equal(bmem_free(p3), NM_OK);
    assert_int_equal(bmem_free(p3), NM_EDOUBLEFREE);
    bmem_dtor();
    assert_null(bmem_global());
    bmem_dtor(); /* harmless twice */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_size_mapping),    cmocka_unit_test(test_bad_geometry),
        cmocka_unit_test(test_bad_requests_keep_state), cmocka_unit_test(test_geometry_and_stats),
        cmocka_unit_test(test_colocation),      cmocka_unit_test(test_paper_interface),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
