/* Slabs (slab layer; docs/pmalloc.md, "Code layout"): the volatile side of a
 * 64 KiB slab, below both its users, the small allocator (small.c) and slab
 * morphing (morph.c): geometry, the type-stable vslab pool, an arena's partial
 * and LRU lists, and giving an empty slab back to the extents (large.c). */
#include <stdlib.h>
#include <string.h>

#include "nearmem/common/bitmap.h"
#include "pm_slabs.h"

void pm_slab_layout(unsigned block_size, unsigned stripes, uint32_t *nblocks, uint32_t *bm_lines, uint32_t *data_off)
{
    uint32_t n = (PMALLOC_SLAB_SIZE - PM_LINE * (1 + PM_SLAB_RESERVED_LINES + 1)) / block_size;
    for (;; n--) {
        uint32_t per = 512u * stripes;
        uint32_t lines = ((n + per - 1) / per) * stripes;
        uint32_t hdr = (1 + lines + PM_SLAB_RESERVED_LINES) * PM_LINE;
        if (hdr + (uint64_t)n * block_size <= PMALLOC_SLAB_SIZE) {
            *nblocks = n;
            *bm_lines = lines;
            *data_off = hdr;
            return;
        }
    }
}

/* vslabs are type-stable: a released one goes back to a per-heap pool (under
 * large_lock) and is freed only at close, so a free or lookup that read a
 * VEH's slab pointer without a lock touches a vslab, maybe a recycled one, and
 * never freed memory; pm_slab_pin validates it. `busy` survives recycling
 * (each reader's increment is undone on the struct it was made on). */
static pm_vslab *vslab_new(pm_heap *h, pm_veh *v, pm_slab_hdr *hd)
{
    pm_vslab *s = h->vslab_pool;
    if (s) {
        h->vslab_pool = s->pool_next;
        uint32_t busy = __atomic_load_n(&s->busy, __ATOMIC_RELAXED);
        uint64_t *claim = s->claim;
        pm_vslab *all = s->all_next;
        memset(s, 0, sizeof *s);
        __atomic_store_n(&s->busy, busy, __ATOMIC_RELAXED);
        s->claim = claim;
        s->all_next = all;
        memset(s->claim, 0, nm_bitmap_words(PMALLOC_SLAB_SIZE / 16u) * sizeof(uint64_t));
    } else {
        s = calloc(1, sizeof *s);
        if (!s) return NULL;
        /* a bit per 16 bytes of the slab: block starts under any geometry (morphing) */
        s->claim = calloc(nm_bitmap_words(PMALLOC_SLAB_SIZE / 16u), sizeof(uint64_t));
        if (!s->claim) { free(s); return NULL; }
        s->all_next = h->vslab_all;
        h->vslab_all = s;
    }
    s->vbm = calloc(nm_bitmap_words(hd->nblocks), sizeof(uint64_t));
    if (!s->vbm) { s->pool_next = h->vslab_pool; h->vslab_pool = s; return NULL; }
    s->veh = v;
    s->hdr = hd;
    s->pbm = (uint64_t *)((char *)hd + PM_LINE);
    s->data = (char *)hd + hd->data_off;
    s->block_size = hd->block_size;
    s->nblocks = hd->nblocks;
    s->cls = hd->cls;
    s->stripes = hd->stripes;
    s->arena = &h->arenas[hd->arena % h->narenas];
    __atomic_store_n(&v->slab, s, __ATOMIC_RELEASE);
    return s;
}

pm_vslab *pm_slab_vol_new(pm_heap *h, pm_veh *v, pm_slab_hdr *hd) { return vslab_new(h, v, hd); }

void pm_slab_free_vol(pm_heap *h, pm_vslab *s)
{
    if (!s) return;
    __atomic_store_n(&s->gone, 1, __ATOMIC_SEQ_CST);
    pm_morph_free(s);
    pm_numa_rslab_free(s);
    free(s->vbm);
    s->vbm = NULL;
    s->pool_next = h->vslab_pool;
    h->vslab_pool = s;
}

/* close: the volatile state of every slab (before the extents go, pm_large_free_all) */
void pm_slab_free_vol_all(pm_heap *h)
{
    if (h->pmap) {
        for (uint64_t p = 0; p < h->data_pages; p++) {
            pm_veh *v = h->pmap[p];
            if (v && v->page == p) {
                if (v->slab) pm_slab_free_vol(h, v->slab);
                p += v->npages - 1;
            }
        }
    }
}

