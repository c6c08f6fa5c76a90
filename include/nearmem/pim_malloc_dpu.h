/* PIM-malloc inside a DPU program written in plain UPMEM C (built by
 * nearmem-dpu-cc with the allocator's DPU sources: nearmem_add_pimm_dpu_program
 * in CMake), with the paper's API (Table II): initAllocator, pimMalloc,
 * pimFree.
 *
 *   #include <barrier.h>
 *   #include <defs.h>
 *   #include "nearmem/pim_malloc_dpu.h"
 *   BARRIER_INIT(bar, NR_TASKLETS);
 *   int main(void) {
 *       if (me() == 0) initAllocator(32 << 20, NULL);   // or nm_pimm_dpu_init(&cfg)
 *       barrier_wait(&bar);
 *       __mram_ptr void *p = pimMalloc(256);  ...  pimFree(p);
 *   }
 *
 * The allocator's state lives in the DPU's WRAM: an arena of
 * NM_PIMM_DPU_WRAM_BYTES (default 12 KiB: thread caches for 24 tasklets plus
 * the largest metadata store, the 4 KiB pinned tree) among the program's
 * globals, so the DPU's 64 KiB budget counts it; init fails (NM_ENOMEM) if a
 * configuration needs more. Like every WRAM global it survives launches, and
 * dpu_load resets it. The heap starts at DPU_MRAM_HEAP_POINTER rounded up to
 * 4 KiB; the allocator's MRAM metadata follows the heap. pimFree never
 * faults: errors are returned by nm_pimm_free and counted in the statistics.
 * The buddy cache of PIM-malloc-HW/SW is a modeled hardware unit
 * (nearmem_pim.h), its instructions counted in hw_unit_ops. */
#ifndef NEARMEM_PIM_MALLOC_DPU_H
#define NEARMEM_PIM_MALLOC_DPU_H

#include <mram.h>
#include <stdint.h>

#include "nearmem/pim_malloc.h"

#ifndef NM_PIMM_DPU_WRAM_BYTES
#define NM_PIMM_DPU_WRAM_BYTES 12288u
#endif

/* Paper, Table II. size_classes: up to 8 ascending sizes ending with 0, or
 * NULL for the paper's 16 B..2 KiB. PIM-malloc-SW with NR_TASKLETS thread
 * caches; one tasklet calls it. A failure stops the DPU (nm_pim_fault). */
void initAllocator(uint32_t heap_size, const uint32_t *size_classes);
/* An MRAM address (a 32-bit MRAM pointer, as on the DPU); NULL: no memory. */
__mram_ptr void *pimMalloc(uint32_t size);
void pimFree(__mram_ptr void *ptr);

/* Create this DPU's allocator from a full configuration (one tasklet);
 * heap_base 0 = the default. Replaces an existing one. */
nm_err nm_pimm_dpu_init(const nm_pimm_config *cfg);
/* This DPU's allocator (NULL before init). */
nm_pimm *nm_pimm_dpu_heap(void);
/* Destroy it (one tasklet); its WRAM is free again. */
void nm_pimm_dpu_teardown(void);
/* Default heap base: DPU_MRAM_HEAP_POINTER rounded up to 4 KiB. */
uint32_t nm_pimm_dpu_heap_base(void);
/* The message of the last failure on this DPU. */
const char *nm_last_errmsg(void);

#endif
