/* Suites `speedmalloc`, `speedmalloc-contention` and `speedmalloc-redis`: SpeedMalloc
 * against glibc, jemalloc, tcmalloc and mimalloc (Debian's packages), each program run as
 * a separate process with the allocator in LD_PRELOAD (glibc: no preload).
 *
 * Every run counts the whole cost (issue 18): wall time of the workload's timed section,
 * CPU time of the whole process (user + system of every thread, the SpeedMalloc server
 * included, from wait4) and peak RSS. Figures are medians over repetitions in which the
 * allocators take turns, so that load from other processes spreads over all of them;
 * ratios are SpeedMalloc's median over the peer's median in the same run. Everything is
 * measured on this host; nothing is modeled. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nearmem/bench.h"
#include "nearmem/common.h"

/* A_MI2: mimalloc again, as a sixth allocator (speedmalloc-contention only): mimalloc against
 * itself in the same run is the noise floor of the ratios against mimalloc (an A/A control). */
enum { A_SM, A_GLIBC, A_JE, A_TC, A_MI, A_MI2, A_COUNT };
static const char *k_alloc[A_COUNT] = {"speedmalloc", "glibc", "jemalloc", "tcmalloc", "mimalloc", "mimalloc (A/A copy)"};
static const char *k_pkg[A_COUNT] = {NULL, NULL, "libjemalloc2", "libtcmalloc-minimal4", "libmimalloc2.0", NULL};
static const char *k_soname[A_COUNT] = {NULL, NULL, "libjemalloc.so.2", "libtcmalloc_minimal.so.4", "libmimalloc.so.2", NULL};
#define MAXREP 15

/* The directory of the running nearmem-bench (build/bin). */
static void self_dir(char *out, size_t n)
{
    char buf[PATH_MAX];
    ssize_t k = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (k <= 0) { snprintf(out, n, "."); return; }
    buf[k] = 0;
    snprintf(out, n, "%s", dirname(buf));
}

/* Path of a peer's shared object, found with `dpkg -L` (empty when absent). */
static void find_peer(int a, char *out, size_t n)
{
    out[0] = 0;
    char cmd[256];
    snprintf(cmd, sizeof cmd, "dpkg -L %s 2>/dev/null", k_pkg[a]);
    FILE *f = popen(cmd, "r");
    if (!f) return;
    char line[PATH_MAX];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        const char *b = strrchr(line, '/');
        if (b && strcmp(b + 1, k_soname[a]) == 0 && access(line, R_OK) == 0) snprintf(out, n, "%s", line);
    }
    pclose(f);
}

static char g_lib[A_COUNT][PATH_MAX];
static bool g_have[A_COUNT];
static char g_sm_env[256]; /* --set sm_env=VAR=VALUE[,VAR=VALUE]: extra environment of SpeedMalloc runs */

static void setup_allocators(nm_bench *b)
{
    char dir[2048];
    self_dir(dir, sizeof dir);
    snprintf(g_lib[A_SM], PATH_MAX, "%s", nm_bench_param(b, "lib", ""));
    if (!g_lib[A_SM][0]) snprintf(g_lib[A_SM], PATH_MAX, "%s/../lib/libspeedmalloc.so", dir);
    g_have[A_SM] = access(g_lib[A_SM], R_OK) == 0;
    g_have[A_GLIBC] = true;
    g_have[A_MI2] = false; /* speedmalloc-contention turns it on */
    for (int a = A_JE; a <= A_MI; a++) {
        find_peer(a, g_lib[a], PATH_MAX);
        g_have[a] = g_lib[a][0] != 0;
        char key[64];
        snprintf(key, sizeof key, "lib_%s", k_alloc[a]);
        nm_bench_config_str(b, key, g_have[a] ? g_lib[a] : "missing (scripts/install-deps.sh --bench)");
    }
    nm_bench_config_str(b, "lib_speedmalloc", g_lib[A_SM]);
    snprintf(g_sm_env, sizeof g_sm_env, "%s", nm_bench_param(b, "sm_env", ""));
    if (g_sm_env[0]) nm_bench_config_str(b, "speedmalloc_env", g_sm_env);
}

static void apply_env(const char *list)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *save = NULL, *kv = strtok_r(buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        if (!eq) continue;
        *eq = 0;
        setenv(kv, eq + 1, 1);
    }
}

/* Runs argv with allocator a preloaded; captures stdout; returns the exit status or -1. */
static int run_child(char *const argv[], int a, char *out, size_t outn, struct rusage *ru)
{
    int pfd[2];
    if (pipe(pfd) != 0) return -1;
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        dup2(pfd[1], 1);
        close(pfd[0]);
        close(pfd[1]);
        if (a < 0 || a == A_GLIBC) unsetenv("LD_PRELOAD");
        else setenv("LD_PRELOAD", g_lib[a], 1);
        if (a == A_SM && g_sm_env[0]) apply_env(g_sm_env);
        execv(argv[0], argv);
        _exit(127);
    }
    close(pfd[1]);
    size_t got = 0;
    ssize_t k;
    while ((k = read(pfd[0], out + got, outn - 1 - got)) > 0) got += (size_t)k;
    out[got] = 0;
    close(pfd[0]);
    int st = 0;
    struct rusage r0;
    if (!ru) ru = &r0;
    if (wait4(pid, &st, 0, ru) != pid) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}
static inline double ru_cpu_s(const struct rusage *ru)
{
    return (double)ru->ru_utime.tv_sec + (double)ru->ru_stime.tv_sec + 1e-6 * (double)(ru->ru_utime.tv_usec + ru->ru_stime.tv_usec);
}

