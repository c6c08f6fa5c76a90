/* Suite bmem-full-array: the paper's Full Array benchmark (Table 1, Sec. 5.1)
 * on the Table 3 device (1024 rows x 65536 columns x 16 subarrays x 8 banks =
 * 1 GiB). Each pass allocates until the device refuses (horizontal: 1 MiB
 * requests, 1024 of them; vertical: one subarray's 2^26 bits = 8 MiB per
 * request, 128 of them, see docs/bmem.md on Table 1's vertical column), then
 * frees everything. glibc malloc makes the same number of requests of the
 * same sizes and frees them, in the same repetition. Host wall time. */
#include <stdlib.h>
#include <string.h>

#include "nearmem/bench.h"
#include "nearmem/bmem.h"
#include "nearmem/common.h"

/* Called through volatile pointers so the compiler cannot pair and drop them. */
static void *(*volatile g_malloc)(size_t) = malloc;
static void (*volatile g_free)(void *) = free;

static const bmem_config k_dev = {1024, 65536, 16, 8, BMEM_ALGO_FAST, 0};

typedef struct pass {
    uint64_t ns;
    uint64_t allocs;
    double saturation_pct;
} pass;

static nm_err bmem_pass(bmem_algo algo, size_t size, bmem_dim dim, bmem_ptr *hs, size_t cap, pass *out)
{
    bmem_config c = k_dev;
    c.algo = algo;
    bmem_dev *d;
    nm_err e = bmem_dev_create(&c, &d);
    if (e) return e;
    size_t n = 0;
    uint64_t t0 = nm_now_ns();
    while (n < cap && bmem_dev_malloc(d, size, dim, &hs[n]) == NM_OK) n++;
    uint64_t t1 = nm_now_ns();
    bmem_stats s;
    bmem_dev_stats(d, &s, NULL);
    uint64_t t2 = nm_now_ns();
    for (size_t i = 0; i < n; i++)
        if ((e = bmem_dev_free(d, hs[i])) != NM_OK) break;
    uint64_t t3 = nm_now_ns();
    bmem_dev_destroy(d);
    if (e) return e;
    out->ns = (t1 - t0) + (t3 - t2);
    out->allocs = n;
    out->saturation_pct = 100.0 * (double)s.cells_allocated / (double)s.cells_total;
    return NM_OK;
}

static nm_err glibc_pass(size_t size, size_t n, void **ps, pass *out)
{
    uint64_t t0 = nm_now_ns();
    for (size_t i = 0; i < n; i++) ps[i] = g_malloc(size);
    for (size_t i = 0; i < n; i++) g_free(ps[i]);
    out->ns = nm_now_ns() - t0;
    out->allocs = n;
    for (size_t i = 0; i < n; i++)
        if (!ps[i]) return nm_fail(NM_ENOMEM, "glibc malloc(%zu) failed", size);
    return NM_OK;
}

