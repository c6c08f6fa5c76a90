/* Suite bmem-malloc-test: the paper's malloc-test (Table 2, Sec. 5.1; after
 * Lever & Boreham 2000): T threads each run `malloc(size); free(p);` in a loop.
 * Horizontal: 1,2,4,8 threads x 8..4096 B, 10000 requests per thread.
 * Vertical: 8..128 B with 128/T requests per thread (Table 2). The vertical
 * counts are too small to time (128 pairs take microseconds), so every
 * configuration is repeated in rounds until each thread has made at least
 * `min_pairs` (default 10000) pairs; the per-pair time is what is compared.
 * glibc malloc/free runs the same loop in the same repetition. The paper
 * baseline runs Table 2's counts once per repetition (it is ~1000x slower).
 * On this 2-core machine 4 and 8 threads are oversubscribed. Host wall time
 * from the moment all threads are released to the last one finishing. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nearmem/bench.h"
#include "nearmem/bmem.h"
#include "nearmem/common.h"

static void *(*volatile g_malloc)(size_t) = malloc;
static void (*volatile g_free)(void *) = free;

/* bmem-fast is the default configuration (thread cache on); bmem-fast-nocache
 * is the same structure with BMEM_CACHE_OFF (every call takes its bank lock),
 * kept so that the lock-only path stays visible. */
enum { A_GLIBC, A_FAST, A_NOCACHE, A_PAPER, A_COUNT };
static const char *k_alloc_name[A_COUNT] = {"glibc", "bmem-fast", "bmem-fast-nocache", "bmem-paper"};

typedef struct job {
    int alloc;
    bmem_dev *dev;
    size_t size;
    bmem_dim dim;
    uint64_t pairs; /* per thread */
    pthread_barrier_t bar;
    _Atomic uint64_t t_start_min, t_end_max;
    _Atomic uint64_t cpu_ns_sum; /* thread CPU time: rises with contention, not with oversubscription */
    _Atomic int err;
} job;

static void atomic_min_u64(_Atomic uint64_t *a, uint64_t v)
{
    uint64_t cur = atomic_load(a);
    while (v < cur && !atomic_compare_exchange_weak(a, &cur, v)) {
    }
}
static void atomic_max_u64(_Atomic uint64_t *a, uint64_t v)
{
    uint64_t cur = atomic_load(a);
    while (v > cur && !atomic_compare_exchange_weak(a, &cur, v)) {
    }
}

static void *worker(void *arg)
{
    job *j = arg;
    pthread_barrier_wait(&j->bar);
    uint64_t c0 = nm_thread_cpu_ns();
    uint64_t t0 = nm_now_ns();
    if (j->alloc == A_GLIBC) {
        for (uint64_t i = 0; i < j->pairs; i++) {
            void *p = g_malloc(j->size);
            if (!p) atomic_store(&j->err, NM_ENOMEM);
            g_free(p);
        }
    } else {
        for (uint64_t i = 0; i < j->pairs; i++) {
            bmem_ptr p;
            nm_err e = bmem_dev_malloc(j->dev, j->size, j->dim, &p);
            if (e || bmem_dev_free(j->dev, p)) atomic_store(&j->err, e ? e : NM_ECORRUPT);
        }
    }
    uint64_t t1 = nm_now_ns();
    atomic_fetch_add(&j->cpu_ns_sum, nm_thread_cpu_ns() - c0);
    atomic_min_u64(&j->t_start_min, t0);
    atomic_max_u64(&j->t_end_max, t1);
    return NULL;
}

/* ns per malloc/free pair (wall time / pairs per thread) and CPU ns per pair
 * (thread CPU time summed over threads / all pairs). */
static nm_err run_one(int alloc, bmem_dev *dev, size_t size, bmem_dim dim, unsigned threads, uint64_t pairs, double *ns,
                      double *cpu_ns)
{
    job j;
    memset(&j, 0, sizeof j);
    j.alloc = alloc;
    j.dev = dev;
    j.size = size;
    j.dim = dim;
    j.pairs = pairs;
    atomic_init(&j.t_start_min, UINT64_MAX);
    atomic_init(&j.t_end_max, 0);
    atomic_init(&j.cpu_ns_sum, 0);
    pthread_barrier_init(&j.bar, NULL, threads);
    pthread_t t[64];
    for (unsigned i = 0; i < threads; i++)
        if (pthread_create(&t[i], NULL, worker, &j)) return nm_fail(NM_ENOMEM, "pthread_create failed");
    for (unsigned i = 0; i < threads; i++) pthread_join(t[i], NULL);
    pthread_barrier_destroy(&j.bar);
    if (j.err) return nm_fail((nm_err)j.err, "malloc-test: %s failed on size %zu", k_alloc_name[alloc], size);
    *ns = (double)(j.t_end_max - j.t_start_min) / (double)pairs;
    *cpu_ns = (double)j.cpu_ns_sum / (double)(pairs * threads);
    return NM_OK;
}

