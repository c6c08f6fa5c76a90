/* Demo step: PIM-malloc on the emulated PIM machine. 64 DPUs x 16 tasklets
 * each build a linked list in MRAM with pimMalloc, walk it to check every
 * node, then free it; once with the straw-man buddy allocator and once with
 * PIM-malloc-SW, comparing modeled time. */
#include <string.h>

#include "nearmem/demo.h"
#include "nearmem/pim/host.h"
#include "nearmem/pim_malloc.h"

#define NODES 200

/* The kernel, dpu_lists.c (plain UPMEM C, 16 tasklets; init and teardown use
 * tasklet 0 only). */
extern struct dpu_incbin_t nm_dpu_incbin_pimm_demo_lists;

static int run(nm_demo *d, struct dpu_set_t set, nm_pimm_variant v, double *cyc_per_malloc, nm_pimm_stats *st0)
{
    nm_pimm_config cfg;
    nm_pimm_config_default(&cfg, v, 0);
    uint32_t zero = 0, mode;
    struct dpu_set_t dpu;
    if (dpu_broadcast_to(set, "d_cfg", 0, &cfg, sizeof cfg, DPU_XFER_DEFAULT) ||
        dpu_broadcast_to(set, "d_bad", 0, &zero, 4, DPU_XFER_DEFAULT))
        return NM_EIO;
    for (mode = 0; mode < 3; mode++) {
        if (dpu_broadcast_to(set, "d_mode", 0, &mode, 4, DPU_XFER_DEFAULT) ||
            dpu_launch(set, DPU_SYNCHRONOUS))
            return nm_fail(NM_EFAULT, "pim_malloc demo: launch %u failed", mode);
    }
    uint64_t bad = 0, cyc = 0, mallocs = 0;
    DPU_FOREACH(set, dpu)
    {
        uint32_t b;
        uint64_t c[NM_PIM_MAX_TASKLETS];
        nm_pimm_stats st;
        if (dpu_copy_from(dpu, "d_bad", 0, &b, 4) || dpu_copy_from(dpu, "d_alloc_cycles", 0, c, sizeof c) ||
            dpu_copy_from(dpu, "d_stats", 0, &st, sizeof st))
            return NM_EIO;
        bad += b;
        for (int t = 0; t < 16; t++) cyc += c[t];
        mallocs += st.mallocs;
        if (nm_pim_dpu_index(dpu) == 0) *st0 = st;
        if (st.reserved && v == NM_PIMM_STRAWMAN) bad++;
    }
    if (bad) return nm_fail(NM_ECORRUPT, "pim_malloc demo: %llu list checks failed", (unsigned long long)bad);
    *cyc_per_malloc = (double)cyc / (double)mallocs;
    (void)d;
    return NM_OK;
}

int nm_demo_pim_malloc(nm_demo *d)
{
    struct dpu_set_t set;
    if (dpu_alloc(64, NULL, &set) != DPU_OK) return nm_fail(NM_EIO, "dpu_alloc(64)");
    int e = dpu_load_from_incbin(set, &nm_dpu_incbin_pimm_demo_lists, NULL) == DPU_OK ? NM_OK : NM_EIO;
    double straw = 0, sw = 0;
    nm_pimm_stats s0, s1;
    if (!e) e = run(d, set, NM_PIMM_STRAWMAN, &straw, &s0);
    if (!e) e = run(d, set, NM_PIMM_SW, &sw, &s1);
    dpu_free(set);
    if (e) return e;
    nm_demo_say(d, "64 DPUs x 16 tasklets each built a %d-node linked list in MRAM with pimMalloc (%d x 64 x 16 = %d "
                   "nodes), walked it and freed it: every node checked",
                NODES, NODES, NODES * 64 * 16);
    nm_demo_say(d, "straw-man buddy (20-level tree, one mutex): %.0f modeled cycles per pimMalloc", straw);
    nm_demo_say(d, "PIM-malloc-SW (thread caches + depth-13 buddy): %.0f cycles, %.0fx faster; %.1f%% served by the "
                   "thread caches (DPU 0: %llu refills from the buddy backend)",
                sw, straw / sw, 100.0 * (double)(s1.tc_hits + s1.tc_spare) / (double)s1.mallocs,
                (unsigned long long)s1.tc_misses);
    return NM_OK;
}
