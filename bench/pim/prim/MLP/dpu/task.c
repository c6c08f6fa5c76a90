/* MLP on the DPU: one layer per launch. MRAM from the heap pointer: the
 * weights of every layer, W[nr_layers][rows_per_dpu][cols], then the layer's
 * input x[cols], then its output y[rows_per_dpu]. Tasklets take row pairs
 * round-robin. */
#include <stdint.h>

#include <alloc.h>
#include <barrier.h>
#include <defs.h>
#include <mram.h>
#include <perfcounter.h>

#include "../support/common.h"

__host dpu_arguments_t DPU_INPUT_ARGUMENTS;
__host dpu_results_t DPU_RESULTS;
__host uint32_t nr_layers; /* layers whose weights are resident */

__mram uint32_t layer_shift[MAX_LAYERS] = LAYER_SHIFTS;

uint32_t current_layer;    /* set by tasklet 0 for the others */

BARRIER_INIT(my_barrier, NR_TASKLETS);

static uint32_t dot(__mram_ptr T *w, __mram_ptr T *x, uint32_t cols, T *w_cache, T *x_cache)
{
    uint32_t acc = 0;
    for (uint32_t first = 0; first < cols; first += BLOCK_ELEMS) {
        uint32_t elems = cols - first < BLOCK_ELEMS ? cols - first : BLOCK_ELEMS;
        mram_read(w + first, w_cache, elems * sizeof(T));
        mram_read(x + first, x_cache, elems * sizeof(T));
        for (uint32_t j = 0; j < elems; j++)
            acc += (uint32_t)w_cache[j] * (uint32_t)x_cache[j];
    }
    return acc;
}

int main(void)
{
    unsigned int tasklet_id = me();
    if (tasklet_id == 0) {
        mem_reset();
        perfcounter_config(COUNT_CYCLES, true);
        current_layer = DPU_INPUT_ARGUMENTS.layer;
    }
    barrier_wait(&my_barrier);

    uint32_t rows = DPU_INPUT_ARGUMENTS.rows, cols = DPU_INPUT_ARGUMENTS.cols;
    uint32_t rows_per_dpu = DPU_INPUT_ARGUMENTS.rows_per_dpu;
    uint32_t shift = layer_shift[current_layer];
    __mram_ptr T *W = (__mram_ptr T *)DPU_MRAM_HEAP_POINTER;
    __mram_ptr T *x = W + nr_layers * rows_per_dpu * cols;
    __mram_ptr T *y = x + cols;
    __mram_ptr T *layer_w = W + current_layer * rows_per_dpu * cols;

    T *w_cache = (T *)mem_alloc(BLOCK_SIZE);
    T *x_cache = (T *)mem_alloc(BLOCK_SIZE);
    T *out = (T *)mem_alloc(2 * sizeof(T));
    for (uint32_t r = 2 * tasklet_id; r < rows; r += 2 * NR_TASKLETS) {
        out[0] = activate(dot(layer_w + r * cols, x, cols, w_cache, x_cache), shift);
        out[1] = r + 1 < rows ? activate(dot(layer_w + (r + 1) * cols, x, cols, w_cache, x_cache), shift) : 0;
        mram_write(out, y + r, 2 * sizeof(T));
    }
    barrier_wait(&my_barrier);
    if (tasklet_id == 0)
        DPU_RESULTS.cycles = perfcounter_get();
    return 0;
}
