/* Suite pmalloc-apps (issue 19): the PMAlloc paper's applications (Sec. 8.5-8.6:
 * FPTree, Vacation, Ackermann, N-Queens, Cfrac, Barnes, Kruskal) and the KV
 * store on PMAlloc-LOG, PMAlloc-GC and PMDK's libpmemobj (plus glibc malloc in
 * DRAM as the no-persistence reference), 1 and 2 threads where the application
 * is multi-threaded. Each run is a fresh process (nearmem-pmalloc-apprun, which
 * counts the lines every allocator persists through libpmem); the allocators
 * take turns within each repetition; run 0 is not prefaulted and gives the peak
 * memory, runs 1..reps are prefaulted and give the median throughput. Each
 * application checks its own result; a failed check fails the suite.
 * Keys: app_speedup_vs_pmdk_<app> (LOG / PMDK throughput) and
 * app_speedup_gc_vs_pmdk_<app> at 2 threads (1 for cfrac), the geometric mean
 * over the eight, the same at 1 thread (_1t), and LOG / PMDK operations per
 * CPU-second of the workers (app_speedup_cpu_vs_pmdk_*: what other jobs on the
 * shared cores cannot skew by descheduling a worker). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nearmem/bench.h"
#include "nearmem/common.h"
#include "pm_apps.h"

typedef struct app_size { const char *name; uint64_t n, ops, iters; uint64_t qn, qops, qiters; } app_size;

/* Full and quick sizes (per thread unless noted); docs/pmalloc.md "Applications". */
static const app_size sizes[] = {
    {"fptree", 200000, 400000, 0, 4000, 8000, 0},      /* warm-up pairs, operations, search % */
    {"vacation", 16384, 60000, 0, 256, 600, 0},        /* relations (total), transactions */
    {"ackermann", 0, 0, 8, 0, 0, 1},                   /* sets of 6 functions (13,520 steps each) */
    {"nqueens", 8, 0, 60, 8, 0, 2},                    /* board, puzzles */
    {"cfrac", 1, 0, 1, 2, 0, 1},                       /* number (0 paper, 1 30-digit, 2 20-digit), runs */
    {"barnes", 16384, 0, 5, 512, 0, 1},                /* bodies (total), time steps */
    {"kruskal", 600000, 0, 0, 10000, 0, 0},            /* graphs */
    {"kv", 200000, 1000000, 0, 4000, 16000, 0},        /* warm-up pairs, operations */
};
#define NAPPS (sizeof sizes / sizeof sizes[0])

static double load1(void)
{
    double l = NAN;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &l) != 1) l = NAN;
        fclose(f);
    }
    return l;
}

static const char *helper_path(void)
{
    static char path[4200];
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return NULL;
    self[n] = 0;
    char *slash = strrchr(self, '/');
    if (!slash) return NULL;
    *slash = 0;
    snprintf(path, sizeof path, "%s/nearmem-pmalloc-apprun", self);
    return access(path, X_OK) == 0 ? path : NULL;
}

