/* nearmem-bench: runs a registered benchmark suite and writes its results.
 *
 *   nearmem-bench list
 *   nearmem-bench <suite> [--quick] [--json FILE] [--plot FILE] [--threads N]
 *                         [--seed S] [--set key=value]... [--quiet]
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_internal.h"
#include "nearmem/common/error.h"
#include "nearmem/common/json.h"
#include "nearmem/common/timer.h"

struct nm_registry_entry_bench_suite {
    const char *name;
    int (*fn)(nm_bench *);
};
extern const struct nm_registry_entry_bench_suite nm_registry_bench_suite[];

static void usage(FILE *f)
{
    fprintf(f,
            "usage: nearmem-bench list\n"
            "       nearmem-bench <suite> [--quick] [--json FILE] [--plot FILE] [--threads N]\n"
            "                             [--seed S] [--set key=value]... [--quiet]\n");
}

static const struct nm_registry_entry_bench_suite *find_suite(const char *name)
{
    for (const struct nm_registry_entry_bench_suite *e = nm_registry_bench_suite; e->name; e++)
        if (strcmp(e->name, name) == 0) return e;
    return NULL;
}

/* The CPU model line of /proc/cpuinfo, for the record of where a run happened. */
static void cpu_model(char *out, size_t n)
{
    snprintf(out, n, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) == 0) {
            char *c = strchr(line, ':');
            if (c) {
                c++;
                while (*c == ' ') c++;
                c[strcspn(c, "\n")] = '\0';
                snprintf(out, n, "%s", c);
            }
            break;
        }
    }
    fclose(f);
}

static size_t mem_total_bytes(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    return pages > 0 && psz > 0 ? (size_t)pages * (size_t)psz : 0;
}

/* The runner's own config entries: how and where the suite was run. */
static void record_run_config(nm_bench *b)
{
    char cpu[256], date[64], buf[1024];
    struct utsname u;
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &tm);
    cpu_model(cpu, sizeof cpu);
    if (uname(&u) != 0) memset(&u, 0, sizeof u);

    nm_bench_config_num(b, "quick", b->quick);
    nm_bench_config_num(b, "threads", b->threads);
    nm_bench_config_num(b, "seed", (double)b->seed);
    nm_bench_config_str(b, "date", date);
    nm_bench_config_str(b, "nearmem_version", NEARMEM_VERSION_STR);

    FILE *m = fmemopen(buf, sizeof buf, "w");
    if (m) {
        nm_json j;
        nm_json_init(&j, m, false);
        nm_json_begin_object(&j);
        nm_json_key(&j, "cpu");
        nm_json_string(&j, cpu);
        nm_json_key(&j, "nproc");
        nm_json_uint(&j, nm_nproc());
        nm_json_key(&j, "mem_gib");
        nm_json_number(&j, (double)mem_total_bytes() / (1u << 30));
        nm_json_key(&j, "kernel");
        nm_json_string(&j, u.release);
        nm_json_key(&j, "machine");
        nm_json_string(&j, u.machine);
        nm_json_end_object(&j);
        fputc('\0', m);
        int ok = nm_json_finish(&j) == NM_OK && !ferror(m);
        fclose(m);
        if (ok) nm_bench_config_raw(b, "host", buf);
    }
    if (b->nparams) {
        m = fmemopen(buf, sizeof buf, "w");
        if (m) {
            nm_json j;
            nm_json_init(&j, m, false);
            nm_json_begin_object(&j);
            for (size_t i = 0; i < b->nparams; i++) {
                char *eq = strchr(b->params[i], '=');
                *eq = '\0';
                nm_json_key(&j, b->params[i]);
                nm_json_string(&j, eq + 1);
                *eq = '=';
            }
            nm_json_end_object(&j);
            fputc('\0', m);
            int ok = nm_json_finish(&j) == NM_OK && !ferror(m);
            fclose(m);
            if (ok) nm_bench_config_raw(b, "params", buf);
        }
    }
}

static const char *plot_script(void)
{
    const char *env = getenv("NEARMEM_PLOT_SCRIPT");
    if (env && *env) return env;
    if (access(NEARMEM_SOURCE_DIR "/bench/plot.py", R_OK) == 0) return NEARMEM_SOURCE_DIR "/bench/plot.py";
    return NEARMEM_PLOT_SCRIPT_INSTALLED;
}

