/* Suite pmalloc-small: PMAlloc-LOG and PMAlloc-GC against PMDK's libpmemobj on
 * the small-object benchmarks of Sec. 8.2 (threadtest, prod-con, shbench-like,
 * larson-small), 1 and 2 threads, medians over repetitions, peak memory per
 * allocator. Parameters are Ralloc's harness scaled to this 2-core host. */
#include <math.h>
#include <stdio.h>

#include "nearmem/bench.h"
#include "nearmem/common.h"
#include "pm_eval.h"

int nm_suite_pmalloc_small(nm_bench *b)
{
    pe_force_pmem(); /* before any libpmemobj call (each run is a fresh child anyway) */
    bool quick = nm_bench_quick(b);
    unsigned reps = (unsigned)nm_bench_param_num(b, "reps", quick ? 3 : 5);
    size_t pool = (size_t)nm_bench_param_num(b, "pool_mib", 256) << 20;
    struct { const char *name, *key; pe_work w; uint64_t n, iters, ops; } bs[] = {
        {"threadtest", "threadtest", PE_THREADTEST, quick ? 10000 : 100000, quick ? 3 : 10, 0},
        {"prod-con", "prodcon", PE_PRODCON, quick ? 100000 : 2000000, 1, 0},
        {"shbench", "shbench", PE_SHBENCH, 0, quick ? 300 : 3000, 0},
        {"larson-small", "larson_small", PE_LARSON_SMALL, 1000, 4, quick ? 100000 : 1000000},
    };
    nm_bench_config_str(b, "persistence", "pools are page-cache files in the same directory; PMAlloc: PMALLOC_PERSIST_CPU, "
                                          "PMDK: PMEM_IS_PMEM_FORCE=1 (cpu_flush column = pmem_is_pmem)");
    nm_bench_config_str(b, "speedup_keys", "PMAlloc-LOG / PMDK Mops/s at 2 threads (both strongly consistent)");
    nm_bench_config_num(b, "repetitions", reps);
    nm_bench_config_num(b, "threadtest_objects_per_thread", (double)bs[0].n);
    nm_bench_config_num(b, "threadtest_iterations", (double)bs[0].iters);
    nm_bench_config_num(b, "prodcon_objects", (double)bs[1].n);
    nm_bench_config_num(b, "shbench_iterations", (double)bs[2].iters);
    nm_bench_config_num(b, "larson_small_ops_per_thread", (double)bs[3].ops);
    nm_bench_plot_spec(b, "[{\"title\":\"small objects vs PMDK (2 threads)\",\"x\":\"bench\",\"y\":\"mops\",\"series\":\"allocator\","
                          "\"kind\":\"bar\",\"filter\":{\"threads\":2}},"
                          "{\"title\":\"peak memory (2 threads)\",\"x\":\"bench\",\"y\":\"peak_mib\",\"series\":\"allocator\","
                          "\"kind\":\"bar\",\"filter\":{\"threads\":2}}]");
    double sp[4], eadr[4];
    for (unsigned i = 0; i < 4; i++) {
        double m[3][3] = {{0}};
        for (unsigned th = 1; th <= 2; th++) { /* the three allocators' repetitions interleaved */
            pe_params p[PE_NKINDS];
            for (int k = 0; k < PE_NKINDS; k++)
                p[k] = (pe_params){.work = bs[i].w, .kind = (pe_kind)k, .threads = th, .n = bs[i].n,
                                   .iters = bs[i].iters, .ops = bs[i].ops, .pool_size = pool};
            if (pe_measure_set(b, bs[i].name, p, PE_NKINDS, reps, m[th], NULL)) return NM_EIO;
        }
        /* eADR (Sec. 8.9): PMAlloc-LOG with flushes and interleaving off, 2 threads. PMDK has
         * no per-pool switch for it (libpmem reads PMEM_NO_FLUSH at load), so the ratio is
         * against our own flushing LOG in the same run. */
        pe_params pe = {.work = bs[i].w, .kind = PE_LOG, .threads = 2, .n = bs[i].n, .iters = bs[i].iters,
                        .ops = bs[i].ops, .pool_size = pool, .eadr = 1};
        double me = pe_measure(b, bs[i].name, &pe, reps, NULL);
        if (isnan(me)) return NM_EIO;
        eadr[i] = me / m[2][PE_LOG];
        sp[i] = m[2][PE_LOG] / m[2][PE_PMDK];
        char key[64];
        snprintf(key, sizeof key, "speedup_vs_pmdk_%s", bs[i].key);
        nm_bench_summary_num(b, key, sp[i]);
        snprintf(key, sizeof key, "speedup_gc_vs_pmdk_%s", bs[i].key);
        nm_bench_summary_num(b, key, m[2][PE_GC] / m[2][PE_PMDK]);
        nm_bench_progress(b, "%s: LOG/PMDK %.2fx (1 thread %.2fx), GC/PMDK %.2fx", bs[i].name, sp[i],
                          m[1][PE_LOG] / m[1][PE_PMDK], m[2][PE_GC] / m[2][PE_PMDK]);
    }
    nm_bench_summary_num(b, "speedup_vs_pmdk_small_geomean", nm_stats_geomean(sp, 4));
    nm_bench_summary_num(b, "speedup_eadr_vs_flush_log_geomean", nm_stats_geomean(eadr, 4));
    return NM_OK;
}
