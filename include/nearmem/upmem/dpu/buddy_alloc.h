/* UPMEM SDK <buddy_alloc.h> (nearmem): a buddy allocator over a WRAM area
 * taken once from mem_alloc by buddy_init (2 KiB .. 32 KiB, a power of 2);
 * blocks are powers of 2 from 16 bytes, 8-byte aligned; runtime-safe.
 * buddy_free of a pointer it does not own does nothing (errno EINVAL). */
#ifndef DPUSYSCORE_BUDDY_ALLOC_H
#define DPUSYSCORE_BUDDY_ALLOC_H

#include <stddef.h>

void buddy_init(size_t size_of_heap);
void buddy_reset(void);
void *buddy_alloc(size_t size);
void buddy_free(void *pointer);
void *buddy_realloc(void *ptr, size_t size);

#endif
