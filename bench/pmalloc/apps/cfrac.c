/* Cfrac (PMAlloc paper Sec. 8.6, the allocator benchmark after Barrett's cfrac):
 * factoring by the continued fraction method of Morrison and Brillhart, with
 * every multi-precision number its own short-lived allocation. Written for
 * nearmem; single-threaded, as in the paper.
 *
 * Numbers are immutable objects (8-byte header + 32-bit limbs, 12-48 B for the
 * sizes here); every arithmetic result is a new allocation and operands are
 * freed as soon as they are dead, as the original's precision library does.
 * Each number lives in a persistent destination: a slot of a per-thread slot
 * array in the heap (a free list of slot indices in DRAM), so every allocation
 * and free is crash-atomic through the allocator. The numbers are temporaries
 * (written, not persisted). The factor-base matrix rows and the relations'
 * exponent lists are allocations too (longer-lived).
 * Method: trial division by the primes below 2^12, then, for a composite
 * cofactor M: a Knuth-Schroeppel multiplier k, a factor base of the primes
 * p <= B = exp(0.5 sqrt(ln M ln ln M)) with (kM/p) != -1, the continued
 * fraction expansion of sqrt(kM) (A_{n-1}^2 = (-1)^n Q_n mod M), Q_n trial-divided
 * over the base with early abort and one large prime (< B^2) per relation,
 * Gaussian elimination over GF(2) for dependencies, gcd(X - Y, M); recursively
 * until every factor is a (probable, Miller-Rabin with 12 bases) prime.
 * cfg.n selects the number: 0 = the paper's 44-digit
 * 17545186520507317056371138836327483792789528 (= 2^3 * 107008798466033 *
 * 20495027946319472471219512627), 1 = a 30-digit semiprime (the suite's default:
 * the paper's takes minutes on this host), 2 = a 20-digit one (quick mode).
 * Operation = one factorisation (time is what the paper reports).
 * Check: the factors multiply to the input, each is a probable prime, and the
 * expected factorisation is found. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "pm_apps.h"

static const struct { const char *n; const char *f[5]; } cf_numbers[] = {
    {"17545186520507317056371138836327483792789528", {"2", "2", "2", "107008798466033", "20495027946319472471219512627"}},
    {"940151161363347645664083935303", {"965424977223827", "973821046216189", NULL, NULL, NULL}},
    {"30062486058456987071", {"8698203853", "3456171707", NULL, NULL, NULL}},
};
#define CF_NNUM (sizeof cf_numbers / sizeof cf_numbers[0])

#define CF_SLOTS (1u << 17)
#define CF_MAXL 48 /* limbs of a temporary */

typedef struct cf_root { pa_ptr slots; } cf_root;

typedef struct cf {
    pa_heap *a;
    pa_ptr *slots;
    uint32_t *freel;
    uint32_t nfree;
    int fail;
} cf;

typedef uint32_t bh; /* a number: its slot index; 0 is never used */
typedef struct bn { uint32_t n, pad; uint32_t d[]; } bn;

/* ---- allocation of numbers and other objects ---- */

static uint32_t cf_obj_new(cf *c, size_t bytes)
{
    if (!c->nfree) { c->fail = 1; return 0; }
    uint32_t s = c->freel[--c->nfree];
    if (pa_alloc(c->a, bytes, &c->slots[s])) { c->fail = 1; c->freel[c->nfree++] = s; return 0; }
    return s;
}

static void cf_obj_free(cf *c, uint32_t s)
{
    if (!s) return;
    if (pa_free(c->a, &c->slots[s])) c->fail = 1;
    c->freel[c->nfree++] = s;
}

static inline void *cf_obj(cf *c, uint32_t s) { return pa_get(c->a, c->slots[s]); }
static inline bn *B(cf *c, bh h) { return pa_get(c->a, c->slots[h]); }

/* A new number from n limbs (normalised). */
static bh bn_make(cf *c, const uint32_t *d, unsigned n)
{
    while (n && !d[n - 1]) n--;
    bh h = cf_obj_new(c, sizeof(bn) + 4u * (n ? n : 1));
    if (!h) return 0;
    bn *x = B(c, h);
    x->n = n;
    x->pad = 0;
    memcpy(x->d, d, 4u * n);
    return h;
}

#define bn_free(c, h) cf_obj_free((c), (h))

static bh bn_u64(cf *c, uint64_t v)
{
    uint32_t d[2] = {(uint32_t)v, (uint32_t)(v >> 32)};
    return bn_make(c, d, 2);
}

