/* Suite pmalloc-fences: where the time of a strongly consistent persistent
 * allocator goes on this host, for PMAlloc-LOG, PMAlloc-GC and PMDK's
 * libpmemobj on the workloads of pmalloc-small, -large and -kv (issue 7).
 *
 *  1. flush_fence_ns / fence_ns: the cost of one store + pmem_flush (64 B) +
 *     pmem_drain, and of one store + pmem_drain, on a pmem_map_file mapping of
 *     the run's directory, measured in this run; *_all_threads: the same with
 *     the suite's thread count looping at once (per thread).
 *  2. Timing with flushes off (native): PMAlloc in eADR mode (no flushes,
 *     fences kept: PMALLOC_EADR_ON) and PMDK with PMEM_NO_FLUSH=1 (no flush
 *     instructions, fences kept; libpmem reads it at load time, so those runs
 *     re-execute the helper nearmem-pmalloc-evalrun). flush_share_* =
 *     1 - time without flushes / time with them.
 *  3. Steady counts (PMAlloc): its own flush and fence counters over the
 *     whole timed workload (mark mode, no debugger): flushes_per_op_log_<w>,
 *     fences_per_op_log_<w> (and _gc_). The one-line commit writes metadata
 *     back in checkpoints when the redo rings fill up (tens of thousands of
 *     operations): a short window would count one checkpoint or none.
 *  4. Counting (native code path, under gdb: pm_fences.h): flush and fence
 *     instructions executed per allocator operation in a shorter window
 *     (counted_flushes_per_op_<a>_<w>, counted_fences_per_op_<a>_<w>); PMDK's
 *     flushes_per_op_pmdk_<w>, fences_per_op_pmdk_<w> come from here (it has
 *     no counters; its per-operation cost does not amortise). PMAlloc's
 *     counters are checked against the instruction counts in the same window
 *     (count_vs_own_counters_max_rel_diff). And
 *     the fence-bound ceiling of the speedup, PMDK fences / LOG fences per op
 *     (speedup_ceiling_*), the same for flushed lines (speedup_ceiling_flush_*),
 *     and, with the timing, an additive check (no-flush time + lines x measured
 *     flush+fence cost: speedup_additive_*) and the bound LOG's flushed lines
 *     alone put on its speedup over the measured PMDK (speedup_bound_log_flushes_*).
 *     Skipped (config fence_count = "skipped: ...", fence_counts_measured = 0,
 *     no count keys) when gdb, objdump or the helper is missing or gdb cannot
 *     run the helper to its marker; the rest of the suite still runs.
 *
 * Thread-ns per op = threads x wall time / operations. Measured, not modeled;
 * est_flushes_per_op_* is derived (time difference / per-line flush cost). */
#include <libpmem.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nearmem/bench.h"
#include "nearmem/common.h"
#include "pm_eval.h"
#include "pm_fences.h"

/* ns per (store + [flush] + drain) over `n` iterations cycling over `lines`
 * lines of `base` (lines - 1 is the reflush distance of Sec. 3.2). */
static double pf_loop_lines_ns(char *base, bool flush, unsigned n, unsigned lines)
{
    uint64_t t0 = nm_now_ns();
    for (unsigned i = 0; i < n; i++) {
        char *l = base + (size_t)(i % lines) * 64u;
        *(volatile uint64_t *)l = i;
        if (flush) pmem_flush(l, 64);
        pmem_drain();
    }
    return (double)(nm_now_ns() - t0) / n;
}

static double pf_loop_ns(char *base, bool flush, unsigned n) { return pf_loop_lines_ns(base, flush, n, 512); }

typedef struct pf_loop_arg {
    char *base;
    bool flush;
    unsigned n;
    pthread_barrier_t *bar;
    double ns;
} pf_loop_arg;

static void *pf_loop_thread(void *arg)
{
    pf_loop_arg *a = arg;
    pthread_barrier_wait(a->bar);
    a->ns = pf_loop_ns(a->base, a->flush, a->n);
    return NULL;
}

