/* UPMEM SDK <attributes.h> (nearmem).
 *
 * __mram_ptr is address space 271, x86's 32-bit pointers: an MRAM pointer is
 * 4 bytes, as on the DPU, and cannot be mixed with a WRAM pointer without a
 * cast (which nearmem-dpu-cc refuses, as UPMEM's compiler does). Every
 * access through one becomes a DMA of this DPU's MRAM. */
#ifndef DPUSYSCORE_ATTRIBUTES_H
#define DPUSYSCORE_ATTRIBUTES_H

#include "_nearmem_rt.h"

#define DEPRECATED __attribute__((deprecated))
#if __STDC_VERSION__ >= 201112L
#define __NO_RETURN _Noreturn
#else
#define __NO_RETURN
#endif
#define __weak __attribute__((weak))
#define __section(s) __attribute__((section(s)))
#define __aligned(a) __attribute__((aligned(a)))
#define __used __attribute__((used))
#define __noinline __attribute__((noinline))
#define __atomic_bit __section(".atomic")
#define __dma_aligned __aligned(8)
#define __keep __used __section(".data.__sys_keep")
#define __host __aligned(8) __used __section(".dpu_host")
#define __lower_data(name) __attribute__((used, section(".data.immediate_memory." name)))

#define __mram_ptr __attribute__((address_space(271)))
#define __mram __mram_ptr __section(".mram") __dma_aligned __used
#define __mram_noinit __mram_ptr __section(".mram.noinit") __dma_aligned __used
#define __mram_keep __mram_ptr __section(".mram.keep") __dma_aligned __used
#define __mram_noinit_keep __mram_ptr __section(".mram.noinit.keep") __dma_aligned __used

#endif