static unsigned bn_load(cf *c, bh h, uint32_t *d)
{
    const bn *x = B(c, h);
    memcpy(d, x->d, 4u * x->n);
    return x->n;
}

static int lcmp(const uint32_t *a, unsigned na, const uint32_t *b, unsigned nb)
{
    if (na != nb) return na < nb ? -1 : 1;
    for (unsigned i = na; i-- > 0;)
        if (a[i] != b[i]) return a[i] < b[i] ? -1 : 1;
    return 0;
}

static int bn_cmp(cf *c, bh a, bh b)
{
    const bn *x = B(c, a), *y = B(c, b);
    return lcmp(x->d, x->n, y->d, y->n);
}

static bool bn_is_u(cf *c, bh a, uint32_t v)
{
    const bn *x = B(c, a);
    return v ? x->n == 1 && x->d[0] == v : x->n == 0;
}

static unsigned bn_bits(cf *c, bh a)
{
    const bn *x = B(c, a);
    return x->n ? 32 * (x->n - 1) + 32 - (unsigned)__builtin_clz(x->d[x->n - 1]) : 0;
}

static bh bn_add(cf *c, bh a, bh b)
{
    uint32_t r[CF_MAXL + 1];
    const bn *x = B(c, a), *y = B(c, b);
    if (x->n < y->n) { const bn *t = x; x = y; y = t; }
    uint64_t carry = 0;
    for (unsigned i = 0; i < x->n; i++) {
        carry += (uint64_t)x->d[i] + (i < y->n ? y->d[i] : 0);
        r[i] = (uint32_t)carry;
        carry >>= 32;
    }
    r[x->n] = (uint32_t)carry;
    return bn_make(c, r, x->n + 1);
}

/* a - b, a >= b */
static bh bn_sub(cf *c, bh a, bh b)
{
    uint32_t r[CF_MAXL];
    const bn *x = B(c, a), *y = B(c, b);
    int64_t borrow = 0;
    for (unsigned i = 0; i < x->n; i++) {
        int64_t v = (int64_t)x->d[i] - (i < y->n ? y->d[i] : 0) - borrow;
        borrow = v < 0;
        r[i] = (uint32_t)v;
    }
    return bn_make(c, r, x->n);
}

static bh bn_mul(cf *c, bh a, bh b)
{
    uint32_t r[2 * CF_MAXL];
    const bn *x = B(c, a), *y = B(c, b);
    memset(r, 0, 4u * (x->n + y->n));
    for (unsigned i = 0; i < x->n; i++) {
        uint64_t carry = 0;
        for (unsigned j = 0; j < y->n; j++) {
            carry += (uint64_t)x->d[i] * y->d[j] + r[i + j];
            r[i + j] = (uint32_t)carry;
            carry >>= 32;
        }
        r[i + y->n] = (uint32_t)carry;
    }
    return bn_make(c, r, x->n + y->n);
}

/* Knuth's algorithm D on limb arrays: q = u / v, r = u % v (v nonzero). */
static void ldivmod(const uint32_t *u0, unsigned m, const uint32_t *v0, unsigned n, uint32_t *q, unsigned *nq, uint32_t *r, unsigned *nr)
{
    if (lcmp(u0, m, v0, n) < 0) {
        *nq = 0;
        memcpy(r, u0, 4u * m);
        *nr = m;
        return;
    }
    if (n == 1) {
        uint64_t rem = 0;
        for (unsigned i = m; i-- > 0;) {
            uint64_t cur = rem << 32 | u0[i];
            q[i] = (uint32_t)(cur / v0[0]);
            rem = cur % v0[0];
        }
        *nq = m;
        r[0] = (uint32_t)rem;
        *nr = 1;
        return;
    }
    uint32_t un[2 * CF_MAXL + 1], vn[CF_MAXL];
    unsigned s = (unsigned)__builtin_clz(v0[n - 1]);
    for (unsigned i = n - 1; i > 0; i--) vn[i] = (v0[i] << s) | (s ? (uint32_t)((uint64_t)v0[i - 1] >> (32 - s)) : 0);
    vn[0] = v0[0] << s;
    un[m] = s ? (uint32_t)((uint64_t)u0[m - 1] >> (32 - s)) : 0;
    for (unsigned i = m - 1; i > 0; i--) un[i] = (u0[i] << s) | (s ? (uint32_t)((uint64_t)u0[i - 1] >> (32 - s)) : 0);
    un[0] = u0[0] << s;
    for (unsigned j = m - n + 1; j-- > 0;) {
        uint64_t num = (uint64_t)un[j + n] << 32 | un[j + n - 1];
        uint64_t qhat = num / vn[n - 1], rhat = num % vn[n - 1];
        while (qhat >> 32 || qhat * vn[n - 2] > (rhat << 32 | un[j + n - 2])) {
            qhat--;
            rhat += vn[n - 1];
            if (rhat >> 32) break;
        }
        int64_t borrow = 0;
        uint64_t carry = 0;
        for (unsigned i = 0; i < n; i++) {
            uint64_t p = qhat * vn[i] + carry;
            carry = p >> 32;
            int64_t t = (int64_t)un[i + j] - (int64_t)(uint32_t)p - borrow;
            un[i + j] = (uint32_t)t;
            borrow = t < 0;
        }
        int64_t t = (int64_t)un[j + n] - (int64_t)carry - borrow;
        un[j + n] = (uint32_t)t;
        if (t < 0) { /* add back */
            qhat--;
            uint64_t c2 = 0;
            for (unsigned i = 0; i < n; i++) {
                c2 += (uint64_t)un[i + j] + vn[i];
                un[i + j] = (uint32_t)c2;
                c2 >>= 32;
            }
            un[j + n] += (uint32_t)c2;
        }
        q[j] = (uint32_t)qhat;
    }
    *nq = m - n + 1;
    for (unsigned i = 0; i < n; i++) r[i] = (un[i] >> s) | (s ? (uint32_t)((uint64_t)un[i + 1] << (32 - s)) : 0);
    *nr = n;
}

