/* PIM-CACHE transport over nearmem's emulated UPMEM machine (see pim_cache_machine.h). */
#include <stdlib.h>
#include <string.h>

#include "nearmem/pim_cache_machine.h"
#include "nearmem/pim_cache_dpu.h"
#include "internal.h"

typedef struct mctx {
    struct dpu_set_t set;
    uint32_t nr;
    uint64_t heap_abs; /* absolute MRAM address of DPU_MRAM_HEAP_POINTER */
    const nm_pim_program_def *prog;
} mctx;

/* An absolute MRAM address as (symbol, offset): the heap, or the program's MRAM variable
 * holding it (push_xfer destinations may be either). */
static const char *sym_of(const mctx *m, uint64_t abs, uint64_t *rel)
{
    if (abs >= m->heap_abs) {
        *rel = abs - m->heap_abs;
        return DPU_MRAM_HEAP_POINTER_NAME;
    }
    for (const nm_pim_symbol *s = m->prog ? m->prog->symbols : NULL; s; s = s->next) {
        uint64_t a = NM_PIM_MRAM_BASE + s->offset;
        if (s->kind == NM_PIM_SYM_MRAM && abs >= a && abs < a + s->size) {
            *rel = abs - a;
            return s->name;
        }
    }
    *rel = 0;
    return NULL;
}

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
    uint64_t rel;
    const char *sym = sym_of(m, off, &rel);
    if (!sym) return nm_fail(NM_EINVAL, "pim_cache machine: MRAM address %#llx is in no symbol", (unsigned long long)off);
    return conv(dpu_copy_to(nm_pim_set_dpu(m->set, dpu), sym, (uint32_t)rel, src, len), "dpu_copy_to");
}

static nm_err m_push_to(void *ctx, uint64_t off, const void *const *srcs, size_t len)
{
    mctx *m = ctx;
    uint64_t rel;
    const char *sym = sym_of(m, off, &rel);
    if (!sym) return nm_fail(NM_EINVAL, "pim_cache machine: MRAM address %#llx is in no symbol", (unsigned long long)off);
    for (uint32_t i = 0; i < m->nr; i++) {
        dpu_error_t e = dpu_prepare_xfer(nm_pim_set_dpu(m->set, i), (void *)(uintptr_t)srcs[i]);
        if (e) return conv(e, "dpu_prepare_xfer");
    }
    return conv(dpu_push_xfer(m->set, DPU_XFER_TO_DPU, sym, (uint32_t)rel, len, DPU_XFER_DEFAULT), "dpu_push_xfer");
}

/* One rank (or any range): prepare only those DPUs; DPUs without a prepared buffer take
 * no part, so the push is modeled as the ranks it touches. */
static nm_err m_push_range(void *ctx, unsigned d0, unsigned d1, uint64_t off, const void *const *srcs, size_t len)
{
    mctx *m = ctx;
    if (d0 >= d1 || d1 > m->nr) return nm_fail(NM_EINVAL, "pim_cache machine: DPUs [%u, %u) of %u", d0, d1, m->nr);
    uint64_t rel;
    const char *sym = sym_of(m, off, &rel);
    if (!sym) return nm_fail(NM_EINVAL, "pim_cache machine: MRAM address %#llx is in no symbol", (unsigned long long)off);
    for (uint32_t i = d0; i < d1; i++) {
        dpu_error_t e = dpu_prepare_xfer(nm_pim_set_dpu(m->set, i), (void *)(uintptr_t)srcs[i]);
        if (e) return conv(e, "dpu_prepare_xfer");
    }
    return conv(dpu_push_xfer(m->set, DPU_XFER_TO_DPU, sym, (uint32_t)rel, len, DPU_XFER_DEFAULT), "dpu_push_xfer");
}

static nm_err m_copy_from(void *ctx, unsigned dpu, uint64_t off, void *dst, size_t len)
{
    mctx *m = ctx;
    uint64_t rel;
    const char *sym = sym_of(m, off, &rel);
    if (!sym) return nm_fail(NM_EINVAL, "pim_cache machine: MRAM address %#llx is in no symbol", (unsigned long long)off);
    return conv(dpu_copy_from(nm_pim_set_dpu(m->set, dpu), sym, (uint32_t)rel, dst, len), "dpu_copy_from");
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
    return nm_pimc_machine_transport_prog(set, NM_PIMC_PROGRAM, heap_off, size, t);
}

