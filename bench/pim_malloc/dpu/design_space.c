/* pim-malloc-design-space's kernel in plain UPMEM C (see ../design_space.c):
 * one tasklet makes ALLOCS pimMalloc calls of ASIZE bytes. NR_TASKLETS = 1. */
#include <alloc.h>
#include <barrier.h>
#include <defs.h>
#include <mram.h>
#include <stdint.h>
#include <string.h>

#include "nearmem/common/util.h"
#include "nearmem/pim_malloc_dpu.h"

/* Plain UPMEM C helpers of nearmem's own PIM-malloc kernels: they keep MRAM
 * addresses as uint32_t, as the allocator's API does. */
typedef uint32_t mram_addr_t;
#define NM_PIM_MAX_TASKLETS 24
#define MRAM(a) ((__mram_ptr void *)(uintptr_t)(a))
static inline __attribute__((unused)) mram_addr_t pimm_malloc32(uint32_t size) { return (mram_addr_t)(uintptr_t)pimMalloc(size); }
static inline __attribute__((unused)) void pimm_free32(mram_addr_t p) { pimFree(MRAM(p)); }

#define ALLOCS 128
#define ASIZE 32

__host uint32_t ds_mode; /* 0 init, 1 allocate, 2 teardown */
__host nm_pimm_config ds_cfg;
__host uint32_t ds_meta_off; /* metadata offset from DPU_MRAM_HEAP_POINTER */
__host uint32_t ds_fail;
__host uint32_t ds_ptrs[ALLOCS]; /* pointers the program uses */

int main(void)
{
    if (ds_mode == 0) {
        if (nm_pimm_dpu_init(&ds_cfg)) ds_fail++;
        else ds_meta_off = nm_pimm_get_config(nm_pimm_dpu_heap())->meta_base - ((uint32_t)(uintptr_t)DPU_MRAM_HEAP_POINTER);
        return 0;
    }
    if (ds_mode == 2) {
        nm_pimm_dpu_teardown();
        return 0;
    }
    for (int i = 0; i < ALLOCS; i++) {
        ds_ptrs[i] = pimm_malloc32(ASIZE);
        if (!ds_ptrs[i]) ds_fail++;
    }
    return 0;
}

