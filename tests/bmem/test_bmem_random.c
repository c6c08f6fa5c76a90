/* Randomized tests of both bmem structures against a brute-force reference:
 * a plain 2-D occupancy array per bank.
 *
 * test_random_sequences (thread cache off on both devices): every returned
 * rectangle must be free, inside its bank and exactly the first fit of the
 * placement contract (column-major, banks from the caller's home bank);
 * NM_ENOMEM only when no bank has a free rectangle of that shape; frees
 * restore exactly; the fast and the paper structure return identical results
 * for the same sequence.
 *
 * test_random_cached (fast structure, thread cache on, random sizes): the
 * model learns which freed rectangles sit in the cache from snapshots, and
 * every allocation must be the most recently cached rectangle of that shape,
 * else the first fit with cached cells counted as taken, else (after the
 * cache is flushed) the first fit over live allocations only; NM_ENOMEM only
 * when no live-only fit exists, and then nothing is left cached; statistics
 * report live and cached cells apart; flushing restores the device exactly. */
#include <stdio.h>
#include <string.h>

#include "nearmem/bmem.h"
#include "nearmem/common.h"
#include "nm_test.h"

typedef struct ref {
    unsigned R, S, B;
    uint32_t *own; /* [B][R][S]: 0 free, else allocation id */
} ref;

static uint32_t *cell(ref *m, unsigned b, unsigned r, unsigned s) { return &m->own[((size_t)b * m->R + r) * m->S + s]; }

static bool ref_free_rect(ref *m, unsigned b, unsigned r, unsigned s, unsigned p, unsigned q)
{
    for (unsigned i = r; i < r + q; i++)
        for (unsigned j = s; j < s + p; j++)
            if (*cell(m, b, i, j)) return false;
    return true;
}

/* Column-major first fit in bank b, by brute force. */
static bool ref_first_fit(ref *m, unsigned b, unsigned p, unsigned q, unsigned *r, unsigned *s)
{
    if (p > m->S || q > m->R) return false;
    for (unsigned j = 0; j + p <= m->S; j++)
        for (unsigned i = 0; i + q <= m->R; i++)
            if (ref_free_rect(m, b, i, j, p, q)) {
                *r = i;
                *s = j;
                return true;
            }
    return false;
}

static void ref_set(ref *m, const bmem_geom *g, uint32_t id)
{
    for (unsigned i = g->row; i < g->row + g->nrows; i++)
        for (unsigned j = g->sub; j < g->sub + g->nsubs; j++) *cell(m, g->bank, i, j) = id;
}

static uint64_t ref_used(ref *m)
{
    uint64_t n = 0;
    for (size_t i = 0; i < (size_t)m->B * m->R * m->S; i++) n += m->own[i] != 0;
    return n;
}

/* Largest free rectangle of a bank by brute force (small banks only). */
static uint64_t ref_largest_area(ref *m, unsigned b)
{
    uint64_t best = 0;
    for (unsigned r = 0; r < m->R; r++)
        for (unsigned s = 0; s < m->S; s++)
            for (unsigned q = 1; r + q <= m->R; q++) {
                if (*cell(m, b, r + q - 1, s)) break;
                for (unsigned p = 1; s + p <= m->S; p++) {
                    if (!ref_free_rect(m, b, r, s, p, q)) break;
                    if ((uint64_t)p * q > best) best = (uint64_t)p * q;
                }
            }
    return best;
}

typedef struct live {
    bmem_ptr h[2]; /* fast, paper */
    bmem_geom g;
    uint32_t id;
} live;

#define MAX_LIVE 512

typedef struct world {
    bmem_config cfg;
    bmem_dev *d[2];
    ref m;
    live lv[MAX_LIVE];
    unsigned n;
    uint32_t next_id;
    int home; /* learnt from the first allocation (-1 unknown) */
    nm_rng rng;
} world;

static void world_init(world *w, bmem_config cfg, uint64_t seed)
{
    memset(w, 0, sizeof *w);
    w->cfg = cfg;
    for (int a = 0; a < 2; a++) {
        cfg.algo = a ? BMEM_ALGO_PAPER : BMEM_ALGO_FAST;
        cfg.cache = BMEM_CACHE_OFF; /* exact first fit, identical results */
        assert_int_equal(bmem_dev_create(&cfg, &w->d[a]), NM_OK);
    }
    w->m.R = cfg.rows;
    w->m.S = cfg.subarrays;
    w->m.B = cfg.banks;
    w->m.own = calloc((size_t)cfg.banks * cfg.rows * cfg.subarrays, sizeof(uint32_t));
    assert_non_null(w->m.own);
    w->home = -1;
    w->next_id = 1;
    nm_rng_seed(&w->rng, seed);
}

