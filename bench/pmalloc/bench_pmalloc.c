/* Suites pmalloc-basic and pmalloc-crash.
 *
 * pmalloc-basic: threadtest-style alloc/free throughput (1 and 2 threads,
 * small 64 B and large 64 KiB), flushes / fences / reflushes per operation,
 * interleaved (6 bit stripes) vs sequential (1 stripe) metadata layout, LOG
 * and GC, plus a small crash campaign. The heap is a file on the host's file
 * system (no DAX here) persisted with CPU cache flushes (PMALLOC_PERSIST_CPU):
 * the flush and reflush COUNTS are exact properties of the allocator; the
 * throughputs are DRAM + clwb timings, not Optane timings, so only the ratios
 * within this run mean anything.
 *
 * pmalloc-crash: the long crash campaigns (power failure and process crash,
 * both models), >= 1000 crash points per kind in the full run. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nearmem/bench.h"
#include "nearmem/common.h"
#include "nearmem/pmalloc.h"
#include "pm_crashlib.h"

typedef struct tp_arg {
    pmalloc_heap *h;
    pmalloc_ptr *slots; /* persistent array of this thread's destinations */
    unsigned n, rounds;
    size_t size;
    int err;
    pthread_barrier_t *bar;
    uint64_t t0, t1; /* this worker's start and end */
} tp_arg;

static void *tp_worker(void *p)
{
    tp_arg *a = p;
    pthread_barrier_wait(a->bar);
    a->t0 = nm_now_ns();
    for (unsigned r = 0; r < a->rounds && !a->err; r++) {
        for (unsigned i = 0; i < a->n; i++)
            if (pmalloc_malloc_to(a->h, a->size, &a->slots[i])) { a->err = 1; break; }
        for (unsigned i = 0; i < a->n; i++)
            if (pmalloc_free_from(a->h, &a->slots[i])) { a->err = 1; break; }
    }
    a->t1 = nm_now_ns();
    return NULL;
}

typedef struct tp_result {
    double mops, flushes_per_op, meta_per_op, fences_per_op, reflush_pct;
} tp_result;

static int run_tp(nm_bench *b, const char *dir, pmalloc_model m, unsigned stripes, size_t size, unsigned threads,
                  unsigned n, unsigned rounds, tp_result *out)
{
    char hd[600];
    snprintf(hd, sizeof hd, "%s/tp", dir);
    mkdir(hd, 0700);
    char f[700];
    snprintf(f, sizeof f, "%s/%s", hd, PMALLOC_FILE_NAME);
    unlink(f);
    pmalloc_options o;
    pmalloc_options_default(&o);
    o.size = size > 16384 ? (size_t)512 << 20 : (size_t)128 << 20;
    o.model = m;
    o.stripes = stripes;
    o.persist = PMALLOC_PERSIST_CPU;
    o.eadr = PMALLOC_EADR_OFF;
    pmalloc_heap *h;
    if (pmalloc_open(hd, &o, &h)) {
        nm_bench_progress(b, "open failed: %s", nm_last_errmsg());
        return 1;
    }
    tp_arg a[8];
    pthread_t t[8];
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, threads + 1);
    for (unsigned i = 0; i < threads; i++) {
        /* destinations live in the heap, as malloc_to requires */
        if (pmalloc_malloc_to(h, (size_t)n * sizeof(pmalloc_ptr), pmalloc_root_slot(h, i))) return 1;
        a[i] = (tp_arg){h, pmalloc_direct(h, pmalloc_get_root(h, i)), n, rounds, size, 0, &bar, 0, 0};
        memset(a[i].slots, 0, (size_t)n * sizeof(pmalloc_ptr));
    }
    pmalloc_stats_reset_counters(h);
    for (unsigned i = 0; i < threads; i++) pthread_create(&t[i], NULL, tp_worker, &a[i]);
    pthread_barrier_wait(&bar);
    int err = 0;
    /* Timed by the workers, first start to last end: the main thread may be
     * descheduled after the barrier while the workers run (2 cores), and a
     * clock read there gave impossible rates (10^4 Mops/s) for short runs. */
    uint64_t t0 = UINT64_MAX, t1 = 0;
    for (unsigned i = 0; i < threads; i++) {
        pthread_join(t[i], NULL);
        err |= a[i].err;
        if (a[i].t0 < t0) t0 = a[i].t0;
        if (a[i].t1 > t1) t1 = a[i].t1;
    }
    uint64_t ns = t1 > t0 ? t1 - t0 : 1;
    pthread_barrier_destroy(&bar);
    pmalloc_stats st;
    pmalloc_stats_get(h, &st);
    double ops = 2.0 * threads * n * rounds;
    out->mops = ops / ((double)ns / 1e3);
    out->flushes_per_op = st.flushes / ops;
    out->meta_per_op = st.meta_flushes / ops;
    out->fences_per_op = st.fences / ops;
    out->reflush_pct = st.meta_flushes ? 100.0 * st.reflushes / st.meta_flushes : 0;
    pmalloc_close(h);
    unlink(f);
    rmdir(hd);
    if (err) nm_bench_progress(b, "workload error: %s", nm_last_errmsg());
    return err;
}