/* q and/or r (either may be NULL) of a / b. */
static void bn_divmod(cf *c, bh a, bh b, bh *q, bh *r)
{
    uint32_t u[2 * CF_MAXL], v[CF_MAXL], qq[2 * CF_MAXL], rr[CF_MAXL + 1];
    unsigned m = bn_load(c, a, u), n = bn_load(c, b, v), nq, nr;
    if (!n) { c->fail = 1; if (q) *q = 0; if (r) *r = 0; return; }
    if (!m) { nq = nr = 0; }
    else ldivmod(u, m, v, n, qq, &nq, rr, &nr);
    if (q) *q = bn_make(c, qq, nq);
    if (r) *r = bn_make(c, rr, nr);
}

static bh bn_mod(cf *c, bh a, bh m)
{
    bh r;
    bn_divmod(c, a, m, NULL, &r);
    return r;
}

static uint32_t bn_mod32(cf *c, bh a, uint32_t p)
{
    const bn *x = B(c, a);
    uint64_t rem = 0;
    for (unsigned i = x->n; i-- > 0;) rem = (rem << 32 | x->d[i]) % p;
    return (uint32_t)rem;
}

static bh bn_div32(cf *c, bh a, uint32_t p)
{
    uint32_t q[CF_MAXL];
    const bn *x = B(c, a);
    uint64_t rem = 0;
    unsigned n = x->n;
    for (unsigned i = n; i-- > 0;) {
        uint64_t cur = rem << 32 | x->d[i];
        q[i] = (uint32_t)(cur / p);
        rem = cur % p;
    }
    return bn_make(c, q, n);
}

static bh bn_shr1(cf *c, bh a)
{
    uint32_t r[CF_MAXL];
    const bn *x = B(c, a);
    for (unsigned i = 0; i < x->n; i++) r[i] = x->d[i] >> 1 | (i + 1 < x->n ? x->d[i + 1] << 31 : 0);
    return bn_make(c, r, x->n);
}

static bool bn_to_u64(cf *c, bh a, uint64_t *v)
{
    const bn *x = B(c, a);
    if (x->n > 2) return false;
    *v = x->n == 0 ? 0 : x->n == 1 ? x->d[0] : (uint64_t)x->d[1] << 32 | x->d[0];
    return true;
}

/* Replace *h by f(*h) and free the old value. */
#define SET(c, h, expr) do { bh _n = (expr); bn_free((c), (h)); (h) = _n; } while (0)

static bh bn_mulmod(cf *c, bh a, bh b, bh m)
{
    bh p = bn_mul(c, a, b), r = bn_mod(c, p, m);
    bn_free(c, p);
    return r;
}

