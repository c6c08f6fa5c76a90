/* SCAN-SSA on the DPU. Two kernels, chosen by DPU_INPUT_ARGUMENTS.kernel:
 *
 * SCAN: blocks are dealt to tasklets round-robin; in each round every tasklet
 *   scans its block in WRAM, then the tasklets pass the running sum along a
 *   handshake chain (tasklet t waits for t-1) so each learns the sum of all
 *   blocks before its own, adds it and writes the block back.
 * ADD: every element += base (the host's scan of the DPUs' totals).
 *
 * The slice lives at DPU_MRAM_HEAP_POINTER and is scanned in place. */
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

T carry[NR_TASKLETS]; /* running sum up to and including tasklet t's block of the round */

BARRIER_INIT(my_barrier, NR_TASKLETS);

static int kernel_scan(void);
static int kernel_add(void);
int (*kernels[NR_KERNELS])(void) = {kernel_scan, kernel_add};

int main(void)
{
    return kernels[DPU_INPUT_ARGUMENTS.kernel]();
}

static void begin(void)
{
    if (me() == 0) {
        mem_reset();
        perfcounter_config(COUNT_CYCLES, true);
    }
    barrier_wait(&my_barrier);
}

static int kernel_scan(void)
{
    begin();
    unsigned int tasklet_id = me();
    uint32_t count = DPU_INPUT_ARGUMENTS.count;
    __mram_ptr T *data = (__mram_ptr T *)DPU_MRAM_HEAP_POINTER;
    T *cache = (T *)mem_alloc(BLOCK_SIZE);

    uint32_t blocks = divceil(count, BLOCK_ELEMS);
    uint32_t rounds = divceil(blocks, NR_TASKLETS);
    for (uint32_t round = 0; round < rounds; round++) {
        uint32_t first = (round * NR_TASKLETS + tasklet_id) * BLOCK_ELEMS;
        uint32_t elems = first >= count ? 0 : (count - first < BLOCK_ELEMS ? count - first : BLOCK_ELEMS);
        T local = 0;
        if (elems) {
            mram_read(data + first, cache, elems * sizeof(T));
            for (uint32_t i = 0; i < elems; i++) {
                local += cache[i];
                cache[i] = local;
            }
        }
        /* The sum of every block before this one. */
        T base;
        if (tasklet_id == 0) {
            base = round == 0 ? 0 : carry[NR_TASKLETS - 1];
        } else {
            handshake_wait_for(tasklet_id - 1);
            base = carry[tasklet_id - 1];
        }
        carry[tasklet_id] = base + local;
        if (tasklet_id < NR_TASKLETS - 1)
            handshake_notify();

        if (elems) {
            for (uint32_t i = 0; i < elems; i++)
                cache[i] += base;
            mram_write(cache, data + first, elems * sizeof(T));
        }
        barrier_wait(&my_barrier);
    }
    if (tasklet_id == 0) {
        DPU_RESULTS.total = rounds ? carry[NR_TASKLETS - 1] : 0;
        DPU_RESULTS.cycles = perfcounter_get();
    }
    return 0;
}

static int kernel_add(void)
{
    begin();
    unsigned int tasklet_id = me();
    uint32_t count = DPU_INPUT_ARGUMENTS.count;
    T base = DPU_INPUT_ARGUMENTS.base;
    __mram_ptr T *data = (__mram_ptr T *)DPU_MRAM_HEAP_POINTER;
    T *cache = (T *)mem_alloc(BLOCK_SIZE);

    for (uint32_t first = tasklet_id * BLOCK_ELEMS; first < count; first += NR_TASKLETS * BLOCK_ELEMS) {
        uint32_t elems = count - first < BLOCK_ELEMS ? count - first : BLOCK_ELEMS;
        mram_read(data + first, cache, elems * sizeof(T));
        for (uint32_t i = 0; i < elems; i++)
            cache[i] += base;
        mram_write(cache, data + first, elems * sizeof(T));
    }
    barrier_wait(&my_barrier);
    if (tasklet_id == 0)
        DPU_RESULTS.cycles = perfcounter_get();
    return 0;
}
