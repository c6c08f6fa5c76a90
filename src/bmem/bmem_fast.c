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
