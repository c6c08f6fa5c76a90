/* Suite pmalloc-frag: Fragbench W1-W4 (paper Sec. 3, Table 1; Meta's memcached
 * traces via RAMCloud): peak memory of PMAlloc-LOG and PMAlloc-GC (with slab
 * morphing, Sec. 5.2), PMAlloc-LOG without morphing (the paper's "w/o SM"
 * bars of Fig. 27(a)) and PMDK, each in its own process.
 * Peak memory is the measuring process's peak RSS growth: pool pages touched
 * (a page once used stays resident) plus the allocator's DRAM. */
#include <math.h>
#include <stdio.h>

#include "nearmem/bench.h"
#include "nearmem/common.h"
#include "pm_eval.h"

int nm_suite_pmalloc_frag(nm_bench *b)
{
    pe_force_pmem();
    bool quick = nm_bench_quick(b);
    /* paper: 5 GB allocated per phase, live data <= 1 GB; scaled down 1:5 (full) / 1:80 (quick) */
    uint64_t live_mib = (uint64_t)nm_bench_param_num(b, "live_mib", quick ? 6 : 200);
    uint64_t phase_mib = live_mib * 5;
    unsigned reps = (unsigned)nm_bench_param_num(b, "reps", 1);
    nm_bench_config_num(b, "live_limit_mib", (double)live_mib);
    nm_bench_config_num(b, "allocated_per_phase_mib", (double)phase_mib);
    nm_bench_config_str(b, "peak_memory", "peak RSS growth of the run's process: pool pages touched + allocator DRAM");
    nm_bench_config_str(b, "slab_morphing", "PMAlloc-LOG/-GC with morphing at the default SU = 20%; PMAlloc-LOG-noSM without");
    nm_bench_config_str(b, "frag_reduction", "1 - peak(PMAlloc-LOG) / peak(PMAlloc-LOG-noSM), per workload");
    nm_bench_plot_spec(b, "[{\"title\":\"Fragbench peak memory\",\"x\":\"bench\",\"y\":\"peak_mib\",\"series\":\"allocator\",\"kind\":\"bar\"}]");
    double tput_log = 0, tput_nosm = 0;
    for (unsigned w = 1; w <= 4; w++) {
        double pk[PE_NKINDS + 1], mops[PE_NKINDS + 1];
        char name[8];
        snprintf(name, sizeof name, "W%u", w);
        /* k = PE_NKINDS: PMAlloc-LOG without slab morphing */
        for (int k = 0; k <= PE_NKINDS; k++) {
            pe_params p = {.work = PE_FRAG, .kind = k == PE_NKINDS ? PE_LOG : (pe_kind)k, .threads = 1, .n = phase_mib << 20, .iters = w,
                           .ops = live_mib << 20, .pool_size = (size_t)(live_mib * 4 + 64) << 20, .no_morph = k == PE_NKINDS};
            mops[k] = pe_measure(b, name, &p, reps, &pk[k]);
            if (isnan(mops[k])) return NM_EIO;
        }
        tput_log += log(mops[PE_LOG]);
        tput_nosm += log(mops[PE_NKINDS]);
        char key[64];
        snprintf(key, sizeof key, "frag_peak_mib_w%u_log", w);
        nm_bench_summary_num(b, key, pk[PE_LOG]);
        snprintf(key, sizeof key, "frag_peak_mib_w%u_log_nosm", w);
        nm_bench_summary_num(b, key, pk[PE_NKINDS]);
        snprintf(key, sizeof key, "frag_peak_mib_w%u_pmdk", w);
        nm_bench_summary_num(b, key, pk[PE_PMDK]);
        snprintf(key, sizeof key, "frag_reduction_w%u", w);
        nm_bench_summary_num(b, key, 1.0 - pk[PE_LOG] / pk[PE_NKINDS]);
        snprintf(key, sizeof key, "frag_saving_vs_pmdk_w%u", w);
        nm_bench_summary_num(b, key, 1.0 - pk[PE_LOG] / pk[PE_PMDK]);
        nm_bench_progress(b, "%s: peak %.1f MiB (LOG), %.1f MiB (LOG w/o morphing), %.1f MiB (GC), %.1f MiB (PMDK): morphing saves %.1f%%", name,
                          pk[PE_LOG], pk[PE_NKINDS], pk[PE_GC], pk[PE_PMDK], 100.0 * (1.0 - pk[PE_LOG] / pk[PE_NKINDS]));
    }
    /* the paper reports 4.5% lower throughput with morphing; one run per point here: noisy */
    nm_bench_summary_num(b, "frag_throughput_ratio_sm_vs_nosm", exp((tput_log - tput_nosm) / 4));
    return NM_OK;
}
