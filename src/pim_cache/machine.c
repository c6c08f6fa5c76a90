/* PIM-CACHE transport over nearmem's emulated UPMEM machine (see pim_cache_machine.h). */
#include <stdlib.h>
#include <string.h>

#include "nearmem/pim_cache_machine.h"
#include "nearmem/pim_cache_dpu.h"

typedef struct mctx {
    struct dpu_set_t set;
    uint32_t nr;
    uint64_t heap_abs; /* absolute MRAM address of DPU_MRAM_HEAP_POINTER */
} mctx;

static nm_err conv(dpu_error_t e, const char *what)
{
    if (e == DPU_OK) return NM_OK;
    nm_err code = e == DPU_ERR_DPU_FAULT ? NM_EFAULT
                  : e == DPU_ERR_INVALID_MRAM_ACCESS || e == DPU_ERR_INVALID_WRAM_ACCESS ? NM_EALIGN
                  : e == DPU_ERR_ALLOCATION || e == DPU_ERR_SYSTEM ? NM_ENOMEM
                                                                    : NM_EINVAL;
    return nm_fail(code, "pim_cache machine: %s: %s", what, dpu_error_to_string(e));
}

static nm_err m_copy_to(void *ctx, unsigned dpu, uint64_t off, const void *src, size_t len)
{
    mctx *m = ctx;
    return conv(dpu_copy_to(nm_pim_set_dpu(m->set, dpu), DPU_MRAM_HEAP_POINTER_NAME, (uint32_t)(off - m->heap_abs),
                            src, len),
                "dpu_copy_to");
}

static nm_err m_push_to(void *ctx, uint64_t off, const void *const *srcs, size_t len)
{
    mctx *m = ctx;
    for (uint32_t i = 0; i < m->nr; i++) {
        dpu_error_t e = dpu_prepare_xfer(nm_pim_set_dpu(m->set, i), (void *)(uintptr_t)srcs[i]);
        if (e) return conv(e, "dpu_prepare_xfer");
    }
    return conv(dpu_push_xfer(m->set, DPU_XFER_TO_DPU, DPU_MRAM_HEAP_POINTER_NAME, (uint32_t)(off - m->heap_abs), len,
                              DPU_XFER_DEFAULT),
                "dpu_push_xfer");
}

static nm_err m_copy_from(void *ctx, unsigned dpu, uint64_t off, void *dst, size_t len)
{
    mctx *m = ctx;
    return conv(dpu_copy_from(nm_pim_set_dpu(m->set, dpu), DPU_MRAM_HEAP_POINTER_NAME,
                              (uint32_t)(off - m->heap_abs), dst, len),
                "dpu_copy_from");
}

static nm_err launch(mctx *m, const nm_pimc_kargs *args)
{
    for (uint32_t i = 0; i < m->nr; i++) {
        dpu_error_t e = dpu_prepare_xfer(nm_pim_set_dpu(m->set, i), (void *)(uintptr_t)&args[i]);
        if (e) return conv(e, "dpu_prepare_xfer");
    }
    nm_err e = conv(dpu_push_xfer(m->set, DPU_XFER_TO_DPU, "pimc_args", 0, sizeof *args, DPU_XFER_DEFAULT),
                    "kernel arguments");
    if (e) return e;
    dpu_error_t le = dpu_launch(m->set, DPU_SYNCHRONOUS);
    if (le == DPU_ERR_DPU_FAULT) {
        /* Say which DPU stopped and why (the machine's fault record). */
        for (uint32_t i = 0; i < m->nr; i++) {
            nm_pim_fault_info fi;
            if (nm_pim_get_fault(nm_pim_set_dpu(m->set, i), &fi) == DPU_OK && fi.code != NM_PIM_FAULT_NONE)
                return nm_fail(NM_EFAULT, "pim_cache machine: DPU %u faulted (%s, tasklet %u): %s", i,
                               nm_pim_fault_name(fi.code), fi.tasklet, fi.message);
        }
    }
    return conv(le, "dpu_launch");
}

static nm_err m_svb(void *ctx, const nm_pimc_svb_job *jobs)
{
    mctx *m = ctx;
    nm_pimc_kargs *a = calloc(m->nr, sizeof *a);
    if (!a) return nm_fail(NM_ENOMEM, "pim_cache machine: no memory");
    for (uint32_t i = 0; i < m->nr; i++)
        if (jobs[i].count)
            a[i] = (nm_pimc_kargs){.op = NM_PIMC_OP_SVB,
                                   .in_off = (uint32_t)jobs[i].in_off,
                                   .in_len = (uint32_t)jobs[i].in_len,
                                   .out_off = (uint32_t)jobs[i].out_off,
                                   .count = jobs[i].count};
    nm_err e = launch(m, a);
    free(a);
    return e;
}