static void world_fini(world *w)
{
    bmem_dev_destroy(w->d[0]);
    bmem_dev_destroy(w->d[1]);
    free(w->m.own);
}

/* Expected placement for a p x q request (no hint): first bank from home
 * (wrapping) with a fit. */
static bool expect_place(world *w, unsigned p, unsigned q, unsigned *bank, unsigned *r, unsigned *s)
{
    for (unsigned i = 0; i < w->m.B; i++) {
        unsigned b = ((unsigned)w->home + i) % w->m.B;
        if (ref_first_fit(&w->m, b, p, q, r, s)) {
            *bank = b;
            return true;
        }
    }
    return false;
}

enum { OP_H, OP_V, OP_RAW, OP_NEAR };

/* outcome counters: the sequences must exercise success, NM_ENOMEM and NM_ERANGE */
static unsigned long g_ok, g_nomem, g_range, g_near_colocated;

static void do_alloc(world *w, int kind)
{
    const bmem_config *c = &w->cfg;
    size_t bank_bytes = (size_t)c->rows * c->subarrays * c->columns / 8;
    size_t size = 0;
    unsigned p = 0, q = 0;
    bmem_dim dim = BMEM_RAW;
    bmem_ptr h[2] = {0, 0};
    nm_err e[2];
    int near_idx = -1;
    bool near_strict = false;
    if (kind == OP_H || kind == OP_V) {
        dim = kind == OP_H ? BMEM_HORIZ : BMEM_VERT;
        /* mostly small, sometimes up to a bank, rarely 0 or too large */
        uint64_t roll = nm_rng_below(&w->rng, 100);
        size = roll < 2 ? 0 : roll < 4 ? bank_bytes + 1 + nm_rng_below(&w->rng, 100)
               : roll < 80 ? 1 + nm_rng_below(&w->rng, NM_MAX(1, bank_bytes / 64))
                           : 1 + nm_rng_below(&w->rng, bank_bytes);
        for (int a = 0; a < 2; a++) e[a] = bmem_dev_malloc(w->d[a], size, dim, &h[a]);
    } else {
        p = 1 + (unsigned)nm_rng_below(&w->rng, nm_rng_below(&w->rng, 4) ? NM_MIN(c->subarrays, 4) : c->subarrays + 1);
        q = 1 + (unsigned)nm_rng_below(&w->rng, nm_rng_below(&w->rng, 4) ? NM_MIN(c->rows, 16) : c->rows + 1);
        if (kind == OP_NEAR && w->n) {
            near_idx = (int)nm_rng_below(&w->rng, w->n);
            near_strict = nm_rng_below(&w->rng, 2) != 0;
            unsigned flags = near_strict ? BMEM_NEAR_STRICT : 0;
            for (int a = 0; a < 2; a++)
                e[a] = bmem_dev_malloc_near(w->d[a], 0, BMEM_RAW, p, q, w->lv[near_idx].h[a], flags, &h[a]);
        } else {
            for (int a = 0; a < 2; a++) e[a] = bmem_dev_malloc_raw(w->d[a], p, q, &h[a]);
        }
    }
    assert_int_equal(e[0], e[1]);
    if (e[0] == NM_ERANGE) {
        g_range++;
        assert_true(size == 0 || size > bank_bytes || p > c->subarrays || q > c->rows);
        return;
    }
    if (dim != BMEM_RAW) {
        if (size == 0 || size > bank_bytes) fail_msg("size %zu accepted", size);
        assert_int_equal(bmem_size_to_shape(c, size, dim, &p, &q), NM_OK);
    }
    if (p > c->subarrays || q > c->rows) fail_msg("oversized %u x %u accepted", p, q);
    unsigned eb = 0, er = 0, es = 0;
    if (e[0] == NM_ENOMEM) {
        g_nomem++;
        assert_int_equal(h[0], BMEM_NULL);
        assert_int_equal(h[1], BMEM_NULL);
        if (near_idx < 0 || !near_strict) {
            /* plain and fallback requests fail only when no bank has room */
            assert_false(expect_place(w, p, q, &eb, &er, &es));
        } else {
            /* strict: no co-located candidate was free */
            const bmem_geom *ng = &w->lv[near_idx].g;
            if (ng->row + q <= c->rows)
                for (unsigned s = 0; s + p <= c->subarrays; s++)
                    if (s + p <= ng->sub || s >= ng->sub + ng->nsubs)
                        assert_false(ref_free_rect(&w->m, ng->bank, ng->row, s, p, q));
        }
        return;
    }
    assert_int_equal(e[0], NM_OK);
    g_ok++;
    bmem_geom g[2];
    for (int a = 0; a < 2; a++) assert_int_equal(bmem_dev_geom(w->d[a], h[a], &g[a]), NM_OK);
    assert_memory_equal(&g[0], &g[1], sizeof g[0]);
    assert_int_equal(g[0].nsubs, p);
    assert_int_equal(g[0].nrows, q);
    assert_int_equal(g[0].dim, dim);
    assert_true(g[0].bank < c->banks && g[0].row + q <= c->rows && g[0].sub + p <= c->subarrays);
    assert_true(ref_free_rect(&w->m, g[0].bank, g[0].row, g[0].sub, p, q));
    if (w->home < 0) w->home = (int)g[0].bank;
    if (near_idx < 0) {
        assert_true(expect_place(w, p, q, &eb, &er, &es));
        assert_int_equal(g[0].bank, eb);
        assert_int_equal(g[0].row, er);
        assert_int_equal(g[0].sub, es);
    } else {
        const bmem_geom *ng = &w->lv[near_idx].g;
        /* co-located when possible: same bank and first row, and never farther
         * than a co-located candidate that was free */
        if (g[0].bank == ng->bank && g[0].row == ng->row) {
            g_near_colocated++;
            unsigned dist = g[0].sub >= ng->sub + ng->nsubs ? g[0].sub - (ng->sub + ng->nsubs)
                                                             : ng->sub - (g[0].sub + p);
            for (unsigned dd = 0; dd < dist; dd++) {
                unsigned right = ng->sub + ng->nsubs + dd;
                if (right + p <= c->subarrays) assert_false(ref_free_rect(&w->m, ng->bank, ng->row, right, p, q));
                if (ng->sub >= p + dd) assert_false(ref_free_rect(&w->m, ng->bank, ng->row, ng->sub - p - dd, p, q));
            }
        }
    }
    assert_true(w->n < MAX_LIVE);
    live *l = &w->lv[w->n++];
    l->h[0] = h[0];
    l->h[1] = h[1];
    l->g = g[0];
    l->id = w->next_id++;
    ref_set(&w->m, &g[0], l->id);
}

