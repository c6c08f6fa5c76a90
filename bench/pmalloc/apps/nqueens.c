/* N-Queens (paper Sec. 8.6): the multi-threaded Cilk-style solver, in which
 * every candidate placement copies the partial board into a fresh 128-byte
 * block (the Cilk version's per-child board), checks it, recurses on a safe
 * one and frees it; every puzzle counts all solutions of the 8x8 board.
 * cfg.iters = puzzles per thread, cfg.n = board size (8). Operation = one
 * puzzle solved (15,720 allocations and frees for 8x8). The boards are
 * temporaries (written, not persisted) in a persistent per-thread stack of
 * destinations. Check: every puzzle finds the known number of solutions
 * (92 for 8x8). */
#include <string.h>

#include "pm_apps.h"

#define NQ_SIZE 128u
#define NQ_MAXN 16u

typedef struct nq_root { pa_ptr stack[64]; } nq_root;
typedef struct nq_state { uint64_t bad[64]; } nq_state;

static const uint64_t nq_known[NQ_MAXN + 1] = {1, 1, 0, 0, 2, 10, 4, 40, 92, 352, 724, 2680, 14200, 73712, 365596, 2279184, 14772512};

static size_t nq_pool(const pa_cfg *c) { (void)c; return (size_t)32 << 20; }

static unsigned nq_n(const pa_cfg *c) { return c->n ? (unsigned)c->n : 8u; }

static int nq_init(pa_ctx *x)
{
    if (x->c->threads > 64) return pa_fail(x, "at most 64 threads");
    if (nq_n(x->c) > NQ_MAXN) return pa_fail(x, "board size above %u", NQ_MAXN);
    nq_root *root = x->a->root;
    for (unsigned t = 0; t < x->c->threads; t++) {
        size_t sz = (NQ_MAXN + 1) * sizeof(pa_ptr);
        if (pa_alloc(x->a, sz, &root->stack[t])) return pa_fail(x, "stack allocation failed");
        void *s = pa_get(x->a, root->stack[t]);
        memset(s, 0, sz);
        pa_persist(x->a, s, sz);
    }
    x->st = calloc(1, sizeof(nq_state));
    return x->st ? 0 : pa_fail(x, "out of memory");
}

typedef struct nq_thr { pa_heap *a; pa_ptr *stk; unsigned n; bool fail; } nq_thr;

static bool nq_ok(const uint8_t *b, unsigned j)
{
    for (unsigned i = 0; i + 1 < j; i++) {
        int d = (int)b[j - 1] - (int)b[i];
        if (d == 0 || d == (int)(j - 1 - i) || -d == (int)(j - 1 - i)) return false;
    }
    return true;
}

/* Solutions extending the board of depth j held in stk[j]. */
static uint64_t nq_solve(nq_thr *t, unsigned j)
{
    if (j == t->n) return 1;
    const uint8_t *a = j ? pa_get(t->a, t->stk[j]) : NULL;
    uint64_t count = 0;
    for (unsigned i = 0; i < t->n && !t->fail; i++) {
        if (pa_alloc(t->a, NQ_SIZE, &t->stk[j + 1])) { t->fail = true; break; }
        uint8_t *b = pa_get(t->a, t->stk[j + 1]);
        if (j) memcpy(b, a, j);
        b[j] = (uint8_t)i;
        if (nq_ok(b, j + 1)) count += nq_solve(t, j + 1);
        if (pa_free(t->a, &t->stk[j + 1])) t->fail = true;
    }
    return count;
}

static int nq_work(pa_ctx *x, unsigned tid, uint64_t *ops)
{
    nq_root *root = x->a->root;
    nq_state *s = x->st;
    nq_thr t = {x->a, pa_get(x->a, root->stack[tid]), nq_n(x->c), false};
    pa_timed_begin(x);
    for (uint64_t it = 0; it < x->c->iters && !t.fail; it++)
        if (nq_solve(&t, 0) != nq_known[t.n]) s->bad[tid]++;
    if (t.fail) return pa_fail(x, "thread %u: allocation or free failed", tid);
    *ops = x->c->iters;
    return 0;
}

static int nq_verify(pa_ctx *x)
{
    nq_state *s = x->st;
    nq_root *root = x->a->root;
    for (unsigned t = 0; t < x->c->threads; t++) {
        if (s->bad[t]) return pa_fail(x, "thread %u: %llu puzzles with a wrong solution count", t, (unsigned long long)s->bad[t]);
        pa_ptr *stk = pa_get(x->a, root->stack[t]);
        for (unsigned i = 0; i <= NQ_MAXN; i++)
            if (!pa_isnull(x->a, stk[i])) return pa_fail(x, "thread %u: a board is still allocated", t);
    }
    return 0;
}

static void nq_fini(pa_ctx *x) { free(x->st); }

const pa_app pa_app_nqueens = {"nqueens", "puzzle solved", true, nq_pool, nq_init, nq_work, nq_verify, nq_fini};
