/* Barnes (the SPLASH-2 / Lonestar Barnes-Hut N-body simulation; PMAlloc paper
 * Sec. 8.6). Written for nearmem.
 *
 * Bodies (position, velocity, acceleration, mass: 80 B each) live in one
 * persistent array, persisted by each thread for its bodies at the end of every
 * time step (the state a restarted simulation resumes from). Every time step
 * builds an octree of cells (center, half width, mass, center of mass, body or
 * eight child pointers: 208 B), each cell allocated into its parent's child
 * pointer (the root into the root area), computes every body's acceleration by
 * the Barnes-Hut walk (opening angle 0.5, softening 0.01), advances the bodies
 * (leapfrog, dt 0.001) and frees the tree, post-order through the same
 * pointers. Cells are temporaries: written, not persisted.
 * Threads: the root's eight octants are dealt round-robin to the threads, each
 * builds, summarises and frees its octants' subtrees (allocations from every
 * thread at once); forces and updates are split by body index; barriers between
 * the phases. cfg.n = bodies (paper: 400,000), cfg.iters = time steps.
 * Operation = one body advanced by one time step (allocation is a small share of
 * it, as the paper says: "relatively fewer allocations"). Initial state: a cold
 * uniform sphere, fixed seed. Check: for 64 sampled bodies the last step's
 * Barnes-Hut accelerations are compared with direct summation over all bodies
 * (median relative error < 2%, maximum < 20%), and every cell was freed. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "nearmem/common/stats.h"
#include "pm_apps.h"

#define BH_THETA 0.5
#define BH_EPS2 (0.01 * 0.01)
#define BH_DT 0.001
#define BH_MAXDEPTH 48
#define BH_SAMPLE 64

typedef struct bh_body { double pos[3], vel[3], acc[3], mass; } bh_body;
typedef struct bh_cell {
    double center[3], half;
    double mass, com[3];
    int64_t body; /* >= 0: a leaf holding that body; -1: internal or empty */
    uint64_t nbodies;
    pa_ptr child[8];
} bh_cell;
_Static_assert(sizeof(bh_cell) == 208, "cell layout");

typedef struct bh_root { pa_ptr bodies; pa_ptr tree; } bh_root;

typedef struct bh_state {
    pthread_barrier_t bar;
    double lo[64][3], hi[64][3];
    double *saved; /* positions the last step's forces were computed from */
    double sample_acc[BH_SAMPLE][3];
    uint64_t cells_left;
    int fail[64];
    bool bar_ok;
} bh_state;

static size_t bh_pool(const pa_cfg *c)
{
    uint64_t n = c->n ? c->n : 1;
    return (((size_t)64 << 20) + (size_t)(n * (sizeof(bh_body) + 3 * 256))) & ~(size_t)0xfffff;
}

static int bh_init(pa_ctx *x)
{
    if (x->c->threads > 64) return pa_fail(x, "at most 64 threads");
    uint64_t n = x->c->n;
    if (n < 2) return pa_fail(x, "need at least 2 bodies");
    bh_root *root = x->a->root;
    if (pa_alloc(x->a, n * sizeof(bh_body), &root->bodies)) return pa_fail(x, "body array allocation failed");
    bh_body *b = pa_get(x->a, root->bodies);
    nm_rng r;
    nm_rng_seed(&r, x->c->seed ^ 0xba77e5ull);
    for (uint64_t i = 0; i < n; i++) {
        double p[3], d2;
        do {
            for (int k = 0; k < 3; k++) p[k] = 2 * nm_rng_double(&r) - 1;
            d2 = p[0] * p[0] + p[1] * p[1] + p[2] * p[2];
        } while (d2 > 1);
        for (int k = 0; k < 3; k++) {
            b[i].pos[k] = p[k];
            b[i].vel[k] = 0.05 * (2 * nm_rng_double(&r) - 1);
            b[i].acc[k] = 0;
        }
        b[i].mass = 1.0 / (double)n;
    }
    pa_persist(x->a, b, n * sizeof(bh_body));
    bh_state *s = calloc(1, sizeof *s);
    if (!s) return pa_fail(x, "out of memory");
    x->st = s;
    if (!(s->saved = malloc(n * 3 * sizeof(double)))) return pa_fail(x, "out of memory");
    pthread_barrier_init(&s->bar, NULL, x->c->threads);
    s->bar_ok = true;
    return 0;
}