static void do_free(world *w)
{
    if (!w->n) return;
    unsigned i = (unsigned)nm_rng_below(&w->rng, w->n);
    live l = w->lv[i];
    for (int a = 0; a < 2; a++) {
        bmem_geom g;
        assert_int_equal(bmem_dev_geom(w->d[a], l.h[a], &g), NM_OK);
        assert_memory_equal(&g, &l.g, sizeof g);
        assert_int_equal(bmem_dev_free(w->d[a], l.h[a]), NM_OK);
        assert_int_equal(bmem_dev_free(w->d[a], l.h[a]), NM_EDOUBLEFREE);
    }
    ref_set(&w->m, &l.g, 0);
    w->lv[i] = w->lv[--w->n];
}

static void check_stats(world *w, bool largest)
{
    bmem_stats st[2];
    bmem_bank_stats *bs[2];
    for (int a = 0; a < 2; a++) {
        bs[a] = calloc(w->cfg.banks, sizeof(bmem_bank_stats));
        assert_int_equal(bmem_dev_stats(w->d[a], &st[a], largest ? bs[a] : NULL), NM_OK);
    }
    assert_memory_equal(&st[0], &st[1], sizeof st[0]);
    assert_int_equal(st[0].cells_allocated, ref_used(&w->m));
    assert_int_equal(st[0].allocations, w->n);
    if (largest) {
        assert_memory_equal(bs[0], bs[1], w->cfg.banks * sizeof(bmem_bank_stats));
        for (unsigned b = 0; b < w->cfg.banks; b++)
            assert_int_equal((uint64_t)bs[0][b].largest_free_rows * bs[0][b].largest_free_subs,
                             ref_largest_area(&w->m, b));
    }
    free(bs[0]);
    free(bs[1]);
}

