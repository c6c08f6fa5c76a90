/* A reduction (PrIM RED's shape, simplified): the host driver. The kernel,
 * dpu/red.c (plain UPMEM C), sums each DPU's values; the host adds the DPUs'
 * results. */
#include <stdlib.h>
#include <string.h>

#include "nearmem/common/timer.h"
#include "nearmem/common/util.h"
#include "nearmem/pim/examples.h"
#include "common.h"
#include "programs.h"
#include "report.h"

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
    if ((e = nm_pim__load_example(set, NM_PIM_EX_RED, tasklets)) != DPU_OK || (e = nm_pim_reset_totals(set)) != DPU_OK)
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
