/* Ackermann (paper Sec. 8.6, after Poseidon's benchmark): a recursive
 * Ackermann function whose every step allocates six 600-byte blocks as caches
 * of its parameters and result (the first line of each is written: parameters
 * on entry, the result before the step frees them on return). The set
 * A(2,3), A(2,5), A(3,1), A(3,2), A(3,3), A(3,4) (13,520 steps, depth <= 126)
 * is computed cfg.iters times per thread. Operation = one recursive step
 * (12 allocator calls). The blocks are temporaries: written, not persisted; each
 * lives in a persistent per-thread stack of destinations, so allocation and
 * free are crash-atomic. Check: every result against the closed forms
 * A(1,n) = n+2, A(2,n) = 2n+3, A(3,n) = 2^(n+3)-3. */
#include <string.h>

#include "pm_apps.h"

#define AK_BLOCKS 6u
#define AK_SIZE 600u
#define AK_DEPTH 160u

typedef struct ak_root { pa_ptr stack[64]; } ak_root; /* per thread: AK_DEPTH x 6 destinations */
typedef struct ak_rec { uint64_t m, n, depth, result; } ak_rec;
typedef struct ak_state { uint64_t bad[64], steps[64]; } ak_state;

static const unsigned ak_set[][2] = {{2, 3}, {2, 5}, {3, 1}, {3, 2}, {3, 3}, {3, 4}};
#define AK_NSET (sizeof ak_set / sizeof ak_set[0])

static size_t ak_pool(const pa_cfg *c) { return ((size_t)32 << 20) + (size_t)c->threads * AK_DEPTH * AK_BLOCKS * 1024; }

static int ak_init(pa_ctx *x)
{
    if (x->c->threads > 64) return pa_fail(x, "at most 64 threads");
    ak_root *root = x->a->root;
    for (unsigned t = 0; t < x->c->threads; t++) {
        size_t sz = AK_DEPTH * AK_BLOCKS * sizeof(pa_ptr);
        if (pa_alloc(x->a, sz, &root->stack[t])) return pa_fail(x, "stack allocation failed");
        void *s = pa_get(x->a, root->stack[t]);
        memset(s, 0, sz);
        pa_persist(x->a, s, sz);
    }
    x->st = calloc(1, sizeof(ak_state));
    return x->st ? 0 : pa_fail(x, "out of memory");
}

typedef struct ak_thr { pa_heap *a; pa_ptr *stk; uint64_t steps; bool fail; } ak_thr;

static uint64_t ack(ak_thr *t, uint64_t m, uint64_t n, unsigned d)
{
    if (d >= AK_DEPTH || t->fail) { t->fail = true; return 0; }
    pa_ptr *f = &t->stk[d * AK_BLOCKS];
    t->steps++;
    for (unsigned i = 0; i < AK_BLOCKS; i++) {
        if (pa_alloc(t->a, AK_SIZE, &f[i])) { t->fail = true; return 0; }
        ak_rec *r = pa_get(t->a, f[i]);
        *r = (ak_rec){m, n, d, 0};
    }
    uint64_t res;
    if (m == 0) res = n + 1;
    else if (n == 0) res = ack(t, m - 1, 1, d + 1);
    else res = ack(t, m - 1, ack(t, m, n - 1, d + 1), d + 1);
    for (unsigned i = 0; i < AK_BLOCKS && !t->fail; i++) {
        ak_rec *r = pa_get(t->a, f[i]);
        if (r->m != m || r->n != n) t->fail = true; /* a cache overwritten by another step */
        r->result = res;
        if (pa_free(t->a, &f[i])) t->fail = true;
    }
    return res;
}

static uint64_t ak_expect(unsigned m, unsigned n)
{
    return m == 1 ? n + 2u : m == 2 ? 2u * n + 3u : (1ull << (n + 3)) - 3u;
}

static int ak_work(pa_ctx *x, unsigned tid, uint64_t *ops)
{
    ak_root *root = x->a->root;
    ak_state *s = x->st;
    ak_thr t = {x->a, pa_get(x->a, root->stack[tid]), 0, false};
    pa_timed_begin(x);
    for (uint64_t it = 0; it < x->c->iters && !t.fail; it++)
        for (unsigned k = 0; k < AK_NSET && !t.fail; k++)
            if (ack(&t, ak_set[k][0], ak_set[k][1], 0) != ak_expect(ak_set[k][0], ak_set[k][1])) s->bad[tid]++;
    if (t.fail) return pa_fail(x, "thread %u: allocation, free or cache check failed", tid);
    s->steps[tid] = t.steps;
    *ops = t.steps;
    return 0;
}

static int ak_verify(pa_ctx *x)
{
    ak_state *s = x->st;
    ak_root *root = x->a->root;
    for (unsigned t = 0; t < x->c->threads; t++) {
        if (s->bad[t]) return pa_fail(x, "thread %u: %llu wrong results", t, (unsigned long long)s->bad[t]);
        if (s->steps[t] != x->c->iters * 13520u)
            return pa_fail(x, "thread %u: %llu steps, expected %llu", t, (unsigned long long)s->steps[t],
                           (unsigned long long)(x->c->iters * 13520u));
        pa_ptr *stk = pa_get(x->a, root->stack[t]);
        for (unsigned i = 0; i < AK_DEPTH * AK_BLOCKS; i++)
            if (!pa_isnull(x->a, stk[i])) return pa_fail(x, "thread %u: a cache block is still allocated", t);
    }
    return 0;
}

static void ak_fini(pa_ctx *x) { free(x->st); }

const pa_app pa_app_ackermann = {"ackermann", "recursive step", true, ak_pool, ak_init, ak_work, ak_verify, ak_fini};
