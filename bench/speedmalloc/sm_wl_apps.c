/* Application-shaped single-threaded workloads of nearmem-sm-workload, in the style of
 * mimalloc-bench's cfrac, espresso and barnes (our own code, written from the
 * descriptions of those programs; see docs/speedmalloc.md). Each verifies what it
 * computed. Only thread 0 works; THREADS is 1 for these. */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "sm_wl.h"

/* =========================================================================
 * cfrac-like: the continued-fraction expansion of sqrt(N) that the continued-fraction
 * factoring method walks, on heap-allocated bignums. Like cfrac, every arithmetic
 * operation returns a fresh number and the operands die young: many small, short-lived
 * allocations (20-120 bytes). Each step checks the identity A(k-1)^2 = (-1)^k Q(k)
 * (mod N) of the convergents, and trial-divides Q(k) over a factor base (cfrac's search
 * for smooth residues); the count of smooth residues is the checksum.
 * ========================================================================= */
typedef struct { uint32_t n; uint32_t d[]; } bn; /* little-endian 32-bit limbs, no leading zeros */

static bn *bn_alloc(uint32_t n)
{
    bn *r = wl_malloc(sizeof(bn) + (size_t)(n ? n : 1) * sizeof(uint32_t));
    r->n = n;
    return r;
}
static bn *bn_trim(bn *a)
{
    while (a->n && !a->d[a->n - 1]) a->n--;
    return a;
}
static bn *bn_u64(uint64_t v)
{
    bn *r = bn_alloc(2);
    r->d[0] = (uint32_t)v;
    r->d[1] = (uint32_t)(v >> 32);
    return bn_trim(r);
}
static bn *bn_copy(const bn *a)
{
    bn *r = bn_alloc(a->n);
    memcpy(r->d, a->d, a->n * sizeof(uint32_t));
    return r;
}
static int bn_cmp(const bn *a, const bn *b)
{
    if (a->n != b->n) return a->n < b->n ? -1 : 1;
    for (uint32_t i = a->n; i-- > 0;)
        if (a->d[i] != b->d[i]) return a->d[i] < b->d[i] ? -1 : 1;
    return 0;
}
static bn *bn_add(const bn *a, const bn *b)
{
    if (a->n < b->n) { const bn *t = a; a = b; b = t; }
    bn *r = bn_alloc(a->n + 1);
    uint64_t c = 0;
    for (uint32_t i = 0; i < a->n; i++) {
        c += (uint64_t)a->d[i] + (i < b->n ? b->d[i] : 0);
        r->d[i] = (uint32_t)c;
        c >>= 32;
    }
    r->d[a->n] = (uint32_t)c;
    return bn_trim(r);
}
static bn *bn_sub(const bn *a, const bn *b) /* a >= b */
{
    bn *r = bn_alloc(a->n);
    int64_t br = 0;
    for (uint32_t i = 0; i < a->n; i++) {
        int64_t t = (int64_t)a->d[i] - (i < b->n ? b->d[i] : 0) - br;
        br = t < 0;
        r->d[i] = (uint32_t)(t + (br << 32));
    }
    return bn_trim(r);
}
static bn *bn_mul(const bn *a, const bn *b)
{
    bn *r = bn_alloc(a->n + b->n);
    memset(r->d, 0, (a->n + b->n) * sizeof(uint32_t));
    for (uint32_t i = 0; i < a->n; i++) {
        uint64_t c = 0;
        for (uint32_t j = 0; j < b->n; j++) {
            c += (uint64_t)a->d[i] * b->d[j] + r->d[i + j];
            r->d[i + j] = (uint32_t)c;
            c >>= 32;
        }
        r->d[i + b->n] = (uint32_t)c;
    }
    return bn_trim(r);
}
/* Quotient and remainder (Knuth, TAOCP vol. 2, 4.3.1, algorithm D). */
static void bn_divmod(const bn *u, const bn *v, bn **q, bn **r)
{
    if (bn_cmp(u, v) < 0) { if (q) *q = bn_alloc(0); if (r) *r = bn_copy(u); return; }
    uint32_t n = v->n, m = u->n - v->n;
    bn *qq = bn_alloc(m + 1);
    if (n == 1) {
        uint64_t rem = 0;
        for (uint32_t i = u->n; i-- > 0;) {
            uint64_t cur = (rem << 32) | u->d[i];
            qq->d[i] = (uint32_t)(cur / v->d[0]);
            rem = cur % v->d[0];
        }
        if (q) *q = bn_trim(qq); else free(qq);
        if (r) *r = bn_u64(rem);
        return;
    }
    unsigned s = (unsigned)__builtin_clz(v->d[n - 1]);
    uint32_t *vn = wl_malloc(n * sizeof(uint32_t)), *un = wl_malloc((u->n + 1) * sizeof(uint32_t));
    for (uint32_t i = n - 1; i > 0; i--) vn[i] = (v->d[i] << s) | (s ? v->d[i - 1] >> (32 - s) : 0);
    vn[0] = v->d[0] << s;
    un[u->n] = s ? u->d[u->n - 1] >> (32 - s) : 0;
    for (uint32_t i = u->n - 1; i > 0; i--) un[i] = (u->d[i] << s) | (s ? u->d[i - 1] >> (32 - s) : 0);
    un[0] = u->d[0] << s;
    for (uint32_t j = m + 1; j-- > 0;) {
        uint64_t num = ((uint64_t)un[j + n] << 32) | un[j + n - 1];
        uint64_t qhat = num / vn[n - 1], rhat = num % vn[n - 1];
        while (qhat >> 32 || qhat * vn[n - 2] > ((rhat << 32) | un[j + n - 2])) {
            qhat--;
            rhat += vn[n - 1];
            if (rhat >> 32) break;
        }
        int64_t k = 0, t;
        for (uint32_t i = 0; i < n; i++) {
            uint64_t p = qhat * vn[i];
            t = (int64_t)un[i + j] - k - (int64_t)(p & 0xffffffffu);
            un[i + j] = (uint32_t)t;
            k = (int64_t)(p >> 32) - (t >> 32);
        }
        t = (int64_t)un[j + n] - k;
        un[j + n] = (uint32_t)t;
        qq->d[j] = (uint32_t)qhat;
        if (t < 0) {
            qq->d[j]--;
            uint64_t c = 0;
            for (uint32_t i = 0; i < n; i++) {
                c += (uint64_t)un[i + j] + vn[i];
                un[i + j] = (uint32_t)c;
                c >>= 32;
            }
            un[j + n] += (uint32_t)c;
        }
    }
    if (r) {
        bn *rr = bn_alloc(n);
        for (uint32_t i = 0; i < n; i++) rr->d[i] = (un[i] >> s) | (s ? un[i + 1] << (32 - s) : 0);
        *r = bn_trim(rr);
    }
    if (q) *q = bn_trim(qq); else free(qq);
    free(vn);
    free(un);
}
static uint32_t bn_mod_small(const bn *a, uint32_t m)
{
    uint64_t rem = 0;
    for (uint32_t i = a->n; i-- > 0;) rem = ((rem << 32) | a->d[i]) % m;
    return (uint32_t)rem;
}
static bn *bn_sqrt(const bn *a) /* floor, by Newton's iteration from above */
{
    if (!a->n) return bn_alloc(0);
    unsigned bits = (a->n - 1) * 32 + (32 - (unsigned)__builtin_clz(a->d[a->n - 1]));
    bn *x = bn_alloc((bits / 2 + 1) / 32 + 1); /* 2^(bits/2 + 1) > sqrt(a) */
    memset(x->d, 0, x->n * sizeof(uint32_t));
    x->d[(bits / 2 + 1) / 32] = 1u << ((bits / 2 + 1) % 32);
    bn_trim(x);
    for (;;) {
        bn *q, *s, *y, *two = bn_u64(2);
        bn_divmod(a, x, &q, NULL);
        s = bn_add(x, q);
        bn_divmod(s, two, &y, NULL);
        free(q); free(s); free(two);
        if (bn_cmp(y, x) >= 0) { free(y); return x; }
        free(x);
        x = y;
    }
}

