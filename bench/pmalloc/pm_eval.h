/* Evaluation kit: PMAlloc-LOG, PMAlloc-GC and PMDK's libpmemobj behind one
 * small interface, the workloads of the paper's Sec. 8.2 (Ralloc's harness),
 * and a fork-per-run driver that measures each allocator in a fresh process
 * (so peak memory is per allocator and PMDK reads PMEM_IS_PMEM_FORCE at its
 * first call). Used by the suites pmalloc-small, -large, -recovery, -kv. */
#ifndef PM_EVAL_H
#define PM_EVAL_H

#include <stddef.h>
#include <stdint.h>

#include "nearmem/bench.h"

typedef enum pe_kind { PE_LOG = 0, PE_GC = 1, PE_PMDK = 2, PE_NKINDS = 3 } pe_kind;
const char *pe_kind_name(pe_kind k);

typedef enum pe_work {
    PE_THREADTEST,
    PE_PRODCON,
    PE_SHBENCH,
    PE_LARSON_SMALL,
    PE_LARSON_LARGE,
    PE_DBMSTEST,
    PE_KV,
    PE_FRAG,           /* Fragbench (Table 1): workload in `iters` (1-4), n = bytes allocated per phase, ops = live limit */
    PE_RECOVERY_BUILD, /* build the list, then exit without closing (a process crash) */
    PE_RECOVERY_OPEN,  /* time the open (recovery) of that pool, then walk the list */
} pe_work;

typedef struct pe_params {
    pe_work work;
    pe_kind kind;
    unsigned threads;
    uint64_t n;      /* objects per thread (threadtest, larson slots, dbms per iteration), total (prodcon, recovery) */
    uint64_t iters;  /* iterations / rounds (timed) */
    uint64_t warm;   /* dbmstest: iterations before the timed ones (the paper's warm-up) */
    uint64_t ops;    /* operations per thread (larson, kv) */
    uint64_t seed;
    size_t pool_size;
    int prefault;    /* touch every pool page before the timed phase */
    int eadr;        /* PMAlloc only: PMALLOC_EADR_ON (no flushes, no interleaving, Sec. 8.9) */
    int no_morph;    /* PMAlloc only: slab morphing off (PMALLOC_MORPH_OFF, the paper's "w/o SM") */
    int pmdk_noflush; /* PMDK only: run in a re-executed helper with PMEM_NO_FLUSH=1 (libpmem reads it
                         in its load-time constructor, so a forked child cannot switch it) */
    int mark;        /* counting mode: with every worker parked at a barrier after the fill, the main
                        thread resets PMAlloc's counters and calls pe_mark_begin(); after the join it
                        calls pe_mark_end(). A debugger counts instructions between the two. */
    char dir[512];   /* pool directory (created by the driver) */
} pe_params;

typedef struct pe_result {
    int err;
    char msg[200];
    double seconds;      /* timed phase */
    double ops;          /* allocator operations (allocs + frees) in the timed phase; PMAlloc's
                            recovery open: the redo records after the checkpoint bound it replayed */
    double peak_bytes;   /* peak RSS growth of the measuring process (DRAM + touched pool pages) */
    double aux;          /* workload specific: list nodes found after recovery; slab morphs (PMAlloc runs) */
    double is_pmem;      /* PMDK: pmem_is_pmem on the pool (1 = CPU flushes) */
    double flushes;      /* PMAlloc, mark mode: its own counters between the marks (lines flushed) */
    double fences;       /* ... and drains */
    /* the timed phase as the process saw it (getrusage deltas; the main thread
     * only waits meanwhile): CPU seconds of all threads, minor and major page
     * faults, voluntary and involuntary context switches */
    double cpu_seconds, minflt, majflt, nvcsw, nivcsw;
    /* the host's cross-CPU handoff (nm_handoff_ns) right before and right after
     * the timed phase, ns; NAN when not taken */
    double handoff0, handoff1;
} pe_result;

/* Run one measurement in a forked child; the pool lives in p->dir. With
 * p->pmdk_noflush the child re-executes the helper (pe_run_exec). */
int pe_run(const pe_params *p, pe_result *r);
/* Run one measurement in this process (what the forked child and the helper do). */
int pe_run_inproc(const pe_params *p, pe_result *r);

/* The helper executable `nearmem-pmalloc-evalrun` (next to nearmem-bench in
 * the build tree) runs one measurement given as arguments and prints one
 * result line. pe_helper_path: its path, NULL if it is not there. */
const char *pe_helper_path(void);
/* argv form of p (key=value words, parsed back by pe_params_parse). */
int pe_params_format(const pe_params *p, char *buf, size_t cap);
int pe_params_parse(int argc, char **argv, pe_params *p);
void pe_result_print(const pe_result *r);      /* the line "PE_RESULT ..." on stdout */
int pe_result_parse(const char *out, pe_result *r); /* finds and parses it; 0 on success */
/* Fork and exec `[prefix...] helper <p>` with `env_add` (NAME=value words,
 * NULL-terminated, may be NULL) added to the environment; the helper's stdout
 * (and, when `out` is given, everything it printed, up to outcap - 1 bytes) is
 * parsed for its result line. */
int pe_run_exec(const pe_params *p, pe_result *r, const char *const *prefix, const char *const *env_add, char *out,
                size_t outcap);

/* Markers of the counted phase (mark mode); never inlined, so a debugger can break on them. */
void pe_mark_begin(void);
void pe_mark_end(void);
/* Set PMEM_IS_PMEM_FORCE=1 (before any libpmemobj call, in every child). */
void pe_force_pmem(void);
/* Remove the pool files of p->dir and the directory. */
void pe_cleanup(const char *dir);

/* Median Mops/s over `reps` prefaulted runs of p, plus one run without
 * prefaulting for the peak memory; adds one row per call. NAN on failure.
 * Row labels: PMAlloc-LOG/-GC, -eADR (p->eadr), -noSM, PMDK, PMDK-noflush. */
double pe_measure(nm_bench *b, const char *bench_name, pe_params *p, unsigned reps, double *peak_mib);
/* The same for n configurations measured side by side: repetition k of each
 * in turn (rotating who goes first), so that they share the host's drift;
 * one row each, in order; mops[i] (and peak_mib[i] when given) get the
 * medians. 0, or -1 on failure (reported). */
int pe_measure_set(nm_bench *b, const char *bench_name, pe_params *ps, unsigned n, unsigned reps, double *mops,
                   double *peak_mib);

#endif