static inline unsigned octant(const double *c, const double *p)
{
    return (p[0] >= c[0]) | (p[1] >= c[1]) << 1 | (p[2] >= c[2]) << 2;
}

static int bh_new_cell(pa_heap *a, pa_ptr *dst, const double *center, double half)
{
    if (pa_alloc(a, sizeof(bh_cell), dst)) return -1;
    bh_cell *c = pa_get(a, *dst);
    memset(c, 0, sizeof *c);
    memcpy(c->center, center, sizeof c->center);
    c->half = half;
    c->body = -1;
    return 0;
}

static void child_center(const bh_cell *c, unsigned o, double *out)
{
    double h = c->half / 2;
    for (int k = 0; k < 3; k++) out[k] = c->center[k] + ((o >> k & 1) ? h : -h);
}

/* Insert body i into the subtree held by *slot (a cell with `center`, `half`, allocated if null). */
static int bh_insert(pa_heap *a, const bh_body *b, pa_ptr *slot, const double *center, double half, int64_t i, unsigned depth)
{
    if (depth > BH_MAXDEPTH) return -1;
    if (pa_isnull(a, *slot) && bh_new_cell(a, slot, center, half)) return -1;
    bh_cell *c = pa_get(a, *slot);
    if (c->nbodies == 0) {
        c->body = i;
        c->nbodies = 1;
        return 0;
    }
    if (c->body >= 0) { /* a leaf: push its body down */
        int64_t j = c->body;
        c->body = -1;
        unsigned o = octant(c->center, b[j].pos);
        double cc[3];
        child_center(c, o, cc);
        if (bh_insert(a, b, &c->child[o], cc, c->half / 2, j, depth + 1)) return -1;
    }
    c->nbodies++;
    unsigned o = octant(c->center, b[i].pos);
    double cc[3];
    child_center(c, o, cc);
    return bh_insert(a, b, &c->child[o], cc, c->half / 2, i, depth + 1);
}

static void bh_summarise(pa_heap *a, const bh_body *b, bh_cell *c)
{
    if (c->body >= 0) {
        c->mass = b[c->body].mass;
        memcpy(c->com, b[c->body].pos, sizeof c->com);
        return;
    }
    double m = 0, s[3] = {0, 0, 0};
    for (unsigned o = 0; o < 8; o++) {
        bh_cell *k = pa_get(a, c->child[o]);
        if (!k) continue;
        bh_summarise(a, b, k);
        m += k->mass;
        for (int d = 0; d < 3; d++) s[d] += k->mass * k->com[d];
    }
    c->mass = m;
    for (int d = 0; d < 3; d++) c->com[d] = m > 0 ? s[d] / m : c->center[d];
}

static void bh_force(pa_heap *a, const bh_cell *c, const double *p, int64_t self, double *acc)
{
    double d[3] = {c->com[0] - p[0], c->com[1] - p[1], c->com[2] - p[2]};
    double r2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
    if (c->body >= 0 || 4 * c->half * c->half < BH_THETA * BH_THETA * r2) {
        if (c->body == self) return;
        double inv = 1.0 / sqrt(r2 + BH_EPS2), f = c->mass * inv * inv * inv;
        for (int k = 0; k < 3; k++) acc[k] += f * d[k];
        return;
    }
    for (unsigned o = 0; o < 8; o++) {
        const bh_cell *k = pa_get(a, c->child[o]);
        if (k) bh_force(a, k, p, self, acc);
    }
}

