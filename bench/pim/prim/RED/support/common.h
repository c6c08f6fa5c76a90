/* RED: reduction (sum) of int64 elements. Shared by the host and the DPU code. */
#ifndef RED_COMMON_H
#define RED_COMMON_H

#include <stdint.h>

typedef int64_t T;

/* The most elements one DPU holds: the DPU's __mram_noinit input array. */
#define MAX_ELEMS_PER_DPU ((56u << 20) / 8) /* 56 MiB of int64: 7 Mi elements */

typedef struct {
    uint32_t count; /* elements of this DPU */
    uint32_t reserved;
} dpu_arguments_t;

typedef struct {
    T sum;
    uint64_t cycles;
} dpu_results_t;

/* 2^BL-byte blocks: 2 KiB up to 16 tasklets, 1 KiB above (24 x (1 KiB stack + 1 KiB)). */
#ifndef BL
#if defined(NR_TASKLETS) && NR_TASKLETS > 16
#define BL 10
#else
#define BL 11
#endif
#endif
#define BLOCK_SIZE_LOG2 BL
#define BLOCK_SIZE (1 << BLOCK_SIZE_LOG2)
#define BLOCK_ELEMS (BLOCK_SIZE / sizeof(T))

#define divceil(n, m) (((n) + (m) - 1) / (m))
#define roundup(n, m) (divceil(n, m) * (m))

#endif
