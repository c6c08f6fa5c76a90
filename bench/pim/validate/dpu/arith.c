/* Arithmetic throughput, after PrIM's microbenchmark (Gomez-Luna et al., IEEE
 * Access 2022, Sec. 3.1.1; CMU-SAFARI/prim-benchmarks Arithmetic-Throughput):
 * every tasklet streams 1 KiB blocks of A from MRAM into WRAM, updates each
 * element with one operation and a scalar, and writes the block to B. The
 * update of every block is timed with the cycle counter between two barriers,
 * so the figure is the tasklet's own time in update() with all tasklets
 * updating at once; each tasklet sums its blocks. Written for nearmem in plain
 * UPMEM C. */
#include <alloc.h>
#include <barrier.h>
#include <defs.h>
#include <mram.h>
#include <perfcounter.h>
#include <stdint.h>

#include "validate.h"

__host vt_arith_args ARGS;
__host uint64_t RESULT_CYCLES[NR_TASKLETS];

BARRIER_INIT(vt_barrier, NR_TASKLETS);

/* One loop per op and type: load, op with the scalar, store. */
#define VT_UPDATE(name, T, OP)                                                                                   \
    static void name(void *block, uint32_t scalar_bits)                                                          \
    {                                                                                                            \
        T *b = (T *)block;                                                                                       \
        T s = (T)scalar_bits;                                                                                    \
        for (unsigned i = 0; i < VT_BLOCK / sizeof(T); i++) {                                                    \
            T v = b[i];                                                                                          \
            v OP s;                                                                                              \
            b[i] = v;                                                                                            \
        }                                                                                                        \
    }
#define VT_TYPES(op, OP)                                                                                         \
    VT_UPDATE(op##_i32, int32_t, OP)                                                                             \
    VT_UPDATE(op##_u32, uint32_t, OP)                                                                            \
    VT_UPDATE(op##_i64, int64_t, OP)                                                                             \
    VT_UPDATE(op##_u64, uint64_t, OP)                                                                            \
    VT_UPDATE(op##_f32, float, OP)                                                                               \
    VT_UPDATE(op##_f64, double, OP)
VT_TYPES(add, +=)
VT_TYPES(sub, -=)
VT_TYPES(mul, *=)
VT_TYPES(div, /=)

typedef void (*vt_update_fn)(void *, uint32_t);
#define VT_ROW(op) op##_i32, op##_u32, op##_i64, op##_u64, op##_f32, op##_f64
static vt_update_fn const updates[VT_NR_OPS * VT_NR_TYPES] = {VT_ROW(add), VT_ROW(sub), VT_ROW(mul), VT_ROW(div)};

int main(void)
{
    unsigned tid = me();
    if (tid == 0) {
        mem_reset();
        perfcounter_config(COUNT_CYCLES, true);
    }
    barrier_wait(&vt_barrier);
    uint32_t bytes = ARGS.bytes;
    vt_update_fn update = updates[ARGS.kernel % (VT_NR_OPS * VT_NR_TYPES)];
    uint32_t a = (uint32_t)DPU_MRAM_HEAP_POINTER + (tid << VT_BLOCK_LOG2);
    uint32_t b = a + bytes;
    void *cache = mem_alloc(VT_BLOCK);
    uint64_t cycles = 0;
    /* Every tasklet runs the same number of rounds, so the barriers match. */
    for (uint32_t off = 0; off < bytes; off += VT_BLOCK * NR_TASKLETS) {
        mram_read((__mram_ptr void const *)(a + off), cache, VT_BLOCK);
        barrier_wait(&vt_barrier);
        perfcounter_t t0 = perfcounter_get();
        update(cache, ARGS.elems);
        cycles += perfcounter_get() - t0;
        barrier_wait(&vt_barrier);
        mram_write(cache, (__mram_ptr void *)(b + off), VT_BLOCK);
    }
    RESULT_CYCLES[tid] = cycles;
    return 0;
}
