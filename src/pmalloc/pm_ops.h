/* PMAlloc internals, operation layer (remote.c, redo.c): what makes an
 * operation durable and what recovery replays: the two-phase remote free and
 * its deallocation logs (Sec. 6.2-6.3), the redo rings, checkpoints and
 * recovery (the one-line commit). */
#ifndef PMALLOC_OPS_H
#define PMALLOC_OPS_H

#include "pm_slabs.h"

/* ---- remote.c ---- */
/* Size of the NUMA region of a new heap (0 when nlogs < 2). */
void pm_numa_layout_for(uint64_t heap_size, uint32_t nlogs, uint32_t seg_entries, pm_numa_layout *l);
/* Bytes the superblock's NUMA header reserves (0 if absent); NM_ECORRUPT for a bad header. */
nm_err pm_numa_region_of(const pm_super *sb, uint64_t *bytes);
uint64_t pm_numa_new_region(pm_heap *h, uint64_t heap_size, const pmalloc_options *o); /* bytes, 0 = none */
void pm_numa_start(pm_heap *h);                             /* synchronisation threads */
void pm_numa_lock_arenas(pm_heap *h, bool lock);            /* all arena locks, in order */
nm_err pm_numa_create(pm_heap *h, uint64_t region_off);     /* new heap: write the region */
nm_err pm_numa_open(pm_heap *h);                            /* validate, replay the logs (LOG) */
void pm_numa_retire(pm_heap *h);                            /* end of open, after the recovery: the logs' entries die */
void pm_numa_close(pm_heap *h);                             /* stop threads, sync everything, retire logs */
void pm_numa_free(pm_heap *h);                              /* volatile state (threads stopped, no sync) */
nm_err pm_numa_check(pm_heap *h);                           /* large_lock held */
bool pm_numa_is_remote(const pm_heap *h, const pm_tcache *tc, const pm_vslab *s);
void pm_numa_remote_reserve(pm_heap *h, pm_tcache *tc); /* before the commit of a remote free */
nm_err pm_numa_remote_free(pm_heap *h, pm_tcache *tc, pm_vslab *s, uint32_t idx); /* after *src = 0 */
bool pm_numa_extent_is_remote(const pm_heap *h, const pm_tcache *tc, const pm_veh *v);
void pm_numa_remote_free_extent(pm_heap *h, pm_tcache *tc, pm_veh *v); /* v->freeing set, after *src = 0 */
unsigned pm_numa_xsync(pm_heap *h, unsigned node, int why);            /* large_lock held */
unsigned pm_numa_sync_arena(pm_heap *h, pm_arena *a, int why);                       /* arena lock held */
size_t pm_numa_live_blocks(pm_heap *h, uint64_t **out); /* open: blocks named by live deallocation-log entries not yet applied */
unsigned pm_numa_dump(pm_heap *h, FILE *out);

/* ---- redo.c ---- */
/* redo.c: the one-line commit (docs/pmalloc.md, "Persistence protocol"). An
 * operation reserves a ring slot (pm_redo_reserve, before any lock that a
 * checkpoint needs), takes a sequence number (pm_redo_begin), writes its
 * record and makes that one line durable (pm_redo_commit), stores its effects
 * in memory (bitmap bit, pointer word, log entry) and reports what a
 * checkpoint must write back (pm_redo_done). */
void pm_redo_layout(uint64_t heap_size, unsigned want, uint32_t *nrings, uint32_t *recs); /* create */
nm_err pm_redo_open(pm_heap *h, bool fresh);    /* the bound; the clock after it */
void pm_redo_reserve(pm_heap *h, pm_tcache *tc); /* a free slot for tc's next record (may checkpoint) */
uint64_t pm_redo_begin(pm_heap *h, pm_tcache *tc);
void pm_redo_commit(pm_heap *h, pm_tcache *tc, uint64_t seq, unsigned op, uint64_t block, uint64_t loc, uint64_t size);
void pm_redo_done(pm_heap *h, pm_tcache *tc, uint64_t seq, uint64_t *bitw, uint64_t *loc, struct pm_vslab *s, uint64_t blk);
nm_err pm_checkpoint(pm_heap *h, unsigned flags); /* settle every committed operation */
nm_err pm_redo_recover(pm_heap *h);              /* replay the records after the bound (open) */
nm_err pm_tc_ring_take(pm_heap *h, pm_tcache *tc);  /* a new cache's first ring; no lock held (may checkpoint) */
void pm_tc_ring_drop(pm_heap *h, pm_tcache *tc);    /* tc_lock held; settled first */
void pm_tc_ring_abandon(pm_heap *h, pm_tcache *tc); /* tc_lock held; could not be settled */
/* open: every slab's bitmap against its checksum (redo.c); live_blocks: the
 * blocks of live deallocation-log entries (pm_numa_live_blocks, a layer above) */
nm_err pm_redo_verify(pm_heap *h, uint64_t state, size_t (*live_blocks)(pm_heap *h, uint64_t **out));
/* open: the blocks (| PM_DLOG_EXTENT for extents) of the remote frees a
 * crash may have cut while they wrote their deallocation-log entries: after
 * the bound, and the last record of their thread (redo.c) */
nm_err pm_redo_inflight_frees(pm_heap *h, uint64_t **out, size_t *n);
void pm_ckset_free(pm_heap *h);
/* nearmem pmalloc dump (inspect.c): each structure printed, with its checks,
 * by the file that owns it (also pm_bk_dump, pm_numa_dump); read-only, from
 * h->base, h->size and h->sb only. Each returns how many structures open would refuse. */
unsigned pm_redo_dump(pm_heap *h, FILE *out);
void pm_redo_summary(pm_heap *h, uint64_t *bound, uint64_t *pending);

#endif
