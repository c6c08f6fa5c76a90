/* GEMV: y = A x for a uint32 matrix A (-m rows x -n columns), arithmetic
 * modulo 2^32. Rows are split across DPUs; x goes to every DPU. Shared by the
 * host and the DPU code. */
#ifndef GEMV_COMMON_H
#define GEMV_COMMON_H

#include <stdint.h>

typedef uint32_t T;

typedef struct {
    uint32_t rows;          /* rows of this DPU */
    uint32_t rows_per_dpu;  /* rows reserved per DPU (even, the same on every DPU) */
    uint32_t cols;          /* columns, padded to even */
    uint32_t reserved;
} dpu_arguments_t;

typedef struct {
    uint64_t cycles;
} dpu_results_t;

/* Rows each DPU gets: an even number, so y moves in 8-byte units. */
uint32_t rows_per_dpu_for(uint32_t rows, uint32_t nr_dpus)
{
    uint32_t r = (rows + nr_dpus - 1) / nr_dpus;
    return r + (r & 1);
}

/* 2^BL-byte blocks of a row and of x. */
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
