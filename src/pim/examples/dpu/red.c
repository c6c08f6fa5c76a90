/* A reduction (PrIM RED's shape, simplified) in plain UPMEM C: every tasklet
 * sums its blocks of uint64 values into a per-tasklet partial sum, a barrier,
 * then tasklet 0 adds the partial sums. */
#include <alloc.h>
#include <barrier.h>
#include <defs.h>
#include <mram.h>
#include <stdint.h>

#include "../common.h"

__host uint32_t red_size; /* bytes of values on this DPU */
__host uint64_t red_result;
uint64_t red_partial[NR_TASKLETS];
BARRIER_INIT(red_barrier, NR_TASKLETS);

int main(void)
{
    const uint32_t tid = me();
    const uint32_t base = (uint32_t)(uintptr_t)DPU_MRAM_HEAP_POINTER;
    uint64_t *cache = mem_alloc(EXAMPLE_BLOCK);
    uint64_t sum = 0;
    for (uint32_t off = tid * EXAMPLE_BLOCK; off < red_size; off += EXAMPLE_BLOCK * NR_TASKLETS) {
        uint32_t len = red_size - off < EXAMPLE_BLOCK ? red_size - off : EXAMPLE_BLOCK;
        mram_read((__mram_ptr const void *)(base + off), cache, len);
        for (uint32_t i = 0; i < len / 8; i++)
            sum += cache[i];
    }
    red_partial[tid] = sum;
    barrier_wait(&red_barrier);
    if (tid == 0) {
        uint64_t total = 0;
        for (uint32_t t = 0; t < NR_TASKLETS; t++)
            total += red_partial[t];
        red_result = total;
    }
    return 0;
}
