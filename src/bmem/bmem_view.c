/* Read-only views of a bmem device: statistics, the largest free rectangle,
 * snapshots and the compact text map. Each takes one bank lock at a time. */
#include <stdlib.h>
#include <string.h>

#include "bmem_internal.h"

/* Largest all-free rectangle in a bank: per row, the height of free cells
 * ending there in each subarray, then the largest rectangle under that
 * histogram with a monotonic stack. O(rows * subarrays). */
static void largest_free(const bmem_dev *d, const bmem_bank *b, unsigned *rows, unsigned *subs, uint32_t *h,
                         uint32_t *stk)
{
    const unsigned S = d->cfg.subarrays, R = d->cfg.rows;
    uint64_t best = 0;
    unsigned br = 0, bs = 0;
    memset(h, 0, S * sizeof *h);
    for (unsigned r = 0; r < R; r++) {
        for (unsigned s = 0; s < S; s++) h[s] = bmem_cell_free(d, b, r, s) ? h[s] + 1 : 0;
        unsigned top = 0;
        for (unsigned s = 0; s <= S; s++) {
            uint32_t cur = s < S ? h[s] : 0;
            while (top && h[stk[top - 1]] >= cur) {
                uint32_t height = h[stk[--top]];
                unsigned left = top ? stk[top - 1] + 1 : 0;
                unsigned width = s - left;
                uint64_t area = (uint64_t)height * width;
                if (area > best || (area == best && area && height > br)) {
                    best = area;
                    br = height;
                    bs = width;
                }
            }
            stk[top++] = s;
        }
    }
    *rows = br;
    *subs = bs;
}

nm_err bmem_dev_stats(bmem_dev *d, bmem_stats *out, bmem_bank_stats *per_bank)
{
    if (!d || !out) return nm_fail(NM_EINVAL, "bmem: NULL argument");
    const uint64_t cells_per_bank = (uint64_t)d->cfg.rows * d->cfg.subarrays;
    const unsigned B = d->cfg.banks;
    uint32_t *h = NULL, *stk = NULL;
    /* cached allocations and cells per bank, from every thread's cache */
    uint64_t *c_allocs = calloc(2 * (size_t)B, sizeof(uint64_t)), *c_cells = c_allocs + B;
    if (per_bank) {
        h = malloc((d->cfg.subarrays + 1) * sizeof *h);
        stk = malloc((d->cfg.subarrays + 1) * sizeof *stk);
    }
    if (!c_allocs || (per_bank && (!h || !stk))) {
        free(h);
        free(stk);
        free(c_allocs);
        return nm_fail(NM_ENOMEM, "bmem: no host memory for statistics");
    }
    if (d->cache) bmem_tc_count(d, c_allocs, c_cells);
    memset(out, 0, sizeof *out);
    out->cells_total = cells_per_bank * B;
    out->bytes_total = out->cells_total * d->cfg.columns / 8;
    out->cache_conflicts = atomic_load_explicit(&d->tc_conflicts, memory_order_relaxed);
    for (unsigned i = 0; i < B; i++) {
        bmem_bank *b = &d->banks[i];
        bmem_bank_lock(b);
        const uint64_t fr = atomic_load_explicit(&b->free_cells, memory_order_relaxed);
        /* the bank counts cached rectangles as claimed; the caches were read a
         * moment earlier, so clamp (exact when the device is quiescent) */
        const uint64_t claimed = cells_per_bank - fr;
        const uint64_t cc = NM_MIN(c_cells[i], claimed);
        const uint64_t ca = NM_MIN(c_allocs[i], (uint64_t)b->live);
        out->cells_free += fr;
        out->cells_cached += cc;
        out->cells_allocated += claimed - cc;
        out->cached += ca;
        out->allocations += b->live - ca;
        if (per_bank) {
            per_bank[i].cells_free = fr;
            per_bank[i].cells_cached = cc;
            per_bank[i].cells_allocated = claimed - cc;
            per_bank[i].cached = (unsigned)ca;
            per_bank[i].allocations = b->live - (unsigned)ca;
            largest_free(d, b, &per_bank[i].largest_free_rows, &per_bank[i].largest_free_subs, h, stk);
        }
        bmem_bank_unlock(b);
    }
    free(h);
    free(stk);
    free(c_allocs);
    return NM_OK;
}

