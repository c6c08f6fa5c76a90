#include "nearmem/common/timer.h"

#include "nearmem/common/error.h"

#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static uint64_t clock_ns(clockid_t id)
{
    struct timespec ts;
    if (clock_gettime(id, &ts) != 0) return 0;
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t nm_now_ns(void) { return clock_ns(CLOCK_MONOTONIC); }
uint64_t nm_thread_cpu_ns(void) { return clock_ns(CLOCK_THREAD_CPUTIME_ID); }
uint64_t nm_process_cpu_ns(void) { return clock_ns(CLOCK_PROCESS_CPUTIME_ID); }

size_t nm_peak_rss_bytes(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
    return (size_t)ru.ru_maxrss * 1024; /* Linux reports KiB */
}

size_t nm_current_rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return 0;
    unsigned long size = 0, resident = 0;
    int n = fscanf(f, "%lu %lu", &size, &resident);
    fclose(f);
    return n == 2 ? (size_t)resident * (size_t)sysconf(_SC_PAGESIZE) : 0;
}

unsigned nm_nproc(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (unsigned)n : 1u;
}

int nm_peak_rss_reset(void)
{
    /* "5" resets the peak RSS (Linux >= 4.0, Documentation/filesystems/proc.rst). */
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return NM_ENOTSUP;
    int ok = fputs("5", f) >= 0;
    ok &= fclose(f) == 0;
    return ok ? NM_OK : NM_ENOTSUP;
}

size_t nm_peak_rss_hwm_bytes(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    size_t kib = 0;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "VmHWM:", 6) == 0) {
            kib = (size_t)strtoull(line + 6, NULL, 10);
            break;
        }
    fclose(f);
    return kib * 1024;
}

/* ---- the cross-CPU handoff (a host probe for benchmarks) ---- */

#define HANDOFF_ROUNDS 5000u

typedef struct handoff {
    _Alignas(64) uint64_t word; /* the line that goes back and forth (atomic) */
    _Alignas(64) int stop;      /* atomic, as is ready */
    int ready;
    int cpu;
} handoff;

#define LD(x) __atomic_load_n(&(x), __ATOMIC_ACQUIRE)
#define ST(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELEASE)

static void *handoff_pong(void *arg)
{
    handoff *h = arg;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(h->cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    ST(h->ready, 1);
    for (uint64_t i = 0; i < HANDOFF_ROUNDS; i++) {
        while (LD(h->word) != 2 * i + 1)
            if (LD(h->stop)) return NULL;
        ST(h->word, 2 * i + 2);
    }
    return NULL;
}

double nm_handoff_ns(void)
{
    cpu_set_t mine, one;
    if (pthread_getaffinity_np(pthread_self(), sizeof mine, &mine) != 0 || CPU_COUNT(&mine) < 2) return NAN;
    int c0 = -1, c1 = -1;
    for (int c = 0; c < CPU_SETSIZE && c1 < 0; c++)
        if (CPU_ISSET(c, &mine)) { if (c0 < 0) c0 = c; else c1 = c; }
    handoff *h = aligned_alloc(64, sizeof *h);
    if (!h) return NAN;
    memset(h, 0, sizeof *h);
    h->cpu = c1;
    pthread_t t;
    if (pthread_create(&t, NULL, handoff_pong, h) != 0) { free(h); return NAN; }
    CPU_ZERO(&one);
    CPU_SET(c0, &one);
    pthread_setaffinity_np(pthread_self(), sizeof one, &one);
    double t0 = (double)nm_now_ns(), r = NAN;
    while (!LD(h->ready))
        if ((double)nm_now_ns() - t0 > 50e6) goto out;
    t0 = (double)nm_now_ns();
    for (uint64_t i = 0; i < HANDOFF_ROUNDS; i++) {
        ST(h->word, 2 * i + 1);
        for (unsigned spin = 0; LD(h->word) != 2 * i + 2; spin++)
            if ((spin & 1023u) == 1023u && (double)nm_now_ns() - t0 > 50e6) goto out; /* the other thread is not running */
    }
    r = ((double)nm_now_ns() - t0) / (2.0 * HANDOFF_ROUNDS);
out:
    ST(h->stop, 1);
    pthread_join(t, NULL);
    pthread_setaffinity_np(pthread_self(), sizeof mine, &mine);
    free(h);
    return r;
}
