/* PIM-CACHE on nearmem's emulated UPMEM machine (nearmem/pim/host.h).
 *
 * nm_pimc_machine_transport() binds a cache to a DPU set: serial copies are dpu_copy_to on
 * one DPU, pushes are dpu_prepare_xfer + dpu_push_xfer, both on DPU_MRAM_HEAP_POINTER, and
 * the modeled time is the machine's (transfers + launches). The DPU program "pim_cache"
 * (src/pim_cache/kernel.c, 16 tasklets as in the paper's Sec. 6.4) carries the Stream VByte
 * decoder and two reader kernels used by tests, benchmarks and the demo; load it with
 * dpu_load(set, NM_PIMC_PROGRAM, NULL) before creating the transport. Built only when the
 * pim component is. */
#ifndef NEARMEM_PIM_CACHE_MACHINE_H
#define NEARMEM_PIM_CACHE_MACHINE_H

#include "nearmem/pim/host.h"
#include "nearmem/pim_cache.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NM_PIMC_PROGRAM "pim_cache"
#include "nearmem/pim_cache_dpu.h" /* nm_pimc_kargs */


/* The cache may use [heap_off, heap_off + size) of the MRAM heap (offsets relative to
 * DPU_MRAM_HEAP_POINTER; the rest is the kernel's). `t` keeps a pointer-free copy of the
 * set; release it with nm_pimc_machine_transport_free. */
nm_err nm_pimc_machine_transport(struct dpu_set_t set, uint64_t heap_off, uint64_t size, nm_pimc_transport *t);
/* The same for a set running another program (it must link nearmem_pim_cache for the
 * reader): the MRAM heap and the MRAM variables are that program's (the one loaded in the
 * set; `program`, its name or path, is used in messages). */
nm_err nm_pimc_machine_transport_prog(struct dpu_set_t set, const char *program, uint64_t heap_off, uint64_t size,
                                      nm_pimc_transport *t);
void nm_pimc_machine_transport_free(nm_pimc_transport *t);
/* Absolute MRAM address of heap offset `off` (what DPU code uses). */
uint32_t nm_pimc_machine_addr(const nm_pimc_transport *t, uint64_t heap_off);

/* Launch the reader kernels on every DPU (same descriptors everywhere, as the cache lays
 * them out). VADD reads two slots block by block and writes C; SUM returns per DPU the
 * checksum nm_pimc_checksum() (pim_cache_dpu.h) computes on the host. */
nm_err nm_pimc_machine_vadd(const nm_pimc_transport *t, uint32_t desc_a, uint32_t desc_b, uint32_t out);
nm_err nm_pimc_machine_sum(const nm_pimc_transport *t, uint32_t desc, uint64_t *sums /* nr_dpus */);

/* ---------------------------------------------------------------- drop-in for the push
 * An existing host program switches from
 *     DPU_FOREACH(set, dpu, i) dpu_prepare_xfer(dpu, bufs[i]);
 *     dpu_push_xfer(set, DPU_XFER_TO_DPU, "input", 0, len, DPU_XFER_DEFAULT);
 * to
 *     DPU_FOREACH(set, dpu, i) nm_pimc_prepare_xfer(cache, dpu, bufs[i]);
 *     nm_pimc_push_xfer(cache, set, DPU_XFER_TO_DPU, "input", 0, len, DPU_XFER_DEFAULT);
 * (same arguments, the cache first; same return type, so DPU_ASSERT works; the detail of
 * an error is in nm_last_errmsg()). The cache (parallel mode recommended) deduplicates
 * against what the DPUs hold, or pushes plainly when that would not be faster.
 * What lands at (symbol, offset) is a PIM-CACHE slot: a descriptor and the block list, at
 * most `length` bytes; the DPU kernel reads the data through it:
 *     nm_pimc_reader_open(&r, &io, (uint32_t)(uintptr_t)input, me(), NR_TASKLETS);
 *     while ((n = nm_pimc_reader_next(&r, wram, &i))) ... bytes [r.pos, r.pos + n) ...
 * The destination is the MRAM heap (DPU_MRAM_HEAP_POINTER_NAME, outside the cache's
 * region) or an MRAM variable of the program; every DPU needs a prepared buffer. With
 * DPU_XFER_FROM_DPU the call is a plain dpu_push_xfer of the prepared buffers (results
 * have nothing to deduplicate). nm_pimc_prepare_xfer records the buffer for the cache
 * only; dpu_prepare_xfer's own list is not touched. */
dpu_error_t nm_pimc_prepare_xfer(nm_pimc *c, struct dpu_set_t dpu, void *buffer);
dpu_error_t nm_pimc_push_xfer(nm_pimc *c, struct dpu_set_t set, dpu_xfer_t xfer, const char *symbol_name,
                              uint32_t symbol_offset, size_t length, dpu_xfer_flags_t flags);

#ifdef __cplusplus
}
#endif
#endif
