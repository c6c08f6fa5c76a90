/* Shared by the example kernels (dpu/va.c, red.c, stream.c: plain UPMEM C) and their host
 * drivers, as support/common.h is in an UPMEM project. */
#ifndef NM_PIM_EXAMPLES_COMMON_H
#define NM_PIM_EXAMPLES_COMMON_H

#include <stdint.h>

/* Bytes per DMA block, PrIM's default BLOCK_SIZE for VA. */
#define EXAMPLE_BLOCK 1024u
/* Instructions charged per element (docs/pim-machine.md, "Charging
 * compute"): PrIM's 32-bit ADD throughput of 58.56 MOPS at 350 MHz is 6
 * instructions per element of a streaming loop; a 64-bit add one more. */
#define VA_INSTR_PER_ELEM 6u
#define RED_INSTR_PER_ELEM 7u

typedef struct va_args {
    uint32_t size;          /* bytes of A (and of B) on this DPU */
    uint32_t transfer_size; /* bytes transferred (padded) */
} va_args;

#endif
