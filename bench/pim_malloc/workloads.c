/* The paper's workloads (Sec. V) as allocation sequences on one DPU, replayed
 * on the host stand-in of PIM-malloc (nearmem/pim_malloc_host.h). These give
 * event counts (thread-cache share, fragmentation A/U, what fits in a heap);
 * they model no time. Tasklet t owns the nodes / requests with id % T == t,
 * as a DPU kernel would partition them, so every free is by the owner. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nearmem/common/prng.h"
#include "nearmem/pim_malloc_host.h"
#include "pimm_bench.h"

#define GOWALLA_NODES 196591u
#define GOWALLA_EDGES 950327u
#define LIST_CHUNK 256u                       /* Sec. V: 256 B list elements */
#define LIST_EDGES ((LIST_CHUNK - 8u) / 4u)   /* next pointer + count, then 4-byte ids */
#define VARARRAY_MIN 64u                      /* Sec. V: 64 B .. 32 KiB arrays */
#define KV_BLOCK 512u                         /* Sec. V: KV cache grows in 512 B blocks */

nm_err pimm_graph_make(pimm_graph *g, double scale, unsigned ndpus, unsigned dpu, uint64_t seed)
{
    memset(g, 0, sizeof *g);
    uint32_t n = (uint32_t)(GOWALLA_NODES * scale), m = (uint32_t)(GOWALLA_EDGES * scale);
    if (n < ndpus || !ndpus || (dpu >= ndpus && dpu != PIMM_GRAPH_MEDIAN_DPU)) return nm_fail(NM_EINVAL, "graph: bad scale or partition");
    nm_rng r;
    nm_rng_seed_stream(&r, seed, 0x67726170u);
    uint32_t cap = m / ndpus * 2 + 64;
    g->old_src = malloc(cap * sizeof(uint32_t));
    g->old_dst = malloc(cap * sizeof(uint32_t));
    g->new_src = malloc(cap * sizeof(uint32_t));
    g->new_dst = malloc(cap * sizeof(uint32_t));
    if (!g->old_src || !g->old_dst || !g->new_src || !g->new_dst) {
        pimm_graph_free(g);
        return nm_fail(NM_ENOMEM, "graph arrays");
    }
    if (dpu == PIMM_GRAPH_MEDIAN_DPU) { /* the partition with the median edge count */
        uint32_t *load = calloc(ndpus, 4), *sorted = calloc(ndpus, 4);
        if (!load || !sorted) {
            free(load), free(sorted);
            pimm_graph_free(g);
            return nm_fail(NM_ENOMEM, "graph loads");
        }
        nm_rng r0 = r;
        for (uint32_t i = 0; i < m; i++) {
            uint64_t s, d;
            nm_rng_rmat_edge_n(&r0, n, 0.57, 0.19, 0.19, &s, &d);
            (void)nm_rng_below(&r0, 3);
            load[s % ndpus]++;
        }
        memcpy(sorted, load, ndpus * 4);
        for (unsigned i = 1; i < ndpus; i++) /* insertion sort: ndpus is small */
            for (unsigned j = i; j > 0 && sorted[j - 1] > sorted[j]; j--) {
                uint32_t x = sorted[j];
                sorted[j] = sorted[j - 1];
                sorted[j - 1] = x;
            }
        dpu = 0;
        while (load[dpu] != sorted[ndpus / 2]) dpu++;
        free(load);
        free(sorted);
    }
    g->dpu = dpu;
    g->nodes = (n - dpu + ndpus - 1) / ndpus;
    for (uint32_t i = 0; i < m; i++) {
        uint64_t s, d;
        nm_rng_rmat_edge_n(&r, n, 0.57, 0.19, 0.19, &s, &d);
        bool is_new = nm_rng_below(&r, 3) == 0; /* new : existing = 1 : 2 */
        if (s % ndpus != dpu) continue;
        uint32_t ls = (uint32_t)(s / ndpus);
        if (g->n_old + g->n_new >= cap) break;
        if (is_new) {
            g->new_src[g->n_new] = ls;
            g->new_dst[g->n_new++] = (uint32_t)d;
        } else {
            g->old_src[g->n_old] = ls;
            g->old_dst[g->n_old++] = (uint32_t)d;
        }
    }
    return NM_OK;
}