/* floor(sqrt(a)) by Newton's iteration. */
static bh bn_isqrt(cf *c, bh a)
{
    if (bn_is_u(c, a, 0)) return bn_u64(c, 0);
    unsigned bits = bn_bits(c, a);
    uint32_t d[CF_MAXL] = {0};
    unsigned e = (bits + 2) / 2;
    d[e / 32] = 1u << (e % 32);
    bh x = bn_make(c, d, e / 32 + 1); /* >= sqrt(a) */
    for (;;) {
        bh q = 0;
        bn_divmod(c, a, x, &q, NULL);
        bh s = bn_add(c, x, q), y = bn_shr1(c, s);
        bn_free(c, q);
        bn_free(c, s);
        if (c->fail || bn_cmp(c, y, x) >= 0) { bn_free(c, y); return x; }
        bn_free(c, x);
        x = y;
    }
}

static bh bn_gcd(cf *c, bh a, bh b)
{
    bh x = bn_make(c, B(c, a)->d, B(c, a)->n), y = bn_make(c, B(c, b)->d, B(c, b)->n);
    while (!c->fail && !bn_is_u(c, y, 0)) {
        bh r = bn_mod(c, x, y);
        bn_free(c, x);
        x = y;
        y = r;
    }
    bn_free(c, y);
    return x;
}

static bh bn_powmod(cf *c, bh b, bh e, bh m)
{
    bh r = bn_u64(c, 1), base = bn_mod(c, b, m);
    unsigned bits = bn_bits(c, e);
    const bn *ex = B(c, e);
    for (unsigned i = 0; i < bits && !c->fail; i++) {
        ex = B(c, e);
        if (ex->d[i / 32] >> (i % 32) & 1) SET(c, r, bn_mulmod(c, r, base, m));
        if (i + 1 < bits) SET(c, base, bn_mulmod(c, base, base, m));
    }
    bn_free(c, base);
    return r;
}

static bool bn_probable_prime(cf *c, bh n)
{
    static const uint32_t bases[] = {2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37};
    uint64_t small;
    if (bn_to_u64(c, n, &small) && small < 64) {
        for (unsigned i = 0; i < 12; i++)
            if (small == bases[i]) return true;
        return false;
    }
    if (bn_mod32(c, n, 2) == 0) return false;
    bh one = bn_u64(c, 1), nm1 = bn_sub(c, n, one), d = bn_make(c, B(c, nm1)->d, B(c, nm1)->n);
    unsigned s = 0;
    while (bn_mod32(c, d, 2) == 0 && !c->fail) { SET(c, d, bn_shr1(c, d)); s++; }
    bool prime = true;
    for (unsigned i = 0; i < 12 && prime && !c->fail; i++) {
        bh a = bn_u64(c, bases[i]), x = bn_powmod(c, a, d, n);
        bn_free(c, a);
        if (bn_is_u(c, x, 1) || bn_cmp(c, x, nm1) == 0) { bn_free(c, x); continue; }
        bool witness = true;
        for (unsigned k = 1; k < s && witness; k++) {
            SET(c, x, bn_mulmod(c, x, x, n));
            if (bn_cmp(c, x, nm1) == 0) witness = false;
        }
        bn_free(c, x);
        if (witness) prime = false;
    }
    bn_free(c, one);
    bn_free(c, nm1);
    bn_free(c, d);
    return prime;
}

static bh bn_from_dec(cf *c, const char *s)
{
    bh r = bn_u64(c, 0), ten = bn_u64(c, 10);
    for (; *s; s++) {
        bh dgt = bn_u64(c, (uint64_t)(*s - '0'));
        SET(c, r, bn_mul(c, r, ten));
        SET(c, r, bn_add(c, r, dgt));
        bn_free(c, dgt);
    }
    bn_free(c, ten);
    return r;
}

/* ---- CFRAC ---- */

static uint64_t mulmod64(uint64_t a, uint64_t b, uint64_t m) { return (uint64_t)((unsigned __int128)a * b % m); }
static uint64_t powmod64(uint64_t b, uint64_t e, uint64_t m)
{
    uint64_t r = 1 % m;
    b %= m;
    for (; e; e >>= 1, b = mulmod64(b, b, m))
        if (e & 1) r = mulmod64(r, b, m);
    return r;
}

typedef struct cf_rel {
    uint32_t x;     /* A_{n-1} mod M (a number) */
    uint32_t exps;  /* object: uint32 count, then (index << 8 | exponent) pairs; index 0 = -1 */
    uint64_t large; /* a combined pair's common large prime (squared in the relation), else 1 */
} cf_rel;

typedef struct cf_partial { uint64_t L; cf_rel r; } cf_partial;

static uint32_t exps_new(cf *c, const uint32_t *e, uint32_t n)
{
    uint32_t h = cf_obj_new(c, 4u * (n + 1));
    if (!h) return 0;
    uint32_t *o = cf_obj(c, h);
    o[0] = n;
    memcpy(o + 1, e, 4u * n);
    return h;
}

