/* bmem device: geometry checks, size mapping, bank selection and locking,
 * handles and anchors, co-location, and the paper's process-wide interface.
 * The search structures live in bmem_fast.c (default) and bmem_paper.c. */
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "bmem_internal.h"

/* ---- locking: one test-and-test-and-set lock per bank ----
 * A bank operation is short (tens of ns), so waiting threads spin briefly and
 * then yield: with more threads than cores (8 on 2 here) a preempted holder
 * must get the CPU back instead of being spun against. */
void bmem_bank_lock_slow(bmem_bank *b)
{
    for (unsigned spins = 0;; spins++) {
        if (!atomic_load_explicit(&b->lock, memory_order_relaxed) &&
            !atomic_exchange_explicit(&b->lock, 1, memory_order_acquire))
            return;
        if (spins >= 64) sched_yield();
#if defined(__x86_64__) || defined(__i386__)
        else __builtin_ia32_pause();
#endif
    }
}


/* ---- home bank of the calling thread ----
 * Threads get consecutive slots on their first allocation, so with T <= banks
 * threads each works in its own bank and the bank locks are uncontended. */
static _Atomic unsigned g_next_slot;
static _Thread_local unsigned t_slot_plus1, t_home_nbanks, t_home;

static unsigned home_bank(const bmem_dev *d)
{
    if (NM_LIKELY(t_home_nbanks == d->cfg.banks)) return t_home; /* no division on the hot path */
    if (!t_slot_plus1) t_slot_plus1 = atomic_fetch_add(&g_next_slot, 1) + 1;
    t_home_nbanks = d->cfg.banks;
    t_home = (t_slot_plus1 - 1) % d->cfg.banks;
    return t_home;
}

/* ---- geometry ---- */
static nm_err check_config(const bmem_config *c)
{
    if (!c) return nm_fail(NM_EINVAL, "bmem: NULL config");
    if (c->algo != BMEM_ALGO_FAST && c->algo != BMEM_ALGO_PAPER)
        return nm_fail(NM_EINVAL, "bmem: unknown algorithm %d", (int)c->algo);
    if (c->cache < BMEM_CACHE_OFF || c->cache > BMEM_CACHE_MAX)
        return nm_fail(NM_ERANGE, "bmem: cache setting %d is outside %d (off) .. %d", c->cache, BMEM_CACHE_OFF,
                       BMEM_CACHE_MAX);
    if (!c->rows || !c->columns || !c->subarrays || !c->banks)
        return nm_fail(NM_ERANGE, "bmem: zero geometry (rows %u, columns %u, subarrays %u, banks %u)", c->rows,
                       c->columns, c->subarrays, c->banks);
    if (c->rows > BMEM_MAX_ROWS || c->columns > BMEM_MAX_COLUMNS || c->subarrays > BMEM_MAX_SUBARRAYS ||
        c->banks > BMEM_MAX_BANKS)
        return nm_fail(NM_ERANGE, "bmem: geometry beyond limits (rows <= %u, columns <= %u, subarrays <= %u, banks <= %u)",
                       BMEM_MAX_ROWS, BMEM_MAX_COLUMNS, BMEM_MAX_SUBARRAYS, BMEM_MAX_BANKS);
    if ((uint64_t)c->rows * c->subarrays * c->banks > BMEM_MAX_CELLS)
        return nm_fail(NM_ERANGE, "bmem: %llu cells (rows x subarrays x banks) is more than %u",
                       (unsigned long long)c->rows * c->subarrays * c->banks, BMEM_MAX_CELLS);
    return NM_OK;
}

static uint64_t ceil_div(uint64_t a, uint64_t b) { return a / b + (a % b != 0); }

