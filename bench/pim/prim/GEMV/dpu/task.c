/* GEMV on the DPU: tasklets take pairs of rows round-robin; a row's dot
 * product streams blocks of the row and of x from MRAM. MRAM layout from the
 * heap pointer: A[rows_per_dpu][cols] x[cols] y[rows_per_dpu]. */
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

/* One row times x. */
T gemv(__mram_ptr T *row, __mram_ptr T *x, uint32_t cols, T *row_cache, T *x_cache)
{
    T acc = 0;
    for (uint32_t first = 0; first < cols; first += BLOCK_ELEMS) {
        uint32_t elems = cols - first < BLOCK_ELEMS ? cols - first : BLOCK_ELEMS;
        mram_read(row + first, row_cache, elems * sizeof(T));
        mram_read(x + first, x_cache, elems * sizeof(T));
        for (uint32_t j = 0; j < elems; j++)
            acc += row_cache[j] * x_cache[j];
    }
    return acc;
}

int main(void)
{
    unsigned int tasklet_id = me();
    if (tasklet_id == 0) {
        mem_reset();
        perfcounter_config(COUNT_CYCLES, true);
    }
    barrier_wait(&my_barrier);

    uint32_t rows = DPU_INPUT_ARGUMENTS.rows;
    uint32_t cols = DPU_INPUT_ARGUMENTS.cols;
    __mram_ptr T *A = (__mram_ptr T *)DPU_MRAM_HEAP_POINTER;
    __mram_ptr T *x = A + DPU_INPUT_ARGUMENTS.rows_per_dpu * cols;
    __mram_ptr T *y = x + cols;

    T *row_cache = (T *)mem_alloc(BLOCK_SIZE);
    T *x_cache = (T *)mem_alloc(BLOCK_SIZE);
    T *out = (T *)mem_alloc(2 * sizeof(T));
    for (uint32_t r = 2 * tasklet_id; r < rows; r += 2 * NR_TASKLETS) {
        out[0] = gemv(A + r * cols, x, cols, row_cache, x_cache);
        out[1] = r + 1 < rows ? gemv(A + (r + 1) * cols, x, cols, row_cache, x_cache) : 0;
        mram_write(out, y + r, 2 * sizeof(T));
    }
    barrier_wait(&my_barrier);
    if (tasklet_id == 0)
        DPU_RESULTS.cycles = perfcounter_get();
    return 0;
}
