/* PMAlloc internals, extent layer (numa.c, xcache.c, large.c): pages. Node
 * topology and node-local placement, the per-arena extent caches, extents and
 * the bookkeeping log (Sec. 5.3). Upcalls: pm_up_xsync, pm_up_checkpoint (pm_types.h). */
#ifndef PMALLOC_EXTENTS_H
#define PMALLOC_EXTENTS_H

#include "pm_media.h"

/* ---- numa.c ---- */
nm_err pm_numa_setup(pm_heap *h, const pmalloc_options *o); /* topology */
unsigned pm_numa_narenas(pm_heap *h, unsigned want);        /* rounded up to a multiple of the nodes */
unsigned pm_numa_arena_node(const pm_heap *h, unsigned arena);
pm_arena *pm_numa_pick_arena(pm_heap *h, pm_tcache *tc);    /* tc_lock held */
unsigned pm_numa_node_now(const pm_heap *h);               /* node of the CPU the caller runs on */
nm_err pm_numa_extent_alloc(pm_heap *h, unsigned node, uint64_t npages, int state, bool any, pm_veh **out);
void pm_numa_node_order(const pm_heap *h, unsigned node, unsigned *order); /* itself, then nearest first */
extern __thread bool pm_numa_place_anywhere; /* pm_numa_extent_alloc may place a slab outside its node (small.c's last resort) */
void pm_numa_slab_created(pm_heap *h, uint64_t page);      /* before the slab's log entry */
unsigned pm_numa_page_node(const pm_heap *h, uint64_t page);
nm_err pm_numa_stats(pm_heap *h, pmalloc_numa_stats *st);
static inline void pm_ts_put(pm_heap *h, uint64_t page, uint64_t ts)
{
    __atomic_store_n(&h->numa->ts_table[page], pm_ts_word(page, ts), __ATOMIC_RELAXED);
    pm_persist(h, &h->numa->ts_table[page], 8, PM_META);
}

/* ---- xcache.c: per-arena extent stores. Lock order: arena lock, then a store
 * lock, then large_lock, then bk_lock. No lock held when called. ---- */
void pm_xc_init(pm_heap *h);
void pm_xc_destroy(pm_heap *h);
bool pm_xc_take(pm_heap *h, pm_arena *a, uint64_t npages, pm_veh **out); /* state ALLOC, mapped, no log entry yet */
bool pm_xc_eligible(const pm_heap *h, const pm_veh *v);
void pm_xc_put(pm_heap *h, pm_arena *a, pm_veh *v); /* an extent freed (tombstone stored) */
bool pm_xc_flush_all(pm_heap *h);                 /* true if anything was held */
void pm_xc_lock_all(pm_heap *h, bool lock);
uint64_t pm_xc_pages(pm_heap *h);                 /* pages held, all arenas */
nm_err pm_xc_check(pm_heap *h);                   /* every store lock held */

/* ---- large.c: extents (caller holds large_lock unless noted) and the
 * bookkeeping log (caller holds bk_lock unless noted) ---- */
nm_err pm_large_init(pm_heap *h, bool fresh); /* replays the log */
void pm_large_free_all(pm_heap *h);
/* pm_extent_alloc, pm_extent_claim (and pm_numa_extent_alloc) map the new
 * extent's first and last page; its owner maps the others with
 * pm_extent_map (no lock needed) before anyone else can see it, and may
 * unmap them (pm_extent_unmap) before it gives the extent back. */
nm_err pm_extent_alloc(pm_heap *h, uint64_t npages, int state, pm_veh **out);
void pm_extent_map(pm_heap *h, pm_veh *v);
void pm_extent_unmap(pm_heap *h, pm_veh *v);
void pm_extent_release(pm_heap *h, pm_veh *v);  /* back to the free list, coalesced */
void pm_extent_decay(pm_heap *h, uint64_t now_ns); /* punch long-free extents (every 50 ms) */
bool pm_extent_decay_due(const pm_heap *h, uint64_t now_ns); /* a decay pass would run (no lock needed) */
pm_veh *pm_free_first(pm_heap *h);             /* walk all free extents (no order) */
pm_veh *pm_veh_new(pm_heap *h);                 /* from the VEH pool (zeroed) */
void pm_veh_put_list(pm_heap *h, pm_veh *list);  /* back to the VEH pool (linked by next) */
/* Give an extent's pages back to the free lists (coalesced); no counters. */
void pm_extent_free_pages(pm_heap *h, pm_veh *v);
pm_veh *pm_free_next(pm_heap *h, pm_veh *v);
nm_err pm_extent_claim(pm_heap *h, uint64_t page, uint64_t npages, int state, pm_veh **out);
/* Bookkeeping-log appends are stored, not written back: a checkpoint (redo.c)
 * or pm_bk_settle makes them durable in batches. Operations call
 * pm_bk_reserve (no lock held) before they commit, so that their append
 * cannot fail afterwards, then pm_bk_op_append, or
 * pm_bk_unreserve if they do not append after all. tc: the caller's thread
 * cache (its credits), or NULL. */
nm_err pm_bk_reserve(pm_heap *h, pm_tcache *tc, bool normal); /* normal: a normal entry (counts against the live cap) */
void pm_bk_unreserve(pm_heap *h, pm_tcache *tc); /* no lock held */
void pm_bk_credits_return(pm_heap *h, pm_tcache *tc); /* a thread cache goes (no lock held) */
nm_err pm_bk_record(pm_heap *h, pm_veh *v);     /* normal entry for v */
nm_err pm_bk_tombstone(pm_heap *h, pm_veh *v);  /* tombstone for v's entry */
/* An operation's reserved append (record, or tomb: tombstone), spending its
 * reservation (pm_bk_reserve); no lock held (takes its lane's). GC: settled
 * before it returns. */
nm_err pm_bk_op_append(pm_heap *h, pm_veh *v, bool tomb);
void pm_bk_lanes_lock(pm_heap *h, bool lock);   /* every lane's append lock (after bk_lock) */
void pm_bk_lock_all(pm_heap *h, bool lock);     /* bk_lock and every lane lock */
void pm_bk_settle_held(pm_heap *h);             /* pm_bk_settle with the lane locks already held */
void pm_bk_settle(pm_heap *h);                  /* every append durable and counted (takes the lane locks) */
void pm_bk_settle_replay(pm_heap *h);           /* open: the last settle record, again */
/* a checkpoint's settle in two phases, bk_lock and the lane locks held throughout */
void pm_bk_settle_flush(pm_heap *h, uint64_t *counts); /* phase 1: flush the unsettled appends, note counts */
void pm_bk_settle_commit(pm_heap *h, const uint64_t *counts); /* ... phase 2 (after a drain): headers, flushed */
bool pm_bk_gc_due(const pm_heap *h);
uint64_t pm_bk_tombs(const pm_heap *h);         /* valid tombstones in the log */
/* with large_lock, bk_lock and the lane locks held: */
nm_err pm_bk_gc(pm_heap *h);                    /* fast, then slow GC; the log settled */
nm_err pm_bk_compact(pm_heap *h);
nm_err pm_large_check(pm_heap *h, uint64_t xc_pages);
unsigned pm_bk_dump(pm_heap *h, FILE *out);
unsigned pm_bk_listed(pm_heap *h);

#endif
