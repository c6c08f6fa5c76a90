/* Monotonic timers and process facts for benchmarks. Wall time here is host
 * time: never mix it with modeled (emulated-device) time. */
#ifndef NEARMEM_COMMON_TIMER_H
#define NEARMEM_COMMON_TIMER_H

#include <stdint.h>
#include <stddef.h>

uint64_t nm_now_ns(void);            /* CLOCK_MONOTONIC */
uint64_t nm_thread_cpu_ns(void);     /* CPU time of the calling thread */
uint64_t nm_process_cpu_ns(void);    /* CPU time of the whole process */
static inline double nm_ns_to_s(uint64_t ns) { return (double)ns * 1e-9; }

typedef struct nm_stopwatch {
    uint64_t start_ns;
} nm_stopwatch;
static inline void nm_stopwatch_start(nm_stopwatch *w) { w->start_ns = nm_now_ns(); }
static inline uint64_t nm_stopwatch_ns(const nm_stopwatch *w) { return nm_now_ns() - w->start_ns; }

/* Peak resident set size of this process in bytes (getrusage), 0 if unknown. */
size_t nm_peak_rss_bytes(void);
/* Reset the peak RSS that the kernel reports as VmHWM (/proc/self/status)
 * to the current RSS, so a benchmark can measure one phase's peak. Returns
 * NM_OK, or NM_ENOTSUP where /proc/self/clear_refs cannot be written. */
int nm_peak_rss_reset(void);
/* Peak RSS since process start or the last nm_peak_rss_reset (VmHWM), 0 if unknown.
 * Unlike nm_peak_rss_bytes (getrusage), this one can be reset. */
size_t nm_peak_rss_hwm_bytes(void);
/* Current resident set size in bytes (/proc/self/statm), 0 if unknown. */
size_t nm_current_rss_bytes(void);
/* Number of online CPUs (at least 1). */
unsigned nm_nproc(void);

/* The host's cross-CPU cache-line handoff right now: one-way ns of a ping-pong
 * on one line between two threads pinned to the first two CPUs the caller may
 * use (~1 ms; the caller's affinity is restored). NAN with one CPU, or when the
 * second thread did not run within 50 ms. On a VM it can jump for tenths of a
 * second (the host moving its vCPUs: 27-46 ns and 166-178 ns on the 2-core
 * dev VM); benchmarks whose threads share lines record it beside their runs. */
double nm_handoff_ns(void);

#endif