void pimm_graph_free(pimm_graph *g)
{
    free(g->old_src);
    free(g->old_dst);
    free(g->new_src);
    free(g->new_dst);
    memset(g, 0, sizeof *g);
}

typedef struct replay {
    nm_pimm_host *host;
    nm_pimm *h;
    uint8_t *mram;
    unsigned tasklets;
} replay;

static nm_err replay_open(replay *rp, nm_pimm_variant v, unsigned tasklets, uint32_t heap)
{
    nm_pimm_config cfg;
    nm_pimm_config_default(&cfg, v, 4096);
    cfg.heap_size = heap;
    cfg.tasklets = tasklets;
    uint32_t meta = nm_pimm_mram_meta_bytes(&cfg);
    nm_err e = nm_pimm_host_create(&rp->host, cfg.heap_base + heap + meta);
    if (e) return e;
    nm_pimm_env env;
    nm_pimm_host_env(rp->host, &env);
    nm_pimm_host_set_tasklet(0);
    e = nm_pimm_create(&rp->h, &cfg, &env);
    if (e) {
        nm_pimm_host_destroy(rp->host);
        return e;
    }
    rp->mram = nm_pimm_host_mram(rp->host);
    rp->tasklets = tasklets;
    return NM_OK;
}

static void replay_close(replay *rp, pimm_wl_result *out, uint64_t requested)
{
    nm_pimm_stats s;
    nm_pimm_get_stats(rp->h, &s);
    out->mallocs = s.mallocs;
    out->frontend = s.tc_hits + s.tc_spare;
    out->frees = s.frees;
    out->reserved = s.reserved;
    out->reserved_peak = s.reserved_peak;
    out->requested = requested;
    out->wram_bytes = s.wram_bytes;
    out->mram_meta_bytes = s.mram_meta_bytes;
    nm_pimm_destroy(rp->h);
    nm_pimm_host_destroy(rp->host);
    nm_pimm_host_set_tasklet(0);
}

static inline uint32_t p_malloc(replay *rp, uint32_t owner, uint32_t size)
{
    nm_pimm_host_set_tasklet(owner % rp->tasklets);
    return nm_pimm_malloc(rp->h, size);
}

static inline nm_err p_free(replay *rp, uint32_t owner, uint32_t ptr)
{
    nm_pimm_host_set_tasklet(owner % rp->tasklets);
    return nm_pimm_free(rp->h, ptr);
}

/* Append one edge. Lists: head chunk address and the tail's fill per node.
 * Arrays: address, capacity (edges) and length per node. */
typedef struct gstate {
    uint32_t *addr, *tail, *fill, *cap;
    uint64_t requested;
    bool oom;
} gstate;

static nm_err add_edge(replay *rp, gstate *s, int structure, uint32_t u, uint32_t dst)
{
    if (structure == PIMM_WL_LISTS) {
        if (!s->tail[u] || s->fill[u] == LIST_EDGES) {
            uint32_t c = p_malloc(rp, u, LIST_CHUNK);
            if (!c) {
                s->oom = true;
                return NM_OK;
            }
            /* chunk header: next = 0, count = 0; link from the old tail */
            memset(rp->mram + c, 0, 8);
            if (s->tail[u]) memcpy(rp->mram + s->tail[u], &c, 4);
            else s->addr[u] = c;
            s->tail[u] = c;
            s->fill[u] = 0;
            s->requested += LIST_CHUNK;
        }
        memcpy(rp->mram + s->tail[u] + 8 + 4 * s->fill[u], &dst, 4);
        s->fill[u]++;
        return NM_OK;
    }
    if (s->fill[u] == s->cap[u]) {
        uint32_t ncap = s->cap[u] ? 2 * s->cap[u] : VARARRAY_MIN / 4;
        uint32_t na = p_malloc(rp, u, ncap * 4);
        if (!na) {
            s->oom = true;
            return NM_OK;
        }
        if (s->addr[u]) {
            memcpy(rp->mram + na, rp->mram + s->addr[u], s->fill[u] * 4);
            nm_err e = p_free(rp, u, s->addr[u]);
            if (e) return e;
            s->requested -= s->cap[u] * 4;
        }
        s->addr[u] = na;
        s->cap[u] = ncap;
        s->requested += ncap * 4;
    }
    memcpy(rp->mram + s->addr[u] + 4 * s->fill[u], &dst, 4);
    s->fill[u]++;
    return NM_OK;
}

