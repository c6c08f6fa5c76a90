/* pim-malloc-micro's kernel in plain UPMEM C (see ../micro.c): every tasklet
 * makes k_count pimMalloc calls of k_size bytes, timed in modeled cycles.
 * Built with NR_TASKLETS 1 and 16. */
#include <alloc.h>
#include <barrier.h>
#include <defs.h>
#include <mram.h>
#include <nearmem_pim.h>
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

__host uint32_t k_mode;    /* 0: init allocator, 1: run, 2: collect statistics and tear down */
__host nm_pimm_config k_cfg;
__host uint32_t k_size;
__host uint32_t k_count;
__host uint64_t k_lat[NM_PIM_MAX_TASKLETS];   /* sum of latencies, cycles */
__host uint64_t k_first[NM_PIM_MAX_TASKLETS]; /* latency of the first call */
__host uint32_t k_fail;
__host uint32_t k_err;
__host nm_pimm_stats k_stats;

int main(void)
{
    unsigned t = me();
    if (k_mode == 0) {
        /* initAllocator is not part of what Sec. VI-A measures ("the average
         * latency" of the pimMalloc calls; hit rate and bytes "per pimMalloc()
         * request"): its pre-population traffic is dropped from the event
         * counters, as it is from the timed latencies. (Until the fidelity
         * audit the counters included it.) */
        if (t == 0) {
            k_err = nm_pimm_dpu_init(&k_cfg);
            if (!k_err) nm_pimm_reset_counters(nm_pimm_dpu_heap());
        }
        return 0;
    }
    if (k_mode == 2) {
        if (t == 0 && nm_pimm_dpu_heap()) {
            nm_pimm_get_stats(nm_pimm_dpu_heap(), &k_stats);
            nm_pimm_dpu_teardown();
        }
        return 0;
    }
    uint64_t sum = 0;
    for (uint32_t i = 0; i < k_count; i++) {
        uint64_t c0 = nm_pim_cycle();
        mram_addr_t p = pimm_malloc32(k_size);
        uint64_t d = nm_pim_cycle() - c0;
        if (i == 0) k_first[t] = d;
        sum += d;
        if (!p) k_fail++;
    }
    k_lat[t] = sum;
    return 0;
}