nm_err bmem_size_to_shape(const bmem_config *c, size_t size, bmem_dim dim, unsigned *nsubs, unsigned *nrows)
{
    if (!c || !nsubs || !nrows) return nm_fail(NM_EINVAL, "bmem: NULL argument");
    if (dim != BMEM_HORIZ && dim != BMEM_VERT)
        return nm_fail(NM_EINVAL, "bmem: dimension %d is not BMEM_HORIZ or BMEM_VERT", (int)dim);
    if (size == 0) return nm_fail(NM_ERANGE, "bmem: size 0");
    const uint64_t R = c->rows, C = c->columns, S = c->subarrays;
    const uint64_t bank_bits = R * S * C; /* <= 2^50, no overflow */
    if ((uint64_t)size > bank_bits / 8)
        return nm_fail(NM_ERANGE, "bmem: %zu bytes is more than a bank holds (%llu bytes)", size,
                       (unsigned long long)(bank_bits / 8));
    const uint64_t bits = (uint64_t)size * 8;
    uint64_t p, q;
    if (dim == BMEM_HORIZ) {
        /* bits run along a row, across adjacent subarrays; beyond one full
         * bank row, whole bank rows are stacked */
        if (bits <= C) {
            p = q = 1;
        } else if (bits <= S * C) {
            p = ceil_div(bits, C);
            q = 1;
        } else {
            p = S;
            q = ceil_div(bits, S * C);
        }
    } else {
        /* one bit per row down a column; columns cannot be allocated one by
         * one (paper Sec. 5.2), so the rows are reserved across the subarray.
         * A column longer than the subarray wraps to the next column of the
         * same rows (full height), then to the next subarray. */
        if (bits <= R) {
            p = 1;
            q = bits;
        } else {
            p = ceil_div(bits, R * C);
            q = R;
        }
    }
    *nsubs = (unsigned)p;
    *nrows = (unsigned)q;
    return NM_OK;
}

/* ---- lifecycle ---- */
static nm_err bank_init(const bmem_dev *d, bmem_bank *b)
{
    atomic_init(&b->lock, 0);
    atomic_init(&b->free_cells, (uint64_t)d->cfg.rows * d->cfg.subarrays);
    b->live = 0;
    /* calloc: pages of anchors that are never used stay untouched */
    b->anchor = calloc((size_t)d->cfg.rows * d->cfg.subarrays, sizeof(uint64_t));
    if (!b->anchor) return nm_fail(NM_ENOMEM, "bmem: no host memory for anchors");
    nm_err e = d->cfg.algo == BMEM_ALGO_PAPER ? bmem_paper_init(d, b) : bmem_fast_init(d, b);
    if (e) {
        free(b->anchor);
        b->anchor = NULL;
    }
    return e;
}

static void bank_fini(const bmem_dev *d, bmem_bank *b)
{
    if (d->cfg.algo == BMEM_ALGO_PAPER)
        bmem_paper_fini(b);
    else
        bmem_fast_fini(b);
    free(b->anchor);
    b->anchor = NULL;
}

nm_err bmem_dev_create(const bmem_config *cfg, bmem_dev **out)
{
    if (!out) return nm_fail(NM_EINVAL, "bmem: NULL out");
    *out = NULL;
    nm_err e = check_config(cfg);
    if (e) return e;
    bmem_dev *d = calloc(1, sizeof *d);
    if (!d) return nm_fail(NM_ENOMEM, "bmem: no host memory for the device");
    d->cfg = *cfg;
    d->rw = (unsigned)nm_bitmap_words(cfg->rows);
    d->h_cell_bytes = cfg->columns / 8;
    d->cache = cfg->cache > 0 ? (unsigned)cfg->cache
               : cfg->cache == 0 && cfg->algo == BMEM_ALGO_FAST ? BMEM_CACHE_DEFAULT
                                                               : 0;
    bmem_tc_dev_init(d);
    d->v_col_bytes = cfg->rows / 8;
    d->banks = aligned_alloc(NM_CACHELINE, sizeof(bmem_bank) * cfg->banks);
    if (!d->banks) {
        free(d);
        return nm_fail(NM_ENOMEM, "bmem: no host memory for banks");
    }
    memset(d->banks, 0, sizeof(bmem_bank) * cfg->banks);
    for (unsigned i = 0; i < cfg->banks; i++) {
        e = bank_init(d, &d->banks[i]);
        if (e) {
            while (i--) bank_fini(d, &d->banks[i]);
            free(d->banks);
            free(d);
            return e;
        }
    }
    *out = d;
    return NM_OK;
}

void bmem_dev_destroy(bmem_dev *d)
{
    if (!d) return;
    bmem_tc_dev_fini(d);
    for (unsigned i = 0; i < d->cfg.banks; i++) bank_fini(d, &d->banks[i]);
    free(d->banks);
    free(d);
}

const bmem_config *bmem_dev_config(const bmem_dev *d) { return d ? &d->cfg : NULL; }

