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

bool bmem_fast_find_wide(const bmem_dev *d, const bmem_bank *b, unsigned p, unsigned q, unsigned *row, unsigned *sub)
{
    const unsigned S = d->cfg.subarrays, R = d->cfg.rows, rw = d->rw;
    const uint32_t *cf = b->u.fast.colfree;
    uint64_t tmp[BMEM_MAX_RW];
    /* `good` = number of consecutive columns ending at s with >= q free cells:
     * a window [s-p+1, s] is a candidate only when good >= p (O(S) filter). */
    unsigned good = 0;
    for (unsigned s = 0; s < S; s++) {
        good = cf[s] >= q ? good + 1 : 0;
        if (good < p) continue;
        unsigned s0 = s + 1 - p;
        const uint64_t *c0 = bmem_fast_column(d, b, s0);
        bool any = false;
        for (unsigned k = 0; k < rw; k++) {
            uint64_t m = c0[k];
            for (unsigned i = 1; i < p && m; i++) m &= bmem_fast_column(d, b, s0 + i)[k];
            tmp[k] = m;
            any |= m != 0;
        }
        size_t r = any ? nm_bitmap_find_set_run(tmp, R, q, 0) : NM_BITMAP_NONE;
        if (r != NM_BITMAP_NONE) {
            *row = (unsigned)r;
            *sub = s0;
            return true;
        }
    }
    return false;
}
