/* Suite pmalloc-crash: the long crash campaigns (see bench_pmalloc.c). */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <stdint.h>

#include "nearmem/bench.h"
#include "nearmem/common.h"
#include "pm_apps_crash.h"
#include "pm_crashlib.h"

void pm_bench_crash_campaign(nm_bench *b, const char *dir, unsigned points, uint64_t seed, bool add_rows,
                             uint64_t *tried_power, uint64_t *tried_proc, uint64_t *failures, uint64_t *rec, uint64_t *mt,
                             uint64_t *create_close);

int nm_suite_pmalloc_crash(nm_bench *b)
{
    bool quick = nm_bench_quick(b);
    const char *dir = nm_bench_tmpdir(b);
    unsigned points = (unsigned)nm_bench_param_num(b, "points", quick ? 150 : 1000);
    nm_bench_config_num(b, "points_per_kind_and_model", points);
    nm_bench_config_str(b, "heap", "4 MiB, 48 lists of up to 6 objects, 8% large (14-64 KiB)");
    nm_bench_config_str(b, "power_failure", "persisted image changed only by a thread's drain, with the content each line had when that "
                                            "thread flushed it; flushed-undrained lines of every thread torn at 8-byte granularity; crash "
                                            "points at allocator and workload flushes, inside create, close and recovery; kind "
                                            "power_failure_2threads: 2 workload threads plus a timer thread crashing at random moments");
    nm_bench_config_str(b, "process_crash", "fork + SIGKILL after 0.3-6.3 ms; every third crash recovered by the next child; "
                                            "half the points with 2 workload threads in the child");
    nm_bench_config_str(b, "log_churn", "extra power-failure runs (half the points) on 3 short lists of extents: "
                                        "bookkeeping-log fast and slow GCs under crashes");
    nm_bench_config_str(b, "morphing", "extra runs (power failure; process crash with 2 threads, half the points) with slab "
                                       "morphing forced (SU 100%, size classes shifting every 40 steps); half the flushes inside "
                                       "a morph become power-failure crash points (row column morph_crash_points)");
    nm_bench_config_str(b, "evictions", "half the power-failure points also persist 10% of the stored-but-unflushed lines");
    nm_bench_plot_spec(b, "[{\"title\":\"crash points tested\",\"x\":\"kind\",\"y\":\"crash_points\",\"series\":\"model\",\"kind\":\"bar\"}]");
    uint64_t tp = 0, tq = 0, fails = 0, rec = 0, mt = 0, cc = 0;
    bool apps_only = nm_bench_param_num(b, "apps_only", 0) != 0; /* only the applications' campaigns */
    if (!apps_only)
        pm_bench_crash_campaign(b, dir, points, nm_bench_seed(b), true, &tp, &tq, &fails, &rec, &mt, &cc);
    nm_bench_summary_num(b, "crash_points_tested", (double)(tp + tq));
    nm_bench_summary_num(b, "crash_points_power_failure", (double)tp);
    nm_bench_summary_num(b, "crash_points_process", (double)tq);
    nm_bench_summary_num(b, "crash_points_during_recovery", (double)rec);
    nm_bench_summary_num(b, "crash_points_multithreaded", (double)mt);
    nm_bench_summary_num(b, "crash_points_in_create_or_close", (double)cc);
    nm_bench_summary_num(b, "crash_failures", (double)fails);
    /* NUMA (Sec. 6): both kinds and models on heaps with virtual nodes whose workload threads hop
     * between nodes, so that frees are often two-phase remote frees (separate keys) */
    unsigned vn = (unsigned)nm_bench_param_num(b, "vnodes", 2);
    uint64_t nfail = 0, ntried = 0, between = 0, replays = 0, entries = 0;
    nm_bench_config_num(b, "numa_vnodes", vn);
    /* kind 2: power failure with virtual nodes and slab morphing forced (Sec. 5.2 x Sec. 6) */
    for (int kind = 0; vn > 1 && !apps_only && kind < 3; kind++)
        for (int m = 0; m < 2; m++) {
            pmc_run r;
            pmc_run_defaults(&r, (pmalloc_model)m, dir);
            r.points = (points + 1) / 2;
            r.vnodes = vn;
            r.threads = kind == 1 ? 2 : 1;
            r.seed = nm_bench_seed(b) * 13 + (uint64_t)(kind * 2 + m);
            if (kind == 2) {
                r.morph_su = 100;
                r.morph_target_pct = 50;
                r.cfg.large_pct = 5;
                r.cfg.size_phase = 40;
            }
            if (kind != 1) pmc_run_sim(&r);
            else pmc_run_proc(&r);
            const char *kn = kind == 0 ? "power_failure_vnodes" : kind == 1 ? "process_crash_vnodes_2threads" : "power_failure_vnodes_morphing";
            const char *mn = m ? "GC" : "LOG";
            nm_bench_progress(b, "%s %s: %llu crash points, %llu between the two phases, %llu recoveries replayed %llu log entries, "
                                 "%llu failures %s", kn, mn, (unsigned long long)r.tried, (unsigned long long)r.between_phases,
                              (unsigned long long)r.replay_points, (unsigned long long)r.replayed_entries, (unsigned long long)r.failures,
                              r.first_failure);
            nm_bench_row *row = nm_bench_row_new(b);
            nm_bench_row_str(row, "kind", kn);
            nm_bench_row_str(row, "model", mn);
            nm_bench_row_num(row, "crash_points", (double)r.tried);
            nm_bench_row_num(row, "crash_points_between_phases", (double)r.between_phases);
            nm_bench_row_num(row, "recoveries_replaying_logs", (double)r.replay_points);
            nm_bench_row_num(row, "recovery_crash_points", (double)r.recovery_tried);
            nm_bench_row_num(row, "failures", (double)r.failures);
            nm_bench_row_num(row, "morph_crash_points", (double)(r.morph_points[1] + r.morph_points[2] + r.morph_points[3]));
            if (r.first_failure[0]) nm_bench_row_str(row, "first_failure", r.first_failure);
            ntried += r.tried;
            nfail += r.failures;
            between += r.between_phases;
            replays += r.replay_points;
            entries += r.replayed_entries;
        }
    nm_bench_summary_num(b, "crash_points_numa", (double)ntried);
    nm_bench_summary_num(b, "crash_points_between_phases", (double)between);
    nm_bench_summary_num(b, "crash_recoveries_replaying_logs", (double)replays);
    nm_bench_summary_num(b, "crash_log_entries_replayed", (double)entries);
    nm_bench_summary_num(b, "crash_failures_numa", (double)nfail);
    /* The persistent applications (issue 19): FPTree and Vacation killed at random points on
     * every allocator; half the points with 1 workload thread, half with 2. */
    unsigned apoints = (unsigned)nm_bench_param_num(b, "app_points", quick ? 24 : 200);
    nm_bench_config_num(b, "app_points_per_app_and_allocator", apoints);
    nm_bench_config_str(b, "apps", "FPTree (2x128 keys per thread, 50% insert / 40% delete / 10% search) and Vacation "
                                   "(128 relations, STAMP's transaction mix) under process crashes (fork + SIGKILL, a quarter "
                                   "of the kills anywhere incl. recoveries, the rest 0.2-4.2 ms into the workload; every third "
                                   "crash recovered by the next child): structure checked; LOG, PMDK: allocated == reachable; GC: "
                                   "allocated == conservatively reachable right after its recovery");
    uint64_t atried = 0, afail = 0, agc = 0, arec = 0, aret = 0;
    const pa_crash_app *apps[] = {&pa_crash_fptree, &pa_crash_vacation};
    const char *only_app = nm_bench_param(b, "app", "all");
    int only_kind = (int)nm_bench_param_num(b, "app_kind", -1); /* 0 LOG, 1 GC, 2 PMDK */
    for (unsigned ai = 0; ai < 2; ai++)
        for (int k = 0; k < 3; k++) {
            if ((strcmp(only_app, "all") && strcmp(only_app, apps[ai]->name)) || (only_kind >= 0 && only_kind != k)) continue;
            pa_crash_run r;
            memset(&r, 0, sizeof r);
            r.app = apps[ai];
            r.kind = (pa_kind)k;
            r.universe = ai == 0 ? 256 : 128;
            r.pool = (size_t)32 << 20;
            r.tmpdir = dir;
            for (unsigned half = 0; half < 2; half++) {
                r.points = half ? apoints - apoints / 2 : apoints / 2;
                r.threads = half + 1;
                r.seed = nm_bench_seed(b) * 7919 + ai * 10 + (uint64_t)k * 2 + half;
                pa_crash_proc(&r);
            }
            char kn[64];
            snprintf(kn, sizeof kn, "app_%s_process_crash", apps[ai]->name);
            nm_bench_progress(b, "%s %s: %llu crash points, %llu checked, %llu objects freed / transactions undone by the "
                                 "application's recovery, %llu blocks collected by the GC recovery (%llu checks that it collected all), %llu kept by stale words "
                                 "(max), %llu failures %s",
                              kn, pa_kind_name(r.kind), (unsigned long long)r.tried, (unsigned long long)r.checked,
                              (unsigned long long)r.app_recovered, (unsigned long long)r.gc_freed, (unsigned long long)r.gc_checked,
                              (unsigned long long)r.gc_retained_max, (unsigned long long)r.failures,
                              r.first_failure);
            nm_bench_row *row = nm_bench_row_new(b);
            nm_bench_row_str(row, "kind", kn);
            nm_bench_row_str(row, "model", pa_kind_name(r.kind));
            nm_bench_row_num(row, "crash_points", (double)r.tried);
            nm_bench_row_num(row, "checked", (double)r.checked);
            nm_bench_row_num(row, "app_recovered", (double)r.app_recovered);
            nm_bench_row_num(row, "gc_collected", (double)r.gc_freed);
            nm_bench_row_num(row, "gc_checks_all_unreachable_collected", (double)r.gc_checked);
            nm_bench_row_num(row, "gc_stale_retained_max", (double)r.gc_retained_max);
            nm_bench_row_num(row, "failures", (double)r.failures);
            if (r.first_failure[0]) nm_bench_row_str(row, "first_failure", r.first_failure);
            atried += r.tried;
            afail += r.failures;
            agc += r.gc_freed;
            if (r.gc_retained_max > aret) aret = r.gc_retained_max;
            arec += r.app_recovered;
        }
    nm_bench_summary_num(b, "crash_points_apps", (double)atried);
    nm_bench_summary_num(b, "crash_apps_recovered_objects", (double)arec);
    nm_bench_summary_num(b, "crash_apps_gc_collected", (double)agc);
    nm_bench_summary_num(b, "crash_apps_gc_stale_retained_max", (double)aret);
    nm_bench_summary_num(b, "crash_failures_apps", (double)afail);
    return fails || nfail || afail ? NM_ECORRUPT : NM_OK;
}
