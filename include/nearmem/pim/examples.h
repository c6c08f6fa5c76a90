/* Example kernels of the emulated PIM machine, with their host drivers:
 * PrIM's vector addition (VA) and a reduction (RED-style sum). They are
 * used by the pim-machine benchmark suite, the demo and the tests, and show
 * how a PrIM kernel is written against nearmem/pim/dpu.h. */
#ifndef NEARMEM_PIM_EXAMPLES_H
#define NEARMEM_PIM_EXAMPLES_H

#include <stdint.h>

#include "nearmem/pim/host.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes per DMA block, as PrIM's default BLOCK_SIZE for VA. */
#define NM_PIM_EXAMPLE_BLOCK 1024u

typedef struct nm_pim_run_report {
    double modeled_kernel_s;     /* slowest DPU, by the cost model */
    double modeled_xfer_to_s;    /* inputs host -> DPUs (parallel push) */
    double modeled_xfer_from_s;  /* outputs DPUs -> host */
    double host_s;               /* wall time of the whole run on this host */
    double host_kernel_s;        /* of which emulating the launch (host wall time) */
    uint64_t max_cycles;
    uint64_t instructions;       /* all DPUs */
} nm_pim_run_report;

/* c[i] = a[i] + b[i] for n int32 elements over every DPU of `set` with
 * `tasklets` tasklets (1, 2, 4, 8, 11, 12, 16 or 20: the builds of the
 * kernel src/pim/examples/dpu/va.c, plain UPMEM C; another count is
 * DPU_ERR_INVALID_THREAD_ID). Elements are split evenly; every DPU
 * gets the same padded length (a multiple of 2 elements, 8 bytes). Returns a
 * dpu_error_t; on DPU_ERR_DPU_FAULT the set's DPUs tell which fault. */
dpu_error_t nm_pim_va_run(struct dpu_set_t set, uint32_t tasklets, const int32_t *a, const int32_t *b, int32_t *c,
                          uint64_t n, nm_pim_run_report *rep);

/* The same with the kernel built by nearmem-dpu-cc -fno-nearmem-cost (its
 * compute costs nothing; 16 tasklets only): for host-speed comparisons of
 * the compiler's costing. */
dpu_error_t nm_pim_va_run_uncosted(struct dpu_set_t set, uint32_t tasklets, const int32_t *a, const int32_t *b,
                                   int32_t *c, uint64_t n, nm_pim_run_report *rep);

/* *sum = sum of n uint64 values (kernel dpu/red.c, built for 1, 2, 4, 8,
 * 11, 12, 16, 20 and 24 tasklets): each tasklet sums its
 * blocks, tasklet 0 adds the partial sums after a barrier, the host adds the
 * DPUs' results. */
dpu_error_t nm_pim_red_run(struct dpu_set_t set, uint32_t tasklets, const uint64_t *v, uint64_t n, uint64_t *sum,
                           nm_pim_run_report *rep);

/* A DMA streaming kernel for the MRAM bandwidth figure (dpu/stream.c, 1 or
 * 16 tasklets):
 * each tasklet reads `bytes_per_tasklet` of MRAM in `block`-byte DMAs.
 * Returns the modeled read bandwidth in MB/s (1e6 B/s) through *mbps. */
dpu_error_t nm_pim_mram_stream_run(struct dpu_set_t set, uint32_t tasklets, uint32_t block,
                                   uint32_t bytes_per_tasklet, double *mbps);

#ifdef __cplusplus
}
#endif
#endif
