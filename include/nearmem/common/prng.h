/* Seeded, deterministic pseudo-random numbers and the distributions the
 * benchmarks and stress tests need.
 *
 * Generator: xoshiro256** (Blackman & Vigna), seeded through splitmix64, so a
 * seed reproduces the same stream on every machine and compiler. Independent
 * streams (per thread, per DPU) come from nm_rng_seed_stream(seed, id). */
#ifndef NEARMEM_COMMON_PRNG_H
#define NEARMEM_COMMON_PRNG_H

#include <stddef.h>
#include <stdint.h>

typedef struct nm_rng {
    uint64_t s[4];
} nm_rng;

uint64_t nm_splitmix64(uint64_t *state);
void nm_rng_seed(nm_rng *r, uint64_t seed);
/* Stream `id` of `seed`: distinct ids give unrelated streams. */
void nm_rng_seed_stream(nm_rng *r, uint64_t seed, uint64_t id);

uint64_t nm_rng_u64(nm_rng *r);
static inline uint32_t nm_rng_u32(nm_rng *r) { return (uint32_t)(nm_rng_u64(r) >> 32); }
/* Uniform in [0, n) without modulo bias (Lemire); 0 when n == 0. */
uint64_t nm_rng_below(nm_rng *r, uint64_t n);
/* Uniform in [lo, hi], inclusive; lo when hi < lo. */
uint64_t nm_rng_range(nm_rng *r, uint64_t lo, uint64_t hi);
/* Uniform double in [0, 1) with 53 random bits. */
double nm_rng_double(nm_rng *r);

double nm_rng_exponential(nm_rng *r, double rate);
double nm_rng_normal(nm_rng *r, double mean, double stddev);
/* Poisson(lambda): Knuth's method below 30, Hormann's PTRS above; 0 for lambda <= 0. */
uint64_t nm_rng_poisson(nm_rng *r, double lambda);
/* Pareto with scale xm > 0 and shape alpha > 0 (values >= xm, long tail). */
double nm_rng_pareto(nm_rng *r, double xm, double alpha);
/* Zipf / discrete power law on {1..n}, P(k) ~ k^-s, s > 0, by rejection-inversion
 * (Hormann & Derflinger 1996): O(1) per sample for any n. */
uint64_t nm_rng_zipf(nm_rng *r, uint64_t n, double s);

/* One R-MAT edge (Chakrabarti et al. 2004) on 2^scale vertices with quadrant
 * probabilities a, b, c (d = 1-a-b-c). Graph500 uses a=0.57, b=c=0.19. */
void nm_rng_rmat_edge(nm_rng *r, unsigned scale, double a, double b, double c, uint64_t *src, uint64_t *dst);
/* The same on n vertices (any n >= 1): R-MAT on the next power of two, with
 * out-of-range endpoints redrawn, then vertex ids permuted by a fixed odd
 * multiplier so that hubs are not all at small ids. */
void nm_rng_rmat_edge_n(nm_rng *r, uint64_t n, double a, double b, double c, uint64_t *src, uint64_t *dst);

/* Fisher-Yates shuffle of n elements of `size` bytes. */
void nm_rng_shuffle(nm_rng *r, void *base, size_t n, size_t size);

#endif
