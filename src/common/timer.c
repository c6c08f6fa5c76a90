#include "nearmem/common/timer.h"

#include <string.h>
#include "nearmem/common/error.h"

#include <stdio.h>
#include <stdlib.h>
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