/* One measurement in a fresh helper process. */
static int run_one(const char *helper, const char *app, pa_kind kind, const pa_cfg *c, const char *dir, bool prefault,
                   bool noflush, pa_result *r)
{
    memset(r, 0, sizeof *r);
    r->err = 1;
    char args[8][128];
    snprintf(args[0], sizeof args[0], "app=%s", app);
    snprintf(args[1], sizeof args[1], "kind=%d", (int)kind);
    snprintf(args[2], sizeof args[2], "threads=%u", c->threads);
    snprintf(args[3], sizeof args[3], "n=%llu", (unsigned long long)c->n);
    snprintf(args[4], sizeof args[4], "ops=%llu", (unsigned long long)c->ops);
    snprintf(args[5], sizeof args[5], "iters=%llu", (unsigned long long)c->iters);
    snprintf(args[6], sizeof args[6], "seed=%llu", (unsigned long long)c->seed);
    snprintf(args[7], sizeof args[7], "prefault=%d", prefault ? 1 : 0);
    char dirarg[720], eadrarg[16];
    snprintf(dirarg, sizeof dirarg, "dir=%s", dir);
    snprintf(eadrarg, sizeof eadrarg, "eadr=%d", noflush && kind != PA_PMDK);
    char *argv[12] = {(char *)helper};
    for (int i = 0; i < 8; i++) argv[1 + i] = args[i];
    argv[9] = eadrarg;
    argv[10] = dirarg;
    argv[11] = NULL;
    int fd[2];
    if (pipe(fd)) { snprintf(r->msg, sizeof r->msg, "pipe: %s", strerror(errno)); return 1; }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) { close(fd[0]); close(fd[1]); snprintf(r->msg, sizeof r->msg, "fork: %s", strerror(errno)); return 1; }
    if (pid == 0) {
        close(fd[0]);
        dup2(fd[1], 1);
        close(fd[1]);
        /* libpmem reads PMEM_NO_FLUSH in its load-time constructor: set before the exec */
        if (noflush && kind == PA_PMDK) setenv("PMEM_NO_FLUSH", "1", 1);
        execv(helper, argv);
        _exit(127);
    }
    close(fd[1]);
    char buf[4096], sink[512];
    size_t got = 0;
    for (;;) { /* keep reading to the end so the helper never blocks on a full pipe */
        ssize_t n = got + 1 < sizeof buf ? read(fd[0], buf + got, sizeof buf - 1 - got) : read(fd[0], sink, sizeof sink);
        if (n <= 0) break;
        if (got + 1 < sizeof buf) got += (size_t)n;
    }
    buf[got] = 0;
    close(fd[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    if (pa_result_parse(buf, r)) {
        r->err = 1;
        snprintf(r->msg, sizeof r->msg, "helper gave no result (status %d)", st);
    }
    return r->err;
}

typedef struct point {
    double thr[8], secs[8], cthr[8];
    unsigned n;
    double peak_mib, lines, nt, fences, allocs, frees, pm_lines, app_ops, load;
    unsigned nload;
    bool ok;
} point;

static const char *sel(nm_bench *b, const char *key, const char *dflt) { return nm_bench_param(b, key, dflt); }

static bool listed(const char *list, const char *name)
{
    if (!list || !*list || strcmp(list, "all") == 0) return true;
    size_t n = strlen(name);
    for (const char *p = list; (p = strstr(p, name)); p += n)
        if ((p == list || p[-1] == ',') && (p[n] == 0 || p[n] == ',')) return true;
    return false;
}

int nm_suite_pmalloc_apps(nm_bench *b)
{
    pa_force_pmem();
    bool quick = nm_bench_quick(b);
    const char *helper = helper_path();
    if (!helper) {
        nm_bench_progress(b, "nearmem-pmalloc-apprun not found next to nearmem-bench");
        return NM_EIO;
    }
    unsigned reps = (unsigned)nm_bench_param_num(b, "reps", quick ? 1 : 3);
    if (reps < 1) reps = 1;
    if (reps > 8) reps = 8;
    bool peak_run = nm_bench_param_num(b, "peak_run", quick ? 0 : 1) != 0; /* else run 1 is unprefaulted and gives both */
    bool with_malloc = nm_bench_param_num(b, "malloc", 1) != 0;
    const char *only = sel(b, "apps", "all");
    unsigned maxthreads = (unsigned)nm_bench_param_num(b, "threads", 2);
    if (maxthreads < 1) maxthreads = 1;
    if (maxthreads > 2) maxthreads = 2;
    nm_bench_config_num(b, "repetitions", reps);
    nm_bench_config_num(b, "peak_run", peak_run);
    nm_bench_config_str(b, "persistence", "pools are page-cache files in the run's directory; PMAlloc: PMALLOC_PERSIST_CPU, "
                                          "PMDK: PMEM_IS_PMEM_FORCE=1 (column cpu_flush)");
    nm_bench_config_str(b, "lines", "counted by nearmem-pmalloc-apprun at libpmem's exported functions, per thread over the "
                                    "timed phase: flushed lines (pmem_flush/persist ranges), streamed lines (pmem_memcpy & co., "
                                    "PMDK's non-temporal log copies), fences (pmem_drain/persist); for PMAlloc checked against its own counter");
    nm_bench_config_str(b, "speedup_keys", "throughput PMAlloc-LOG / PMDK (and -GC / PMDK) at 2 threads, cfrac 1 thread; _1t at 1 thread");
    nm_bench_config_str(b, "order", "each repetition runs the allocators in turn, the first one rotating");
    nm_bench_config_num(b, "load_avg_1m_start", load1());
    nm_bench_plot_spec(b,
        "[{\"title\":\"(Fig. 32) FPTree 50/50 insert/delete\",\"x\":\"threads\",\"y\":\"kops\",\"series\":\"allocator\",\"kind\":\"bar\",\"filter\":{\"persistent\":1,\"app\":\"fptree\"},\"ylabel\":\"kops/s\"},"
        "{\"title\":\"(34a/35a) Vacation\",\"x\":\"threads\",\"y\":\"kops\",\"series\":\"allocator\",\"kind\":\"bar\",\"filter\":{\"persistent\":1,\"app\":\"vacation\"},\"ylabel\":\"ktx/s\"},"
        "{\"title\":\"(34b/35b) Ackermann\",\"x\":\"threads\",\"y\":\"kops\",\"series\":\"allocator\",\"kind\":\"bar\",\"filter\":{\"persistent\":1,\"app\":\"ackermann\"},\"ylabel\":\"ksteps/s\"},"
        "{\"title\":\"(34c/35c) N-Queens 8x8\",\"x\":\"threads\",\"y\":\"kops\",\"series\":\"allocator\",\"kind\":\"bar\",\"filter\":{\"persistent\":1,\"app\":\"nqueens\"},\"ylabel\":\"kpuzzles/s\"},"
        "{\"title\":\"(34d/35d) Cfrac (time)\",\"x\":\"threads\",\"y\":\"seconds\",\"series\":\"allocator\",\"kind\":\"bar\",\"filter\":{\"persistent\":1,\"app\":\"cfrac\"},\"ylabel\":\"s\"},"
        "{\"title\":\"(34e/35e) Barnes\",\"x\":\"threads\",\"y\":\"kops\",\"series\":\"allocator\",\"kind\":\"bar\",\"filter\":{\"persistent\":1,\"app\":\"barnes\"},\"ylabel\":\"kbody-steps/s\"},"
        "{\"title\":\"(34f/35f) Kruskal\",\"x\":\"threads\",\"y\":\"kops\",\"series\":\"allocator\",\"kind\":\"bar\",\"filter\":{\"persistent\":1,\"app\":\"kruskal\"},\"ylabel\":\"kgraphs/s\"},"
        "{\"title\":\"KV 50/50\",\"x\":\"threads\",\"y\":\"kops\",\"series\":\"allocator\",\"kind\":\"bar\",\"filter\":{\"persistent\":1,\"app\":\"kv\"},\"ylabel\":\"kops/s\"},"
        "{\"title\":\"speedup vs PMDK (2 threads, cfrac 1)\",\"x\":\"app\",\"y\":\"speedup_vs_pmdk\",\"series\":\"allocator\",\"kind\":\"bar\",\"filter\":{\"key_point\":1,\"persistent\":1},\"hline\":1},"
        "{\"title\":\"persisted lines per allocator call (2 threads, cfrac 1)\",\"x\":\"app\",\"y\":\"lines_per_alloc_call\",\"series\":\"allocator\",\"kind\":\"bar\",\"filter\":{\"key_point\":1,\"persistent\":1}}]");
    const char *tmp = nm_bench_tmpdir(b);
    double sp[NAPPS], spgc[NAPPS], sp1[NAPPS], spgc1[NAPPS], spc[NAPPS];
    unsigned nsp = 0, nsp1 = 0, nspc = 0;
    double maxdiff = 0;
    int rc = NM_OK;
    /* variants: the allocators, the DRAM reference, and (1 thread) LOG and PMDK without flushes */
    enum { NV = 6 };
    static const struct { pa_kind k; bool noflush; const char *label; } var[NV] = {
        {PA_LOG, false, "PMAlloc-LOG"}, {PA_GC, false, "PMAlloc-GC"}, {PA_PMDK, false, "PMDK"},
        {PA_MALLOC, false, "DRAM-malloc"}, {PA_LOG, true, "PMAlloc-LOG-noflush"}, {PA_PMDK, true, "PMDK-noflush"}};
    bool with_noflush = nm_bench_param_num(b, "noflush", quick ? 0 : 1) != 0;
    nm_bench_config_str(b, "noflush", "at 1 thread, PMAlloc-LOG in eADR mode (PMALLOC_EADR_ON: no flushes, fences kept) and PMDK "
                                      "with PMEM_NO_FLUSH=1 (libpmem: no flushes, fences kept): where the time goes");
    for (unsigned ai = 0; ai < NAPPS && rc == NM_OK; ai++) {
        const app_size *z = &sizes[ai];
        const pa_app *app = pa_app_find(z->name);
        if (!app || !listed(only, z->name)) continue;
        char key[96];
        pa_cfg base = {.n = quick ? z->qn : z->n, .ops = quick ? z->qops : z->ops, .iters = quick ? z->qiters : z->iters};
        snprintf(key, sizeof key, "%s_n", z->name);
        base.n = (uint64_t)nm_bench_param_num(b, key, (double)base.n);
        snprintf(key, sizeof key, "%s_ops", z->name);
        base.ops = (uint64_t)nm_bench_param_num(b, key, (double)base.ops);
        snprintf(key, sizeof key, "%s_iters", z->name);
        base.iters = (uint64_t)nm_bench_param_num(b, key, (double)base.iters);
        snprintf(key, sizeof key, "%s_n", z->name);
        nm_bench_config_num(b, key, (double)base.n);
        snprintf(key, sizeof key, "%s_ops", z->name);
        nm_bench_config_num(b, key, (double)base.ops);
        snprintf(key, sizeof key, "%s_iters", z->name);
        nm_bench_config_num(b, key, (double)base.iters);
        unsigned tmax = app->mt ? maxthreads : 1, tkey = tmax;
        double thr[3][NV], cthr[3][NV];
        memset(thr, 0, sizeof thr);
        memset(cthr, 0, sizeof cthr);
        for (unsigned th = 1; th <= tmax && rc == NM_OK; th++) {
            point pt[NV];
            memset(pt, 0, sizeof pt);
            pa_cfg c = base;
            c.threads = th;
            unsigned vs[NV], nk = 0;
            for (unsigned v = 0; v < NV; v++)
                if ((v != 3 || with_malloc) && (v < 4 || (with_noflush && th == 1))) vs[nk++] = v;
            for (unsigned rep = 0; rep < reps + (peak_run ? 1 : 0) && rc == NM_OK; rep++) {
                bool is_peak = peak_run && rep == 0;
                bool timed = !is_peak;
                for (unsigned j = 0; j < nk && rc == NM_OK; j++) {
                    unsigned v = vs[(j + rep) % nk];
                    pa_kind k = var[v].k;
                    char dir[700];
                    snprintf(dir, sizeof dir, "%s/apps-%s-%u-%u", tmp, z->name, v, th);
                    mkdir(dir, 0700);
                    pa_remove(dir);
                    c.seed = nm_bench_seed(b) * 1000003u + rep;
                    /* without a separate peak run the first timed run is not prefaulted and gives the peak */
                    bool prefault = timed && (peak_run || rep > 0);
                    double l0 = load1();
                    pa_result r;
                    run_one(helper, z->name, k, &c, dir, prefault, var[v].noflush, &r);
                    double l1 = load1();
                    pa_remove(dir);
                    rmdir(dir);
                    if (r.err || r.seconds <= 0) {
                        nm_bench_progress(b, "%s %s %u threads: FAILED: %s", z->name, var[v].label, th, r.msg);
                        rc = NM_ECORRUPT;
                        break;
                    }
                    point *p = &pt[v];
                    if (rep == 0) p->peak_mib = r.peak_bytes / (1024.0 * 1024.0);
                    if (!isnan(l0) && !isnan(l1)) { p->load += (l0 + l1) / 2; p->nload++; }
                    if (!timed) continue;
                    p->thr[p->n] = r.app_ops / r.seconds;
                    p->cthr[p->n] = r.cpu_seconds > 0 ? r.app_ops / r.cpu_seconds : NAN;
                    p->secs[p->n] = r.seconds;
                    p->n++;
                    p->lines = r.lines;
                    p->nt = r.nt_lines;
                    p->fences = r.fences;
                    p->allocs = r.allocs;
                    p->frees = r.frees;
                    p->pm_lines = r.pm_lines;
                    p->app_ops = r.app_ops;
                    p->ok = true;
                    if ((k == PA_LOG || k == PA_GC) && !var[v].noflush) {
                        double d = r.lines > 0 ? fabs(r.pm_lines - r.lines) / r.lines : (r.pm_lines > 0);
                        if (d > maxdiff) maxdiff = d;
                    }
                }
            }
            if (rc != NM_OK) break;
            for (unsigned j = 0; j < nk; j++) {
                point *p = &pt[vs[j]];
                if (p->ok) {
                    thr[th][vs[j]] = nm_stats_median(p->thr, p->n);
                    cthr[th][vs[j]] = nm_stats_median(p->cthr, p->n);
                }
            }
            for (unsigned j = 0; j < nk; j++) {
                unsigned v = vs[j];
                pa_kind k = var[v].k;
                point *p = &pt[v];
                if (!p->ok) continue;
                double ops = p->app_ops > 0 ? p->app_ops : 1, aops = p->allocs + p->frees;
                nm_bench_row *row = nm_bench_row_new(b);
                nm_bench_row_str(row, "app", z->name);
                nm_bench_row_str(row, "op", app->op_name);
                nm_bench_row_str(row, "allocator", var[v].label);
                nm_bench_row_num(row, "threads", th);
                nm_bench_row_num(row, "key_point", th == tkey && v < 4);
                nm_bench_row_num(row, "persistent", v < 3); /* LOG, GC, PMDK with flushes: the plotted rows */
                nm_bench_row_num(row, "noflush", var[v].noflush);
                nm_bench_row_num(row, "throughput", thr[th][v]);
                nm_bench_row_num(row, "kops", thr[th][v] / 1e3);
                nm_bench_row_num(row, "seconds", nm_stats_median(p->secs, p->n));
                nm_bench_row_num(row, "ops_per_cpu_second", cthr[th][v]);
                nm_bench_row_num(row, "app_ops", p->app_ops);
                nm_bench_row_num(row, "allocs_per_op", p->allocs / ops);
                nm_bench_row_num(row, "frees_per_op", p->frees / ops);
                nm_bench_row_num(row, "peak_mib", p->peak_mib);
                if (k != PA_MALLOC && var[v].noflush) {
                    unsigned with = k == PA_PMDK ? 2 : 0, ref = 5;
                    nm_bench_row_num(row, "cpu_flush", 0);
                    if (thr[th][ref] > 0) nm_bench_row_num(row, "speedup_vs_pmdk", thr[th][v] / thr[th][ref]);
                    if (thr[th][with] > 0) nm_bench_row_num(row, "flush_share", 1 - thr[th][with] / thr[th][v]);
                } else if (k != PA_MALLOC) {
                    nm_bench_row_num(row, "lines_per_op", (p->lines + p->nt) / ops);
                    nm_bench_row_num(row, "flushed_lines_per_op", p->lines / ops);
                    nm_bench_row_num(row, "streamed_lines_per_op", p->nt / ops);
                    nm_bench_row_num(row, "fences_per_op", p->fences / ops);
                    nm_bench_row_num(row, "lines_per_alloc_call", aops > 0 ? (p->lines + p->nt) / aops : 0);
                    nm_bench_row_num(row, "cpu_flush", 1);
                    nm_bench_row_num(row, "speedup_vs_pmdk", thr[th][2] > 0 ? thr[th][v] / thr[th][2] : NAN);
                }
                if (k == PA_LOG || k == PA_GC) nm_bench_row_num(row, "pmalloc_own_lines_per_op", p->pm_lines / ops);
                if (k == PA_MALLOC && thr[th][2] > 0) nm_bench_row_num(row, "speedup_vs_pmdk", thr[th][v] / thr[th][2]);
                nm_bench_row_num(row, "repetitions", p->n);
                nm_bench_row_num(row, "load_avg_1m", p->nload ? p->load / p->nload : NAN);
                nm_bench_progress(b, "%-9s %-12s %u thr: %10.1f %s/s (median of %u), %6.2f lines/op (%.2f per alloc call), "
                                     "peak %.1f MiB, load %.1f",
                                  z->name, var[v].label, th, thr[th][v], app->op_name, p->n,
                                  k == PA_MALLOC || var[v].noflush ? 0.0 : (p->lines + p->nt) / ops,
                                  aops > 0 && k != PA_MALLOC && !var[v].noflush ? (p->lines + p->nt) / aops : 0.0,
                                  p->peak_mib, p->nload ? p->load / p->nload : NAN);
            }
        }
        if (rc != NM_OK) break;
        char k1[96];
        snprintf(k1, sizeof k1, "app_speedup_vs_pmdk_%s", z->name);
        sp[nsp] = thr[tkey][PA_LOG] / thr[tkey][PA_PMDK];
        nm_bench_summary_num(b, k1, sp[nsp]);
        snprintf(k1, sizeof k1, "app_speedup_gc_vs_pmdk_%s", z->name);
        spgc[nsp] = thr[tkey][PA_GC] / thr[tkey][PA_PMDK];
        nm_bench_summary_num(b, k1, spgc[nsp]);
        nsp++;
        sp1[nsp1] = thr[1][PA_LOG] / thr[1][PA_PMDK];
        spgc1[nsp1] = thr[1][PA_GC] / thr[1][PA_PMDK];
        snprintf(k1, sizeof k1, "app_speedup_vs_pmdk_%s_1t", z->name);
        nm_bench_summary_num(b, k1, sp1[nsp1]);
        nsp1++;
        /* the same ratio per CPU-second of the workers: robust to other jobs taking the cores */
        spc[nspc++] = cthr[tkey][PA_LOG] / cthr[tkey][PA_PMDK];
        snprintf(k1, sizeof k1, "app_speedup_cpu_vs_pmdk_%s", z->name);
        nm_bench_summary_num(b, k1, spc[nspc - 1]);
        if (thr[1][4] > 0 && thr[1][5] > 0) {
            snprintf(k1, sizeof k1, "app_speedup_noflush_vs_pmdk_%s_1t", z->name);
            nm_bench_summary_num(b, k1, thr[1][4] / thr[1][5]);
        }
        nm_bench_progress(b, "%s: LOG/PMDK %.2fx, GC/PMDK %.2fx at %u thread(s); LOG/PMDK %.2fx at 1 (without flushes %.2fx)", z->name,
                          sp[nsp - 1], spgc[nsp - 1], tkey, sp1[nsp1 - 1], thr[1][5] > 0 ? thr[1][4] / thr[1][5] : NAN);
    }
    if (nsp) {
        nm_bench_summary_num(b, "app_speedup_vs_pmdk_geomean", nm_stats_geomean(sp, nsp));
        nm_bench_summary_num(b, "app_speedup_gc_vs_pmdk_geomean", nm_stats_geomean(spgc, nsp));
        nm_bench_summary_num(b, "app_speedup_vs_pmdk_geomean_1t", nm_stats_geomean(sp1, nsp1));
        nm_bench_summary_num(b, "app_speedup_gc_vs_pmdk_geomean_1t", nm_stats_geomean(spgc1, nsp1));
        nm_bench_summary_num(b, "app_speedup_cpu_vs_pmdk_geomean", nm_stats_geomean(spc, nspc));
        nm_bench_summary_num(b, "lines_count_vs_pmalloc_counter_max_rel_diff", maxdiff);
    }
    nm_bench_config_num(b, "load_avg_1m_end", load1());
    return rc;
}
