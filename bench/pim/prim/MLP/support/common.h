/* MLP: inference of a quantised multilayer perceptron with -l layers of -n
 * neurons: x' = max(0, W x) >> shift[layer] in int32 (products and sums
 * modulo 2^32). Each layer's rows are split across DPUs; the host gathers a
 * layer's output and broadcasts it as the next layer's input. Shared by the
 * host and the DPU code. */
#ifndef MLP_COMMON_H
#define MLP_COMMON_H

#include <stdint.h>

typedef int32_t T;

#define MAX_LAYERS 8
/* Requantisation shift of each layer (an initialised MRAM table on the DPU). */
#define LAYER_SHIFTS {6, 7, 8, 6, 7, 8, 6, 7}

typedef struct {
    uint32_t layer;
    uint32_t rows;          /* rows of this DPU */
    uint32_t rows_per_dpu;  /* even, the same on every DPU */
    uint32_t cols;          /* neurons, padded to even */
} dpu_arguments_t;

typedef struct {
    uint64_t cycles;
} dpu_results_t;

/* One neuron's output from its accumulated sum. */
static inline T activate(uint32_t acc, uint32_t shift)
{
    int32_t v = (int32_t)acc;
    return v > 0 ? v >> shift : 0;
}

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