#if defined(SM_SUITE_MAIN) || defined(SM_SUITE_CONTENTION)
/* ---- the workloads (bench/speedmalloc/sm_workloads.c) ------------------------------ */
typedef struct { const char *name; unsigned tmask; } workload; /* tmask: bit 0 = 1 thread, bit 1 = 2 threads */
static const workload k_work[] = {
    {"larson", 3}, {"xmalloc-test", 3}, {"cache-scratch", 3}, {"sh6bench", 3}, {"sh8bench", 3},
    {"mstress", 3}, {"alloc-test", 3}, {"glibc-thread", 3}, {"glibc-simple", 1}, {"rptest", 3},
    {"cache-thrash", 3}, {"mleak", 3}, {"malloc-large", 3}, {"cfrac", 1}, {"espresso", 1},
    {"barnes", 1}, {"bfs", 3}, {"bc", 3}, {"dc", 3},
};
#define NWORK (sizeof k_work / sizeof k_work[0])

typedef struct { double t, cpu, rss, scpu; } meas; /* section wall s, process CPU s, peak RSS MiB, section CPU s */

static nm_err run_workload(const char *prog, const char *name, int threads, int a, double scale, uint64_t seed, meas *m)
{
    char th[8], scale_s[32], seed_s[32];
    snprintf(th, sizeof th, "%d", threads);
    snprintf(scale_s, sizeof scale_s, "%g", scale);
    snprintf(seed_s, sizeof seed_s, "%llu", (unsigned long long)seed);
    char *argv[] = {(char *)prog, (char *)name, th, scale_s, seed_s, NULL};
    char out[256];
    struct rusage ru;
    int rc = run_child(argv, a, out, sizeof out, &ru);
    unsigned long long ns = 0, cns = 0;
    const char *e = strstr(out, "elapsed_ns=");
    if (rc != 0 || !e || sscanf(e, "elapsed_ns=%llu cpu_ns=%llu", &ns, &cns) != 2)
        return nm_fail(NM_EFAULT, "%s %d threads under %s failed (exit %d): a wrong result or a crash", name, threads, k_alloc[a], rc);
    m->t = (double)ns * 1e-9;
    m->scpu = (double)cns * 1e-9;
    m->cpu = ru_cpu_s(&ru);
    m->rss = (double)ru.ru_maxrss / 1024.0;
    return 0;
}

static bool work_selected(const nm_bench *b, const char *name)
{
    const char *sel = nm_bench_param(b, "workloads", "");
    if (!*sel) return true;
    size_t n = strlen(name);
    for (const char *p = sel; (p = strstr(p, name)); p += n)
        if ((p == sel || p[-1] == ',') && (p[n] == 0 || p[n] == ',')) return true;
    return false;
}

static nm_err workload_prog(char *out, size_t n)
{
    char dir[2048];
    self_dir(dir, sizeof dir);
    snprintf(out, n, "%s/nearmem-sm-workload", dir);
    if (access(out, X_OK) != 0) return nm_fail(NM_ENOENT, "workload program %s not found", out);
    return 0;
}

/* The cases: (workload, threads) pairs selected for this run. */
typedef struct { unsigned w; int threads; } wcase;
static size_t make_cases(const nm_bench *b, wcase *out)
{
    size_t n = 0;
    for (unsigned w = 0; w < NWORK; w++) {
        if (!work_selected(b, k_work[w].name)) continue;
        for (int t = 1; t <= 2; t++)
            if (k_work[w].tmask >> (t - 1) & 1) out[n++] = (wcase){w, t};
    }
    return n;
}
#define IDX(c, a, r) (((size_t)(c) * A_COUNT + (size_t)(a)) * MAXREP + (size_t)(r))
#endif