nm_err pimm_wl_graph(const pimm_graph *g, int structure, nm_pimm_variant v, unsigned tasklets, pimm_wl_result *out)
{
    memset(out, 0, sizeof *out);
    replay rp;
    nm_err e = replay_open(&rp, v, tasklets, 32u << 20);
    if (e) return e;
    gstate s = {0};
    s.addr = calloc(g->nodes, 4);
    s.tail = calloc(g->nodes, 4);
    s.fill = calloc(g->nodes, 4);
    s.cap = calloc(g->nodes, 4);
    if (!s.addr || !s.tail || !s.fill || !s.cap) {
        e = nm_fail(NM_ENOMEM, "graph state");
        goto done;
    }
    for (uint32_t i = 0; i < g->n_old && !e; i++) e = add_edge(&rp, &s, structure, g->old_src[i], g->old_dst[i]);
    nm_pimm_reset_counters(rp.h); /* Fig. 11 counts the update only */
    for (uint32_t i = 0; i < g->n_new && !e; i++) e = add_edge(&rp, &s, structure, g->new_src[i], g->new_dst[i]);
done:
    out->oom = s.oom;
    replay_close(&rp, out, s.requested);
    free(s.addr);
    free(s.tail);
    free(s.fill);
    free(s.cap);
    return e;
}

nm_err pimm_wl_kv(const uint32_t *out_len, unsigned nreq, uint32_t prompt, nm_pimm_variant v, unsigned tasklets,
                  uint32_t heap_size, pimm_wl_result *out)
{
    memset(out, 0, sizeof *out);
    replay rp;
    nm_err e = replay_open(&rp, v, tasklets, heap_size);
    if (e) return e;
    uint32_t maxlen = 0;
    for (unsigned r = 0; r < nreq; r++) maxlen = NM_MAX(maxlen, prompt + out_len[r]);
    uint32_t *blocks = calloc((size_t)nreq * maxlen, 4);
    uint32_t *len = calloc(nreq, 4);
    uint64_t requested = 0, peak_req = 0;
    if (!blocks || !len) {
        e = nm_fail(NM_ENOMEM, "kv state");
        goto done;
    }
    /* step 0 is the prefill (prompt tokens), then one token per step */
    for (uint32_t step = 0; step <= maxlen && !out->oom && !e; step++) {
        for (unsigned r = 0; r < nreq && !out->oom; r++) {
            uint32_t target = step == 0 ? prompt : prompt + step;
            if (len[r] >= prompt + out_len[r]) continue;
            while (len[r] < target && len[r] < prompt + out_len[r]) {
                uint32_t a = p_malloc(&rp, r, KV_BLOCK);
                if (!a) {
                    out->oom = true;
                    break;
                }
                blocks[(size_t)r * maxlen + len[r]++] = a;
                requested += KV_BLOCK;
            }
            peak_req = NM_MAX(peak_req, requested);
            if (len[r] == prompt + out_len[r]) { /* request done: its KV cache is freed */
                for (uint32_t k = 0; k < len[r] && !e; k++) e = p_free(&rp, r, blocks[(size_t)r * maxlen + k]);
                requested -= (uint64_t)len[r] * KV_BLOCK;
            }
        }
    }
done:
    replay_close(&rp, out, peak_req);
    free(blocks);
    free(len);
    return e;
}

