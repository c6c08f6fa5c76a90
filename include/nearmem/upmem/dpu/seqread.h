/* UPMEM SDK <seqread.h> (nearmem): sequential reading of MRAM through a WRAM
 * cache of 2 x SEQREAD_CACHE_SIZE bytes (32 .. 1024). seqread_get's
 * increment must be below SEQREAD_CACHE_SIZE; the item it points to is
 * contiguous in WRAM up to SEQREAD_CACHE_SIZE bytes. */
#ifndef DPUSYSCORE_SEQREAD_H
#define DPUSYSCORE_SEQREAD_H

#include <stdint.h>
#include <mram.h>
#include <macro_utils.h>

#ifndef SEQREAD_CACHE_SIZE
#define SEQREAD_CACHE_SIZE 256
#endif

_Static_assert(SEQREAD_CACHE_SIZE == 32 || SEQREAD_CACHE_SIZE == 64 || SEQREAD_CACHE_SIZE == 128 ||
                   SEQREAD_CACHE_SIZE == 256 || SEQREAD_CACHE_SIZE == 512 || SEQREAD_CACHE_SIZE == 1024,
               "seqread error: invalid cache size defined");

typedef uintptr_t seqreader_buffer_t;

typedef struct {
    seqreader_buffer_t wram_cache;
    uintptr_t mram_addr;
} seqreader_t;

seqreader_buffer_t __nm_seqread_alloc(uint32_t size);
void *__nm_seqread_init(uint32_t size, seqreader_buffer_t cache, __mram_ptr void *mram_addr, seqreader_t *reader);
void *__nm_seqread_get(uint32_t size, void *ptr, uint32_t inc, seqreader_t *reader);
void *__nm_seqread_seek(uint32_t size, __mram_ptr void *mram_addr, seqreader_t *reader);
__mram_ptr void *__nm_seqread_tell(uint32_t size, void *ptr, seqreader_t *reader);

#define seqread_alloc() __nm_seqread_alloc(SEQREAD_CACHE_SIZE)
#define seqread_init(cache, mram_addr, reader) __nm_seqread_init(SEQREAD_CACHE_SIZE, (cache), (mram_addr), (reader))
#define seqread_get(ptr, inc, reader) __nm_seqread_get(SEQREAD_CACHE_SIZE, (ptr), (inc), (reader))
#define seqread_seek(mram_addr, reader) __nm_seqread_seek(SEQREAD_CACHE_SIZE, (mram_addr), (reader))
#define seqread_tell(ptr, reader) __nm_seqread_tell(SEQREAD_CACHE_SIZE, (ptr), (reader))

#endif
