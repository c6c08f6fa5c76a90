/* See prim_run.h. */
#include "prim_run.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nearmem/common.h"

/* Sums the lines "key=value ..." that the machine appended to `path`. */
static int read_totals(const char *path, prim_run *r)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NM_ENOENT;
    char line[512];
    while (fgets(line, sizeof(line), f)) {
        r->sets++;
        for (char *tok = strtok(line, " \n"); tok; tok = strtok(NULL, " \n")) {
            char *eq = strchr(tok, '=');
            if (!eq)
                continue;
            *eq = '\0';
            double v = strtod(eq + 1, NULL);
            if (!strcmp(tok, "launches"))
                r->launches += (uint64_t)v;
            else if (!strcmp(tok, "modeled_kernel_s"))
                r->modeled_kernel_s += v;
            else if (!strcmp(tok, "modeled_xfer_s"))
                r->modeled_xfer_s += v;
            else if (!strcmp(tok, "host_kernel_s"))
                r->host_kernel_s += v;
            else if (!strcmp(tok, "host_xfer_s"))
                r->host_xfer_s += v;
        }
    }
    fclose(f);
    return NM_OK;
}

static void last_line_of(const char *path, char *out, size_t n)
{
    out[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof(line), f)) {
        size_t len = strcspn(line, "\n");
        if (len == 0)
            continue;
        if (len >= n)
            len = n - 1;
        memcpy(out, line, len);
        out[len] = '\0';
    }
    fclose(f);
}

/* Runs <bin>/<name>/host_code -d dpus <size args> in <bin>/<name>/t<tasklets>. */
int run_prim(nm_bench *b, const char *bin, const char *name, uint32_t tasklets, uint32_t dpus,
                    const char *size_args, double timeout_s, prim_run *r)
{
    memset(r, 0, sizeof(*r));
    char host[1024], cwd[1024], dpu[1100], totals[1024], log[1024];
    snprintf(host, sizeof(host), "%s/%s/host_code", bin, name);
    snprintf(cwd, sizeof(cwd), "%s/%s/t%u", bin, name, tasklets);
    snprintf(dpu, sizeof(dpu), "%s/bin/dpu_code", cwd);
    if (access(host, X_OK) != 0 || access(dpu, R_OK) != 0) {
        nm_bench_progress(b, "%s: %s or %s is missing (build the tree first)", name, host, dpu);
        return NM_ENOENT;
    }
    const char *tmp = nm_bench_tmpdir(b);
    snprintf(totals, sizeof(totals), "%s/totals-%s-%u-%u", tmp, name, tasklets, dpus);
    snprintf(log, sizeof(log), "%s/log-%s-%u-%u", tmp, name, tasklets, dpus);
    unlink(totals);

    char dpus_s[16], args_copy[256];
    snprintf(dpus_s, sizeof(dpus_s), "%u", dpus);
    snprintf(args_copy, sizeof(args_copy), "%s", size_args);
    char *argv[32];
    int argc = 0;
    argv[argc++] = host;
    argv[argc++] = "-d";
    argv[argc++] = dpus_s;
    for (char *tok = strtok(args_copy, " "); tok && argc < 31; tok = strtok(NULL, " "))
        argv[argc++] = tok;
    argv[argc] = NULL;

    uint64_t t0 = nm_now_ns();
    pid_t pid = fork();
    if (pid < 0)
        return NM_EIO;
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        if (chdir(cwd) != 0)
            _exit(126);
        setenv("NEARMEM_PIM_TOTALS", totals, 1);
        /* A runaway child is stopped by its CPU-time limit. */
        struct rlimit cpu = {.rlim_cur = (rlim_t)timeout_s, .rlim_max = (rlim_t)timeout_s + 5};
        setrlimit(RLIMIT_CPU, &cpu);
        execv(host, argv);
        _exit(127);
    }
    int status = 0;
    struct rusage ru;
    if (wait4(pid, &status, 0, &ru) < 0)
        return NM_EIO;
    r->host_s = nm_ns_to_s(nm_now_ns() - t0);
    r->host_cpu_s = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
                    (double)ru.ru_stime.tv_usec * 1e-6;
    r->peak_rss_mib = (double)ru.ru_maxrss / 1024.0;
    r->ran = true;
    r->status = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    r->correct = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    last_line_of(log, r->last_line, sizeof(r->last_line));
    if (read_totals(totals, r) != NM_OK && r->correct) {
        /* A correct run that left no accounting: the machine was not asked (or
         * this is not nearmem's libdpu). Counted as not measured, not as wrong. */
        nm_bench_progress(b, "%s: no machine accounting in %s", name, totals);
    }
    if (!r->correct)
        nm_bench_progress(b, "%s t=%u d=%u FAILED (status %d): %s", name, tasklets, dpus, r->status, r->last_line);
    return NM_OK;
}

