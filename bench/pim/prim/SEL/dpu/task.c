/* SEL on the DPU: blocks are dealt to tasklets round-robin; each tasklet
 * compacts its block in WRAM, learns through a handshake chain how many
 * elements the blocks before it kept, and writes its kept elements there.
 * MRAM: input at the heap pointer, output after transfer_size bytes. */
#include <stdbool.h>
#include <stdint.h>

#include <alloc.h>
#include <barrier.h>
#include <defs.h>
#include <handshake.h>
#include <mram.h>
#include <perfcounter.h>

#include "../support/common.h"

__host dpu_arguments_t DPU_INPUT_ARGUMENTS;
__host dpu_results_t DPU_RESULTS;

uint32_t kept_before[NR_TASKLETS]; /* elements kept up to and including tasklet t's block */

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
    __mram_ptr T *in = (__mram_ptr T *)DPU_MRAM_HEAP_POINTER;
    __mram_ptr T *out = (__mram_ptr T *)((__mram_ptr uint8_t *)in + DPU_INPUT_ARGUMENTS.transfer_size);
    T *cache = (T *)mem_alloc(BLOCK_SIZE);

    uint32_t blocks = divceil(count, BLOCK_ELEMS);
    uint32_t rounds = divceil(blocks, NR_TASKLETS);
    for (uint32_t round = 0; round < rounds; round++) {
        uint32_t first = (round * NR_TASKLETS + tasklet_id) * BLOCK_ELEMS;
        uint32_t elems = first >= count ? 0 : (count - first < BLOCK_ELEMS ? count - first : BLOCK_ELEMS);
        uint32_t kept = 0;
        if (elems) {
            mram_read(in + first, cache, elems * sizeof(T));
            for (uint32_t i = 0; i < elems; i++)
                if (pred(cache[i]))
                    cache[kept++] = cache[i];
        }
        uint32_t base;
        if (tasklet_id == 0) {
            base = round == 0 ? 0 : kept_before[NR_TASKLETS - 1];
        } else {
            handshake_wait_for(tasklet_id - 1);
            base = kept_before[tasklet_id - 1];
        }
        kept_before[tasklet_id] = base + kept;
        if (tasklet_id < NR_TASKLETS - 1)
            handshake_notify();
        if (kept)
            mram_write(cache, out + base, kept * sizeof(T));
        barrier_wait(&my_barrier);
    }
    if (tasklet_id == 0) {
        DPU_RESULTS.kept = rounds ? kept_before[NR_TASKLETS - 1] : 0;
        DPU_RESULTS.cycles = perfcounter_get();
    }
    return 0;
}
