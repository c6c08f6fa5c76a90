/* Suite pim-prim: nearmem's PrIM-style benchmark set (bench/pim/prim/), plain
 * UPMEM C programs, run unchanged on the emulated PIM machine.
 *
 * Every benchmark is run as its users run it: the host binary built from
 * host/app.c, started as a child process in a directory whose ./bin/dpu_code
 * is the DPU program built with NR_TASKLETS=T, with `-d DPUS` and size
 * options. Its exit status is the check (each host compares the DPUs' result
 * with its own computation). The machine's accounting of the child's DPU sets
 * (modeled kernel and transfer time) comes back through NEARMEM_PIM_TOTALS
 * (docs/pim-machine.md); host_* figures are wall and CPU time of the child
 * process on this machine. Modeled and host figures are never mixed.
 *
 *   dpus      each benchmark at 1, 64 and 2560 DPUs, 16 tasklets (weak scaling:
 *             a fixed size per DPU, except MLP whose layer size is fixed)
 *   tasklets  each benchmark at 64 DPUs with 1, 3 and 24 tasklets
 *   va-2560   VA, 2560 DPUs x 16 tasklets x 64 Ki int32 per DPU: the whole
 *             process's wall time (host_seconds_2560dpu_16t_va)
 *   sources   nearmem-specific lines in the benchmarks' kernels, hosts and
 *             shared headers (prim_source_edits: must be 0)
 *
 * Summary: prim_benchmarks, prim_correct (correct at every tested size),
 * prim_source_edits, host_seconds_2560dpu_16t_va. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nearmem/bench.h"
#include "nearmem/common.h"
#include "prim_run.h"

#ifndef NEARMEM_PRIM_SRC
#define NEARMEM_PRIM_SRC "bench/pim/prim"
#endif
#ifndef NEARMEM_PRIM_BIN
#define NEARMEM_PRIM_BIN "build/bench/pim/prim"
#endif

/* The set, in PrIM's order. */
static const char *const prim_names[] = {"VA",  "RED", "SCAN-SSA", "HST-S", "HST-L", "BS",
                                         "GEMV", "SEL", "UNI",      "TRNS",  "MLP",   "BFS"};
#define NR_PRIM (sizeof(prim_names) / sizeof(prim_names[0]))

/* Size options of a benchmark for `dpus` DPUs: a fixed amount of work per
 * DPU (weak scaling), small in --quick. */
static void prim_size_args(const char *name, uint32_t dpus, bool quick, char *out, size_t n)
{
    const unsigned long long d = dpus;
    const unsigned long long per = quick ? 16384 : 65536; /* elements per DPU, streaming kernels */
    if (!strcmp(name, "HST-S"))
        snprintf(out, n, "-n %llu -b 256", per * d);
    else if (!strcmp(name, "HST-L"))
        snprintf(out, n, "-n %llu -b 2048", per * d);
    else if (!strcmp(name, "BS"))
        snprintf(out, n, "-n %llu -q %llu", quick ? 4096ull : 16384ull, (per / 4) * d);
    else if (!strcmp(name, "GEMV"))
        snprintf(out, n, "-m %llu -n %u", (quick ? 8ull : 32ull) * d, quick ? 256 : 1024);
    else if (!strcmp(name, "TRNS"))
        snprintf(out, n, "-M %u -m 16 -N %llu -n 8", quick ? 16 : 64, d);
    else if (!strcmp(name, "MLP"))
        snprintf(out, n, "-l 3 -n %u", quick ? 512 : 2048);
    else if (!strcmp(name, "BFS"))
        snprintf(out, n, "-n %llu -k 8", (quick ? 64ull : 256ull) * d);
    else /* VA RED SCAN-SSA SEL UNI */
        snprintf(out, n, "-n %llu", per * d);
}

static void run_row(nm_bench *b, const char *experiment, const char *name, uint32_t tasklets, uint32_t dpus,
                    const char *args, const prim_run *r)
{
    nm_bench_row *row = nm_bench_row_new(b);
    nm_bench_row_str(row, "experiment", experiment);
    nm_bench_row_str(row, "benchmark", name);
    nm_bench_row_num(row, "dpus", dpus);
    nm_bench_row_num(row, "tasklets", tasklets);
    nm_bench_row_str(row, "args", args);
    nm_bench_row_str(row, "correct", r->correct ? "yes" : "no");
    nm_bench_row_num(row, "exit_status", r->status);
    nm_bench_row_num(row, "launches", (double)r->launches);
    nm_bench_row_num(row, "modeled_kernel_s", r->modeled_kernel_s);
    nm_bench_row_num(row, "modeled_xfer_s", r->modeled_xfer_s);
    nm_bench_row_num(row, "host_s", r->host_s);
    nm_bench_row_num(row, "host_cpu_s", r->host_cpu_s);
    nm_bench_row_num(row, "host_peak_rss_mib", r->peak_rss_mib);
    nm_bench_row_num(row, "host_emulated_kernel_s", r->host_kernel_s);
    nm_bench_row_num(row, "host_emulated_xfer_s", r->host_xfer_s);
    nm_bench_row_str(row, "output", r->last_line);
}