static double m_modeled(void *ctx)
{
    mctx *m = ctx;
    nm_pim_totals t;
    if (nm_pim_get_totals(m->set, &t) != DPU_OK) return 0.0;
    return (t.modeled_xfer_seconds + t.modeled_kernel_seconds) * 1e9;
}

extern int nm_pimc__kernel_anchor;

nm_err nm_pimc_machine_transport(struct dpu_set_t set, uint64_t heap_off, uint64_t size, nm_pimc_transport *t)
{
    if (!t) return nm_fail(NM_EINVAL, "pim_cache machine: NULL transport");
    nm_pimc__kernel_anchor = 1;
    const nm_pim_program_def *p = nm_pim_loaded_program(set); /* dpu_load(set, NM_PIMC_PROGRAM, ...) first */
    if (!p) return nm_fail(NM_ENOENT, "pim_cache machine: no program (%s) loaded in the set", NM_PIMC_PROGRAM);
    uint32_t nr = 0;
    nm_err e = conv(dpu_get_nr_dpus(set, &nr), "dpu_get_nr_dpus");
    if (e) return e;
    uint64_t heap_abs = NM_PIM_MRAM_BASE + ((p->mram_vars_bytes + 7u) & ~7u);
    uint64_t heap_size = NM_PIM_MRAM_BASE + NM_PIM_MRAM_SIZE - heap_abs;
    if ((heap_off & 7u) || (size & 7u) || heap_off > heap_size || size > heap_size - heap_off || size == 0)
        return nm_fail(NM_ERANGE, "pim_cache machine: region [%llu, +%llu) outside the %llu-byte MRAM heap",
                       (unsigned long long)heap_off, (unsigned long long)size, (unsigned long long)heap_size);
    mctx *m = malloc(sizeof *m);
    if (!m) return nm_fail(NM_ENOMEM, "pim_cache machine: no memory");
    *m = (mctx){set, nr, heap_abs};
    *t = (nm_pimc_transport){.ctx = m,
                             .nr_dpus = nr,
                             .mram_base = heap_abs + heap_off,
                             .mram_size = size,
                             .copy_to = m_copy_to,
                             .push_to = m_push_to,
                             .copy_from = m_copy_from,
                             .svb_decode = m_svb,
                             .modeled_ns = m_modeled};
    return NM_OK;
}

void nm_pimc_machine_transport_free(nm_pimc_transport *t)
{
    if (!t) return;
    free(t->ctx);
    t->ctx = NULL;
}

uint32_t nm_pimc_machine_addr(const nm_pimc_transport *t, uint64_t heap_off)
{
    return (uint32_t)(((const mctx *)t->ctx)->heap_abs + heap_off);
}

nm_err nm_pimc_machine_vadd(const nm_pimc_transport *t, uint32_t desc_a, uint32_t desc_b, uint32_t out)
{
    mctx *m = t->ctx;
    nm_pimc_kargs *a = calloc(m->nr, sizeof *a);
    if (!a) return nm_fail(NM_ENOMEM, "pim_cache machine: no memory");
    for (uint32_t i = 0; i < m->nr; i++)
        a[i] = (nm_pimc_kargs){.op = NM_PIMC_OP_VADD, .desc_a = desc_a, .desc_b = desc_b, .out = out};
    nm_err e = launch(m, a);
    free(a);
    return e;
}

nm_err nm_pimc_machine_sum(const nm_pimc_transport *t, uint32_t desc, uint64_t *sums)
{
    mctx *m = t->ctx;
    nm_pimc_kargs *a = calloc(m->nr, sizeof *a);
    if (!a) return nm_fail(NM_ENOMEM, "pim_cache machine: no memory");
    for (uint32_t i = 0; i < m->nr; i++) a[i] = (nm_pimc_kargs){.op = NM_PIMC_OP_SUM, .desc_a = desc};
    nm_err e = launch(m, a);
    free(a);
    for (uint32_t i = 0; i < m->nr && !e; i++)
        e = conv(dpu_copy_from(nm_pim_set_dpu(m->set, i), "pimc_total", 0, &sums[i], sizeof sums[i]), "dpu_copy_from");
    return e;
}