static int bh_free_tree(pa_heap *a, pa_ptr *slot, uint64_t *cells)
{
    bh_cell *c = pa_get(a, *slot);
    for (unsigned o = 0; o < 8; o++)
        if (!pa_isnull(a, c->child[o]) && bh_free_tree(a, &c->child[o], cells)) return -1;
    (*cells)++;
    return pa_free(a, slot);
}

static int bh_work(pa_ctx *x, unsigned tid, uint64_t *ops)
{
    pa_heap *a = x->a;
    bh_state *s = x->st;
    bh_root *root = a->root;
    unsigned T = x->c->threads;
    uint64_t n = x->c->n, lo = n * tid / T, hi = n * (tid + 1) / T;
    bh_body *b = pa_get(a, root->bodies);
    pa_timed_begin(x);
    for (uint64_t step = 0; step < x->c->iters; step++) {
        bool last = step + 1 == x->c->iters;
        /* bounding box */
        double mn[3] = {1e300, 1e300, 1e300}, mx[3] = {-1e300, -1e300, -1e300};
        for (uint64_t i = lo; i < hi; i++)
            for (int k = 0; k < 3; k++) {
                if (b[i].pos[k] < mn[k]) mn[k] = b[i].pos[k];
                if (b[i].pos[k] > mx[k]) mx[k] = b[i].pos[k];
            }
        memcpy(s->lo[tid], mn, sizeof mn);
        memcpy(s->hi[tid], mx, sizeof mx);
        if (pthread_barrier_wait(&s->bar) == PTHREAD_BARRIER_SERIAL_THREAD) {
            double c[3], half = 0;
            for (int k = 0; k < 3; k++) {
                double l = 1e300, h = -1e300;
                for (unsigned t = 0; t < T; t++) {
                    if (s->lo[t][k] < l) l = s->lo[t][k];
                    if (s->hi[t][k] > h) h = s->hi[t][k];
                }
                c[k] = (l + h) / 2;
                if ((h - l) / 2 > half) half = (h - l) / 2;
            }
            if (bh_new_cell(a, &root->tree, c, half * 1.0001 + 1e-9)) s->fail[tid] = 1;
            else ((bh_cell *)pa_get(a, root->tree))->nbodies = n;
        }
        pthread_barrier_wait(&s->bar);
        bh_cell *top = pa_get(a, root->tree);
        if (!top) return pa_fail(x, "root cell allocation failed");
        /* build this thread's octants */
        for (uint64_t i = 0; i < n && !s->fail[tid]; i++) {
            unsigned o = octant(top->center, b[i].pos);
            if (o % T != tid) continue;
            double cc[3];
            child_center(top, o, cc);
            if (bh_insert(a, b, &top->child[o], cc, top->half / 2, (int64_t)i, 1)) s->fail[tid] = 1;
        }
        for (unsigned o = tid; o < 8; o += T) {
            bh_cell *k = pa_get(a, top->child[o]);
            if (k) bh_summarise(a, b, k);
        }
        pthread_barrier_wait(&s->bar);
        for (unsigned t = 0; t < T; t++)
            if (s->fail[t]) return pa_fail(x, "tree build failed (allocation or depth)");
        if (tid == 0) { /* the root from its children */
            double m = 0, sum[3] = {0, 0, 0};
            for (unsigned o = 0; o < 8; o++) {
                bh_cell *k = pa_get(a, top->child[o]);
                if (!k) continue;
                m += k->mass;
                for (int d = 0; d < 3; d++) sum[d] += k->mass * k->com[d];
            }
            top->mass = m;
            for (int d = 0; d < 3; d++) top->com[d] = sum[d] / m;
        }
        pthread_barrier_wait(&s->bar);
        for (uint64_t i = lo; i < hi; i++) {
            double acc[3] = {0, 0, 0};
            bh_force(a, top, b[i].pos, (int64_t)i, acc);
            memcpy(b[i].acc, acc, sizeof acc);
        }
        pthread_barrier_wait(&s->bar);
        if (last) {
            for (uint64_t i = lo; i < hi; i++) memcpy(&s->saved[3 * i], b[i].pos, 3 * sizeof(double));
            for (unsigned k = 0; k < BH_SAMPLE; k++) {
                uint64_t i = (uint64_t)k * n / BH_SAMPLE;
                if (i >= lo && i < hi) memcpy(s->sample_acc[k], b[i].acc, sizeof b[i].acc);
            }
        }
        for (uint64_t i = lo; i < hi; i++)
            for (int k = 0; k < 3; k++) {
                b[i].vel[k] += b[i].acc[k] * BH_DT;
                b[i].pos[k] += b[i].vel[k] * BH_DT;
            }
        if (hi > lo) pa_persist(a, &b[lo], (hi - lo) * sizeof(bh_body));
        /* free the tree: octants by their threads, then the root */
        uint64_t cells = 0;
        for (unsigned o = tid; o < 8; o += T)
            if (!pa_isnull(a, top->child[o]) && bh_free_tree(a, &top->child[o], &cells)) s->fail[tid] = 1;
        pthread_barrier_wait(&s->bar);
        if (tid == 0 && pa_free(a, &root->tree)) s->fail[tid] = 1;
        pthread_barrier_wait(&s->bar);
        for (unsigned t = 0; t < T; t++)
            if (s->fail[t]) return pa_fail(x, "freeing the tree failed");
    }
    *ops = (hi - lo) * x->c->iters;
    return 0;
}

