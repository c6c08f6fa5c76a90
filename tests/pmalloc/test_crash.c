/* PMAlloc crash tests (small sizes; the pmalloc-crash suite runs thousands). */
#include "nm_test.h"

#include <stdio.h>
#include "pm_crashlib.h"
#include "pm_testutil.h"

static void run_t(pmalloc_model m, bool sim, unsigned points, unsigned threads)
{
    char dir[256];
    pmt_tmpdir(dir, sizeof dir, sim ? "sim" : "proc");
    pmc_run r;
    pmc_run_defaults(&r, m, dir);
    r.points = points;
    r.threads = threads;
    r.seed = nm_test_seed(sim ? 21 : 22) + m;
    r.crasher = sim && threads > 1;
    int rc = sim ? pmc_run_sim(&r) : pmc_run_proc(&r);
    if (sim)
        print_message("power-failure%s %s: %llu crash points (%llu during recovery, %llu with 2 threads running, %llu at random moments, "
                      "%llu at workload flushes, %llu in create, %llu in close; %llu log GCs, %llu checkpoints), %llu failures %s\n",
                      threads > 1 ? " (2 threads)" : "", m == PMALLOC_LOG ? "LOG" : "GC", (unsigned long long)r.tried,
                      (unsigned long long)r.recovery_tried, (unsigned long long)r.mt_points, (unsigned long long)r.timer_points,
                      (unsigned long long)r.user_flush_points, (unsigned long long)r.create_points, (unsigned long long)r.close_points,
                      (unsigned long long)r.log_gcs, (unsigned long long)r.checkpoints, (unsigned long long)r.failures, r.first_failure);
    else
        print_message("process%s %s: %llu kills (%llu in close, %llu in open or recovery), %llu failures %s\n", threads > 1 ? " (2 threads)" : "",
                      m == PMALLOC_LOG ? "LOG" : "GC", (unsigned long long)r.tried, (unsigned long long)r.kills_in_close,
                      (unsigned long long)r.kills_in_open, (unsigned long long)r.failures, r.first_failure);
    assert_int_equal(rc, 0);
    assert_int_equal(r.failures, 0);
    assert_true(r.tried >= points);
    if (sim) assert_true(r.create_points > 0 && r.close_points > 0 && r.user_flush_points > 0);
    if (sim && threads > 1) assert_true(r.mt_points > 0 && r.timer_points > 0);
    if (!sim && threads == 1) assert_true(r.kills_in_close + r.kills_in_open > 0);
    rmdir(dir);
}

static void run(pmalloc_model m, bool sim, unsigned points) { run_t(m, sim, points, 1); }

static void test_sim_log(void **s) { (void)s; run(PMALLOC_LOG, true, 150); }
static void test_sim_gc(void **s) { (void)s; run(PMALLOC_GC, true, 150); }
static void test_proc_log(void **s) { (void)s; run(PMALLOC_LOG, false, 60); }
static void test_proc_gc(void **s) { (void)s; run(PMALLOC_GC, false, 60); }
/* Extent churn on 3 short lists: the bookkeeping log's fast and slow GCs run
 * (and are crashed) many times. */
static void test_sim_loggc(void **st)
{
    (void)st;
    char dir[256];
    pmt_tmpdir(dir, sizeof dir, "loggc");
    pmc_run r;
    pmc_run_defaults(&r, PMALLOC_LOG, dir);
    r.points = 200;
    r.gap = 25;
    r.seed = nm_test_seed(23);
    r.cfg.large_pct = 100;
    r.cfg.large_max = 20000;
    r.cfg.list_lo = 0;
    r.cfg.list_n = 3;
    r.round_steps = 20000; /* long-lived heaps: the log fills and its GCs run */
    int rc = pmc_run_sim(&r);
    print_message("log GC under power failure: %llu crash points, %llu log GCs, %llu failures %s\n", (unsigned long long)r.tried,
                  (unsigned long long)r.log_gcs, (unsigned long long)r.failures, r.first_failure);
    assert_int_equal(rc, 0);
    assert_true(r.log_gcs >= 2);
    rmdir(dir);
}