/* Median over 7 runs of the per-iteration ns with `T` threads looping at once,
 * each on its own 512 lines (T = 1: this thread alone). */
static double pf_loop_median(char *base, bool flush, unsigned n, unsigned T)
{
    double v[7];
    for (unsigned k = 0; k < 7; k++) {
        if (T == 1) {
            v[k] = pf_loop_ns(base, flush, n);
            continue;
        }
        pthread_barrier_t bar;
        pthread_barrier_init(&bar, NULL, T);
        pf_loop_arg a[64];
        pthread_t th[64];
        for (unsigned t = 0; t < T; t++) {
            a[t] = (pf_loop_arg){base + (size_t)t * 512u * 64u, flush, n, &bar, 0};
            pthread_create(&th[t], NULL, pf_loop_thread, &a[t]);
        }
        double sum = 0;
        for (unsigned t = 0; t < T; t++) {
            pthread_join(th[t], NULL);
            sum += a[t].ns;
        }
        pthread_barrier_destroy(&bar);
        v[k] = sum / T;
    }
    return nm_stats_median(v, 7);
}

/* The cost of one store + 64 B flush + drain, and of one store + drain, on a
 * pmem_map_file mapping in the run's directory: alone and with T threads at
 * once (what each of T threads pays; the workloads run T threads). */
static int pf_flush_cost(nm_bench *b, bool quick, unsigned T, double ns[3][2])
{
    char path[700];
    snprintf(path, sizeof path, "%s/flushcost.pool", nm_bench_tmpdir(b));
    size_t len = 0;
    int is_pmem = 0;
    char *base = pmem_map_file(path, (size_t)T * 512u * 64u + (1u << 20), PMEM_FILE_CREATE, 0600, &len, &is_pmem);
    if (!base) return -1;
    unsigned n = quick ? 50000 : 200000;
    pf_loop_ns(base, true, (unsigned)(len / 64)); /* fault in and warm every line */
    for (int mt = 0; mt < 2; mt++) {
        unsigned t = mt ? T : 1;
        ns[mt][0] = pf_loop_median(base, true, n, t);
        ns[mt][1] = pf_loop_median(base, false, n, t);
        nm_bench_row *row = nm_bench_row_new(b);
        nm_bench_row_str(row, "bench", "flush-cost");
        nm_bench_row_num(row, "threads", t);
        nm_bench_row_num(row, "flush_fence_ns", ns[mt][0]);
        nm_bench_row_num(row, "fence_ns", ns[mt][1]);
        nm_bench_row_num(row, "iterations", n);
        nm_bench_row_num(row, "repetitions", 7);
        nm_bench_progress(b, "%u thread(s): store + pmem_flush(64 B) + pmem_drain %.1f ns, store + pmem_drain %.1f ns "
                             "(medians of 7 x %u per thread)", t, ns[mt][0], ns[mt][1], n);
    }
    /* reflushes (Sec. 3.2): the same line again at distance 0 and 3; on Optane
     * 800 and 500 ns against ~100 ns for a regular flush (paper) */
    for (unsigned d = 0; d < 2; d++) {
        unsigned lines = d ? 4 : 1;
        double v[7];
        for (unsigned k = 0; k < 7; k++) v[k] = pf_loop_lines_ns(base, true, n, lines);
        ns[2][d] = nm_stats_median(v, 7);
        nm_bench_row *row = nm_bench_row_new(b);
        nm_bench_row_str(row, "bench", "reflush-cost");
        nm_bench_row_num(row, "threads", 1);
        nm_bench_row_num(row, "reflush_distance", lines - 1);
        nm_bench_row_num(row, "flush_fence_ns", ns[2][d]);
        nm_bench_progress(b, "reflush distance %u: store + pmem_flush + pmem_drain %.1f ns", lines - 1, ns[2][d]);
    }
    pmem_unmap(base, len);
    unlink(path);
    return 0;
}

typedef struct pf_work {
    const char *name, *key;
    pe_work w;
    uint64_t n, iters, ops;    /* timed runs */
    uint64_t cn, citers, cops; /* counted runs (under gdb: every flush and fence costs ~0.5 ms there) */
    size_t pool;
} pf_work;