static void test_random_sequences(void **st)
{
    (void)st;
    uint64_t seed = nm_test_seed(0xb3e3);
    nm_rng g;
    nm_rng_seed(&g, seed);
    for (int round = 0; round < 150; round++) {
        bmem_config c;
        bool small = round % 2 == 0;
        c.rows = 1 + (unsigned)nm_rng_below(&g, small ? 24 : 200);
        c.subarrays = 1 + (unsigned)nm_rng_below(&g, small ? 8 : 40);
        c.banks = 1 + (unsigned)nm_rng_below(&g, 3);
        c.columns = 8 * (1 + (unsigned)nm_rng_below(&g, 64));
        c.algo = BMEM_ALGO_FAST;
        c.cache = BMEM_CACHE_OFF;
        world *w = malloc(sizeof *w);
        world_init(w, c, seed + (uint64_t)round);
        for (int op = 0; op < 1000; op++) {
            uint64_t k = nm_rng_below(&w->rng, 10);
            if (k < 5)
                do_alloc(w, k < 2 ? OP_H : k < 3 ? OP_V : k < 4 ? OP_RAW : OP_NEAR);
            else if (k < 9 || w->n > MAX_LIVE - 8)
                do_free(w);
            else
                check_stats(w, small);
            if (w->n > MAX_LIVE - 8) do_free(w);
        }
        check_stats(w, small);
        while (w->n) do_free(w);
        check_stats(w, small);
        /* everything restored: each bank takes one whole-bank rectangle */
        for (unsigned b = 0; b < c.banks; b++) {
            bmem_ptr h[2];
            for (int a = 0; a < 2; a++) assert_int_equal(bmem_dev_malloc_raw(w->d[a], c.subarrays, c.rows, &h[a]), NM_OK);
        }
        world_fini(w);
        free(w);
    }
    assert_true(g_ok > 1000 && g_nomem > 100 && g_range > 50 && g_near_colocated > 50);
}

/* Fill to full: shapes that tile a bank reach 100%, then NM_ENOMEM. */
static void fill_with(bmem_algo algo, bmem_config c, size_t size, bmem_dim dim, uint64_t expect_allocs)
{
    c.algo = algo;
    bmem_dev *d;
    assert_int_equal(bmem_dev_create(&c, &d), NM_OK);
    bmem_ptr *hs = malloc(expect_allocs * sizeof *hs);
    uint64_t n = 0;
    bmem_ptr h;
    nm_err e;
    while ((e = (dim == BMEM_RAW ? bmem_dev_malloc_raw(d, 1, 1, &h) : bmem_dev_malloc(d, size, dim, &h))) == NM_OK) {
        assert_true(n < expect_allocs);
        hs[n++] = h;
    }
    assert_int_equal(e, NM_ENOMEM);
    assert_int_equal(n, expect_allocs);
    bmem_stats s;
    assert_int_equal(bmem_dev_stats(d, &s, NULL), NM_OK);
    assert_int_equal(s.cells_free, 0);
    assert_int_equal(s.cells_allocated, s.cells_total);
    for (uint64_t i = 0; i < n; i++) assert_int_equal(bmem_dev_free(d, hs[i]), NM_OK);
    assert_int_equal(bmem_dev_stats(d, &s, NULL), NM_OK);
    assert_int_equal(s.cells_allocated, 0);
    /* frees are reusable: the same fill again, without an explicit flush (the
     * thread cache, on by default for the fast structure, is flushed by the
     * request that would fail) */
    uint64_t n2 = 0;
    while ((e = (dim == BMEM_RAW ? bmem_dev_malloc_raw(d, 1, 1, &h) : bmem_dev_malloc(d, size, dim, &h))) == NM_OK) {
        assert_true(n2 < expect_allocs);
        hs[n2++] = h;
    }
    assert_int_equal(e, NM_ENOMEM);
    assert_int_equal(n2, expect_allocs);
    for (uint64_t i = 0; i < n2; i++) assert_int_equal(bmem_dev_free(d, hs[i]), NM_OK);
    assert_int_equal(bmem_dev_flush_thread_cache(d), NM_OK);
    assert_int_equal(bmem_dev_stats(d, &s, NULL), NM_OK);
    assert_int_equal(s.cells_allocated, 0);
    assert_int_equal(s.cells_cached, 0);
    assert_int_equal(s.cells_free, s.cells_total);
    free(hs);
    bmem_dev_destroy(d);
}

static void test_fill_to_full(void **st)
{
    (void)st;
    /* the paper's Table 3 device at 1/4 rows: 256 x 65536 x 16 x 8 */
    bmem_config c = {256, 65536, 16, 8, BMEM_ALGO_FAST, 0};
    for (int a = 0; a < 2; a++) {
        bmem_algo algo = a ? BMEM_ALGO_PAPER : BMEM_ALGO_FAST;
        fill_with(algo, c, 1 << 20, BMEM_HORIZ, 8 * 256 / 8);       /* Table 1: 8 bank rows each */
        fill_with(algo, c, (size_t)2 << 20, BMEM_VERT, 8 * 16);     /* a full subarray each */
        fill_with(algo, c, 8192, BMEM_HORIZ, 8 * 256 * 16);         /* one cell each */
        fill_with(algo, c, 8, BMEM_VERT, 8 * 16 * 4);               /* 64 rows each */
    }
    /* random big shapes, then single cells fill every gap */
    for (int a = 0; a < 2; a++) {
        bmem_config r = {100, 64, 13, 2, a ? BMEM_ALGO_PAPER : BMEM_ALGO_FAST, 0};
        bmem_dev *d;
        assert_int_equal(bmem_dev_create(&r, &d), NM_OK);
        nm_rng g;
        nm_rng_seed(&g, nm_test_seed(7));
        bmem_ptr h;
        for (int i = 0; i < 200; i++)
            bmem_dev_malloc_raw(d, 1 + (unsigned)nm_rng_below(&g, 5), 1 + (unsigned)nm_rng_below(&g, 30), &h);
        while (bmem_dev_malloc_raw(d, 1, 1, &h) == NM_OK) {
        }
        bmem_stats s;
        bmem_bank_stats bs[2];
        assert_int_equal(bmem_dev_stats(d, &s, bs), NM_OK);
        assert_int_equal(s.cells_free, 0);
        assert_int_equal(bs[0].largest_free_rows, 0);
        assert_int_equal(bs[0].largest_free_subs, 0);
        bmem_dev_destroy(d);
    }
}