static int bh_verify(pa_ctx *x)
{
    bh_state *s = x->st;
    bh_root *root = x->a->root;
    uint64_t n = x->c->n;
    if (!pa_isnull(x->a, root->tree)) return pa_fail(x, "the last tree was not freed");
    if (x->c->iters == 0) return 0;
    const bh_body *b = pa_get(x->a, root->bodies);
    double err[BH_SAMPLE];
    for (unsigned k = 0; k < BH_SAMPLE; k++) {
        uint64_t i = (uint64_t)k * n / BH_SAMPLE;
        double acc[3] = {0, 0, 0};
        const double *p = &s->saved[3 * i];
        for (uint64_t j = 0; j < n; j++) {
            if (j == i) continue;
            double d[3] = {s->saved[3 * j] - p[0], s->saved[3 * j + 1] - p[1], s->saved[3 * j + 2] - p[2]};
            double r2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
            double inv = 1.0 / sqrt(r2 + BH_EPS2), f = b[j].mass * inv * inv * inv;
            for (int q = 0; q < 3; q++) acc[q] += f * d[q];
        }
        double e2 = 0, a2 = 0;
        for (int q = 0; q < 3; q++) {
            e2 += (s->sample_acc[k][q] - acc[q]) * (s->sample_acc[k][q] - acc[q]);
            a2 += acc[q] * acc[q];
        }
        err[k] = sqrt(e2 / (a2 > 0 ? a2 : 1));
    }
    double med = nm_stats_median(err, BH_SAMPLE), mx = 0;
    for (unsigned k = 0; k < BH_SAMPLE; k++) mx = err[k] > mx ? err[k] : mx;
    if (!(med < 0.02) || !(mx < 0.20)) return pa_fail(x, "Barnes-Hut vs direct summation: median error %.4f, max %.4f", med, mx);
    return 0;
}

static void bh_fini(pa_ctx *x)
{
    bh_state *s = x->st;
    if (!s) return;
    if (s->bar_ok) pthread_barrier_destroy(&s->bar);
    free(s->saved);
    free(s);
}

const pa_app pa_app_barnes = {"barnes", "body step", true, bh_pool, bh_init, bh_work, bh_verify, bh_fini};
