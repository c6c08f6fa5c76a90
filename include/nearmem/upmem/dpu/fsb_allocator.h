/* UPMEM SDK <fsb_allocator.h> (nearmem): fixed-size blocks from mem_alloc,
 * a free list threaded through the free blocks; runtime-safe. */
#ifndef DPUSYSCORE_FBS_ALLOC_H
#define DPUSYSCORE_FBS_ALLOC_H

typedef void **fsb_allocator_t;

fsb_allocator_t fsb_alloc(unsigned int block_size, unsigned int nb_of_blocks);
void *fsb_get(fsb_allocator_t allocator);
void fsb_free(fsb_allocator_t allocator, void *ptr);

#endif