void *wl_cfrac(void *arg)
{
    if ((uintptr_t)arg != 0) return NULL;
    static const uint32_t primes[] = {2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73,
                                      79, 83, 89, 97, 101, 103, 107, 109, 113, 127, 131, 137, 139, 149, 151, 157, 163,
                                      167, 173, 179, 181, 191, 193, 197, 199, 211, 223, 227, 229, 233, 239, 241, 251};
    nm_rng r;
    nm_rng_seed_stream(&r, g_seed, 1001);
    bn *N = bn_alloc(7); /* a 220-bit odd number, not a square */
    for (int i = 0; i < 7; i++) N->d[i] = nm_rng_u32(&r);
    N->d[6] = (N->d[6] & 0x0fffffffu) | 0x08000000u;
    N->d[0] |= 1;
    bn *a0 = bn_sqrt(N);
    {
        bn *sq = bn_mul(a0, a0), *one = bn_u64(1), *a1 = bn_add(a0, one);
        bn *sq1 = bn_mul(a1, a1);
        if (bn_cmp(sq, N) > 0 || bn_cmp(sq1, N) <= 0) wl_fail("cfrac: integer square root");
        if (!bn_cmp(sq, N)) { wl_fail("cfrac: N is a square"); }
        free(sq); free(one); free(a1); free(sq1);
    }
    bn *P = bn_u64(0), *Q = bn_u64(1), *Aprev2 = bn_u64(1), *Aprev = bn_copy(a0), *a = bn_copy(a0);
    /* k = 0 done: a_0 = a0, A_0 = a0, A_{-1} = 1 */
    size_t steps = scaled(60000);
    uint64_t smooth = 0;
    for (size_t k = 1; k <= steps; k++) {
        /* P' = a Q - P; Q' = (N - P'^2) / Q */
        bn *aq = bn_mul(a, Q), *Pn = bn_sub(aq, P);
        bn *p2 = bn_mul(Pn, Pn), *num = bn_sub(N, p2), *Qn, *rem;
        bn_divmod(num, Q, &Qn, &rem);
        if (rem->n) wl_fail("cfrac: Q does not divide N - P^2");
        free(aq); free(p2); free(num); free(rem); free(P); free(Q);
        P = Pn;
        Q = Qn;
        /* identity: A(k-1)^2 = (-1)^k Q(k) (mod N) */
        bn *sq = bn_mul(Aprev, Aprev), *lhs, *rhs;
        bn_divmod(sq, N, NULL, &lhs);
        rhs = (k & 1) ? bn_sub(N, Q) : bn_copy(Q);
        if (bn_cmp(lhs, rhs) != 0) wl_fail("cfrac: convergent identity");
        free(sq); free(lhs); free(rhs);
        /* next partial quotient a = (a0 + P) / Q, next convergent A = a A(k-1) + A(k-2) mod N */
        bn *s = bn_add(a0, P), *an;
        bn_divmod(s, Q, &an, NULL);
        free(s); free(a);
        a = an;
        bn *t = bn_mul(a, Aprev), *t2 = bn_add(t, Aprev2), *An;
        bn_divmod(t2, N, NULL, &An);
        free(t); free(t2); free(Aprev2);
        Aprev2 = Aprev;
        Aprev = An;
        /* cfrac keeps Q(k) that factor over a small base */
        bn *f = bn_copy(Q);
        for (size_t i = 0; i < sizeof primes / sizeof primes[0] && f->n; i++) {
            while (f->n && bn_mod_small(f, primes[i]) == 0) {
                bn *pr = bn_u64(primes[i]), *fq;
                bn_divmod(f, pr, &fq, NULL);
                free(pr); free(f);
                f = fq;
            }
        }
        if (f->n == 1 && f->d[0] == 1) smooth++;
        free(f);
    }
    g_sum += smooth * 1000003u + (P->n ? P->d[0] : 0);
    free(N); free(a0); free(P); free(Q); free(Aprev2); free(Aprev); free(a);
    return NULL;
}

