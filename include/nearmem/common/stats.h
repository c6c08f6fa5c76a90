/* Descriptive statistics over arrays of doubles. Benchmarks report medians and
 * geometric means of ratios; none of these modify their input. An empty input
 * gives NAN. */
#ifndef NEARMEM_COMMON_STATS_H
#define NEARMEM_COMMON_STATS_H

#include <stddef.h>

double nm_stats_mean(const double *x, size_t n);
double nm_stats_stddev(const double *x, size_t n);   /* sample stddev (n-1); 0 for n == 1 */
double nm_stats_min(const double *x, size_t n);
double nm_stats_max(const double *x, size_t n);
double nm_stats_median(const double *x, size_t n);
/* p in [0, 100], linear interpolation between closest ranks (NumPy's default). */
double nm_stats_percentile(const double *x, size_t n, double p);
/* Geometric mean; NAN if any value is <= 0. */
double nm_stats_geomean(const double *x, size_t n);

typedef struct nm_stats_summary {
    size_t n;
    double min, max, mean, stddev, median, p5, p95, p99;
} nm_stats_summary;
void nm_stats_summarize(const double *x, size_t n, nm_stats_summary *out);

#endif
