/* A host-memory DPU set for tests and host-only use: every DPU is an MRAM array. It applies
 * the UPMEM transfer rules (offsets and lengths multiples of 8, inside MRAM) so the cache is
 * tested against them, but it models no time: modeled_ns is NULL. */
#include <stdlib.h>
#include <string.h>

#include "nearmem/pim_cache.h"
#include "nearmem/pim_cache_dpu.h"

struct nm_pimc_memdev {
    unsigned nr_dpus;
    uint64_t mram_size;
    uint8_t **mram;
    nm_pimc_memdev_stats st;
    unsigned fail_in; /* 0 = never */
    int dma_fault;    /* a DPU-side access broke the rules */
};

nm_err nm_pimc_memdev_create(unsigned nr_dpus, uint64_t mram_size, nm_pimc_memdev **out)
{
    if (!out || nr_dpus == 0 || mram_size == 0 || (mram_size & 7u) || mram_size > ((uint64_t)1 << 32))
        return nm_fail(NM_EINVAL, "memdev: %u DPUs of %llu bytes (need >= 1 DPU, size multiple of 8, <= 4 GiB)",
                       nr_dpus, (unsigned long long)mram_size);
    nm_pimc_memdev *m = calloc(1, sizeof *m);
    if (!m) return nm_fail(NM_ENOMEM, "memdev: no memory");
    m->nr_dpus = nr_dpus;
    m->mram_size = mram_size;
    m->mram = calloc(nr_dpus, sizeof *m->mram);
    if (!m->mram) goto oom;
    for (unsigned d = 0; d < nr_dpus; d++) {
        m->mram[d] = calloc(1, mram_size);
        if (!m->mram[d]) goto oom;
    }
    *out = m;
    return NM_OK;
oom:
    nm_pimc_memdev_destroy(m);
    return nm_fail(NM_ENOMEM, "memdev: cannot allocate %u x %llu bytes", nr_dpus, (unsigned long long)mram_size);
}

void nm_pimc_memdev_destroy(nm_pimc_memdev *m)
{
    if (!m) return;
    if (m->mram)
        for (unsigned d = 0; d < m->nr_dpus; d++) free(m->mram[d]);
    free(m->mram);
    free(m);
}

uint8_t *nm_pimc_memdev_mram(nm_pimc_memdev *m, unsigned dpu) { return dpu < m->nr_dpus ? m->mram[dpu] : NULL; }
nm_pimc_memdev_stats nm_pimc_memdev_get_stats(const nm_pimc_memdev *m) { return m->st; }
void nm_pimc_memdev_fail_after(nm_pimc_memdev *m, unsigned n) { m->fail_in = n; }

static nm_err fault(nm_pimc_memdev *m)
{
    if (m->fail_in && --m->fail_in == 0) return nm_fail(NM_EFAULT, "memdev: injected transfer fault");
    return NM_OK;
}

static nm_err check(nm_pimc_memdev *m, unsigned dpu, uint64_t off, size_t len)
{
    if (dpu >= m->nr_dpus) return nm_fail(NM_EINVAL, "memdev: DPU %u of %u", dpu, m->nr_dpus);
    if ((off & 7u) || (len & 7u))
        return nm_fail(NM_EALIGN, "memdev: MRAM transfer at %llu of %zu bytes is not 8-byte aligned",
                       (unsigned long long)off, len);
    if (off > m->mram_size || len > m->mram_size - off)
        return nm_fail(NM_ERANGE, "memdev: MRAM transfer [%llu, +%zu) beyond %llu bytes", (unsigned long long)off,
                       len, (unsigned long long)m->mram_size);
    return NM_OK;
}

static nm_err md_copy_to(void *ctx, unsigned dpu, uint64_t off, const void *src, size_t len)
{
    nm_pimc_memdev *m = ctx;
    nm_err e = fault(m);
    if (!e) e = check(m, dpu, off, len);
    if (e) return e;
    if (len) memcpy(m->mram[dpu] + off, src, len);
    m->st.serial_calls++;
    m->st.serial_bytes += len;
    return NM_OK;
}

static nm_err md_push_to(void *ctx, uint64_t off, const void *const *srcs, size_t len)
{
    nm_pimc_memdev *m = ctx;
    nm_err e = fault(m);
    for (unsigned d = 0; !e && d < m->nr_dpus; d++) e = check(m, d, off, len);
    if (e) return e;
    for (unsigned d = 0; d < m->nr_dpus; d++)
        if (len) memcpy(m->mram[d] + off, srcs[d], len);
    m->st.push_calls++;
    m->st.push_bytes += (uint64_t)len * m->nr_dpus;
    return NM_OK;
}

