/* UPMEM SDK <mram_unaligned.h> (nearmem): MRAM transfers of any address and
 * size up to 2048 bytes. Costed as the aligned DMA(s) they need. */
#ifndef DPUSYSCORE_MRAM_UNALIGNED_H
#define DPUSYSCORE_MRAM_UNALIGNED_H

#include <stdint.h>
#include <attributes.h>
#include <mram.h>

/* Reads the 8-byte-aligned range that holds [from, from + n) into `buffer`
 * (which must hold n + 16 bytes) and returns the address of the byte at
 * `from` inside it. */
static inline void *mram_read_unaligned(const __mram_ptr void *from, void *buffer, unsigned int nb_of_bytes)
{
    uint32_t a = (uint32_t)(uintptr_t)from;
    __nm_dma_read_unaligned(a, buffer, nb_of_bytes);
    return (uint8_t *)buffer + (a & 7u);
}

/* Writes n bytes at `to`, keeping the MRAM bytes around them. As in the SDK,
 * `from` must have the same alignment modulo 8 as `to`. */
static inline void mram_write_unaligned(const void *from, __mram_ptr void *to, unsigned int nb_of_bytes)
{
    __nm_dma_write_unaligned(from, (uint32_t)(uintptr_t)to, nb_of_bytes);
}

#endif
