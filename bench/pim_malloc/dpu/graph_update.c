/* pim-malloc-graph's update kernel in plain UPMEM C (see ../graph_update.c
 * for what it does). Built with NR_TASKLETS = GT = 16. */
#include <alloc.h>
#include <barrier.h>
#include <defs.h>
#include <mram.h>
#include <nearmem_pim.h>
#include <stdint.h>
#include <string.h>

#include "nearmem/common/util.h"
#include "nearmem/pim_malloc_dpu.h"

/* Plain UPMEM C helpers of nearmem's own PIM-malloc kernels: they keep MRAM
 * addresses as uint32_t, as the allocator's API does. */
typedef uint32_t mram_addr_t;
#define NM_PIM_MAX_TASKLETS 24
#define MRAM(a) ((__mram_ptr void *)(uintptr_t)(a))
static inline __attribute__((unused)) mram_addr_t pimm_malloc32(uint32_t size) { return (mram_addr_t)(uintptr_t)pimMalloc(size); }
static inline __attribute__((unused)) void pimm_free32(mram_addr_t p) { pimFree(MRAM(p)); }

#define GT 16            /* tasklets */
#define CHUNK 1024u      /* DMA chunk (16 x 1 KiB buffers fit WRAM beside the allocator) */
#define LIST_CHUNK 256u  /* list element: next (4), pad (4), 62 edge ids */
#define LIST_EDGES 62u
#define ARR_MIN 16u      /* edges in the smallest array (64 B) */

BARRIER_INIT(g_bar, GT);
__host uint32_t g_mode;   /* 0 init allocator, 1 build (old edges), 2 update (new edges), 3 teardown */
__host uint32_t g_struct; /* 0 CSR (per-edge insertion), 1 lists, 2 arrays, 3 CSR rebuilt per batch */
__host uint32_t g_batch;  /* struct 3: new edges per rebuild */
__host uint32_t g_final_ptr_off; /* where the CSR ended (offsets from the graph data) */
__host uint32_t g_final_edges_off;
__host nm_pimm_config g_cfg;
__host uint32_t g_nodes;
__host uint32_t g_n_old;
__host uint32_t g_n_new;
__host uint32_t g_data_off; /* graph data offset from DPU_MRAM_HEAP_POINTER */
__host uint32_t g_fail;
__host uint64_t g_edges_now; /* CSR: edges stored */
__host nm_pimm_stats g_stats;
/* pimMalloc latency during the update (Fig. 17b/c): log2 histogram of cycles */
__host uint32_t g_hist[NM_PIM_MAX_TASKLETS * 32];
uint64_t g_buf[GT][CHUNK / 8];
#define EBUF 32u
uint64_t g_ebuf[GT][EBUF];

/* MRAM layout after g_data_off: old edges (8 B: src, dst), new edges (8 B),
 * CSR node pointers ((nodes + 1) x 8 B), CSR edges ((old + new) x 8 B),
 * node slots (nodes x 8 B). */
static uint32_t base(void) { return ((uint32_t)(uintptr_t)DPU_MRAM_HEAP_POINTER) + g_data_off; }
static uint32_t a_old(void) { return base(); }
static uint32_t a_new(void) { return a_old() + g_n_old * 8; }
static uint32_t a_ptr(void) { return a_new() + g_n_new * 8; }
static uint32_t a_edges(void) { return a_ptr() + (g_nodes + 1) * 8; }
static uint32_t a_slots(void) { return a_edges() + (g_n_old + g_n_new) * 8; }
/* struct 3: a second CSR (ping-pong) and per-node counters after the slots */
static uint32_t b_ptr(void) { return a_slots() + g_nodes * 8; }
static uint32_t b_edges(void) { return b_ptr() + (g_nodes + 1) * 8; }
static uint32_t a_cnt(void) { return b_edges() + (g_n_old + g_n_new) * 8; }

static uint64_t rd8(uint32_t a)
{
    uint64_t v __dma_aligned;
    mram_read(MRAM(a), &v, 8);
    return v;
}

static void wr8(uint32_t a, uint64_t v)
{
    uint64_t w __dma_aligned = v;
    mram_write(&w, MRAM(a), 8);
}

