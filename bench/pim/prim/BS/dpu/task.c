/* BS on the DPU: each tasklet takes blocks of queries; for each query it
 * halves the range by reading single array elements straight from MRAM
 * (the compiler turns the dereference into a DMA) until the range fits one
 * block, then reads that block and finishes in WRAM. The answer (index or
 * NOT_FOUND) replaces the query in MRAM. */
#include <stdint.h>

#include <alloc.h>
#include <barrier.h>
#include <defs.h>
#include <mram.h>
#include <perfcounter.h>

#include "../support/common.h"

__host dpu_arguments_t DPU_INPUT_ARGUMENTS;
__host dpu_results_t DPU_RESULTS;

BARRIER_INIT(my_barrier, NR_TASKLETS);

static T search(__mram_ptr T *array, uint32_t n, T key, T *window)
{
    uint32_t lo = 0, hi = n; /* the first element >= key is in [lo, hi] */
    while (hi - lo > BLOCK_ELEMS) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (array[mid] < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (hi == lo)
        return lo < n && array[lo] == key ? (T)lo : NOT_FOUND;
    mram_read(array + lo, window, (hi - lo) * sizeof(T));
    for (uint32_t i = 0; i < hi - lo; i++)
        if (window[i] >= key)
            return window[i] == key ? (T)(lo + i) : NOT_FOUND;
    return hi < n && array[hi] == key ? (T)hi : NOT_FOUND;
}

int main(void)
{
    unsigned int tasklet_id = me();
    if (tasklet_id == 0) {
        mem_reset();
        perfcounter_config(COUNT_CYCLES, true);
    }
    barrier_wait(&my_barrier);

    uint32_t n = DPU_INPUT_ARGUMENTS.array_size;
    uint32_t queries = DPU_INPUT_ARGUMENTS.queries;
    __mram_ptr T *array = (__mram_ptr T *)DPU_MRAM_HEAP_POINTER;
    __mram_ptr T *query = array + n;

    T *cache = (T *)mem_alloc(BLOCK_SIZE);
    T *window = (T *)mem_alloc(BLOCK_SIZE);
    for (uint32_t first = tasklet_id * BLOCK_ELEMS; first < queries; first += NR_TASKLETS * BLOCK_ELEMS) {
        uint32_t elems = queries - first < BLOCK_ELEMS ? queries - first : BLOCK_ELEMS;
        mram_read(query + first, cache, elems * sizeof(T));
        for (uint32_t i = 0; i < elems; i++)
            cache[i] = search(array, n, cache[i], window);
        mram_write(cache, query + first, elems * sizeof(T));
    }
    barrier_wait(&my_barrier);
    if (tasklet_id == 0)
        DPU_RESULTS.cycles = perfcounter_get();
    return 0;
}
