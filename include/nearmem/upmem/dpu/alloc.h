/* UPMEM SDK <alloc.h> (nearmem): the WRAM heap after globals and stacks,
 * reset at each boot. mem_alloc returns 8-byte aligned buffers and faults
 * when the heap is exhausted. */
#ifndef DPUSYSCORE_ALLOC_H
#define DPUSYSCORE_ALLOC_H

#include <stddef.h>
#include <fsb_allocator.h>
#include <buddy_alloc.h>
#include <attributes.h>

static inline void *mem_alloc(size_t size) { return __nm_mem_alloc(size); }
static inline void *mem_reset(void) { return __nm_mem_reset(); }

#endif