/* =========================================================================
 * espresso-like: two-level logic minimization over heap-allocated cubes and covers, in the
 * way espresso works (Brayton et al.): the OFF-set by recursive complementation, then
 * EXPAND (raise literals while the cube stays off the OFF-set) and IRREDUNDANT (drop a
 * cube when the others cover it: a tautology check of the cofactor, recursively). Every
 * cofactor is a new cover of new cubes, freed as the recursion returns: espresso's mix of
 * small cubes and growing arrays with nested lifetimes. Checks: the result equals the
 * original function on every input, and does not meet the OFF-set.
 * ========================================================================= */
#define EV 12 /* variables; a cube is 2 bits per variable: 01 = x', 10 = x, 11 = either */
typedef uint32_t cube_t;
#define CUBE_FULL ((cube_t)((1ull << (2 * EV)) - 1))
typedef struct { cube_t **c; unsigned n, cap; } cover;

static cube_t *cube_new(cube_t v)
{
    cube_t *c = wl_malloc(16); /* espresso's set_new: a small block per cube */
    *c = v;
    return c;
}
static void cover_init(cover *f) { f->c = NULL; f->n = f->cap = 0; }
static void cover_add(cover *f, cube_t v)
{
    if (f->n == f->cap) {
        f->cap = f->cap ? f->cap * 2 : 8;
        f->c = wl_realloc(f->c, f->cap * sizeof *f->c);
    }
    f->c[f->n++] = cube_new(v);
}
static void cover_free(cover *f)
{
    for (unsigned i = 0; i < f->n; i++) free(f->c[i]);
    free(f->c);
    cover_init(f);
}
static bool cube_empty(cube_t c)
{
    for (int v = 0; v < EV; v++) if (((c >> (2 * v)) & 3) == 0) return true;
    return false;
}
static bool cube_contains(cube_t big, cube_t small) { return (small & ~big) == 0; }
/* The cofactor of f with respect to cube p: cubes meeting p, with p's literals raised. */
static void cofactor(const cover *f, cube_t p, cover *out)
{
    cover_init(out);
    for (unsigned i = 0; i < f->n; i++) {
        cube_t c = *f->c[i];
        if (cube_empty(c & p)) continue;
        cover_add(out, c | (CUBE_FULL & ~p));
    }
}
static int binate_var(const cover *f)
{
    int best = -1, bestn = 0;
    for (int v = 0; v < EV; v++) {
        int n0 = 0, n1 = 0;
        for (unsigned i = 0; i < f->n; i++) {
            unsigned lit = (*f->c[i] >> (2 * v)) & 3;
            n0 += lit == 1;
            n1 += lit == 2;
        }
        int score = n0 && n1 ? 1000 + n0 + n1 : n0 + n1;
        if (n0 + n1 && score > bestn) { bestn = score; best = v; }
    }
    return best;
}
static bool tautology(const cover *f)
{
    for (unsigned i = 0; i < f->n; i++) if (*f->c[i] == CUBE_FULL) return true;
    if (!f->n) return false;
    int v = binate_var(f);
    if (v < 0) return false;
    cover f0, f1;
    cofactor(f, CUBE_FULL & ~((cube_t)2 << (2 * v)), &f0); /* x_v = 0 */
    bool t = tautology(&f0);
    cover_free(&f0);
    if (!t) return false;
    cofactor(f, CUBE_FULL & ~((cube_t)1 << (2 * v)), &f1); /* x_v = 1 */
    t = tautology(&f1);
    cover_free(&f1);
    return t;
}
/* complement(f) = x' comp(f_x') + x comp(f_x), single cubes by De Morgan */
static void complement(const cover *f, cover *out)
{
    cover_init(out);
    if (!f->n) { cover_add(out, CUBE_FULL); return; }
    for (unsigned i = 0; i < f->n; i++) if (*f->c[i] == CUBE_FULL) return;
    if (f->n == 1) {
        cube_t c = *f->c[0];
        for (int v = 0; v < EV; v++) {
            unsigned lit = (c >> (2 * v)) & 3;
            if (lit == 3) continue;
            cover_add(out, (CUBE_FULL & ~((cube_t)3 << (2 * v))) | ((cube_t)(lit ^ 3) << (2 * v)));
        }
        return;
    }
    int v = binate_var(f);
    for (int side = 0; side < 2; side++) {
        cube_t lit = (cube_t)(side ? 2 : 1) << (2 * v);
        cube_t p = (CUBE_FULL & ~((cube_t)3 << (2 * v))) | lit;
        cover fc, cc;
        cofactor(f, p, &fc);
        complement(&fc, &cc);
        cover_free(&fc);
        for (unsigned i = 0; i < cc.n; i++) {
            cube_t c = *cc.c[i] & p;
            bool dup = false; /* cheap single-cube containment against what we have */
            for (unsigned k = 0; k < out->n && !dup; k++) dup = cube_contains(*out->c[k], c);
            if (!dup) cover_add(out, c);
        }
        cover_free(&cc);
    }
}
static bool eval_cover(const cover *f, unsigned x)
{
    cube_t m = 0; /* the minterm as a cube */
    for (int v = 0; v < EV; v++) m |= (cube_t)((x >> v) & 1 ? 2 : 1) << (2 * v);
    for (unsigned i = 0; i < f->n; i++) if (cube_contains(*f->c[i], m)) return true;
    return false;
}