static const char *const pf_alloc_key[PE_NKINDS] = {"log", "gc", "pmdk"};

/* One counted run under gdb; 0 on success, counts in n[] and the result in r. */
static int pf_count(nm_bench *b, const char *script, pe_params *p, uint64_t n[PF_NKINDS], pe_result *r, bool *reached)
{
    static const char *prefix[] = {"gdb", "-q", "-nx", "-batch", "-x", NULL, "--args", NULL};
    prefix[5] = script;
    size_t cap = 1 << 20;
    char *out = malloc(cap);
    if (!out) return -1;
    snprintf(p->dir, sizeof p->dir, "%s/count-%d-%d", nm_bench_tmpdir(b), (int)p->work, (int)p->kind);
    pe_cleanup(p->dir);
    mkdir(p->dir, 0700);
    int rc = pe_run_exec(p, r, prefix, NULL, out, cap);
    pe_cleanup(p->dir);
    *reached = strstr(out, "NMCOUNT_SITES") != NULL;
    if (rc == 0 && pf_parse_counts(out, n) != 0) {
        const char *e = strstr(out, "NMCOUNT_ERROR");
        snprintf(r->msg, sizeof r->msg, "gdb counting incomplete%s%.80s", e ? ": " : "", e ? e : "");
        rc = -1;
    }
    free(out);
    return rc;
}

/* Writes the site list (every flush/fence instruction of the helper, libpmem,
 * libpmemobj and libc, which the helper maps from the same files as this
 * process); returns the number of sites, 0 on failure. */
static size_t pf_make_sites(nm_bench *b, const char *sites_path, uint64_t per_kind[PF_NKINDS])
{
    FILE *out = fopen(sites_path, "w");
    if (!out) return 0;
    size_t total = 0;
    long r = pf_sites_of_object(pe_helper_path(), out, per_kind);
    bool ok = r >= 0;
    total += r > 0 ? (size_t)r : 0;
    FILE *maps = fopen("/proc/self/maps", "r");
    char line[1024], seen[4][512] = {{0}};
    static const char *const libs[] = {"/libpmem.so", "/libpmemobj.so", "/libc.so", NULL};
    while (ok && maps && fgets(line, sizeof line, maps)) {
        char *path = strchr(line, '/');
        if (!path) continue;
        path[strcspn(path, "\n")] = 0;
        for (unsigned i = 0; libs[i]; i++)
            if (strstr(path, libs[i]) && !seen[i][0]) {
                snprintf(seen[i], sizeof seen[i], "%s", path);
                r = pf_sites_of_object(path, out, per_kind);
                if (r < 0) ok = false;
                else total += (size_t)r;
                nm_bench_progress(b, "flush/fence sites in %s: %ld", path, r);
            }
    }
    if (maps) fclose(maps);
    if (fclose(out) || !seen[0][0] || !seen[1][0]) ok = false;
    return ok ? total : 0;
}

