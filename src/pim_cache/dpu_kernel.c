/* The DPU program "pim_cache", in plain UPMEM C: the Stream VByte decoder (Sec. 4.2
 * "Compression") and two kernels that read logical buffers through the offset lists (Sec. 4.2
 * "Data reconstruction on DPUs"): vector add (the paper's Sec. 6.6 workload) and a checksum
 * used by tests. Built by nearmem-dpu-cc with dpu_side.c (the reader and the decoder, as DPU
 * code) and NR_TASKLETS=16, the paper's tasklet count (Sec. 6.4); embedded in
 * nearmem_pim_cache_machine and loaded by name (program.c). Its compute is
 * costed by nearmem-dpu-cc from the compiled code (no hand counts). */
#include <alloc.h>
#include <barrier.h>
#include <defs.h>
#include <mram.h>
#include <nearmem_pim.h>
#include <string.h>

#include "nearmem/pim_cache_dpu.h"

#define NM_PIM_MAX_TASKLETS 24
__host nm_pimc_kargs pimc_args;
__host uint64_t pimc_total;
uint32_t pimc_part[NM_PIM_MAX_TASKLETS];
uint64_t pimc_sums[NM_PIM_MAX_TASKLETS];
BARRIER_INIT(pimc_bar, NR_TASKLETS);

static void k_read(void *ctx, uint32_t off, void *wram, uint32_t n)
{
    (void)ctx;
    mram_read((__mram_ptr const void *)(uintptr_t)off, wram, n);
}

static void k_write(void *ctx, const void *wram, uint32_t off, uint32_t n)
{
    (void)ctx;
    mram_write(wram, (__mram_ptr void *)(uintptr_t)off, n);
}

static void write_out(uint32_t at, const void *wram, uint32_t n)
{
    n = (n + 7u) & ~7u;
    for (uint32_t done = 0; done < n; done += NM_PIMC_DMA_MAX)
        mram_write((const uint8_t *)wram + done, (__mram_ptr void *)(uintptr_t)(at + done),
                   n - done < NM_PIMC_DMA_MAX ? n - done : NM_PIMC_DMA_MAX);
}

int main(void)
{
    nm_pimc_mram_io io = {NULL, k_read, k_write};
    const unsigned t = me(), nt = NR_TASKLETS;
    switch (pimc_args.op) {
    case NM_PIMC_OP_SVB: {
        nm_pimc_svb_args a = {pimc_args.in_off, pimc_args.in_len, pimc_args.out_off, pimc_args.count};
        nm_pimc_svb_shared *sh = (nm_pimc_svb_shared *)pimc_part;
        nm_pimc_svb_phase_sum(&io, &a, t, nt, sh);
        barrier_wait(&pimc_bar);
        nm_pimc_svb_phase_decode(&io, &a, t, nt, sh);
        break;
    }
    case NM_PIMC_OP_VADD: {
        nm_pimc_reader ra, rb;
        if (nm_pimc_reader_open(&ra, &io, pimc_args.desc_a, t, nt) || nm_pimc_reader_open(&rb, &io, pimc_args.desc_b, t, nt))
            nm_pim_fault("pim_cache vadd: bad descriptor");
        if (ra.d.block_size != rb.d.block_size || ra.d.length != rb.d.length ||
            ra.d.mode == NM_PIMC_MODE_CHUNKS || rb.d.mode == NM_PIMC_MODE_CHUNKS)
            nm_pim_fault("pim_cache vadd: operands differ in shape (or are content-defined chunks)");
        uint32_t bs = ra.d.block_size;
        uint32_t *x = mem_alloc(bs), *y = mem_alloc(bs);
        uint32_t i, j, n;
        while ((n = nm_pimc_reader_next(&ra, x, &i)) != 0) {
            nm_pimc_reader_next(&rb, y, &j);
            for (uint32_t k = 0; k < n / 4; k++) x[k] += y[k];
            write_out(pimc_args.out + i * bs, x, n);
        }
        break;
    }
    case NM_PIMC_OP_SUM: {
        nm_pimc_reader ra;
        if (nm_pimc_reader_open(&ra, &io, pimc_args.desc_a, t, nt)) nm_pim_fault("pim_cache sum: bad descriptor");
        uint32_t bs = ra.d.block_size;
        uint8_t *x = mem_alloc(bs);
        uint32_t i, n;
        uint64_t s = 0;
        while ((n = nm_pimc_reader_next(&ra, x, &i)) != 0) {
            s += nm_pimc_checksum_at(x, n, ra.pos);
        }
        pimc_sums[t] = s;
        barrier_wait(&pimc_bar);
        if (t == 0) {
            uint64_t total = 0;
            for (unsigned k = 0; k < nt; k++) total += pimc_sums[k];
            pimc_total = total;
        }
        break;
    }
    default: break;
    }
    return 0;
}
