/* The paper's own multi-threaded workloads (SpeedMalloc Sec. 6.1.2), our own code:
 * GAPBS-style breadth-first search and betweenness centrality on a generated power-law
 * (R-MAT) graph, and a NAS-DC-style data cube. As the paper notes, these allocate in
 * their queue and view structures while they run: frontiers are built from per-thread
 * chunks (malloc'd as they fill, concatenated and freed by another thread at the level
 * barrier), BC allocates its per-source arrays and per-level vertex lists, DC builds every
 * view as a hash table of small nodes derived from a parent view. Each verifies its
 * result. THREADS threads share the work (pthreads, barriers). */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "sm_wl.h"

/* ---- the graph: R-MAT (Graph500 parameters), undirected, CSR ------------------------- */
typedef struct { uint32_t n; uint64_t m; uint64_t *off; uint32_t *adj; } graph;
static graph G;

static void graph_build(unsigned scale, unsigned degree)
{
    nm_rng r;
    nm_rng_seed_stream(&r, g_seed, 4004);
    uint32_t n = 1u << scale;
    uint64_t e = (uint64_t)n * degree / 2;
    uint32_t *src = wl_malloc(e * sizeof *src), *dst = wl_malloc(e * sizeof *dst);
    G.n = n;
    G.off = wl_calloc((size_t)n + 1, sizeof *G.off);
    for (uint64_t i = 0; i < e; i++) {
        uint64_t s, d;
        nm_rng_rmat_edge_n(&r, n, 0.57, 0.19, 0.19, &s, &d);
        src[i] = (uint32_t)s;
        dst[i] = (uint32_t)d;
        if (s != d) { G.off[s + 1]++; G.off[d + 1]++; }
    }
    for (uint32_t v = 0; v < n; v++) G.off[v + 1] += G.off[v];
    G.m = G.off[n];
    G.adj = wl_malloc(G.m * sizeof *G.adj);
    uint64_t *pos = wl_malloc((size_t)n * sizeof *pos);
    memcpy(pos, G.off, (size_t)n * sizeof *pos);
    for (uint64_t i = 0; i < e; i++) {
        if (src[i] == dst[i]) continue;
        G.adj[pos[src[i]]++] = dst[i];
        G.adj[pos[dst[i]]++] = src[i];
    }
    free(pos);
    free(src);
    free(dst);
}
static void graph_free(void)
{
    free(G.off);
    free(G.adj);
    memset(&G, 0, sizeof G);
}
/* sources: vertices with edges, from a seeded stream (as GAPBS's -n trials) */
static uint32_t pick_source(nm_rng *r)
{
    for (;;) {
        uint32_t v = (uint32_t)nm_rng_below(r, G.n);
        if (G.off[v + 1] > G.off[v]) return v;
    }
}

/* ---- frontier chunks: a thread appends discovered vertices into malloc'd chunks ------ */
#define CHUNK 256
typedef struct chunk { struct chunk *next; uint32_t n; uint32_t v[CHUNK]; } chunk;
typedef struct { chunk *head, *tail; uint64_t count; char pad[40]; } tlist;
static void tl_push(tlist *l, uint32_t v)
{
    if (!l->tail || l->tail->n == CHUNK) {
        chunk *c = wl_malloc(sizeof *c);
        c->next = NULL;
        c->n = 0;
        if (l->tail) l->tail->next = c; else l->head = c;
        l->tail = c;
    }
    l->tail->v[l->tail->n++] = v;
    l->count++;
}
/* Concatenates every thread's chunks into one new array and frees the chunks (thread 0
 * does this, so the other threads' chunks are freed by another thread). */
static uint32_t *tl_gather(tlist *ls, unsigned nt, uint64_t *count)
{
    uint64_t total = 0;
    for (unsigned t = 0; t < nt; t++) total += ls[t].count;
    uint32_t *a = wl_malloc((total ? total : 1) * sizeof *a);
    uint64_t k = 0;
    for (unsigned t = 0; t < nt; t++) {
        for (chunk *c = ls[t].head, *nx; c; c = nx) {
            nx = c->next;
            memcpy(a + k, c->v, c->n * sizeof *a);
            k += c->n;
            free(c);
        }
        ls[t].head = ls[t].tail = NULL;
        ls[t].count = 0;
    }
    *count = total;
    return a;
}

