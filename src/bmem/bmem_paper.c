/* The paper's algorithm (Leidel, Sec. 4.2), kept as the selectable baseline.
 *
 * State: a bit matrix with one bit per (row, subarray), 1 = allocated; the
 * subarray contig vector sc[row] = longest run of free subarrays in that row;
 * the row contig vector rc[sub] = longest run of free rows in that subarray.
 *
 * Search, two stages. Stage 1 uses the contig vectors only: a window of p
 * subarrays is a candidate when every rc in it is >= q, a window of q rows
 * when every sc in it is >= p (sliding counts, O(S + R)). Stage 2 checks the
 * p x q cross-section of each candidate pair bit by bit, O(p * q). The paper
 * stops at "the first intersecting block"; we keep trying candidate pairs in
 * column-major order until one passes, so the search is complete (it fails
 * only when no free rectangle exists) and returns the same rectangle as the
 * fast structure. Worst case O(S * R * p * q).
 *
 * Update after alloc or free: set or clear p * q bits, then recompute sc for
 * the q rows (S bits each) and rc for the p subarrays (R bits each):
 * O(p*q + q*S + p*R), as the paper describes ("the contig vectors are each
 * updated based upon the updated continuity of unallocated space"). */
#include <stdlib.h>

#include "bmem_internal.h"

static inline bool bit(const bmem_dev *d, const bmem_paper *m, unsigned row, unsigned sub)
{
    return nm_bitmap_test(m->bits, (size_t)row * d->cfg.subarrays + sub);
}

nm_err bmem_paper_init(const bmem_dev *d, bmem_bank *b)
{
    bmem_paper *m = &b->u.paper;
    size_t nbits = (size_t)d->cfg.rows * d->cfg.subarrays;
    m->bits = calloc(nm_bitmap_words(nbits), sizeof(uint64_t));
    m->sc = malloc((size_t)d->cfg.rows * sizeof(uint32_t));
    m->rc = malloc((size_t)d->cfg.subarrays * sizeof(uint32_t));
    if (!m->bits || !m->sc || !m->rc) {
        bmem_paper_fini(b);
        return nm_fail(NM_ENOMEM, "bmem: no host memory for the bit matrix of a bank");
    }
    for (unsigned r = 0; r < d->cfg.rows; r++) m->sc[r] = d->cfg.subarrays;
    for (unsigned s = 0; s < d->cfg.subarrays; s++) m->rc[s] = d->cfg.rows;
    return NM_OK;
}

void bmem_paper_fini(bmem_bank *b)
{
    free(b->u.paper.bits);
    free(b->u.paper.sc);
    free(b->u.paper.rc);
    b->u.paper.bits = NULL;
    b->u.paper.sc = b->u.paper.rc = NULL;
}

bool bmem_paper_fits(const bmem_dev *d, const bmem_bank *b, unsigned row, unsigned sub, unsigned p, unsigned q)
{
    const bmem_paper *m = &b->u.paper;
    for (unsigned r = row; r < row + q; r++)
        for (unsigned s = sub; s < sub + p; s++)
            if (bit(d, m, r, s)) return false;
    return true;
}

bool bmem_paper_find(const bmem_dev *d, const bmem_bank *b, unsigned p, unsigned q, unsigned *row, unsigned *sub)
{
    const bmem_paper *m = &b->u.paper;
    const unsigned S = d->cfg.subarrays, R = d->cfg.rows;
    unsigned sgood = 0;
    for (unsigned s = 0; s < S; s++) {
        /* stage 1, subarrays: p adjacent subarrays each with a free row run >= q */
        sgood = m->rc[s] >= q ? sgood + 1 : 0;
        if (sgood < p) continue;
        unsigned s0 = s + 1 - p;
        unsigned rgood = 0;
        for (unsigned r = 0; r < R; r++) {
            /* stage 1, rows: q adjacent rows each with a free subarray run >= p */
            rgood = m->sc[r] >= p ? rgood + 1 : 0;
            if (rgood < q) continue;
            unsigned r0 = r + 1 - q;
            /* stage 2: the p x q cross-section, bit by bit */
            if (bmem_paper_fits(d, b, r0, s0, p, q)) {
                *row = r0;
                *sub = s0;
                return true;
            }
        }
    }
    return false;
}

static uint32_t longest_free_in_row(const bmem_dev *d, const bmem_paper *m, unsigned r)
{
    uint32_t best = 0, run = 0;
    for (unsigned s = 0; s < d->cfg.subarrays; s++) {
        run = bit(d, m, r, s) ? 0 : run + 1;
        if (run > best) best = run;
    }
    return best;
}

static uint32_t longest_free_in_sub(const bmem_dev *d, const bmem_paper *m, unsigned s)
{
    uint32_t best = 0, run = 0;
    for (unsigned r = 0; r < d->cfg.rows; r++) {
        run = bit(d, m, r, s) ? 0 : run + 1;
        if (run > best) best = run;
    }
    return best;
}

void bmem_paper_mark(const bmem_dev *d, bmem_bank *b, unsigned row, unsigned sub, unsigned p, unsigned q, bool alloc)
{
    bmem_paper *m = &b->u.paper;
    const unsigned S = d->cfg.subarrays;
    for (unsigned r = row; r < row + q; r++)
        for (unsigned s = sub; s < sub + p; s++) {
            if (alloc)
                nm_bitmap_set(m->bits, (size_t)r * S + s);
            else
                nm_bitmap_clear(m->bits, (size_t)r * S + s);
        }
    for (unsigned r = row; r < row + q; r++) m->sc[r] = longest_free_in_row(d, m, r);
    for (unsigned s = sub; s < sub + p; s++) m->rc[s] = longest_free_in_sub(d, m, s);
}

bool bmem_paper_cell_free(const bmem_dev *d, const bmem_bank *b, unsigned row, unsigned sub)
{
    return !bit(d, &b->u.paper, row, sub);
}
