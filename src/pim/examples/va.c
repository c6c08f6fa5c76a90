/* PrIM's vector addition (VA) on the emulated machine: the host driver. The
 * kernel, dpu/va.c, is plain UPMEM C built by nearmem-dpu-cc for each tasklet
 * count the benchmarks use, and embedded in this library (programs.h). */
#include <stdlib.h>
#include <string.h>

#include "nearmem/common/timer.h"
#include "nearmem/common/util.h"
#include "nearmem/pim/examples.h"
#include "common.h"
#include "programs.h"
#include "report.h"

/* ---- Host side --------------------------------------------------------- */
static dpu_error_t va_run(struct dpu_set_t set, nm_pim_example kernel, uint32_t tasklets, const int32_t *a,
                          const int32_t *b, int32_t *c, uint64_t n, nm_pim_run_report *rep)
{
    uint64_t t0 = nm_now_ns();
    uint32_t nr_dpus;
    dpu_error_t e = dpu_get_nr_dpus(set, &nr_dpus);
    if (e != DPU_OK)
        return e;
    /* Per DPU: a multiple of 2 elements so the length is 8-byte granular. */
    uint64_t per = NM_ALIGN_UP((n + nr_dpus - 1) / nr_dpus, (uint64_t)2);
    if (per * 4 * 2 > NM_PIM_MRAM_SIZE)
        return DPU_ERR_INVALID_MRAM_ACCESS;
    uint64_t padded = per * nr_dpus;
    /* Padded copies only when the DPUs' shares do not tile n exactly. */
    const bool exact = padded == n;
    int32_t *pa = exact ? (int32_t *)(uintptr_t)a : calloc(padded, 4);
    int32_t *pb = exact ? (int32_t *)(uintptr_t)b : calloc(padded, 4);
    int32_t *pc = exact ? c : pb;
    if (!pa || !pb) {
        if (!exact) {
            free(pa);
            free(pb);
        }
        return DPU_ERR_ALLOCATION;
    }
    if (!exact) {
        memcpy(pa, a, n * 4);
        memcpy(pb, b, n * 4);
    }
    nm_pim_totals tot0;
    struct dpu_set_t dpu;
    uint32_t i;
    if ((e = nm_pim__load_example(set, kernel, tasklets)) != DPU_OK || (e = nm_pim_reset_totals(set)) != DPU_OK)
        goto out;
    uint32_t bytes = (uint32_t)(per * 4);
    DPU_FOREACH(set, dpu, i)
    {
        uint64_t first = (uint64_t)i * per;
        va_args args = {.size = (uint32_t)(first >= n ? 0 : NM_MIN(per, n - first) * 4), .transfer_size = bytes};
        /* Per-DPU arguments differ, so they go serially (as in PrIM). */
        if ((e = dpu_copy_to(dpu, "DPU_INPUT_ARGUMENTS", 0, &args, sizeof(args))) != DPU_OK)
            goto out;
    }
    DPU_FOREACH(set, dpu, i) dpu_prepare_xfer(dpu, pa + (uint64_t)i * per);
    if ((e = dpu_push_xfer(set, DPU_XFER_TO_DPU, DPU_MRAM_HEAP_POINTER_NAME, 0, bytes, DPU_XFER_DEFAULT)) != DPU_OK)
        goto out;
    DPU_FOREACH(set, dpu, i) dpu_prepare_xfer(dpu, pb + (uint64_t)i * per);
    if ((e = dpu_push_xfer(set, DPU_XFER_TO_DPU, DPU_MRAM_HEAP_POINTER_NAME, bytes, bytes, DPU_XFER_DEFAULT)) !=
        DPU_OK)
        goto out;
    if ((e = nm_pim_get_totals(set, &tot0)) != DPU_OK)
        goto out;
    if ((e = dpu_launch(set, DPU_SYNCHRONOUS)) != DPU_OK)
        goto out;
    DPU_FOREACH(set, dpu, i) dpu_prepare_xfer(dpu, pc + (uint64_t)i * per);
    if ((e = dpu_push_xfer(set, DPU_XFER_FROM_DPU, DPU_MRAM_HEAP_POINTER_NAME, bytes, bytes, DPU_XFER_DEFAULT)) !=
        DPU_OK)
        goto out;
    if (!exact)
        memcpy(c, pb, n * 4);
    nm_pim__fill_report(set, &tot0, t0, rep);
out:
    if (!exact) {
        free(pa);
        free(pb);
    }
    return e;
}

dpu_error_t nm_pim_va_run(struct dpu_set_t set, uint32_t tasklets, const int32_t *a, const int32_t *b, int32_t *c,
                          uint64_t n, nm_pim_run_report *rep)
{
    return va_run(set, NM_PIM_EX_VA, tasklets, a, b, c, n, rep);
}

dpu_error_t nm_pim_va_run_uncosted(struct dpu_set_t set, uint32_t tasklets, const int32_t *a, const int32_t *b,
                                   int32_t *c, uint64_t n, nm_pim_run_report *rep)
{
    return va_run(set, NM_PIM_EX_VA_UNCOSTED, tasklets, a, b, c, n, rep);
}
