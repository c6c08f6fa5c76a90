/* Dynamic graph update on the emulated PIM machine (Sec. III-A, V, VI-B):
 * every DPU inserts its partition's new edges into (a) a static CSR, (b) an
 * array of linked lists of 256 B elements, (c) variable-size power-of-two
 * arrays, the last two with pimMalloc. Modeled time of the update launch.
 *
 * CSR insertion follows the paper's description ("each edge insertion
 * requires reorganizing the array"): the edge array is shifted by one slot
 * from the insertion point and every later node pointer is incremented, the
 * 16 tasklets sharing the work chunk by chunk between barriers. Entries are
 * 8-byte slots so that a one-slot shift keeps every DMA 8-byte aligned.
 * Lists and arrays: tasklet t inserts the edges of sources with id % 16 == t
 * (no locks on the structure); each node has an 8-byte slot {address, fill}. */
#include <stdlib.h>
#include <string.h>

#include "nearmem/common/util.h"
#include "pimm_bench.h"

#define GT 16            /* tasklets */
#define CHUNK 1024u      /* DMA chunk (16 x 1 KiB buffers fit WRAM beside the allocator) */
#define LIST_CHUNK 256u  /* list element: next (4), pad (4), 62 edge ids */
#define LIST_EDGES 62u
#define ARR_MIN 16u      /* edges in the smallest array (64 B) */

/* ------------------------------------------------------------- the host */

/* The kernel, dpu/graph_update.c (plain UPMEM C, GT tasklets). */
extern struct dpu_incbin_t nm_dpu_incbin_pimm_graph;

/* Every launch runs the GT tasklets; the init and teardown modes use tasklet
 * 0 only (the others return at once). */
static nm_err launch(struct dpu_set_t set, uint32_t mode, double *modeled)
{
    nm_err e = pimm_bench_xfer(dpu_broadcast_to(set, "g_mode", 0, &mode, 4, DPU_XFER_DEFAULT));
    if (!e) e = pimm_bench_xfer(dpu_launch(set, DPU_SYNCHRONOUS));
    if (!e && modeled) {
        nm_pim_launch_stats ls;
        e = pimm_bench_xfer(nm_pim_last_launch(set, &ls));
        if (!e) *modeled = ls.modeled_seconds;
    }
    return e;
}

/* The baseline must be right too: every node's CSR row holds exactly its old
 * and new edges (count and an order-independent hash per node). */
static nm_err check_csr(struct dpu_set_t dpu, const pimm_graph *g, uint32_t data_off, uint32_t idx)
{
    uint32_t n = g->nodes, ne = g->n_old + g->n_new, po = 0, eo = 0;
    uint64_t *ptr = malloc((n + 1) * 8ull), *edges = malloc(ne * 8ull + 8), *want = calloc(n * 2ull + 2, 8);
    nm_err e = (!ptr || !edges || !want) ? nm_fail(NM_ENOMEM, "csr check") : NM_OK;
    if (!e) e = pimm_bench_xfer(dpu_copy_from(dpu, "g_final_ptr_off", 0, &po, 4));
    if (!e) e = pimm_bench_xfer(dpu_copy_from(dpu, "g_final_edges_off", 0, &eo, 4));
    if (!e) e = pimm_bench_xfer(dpu_copy_from(dpu, DPU_MRAM_HEAP_POINTER_NAME, data_off + po, ptr, (n + 1) * 8ull));
    if (!e && ne) e = pimm_bench_xfer(dpu_copy_from(dpu, DPU_MRAM_HEAP_POINTER_NAME, data_off + eo, edges, ne * 8ull));
    for (uint32_t k = 0; k < ne && !e; k++) {
        uint32_t u = k < g->n_old ? g->old_src[k] : g->new_src[k - g->n_old];
        uint32_t v = k < g->n_old ? g->old_dst[k] : g->new_dst[k - g->n_old];
        want[2 * u]++;
        want[2 * u + 1] += (uint64_t)v * 0x9e3779b97f4a7c15ull;
    }
    for (uint32_t u = 0; u < n && !e; u++) {
        uint64_t cnt = ptr[u + 1] - ptr[u], h = 0;
        for (uint64_t k = ptr[u]; k < ptr[u + 1] && k < ne; k++) h += (edges[k] & 0xffffffffu) * 0x9e3779b97f4a7c15ull;
        if (cnt != want[2 * u] || h != want[2 * u + 1])
            e = nm_fail(NM_ECORRUPT, "CSR on DPU %u: node %u holds the wrong edges", idx, u);
    }
    if (!e && ptr[n] != ne) e = nm_fail(NM_ECORRUPT, "CSR on DPU %u: %llu edges", idx, (unsigned long long)ptr[n]);
    free(ptr);
    free(edges);
    free(want);
    return e;
}

/* Modeled seconds of the update of `structure` (0 CSR, 1 lists, 2 arrays)
 * with allocator variant v, over the given partitions (one DPU each). */
