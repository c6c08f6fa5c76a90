/* A DPU stand-in on host memory for PIM-malloc: MRAM is a host buffer, the
 * allocator mutex is a pthread mutex, tasklets are host threads that call
 * nm_pimm_host_set_tasklet(). DMA calls are checked against the UPMEM rules
 * (8-byte aligned address and size, 8..2048 bytes, inside MRAM); a violation
 * is counted and the transfer is skipped, never performed out of bounds.
 * Used by the unit tests and as a functional fallback; it models no time. */
#ifndef NEARMEM_PIM_MALLOC_HOST_H
#define NEARMEM_PIM_MALLOC_HOST_H

#include <stdint.h>

#include "nearmem/pim_malloc.h"

typedef struct nm_pimm_host nm_pimm_host;

nm_err nm_pimm_host_create(nm_pimm_host **out, uint32_t mram_bytes);
void nm_pimm_host_destroy(nm_pimm_host *d);
/* An environment bound to this host DPU. */
void nm_pimm_host_env(nm_pimm_host *d, nm_pimm_env *env);
/* Host view of MRAM (tests write and check block contents through it). */
uint8_t *nm_pimm_host_mram(nm_pimm_host *d);
uint32_t nm_pimm_host_mram_size(const nm_pimm_host *d);
/* Tasklet id of the calling host thread (thread-local, default 0). */
void nm_pimm_host_set_tasklet(unsigned id);

typedef struct nm_pimm_host_counters {
    uint64_t dma_reads, dma_writes, dma_read_bytes, dma_write_bytes;
    uint64_t dma_violations; /* calls that broke a DMA rule */
    uint64_t locks;
} nm_pimm_host_counters;
void nm_pimm_host_counters_get(nm_pimm_host *d, nm_pimm_host_counters *out);

#endif
