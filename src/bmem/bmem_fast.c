/* The fast default search structure: one bitboard per subarray over its rows.
 *
 * Placement is column-major first fit (lowest first subarray, then lowest
 * first row), the contract shared with the paper baseline. For a request of
 * p subarrays x q rows and each window of p adjacent subarrays (skipping
 * windows where a column has fewer than q free cells), the p column words are
 * ANDed 64 rows at a time and a word-level run search (common core bitmap.h)
 * finds the first q free rows. Cost per search: O(S * p * R/64) words in the
 * worst case and one window of p * R/64 words when the first window fits; an
 * update touches p * ceil(q/64) words (paper: O(q*S + p*R) bits). */
#include <stdlib.h>
#include <string.h>

#include "bmem_internal.h"

#define MAX_RW (BMEM_MAX_ROWS / 64)

nm_err bmem_fast_init(const bmem_dev *d, bmem_bank *b)
{
    unsigned S = d->cfg.subarrays;
    b->u.fast.col = malloc((size_t)S * d->rw * sizeof(uint64_t));
    b->u.fast.colfree = malloc((size_t)S * sizeof(uint32_t));
    if (!b->u.fast.col || !b->u.fast.colfree) {
        bmem_fast_fini(b);
        return nm_fail(NM_ENOMEM, "bmem: no host memory for the bitboards of a bank");
    }
    for (unsigned s = 0; s < S; s++) {
        nm_bitmap_fill(b->u.fast.col + (size_t)s * d->rw, d->cfg.rows);
        b->u.fast.colfree[s] = d->cfg.rows;
    }
    return NM_OK;
}

void bmem_fast_fini(bmem_bank *b)
{
    free(b->u.fast.col);
    free(b->u.fast.colfree);
    b->u.fast.col = NULL;
    b->u.fast.colfree = NULL;
}

static inline const uint64_t *column(const bmem_dev *d, const bmem_bank *b, unsigned s)
{
    return b->u.fast.col + (size_t)s * d->rw;
}

bool bmem_fast_find(const bmem_dev *d, const bmem_bank *b, unsigned p, unsigned q, unsigned *row, unsigned *sub)
{
    const unsigned S = d->cfg.subarrays, R = d->cfg.rows, rw = d->rw;
    const uint32_t *cf = b->u.fast.colfree;
    uint64_t tmp[MAX_RW];
    /* `good` = number of consecutive columns ending at s with >= q free cells:
     * a window [s-p+1, s] is a candidate only when good >= p (O(S) filter). */
    if (p == 1 && q == 1) {
        /* one cell: the first column with a free cell, its first free row */
        for (unsigned s = 0; s < S; s++) {
            if (!cf[s]) continue;
            const uint64_t *c = column(d, b, s);
            for (unsigned k = 0; k < rw; k++)
                if (c[k]) {
                    *row = k * 64 + nm_ctz64(c[k]);
                    *sub = s;
                    return true;
                }
        }
        return false;
    }
    unsigned good = 0;
    for (unsigned s = 0; s < S; s++) {
        good = cf[s] >= q ? good + 1 : 0;
        if (good < p) continue;
        unsigned s0 = s + 1 - p;
        size_t r;
        if (p == 1) {
            r = nm_bitmap_find_set_run(column(d, b, s0), R, q, 0);
        } else {
            const uint64_t *c0 = column(d, b, s0);
            bool any = false;
            for (unsigned k = 0; k < rw; k++) {
                uint64_t m = c0[k];
                for (unsigned i = 1; i < p && m; i++) m &= column(d, b, s0 + i)[k];
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

bool bmem_fast_fits(const bmem_dev *d, const bmem_bank *b, unsigned row, unsigned sub, unsigned p, unsigned q)
{
    for (unsigned i = 0; i < p; i++)
        if (b->u.fast.colfree[sub + i] < q || !nm_bitmap_range_is_set(column(d, b, sub + i), row, q)) return false;
    return true;
}

void bmem_fast_mark(const bmem_dev *d, bmem_bank *b, unsigned row, unsigned sub, unsigned p, unsigned q, bool alloc)
{
    if (q == 1 && p == 1) {
        uint64_t *c = b->u.fast.col + (size_t)sub * d->rw;
        if (alloc) {
            nm_bitmap_clear(c, row);
            b->u.fast.colfree[sub]--;
        } else {
            nm_bitmap_set(c, row);
            b->u.fast.colfree[sub]++;
        }
        return;
    }
    for (unsigned i = 0; i < p; i++) {
        uint64_t *c = b->u.fast.col + (size_t)(sub + i) * d->rw;
        if (alloc) {
            nm_bitmap_clear_range(c, row, q);
            b->u.fast.colfree[sub + i] -= q;
        } else {
            nm_bitmap_set_range(c, row, q);
            b->u.fast.colfree[sub + i] += q;
        }
    }
}

bool bmem_fast_cell_free(const bmem_dev *d, const bmem_bank *b, unsigned row, unsigned sub)
{
    return nm_bitmap_test(column(d, b, sub), row);
}