static nm_err md_push_range(void *ctx, unsigned d0, unsigned d1, uint64_t off, const void *const *srcs, size_t len)
{
    nm_pimc_memdev *m = ctx;
    nm_err e = fault(m);
    if (!e && (d0 >= d1 || d1 > m->nr_dpus)) e = nm_fail(NM_EINVAL, "memdev: DPUs [%u, %u) of %u", d0, d1, m->nr_dpus);
    for (unsigned d = d0; !e && d < d1; d++) e = check(m, d, off, len);
    if (e) return e;
    for (unsigned d = d0; d < d1; d++)
        if (len) memcpy(m->mram[d] + off, srcs[d], len);
    m->st.push_calls++;
    m->st.push_bytes += (uint64_t)len * (d1 - d0);
    return NM_OK;
}

static nm_err md_copy_from(void *ctx, unsigned dpu, uint64_t off, void *dst, size_t len)
{
    nm_pimc_memdev *m = ctx;
    nm_err e = fault(m);
    if (!e) e = check(m, dpu, off, len);
    if (e) return e;
    if (len) memcpy(dst, m->mram[dpu] + off, len);
    m->st.read_calls++;
    m->st.read_bytes += len;
    return NM_OK;
}

/* DPU-side MRAM access with the mram_read/mram_write rules checked. */
typedef struct md_io_ctx {
    nm_pimc_memdev *m;
    unsigned dpu;
} md_io_ctx;

static int dma_ok(md_io_ctx *c, uint32_t off, const void *wram, uint32_t n)
{
    if (((uintptr_t)wram & 7u) || (off & 7u) || (n & 7u) || n == 0 || n > NM_PIMC_DMA_MAX || off + (uint64_t)n > c->m->mram_size) {
        c->m->dma_fault = 1;
        return 0;
    }
    return 1;
}

static void md_read(void *ctx, uint32_t off, void *wram, uint32_t n)
{
    md_io_ctx *c = ctx;
    if (dma_ok(c, off, wram, n))
        memcpy(wram, c->m->mram[c->dpu] + off, n);
    else
        memset(wram, 0, n <= NM_PIMC_DMA_MAX ? n : 0);
}

static void md_write(void *ctx, const void *wram, uint32_t off, uint32_t n)
{
    md_io_ctx *c = ctx;
    if (dma_ok(c, off, wram, n)) memcpy(c->m->mram[c->dpu] + off, wram, n);
}

static nm_err md_svb_decode(void *ctx, const nm_pimc_svb_job *jobs)
{
    nm_pimc_memdev *m = ctx;
    nm_err e = fault(m);
    if (e) return e;
    enum { NT = 16 }; /* the paper's 16 tasklets (Sec. 6.4) */
    m->dma_fault = 0;
    for (unsigned d = 0; d < m->nr_dpus; d++) {
        if (!jobs[d].count) continue;
        md_io_ctx c = {m, d};
        nm_pimc_mram_io io = {.ctx = &c, .read = md_read, .write = md_write};
        nm_pimc_svb_args a = {(uint32_t)jobs[d].in_off, (uint32_t)jobs[d].in_len, (uint32_t)jobs[d].out_off,
                              jobs[d].count};
        nm_pimc_svb_shared sh;
        /* Tasklets run phase by phase: the barrier between the phases is the only sync. */
        for (unsigned t = 0; t < NT; t++) nm_pimc_svb_phase_sum(&io, &a, t, NT, &sh);
        for (unsigned t = 0; t < NT; t++) nm_pimc_svb_phase_decode(&io, &a, t, NT, &sh);
    }
    m->st.decode_calls++;
    if (m->dma_fault) return nm_fail(NM_EFAULT, "memdev: the decoder broke an MRAM access rule");
    return NM_OK;
}

nm_pimc_transport nm_pimc_memdev_transport(nm_pimc_memdev *m)
{
    nm_pimc_transport t = {
        .ctx = m,
        .nr_dpus = m->nr_dpus,
        .mram_base = 0,
        .mram_size = m->mram_size,
        .copy_to = md_copy_to,
        .push_to = md_push_to,
        .copy_from = md_copy_from,
        .svb_decode = md_svb_decode,
        .modeled_ns = NULL,
        .dpus_per_rank = 0,
        .push_range = md_push_range,
        .push_gbps = 0,
    };
    return t;
}