/* ---- structure dispatch ---- */
static inline bool s_find(const bmem_dev *d, const bmem_bank *b, unsigned p, unsigned q, unsigned *r, unsigned *s)
{
    return d->cfg.algo == BMEM_ALGO_PAPER ? bmem_paper_find(d, b, p, q, r, s) : bmem_fast_find(d, b, p, q, r, s);
}
static inline bool s_fits(const bmem_dev *d, const bmem_bank *b, unsigned r, unsigned s, unsigned p, unsigned q)
{
    return d->cfg.algo == BMEM_ALGO_PAPER ? bmem_paper_fits(d, b, r, s, p, q) : bmem_fast_fits(d, b, r, s, p, q);
}
#define s_mark bmem_s_mark

/* ---- handles ---- */
static inline bmem_ptr make_handle(unsigned bank, unsigned row, unsigned sub, uint64_t gen)
{
    return ((uint64_t)bank << H_BANK_SHIFT) | ((uint64_t)row << H_ROW_SHIFT) | ((uint64_t)sub << H_SUB_SHIFT) | gen;
}

/* Claim the rectangle (bank lock held, rectangle known free): mark it and
 * write the anchor with the next generation of that cell. */
static inline bmem_ptr commit(bmem_dev *d, unsigned bi, unsigned r, unsigned s, unsigned p, unsigned q, bmem_dim dim)
{
    bmem_bank *b = &d->banks[bi];
    s_mark(d, b, r, s, p, q, true);
    _Atomic uint64_t *a = &b->anchor[(size_t)r * d->cfg.subarrays + s];
    uint64_t gen = ((atomic_load_explicit(a, memory_order_relaxed) & ANC_GEN_MASK) + 1) & ANC_GEN_MASK;
    if (!gen) gen = 1;
    atomic_store_explicit(a,
                          ANC_LIVE | ((uint64_t)dim << ANC_DIM_SHIFT) | ((uint64_t)(q - 1) << ANC_Q_SHIFT) |
                              ((uint64_t)(p - 1) << ANC_P_SHIFT) | gen,
                          memory_order_relaxed);
    b->live++;
    atomic_store_explicit(&b->free_cells, atomic_load_explicit(&b->free_cells, memory_order_relaxed) - (uint64_t)p * q,
                          memory_order_relaxed);
    return make_handle(bi, r, s, gen);
}

/* Decode and validate a handle with its bank lock held. Returns the anchor. */
static inline nm_err lookup_locked(const bmem_dev *d, bmem_ptr h, unsigned *bank, unsigned *row, unsigned *sub,
                                   uint64_t *anchor)
{
    unsigned bi = (unsigned)(h >> H_BANK_SHIFT), r = (unsigned)((h >> H_ROW_SHIFT) & 0xffff),
             s = (unsigned)((h >> H_SUB_SHIFT) & 0x3ff);
    uint64_t gen = h & ANC_GEN_MASK;
    const uint64_t anc = atomic_load_explicit(&d->banks[bi].anchor[(size_t)r * d->cfg.subarrays + s], memory_order_relaxed);
    uint64_t cur = anc & ANC_GEN_MASK;
    if (cur != gen) {
        /* generations only grow at a cell (mod 2^30): an older one was freed */
        if (cur > gen) return nm_fail(NM_EDOUBLEFREE, "bmem: handle %#llx was freed already (stale)", (unsigned long long)h);
        return nm_fail(NM_EBADFREE, "bmem: handle %#llx was not returned by this device", (unsigned long long)h);
    }
    if (!(anc & ANC_LIVE))
        return nm_fail(NM_EDOUBLEFREE, "bmem: handle %#llx was freed already%s", (unsigned long long)h,
                       anc & ANC_CACHED ? " (it is in a thread cache)" : "");
    *bank = bi;
    *row = r;
    *sub = s;
    *anchor = anc;
    return NM_OK;
}

/* Cheap range checks before taking a lock. */
static inline nm_err precheck(const bmem_dev *d, bmem_ptr h)
{
    if (h == BMEM_NULL) return nm_fail(NM_EBADFREE, "bmem: NULL handle");
    unsigned bi = (unsigned)(h >> H_BANK_SHIFT), r = (unsigned)((h >> H_ROW_SHIFT) & 0xffff),
             s = (unsigned)((h >> H_SUB_SHIFT) & 0x3ff);
    if (bi >= d->cfg.banks || r >= d->cfg.rows || s >= d->cfg.subarrays || !(h & ANC_GEN_MASK))
        return nm_fail(NM_EBADFREE, "bmem: handle %#llx is outside this device", (unsigned long long)h);
    return NM_OK;
}

