/* HST-S on the DPU: each tasklet reads its blocks of samples with a
 * sequential reader and counts them in its own WRAM histogram; after a
 * barrier the tasklets add the NR_TASKLETS histograms bin range by bin range
 * (into tasklet 0's, which only the range's owner touches) and write the
 * DPU's histogram to MRAM after the samples. */
#include <stdint.h>

/* 128-byte reader pages: 24 tasklets' stacks, histograms and readers fit in WRAM. */
#define SEQREAD_CACHE_SIZE 128

#include <alloc.h>
#include <barrier.h>
#include <defs.h>
#include <mram.h>
#include <perfcounter.h>
#include <seqread.h>

#include "../support/common.h"

__host dpu_arguments_t DPU_INPUT_ARGUMENTS;
__host dpu_results_t DPU_RESULTS;

uint32_t *histos[NR_TASKLETS]; /* each tasklet's private histogram (WRAM) */

BARRIER_INIT(my_barrier, NR_TASKLETS);

#define MERGE_BINS 64 /* bins merged per step: 256 B written per DMA */

int main(void)
{
    unsigned int tasklet_id = me();
    if (tasklet_id == 0) {
        mem_reset();
        perfcounter_config(COUNT_CYCLES, true);
    }
    barrier_wait(&my_barrier);

    uint32_t size = DPU_INPUT_ARGUMENTS.size;
    uint32_t bins = DPU_INPUT_ARGUMENTS.bins;
    uint32_t mram_in = (uint32_t)DPU_MRAM_HEAP_POINTER;
    uint32_t mram_out = mram_in + DPU_INPUT_ARGUMENTS.transfer_size;

    uint32_t *histo = (uint32_t *)mem_alloc(bins * sizeof(uint32_t));
    for (uint32_t b = 0; b < bins; b++)
        histo[b] = 0;
    histos[tasklet_id] = histo;
    seqreader_buffer_t cache = seqread_alloc();
    seqreader_t reader;

    for (uint32_t off = tasklet_id << BLOCK_SIZE_LOG2; off < size; off += NR_TASKLETS << BLOCK_SIZE_LOG2) {
        uint32_t elems = ((size - off < BLOCK_SIZE) ? size - off : BLOCK_SIZE) / sizeof(T);
        T *sample = seqread_init(cache, (__mram_ptr void *)(mram_in + off), &reader);
        for (uint32_t i = 0; i < elems; i++) {
            histo[BIN_OF(*sample, bins)]++;
            sample = seqread_get(sample, sizeof(T), &reader);
        }
    }
    barrier_wait(&my_barrier);

    /* Merge: tasklet t owns bin ranges t, t + T, ... of MERGE_BINS bins. */
    uint32_t *total = histos[0];
    for (uint32_t first = tasklet_id * MERGE_BINS; first < bins; first += NR_TASKLETS * MERGE_BINS) {
        uint32_t n = bins - first < MERGE_BINS ? bins - first : MERGE_BINS;
        for (uint32_t b = first; b < first + n; b++)
            for (unsigned int t = 1; t < NR_TASKLETS; t++)
                total[b] += histos[t][b];
        mram_write(total + first, (__mram_ptr void *)(mram_out + first * sizeof(uint32_t)), n * sizeof(uint32_t));
    }
    barrier_wait(&my_barrier);
    if (tasklet_id == 0)
        DPU_RESULTS.cycles = perfcounter_get();
    return 0;
}