void pm_vslabs_destroy(pm_heap *h)
{
    while (h->vslab_all) {
        pm_vslab *s = h->vslab_all;
        h->vslab_all = s->all_next;
        if (s->vbm) { pm_morph_free(s); pm_numa_rslab_free(s); free(s->vbm); }
        free(s->claim);
        free(s);
    }
    h->vslab_pool = NULL;
}

/* Give an empty slab back to the large allocator (arena lock held). Its
 * blocks are all free in DRAM and, under LOG, durably free in the bitmap.
 * false: kept, because a lock-free reader is on it (pm_slab_enter) or the log
 * is full. */
static bool slab_release(pm_heap *h, pm_vslab *s)
{
    __atomic_store_n(&s->gone, 1, __ATOMIC_SEQ_CST); /* first mark it, then look for readers */
    if (__atomic_load_n(&s->busy, __ATOMIC_SEQ_CST)) {
        __atomic_store_n(&s->gone, 0, __ATOMIC_SEQ_CST);
        return false;
    }
    /* LOG: records of its blocks must be settled before its pages can hold
     * another slab or extent: recovery would replay them onto the newcomer */
    if (h->model == PMALLOC_LOG && pm_up_checkpoint(h, 0) != NM_OK) {
        __atomic_store_n(&s->gone, 0, __ATOMIC_SEQ_CST);
        return false;
    }
    pm_slab_partial_del(s->arena, s);
    pthread_mutex_lock(&h->large_lock);
    pm_veh *v = s->veh;
    if (pm_bk_tombstone(h, v) == NM_OK) {
        pm_bk_settle(h); /* before the pages are reused */
        pm_morph_lru_del(s->arena, s);
        __atomic_store_n(&v->slab, NULL, __ATOMIC_RELEASE);
        pm_extent_release(h, v);
        pm_slab_free_vol(h, s);
        pthread_mutex_unlock(&h->large_lock);
        return true;
    }
    __atomic_store_n(&s->gone, 0, __ATOMIC_SEQ_CST);
    pm_slab_partial_add(s->arena, s); /* log full: keep the slab */
    pthread_mutex_unlock(&h->large_lock);
    return false;
}

void pm_slab_settle(pm_heap *h, pm_vslab *s)
{
    /* old blocks pin a morphed slab; a reader inside (busy: a remote free that
     * has recorded its block, a lookup) keeps it until a later put */
    if (s->nfree_v == s->nblocks && !(s->mo && s->mo->nold)) {
        /* keep one empty slab per class in the arena; release the others */
        pm_arena *a = s->arena;
        bool other = a->partial[s->cls] && (a->partial[s->cls] != s || s->next);
        if (other && slab_release(h, s)) return;
    }
    if (s->nfree_v) pm_slab_partial_add(s->arena, s);
}

void pm_slab_fix_lists(pm_heap *h, pm_vslab *s)
{
    NM_UNUSED(h);
    if (s->nfree_v == 0) pm_slab_partial_del(s->arena, s);
    else pm_slab_partial_add(s->arena, s);
}

/* ---- LRU list (per arena, under its lock): head = least recently allocated from (morph.c) ---- */

void pm_morph_lru_add(pm_arena *a, pm_vslab *s)
{
    if (s->in_lru) return;
    s->lru_next = NULL;
    s->lru_prev = a->lru_tail;
    if (a->lru_tail) a->lru_tail->lru_next = s;
    else a->lru_head = s;
    a->lru_tail = s;
    s->in_lru = true;
}

void pm_morph_lru_del(pm_arena *a, pm_vslab *s)
{
    if (!s->in_lru) return;
    if (s->lru_prev) s->lru_prev->lru_next = s->lru_next;
    else a->lru_head = s->lru_next;
    if (s->lru_next) s->lru_next->lru_prev = s->lru_prev;
    else a->lru_tail = s->lru_prev;
    s->lru_next = s->lru_prev = NULL;
    s->in_lru = false;
}

void pm_morph_touch(pm_arena *a, pm_vslab *s)
{
    if (s->in_lru && a->lru_tail != s) {
        pm_morph_lru_del(a, s);
        pm_morph_lru_add(a, s);
    }
}

void pm_morph_free(pm_vslab *s)
{
    if (!s->mo) return;
    free(s->mo->cnt);
    free(s->mo->gcold);
    free(s->mo);
    s->mo = NULL;
}

void pm_numa_rslab_free(pm_vslab *s)
{
    pm_rslab *rs = s->rs;
    if (!rs) return;
    pthread_mutex_destroy(&rs->lock);
    free(rs->shadow);
    free(rs);
    s->rs = NULL;
}
