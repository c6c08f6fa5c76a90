/* Test kernels for the emulated PIM machine: one program ("pim_test") with a
 * mode switch, one with a fixed NR_TASKLETS ("pim_test_fixed"), one whose
 * globals nearly fill WRAM ("pim_test_fat"). */
#ifndef PIM_TEST_KERNELS_H
#define PIM_TEST_KERNELS_H
#include <stdint.h>
#include "nearmem/pim/host.h"

enum pim_test_mode {
    M_NOTHING = 0,
    M_COPY,        /* each tasklet: MRAM heap block tid: every uint64 += arg0 */
    M_CHARGE,      /* charge arg0 instructions; res[tid] = cycle */
    M_DMA_TIMING,  /* tasklet 0: res[0] = cycles of one mram_read(arg0 bytes), res[1] = of one write */
    M_FAULT,       /* tasklet arg2 does fault arg0 with argument arg1 */
    M_MUTEX,       /* arg0 iterations of lock; counter++ (with a yield inside); unlock. res[0] = counter; arg1 = 1: no lock */
    M_TRYLOCK,     /* every tasklet trylocks once, holds it for arg0 instructions */
    M_BARRIER,     /* arg0 phases of write slot / barrier / check all / barrier; res[0] = errors */
    M_SEM,         /* tasklet 0 gives NR_TASKLETS-1 times, others take once; res[0] = takes */
    M_GLOBALS,     /* g_counter += g_tag (arg0 times); mvar[0] = g_counter (MRAM) */
    M_HEAP,        /* mem_alloc arg0 bytes per tasklet, record pointers; mem_reset checks */
    M_PERF,        /* perfcounter checks, res[0..3] */
    M_HW,          /* hardware unit: arg0 execs with arg1 extra cycles each */
    M_ME,          /* res[tid] = me(); res2 = NR_TASKLETS; res3 = heap pointer */
    M_CHARGE2,     /* charge arg0 + tid * arg1; res[tid] = cycle */
    M_PTR,         /* arg0 == 0: g_ptr = &slot[3], slot[3] = g_tag; else res[0] = *g_ptr */
    M_MIX,         /* deterministic mix of compute, DMA, mutex, barrier driven by arg0 (seed) */
    M_FAULT_DMA    /* tasklet arg2 charges arg0, then unlocks a mutex it does not hold; the others
                      read arg1 bytes 8 times, charging tid * 3 between reads */
};

enum pim_test_fault {
    F_DMA_SIZE_SMALL,  /* mram_read of 4 bytes */
    F_DMA_SIZE_ODD,    /* 12 bytes */
    F_DMA_SIZE_BIG,    /* 4096 bytes */
    F_DMA_MRAM_ALIGN,  /* MRAM address + 4 */
    F_DMA_WRAM_ALIGN,  /* WRAM buffer + 4 */
    F_MRAM_BELOW,      /* address below MRAM_BASE */
    F_MRAM_ABOVE,      /* last 8 bytes + 8 */
    F_MRAM_HOSTPTR,    /* a host pointer used as an MRAM address */
    F_WRITE_ABOVE,     /* mram_write past the end */
    F_HEAP_OVERFLOW,   /* mem_alloc beyond the WRAM heap */
    F_DEADLOCK,        /* lock a mutex twice */
    F_BAD_UNLOCK,      /* unlock a mutex not held */
    F_BARRIER_COUNT,   /* barrier of 30 tasklets */
    F_KERNEL,          /* nm_pim_fault */
    F_HW_REFUSE,       /* nm_pim_hw_refuse */
    F_WRAM_HOSTPTR,    /* mram_read into a host malloc buffer */
    F_STACK_DMA,       /* (not a fault) mram_read into a tasklet stack buffer and a global */
    F_COUNT
};

#define PIM_TEST_BLOCK 2048u
/* Host helpers. */
void pim_test_set_args(struct dpu_set_t set, uint32_t mode, uint64_t a0, uint64_t a1, uint64_t a2);
uint64_t pim_test_res(struct dpu_set_t dpu, uint32_t i);
#endif