/* ---- thread cache on: a model that learns the cache from snapshots ---- */
typedef struct cworld {
    bmem_config cfg;
    bmem_dev *d;
    ref m;     /* live allocations only */
    uint8_t *snap; /* [B][R][S] after the last refresh */
    live lv[MAX_LIVE];
    unsigned n;
    bmem_geom cached[256]; /* freed rectangles the snapshot shows as cached */
    uint64_t cseq[256], seq;
    unsigned nc;
    uint32_t next_id;
    int home;
    nm_rng rng;
} cworld;

static unsigned long g_c_pop, g_c_fit, g_c_flushfit, g_c_nomem, g_c_cached_max;

static bool snap_cached(cworld *w, unsigned b, unsigned r, unsigned s)
{
    return w->snap[((size_t)b * w->cfg.rows + r) * w->cfg.subarrays + s] == BMEM_SNAP_CACHED;
}

/* Re-read the device: snapshots of every bank; drop model entries no longer
 * cached; check the statistics against the model. */
static void csnap(cworld *w)
{
    const size_t per = (size_t)w->cfg.rows * w->cfg.subarrays;
    for (unsigned b = 0; b < w->cfg.banks; b++)
        assert_int_equal(bmem_dev_snapshot(w->d, b, w->snap + b * per, per), NM_OK);
}

static void crefresh(cworld *w)
{
    const size_t per = (size_t)w->cfg.rows * w->cfg.subarrays;
    uint64_t ncached = 0;
    csnap(w);
    for (unsigned b = 0; b < w->cfg.banks; b++) {
        for (size_t i = 0; i < per; i++) {
            uint8_t v = w->snap[b * per + i];
            unsigned r = (unsigned)(i / w->cfg.subarrays), sub = (unsigned)(i % w->cfg.subarrays);
            /* live cells are labelled, cached are 255, free 0: agree with the model */
            if (*cell(&w->m, b, r, sub)) assert_true(v != 0 && v != BMEM_SNAP_CACHED);
            else assert_true(v == 0 || v == BMEM_SNAP_CACHED);
            ncached += v == BMEM_SNAP_CACHED;
        }
    }
    unsigned k = 0;
    uint64_t model_cached = 0;
    for (unsigned i = 0; i < w->nc; i++) {
        const bmem_geom *g = &w->cached[i];
        if (snap_cached(w, g->bank, g->row, g->sub)) {
            for (unsigned r = g->row; r < g->row + g->nrows; r++)
                for (unsigned sub = g->sub; sub < g->sub + g->nsubs; sub++) assert_true(snap_cached(w, g->bank, r, sub));
            model_cached += (uint64_t)g->nrows * g->nsubs;
            w->cseq[k] = w->cseq[i];
            w->cached[k++] = *g;
        }
    }
    w->nc = k;
    assert_int_equal(model_cached, ncached); /* every cached cell belongs to a known freed rectangle */
    bmem_stats st;
    assert_int_equal(bmem_dev_stats(w->d, &st, NULL), NM_OK);
    assert_int_equal(st.cells_allocated, ref_used(&w->m));
    assert_int_equal(st.cells_cached, ncached);
    assert_int_equal(st.cells_free, st.cells_total - st.cells_allocated - st.cells_cached);
    assert_int_equal(st.allocations, w->n);
    assert_int_equal(st.cached, w->nc);
    assert_int_equal(st.cache_conflicts, 0);
    /* the bound: 1/16 of one bank's cells (at least one cell) */
    uint64_t budget = NM_MAX((uint64_t)1, per / 16);
    assert_true(ncached <= budget);
    if (ncached > g_c_cached_max) g_c_cached_max = ncached;
}

