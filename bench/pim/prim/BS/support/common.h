/* BS: binary search of int64 queries in a sorted int64 array. Every DPU holds
 * the whole array; the queries are split across DPUs. Shared by the host and
 * the DPU code. */
#ifndef BS_COMMON_H
#define BS_COMMON_H

#include <stdint.h>

typedef int64_t T;

typedef struct {
    uint32_t array_size;    /* elements of the sorted array (at the MRAM heap) */
    uint32_t queries;       /* queries of this DPU (after the array) */
} dpu_arguments_t;

typedef struct {
    uint64_t cycles;
} dpu_results_t;

#define NOT_FOUND ((T)-1)

/* 2^BL-byte blocks of queries, and the window searched in WRAM. */
#ifndef BL
#if defined(NR_TASKLETS) && NR_TASKLETS > 16
#define BL 9
#else
#define BL 10
#endif
#endif
#define BLOCK_SIZE_LOG2 BL
#define BLOCK_SIZE (1 << BLOCK_SIZE_LOG2)
#define BLOCK_ELEMS (BLOCK_SIZE / sizeof(T))

#define divceil(n, m) (((n) + (m) - 1) / (m))
#define roundup(n, m) (divceil(n, m) * (m))

#endif