/* ---- BFS (GAPBS bfs, top-down): parents claimed with compare-and-swap ----------------- */
static int32_t *bfs_parent;
static uint32_t *bfs_front;
static uint64_t bfs_front_n;
static tlist bfs_lists[64];
static uint32_t bfs_src;

static bool bfs_verify(uint32_t src)
{
    int32_t *depth = wl_malloc((size_t)G.n * sizeof *depth);
    uint32_t *q = wl_malloc((size_t)G.n * sizeof *q);
    for (uint32_t v = 0; v < G.n; v++) depth[v] = -1;
    uint64_t h = 0, t = 0;
    depth[src] = 0;
    q[t++] = src;
    while (h < t) {
        uint32_t u = q[h++];
        for (uint64_t e = G.off[u]; e < G.off[u + 1]; e++)
            if (depth[G.adj[e]] < 0) { depth[G.adj[e]] = depth[u] + 1; q[t++] = G.adj[e]; }
    }
    bool ok = bfs_parent[src] == (int32_t)src;
    for (uint32_t v = 0; v < G.n && ok; v++) {
        if ((bfs_parent[v] < 0) != (depth[v] < 0)) { ok = false; break; }
        if (v == src || bfs_parent[v] < 0) continue;
        uint32_t p = (uint32_t)bfs_parent[v];
        if (depth[p] != depth[v] - 1) { ok = false; break; }
        bool adj = false;
        for (uint64_t e = G.off[v]; e < G.off[v + 1] && !adj; e++) adj = G.adj[e] == p;
        ok = adj;
    }
    free(depth);
    free(q);
    return ok;
}

