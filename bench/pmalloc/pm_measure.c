/* pe_measure: the suites' repeated measurement of one configuration (see
 * pm_eval.h). Apart from pm_eval.c because it reports through the bench
 * runner (nm_bench_*), which the helper nearmem-pmalloc-evalrun does not link. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/statfs.h>
#include <unistd.h>
#include <linux/magic.h>

#include "nearmem/bench.h"
#include "nearmem/common.h"
#include "pm_eval.h"

/* Where the pools go. Persistent memory has no page-cache writeback; a pool
 * file on a disk file system does (the kernel writes dirty pages back while
 * the timed phase runs), which made the DBMStest ratio swing between 1.6x and
 * 3.8x from one run to the next on ext4. So pools go to tmpfs (DRAM, as
 * emulated or CXL-attached persistent memory) when /dev/shm has room for two
 * of them; `--set pool_dir=DIR` puts them elsewhere (the suite's temporary
 * directory without /dev/shm). Recorded in the config. */
static const char *pe_pool_parent(nm_bench *b, size_t pool)
{
    const char *dir = nm_bench_param(b, "pool_dir", NULL);
    struct statfs sf;
    if (!dir && statfs("/dev/shm", &sf) == 0 && sf.f_type == TMPFS_MAGIC &&
        (double)sf.f_bavail * (double)sf.f_bsize >= 2.0 * (double)pool + (64 << 20))
        dir = "/dev/shm";
    if (!dir) dir = nm_bench_tmpdir(b);
    if (dir && statfs(dir, &sf) == 0)
        nm_bench_config_str(b, "pool_fs", sf.f_type == TMPFS_MAGIC ? "tmpfs (DRAM, no writeback)" : "a disk file system (page cache, writeback)");
    nm_bench_config_str(b, "pool_dir", dir ? dir : "?");
    return dir;
}

static const char *pe_label(const pe_params *p)
{
    return p->pmdk_noflush ? "PMDK-noflush"
           : p->eadr       ? (p->kind == PE_GC ? "PMAlloc-GC-eADR" : "PMAlloc-LOG-eADR")
           : p->no_morph   ? (p->kind == PE_GC ? "PMAlloc-GC-noSM" : "PMAlloc-LOG-noSM")
                           : pe_kind_name(p->kind);
}

/* Repetition k of configuration p: 0 on success, with its figures stored. */
typedef struct pe_acc {
    double mops[16], cpu[16], flt[16], peak, pmem, morphs, handoff_max;
} pe_acc;

static int measure_one(nm_bench *b, const char *bench_name, const char *tmp, pe_params *p, unsigned k, pe_acc *a)
{
    snprintf(p->dir, sizeof p->dir, "%s/nearmem-eval-%d-%s-%d%s%s%s-%u", tmp, (int)getpid(), bench_name, (int)p->kind,
             p->eadr ? "e" : "", p->no_morph ? "n" : "", p->pmdk_noflush ? "f" : "", p->threads);
    pe_cleanup(p->dir);
    pe_result r;
    p->seed = nm_bench_seed(b) * 1000003u + k;
    p->prefault = k > 0;
    int rc = pe_run(p, &r);
    pe_cleanup(p->dir);
    if (rc || r.seconds <= 0) {
        nm_bench_progress(b, "%s %s threads %u: FAILED: %s", bench_name, pe_kind_name(p->kind), p->threads, r.msg);
        return -1;
    }
    if (k == 0) {
        a->peak = r.peak_bytes / (1024.0 * 1024.0);
        a->morphs = r.aux;
    } else {
        a->mops[k - 1] = r.ops / r.seconds / 1e6;
        a->cpu[k - 1] = r.cpu_seconds / r.ops * 1e9; /* CPU ns per operation, all threads */
        a->flt[k - 1] = (r.minflt + r.majflt) / r.ops;
        a->handoff_max = fmax(a->handoff_max, fmax(r.handoff0, r.handoff1)); /* (fmax skips a NAN) */
    }
    a->pmem = r.is_pmem;
    return 0;
}

int pe_measure_set(nm_bench *b, const char *bench_name, pe_params *ps, unsigned n, unsigned reps, double *mops,
                   double *peak_mib)
{
    if (reps > 16) reps = 16;
    if (reps < 1) reps = 1;
    pe_acc *acc = calloc(n ? n : 1, sizeof *acc);
    if (!acc) return -1;
    for (unsigned i = 0; i < n; i++) acc[i].handoff_max = NAN;
    const char *tmp = pe_pool_parent(b, ps[0].pool_size);
    /* Round k runs repetition k of every configuration, starting one further
     * each round: the host drifts (on the 2-core VM a 2-thread run's rate can
     * halve from one process to the next with the same work counted), and
     * blocks of one allocator's repetitions after another's let that drift
     * into the ratios. Run 0 is not prefaulted and gives the peak memory
     * (pages touched + DRAM); runs 1..reps are prefaulted and give the
     * throughput. */
    for (unsigned k = 0; k <= reps; k++) {
        for (unsigned j = 0; j < n; j++) {
            unsigned i = (j + k) % n;
            if (measure_one(b, bench_name, tmp, &ps[i], k, &acc[i])) {
                free(acc);
                return -1;
            }
        }
    }
    for (unsigned i = 0; i < n; i++) {
        const pe_params *p = &ps[i];
        pe_acc *a = &acc[i];
        double m = nm_stats_median(a->mops, reps), lo = nm_stats_min(a->mops, reps), hi = nm_stats_max(a->mops, reps);
        nm_bench_row *row = nm_bench_row_new(b);
        nm_bench_row_str(row, "bench", bench_name);
        nm_bench_row_str(row, "allocator", pe_label(p));
        nm_bench_row_num(row, "threads", p->threads);
        nm_bench_row_num(row, "mops", m);
        nm_bench_row_num(row, "mops_min", lo);
        nm_bench_row_num(row, "mops_max", hi);
        nm_bench_row_num(row, "peak_mib", a->peak);
        nm_bench_row_num(row, "cpu_flush", a->pmem);
        /* the host's cross-CPU handoff around each timed phase, the largest seen:
         * above ~100 ns a repetition met one of the host's slow stretches
         * ("The slow mode, looked at again", docs/pmalloc.md) */
        if (!isnan(a->handoff_max)) nm_bench_row_num(row, "handoff_ns_max", a->handoff_max);
        nm_bench_row_num(row, "repetitions", reps);
        /* the timed phase's CPU time of all threads and page faults (getrusage), medians */
        nm_bench_row_num(row, "cpu_ns_per_op", nm_stats_median(a->cpu, reps));
        nm_bench_row_num(row, "faults_per_op", nm_stats_median(a->flt, reps));
        if (p->work == PE_FRAG && p->kind != PE_PMDK) nm_bench_row_num(row, "slab_morphs", a->morphs);
        nm_bench_progress(b, "%-13s %-12s threads %u: %8.3f Mops/s (median of %u, %.3f-%.3f), %.0f CPU ns/op, peak %.1f MiB touched",
                          bench_name, pe_label(p), p->threads, m, reps, lo, hi, nm_stats_median(a->cpu, reps), a->peak);
        if (mops) mops[i] = m;
        if (peak_mib) peak_mib[i] = a->peak;
    }
    free(acc);
    return 0;
}

double pe_measure(nm_bench *b, const char *bench_name, pe_params *p, unsigned reps, double *peak_mib)
{
    double m;
    return pe_measure_set(b, bench_name, p, 1, reps, &m, peak_mib) ? NAN : m;
}
