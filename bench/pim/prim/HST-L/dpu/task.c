/* HST-L on the DPU: one histogram in WRAM shared by the tasklets; every
 * update takes the DPU's mutex. Input and output are MRAM variables. */
#include <stdint.h>

#include <alloc.h>
#include <barrier.h>
#include <defs.h>
#include <mram.h>
#include <mutex.h>
#include <perfcounter.h>

#include "../support/common.h"

__host dpu_arguments_t DPU_INPUT_ARGUMENTS;
__host dpu_results_t DPU_RESULTS;

__mram_noinit T input[MAX_SAMPLES_PER_DPU];
__mram_noinit uint32_t histogram[MAX_BINS];

uint32_t *histo; /* the shared WRAM histogram */

BARRIER_INIT(my_barrier, NR_TASKLETS);
MUTEX_INIT(my_mutex);

#define OUT_BINS 512 /* bins per DMA when writing the result: 2 KiB */

int main(void)
{
    unsigned int tasklet_id = me();
    uint32_t bins = DPU_INPUT_ARGUMENTS.bins;
    if (tasklet_id == 0) {
        mem_reset();
        perfcounter_config(COUNT_CYCLES, true);
        histo = (uint32_t *)mem_alloc(bins * sizeof(uint32_t));
    }
    barrier_wait(&my_barrier);
    for (uint32_t b = tasklet_id; b < bins; b += NR_TASKLETS)
        histo[b] = 0;
    T *cache = (T *)mem_alloc(BLOCK_SIZE);
    barrier_wait(&my_barrier);

    uint32_t count = DPU_INPUT_ARGUMENTS.count;
    for (uint32_t first = tasklet_id * BLOCK_ELEMS; first < count; first += NR_TASKLETS * BLOCK_ELEMS) {
        uint32_t elems = count - first < BLOCK_ELEMS ? count - first : BLOCK_ELEMS;
        mram_read(&input[first], cache, roundup(elems * sizeof(T), 8));
        for (uint32_t i = 0; i < elems; i++) {
            uint32_t bin = BIN_OF(cache[i], bins);
            mutex_lock(my_mutex);
            histo[bin]++;
            mutex_unlock(my_mutex);
        }
    }
    barrier_wait(&my_barrier);

    for (uint32_t first = tasklet_id * OUT_BINS; first < bins; first += NR_TASKLETS * OUT_BINS) {
        uint32_t n = bins - first < OUT_BINS ? bins - first : OUT_BINS;
        mram_write(histo + first, &histogram[first], n * sizeof(uint32_t));
    }
    barrier_wait(&my_barrier);
    if (tasklet_id == 0)
        DPU_RESULTS.cycles = perfcounter_get();
    return 0;
}
