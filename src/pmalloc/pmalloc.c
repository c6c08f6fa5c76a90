/* PMAlloc heap: open/create, malloc_to/free_from with the LOG and GC
 * protocols, roots, statistics, close, and recovery (paper Sec. 4, 7).
 *
 * LOG protocol of one operation (malloc_to shown; free_from is symmetric):
 *   1. WAL entry {seq, op, block, dst} in this thread's ring; flush; fence.
 *   2. *dst = block; flush; fence.
 *   3. metadata: set the slab bit (small) or append the bookkeeping-log entry
 *      (large); flush; fence. This write is the operation's completion record.
 * Recovery takes, for each block, the newest unretired WAL entry and decides
 * from the metadata and the user pointer: for an allocation, metadata set =
 * done; else *dst == block = redo (set it); else nothing happened. For a free,
 * metadata clear = done; else *src == block = not done; else redo (clear).
 * Entries are retired (sb->wal_retired) before a ring slot is reused, once no
 * operation with a smaller sequence number is in flight, so the newest entry
 * of a block is always its latest operation.
 *
 * Sequence numbers are (clock << 8 | domain) from per-arena clocks, not one
 * global counter: that counter's cache line moved between cores on every
 * operation and halved 2-thread throughput. What recovery needs is weaker
 * than a global order: operations on the same block must be ordered, and
 * they are, because all of them draw from the same clock (the block's slab's
 * arena, or the extent clock for extents) and an atomic increment's order
 * agrees with happens-before; slab creation and release hand the pages over
 * between the clocks (small.c). */
#include <errno.h>
#include <libpmem.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "nearmem/common/bitmap.h"
#include "nearmem/common/timer.h"
#include "pm_internal.h"

void pmalloc_options_default(pmalloc_options *o)
{
    memset(o, 0, sizeof *o);
    o->size = 64u << 20;
    o->model = PMALLOC_LOG;
    o->stripes = PMALLOC_DEFAULT_STRIPES;
    o->eadr = PMALLOC_EADR_AUTO;
    o->persist = PMALLOC_PERSIST_AUTO;
    o->create = true;
}

/* ---- layout ---- */

typedef struct layout {
    uint64_t roots_off, wal_off, bk_off, data_off;
    uint32_t nchunks;
    uint64_t numa_off; /* NUMA region (remote-free logs, numa.c/remote.c); numa_bytes may be 0 */
} layout;

static void compute_layout(uint64_t size, uint32_t nchunks, uint64_t numa_bytes, layout *l)
{
    l->roots_off = PM_PAGE;
    l->wal_off = l->roots_off + NM_ALIGN_UP((uint64_t)PMALLOC_NROOTS * 8, PM_PAGE);
    l->bk_off = l->wal_off + (uint64_t)PM_NRINGS * PM_RING_BYTES;
    /* one log entry per data page: 4x the most extents+slabs that fit (>= 16 KiB each) */
    l->nchunks = nchunks ? nchunks : (uint32_t)(size / PM_PAGE / PM_CHUNK_ENTRIES + 16);
    l->numa_off = NM_ALIGN_UP(l->bk_off + (uint64_t)l->nchunks * PM_CHUNK_BYTES, PM_PAGE);
    l->data_off = NM_ALIGN_UP(l->numa_off + numa_bytes, PM_PAGE);
}

static uint64_t super_check(const pm_super *sb) { return XXH64(sb, offsetof(pm_super, check), 0x9e3779b9); }

static bool loc_ok(const pm_heap *h, uint64_t off)
{
    if (off & 7) return false;
    if (off >= h->sb->roots_off && off < h->sb->roots_off + (uint64_t)PMALLOC_NROOTS * 8) return true;
    return off >= h->sb->data_off && off + 8 <= h->size;
}

