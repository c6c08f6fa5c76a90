/* Suite pmalloc-numa: the cost of the NUMA mechanism (paper Sec. 6) on this
 * one-socket host, with virtual nodes. Producer-consumer (Sec. 8.4: producer
 * on one node, consumer on the other, so every free is remote): the producer
 * allocates 64 B objects into a ring of 1024 root slots and writes their first
 * line, the consumer frees them. Heaps with 2 virtual nodes (two-phase remote
 * frees) against 1 node (part 1: direct remote frees, the paper's PMAllocNN),
 * both models, threads pinned to the two CPUs in both configurations, same
 * process, alternating repetitions, medians; threadtest (all frees local) as
 * the control for the NUMA logic's overhead. On one socket there is no remote
 * memory: this measures the mechanism's overhead or gain (logging, batching,
 * lock traffic), not the NUMA benefit of Fig. 29. Measured, nothing modeled. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nearmem/bench.h"
#include "nearmem/common.h"
#include "nearmem/pmalloc.h"

#define RING 1024u

typedef struct pc {
    pmalloc_heap *h;
    uint64_t n;
    int full[RING]; /* atomic */
    int cpu[2];
    int node[2];
    int err;
} pc;

static void pin(int cpu)
{
    if (cpu < 0) return;
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    sched_setaffinity(0, sizeof s, &s);
}

static void *producer(void *a)
{
    pc *p = a;
    pin(p->cpu[0]);
    if (pmalloc_numa_set_node(p->h, p->node[0])) p->err = 1;
    for (uint64_t i = 0; i < p->n; i++) {
        unsigned k = (unsigned)(i % RING);
        while (__atomic_load_n(&p->full[k], __ATOMIC_ACQUIRE)) sched_yield();
        pmalloc_ptr *slot = pmalloc_root_slot(p->h, k);
        nm_err e;
        while ((e = pmalloc_malloc_to(p->h, 64, slot)) == NM_ENOMEM) sched_yield();
        if (e) { p->err = 1; break; }
        memset(pmalloc_direct(p->h, *slot), (int)i, 64);
        __atomic_store_n(&p->full[k], 1, __ATOMIC_RELEASE);
    }
    return NULL;
}

static void *consumer(void *a)
{
    pc *p = a;
    pin(p->cpu[1]);
    if (pmalloc_numa_set_node(p->h, p->node[1])) p->err = 1;
    for (uint64_t i = 0; i < p->n; i++) {
        unsigned k = (unsigned)(i % RING);
        while (!__atomic_load_n(&p->full[k], __ATOMIC_ACQUIRE)) sched_yield();
        if (pmalloc_free_from(p->h, pmalloc_root_slot(p->h, k))) { p->err = 1; break; }
        __atomic_store_n(&p->full[k], 0, __ATOMIC_RELEASE);
    }
    return NULL;
}

/* threadtest (local control): each thread allocates 500 objects into its own
 * roots and frees them, n / 500 rounds; every free is local in both configurations */
typedef struct tt { pc *p; int k; } tt;
static void *tt_worker(void *a)
{
    tt *t = a;
    pc *p = t->p;
    pin(p->cpu[t->k]);
    if (pmalloc_numa_set_node(p->h, p->node[t->k])) p->err = 1;
    pmalloc_ptr *roots = pmalloc_root_slot(p->h, (unsigned)t->k * 500u);
    for (uint64_t r = 0; r < p->n / 500 && !p->err; r++) {
        for (unsigned i = 0; i < 500; i++) {
            if (pmalloc_malloc_to(p->h, 64, &roots[i])) { p->err = 1; break; }
            memset(pmalloc_direct(p->h, roots[i]), (int)i, 64);
        }
        for (unsigned i = 0; i < 500; i++)
            if (roots[i] && pmalloc_free_from(p->h, &roots[i])) p->err = 1;
    }
    return NULL;
}