#ifdef SM_SUITE_MAIN
int nm_suite_speedmalloc(nm_bench *b)
{
    setup_allocators(b);
    if (!g_have[A_SM]) return nm_fail(NM_ENOENT, "libspeedmalloc.so not found at %s", g_lib[A_SM]);
    char prog[2100];
    nm_err err = workload_prog(prog, sizeof prog);
    if (err) return err;
    const bool quick = nm_bench_quick(b);
    const int reps = (int)nm_bench_param_num(b, "reps", quick ? 3 : 5);
    const double scale = nm_bench_param_num(b, "scale", quick ? 0.1 : 1.0);
    if (reps < 1 || reps > MAXREP) return nm_fail(NM_EINVAL, "reps must be 1..%d", MAXREP);
    nm_bench_config_num(b, "repetitions", reps);
    nm_bench_config_num(b, "scale", scale);
    nm_bench_config_num(b, "host_cpus", nm_nproc());
    nm_bench_config_str(b, "statistic", "median over repetitions: wall time of the workload's timed section; CPU time "
                                        "(user+sys, all threads) and peak RSS of the whole process (wait4)");
    nm_bench_config_str(b, "note", "1t = one application thread + the SpeedMalloc server thread: the paper's main core + "
                                   "support core; single-threaded programs (glibc-simple, cfrac, espresso, barnes) run at 1t only");
    nm_bench_plot_spec(b, "[{\"title\":\"1 application thread: time / time(mimalloc)\",\"x\":\"workload\",\"y\":\"time_vs_mimalloc\","
                          "\"series\":\"allocator\",\"kind\":\"bar\",\"filter\":{\"threads\":1}},"
                          "{\"title\":\"2 application threads: time / time(mimalloc)\",\"x\":\"workload\",\"y\":\"time_vs_mimalloc\","
                          "\"series\":\"allocator\",\"kind\":\"bar\",\"filter\":{\"threads\":2}},"
                          "{\"title\":\"1 thread: process CPU / CPU(mimalloc)\",\"x\":\"workload\",\"y\":\"cpu_vs_mimalloc\","
                          "\"series\":\"allocator\",\"kind\":\"bar\",\"filter\":{\"threads\":1}},"
                          "{\"title\":\"2 threads: process CPU / CPU(mimalloc)\",\"x\":\"workload\",\"y\":\"cpu_vs_mimalloc\","
                          "\"series\":\"allocator\",\"kind\":\"bar\",\"filter\":{\"threads\":2}}]");
    wcase cs[NWORK * 2];
    size_t nc = make_cases(b, cs);
    if (!nc) return nm_fail(NM_EINVAL, "no workload selected");
    meas *M = calloc(nc * A_COUNT * MAXREP, sizeof *M);
    if (!M) return nm_fail(NM_ENOMEM, "out of memory");
    for (int rep = 0; rep < reps && !err; rep++) {
        for (size_t c = 0; c < nc && !err; c++) {
            for (int k = 0; k < A_COUNT && !err; k++) {
                int a = (k + rep + (int)c) % A_COUNT; /* rotate the order */
                if (!g_have[a]) continue;
                err = run_workload(prog, k_work[cs[c].w].name, cs[c].threads, a, scale, nm_bench_seed(b), &M[IDX(c, a, rep)]);
            }
            nm_bench_progress(b, "rep %d/%d %s %dt done", rep + 1, reps, k_work[cs[c].w].name, cs[c].threads);
        }
    }
    if (err) { free(M); return err; }
    /* medians per case and allocator */
    double (*mt)[A_COUNT] = calloc(nc, sizeof *mt), (*mc)[A_COUNT] = calloc(nc, sizeof *mc), (*mr)[A_COUNT] = calloc(nc, sizeof *mr);
    double spread_max = 0;
    double (*mn)[A_COUNT] = calloc(nc, sizeof *mn), (*mx)[A_COUNT] = calloc(nc, sizeof *mx);
    for (size_t c = 0; c < nc; c++)
        for (int a = 0; a < A_COUNT; a++) {
            if (!g_have[a]) { mt[c][a] = mc[c][a] = mr[c][a] = NAN; continue; }
            double x[MAXREP], y[MAXREP], z[MAXREP];
            for (int r = 0; r < reps; r++) { x[r] = M[IDX(c, a, r)].t; y[r] = M[IDX(c, a, r)].cpu; z[r] = M[IDX(c, a, r)].rss; }
            mt[c][a] = nm_stats_median(x, (size_t)reps);
            mc[c][a] = nm_stats_median(y, (size_t)reps);
            mr[c][a] = nm_stats_median(z, (size_t)reps);
            mn[c][a] = nm_stats_min(x, (size_t)reps);
            mx[c][a] = nm_stats_max(x, (size_t)reps);
            if (a == A_SM && mx[c][a] / mn[c][a] > spread_max) spread_max = mx[c][a] / mn[c][a];
        }
    for (size_t c = 0; c < nc; c++)
        for (int a = 0; a < A_COUNT; a++) {
            if (!g_have[a]) continue;
            nm_bench_row *row = nm_bench_row_new(b);
            nm_bench_row_str(row, "workload", k_work[cs[c].w].name);
            nm_bench_row_num(row, "threads", cs[c].threads);
            nm_bench_row_str(row, "allocator", k_alloc[a]);
            nm_bench_row_num(row, "time_s", mt[c][a]);
            nm_bench_row_num(row, "time_min_s", mn[c][a]);
            nm_bench_row_num(row, "time_max_s", mx[c][a]);
            nm_bench_row_num(row, "cpu_s", mc[c][a]);
            nm_bench_row_num(row, "rss_mib", mr[c][a]);
            if (g_have[A_MI]) {
                nm_bench_row_num(row, "time_vs_mimalloc", mt[c][a] / mt[c][A_MI]);
                nm_bench_row_num(row, "cpu_vs_mimalloc", mc[c][a] / mc[c][A_MI]);
                nm_bench_row_num(row, "rss_vs_mimalloc", mr[c][a] / mr[c][A_MI]);
            }
            if (a != A_SM) {
                nm_bench_row_num(row, "speedmalloc_time_ratio", mt[c][A_SM] / mt[c][a]);
                nm_bench_row_num(row, "speedmalloc_cpu_ratio", mc[c][A_SM] / mc[c][a]);
            }
        }
    free(mn);
    free(mx);
    static const char *keyname[A_COUNT] = {NULL, "glibc", "jemalloc", "tcmalloc", "mimalloc", NULL};
    for (int a = A_GLIBC; a <= A_MI; a++) {
        if (!g_have[a]) continue;
        for (int t = 1; t <= 2; t++) {
            double rt[NWORK * 2], rc[NWORK * 2];
            size_t n = 0;
            for (size_t c = 0; c < nc; c++) {
                if (cs[c].threads != t) continue;
                rt[n] = mt[c][A_SM] / mt[c][a];
                rc[n++] = mc[c][A_SM] / mc[c][a];
            }
            if (!n) continue;
            char key[64];
            snprintf(key, sizeof key, "time_ratio_vs_%s_%dt", keyname[a], t);
            nm_bench_summary_num(b, key, nm_stats_geomean(rt, n));
            snprintf(key, sizeof key, "cpu_ratio_vs_%s_%dt", keyname[a], t);
            nm_bench_summary_num(b, key, nm_stats_geomean(rc, n));
        }
    }
    if (g_have[A_MI]) {
        double tmax = 0, cmax = 0, rr[NWORK * 2];
        size_t wt = 0, wc = 0;
        for (size_t c = 0; c < nc; c++) {
            double x = mt[c][A_SM] / mt[c][A_MI], y = mc[c][A_SM] / mc[c][A_MI];
            if (x > tmax) { tmax = x; wt = c; }
            if (y > cmax) { cmax = y; wc = c; }
            rr[c] = mr[c][A_SM] / mr[c][A_MI];
        }
        char what[64];
        nm_bench_summary_num(b, "time_ratio_vs_mimalloc_max", tmax);
        snprintf(what, sizeof what, "%s %dt", k_work[cs[wt].w].name, cs[wt].threads);
        nm_bench_summary_str(b, "time_ratio_vs_mimalloc_max_workload", what);
        nm_bench_summary_num(b, "cpu_ratio_vs_mimalloc_max", cmax);
        snprintf(what, sizeof what, "%s %dt", k_work[cs[wc].w].name, cs[wc].threads);
        nm_bench_summary_str(b, "cpu_ratio_vs_mimalloc_max_workload", what);
        nm_bench_summary_num(b, "rss_ratio_vs_mimalloc", nm_stats_geomean(rr, nc));
    }
    nm_bench_summary_num(b, "spread_max", spread_max);
    free(mt); free(mc); free(mr); free(M);
    return 0;
}
#endif

