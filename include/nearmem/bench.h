/* The API a benchmark suite uses to report to build/bin/nearmem-bench.
 *
 * A suite is `int fn(nm_bench *b)`, registered with nearmem_add_bench_suite()
 * in its bench/<component>/CMakeLists.txt. It reads the run options, records
 * its configuration, one row per measured point and a summary; the runner
 * writes {"suite", "config", "rows", "summary"} as JSON, prints the summary
 * and renders a plot through bench/plot.py. Return 0, or an nm_err code.
 *
 * Summary keys named in an issue are a contract: spell them exactly. Label
 * modeled figures (emulated cycles, modeled transfer time) as modeled in the
 * key or the row, and never mix them with host wall time. */
#ifndef NEARMEM_BENCH_H
#define NEARMEM_BENCH_H

#include <stdbool.h>
#include <stdint.h>

typedef struct nm_bench nm_bench;
typedef struct nm_bench_row nm_bench_row;

/* Run options. */
bool nm_bench_quick(const nm_bench *b);        /* --quick: a short run (CI, make bench-quick) */
unsigned nm_bench_threads(const nm_bench *b);  /* --threads N (default: online CPUs) */
uint64_t nm_bench_seed(const nm_bench *b);     /* --seed S (default 42) */
/* --set key=value parameters for suite-specific knobs; `dflt` when unset. */
const char *nm_bench_param(const nm_bench *b, const char *key, const char *dflt);
double nm_bench_param_num(const nm_bench *b, const char *key, double dflt);
/* A scratch directory for the run, removed afterwards (files, heaps, pools). */
const char *nm_bench_tmpdir(nm_bench *b);

/* Configuration: what was run (sizes, counts, peers and their versions). */
void nm_bench_config_num(nm_bench *b, const char *key, double v);
void nm_bench_config_str(nm_bench *b, const char *key, const char *v);
/* A plot description for bench/plot.py: a JSON list of panels, e.g.
 * [{"title":"...","x":"tasklets","y":"speedup","series":"variant","kind":"line","logx":true}]
 * Optional keys per panel: filter {key: value}, xlabel, ylabel, logy, kind "bar". */
void nm_bench_plot_spec(nm_bench *b, const char *json_panels);

/* Rows: one per measured point; keys are free-form, consistent within a suite. */
nm_bench_row *nm_bench_row_new(nm_bench *b);
void nm_bench_row_num(nm_bench_row *r, const char *key, double v);
void nm_bench_row_str(nm_bench_row *r, const char *key, const char *v);

/* Summary: the suite's headline figures. */
void nm_bench_summary_num(nm_bench *b, const char *key, double v);
void nm_bench_summary_str(nm_bench *b, const char *key, const char *v);
/* Read back a summary value already recorded (NAN when absent). */
double nm_bench_summary_get(const nm_bench *b, const char *key);

/* Progress on stderr ("[suite] ..."); silent with --quiet. */
void nm_bench_progress(nm_bench *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
