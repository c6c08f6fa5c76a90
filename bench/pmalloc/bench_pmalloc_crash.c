/* Suite pmalloc-crash: the long crash campaigns (see bench_pmalloc.c). */
#include <stdbool.h>
#include <stdint.h>

#include "nearmem/bench.h"
#include "nearmem/common.h"

void pm_bench_crash_campaign(nm_bench *b, const char *dir, unsigned points, uint64_t seed, bool add_rows,
                             uint64_t *tried_power, uint64_t *tried_proc, uint64_t *failures, uint64_t *rec);

int nm_suite_pmalloc_crash(nm_bench *b)
{
    bool quick = nm_bench_quick(b);
    const char *dir = nm_bench_tmpdir(b);
    unsigned points = (unsigned)nm_bench_param_num(b, "points", quick ? 150 : 1000);
    nm_bench_config_num(b, "points_per_kind_and_model", points);
    nm_bench_config_str(b, "heap", "4 MiB, 48 lists of up to 6 objects, 8% large (14-64 KiB)");
    nm_bench_config_str(b, "power_failure", "persisted image updated only at flush+drain; flushed-undrained lines land at random");
    nm_bench_config_str(b, "process_crash", "fork + SIGKILL after 0.3-6.3 ms; every third crash recovered by the next child; "
                                            "half the points with 2 workload threads in the child");
    nm_bench_config_str(b, "log_churn", "extra power-failure runs (half the points) on 3 short lists of extents: "
                                        "bookkeeping-log fast and slow GCs under crashes");
    nm_bench_config_str(b, "morphing", "extra runs (power failure; process crash with 2 threads, half the points) with slab "
                                       "morphing forced (SU 100%, size classes shifting every 40 steps); half the flushes inside "
                                       "a morph become power-failure crash points (row column morph_crash_points)");
    nm_bench_config_str(b, "evictions", "half the power-failure points also persist 10% of the stored-but-unflushed lines");
    nm_bench_plot_spec(b, "[{\"title\":\"crash points tested\",\"x\":\"kind\",\"y\":\"crash_points\",\"series\":\"model\",\"kind\":\"bar\"}]");
    uint64_t tp = 0, tq = 0, fails = 0, rec = 0;
    pm_bench_crash_campaign(b, dir, points, nm_bench_seed(b), true, &tp, &tq, &fails, &rec);
    nm_bench_summary_num(b, "crash_points_tested", (double)(tp + tq));
    nm_bench_summary_num(b, "crash_points_power_failure", (double)tp);
    nm_bench_summary_num(b, "crash_points_process", (double)tq);
    nm_bench_summary_num(b, "crash_points_during_recovery", (double)rec);
    nm_bench_summary_num(b, "crash_failures", (double)fails);
    return fails ? NM_ECORRUPT : NM_OK;
}
