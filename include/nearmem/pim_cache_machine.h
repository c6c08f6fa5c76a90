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
void nm_pimc_machine_transport_free(nm_pimc_transport *t);
/* Absolute MRAM address of heap offset `off` (what DPU code uses). */
uint32_t nm_pimc_machine_addr(const nm_pimc_transport *t, uint64_t heap_off);

/* Launch the reader kernels on every DPU (same descriptors everywhere, as the cache lays
 * them out). VADD reads two slots block by block and writes C; SUM returns per DPU the
 * checksum nm_pimc_checksum() (pim_cache_dpu.h) computes on the host. */
nm_err nm_pimc_machine_vadd(const nm_pimc_transport *t, uint32_t desc_a, uint32_t desc_b, uint32_t out);
nm_err nm_pimc_machine_sum(const nm_pimc_transport *t, uint32_t desc, uint64_t *sums /* nr_dpus */);

#ifdef __cplusplus
}
#endif
#endif