int nm_suite_pmalloc_fences(nm_bench *b)
{
    pe_force_pmem();
    bool quick = nm_bench_quick(b);
    unsigned reps = (unsigned)nm_bench_param_num(b, "reps", quick ? 3 : 5);
    unsigned T = (unsigned)nm_bench_param_num(b, "threads", 2);
    double cscale = nm_bench_param_num(b, "count_scale", quick ? 1 : 4);
    bool do_count = nm_bench_param_num(b, "count", 1) != 0, do_time = nm_bench_param_num(b, "time", 1) != 0;
    if (T < 1 || T > 64 || cscale <= 0) return NM_EINVAL;
    if (T > 1 && T % 2) { /* prod-con runs producer/consumer pairs */
        nm_bench_progress(b, "threads must be 1 or even (prod-con pairs), not %u", T);
        return NM_EINVAL;
    }
    uint64_t dbms_n = (uint64_t)nm_bench_param_num(b, "dbms_objects", quick ? 400 : 2000);
    uint64_t kv_warm = quick ? 50000 : 400000;
#define CS(x) ((uint64_t)((x) * cscale + 0.5) ? (uint64_t)((x) * cscale + 0.5) : 1)
    pf_work ws[] = {
        {"threadtest", "threadtest", PE_THREADTEST, 10000, quick ? 3 : 10, 0, 300, CS(1), 0, (size_t)64 << 20},
        {"prod-con", "prodcon", PE_PRODCON, quick ? 100000 : 1000000, 1, 0, CS(600), 1, 0, (size_t)64 << 20},
        {"shbench", "shbench", PE_SHBENCH, 0, quick ? 300 : 2000, 0, 0, CS(2), 0, (size_t)64 << 20},
        {"larson-small", "larson_small", PE_LARSON_SMALL, 1000, 4, quick ? 100000 : 500000, 1000, 4, CS(300), (size_t)64 << 20},
        {"larson-large", "larson_large", PE_LARSON_LARGE, 100, 4, quick ? 4000 : 20000, 100, 4, CS(200), (size_t)512 << 20},
        {"dbmstest", "dbmstest", PE_DBMSTEST, dbms_n / T, quick ? 4 : 10, 0, 100 / T, CS(3), 0, (size_t)(dbms_n + 128) << 20},
        {"kv", "kv", PE_KV, kv_warm, 1, quick ? 200000 : 1000000, 2000, 1, CS(300),
         (((size_t)(kv_warm * 400 * 2) + ((size_t)64 << 20)) & ~(size_t)0xfffff)},
    };
#undef CS
    const unsigned NW = sizeof ws / sizeof ws[0];
    const char *only = nm_bench_param(b, "only", NULL); /* one workload key, for quick looks */

    nm_bench_config_num(b, "threads", T);
    nm_bench_config_num(b, "repetitions", reps);
    nm_bench_config_str(b, "persistence", "page-cache files; PMAlloc PMALLOC_PERSIST_CPU, PMDK PMEM_IS_PMEM_FORCE=1; "
                                          "no-flush runs: PMAlloc PMALLOC_EADR_ON, PMDK PMEM_NO_FLUSH=1 (re-executed helper)");
    nm_bench_config_str(b, "ns_per_op", "thread-ns per allocator operation = threads x wall time / operations");
    if (getenv("PMEM_NO_FLUSH")) nm_bench_config_str(b, "warning", "PMEM_NO_FLUSH is set for the whole run: flush costs are wrong");
    nm_bench_plot_spec(b, "[{\"title\":\"thread-ns per op, with and without flushes\",\"x\":\"bench\",\"y\":\"ns_per_op\","
                          "\"series\":\"allocator\",\"kind\":\"bar\",\"filter\":{\"method\":\"time\"}},"
                          "{\"title\":\"fences per op (counted)\",\"x\":\"bench\",\"y\":\"fences_per_op\",\"series\":\"allocator\","
                          "\"kind\":\"bar\",\"filter\":{\"method\":\"count\"}}]");

    double cost[3][2];
    if (pf_flush_cost(b, quick, T, cost)) return NM_EIO;
    nm_bench_summary_num(b, "flush_fence_ns", cost[0][0]);
    nm_bench_summary_num(b, "fence_ns", cost[0][1]);
    nm_bench_summary_num(b, "flush_fence_ns_all_threads", cost[1][0]);
    nm_bench_summary_num(b, "fence_ns_all_threads", cost[1][1]);
    nm_bench_summary_num(b, "reflush_d0_flush_fence_ns", cost[2][0]);
    nm_bench_summary_num(b, "reflush_d3_flush_fence_ns", cost[2][1]);
    /* what a flushed line adds to a fence, with the workloads' thread count */
    double line_ns = cost[1][0] - cost[1][1];

    /* ---- 2. timing, with and without flushes ---- */
    bool have_helper = pe_helper_path() != NULL;
    double ns_all[16][PE_NKINDS][2];
    for (unsigned i = 0; i < NW; i++)
        for (int k = 0; k < PE_NKINDS; k++) ns_all[i][k][0] = ns_all[i][k][1] = NAN;
    for (unsigned i = 0; do_time && i < NW; i++) {
        if (only && strcmp(only, ws[i].key)) continue;
        double (*ns)[2] = ns_all[i];
        /* the six configurations take turns within each repetition, so that load
         * from other jobs on the shared cores falls on all of them alike */
        double v[PE_NKINDS][2][16];
        if (reps > 16) reps = 16;
        for (unsigned rep = 0; rep < reps; rep++)
            for (int k = 0; k < PE_NKINDS; k++)
                for (int nf = 0; nf < 2; nf++) {
                    v[k][nf][rep] = NAN;
                    if (k == PE_PMDK && nf && !have_helper) continue;
                    pe_params p = {.work = ws[i].w, .kind = (pe_kind)k, .threads = T, .n = ws[i].n, .iters = ws[i].iters,
                                   .ops = ws[i].ops, .pool_size = ws[i].pool, .prefault = 1,
                                   .seed = nm_bench_seed(b) * 1000003u + rep};
                    if (nf && k == PE_PMDK) p.pmdk_noflush = 1;
                    else if (nf) p.eadr = 1;
                    snprintf(p.dir, sizeof p.dir, "%s/time-%d-%d", nm_bench_tmpdir(b), k, nf);
                    pe_cleanup(p.dir);
                    pe_result r;
                    int rc = pe_run(&p, &r);
                    pe_cleanup(p.dir);
                    if (rc || r.seconds <= 0 || r.ops <= 0) {
                        nm_bench_progress(b, "%s %s%s: FAILED: %s", ws[i].name, pe_kind_name((pe_kind)k), nf ? " no-flush" : "", r.msg);
                        return NM_EIO;
                    }
                    if (k == PE_PMDK && r.is_pmem != 1) {
                        nm_bench_progress(b, "%s PMDK: pool not reported as pmem: CPU flushes are not in use", ws[i].name);
                        return NM_EIO;
                    }
                    v[k][nf][rep] = r.seconds * T * 1e9 / r.ops;
                }
        for (int k = 0; k < PE_NKINDS; k++)
            for (int nf = 0; nf < 2; nf++) {
                ns[k][nf] = isnan(v[k][nf][0]) ? NAN : nm_stats_median(v[k][nf], reps);
                if (isnan(ns[k][nf])) continue;
                nm_bench_row *row = nm_bench_row_new(b);
                nm_bench_row_str(row, "bench", ws[i].name);
                nm_bench_row_str(row, "allocator", nf ? (k == PE_PMDK ? "PMDK-noflush" : k == PE_GC ? "PMAlloc-GC-eADR" : "PMAlloc-LOG-eADR")
                                                      : pe_kind_name((pe_kind)k));
                nm_bench_row_str(row, "method", "time");
                nm_bench_row_num(row, "threads", T);
                nm_bench_row_num(row, "ns_per_op", ns[k][nf]);
                nm_bench_row_num(row, "mops", T * 1e3 / ns[k][nf]);
                nm_bench_row_num(row, "repetitions", reps);
            }
        char key[96];
        for (int k = 0; k < PE_NKINDS; k++) {
            if (isnan(ns[k][1])) continue;
            snprintf(key, sizeof key, "ns_per_op_%s_%s", pf_alloc_key[k], ws[i].key);
            nm_bench_summary_num(b, key, ns[k][0]);
            snprintf(key, sizeof key, "ns_per_op_noflush_%s_%s", pf_alloc_key[k], ws[i].key);
            nm_bench_summary_num(b, key, ns[k][1]);
            snprintf(key, sizeof key, "flush_share_%s_%s", pf_alloc_key[k], ws[i].key);
            nm_bench_summary_num(b, key, 1.0 - ns[k][1] / ns[k][0]);
            snprintf(key, sizeof key, "est_flushes_per_op_%s_%s", pf_alloc_key[k], ws[i].key);
            nm_bench_summary_num(b, key, (ns[k][0] - ns[k][1]) / line_ns);
        }
        snprintf(key, sizeof key, "speedup_log_vs_pmdk_%s", ws[i].key);
        nm_bench_summary_num(b, key, ns[PE_PMDK][0] / ns[PE_LOG][0]);
        if (!isnan(ns[PE_PMDK][1])) {
            snprintf(key, sizeof key, "speedup_noflush_log_vs_pmdk_%s", ws[i].key);
            nm_bench_summary_num(b, key, ns[PE_PMDK][1] / ns[PE_LOG][1]);
        }
        nm_bench_progress(b, "%s: thread-ns/op LOG %.0f (no flush %.0f), GC %.0f (%.0f), PMDK %.0f (%.0f)", ws[i].name,
                          ns[0][0], ns[0][1], ns[1][0], ns[1][1], ns[2][0], ns[2][1]);
    }
    if (!have_helper) nm_bench_config_str(b, "pmdk_noflush", "skipped: helper nearmem-pmalloc-evalrun not found");

    /* ---- 3. steady counts: PMAlloc's own counters over the timed workload ---- */
    double steady[16][2][2]; /* [workload][LOG, GC][flushes, fences] per op */
    for (unsigned i = 0; i < NW; i++)
        for (int k = 0; k < 2; k++) steady[i][k][0] = steady[i][k][1] = NAN;
    nm_bench_config_str(b, "steady_counts", "PMAlloc's own flush/fence counters between the timed phase's markers of a full-size "
                                            "run (every checkpoint inside): the flushes_per_op_log_*/gc_* keys");
    for (unsigned i = 0; do_time && i < NW; i++) {
        if (only && strcmp(only, ws[i].key)) continue;
        for (int k = 0; k < 2; k++) {
            pe_params p = {.work = ws[i].w, .kind = (pe_kind)k, .threads = T, .n = ws[i].n, .iters = ws[i].iters, .ops = ws[i].ops,
                           .pool_size = ws[i].pool, .prefault = 1, .mark = 1, .seed = nm_bench_seed(b) * 1000003u};
            snprintf(p.dir, sizeof p.dir, "%s/steady-%d", nm_bench_tmpdir(b), k);
            pe_cleanup(p.dir);
            pe_result r;
            int rc = pe_run(&p, &r);
            pe_cleanup(p.dir);
            if (rc || r.ops <= 0) {
                nm_bench_progress(b, "%s %s steady count: FAILED: %s", ws[i].name, pe_kind_name((pe_kind)k), r.msg);
                return NM_EIO;
            }
            steady[i][k][0] = r.flushes / r.ops;
            steady[i][k][1] = r.fences / r.ops;
            char key[96];
            snprintf(key, sizeof key, "flushes_per_op_%s_%s", pf_alloc_key[k], ws[i].key);
            nm_bench_summary_num(b, key, steady[i][k][0]);
            snprintf(key, sizeof key, "fences_per_op_%s_%s", pf_alloc_key[k], ws[i].key);
            nm_bench_summary_num(b, key, steady[i][k][1]);
            nm_bench_row *row = nm_bench_row_new(b);
            nm_bench_row_str(row, "bench", ws[i].name);
            nm_bench_row_str(row, "allocator", pe_kind_name((pe_kind)k));
            nm_bench_row_str(row, "method", "own_counters");
            nm_bench_row_num(row, "threads", T);
            nm_bench_row_num(row, "ops", r.ops);
            nm_bench_row_num(row, "flushes_per_op", steady[i][k][0]);
            nm_bench_row_num(row, "fences_per_op", steady[i][k][1]);
            nm_bench_progress(b, "%-12s %-12s own counters over %.0f ops: %.3f flushes/op, %.3f fences/op", ws[i].name,
                              pe_kind_name((pe_kind)k), r.ops, steady[i][k][0], steady[i][k][1]);
        }
    }

    /* ---- 4. counting under gdb ---- */
    const char *why = NULL;
    if (!do_count) why = "skipped: --set count=0";
    else if (!have_helper) why = "skipped: helper nearmem-pmalloc-evalrun not found";
    else if (system("gdb --version > /dev/null 2>&1") != 0) why = "skipped: gdb not found (scripts/install-deps.sh --bench)";
    else if (system("objdump --version > /dev/null 2>&1") != 0) why = "skipped: objdump not found (binutils)";
    char sites[700], script[700];
    snprintf(sites, sizeof sites, "%s/fence-sites.txt", nm_bench_tmpdir(b));
    snprintf(script, sizeof script, "%s/fence-count.py", nm_bench_tmpdir(b));
    uint64_t per_kind[PF_NKINDS] = {0};
    size_t nsites = why ? 0 : pf_make_sites(b, sites, per_kind);
    if (!why && nsites == 0) why = "skipped: no flush/fence sites found (objdump failed?)";
    if (!why && pf_write_gdb_script(script, sites)) why = "skipped: cannot write the gdb script";
    if (why) {
        nm_bench_config_str(b, "fence_count", why);
        nm_bench_summary_num(b, "fence_counts_measured", 0);
        nm_bench_progress(b, "fence counting %s", why);
        return NM_OK;
    }
    nm_bench_config_str(b, "fence_count", "gdb breakpoints on every clwb/clflushopt/clflush/sfence/mfence of the helper, "
                                          "libpmem, libpmemobj and libc, between the timed phase's markers (native code path)");
    nm_bench_config_num(b, "fence_sites", (double)nsites);
    double max_err = 0;
    bool counted_any = false;
    char skipmsg[300];
    for (unsigned i = 0; i < NW; i++) {
        if (only && strcmp(only, ws[i].key)) continue;
        double fpo[PE_NKINDS], lpo[PE_NKINDS];
        for (int k = 0; k < PE_NKINDS; k++) {
            pe_params p = {.work = ws[i].w, .kind = (pe_kind)k, .threads = T, .n = ws[i].cn, .iters = ws[i].citers,
                           .ops = ws[i].cops, .pool_size = ws[i].pool, .mark = 1, .seed = nm_bench_seed(b)};
            uint64_t n[PF_NKINDS];
            pe_result r;
            uint64_t t0 = nm_now_ns();
            bool reached = false;
            if (pf_count(b, script, &p, n, &r, &reached) || r.ops <= 0) {
                if (!reached && !counted_any) { /* gdb never got to the marker: e.g. ptrace not permitted */
                    snprintf(skipmsg, sizeof skipmsg, "skipped: gdb did not reach the helper's marker (ptrace not permitted?): %.120s", r.msg);
                    nm_bench_config_str(b, "fence_count", skipmsg);
                    nm_bench_summary_num(b, "fence_counts_measured", 0);
                    nm_bench_progress(b, "fence counting %s", skipmsg);
                    return NM_OK;
                }
                nm_bench_progress(b, "%s %s: counting FAILED: %s", ws[i].name, pe_kind_name((pe_kind)k), r.msg);
                return NM_EIO;
            }
            counted_any = true;
            fpo[k] = (double)pf_fences(n) / r.ops;
            lpo[k] = (double)pf_flushes(n) / r.ops;
            nm_bench_row *row = nm_bench_row_new(b);
            nm_bench_row_str(row, "bench", ws[i].name);
            nm_bench_row_str(row, "allocator", pe_kind_name((pe_kind)k));
            nm_bench_row_str(row, "method", "count");
            nm_bench_row_num(row, "threads", T);
            nm_bench_row_num(row, "ops", r.ops);
            nm_bench_row_num(row, "fences_per_op", fpo[k]);
            nm_bench_row_num(row, "flushes_per_op", lpo[k]);
            for (int q = 0; q < PF_NKINDS; q++) nm_bench_row_num(row, pf_kind_name((pf_kind)q), (double)n[q]);
            if (k != PE_PMDK) { /* cross-check against PMAlloc's own counters (same window) */
                nm_bench_row_num(row, "own_counter_fences", r.fences);
                nm_bench_row_num(row, "own_counter_flushes", r.flushes);
                double ef = fabs((double)pf_fences(n) - r.fences) / (r.fences > 0 ? r.fences : 1);
                double el = fabs((double)pf_flushes(n) - r.flushes) / (r.flushes > 0 ? r.flushes : 1);
                max_err = fmax(max_err, fmax(ef, el));
            }
            char key[96];
            snprintf(key, sizeof key, "counted_fences_per_op_%s_%s", pf_alloc_key[k], ws[i].key);
            nm_bench_summary_num(b, key, fpo[k]);
            snprintf(key, sizeof key, "counted_flushes_per_op_%s_%s", pf_alloc_key[k], ws[i].key);
            nm_bench_summary_num(b, key, lpo[k]);
            if (k == PE_PMDK) {
                snprintf(key, sizeof key, "fences_per_op_%s_%s", pf_alloc_key[k], ws[i].key);
                nm_bench_summary_num(b, key, fpo[k]);
                snprintf(key, sizeof key, "flushes_per_op_%s_%s", pf_alloc_key[k], ws[i].key);
                nm_bench_summary_num(b, key, lpo[k]);
            } else if (!isnan(steady[i][k][0])) { /* the ceilings below use the steady PMAlloc counts */
                fpo[k] = steady[i][k][1];
                lpo[k] = steady[i][k][0];
            }
            if (!isnan(ns_all[i][k][1]) && lpo[k] > 0) { /* what one counted line costs in this workload */
                snprintf(key, sizeof key, "ns_per_flushed_line_%s_%s", pf_alloc_key[k], ws[i].key);
                nm_bench_summary_num(b, key, (ns_all[i][k][0] - ns_all[i][k][1]) / lpo[k]);
            }
            nm_bench_progress(b, "%-12s %-12s counted over %.0f ops: %.2f fences/op, %.2f flushes/op (%.1f s under gdb)",
                              ws[i].name, pe_kind_name((pe_kind)k), r.ops, fpo[k], lpo[k], (double)(nm_now_ns() - t0) / 1e9);
        }
        char key[96];
        snprintf(key, sizeof key, "speedup_ceiling_%s", ws[i].key);
        nm_bench_summary_num(b, key, fpo[PE_PMDK] / fpo[PE_LOG]);
        /* on this host a fence with no flush pending costs ~2 ns, a flushed line + fence
         * ~200-350 ns: the ratio of flushed lines is the bound that matters here */
        snprintf(key, sizeof key, "speedup_ceiling_flush_%s", ws[i].key);
        nm_bench_summary_num(b, key, lpo[PE_PMDK] / lpo[PE_LOG]);
        const double(*ns)[2] = ns_all[i];
        if (!isnan(ns[PE_PMDK][1]) && !isnan(ns[PE_LOG][1])) {
            /* additive model from measured parts: no-flush time + counted lines x the
             * measured flush+fence cost with all threads flushing; to compare with
             * the measured speedup (how much of the ratio the decomposition explains) */
            double c = cost[1][0];
            snprintf(key, sizeof key, "speedup_additive_%s", ws[i].key);
            nm_bench_summary_num(b, key, (ns[PE_PMDK][1] + lpo[PE_PMDK] * c) / (ns[PE_LOG][1] + lpo[PE_LOG] * c));
            /* what LOG would reach against this PMDK if all its work but its fenced
             * flushes cost nothing, at the cheapest measured flush+fence (1 thread
             * alone): generous, and an estimate, not a hard bound (a line's cost
             * varies with the workload: flushes overlap other misses) */
            snprintf(key, sizeof key, "speedup_bound_log_flushes_%s", ws[i].key);
            nm_bench_summary_num(b, key, ns[PE_PMDK][0] / (fmin(fpo[PE_LOG], lpo[PE_LOG]) * cost[0][0]));
        }
    }
    nm_bench_summary_num(b, "fence_counts_measured", 1);
    nm_bench_summary_num(b, "count_vs_own_counters_max_rel_diff", max_err);
    return NM_OK;
}