/* Slab morphing under crashes (Sec. 5.2): SU = 100% and size classes that
 * shift every 40 steps make morphs frequent; under power failure, half the
 * flushes inside a morph are crash points, so every step is hit. */
static void morph_run(pmalloc_model m, bool sim, unsigned points, unsigned threads, unsigned vnodes)
{
    char dir[256];
    pmt_tmpdir(dir, sizeof dir, sim ? "msim" : "mproc");
    pmc_run r;
    pmc_run_defaults(&r, m, dir);
    r.points = points;
    r.threads = threads;
    r.seed = nm_test_seed(sim ? 24 : 25) + m;
    r.morph_su = 100;
    r.morph_target_pct = 50;
    r.cfg.large_pct = 5;
    r.cfg.size_phase = 40;
    r.vnodes = vnodes; /* > 1: remote frees go two-phase, interleaved with morphs */
    int rc = sim ? pmc_run_sim(&r) : pmc_run_proc(&r);
    if (sim)
        print_message("morphing, power failure %s, %u node(s): %llu crash points (%llu during recovery), %llu morphs, crash points inside a morph: "
                      "%llu at step 1 (new bitmap), %llu at step 2 (image), %llu at step 3 (commit); %llu failures %s\n",
                      m == PMALLOC_LOG ? "LOG" : "GC", vnodes ? vnodes : 1, (unsigned long long)r.tried, (unsigned long long)r.recovery_tried,
                      (unsigned long long)r.morphs, (unsigned long long)r.morph_points[1], (unsigned long long)r.morph_points[2],
                      (unsigned long long)r.morph_points[3], (unsigned long long)r.failures, r.first_failure);
    else /* where a kill lands is not observable; the workload is the one that morphs above */
        print_message("morphing, process kill%s %s, %u node(s): %llu kills, %llu failures %s\n", threads > 1 ? " (2 threads)" : "",
                      m == PMALLOC_LOG ? "LOG" : "GC", vnodes ? vnodes : 1, (unsigned long long)r.tried, (unsigned long long)r.failures, r.first_failure);
    assert_int_equal(rc, 0);
    assert_int_equal(r.failures, 0);
    assert_true(r.tried >= points);
    if (sim) {
        assert_true(r.morphs > 0);
        for (int k = 1; k <= 3; k++) assert_true(r.morph_points[k] > 0);
    }
    rmdir(dir);
}

static void test_sim_morph_log(void **s) { (void)s; morph_run(PMALLOC_LOG, true, 160, 1, 0); }
static void test_sim_morph_gc(void **s) { (void)s; morph_run(PMALLOC_GC, true, 160, 1, 0); }
static void test_proc_morph_log(void **s) { (void)s; morph_run(PMALLOC_LOG, false, 30, 2, 0); }
static void test_proc_morph_gc(void **s) { (void)s; morph_run(PMALLOC_GC, false, 24, 1, 0); }
/* morphing with 2 virtual nodes: two-phase remote frees pending while slabs morph */
static void test_sim_morph_numa_log(void **s) { (void)s; morph_run(PMALLOC_LOG, true, 100, 1, 2); }
static void test_sim_morph_numa_gc(void **s) { (void)s; morph_run(PMALLOC_GC, true, 100, 1, 2); }
static void test_proc_morph_numa_log(void **s) { (void)s; morph_run(PMALLOC_LOG, false, 24, 2, 2); }

static void test_proc_log_mt(void **s) { (void)s; run_t(PMALLOC_LOG, false, 60, 2); }
/* Power failure with 2 workload threads (crash points land anywhere in the
 * other thread's operations) and a timer thread crashing at random moments. */
static void test_sim_log_mt(void **s) { (void)s; run_t(PMALLOC_LOG, true, 150, 2); }
static void test_sim_gc_mt(void **s) { (void)s; run_t(PMALLOC_GC, true, 150, 2); }

/* NUMA (Sec. 6): virtual nodes, the workload hops between them, so frees are
 * often two-phase remote frees; crashes land between the two phases and the
 * recoveries replay the deallocation logs. */