void *wl_bfs(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg, nt = g_threads;
    size_t trials = scaled(24);
    nm_rng r;
    if (id == 0) {
        graph_build(16, 16);
        bfs_parent = wl_malloc((size_t)G.n * sizeof *bfs_parent);
        nm_rng_seed_stream(&r, g_seed, 4005);
    }
    pthread_barrier_wait(&g_bar);
    uint64_t reached_total = 0;
    for (size_t trial = 0; trial < trials; trial++) {
        if (id == 0) {
            bfs_src = pick_source(&r);
            for (uint32_t v = 0; v < G.n; v++) bfs_parent[v] = -1;
            bfs_parent[bfs_src] = (int32_t)bfs_src;
            bfs_front = wl_malloc(sizeof *bfs_front);
            bfs_front[0] = bfs_src;
            bfs_front_n = 1;
        }
        pthread_barrier_wait(&g_bar);
        while (bfs_front_n) {
            uint64_t lo = bfs_front_n * id / nt, hi = bfs_front_n * (id + 1) / nt;
            for (uint64_t i = lo; i < hi; i++) {
                uint32_t u = bfs_front[i];
                for (uint64_t e = G.off[u]; e < G.off[u + 1]; e++) {
                    uint32_t v = G.adj[e];
                    int32_t expect = -1;
                    if (__atomic_load_n(&bfs_parent[v], __ATOMIC_RELAXED) < 0 &&
                        __atomic_compare_exchange_n(&bfs_parent[v], &expect, (int32_t)u, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
                        tl_push(&bfs_lists[id], v);
                }
            }
            pthread_barrier_wait(&g_bar);
            if (id == 0) {
                free(bfs_front);
                bfs_front = tl_gather(bfs_lists, nt, &bfs_front_n);
                reached_total += bfs_front_n;
            }
            pthread_barrier_wait(&g_bar);
        }
        if (id == 0) {
            free(bfs_front);
            if (trial % 8 == 0 && !bfs_verify(bfs_src)) wl_fail("bfs: not a valid BFS tree");
        }
        pthread_barrier_wait(&g_bar);
    }
    if (id == 0) {
        g_sum += reached_total;
        free(bfs_parent);
        graph_free();
    }
    return NULL;
}

/* ---- BC (GAPBS bc: Brandes from a few sources), level-synchronous, pull-style sums --- */
static int32_t *bc_depth;
static double *bc_sigma, *bc_delta, *bc_score, *bc_check;
static uint32_t **bc_level;
static uint64_t *bc_level_n;
static unsigned bc_nlevels;
static tlist bc_lists[64];

/* Brandes for one source on one thread, adding into score (the reference for the check). */
static void bc_serial(uint32_t src, double *score)
{
    int32_t *depth = wl_malloc((size_t)G.n * sizeof *depth);
    double *sigma = wl_calloc(G.n, sizeof *sigma), *delta = wl_calloc(G.n, sizeof *delta);
    uint32_t *order = wl_malloc((size_t)G.n * sizeof *order);
    for (uint32_t v = 0; v < G.n; v++) depth[v] = -1;
    uint64_t h = 0, t = 0;
    depth[src] = 0;
    sigma[src] = 1;
    order[t++] = src;
    while (h < t) {
        uint32_t u = order[h++];
        for (uint64_t e = G.off[u]; e < G.off[u + 1]; e++) {
            uint32_t v = G.adj[e];
            if (depth[v] < 0) { depth[v] = depth[u] + 1; order[t++] = v; }
            if (depth[v] == depth[u] + 1) sigma[v] += sigma[u];
        }
    }
    while (t-- > 0) {
        uint32_t u = order[t];
        for (uint64_t e = G.off[u]; e < G.off[u + 1]; e++) {
            uint32_t v = G.adj[e];
            if (depth[v] == depth[u] + 1) delta[u] += sigma[u] / sigma[v] * (1 + delta[v]);
        }
        if (u != src) score[u] += delta[u];
    }
    free(depth); free(sigma); free(delta); free(order);
}

void *wl_bc(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg, nt = g_threads;
    size_t sources = scaled(12);
    nm_rng r;
    uint32_t srcs[2] = {0, 0};
    if (id == 0) {
        graph_build(15, 16);
        bc_score = wl_calloc(G.n, sizeof *bc_score);
        nm_rng_seed_stream(&r, g_seed, 4006);
    }
    pthread_barrier_wait(&g_bar);
    for (size_t s = 0; s < sources; s++) {
        uint32_t src = 0;
        if (id == 0) {
            src = pick_source(&r);
            if (s < 2) srcs[s] = src;
            bc_depth = wl_malloc((size_t)G.n * sizeof *bc_depth); /* per-source arrays, as GAPBS */
            bc_sigma = wl_calloc(G.n, sizeof *bc_sigma);
            bc_delta = wl_calloc(G.n, sizeof *bc_delta);
            for (uint32_t v = 0; v < G.n; v++) bc_depth[v] = -1;
            bc_depth[src] = 0;
            bc_sigma[src] = 1;
            bc_level = wl_malloc(sizeof *bc_level);
            bc_level_n = wl_malloc(sizeof *bc_level_n);
            bc_level[0] = wl_malloc(sizeof **bc_level);
            bc_level[0][0] = src;
            bc_level_n[0] = 1;
            bc_nlevels = 1;
        }
        pthread_barrier_wait(&g_bar);
        /* forward: discover the next level (claim depth), then pull path counts */
        for (;;) {
            unsigned d = bc_nlevels - 1;
            uint32_t *cur = bc_level[d];
            uint64_t n = bc_level_n[d], lo = n * id / nt, hi = n * (id + 1) / nt;
            for (uint64_t i = lo; i < hi; i++) {
                uint32_t u = cur[i];
                for (uint64_t e = G.off[u]; e < G.off[u + 1]; e++) {
                    int32_t expect = -1;
                    if (__atomic_load_n(&bc_depth[G.adj[e]], __ATOMIC_RELAXED) < 0 &&
                        __atomic_compare_exchange_n(&bc_depth[G.adj[e]], &expect, (int32_t)d + 1, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
                        tl_push(&bc_lists[id], G.adj[e]);
                }
            }
            pthread_barrier_wait(&g_bar);
            if (id == 0) {
                uint64_t cnt;
                uint32_t *next = tl_gather(bc_lists, nt, &cnt);
                if (cnt) {
                    bc_level = wl_realloc(bc_level, (bc_nlevels + 1) * sizeof *bc_level);
                    bc_level_n = wl_realloc(bc_level_n, (bc_nlevels + 1) * sizeof *bc_level_n);
                    bc_level[bc_nlevels] = next;
                    bc_level_n[bc_nlevels] = cnt;
                    bc_nlevels++;
                } else {
                    free(next);
                }
            }
            pthread_barrier_wait(&g_bar);
            if (bc_nlevels == d + 1) break; /* no new level */
            uint32_t *nx = bc_level[d + 1];
            uint64_t m = bc_level_n[d + 1], l2 = m * id / nt, h2 = m * (id + 1) / nt;
            for (uint64_t i = l2; i < h2; i++) {
                uint32_t v = nx[i];
                double sg = 0;
                for (uint64_t e = G.off[v]; e < G.off[v + 1]; e++)
                    if (bc_depth[G.adj[e]] == (int32_t)d) sg += bc_sigma[G.adj[e]];
                bc_sigma[v] = sg;
            }
            pthread_barrier_wait(&g_bar);
        }
        /* backward: dependencies, level by level from the deepest */
        for (unsigned d = bc_nlevels; d-- > 0;) {
            uint32_t *cur = bc_level[d];
            uint64_t n = bc_level_n[d], lo = n * id / nt, hi = n * (id + 1) / nt;
            for (uint64_t i = lo; i < hi; i++) {
                uint32_t u = cur[i];
                double dl = 0;
                for (uint64_t e = G.off[u]; e < G.off[u + 1]; e++) {
                    uint32_t v = G.adj[e];
                    if (bc_depth[v] == (int32_t)d + 1) dl += bc_sigma[u] / bc_sigma[v] * (1 + bc_delta[v]);
                }
                bc_delta[u] = dl;
                if (d) bc_score[u] += dl;
            }
            pthread_barrier_wait(&g_bar);
        }
        if (id == 0) {
            for (unsigned d = 0; d < bc_nlevels; d++) free(bc_level[d]);
            free(bc_level);
            free(bc_level_n);
            free(bc_depth);
            free(bc_sigma);
            free(bc_delta);
            if (s == 1 || (sources == 1 && s == 0)) { /* a snapshot after the first sources, for the check */
                bc_check = wl_malloc((size_t)G.n * sizeof *bc_check);
                memcpy(bc_check, bc_score, (size_t)G.n * sizeof *bc_check);
            }
        }
        pthread_barrier_wait(&g_bar);
    }
    if (id == 0) {
        double *ref = wl_calloc(G.n, sizeof *ref);
        for (size_t s = 0; s < (sources < 2 ? sources : 2); s++) bc_serial(srcs[s], ref);
        for (uint32_t v = 0; v < G.n; v++)
            if (fabs(ref[v] - bc_check[v]) > 1e-9 * fmax(1.0, fabs(ref[v]))) { wl_fail("bc: scores differ from serial Brandes"); break; }
        double tot = 0;
        for (uint32_t v = 0; v < G.n; v++) tot += bc_score[v];
        g_sum += (uint64_t)tot;
        free(ref);
        free(bc_check);
        free(bc_score);
        graph_free();
    }
    return NULL;
}

/* ---- DC (NAS DC): the data cube, every group-by of D dimensions ------------------------
 * The base view (all dimensions) is aggregated from the tuples; every smaller view from
 * its smallest parent one level up, through a hash table of malloc'd group nodes that is
 * then turned into a sorted array (the view) and freed. Views of a level are shared out
 * among the threads; every view lives until the round ends and is freed by thread 0. */
#define DC_D 6
static const unsigned dc_card[DC_D] = {24, 16, 12, 10, 8, 6};
typedef struct { uint64_t key; int64_t sum; uint64_t cnt; } dc_group;
typedef struct dc_node { struct dc_node *next; dc_group g; } dc_node;
typedef struct { dc_group *g; uint64_t n; } dc_view;
static dc_view dc_views[1 << DC_D];
static uint8_t (*dc_tuple)[DC_D];
static int32_t *dc_measure;
static uint64_t dc_ntuples;

static uint64_t dc_project(uint64_t key, unsigned to)
{ /* keys pack one byte per dimension, at the dimension's byte position */
    uint64_t k = 0;
    for (unsigned d = 0; d < DC_D; d++) if (to >> d & 1) k |= key & (0xffull << (8 * d));
    return k;
}
static int dc_cmp(const void *a, const void *b)
{
    uint64_t x = ((const dc_group *)a)->key, y = ((const dc_group *)b)->key;
    return x < y ? -1 : x > y;
}
static void dc_build(unsigned mask)
{
    uint64_t groups = 0;
    const unsigned full = (1u << DC_D) - 1;
    unsigned parent = full;
    if (mask != full) { /* the smallest computed parent: one more dimension */
        uint64_t best = UINT64_MAX;
        for (unsigned d = 0; d < DC_D; d++) {
            unsigned p = mask | 1u << d;
            if (p != mask && dc_views[p].g && dc_views[p].n < best) { best = dc_views[p].n; parent = p; }
        }
    }
    uint64_t n = mask == full ? dc_ntuples : dc_views[parent].n;
    size_t nb = 64;
    while (nb < n && nb < ((size_t)1 << 18)) nb *= 2;
    dc_node **bucket = wl_calloc(nb, sizeof *bucket);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t key;
        int64_t sum;
        uint64_t cnt;
        if (mask == full) {
            key = 0;
            for (unsigned d = 0; d < DC_D; d++) key |= (uint64_t)dc_tuple[i][d] << (8 * d);
            sum = dc_measure[i];
            cnt = 1;
        } else {
            key = dc_project(dc_views[parent].g[i].key, mask);
            sum = dc_views[parent].g[i].sum;
            cnt = dc_views[parent].g[i].cnt;
        }
        size_t h = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 40) & (nb - 1);
        dc_node *x = bucket[h];
        while (x && x->g.key != key) x = x->next;
        if (!x) {
            x = wl_malloc(sizeof *x);
            x->g.key = key;
            x->g.sum = 0;
            x->g.cnt = 0;
            x->next = bucket[h];
            bucket[h] = x;
            groups++;
        }
        x->g.sum += sum;
        x->g.cnt += cnt;
    }
    dc_group *out = wl_malloc((groups ? groups : 1) * sizeof *out);
    uint64_t k = 0;
    for (size_t h = 0; h < nb; h++) {
        for (dc_node *x = bucket[h], *nx; x; x = nx) {
            nx = x->next;
            out[k++] = x->g;
            free(x);
        }
    }
    free(bucket);
    qsort(out, groups, sizeof *out, dc_cmp);
    dc_views[mask].g = out;
    dc_views[mask].n = groups;
}

void *wl_dc(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg, nt = g_threads;
    size_t rounds = scaled(2);
    for (size_t round = 0; round < rounds; round++) {
        if (id == 0) {
            nm_rng r;
            nm_rng_seed_stream(&r, g_seed + round, 4007);
            dc_ntuples = 120000;
            dc_tuple = wl_malloc(dc_ntuples * sizeof *dc_tuple);
            dc_measure = wl_malloc(dc_ntuples * sizeof *dc_measure);
            for (uint64_t i = 0; i < dc_ntuples; i++) {
                for (unsigned d = 0; d < DC_D; d++) /* skewed values, as in real cubes */
                    dc_tuple[i][d] = (uint8_t)(nm_rng_zipf(&r, dc_card[d], 0.8) - 1);
                dc_measure[i] = (int32_t)nm_rng_below(&r, 1000) - 100;
            }
        }
        pthread_barrier_wait(&g_bar);
        for (int level = DC_D; level >= 0; level--) {
            unsigned k = 0;
            for (unsigned mask = 0; mask < (1u << DC_D); mask++) {
                if ((unsigned)__builtin_popcount(mask) != (unsigned)level) continue;
                if (k++ % nt == id) dc_build(mask);
            }
            pthread_barrier_wait(&g_bar);
        }
        if (id == 0) { /* checks, then free every view (views of other threads, too) */
            int64_t total = 0;
            for (uint64_t i = 0; i < dc_ntuples; i++) total += dc_measure[i];
            for (unsigned mask = 0; mask < (1u << DC_D); mask++) {
                int64_t s = 0;
                uint64_t c = 0;
                for (uint64_t i = 0; i < dc_views[mask].n; i++) { s += dc_views[mask].g[i].sum; c += dc_views[mask].g[i].cnt; }
                if (s != total || c != dc_ntuples) wl_fail("dc: a view's totals differ from the data");
                if (__builtin_popcount(mask) == 1) {
                    unsigned d = (unsigned)__builtin_ctz(mask);
                    bool seen[256] = {false};
                    uint64_t distinct = 0;
                    for (uint64_t i = 0; i < dc_ntuples; i++) if (!seen[dc_tuple[i][d]]) { seen[dc_tuple[i][d]] = true; distinct++; }
                    if (distinct != dc_views[mask].n) wl_fail("dc: a one-dimension view has the wrong groups");
                }
                g_sum += dc_views[mask].n;
            }
            if (dc_views[0].n != 1) wl_fail("dc: the apex view is not one group");
            for (unsigned mask = 0; mask < (1u << DC_D); mask++) { free(dc_views[mask].g); dc_views[mask].g = NULL; dc_views[mask].n = 0; }
            free(dc_tuple);
            free(dc_measure);
        }
        pthread_barrier_wait(&g_bar);
    }
    return NULL;
}
