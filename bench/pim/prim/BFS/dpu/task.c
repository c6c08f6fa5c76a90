/* BFS on the DPU, one level per launch:
 * 1. the tasklets clear the next-frontier bitmap;
 * 2. each tasklet takes 64-vertex words of this DPU's frontier round-robin;
 *    for each frontier vertex it records the level and walks the vertex's
 *    neighbours with a sequential reader, setting the bit of every neighbour
 *    not yet visited (under a mutex: the bitmap words are shared). */
#include <stdint.h>

#include <alloc.h>
#include <barrier.h>
#include <defs.h>
#include <mram.h>
#include <mutex.h>
#include <perfcounter.h>
#include <seqread.h>

#include "../support/common.h"

__host dpu_arguments_t DPU_INPUT_ARGUMENTS;
__host dpu_results_t DPU_RESULTS;
__host uint32_t level;

BARRIER_INIT(my_barrier, NR_TASKLETS);
MUTEX_INIT(next_mutex);

#define CLEAR_BYTES 256

int main(void)
{
    unsigned int tasklet_id = me();
    if (tasklet_id == 0) {
        mem_reset();
        perfcounter_config(COUNT_CYCLES, true);
    }
    barrier_wait(&my_barrier);

    const dpu_arguments_t *a = &DPU_INPUT_ARGUMENTS;
    __mram_ptr uint8_t *heap = (__mram_ptr uint8_t *)DPU_MRAM_HEAP_POINTER;
    __mram_ptr uint32_t *ptrs = (__mram_ptr uint32_t *)(heap + a->ptrs_off);
    __mram_ptr uint32_t *edges = (__mram_ptr uint32_t *)(heap + a->edges_off);
    __mram_ptr uint32_t *levels = (__mram_ptr uint32_t *)(heap + a->levels_off);
    __mram_ptr uint64_t *frontier = (__mram_ptr uint64_t *)(heap + a->frontier_off);
    __mram_ptr uint64_t *visited = (__mram_ptr uint64_t *)(heap + a->visited_off);
    __mram_ptr uint64_t *next = (__mram_ptr uint64_t *)(heap + a->next_off);

    /* 1. next = 0 */
    uint64_t *zeros = (uint64_t *)mem_alloc(CLEAR_BYTES);
    for (unsigned int k = 0; k < CLEAR_BYTES / sizeof(uint64_t); k++)
        zeros[k] = 0;
    uint32_t bitmap_bytes = a->bitmap_words * sizeof(uint64_t);
    for (uint32_t off = tasklet_id * CLEAR_BYTES; off < bitmap_bytes; off += NR_TASKLETS * CLEAR_BYTES) {
        uint32_t bytes = bitmap_bytes - off < CLEAR_BYTES ? bitmap_bytes - off : CLEAR_BYTES;
        mram_write(zeros, (__mram_ptr uint8_t *)next + off, bytes);
    }
    barrier_wait(&my_barrier);

    /* 2. expand the frontier */
    seqreader_buffer_t cache = seqread_alloc();
    seqreader_t reader;
    uint32_t words = a->vertices / 64;
    for (uint32_t w = tasklet_id; w < words; w += NR_TASKLETS) {
        uint64_t bits = frontier[w];
        while (bits) {
            uint32_t b = (uint32_t)__builtin_ctzll(bits);
            bits &= bits - 1;
            uint32_t v = w * 64 + b; /* local vertex */
            levels[v] = level;
            uint32_t first = ptrs[v], end = ptrs[v + 1];
            if (first == end)
                continue;
            uint32_t *u = seqread_init(cache, &edges[first], &reader);
            for (uint32_t e = first; e < end; e++) {
                uint32_t word = *u >> 6;
                uint64_t bit = 1ull << (*u & 63);
                if (!(visited[word] & bit)) {
                    mutex_lock(next_mutex);
                    next[word] |= bit;
                    mutex_unlock(next_mutex);
                }
                u = seqread_get(u, sizeof(uint32_t), &reader);
            }
        }
    }
    barrier_wait(&my_barrier);
    if (tasklet_id == 0)
        DPU_RESULTS.cycles = perfcounter_get();
    return 0;
}