/* ---- prim_source_edits: nearmem-specific lines in the benchmark sources ---- */

/* A line is nearmem-specific if it names anything of nearmem: an nm_/NM_
 * identifier, "nearmem" (headers, macros), or one of the declaration macros
 * that plain UPMEM C does not have. */
static const char *const edit_pattern =
    "(^|[^A-Za-z0-9_])(nm_|NM_)[A-Za-z0-9_]"
    "|[Nn][Ee][Aa][Rr][Mm][Ee][Mm]"
    "|(^|[^A-Za-z0-9_])DPU_(PROGRAM|MAIN|HOST|WRAM|MRAM_NOINIT|MRAM)([^A-Za-z0-9_]|$)";

static int count_edits_in(const regex_t *re, const char *path, uint64_t *lines, uint64_t *edits, nm_bench *b)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NM_EIO;
    char line[2048];
    uint64_t no = 0;
    while (fgets(line, sizeof(line), f)) {
        no++;
        (*lines)++;
        if (regexec(re, line, 0, NULL, 0) == 0) {
            (*edits)++;
            line[strcspn(line, "\n")] = '\0';
            nm_bench_progress(b, "nearmem-specific line %s:%llu: %s", path, (unsigned long long)no, line);
        }
    }
    fclose(f);
    return NM_OK;
}

static bool is_source(const char *name)
{
    size_t n = strlen(name);
    return n > 2 && name[n - 2] == '.' && (name[n - 1] == 'c' || name[n - 1] == 'h');
}

/* Scans <src>/<bench>/{dpu,host,support}/ *.c *.h. */
static int count_source_edits(nm_bench *b, const char *src, uint64_t *files, uint64_t *lines, uint64_t *edits)
{
    regex_t re;
    if (regcomp(&re, edit_pattern, REG_EXTENDED | REG_NOSUB) != 0)
        return NM_EINVAL;
    static const char *const parts[] = {"dpu", "host", "support"};
    int rc = NM_OK;
    for (size_t k = 0; k < NR_PRIM && rc == NM_OK; k++)
        for (size_t p = 0; p < 3 && rc == NM_OK; p++) {
            char dir[1024];
            snprintf(dir, sizeof(dir), "%s/%s/%s", src, prim_names[k], parts[p]);
            DIR *d = opendir(dir);
            if (!d) {
                rc = NM_ENOENT;
                nm_bench_progress(b, "sources: %s is missing", dir);
                break;
            }
            struct dirent *e;
            while ((e = readdir(d)) && rc == NM_OK) {
                if (!is_source(e->d_name))
                    continue;
                char path[1400];
                snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
                (*files)++;
                rc = count_edits_in(&re, path, lines, edits, b);
            }
            closedir(d);
        }
    regfree(&re);
    return rc;
}

