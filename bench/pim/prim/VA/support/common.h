/* VA: vector addition C = A + B (int32). Shared by the host and the DPU code. */
#ifndef VA_COMMON_H
#define VA_COMMON_H

#include <stdint.h>

typedef int32_t T;

/* What the host tells each DPU (the DPU's __host DPU_INPUT_ARGUMENTS). */
typedef struct {
    uint32_t size;          /* bytes of real elements in this DPU's slice (multiple of 8) */
    uint32_t transfer_size; /* bytes reserved per vector in MRAM, the same on every DPU */
    uint32_t verbose;       /* DPU 0 prints what it did (read back with dpu_log_read) */
    uint32_t reserved;
} dpu_arguments_t;

/* What each DPU reports back (its __host DPU_RESULTS). */
typedef struct {
    uint64_t cycles; /* perfcounter cycles of the kernel, tasklet 0 */
} dpu_results_t;

/* Block size (bytes) each tasklet moves per DMA: 2^BL. 1 KiB blocks fit 16
 * tasklets (16 stacks + 2 x 16 KiB of buffers); above that use 512 B. */
#ifndef BL
#if defined(NR_TASKLETS) && NR_TASKLETS > 16
#define BL 9
#else
#define BL 10
#endif
#endif
#define BLOCK_SIZE_LOG2 BL
#define BLOCK_SIZE (1 << BLOCK_SIZE_LOG2)

#define divceil(n, m) (((n) + (m) - 1) / (m))
#define roundup(n, m) (divceil(n, m) * (m))

#endif