static const char *python(void)
{
    const char *env = getenv("NEARMEM_PYTHON");
    if (env && *env) return env;
    return NEARMEM_PYTHON[0] ? NEARMEM_PYTHON : "python3";
}

static int render_plot(const char *json_path, const char *png_path)
{
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        execl(python(), python(), plot_script(), json_path, png_path, (char *)NULL);
        fprintf(stderr, "nearmem-bench: cannot run %s: %s\n", python(), strerror(errno));
        _exit(127);
    }
    int st;
    if (waitpid(pid, &st, 0) < 0) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int write_json_file(const nm_bench *b, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "nearmem-bench: cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    int rc = nm_bench_write_json(b, f);
    if (fclose(f) != 0) rc = -1;
    if (rc) fprintf(stderr, "nearmem-bench: error writing %s\n", path);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "list") == 0) {
        for (const struct nm_registry_entry_bench_suite *e = nm_registry_bench_suite; e->name; e++) puts(e->name);
        return 0;
    }
    const struct nm_registry_entry_bench_suite *suite = find_suite(argv[1]);
    if (!suite) {
        fprintf(stderr, "nearmem-bench: no suite '%s' (see `nearmem-bench list`)\n", argv[1]);
        return 2;
    }

    nm_bench b;
    nm_bench_init(&b, suite->name);
    b.threads = nm_nproc();
    const char *json_path = NULL, *plot_path = NULL;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        const char *next = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--quick") == 0) b.quick = true;
        else if (strcmp(a, "--quiet") == 0) b.quiet = true;
        else if (strcmp(a, "--json") == 0 && next) json_path = argv[++i];
        else if (strcmp(a, "--plot") == 0 && next) plot_path = argv[++i];
        else if (strcmp(a, "--threads") == 0 && next) {
            char *end;
            long t = strtol(argv[++i], &end, 10);
            if (*end || t < 1 || t > 4096) {
                fprintf(stderr, "nearmem-bench: --threads needs a number in 1..4096\n");
                nm_bench_destroy(&b);
                return 2;
            }
            b.threads = (unsigned)t;
        } else if (strcmp(a, "--seed") == 0 && next) {
            char *end;
            b.seed = strtoull(argv[++i], &end, 0);
            if (*end) {
                fprintf(stderr, "nearmem-bench: --seed needs a number\n");
                nm_bench_destroy(&b);
                return 2;
            }
        } else if (strcmp(a, "--set") == 0 && next && strchr(next, '=')) nm_bench_add_param(&b, argv[++i]);
        else {
            fprintf(stderr, "nearmem-bench: unknown or incomplete option '%s'\n", a);
            usage(stderr);
            nm_bench_destroy(&b);
            return 2;
        }
    }

    record_run_config(&b);
    nm_bench_progress(&b, "running%s with %u threads, seed %llu", b.quick ? " (quick)" : "", b.threads,
                      (unsigned long long)b.seed);
    uint64_t t0 = nm_now_ns();
    int rc = suite->fn(&b);
    double wall = nm_ns_to_s(nm_now_ns() - t0);
    nm_bench_config_num(&b, "host_wall_seconds", wall);
    if (rc != 0) {
        const char *msg = nm_last_errmsg();
        fprintf(stderr, "nearmem-bench: suite %s failed: %s%s%s\n", suite->name, nm_strerror((nm_err)rc),
                *msg ? ": " : "", msg);
    }

    nm_bench_print_summary(&b, stdout);
    char tmp_json[512] = "";
    int out_rc = 0;
    if (json_path) out_rc |= write_json_file(&b, json_path) != 0;
    if (plot_path && rc == 0) {
        if (!json_path) {
            const char *dir = nm_bench_tmpdir(&b);
            snprintf(tmp_json, sizeof tmp_json, "%s/result.json", dir ? dir : "/tmp");
            out_rc |= write_json_file(&b, tmp_json) != 0;
        }
        int prc = render_plot(json_path ? json_path : tmp_json, plot_path);
        if (prc != 0) {
            fprintf(stderr, "nearmem-bench: plotting failed (exit %d); is python3-matplotlib installed?\n", prc);
            out_rc = 1;
        }
    }
    nm_bench_destroy(&b);
    return rc != 0 ? 1 : out_rc;
}