/* First fit over live + cached cells (what the device sees before a flush). */
static bool cfirst_fit_claimed_from(cworld *w, unsigned start, unsigned p, unsigned q, unsigned *bank, unsigned *r,
                                    unsigned *s)
{
    for (unsigned i = 0; i < w->cfg.banks; i++) {
        unsigned b = (start + i) % w->cfg.banks;
        for (unsigned j = 0; j + p <= w->cfg.subarrays; j++)
            for (unsigned rr = 0; rr + q <= w->cfg.rows; rr++) {
                bool ok = true;
                for (unsigned a = rr; a < rr + q && ok; a++)
                    for (unsigned c = j; c < j + p && ok; c++) ok = !*cell(&w->m, b, a, c) && !snap_cached(w, b, a, c);
                if (ok) {
                    *bank = b;
                    *r = rr;
                    *s = j;
                    return true;
                }
            }
    }
    return false;
}

static bool cfirst_fit_live_from(cworld *w, unsigned start, unsigned p, unsigned q, unsigned *bank, unsigned *r,
                                 unsigned *s)
{
    for (unsigned i = 0; i < w->cfg.banks; i++) {
        unsigned b = (start + i) % w->cfg.banks;
        if (ref_first_fit(&w->m, b, p, q, r, s)) {
            *bank = b;
            return true;
        }
    }
    return false;
}

/* Remember a new live allocation in the model. */
static void clive_add(cworld *w, bmem_ptr h, const bmem_geom *g)
{
    assert_true(w->n < MAX_LIVE);
    live *l = &w->lv[w->n++];
    l->h[0] = h;
    l->g = *g;
    l->id = w->next_id++;
    ref_set(&w->m, g, l->id);
}

static bool cfirst_fit_claimed(cworld *w, unsigned p, unsigned q, unsigned *bank, unsigned *r, unsigned *s)
{
    return cfirst_fit_claimed_from(w, (unsigned)w->home, p, q, bank, r, s);
}
static bool cfirst_fit_live(cworld *w, unsigned p, unsigned q, unsigned *bank, unsigned *r, unsigned *s)
{
    return cfirst_fit_live_from(w, (unsigned)w->home, p, q, bank, r, s);
}

static unsigned long g_c_near_co, g_c_near_fallback;

/* Co-location with the cache on: never from the cache; the caller's cached
 * cells in near's bank are returned first, so the co-located search sees the
 * live allocations only there; the fallback is first fit from near's bank. */
static void cnear_op(cworld *w)
{
    const bmem_config *c = &w->cfg;
    if (!w->n) return;
    const live *nl = &w->lv[nm_rng_below(&w->rng, w->n)];
    const bmem_geom ng = nl->g;
    unsigned p = 1 + (unsigned)nm_rng_below(&w->rng, NM_MIN(c->subarrays, 2));
    unsigned q = 1 + (unsigned)nm_rng_below(&w->rng, NM_MIN(c->rows, 4));
    bool strict = nm_rng_below(&w->rng, 2) != 0;
    /* the co-located candidates free in the live model, nearest first */
    int best = -1;
    unsigned best_sub = 0;
    if (ng.row + q <= c->rows)
        for (unsigned dist = 0; dist < c->subarrays && best < 0; dist++) {
            unsigned right = ng.sub + ng.nsubs + dist;
            if (right + p <= c->subarrays && ref_free_rect(&w->m, ng.bank, ng.row, right, p, q)) best = 0, best_sub = right;
            else if (ng.sub >= p + dist && ref_free_rect(&w->m, ng.bank, ng.row, ng.sub - p - dist, p, q))
                best = 0, best_sub = ng.sub - p - dist;
        }
    bmem_ptr h = 5;
    nm_err e = bmem_dev_malloc_near(w->d, 0, BMEM_RAW, p, q, nl->h[0], strict ? BMEM_NEAR_STRICT : 0, &h);
    unsigned eb = 0, er = 0, es = 0;
    if (best >= 0) {
        assert_int_equal(e, NM_OK);
        g_c_near_co++;
        bmem_geom g;
        assert_int_equal(bmem_dev_geom(w->d, h, &g), NM_OK);
        assert_int_equal(g.bank, ng.bank);
        assert_int_equal(g.row, ng.row);
        assert_int_equal(g.sub, best_sub);
        clive_add(w, h, &g);
    } else if (strict) {
        assert_int_equal(e, NM_ENOMEM);
        assert_int_equal(h, BMEM_NULL);
    } else {
        /* first fit from near's bank: cached cells in other banks count as
         * taken until the caller's cache is flushed by a failing request */
        csnap(w);
        bool claimed = cfirst_fit_claimed_from(w, ng.bank, p, q, &eb, &er, &es);
        bool livefit = claimed || cfirst_fit_live_from(w, ng.bank, p, q, &eb, &er, &es);
        if (!livefit) {
            assert_int_equal(e, NM_ENOMEM);
        } else {
            assert_int_equal(e, NM_OK);
            g_c_near_fallback++;
            bmem_geom g;
            assert_int_equal(bmem_dev_geom(w->d, h, &g), NM_OK);
            assert_int_equal(g.bank, eb);
            assert_int_equal(g.row, er);
            assert_int_equal(g.sub, es);
            clive_add(w, h, &g);
        }
    }
    crefresh(w);
}

