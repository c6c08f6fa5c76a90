/* The PIM-malloc demo's kernel in plain UPMEM C: each tasklet builds a
 * linked list of NODES 32-byte nodes in MRAM with pimMalloc, walks it to check
 * every node and frees it. NR_TASKLETS = 16. */
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

#define NODES 200

__host nm_pimm_config d_cfg;
__host uint32_t d_mode;
__host uint32_t d_bad;
__host uint64_t d_alloc_cycles[NM_PIM_MAX_TASKLETS];
__host nm_pimm_stats d_stats;

typedef struct node {
    uint32_t next, value;
    uint32_t pad[6]; /* 32-byte nodes */
} node;

int main(void)
{
    unsigned t = me();
    if (d_mode == 0) {
        if (t == 0 && nm_pimm_dpu_init(&d_cfg)) d_bad++;
        return 0;
    }
    if (d_mode == 2) {
        if (t == 0) {
            nm_pimm_get_stats(nm_pimm_dpu_heap(), &d_stats);
            nm_pimm_dpu_teardown();
        }
        return 0;
    }
    /* build: push front, so the list reads NODES-1 .. 0 */
    node n __dma_aligned;
    memset(&n, 0, sizeof n);
    mram_addr_t head = 0;
    uint64_t cyc = 0;
    for (uint32_t i = 0; i < NODES; i++) {
        uint64_t c0 = nm_pim_cycle();
        mram_addr_t p = pimm_malloc32(sizeof(node));
        cyc += nm_pim_cycle() - c0;
        if (!p) {
            d_bad++;
            return 0;
        }
        n.next = head;
        n.value = t * 1000 + i;
        mram_write(&n, MRAM(p), sizeof n);
        head = p;
    }
    d_alloc_cycles[t] = cyc;
    /* walk and free */
    uint32_t expect = NODES;
    while (head) {
        mram_read(MRAM(head), &n, sizeof n);
        if (n.value != t * 1000 + --expect) d_bad++;
        pimm_free32(head);
        head = n.next;
    }
    if (expect != 0) d_bad++;
    return 0;
}

