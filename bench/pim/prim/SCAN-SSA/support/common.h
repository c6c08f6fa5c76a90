/* SCAN-SSA: inclusive prefix sum of int64 elements, scan-scan-add:
 * 1. each DPU scans its slice (kernel SCAN), reporting its total;
 * 2. the host scans the DPUs' totals;
 * 3. each DPU adds its base, the sum of the slices before it (kernel ADD).
 * Shared by the host and the DPU code. */
#ifndef SCAN_COMMON_H
#define SCAN_COMMON_H

#include <stdint.h>

typedef int64_t T;

enum kernels { KERNEL_SCAN = 0, KERNEL_ADD = 1, NR_KERNELS = 2 };

typedef struct {
    uint32_t count;         /* elements of this DPU */
    uint32_t kernel;        /* enum kernels */
    T base;                 /* KERNEL_ADD: added to every element */
} dpu_arguments_t;

typedef struct {
    T total;                /* KERNEL_SCAN: sum of this DPU's slice */
    uint64_t cycles;
} dpu_results_t;

/* 2^BL-byte blocks: 1 KiB fits 24 tasklets (stack + one buffer each). */
#ifndef BL
#define BL 10
#endif
#define BLOCK_SIZE_LOG2 BL
#define BLOCK_SIZE (1 << BLOCK_SIZE_LOG2)
#define BLOCK_ELEMS (BLOCK_SIZE / sizeof(T))

#define divceil(n, m) (((n) + (m) - 1) / (m))
#define roundup(n, m) (divceil(n, m) * (m))

#endif
