/* A reduction (PrIM RED's shape, simplified): every tasklet sums its blocks
 * of uint64 values into a per-tasklet partial sum in WRAM, a barrier, then
 * tasklet 0 adds the partial sums; the host adds the DPUs' results. */
#include <stdlib.h>
#include <string.h>

#include "nearmem/common/timer.h"
#include "nearmem/common/util.h"
#include "nearmem/pim/dpu.h"
#include "nearmem/pim/examples.h"
#include "report.h"

/* ---- DPU side ---------------------------------------------------------- */
DPU_PROGRAM(nm_red);

DPU_HOST(uint32_t, red_size); /* bytes of values on this DPU */
DPU_HOST(uint64_t, red_result);
DPU_WRAM(uint64_t, red_partial, [NM_PIM_MAX_TASKLETS]);
BARRIER_INIT(red_barrier, NR_TASKLETS);

int DPU_MAIN(void)
{
    const uint32_t tid = me();
    const uint32_t base = (uint32_t)(uintptr_t)DPU_MRAM_HEAP_POINTER;
    uint64_t *cache = mem_alloc(NM_PIM_EXAMPLE_BLOCK);
    uint64_t sum = 0;
    nm_pim_charge(8);
    for (uint32_t off = tid * NM_PIM_EXAMPLE_BLOCK; off < red_size; off += NM_PIM_EXAMPLE_BLOCK * NR_TASKLETS) {
        uint32_t len = NM_MIN(NM_PIM_EXAMPLE_BLOCK, red_size - off);
        mram_read(base + off, cache, len);
        for (uint32_t i = 0; i < len / 8; i++)
            sum += cache[i];
        nm_pim_charge(NM_PIM_RED_INSTR_PER_ELEM * (len / 8) + 6);
    }
    red_partial[tid] = sum;
    nm_pim_charge(2);
    barrier_wait(&red_barrier);
    if (tid == 0) {
        uint64_t total = 0;
        for (uint32_t t = 0; t < NR_TASKLETS; t++)
            total += red_partial[t];
        nm_pim_charge(NM_PIM_RED_INSTR_PER_ELEM * NR_TASKLETS + 2);
        red_result = total;
    }
    return 0;
}

/* ---- Host side --------------------------------------------------------- */
dpu_error_t nm_pim_red_run(struct dpu_set_t set, uint32_t tasklets, const uint64_t *v, uint64_t n, uint64_t *sum,
                           nm_pim_run_report *rep)
{
    uint64_t t0 = nm_now_ns();
    uint32_t nr_dpus;
    dpu_error_t e = dpu_get_nr_dpus(set, &nr_dpus);
    if (e != DPU_OK)
        return e;
    uint64_t per = (n + nr_dpus - 1) / nr_dpus;
    if (per * 8 > NM_PIM_MRAM_SIZE / 2)
        return DPU_ERR_INVALID_MRAM_ACCESS;
    uint64_t *pv = calloc(per * nr_dpus + 1, 8), *res = calloc(nr_dpus, 8);
    if (!pv || !res) {
        free(pv);
        free(res);
        return DPU_ERR_ALLOCATION;
    }
    memcpy(pv, v, n * 8);
    nm_pim_totals tot0;
    struct dpu_set_t dpu;
    uint32_t i;
    if ((e = dpu_load(set, "nm_red", NULL)) != DPU_OK || (e = nm_pim_set_tasklets(set, tasklets)) != DPU_OK ||
        (e = nm_pim_reset_totals(set)) != DPU_OK)
        goto out;
    DPU_FOREACH(set, dpu, i)
    {
        uint64_t first = (uint64_t)i * per;
        uint32_t bytes = (uint32_t)(first >= n ? 0 : NM_MIN(per, n - first) * 8);
        if ((e = dpu_copy_to(dpu, "red_size", 0, &bytes, sizeof(bytes))) != DPU_OK)
            goto out;
    }
    DPU_FOREACH(set, dpu, i) dpu_prepare_xfer(dpu, pv + (uint64_t)i * per);
    if (per && (e = dpu_push_xfer(set, DPU_XFER_TO_DPU, DPU_MRAM_HEAP_POINTER_NAME, 0, per * 8, DPU_XFER_DEFAULT)) !=
                   DPU_OK)
        goto out;
    if ((e = nm_pim_get_totals(set, &tot0)) != DPU_OK)
        goto out;
    if ((e = dpu_launch(set, DPU_SYNCHRONOUS)) != DPU_OK)
        goto out;
    DPU_FOREACH(set, dpu, i) dpu_prepare_xfer(dpu, &res[i]);
    if ((e = dpu_push_xfer(set, DPU_XFER_FROM_DPU, "red_result", 0, 8, DPU_XFER_DEFAULT)) != DPU_OK)
        goto out;
    uint64_t s = 0;
    for (i = 0; i < nr_dpus; i++)
        s += res[i];
    *sum = s;
    nm_pim__fill_report(set, &tot0, t0, rep);
out:
    free(pv);
    free(res);
    return e;
}