static inline void anchor_geom(uint64_t a, unsigned bank, unsigned row, unsigned sub, bmem_geom *g)
{
    g->bank = bank;
    g->row = row;
    g->sub = sub;
    g->nrows = (unsigned)((a >> ANC_Q_SHIFT) & 0xffff) + 1;
    g->nsubs = (unsigned)((a >> ANC_P_SHIFT) & 0x3ff) + 1;
    g->dim = (bmem_dim)((a >> ANC_DIM_SHIFT) & 3);
}

/* ---- thread cache hot path (bmem_cache.c has the rest) ----
 * A free parks a validated live allocation in the caller's cache when its bin
 * and the cache's cell budget have room; a request of the same shape takes the
 * most recently parked one back. No lock and no read-modify-write: the anchor
 * moves live -> cached -> live with plain stores, because only the holder of
 * a live handle may free it and only the owner of a cache reads its entries
 * (two frees racing on one handle are the caller's data race; bmem.h). The
 * common cases are handled in bmem_dev_malloc / bmem_dev_free themselves,
 * which make no calls on that path; these helpers are the general versions. */
/* The bin for a shape: the last bin used first (its address does not wait
 * for a hash), else the shape's own; *bk gets the bin's key. */
static inline bmem_tc_bin *tc_bin(bmem_tcache *tc, uint32_t key, uint32_t *bk)
{
    bmem_tc_bin *bn = tc->last;
    *bk = atomic_load_explicit(&bn->key, memory_order_relaxed);
    if (NM_UNLIKELY(*bk != key)) {
        tc->last = bn = &tc->bin[bmem_tc_bin_of(key)];
        *bk = atomic_load_explicit(&bn->key, memory_order_relaxed);
    }
    return bn;
}

/* Park a validated live allocation (handle h, anchor a) as entry n. */
static inline void tc_push(bmem_tc_bin *bn, unsigned n, _Atomic uint64_t *a, bmem_ptr h)
{
    atomic_store_explicit(a, bn->parked | (h & ANC_GEN_MASK), memory_order_relaxed);
    atomic_store_explicit(&bn->e[n].h, h, memory_order_relaxed);
    bn->e[n].a = a;
    atomic_store_explicit(&bn->n, n + 1, memory_order_relaxed);
}

/* Give up an empty bin's share of the budget. */
static void tc_unkey(bmem_tcache *tc, bmem_tc_bin *bn)
{
    tc->reserved -= (uint64_t)bn->lim * bn->cells;
    bn->lim = 0;
    atomic_store_explicit(&bn->key, 0, memory_order_relaxed);
}

/* The budget is shared out when a bin is keyed to a shape: lim = as many
 * entries as fit (at most cap) in what the other keyed bins have not
 * reserved, taking the reservations of empty bins back if needed. So the hot
 * paths only compare n with lim, and the cells held never exceed the budget. */
static bool tc_put(bmem_tcache *tc, _Atomic uint64_t *a, uint64_t anc, bmem_ptr h)
{
    const uint32_t key = (uint32_t)((anc >> ANC_SHAPE_SHIFT) & 0x0fffffff);
    bmem_tc_bin *bn = &tc->bin[bmem_tc_bin_of(key)];
    const unsigned n = atomic_load_explicit(&bn->n, memory_order_relaxed);
    if (atomic_load_explicit(&bn->key, memory_order_relaxed) != key) {
        if (n) return false; /* the bin holds another shape */
        tc_unkey(tc, bn);
        const uint64_t cells = bmem_key_cells(key);
        if (tc->budget - tc->reserved < cells)
            for (unsigned i = 0; i < BMEM_TC_BINS; i++)
                if (bn != &tc->bin[i] && tc->bin[i].lim && !atomic_load_explicit(&tc->bin[i].n, memory_order_relaxed))
                    tc_unkey(tc, &tc->bin[i]);
        const uint64_t fit = (tc->budget - tc->reserved) / cells;
        if (!fit) return false; /* all the room is held by other shapes' entries */
        bn->lim = (uint32_t)NM_MIN(fit, (uint64_t)tc->cap);
        bn->cells = cells;
        tc->reserved += bn->lim * cells;
        bn->parked = ANC_CACHED | tc->tag | ((uint64_t)key << ANC_SHAPE_SHIFT);
        bn->live = ANC_LIVE | ((uint64_t)key << ANC_SHAPE_SHIFT);
        atomic_store_explicit(&bn->key, key, memory_order_relaxed);
    }
    if (n >= bn->lim) return false;
    tc_push(bn, n, a, h);
    tc->last = bn;
    return true;
}

