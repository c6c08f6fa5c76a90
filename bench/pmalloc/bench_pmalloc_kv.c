/* Suite pmalloc-kv: a persistent hash index of 128 B key-value pairs under a
 * 50% insert / 50% delete mix (the workload of the FPTree experiment, Sec. 8.5),
 * on PMAlloc-LOG, PMAlloc-GC and PMDK's libpmemobj. Not FPTree itself: the
 * index is one persistent bucket per key of a fixed key universe (twice the
 * live set), so the measured difference is the allocator's share. */
#include <math.h>

#include "nearmem/bench.h"
#include "nearmem/common.h"
#include "pm_eval.h"

int nm_suite_pmalloc_kv(nm_bench *b)
{
    pe_force_pmem();
    bool quick = nm_bench_quick(b);
    unsigned reps = (unsigned)nm_bench_param_num(b, "reps", quick ? 3 : 5);
    uint64_t warm = (uint64_t)nm_bench_param_num(b, "warmup", quick ? 50000 : 1000000); /* per thread */
    uint64_t ops = (uint64_t)nm_bench_param_num(b, "ops", quick ? 200000 : 4000000);
    size_t pool = ((size_t)(warm * 400 * 2) + ((size_t)64 << 20)) & ~(size_t)0xfffff;
    nm_bench_config_num(b, "warmup_pairs_per_thread", (double)warm);
    nm_bench_config_num(b, "ops_per_thread", (double)ops);
    nm_bench_config_num(b, "value_bytes", 128);
    nm_bench_config_num(b, "repetitions", reps);
    nm_bench_config_str(b, "speedup_key", "PMAlloc-LOG / PMDK KV ops/s at 2 threads");
    nm_bench_plot_spec(b, "[{\"title\":\"KV index 50% insert / 50% delete\",\"x\":\"threads\",\"y\":\"mops\",\"series\":\"allocator\",\"kind\":\"bar\"}]");
    double m[3][3] = {{0}};
    for (unsigned th = 1; th <= 2; th++) { /* the three allocators' repetitions interleaved */
        pe_params p[PE_NKINDS];
        for (int k = 0; k < PE_NKINDS; k++)
            p[k] = (pe_params){.work = PE_KV, .kind = (pe_kind)k, .threads = th, .n = warm, .iters = 1, .ops = ops,
                               .pool_size = pool};
        if (pe_measure_set(b, "kv", p, PE_NKINDS, reps, m[th], NULL)) return NM_EIO;
    }
    nm_bench_summary_num(b, "kv_speedup_vs_pmdk", m[2][PE_LOG] / m[2][PE_PMDK]);
    nm_bench_summary_num(b, "kv_speedup_gc_vs_pmdk", m[2][PE_GC] / m[2][PE_PMDK]);
    nm_bench_progress(b, "kv: LOG/PMDK %.2fx at 2 threads, %.2fx at 1", m[2][PE_LOG] / m[2][PE_PMDK], m[1][PE_LOG] / m[1][PE_PMDK]);
    return NM_OK;
}
