/* Suite pmalloc-recovery: Table 3. A child process builds a linked list of N
 * nodes of 64-128 B and exits without closing the heap (a process crash);
 * then fresh processes time the open, which for PMAlloc runs the post-crash
 * recovery (LOG: log replay + WAL; GC: plus the conservative mark) and for
 * PMDK is pmemobj_open plus the first allocation (PMDK rebuilds a zone's
 * free lists lazily, on first use). Each open also exits without closing, so
 * every repetition is again a post-crash open. */
#include <math.h>
#include <stdio.h>

#include "nearmem/pmalloc.h"

#include "nearmem/bench.h"
#include "nearmem/common.h"
#include "pm_eval.h"

int nm_suite_pmalloc_recovery(nm_bench *b)
{
    pe_force_pmem();
    bool quick = nm_bench_quick(b);
    uint64_t n = (uint64_t)nm_bench_param_num(b, "nodes", quick ? 200000 : 10000000);
    unsigned reps = (unsigned)nm_bench_param_num(b, "reps", 3);
    size_t pool = (size_t)((n * 240 + (64u << 20)) & ~(uint64_t)0xfffff); /* MiB multiple */
    nm_bench_config_num(b, "nodes", (double)n);
    nm_bench_config_num(b, "repetitions", reps);
    nm_bench_config_str(b, "note", "summary keys are named for 10M nodes (the paper's Table 3); --quick uses `nodes` (see config)");
    nm_bench_plot_spec(b, "[{\"title\":\"post-crash open\",\"x\":\"allocator\",\"y\":\"recovery_ms\",\"kind\":\"bar\"}]");
    const char *tmp = nm_bench_tmpdir(b);
    double med[3], replayed = 0, bound = 0;
    for (int k = 0; k < PE_NKINDS; k++) {
        pe_params p = {.work = PE_RECOVERY_BUILD, .kind = (pe_kind)k, .threads = 1, .n = n, .pool_size = pool,
                       .seed = nm_bench_seed(b)};
        snprintf(p.dir, sizeof p.dir, "%s/recovery-%d", tmp, k);
        pe_cleanup(p.dir);
        pe_result r;
        if (pe_run(&p, &r)) {
            nm_bench_progress(b, "%s build: FAILED: %s", pe_kind_name(p.kind), r.msg);
            pe_cleanup(p.dir);
            return NM_EIO;
        }
        double build_s = r.seconds, build_peak = r.peak_bytes;
        pmalloc_file_info fi;
        /* the checkpoint's bound on the replay (redo.c, "rings of thread caches"): at most
         * checkpoint_records / ring_records full rings unsettled, plus up to two rings per
         * thread (one here), and never more than all the rings */
        if (k == PE_LOG && pmalloc_inspect(p.dir, NULL, &fi) == NM_OK) {
            double R = fi.ring_records, cap = floor(PMALLOC_CHECKPOINT_RECORDS / R);
            bound = fmin((double)fi.redo_rings, (cap < 1 ? 1 : cap) + 1) * R;
        }
        double ms[16];
        if (reps > 16) reps = 16;
        p.work = PE_RECOVERY_OPEN;
        for (unsigned i = 0; i < reps; i++) {
            if (pe_run(&p, &r) || r.aux != (double)n) {
                nm_bench_progress(b, "%s recovery: FAILED (%s, %.0f of %llu nodes)", pe_kind_name(p.kind), r.msg, r.aux,
                                  (unsigned long long)n);
                pe_cleanup(p.dir);
                return NM_EIO;
            }
            ms[i] = r.seconds * 1e3;
            if (k == PE_LOG && i == 0) replayed = r.ops;
        }
        pe_cleanup(p.dir);
        med[k] = nm_stats_median(ms, reps);
        nm_bench_row *row = nm_bench_row_new(b);
        nm_bench_row_str(row, "allocator", pe_kind_name(p.kind));
        nm_bench_row_num(row, "nodes", (double)n);
        nm_bench_row_num(row, "recovery_ms", med[k]);
        nm_bench_row_num(row, "build_s", build_s);
        nm_bench_row_num(row, "peak_mib", build_peak / (1024.0 * 1024.0));
        nm_bench_row_num(row, "recovery_peak_mib", r.peak_bytes / (1024.0 * 1024.0));
        nm_bench_progress(b, "%-12s %llu nodes: built in %.2f s (peak %.0f MiB), post-crash open %.1f ms (median of %u)",
                          pe_kind_name(p.kind), (unsigned long long)n, build_s, build_peak / 1048576.0, med[k], reps);
    }
    nm_bench_summary_num(b, "recovery_ms_10m_log", med[PE_LOG]);
    /* LOG replays the records after the checkpoint bound: at most a thread's ring, whatever N */
    nm_bench_summary_num(b, "recovery_records_replayed_log", replayed);
    nm_bench_summary_num(b, "recovery_replay_bound_records_log", bound);
    nm_bench_summary_num(b, "recovery_ms_10m_gc", med[PE_GC]);
    nm_bench_summary_num(b, "recovery_ms_10m_pmdk", med[PE_PMDK]);
    return NM_OK;
}