int nm_suite_bmem_malloc_test(nm_bench *b)
{
    const bool quick = nm_bench_quick(b);
    const int reps = (int)nm_bench_param_num(b, "reps", quick ? 3 : 7);
    const uint64_t min_pairs = (uint64_t)nm_bench_param_num(b, "min_pairs", 10000);
    const bool with_paper = nm_bench_param_num(b, "paper", 1) != 0;
    nm_bench_config_num(b, "repetitions", reps);
    nm_bench_config_num(b, "min_pairs_per_thread", (double)min_pairs);
    nm_bench_config_str(b, "device", "Table 3: 1024 rows x 65536 columns x 16 subarrays x 8 banks");
    nm_bench_config_str(b, "statistic", "median over repetitions of ns per malloc/free pair (wall / pairs per thread)");
    nm_bench_config_num(b, "host_cores", nm_nproc());
    /* GLIBC_TUNABLES=glibc.malloc.tcache_count=0 gives the tcache-less glibc
     * (2.23, Ubuntu 16.04) the paper compared against; record which one ran */
    const char *tun = getenv("GLIBC_TUNABLES");
    nm_bench_config_str(b, "glibc_tunables", tun ? tun : "");
    nm_bench_plot_spec(b, "[{\"title\":\"horizontal: bmem-fast / glibc per pair\",\"x\":\"threads\",\"y\":\"ratio_vs_glibc\","
                          "\"series\":\"size\",\"logx\":true,\"hline\":1,\"filter\":{\"dim\":\"horizontal\",\"allocator\":\"bmem-fast\"}},"
                          "{\"title\":\"vertical: bmem-fast / glibc per pair\",\"x\":\"threads\",\"y\":\"ratio_vs_glibc\","
                          "\"series\":\"size\",\"logx\":true,\"hline\":1,\"filter\":{\"dim\":\"vertical\",\"allocator\":\"bmem-fast\"}},"
                          "{\"title\":\"horizontal 4096 B: ns per pair\",\"x\":\"threads\",\"y\":\"ns_per_pair\",\"series\":\"allocator\","
                          "\"logx\":true,\"logy\":true,\"filter\":{\"dim\":\"horizontal\",\"size\":4096}},"
                          "{\"title\":\"vertical 128 B: ns per pair\",\"x\":\"threads\",\"y\":\"ns_per_pair\",\"series\":\"allocator\","
                          "\"logx\":true,\"logy\":true,\"filter\":{\"dim\":\"vertical\",\"size\":128}},"
                          "{\"title\":\"horizontal 8 B: CPU ns per pair (flat = no contention)\",\"x\":\"threads\","
                          "\"y\":\"cpu_ns_per_pair\",\"series\":\"allocator\",\"logx\":true,\"logy\":true,"
                          "\"filter\":{\"dim\":\"horizontal\",\"size\":8}},"
                          "{\"title\":\"vertical 128 B: CPU ns per pair (flat = no contention)\",\"x\":\"threads\","
                          "\"y\":\"cpu_ns_per_pair\",\"series\":\"allocator\",\"logx\":true,\"logy\":true,"
                          "\"filter\":{\"dim\":\"vertical\",\"size\":128}}]");

    bmem_dev *dev[A_COUNT] = {NULL, NULL, NULL, NULL};
    for (int a = A_FAST; a < A_COUNT; a++) {
        bmem_config c = {1024, 65536, 16, 8, a == A_PAPER ? BMEM_ALGO_PAPER : BMEM_ALGO_FAST,
                         a == A_FAST ? 0 : BMEM_CACHE_OFF};
        nm_err e = bmem_dev_create(&c, &dev[a]);
        if (e) return e;
    }
    static const unsigned thr[4] = {1, 2, 4, 8};
    static const size_t hsz[6] = {8, 64, 128, 512, 1024, 4096};
    static const size_t vsz[5] = {8, 16, 32, 64, 128};
    double lr_fast[2][64], lr_paper[2][64], lr_nocache[2][64];
    unsigned nl[2] = {0, 0};
    double cpu18[2][2][2][6]; /* [dim][glibc, fast][1 thread, 8 threads][size] */
    nm_err e = NM_OK;
    for (int dk = 0; dk < 2 && !e; dk++) {
        const size_t *sizes = dk ? vsz : hsz;
        unsigned nsizes = dk ? 5 : 6;
        for (unsigned si = 0; si < nsizes && !e; si++) {
            for (unsigned ti = 0; ti < 4 && !e; ti++) {
                unsigned T = thr[ti];
                uint64_t table2 = dk ? 128 / T : 10000;
                uint64_t rounds = (min_pairs + table2 - 1) / table2;
                double t[A_COUNT][32], cpu[A_COUNT][32], ratio[A_COUNT][32];
                for (int rep = 0; rep < reps && !e; rep++) {
                    for (int a = 0; a < A_COUNT && !e; a++) {
                        if (a == A_PAPER && !with_paper) continue;
                        uint64_t pairs = a == A_PAPER ? table2 : table2 * rounds;
                        e = run_one(a, dev[a], sizes[si], dk ? BMEM_VERT : BMEM_HORIZ, T, pairs, &t[a][rep], &cpu[a][rep]);
                    }
                    for (int a = A_FAST; a < A_COUNT && !e; a++) ratio[a][rep] = t[a][rep] / t[A_GLIBC][rep];
                }
                if (e) break;
                for (int a = 0; a < A_COUNT; a++) {
                    if (a == A_PAPER && !with_paper) continue;
                    nm_bench_row *row = nm_bench_row_new(b);
                    nm_bench_row_str(row, "dim", dk ? "vertical" : "horizontal");
                    nm_bench_row_str(row, "allocator", k_alloc_name[a]);
                    nm_bench_row_num(row, "threads", T);
                    nm_bench_row_num(row, "size", (double)sizes[si]);
                    nm_bench_row_num(row, "table2_requests_per_thread", (double)table2);
                    nm_bench_row_num(row, "pairs_per_thread", (double)(a == A_PAPER ? table2 : table2 * rounds));
                    nm_bench_row_num(row, "ns_per_pair", nm_stats_median(t[a], (size_t)reps));
                    nm_bench_row_num(row, "cpu_ns_per_pair", nm_stats_median(cpu[a], (size_t)reps));
                    if (a != A_GLIBC) nm_bench_row_num(row, "ratio_vs_glibc", nm_stats_median(ratio[a], (size_t)reps));
                }
                if (T == 1 || T == 8)
                    for (int a = 0; a < 2; a++)
                        cpu18[dk][a][T == 8][si] = nm_stats_median(cpu[a == 0 ? A_GLIBC : A_FAST], (size_t)reps);
                lr_fast[dk][nl[dk]] = nm_stats_median(ratio[A_FAST], (size_t)reps);
                lr_paper[dk][nl[dk]] = with_paper ? nm_stats_median(ratio[A_PAPER], (size_t)reps) : 1.0;
                lr_nocache[dk][nl[dk]] = nm_stats_median(ratio[A_NOCACHE], (size_t)reps);
                nl[dk]++;
                nm_bench_progress(b, "%s %4zu B x %u threads: glibc %.1f ns, fast %.1f ns (x%.2f), no cache %.1f ns (x%.2f)",
                                  dk ? "V" : "H", sizes[si], T, nm_stats_median(t[A_GLIBC], (size_t)reps),
                                  nm_stats_median(t[A_FAST], (size_t)reps), lr_fast[dk][nl[dk] - 1],
                                  nm_stats_median(t[A_NOCACHE], (size_t)reps), lr_nocache[dk][nl[dk] - 1]);
                nm_bench_progress(b, "    cpu per pair: glibc %.1f ns, fast %.1f ns", nm_stats_median(cpu[A_GLIBC], (size_t)reps),
                                  nm_stats_median(cpu[A_FAST], (size_t)reps));
            }
        }
    }
    if (!e) {
        nm_bench_summary_num(b, "malloc_test_h_ratio_vs_glibc", nm_stats_geomean(lr_fast[0], nl[0]));
        nm_bench_summary_num(b, "malloc_test_v_ratio_vs_glibc", nm_stats_geomean(lr_fast[1], nl[1]));
        nm_bench_summary_num(b, "malloc_test_h_ratio_max", nm_stats_max(lr_fast[0], nl[0]));
        /* Scaling: CPU time per pair at 8 threads over 1 thread (1.0 = no
         * contention cost; independent of how many cores are free). */
        for (int dk = 0; dk < 2; dk++)
            for (int a = 0; a < 2; a++) {
                double r[6];
                unsigned ns = dk ? 5 : 6;
                for (unsigned si = 0; si < ns; si++) r[si] = cpu18[dk][a][1][si] / cpu18[dk][a][0][si];
                char key[80];
                snprintf(key, sizeof key, "malloc_test_%s_%s_cpu_per_pair_8t_over_1t", dk ? "v" : "h", a ? "fast" : "glibc");
                nm_bench_summary_num(b, key, nm_stats_geomean(r, ns));
            }
        nm_bench_summary_num(b, "malloc_test_v_ratio_max", nm_stats_max(lr_fast[1], nl[1]));
        nm_bench_summary_num(b, "malloc_test_h_nocache_ratio_vs_glibc", nm_stats_geomean(lr_nocache[0], nl[0]));
        nm_bench_summary_num(b, "malloc_test_v_nocache_ratio_vs_glibc", nm_stats_geomean(lr_nocache[1], nl[1]));
        if (with_paper) {
            nm_bench_summary_num(b, "malloc_test_h_paper_ratio_vs_glibc", nm_stats_geomean(lr_paper[0], nl[0]));
            nm_bench_summary_num(b, "malloc_test_v_paper_ratio_vs_glibc", nm_stats_geomean(lr_paper[1], nl[1]));
        }
    }
    for (int a = A_FAST; a < A_COUNT; a++) bmem_dev_destroy(dev[a]);
    return e;
}
