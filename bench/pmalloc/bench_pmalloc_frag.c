/* Suite pmalloc-frag: Fragbench W1-W4 (paper Sec. 3, Table 1; Meta's memcached
 * traces via RAMCloud): peak memory of PMAlloc-LOG, PMAlloc-GC and PMDK.
 * Peak memory is the measuring process's peak RSS growth: pool pages touched
 * (a page once used stays resident) plus the allocator's DRAM.
 *
 * Slab morphing (Sec. 5.2) is NOT implemented yet, so this suite measures the
 * "PMAlloc w/o SM" bars of Fig. 27(a) against PMDK; the frag_reduction_*
 * keys (with vs without morphing) are left to the session that adds it. */
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
    nm_bench_config_str(b, "slab_morphing", "not implemented: PMAlloc figures are 'w/o SM'");
    nm_bench_plot_spec(b, "[{\"title\":\"Fragbench peak memory\",\"x\":\"bench\",\"y\":\"peak_mib\",\"series\":\"allocator\",\"kind\":\"bar\"}]");
    for (unsigned w = 1; w <= 4; w++) {
        double pk[3];
        char name[8];
        snprintf(name, sizeof name, "W%u", w);
        for (int k = 0; k < PE_NKINDS; k++) {
            pe_params p = {.work = PE_FRAG, .kind = (pe_kind)k, .threads = 1, .n = phase_mib << 20, .iters = w,
                           .ops = live_mib << 20, .pool_size = (size_t)(live_mib * 4 + 64) << 20};
            if (isnan(pe_measure(b, name, &p, reps, &pk[k]))) return NM_EIO;
        }
        char key[64];
        snprintf(key, sizeof key, "frag_peak_mib_w%u_log", w);
        nm_bench_summary_num(b, key, pk[PE_LOG]);
        snprintf(key, sizeof key, "frag_peak_mib_w%u_pmdk", w);
        nm_bench_summary_num(b, key, pk[PE_PMDK]);
        snprintf(key, sizeof key, "frag_saving_vs_pmdk_w%u", w);
        nm_bench_summary_num(b, key, 1.0 - pk[PE_LOG] / pk[PE_PMDK]);
        nm_bench_progress(b, "%s: peak %.1f MiB (LOG), %.1f MiB (GC), %.1f MiB (PMDK)", name, pk[PE_LOG], pk[PE_GC], pk[PE_PMDK]);
    }
    return NM_OK;
}
