/* What the workload sources of nearmem-sm-workload share (see sm_workloads.c). */
#ifndef SM_WL_H
#define SM_WL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "nearmem/common/prng.h"

extern unsigned g_threads;
extern double g_scale;
extern uint64_t g_seed;
extern int g_bad;          /* set when a workload finds a wrong result */
extern uint64_t g_sum;     /* a checksum printed at the end */
extern pthread_barrier_t g_bar;

static inline size_t scaled(double n)
{
    size_t v = (size_t)(n * g_scale);
    return v ? v : 1;
}
static inline void wl_fail(const char *what)
{
    fprintf(stderr, "check failed: %s\n", what);
    __atomic_store_n(&g_bad, 1, __ATOMIC_RELAXED);
}
static inline void *wl_malloc(size_t n)
{
    void *p = malloc(n);
    if (!p) { fprintf(stderr, "out of memory (%zu)\n", n); exit(1); }
    return p;
}
static inline void *wl_calloc(size_t n, size_t s)
{
    void *p = calloc(n, s);
    if (!p) { fprintf(stderr, "out of memory (%zu x %zu)\n", n, s); exit(1); }
    return p;
}
static inline void *wl_realloc(void *q, size_t n)
{
    void *p = realloc(q, n);
    if (!p) { fprintf(stderr, "out of memory (%zu)\n", n); exit(1); }
    return p;
}

/* Workloads in other files: each is run by THREADS threads (arg = thread index), or
 * ignores the others when it is single-threaded. */
void *wl_cfrac(void *arg);
void *wl_espresso(void *arg);
void *wl_barnes(void *arg);
void *wl_bfs(void *arg);
void *wl_bc(void *arg);
void *wl_dc(void *arg);

#endif
