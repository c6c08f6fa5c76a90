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

/* LOG: an empty slab remembers the clock (arena lock held): every record of
 * its blocks was taken before it became empty (a block leaves the slab before
 * its allocation's record and comes back after its free's). */
static inline void note_empty(pm_heap *h, pm_vslab *s)
{
    if (s->nfree_v == s->nblocks) s->empty_at = __atomic_load_n(&h->clock, __ATOMIC_SEQ_CST);
}

/* Give an empty slab back to the large allocator (arena lock held). Its
 * blocks are all free in DRAM and, under LOG, durably free in the bitmap.
 * false: kept, because a lock-free reader is on it (pm_slab_enter), the log
 * is full, or (LOG) records of its blocks are not settled yet: recovery would
 * replay them onto a slab or extent that reused its pages. Such a slab stays
 * on its arena's partial list (its blocks can be allocated again) and the
 * first checkpoint after settles them and releases it (pm_slab_sweep): a
 * checkpoint per released slab wrote the pointer lines of a workload that
 * frees whole slabs back many times over (issue 16, threadtest). */
static bool slab_release(pm_heap *h, pm_vslab *s)
{
    if (h->model == PMALLOC_LOG && s->empty_at > __atomic_load_n(&h->gw, __ATOMIC_ACQUIRE) + 1) {
        s->release_wanted = true;
        __atomic_store_n(&s->arena->sweep, true, __ATOMIC_RELAXED);
        __atomic_store_n(&h->sweep_due, 1, __ATOMIC_RELEASE);
        return false;
    }
    __atomic_store_n(&s->gone, 1, __ATOMIC_SEQ_CST); /* first mark it, then look for readers */
    if (__atomic_load_n(&s->busy, __ATOMIC_SEQ_CST)) {
        __atomic_store_n(&s->gone, 0, __ATOMIC_SEQ_CST);
        return false;
    }
    s->release_wanted = false;
    pm_slab_partial_del(s->arena, s);
    pthread_mutex_lock(&h->large_lock);
    pm_veh *v = s->veh;
    pthread_mutex_lock(&h->bk_lock);
    nm_err te = pm_bk_tombstone(h, v);
    if (te == NM_OK) pm_bk_settle(h); /* before the pages are reused */
    pthread_mutex_unlock(&h->bk_lock);
    if (te == NM_OK) {
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

/* An empty slab other than its class's first partial one goes (the arena
 * keeps one empty slab per class; arena lock held). */
static bool slab_try_release(pm_heap *h, pm_vslab *s)
{
    /* old blocks pin a morphed slab; a reader inside (busy: a remote free that
     * has recorded its block, a lookup) keeps it until a later put */
    if (s->nfree_v != s->nblocks || (s->mo && s->mo->nold)) return false;
    pm_arena *a = s->arena;
    bool other = a->partial[s->cls] && (a->partial[s->cls] != s || s->next);
    return other && slab_release(h, s);
}

void pm_slab_settle(pm_heap *h, pm_vslab *s)
{
    note_empty(h, s);
    if (slab_try_release(h, s)) return;
    if (s->nfree_v) pm_slab_partial_add(s->arena, s);
}

void pm_slab_fix_lists(pm_heap *h, pm_vslab *s)
{
    note_empty(h, s);
    if (s->nfree_v == 0) pm_slab_partial_del(s->arena, s);
    else pm_slab_partial_add(s->arena, s);
}

/* After a checkpoint (LOG): the empty slabs that waited for their records to
 * be settled go. The caller may hold an arena lock (a morph's checkpoint):
 * arenas are tried, not waited for, unless `wait` (no lock held: the heap
 * ran out of pages). A slab allocated from meanwhile is no longer empty; one
 * whose records are still not all settled waits again. */
void pm_slab_sweep(pm_heap *h, bool wait)
{
    if (!__atomic_exchange_n(&h->sweep_due, 0, __ATOMIC_ACQ_REL)) return;
    bool again = false;
    for (unsigned i = 0; i < h->narenas; i++) {
        pm_arena *a = &h->arenas[i];
        if (!__atomic_load_n(&a->sweep, __ATOMIC_RELAXED)) continue; /* a hint: set again under the lock if it matters */
        if (wait) pthread_mutex_lock(&a->lock);
        else if (pthread_mutex_trylock(&a->lock) != 0) { again = true; continue; }
        __atomic_store_n(&a->sweep, false, __ATOMIC_RELAXED);
        for (unsigned c = 0; c < PM_NCLS_MAX; c++)
            for (pm_vslab *s = a->partial[c], *next; s; s = next) {
                next = s->next;
                if (!s->release_wanted) continue;
                s->release_wanted = false;
                slab_try_release(h, s); /* may set release_wanted (and the flags) again */
            }
        pthread_mutex_unlock(&a->lock);
    }
    if (again) __atomic_store_n(&h->sweep_due, 1, __ATOMIC_RELEASE);
}

bool pm_slab_sweep_due(pm_heap *h) { return __atomic_load_n(&h->sweep_due, __ATOMIC_ACQUIRE) != 0; }

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