int nm_suite_bmem_full_array(nm_bench *b)
{
    const int reps = (int)nm_bench_param_num(b, "reps", nm_bench_quick(b) ? 5 : 15);
    nm_bench_config_num(b, "repetitions", reps);
    nm_bench_config_str(b, "device", "Table 3: 1024 rows x 65536 columns x 16 subarrays x 8 banks (1 GiB)");
    nm_bench_config_num(b, "horizontal_request_bytes", 1 << 20);
    nm_bench_config_num(b, "vertical_request_bytes", 8 << 20);
    nm_bench_config_str(b, "peer", "glibc malloc/free, same count and sizes, same repetition");
    nm_bench_config_str(b, "statistic", "median over repetitions of time ratios paired within a repetition; host wall time");
    nm_bench_config_str(b, "paper", "Leidel MCHPC'17 Fig. 5a: bmem 1.48x (horizontal) and 5.86x (vertical) slower than glibc");
    nm_bench_plot_spec(b, "[{\"title\":\"Full Array: time / glibc (median, lower is better)\",\"x\":\"dim\","
                          "\"y\":\"ratio_vs_glibc\",\"series\":\"allocator\",\"kind\":\"bar\",\"logy\":true,\"hline\":1,"
                          "\"filter\":{\"kind\":\"ratio\"}},"
                          "{\"title\":\"Full Array: ns per request (alloc + free, median)\",\"x\":\"dim\","
                          "\"y\":\"ns_per_request\",\"series\":\"allocator\",\"kind\":\"bar\",\"logy\":true,"
                          "\"filter\":{\"kind\":\"time\"}}]");

    const size_t cap = 4096;
    bmem_ptr *hs = malloc(cap * sizeof *hs);
    void **ps = malloc(cap * sizeof *ps);
    double *rf = malloc(sizeof(double) * (size_t)reps * 6);
    if (!hs || !ps || !rf) return NM_ENOMEM;
    nm_err e = NM_OK;
    const struct {
        const char *name, *key;
        size_t size;
        bmem_dim dim;
    } dims[2] = {{"horizontal", "h", 1 << 20, BMEM_HORIZ}, {"vertical", "v", (size_t)8 << 20, BMEM_VERT}};
    double speedups[2];
    for (int k = 0; k < 2 && !e; k++) {
        double *t_g = rf, *t_f = rf + reps, *t_p = rf + 2 * reps, *r_f = rf + 3 * reps, *r_p = rf + 4 * reps,
               *sp = rf + 5 * reps;
        pass pf = {0}, pp = {0}, pg = {0};
        for (int rep = 0; rep < reps && !e; rep++) {
            if ((e = bmem_pass(BMEM_ALGO_FAST, dims[k].size, dims[k].dim, hs, cap, &pf))) break;
            if ((e = glibc_pass(dims[k].size, pf.allocs, ps, &pg))) break;
            if ((e = bmem_pass(BMEM_ALGO_PAPER, dims[k].size, dims[k].dim, hs, cap, &pp))) break;
            if (pp.allocs != pf.allocs) {
                e = nm_fail(NM_ECORRUPT, "paper and fast structures saturated at %llu and %llu requests",
                            (unsigned long long)pp.allocs, (unsigned long long)pf.allocs);
                break;
            }
            t_g[rep] = (double)pg.ns;
            t_f[rep] = (double)pf.ns;
            t_p[rep] = (double)pp.ns;
            r_f[rep] = (double)pf.ns / (double)pg.ns;
            r_p[rep] = (double)pp.ns / (double)pg.ns;
            sp[rep] = (double)pp.ns / (double)pf.ns;
        }
        if (e) break;
        double n = (double)pf.allocs;
        const char *names[3] = {"glibc", "bmem-fast", "bmem-paper"};
        double *times[3] = {t_g, t_f, t_p};
        for (int a = 0; a < 3; a++) {
            nm_bench_row *row = nm_bench_row_new(b);
            nm_bench_row_str(row, "kind", "time");
            nm_bench_row_str(row, "dim", dims[k].name);
            nm_bench_row_str(row, "allocator", names[a]);
            nm_bench_row_num(row, "requests", n);
            nm_bench_row_num(row, "time_ms", nm_stats_median(times[a], (size_t)reps) / 1e6);
            nm_bench_row_num(row, "ns_per_request", nm_stats_median(times[a], (size_t)reps) / n);
            nm_bench_row_num(row, "time_ms_min", nm_stats_min(times[a], (size_t)reps) / 1e6);
            nm_bench_row_num(row, "time_ms_max", nm_stats_max(times[a], (size_t)reps) / 1e6);
        }
        double rfm = nm_stats_median(r_f, (size_t)reps), rpm = nm_stats_median(r_p, (size_t)reps);
        speedups[k] = nm_stats_median(sp, (size_t)reps);
        for (int a = 0; a < 2; a++) {
            nm_bench_row *row = nm_bench_row_new(b);
            nm_bench_row_str(row, "kind", "ratio");
            nm_bench_row_str(row, "dim", dims[k].name);
            nm_bench_row_str(row, "allocator", a ? "bmem-paper" : "bmem-fast");
            nm_bench_row_num(row, "ratio_vs_glibc", a ? rpm : rfm);
            nm_bench_row_num(row, "saturation_pct", a ? pp.saturation_pct : pf.saturation_pct);
        }
        char key[64];
        snprintf(key, sizeof key, "full_array_%s_ratio_vs_glibc", dims[k].key);
        nm_bench_summary_num(b, key, rfm);
        snprintf(key, sizeof key, "full_array_%s_paper_ratio_vs_glibc", dims[k].key);
        nm_bench_summary_num(b, key, rpm);
        snprintf(key, sizeof key, "saturation_pct_%s", dims[k].key);
        nm_bench_summary_num(b, key, pf.saturation_pct);
        snprintf(key, sizeof key, "full_array_%s_requests", dims[k].key);
        nm_bench_summary_num(b, key, n);
        snprintf(key, sizeof key, "speedup_fast_vs_paper_%s", dims[k].key);
        nm_bench_summary_num(b, key, speedups[k]);
        nm_bench_progress(b, "%s: %.0f requests, saturation %.1f%%, fast/glibc %.3f, paper/glibc %.3f, paper/fast %.1f",
                          dims[k].name, n, pf.saturation_pct, rfm, rpm, speedups[k]);
    }
    if (!e) nm_bench_summary_num(b, "speedup_fast_vs_paper", nm_stats_geomean(speedups, 2));
    free(hs);
    free(ps);
    free(rf);
    return e;
}
