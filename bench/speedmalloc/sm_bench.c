/* Suites `speedmalloc` and `speedmalloc-redis`: SpeedMalloc against glibc,
 * jemalloc, tcmalloc and mimalloc (Debian's packages), each program run as a
 * separate process with the allocator in LD_PRELOAD (glibc: no preload).
 * All figures are host wall time and peak RSS measured on this machine, as
 * medians over repetitions; the allocators take turns within each repetition
 * so that load from other processes spreads over all of them. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nearmem/bench.h"
#include "nearmem/common.h"

enum { A_SM, A_GLIBC, A_JE, A_TC, A_MI, A_COUNT };
static const char *k_alloc[A_COUNT] = {"speedmalloc", "glibc", "jemalloc", "tcmalloc", "mimalloc"};
static const char *k_pkg[A_COUNT] = {NULL, NULL, "libjemalloc2", "libtcmalloc-minimal4", "libmimalloc2.0"};
static const char *k_soname[A_COUNT] = {NULL, NULL, "libjemalloc.so.2", "libtcmalloc_minimal.so.4", "libmimalloc.so.2"};

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

/* Runs argv with LD_PRELOAD=preload (NULL: none); captures stdout; returns the exit status or -1. */
static int run_child(char *const argv[], const char *preload, char *out, size_t outn, long *maxrss_kb)
{
    int pfd[2];
    if (pipe(pfd) != 0) return -1;
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        dup2(pfd[1], 1);
        close(pfd[0]);
        close(pfd[1]);
        if (preload) setenv("LD_PRELOAD", preload, 1);
        else unsetenv("LD_PRELOAD");
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
    struct rusage ru;
    if (wait4(pid, &st, 0, &ru) != pid) return -1;
    if (maxrss_kb) *maxrss_kb = ru.ru_maxrss;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

#ifdef SM_SUITE_MAIN
static const char *k_work[] = {"larson", "xmalloc-test", "cache-scratch", "sh6bench", "sh8bench", "mstress", "alloc-test", "glibc-thread"};
#define NWORK (sizeof k_work / sizeof k_work[0])
#endif
#define MAXREP 15

static char g_lib[A_COUNT][PATH_MAX];
static bool g_have[A_COUNT];

static void setup_allocators(nm_bench *b)
{
    char dir[2048];
    self_dir(dir, sizeof dir);
    snprintf(g_lib[A_SM], PATH_MAX, "%s", nm_bench_param(b, "lib", ""));
    if (!g_lib[A_SM][0]) snprintf(g_lib[A_SM], PATH_MAX, "%s/../lib/libspeedmalloc.so", dir);
    g_have[A_SM] = access(g_lib[A_SM], R_OK) == 0;
    g_have[A_GLIBC] = true;
    for (int a = A_JE; a < A_COUNT; a++) {
        find_peer(a, g_lib[a], PATH_MAX);
        g_have[a] = g_lib[a][0] != 0;
        char key[64];
        snprintf(key, sizeof key, "lib_%s", k_alloc[a]);
        nm_bench_config_str(b, key, g_have[a] ? g_lib[a] : "missing (scripts/install-deps.sh --bench)");
    }
    nm_bench_config_str(b, "lib_speedmalloc", g_lib[A_SM]);
}

#ifdef SM_SUITE_MAIN
int nm_suite_speedmalloc(nm_bench *b)
{
    setup_allocators(b);
    if (!g_have[A_SM]) return nm_fail(NM_ENOENT, "libspeedmalloc.so not found at %s", g_lib[A_SM]);
    char dir[2048], work[2100];
    self_dir(dir, sizeof dir);
    snprintf(work, sizeof work, "%s/nearmem-sm-workload", dir);
    if (access(work, X_OK) != 0) return nm_fail(NM_ENOENT, "workload program %s not found", work);

    const bool quick = nm_bench_quick(b);
    const int reps = (int)nm_bench_param_num(b, "reps", quick ? 3 : 5);
    const double scale = nm_bench_param_num(b, "scale", quick ? 0.1 : 1.0);
    if (reps < 1 || reps > MAXREP) return nm_fail(NM_EINVAL, "reps must be 1..%d", MAXREP);
    nm_bench_config_num(b, "repetitions", reps);
    nm_bench_config_num(b, "scale", scale);
    nm_bench_config_num(b, "host_cpus", nm_nproc());
    nm_bench_config_str(b, "statistic", "median over repetitions of host wall time (workload section) and peak RSS (wait4)");
    nm_bench_config_str(b, "note", "1t = one application thread + the SpeedMalloc server thread: the paper's main core + support core");
    nm_bench_plot_spec(b, "[{\"title\":\"1 application thread: time / time(glibc)\",\"x\":\"workload\",\"y\":\"time_vs_glibc\","
                          "\"series\":\"allocator\",\"kind\":\"bar\",\"filter\":{\"threads\":1}},"
                          "{\"title\":\"2 application threads: time / time(glibc)\",\"x\":\"workload\",\"y\":\"time_vs_glibc\","
                          "\"series\":\"allocator\",\"kind\":\"bar\",\"filter\":{\"threads\":2}},"
                          "{\"title\":\"peak RSS (MiB), 1 thread\",\"x\":\"workload\",\"y\":\"rss_mib\",\"series\":\"allocator\","
                          "\"kind\":\"bar\",\"filter\":{\"threads\":1}}]");

    static double t[NWORK][2][A_COUNT][MAXREP], rss[NWORK][2][A_COUNT][MAXREP];
    char scale_s[32], seed_s[32];
    snprintf(scale_s, sizeof scale_s, "%g", scale);
    snprintf(seed_s, sizeof seed_s, "%llu", (unsigned long long)nm_bench_seed(b));
    for (int rep = 0; rep < reps; rep++) {
        for (size_t w = 0; w < NWORK; w++) {
            for (int ti = 0; ti < 2; ti++) {
                char th[8];
                snprintf(th, sizeof th, "%d", ti + 1);
                for (int k = 0; k < A_COUNT; k++) {
                    int a = (k + rep + (int)w) % A_COUNT; /* rotate the order */
                    t[w][ti][a][rep] = rss[w][ti][a][rep] = NAN;
                    if (!g_have[a]) continue;
                    char *argv[] = {work, (char *)k_work[w], th, scale_s, seed_s, NULL};
                    char out[256];
                    long kb = 0;
                    int rc = run_child(argv, a == A_GLIBC ? NULL : g_lib[a], out, sizeof out, &kb);
                    unsigned long long ns = 0;
                    const char *e = strstr(out, "elapsed_ns=");
                    if (rc != 0 || !e || sscanf(e, "elapsed_ns=%llu", &ns) != 1)
                        return nm_fail(NM_EFAULT, "%s %s threads under %s failed (exit %d)", k_work[w], th, k_alloc[a], rc);
                    t[w][ti][a][rep] = (double)ns * 1e-9;
                    rss[w][ti][a][rep] = (double)kb / 1024.0;
                }
            }
            nm_bench_progress(b, "rep %d/%d %s done", rep + 1, reps, k_work[w]);
        }
    }
    /* medians, rows and the summary */
    double med_t[NWORK][2][A_COUNT], med_r[NWORK][2][A_COUNT];
    for (size_t w = 0; w < NWORK; w++)
        for (int ti = 0; ti < 2; ti++)
            for (int a = 0; a < A_COUNT; a++) {
                med_t[w][ti][a] = g_have[a] ? nm_stats_median(t[w][ti][a], (size_t)reps) : NAN;
                med_r[w][ti][a] = g_have[a] ? nm_stats_median(rss[w][ti][a], (size_t)reps) : NAN;
            }
    for (size_t w = 0; w < NWORK; w++)
        for (int ti = 0; ti < 2; ti++)
            for (int a = 0; a < A_COUNT; a++) {
                if (!g_have[a]) continue;
                nm_bench_row *r = nm_bench_row_new(b);
                nm_bench_row_str(r, "workload", k_work[w]);
                nm_bench_row_num(r, "threads", ti + 1);
                nm_bench_row_str(r, "allocator", k_alloc[a]);
                nm_bench_row_num(r, "time_s", med_t[w][ti][a]);
                nm_bench_row_num(r, "time_min_s", nm_stats_min(t[w][ti][a], (size_t)reps));
                nm_bench_row_num(r, "time_max_s", nm_stats_max(t[w][ti][a], (size_t)reps));
                nm_bench_row_num(r, "time_vs_glibc", med_t[w][ti][a] / med_t[w][ti][A_GLIBC]);
                nm_bench_row_num(r, "rss_mib", med_r[w][ti][a]);
                if (a != A_SM) nm_bench_row_num(r, "speedmalloc_time_ratio", med_t[w][ti][A_SM] / med_t[w][ti][a]);
            }
    static const char *keyname[A_COUNT] = {NULL, "glibc", "jemalloc", "tcmalloc", "mimalloc"};
    for (int a = A_GLIBC; a < A_COUNT; a++) {
        if (!g_have[a]) continue;
        for (int ti = 0; ti < 2; ti++) {
            double ratios[NWORK];
            for (size_t w = 0; w < NWORK; w++) ratios[w] = med_t[w][ti][A_SM] / med_t[w][ti][a];
            char key[64];
            snprintf(key, sizeof key, "time_ratio_vs_%s_%dt", keyname[a], ti + 1);
            nm_bench_summary_num(b, key, nm_stats_geomean(ratios, NWORK));
        }
    }
    if (g_have[A_MI]) {
        double rr[NWORK * 2];
        for (size_t w = 0; w < NWORK; w++)
            for (int ti = 0; ti < 2; ti++) rr[w * 2 + (size_t)ti] = med_r[w][ti][A_SM] / med_r[w][ti][A_MI];
        nm_bench_summary_num(b, "rss_ratio_vs_mimalloc", nm_stats_geomean(rr, NWORK * 2));
    }
    return 0;
}

#endif

#ifdef SM_SUITE_REDIS
/* ---- speedmalloc-redis ---------------------------------------------------------------- */
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

static const char *k_redis_tests[] = {"LPUSH", "RPUSH", "LPOP", "RPOP", "SADD", "SPOP"};
#define NRT 6

/* One bounded redis-benchmark run against a fresh server under allocator a: ops/s per test. */
static nm_err redis_once(nm_bench *b, int a, const char *dir, long requests, double rps[NRT], double *rss_mib)
{
    int port = free_port();
    if (port < 0) return nm_fail(NM_EIO, "no free localhost port");
    char port_s[16], req_s[32], dirarg[PATH_MAX];
    snprintf(port_s, sizeof port_s, "%d", port);
    snprintf(req_s, sizeof req_s, "%ld", requests);
    snprintf(dirarg, sizeof dirarg, "%s", dir);
    pid_t srv = fork();
    if (srv < 0) return nm_fail(NM_EIO, "fork: %s", strerror(errno));
    if (srv == 0) {
        int dn = open("/dev/null", O_WRONLY);
        if (dn >= 0) { dup2(dn, 1); dup2(dn, 2); }
        if (a == A_GLIBC || a == A_JE) unsetenv("LD_PRELOAD"); /* Debian's redis links libjemalloc itself */
        else setenv("LD_PRELOAD", g_lib[a], 1);
        execl("/usr/bin/redis-server", "redis-server", "--port", port_s, "--bind", "127.0.0.1", "--save", "",
              "--appendonly", "no", "--dir", dirarg, "--protected-mode", "yes", (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 500 && !port_ready(port); i++) usleep(10000);
    nm_err err = 0;
    if (!port_ready(port)) err = nm_fail(NM_EIO, "redis-server under %s did not start on port %d", k_alloc[a], port);
    if (!err) {
        char *argv[] = {"/usr/bin/redis-benchmark", "-h", "127.0.0.1", "-p", port_s, "-n", req_s, "-c", "50",
                        "-t", "lpush,rpush,lpop,rpop,sadd,spop", "--csv", NULL};
        static char out[16384];
        int rc = run_child(argv, NULL, out, sizeof out, NULL);
        for (int k = 0; k < NRT; k++) {
            rps[k] = NAN;
            char pat[32];
            snprintf(pat, sizeof pat, "\"%s\",\"", k_redis_tests[k]);
            const char *p = strstr(out, pat);
            if (p) rps[k] = atof(p + strlen(pat));
            if (!(rps[k] > 0)) err = nm_fail(NM_EFAULT, "redis-benchmark (exit %d) gave no %s figure under %s", rc, k_redis_tests[k], k_alloc[a]);
        }
    }
    kill(srv, SIGTERM);
    int st;
    struct rusage ru;
    wait4(srv, &st, 0, &ru);
    *rss_mib = (double)ru.ru_maxrss / 1024.0;
    (void)b;
    return err;
}

int nm_suite_speedmalloc_redis(nm_bench *b)
{
    setup_allocators(b);
    if (access("/usr/bin/redis-server", X_OK) != 0 || access("/usr/bin/redis-benchmark", X_OK) != 0)
        return nm_fail(NM_ENOENT, "redis-server/redis-benchmark missing (scripts/install-deps.sh --bench)");
    if (!g_have[A_SM]) return nm_fail(NM_ENOENT, "libspeedmalloc.so not found at %s", g_lib[A_SM]);
    const bool quick = nm_bench_quick(b);
    const int reps = (int)nm_bench_param_num(b, "reps", quick ? 3 : 5);
    const long requests = (long)nm_bench_param_num(b, "requests", quick ? 20000 : 100000);
    if (reps < 1 || reps > MAXREP) return nm_fail(NM_EINVAL, "reps must be 1..%d", MAXREP);
    nm_bench_config_num(b, "repetitions", reps);
    nm_bench_config_num(b, "requests_per_test", (double)requests);
    nm_bench_config_num(b, "clients", 50);
    nm_bench_config_str(b, "redis", "Debian redis-server 7.0 (links libjemalloc.so.2 dynamically, so LD_PRELOAD interposes "
                                    "malloc/free/realloc/malloc_usable_size; 'jemalloc' = the server as shipped)");
    nm_bench_config_str(b, "statistic", "median ops/s over repetitions, redis-benchmark on loopback");
    nm_bench_plot_spec(b, "[{\"title\":\"redis-benchmark ops/s (median)\",\"x\":\"test\",\"y\":\"ops_per_s\","
                          "\"series\":\"allocator\",\"kind\":\"bar\"}]");
    const char *dir = nm_bench_tmpdir(b);
    static double ops[A_COUNT][NRT][MAXREP], rssm[A_COUNT][MAXREP];
    int order[] = {A_SM, A_JE, A_MI, A_TC};
    for (int rep = 0; rep < reps; rep++) {
        for (int k = 0; k < 4; k++) {
            int a = order[(k + rep) % 4];
            if (!g_have[a] && a != A_JE) { for (int t = 0; t < NRT; t++) ops[a][t][rep] = NAN; continue; }
            double rps[NRT], rss;
            nm_err e = redis_once(b, a, dir, requests, rps, &rss);
            if (e) return e;
            for (int t = 0; t < NRT; t++) ops[a][t][rep] = rps[t];
            rssm[a][rep] = rss;
        }
        nm_bench_progress(b, "rep %d/%d done", rep + 1, reps);
    }
    double ratio[NRT];
    for (int k = 0; k < 4; k++) {
        int a = order[k];
        if (!g_have[a] && a != A_JE) continue;
        for (int t = 0; t < NRT; t++) {
            nm_bench_row *r = nm_bench_row_new(b);
            nm_bench_row_str(r, "allocator", k_alloc[a]);
            nm_bench_row_str(r, "test", k_redis_tests[t]);
            nm_bench_row_num(r, "ops_per_s", nm_stats_median(ops[a][t], (size_t)reps));
            nm_bench_row_num(r, "ops_min", nm_stats_min(ops[a][t], (size_t)reps));
            nm_bench_row_num(r, "ops_max", nm_stats_max(ops[a][t], (size_t)reps));
            nm_bench_row_num(r, "server_peak_rss_mib", nm_stats_median(rssm[a], (size_t)reps));
        }
    }
    for (int t = 0; t < NRT; t++) ratio[t] = nm_stats_median(ops[A_SM][t], (size_t)reps) / nm_stats_median(ops[A_JE][t], (size_t)reps);
    nm_bench_summary_num(b, "redis_ops_ratio_vs_jemalloc", nm_stats_geomean(ratio, NRT));
    if (g_have[A_MI]) {
        double rm[NRT];
        for (int t = 0; t < NRT; t++) rm[t] = nm_stats_median(ops[A_SM][t], (size_t)reps) / nm_stats_median(ops[A_MI][t], (size_t)reps);
        nm_bench_summary_num(b, "redis_ops_ratio_vs_mimalloc", nm_stats_geomean(rm, NRT));
    }
    return 0;
}
#endif