void *wl_espresso(void *arg)
{
    if ((uintptr_t)arg != 0) return NULL;
    nm_rng r;
    nm_rng_seed_stream(&r, g_seed, 2002);
    size_t funcs = scaled(200);
    uint64_t total = 0;
    for (size_t fi = 0; fi < funcs; fi++) {
        cover F, R;
        cover_init(&F);
        unsigned ncubes = 24 + (unsigned)nm_rng_below(&r, 24);
        for (unsigned i = 0; i < ncubes; i++) {
            cube_t c = CUBE_FULL;
            unsigned lits = 4 + (unsigned)nm_rng_below(&r, 5);
            for (unsigned k = 0; k < lits; k++) {
                int v = (int)nm_rng_below(&r, EV);
                c = (c & ~((cube_t)3 << (2 * v))) | ((cube_t)(1 + nm_rng_below(&r, 2)) << (2 * v));
            }
            cover_add(&F, c);
        }
        cover orig;
        cover_init(&orig);
        for (unsigned i = 0; i < F.n; i++) cover_add(&orig, *F.c[i]);
        complement(&F, &R);
        /* EXPAND: raise each literal that keeps the cube off the OFF-set */
        for (unsigned i = 0; i < F.n; i++) {
            cube_t c = *F.c[i];
            for (int v = 0; v < EV; v++) {
                if (((c >> (2 * v)) & 3) == 3) continue;
                cube_t up = c | ((cube_t)3 << (2 * v));
                bool hits = false;
                for (unsigned k = 0; k < R.n && !hits; k++) hits = !cube_empty(up & *R.c[k]);
                if (!hits) c = up;
            }
            *F.c[i] = c;
        }
        /* drop cubes contained in others (keep the first of equal ones) */
        for (unsigned i = 0; i < F.n; i++) {
            for (unsigned k = 0; k < F.n; k++) {
                if (k == i || !cube_contains(*F.c[k], *F.c[i])) continue;
                if (*F.c[k] == *F.c[i] && k > i) continue;
                free(F.c[i]);
                F.c[i] = F.c[--F.n];
                i--;
                break;
            }
        }
        /* IRREDUNDANT: a cube covered by the rest goes (tautology of the cofactor) */
        for (unsigned i = 0; i < F.n;) {
            cover rest, cf;
            cover_init(&rest);
            for (unsigned k = 0; k < F.n; k++) if (k != i) cover_add(&rest, *F.c[k]);
            cofactor(&rest, *F.c[i], &cf);
            bool red = tautology(&cf);
            cover_free(&cf);
            cover_free(&rest);
            if (red) { free(F.c[i]); F.c[i] = F.c[--F.n]; }
            else i++;
        }
        /* checks: same function, disjoint from the OFF-set */
        for (unsigned x = 0; x < (1u << EV); x++) {
            bool a = eval_cover(&orig, x), b = eval_cover(&F, x), off = eval_cover(&R, x);
            if (a != b) { wl_fail("espresso: minimized cover differs from the function"); break; }
            if (a == off) { wl_fail("espresso: OFF-set is not the complement"); break; }
        }
        if (F.n > orig.n) wl_fail("espresso: result larger than the input");
        total += F.n * 1000u + R.n;
        cover_free(&F);
        cover_free(&R);
        cover_free(&orig);
    }
    g_sum += total;
    return NULL;
}

