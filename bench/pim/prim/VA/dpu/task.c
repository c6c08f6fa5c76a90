/* VA on the DPU: each tasklet adds blocks of A and B (B += A, in place).
 * MRAM layout from DPU_MRAM_HEAP_POINTER: A[transfer_size] B[transfer_size]. */
#include <stdint.h>
#include <stdio.h>

#include <alloc.h>
#include <barrier.h>
#include <defs.h>
#include <mram.h>
#include <perfcounter.h>

#include "../support/common.h"

__host dpu_arguments_t DPU_INPUT_ARGUMENTS;
__host dpu_results_t DPU_RESULTS;

BARRIER_INIT(my_barrier, NR_TASKLETS);

static void add_block(T *b, const T *a, unsigned int count)
{
    for (unsigned int i = 0; i < count; i++)
        b[i] += a[i];
}

int main(void)
{
    unsigned int tasklet_id = me();
    if (tasklet_id == 0) {
        mem_reset(); /* the heap survives a previous launch */
        perfcounter_config(COUNT_CYCLES, true);
    }
    barrier_wait(&my_barrier);

    uint32_t size = DPU_INPUT_ARGUMENTS.size;
    uint32_t mram_a = (uint32_t)DPU_MRAM_HEAP_POINTER;
    uint32_t mram_b = mram_a + DPU_INPUT_ARGUMENTS.transfer_size;

    T *cache_a = (T *)mem_alloc(BLOCK_SIZE);
    T *cache_b = (T *)mem_alloc(BLOCK_SIZE);

    for (uint32_t off = tasklet_id << BLOCK_SIZE_LOG2; off < size; off += NR_TASKLETS << BLOCK_SIZE_LOG2) {
        uint32_t bytes = (size - off < BLOCK_SIZE) ? size - off : BLOCK_SIZE;
        mram_read((__mram_ptr void const *)(mram_a + off), cache_a, bytes);
        mram_read((__mram_ptr void const *)(mram_b + off), cache_b, bytes);
        add_block(cache_b, cache_a, bytes / sizeof(T));
        mram_write(cache_b, (__mram_ptr void *)(mram_b + off), bytes);
    }

    barrier_wait(&my_barrier);
    if (tasklet_id == 0) {
        DPU_RESULTS.cycles = perfcounter_get();
        if (DPU_INPUT_ARGUMENTS.verbose)
            printf("VA: %u bytes, %u tasklets, %u cycles\n", size, NR_TASKLETS, (unsigned int)DPU_RESULTS.cycles);
    }
    return 0;
}