/* Sum of two exponent lists (both sorted by index). */
static uint32_t exps_merge(cf *c, uint32_t a, uint32_t b)
{
    const uint32_t *x = cf_obj(c, a), *y = cf_obj(c, b);
    uint32_t out[512], n = 0, i = 1, j = 1;
    while ((i <= x[0] || j <= y[0]) && n < 512) {
        uint32_t xi = i <= x[0] ? x[i] >> 8 : UINT32_MAX, yj = j <= y[0] ? y[j] >> 8 : UINT32_MAX;
        if (xi == yj) { out[n++] = xi << 8 | ((x[i] & 255) + (y[j] & 255)); i++; j++; }
        else if (xi < yj) out[n++] = x[i++];
        else out[n++] = y[j++];
    }
    return exps_new(c, out, n);
}

/* One factor of M (composite, no factor below the base bound); 0 on failure. */
static bh cfrac_split(cf *c, bh M)
{
    double lnM = (double)bn_bits(c, M) * log(2.0);
    double bound = exp(0.5 * sqrt(lnM * log(lnM)));
    if (bound < 300) bound = 300;
    /* Knuth-Schroeppel multiplier */
    static const uint32_t ks[] = {1, 2, 3, 5, 6, 7, 10, 11, 13, 14, 15, 17, 19, 21, 22, 23, 26, 29, 30, 31, 33, 34, 35, 37, 38, 39, 41, 42, 43};
    uint32_t primes_small[168], np = 0;
    for (uint32_t p = 2; np < 168; p++) {
        bool pr = true;
        for (uint32_t d = 2; d * d <= p && pr; d++) pr = p % d != 0;
        if (pr) primes_small[np++] = p;
    }
    uint32_t k = 1;
    double best = -1e9;
    for (unsigned i = 0; i < sizeof ks / sizeof ks[0]; i++) {
        double f = -0.5 * log((double)ks[i]);
        uint32_t m8 = (uint32_t)((bn_mod32(c, M, 8) * (uint64_t)ks[i]) % 8);
        f += m8 == 1 ? 2 * log(2.0) : m8 == 5 ? log(2.0) : (m8 == 3 || m8 == 7) ? 0.5 * log(2.0) : 0;
        for (unsigned j = 1; j < np; j++) {
            uint32_t p = primes_small[j];
            if (ks[i] % p == 0) { f += log((double)p) / p; continue; }
            uint64_t km = (uint64_t)bn_mod32(c, M, p) * ks[i] % p;
            if (km && powmod64(km, (p - 1) / 2, p) == 1) f += 2 * log((double)p) / (p - 1);
        }
        if (f > best) { best = f; k = ks[i]; }
    }
    bh kb = bn_u64(c, k), kM = bn_mul(c, M, kb);
    bn_free(c, kb);
    /* factor base: index 0 is -1 */
    uint32_t cap = (uint32_t)bound + 16, nb = 1;
    uint32_t *base = malloc(sizeof(uint32_t) * (cap / 2 + 16));
    char *sieve = calloc(cap + 1, 1);
    if (!base || !sieve) { free(base); free(sieve); bn_free(c, kM); c->fail = 1; return 0; }
    base[0] = 0;
    for (uint32_t p = 2; p <= (uint32_t)bound; p++) {
        if (sieve[p]) continue;
        for (uint64_t q = (uint64_t)p * p; q <= cap; q += p) sieve[q] = 1;
        uint64_t r = bn_mod32(c, kM, p);
        if (p == 2 || r == 0 || powmod64(r, (p - 1) / 2, p) == 1) base[nb++] = p;
    }
    free(sieve);
    uint64_t pmax = base[nb - 1], lbound = pmax * pmax;
    uint32_t need = nb + 12, nrel = 0;
    cf_rel *rels = calloc(need, sizeof *rels);
    size_t pcap = 4096, npart = 0;
    cf_partial *parts = calloc(pcap, sizeof *parts);
    uint32_t *ebuf = malloc(sizeof(uint32_t) * (nb + 1));
    if (!rels || !parts || !ebuf) { free(rels); free(parts); free(ebuf); free(base); bn_free(c, kM); c->fail = 1; return 0; }
    /* continued fraction of sqrt(kM) */
    bh g = bn_isqrt(c, kM);
    bh P = bn_make(c, B(c, g)->d, B(c, g)->n);
    bh g2 = bn_mul(c, g, g);
    bh Qprev = bn_u64(c, 1), Q = bn_sub(c, kM, g2);
    bn_free(c, g2);
    bh Aprev2 = bn_u64(c, 1), Aprev = bn_mod(c, g, M);
    uint64_t steps = 0;
    unsigned abort_at = nb / 6 > 2 ? nb / 6 : nb;
    for (uint64_t n = 1; nrel < need && !c->fail && steps < 400000000ull; n++, steps++) {
        if (bn_is_u(c, Q, 0)) break; /* kM is a square */
        /* relation A_{n-1}^2 = (-1)^n Q_n (mod M): factor Q over the base */
        bh rem = bn_make(c, B(c, Q)->d, B(c, Q)->n);
        unsigned ne = 0, qbits = bn_bits(c, Q);
        if (n & 1) ebuf[ne++] = 0u << 8 | 1u;
        bool aborted = false;
        for (uint32_t i = 1; i < nb && !bn_is_u(c, rem, 1); i++) {
            if (i == abort_at && bn_bits(c, rem) > qbits * 3 / 4) { aborted = true; break; }
            uint32_t p = base[i], e = 0;
            while (bn_mod32(c, rem, p) == 0) {
                SET(c, rem, bn_div32(c, rem, p));
                e++;
            }
            if (e) ebuf[ne++] = i << 8 | e;
        }
        uint64_t L = 0;
        if (!aborted && (bn_is_u(c, rem, 1) || (bn_to_u64(c, rem, &L) && L < lbound))) {
            bh x = bn_make(c, B(c, Aprev)->d, B(c, Aprev)->n);
            uint32_t ex = exps_new(c, ebuf, ne);
            if (bn_is_u(c, rem, 1)) {
                rels[nrel++] = (cf_rel){x, ex, 1};
            } else {
                size_t j = 0;
                while (j < npart && parts[j].L != L) j++;
                if (j < npart) { /* a second relation with this large prime: combine */
                    cf_rel *o = &parts[j].r;
                    bh xx = bn_mulmod(c, x, o->x, M);
                    uint32_t ee = exps_merge(c, ex, o->exps);
                    rels[nrel++] = (cf_rel){xx, ee, L};
                    bn_free(c, x);
                    cf_obj_free(c, ex);
                    bn_free(c, o->x);
                    cf_obj_free(c, o->exps);
                    parts[j] = parts[--npart];
                } else {
                    if (npart == pcap) {
                        cf_partial *v = realloc(parts, 2 * pcap * sizeof *v);
                        if (!v) { c->fail = 1; break; }
                        parts = v;
                        pcap *= 2;
                    }
                    parts[npart++] = (cf_partial){L, {x, ex, 1}};
                }
            }
        }
        bn_free(c, rem);
        /* next term: a = (g + P) / Q, P' = a Q - P, Q' = (kM - P'^2) / Q, A_n = a A_{n-1} + A_{n-2} mod M */
        bh s = bn_add(c, g, P), an = 0;
        bn_divmod(c, s, Q, &an, NULL);
        bn_free(c, s);
        bh aq = bn_mul(c, an, Q);
        SET(c, P, bn_sub(c, aq, P));
        bn_free(c, aq);
        bh p2 = bn_mul(c, P, P), t = bn_sub(c, kM, p2), Qn = 0;
        bn_divmod(c, t, Q, &Qn, NULL);
        bn_free(c, p2);
        bn_free(c, t);
        bn_free(c, Qprev);
        Qprev = Q;
        Q = Qn;
        bh aA = bn_mul(c, an, Aprev), sum = bn_add(c, aA, Aprev2), An = bn_mod(c, sum, M);
        bn_free(c, aA);
        bn_free(c, sum);
        bn_free(c, an);
        bn_free(c, Aprev2);
        Aprev2 = Aprev;
        Aprev = An;
    }
    bn_free(c, g);
    bn_free(c, P);
    bn_free(c, Qprev);
    bn_free(c, Q);
    bn_free(c, Aprev2);
    bn_free(c, Aprev);
    for (size_t j = 0; j < npart; j++) {
        bn_free(c, parts[j].r.x);
        cf_obj_free(c, parts[j].r.exps);
    }
    free(parts);
    free(ebuf);
    bh factor = 0;
    if (!c->fail && nrel == need) {
        /* Gaussian elimination over GF(2): rows = relations, [parity | history] bitsets (allocations) */
        uint32_t wl = (nb + 31) / 32, wh = (nrel + 31) / 32, wr = wl + wh;
        uint32_t *rows = calloc(nrel, sizeof *rows);
        bool *used = calloc(nrel, 1);
        if (!rows || !used) c->fail = 1;
        for (uint32_t i = 0; i < nrel && !c->fail; i++) {
            rows[i] = cf_obj_new(c, 4u * wr);
            if (!rows[i]) break;
            uint32_t *w = cf_obj(c, rows[i]);
            memset(w, 0, 4u * wr);
            const uint32_t *e = cf_obj(c, rels[i].exps);
            for (uint32_t j = 1; j <= e[0]; j++)
                if ((e[j] & 255) & 1) w[(e[j] >> 8) / 32] ^= 1u << ((e[j] >> 8) % 32);
            w[wl + i / 32] |= 1u << (i % 32);
        }
        for (uint32_t col = 0; col < nb && !c->fail; col++) {
            uint32_t piv = nrel;
            for (uint32_t i = 0; i < nrel && piv == nrel; i++)
                if (!used[i] && (((uint32_t *)cf_obj(c, rows[i]))[col / 32] >> (col % 32) & 1)) piv = i;
            if (piv == nrel) continue;
            used[piv] = true;
            const uint32_t *pw = cf_obj(c, rows[piv]);
            for (uint32_t i = 0; i < nrel; i++) {
                if (i == piv) continue;
                uint32_t *w = cf_obj(c, rows[i]);
                if (w[col / 32] >> (col % 32) & 1)
                    for (uint32_t q = 0; q < wr; q++) w[q] ^= pw[q];
            }
        }
        /* every unused row is now zero on the left: a dependency */
        uint32_t *tot = calloc(nb, sizeof *tot);
        if (!tot) c->fail = 1;
        for (uint32_t i = 0; i < nrel && !factor && !c->fail; i++) {
            if (used[i]) continue;
            const uint32_t *w = cf_obj(c, rows[i]);
            memset(tot, 0, nb * sizeof *tot);
            bh X = bn_u64(c, 1), Y = bn_u64(c, 1);
            for (uint32_t r = 0; r < nrel; r++) {
                w = cf_obj(c, rows[i]);
                if (!(w[wl + r / 32] >> (r % 32) & 1)) continue;
                SET(c, X, bn_mulmod(c, X, rels[r].x, M));
                const uint32_t *e = cf_obj(c, rels[r].exps);
                for (uint32_t j = 1; j <= e[0]; j++) tot[e[j] >> 8] += e[j] & 255;
                if (rels[r].large > 1) {
                    bh Lb = bn_u64(c, rels[r].large);
                    SET(c, Y, bn_mulmod(c, Y, Lb, M));
                    bn_free(c, Lb);
                }
            }
            bool even = true;
            for (uint32_t j = 0; j < nb; j++) even = even && !(tot[j] & 1);
            if (even) {
                for (uint32_t j = 1; j < nb; j++)
                    for (uint32_t e = 0; e < tot[j] / 2; e++) {
                        bh pb = bn_u64(c, base[j]);
                        SET(c, Y, bn_mulmod(c, Y, pb, M));
                        bn_free(c, pb);
                    }
                bh diff = bn_cmp(c, X, Y) >= 0 ? bn_sub(c, X, Y) : bn_sub(c, Y, X);
                bh d = bn_gcd(c, diff, M);
                bn_free(c, diff);
                if (!bn_is_u(c, d, 1) && bn_cmp(c, d, M) != 0) factor = d;
                else bn_free(c, d);
            }
            bn_free(c, X);
            bn_free(c, Y);
        }
        free(tot);
        for (uint32_t i = 0; rows && i < nrel; i++) cf_obj_free(c, rows[i]);
        free(rows);
        free(used);
    }
    for (uint32_t i = 0; i < nrel; i++) {
        bn_free(c, rels[i].x);
        cf_obj_free(c, rels[i].exps);
    }
    free(rels);
    free(base);
    bn_free(c, kM);
    return factor;
}