/* =========================================================================
 * barnes-like: Barnes-Hut gravity in 3-D. Each step builds an octree of heap-allocated
 * cells over the bodies, computes masses and centres, the forces with opening angle 0.5,
 * advances the bodies (leapfrog), and frees the tree: allocation is a small part of the
 * time, as in the original. Check: on sampled bodies the tree's force is within a few
 * percent of the direct sum.
 * ========================================================================= */
typedef struct { double pos[3], vel[3], acc[3], mass; } body;
typedef struct cell {
    struct cell *sub[8];
    body *leaf;    /* a single body, when this cell has no sub-cells */
    double mid[3], half; /* the cell's cube */
    double com[3], mass;
    unsigned count;
} cell;

static cell *cell_new(const double mid[3], double half)
{
    cell *c = wl_calloc(1, sizeof *c);
    memcpy(c->mid, mid, sizeof c->mid);
    c->half = half;
    return c;
}
static int octant(const cell *c, const double p[3])
{
    return (p[0] > c->mid[0]) | (p[1] > c->mid[1]) << 1 | (p[2] > c->mid[2]) << 2;
}
static void cell_insert(cell *c, body *b, int depth)
{
    if (!c->count && !c->leaf) { c->leaf = b; c->count = 1; return; }
    if (c->leaf && depth < 40) { /* split: push the resident body down */
        body *old = c->leaf;
        c->leaf = NULL;
        int o = octant(c, old->pos);
        double m[3];
        for (int k = 0; k < 3; k++) m[k] = c->mid[k] + ((o >> k) & 1 ? 0.5 : -0.5) * c->half;
        c->sub[o] = cell_new(m, c->half / 2);
        cell_insert(c->sub[o], old, depth + 1);
    } else if (c->leaf) { /* coincident bodies: keep them in a chain of cells */
        return;
    }
    int o = octant(c, b->pos);
    if (!c->sub[o]) {
        double m[3];
        for (int k = 0; k < 3; k++) m[k] = c->mid[k] + ((o >> k) & 1 ? 0.5 : -0.5) * c->half;
        c->sub[o] = cell_new(m, c->half / 2);
    }
    cell_insert(c->sub[o], b, depth + 1);
    c->count++;
}
static void cell_summarize(cell *c)
{
    if (c->leaf && !c->sub[0] && !c->sub[1] && !c->sub[2] && !c->sub[3] && !c->sub[4] && !c->sub[5] && !c->sub[6] && !c->sub[7]) {
        c->mass = c->leaf->mass;
        memcpy(c->com, c->leaf->pos, sizeof c->com);
        return;
    }
    c->mass = 0;
    double s[3] = {0, 0, 0};
    for (int i = 0; i < 8; i++) {
        if (!c->sub[i]) continue;
        cell_summarize(c->sub[i]);
        c->mass += c->sub[i]->mass;
        for (int k = 0; k < 3; k++) s[k] += c->sub[i]->mass * c->sub[i]->com[k];
    }
    for (int k = 0; k < 3; k++) c->com[k] = c->mass > 0 ? s[k] / c->mass : c->mid[k];
}
static void cell_free(cell *c)
{
    for (int i = 0; i < 8; i++) if (c->sub[i]) cell_free(c->sub[i]);
    free(c);
}
#define BH_EPS2 1e-4
static void add_force(const double p[3], const double q[3], double m, double acc[3])
{
    double d[3] = {q[0] - p[0], q[1] - p[1], q[2] - p[2]};
    double r2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2] + BH_EPS2;
    double inv = m / (r2 * sqrt(r2));
    for (int k = 0; k < 3; k++) acc[k] += d[k] * inv;
}
static void tree_force(const cell *c, const body *b, double acc[3])
{
    if (c->leaf && c->count == 1 && c->leaf != b && !c->sub[0] && !c->sub[1] && !c->sub[2] && !c->sub[3] &&
        !c->sub[4] && !c->sub[5] && !c->sub[6] && !c->sub[7]) {
        add_force(b->pos, c->leaf->pos, c->leaf->mass, acc);
        return;
    }
    double d[3] = {c->com[0] - b->pos[0], c->com[1] - b->pos[1], c->com[2] - b->pos[2]};
    double dist = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
    if (2 * c->half < 0.5 * dist) { add_force(b->pos, c->com, c->mass, acc); return; }
    for (int i = 0; i < 8; i++) if (c->sub[i]) tree_force(c->sub[i], b, acc);
}

