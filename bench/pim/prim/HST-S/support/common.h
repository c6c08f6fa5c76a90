/* HST-S: histogram of uint32 samples (image pixels of DEPTH bits) into -b
 * bins, with one private histogram per tasklet in WRAM, merged at the end.
 * Shared by the host and the DPU code. */
#ifndef HST_COMMON_H
#define HST_COMMON_H

#include <stdint.h>

typedef uint32_t T;

#define DEPTH 12            /* sample bits: values 0..4095 */
#define MAX_BINS 4096

typedef struct {
    uint32_t size;          /* bytes of samples in this DPU's slice */
    uint32_t transfer_size; /* bytes reserved for the samples in MRAM (same on every DPU) */
    uint32_t bins;          /* even, <= MAX_BINS */
    uint32_t reserved;
} dpu_arguments_t;

typedef struct {
    uint64_t cycles;
} dpu_results_t;

/* The bin of a sample. */
#define BIN_OF(x, bins) (((uint32_t)(x) * (uint32_t)(bins)) >> DEPTH)

/* Input bytes per tasklet step: 2^BL. */
#ifndef BL
#define BL 10
#endif
#define BLOCK_SIZE_LOG2 BL
#define BLOCK_SIZE (1 << BLOCK_SIZE_LOG2)

#define divceil(n, m) (((n) + (m) - 1) / (m))
#define roundup(n, m) (divceil(n, m) * (m))

#endif
