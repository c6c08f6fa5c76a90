/* RED on the DPU: every tasklet sums its blocks of the __mram_noinit input,
 * then the tasklets combine their partial sums in a tree (log2(T) barrier
 * steps); tasklet 0 publishes the DPU's sum. */
#include <stdint.h>

#include <alloc.h>
#include <barrier.h>
#include <defs.h>
#include <mram.h>
#include <perfcounter.h>

#include "../support/common.h"

__host dpu_arguments_t DPU_INPUT_ARGUMENTS;
__host dpu_results_t DPU_RESULTS;

__mram_noinit T input[MAX_ELEMS_PER_DPU];

T partial[NR_TASKLETS]; /* one per tasklet, in this DPU's WRAM */

BARRIER_INIT(my_barrier, NR_TASKLETS);

int main(void)
{
    unsigned int tasklet_id = me();
    if (tasklet_id == 0) {
        mem_reset();
        perfcounter_config(COUNT_CYCLES, true);
    }
    barrier_wait(&my_barrier);

    uint32_t count = DPU_INPUT_ARGUMENTS.count;
    T *cache = (T *)mem_alloc(BLOCK_SIZE);
    T sum = 0;
    for (uint32_t first = tasklet_id * BLOCK_ELEMS; first < count; first += NR_TASKLETS * BLOCK_ELEMS) {
        uint32_t elems = count - first < BLOCK_ELEMS ? count - first : BLOCK_ELEMS;
        mram_read(&input[first], cache, elems * sizeof(T));
        for (uint32_t i = 0; i < elems; i++)
            sum += cache[i];
    }
    partial[tasklet_id] = sum;

    /* Tree: at step s, tasklet t (a multiple of 2s) adds t + s's sum. */
    for (unsigned int stride = 1; stride < NR_TASKLETS; stride <<= 1) {
        barrier_wait(&my_barrier);
        if ((tasklet_id & (2 * stride - 1)) == 0 && tasklet_id + stride < NR_TASKLETS)
            partial[tasklet_id] += partial[tasklet_id + stride];
    }
    if (tasklet_id == 0) {
        DPU_RESULTS.sum = partial[0];
        DPU_RESULTS.cycles = perfcounter_get();
    }
    return 0;
}