#ifdef SM_SUITE_CONTENTION
/* ---- speedmalloc-contention -------------------------------------------------------------
 * The same workloads while N CPU-bound processes share the machine (N = 1, and the number
 * of CPUs: the cores oversubscribed), every allocator under the same contention. The hogs
 * are plain busy loops at the same priority, started before and stopped after each level. */
static pid_t start_hog(int cpu)
{
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (cpu >= 0) {
            cpu_set_t set;
            CPU_ZERO(&set);
            CPU_SET(cpu, &set);
            sched_setaffinity(0, sizeof set, &set);
        }
        volatile unsigned long x = 0;
        for (;;) x++;
    }
    return pid;
}

/* One case's repetitions (contiguous) summarized: wall-time median, min and max, process CPU
 * and RSS medians, and the spread of the timed section's CPU (the wall time is the section's;
 * the whole process's CPU also counts exec and loading, a few ms of page-cache luck). */
typedef struct { double t, tmin, tmax, cpu, rss, cspread; } rep_stats;
static rep_stats rep_stats_of(const meas *m, int reps)
{
    double x[MAXREP], y[MAXREP], z[MAXREP], sc[MAXREP];
    for (int r = 0; r < reps; r++) { x[r] = m[r].t; y[r] = m[r].cpu; z[r] = m[r].rss; sc[r] = m[r].scpu; }
    size_t n = (size_t)reps;
    return (rep_stats){nm_stats_median(x, n), nm_stats_min(x, n), nm_stats_max(x, n), nm_stats_median(y, n),
                       nm_stats_median(z, n), nm_stats_max(sc, n) / nm_stats_min(sc, n)};
}
/* A row of speedmalloc-contention: the case, the hog level and the repetitions' figures. */
static nm_bench_row *contention_row(nm_bench *b, const char *work, int threads, const char *cname, unsigned nh, int l,
                                    const char *alloc, const rep_stats *s)
{
    nm_bench_row *row = nm_bench_row_new(b);
    nm_bench_row_str(row, "workload", work);
    nm_bench_row_num(row, "threads", threads);
    nm_bench_row_str(row, "case", cname);
    nm_bench_row_num(row, "hogs", nh);
    nm_bench_row_str(row, "hogs_level", l == 0 ? "1" : "ncpu");
    nm_bench_row_str(row, "allocator", alloc);
    nm_bench_row_num(row, "time_s", s->t);
    nm_bench_row_num(row, "time_min_s", s->tmin);
    nm_bench_row_num(row, "time_max_s", s->tmax);
    nm_bench_row_num(row, "wall_spread", s->tmax / s->tmin);
    nm_bench_row_num(row, "cpu_spread", s->cspread);
    nm_bench_row_num(row, "cpu_s", s->cpu);
    return row;
}

