/* UPMEM SDK <mram.h> (nearmem): MRAM <-> WRAM DMA.
 *
 * mram_read/mram_write behave as the DPU's ldma/sdma do (docs/pim-machine.md,
 * "Hardware semantics"): the low 3 bits of both addresses are ignored, and
 * the size is transferred as the DMA length field (nb_of_bytes/8 - 1, 8 bits)
 * encodes it; the machine counts each deviation from the documented rules
 * (8..2048 bytes, multiple of 8, 8-byte aligned) as a warning in the DPU's
 * statistics. */
#ifndef DPUSYSCORE_MRAM_H
#define DPUSYSCORE_MRAM_H

#include <stdint.h>
#include <attributes.h>

#define DPU_MRAM_HEAP_POINTER ((__mram_ptr void *)(&__sys_used_mram_end))
extern __mram_ptr __dma_aligned uint8_t __sys_used_mram_end[0];

static inline void mram_read(const __mram_ptr void *from, void *to, unsigned int nb_of_bytes)
{
    __NM_DMA_CONSTANT_CHECK(nb_of_bytes);
    __nm_dma_read((uint32_t)(uintptr_t)from, to, nb_of_bytes);
}

static inline void mram_write(const void *from, __mram_ptr void *to, unsigned int nb_of_bytes)
{
    __NM_DMA_CONSTANT_CHECK(nb_of_bytes);
    __nm_dma_write(from, (uint32_t)(uintptr_t)to, nb_of_bytes);
}

#endif