/* Take an entry back: a new generation on the same first cell, so the old
 * handle stays a double free. An entry whose anchor is not exactly as this
 * cache left it (only a caller's racing double free can do that) is dropped
 * and counted, never handed out. */
static inline bool tc_pop(bmem_dev *d, bmem_tcache *tc, bmem_tc_bin *bn, unsigned n, bmem_ptr *out)
{
    const bmem_tc_ent *en = &bn->e[n - 1];
    const bmem_ptr h = atomic_load_explicit(&en->h, memory_order_relaxed);
    _Atomic uint64_t *a = en->a;
    atomic_store_explicit(&bn->n, n - 1, memory_order_relaxed);
    const uint64_t gen = h & ANC_GEN_MASK;
    if (NM_UNLIKELY(atomic_load_explicit(a, memory_order_relaxed) != (bn->parked | gen))) {
        atomic_fetch_add_explicit(&d->tc_conflicts, 1, memory_order_relaxed);
        return false;
    }
    const uint64_t ng = gen < ANC_GEN_MASK ? gen + 1 : 1; /* generation 0 is never issued */
    atomic_store_explicit(a, bn->live | ng, memory_order_relaxed);
    *out = tc->last_h = (h & ~ANC_GEN_MASK) | ng;
    tc->last_a = a;
    return true;
}

static bool tc_take(bmem_dev *d, bmem_tcache *tc, uint32_t key, bmem_ptr *out)
{
    bmem_tc_bin *bn = tc->last = &tc->bin[bmem_tc_bin_of(key)];
    if (atomic_load_explicit(&bn->key, memory_order_relaxed) != key) return false;
    for (unsigned n; (n = atomic_load_explicit(&bn->n, memory_order_relaxed)) != 0;)
        if (tc_pop(d, tc, bn, n, out)) return true;
    return false;
}

static nm_err __attribute__((noinline)) free_slow(bmem_dev *d, bmem_ptr h)
{
    if (!d) return nm_fail(NM_EINVAL, "bmem: NULL device");
    nm_err e = precheck(d, h);
    if (e) return e;
    const unsigned bi = (unsigned)(h >> H_BANK_SHIFT), r = (unsigned)((h >> H_ROW_SHIFT) & 0xffff),
                   s = (unsigned)((h >> H_SUB_SHIFT) & 0x3ff);
    bmem_bank *b = &d->banks[bi];
    _Atomic uint64_t *a = &b->anchor[(size_t)r * d->cfg.subarrays + s];
    if (d->cache) {
        const uint64_t anc = atomic_load_explicit(a, memory_order_relaxed);
        if ((anc & (ANC_LIVE | ANC_GEN_MASK)) == (ANC_LIVE | (h & ANC_GEN_MASK))) {
            bmem_tcache *tc = bmem_tc_get(d);
            if (tc && tc_put(tc, a, anc, h)) return NM_OK;
        }
    }
    bmem_bank_lock(b);
    const uint64_t anc = atomic_load_explicit(a, memory_order_relaxed);
    if (NM_LIKELY((anc & (ANC_LIVE | ANC_GEN_MASK)) == (ANC_LIVE | (h & ANC_GEN_MASK)))) {
        unsigned q = (unsigned)((anc >> ANC_Q_SHIFT) & 0xffff) + 1, p = (unsigned)((anc >> ANC_P_SHIFT) & 0x3ff) + 1;
        atomic_store_explicit(a, anc & ~ANC_LIVE, memory_order_relaxed);
        s_mark(d, b, r, s, p, q, false);
        b->live--;
        atomic_store_explicit(&b->free_cells,
                              atomic_load_explicit(&b->free_cells, memory_order_relaxed) + (uint64_t)p * q,
                              memory_order_relaxed);
        bmem_bank_unlock(b);
        return NM_OK;
    }
    unsigned bj, rr, ss;
    uint64_t cur;
    e = lookup_locked(d, h, &bj, &rr, &ss, &cur); /* classifies the error */
    bmem_bank_unlock(b);
    return e ? e : nm_fail(NM_ECORRUPT, "bmem: anchor check disagrees for %#llx", (unsigned long long)h);
}

