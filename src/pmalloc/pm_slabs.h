/* PMAlloc internals, slab layer (small.c, morph.c, slab.c): small blocks.
 * Thread-cache refill and slab creation, slab morphing (Sec. 5.2), the
 * volatile slab (pool, lists, release). Upcalls: pm_up_checkpoint, pm_up_sync_arena. */
#ifndef PMALLOC_SLABS_H
#define PMALLOC_SLABS_H

#include "pm_extents.h"

/* ---- small.c ---- */
nm_err pm_small_take(pm_heap *h, pm_tcache *tc, unsigned cls, pm_tcblk *out);
void pm_small_put(pm_heap *h, pm_tcache *tc, pm_tcblk k);
nm_err pm_small_init(pm_heap *h);
nm_err pm_slab_adopt(pm_heap *h, pm_veh *v); /* build the vslab of a logged slab */
bool pm_small_block_at(pm_heap *h, uint64_t off, struct pm_vslab **s, uint32_t *idx); /* recovery */
bool pm_small_recover_bit(pm_heap *h, struct pm_vslab *s, uint32_t idx, bool alloc, uint64_t **w); /* recovery */
uint64_t pm_slab_digest_bits(pm_heap *h, struct pm_vslab *s);
void pm_slab_digest_write(pm_heap *h, struct pm_vslab *s); /* flushed, not drained */
void pm_slab_digest_write_all(pm_heap *h);
void pm_slab_digest_toggle(pm_heap *h, struct pm_vslab *s, uint64_t d); /* flushed, not drained */
pm_vslab *pm_small_slab_new(pm_heap *h, pm_arena *a, unsigned cls); /* arena lock held */
void pm_small_vslab_put(pm_heap *h, pm_vslab *s, uint32_t idx);     /* arena lock held */
nm_err pm_small_take_other(pm_heap *h, pm_tcache *tc, unsigned cls, pm_tcblk *out); /* Algorithm 1: other arenas and nodes */
void pm_small_drain(pm_heap *h, pm_tcache *tc); /* every cached and buffered block back to its slab */
bool pm_small_take_from(pm_heap *h, pm_arena *a, unsigned cls, pm_tcblk *out); /* arena lock held */

/* ---- morph.c ---- */
pm_vslab *pm_morph_try(pm_heap *h, pm_tcache *tc, pm_arena *a, unsigned cls); /* arena lock held */
void pm_morph_put_old(pm_heap *h, pm_vslab *s, uint32_t idx);  /* release an old block (bypasses the tcache) */
bool pm_morph_lookup_old(pm_heap *h, pm_vslab *s, uint64_t off, uint32_t *idx);
bool pm_morph_loc_live(pm_heap *h, pm_vslab *s, uint64_t off);
nm_err pm_morph_adopt(pm_heap *h, pm_veh *v, pm_vslab *s); /* open: a slab whose morph word is set */
nm_err pm_morph_check(pm_heap *h, pm_vslab *s, uint64_t *live, uint64_t *objs);
void pm_morph_count(const pm_vslab *s, uint64_t *live, uint64_t *objs);
int pm_morph_walk(pm_heap *h, pm_vslab *s, pmalloc_walk_fn fn, void *arg);
void pm_morph_recover_free_old(pm_heap *h, pm_vslab *s, uint32_t idx); /* WAL redo of an old-block free */
void pm_morph_gc_freeing(pm_heap *h, pm_vslab *s, uint32_t idx); /* GC: an old block's free, before its bit */
nm_err pm_morph_gc_begin(pm_heap *h, pm_vslab *s, uint64_t *before);
bool pm_morph_gc_mark(pm_heap *h, pm_vslab *s, uint64_t w, const uint64_t **push, size_t *words, uint64_t *marked);
void pm_morph_gc_end(pm_heap *h, pm_vslab *s);

/* ---- slab.c ---- */
void pm_morph_lru_add(pm_arena *a, pm_vslab *s);
void pm_morph_lru_del(pm_arena *a, pm_vslab *s);
void pm_morph_touch(pm_arena *a, pm_vslab *s);
void pm_morph_free(pm_vslab *s);
void pm_slab_settle(pm_heap *h, pm_vslab *s); /* partial list / release after blocks came back */
void pm_slab_sweep(pm_heap *h, bool wait);    /* after a checkpoint: release the empty slabs it settled */
bool pm_slab_sweep_due(pm_heap *h);           /* empty slabs wait for a checkpoint */
/* an arena's partial list of class s->cls (arena lock held) */
static inline void pm_slab_partial_add(pm_arena *a, pm_vslab *s)
{
    if (s->in_partial) return;
    s->prev = NULL;
    s->next = a->partial[s->cls];
    if (s->next) s->next->prev = s;
    a->partial[s->cls] = s;
    s->in_partial = true;
}
static inline void pm_slab_partial_del(pm_arena *a, pm_vslab *s)
{
    if (!s->in_partial) return;
    if (s->prev) s->prev->next = s->next;
    else a->partial[s->cls] = s->next;
    if (s->next) s->next->prev = s->prev;
    s->next = s->prev = NULL;
    s->in_partial = false;
}
pm_vslab *pm_slab_vol_new(pm_heap *h, pm_veh *v, pm_slab_hdr *hd);
void pm_slab_fix_lists(pm_heap *h, pm_vslab *s); /* partial-list membership after recovery */
void pm_slab_free_vol(pm_heap *h, pm_vslab *s); /* large_lock held: back to the pool */
void pm_slab_free_vol_all(pm_heap *h);            /* close: every slab's volatile state */
void pm_vslabs_destroy(pm_heap *h);               /* close: every vslab struct */
void pm_slab_layout(unsigned block_size, unsigned stripes, uint32_t *nblocks, uint32_t *bm_lines, uint32_t *data_off);
void pm_numa_rslab_free(pm_vslab *s);

#endif