int nm_suite_speedmalloc_contention(nm_bench *b)
{
    setup_allocators(b);
    if (!g_have[A_SM]) return nm_fail(NM_ENOENT, "libspeedmalloc.so not found at %s", g_lib[A_SM]);
    char prog[2100];
    nm_err err = workload_prog(prog, sizeof prog);
    if (err) return err;
    const bool quick = nm_bench_quick(b);
    const int reps = (int)nm_bench_param_num(b, "reps", quick ? 3 : 5);
    /* runs of a few hundred ms span many scheduler time slices, so one slice less or more
     * does not decide a run's time */
    const double scale = nm_bench_param_num(b, "scale", quick ? 0.05 : 0.5);
    const unsigned ncpu = nm_nproc();
    if (reps < 1 || reps > MAXREP) return nm_fail(NM_EINVAL, "reps must be 1..%d", MAXREP);
    /* pin=1: workload thread i on CPU i mod ncpu, hog h on CPU h mod ncpu. Without it the
     * scheduler places the threads anew in every run, and for workloads whose threads pass
     * blocks to each other that placement alone moves the CPU time 3-8x, for every allocator:
     * both threads on one CPU keep the blocks in its cache, on two CPUs every block's lines
     * cross between the cores (docs/speedmalloc.md, "Where the contention spread comes
     * from"). Pinned, every repetition gets the cross-core placement (whether the threads'
     * time slices overlap still varies under two hogs); off by default, so that the suite
     * keeps measuring what an unpinned program meets. */
    const bool pin = nm_bench_param_num(b, "pin", 0) != 0;
    /* aa=1 (default): mimalloc runs twice per repetition, as itself and as its "A/A copy"; the
     * copy's ratios to mimalloc are the noise floor of the ratios to mimalloc on this machine
     * in this run (contention_time_ratio_aa_max beside contention_time_ratio_vs_mimalloc_max) */
    if (g_have[A_MI] && nm_bench_param_num(b, "aa", 1) != 0) {
        snprintf(g_lib[A_MI2], PATH_MAX, "%s", g_lib[A_MI]);
        g_have[A_MI2] = true;
    }
    char controls[256];
    snprintf(controls, sizeof controls, "xmalloc-floor (xmalloc-test's exchange, no allocator) after xmalloc-test 2t (when selected) "
             "in every repetition: contention_spread_floor; %s", g_have[A_MI2] ? "mimalloc (A/A copy) in the rotation: "
             "contention_time_ratio_aa_max" : "no A/A copy (aa=0 or mimalloc missing)");
    nm_bench_config_str(b, "controls", controls);
    unsigned levels[2] = {1, ncpu > 1 ? ncpu : 2};
    int nlev = levels[1] == levels[0] ? 1 : 2;
    nm_bench_config_num(b, "repetitions", reps);
    nm_bench_config_num(b, "scale", scale);
    nm_bench_config_num(b, "host_cpus", ncpu);
    nm_bench_config_str(b, "hogs", "busy-loop processes at the same priority: 1, then one per CPU (oversubscribed)");
    nm_bench_config_str(b, "placement", pin ? "pinned: workload thread i on CPU i mod ncpu (threads it creates inherit it), "
                                              "hog h on CPU h mod ncpu; SpeedMalloc's server thread unpinned"
                                            : "the scheduler's (unpinned)");
    if (pin) {
        char list[256] = "";
        for (unsigned i = 0, n = 0; i < ncpu && n + 8 < sizeof list; i++) n += (unsigned)snprintf(list + n, sizeof list - n, i ? ",%u" : "%u", i);
        setenv("NEARMEM_WL_PIN", list, 1);
    }
    nm_bench_config_str(b, "statistic", "median over repetitions (allocators in turn); cpu_spread = max/min of the CPU time "
                                        "(all threads) of the timed section of one (workload, threads, hogs, allocator) over its "
                                        "repetitions; wall_spread: the same of its wall time, which includes waiting for a CPU");
    nm_bench_plot_spec(b, "[{\"title\":\"cores oversubscribed: time / time(mimalloc)\",\"x\":\"case\",\"y\":\"time_vs_mimalloc\","
                          "\"series\":\"allocator\",\"kind\":\"bar\",\"filter\":{\"hogs_level\":\"ncpu\"}},"
                          "{\"title\":\"one hog: time / time(mimalloc)\",\"x\":\"case\",\"y\":\"time_vs_mimalloc\","
                          "\"series\":\"allocator\",\"kind\":\"bar\",\"filter\":{\"hogs_level\":\"1\"}},"
                          "{\"title\":\"CPU-time spread (max/min over repetitions)\",\"x\":\"case\",\"y\":\"cpu_spread\","
                          "\"series\":\"allocator\",\"kind\":\"bar\"}]");
    wcase cs[NWORK * 2];
    size_t nc = make_cases(b, cs);
    if (!nc) return nm_fail(NM_EINVAL, "no workload selected");
    meas *M = calloc((size_t)nlev * nc * A_COUNT * MAXREP, sizeof *M);
    if (!M) return nm_fail(NM_ENOMEM, "out of memory");
    /* The floor of the spread: xmalloc-floor (sm_workloads.c) is xmalloc-test's exchange with
     * an allocator that costs nothing, run without preload right after xmalloc-test 2t in every
     * repetition, under the same hogs. Its CPU spread is what the workload's own traffic puts
     * into any allocator's spread on this machine in this run (docs/speedmalloc.md, "The floor
     * of the spread, measured"). */
    int floor_case = -1;
    for (size_t c = 0; c < nc; c++)
        if (cs[c].threads == 2 && strcmp(k_work[cs[c].w].name, "xmalloc-test") == 0) floor_case = (int)c;
    meas F[2][MAXREP];
    double floor_max = 0;
    char floor_what[96] = "";
    double tmax = 0, smax = 0, smax_mi = 0, gm_t[2] = {0, 0}, gm_c[2] = {0, 0};
    double cmax = 0, cmax_mi = 0; /* CPU-time spread (the key), wall spread beside */
    double aamax = 0;             /* the A/A control's largest time ratio */
    char tmax_what[96] = "", smax_what[96] = "", cmax_what[96] = "", aamax_what[96] = "";
    for (int l = 0; l < nlev && !err; l++) {
        pid_t hog[64];
        unsigned nh = levels[l] < 64 ? levels[l] : 64;
        for (unsigned h = 0; h < nh; h++) hog[h] = start_hog(pin ? (int)(h % ncpu) : -1);
        usleep(200000);
        meas *L = M + (size_t)l * nc * A_COUNT * MAXREP;
        for (int rep = 0; rep < reps && !err; rep++) {
            for (size_t c = 0; c < nc && !err; c++) {
                for (int k = 0; k < A_COUNT && !err; k++) {
                    int a = (k + rep + (int)c) % A_COUNT;
                    if (!g_have[a]) continue;
                    err = run_workload(prog, k_work[cs[c].w].name, cs[c].threads, a, scale, nm_bench_seed(b), &L[IDX(c, a, rep)]);
                }
                if ((int)c == floor_case && !err)
                    err = run_workload(prog, "xmalloc-floor", 2, A_GLIBC, scale, nm_bench_seed(b), &F[l][rep]);
            }
            nm_bench_progress(b, "%u hog(s): rep %d/%d done", nh, rep + 1, reps);
        }
        for (unsigned h = 0; h < nh; h++) if (hog[h] > 0) { kill(hog[h], SIGKILL); waitpid(hog[h], NULL, 0); }
        if (err) break;
        double lt[NWORK * 2], lc[NWORK * 2];
        size_t ln = 0;
        for (size_t c = 0; c < nc; c++) {
            rep_stats st[A_COUNT] = {{0}};
            for (int a = 0; a < A_COUNT; a++)
                if (g_have[a]) st[a] = rep_stats_of(&L[IDX(c, a, 0)], reps);
            char cname[64];
            snprintf(cname, sizeof cname, "%s %dt", k_work[cs[c].w].name, cs[c].threads);
            for (int a = 0; a < A_COUNT; a++) {
                if (!g_have[a]) continue;
                double spread = st[a].tmax / st[a].tmin;
                nm_bench_row *row = contention_row(b, k_work[cs[c].w].name, cs[c].threads, cname, nh, l, k_alloc[a], &st[a]);
                nm_bench_row_num(row, "rss_mib", st[a].rss);
                if (g_have[A_MI]) {
                    nm_bench_row_num(row, "time_vs_mimalloc", st[a].t / st[A_MI].t);
                    nm_bench_row_num(row, "cpu_vs_mimalloc", st[a].cpu / st[A_MI].cpu);
                }
                if (a == A_SM && spread > smax) { smax = spread; snprintf(smax_what, sizeof smax_what, "%s, %u hog(s)", cname, nh); }
                if (a == A_MI && spread > smax_mi) smax_mi = spread;
                if (a == A_SM && st[a].cspread > cmax) { cmax = st[a].cspread; snprintf(cmax_what, sizeof cmax_what, "%s, %u hog(s)", cname, nh); }
                if (a == A_MI && st[a].cspread > cmax_mi) cmax_mi = st[a].cspread;
            }
            if (!g_have[A_MI]) continue;
            double x = st[A_SM].t / st[A_MI].t;
            lt[ln] = x;
            lc[ln++] = st[A_SM].cpu / st[A_MI].cpu;
            if (x > tmax) { tmax = x; snprintf(tmax_what, sizeof tmax_what, "%s %dt, %u hog(s)", k_work[cs[c].w].name, cs[c].threads, nh); }
            if (g_have[A_MI2] && st[A_MI2].t / st[A_MI].t > aamax) {
                aamax = st[A_MI2].t / st[A_MI].t;
                snprintf(aamax_what, sizeof aamax_what, "%s %dt, %u hog(s)", k_work[cs[c].w].name, cs[c].threads, nh);
            }
        }
        if (ln) { gm_t[l] = nm_stats_geomean(lt, ln); gm_c[l] = nm_stats_geomean(lc, ln); }
        if (floor_case >= 0) {
            rep_stats fl = rep_stats_of(F[l], reps);
            contention_row(b, "xmalloc-floor", 2, "xmalloc-floor 2t", nh, l, "none (the floor)", &fl);
            if (fl.cspread > floor_max) { floor_max = fl.cspread; snprintf(floor_what, sizeof floor_what, "xmalloc-floor 2t, %u hog(s)", nh); }
        }
    }
    if (pin) unsetenv("NEARMEM_WL_PIN");
    free(M);
    if (err) return err;
    if (g_have[A_MI]) {
        nm_bench_summary_num(b, "contention_time_ratio_vs_mimalloc_max", tmax);
        nm_bench_summary_str(b, "contention_time_ratio_vs_mimalloc_max_case", tmax_what);
        for (int l = 0; l < nlev; l++) {
            char key[80];
            snprintf(key, sizeof key, "contention_time_ratio_vs_mimalloc_%s", l == 0 ? "1hog" : "ncpu_hogs");
            nm_bench_summary_num(b, key, gm_t[l]);
            snprintf(key, sizeof key, "contention_cpu_ratio_vs_mimalloc_%s", l == 0 ? "1hog" : "ncpu_hogs");
            nm_bench_summary_num(b, key, gm_c[l]);
        }
        if (g_have[A_MI2]) {
            nm_bench_summary_num(b, "contention_time_ratio_aa_max", aamax);
            nm_bench_summary_str(b, "contention_time_ratio_aa_max_case", aamax_what);
        }
        nm_bench_summary_num(b, "contention_spread_max_mimalloc", cmax_mi);
        nm_bench_summary_num(b, "contention_wall_spread_max_mimalloc", smax_mi);
    }
    /* The spread key is over process CPU time: on a machine that other programs share, a
     * repetition's wall time also counts the time it waited for a CPU, which those programs
     * decide (mimalloc's own wall spread reached 10x beside 1.1-1.5x of CPU time in the same
     * runs; pairing each SpeedMalloc run with the mimalloc run next to it did not cancel it:
     * up to 16x). CPU time is the work the allocator made the process do, and issue 18's
     * collapse showed there (9.8 s against 1.7 s; a server spinning 24 s). A collapse by
     * waiting without spinning shows in the time ratios; the wall spread stays beside. */
    nm_bench_summary_num(b, "contention_spread_max", cmax);
    nm_bench_summary_str(b, "contention_spread_max_case", cmax_what);
    nm_bench_summary_num(b, "contention_wall_spread_max", smax);
    nm_bench_summary_str(b, "contention_wall_spread_max_case", smax_what);
    if (floor_case >= 0) {
        nm_bench_summary_num(b, "contention_spread_floor", floor_max);
        nm_bench_summary_str(b, "contention_spread_floor_case", floor_what);
    }
    return 0;
}
#endif