static inline uint64_t load_ptr(const uint64_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
static inline void store_ptr(uint64_t *p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }

static void set_state(pm_heap *h, uint64_t st)
{
    __atomic_store_n(&h->sb->state, st, __ATOMIC_RELAXED);
    pm_persist(h, &h->sb->state, sizeof(uint64_t), PM_META);
}

/* ---- write-ahead log ---- */

static inline pm_wal_ent *ring_base(pm_heap *h, unsigned r)
{
    return (pm_wal_ent *)(h->base + h->sb->wal_off + (uint64_t)r * PM_RING_BYTES);
}

static inline uint32_t wal_check(uint64_t w0, uint64_t b, uint64_t l, uint64_t np)
{
    uint64_t v[4] = {w0, b, l, np};
    return (uint32_t)XXH64(v, sizeof v, 0x3a1);
}

/* Clock domains in use: the arenas' (ids mod 255) and the extents'. */
static unsigned wal_ndom(const pm_heap *h) { return h->narenas < PM_WCLK_LARGE ? h->narenas : PM_WCLK_LARGE; }

/* Every clock at least `c`: all later sequence numbers exceed (c << 8) - 1. */
static void wal_clocks_raise(pm_heap *h, uint64_t c)
{
    for (unsigned d = 0; d < wal_ndom(h); d++) pm_wclk_raise(h, d, c);
    pm_wclk_raise(h, PM_WCLK_LARGE, c);
}

/* An upper bound of every sequence number handed out so far, after which all
 * clocks hand out larger ones. */
static uint64_t wal_seq_bound(pm_heap *h)
{
    uint64_t m = pm_wclk_get(h, PM_WCLK_LARGE);
    for (unsigned d = 0; d < wal_ndom(h); d++) {
        uint64_t c = pm_wclk_get(h, d);
        if (c > m) m = c;
    }
    if (m < 1) m = 1;
    wal_clocks_raise(h, m);
    return (m << 8) - 1;
}

/* Advance wal_retired to at least x: wait until no logged operation with a
 * sequence number <= x is in flight (those never block on us). The clocks are
 * raised before the in-flight scan: an operation whose increment came after
 * the raise gets a number above the bound; one whose increment came before
 * published inflight = 1 before it, so the scan sees it. */
static void wal_retire(pm_heap *h, uint64_t x)
{
    for (;;) {
        pthread_mutex_lock(&h->tc_lock);
        uint64_t bound = wal_seq_bound(h);
        uint64_t min = 0;
        for (pm_tcache *t = h->tcaches; t; t = t->next) {
            uint64_t f = __atomic_load_n(&t->inflight, __ATOMIC_SEQ_CST);
            if (f && (!min || f < min)) min = f;
        }
        uint64_t target = min ? min - 1 : bound;
        if (target >= x) {
            if (target > h->sb->wal_retired) {
                __atomic_store_n(&h->sb->wal_retired, target, __ATOMIC_RELAXED);
                pm_persist(h, &h->sb->wal_retired, sizeof(uint64_t), PM_META);
            }
            pthread_mutex_unlock(&h->tc_lock);
            return;
        }
        pthread_mutex_unlock(&h->tc_lock);
        sched_yield();
    }
}

/* `dom` is the clock of the block's domain: its slab's arena (pm_arena_dom)
 * for small blocks, PM_WCLK_LARGE for extents. */
static void wal_begin(pm_heap *h, pm_tcache *tc, unsigned dom, unsigned op, uint64_t block, uint64_t loc,
                      uint64_t npages)
{
    pm_wal_ent *ring = ring_base(h, (unsigned)tc->ring);
    uint32_t k = tc->ring_next++;
    /* interleaved appends (Sec. 5.1): consecutive entries in different lines */
    uint32_t slot = h->interleave ? (k % PM_RING_LINES) * 2u + (k / PM_RING_LINES) % 2u : k % PM_RING_ENTRIES;
    pm_wal_ent *e = &ring[slot];
    uint64_t old = e->seq_op >> 8;
    if (old && old > __atomic_load_n(&h->sb->wal_retired, __ATOMIC_RELAXED)) wal_retire(h, old);
    __atomic_store_n(&tc->inflight, 1, __ATOMIC_SEQ_CST);
    uint64_t seq = __atomic_fetch_add(&h->wclk[dom].c, 1, __ATOMIC_SEQ_CST) << 8 | dom;
    __atomic_store_n(&tc->inflight, seq, __ATOMIC_RELEASE); /* a retirer that still sees 1 waits */
    uint64_t w0 = seq << 8 | op;
    e->seq_op = w0;
    e->block = block;
    e->loc = loc;
    e->aux = npages << 32 | wal_check(w0, block, loc, npages);
    pm_flush(h, e, sizeof *e, PM_META);
    pm_drain(h);
    pm_ctr_add(h, PMC_WAL, 1);
}

static inline void wal_end(pm_tcache *tc) { __atomic_store_n(&tc->inflight, 0, __ATOMIC_RELEASE); }

/* ---- small-block helpers ---- */

/* The block of slab s starting at heap offset `off`, if there is one (the
 * geometry must be stable: the slab pinned, or no other thread running). */
static bool slab_block(pm_heap *h, pm_vslab *s, uint64_t off, uint32_t *idx)
{
    if (NM_UNLIKELY(s->mo != NULL) && pm_morph_lookup_old(h, s, off, idx)) return true; /* a live old block */
    uint64_t start = pm_off(h, s->data);
    if (off < start) return false;
    uint64_t rel = off - start;
    if (rel % s->block_size || rel / s->block_size >= s->nblocks) return false;
    *idx = (uint32_t)(rel / s->block_size);
    return true;
}

/* The vslab and block index of heap offset `off`, if it is a block start
 * (recovery: single-threaded). */
static pm_vslab *small_lookup(pm_heap *h, uint64_t off, uint32_t *idx, bool *is_small)
{
    *is_small = false;
    if (off < h->sb->data_off || off >= h->size) return NULL;
    pm_veh *v = pm_pmap_get(h, (off - h->sb->data_off) / PM_PAGE);
    if (!v || v->state != PM_VEH_SLAB || !v->slab) return NULL;
    *is_small = true;
    return slab_block(h, v->slab, off, idx) ? v->slab : NULL;
}

enum { PIN_NONE, PIN_OK, PIN_GONE };
/* Pin the slab whose pages hold heap offset `off` (in the data area) against
 * morphs and its release, without a lock (pm_slab_enter): PIN_OK with the slab
 * in *out (pm_slab_leave it), PIN_NONE when no slab is there (an extent, free
 * space), PIN_GONE when the slab there is being released (all its blocks are
 * free). The page map's VEHs and the vslabs are type-stable, and a pin holds
 * only after checking that the page still maps to that very slab. */
static int slab_pin(pm_heap *h, uint64_t off, pm_vslab **out)
{
    uint64_t page = (off - h->sb->data_off) / PM_PAGE;
    for (;;) {
        pm_veh *v = pm_pmap_get(h, page);
        if (!v || __atomic_load_n(&v->state, __ATOMIC_ACQUIRE) != PM_VEH_SLAB) return PIN_NONE;
        pm_vslab *s = __atomic_load_n(&v->slab, __ATOMIC_ACQUIRE);
        if (!s) return PIN_GONE; /* its vslab is not built yet, or already gone: no block of it is allocated */
        if (!pm_slab_enter(h, s)) return PIN_GONE;
        if (pm_pmap_get(h, page) == v && __atomic_load_n(&v->state, __ATOMIC_ACQUIRE) == PM_VEH_SLAB &&
            __atomic_load_n(&v->slab, __ATOMIC_ACQUIRE) == s) {
            *out = s;
            return PIN_OK;
        }
        pm_slab_leave(h, s); /* released and maybe reused meanwhile: look again */
    }
}

/* The claim bit of the block at heap offset `off` in slab s (pm_vslab.claim). */
static inline uint64_t *claim_word(pm_heap *h, pm_vslab *s, uint64_t off, uint64_t *mask)
{
    uint64_t bit = (off - pm_off(h, s->hdr)) / 16u;
    *mask = 1ull << (bit % 64u);
    return &s->claim[bit / 64u];
}

static inline uint64_t block_off(pm_heap *h, const pm_vslab *s, uint32_t idx)
{
    return pm_off(h, s->data) + (uint64_t)idx * s->block_size;
}

/* Set or clear a block's persistent bit; returns the previous bit. */
static bool pbit_update(pm_vslab *s, uint32_t idx, bool set, uint64_t **word)
{
    uint64_t m, *w = pm_pbm_word(s, idx, &m);
    /* release: a slab morph reads the bits with acquire (morph.c) */
    uint64_t old = set ? __atomic_fetch_or(w, m, __ATOMIC_RELEASE) : __atomic_fetch_and(w, ~m, __ATOMIC_RELEASE);
    *word = w;
    return (old & m) != 0;
}

/* ---- allocation ---- */

/* A user-pointer location must be a root slot or lie inside an allocated
 * object: recovery reads it, so it must be persistent and stay meaningful. */
static bool loc_live(pm_heap *h, uint64_t off)
{
    if (off >= h->sb->roots_off && off < h->sb->roots_off + (uint64_t)PMALLOC_NROOTS * 8) return true;
    pm_veh *v = pm_pmap_get(h, (off - h->sb->data_off) / PM_PAGE);
    if (!v) return false;
    int st = __atomic_load_n(&v->state, __ATOMIC_ACQUIRE); /* unlocked: VEHs are type-stable (large.c) */
    if (st == PM_VEH_ALLOC) return true;
    pm_vslab *s;
    if (st != PM_VEH_SLAB || slab_pin(h, off, &s) != PIN_OK) return false; /* a morph may change the geometry */
    bool live = false;
    if (NM_UNLIKELY(s->mo != NULL) && pm_morph_loc_live(h, s, off)) live = true;
    uint64_t start = pm_off(h, s->data);
    if (!live && off >= start && (off - start) / s->block_size < s->nblocks) {
        uint32_t i = (uint32_t)((off - start) / s->block_size);
        live = pm_pbit(s, i) && !pm_numa_shadowed(s, i);
    }
    pm_slab_leave(h, s);
    return live;
}

static nm_err check_loc(pm_heap *h, const pmalloc_ptr *loc, const char *what)
{
    if (!loc) return nm_fail(NM_EINVAL, "pmalloc: %s is NULL", what);
    const char *p = (const char *)loc;
    if (p < h->base || p >= h->base + h->size || !loc_ok(h, pm_off(h, p)))
        return nm_fail(NM_EINVAL, "pmalloc: %s %p is not an aligned root slot or data location of the heap", what, (const void *)loc);
    if (!loc_live(h, pm_off(h, p)))
        return nm_fail(NM_EINVAL, "pmalloc: %s %p is neither a root slot nor inside an allocated object", what, (const void *)loc);
    return NM_OK;
}

nm_err pmalloc_malloc_to(pmalloc_heap *hd, size_t size, pmalloc_ptr *dst) { return pmalloc_malloc_to_ex(hd, size, dst, 0); }

nm_err pmalloc_malloc_to_ex(pmalloc_heap *hd, size_t size, pmalloc_ptr *dst, unsigned flags)
{
    PM_ENTER_ERR(h, hd);
    if (flags & ~PMALLOC_OVERWRITE) return nm_fail(NM_EINVAL, "pmalloc_malloc_to_ex: unknown flags %#x", flags);
    nm_err err = check_loc(h, dst, "destination");
    if (err) return err;
    if (!(flags & PMALLOC_OVERWRITE) && load_ptr(dst) != 0)
        return nm_fail(NM_EEXIST, "pmalloc_malloc_to: the destination holds %#llx (free it first, or pass PMALLOC_OVERWRITE)",
                       (unsigned long long)load_ptr(dst));
    if (size == 0) return nm_fail(NM_ERANGE, "pmalloc_malloc_to: size 0");
    if (size > h->data_pages * PM_PAGE) return nm_fail(NM_ERANGE, "pmalloc_malloc_to: %zu bytes exceed the heap", size);
    uint64_t dst_off = pm_off(h, dst);
    pm_tcache *tc = pm_tc_get(h);
    if (!tc) return nm_fail(NM_ENOMEM, "pmalloc: no thread cache: %s", nm_last_errmsg());
    pm_numa_tick(h, tc);

    if (size <= PMALLOC_SMALL_MAX) {
        int cls = nm_sizeclass_lookup(&h->sc, size);
        pm_tcblk k;
        err = pm_small_take(h, tc, (unsigned)cls, &k);
        if (err) return err;
        uint64_t b = block_off(h, k.s, k.idx), *w, bsize = k.s->block_size; /* once the bit is set, a morph may start */
        if (h->model == PMALLOC_LOG) {
            wal_begin(h, tc, pm_arena_dom(k.s->arena), PM_OP_ALLOC_SMALL, b, dst_off, 0);
            store_ptr(dst, pm_ptr(h, b));
            pm_flush(h, dst, sizeof *dst, PM_USER);
            pm_drain(h);
            pbit_update(k.s, k.idx, true, &w);
            pm_flush(h, w, sizeof *w, PM_META);
            pm_drain(h);
            wal_end(tc);
        } else {
            /* GC: only the user pointer is persisted; recovery re-marks */
            store_ptr(dst, pm_ptr(h, b));
            pm_flush(h, dst, sizeof *dst, PM_USER);
            pm_drain(h);
            pbit_update(k.s, k.idx, true, &w);
        }
        pm_ctr_add(h, PMC_LIVE_BYTES, bsize);
        pm_ctr_add(h, PMC_LIVE_OBJS, 1);
        return NM_OK;
    }

    /* An extent comes from the arena's cache of freed extents (xcache.c, the
     * arena lock) or from the extent allocator (large_lock: best fit, split).
     * large_lock is not held across the WAL entry and the user pointer (two
     * fences): the extent is ours (ALLOC in DRAM) from here on, and no WAL
     * entry is begun under the lock (wal_retire may wait for other threads'
     * operations, which may need it). */
    uint64_t npages = (size + PM_PAGE - 1) / PM_PAGE;
    pm_veh *v;
    bool cached = pm_xc_take(h, tc->arena, npages, &v);
    pm_ctr_add(h, cached ? PMC_XC_HIT : PMC_XC_MISS, 1);
    if (!cached) {
        pthread_mutex_lock(&h->large_lock);
        err = pm_numa_extent_alloc(h, tc->node, npages, PM_VEH_ALLOC, true, &v);
        pthread_mutex_unlock(&h->large_lock);
        if (err == NM_ENOMEM && pm_xc_flush_all(h)) { /* cached space is free space */
            pthread_mutex_lock(&h->large_lock);
            err = pm_numa_extent_alloc(h, tc->node, npages, PM_VEH_ALLOC, true, &v);
            pthread_mutex_unlock(&h->large_lock);
        }
        if (err) return err;
    }
    uint64_t e = h->sb->data_off + v->page * PM_PAGE, old = load_ptr(dst);
    wal_begin(h, tc, PM_WCLK_LARGE, PM_OP_ALLOC_LARGE, e, dst_off, npages);
    store_ptr(dst, pm_ptr(h, e));
    pm_flush(h, dst, sizeof *dst, PM_USER);
    pm_drain(h);
    /* The log entry is the completion record. It is flushed under the lock
     * and drained after it, so two threads' fences do not serialise on the
     * lock. That is safe: until the drain returns, the WAL entry stays in
     * flight (not retirable), and recovery redoes an allocation whose pointer
     * is durable but whose entry is not (wal_recover); replay skips empty
     * slots, so a later entry durable before ours leaves no gap that matters;
     * a tombstone appended meanwhile flushes our line itself (rec_pending). */
    pthread_mutex_lock(&h->large_lock);
    err = pm_bk_record_flush(h, v);
    if (err) { /* log full: put the pointer back; recovery would see "not done" */
        store_ptr(dst, old);
        pm_persist(h, dst, sizeof *dst, PM_USER);
        if (cached) pm_extent_free_pages(h, v); /* never counted */
        else pm_extent_release(h, v);
    } else if (cached) {
        h->nextents++;
    }
    pthread_mutex_unlock(&h->large_lock);
    if (!err) {
        pm_drain(h);
        __atomic_store_n(&v->rec_pending, false, __ATOMIC_RELEASE);
        pm_ctr_add(h, PMC_LIVE_BYTES, npages * PM_PAGE);
        pm_ctr_add(h, PMC_LIVE_OBJS, 1);
    }
    wal_end(tc);
    return err;
}

nm_err pmalloc_free_from(pmalloc_heap *hd, pmalloc_ptr *src)
{
    PM_ENTER_ERR(h, hd);
    nm_err err = check_loc(h, src, "source");
    if (err) return err;
    uint64_t pv = load_ptr(src), p, src_off = pm_off(h, src);
    if (pv == 0) return NM_OK; /* like free(NULL) */
    if (!pm_ptr_off(h, pv, &p))
        return nm_fail(NM_EINVAL, "pmalloc_free_from: %#llx is not a pointer of this heap (tag %#llx, this heap's %#llx)",
                       (unsigned long long)pv, (unsigned long long)PMALLOC_PTR_TAG(pv), (unsigned long long)h->sb->ptr_tag);
    if (p < h->sb->data_off || p >= h->size)
        return nm_fail(NM_EBADFREE, "pmalloc_free_from: %#llx is outside the heap's data area", (unsigned long long)p);
    pm_tcache *tc = pm_tc_get(h);
    if (!tc) return nm_fail(NM_ENOMEM, "pmalloc: no thread cache: %s", nm_last_errmsg());
    pm_numa_tick(h, tc);
    uint32_t idx;
    pm_vslab *s = NULL;
    int pin = slab_pin(h, p, &s); /* until the block is back: no morph or release of its slab */
    if (pin == PIN_GONE) /* a slab in the middle of its release holds no allocated block */
        return nm_fail(NM_EDOUBLEFREE, "pmalloc_free_from: %#llx is not allocated (its slab was released)", (unsigned long long)p);
    if (pin == PIN_OK) {
        if (!slab_block(h, s, p, &idx)) {
            pm_slab_leave(h, s);
            return nm_fail(NM_EBADFREE, "pmalloc_free_from: %#llx is inside a slab but not at a block start", (unsigned long long)p);
        }
        /* Claim the block before anything changes: of two concurrent frees of
         * it, the loser stops here with nothing changed. With NUMA, a direct
         * free clears the bitmap bit and a two-phase one sets a shadow bit
         * (another word, under another lock): the claim is what keeps both
         * from succeeding. Released once the bit is clear or the shadow bit
         * set (pm_numa_remote_free), so a later free sees that. */
        uint64_t cm, *cw = claim_word(h, s, p, &cm);
        if (__atomic_fetch_or(cw, cm, __ATOMIC_SEQ_CST) & cm) {
            pm_slab_leave(h, s);
            return nm_fail(NM_EDOUBLEFREE, "pmalloc_free_from: block %#llx is being freed concurrently", (unsigned long long)p);
        }
        if (!pm_pbit(s, idx) || (!(idx & PM_IDX_OLD) && pm_numa_shadowed(s, idx))) {
            __atomic_fetch_and(cw, ~cm, __ATOMIC_SEQ_CST);
            pm_slab_leave(h, s);
            return nm_fail(NM_EDOUBLEFREE, "pmalloc_free_from: block %#llx is already free", (unsigned long long)p);
        }
        uint64_t *w;
        bool was;
        /* a block of another node's arena: two-phase remote free (Sec. 6.2, Alg. 2);
         * once recorded, its owner may release the slab: s is not read after that */
        bool remote = !(idx & PM_IDX_OLD) && pm_numa_is_remote(h, tc, s); /* old blocks: direct (morph.c) */
        uint64_t bsize = pm_blk_size(s, idx);
        if (h->model == PMALLOC_LOG) {
            wal_begin(h, tc, pm_arena_dom(s->arena), PM_OP_FREE_SMALL, p, src_off, 0);
            store_ptr(src, 0);
            pm_flush(h, src, sizeof *src, PM_USER);
            pm_drain(h);
            if (remote) was = pm_numa_remote_free(h, tc, s, idx) == NM_OK; /* completion record: the log entry; releases the claim */
            else {
                was = pbit_update(s, idx, false, &w);
                pm_flush(h, w, sizeof *w, PM_META);
                pm_drain(h);
                __atomic_fetch_and(cw, ~cm, __ATOMIC_SEQ_CST);
            }
            wal_end(tc);
        } else {
            store_ptr(src, 0);
            pm_flush(h, src, sizeof *src, PM_USER);
            pm_drain(h);
            if (remote) was = pm_numa_remote_free(h, tc, s, idx) == NM_OK;
            else {
                was = pbit_update(s, idx, false, &w);
                __atomic_fetch_and(cw, ~cm, __ATOMIC_SEQ_CST);
            }
            if (idx & PM_IDX_OLD) pm_persist(h, w, sizeof *w, PM_META); /* old bits stay exact under GC (morph.c) */
        }
        if (!was) { /* lost a race with another free of the same block */
            pm_slab_leave(h, s);
            return nm_fail(NM_EDOUBLEFREE, "pmalloc_free_from: block %#llx was freed concurrently", (unsigned long long)p);
        }
        pm_ctr_add(h, PMC_LIVE_BYTES, -bsize);
        pm_ctr_add(h, PMC_LIVE_OBJS, -(uint64_t)1);
        /* Leave before the put, which may release the slab. No morph can start
         * meanwhile: the block is taken in DRAM but clear in the bitmap (new
         * block), or still counted among the live old blocks (old block). A
         * remote free is recorded already; the owner does not release a slab
         * while `busy` is set (pm_slab_settle), so leaving here is safe. */
        pm_slab_leave(h, s);
        if (remote) return NM_OK;
        if (idx & PM_IDX_OLD) pm_morph_put_old(h, s, idx); /* old blocks bypass the tcache (Sec. 5.2) */
        else pm_small_put(h, tc, (pm_tcblk){s, idx});
        return NM_OK;
    }
    uint64_t rel = p - h->sb->data_off, page = rel / PM_PAGE;
    pthread_mutex_lock(&h->large_lock);
    pm_veh *v = pm_pmap_get(h, page);
    /* state and freeing first (atomics: a cached VEH changes under its arena's
     * cache lock); an ALLOC VEH that is not being freed is stable under ours */
    int st = v ? __atomic_load_n(&v->state, __ATOMIC_ACQUIRE) : PM_VEH_FREE;
    bool freeing = v && __atomic_load_n(&v->freeing, __ATOMIC_RELAXED);
    if (st != PM_VEH_ALLOC || freeing || v->page != page || rel % PM_PAGE || v->bkpos < 0) {
        /* an aligned address in free space is most likely a stale pointer to an
         * object freed before (a slab released when its last block went) */
        bool dbl = freeing || ((st == PM_VEH_FREE || st == PM_VEH_CACHED) && p % 16 == 0);
        pthread_mutex_unlock(&h->large_lock);
        if (dbl) return nm_fail(NM_EDOUBLEFREE, "pmalloc_free_from: %#llx is not allocated (already free?)", (unsigned long long)p);
        return nm_fail(NM_EBADFREE, "pmalloc_free_from: %#llx is not the start of an allocated extent", (unsigned long long)p);
    }
    /* as in malloc_to, the lock is not held across the WAL entry and the user
     * pointer; `freeing` makes a concurrent second free fail meanwhile */
    __atomic_store_n(&v->freeing, true, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&h->large_lock);
    wal_begin(h, tc, PM_WCLK_LARGE, PM_OP_FREE_LARGE, p, src_off, v->npages);
    store_ptr(src, 0);
    pm_flush(h, src, sizeof *src, PM_USER);
    pm_drain(h);
    uint64_t bytes = v->npages * PM_PAGE;
    if (pm_numa_extent_is_remote(h, tc, v)) { /* two-phase (Sec. 6.3): the owner side appends the tombstone */
        pm_numa_remote_free_extent(h, tc, v);
        pm_ctr_add(h, PMC_LIVE_BYTES, -bytes);
        pm_ctr_add(h, PMC_LIVE_OBJS, -(uint64_t)1);
        wal_end(tc);
        return NM_OK;
    }
    /* To the arena's cache: the tombstone is flushed under the lock and
     * drained after it, before the extent can be reused (cached). Otherwise
     * back to the extent allocator, under the lock, after a drained tombstone
     * (another thread may reuse the pages at once). */
    bool to_cache = pm_xc_eligible(h, v);
    pthread_mutex_lock(&h->large_lock);
    err = to_cache ? pm_bk_tombstone_flush(h, v) : pm_bk_tombstone(h, v);
    if (err) {
        store_ptr(src, pv);
        pm_persist(h, src, sizeof *src, PM_USER);
        __atomic_store_n(&v->freeing, false, __ATOMIC_RELAXED);
    } else if (to_cache) {
        h->nextents--;
    } else {
        pm_extent_release(h, v);
    }
    pthread_mutex_unlock(&h->large_lock);
    if (!err) {
        if (to_cache) {
            pm_drain(h);
            pm_xc_put(h, tc->arena, v);
        }
        pm_ctr_add(h, PMC_LIVE_BYTES, -bytes);
        pm_ctr_add(h, PMC_LIVE_OBJS, -(uint64_t)1);
    }
    wal_end(tc);
    return err;
}

/* ---- pointers, roots ---- */

void *pmalloc_direct(const pmalloc_heap *hd, pmalloc_ptr p)
{
    PM_ENTER(h, hd, NULL);
    uint64_t off;
    if (!pm_ptr_off(h, p, &off) || off == 0 || off >= h->size) return NULL;
    return h->base + off;
}

pmalloc_ptr pmalloc_ptr_of(const pmalloc_heap *hd, const void *addr)
{
    PM_ENTER(h, hd, 0);
    const char *a = addr;
    if (!a || a < h->base || a >= h->base + h->size) return 0;
    return pm_ptr(h, (uint64_t)(a - h->base));
}

size_t pmalloc_usable_size(pmalloc_heap *hd, pmalloc_ptr pv)
{
    PM_ENTER(h, hd, 0);
    uint64_t p;
    if (!pm_ptr_off(h, pv, &p) || p < h->sb->data_off || p >= h->size) return 0;
    uint32_t idx;
    pm_vslab *s;
    int pin = slab_pin(h, p, &s);
    if (pin == PIN_GONE) return 0;
    if (pin == PIN_OK) {
        size_t us = slab_block(h, s, p, &idx) && pm_pbit(s, idx) && ((idx & PM_IDX_OLD) || !pm_numa_shadowed(s, idx)) ? pm_blk_size(s, idx) : 0;
        pm_slab_leave(h, s);
        return us;
    }
    size_t r = 0;
    pthread_mutex_lock(&h->large_lock);
    uint64_t rel = p - h->sb->data_off;
    pm_veh *v = pm_pmap_get(h, rel / PM_PAGE);
    if (v && v->state == PM_VEH_ALLOC && !v->freeing && rel % PM_PAGE == 0 && v->page == rel / PM_PAGE) r = v->npages * PM_PAGE;
    pthread_mutex_unlock(&h->large_lock);
    return r;
}

static pmalloc_ptr *root_slot(pm_heap *h, unsigned idx) { return (pmalloc_ptr *)(h->base + h->sb->roots_off) + idx; }

pmalloc_ptr *pmalloc_root_slot(pmalloc_heap *hd, unsigned idx)
{
    PM_ENTER(h, hd, NULL);
    if (idx >= PMALLOC_NROOTS) return NULL;
    return (pmalloc_ptr *)(h->base + h->sb->roots_off) + idx;
}

pmalloc_ptr pmalloc_get_root(const pmalloc_heap *hd, unsigned idx)
{
    PM_ENTER(h, hd, 0);
    if (idx >= PMALLOC_NROOTS) return 0;
    return load_ptr((const uint64_t *)(h->base + h->sb->roots_off) + idx);
}

nm_err pmalloc_set_root(pmalloc_heap *hd, unsigned idx, pmalloc_ptr p)
{
    PM_ENTER_ERR(h, hd);
    if (idx >= PMALLOC_NROOTS) return nm_fail(NM_ERANGE, "pmalloc_set_root: index %u >= %u", idx, PMALLOC_NROOTS);
    uint64_t off;
    if (p != 0 && (!pm_ptr_off(h, p, &off) || off < h->sb->data_off || off >= h->size))
        return nm_fail(NM_EINVAL, "pmalloc_set_root: %#llx is not a pointer into this heap's data area", (unsigned long long)p);
    pmalloc_ptr *slot = root_slot(h, idx);
    store_ptr(slot, p);
    pm_persist(h, slot, sizeof *slot, PM_USER);
    return NM_OK;
}

void pmalloc_flush(pmalloc_heap *hd, const void *addr, size_t len)
{
    PM_ENTER(h, hd, );
    pm_flush(h, addr, len, PM_USER);
}
void pmalloc_drain(pmalloc_heap *hd)
{
    PM_ENTER(h, hd, );
    pm_drain(h);
}
void pmalloc_persist(pmalloc_heap *hd, const void *addr, size_t len)
{
    PM_ENTER(h, hd, );
    pm_flush(h, addr, len, PM_USER);
    pm_drain(h);
}

/* ---- statistics, walk, check ---- */

nm_err pmalloc_stats_get(pmalloc_heap *hd, pmalloc_stats *st)
{
    PM_ENTER_ERR(h, hd);
    if (!st) return nm_fail(NM_EINVAL, "pmalloc_stats_get: NULL argument");
    memset(st, 0, sizeof *st);
    st->bytes_live = pm_ctr_sum(h, PMC_LIVE_BYTES);
    st->objects_live = pm_ctr_sum(h, PMC_LIVE_OBJS);
    pthread_mutex_lock(&h->large_lock);
    st->slabs = h->nslabs;
    st->extents = h->nextents;
    st->cached_bytes = pm_xc_pages(h) * PM_PAGE;
    st->free_bytes = h->free_pages * PM_PAGE + st->cached_bytes;
    st->retained_bytes = h->retained_pages * PM_PAGE;
    st->bklog_gcs = __atomic_load_n(&h->c_bkgc, __ATOMIC_RELAXED);
    st->bklog_fast_gcs = __atomic_load_n(&h->c_bkfast, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&h->large_lock);
    st->morphs = __atomic_load_n(&h->c_morphs, __ATOMIC_RELAXED);
    st->morph_slabs_in = __atomic_load_n(&h->morph_slabs_in, __ATOMIC_RELAXED);
    st->morph_old_live = __atomic_load_n(&h->morph_old_live, __ATOMIC_RELAXED);
    st->data_bytes = h->data_pages * PM_PAGE;
    st->flushes = pm_ctr_sum(h, PMC_FLUSH);
    st->meta_flushes = pm_ctr_sum(h, PMC_META);
    st->reflushes = pm_ctr_sum(h, PMC_REFLUSH);
    st->fences = pm_ctr_sum(h, PMC_FENCE);
    st->wal_appends = pm_ctr_sum(h, PMC_WAL);
    st->bklog_appends = pm_ctr_sum(h, PMC_BK);
    st->extent_cache_hits = pm_ctr_sum(h, PMC_XC_HIT);
    st->extent_cache_misses = pm_ctr_sum(h, PMC_XC_MISS);
    st->stripes = h->interleave ? h->stripes : 1;
    st->eadr = h->eadr;
    st->model = h->model;
    st->persist = h->persist;
    return NM_OK;
}

void pmalloc_stats_reset_counters(pmalloc_heap *hd)
{
    PM_ENTER(h, hd, );
    const int c[] = {PMC_FLUSH, PMC_META, PMC_REFLUSH, PMC_FENCE, PMC_WAL, PMC_BK};
    for (size_t i = 0; i < NM_ARRAY_LEN(c); i++) pm_ctr_set(h, c[i], 0);
}

void pmalloc_recovery_info_get(const pmalloc_heap *hd, pmalloc_recovery_info *ri)
{
    PM_ENTER(h, hd, );
    if (ri) *ri = h->ri;
}

nm_err pmalloc_walk(pmalloc_heap *hd, pmalloc_walk_fn fn, void *arg)
{
    PM_ENTER_ERR(h, hd);
    if (!fn) return nm_fail(NM_EINVAL, "pmalloc_walk: NULL argument");
    pm_xc_lock_all(h, true); /* cached extents change under these */
    pthread_mutex_lock(&h->large_lock);
    int stop = 0;
    for (uint64_t p = 0; p < h->data_pages && !stop;) {
        pm_veh *v = pm_pmap_get(h, p);
        if (!v || v->page != p) { p++; continue; }
        if (v->state == PM_VEH_SLAB && v->slab && v->slab->mo) {
            stop = pm_morph_walk(h, v->slab, fn, arg); /* old and new blocks, in address order */
        } else if (v->state == PM_VEH_SLAB && v->slab) {
            pm_vslab *s = v->slab;
            for (uint32_t i = 0; i < s->nblocks && !stop; i++)
                if (pm_pbit(s, i) && !pm_numa_shadowed(s, i)) stop = fn(arg, pm_ptr(h, block_off(h, s, i)), s->block_size);
        } else if (v->state == PM_VEH_ALLOC && !v->freeing) { /* freeing: a remote free pending (Sec. 6.3) */
            stop = fn(arg, pm_ptr(h, h->sb->data_off + v->page * PM_PAGE), v->npages * PM_PAGE);
        }
        p += v->npages;
    }
    pthread_mutex_unlock(&h->large_lock);
    pm_xc_lock_all(h, false);
    return NM_OK;
}

nm_err pmalloc_check(pmalloc_heap *hd)
{
    PM_ENTER_ERR(h, hd);
    pm_numa_lock_arenas(h, true); /* synchronisation threads pause */
    pm_xc_lock_all(h, true);
    pthread_mutex_lock(&h->large_lock);
    nm_err err = pm_large_check(h);
    uint64_t live = 0, objs = 0;
    for (uint64_t p = 0; p < h->data_pages && !err;) {
        pm_veh *v = h->pmap[p];
        if (v->state == PM_VEH_SLAB) {
            pm_vslab *s = v->slab;
            if (!s) { err = nm_fail(NM_ECORRUPT, "pmalloc check: slab without vslab"); break; }
            if (s->mo) { err = pm_morph_check(h, s, &live, &objs); p += v->npages; continue; }
            uint32_t taken = 0;
            for (uint32_t i = 0; i < s->nblocks; i++) {
                bool pb = pm_pbit(s, i), vb = nm_bitmap_test(s->vbm, i);
                if (pb && !vb) { err = nm_fail(NM_ECORRUPT, "pmalloc check: block %u allocated but free in the vslab", i); break; }
                taken += vb;
                if (pb && !pm_numa_shadowed(s, i)) { live += s->block_size; objs++; }
            }
            if (!err && taken + s->nfree_v != s->nblocks)
                err = nm_fail(NM_ECORRUPT, "pmalloc check: vslab free count %u, bitmap says %u", s->nfree_v, s->nblocks - taken);
        } else if (v->state == PM_VEH_ALLOC && !v->freeing) {
            live += v->npages * PM_PAGE;
            objs++;
        }
        p += v->npages;
    }
    if (!err) err = pm_numa_check(h);
    pthread_mutex_unlock(&h->large_lock);
    pm_xc_lock_all(h, false);
    pm_numa_lock_arenas(h, false);
    uint64_t cb = pm_ctr_sum(h, PMC_LIVE_BYTES), co = pm_ctr_sum(h, PMC_LIVE_OBJS);
    if (!err && (live != cb || objs != co))
        err = nm_fail(NM_ECORRUPT, "pmalloc check: %llu live bytes in %llu objects, counters say %llu in %llu",
                      (unsigned long long)live, (unsigned long long)objs, (unsigned long long)cb, (unsigned long long)co);
    return err;
}

/* ---- recovery ---- */

typedef struct wal_rec {
    uint64_t seq, block, loc, npages;
    unsigned op;
} wal_rec;

static int cmp_rec(const void *a, const void *b)
{
    const wal_rec *x = a, *y = b;
    if (x->block != y->block) return x->block < y->block ? -1 : 1;
    return x->seq > y->seq ? -1 : x->seq < y->seq; /* newest first */
}

static void small_set(pm_heap *h, pm_vslab *s, uint32_t idx, bool alloc)
{
    if (idx & PM_IDX_OLD) { pm_morph_recover_free_old(h, s, idx); return; } /* old blocks are only freed */
    uint64_t *w;
    pbit_update(s, idx, alloc, &w);
    pm_flush(h, w, sizeof *w, PM_META);
    if (alloc && !nm_bitmap_test(s->vbm, idx)) {
        nm_bitmap_set(s->vbm, idx);
        s->nfree_v--;
    } else if (!alloc && nm_bitmap_test(s->vbm, idx)) {
        nm_bitmap_clear(s->vbm, idx);
        s->nfree_v++;
    }
    pm_slab_fix_lists(h, s);
}

/* Finish or undo the operations in flight at the crash (LOG, and large
 * allocations under GC). Idempotent: a crash in here replays the same way. */
static nm_err wal_recover(pm_heap *h)
{
    size_t cap = (size_t)PM_NRINGS * PM_RING_ENTRIES, n = 0;
    wal_rec *recs = malloc(cap * sizeof *recs);
    if (!recs) return nm_fail(NM_ENOMEM, "pmalloc: no host memory for WAL recovery");
    uint64_t retired = h->sb->wal_retired, maxseq = retired;
    for (unsigned r = 0; r < PM_NRINGS; r++) {
        pm_wal_ent *ring = ring_base(h, r);
        for (unsigned i = 0; i < PM_RING_ENTRIES; i++) {
            pm_wal_ent e = ring[i];
            if (!e.seq_op || (uint32_t)e.aux != wal_check(e.seq_op, e.block, e.loc, e.aux >> 32)) continue;
            uint64_t seq = e.seq_op >> 8;
            if (seq > maxseq) maxseq = seq;
            if (seq <= retired) continue;
            unsigned op = (unsigned)(e.seq_op & 0xff);
            if (op < PM_OP_ALLOC_SMALL || op > PM_OP_FREE_LARGE || !loc_ok(h, e.loc)) continue;
            recs[n++] = (wal_rec){seq, e.block, e.loc, e.aux >> 32, op};
        }
    }
    qsort(recs, n, sizeof *recs, cmp_rec);
    nm_err err = NM_OK;
    for (size_t i = 0; i < n && !err; i++) {
        if (i > 0 && recs[i].block == recs[i - 1].block) continue; /* only the newest per block */
        wal_rec *r = &recs[i];
        h->ri.wal_entries++;
        uint64_t at_loc = load_ptr((uint64_t *)(h->base + r->loc)), want = pm_ptr(h, r->block);
        if (r->op == PM_OP_ALLOC_SMALL || r->op == PM_OP_FREE_SMALL) {
            uint32_t idx;
            bool is_small;
            pm_vslab *s = small_lookup(h, r->block, &idx, &is_small);
            if (!s) continue; /* the slab is gone: the operation finished long ago */
            bool bit = pm_pbit(s, idx);
            if (r->op == PM_OP_ALLOC_SMALL) {
                if (bit) continue;
                if (at_loc == want) { small_set(h, s, idx, true); h->ri.wal_redone++; }
                else h->ri.wal_undone++;
            } else {
                if (!bit) continue;
                if (at_loc == want) h->ri.wal_undone++;
                else { small_set(h, s, idx, false); h->ri.wal_redone++; }
            }
        } else {
            if (r->block < h->sb->data_off || (r->block - h->sb->data_off) % PM_PAGE) continue;
            uint64_t page = (r->block - h->sb->data_off) / PM_PAGE;
            if (page >= h->data_pages) continue;
            pm_veh *v = pm_pmap_get(h, page);
            bool alloc = v && v->state == PM_VEH_ALLOC && v->page == page;
            if (r->op == PM_OP_ALLOC_LARGE) {
                if (alloc) continue;
                if (at_loc != want) { h->ri.wal_undone++; continue; }
                pm_veh *nv;
                err = pm_extent_claim(h, page, r->npages, PM_VEH_ALLOC, &nv);
                if (!err) err = pm_bk_record(h, nv);
                h->ri.wal_redone++;
            } else {
                if (!alloc) continue;
                if (at_loc == want) { h->ri.wal_undone++; continue; }
                err = pm_bk_tombstone(h, v);
                if (!err) pm_extent_release(h, v);
                h->ri.wal_redone++;
            }
        }
    }
    free(recs);
    pm_drain(h);
    if (err) return err;
    /* Everything is applied: retire all entries, then clear the rings. */
    __atomic_store_n(&h->sb->wal_retired, maxseq, __ATOMIC_RELAXED);
    pm_persist(h, &h->sb->wal_retired, sizeof(uint64_t), PM_META);
    memset(h->base + h->sb->wal_off, 0, (size_t)PM_NRINGS * PM_RING_BYTES);
    pm_flush(h, h->base + h->sb->wal_off, (size_t)PM_NRINGS * PM_RING_BYTES, PM_META);
    pm_drain(h);
    wal_clocks_raise(h, (maxseq >> 8) + 1);
    return NM_OK;
}

/* GC model (Sec. 7): rebuild the slab bitmaps by a conservative mark from the
 * roots. Any aligned word whose value falls inside an allocated object (small
 * block or extent) keeps that object; small blocks not reached are freed. */
static nm_err gc_recover(pm_heap *h)
{
    uint64_t before = 0;
    for (uint64_t p = 0; p < h->data_pages;) {
        pm_veh *v = h->pmap[p];
        if (v->state == PM_VEH_SLAB) {
            pm_vslab *s = v->slab;
            for (uint32_t i = 0; i < s->nblocks; i++)
                if (pm_pbit(s, i)) before++;
            memset(s->pbm, 0, (size_t)pm_bm_lines(s) * PM_LINE);
            nm_bitmap_zero(s->vbm, s->nblocks);
            s->nfree_v = s->nblocks;
            if (s->mo) {
                nm_err e = pm_morph_gc_begin(h, s, &before); /* old bits: candidates for the mark */
                if (e) return e;
            }
        }
        v->mark = false;
        p += v->npages;
    }
    size_t cap = 1024, n = 0;
    struct rg { const uint64_t *p; size_t words; } *stack = malloc(cap * sizeof *stack);
    if (!stack) return nm_fail(NM_ENOMEM, "pmalloc: no host memory for the GC mark stack");
    stack[n++] = (struct rg){(const uint64_t *)(h->base + h->sb->roots_off), PMALLOC_NROOTS};
    uint64_t marked = 0;
    while (n) {
        struct rg r = stack[--n];
        for (size_t i = 0; i < r.words; i++) {
            uint64_t w;
            if (!pm_ptr_off(h, r.p[i], &w) || w < h->sb->data_off || w >= h->size) continue; /* this heap's pointers only */
            pm_veh *v = pm_pmap_get(h, (w - h->sb->data_off) / PM_PAGE);
            struct rg push = {NULL, 0};
            if (v && v->state == PM_VEH_SLAB) {
                pm_vslab *s = v->slab;
                if (s->mo && pm_morph_gc_mark(h, s, w, &push.p, &push.words, &marked)) goto pushit; /* an old block */
                uint64_t start = pm_off(h, s->data);
                if (w < start || (w - start) / s->block_size >= s->nblocks) continue;
                uint32_t idx = (uint32_t)((w - start) / s->block_size);
                if (nm_bitmap_test(s->vbm, idx)) continue;
                nm_bitmap_set(s->vbm, idx);
                s->nfree_v--;
                uint64_t *wd;
                pbit_update(s, idx, true, &wd);
                marked++;
                push = (struct rg){(const uint64_t *)(h->base + block_off(h, s, idx)), s->block_size / 8};
            } else if (v && v->state == PM_VEH_ALLOC && !v->mark) {
                v->mark = true;
                push = (struct rg){(const uint64_t *)(h->data + v->page * PM_PAGE), v->npages * PM_PAGE / 8};
            }
        pushit:
            if (push.p) {
                if (n == cap) {
                    cap *= 2;
                    struct rg *t = realloc(stack, cap * sizeof *t);
                    if (!t) { free(stack); return nm_fail(NM_ENOMEM, "pmalloc: GC mark stack"); }
                    stack = t;
                }
                stack[n++] = push;
            }
        }
    }
    free(stack);
    for (uint64_t p = 0; p < h->data_pages;) {
        pm_veh *v = h->pmap[p];
        if (v->state == PM_VEH_SLAB) {
            if (v->slab->mo) pm_morph_gc_end(h, v->slab); /* rewrites the old bitmap, unblocks new blocks */
            pm_flush(h, v->slab->pbm, (size_t)pm_bm_lines(v->slab) * PM_LINE, PM_META);
            pm_slab_fix_lists(h, v->slab);
        }
        v->mark = false;
        p += v->npages;
    }
    pm_drain(h);
    h->ri.gc_marked = marked;
    h->ri.gc_freed = before > marked ? before - marked : 0;
    return NM_OK;
}

static void recount(pm_heap *h)
{
    uint64_t live = 0, objs = 0;
    for (uint64_t p = 0; p < h->data_pages;) {
        pm_veh *v = h->pmap[p];
        if (v->state == PM_VEH_SLAB) {
            for (uint32_t i = 0; i < v->slab->nblocks; i++)
                if (pm_pbit(v->slab, i)) { live += v->slab->block_size; objs++; }
            if (v->slab->mo) pm_morph_count(v->slab, &live, &objs);
        } else if (v->state == PM_VEH_ALLOC) {
            live += v->npages * PM_PAGE;
            objs++;
        }
        p += v->npages;
    }
    pm_ctr_set(h, PMC_LIVE_BYTES, live);
    pm_ctr_set(h, PMC_LIVE_OBJS, objs);
}

/* ---- open / close ---- */

static void heap_free(pm_heap *h)
{
    if (!h) return;
    pm_handle_drop(h->handle);
    pm_numa_free(h); /* stops the synchronisation threads first */
    pm_large_free_all(h);
    pm_vslabs_destroy(h);
    if (h->arenas) {
        for (unsigned i = 0; i < h->narenas; i++) pthread_mutex_destroy(&h->arenas[i].lock);
        pm_xc_destroy(h);
        free(h->arenas);
    }
    pm_sim_free(h);
    if (h->files) pm_files_unmap(h); /* node files: one reservation, several mappings */
    else if (h->base) pmem_unmap(h->base, h->size);
    if (h->lock_fd >= 0) close(h->lock_fd);
    pthread_mutex_destroy(&h->large_lock);
    pthread_mutex_destroy(&h->tc_lock);
    pthread_mutex_destroy(&h->sim_lock);
    pm_ctr_free(h);
    free(h->wclk);
    free(h);
}

/* A failed create removes what it made (the main file, or the node files and
 * the temporary main file), after unmapping. */
static nm_err create_failed(pm_heap *h, const char *path, nm_err e)
{
    bool files = h->files != NULL;
    if (files) pm_files_discard(h);
    heap_free(h);
    if (!files) unlink(path);
    return e;
}

/* An interrupted create of an older build (which wrote pmalloc.heap in place,
 * magic last): no magic, and a blank first page or a superblock describing a
 * file of exactly this size. Anything else without magic is not ours. */
static bool leftover_create(const pm_super *sb, off_t size)
{
    if (sb->magic != 0) return false;
    if (size < (off_t)PM_PAGE) return size == 0;
    const uint64_t *w = (const uint64_t *)sb;
    bool blank = true;
    for (unsigned i = 0; i < PM_PAGE / 8 && blank; i++) blank = w[i] == 0;
    return blank || (sb->version >= 1 && sb->version <= PM_VERSION_FILES && sb->heap_size == (uint64_t)size);
}

static nm_err validate_super(const pm_super *sb, size_t len)
{
    if (sb->magic != PM_MAGIC)
        return nm_fail(NM_EFORMAT, "pmalloc: not a PMAlloc heap (bad magic %016llx; an interrupted create leaves none)",
                       (unsigned long long)sb->magic);
    if (sb->version == 1 || sb->version == 2)
        return nm_fail(NM_EFORMAT, "pmalloc: heap format version %u was written by an older nearmem (pointers without the heap's tag); "
                                   "this build reads versions %u and %u: recreate the heap", sb->version, PM_VERSION, PM_VERSION_FILES);
    if (sb->version != PM_VERSION && sb->version != PM_VERSION_FILES)
        return nm_fail(NM_EFORMAT, "pmalloc: heap format version %u, this build reads %u and %u", sb->version, PM_VERSION, PM_VERSION_FILES);
    if (sb->check != super_check(sb)) return nm_fail(NM_ECORRUPT, "pmalloc: superblock checksum mismatch");
    uint64_t numa_bytes;
    nm_err e = pm_numa_region_of(sb, &numa_bytes);
    if (e) return e;
    layout l;
    compute_layout(sb->heap_size, sb->nchunks, numa_bytes, &l);
    if (sb->nchunks < 4 || sb->nchunks > PM_MAX_CHUNKS || l.data_off + 64 * PM_PAGE > len || sb->heap_size != len || sb->roots_off != l.roots_off || sb->wal_off != l.wal_off || sb->bk_off != l.bk_off ||
        sb->data_off != l.data_off || sb->nchunks != l.nchunks || sb->nrings != PM_NRINGS || sb->nroots != PMALLOC_NROOTS ||
        sb->model > PMALLOC_GC || sb->stripes == 0 || sb->stripes > PMALLOC_MAX_STRIPES || sb->ptr_tag == 0 ||
        sb->ptr_tag > PM_TAG_MASK >> PMALLOC_PTR_OFFSET_BITS)
        return nm_fail(NM_ECORRUPT, "pmalloc: superblock layout does not match a %zu-byte heap", len);
    if (sb->state != PM_STATE_CLEAN && sb->state != PM_STATE_RUNNING && sb->state != PM_STATE_RECOVERING)
        return nm_fail(NM_ECORRUPT, "pmalloc: unknown heap state %016llx", (unsigned long long)sb->state);
    if (sb->bk_alt > 1) return nm_fail(NM_ECORRUPT, "pmalloc: bookkeeping-log alt bit is %llu", (unsigned long long)sb->bk_alt);
    return NM_OK;
}

nm_err pmalloc_open(const char *dir, const pmalloc_options *opt, pmalloc_heap **out)
{
    if (!dir || !out) return nm_fail(NM_EINVAL, "pmalloc_open: NULL argument");
    *out = NULL;
    pmalloc_options o;
    if (opt) o = *opt;
    else { pmalloc_options_default(&o); o.create = false; }
    if (o.stripes == 0) o.stripes = PMALLOC_DEFAULT_STRIPES;
    if (o.stripes > PMALLOC_MAX_STRIPES) return nm_fail(NM_EINVAL, "pmalloc_open: %u stripes > %u", o.stripes, PMALLOC_MAX_STRIPES);
    if (o.model > PMALLOC_GC || o.persist > PMALLOC_PERSIST_SIM || o.eadr > PMALLOC_EADR_ON)
        return nm_fail(NM_EINVAL, "pmalloc_open: bad option value");
    if (o.morph_su > 100 && o.morph_su != PMALLOC_MORPH_OFF)
        return nm_fail(NM_EINVAL, "pmalloc_open: morph_su %u is not a percentage (or PMALLOC_MORPH_OFF)", o.morph_su);
    char path[4096];
    if (snprintf(path, sizeof path, "%s/%s", dir, PMALLOC_FILE_NAME) >= (int)sizeof path)
        return nm_fail(NM_EINVAL, "pmalloc_open: directory name too long");
    struct stat st;
    bool exists = stat(path, &st) == 0;
    if (!exists && !o.create) return nm_fail(NM_ENOENT, "pmalloc_open: %s does not exist", path);
    if (!exists && (o.size < PM_MIN_HEAP || o.size % PM_PAGE || (uint64_t)o.size >> PMALLOC_PTR_OFFSET_BITS))
        return nm_fail(NM_ERANGE, "pmalloc_open: heap size %zu must be a multiple of 4 KiB, >= %u and < 16 TiB", o.size, PM_MIN_HEAP);
    if (!exists && o.log_chunks && (o.log_chunks < 4 || o.log_chunks > PM_MAX_CHUNKS || (uint64_t)o.log_chunks * PM_CHUNK_BYTES > o.size / 4))
        return nm_fail(NM_ERANGE, "pmalloc_open: %u log chunks (need 4 .. heap/4 KiB)", o.log_chunks);

    pm_heap *h = calloc(1, sizeof *h);
    if (!h) return nm_fail(NM_ENOMEM, "pmalloc_open: no host memory");
    if (!(h->handle = pm_handle_new(h))) { /* before recovery: its simulation hook gets the handle */
        free(h);
        return NM_EBUSY;
    }
    /* adaptive: spin briefly before sleeping; the extent lock is held for a
     * search and one log append, and a futex sleep/wake per handoff made two
     * threads slower than one (pmalloc-large) */
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ADAPTIVE_NP);
    pthread_mutex_init(&h->large_lock, &ma);
    pthread_mutexattr_destroy(&ma);
    pthread_mutex_init(&h->tc_lock, NULL);
    pthread_mutex_init(&h->sim_lock, NULL);
    h->lock_fd = -1;
    if (pm_ctr_init(h)) {
        free(h->ctr_shared);
        free(h);
        return nm_fail(NM_ENOMEM, "pmalloc_open: no host memory");
    }
    nm_err err = pm_numa_setup(h, &o); /* before mapping: the node count decides the file layout of a new heap */
    if (err) { heap_free(h); return err; }
    size_t mapped = 0;
    int is_pmem = 0;
    if (exists) {
        /* one user at a time: two processes (or handles) on one heap would corrupt it */
        h->lock_fd = open(path, O_RDWR | O_CLOEXEC);
        if (h->lock_fd < 0) {
            nm_err e = nm_fail(NM_EIO, "pmalloc_open: cannot open %s: %s", path, strerror(errno));
            heap_free(h);
            return e;
        }
        if (flock(h->lock_fd, LOCK_EX | LOCK_NB) != 0) {
            heap_free(h);
            return nm_fail(NM_EBUSY, "pmalloc_open: %s is open in another handle or process", path);
        }
        /* the superblock decides: one file (version 3), or node files too (version 4) */
        pm_super *sb0 = aligned_alloc(PM_LINE, PM_PAGE);
        if (!sb0) { heap_free(h); return nm_fail(NM_ENOMEM, "pmalloc_open: no host memory"); }
        if (pread(h->lock_fd, sb0, PM_PAGE, 0) != (ssize_t)PM_PAGE) memset(sb0, 0, PM_PAGE);
        if (o.create && leftover_create(sb0, st.st_size)) {
            /* what a create of an older build left when it was killed (it wrote
             * the file in place, magic last): replaced, under its lock */
            free(sb0);
            if (unlink(path) != 0) { nm_err e = nm_fail(NM_EIO, "pmalloc_open: cannot remove the leftover %s: %s", path, strerror(errno)); heap_free(h); return e; }
            close(h->lock_fd);
            h->lock_fd = -1;
            exists = false;
            goto create;
        }
        if ((size_t)st.st_size < PM_PAGE) { /* a main file of a heap with node files may be below PM_MIN_HEAP */
            free(sb0);
            heap_free(h);
            return nm_fail(NM_EFORMAT, "pmalloc: %s (%lld bytes) is too small to be a PMAlloc heap", path, (long long)st.st_size);
        }
        if (sb0->magic == PM_MAGIC && sb0->version == PM_VERSION_FILES) {
            if (!(err = validate_super(sb0, sb0->heap_size))) err = pm_files_open(h, dir, &o, sb0, &is_pmem);
            free(sb0);
            if (err) { heap_free(h); return err; }
            mapped = h->size;
        } else {
            free(sb0);
            if (st.st_size < (off_t)PM_MIN_HEAP) {
                heap_free(h);
                return nm_fail(NM_EFORMAT, "pmalloc: %s (%lld bytes) is too small to be a PMAlloc heap", path, (long long)st.st_size);
            }
            h->base = pmem_map_file(path, 0, 0, 0, &mapped, &is_pmem);
        }
    } else create: if (h->numa->nnodes > 1 && !o.single_file) {
        /* one file per node (Sec. 6.1); the layout is known before any file exists */
        layout l0;
        compute_layout(o.size, o.log_chunks, pm_numa_new_region(h, o.size, &o), &l0);
        if ((err = pm_files_create(h, dir, &o, h->numa->nnodes, l0.data_off, o.size, &is_pmem))) {
            pm_files_discard(h);
            heap_free(h);
            return err;
        }
        mapped = h->size;
    } else {
        if ((err = pm_files_create_single(h, dir, o.size, &is_pmem))) { /* under a temporary name, renamed last */
            pm_files_discard(h);
            heap_free(h);
            return err;
        }
        mapped = h->size;
    }
    if (!h->base) {
        nm_err e = nm_fail(NM_EIO, "pmalloc_open: cannot map %s: %s", path, pmem_errormsg());
        heap_free(h);
        return e;
    }
    h->size = mapped;
    h->sb = (pm_super *)h->base;
    if (exists && !h->files && (err = validate_super(h->sb, mapped))) { heap_free(h); return err; }
    if (exists && !h->files && h->sb->version != PM_VERSION) {
        heap_free(h);
        return nm_fail(NM_ECORRUPT, "pmalloc: %s says version %u (node files) but its header was not readable", path, PM_VERSION_FILES);
    }

    /* persistence mode and eADR */
    h->persist = o.persist == PMALLOC_PERSIST_AUTO ? (is_pmem ? PMALLOC_PERSIST_CPU : PMALLOC_PERSIST_MSYNC) : o.persist;
    h->eadr = o.eadr == PMALLOC_EADR_ON || (o.eadr == PMALLOC_EADR_AUTO && pmem_has_auto_flush() == 1);
    if (h->persist == PMALLOC_PERSIST_SIM) h->eadr = false; /* the simulation models flushes */
    h->stripes = h->eadr ? 1 : o.stripes;
    h->interleave = h->stripes > 1;
    if (h->persist == PMALLOC_PERSIST_SIM) {
        if ((err = pm_sim_init(h, !exists))) { if (!exists) return create_failed(h, path, err); heap_free(h); return err; }
        h->sim_hook = o.sim_hook;
        h->sim_arg = o.sim_arg;
    }

    layout l;
    uint64_t numa_bytes = 0;
    if (exists) pm_numa_region_of(h->sb, &numa_bytes); /* validated above */
    else numa_bytes = pm_numa_new_region(h, mapped, &o);
    compute_layout(exists ? h->sb->heap_size : mapped, exists ? h->sb->nchunks : o.log_chunks, numa_bytes, &l);
    if (!exists) {
        pm_super *sb = h->sb;
        sb->version = h->files->single ? PM_VERSION : PM_VERSION_FILES;
        sb->model = o.model;
        sb->heap_size = mapped;
        sb->stripes = h->stripes;
        sb->nrings = PM_NRINGS;
        sb->nchunks = l.nchunks;
        sb->nroots = PMALLOC_NROOTS;
        sb->roots_off = l.roots_off;
        sb->wal_off = l.wal_off;
        sb->bk_off = l.bk_off;
        sb->data_off = l.data_off;
        sb->state = PM_STATE_RUNNING;
        sb->wal_retired = 0;
        uint64_t tag = 0;
        if (getrandom(&tag, sizeof tag, 0) != (ssize_t)sizeof tag) tag = nm_now_ns() ^ (uint64_t)getpid() << 20;
        tag &= PM_TAG_MASK >> PMALLOC_PTR_OFFSET_BITS;
        sb->ptr_tag = tag ? tag : 1;
        if (numa_bytes && (err = pm_numa_create(h, l.numa_off))) return create_failed(h, path, err);
    }
    h->model = (pmalloc_model)h->sb->model;
    h->tagbits = h->sb->ptr_tag << PMALLOC_PTR_OFFSET_BITS;
    h->morph_su = o.morph_su == PMALLOC_MORPH_OFF ? 0 : o.morph_su ? o.morph_su : PM_MORPH_DEFAULT_SU;
    h->decay_ns = o.decay_ms == PMALLOC_DECAY_NEVER ? UINT64_MAX : (uint64_t)(o.decay_ms ? o.decay_ms : 10000) * 1000000ull;
    if (h->persist == PMALLOC_PERSIST_SIM) h->decay_ns = UINT64_MAX; /* the image is compared line by line */
    h->nchunks = h->sb->nchunks;
    h->data = h->base + h->sb->data_off;
    h->data_pages = (h->size - h->sb->data_off) / PM_PAGE;
    h->narenas = pm_numa_narenas(h, o.narenas ? o.narenas : nm_nproc()); /* a multiple of the nodes */
    h->wclk = aligned_alloc(_Alignof(pm_wclk), PM_WCLK_N * sizeof(pm_wclk));
    if (h->wclk) memset(h->wclk, 0, PM_WCLK_N * sizeof(pm_wclk));
    h->arenas = h->wclk ? aligned_alloc(_Alignof(pm_arena), h->narenas * sizeof *h->arenas) : NULL;
    if (h->arenas) memset(h->arenas, 0, h->narenas * sizeof *h->arenas);
    if (!h->arenas) {
        err = nm_fail(NM_ENOMEM, "pmalloc_open: arenas");
        if (!exists) return create_failed(h, path, err);
        heap_free(h);
        return err;
    }
    for (unsigned i = 0; i < h->narenas; i++) {
        pthread_mutex_init(&h->arenas[i].lock, NULL);
        h->arenas[i].id = i;
        h->arenas[i].node = pm_numa_arena_node(h, i);
    }
    pm_xc_init(h);
    if ((err = pm_small_init(h)) || (err = pm_large_init(h, !exists))) { if (!exists) return create_failed(h, path, err); heap_free(h); return err; }
    if (!exists) {
        /* the zero-filled file already has empty roots and WAL rings; the
         * magic goes last, so an interrupted create is refused, not misread */
        h->sb->check = super_check(h->sb);
        pm_persist(h, h->sb, 128, PM_META);
        if (!h->files->single) pm_files_persist_hdr(h); /* written and synced before the node files; this is for the simulation image */
        h->sb->magic = PM_MAGIC;
        h->sb->check = super_check(h->sb);
        pm_persist(h, h->sb, 3 * PM_LINE, PM_META);
        h->ri.created = true;
    }
    /* vslabs for every slab in the log */
    for (uint64_t p = 0; p < h->data_pages && !err;) {
        pm_veh *v = h->pmap[p];
        if (v->state == PM_VEH_SLAB) err = pm_slab_adopt(h, v);
        p += v->npages;
    }
    if (!err) err = pm_numa_open(h); /* validate the deallocation logs; replay them (LOG) */
    if (!err && !exists) err = pm_files_commit(h); /* the main file gets its name last */
    if (!err && !exists) pm_files_detach(h);       /* one file: an ordinary heap from here */
    if (err) { if (!exists) return create_failed(h, path, err); heap_free(h); return err; }
    wal_clocks_raise(h, (h->sb->wal_retired >> 8) + 1);
    if (exists) {
        uint64_t state = h->sb->state;
        h->ri.was_clean = state == PM_STATE_CLEAN;
        h->ri.was_recovering = state == PM_STATE_RECOVERING;
        if (state != PM_STATE_CLEAN) set_state(h, PM_STATE_RECOVERING);
        err = wal_recover(h); /* clean heaps have empty rings: a no-op */
        if (!err && state != PM_STATE_CLEAN && h->model == PMALLOC_GC) err = gc_recover(h);
        if (!err && h->bk_tombs > 0) err = pm_bk_compact(h);
        if (err) { heap_free(h); return err; }
        set_state(h, PM_STATE_RUNNING);
    }
    recount(h);
    if (pthread_key_create(&h->tc_key, pm_tc_destructor) != 0) {
        heap_free(h);
        return nm_fail(NM_EBUSY, "pmalloc_open: no thread-specific key left");
    }
    pm_numa_start(h);
    *out = h->handle;
    return NM_OK;
}

