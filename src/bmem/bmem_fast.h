/* Hot operations of the fast structure (see bmem_fast.c for the design),
 * inline so that bmem.c's allocation and free paths are one function each.
 * The caller holds the bank lock. */
#ifndef NEARMEM_BMEM_FAST_H
#define NEARMEM_BMEM_FAST_H

/* Included by bmem_internal.h (after the types it needs); do not include directly. */

#define BMEM_MAX_RW (BMEM_MAX_ROWS / 64)

/* Clear / set rows [row, row+q) of one column bitboard; one word op when the
 * range stays inside a word (every request of up to 64 rows that does not
 * straddle a word boundary). */
static inline uint64_t bmem_word_mask(unsigned lo, unsigned n)
{
    return (n >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << n) - 1)) << lo;
}
static inline void bmem_col_update(uint64_t *c, unsigned row, unsigned q, bool alloc)
{
    unsigned w = row >> 6, lo = row & 63;
    if (lo + q <= 64) {
        uint64_t m = bmem_word_mask(lo, q);
        c[w] = alloc ? c[w] & ~m : c[w] | m;
        return;
    }
    /* head word, whole words (a plain fill the compiler vectorizes), tail */
    uint64_t m = bmem_word_mask(lo, 64 - lo);
    c[w] = alloc ? c[w] & ~m : c[w] | m;
    unsigned left = q - (64 - lo);
    uint64_t fill = alloc ? 0 : ~(uint64_t)0;
    for (w++; left >= 64; w++, left -= 64) c[w] = fill;
    if (left) {
        m = bmem_word_mask(0, left);
        c[w] = alloc ? c[w] & ~m : c[w] | m;
    }
}

static inline const uint64_t *bmem_fast_column(const bmem_dev *d, const bmem_bank *b, unsigned s)
{
    return b->u.fast.col + (size_t)s * d->rw;
}

static inline bool bmem_fast_find(const bmem_dev *d, const bmem_bank *b, unsigned p, unsigned q, unsigned *row, unsigned *sub)
{
    const unsigned S = d->cfg.subarrays, R = d->cfg.rows, rw = d->rw;
    const uint32_t *cf = b->u.fast.colfree;
    uint64_t tmp[BMEM_MAX_RW];
    if (p == 1 && q == 1) {
        /* one cell: the first column with a free cell, its first free row */
        for (unsigned s = 0; s < S; s++) {
            if (!cf[s]) continue;
            const uint64_t *c = bmem_fast_column(d, b, s);
            for (unsigned k = 0; k < rw; k++)
                if (c[k]) {
                    *row = k * 64 + nm_ctz64(c[k]);
                    *sub = s;
                    return true;
                }
        }
        return false;
    }
    /* `good` = number of consecutive columns ending at s with >= q free cells:
     * a window [s-p+1, s] is a candidate only when good >= p (O(S) filter). */
    unsigned good = 0;
    for (unsigned s = 0; s < S; s++) {
        good = cf[s] >= q ? good + 1 : 0;
        if (good < p) continue;
        unsigned s0 = s + 1 - p;
        size_t r = NM_BITMAP_NONE;
        if (p == 1 && cf[s0] == R) {
            r = 0; /* an empty subarray: first fit is its first row */
        } else if (p == 1) {
            r = nm_bitmap_find_set_run(bmem_fast_column(d, b, s0), R, q, 0);
        } else {
            const uint64_t *c0 = bmem_fast_column(d, b, s0);
            bool any = false;
            for (unsigned k = 0; k < rw; k++) {
                uint64_t m = c0[k];
                for (unsigned i = 1; i < p && m; i++) m &= bmem_fast_column(d, b, s0 + i)[k];
                tmp[k] = m;
                any |= m != 0;
            }
            r = any ? nm_bitmap_find_set_run(tmp, R, q, 0) : NM_BITMAP_NONE;
        }
        if (r != NM_BITMAP_NONE) {
            *row = (unsigned)r;
            *sub = s0;
            return true;
        }
    }
    return false;
}

static inline bool bmem_fast_fits(const bmem_dev *d, const bmem_bank *b, unsigned row, unsigned sub, unsigned p, unsigned q)
{
    for (unsigned i = 0; i < p; i++)
        if (b->u.fast.colfree[sub + i] < q || !nm_bitmap_range_is_set(bmem_fast_column(d, b, sub + i), row, q)) return false;
    return true;
}

static inline void bmem_fast_mark(const bmem_dev *d, bmem_bank *b, unsigned row, unsigned sub, unsigned p, unsigned q, bool alloc)
{
    for (unsigned i = 0; i < p; i++) {
        bmem_col_update(b->u.fast.col + (size_t)(sub + i) * d->rw, row, q, alloc);
        if (alloc)
            b->u.fast.colfree[sub + i] -= q;
        else
            b->u.fast.colfree[sub + i] += q;
    }
}

static inline bool bmem_fast_cell_free(const bmem_dev *d, const bmem_bank *b, unsigned row, unsigned sub)
{
    return nm_bitmap_test(bmem_fast_column(d, b, sub), row);
}

#endif
