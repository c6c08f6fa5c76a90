/* HST-L: histogram of uint32 samples (DEPTH-bit pixels) into -b bins, with
 * one histogram per DPU in WRAM shared by all tasklets under a mutex: more
 * bins than HST-S can hold per tasklet. Shared by the host and the DPU code. */
#ifndef HST_COMMON_H
#define HST_COMMON_H

#include <stdint.h>

typedef uint32_t T;

#define DEPTH 12
#define MAX_BINS 4096
#define MAX_SAMPLES_PER_DPU (8u << 20) /* the DPU's __mram_noinit input: 32 MiB */

typedef struct {
    uint32_t count; /* samples of this DPU */
    uint32_t bins;  /* even, <= MAX_BINS */
} dpu_arguments_t;

typedef struct {
    uint64_t cycles;
} dpu_results_t;

#define BIN_OF(x, bins) (((uint32_t)(x) * (uint32_t)(bins)) >> DEPTH)

/* 2^BL-byte input blocks: 1 KiB up to 16 tasklets, 512 B above. */
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
