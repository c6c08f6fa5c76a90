#include "nearmem/common/prng.h"

#include <math.h>
#include <string.h>

uint64_t nm_splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void nm_rng_seed(nm_rng *r, uint64_t seed)
{
    uint64_t st = seed;
    for (int i = 0; i < 4; i++) r->s[i] = nm_splitmix64(&st);
    /* xoshiro must not start from the all-zero state; splitmix64 cannot give
     * four zero words in a row, but be explicit about the invariant. */
    if (!(r->s[0] | r->s[1] | r->s[2] | r->s[3])) r->s[0] = 1;
}

void nm_rng_seed_stream(nm_rng *r, uint64_t seed, uint64_t id)
{
    uint64_t st = seed ^ (id * 0xd1b54a32d192ed03ULL);
    nm_rng_seed(r, nm_splitmix64(&st) ^ id);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t nm_rng_u64(nm_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

uint64_t nm_rng_below(nm_rng *r, uint64_t n)
{
    if (n == 0) return 0;
    /* Lemire's multiply-and-reject: unbiased, one multiply in the common case. */
    unsigned __int128 m = (unsigned __int128)nm_rng_u64(r) * n;
    uint64_t low = (uint64_t)m;
    if (low < n) {
        uint64_t threshold = -n % n;
        while (low < threshold) {
            m = (unsigned __int128)nm_rng_u64(r) * n;
            low = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}

uint64_t nm_rng_range(nm_rng *r, uint64_t lo, uint64_t hi)
{
    if (hi <= lo) return lo;
    uint64_t span = hi - lo;
    if (span == UINT64_MAX) return nm_rng_u64(r);
    return lo + nm_rng_below(r, span + 1);
}

double nm_rng_double(nm_rng *r) { return (double)(nm_rng_u64(r) >> 11) * 0x1.0p-53; }

double nm_rng_exponential(nm_rng *r, double rate)
{
    return -log1p(-nm_rng_double(r)) / rate;
}

double nm_rng_normal(nm_rng *r, double mean, double stddev)
{
    /* Box-Muller; one of the pair is discarded to keep the generator stateless. */
    double u1 = 1.0 - nm_rng_double(r); /* (0, 1] */
    double u2 = nm_rng_double(r);
    return mean + stddev * sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

uint64_t nm_rng_poisson(nm_rng *r, double lambda)
{
    if (!(lambda > 0)) return 0;
    if (lambda < 30) {
        double limit = exp(-lambda), p = 1.0;
        uint64_t k = 0;
        for (;;) {
            p *= nm_rng_double(r);
            if (p <= limit) return k;
            k++;
        }
    }
    /* PTRS: transformed rejection with squeeze (Hormann 1993). */
    double slam = sqrt(lambda), loglam = log(lambda);
    double b = 0.931 + 2.53 * slam;
    double a = -0.059 + 0.02483 * b;
    double invalpha = 1.1239 + 1.1328 / (b - 3.4);
    double vr = 0.9277 - 3.6224 / (b - 2);
    for (;;) {
        double u = nm_rng_double(r) - 0.5;
        double v = nm_rng_double(r);
        double us = 0.5 - fabs(u);
        double k = floor((2 * a / us + b) * u + lambda + 0.43);
        if (us >= 0.07 && v <= vr) return (uint64_t)k;
        if (k < 0 || (us < 0.013 && v > us)) continue;
        if (log(v) + log(invalpha) - log(a / (us * us) + b) <= -lambda + k * loglam - lgamma(k + 1))
            return (uint64_t)k;
    }
}

double nm_rng_pareto(nm_rng *r, double xm, double alpha)
{
    double u = 1.0 - nm_rng_double(r); /* (0, 1] */
    return xm / pow(u, 1.0 / alpha);
}

/* Rejection-inversion helpers: expm1(x)/x and log1p(x)/x, stable near 0. */
static double helper_expm1_div(double x) { return fabs(x) > 1e-8 ? expm1(x) / x : 1.0 + x * 0.5 * (1.0 + x / 3.0); }
static double helper_log1p_div(double x) { return fabs(x) > 1e-8 ? log1p(x) / x : 1.0 - x * (0.5 - x / 3.0); }

static double zipf_h(double x, double s) { return exp(-s * log(x)); }
static double zipf_hint(double x, double s)
{
    double lx = log(x);
    return helper_expm1_div((1.0 - s) * lx) * lx;
}
static double zipf_hint_inv(double x, double s)
{
    double t = x * (1.0 - s);
    if (t < -1.0) t = -1.0;
    return exp(helper_log1p_div(t) * x);
}

uint64_t nm_rng_zipf(nm_rng *r, uint64_t n, double s)
{
    if (n <= 1) return 1;
    double hx1 = zipf_hint(1.5, s) - 1.0;
    double hn = zipf_hint((double)n + 0.5, s);
    double sval = 2.0 - zipf_hint_inv(zipf_hint(2.5, s) - zipf_h(2.0, s), s);
    for (;;) {
        double u = hn + nm_rng_double(r) * (hx1 - hn);
        double x = zipf_hint_inv(u, s);
        double kd = floor(x + 0.5);
        if (kd < 1) kd = 1;
        if (kd > (double)n) kd = (double)n;
        if (kd - x <= sval || u >= zipf_hint(kd + 0.5, s) - zipf_h(kd, s)) return (uint64_t)kd;
    }
}

void nm_rng_rmat_edge(nm_rng *r, unsigned scale, double a, double b, double c, uint64_t *src, uint64_t *dst)
{
    uint64_t u = 0, v = 0;
    double ab = a + b, abc = a + b + c;
    for (unsigned level = 0; level < scale; level++) {
        double p = nm_rng_double(r);
        u <<= 1;
        v <<= 1;
        if (p < a) {
        } else if (p < ab) {
            v |= 1;
        } else if (p < abc) {
            u |= 1;
        } else {
            u |= 1;
            v |= 1;
        }
    }
    *src = u;
    *dst = v;
}

/* Bijective scramble of [0, n): multiply by an odd constant modulo the next
 * power of two, cycle-walking until the value lands below n. */
static uint64_t scramble(uint64_t x, uint64_t n, unsigned scale)
{
    uint64_t mask = scale >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << scale) - 1);
    do {
        x = (x * 0x9e3779b97f4a7c15ULL + 0x632be59bd9b4e019ULL) & mask;
    } while (x >= n);
    return x;
}

void nm_rng_rmat_edge_n(nm_rng *r, uint64_t n, double a, double b, double c, uint64_t *src, uint64_t *dst)
{
    if (n <= 1) {
        *src = *dst = 0;
        return;
    }
    unsigned scale = 0;
    while (((uint64_t)1 << scale) < n) scale++;
    uint64_t u, v;
    do {
        nm_rng_rmat_edge(r, scale, a, b, c, &u, &v);
    } while (u >= n || v >= n);
    *src = scramble(u, n, scale);
    *dst = scramble(v, n, scale);
}

void nm_rng_shuffle(nm_rng *r, void *base, size_t n, size_t size)
{
    unsigned char *p = base, tmp[256];
    if (n < 2) return;
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = (size_t)nm_rng_below(r, i + 1);
        if (i == j) continue;
        unsigned char *a = p + i * size, *b = p + j * size;
        for (size_t off = 0; off < size; off += sizeof tmp) {
            size_t chunk = size - off < sizeof tmp ? size - off : sizeof tmp;
            memcpy(tmp, a + off, chunk);
            memcpy(a + off, b + off, chunk);
            memcpy(b + off, tmp, chunk);
        }
    }
}