#ifdef SM_SUITE_REDIS
/* ---- speedmalloc-redis ------------------------------------------------------------------
 * Debian's redis-server 7.0 under each allocator, driven by redis-benchmark with pipelined
 * requests (-P 16, 50 connections), so that the server's work, not the loopback network,
 * is what is measured; several value sizes. The server's CPU time (user + system of all
 * its threads, the SpeedMalloc server thread included) is read from
 * /proc/PID/task/x/schedstat around each test. */
static int free_port(void)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0) return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK), .sin_port = 0};
    socklen_t len = sizeof a;
    int port = -1;
    if (bind(s, (struct sockaddr *)&a, sizeof a) == 0 && getsockname(s, (struct sockaddr *)&a, &len) == 0) port = ntohs(a.sin_port);
    close(s);
    return port;
}
static bool port_ready(int port)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0) return false;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK), .sin_port = htons((uint16_t)port)};
    bool ok = connect(s, (struct sockaddr *)&a, sizeof a) == 0;
    close(s);
    return ok;
}
/* CPU time (ns) of every live thread of pid, from the scheduler's accounting. */
static double proc_threads_cpu_s(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (!d) return NAN;
    double sum = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char p2[320];
        snprintf(p2, sizeof p2, "/proc/%d/task/%s/schedstat", (int)pid, e->d_name);
        FILE *f = fopen(p2, "r");
        if (!f) continue;
        unsigned long long run = 0;
        if (fscanf(f, "%llu", &run) == 1) sum += (double)run * 1e-9;
        fclose(f);
    }
    closedir(d);
    return sum;
}