nm_err pimm_graph_update_time(const pimm_graph *parts, unsigned nparts, int structure, nm_pimm_variant v,
                              uint32_t batch, double *seconds, nm_pimm_stats *st0, uint64_t hist[32])
{
    struct dpu_set_t set, dpu;
    uint32_t i;
    nm_err e = pimm_bench_xfer(dpu_alloc(nparts, NULL, &set));
    if (e) return e;
    e = pimm_bench_xfer(dpu_load_from_incbin(set, &nm_dpu_incbin_pimm_graph, NULL));
    nm_pimm_config cfg;
    nm_pimm_config_default(&cfg, v, 0);
    cfg.tasklets = GT;
    uint32_t s = (uint32_t)structure, zero = 0, data_off = (40u << 20);
    if (!e) e = pimm_bench_xfer(dpu_broadcast_to(set, "g_cfg", 0, &cfg, sizeof cfg, DPU_XFER_DEFAULT));
    if (!e) e = pimm_bench_xfer(dpu_broadcast_to(set, "g_struct", 0, &s, 4, DPU_XFER_DEFAULT));
    if (!e) e = pimm_bench_xfer(dpu_broadcast_to(set, "g_batch", 0, &batch, 4, DPU_XFER_DEFAULT));
    bool csr = structure == 0 || structure == 3;
    if (!e) e = pimm_bench_xfer(dpu_broadcast_to(set, "g_fail", 0, &zero, 4, DPU_XFER_DEFAULT));
    static const uint32_t hz[NM_PIM_MAX_TASKLETS * 32];
    if (!e) e = pimm_bench_xfer(dpu_broadcast_to(set, "g_hist", 0, hz, sizeof hz, DPU_XFER_DEFAULT));
    if (hist) memset(hist, 0, 32 * sizeof *hist);
    if (!e) e = pimm_bench_xfer(dpu_broadcast_to(set, "g_data_off", 0, &data_off, 4, DPU_XFER_DEFAULT));
    DPU_FOREACH(set, dpu, i)
    {
        if (e) break;
        const pimm_graph *g = &parts[i];
        uint32_t n = g->nodes;
        size_t bytes = ((size_t)g->n_old + g->n_new) * 8 + (n + 1) * 8 + ((size_t)g->n_old + g->n_new) * 8 + n * 8;
        uint64_t *img = calloc(1, bytes);
        if (!img) {
            e = nm_fail(NM_ENOMEM, "graph image");
            break;
        }
        for (uint32_t k = 0; k < g->n_old; k++) img[k] = g->old_src[k] | ((uint64_t)g->old_dst[k] << 32);
        for (uint32_t k = 0; k < g->n_new; k++) img[g->n_old + k] = g->new_src[k] | ((uint64_t)g->new_dst[k] << 32);
        if (csr) { /* pre-update CSR built on the host (not timed) */
            uint64_t *ptr = img + g->n_old + g->n_new, *edges = ptr + n + 1;
            for (uint32_t k = 0; k < g->n_old; k++) ptr[g->old_src[k] + 1]++;
            for (uint32_t k = 0; k < n; k++) ptr[k + 1] += ptr[k];
            uint32_t *fillc = calloc(n ? n : 1, 4);
            if (!fillc) {
                free(img);
                e = nm_fail(NM_ENOMEM, "csr");
                break;
            }
            for (uint32_t k = 0; k < g->n_old; k++) {
                uint32_t u = g->old_src[k];
                edges[ptr[u] + fillc[u]++] = g->old_dst[k];
            }
            free(fillc);
        }
        e = pimm_bench_xfer(dpu_copy_to(dpu, DPU_MRAM_HEAP_POINTER_NAME, data_off, img, bytes));
        free(img);
        if (!e) e = pimm_bench_xfer(dpu_copy_to(dpu, "g_nodes", 0, &n, 4));
        if (!e) e = pimm_bench_xfer(dpu_copy_to(dpu, "g_n_old", 0, &g->n_old, 4));
        if (!e) e = pimm_bench_xfer(dpu_copy_to(dpu, "g_n_new", 0, &g->n_new, 4));
    }
    if (!e && !csr) e = launch(set, 0, NULL);
    if (!e && !csr) e = launch(set, 1, NULL); /* pre-update graph */
    if (!e) e = launch(set, 2, seconds);        /* the timed update */
    if (!e && !csr) e = launch(set, 3, NULL);
    DPU_FOREACH(set, dpu, i)
    {
        uint32_t f = 0;
        if (!e) e = pimm_bench_xfer(dpu_copy_from(dpu, "g_fail", 0, &f, 4));
        if (!e && f) e = nm_fail(NM_ENOMEM, "graph update: %u allocations failed on DPU %u", f, i);
        if (!e && csr) e = check_csr(dpu, &parts[i], data_off, i);
        if (!e && !csr && i == 0 && st0) e = pimm_bench_xfer(dpu_copy_from(dpu, "g_stats", 0, st0, sizeof *st0));
        if (!e && !csr && hist) { /* over all DPUs and tasklets */
            static uint32_t hb[NM_PIM_MAX_TASKLETS * 32];
            e = pimm_bench_xfer(dpu_copy_from(dpu, "g_hist", 0, hb, sizeof hb));
            for (unsigned k = 0; !e && k < NM_PIM_MAX_TASKLETS * 32; k++) hist[k % 32] += hb[k];
        }
    }
    dpu_free(set);
    return e;
}
