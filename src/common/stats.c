#include "nearmem/common/stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Sorted copy; NULL for n == 0 or allocation failure. */
static double *sorted_copy(const double *x, size_t n)
{
    if (n == 0) return NULL;
    double *c = malloc(n * sizeof *c);
    if (!c) return NULL;
    memcpy(c, x, n * sizeof *c);
    qsort(c, n, sizeof *c, cmp_double);
    return c;
}

static double pct_sorted(const double *s, size_t n, double p)
{
    if (p <= 0) return s[0];
    if (p >= 100) return s[n - 1];
    double rank = p / 100.0 * (double)(n - 1);
    size_t lo = (size_t)rank;
    double frac = rank - (double)lo;
    return lo + 1 < n ? s[lo] + frac * (s[lo + 1] - s[lo]) : s[lo];
}

double nm_stats_mean(const double *x, size_t n)
{
    if (n == 0) return NAN;
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += x[i];
    return sum / (double)n;
}

double nm_stats_stddev(const double *x, size_t n)
{
    if (n == 0) return NAN;
    if (n == 1) return 0;
    double m = nm_stats_mean(x, n), ss = 0;
    for (size_t i = 0; i < n; i++) ss += (x[i] - m) * (x[i] - m);
    return sqrt(ss / (double)(n - 1));
}

double nm_stats_min(const double *x, size_t n)
{
    if (n == 0) return NAN;
    double m = x[0];
    for (size_t i = 1; i < n; i++) m = x[i] < m ? x[i] : m;
    return m;
}

double nm_stats_max(const double *x, size_t n)
{
    if (n == 0) return NAN;
    double m = x[0];
    for (size_t i = 1; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}

double nm_stats_percentile(const double *x, size_t n, double p)
{
    double *s = sorted_copy(x, n);
    if (!s) return NAN;
    double v = pct_sorted(s, n, p);
    free(s);
    return v;
}

double nm_stats_median(const double *x, size_t n) { return nm_stats_percentile(x, n, 50); }

double nm_stats_geomean(const double *x, size_t n)
{
    if (n == 0) return NAN;
    double logsum = 0;
    for (size_t i = 0; i < n; i++) {
        if (!(x[i] > 0)) return NAN;
        logsum += log(x[i]);
    }
    return exp(logsum / (double)n);
}

void nm_stats_summarize(const double *x, size_t n, nm_stats_summary *out)
{
    memset(out, 0, sizeof *out);
    out->n = n;
    double *s = sorted_copy(x, n);
    if (!s) {
        out->min = out->max = out->mean = out->stddev = out->median = out->p5 = out->p95 = out->p99 = NAN;
        return;
    }
    out->min = s[0];
    out->max = s[n - 1];
    out->mean = nm_stats_mean(s, n);
    out->stddev = nm_stats_stddev(s, n);
    out->median = pct_sorted(s, n, 50);
    out->p5 = pct_sorted(s, n, 5);
    out->p95 = pct_sorted(s, n, 95);
    out->p99 = pct_sorted(s, n, 99);
    free(s);
}