/* A fresh heap in dir/sub (hd, its file f) holding, at root 0, an array of n
 * persistent slots set to null. On error the heap is not left open. */
static int open_slot_heap(const char *dir, const char *sub, pmalloc_options *o, unsigned n, pmalloc_heap **h,
                          pmalloc_ptr **slots, char hd[600], char f[700])
{
    snprintf(hd, 600, "%s/%s", dir, sub);
    mkdir(hd, 0700);
    snprintf(f, 700, "%s/%s", hd, PMALLOC_FILE_NAME);
    unlink(f);
    o->persist = PMALLOC_PERSIST_CPU;
    o->eadr = PMALLOC_EADR_OFF;
    if (pmalloc_open(hd, o, h)) return 1;
    if (pmalloc_malloc_to(*h, (size_t)n * sizeof(pmalloc_ptr), pmalloc_root_slot(*h, 0))) {
        pmalloc_close(*h);
        return 1;
    }
    *slots = pmalloc_direct(*h, pmalloc_get_root(*h, 0));
    memset(*slots, 0, (size_t)n * sizeof **slots);
    return 0;
}

static void remove_heap(const char *hd, const char *f)
{
    unlink(f);
    rmdir(hd);
}

/* Metadata flushes and fences of small mallocs alone (LOG). */
static int small_malloc_cost(const char *dir, unsigned stripes, double *meta, double *fences, double *reflush)
{
    char hd[600], f[700];
    pmalloc_options o;
    pmalloc_options_default(&o);
    o.size = 64u << 20;
    o.stripes = stripes;
    pmalloc_heap *h;
    pmalloc_ptr *slots;
    unsigned n = 20000;
    if (open_slot_heap(dir, "cost", &o, n, &h, &slots, hd, f)) return 1;
    pmalloc_stats_reset_counters(h);
    for (unsigned i = 0; i < n; i++)
        if (pmalloc_malloc_to(h, 64, &slots[i])) return 1;
    pmalloc_stats st;
    pmalloc_stats_get(h, &st);
    *meta = (double)st.meta_flushes / n;
    *fences = (double)st.fences / n;
    *reflush = 100.0 * st.reflushes / (double)st.meta_flushes;
    pmalloc_close(h);
    remove_heap(hd, f);
    return 0;
}

/* Reopen time after a clean close and after a crash (pmalloc_abandon) for a
 * heap holding `n` small objects in one persistent array of pointers. */