static void run_numa_chunks(pmalloc_model m, bool sim, unsigned vnodes, unsigned points, unsigned threads, unsigned chunks)
{
    char dir[256];
    pmt_tmpdir(dir, sizeof dir, sim ? "nsim" : "nproc");
    pmc_run r;
    pmc_run_defaults(&r, m, dir);
    r.points = points;
    r.threads = threads;
    r.vnodes = vnodes;
    if (chunks) r.log_chunks = chunks;
    r.seed = nm_test_seed(sim ? 24 : 25) + m + vnodes + chunks;
    int rc = sim ? pmc_run_sim(&r) : pmc_run_proc(&r);
    print_message("%s %s, %u nodes: %llu crash points, %llu between the two phases, %llu recoveries replayed %llu log entries, %llu failures %s\n",
                  sim ? "power-failure" : "process", m == PMALLOC_LOG ? "LOG" : "GC", vnodes, (unsigned long long)r.tried,
                  (unsigned long long)r.between_phases, (unsigned long long)r.replay_points, (unsigned long long)r.replayed_entries,
                  (unsigned long long)r.failures, r.first_failure);
    assert_int_equal(rc, 0);
    assert_int_equal(r.failures, 0);
    assert_true(r.tried >= points);
    if (sim) assert_true(r.between_phases > 0);
    if (sim && m == PMALLOC_LOG) assert_true(r.replay_points > 0);
    rmdir(dir);
}
static void run_numa(pmalloc_model m, bool sim, unsigned vnodes, unsigned points, unsigned threads)
{
    run_numa_chunks(m, sim, vnodes, points, threads, 0);
}
static void test_numa_sim_log(void **s) { (void)s; run_numa(PMALLOC_LOG, true, 2, 120, 1); }
/* A log of 64 chunks has 2 append lanes (large.c): the arenas of the two
 * nodes append into chunks of their own, and the log GCs run across them. */
static void test_lanes_sim_log(void **s) { (void)s; run_numa_chunks(PMALLOC_LOG, true, 2, 120, 1, 64); }
static void test_lanes_proc_log(void **s) { (void)s; run_numa_chunks(PMALLOC_LOG, false, 2, 40, 2, 64); }
static void test_numa_sim_gc(void **s) { (void)s; run_numa(PMALLOC_GC, true, 4, 60, 1); }
static void test_numa_proc_log(void **s) { (void)s; run_numa(PMALLOC_LOG, false, 3, 40, 2); }
static void test_numa_proc_gc(void **s) { (void)s; run_numa(PMALLOC_GC, false, 2, 30, 2); }
static void test_proc_gc_mt(void **s) { (void)s; run_t(PMALLOC_GC, false, 40, 2); }

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sim_log),
        cmocka_unit_test(test_sim_gc),
        cmocka_unit_test(test_proc_log),
        cmocka_unit_test(test_proc_gc),
        cmocka_unit_test(test_sim_loggc),
        cmocka_unit_test(test_proc_log_mt),
        cmocka_unit_test(test_sim_log_mt),
        cmocka_unit_test(test_sim_gc_mt),
        cmocka_unit_test(test_numa_sim_log),
        cmocka_unit_test(test_lanes_sim_log),
        cmocka_unit_test(test_lanes_proc_log),
        cmocka_unit_test(test_numa_sim_gc),
        cmocka_unit_test(test_numa_proc_log),
        cmocka_unit_test(test_numa_proc_gc),
        cmocka_unit_test(test_proc_gc_mt),
        cmocka_unit_test(test_sim_morph_log),
        cmocka_unit_test(test_sim_morph_gc),
        cmocka_unit_test(test_proc_morph_log),
        cmocka_unit_test(test_proc_morph_gc),
        cmocka_unit_test(test_sim_morph_numa_log),
        cmocka_unit_test(test_sim_morph_numa_gc),
        cmocka_unit_test(test_proc_morph_numa_log),
    };
    const char *only = getenv("PMT_ONLY"); /* one test (cmocka filter), e.g. when replaying a seed */
    if (only && *only) cmocka_set_test_filter(only);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