nm_err nm_pimc_machine_transport_prog(struct dpu_set_t set, const char *program, uint64_t heap_off, uint64_t size,
                                      nm_pimc_transport *t)
{
    if (!t || !program) return nm_fail(NM_EINVAL, "pim_cache machine: NULL transport or program");
    nm_pimc__kernel_anchor = 1;
    /* The layout is the set's loaded program's (dpu_load first, by path or by name);
     * `program` names it in messages. */
    const nm_pim_program_def *p = nm_pim_loaded_program(set);
    if (!p) return nm_fail(NM_ENOENT, "pim_cache machine: no program (%s) loaded in the set", program);
    uint32_t nr = 0;
    nm_err e = conv(dpu_get_nr_dpus(set, &nr), "dpu_get_nr_dpus");
    if (e) return e;
    uint64_t heap_abs = NM_PIM_MRAM_BASE + ((p->mram_vars_bytes + 7u) & ~7u);
    uint64_t heap_size = NM_PIM_MRAM_BASE + NM_PIM_MRAM_SIZE - heap_abs;
    if ((heap_off & 7u) || (size & 7u) || heap_off > heap_size || size > heap_size - heap_off || size == 0)
        return nm_fail(NM_ERANGE, "pim_cache machine: region [%llu, +%llu) outside the %llu-byte MRAM heap",
                       (unsigned long long)heap_off, (unsigned long long)size, (unsigned long long)heap_size);
    nm_pim_cost cost;
    e = conv(nm_pim_get_cost(set, &cost), "nm_pim_get_cost");
    if (e) return e;
    mctx *m = malloc(sizeof *m);
    if (!m) return nm_fail(NM_ENOMEM, "pim_cache machine: no memory");
    *m = (mctx){set, nr, heap_abs, p};
    *t = (nm_pimc_transport){.ctx = m,
                             .nr_dpus = nr,
                             .mram_base = heap_abs + heap_off,
                             .mram_size = size,
                             .copy_to = m_copy_to,
                             .push_to = m_push_to,
                             .copy_from = m_copy_from,
                             .svb_decode = m_svb,
                             .modeled_ns = m_modeled,
                             .dpus_per_rank = NM_PIM_DPUS_PER_RANK,
                             .push_range = m_push_range,
                             /* the machine's transfer model, for the decision and the
                              * rank schedule (its constants, never tuned) */
                             .push_gbps = cost.bw_rank_to_dpu,
                             .serial_gbps = cost.bw_serial_to_dpu,
                             .push_rank_growth = cost.bw_rank_growth,
                             .push_cap_gbps = cost.bw_host_cap};
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

/* ------------------------------------------------------------------ drop-in push */

static dpu_error_t to_dpu_err(nm_err e)
{
    switch (e) {
    case NM_OK: return DPU_OK;
    case NM_ENOMEM: return DPU_ERR_ALLOCATION;
    case NM_ERANGE: return DPU_ERR_INVALID_SYMBOL_ACCESS;
    case NM_EALIGN: return DPU_ERR_INVALID_MRAM_ACCESS;
    case NM_EFAULT: return DPU_ERR_DPU_FAULT;
    case NM_EINVAL: return DPU_ERR_INVALID_MEMORY_TRANSFER;
    default: return DPU_ERR_SYSTEM;
    }
}

dpu_error_t nm_pimc_prepare_xfer(nm_pimc *c, struct dpu_set_t dpu, void *buffer)
{
    if (!c) return to_dpu_err(nm_fail(NM_EINVAL, "pim_cache: prepare_xfer without a cache"));
    uint32_t i = nm_pim_dpu_index(dpu);
    if (i == UINT32_MAX || i >= c->t.nr_dpus)
        return to_dpu_err(nm_fail(NM_EINVAL, "pim_cache: prepare_xfer needs one DPU of the cache's set"));
    c->prepared[i] = buffer;
    return DPU_OK;
}

/* The slot at MRAM address `abs` holding up to `bytes` (created on first use). */
static nm_err dest_slot(nm_pimc *c, uint64_t abs, uint64_t bytes, unsigned *out)
{
    if (abs < c->t.mram_base + c->t.mram_size && c->t.mram_base < abs + bytes)
        return nm_fail(NM_ERANGE, "pim_cache: destination [%#llx, +%llu) overlaps the cache's MRAM region",
                       (unsigned long long)abs, (unsigned long long)bytes);
    if (abs & 7u) return nm_fail(NM_EALIGN, "pim_cache: destination %#llx is not 8-byte aligned", (unsigned long long)abs);
    for (unsigned k = c->o.slots; k < c->nslots; k++)
        if (c->slot_addr[k] == abs) {
            c->slot_bytes[k] = bytes;
            *out = k;
            return NM_OK;
        }
    if (c->nslots >= 4096) return nm_fail(NM_ERANGE, "pim_cache: more than 4096 push_xfer destinations");
    if (pimc_add_slots(c, 1)) return nm_fail(NM_ENOMEM, "pim_cache: no memory");
    unsigned k = c->nslots - 1;
    c->slot_addr[k] = abs;
    c->slot_bytes[k] = bytes;
    *out = k;
    return NM_OK;
}

dpu_error_t nm_pimc_push_xfer(nm_pimc *c, struct dpu_set_t set, dpu_xfer_t xfer, const char *symbol_name,
                              uint32_t symbol_offset, size_t length, dpu_xfer_flags_t flags)
{
    if (!c || !symbol_name) return to_dpu_err(nm_fail(NM_EINVAL, "pim_cache: push_xfer needs a cache and a symbol"));
    const mctx *m = c->t.ctx;
    if (c->t.copy_to != m_copy_to || nm_pim_set_size(set) != m->nr || nm_pim_set_size(m->set) != m->nr ||
        nm_pim_dpu_index(nm_pim_set_dpu(set, 0)) != nm_pim_dpu_index(nm_pim_set_dpu(m->set, 0)))
        return to_dpu_err(nm_fail(NM_EINVAL, "pim_cache: push_xfer on a set other than the cache's"));
    const unsigned nd = c->t.nr_dpus;
    dpu_error_t de = DPU_OK;
    if (xfer == DPU_XFER_FROM_DPU) {
        /* Results the DPUs wrote: raw MRAM, nothing to deduplicate. */
        for (unsigned d = 0; d < nd && !de; d++)
            if (c->prepared[d]) de = dpu_prepare_xfer(nm_pim_set_dpu(m->set, d), (void *)(uintptr_t)c->prepared[d]);
        if (!de) de = dpu_push_xfer(m->set, xfer, symbol_name, symbol_offset, length, flags);
    } else if (xfer != DPU_XFER_TO_DPU) {
        de = to_dpu_err(nm_fail(NM_EINVAL, "pim_cache: push_xfer direction %d", (int)xfer));
    } else {
        nm_err e = NM_OK;
        uint64_t abs = 0;
        if (strcmp(symbol_name, DPU_MRAM_HEAP_POINTER_NAME) == 0) {
            abs = m->heap_abs + symbol_offset;
        } else {
            const nm_pim_symbol *s = m->prog ? m->prog->symbols : NULL;
            while (s && (s->kind != NM_PIM_SYM_MRAM || strcmp(s->name, symbol_name) != 0)) s = s->next;
            if (!s)
                e = nm_fail(NM_EINVAL, "pim_cache: push_xfer destination %s is not an MRAM symbol of %s", symbol_name,
                            m->prog ? m->prog->name : "the program");
            else if ((uint64_t)symbol_offset + length > s->size)
                e = nm_fail(NM_ERANGE, "pim_cache: %zu bytes at offset %u overflow %s (%u bytes)", length,
                            symbol_offset, symbol_name, s->size);
            else
                abs = NM_PIM_MRAM_BASE + s->offset + symbol_offset;
        }
        if (!e && abs + length > NM_PIM_MRAM_BASE + NM_PIM_MRAM_SIZE)
            e = nm_fail(NM_ERANGE, "pim_cache: push_xfer destination beyond MRAM");
        for (unsigned d = 0; d < nd && !e; d++)
            if (!c->prepared[d]) e = nm_fail(NM_EINVAL, "pim_cache: push_xfer: DPU %u has no prepared buffer", d);
        unsigned slot = 0;
        if (!e) e = dest_slot(c, abs, length, &slot);
        size_t *lens = e ? NULL : malloc(nd * sizeof *lens);
        if (!e && !lens) e = nm_fail(NM_ENOMEM, "pim_cache: no memory");
        for (unsigned d = 0; d < nd && !e; d++) lens[d] = length;
        if (!e) e = nm_pimc_copy(c, slot, (const void *const *)c->prepared, lens);
        free(lens);
        de = to_dpu_err(e);
    }
    if (!(flags & DPU_XFER_NO_RESET)) memset(c->prepared, 0, nd * sizeof *c->prepared);
    return de;
}
