/* UNI on the DPU: like SEL, blocks go to tasklets round-robin and a
 * handshake chain gives each block its output position; an element is kept
 * when it differs from the element before it (for a block's first element,
 * read straight from MRAM). The DPU's first element is always kept: the host
 * drops it if it repeats the previous DPU's last. */
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

uint32_t kept_before[NR_TASKLETS];

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
    __mram_ptr T *out = in + DPU_INPUT_ARGUMENTS.transfer_size / sizeof(T);
    T *cache = (T *)mem_alloc(BLOCK_SIZE);

    uint32_t blocks = divceil(count, BLOCK_ELEMS);
    uint32_t rounds = divceil(blocks, NR_TASKLETS);
    for (uint32_t round = 0; round < rounds; round++) {
        uint32_t first = (round * NR_TASKLETS + tasklet_id) * BLOCK_ELEMS;
        uint32_t elems = first >= count ? 0 : (count - first < BLOCK_ELEMS ? count - first : BLOCK_ELEMS);
        uint32_t kept = 0;
        if (elems) {
            mram_read(in + first, cache, elems * sizeof(T));
            T last = cache[0];
            if (first == 0 || in[first - 1] != last)
                kept = 1;
            for (uint32_t i = 1; i < elems; i++) {
                T v = cache[i];
                if (v != last)
                    cache[kept++] = v;
                last = v;
            }
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
