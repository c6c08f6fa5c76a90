/* Host-side helpers of a PrIM-style benchmark: phase timers, a seeded
 * generator and option parsing. Host code only (the DPU side includes
 * common.h alone). */
#ifndef PRIM_UTILS_H
#define PRIM_UTILS_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* ---- timers: accumulate wall time per phase ---- */
typedef struct {
    struct timespec start[8];
    double total_ms[8];
} Timer;

static inline void start(Timer *t, int i, int rep)
{
    if (rep == 0)
        t->total_ms[i] = 0.0;
    clock_gettime(CLOCK_MONOTONIC, &t->start[i]);
}

static inline void stop(Timer *t, int i)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    t->total_ms[i] += (double)(now.tv_sec - t->start[i].tv_sec) * 1e3 +
                      (double)(now.tv_nsec - t->start[i].tv_nsec) / 1e6;
}

static inline void print_timer(const Timer *t, int i, const char *what, unsigned reps)
{
    printf("%-12s %10.3f ms\n", what, t->total_ms[i] / (reps ? reps : 1));
}

/* ---- a small seeded generator (splitmix64): the same input for a seed ---- */
static uint64_t rng_state = 0x243F6A8885A308D3ull;

static inline void rng_seed(uint64_t s) { rng_state = s * 0x9E3779B97F4A7C15ull + 1; }

static inline uint64_t rng_next(void)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* ---- numbers on the command line: "65536", "64K", "1M" ---- */
static inline uint64_t parse_size(const char *s)
{
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 0);
    if (end && (*end == 'k' || *end == 'K'))
        v <<= 10;
    else if (end && (*end == 'm' || *end == 'M'))
        v <<= 20;
    else if (end && (*end == 'g' || *end == 'G'))
        v <<= 30;
    return (uint64_t)v;
}

#endif
