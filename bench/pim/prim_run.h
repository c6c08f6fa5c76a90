/* Running a PrIM-style benchmark's unchanged host program as a child process
 * and reading the machine's accounting of it (NEARMEM_PIM_TOTALS): shared by
 * the suites pim-prim and pim-validate. */
#ifndef NM_BENCH_PRIM_RUN_H
#define NM_BENCH_PRIM_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nearmem/bench.h"

/* What one run of a benchmark gave. */
typedef struct {
    bool ran, correct;
    int status;                 /* exit status, or -signal */
    double host_s, host_cpu_s;  /* wall and CPU time of the child process */
    double peak_rss_mib;
    uint64_t sets, launches;    /* DPU sets freed and launches, from the machine's accounting */
    double modeled_kernel_s, modeled_xfer_s;
    double host_kernel_s, host_xfer_s; /* emulator wall time inside the child */
    char last_line[160];        /* the host's last output line ([OK] ... or the error) */
} prim_run;

/* Runs <bin>/<name>/host_code -d dpus <size_args> in <bin>/<name>/t<tasklets>
 * (a CPU-time limit of timeout_s). NM_ENOENT if the tree is not built. */
int run_prim(nm_bench *b, const char *bin, const char *name, uint32_t tasklets, uint32_t dpus, const char *size_args,
             double timeout_s, prim_run *r);

#endif
