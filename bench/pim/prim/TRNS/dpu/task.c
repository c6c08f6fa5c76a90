/* TRNS on the DPU: steps 2 and 3 of the in-place transposition (common.h).
 * A DPU holds `strips` strips of M m x n elements each, one after another
 * from the MRAM heap pointer. */
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

static int kernel_tiles(void);
static int kernel_cycles(void);
int (*kernels[NR_KERNELS])(void) = {kernel_tiles, kernel_cycles};

int main(void)
{
    if (me() == 0) {
        mem_reset();
        perfcounter_config(COUNT_CYCLES, true);
    }
    barrier_wait(&my_barrier);
    int ret = kernels[DPU_INPUT_ARGUMENTS.kernel]();
    barrier_wait(&my_barrier);
    if (me() == 0)
        DPU_RESULTS.cycles = perfcounter_get();
    return ret;
}

/* Step 2: tiles are dealt to tasklets round-robin; a tile (m rows of n) is
 * read whole, and written back column by column as n rows of m. */
static int kernel_tiles(void)
{
    uint32_t M = DPU_INPUT_ARGUMENTS.M, m = DPU_INPUT_ARGUMENTS.m, n = DPU_INPUT_ARGUMENTS.n;
    uint32_t tiles = M * DPU_INPUT_ARGUMENTS.strips;
    uint32_t tile_bytes = m * n * sizeof(T);
    uint32_t mram_base = (uint32_t)DPU_MRAM_HEAP_POINTER;
    T *tile = (T *)mem_alloc(tile_bytes);
    T *column = (T *)mem_alloc(m * sizeof(T));

    for (uint32_t t = me(); t < tiles; t += NR_TASKLETS) {
        uint32_t mram_tile = mram_base + t * tile_bytes;
        for (uint32_t off = 0; off < tile_bytes; off += 2048) {
            uint32_t bytes = tile_bytes - off < 2048 ? tile_bytes - off : 2048;
            mram_read((__mram_ptr void const *)(mram_tile + off), (uint8_t *)tile + off, bytes);
        }
        for (uint32_t j = 0; j < n; j++) {
            for (uint32_t i = 0; i < m; i++)
                column[i] = tile[i * n + j];
            mram_write(column, (__mram_ptr void *)(mram_tile + j * m * sizeof(T)), m * sizeof(T));
        }
    }
    return 0;
}

/* Step 3: a strip is an M x n matrix of m-element pieces; piece p = I n + j
 * goes to j M + I, i.e. p -> p M mod (M n - 1) (0 and M n - 1 stay). Every
 * cycle of that permutation is moved by the tasklet that owns its smallest
 * position, so no two tasklets touch one cycle and no flags are needed. */
static uint32_t next_position(uint32_t p, uint32_t M, uint32_t last)
{
    return (uint32_t)(((uint64_t)p * M) % last);
}

static int kernel_cycles(void)
{
    uint32_t M = DPU_INPUT_ARGUMENTS.M, m = DPU_INPUT_ARGUMENTS.m, n = DPU_INPUT_ARGUMENTS.n;
    uint32_t pieces = M * n, last = pieces - 1;
    uint32_t piece_bytes = m * sizeof(T);
    uint32_t mram_base = (uint32_t)DPU_MRAM_HEAP_POINTER;
    T *moving = (T *)mem_alloc(piece_bytes);
    T *displaced = (T *)mem_alloc(piece_bytes);

    if (pieces < 3)
        return 0;
    for (uint32_t w = me(); w < DPU_INPUT_ARGUMENTS.strips * pieces; w += NR_TASKLETS) {
        uint32_t s = w % pieces, strip = w / pieces;
        if (s == 0 || s == last)
            continue;
        /* Is s the smallest position of its cycle? */
        uint32_t q = next_position(s, M, last);
        while (q > s)
            q = next_position(q, M, last);
        if (q != s)
            continue;
        uint32_t mram_strip = mram_base + strip * pieces * piece_bytes;
        mram_read((__mram_ptr void const *)(mram_strip + s * piece_bytes), moving, piece_bytes);
        uint32_t cur = s;
        do {
            uint32_t dst = next_position(cur, M, last);
            mram_read((__mram_ptr void const *)(mram_strip + dst * piece_bytes), displaced, piece_bytes);
            mram_write(moving, (__mram_ptr void *)(mram_strip + dst * piece_bytes), piece_bytes);
            T *swap = moving;
            moving = displaced;
            displaced = swap;
            cur = dst;
        } while (cur != s);
    }
    return 0;
}
