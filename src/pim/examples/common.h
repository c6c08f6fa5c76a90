/* Shared by the example kernels (dpu/va.c, red.c, stream.c: plain UPMEM C) and their host
 * drivers, as support/common.h is in an UPMEM project. */
#ifndef NM_PIM_EXAMPLES_COMMON_H
#define NM_PIM_EXAMPLES_COMMON_H

#include <stdint.h>

/* Bytes per DMA block, PrIM's default BLOCK_SIZE for VA. */
#define EXAMPLE_BLOCK 1024u

typedef struct va_args {
    uint32_t size;          /* bytes of A (and of B) on this DPU */
    uint32_t transfer_size; /* bytes transferred (padded) */
} va_args;

#endif