nm_err pmalloc_close(pmalloc_heap *hd)
{
    PM_ENTER_ERR(h, hd); /* the handle stays valid until heap_free (a simulation hook may run in here) */
    pm_tc_destroy_all(h);
    pm_numa_close(h); /* apply every pending remote free (Sec. 7: epoch sync at normal shutdown) */
    pthread_key_delete(h->tc_key);
    if (h->model == PMALLOC_GC) { /* the bitmaps were left volatile at run time */
        for (uint64_t p = 0; p < h->data_pages;) {
            pm_veh *v = h->pmap[p];
            if (v->state == PM_VEH_SLAB) pm_flush(h, v->slab->pbm, (size_t)pm_bm_lines(v->slab) * PM_LINE, PM_META);
            p += v->npages;
        }
        pm_drain(h);
    }
    /* every operation finished: retire the log, then mark the heap clean */
    uint64_t last = wal_seq_bound(h);
    if (last > h->sb->wal_retired) {
        h->sb->wal_retired = last;
        pm_persist(h, &h->sb->wal_retired, sizeof(uint64_t), PM_META);
    }
    memset(h->base + h->sb->wal_off, 0, (size_t)PM_NRINGS * PM_RING_BYTES);
    pm_flush(h, h->base + h->sb->wal_off, (size_t)PM_NRINGS * PM_RING_BYTES, PM_META);
    pm_drain(h);
    set_state(h, PM_STATE_CLEAN);
    heap_free(h);
    return NM_OK;
}

void pmalloc_abandon(pmalloc_heap *hd)
{
    PM_ENTER(h, hd, );
    pm_handle_drop(hd);
    pm_tc_forget_all(h);
    pthread_key_delete(h->tc_key);
    heap_free(h);
}