static void calloc_op(cworld *w)
{
    const bmem_config *c = &w->cfg;
    unsigned p, q;
    bmem_dim dim;
    bmem_ptr h = 7;
    nm_err e;
    uint64_t k = nm_rng_below(&w->rng, 3);
    if (k < 2) {
        dim = k ? BMEM_VERT : BMEM_HORIZ;
        /* a few distinct small sizes, so that shapes repeat and hit the cache */
        size_t bank_bytes = (size_t)c->rows * c->subarrays * c->columns / 8;
        size_t small = dim == BMEM_HORIZ ? 2 * c->columns / 8 : 2;
        size_t size = nm_rng_below(&w->rng, 8) ? 1 + nm_rng_below(&w->rng, NM_MIN(bank_bytes, small))
                                               : 1 + nm_rng_below(&w->rng, bank_bytes);
        if (bmem_size_to_shape(c, size, dim, &p, &q) != NM_OK) return;
        e = bmem_dev_malloc(w->d, size, dim, &h);
    } else {
        dim = BMEM_RAW;
        p = 1 + (unsigned)nm_rng_below(&w->rng, NM_MIN(c->subarrays, 2));
        q = 1 + (unsigned)nm_rng_below(&w->rng, NM_MIN(c->rows, 4));
        e = bmem_dev_malloc_raw(w->d, p, q, &h);
    }
    /* what the model expects */
    int pick = -1;
    for (unsigned i = 0; i < w->nc; i++)
        if (w->cached[i].dim == dim && w->cached[i].nsubs == p && w->cached[i].nrows == q &&
            (pick < 0 || w->cseq[i] > w->cseq[pick]))
            pick = (int)i;
    unsigned eb = 0, er = 0, es = 0;
    bool claimed_fit = pick < 0 && cfirst_fit_claimed(w, p, q, &eb, &er, &es);
    bool live_fit = pick < 0 && !claimed_fit && cfirst_fit_live(w, p, q, &eb, &er, &es);
    if (e == NM_ENOMEM) {
        assert_int_equal(h, BMEM_NULL);
        assert_true(pick < 0 && !claimed_fit && !live_fit);
        g_c_nomem++;
        crefresh(w);
        assert_int_equal(w->nc, 0); /* the failing request flushed the cache */
        return;
    }
    assert_int_equal(e, NM_OK);
    bmem_geom g;
    assert_int_equal(bmem_dev_geom(w->d, h, &g), NM_OK);
    assert_int_equal(g.nsubs, p);
    assert_int_equal(g.nrows, q);
    assert_int_equal(g.dim, dim);
    assert_true(g.bank < c->banks && g.row + q <= c->rows && g.sub + p <= c->subarrays);
    assert_true(ref_free_rect(&w->m, g.bank, g.row, g.sub, p, q));
    if (w->home < 0) {
        w->home = (int)g.bank;
        eb = g.bank;
    }
    if (pick >= 0) {
        g_c_pop++;
        const bmem_geom *cg = &w->cached[pick];
        assert_int_equal(g.bank, cg->bank);
        assert_int_equal(g.row, cg->row);
        assert_int_equal(g.sub, cg->sub);
    } else {
        assert_true(claimed_fit || live_fit);
        if (claimed_fit) g_c_fit++;
        else g_c_flushfit++;
        assert_int_equal(g.bank, eb);
        assert_int_equal(g.row, er);
        assert_int_equal(g.sub, es);
    }
    clive_add(w, h, &g);
    crefresh(w);
    if (live_fit) assert_int_equal(w->nc, 0);
}