typedef struct meas {
    double mops, meta_per_op, fences_per_op, remote_frac, synced_demand, synced_epoch, passes;
} meas;

static int run_once(const char *dir, pmalloc_model m, unsigned vnodes, uint64_t n, const int cpus[2], bool threadtest, meas *out)
{
    pmalloc_remove(dir, NULL); /* with several nodes: node files too */
    pmalloc_options o;
    pmalloc_options_default(&o);
    o.size = 64u << 20;
    o.model = m;
    o.persist = PMALLOC_PERSIST_CPU;
    o.eadr = PMALLOC_EADR_OFF;
    o.narenas = 2;
    o.numa_vnodes = vnodes;
    static pc p;
    memset(&p, 0, sizeof p);
    if (pmalloc_open(dir, &o, &p.h)) return -1;
    p.n = n;
    p.cpu[0] = cpus[0];
    p.cpu[1] = cpus[1];
    p.node[0] = 0;
    p.node[1] = vnodes > 1 ? 1 : 0;
    pmalloc_stats_reset_counters(p.h);
    uint64_t t0 = nm_now_ns();
    pthread_t a, b;
    tt ta = {&p, 0}, tb = {&p, 1};
    if (threadtest) {
        pthread_create(&a, NULL, tt_worker, &ta);
        pthread_create(&b, NULL, tt_worker, &tb);
    } else {
        pthread_create(&a, NULL, producer, &p);
        pthread_create(&b, NULL, consumer, &p);
    }
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    double s = (double)(nm_now_ns() - t0) / 1e9;
    pmalloc_stats st;
    pmalloc_numa_stats ns;
    pmalloc_stats_get(p.h, &st);
    pmalloc_numa_stats_get(p.h, &ns);
    int bad = p.err || pmalloc_check(p.h) != NM_OK || st.objects_live != 0;
    pmalloc_close(p.h);
    pmalloc_remove(dir, NULL);
    if (bad) return -1;
    double ops = threadtest ? 2.0 * 2.0 * (double)(n / 500 * 500) : 2.0 * (double)n;
    out->mops = ops / s / 1e6;
    out->meta_per_op = (double)st.meta_flushes / ops;
    out->fences_per_op = (double)st.fences / ops;
    out->remote_frac = (double)ns.remote_frees / (double)n;
    out->synced_demand = (double)ns.synced_on_demand;
    out->synced_epoch = (double)ns.synced_epoch;
    out->passes = (double)ns.sync_passes;
    return 0;
}

