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

/* Windows of p > 1 subarrays (out of line: it needs an R/64-word buffer). */
bool bmem_fast_find_wide(const bmem_dev *d, const bmem_bank *b, unsigned p, unsigned q, unsigned *row, unsigned *sub);

static inline bool bmem_fast_find(const bmem_dev *d, const bmem_bank *b, unsigned p, unsigned q, unsigned *row, unsigned *sub)
{
    if (p > 1) return bmem_fast_find_wide(d, b, p, q, row, sub);
    const unsigned S = d->cfg.subarrays, R = d->cfg.rows;
    const uint32_t *cf = b->u.fast.colfree;
    for (unsigned s = 0; s < S; s++) {
        if (cf[s] < q) continue;
        const uint64_t *c = bmem_fast_column(d, b, s);
        size_t r;
        if (cf[s] == R) {
            r = 0; /* an empty subarray: first fit is its first row */
        } else if (q == 1) {
            /* one cell: the first non-zero word */
            unsigned k = 0;
            while (!c[k]) k++; /* cf[s] > 0 guarantees a set bit */
            r = k * 64 + nm_ctz64(c[k]);
        } else {
            r = nm_bitmap_find_set_run(c, R, q, 0);
            if (r == NM_BITMAP_NONE) continue;
        }
        *row = (unsigned)r;
        *sub = s;
        return true;
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
    uint64_t *c = b->u.fast.col + (size_t)sub * d->rw;
    if (NM_LIKELY(p == 1 && (row & 63) + q <= 64)) {
        /* one subarray, rows inside one word: the malloc-test shapes */
        uint64_t m = bmem_word_mask(row & 63, q);
        if (alloc) {
            c[row >> 6] &= ~m;
            b->u.fast.colfree[sub] -= q;
        } else {
            c[row >> 6] |= m;
            b->u.fast.colfree[sub] += q;
        }
        return;
    }
    for (unsigned i = 0; i < p; i++) {
        bmem_col_update(c + (size_t)i * d->rw, row, q, alloc);
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
