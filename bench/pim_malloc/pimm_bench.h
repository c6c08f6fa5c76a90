/* Shared pieces of the PIM-malloc benchmark suites. */
#ifndef PIMM_BENCH_H
#define PIMM_BENCH_H

#include <stdbool.h>
#include <stdint.h>

#include "nearmem/bench.h"
#include "nearmem/common/util.h"
#include "nearmem/pim_malloc.h"

#ifdef PIMM_WITH_MACHINE
#include "nearmem/pim/host.h"
/* dpu_error_t -> nm_err with a message. */
static inline nm_err pimm_bench_xfer(dpu_error_t e)
{
    return e == DPU_OK ? NM_OK : nm_fail(NM_EIO, "PIM machine: %s", dpu_error_to_string(e));
}
#endif

/* Allocation behaviour of a workload on one DPU, replayed on the host
 * stand-in (event counts only: no time). */
typedef struct pimm_wl_result {
    uint64_t mallocs, frontend, frees;
    uint64_t requested; /* U: bytes the program holds at the end */
    uint64_t reserved;  /* A: bytes the allocator took from the heap at the end */
    uint64_t reserved_peak;
    uint32_t wram_bytes, mram_meta_bytes; /* allocator metadata (Sec. VI-E) */
    bool oom;
} pimm_wl_result;

typedef struct pimm_graph {
    uint32_t dpu;                /* the partition held */
    uint32_t nodes;              /* nodes of this DPU's partition (global ids / ndpus) */
    uint32_t n_old, n_new;       /* edges before the update and inserted by it */
    uint32_t *old_src, *old_dst; /* local source ids */
    uint32_t *new_src, *new_dst;
} pimm_graph;

/* A seeded power-law (R-MAT) graph with loc-gowalla's size scaled by `scale`
 * (1.0: 196,591 nodes, 950,327 edges), edges of sources with id % ndpus == dpu,
 * a third of them new (new:existing = 1:2, Sec. V). dpu PIMM_GRAPH_MEDIAN_DPU
 * picks the partition with the median number of edges. */
#define PIMM_GRAPH_MEDIAN_DPU 0xffffffffu
nm_err pimm_graph_make(pimm_graph *g, double scale, unsigned ndpus, unsigned dpu, uint64_t seed);
void pimm_graph_free(pimm_graph *g);
/* Partitions 0..nparts-1 of the same graph in one pass. */
nm_err pimm_graph_make_all(pimm_graph *parts, double scale, unsigned ndpus, unsigned nparts, uint64_t seed);

enum { PIMM_WL_LISTS = 0, PIMM_WL_VARARRAY = 1 };
/* Build the pre-update structure, reset counters, insert the new edges. */
nm_err pimm_wl_graph(const pimm_graph *g, int structure, nm_pimm_variant v, unsigned tasklets,
                     pimm_wl_result *out);
/* LLM attention KV cache growing in 512 B blocks (one token of one head's K
 * and V in fp16, Llama-2-7B head dim 128): `nreq` requests with the given
 * prompt and output lengths decode in lock-step over one DPU's heap. */
nm_err pimm_wl_kv(const uint32_t *out_len, unsigned nreq, uint32_t prompt, nm_pimm_variant v, unsigned tasklets,
                  uint32_t heap_size, pimm_wl_result *out);

#ifdef PIMM_WITH_MACHINE
/* Modeled seconds of inserting the new edges of partitions 0..nparts-1 (one
 * DPU each, 16 tasklets) into a CSR edge by edge (0), lists (1), arrays (2) or
 * a CSR rebuilt once per `batch` new edges (3; 0 = one rebuild); statistics
 * of DPU 0's allocator for 1 and 2; hist: log2 histogram of pimMalloc
 * latency in cycles (bucket k: [2^k, 2^(k+1))). graph_update.c. */
nm_err pimm_graph_update_time(const pimm_graph *parts, unsigned nparts, int structure, nm_pimm_variant v,
                              uint32_t batch, double *seconds, nm_pimm_stats *st0, uint64_t hist[32]);
#endif

/* Share of pimMalloc served by the thread caches of PIM-malloc-SW over the
 * graph (lists, variable arrays) and KV workloads (Fig. 11a). */
nm_err pimm_frontend_fraction(nm_bench *b, double *out);

#endif
