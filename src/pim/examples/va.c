/* PrIM's vector addition (VA) on the emulated machine. The kernel follows
 * PrIM's dpu/task.c shape: DPU_INPUT_ARGUMENTS as a __host struct, A and B
 * at DPU_MRAM_HEAP_POINTER, each tasklet streams BLOCK-byte blocks with
 * mram_read, adds, and writes the result over B. */
#include <stdlib.h>
#include <string.h>

#include "nearmem/common/timer.h"
#include "nearmem/common/util.h"
#include "nearmem/pim/dpu.h"
#include "nearmem/pim/examples.h"
#include "report.h"

/* ---- DPU side ---------------------------------------------------------- */
DPU_PROGRAM(nm_va);

typedef struct va_args {
    uint32_t size;          /* bytes of A (and of B) on this DPU */
    uint32_t transfer_size; /* bytes transferred (padded) */
} va_args;

DPU_HOST(va_args, DPU_INPUT_ARGUMENTS);

int DPU_MAIN(void)
{
    const uint32_t tid = me();
    const uint32_t size = DPU_INPUT_ARGUMENTS.size;
    const uint32_t a_base = (uint32_t)(uintptr_t)DPU_MRAM_HEAP_POINTER;
    const uint32_t b_base = a_base + DPU_INPUT_ARGUMENTS.transfer_size;
    int32_t *cache_a = mem_alloc(NM_PIM_EXAMPLE_BLOCK);
    int32_t *cache_b = mem_alloc(NM_PIM_EXAMPLE_BLOCK);
    nm_pim_charge(12); /* argument loads, base addresses, loop setup */
    for (uint32_t off = tid * NM_PIM_EXAMPLE_BLOCK; off < size; off += NM_PIM_EXAMPLE_BLOCK * NR_TASKLETS) {
        uint32_t len = NM_MIN(NM_PIM_EXAMPLE_BLOCK, size - off);
        mram_read(a_base + off, cache_a, len);
        mram_read(b_base + off, cache_b, len);
        for (uint32_t i = 0; i < len / 4; i++)
            cache_b[i] += cache_a[i];
        nm_pim_charge(NM_PIM_VA_INSTR_PER_ELEM * (len / 4) + 6); /* loop body + block bookkeeping */
        mram_write(cache_b, b_base + off, len);
    }
    return 0;
}

/* ---- Host side --------------------------------------------------------- */
dpu_error_t nm_pim_va_run(struct dpu_set_t set, uint32_t tasklets, const int32_t *a, const int32_t *b, int32_t *c,
                          uint64_t n, nm_pim_run_report *rep)
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
    if ((e = dpu_load(set, "nm_va", NULL)) != DPU_OK || (e = nm_pim_set_tasklets(set, tasklets)) != DPU_OK ||
        (e = nm_pim_reset_totals(set)) != DPU_OK)
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