int nm_suite_pmalloc_numa(nm_bench *b)
{
    bool quick = nm_bench_quick(b);
    unsigned reps = (unsigned)nm_bench_param_num(b, "reps", quick ? 3 : 5);
    uint64_t n = (uint64_t)nm_bench_param_num(b, "objects", quick ? 100000 : 1000000);
    const char *dir = nm_bench_tmpdir(b);
    /* the first two CPUs we may run on: producer and consumer, in every configuration */
    cpu_set_t set;
    int cpus[2] = {-1, -1}, nc = 0;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        for (int c = 0; c < CPU_SETSIZE && nc < 2; c++)
            if (CPU_ISSET(c, &set)) cpus[nc++] = c;
    nm_bench_config_num(b, "objects", (double)n);
    nm_bench_config_num(b, "repetitions", reps);
    nm_bench_config_str(b, "workload", "prod-con, 64 B, ring of 1024 root slots, producer on node 0 / CPU 0, consumer on node 1 / CPU 1 "
                                       "(1-node heaps: both on node 0, same CPUs)");
    nm_bench_config_str(b, "heap", "64 MiB page-cache file, PMALLOC_PERSIST_CPU, 2 arenas, epoch sync every 50 ms");
    nm_bench_config_str(b, "meaning", "one socket: the cost of the mechanism (two-phase vs direct remote free), not a NUMA speedup");
    nm_bench_plot_spec(b, "[{\"title\":\"prod-con, 1 node vs 2 virtual nodes\",\"x\":\"model\",\"y\":\"mops\",\"series\":\"config\",\"kind\":\"bar\","
                          "\"filter\":{\"bench\":\"prod-con\"}},"
                          "{\"title\":\"threadtest (all frees local), LOG\",\"x\":\"bench\",\"y\":\"mops\",\"series\":\"config\",\"kind\":\"bar\","
                          "\"filter\":{\"bench\":\"threadtest\"}}]");
    const char *cfgname[2] = {"1 node (direct remote free)", "2 virtual nodes (two-phase)"};
    meas med[3][2];
    for (int m = 0; m < 3; m++) { /* LOG prod-con, GC prod-con, LOG threadtest (local control) */
        bool ttest = m == 2;
        pmalloc_model model = m == 1 ? PMALLOC_GC : PMALLOC_LOG;
        double v[2][7][16];
        for (unsigned r = 0; r < reps && r < 16; r++)
            for (int c = 0; c < 2; c++) { /* alternate the configurations: drift hits both */
                meas x;
                if (run_once(dir, model, c ? 2 : 1, n, cpus, ttest, &x)) {
                    nm_bench_progress(b, "run failed: %s", nm_last_errmsg());
                    return NM_EIO;
                }
                double f[7] = {x.mops, x.meta_per_op, x.fences_per_op, x.remote_frac, x.synced_demand, x.synced_epoch, x.passes};
                for (int k = 0; k < 7; k++) v[c][k][r] = f[k];
            }
        for (int c = 0; c < 2; c++) {
            double f[7];
            for (int k = 0; k < 7; k++) f[k] = nm_stats_median(v[c][k], reps);
            med[m][c] = (meas){f[0], f[1], f[2], f[3], f[4], f[5], f[6]};
            nm_bench_row *row = nm_bench_row_new(b);
            nm_bench_row_str(row, "model", m == 1 ? "GC" : "LOG");
            nm_bench_row_str(row, "bench", ttest ? "threadtest" : "prod-con");
            nm_bench_row_str(row, "config", cfgname[c]);
            nm_bench_row_num(row, "nodes", c ? 2 : 1);
            nm_bench_row_num(row, "mops", f[0]);
            nm_bench_row_num(row, "meta_flushes_per_op", f[1]);
            nm_bench_row_num(row, "fences_per_op", f[2]);
            nm_bench_row_num(row, "remote_free_fraction", f[3]);
            nm_bench_row_num(row, "synced_on_demand", f[4]);
            nm_bench_row_num(row, "synced_by_epoch_threads", f[5]);
            nm_bench_row_num(row, "sync_passes", f[6]);
            nm_bench_progress(b, "%s %s, %s: %.3f Mops/s, %.2f metadata flushes and %.2f fences per op, %.0f%% remote frees",
                              ttest ? "threadtest" : "prod-con", m == 1 ? "GC" : "LOG", cfgname[c], f[0], f[1], f[2], 100 * f[3]);
        }
    }
    nm_bench_summary_num(b, "numa_prodcon_ratio_log", med[0][1].mops / med[0][0].mops);
    nm_bench_summary_num(b, "numa_prodcon_ratio_gc", med[1][1].mops / med[1][0].mops);
    nm_bench_summary_num(b, "numa_threadtest_ratio_log", med[2][1].mops / med[2][0].mops);
    nm_bench_summary_num(b, "numa_remote_free_fraction", med[0][1].remote_frac);
    nm_bench_summary_num(b, "numa_meta_flushes_per_op_log_1node", med[0][0].meta_per_op);
    nm_bench_summary_num(b, "numa_meta_flushes_per_op_log_2vnodes", med[0][1].meta_per_op);
    nm_bench_summary_num(b, "numa_fences_per_op_log_1node", med[0][0].fences_per_op);
    nm_bench_summary_num(b, "numa_fences_per_op_log_2vnodes", med[0][1].fences_per_op);
    return NM_OK;
}