nm_err bmem_dev_free(bmem_dev *d, bmem_ptr h)
{
    /* hot path: a valid live handle parked in a bin that already holds its
     * shape (the bin stays keyed when it empties) */
    bmem_tcache *tc = bmem_t_tc;
    /* a cache for d exists only when d has the cache on */
    if (NM_LIKELY(d && tc && tc->dev_id == d->id)) {
        if (h == tc->last_h) {
            /* the handle the last cache hit returned: anchor known, and its
             * bin is the last one used unless another shape came since. The
             * anchor decides: live with this generation and this bin's shape */
            bmem_tc_bin *bn = tc->last;
            _Atomic uint64_t *a = tc->last_a;
            const uint64_t gen = h & ANC_GEN_MASK;
            const unsigned n = atomic_load_explicit(&bn->n, memory_order_relaxed);
            if (NM_LIKELY(atomic_load_explicit(a, memory_order_relaxed) == (bn->live | gen) && n < bn->lim)) {
                tc_push(bn, n, a, h);
                return NM_OK;
            }
        }
        const unsigned bi = (unsigned)(h >> H_BANK_SHIFT), r = (unsigned)((h >> H_ROW_SHIFT) & 0xffff),
                       s = (unsigned)((h >> H_SUB_SHIFT) & 0x3ff);
        const uint64_t gen = h & ANC_GEN_MASK;
        if (NM_LIKELY(bi < d->cfg.banks && r < d->cfg.rows && s < d->cfg.subarrays && gen)) {
            _Atomic uint64_t *a = &d->banks[bi].anchor[(size_t)r * d->cfg.subarrays + s];
            const uint64_t anc = atomic_load_explicit(a, memory_order_relaxed);
            const uint32_t key = (uint32_t)((anc >> ANC_SHAPE_SHIFT) & 0x0fffffff);
            uint32_t bk;
            bmem_tc_bin *bn = tc_bin(tc, key, &bk);
            const unsigned n = atomic_load_explicit(&bn->n, memory_order_relaxed);
            if (NM_LIKELY((anc & (ANC_LIVE | ANC_GEN_MASK)) == (ANC_LIVE | gen) && bk == key && n < bn->lim)) {
                tc_push(bn, n, a, h);
                return NM_OK;
            }
        }
    }
    return free_slow(d, h);
}

nm_err bmem_dev_flush_thread_cache(bmem_dev *d)
{
    if (!d) return nm_fail(NM_EINVAL, "bmem: NULL device");
    bmem_tcache *tc = d->cache ? bmem_tc_find(d) : NULL;
    if (tc && bmem_tc_nonempty(tc)) bmem_tc_flush(d, tc);
    return NM_OK;
}

nm_err bmem_dev_geom(bmem_dev *d, bmem_ptr h, bmem_geom *out)
{
    if (!d || !out) return nm_fail(NM_EINVAL, "bmem: NULL argument");
    nm_err e = precheck(d, h);
    if (e) return e;
    bmem_bank *b = &d->banks[h >> H_BANK_SHIFT];
    bmem_bank_lock(b);
    unsigned bi = 0, r = 0, s = 0;
    uint64_t anc = 0;
    e = lookup_locked(d, h, &bi, &r, &s, &anc);
    if (!e) anchor_geom(anc, bi, r, s, out);
    bmem_bank_unlock(b);
    return e;
}

/* ---- allocation ---- */
static nm_err alloc_in_banks(bmem_dev *d, unsigned start, unsigned p, unsigned q, bmem_dim dim, bmem_ptr *out)
{
    const uint64_t need = (uint64_t)p * q;
    for (unsigned i = 0; i < d->cfg.banks; i++) {
        unsigned bi = start + i < d->cfg.banks ? start + i : start + i - d->cfg.banks;
        bmem_bank *b = &d->banks[bi];
        if (atomic_load_explicit(&b->free_cells, memory_order_relaxed) < need) continue;
        bmem_bank_lock(b);
        unsigned r = 0, s = 0;
        if (s_find(d, b, p, q, &r, &s)) {
            *out = commit(d, bi, r, s, p, q, dim);
            bmem_bank_unlock(b);
            return NM_OK;
        }
        bmem_bank_unlock(b);
    }
    return nm_fail(NM_ENOMEM, "bmem: no free %u-subarray x %u-row rectangle in any bank", p, q);
}

/* A request that would fail returns the caller's own cached cells to their
 * banks and tries once more (other threads' caches are left alone). */
static nm_err alloc_in_banks_or_flush(bmem_dev *d, unsigned start, unsigned p, unsigned q, bmem_dim dim,
                                      bmem_ptr *out)
{
    nm_err e = alloc_in_banks(d, start, p, q, dim, out);
    if (NM_UNLIKELY(e == NM_ENOMEM) && d->cache) {
        bmem_tcache *tc = bmem_tc_find(d);
        if (tc && bmem_tc_nonempty(tc)) {
            bmem_tc_flush(d, tc);
            e = alloc_in_banks(d, start, p, q, dim, out);
        }
    }
    return e;
}