/* Insert (u, v) into the CSR: all tasklets run this for every edge. */
static void csr_insert(unsigned t, uint32_t u, uint32_t v, uint32_t nedges)
{
    uint32_t pos = (uint32_t)rd8(a_ptr() + (u + 1) * 8);
    uint64_t *w = g_buf[t];
    uint32_t bytes = (nedges - pos) * 8, nchunks = (bytes + CHUNK - 1) / CHUNK, rounds = (nchunks + GT - 1) / GT;
    uint32_t from = a_edges() + pos * 8;
    /* shift [pos, nedges) right by one slot, last round first so that no
     * chunk is read after its neighbour moved into it; in a round all reads
     * come before all writes */
    for (uint32_t r = rounds; r-- > 0;) {
        uint32_t c = r * GT + t, off = c * CHUNK, len = c < nchunks ? NM_MIN(CHUNK, bytes - off) : 0;
        if (len) mram_read(MRAM(from + off), w, len);
        barrier_wait(&g_bar);
        if (len) mram_write(w, MRAM(from + off + 8), len);
    }
    barrier_wait(&g_bar);
    if (t == 0) wr8(from, v);
    /* node pointers u+1..nodes: +1, chunked over tasklets (in place, disjoint) */
    uint32_t first = u + 1, count = g_nodes + 1 - first, per = CHUNK / 8;
    for (uint32_t c = t * per; c < count; c += GT * per) {
        uint32_t n = NM_MIN(per, count - c);
        mram_read(MRAM(a_ptr() + (first + c) * 8), w, n * 8);
        for (uint32_t i = 0; i < n; i++) w[i]++;
        mram_write(w, MRAM(a_ptr() + (first + c) * 8), n * 8);
    }
    barrier_wait(&g_bar);
}

/* Rebuild the CSR (src_ptr, src_edges) with edges [i0, i0 + k) of the new
 * edge list into (dst_ptr, dst_edges): count per node, prefix sum, copy the
 * old rows to their new places, scatter the new edges. All tasklets; nodes
 * are split by id % 16 so no two tasklets write the same counter. */
static void csr_rebuild(unsigned t, uint32_t i0, uint32_t k, uint32_t src_ptr, uint32_t src_edges, uint32_t dst_ptr,
                        uint32_t dst_edges)
{
    uint64_t *w = g_buf[t], *eb = g_ebuf[t];
    uint32_t n = g_nodes, per = CHUNK / 8;
    memset(w, 0, CHUNK);
    for (uint32_t c = t * per; c < n; c += GT * per) mram_write(w, MRAM(a_cnt() + c * 8), NM_MIN(per, n - c) * 8);
    barrier_wait(&g_bar);
    for (uint32_t j0 = 0; j0 < k; j0 += EBUF) { /* count */
        uint32_t m = NM_MIN(EBUF, k - j0);
        mram_read(MRAM(a_new() + (i0 + j0) * 8), eb, m * 8);
        for (uint32_t j = 0; j < m; j++) {
            uint32_t u = (uint32_t)eb[j];
            if (u % GT == t) wr8(a_cnt() + u * 8, rd8(a_cnt() + u * 8) + 1);
        }
    }
    barrier_wait(&g_bar);
    if (t == 0) { /* prefix sum: dst_ptr[u] = src_ptr[u] + new edges of nodes before u */
        uint64_t run = 0, *p = g_buf[0], *cn = g_buf[1];
        for (uint32_t c = 0; c < n; c += per) {
            uint32_t m = NM_MIN(per, n - c);
            mram_read(MRAM(src_ptr + c * 8), p, m * 8);
            mram_read(MRAM(a_cnt() + c * 8), cn, m * 8);
            for (uint32_t j = 0; j < m; j++) {
                uint64_t x = cn[j];
                p[j] += run;
                run += x;
            }
            mram_write(p, MRAM(dst_ptr + c * 8), m * 8);
        }
        wr8(dst_ptr + n * 8, rd8(src_ptr + n * 8) + run);
    }
    barrier_wait(&g_bar);
    for (uint32_t u = t; u < n; u += GT) { /* old rows to their new places */
        uint64_t pr[2] __dma_aligned;
        mram_read(MRAM(src_ptr + u * 8), pr, 16);
        uint32_t len = (uint32_t)(pr[1] - pr[0]), to = (uint32_t)rd8(dst_ptr + u * 8);
        for (uint32_t o = 0; o < len * 8; o += CHUNK) {
            uint32_t m = NM_MIN(CHUNK, len * 8 - o);
            mram_read(MRAM(src_edges + (uint32_t)pr[0] * 8 + o), w, m);
            mram_write(w, MRAM(dst_edges + to * 8 + o), m);
        }
    }
    barrier_wait(&g_bar); /* (dst rows of different nodes are disjoint; the scatter below needs the copies done) */
    for (uint32_t j0 = 0; j0 < k; j0 += EBUF) { /* scatter the new edges at the end of their rows */
        uint32_t m = NM_MIN(EBUF, k - j0);
        mram_read(MRAM(a_new() + (i0 + j0) * 8), eb, m * 8);
        for (uint32_t j = 0; j < m; j++) {
            uint32_t u = (uint32_t)eb[j], v = (uint32_t)(eb[j] >> 32);
            if (u % GT != t) continue;
            uint64_t left = rd8(a_cnt() + u * 8);
            uint32_t end = (uint32_t)rd8(dst_ptr + (u + 1) * 8);
            wr8(a_cnt() + u * 8, left - 1);
            wr8(dst_edges + (end - (uint32_t)left) * 8, v);
        }
    }
    barrier_wait(&g_bar);
}

/* Append v to node u's linked list of 256 B elements. */
static mram_addr_t timed_malloc(uint32_t size)
{
    uint64_t c0 = nm_pim_cycle();
    mram_addr_t a = pimm_malloc32(size);
    uint64_t d = nm_pim_cycle() - c0;
    if (g_mode == 2) g_hist[me() * 32 + (d ? nm_log2_floor(d) : 0)]++;
    return a;
}