void *wl_barnes(void *arg)
{
    if ((uintptr_t)arg != 0) return NULL;
    nm_rng r;
    nm_rng_seed_stream(&r, g_seed, 3003);
    size_t n = scaled(8000), steps = 4;
    body *bs = wl_calloc(n, sizeof *bs);
    for (size_t i = 0; i < n; i++) { /* a uniform ball, small random velocities */
        double p[3], r2;
        do {
            for (int k = 0; k < 3; k++) p[k] = 2 * nm_rng_double(&r) - 1;
            r2 = p[0] * p[0] + p[1] * p[1] + p[2] * p[2];
        } while (r2 > 1);
        for (int k = 0; k < 3; k++) { bs[i].pos[k] = p[k]; bs[i].vel[k] = 0.05 * (nm_rng_double(&r) - 0.5); }
        bs[i].mass = 1.0 / (double)n;
    }
    const double dt = 0.001;
    double err_sum = 0;
    unsigned err_n = 0;
    for (size_t s = 0; s < steps; s++) {
        double lo[3] = {1e30, 1e30, 1e30}, hi[3] = {-1e30, -1e30, -1e30};
        for (size_t i = 0; i < n; i++)
            for (int k = 0; k < 3; k++) { lo[k] = fmin(lo[k], bs[i].pos[k]); hi[k] = fmax(hi[k], bs[i].pos[k]); }
        double mid[3], half = 0;
        for (int k = 0; k < 3; k++) { mid[k] = (lo[k] + hi[k]) / 2; half = fmax(half, (hi[k] - lo[k]) / 2); }
        cell *root = cell_new(mid, half * 1.0001 + 1e-9);
        for (size_t i = 0; i < n; i++) cell_insert(root, &bs[i], 0);
        cell_summarize(root);
        for (size_t i = 0; i < n; i++) {
            memset(bs[i].acc, 0, sizeof bs[i].acc);
            tree_force(root, &bs[i], bs[i].acc);
        }
        if (s == steps - 1) { /* check sampled bodies against the direct sum */
            for (size_t i = 0; i < n; i += n / 32 + 1) {
                double a[3] = {0, 0, 0};
                for (size_t j = 0; j < n; j++) if (j != i) add_force(bs[i].pos, bs[j].pos, bs[j].mass, a);
                double e = 0, m = 0;
                for (int k = 0; k < 3; k++) { e += (a[k] - bs[i].acc[k]) * (a[k] - bs[i].acc[k]); m += a[k] * a[k]; }
                err_sum += sqrt(e / (m > 0 ? m : 1));
                err_n++;
            }
        }
        for (size_t i = 0; i < n; i++)
            for (int k = 0; k < 3; k++) { bs[i].vel[k] += dt * bs[i].acc[k]; bs[i].pos[k] += dt * bs[i].vel[k]; }
        cell_free(root);
    }
    if (!err_n || err_sum / err_n > 0.03) wl_fail("barnes: tree forces differ from the direct sum");
    double e = 0;
    for (size_t i = 0; i < n; i++) e += bs[i].mass * (bs[i].vel[0] * bs[i].vel[0] + bs[i].vel[1] * bs[i].vel[1] + bs[i].vel[2] * bs[i].vel[2]);
    g_sum += (uint64_t)(e * 1e9) + (uint64_t)(err_sum / err_n * 1e6);
    free(bs);
    return NULL;
}
