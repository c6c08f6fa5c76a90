/* Kruskal (paper Sec. 8.6, after Poseidon's benchmark): per iteration, a
 * 168-byte block holds a complete graph of order 6 (15 weighted edges) and the
 * union-find array; the edges are sorted, Kruskal's greedy pass builds the
 * minimum spanning tree, the block is freed. Operation = one graph solved.
 * cfg.n = graphs per thread. The blocks are temporaries: written, not
 * persisted (nothing needs them after a crash); the allocation and free are
 * crash-atomic through the allocator. Check: every MST weight is recomputed
 * afterwards with Prim's algorithm on the same graphs (same generator). */
#include <string.h>

#include "pm_apps.h"

#define KR_V 6u
#define KR_E 15u

typedef struct kr_edge { uint8_t u, v; uint16_t pad; uint32_t w; } kr_edge;
typedef struct kr_block {
    uint32_t n, m;
    uint64_t mst;
    kr_edge e[KR_E];
    uint32_t parent[KR_V];
    uint64_t pad;
} kr_block;
_Static_assert(sizeof(kr_block) == 168, "the paper's 168-byte block");

typedef struct kr_root { pa_ptr slot[64]; } kr_root;
typedef struct kr_state { uint64_t sum[64]; } kr_state;

static size_t kr_pool(const pa_cfg *c) { (void)c; return (size_t)32 << 20; }

static int kr_init(pa_ctx *x)
{
    if (x->c->threads > 64) return pa_fail(x, "at most 64 threads");
    x->st = calloc(1, sizeof(kr_state));
    return x->st ? 0 : pa_fail(x, "out of memory");
}

static uint32_t kr_find(uint32_t *p, uint32_t v)
{
    while (p[v] != v) {
        p[v] = p[p[v]];
        v = p[v];
    }
    return v;
}

static void kr_gen(nm_rng *r, uint32_t *w)
{
    for (unsigned i = 0; i < KR_E; i++) w[i] = 1 + (uint32_t)nm_rng_below(r, 1000);
}

static int kr_work(pa_ctx *x, unsigned tid, uint64_t *ops)
{
    kr_root *root = x->a->root;
    pa_ptr *slot = &root->slot[tid];
    nm_rng r;
    pa_rng(x, tid, &r);
    uint64_t sum = 0;
    pa_timed_begin(x);
    for (uint64_t it = 0; it < x->c->n; it++) {
        if (pa_alloc(x->a, sizeof(kr_block), slot)) return pa_fail(x, "alloc failed at graph %llu", (unsigned long long)it);
        kr_block *b = pa_get(x->a, *slot);
        uint32_t w[KR_E];
        kr_gen(&r, w);
        b->n = KR_V;
        b->m = KR_E;
        unsigned k = 0;
        for (uint8_t u = 0; u < KR_V; u++)
            for (uint8_t v = u + 1; v < KR_V; v++, k++) b->e[k] = (kr_edge){u, v, 0, w[k]};
        for (unsigned i = 1; i < KR_E; i++) { /* insertion sort by weight */
            kr_edge e = b->e[i];
            unsigned j = i;
            while (j > 0 && b->e[j - 1].w > e.w) {
                b->e[j] = b->e[j - 1];
                j--;
            }
            b->e[j] = e;
        }
        for (uint32_t v = 0; v < KR_V; v++) b->parent[v] = v;
        uint64_t mst = 0;
        unsigned taken = 0;
        for (unsigned i = 0; i < KR_E && taken < KR_V - 1; i++) {
            uint32_t a = kr_find(b->parent, b->e[i].u), c = kr_find(b->parent, b->e[i].v);
            if (a == c) continue;
            b->parent[a] = c;
            mst += b->e[i].w;
            taken++;
        }
        b->mst = mst;
        sum += b->mst;
        if (pa_free(x->a, slot)) return pa_fail(x, "free failed");
    }
    ((kr_state *)x->st)->sum[tid] = sum;
    *ops = x->c->n;
    return 0;
}

static int kr_verify(pa_ctx *x)
{
    kr_state *s = x->st;
    kr_root *root = x->a->root;
    for (unsigned tid = 0; tid < x->c->threads; tid++) {
        if (!pa_isnull(x->a, root->slot[tid])) return pa_fail(x, "thread %u left its block allocated", tid);
        nm_rng r;
        pa_rng(x, tid, &r);
        uint64_t sum = 0;
        for (uint64_t it = 0; it < x->c->n; it++) { /* Prim on the adjacency matrix */
            uint32_t w[KR_E], m[KR_V][KR_V], best[KR_V];
            bool in[KR_V] = {0};
            kr_gen(&r, w);
            unsigned k = 0;
            for (unsigned u = 0; u < KR_V; u++)
                for (unsigned v = u + 1; v < KR_V; v++, k++) m[u][v] = m[v][u] = w[k];
            for (unsigned v = 0; v < KR_V; v++) best[v] = UINT32_MAX;
            best[0] = 0;
            for (unsigned step = 0; step < KR_V; step++) {
                unsigned pick = KR_V;
                for (unsigned v = 0; v < KR_V; v++)
                    if (!in[v] && (pick == KR_V || best[v] < best[pick])) pick = v;
                in[pick] = true;
                sum += best[pick];
                for (unsigned v = 0; v < KR_V; v++)
                    if (!in[v] && m[pick][v] < best[v]) best[v] = m[pick][v];
            }
        }
        if (sum != s->sum[tid])
            return pa_fail(x, "thread %u: MST weights sum to %llu, Prim says %llu", tid, (unsigned long long)s->sum[tid],
                           (unsigned long long)sum);
    }
    return 0;
}

static void kr_fini(pa_ctx *x) { free(x->st); }

const pa_app pa_app_kruskal = {"kruskal", "graph solved", true, kr_pool, kr_init, kr_work, kr_verify, kr_fini};
