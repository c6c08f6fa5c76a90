/* UPMEM SDK <built_ins.h> (nearmem): the DPU compiler's __builtin_dpu_*
 * names that kernels call directly, as macros over nearmem's runtime. */
#ifndef DPUSYSCORE_BUILT_INS_H
#define DPUSYSCORE_BUILT_INS_H

#include "_nearmem_rt.h"

#define __builtin_dpu_tid() __nm_me()
#define __builtin_dpu_ldma(wram, mram, n) __nm_dma_read((uint32_t)(uintptr_t)(mram), (wram), (n))
#define __builtin_dpu_sdma(wram, mram, n) __nm_dma_write((wram), (uint32_t)(uintptr_t)(mram), (n))

#endif