/* Append the prime factors of n (consumed) to out[] as numbers. */
static int cf_factor(cf *c, bh n, bh *out, unsigned *nout, unsigned cap, unsigned depth)
{
    if (c->fail || depth > 16) return -1;
    for (uint32_t p = 2; p < 4096 && !bn_is_u(c, n, 1); p += p == 2 ? 1 : 2) {
        while (bn_mod32(c, n, p) == 0 && !bn_is_u(c, n, p)) {
            if (*nout == cap) return -1;
            out[(*nout)++] = bn_u64(c, p);
            SET(c, n, bn_div32(c, n, p));
        }
    }
    if (bn_is_u(c, n, 1)) { bn_free(c, n); return 0; }
    if (bn_probable_prime(c, n)) {
        if (*nout == cap) return -1;
        out[(*nout)++] = n;
        return 0;
    }
    bh d = cfrac_split(c, n);
    if (!d) return -1;
    bh q = 0;
    bn_divmod(c, n, d, &q, NULL);
    bn_free(c, n);
    if (cf_factor(c, d, out, nout, cap, depth + 1)) return -1;
    return cf_factor(c, q, out, nout, cap, depth + 1);
}

typedef struct cf_state { unsigned nfactors; bool ok; } cf_state;

static size_t cf_pool(const pa_cfg *c) { (void)c; return (size_t)96 << 20; }