/* Label every cell of one bank (lock held): 0 free, BMEM_SNAP_CACHED for a
 * rectangle in a thread cache, 1 + k % 254 for the k-th live allocation in
 * row-major order of first cells. */
static void label_bank(const bmem_dev *d, const bmem_bank *b, uint8_t *out)
{
    const unsigned S = d->cfg.subarrays, R = d->cfg.rows;
    memset(out, 0, (size_t)R * S);
    unsigned k = 0;
    for (unsigned r = 0; r < R; r++)
        for (unsigned s = 0; s < S; s++) {
            uint64_t a = atomic_load_explicit(&b->anchor[(size_t)r * S + s], memory_order_relaxed);
            if (!(a & (ANC_LIVE | ANC_CACHED))) continue;
            unsigned q = (unsigned)((a >> ANC_Q_SHIFT) & 0xffff) + 1, p = (unsigned)((a >> ANC_P_SHIFT) & 0x3ff) + 1;
            uint8_t lab = a & ANC_LIVE ? (uint8_t)(1 + k++ % 254) : BMEM_SNAP_CACHED;
            for (unsigned rr = r; rr < r + q; rr++) memset(out + (size_t)rr * S + s, lab, p);
        }
}

nm_err bmem_dev_snapshot(bmem_dev *d, unsigned bank, uint8_t *out, size_t out_len)
{
    if (!d || !out) return nm_fail(NM_EINVAL, "bmem: NULL argument");
    if (bank >= d->cfg.banks) return nm_fail(NM_ERANGE, "bmem: bank %u of %u", bank, d->cfg.banks);
    size_t need = (size_t)d->cfg.rows * d->cfg.subarrays;
    if (out_len < need) return nm_fail(NM_ERANGE, "bmem: snapshot needs %zu bytes, got %zu", need, out_len);
    bmem_bank *b = &d->banks[bank];
    bmem_bank_lock(b);
    label_bank(d, b, out);
    bmem_bank_unlock(b);
    return NM_OK;
}

nm_err bmem_dev_text_map(bmem_dev *d, unsigned bank, unsigned row_groups, char *buf, size_t len)
{
    if (!d || !buf) return nm_fail(NM_EINVAL, "bmem: NULL argument");
    if (bank >= d->cfg.banks) return nm_fail(NM_ERANGE, "bmem: bank %u of %u", bank, d->cfg.banks);
    const unsigned S = d->cfg.subarrays, R = d->cfg.rows;
    if (row_groups == 0 || row_groups > R) row_groups = R;
    size_t need = (size_t)row_groups * (S + 1) + 1;
    if (len < need) return nm_fail(NM_ERANGE, "bmem: text map needs %zu bytes, got %zu", need, len);
    bmem_bank *b = &d->banks[bank];
    char *o = buf;
    bmem_bank_lock(b);
    for (unsigned g = 0; g < row_groups; g++) {
        unsigned r0 = (unsigned)((uint64_t)g * R / row_groups), r1 = (unsigned)((uint64_t)(g + 1) * R / row_groups);
        for (unsigned s = 0; s < S; s++) {
            unsigned used = 0;
            for (unsigned r = r0; r < r1; r++) used += !bmem_cell_free(d, b, r, s);
            unsigned n = r1 - r0;
            *o++ = used == 0 ? ' ' : used * 3 < n ? '.' : used * 3 < 2 * n ? '+' : '#';
        }
        *o++ = '\n';
    }
    bmem_bank_unlock(b);
    *o = '\0';
    return NM_OK;
}