static inline nm_err alloc_shape(bmem_dev *d, unsigned p, unsigned q, bmem_dim dim, bmem_ptr *out)
{
    if (d->cache) {
        bmem_tcache *tc = bmem_tc_get(d);
        if (NM_LIKELY(tc) && tc_take(d, tc, bmem_tc_key(dim, p, q), out)) return NM_OK;
    }
    return alloc_in_banks_or_flush(d, home_bank(d), p, q, dim, out);
}

static nm_err check_raw(const bmem_dev *d, unsigned p, unsigned q)
{
    if (!p || !q) return nm_fail(NM_ERANGE, "bmem: zero-sized raw request (%u subarrays x %u rows)", p, q);
    if (p > d->cfg.subarrays || q > d->cfg.rows)
        return nm_fail(NM_ERANGE, "bmem: %u subarrays x %u rows is larger than a bank (%u x %u)", p, q,
                       d->cfg.subarrays, d->cfg.rows);
    return NM_OK;
}

static nm_err __attribute__((noinline)) malloc_slow(bmem_dev *d, size_t size, bmem_dim dim, bmem_ptr *out)
{
    if (!out) return nm_fail(NM_EINVAL, "bmem: NULL out");
    *out = BMEM_NULL;
    if (!d) return nm_fail(NM_EINVAL, "bmem: NULL device");
    unsigned p = 1, q;
    /* the two common shapes without the general mapping's divisions */
    if (dim == BMEM_HORIZ && size - 1 < d->h_cell_bytes) {
        q = 1;
    } else if (dim == BMEM_VERT && size - 1 < d->v_col_bytes) {
        q = (unsigned)size * 8;
    } else {
        nm_err e = bmem_size_to_shape(&d->cfg, size, dim, &p, &q);
        if (e) return e;
    }
    return alloc_shape(d, p, q, dim, out);
}

nm_err bmem_dev_malloc(bmem_dev *d, size_t size, bmem_dim dim, bmem_ptr *out)
{
    /* hot path: one cell (horizontal) or one column (vertical) taken back
     * from the caller's cache, without calls; everything else in malloc_slow */
    bmem_tcache *tc = bmem_t_tc;
    /* a cache for d exists only when d has the cache on */
    if (NM_LIKELY(out && d && tc && tc->dev_id == d->id)) {
        uint32_t key;
        if (dim == BMEM_HORIZ && size - 1 < d->h_cell_bytes)
            key = bmem_tc_key(BMEM_HORIZ, 1, 1);
        else if (dim == BMEM_VERT && size - 1 < d->v_col_bytes)
            key = bmem_tc_key(BMEM_VERT, 1, (unsigned)size * 8);
        else
            return malloc_slow(d, size, dim, out);
        uint32_t bk;
        bmem_tc_bin *bn = tc_bin(tc, key, &bk);
        const unsigned n = atomic_load_explicit(&bn->n, memory_order_relaxed);
        if (NM_LIKELY(n && bk == key) && NM_LIKELY(tc_pop(d, tc, bn, n, out))) return NM_OK;
    }
    return malloc_slow(d, size, dim, out);
}

nm_err bmem_dev_malloc_raw(bmem_dev *d, unsigned p, unsigned q, bmem_ptr *out)
{
    if (!out) return nm_fail(NM_EINVAL, "bmem: NULL out");
    *out = BMEM_NULL;
    if (!d) return nm_fail(NM_EINVAL, "bmem: NULL device");
    nm_err e = check_raw(d, p, q);
    if (e) return e;
    return alloc_shape(d, p, q, BMEM_RAW, out);
}

/* Co-located search (bank lock held): same rows as near, nearest subarrays:
 * right neighbour, left neighbour, then farther out on both sides (distance =
 * subarrays skipped). */
static bool near_search(bmem_dev *d, const bmem_bank *b, const bmem_geom *g, unsigned p, unsigned q, unsigned *sub)
{
    const unsigned S = d->cfg.subarrays;
    if (g->row + q > d->cfg.rows) return false;
    for (unsigned dist = 0; dist < S; dist++) {
        unsigned right = g->sub + g->nsubs + dist;
        if (right + p <= S && s_fits(d, b, g->row, right, p, q)) {
            *sub = right;
            return true;
        }
        if (g->sub >= p + dist && s_fits(d, b, g->row, g->sub - p - dist, p, q)) {
            *sub = g->sub - p - dist;
            return true;
        }
    }
    return false;
}