static int cf_init(pa_ctx *x)
{
    if (x->c->n >= CF_NNUM) return pa_fail(x, "cfrac: number %llu unknown (0-%zu)", (unsigned long long)x->c->n, CF_NNUM - 1);
    cf_root *root = x->a->root;
    if (pa_alloc(x->a, CF_SLOTS * sizeof(pa_ptr), &root->slots)) return pa_fail(x, "slot array allocation failed");
    void *s = pa_get(x->a, root->slots);
    memset(s, 0, CF_SLOTS * sizeof(pa_ptr));
    pa_persist(x->a, s, CF_SLOTS * sizeof(pa_ptr));
    x->st = calloc(1, sizeof(cf_state));
    return x->st ? 0 : pa_fail(x, "out of memory");
}

static int cf_work(pa_ctx *x, unsigned tid, uint64_t *ops)
{
    cf_root *root = x->a->root;
    cf_state *st = x->st;
    cf c = {x->a, pa_get(x->a, root->slots), malloc(CF_SLOTS * sizeof(uint32_t)), 0, 0};
    if (!c.freel) return pa_fail(x, "out of memory");
    for (uint32_t i = CF_SLOTS - 1; i >= 1; i--) c.freel[c.nfree++] = i;
    (void)tid;
    pa_timed_begin(x);
    int rc = 0;
    for (uint64_t it = 0; it < (x->c->iters ? x->c->iters : 1) && !rc; it++) {
        bh N = bn_from_dec(&c, cf_numbers[x->c->n].n), f[32];
        unsigned nf = 0;
        bh Ncopy = bn_make(&c, B(&c, N)->d, B(&c, N)->n);
        if (cf_factor(&c, N, f, &nf, 32, 0) || c.fail) { rc = pa_fail(x, "factorisation failed"); break; }
        /* check: product, primality, the known factors */
        bh prod = bn_u64(&c, 1);
        bool ok = true;
        for (unsigned i = 0; i < nf; i++) {
            SET(&c, prod, bn_mul(&c, prod, f[i]));
            ok = ok && bn_probable_prime(&c, f[i]);
        }
        ok = ok && bn_cmp(&c, prod, Ncopy) == 0;
        unsigned matched = 0, nexp = 0;
        for (unsigned j = 0; j < 5 && cf_numbers[x->c->n].f[j]; j++) {
            nexp++;
            bh e = bn_from_dec(&c, cf_numbers[x->c->n].f[j]);
            for (unsigned i = 0; i < nf; i++)
                if (bn_cmp(&c, e, f[i]) == 0) { matched++; break; }
            bn_free(&c, e);
        }
        ok = ok && matched == nexp && nf == nexp;
        bn_free(&c, prod);
        bn_free(&c, Ncopy);
        for (unsigned i = 0; i < nf; i++) bn_free(&c, f[i]);
        st->nfactors = nf;
        if (!ok) rc = pa_fail(x, "the factors found do not multiply to the number or are not its prime factors");
        if (c.fail) rc = pa_fail(x, "allocation or free failed");
    }
    if (!rc && c.nfree != CF_SLOTS - 1) rc = pa_fail(x, "%u numbers leaked", CF_SLOTS - 1 - c.nfree);
    st->ok = !rc;
    free(c.freel);
    *ops = x->c->iters ? x->c->iters : 1;
    return rc;
}

static int cf_verify(pa_ctx *x)
{
    cf_state *st = x->st;
    return st->ok ? 0 : pa_fail(x, "no verified factorisation");
}

static void cf_fini(pa_ctx *x) { free(x->st); }

const pa_app pa_app_cfrac = {"cfrac", "factorisation", false, cf_pool, cf_init, cf_work, cf_verify, cf_fini};
