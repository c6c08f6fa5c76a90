/* Suite common-selftest: throughput of the common core's bitmap searches and
 * PRNG distributions. It exists to exercise the benchmark runner end to end,
 * and to catch a regression in the primitives every allocator uses. */
#include <stdlib.h>

#include "nearmem/bench.h"
#include "nearmem/common.h"

/* Keeps the optimizer from deleting measured work. */
static volatile uint64_t g_sink;

typedef uint64_t (*op_fn)(nm_rng *r, void *ctx, size_t iters);

static uint64_t op_u64(nm_rng *r, void *ctx, size_t iters)
{
    (void)ctx;
    uint64_t acc = 0;
    for (size_t i = 0; i < iters; i++) acc += nm_rng_u64(r);
    return acc;
}
static uint64_t op_below(nm_rng *r, void *ctx, size_t iters)
{
    (void)ctx;
    uint64_t acc = 0;
    for (size_t i = 0; i < iters; i++) acc += nm_rng_below(r, 1000003);
    return acc;
}
static uint64_t op_poisson(nm_rng *r, void *ctx, size_t iters)
{
    (void)ctx;
    uint64_t acc = 0;
    for (size_t i = 0; i < iters; i++) acc += nm_rng_poisson(r, 100.0);
    return acc;
}
static uint64_t op_zipf(nm_rng *r, void *ctx, size_t iters)
{
    (void)ctx;
    uint64_t acc = 0;
    for (size_t i = 0; i < iters; i++) acc += nm_rng_zipf(r, 1000000, 1.1);
    return acc;
}
static uint64_t op_rmat(nm_rng *r, void *ctx, size_t iters)
{
    (void)ctx;
    uint64_t acc = 0, u, v;
    for (size_t i = 0; i < iters; i++) {
        nm_rng_rmat_edge_n(r, 196591, 0.57, 0.19, 0.19, &u, &v);
        acc += u ^ v;
    }
    return acc;
}

/* Bitmap of 64 Ki bits, ~50% full in random runs: allocator-like state. */
#define BM_BITS (64u * 1024u)
struct bm_ctx {
    uint64_t words[BM_BITS / 64];
};
static uint64_t op_find_run(nm_rng *r, void *ctx, size_t iters)
{
    struct bm_ctx *c = ctx;
    uint64_t acc = 0;
    for (size_t i = 0; i < iters; i++) {
        size_t len = 1 + (size_t)nm_rng_below(r, 16);
        size_t from = (size_t)nm_rng_below(r, BM_BITS);
        acc += nm_bitmap_find_clear_run(c->words, BM_BITS, len, from);
    }
    return acc;
}
static uint64_t op_set_clear(nm_rng *r, void *ctx, size_t iters)
{
    struct bm_ctx *c = ctx;
    for (size_t i = 0; i < iters; i++) {
        size_t start = (size_t)nm_rng_below(r, BM_BITS - 200), len = 1 + (size_t)nm_rng_below(r, 200);
        nm_bitmap_set_range(c->words, start, len);
        nm_bitmap_clear_range(c->words, start, len);
    }
    return c->words[0];
}
static uint64_t op_first_set(nm_rng *r, void *ctx, size_t iters)
{
    struct bm_ctx *c = ctx;
    uint64_t acc = 0;
    for (size_t i = 0; i < iters; i++) acc += nm_bitmap_find_first_set(c->words, BM_BITS, (size_t)nm_rng_below(r, BM_BITS));
    return acc;
}

static const struct {
    const char *name, *group, *summary_key;
    op_fn fn;
    size_t iters;
} k_ops[] = {
    {"rng_u64", "prng", "prng_u64_mops", op_u64, 20000000},
    {"rng_below", "prng", NULL, op_below, 10000000},
    {"rng_poisson_100", "prng", "prng_poisson_mops", op_poisson, 2000000},
    {"rng_zipf_1e6", "prng", NULL, op_zipf, 2000000},
    {"rmat_edge_gowalla", "prng", "prng_rmat_edge_mops", op_rmat, 500000},
    {"bitmap_find_clear_run", "bitmap", "bitmap_find_run_mops", op_find_run, 2000000},
    {"bitmap_find_first_set", "bitmap", NULL, op_first_set, 5000000},
    /* last: its set+clear pairs erase the random pattern the searches above use */
    {"bitmap_set_clear_range", "bitmap", "bitmap_set_clear_mops", op_set_clear, 5000000},
};

int nm_suite_common_selftest(nm_bench *b)
{
    const int reps = nm_bench_quick(b) ? 3 : 7;
    const double scale = nm_bench_quick(b) ? 0.05 : 1.0;
    nm_bench_config_num(b, "repetitions", reps);
    nm_bench_config_num(b, "bitmap_bits", BM_BITS);
    nm_bench_config_str(b, "statistic", "median over repetitions, host wall time, one thread");
    nm_bench_plot_spec(b, "[{\"title\":\"common core throughput (median)\",\"x\":\"op\",\"y\":\"mops\","
                          "\"kind\":\"bar\",\"series\":\"group\",\"ylabel\":\"million ops/s (host)\",\"logy\":true}]");

    struct bm_ctx *ctx = malloc(sizeof *ctx);
    if (!ctx) return NM_ENOMEM;
    nm_rng r;
    nm_rng_seed(&r, nm_bench_seed(b));
    nm_bitmap_zero(ctx->words, BM_BITS);
    for (size_t i = 0; i < BM_BITS;) { /* alternating random runs */
        size_t len = 1 + (size_t)nm_rng_below(&r, 24);
        if (nm_rng_below(&r, 2)) nm_bitmap_set_range(ctx->words, i, NM_MIN(len, BM_BITS - i));
        i += len;
    }

    double mops_all[NM_ARRAY_LEN(k_ops)];
    for (size_t k = 0; k < NM_ARRAY_LEN(k_ops); k++) {
        size_t iters = (size_t)((double)k_ops[k].iters * scale);
        double samples[16];
        for (int rep = 0; rep < reps; rep++) {
            uint64_t t0 = nm_now_ns();
            g_sink += k_ops[k].fn(&r, ctx, iters);
            uint64_t dt = nm_now_ns() - t0;
            samples[rep] = (double)iters / ((double)(dt ? dt : 1) * 1e-9) / 1e6;
        }
        double med = nm_stats_median(samples, (size_t)reps);
        mops_all[k] = med;
        nm_bench_row *row = nm_bench_row_new(b);
        nm_bench_row_str(row, "op", k_ops[k].name);
        nm_bench_row_str(row, "group", k_ops[k].group);
        nm_bench_row_num(row, "iterations", (double)iters);
        nm_bench_row_num(row, "mops", med);
        nm_bench_row_num(row, "ns_per_op", 1e3 / med);
        nm_bench_row_num(row, "mops_min", nm_stats_min(samples, (size_t)reps));
        nm_bench_row_num(row, "mops_max", nm_stats_max(samples, (size_t)reps));
        if (k_ops[k].summary_key) nm_bench_summary_num(b, k_ops[k].summary_key, med);
        nm_bench_progress(b, "%-24s %8.1f Mops/s", k_ops[k].name, med);
    }
    nm_bench_summary_num(b, "geomean_mops", nm_stats_geomean(mops_all, NM_ARRAY_LEN(k_ops)));
    free(ctx);
    return 0;
}