static void list_insert(uint32_t u, uint32_t v)
{
    uint32_t sa = a_slots() + u * 8;
    uint64_t slot = rd8(sa);
    uint32_t tail = (uint32_t)slot, fill = (uint32_t)(slot >> 32);
    if (!tail || fill == LIST_EDGES) {
        mram_addr_t c = timed_malloc(LIST_CHUNK);
        if (!c) {
            g_fail++;
            return;
        }
        wr8(c, 0); /* next = 0 */
        if (tail) wr8(tail, c);
        tail = c;
        fill = 0;
    }
    uint32_t ea = tail + 8 + fill * 4;
    uint64_t pair = rd8(ea & ~7u);
    pair = (ea & 4) ? (pair & 0xffffffffull) | ((uint64_t)v << 32) : (pair & ~0xffffffffull) | v;
    wr8(ea & ~7u, pair);
    wr8(sa, (uint64_t)tail | ((uint64_t)(fill + 1) << 32));
}

/* Append v to node u's power-of-two array; grow by allocate-copy-free. */
static void array_insert(unsigned t, uint32_t u, uint32_t v)
{
    uint32_t sa = a_slots() + u * 8;
    uint64_t slot = rd8(sa);
    uint32_t addr = (uint32_t)slot, fill = (uint32_t)(slot >> 32);
    uint32_t cap = fill <= ARR_MIN ? ARR_MIN : (uint32_t)nm_next_pow2(fill);
    if (!addr || fill == cap) {
        uint32_t ncap = addr ? 2 * cap : ARR_MIN;
        mram_addr_t na = timed_malloc(ncap * 4);
        if (!na) {
            g_fail++;
            return;
        }
        uint32_t bytes = NM_ALIGN_UP(fill * 4, 8u);
        for (uint32_t o = 0; o < bytes; o += CHUNK) {
            uint32_t len = NM_MIN(CHUNK, bytes - o);
            mram_read(MRAM(addr + o), g_buf[t], len);
            mram_write(g_buf[t], MRAM(na + o), len);
        }
        if (addr) pimm_free32(addr);
        addr = na;
    }
    uint32_t ea = addr + fill * 4;
    uint64_t pair = rd8(ea & ~7u);
    pair = (ea & 4) ? (pair & 0xffffffffull) | ((uint64_t)v << 32) : (pair & ~0xffffffffull) | v;
    wr8(ea & ~7u, pair);
    wr8(sa, (uint64_t)addr | ((uint64_t)(fill + 1) << 32));
}

int main(void)
{
    unsigned t = me();
    if (g_mode == 0) {
        if (t == 0 && nm_pimm_dpu_init(&g_cfg)) g_fail++;
        return 0;
    }
    if (g_mode == 3) {
        if (t == 0 && nm_pimm_dpu_heap()) {
            nm_pimm_get_stats(nm_pimm_dpu_heap(), &g_stats);
            nm_pimm_dpu_teardown();
        }
        return 0;
    }
    uint32_t n = g_mode == 1 ? g_n_old : g_n_new, src = g_mode == 1 ? a_old() : a_new();
    if (g_mode == 2 && t == 0 && nm_pimm_dpu_heap()) nm_pimm_reset_counters(nm_pimm_dpu_heap());
    uint32_t nedges = g_n_old;
    uint64_t *eb = g_ebuf[t];
    if (g_struct == 3) {
        uint32_t sp = a_ptr(), se = a_edges(), dp = b_ptr(), de = b_edges(), bt = g_batch ? g_batch : n;
        for (uint32_t i0 = 0; i0 < n; i0 += bt) {
            csr_rebuild(t, i0, NM_MIN(bt, n - i0), sp, se, dp, de);
            uint32_t x = sp;
            sp = dp, dp = x, x = se, se = de, de = x;
        }
        if (t == 0) {
            g_final_ptr_off = sp - base();
            g_final_edges_off = se - base();
            g_edges_now = rd8(sp + g_nodes * 8);
        }
        return 0;
    }
    for (uint32_t i0 = 0; i0 < n; i0 += EBUF) { /* every tasklet streams the edge list */
        uint32_t k = NM_MIN(EBUF, n - i0);
        mram_read(MRAM(src + i0 * 8), eb, k * 8);
        for (uint32_t j = 0; j < k; j++) {
            uint32_t u = (uint32_t)eb[j], v = (uint32_t)(eb[j] >> 32);
            if (g_struct == 0) csr_insert(t, u, v, nedges++);
            else if (u % GT == t) {
                if (g_struct == 1) list_insert(u, v);
                else array_insert(t, u, v);
            }
        }
    }
    if (g_struct == 0 && t == 0) {
        g_edges_now = nedges;
        g_final_ptr_off = a_ptr() - base();
        g_final_edges_off = a_edges() - base();
    }
    return 0;
}