static void cfree_op(cworld *w)
{
    if (!w->n) return;
    unsigned i = (unsigned)nm_rng_below(&w->rng, w->n);
    live l = w->lv[i];
    bmem_stats s0, s1;
    assert_int_equal(bmem_dev_free(w->d, l.h[0]), NM_OK);
    assert_int_equal(bmem_dev_stats(w->d, &s0, NULL), NM_OK);
    /* double free, geometry of and co-location next to a freed handle: clear
     * errors, nothing changes (the handle may sit in the cache) */
    assert_int_equal(bmem_dev_free(w->d, l.h[0]), NM_EDOUBLEFREE);
    bmem_geom g;
    assert_int_equal(bmem_dev_geom(w->d, l.h[0], &g), NM_EDOUBLEFREE);
    bmem_ptr z;
    assert_int_equal(bmem_dev_malloc_near(w->d, 0, BMEM_RAW, 1, 1, l.h[0], 0, &z), NM_EINVAL);
    assert_int_equal(bmem_dev_stats(w->d, &s1, NULL), NM_OK);
    assert_memory_equal(&s0, &s1, sizeof s0);
    ref_set(&w->m, &l.g, 0);
    w->lv[i] = w->lv[--w->n];
    csnap(w);
    if (snap_cached(w, l.g.bank, l.g.row, l.g.sub)) {
        assert_true(w->nc < 256);
        w->cseq[w->nc] = ++w->seq;
        w->cached[w->nc++] = l.g;
    }
    crefresh(w);
}

static void test_random_cached(void **st)
{
    (void)st;
    uint64_t seed = nm_test_seed(0xcac4e);
    nm_rng g;
    nm_rng_seed(&g, seed);
    for (int round = 0; round < 40; round++) {
        bmem_config c;
        /* mostly 16..64 rows x 4..16 subarrays (a cache budget of 4..64 cells),
         * sometimes tiny */
        bool tiny = round % 8 == 7;
        c.rows = tiny ? 1 + (unsigned)nm_rng_below(&g, 8) : 16 + (unsigned)nm_rng_below(&g, 49);
        c.subarrays = tiny ? 1 + (unsigned)nm_rng_below(&g, 4) : 4 + (unsigned)nm_rng_below(&g, 13);
        c.banks = 1 + (unsigned)nm_rng_below(&g, 3);
        c.columns = 8 * (1 + (unsigned)nm_rng_below(&g, 16));
        c.algo = BMEM_ALGO_FAST;
        c.cache = round % 3 == 0 ? 0 : 1 + (int)nm_rng_below(&g, 4); /* default, or small bins */
        cworld *w = calloc(1, sizeof *w);
        w->cfg = c;
        assert_int_equal(bmem_dev_create(&c, &w->d), NM_OK);
        w->m.R = c.rows;
        w->m.S = c.subarrays;
        w->m.B = c.banks;
        w->m.own = calloc((size_t)c.banks * c.rows * c.subarrays, sizeof(uint32_t));
        w->snap = calloc((size_t)c.banks * c.rows * c.subarrays, 1);
        w->home = -1;
        w->next_id = 1;
        nm_rng_seed(&w->rng, seed + 1000 + (uint64_t)round);
        for (int op = 0; op < 600; op++) {
            uint64_t k = nm_rng_below(&w->rng, 20);
            if (k < 9 && w->n < MAX_LIVE - 8)
                calloc_op(w);
            else if (k < 10 && w->n < MAX_LIVE - 8)
                cnear_op(w);
            else if (k < 19)
                cfree_op(w);
            else {
                assert_int_equal(bmem_dev_flush_thread_cache(w->d), NM_OK);
                crefresh(w);
                assert_int_equal(w->nc, 0);
            }
        }
        while (w->n) cfree_op(w);
        assert_int_equal(bmem_dev_flush_thread_cache(w->d), NM_OK);
        crefresh(w);
        bmem_stats s;
        assert_int_equal(bmem_dev_stats(w->d, &s, NULL), NM_OK);
        assert_int_equal(s.cells_free, s.cells_total);
        assert_int_equal(s.cells_cached, 0);
        /* everything restored: each bank takes one whole-bank rectangle */
        for (unsigned b = 0; b < c.banks; b++) {
            bmem_ptr h;
            assert_int_equal(bmem_dev_malloc_raw(w->d, c.subarrays, c.rows, &h), NM_OK);
        }
        bmem_dev_destroy(w->d);
        free(w->m.own);
        free(w->snap);
        free(w);
    }
    print_message("cached model: %lu pops, %lu first fits, %lu fits after a flush, %lu NM_ENOMEM, max %lu cells "
                  "cached, %lu co-located, %lu hint fallbacks\n",
                  g_c_pop, g_c_fit, g_c_flushfit, g_c_nomem, g_c_cached_max, g_c_near_co, g_c_near_fallback);
    assert_true(g_c_pop > 500 && g_c_fit > 500 && g_c_flushfit > 10 && g_c_nomem > 10);
    assert_true(g_c_near_co > 100 && g_c_near_fallback > 10);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_sequences),
        cmocka_unit_test(test_random_cached),
        cmocka_unit_test(test_fill_to_full),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
