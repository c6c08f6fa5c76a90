/* STREAM on one DPU, after PrIM's microbenchmarks (Sec. 3.2.2, MRAM; 3.3,
 * WRAM): COPY (DMA only), COPY-W, ADD, SCALE, TRIAD over 64-bit integers.
 * MRAM: each tasklet streams 1 KiB blocks of the inputs into WRAM, computes and
 * writes the block of C back; the figure is bytes read and written over the
 * kernel's cycles. WRAM: the same loops over arrays in WRAM only, `reps`
 * passes, timed between two barriers. Written for nearmem in plain UPMEM C. */
#include <alloc.h>
#include <barrier.h>
#include <defs.h>
#include <mram.h>
#include <perfcounter.h>
#include <stdbool.h>
#include <stdint.h>

#include "validate.h"

__host vt_stream_args ARGS;
__host uint64_t RESULT_CYCLES;

BARRIER_INIT(vt_barrier, NR_TASKLETS);

typedef uint64_t T;

static void compute(uint32_t kernel, T *c, const T *a, const T *b, uint32_t n, T s)
{
    switch (kernel) {
    case VT_S_COPYW:
        for (uint32_t i = 0; i < n; i++)
            c[i] = a[i];
        break;
    case VT_S_ADD:
        for (uint32_t i = 0; i < n; i++)
            c[i] = a[i] + b[i];
        break;
    case VT_S_SCALE:
        for (uint32_t i = 0; i < n; i++)
            c[i] = s * a[i];
        break;
    case VT_S_TRIAD:
        for (uint32_t i = 0; i < n; i++)
            c[i] = a[i] + s * b[i];
        break;
    default:
        break;
    }
}

int main(void)
{
    unsigned tid = me();
    if (tid == 0) {
        mem_reset();
        perfcounter_config(COUNT_CYCLES, true);
    }
    barrier_wait(&vt_barrier);
    const uint32_t kernel = ARGS.kernel, bytes = ARGS.bytes;
    const T s = 3;
    perfcounter_t t0 = perfcounter_get();
    if (ARGS.wram) {
        /* Each tasklet's own arrays, filled once outside the timed part. */
        T *a = mem_alloc(bytes), *b = mem_alloc(bytes), *c = mem_alloc(bytes);
        uint32_t n = bytes / sizeof(T);
        for (uint32_t i = 0; i < n; i++) {
            a[i] = i;
            b[i] = 2 * i;
        }
        barrier_wait(&vt_barrier);
        t0 = perfcounter_get();
        for (uint32_t r = 0; r < ARGS.reps; r++)
            compute(kernel, c, a, b, n, s);
    } else {
        T *a = mem_alloc(VT_BLOCK), *b = mem_alloc(VT_BLOCK), *c = mem_alloc(VT_BLOCK);
        uint32_t base = (uint32_t)DPU_MRAM_HEAP_POINTER;
        bool two = kernel == VT_S_ADD || kernel == VT_S_TRIAD;
        for (uint32_t off = tid << VT_BLOCK_LOG2; off < bytes; off += VT_BLOCK * NR_TASKLETS) {
            mram_read((__mram_ptr void const *)(base + off), a, VT_BLOCK);
            if (two)
                mram_read((__mram_ptr void const *)(base + bytes + off), b, VT_BLOCK);
            if (kernel == VT_S_COPY_DMA) {
                mram_write(a, (__mram_ptr void *)(base + 2 * bytes + off), VT_BLOCK);
                continue;
            }
            compute(kernel, c, a, b, VT_BLOCK / sizeof(T), s);
            mram_write(c, (__mram_ptr void *)(base + 2 * bytes + off), VT_BLOCK);
        }
    }
    barrier_wait(&vt_barrier);
    if (tid == 0)
        RESULT_CYCLES = perfcounter_get() - t0;
    return 0;
}