nm_err bmem_dev_malloc_near(bmem_dev *d, size_t size, bmem_dim dim, unsigned nsubs, unsigned nrows, bmem_ptr near,
                            unsigned flags, bmem_ptr *out)
{
    if (!out) return nm_fail(NM_EINVAL, "bmem: NULL out");
    *out = BMEM_NULL;
    if (!d) return nm_fail(NM_EINVAL, "bmem: NULL device");
    if (flags & ~BMEM_NEAR_STRICT) return nm_fail(NM_EINVAL, "bmem: unknown flags %#x", flags);
    unsigned p = nsubs, q = nrows;
    nm_err e = dim == BMEM_RAW ? check_raw(d, p, q) : bmem_size_to_shape(&d->cfg, size, dim, &p, &q);
    if (e) return e;
    e = precheck(d, near);
    if (e) return e == NM_EBADFREE ? nm_fail(NM_EINVAL, "bmem: near handle: %s", nm_last_errmsg()) : e;

    /* A hinted request bypasses the cache (it needs a place, not a shape),
     * and the caller's own cached cells in near's bank are returned first so
     * that they never push the operand away from its neighbour (only once
     * near is known to be live: an error changes nothing). */
    const unsigned nb = (unsigned)(near >> H_BANK_SHIFT);
    bmem_tcache *tc = d->cache ? bmem_tc_find(d) : NULL;
    bool flushed = !(tc && bmem_tc_holds_bank(tc, nb));
    bmem_bank *b = &d->banks[nb];
    unsigned bi = 0, r0 = 0, s0 = 0;
    uint64_t anc = 0;
    for (;;) {
        bmem_bank_lock(b);
        e = lookup_locked(d, near, &bi, &r0, &s0, &anc);
        if (e) {
            bmem_bank_unlock(b);
            return nm_fail(NM_EINVAL, "bmem: near handle is not a live allocation (%s)", nm_last_errmsg());
        }
        if (flushed) break;
        bmem_bank_unlock(b);
        bmem_tc_flush(d, tc);
        flushed = true;
    }
    bmem_geom g;
    anchor_geom(anc, bi, r0, s0, &g);
    unsigned sub = 0;
    if (near_search(d, b, &g, p, q, &sub)) {
        *out = commit(d, bi, r0, sub, p, q, dim);
        bmem_bank_unlock(b);
        return NM_OK;
    }
    bmem_bank_unlock(b);
    if (flags & BMEM_NEAR_STRICT)
        return nm_fail(NM_ENOMEM, "bmem: no free %u x %u rectangle on rows %u.. next to the given allocation", p, q, r0);
    return alloc_in_banks_or_flush(d, bi, p, q, dim, out);
}

/* ---- the paper's process-wide interface (Sec. 4.3) ---- */
static bmem_dev *g_dev;

nm_err bmem_init(uint32_t rows, uint32_t columns, uint32_t subarrays, uint32_t banks)
{
    if (g_dev) return nm_fail(NM_ESTATE, "bmem_init: already initialised (call bmem_dtor first)");
    bmem_config c = {rows, columns, subarrays, banks, BMEM_ALGO_FAST, 0};
    return bmem_dev_create(&c, &g_dev);
}

bmem_ptr bmem_malloc(size_t size, bmem_dim dim)
{
    bmem_ptr p = BMEM_NULL;
    if (!g_dev) {
        nm_fail(NM_ESTATE, "bmem_malloc: bmem_init was not called");
        return BMEM_NULL;
    }
    bmem_dev_malloc(g_dev, size, dim, &p);
    return p;
}

bmem_ptr bmem_malloc_raw(unsigned subarrays, unsigned rows)
{
    bmem_ptr p = BMEM_NULL;
    if (!g_dev) {
        nm_fail(NM_ESTATE, "bmem_malloc_raw: bmem_init was not called");
        return BMEM_NULL;
    }
    bmem_dev_malloc_raw(g_dev, subarrays, rows, &p);
    return p;
}

nm_err bmem_free(bmem_ptr p)
{
    if (!g_dev) return nm_fail(NM_ESTATE, "bmem_free: bmem_init was not called");
    return bmem_dev_free(g_dev, p);
}

void bmem_dtor(void)
{
    bmem_dev_destroy(g_dev);
    g_dev = NULL;
}

bmem_dev *bmem_global(void) { return g_dev; }
