/* Suite pmalloc-large: PMAlloc-LOG and PMAlloc-GC against PMDK's libpmemobj on
 * the large-object benchmarks of Sec. 8.2: larson-large (32-512 KiB) and
 * DBMStest (Poisson 32-512 KiB, 90% deleted per iteration). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nearmem/bench.h"
#include "nearmem/common.h"
#include "pm_eval.h"

int nm_suite_pmalloc_large(nm_bench *b)
{
    pe_force_pmem();
    bool quick = nm_bench_quick(b);
    unsigned reps = (unsigned)nm_bench_param_num(b, "reps", quick ? 3 : 5);
    /* objects per iteration, all threads (paper: 10^4; the live set is ~1.2 n x 272 KiB) */
    uint64_t dbms_n = (uint64_t)nm_bench_param_num(b, "dbms_objects", quick ? 1000 : 4000);
    size_t dbms_pool = (size_t)(dbms_n + 128) << 20;
    struct { const char *name, *key; pe_work w; uint64_t n, iters, ops; size_t pool; } bs[] = {
        {"larson-large", "larson_large", PE_LARSON_LARGE, 100, 4, quick ? 4000 : 40000, (size_t)512 << 20},
        {"dbmstest", "dbmstest", PE_DBMSTEST, 0, quick ? 4 : 20, 0, dbms_pool},
    };
    nm_bench_config_str(b, "persistence", "pools are page-cache files in the same directory; PMAlloc: PMALLOC_PERSIST_CPU, "
                                          "PMDK: PMEM_IS_PMEM_FORCE=1 (cpu_flush column = pmem_is_pmem)");
    nm_bench_config_str(b, "speedup_keys", "PMAlloc-LOG / PMDK Mops/s at 2 threads");
    nm_bench_config_num(b, "repetitions", reps);
    nm_bench_config_num(b, "larson_large_ops_per_thread", (double)bs[0].ops);
    nm_bench_config_num(b, "dbmstest_objects_per_iteration", (double)dbms_n);
    nm_bench_config_num(b, "dbmstest_iterations", (double)bs[1].iters);
    /* Sec. 8.2 runs 50 warm-up iterations before the 50 it times; without
     * them the timed phase (a fraction of a second) was mostly the first
     * touches of a fresh heap's DRAM metadata and pages */
    nm_bench_config_num(b, "dbmstest_warmup_iterations", (double)bs[1].iters);
    nm_bench_plot_spec(b, "[{\"title\":\"large objects vs PMDK (2 threads)\",\"x\":\"bench\",\"y\":\"mops\",\"series\":\"allocator\","
                          "\"kind\":\"bar\",\"filter\":{\"threads\":2}}]");
    /* --set bench=larson_large|dbmstest: run only that workload (its keys only) */
    const char *only = nm_bench_param(b, "bench", NULL);
    if (only && strcmp(only, bs[0].key) && strcmp(only, bs[1].key)) {
        nm_bench_progress(b, "unknown bench '%s' (larson_large, dbmstest)", only);
        return NM_EINVAL;
    }
    for (unsigned i = 0; i < 2; i++) {
        if (only && strcmp(only, bs[i].key)) continue;
        double m[3][3] = {{0}};
        for (unsigned th = 1; th <= 2; th++) { /* the three allocators' repetitions interleaved */
            pe_params p[PE_NKINDS];
            for (int k = 0; k < PE_NKINDS; k++)
                p[k] = (pe_params){.work = bs[i].w, .kind = (pe_kind)k, .threads = th,
                                   .n = bs[i].w == PE_DBMSTEST ? dbms_n / th : bs[i].n, .iters = bs[i].iters,
                                   .ops = bs[i].ops, .pool_size = bs[i].pool, .warm = bs[i].w == PE_DBMSTEST ? bs[i].iters : 0};
            if (pe_measure_set(b, bs[i].name, p, PE_NKINDS, reps, m[th], NULL)) return NM_EIO;
        }
        char key[64];
        snprintf(key, sizeof key, "speedup_vs_pmdk_%s", bs[i].key);
        nm_bench_summary_num(b, key, m[2][PE_LOG] / m[2][PE_PMDK]);
        snprintf(key, sizeof key, "speedup_gc_vs_pmdk_%s", bs[i].key);
        nm_bench_summary_num(b, key, m[2][PE_GC] / m[2][PE_PMDK]);
        nm_bench_progress(b, "%s: LOG/PMDK %.2fx (1 thread %.2fx)", bs[i].name, m[2][PE_LOG] / m[2][PE_PMDK],
                          m[1][PE_LOG] / m[1][PE_PMDK]);
    }
    return NM_OK;
}