nm_err pimm_frontend_fraction(nm_bench *b, double *out)
{
    uint64_t seed = nm_bench_seed(b);
    double scale = nm_bench_quick(b) ? 0.25 : 1.0;
    unsigned ndpus = 64, tasklets = 16;
    pimm_graph g;
    nm_err e = pimm_graph_make(&g, scale, ndpus, PIMM_GRAPH_MEDIAN_DPU, seed);
    if (e) return e;
    double f[3];
    pimm_wl_result r;
    for (int s = 0; s < 2 && !e; s++) {
        e = pimm_wl_graph(&g, s, NM_PIMM_SW, tasklets, &r);
        f[s] = r.mallocs ? (double)r.frontend / (double)r.mallocs : NAN;
        nm_bench_row *row = nm_bench_row_new(b);
        nm_bench_row_str(row, "experiment", "frontend_fraction");
        nm_bench_row_str(row, "workload", s == PIMM_WL_LISTS ? "graph_lists" : "graph_vararray");
        nm_bench_row_num(row, "mallocs", (double)r.mallocs);
        nm_bench_row_num(row, "frontend_fraction", f[s]);
    }
    pimm_graph_free(&g);
    if (e) return e;
    /* KV: 32 requests, 128-token prompts, long-tailed outputs (log-normal,
     * mean 338 as ShareGPT's, sigma 1, <= 2048; see kv.c) */
    enum { NREQ = 32 };
    uint32_t lens[NREQ];
    nm_rng rng;
    nm_rng_seed_stream(&rng, seed, 0x6b76u);
    for (int i = 0; i < NREQ; i++) lens[i] = (uint32_t)NM_MIN(2048.0, ceil(exp(nm_rng_normal(&rng, log(338.0) - 0.5, 1.0))));
    e = pimm_wl_kv(lens, NREQ, 128, NM_PIMM_SW, tasklets, 32u << 20, &r);
    if (e) return e;
    f[2] = r.mallocs ? (double)r.frontend / (double)r.mallocs : NAN;
    nm_bench_row *row = nm_bench_row_new(b);
    nm_bench_row_str(row, "experiment", "frontend_fraction");
    nm_bench_row_str(row, "workload", "llm_kv");
    nm_bench_row_num(row, "mallocs", (double)r.mallocs);
    nm_bench_row_num(row, "frontend_fraction", f[2]);
    *out = (f[0] + f[1] + f[2]) / 3.0; /* the paper's "on average" over its workloads */
    return NM_OK;
}

nm_err pimm_graph_make_all(pimm_graph *parts, double scale, unsigned ndpus, unsigned nparts, uint64_t seed)
{
    uint32_t n = (uint32_t)(GOWALLA_NODES * scale), m = (uint32_t)(GOWALLA_EDGES * scale);
    if (n < ndpus || !ndpus || nparts > ndpus) return nm_fail(NM_EINVAL, "graph: bad scale or partition");
    memset(parts, 0, nparts * sizeof *parts);
    nm_rng r;
    nm_rng_seed_stream(&r, seed, 0x67726170u);
    uint32_t *cap_old = calloc(nparts, 4), *cap_new = calloc(nparts, 4);
    if (!cap_old || !cap_new) {
        free(cap_old), free(cap_new);
        return nm_fail(NM_ENOMEM, "graph");
    }
    for (unsigned p = 0; p < nparts; p++) {
        parts[p].dpu = p;
        parts[p].nodes = (n - p + ndpus - 1) / ndpus;
    }
    nm_err e = NM_OK;
    for (uint32_t i = 0; i < m && !e; i++) {
        uint64_t s, d;
        nm_rng_rmat_edge_n(&r, n, 0.57, 0.19, 0.19, &s, &d);
        bool is_new = nm_rng_below(&r, 3) == 0; /* same stream as pimm_graph_make */
        unsigned p = (unsigned)(s % ndpus);
        if (p >= nparts) continue;
        pimm_graph *g = &parts[p];
        uint32_t **src = is_new ? &g->new_src : &g->old_src, **dst = is_new ? &g->new_dst : &g->old_dst;
        uint32_t *cnt = is_new ? &g->n_new : &g->n_old, *cap = is_new ? &cap_new[p] : &cap_old[p];
        if (*cnt == *cap) {
            *cap = *cap ? 2 * *cap : 1024;
            uint32_t *a = realloc(*src, *cap * 4), *b = a ? realloc(*dst, *cap * 4) : NULL;
            if (a) *src = a;
            if (b) *dst = b;
            if (!a || !b) e = nm_fail(NM_ENOMEM, "graph edges");
        }
        if (!e) {
            (*src)[*cnt] = (uint32_t)(s / ndpus);
            (*dst)[(*cnt)++] = (uint32_t)d;
        }
    }
    free(cap_old);
    free(cap_new);
    if (e)
        for (unsigned p = 0; p < nparts; p++) pimm_graph_free(&parts[p]);
    return e;
}