static const char *k_redis_tests[] = {"SET", "GET", "LPUSH", "LPOP", "SADD", "ZADD"};
#define NRT 6
#define NSZ_MAX 4

/* One server under allocator a, one value size: ops/s and server CPU per request, per test. */
static nm_err redis_once(int a, const char *dir, long requests, int size, int pipeline, double ops[NRT], double cpu_us[NRT], double *rss_mib)
{
    int port = free_port();
    if (port < 0) return nm_fail(NM_EIO, "no free localhost port");
    char port_s[16], req_s[32], size_s[16], keys_s[32], pipe_s[16];
    snprintf(port_s, sizeof port_s, "%d", port);
    snprintf(req_s, sizeof req_s, "%ld", requests);
    snprintf(size_s, sizeof size_s, "%d", size);
    snprintf(keys_s, sizeof keys_s, "%ld", requests < 100000 ? requests : 100000);
    snprintf(pipe_s, sizeof pipe_s, "%d", pipeline);
    pid_t srv = fork();
    if (srv < 0) return nm_fail(NM_EIO, "fork: %s", strerror(errno));
    if (srv == 0) {
        int dn = open("/dev/null", O_WRONLY);
        if (dn >= 0) { dup2(dn, 1); dup2(dn, 2); }
        if (a == A_JE) unsetenv("LD_PRELOAD"); /* Debian's redis links libjemalloc itself */
        else setenv("LD_PRELOAD", g_lib[a], 1);
        if (a == A_SM && g_sm_env[0]) apply_env(g_sm_env);
        execl("/usr/bin/redis-server", "redis-server", "--port", port_s, "--bind", "127.0.0.1", "--save", "",
              "--appendonly", "no", "--dir", dir, "--protected-mode", "yes", (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 500 && !port_ready(port); i++) usleep(10000);
    nm_err err = 0;
    if (!port_ready(port)) err = nm_fail(NM_EIO, "redis-server under %s did not start on port %d", k_alloc[a], port);
    for (int t = 0; t < NRT && !err; t++) {
        char tl[16];
        snprintf(tl, sizeof tl, "%s", k_redis_tests[t]);
        for (char *p = tl; *p; p++) *p = (char)(*p - 'A' + 'a');
        char *argv[] = {"/usr/bin/redis-benchmark", "-h", "127.0.0.1", "-p", port_s, "-n", req_s, "-c", "50",
                        "-P", pipe_s, "-d", size_s, "-r", keys_s, "-t", tl, "--csv", NULL};
        static char out[16384];
        double c0 = proc_threads_cpu_s(srv);
        int rc = run_child(argv, -1, out, sizeof out, NULL);
        double c1 = proc_threads_cpu_s(srv);
        char pat[32];
        snprintf(pat, sizeof pat, "\"%s\",\"", k_redis_tests[t]);
        const char *p = strstr(out, pat);
        ops[t] = p ? atof(p + strlen(pat)) : NAN;
        cpu_us[t] = (c1 - c0) * 1e6 / (double)requests;
        if (!(ops[t] > 0) || !(c1 >= c0)) err = nm_fail(NM_EFAULT, "redis-benchmark (exit %d) gave no %s figure under %s", rc, k_redis_tests[t], k_alloc[a]);
    }
    kill(srv, SIGTERM);
    int st;
    struct rusage ru;
    wait4(srv, &st, 0, &ru);
    *rss_mib = (double)ru.ru_maxrss / 1024.0;
    return err;
}

int nm_suite_speedmalloc_redis(nm_bench *b)
{
    setup_allocators(b);
    if (access("/usr/bin/redis-server", X_OK) != 0 || access("/usr/bin/redis-benchmark", X_OK) != 0)
        return nm_fail(NM_ENOENT, "redis-server/redis-benchmark missing (scripts/install-deps.sh --bench)");
    if (!g_have[A_SM]) return nm_fail(NM_ENOENT, "libspeedmalloc.so not found at %s", g_lib[A_SM]);
    g_have[A_JE] = true; /* redis as shipped links jemalloc */
    const bool quick = nm_bench_quick(b);
    const int reps = (int)nm_bench_param_num(b, "reps", quick ? 3 : 5);
    const long requests = (long)nm_bench_param_num(b, "requests", quick ? 50000 : 200000);
    const int pipeline = (int)nm_bench_param_num(b, "pipeline", 16);
    const char *sizes_s = nm_bench_param(b, "sizes", quick ? "64" : "16,256,2048");
    int sizes[NSZ_MAX], nsz = 0;
    for (const char *p = sizes_s; *p && nsz < NSZ_MAX;) {
        sizes[nsz++] = atoi(p);
        const char *q = strchr(p, ',');
        if (!q) break;
        p = q + 1;
    }
    if (reps < 1 || reps > MAXREP || nsz < 1) return nm_fail(NM_EINVAL, "reps must be 1..%d, sizes a list of value sizes", MAXREP);
    nm_bench_config_num(b, "repetitions", reps);
    nm_bench_config_num(b, "requests_per_test", (double)requests);
    nm_bench_config_num(b, "clients", 50);
    nm_bench_config_num(b, "pipeline", pipeline);
    nm_bench_config_str(b, "value_sizes", sizes_s);
    nm_bench_config_str(b, "redis", "Debian redis-server 7.0, linked against libjemalloc.so.2 ('jemalloc' = as shipped). It "
                                    "calls malloc/calloc/realloc/free/malloc_usable_size by their standard names, which "
                                    "LD_PRELOAD interposes; nallocx (size rounding), mallctl and malloc_stats_print (statistics) "
                                    "still go to jemalloc, whose INFO memory fields are then meaningless");
    nm_bench_config_str(b, "statistic", "median over repetitions of redis-benchmark ops/s and of the server's CPU time per "
                                        "request (all server threads, /proc/PID/task/*/schedstat)");
    nm_bench_plot_spec(b, "[{\"title\":\"redis-benchmark -P 16: ops/s / ops/s(jemalloc)\",\"x\":\"test\",\"y\":\"ops_vs_jemalloc\","
                          "\"series\":\"allocator\",\"kind\":\"bar\"},"
                          "{\"title\":\"server CPU per request / jemalloc's\",\"x\":\"test\",\"y\":\"cpu_vs_jemalloc\","
                          "\"series\":\"allocator\",\"kind\":\"bar\"}]");
    const char *dir = nm_bench_tmpdir(b);
    static double ops[A_COUNT][NSZ_MAX][NRT][MAXREP], cpu[A_COUNT][NSZ_MAX][NRT][MAXREP], rssm[A_COUNT][NSZ_MAX][MAXREP];
    int order[] = {A_SM, A_JE, A_MI, A_TC};
    for (int rep = 0; rep < reps; rep++) {
        for (int k = 0; k < 4; k++) {
            int a = order[(k + rep) % 4];
            if (!g_have[a]) continue;
            for (int s = 0; s < nsz; s++) {
                long req = requests;
                if ((double)req * sizes[s] > 256.0 * 1048576) req = (long)(256.0 * 1048576 / sizes[s]); /* LPUSH keeps them all */
                double o[NRT], c[NRT], rss = NAN;
                nm_err e = redis_once(a, dir, req, sizes[s], pipeline, o, c, &rss);
                if (e) return e;
                for (int t = 0; t < NRT; t++) { ops[a][s][t][rep] = o[t]; cpu[a][s][t][rep] = c[t]; }
                rssm[a][s][rep] = rss;
            }
        }
        nm_bench_progress(b, "rep %d/%d done", rep + 1, reps);
    }
    double ro[NSZ_MAX * NRT], rc[NSZ_MAX * NRT], rom[NSZ_MAX * NRT], rcm[NSZ_MAX * NRT], rr[NSZ_MAX];
    size_t n = 0;
    for (int s = 0; s < nsz; s++) {
        for (int t = 0; t < NRT; t++) {
            double mo[A_COUNT] = {NAN, NAN, NAN, NAN, NAN, NAN}, mc[A_COUNT] = {NAN, NAN, NAN, NAN, NAN, NAN};
            for (int k = 0; k < 4; k++) {
                int a = order[k];
                if (!g_have[a]) continue;
                mo[a] = nm_stats_median(ops[a][s][t], (size_t)reps);
                mc[a] = nm_stats_median(cpu[a][s][t], (size_t)reps);
            }
            for (int k = 0; k < 4; k++) {
                int a = order[k];
                if (!g_have[a]) continue;
                char tn[32];
                snprintf(tn, sizeof tn, "%s %dB", k_redis_tests[t], sizes[s]);
                nm_bench_row *r = nm_bench_row_new(b);
                nm_bench_row_str(r, "allocator", k_alloc[a]);
                nm_bench_row_str(r, "test", tn);
                nm_bench_row_num(r, "value_size", sizes[s]);
                nm_bench_row_num(r, "ops_per_s", mo[a]);
                nm_bench_row_num(r, "ops_min", nm_stats_min(ops[a][s][t], (size_t)reps));
                nm_bench_row_num(r, "ops_max", nm_stats_max(ops[a][s][t], (size_t)reps));
                nm_bench_row_num(r, "server_cpu_us_per_request", mc[a]);
                nm_bench_row_num(r, "ops_vs_jemalloc", mo[a] / mo[A_JE]);
                nm_bench_row_num(r, "cpu_vs_jemalloc", mc[a] / mc[A_JE]);
                nm_bench_row_num(r, "server_peak_rss_mib", nm_stats_median(rssm[a][s], (size_t)reps));
            }
            ro[n] = mo[A_SM] / mo[A_JE];
            rc[n] = mc[A_SM] / mc[A_JE];
            rom[n] = g_have[A_MI] ? mo[A_SM] / mo[A_MI] : NAN;
            rcm[n] = g_have[A_MI] ? mc[A_SM] / mc[A_MI] : NAN;
            n++;
        }
        rr[s] = nm_stats_median(rssm[A_SM][s], (size_t)reps) / nm_stats_median(rssm[A_JE][s], (size_t)reps);
    }
    nm_bench_summary_num(b, "redis_ops_ratio_vs_jemalloc", nm_stats_geomean(ro, n));
    nm_bench_summary_num(b, "redis_cpu_ratio_vs_jemalloc", nm_stats_geomean(rc, n));
    nm_bench_summary_num(b, "redis_rss_ratio_vs_jemalloc", nm_stats_geomean(rr, (size_t)nsz));
    if (g_have[A_MI]) {
        nm_bench_summary_num(b, "redis_ops_ratio_vs_mimalloc", nm_stats_geomean(rom, n));
        nm_bench_summary_num(b, "redis_cpu_ratio_vs_mimalloc", nm_stats_geomean(rcm, n));
    }
    return 0;
}
#endif
