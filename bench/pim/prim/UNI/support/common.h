/* UNI: unique, i.e. drop every int64 element equal to the one before it
 * (like uniq(1)), keeping the order. Shared by the host and the DPU code. */
#ifndef UNI_COMMON_H
#define UNI_COMMON_H

#include <stdint.h>

typedef int64_t T;

typedef struct {
    uint32_t count;         /* elements of this DPU */
    uint32_t transfer_size; /* bytes reserved for the input in MRAM; the output follows */
} dpu_arguments_t;

typedef struct {
    uint32_t kept;
    uint32_t reserved;
    uint64_t cycles;
} dpu_results_t;

#ifndef BL
#define BL 10
#endif
#define BLOCK_SIZE_LOG2 BL
#define BLOCK_SIZE (1 << BLOCK_SIZE_LOG2)
#define BLOCK_ELEMS (BLOCK_SIZE / sizeof(T))

#define divceil(n, m) (((n) + (m) - 1) / (m))
#define roundup(n, m) (divceil(n, m) * (m))

#endif