int nm_suite_pim_prim(nm_bench *b)
{
    const bool quick = nm_bench_quick(b);
    const char *src = nm_bench_param(b, "prim_src", NEARMEM_PRIM_SRC);
    const char *bin = nm_bench_param(b, "prim_bin", NEARMEM_PRIM_BIN);
    const double timeout = nm_bench_param_num(b, "timeout_s", 900);
    static const uint32_t dpu_counts[] = {1, 64, 2560};
    static const uint32_t tasklet_counts[] = {1, 3, 24};
    const uint32_t va_per_dpu = 65536;

    nm_bench_config_str(b, "prim_src", src);
    nm_bench_config_str(b, "prim_bin", bin);
    nm_bench_config_str(b, "dpu_counts", "1,64,2560 (16 tasklets)");
    nm_bench_config_str(b, "tasklet_counts", "1,3,16,24 (64 DPUs)");
    nm_bench_config_str(b, "note",
                        "modeled_* from the machine's accounting of the child process (NEARMEM_PIM_TOTALS); host_* are "
                        "wall/CPU time of the child process on this host");
    nm_bench_plot_spec(b, "[{\"title\":\"modeled kernel time, 16 tasklets (weak scaling)\",\"x\":\"dpus\","
                          "\"y\":\"modeled_kernel_s\",\"series\":\"benchmark\",\"kind\":\"line\",\"logx\":true,"
                          "\"logy\":true,\"filter\":{\"experiment\":\"dpus\"}},"
                          "{\"title\":\"modeled transfer time, 16 tasklets\",\"x\":\"dpus\",\"y\":\"modeled_xfer_s\","
                          "\"series\":\"benchmark\",\"kind\":\"line\",\"logx\":true,\"logy\":true,"
                          "\"filter\":{\"experiment\":\"dpus\"}},"
                          "{\"title\":\"host wall time of the process\",\"x\":\"dpus\",\"y\":\"host_s\","
                          "\"series\":\"benchmark\",\"kind\":\"line\",\"logx\":true,\"logy\":true,"
                          "\"filter\":{\"experiment\":\"dpus\"}},"
                          "{\"title\":\"modeled kernel time vs tasklets, 64 DPUs\",\"x\":\"tasklets\","
                          "\"y\":\"modeled_kernel_s\",\"series\":\"benchmark\",\"kind\":\"line\",\"logy\":true,"
                          "\"filter\":{\"experiment\":\"tasklets\"}}]");

    /* Sources first: they need no build. */
    uint64_t files = 0, lines = 0, edits = 0;
    int rc = count_source_edits(b, src, &files, &lines, &edits);
    if (rc != NM_OK)
        return rc;
    nm_bench_config_num(b, "prim_source_files", (double)files);
    nm_bench_config_num(b, "prim_source_lines", (double)lines);
    /* --set only=sources: count the sources and stop (the counting's own test). */
    if (!strcmp(nm_bench_param(b, "only", "all"), "sources")) {
        nm_bench_summary_num(b, "prim_source_edits", (double)edits);
        return NM_OK;
    }

    uint32_t benchmarks = 0, correct = 0;
    for (size_t k = 0; k < NR_PRIM; k++) {
        const char *name = prim_names[k];
        bool all_ok = true, ran_any = false;
        char args[256];
        prim_run r;
        for (size_t j = 0; j < NM_ARRAY_LEN(dpu_counts); j++) {
            prim_size_args(name, dpu_counts[j], quick, args, sizeof(args));
            if ((rc = run_prim(b, bin, name, 16, dpu_counts[j], args, timeout, &r)) != NM_OK)
                return rc;
            ran_any = true;
            all_ok &= r.correct;
            run_row(b, "dpus", name, 16, dpu_counts[j], args, &r);
            nm_bench_progress(b, "%-8s %4u DPUs x 16: %s, modeled kernel %.3g s, modeled xfer %.3g s, host %.2f s",
                              name, dpu_counts[j], r.correct ? "ok" : "WRONG", r.modeled_kernel_s, r.modeled_xfer_s,
                              r.host_s);
        }
        for (size_t j = 0; j < NM_ARRAY_LEN(tasklet_counts); j++) {
            prim_size_args(name, 64, quick, args, sizeof(args));
            if ((rc = run_prim(b, bin, name, tasklet_counts[j], 64, args, timeout, &r)) != NM_OK)
                return rc;
            all_ok &= r.correct;
            run_row(b, "tasklets", name, tasklet_counts[j], 64, args, &r);
            nm_bench_progress(b, "%-8s   64 DPUs x %2u: %s, modeled kernel %.3g s", name, tasklet_counts[j],
                              r.correct ? "ok" : "WRONG", r.modeled_kernel_s);
        }
        benchmarks += ran_any;
        correct += ran_any && all_ok;
    }

    /* The headline: VA, 2560 DPUs x 16 tasklets x 64 Ki int32 per DPU. */
    char args[256];
    snprintf(args, sizeof(args), "-n %llu", (unsigned long long)va_per_dpu * 2560);
    prim_run va;
    if ((rc = run_prim(b, bin, "VA", 16, 2560, args, timeout, &va)) != NM_OK)
        return rc;
    run_row(b, "va-2560", "VA", 16, 2560, args, &va);
    nm_bench_progress(b, "VA 2560 DPUs x 16 tasklets x 64 Ki: %s, host %.2f s (CPU %.2f s, peak %.0f MiB)",
                      va.correct ? "ok" : "WRONG", va.host_s, va.host_cpu_s, va.peak_rss_mib);

    nm_bench_summary_num(b, "prim_benchmarks", benchmarks);
    nm_bench_summary_num(b, "prim_correct", correct);
    nm_bench_summary_num(b, "prim_source_edits", (double)edits);
    nm_bench_summary_num(b, "host_seconds_2560dpu_16t_va", va.correct ? va.host_s : NAN);
    nm_bench_summary_num(b, "modeled_kernel_seconds_2560dpu_16t_va", va.modeled_kernel_s);
    nm_bench_summary_num(b, "host_peak_rss_mib_2560dpu_16t_va", va.peak_rss_mib);
    return NM_OK;
}