static int recovery_time(const char *dir, pmalloc_model m, unsigned n, double *clean_ms, double *crash_ms)
{
    char hd[600], f[700];
    pmalloc_options o;
    pmalloc_options_default(&o);
    o.size = 256u << 20;
    o.model = m;
    pmalloc_heap *h;
    pmalloc_ptr *slots;
    if (open_slot_heap(dir, "rec", &o, n, &h, &slots, hd, f)) return 1;
    for (unsigned i = 0; i < n; i++)
        if (pmalloc_malloc_to(h, 32 + (i % 8) * 32, &slots[i])) return 1;
    pmalloc_close(h);
    o.create = false;
    uint64_t t0 = nm_now_ns();
    if (pmalloc_open(hd, &o, &h)) return 1;
    *clean_ms = (double)(nm_now_ns() - t0) / 1e6;
    pmalloc_abandon(h); /* a crash: the next open runs the post-crash recovery */
    t0 = nm_now_ns();
    if (pmalloc_open(hd, &o, &h)) return 1;
    *crash_ms = (double)(nm_now_ns() - t0) / 1e6;
    pmalloc_stats st;
    pmalloc_stats_get(h, &st);
    int bad = st.objects_live != (uint64_t)n + 1;
    pmalloc_close(h);
    remove_heap(hd, f);
    return bad;
}

/* Crash campaigns of both kinds and both models (shared with pmalloc-crash). */
void pm_bench_crash_campaign(nm_bench *b, const char *dir, unsigned points, uint64_t seed, bool add_rows,
                           uint64_t *tried_power, uint64_t *tried_proc, uint64_t *failures, uint64_t *rec, uint64_t *mt,
                           uint64_t *create_close)
{
    /* kind 0: power failure; 1 and 2: process crash with 1 and 2 workload threads (half the points each);
     * 3: power failure under extent churn on 3 short lists, which runs the log's fast and slow GCs;
     * 4, 5: power failure and process crash (2 threads) with slab morphing forced often (SU 100%,
     * size classes shifting every 40 steps; half the flushes inside a morph are crash points);
     * 6: power failure with 2 workload threads and a timer thread crashing at random moments */
    for (int kind = 0; kind < 7; kind++)
        for (int m = 0; m < 2; m++) {
            pmc_run r;
            pmc_run_defaults(&r, (pmalloc_model)m, dir);
            r.points = kind == 0 ? points : (points + 1) / 2;
            r.threads = kind == 2 ? 2 : 1;
            if (kind == 3) {
                r.cfg.large_pct = 100;
                r.cfg.large_max = 20000;
                r.cfg.list_n = 3;
                r.round_steps = 20000;
                r.gap = 25;
            }
            if (kind >= 4) {
                r.morph_su = 100;
                r.morph_target_pct = 50;
                r.cfg.large_pct = 5;
                r.cfg.size_phase = 40;
                r.threads = kind == 5 ? 2 : 1;
            }
            if (kind == 6) {
                r.threads = 2;
                r.crasher = true;
            }
            r.seed = seed * 7 + (uint64_t)(kind * 2 + m);
            uint64_t t0 = nm_now_ns();
            bool sim = kind == 0 || kind == 3 || kind == 4 || kind == 6;
            if (sim) pmc_run_sim(&r);
            else pmc_run_proc(&r);
            double s = (double)(nm_now_ns() - t0) / 1e9;
            static const char *const kns[] = {"power_failure", "process_crash", "process_crash_2threads", "power_failure_log_churn",
                                              "power_failure_morphing", "process_crash_morphing_2threads", "power_failure_2threads"};
            const char *kn = kns[kind];
            uint64_t in_morph = r.morph_points[1] + r.morph_points[2] + r.morph_points[3];
            const char *mn = m == PMALLOC_LOG ? "LOG" : "GC";
            nm_bench_progress(b, "%s %s: %llu crash points (%llu inside recovery, %llu inside a slab morph), %llu failures %s", kn, mn,
                              (unsigned long long)r.tried, (unsigned long long)r.recovery_tried, (unsigned long long)in_morph,
                              (unsigned long long)r.failures, r.first_failure);
            if (add_rows) {
                nm_bench_row *row = nm_bench_row_new(b);
                nm_bench_row_str(row, "kind", kn);
                nm_bench_row_str(row, "model", mn);
                nm_bench_row_num(row, "crash_points", (double)r.tried);
                nm_bench_row_num(row, "recovery_crash_points", (double)r.recovery_tried);
                nm_bench_row_num(row, "failures", (double)r.failures);
                nm_bench_row_num(row, "log_gcs_under_crash", (double)r.log_gcs);
                nm_bench_row_num(row, "morph_crash_points", (double)in_morph);
                nm_bench_row_num(row, "morphs_under_crash", (double)r.morphs);
                nm_bench_row_num(row, "crash_points_multithreaded", (double)r.mt_points);
                nm_bench_row_num(row, "crash_points_random_moment", (double)r.timer_points);
                nm_bench_row_num(row, "crash_points_workload_flush", (double)r.user_flush_points);
                nm_bench_row_num(row, "crash_points_in_create", (double)r.create_points);
                nm_bench_row_num(row, "crash_points_in_close", (double)(r.close_points + r.kills_in_close));
                nm_bench_row_num(row, "kills_in_open", (double)r.kills_in_open);
                nm_bench_row_num(row, "seconds", s);
                if (r.first_failure[0]) nm_bench_row_str(row, "first_failure", r.first_failure);
            }
            if (sim) *tried_power += r.tried;
            else *tried_proc += r.tried;
            *failures += r.failures;
            *rec += r.recovery_tried;
            *mt += r.mt_points;
            *create_close += r.create_points + r.close_points + r.kills_in_close;
        }
}

int nm_suite_pmalloc_basic(nm_bench *b)
{
    bool quick = nm_bench_quick(b);
    const char *dir = nm_bench_tmpdir(b);
    unsigned n_small = quick ? 20000 : 100000, n_large = quick ? 500 : 2000;
    unsigned rounds = (unsigned)nm_bench_param_num(b, "rounds", quick ? 2 : 5);
    unsigned reps = quick ? 1 : 3;
    nm_bench_config_str(b, "persistence", "PMALLOC_PERSIST_CPU on a page-cache file (no DAX): counts exact, times are DRAM+clwb");
    nm_bench_config_num(b, "small_size", 64);
    nm_bench_config_num(b, "large_size", 65536);
    nm_bench_config_num(b, "small_objects_per_thread", n_small);
    nm_bench_config_num(b, "large_objects_per_thread", n_large);
    nm_bench_config_num(b, "rounds", rounds);
    nm_bench_config_num(b, "repetitions", reps);
    nm_bench_plot_spec(b, "[{\"title\":\"alloc+free throughput (64 B)\",\"x\":\"threads\",\"y\":\"mops\",\"series\":\"variant\","
                          "\"kind\":\"bar\",\"filter\":{\"size\":64}},"
                          "{\"title\":\"metadata reflush % (64 B)\",\"x\":\"threads\",\"y\":\"reflush_pct\",\"series\":\"variant\","
                          "\"kind\":\"bar\",\"filter\":{\"size\":64}}]");
    const pmalloc_model models[] = {PMALLOC_LOG, PMALLOC_GC};
    const unsigned stripes[] = {6, 1};
    const size_t sizes[] = {64, 65536};
    double mops_log_int = 0, mops_log_seq = 0;
    for (unsigned mi = 0; mi < 2; mi++)
        for (unsigned si = 0; si < 2; si++)
            for (unsigned zi = 0; zi < 2; zi++)
                for (unsigned th = 1; th <= 2; th++) {
                    double v[5] = {0};
                    tp_result rs[3];
                    for (unsigned rep = 0; rep < reps; rep++)
                        if (run_tp(b, dir, models[mi], stripes[si], sizes[zi], th, zi ? n_large : n_small, rounds, &rs[rep]))
                            return NM_EIO;
                    double mv[3];
                    for (unsigned rep = 0; rep < reps; rep++) mv[rep] = rs[rep].mops;
                    v[0] = nm_stats_median(mv, reps);
                    v[1] = rs[0].flushes_per_op;
                    v[2] = rs[0].meta_per_op;
                    v[3] = rs[0].fences_per_op;
                    v[4] = rs[0].reflush_pct;
                    char variant[64];
                    snprintf(variant, sizeof variant, "%s-%s", mi ? "GC" : "LOG", si ? "sequential" : "interleaved");
                    nm_bench_row *row = nm_bench_row_new(b);
                    nm_bench_row_str(row, "variant", variant);
                    nm_bench_row_str(row, "model", mi ? "GC" : "LOG");
                    nm_bench_row_num(row, "stripes", stripes[si]);
                    nm_bench_row_num(row, "size", (double)sizes[zi]);
                    nm_bench_row_num(row, "threads", th);
                    nm_bench_row_num(row, "mops", v[0]);
                    nm_bench_row_num(row, "flushes_per_op", v[1]);
                    nm_bench_row_num(row, "meta_flushes_per_op", v[2]);
                    nm_bench_row_num(row, "fences_per_op", v[3]);
                    nm_bench_row_num(row, "reflush_pct", v[4]);
                    nm_bench_progress(b, "%-16s size %6zu threads %u: %.3f Mops/s, %.2f flushes/op (%.2f metadata), %.2f fences/op, reflush %.1f%%",
                                      variant, sizes[zi], th, v[0], v[1], v[2], v[3], v[4]);
                    if (mi == 0 && zi == 0 && th == 1) *(si ? &mops_log_seq : &mops_log_int) = v[0];
                }
    double meta_i, fen_i, rf_i, meta_s, fen_s, rf_s;
    if (small_malloc_cost(dir, 6, &meta_i, &fen_i, &rf_i) || small_malloc_cost(dir, 1, &meta_s, &fen_s, &rf_s)) return NM_EIO;
    nm_bench_summary_num(b, "reflush_pct_interleaved", rf_i);
    nm_bench_summary_num(b, "reflush_pct_sequential", rf_s);
    nm_bench_summary_num(b, "flushes_per_small_malloc", meta_i);
    nm_bench_summary_num(b, "fences_per_small_malloc", fen_i);
    nm_bench_summary_num(b, "speedup_interleaved_vs_sequential_log_small", mops_log_seq > 0 ? mops_log_int / mops_log_seq : 0);
    unsigned nrec = quick ? 50000 : 500000;
    for (int m = 0; m < 2; m++) {
        double clean_ms, crash_ms;
        if (recovery_time(dir, (pmalloc_model)m, nrec, &clean_ms, &crash_ms)) return NM_EIO;
        nm_bench_progress(b, "%s: reopen of %u objects: %.1f ms clean, %.1f ms after a crash", m ? "GC" : "LOG", nrec, clean_ms, crash_ms);
        nm_bench_summary_num(b, m ? "recovery_ms_gc" : "recovery_ms_log", crash_ms);
        nm_bench_summary_num(b, m ? "reopen_clean_ms_gc" : "reopen_clean_ms_log", clean_ms);
    }
    nm_bench_config_num(b, "recovery_objects", nrec);
    uint64_t tp = 0, tq = 0, fails = 0, rec = 0;
    uint64_t mt = 0, cc = 0;
    pm_bench_crash_campaign(b, dir, quick ? 130 : 250, nm_bench_seed(b), false, &tp, &tq, &fails, &rec, &mt, &cc);
    nm_bench_summary_num(b, "crash_points_tested", (double)(tp + tq));
    nm_bench_summary_num(b, "crash_failures", (double)fails);
    return NM_OK;
}

