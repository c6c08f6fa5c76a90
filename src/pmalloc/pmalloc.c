/* PMAlloc heap: the public calls. Open/create (validation, node files,
 * recovery: Sec. 7), malloc_to / free_from with the LOG and GC models
 * (Sec. 2.3, 4.1), pointers and roots, statistics, walk, check, close.
 *
 * LOG: one operation commits with one redo record, one flushed line and one
 * fence (redo.c); its effects (the pointer word, the slab bit, an extent's
 * log entry) are stored in memory and written back by checkpoints.
 * GC: a small operation persists only the pointer word (recovery marks from
 * the roots); extents follow the LOG path and persist the pointer word too.
 * Frees claim their block first (a bit per 16 bytes of the slab), so of two
 * concurrent frees of one object the loser changes nothing. */
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
#include "pm_api.h"

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
    uint64_t roots_off, redo_off, bk_off, data_off;
    uint32_t nchunks;
    uint64_t numa_off; /* NUMA region (remote-free logs, numa.c/remote.c); numa_bytes may be 0 */
} layout;

static void compute_layout(uint64_t size, uint32_t nchunks, uint64_t numa_bytes, uint32_t nrings, uint32_t recs, layout *l)
{
    l->roots_off = PM_PAGE;
    l->redo_off = l->roots_off + NM_ALIGN_UP((uint64_t)PMALLOC_NROOTS * 8, PM_PAGE);
    l->bk_off = NM_ALIGN_UP(l->redo_off + (uint64_t)nrings * recs * sizeof(pm_rec), PM_PAGE);
    /* one log entry per data page: 4x the most extents+slabs that fit (>= 16 KiB each) */
    l->nchunks = nchunks ? nchunks : (uint32_t)(size / PM_PAGE / PM_CHUNK_ENTRIES + 16);
    l->numa_off = NM_ALIGN_UP(l->bk_off + (uint64_t)l->nchunks * PM_CHUNK_BYTES, PM_PAGE);
    l->data_off = NM_ALIGN_UP(l->numa_off + numa_bytes, PM_PAGE);
}

static uint64_t super_check(const pm_super *sb) { return XXH64(sb, offsetof(pm_super, check), 0x9e3779b9); }
uint64_t pm_super_check(const pm_super *sb) { return super_check(sb); }

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

/* Set or clear a block's persistent bit (and the slab's bitmap digest);
 * returns the previous bit. */
static bool pbit_update(pm_heap *h, pm_vslab *s, uint32_t idx, bool set, uint64_t **word)
{
    uint64_t m, *w = pm_pbm_word(s, idx, &m);
    /* the geometry is read before the bit changes: once it is set a morph may
     * start and change it (morph.c reads the bits with acquire) */
    uint64_t hash = pm_blk_hash(pm_blk_off(h, s, idx));
    uint64_t old = set ? __atomic_fetch_or(w, m, __ATOMIC_RELEASE) : __atomic_fetch_and(w, ~m, __ATOMIC_RELEASE);
    *word = w;
    bool was = (old & m) != 0;
    if (was != set) __atomic_fetch_xor(&s->digest, hash, __ATOMIC_RELAXED); /* XOR: order-free */
    return was;
}

/* ---- allocation ---- */

/* GC model: a fresh block still holds its previous object's words, and after
 * a crash the conservative mark (gc_recover) follows every word of a
 * reachable block that carries this heap's tag, so a block published with
 * stale pointers would revive objects freed long ago (a leak per crash, and
 * for as long as the new owner leaves those words alone). Clear such words
 * and make that durable before the block can be reached: one extra flush and
 * fence only when the block held a pointer of this heap (a block that held
 * none costs a read of its words). Only tagged words are cleared: other data
 * is never followed and its lines need no write-back. */
static void gc_clear_stale(pm_heap *h, char *blk, uint64_t bytes)
{
    uint64_t *w = (uint64_t *)(void *)blk, nw = bytes / 8, lo = h->sb->data_off, hi = h->size;
    bool any = false;
    for (uint64_t i = 0; i < nw; i += PM_LINE / 8) {
        bool line = false;
        for (uint64_t j = i; j < i + PM_LINE / 8 && j < nw; j++) {
            uint64_t off;
            if (pm_ptr_off(h, w[j], &off) && off >= lo && off < hi) { /* what gc_recover follows */
                w[j] = 0;
                line = true;
            }
        }
        if (line) {
            pm_flush(h, w + i, PM_LINE, PM_USER);
            any = true;
        }
    }
    if (any) pm_drain(h);
}

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

/* The heap ran out of pages: empty slabs that wait for a checkpoint (LOG,
 * pm_slab_sweep) are free space. true: some went back, try again. No lock
 * held. */
static bool release_waiting(pm_heap *h)
{
    if (!pm_slab_sweep_due(h)) return false;
    if (pm_checkpoint(h, 0) != NM_OK) return false;
    pm_slab_sweep(h, true); /* the arenas the checkpoint's sweep could not lock */
    return true;
}

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
        if (err == NM_ENOMEM && release_waiting(h)) err = pm_small_take(h, tc, (unsigned)cls, &k);
        if (err) return err;
        uint64_t b = block_off(h, k.s, k.idx), *w, bsize = k.s->block_size; /* once the bit is set, a morph may start */
        if (h->model == PMALLOC_LOG) {
            /* one line, one fence: the record; then the effects, in memory only */
            pm_redo_reserve(h, tc);
            uint64_t seq = pm_redo_begin(h, tc);
            pm_redo_commit(h, tc, seq, PM_OP_ALLOC_SMALL, b, dst_off, bsize);
            store_ptr(dst, pm_ptr(h, b));
            pbit_update(h, k.s, k.idx, true, &w);
            pm_redo_done(h, tc, seq, w, dst, k.s, b);
        } else {
            /* GC: only the user pointer is persisted; recovery re-marks. The
             * block's previous contents must not reach the mark: words that
             * look like this heap's pointers are cleared, durably, before the
             * block is published */
            gc_clear_stale(h, h->base + b, bsize);
            store_ptr(dst, pm_ptr(h, b));
            pm_flush(h, dst, sizeof *dst, PM_USER);
            pm_drain(h);
            pbit_update(h, k.s, k.idx, true, &w);
        }
        pm_ctr_add(h, PMC_LIVE_BYTES, bsize);
        pm_ctr_add(h, PMC_LIVE_OBJS, 1);
        return NM_OK;
    }

    /* An extent comes from the arena's store of freed extents (xcache.c, the
     * store's lock) or from the extent allocator (large_lock: best fit, split).
     * Its log entry is stored after the commit (bk_lock) and written back at
     * a checkpoint; room for it is reserved before (pm_bk_reserve, mostly from
     * the thread's credits), so the append cannot fail once the operation is
     * committed. A cached extent's operation never takes large_lock. */
    uint64_t npages = (size + PM_PAGE - 1) / PM_PAGE;
    pm_redo_reserve(h, tc);
    if ((err = pm_bk_reserve(h, tc, true))) return err;
    pm_veh *v;
    bool cached = pm_xc_take(h, tc->arena, npages, &v);
    pm_ctr_add(h, cached ? PMC_XC_HIT : PMC_XC_MISS, 1);
    if (!cached) {
        /* empty slabs waiting for a checkpoint (LOG) may be what this node has
         * left: they go back before the extent goes to another node */
        bool waiting = pm_slab_sweep_due(h);
        pthread_mutex_lock(&h->large_lock);
        err = pm_numa_extent_alloc(h, tc->node, npages, PM_VEH_ALLOC, !waiting, &v);
        pthread_mutex_unlock(&h->large_lock);
        if (err == NM_ENOMEM && waiting) {
            release_waiting(h);
            pthread_mutex_lock(&h->large_lock);
            err = pm_numa_extent_alloc(h, tc->node, npages, PM_VEH_ALLOC, true, &v);
            pthread_mutex_unlock(&h->large_lock);
        }
        if (err == NM_ENOMEM && pm_xc_flush_all(h)) { /* cached space is free space */
            pthread_mutex_lock(&h->large_lock);
            err = pm_numa_extent_alloc(h, tc->node, npages, PM_VEH_ALLOC, true, &v);
            pthread_mutex_unlock(&h->large_lock);
        }
        if (err == NM_ENOMEM && release_waiting(h)) { /* and so are empty slabs */
            pthread_mutex_lock(&h->large_lock);
            err = pm_numa_extent_alloc(h, tc->node, npages, PM_VEH_ALLOC, true, &v);
            pthread_mutex_unlock(&h->large_lock);
        }
        if (err) {
            pm_bk_unreserve(h, tc);
            return err;
        }
        pm_extent_map(h, v); /* its inner pages, outside the extent lock */
    }
    uint64_t e = h->sb->data_off + v->page * PM_PAGE;
    uint64_t seq = pm_redo_begin(h, tc);
    pm_redo_commit(h, tc, seq, PM_OP_ALLOC_LARGE, e, dst_off, npages);
    store_ptr(dst, pm_ptr(h, e));
    /* GC: the pointer word and the log entry are made durable here, in that
     * order (the old three-step protocol): GC replays no pointer words, and
     * its recovery decides an interrupted extent operation from them (redo.c) */
    if (h->model == PMALLOC_GC) pm_persist(h, dst, sizeof *dst, PM_USER);
    err = pm_bk_op_append(h, v, false); /* reserved: cannot fail; its lane's lock */
    if (cached) pm_ctr_add(h, PMC_XC_EXT, 1);
    pm_redo_done(h, tc, seq, NULL, dst, NULL, 0);
    pm_ctr_add(h, PMC_LIVE_BYTES, npages * PM_PAGE);
    pm_ctr_add(h, PMC_LIVE_OBJS, 1);
    return err;
}

/* v is the page map's VEH of `page`, an allocated extent starting there with its log entry */
static bool large_at(pm_heap *h, const pm_veh *v, uint64_t page)
{
    return v && pm_pmap_get(h, page) == v && __atomic_load_n(&v->state, __ATOMIC_ACQUIRE) == PM_VEH_ALLOC &&
           __atomic_load_n(&v->page, __ATOMIC_RELAXED) == page && __atomic_load_n(&v->bkpos, __ATOMIC_ACQUIRE) >= 0;
}

static bool large_try_claim(pm_heap *h, pm_veh *v, uint64_t page)
{
    bool no = false;
    if (!__atomic_compare_exchange_n(&v->freeing, &no, true, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) return false;
    if (large_at(h, v, page)) return true;
    __atomic_store_n(&v->freeing, false, __ATOMIC_RELEASE); /* changed meanwhile: not ours */
    return false;
}

/* Claim the allocated extent at heap offset p (rel: from the data area) for
 * its free, without a lock: an ALLOC VEH changes only after a free has
 * claimed it (`freeing`, one CAS), and VEHs are never freed while the heap is
 * open, so the page map's VEH is read, claimed, and then checked again (it may
 * have been freed and recycled in between, by a racing double free). What
 * fails the quick way is decided under the extent lock. */
static nm_err large_claim(pm_heap *h, uint64_t p, uint64_t rel, pm_veh **out)
{
    uint64_t page = rel / PM_PAGE;
    pm_veh *v = pm_pmap_get(h, page);
    if (rel % PM_PAGE == 0 && large_at(h, v, page) && large_try_claim(h, v, page)) {
        *out = v;
        return NM_OK;
    }
    uint64_t t0 = nm_now_ns();
    struct { pm_veh *v; int st; uint64_t vpage; } seen = {NULL, -1, 0}, last;
    for (int tries = 0;; tries++) {
        pthread_mutex_lock(&h->large_lock);
        v = pm_pmap_get(h, page);
        /* The extent lock does not hold a free that completes into an extent
         * store (store lock only): what is read here may mix moments of it
         * (an old state with a new page, CI tsan run 2026-11-29). Whoever
         * finds the VEH claimed waits until that free ends and reads again;
         * a clear claim comes with its final state (a store's insert clears
         * `freeing` last; read here first). */
        bool freeing = v && __atomic_load_n(&v->freeing, __ATOMIC_ACQUIRE);
        int st = v ? __atomic_load_n(&v->state, __ATOMIC_ACQUIRE) : PM_VEH_FREE;
        uint64_t vpage = v ? __atomic_load_n(&v->page, __ATOMIC_RELAXED) : 0;
        bool at = st == PM_VEH_ALLOC && vpage == page && rel % PM_PAGE == 0;
        last = seen;
        seen.v = v, seen.st = st, seen.vpage = vpage;
        if (at && !freeing && __atomic_load_n(&v->bkpos, __ATOMIC_ACQUIRE) >= 0) {
            if (large_try_claim(h, v, page)) {
                pthread_mutex_unlock(&h->large_lock);
                *out = v;
                return NM_OK;
            }
            freeing = true; /* claimed by another free after our read (claims take no lock) */
        }
        pthread_mutex_unlock(&h->large_lock);
        /* a claim is a free in progress (done in microseconds, more with msync
         * persistence) or a remote free waiting for its owner (Sec. 6.3,
         * possibly long): wait a little, then decide on what is seen */
        if (freeing && (tries < 64 || nm_now_ns() - t0 < 50000000ull)) {
            sched_yield();
            continue;
        }
        /* a verdict from two equal reads in a row (a free may have run whole
         * between our first load and the next) */
        if ((seen.v != last.v || seen.st != last.st || seen.vpage != last.vpage) && tries < 1000) continue;
        /* an aligned address in free space is most likely a stale pointer to an
         * object freed before (a slab released when its last block went) */
        bool dbl = (at && freeing) || ((st == PM_VEH_FREE || st == PM_VEH_CACHED) && p % 16 == 0);
        if (dbl) return nm_fail(NM_EDOUBLEFREE, "pmalloc_free_from: %#llx is not allocated (already free?)", (unsigned long long)p);
        return nm_fail(NM_EBADFREE, "pmalloc_free_from: %#llx is not the start of an allocated extent", (unsigned long long)p);
    }
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
    pm_redo_reserve(h, tc); /* before the claim: a checkpoint may run here */
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
        uint64_t *w = NULL;
        /* a block of another node's arena: two-phase remote free (Sec. 6.2, Alg. 2);
         * once recorded, its owner may release the slab: s is not read after that */
        bool remote = !(idx & PM_IDX_OLD) && pm_numa_is_remote(h, tc, s); /* old blocks: direct (morph.c) */
        uint64_t bsize = pm_blk_size(s, idx);
        if (h->model == PMALLOC_LOG) {
            if (remote) pm_numa_remote_reserve(h, tc); /* its deallocation-log slot, before the commit */
            uint64_t seq = pm_redo_begin(h, tc);
            pm_redo_commit(h, tc, seq, PM_OP_FREE_SMALL, p, src_off, bsize);
            store_ptr(src, 0);
            if (remote) pm_numa_remote_free(h, tc, s, idx); /* the owner clears the bit (and writes it back); releases the claim */
            else {
                pbit_update(h, s, idx, false, &w);
                /* an old block's bit is written back at once: the new blocks it
                 * covers become allocatable, and recovery reads the old bits
                 * to tell old blocks from new ones (morph.c) */
                if (idx & PM_IDX_OLD) { pm_persist(h, w, sizeof *w, PM_META); w = NULL; }
                __atomic_fetch_and(cw, ~cm, __ATOMIC_SEQ_CST);
            }
            pm_redo_done(h, tc, seq, w, src, remote ? NULL : s, p);
        } else {
            store_ptr(src, 0);
            pm_flush(h, src, sizeof *src, PM_USER);
            pm_drain(h);
            if (remote) pm_numa_remote_free(h, tc, s, idx);
            else if (idx & PM_IDX_OLD) { /* old bits stay exact under GC: its checksum word, then its bit (morph.c) */
                pthread_mutex_lock(&h->old_lock);
                pm_morph_gc_freeing(h, s, idx);
                pbit_update(h, s, idx, false, &w);
                pm_persist(h, w, sizeof *w, PM_META);
                pthread_mutex_unlock(&h->old_lock);
                __atomic_fetch_and(cw, ~cm, __ATOMIC_SEQ_CST);
            } else {
                pbit_update(h, s, idx, false, &w);
                __atomic_fetch_and(cw, ~cm, __ATOMIC_SEQ_CST);
            }
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
    uint64_t rel = p - h->sb->data_off;
    /* the tombstone's room, before the commit (mostly from the thread's credits) */
    if ((err = pm_bk_reserve(h, tc, false))) return err;
    pm_veh *v = NULL;
    if ((err = large_claim(h, p, rel, &v))) {
        pm_bk_unreserve(h, tc);
        return err;
    }
    bool remote = pm_numa_extent_is_remote(h, tc, v);
    if (remote) pm_numa_remote_reserve(h, tc);
    uint64_t bytes = v->npages * PM_PAGE;
    uint64_t seq = pm_redo_begin(h, tc);
    pm_redo_commit(h, tc, seq, PM_OP_FREE_LARGE, p, src_off, v->npages);
    store_ptr(src, 0);
    if (h->model == PMALLOC_GC) pm_persist(h, src, sizeof *src, PM_USER); /* GC replays no pointer words */
    if (remote) { /* two-phase (Sec. 6.3): the owner side appends the tombstone */
        pm_bk_unreserve(h, tc);
        pm_numa_remote_free_extent(h, tc, v);
    } else {
        /* the tombstone is stored (written back at a checkpoint); the pages are
         * free at once: a crash replays this free before any later allocation
         * of them (records are replayed in their order) */
        err = pm_bk_op_append(h, v, true); /* reserved: cannot fail; its lane's lock */
        if (pm_xc_eligible(h, v)) {
            pm_ctr_add(h, PMC_XC_EXT, -(uint64_t)1);
            pm_xc_put(h, tc->arena, v); /* the arena's cache lock; large_lock only for what it pushes out */
        } else {
            pm_extent_unmap(h, v); /* its inner pages, outside the extent lock */
            pthread_mutex_lock(&h->large_lock);
            pm_extent_release(h, v);
            pthread_mutex_unlock(&h->large_lock);
        }
    }
    pm_redo_done(h, tc, seq, NULL, src, NULL, 0);
    pm_ctr_add(h, PMC_LIVE_BYTES, -bytes);
    pm_ctr_add(h, PMC_LIVE_OBJS, -(uint64_t)1);
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

/* A logged pointer store (LOG): ordered with the operations that wrote the
 * word before (recovery replays each word's last record). Under GC the word is
 * persisted at once, as GC's own operations do. */
static nm_err set_ptr(pm_heap *h, pmalloc_ptr *loc, pmalloc_ptr p)
{
    if (h->model != PMALLOC_LOG) {
        store_ptr(loc, p);
        pm_persist(h, loc, sizeof *loc, PM_USER);
        return NM_OK;
    }
    pm_tcache *tc = pm_tc_get(h);
    if (!tc) return nm_fail(NM_ENOMEM, "pmalloc: no thread cache: %s", nm_last_errmsg());
    pm_redo_reserve(h, tc);
    uint64_t seq = pm_redo_begin(h, tc);
    pm_redo_commit(h, tc, seq, PM_OP_SET, p, pm_off(h, loc), 0);
    store_ptr(loc, p);
    pm_redo_done(h, tc, seq, NULL, loc, NULL, 0);
    return NM_OK;
}

nm_err pmalloc_set_root(pmalloc_heap *hd, unsigned idx, pmalloc_ptr p)
{
    PM_ENTER_ERR(h, hd);
    if (idx >= PMALLOC_NROOTS) return nm_fail(NM_ERANGE, "pmalloc_set_root: index %u >= %u", idx, PMALLOC_NROOTS);
    uint64_t off;
    if (p != 0 && (!pm_ptr_off(h, p, &off) || off < h->sb->data_off || off >= h->size))
        return nm_fail(NM_EINVAL, "pmalloc_set_root: %#llx is not a pointer into this heap's data area", (unsigned long long)p);
    return set_ptr(h, root_slot(h, idx), p);
}

nm_err pmalloc_set_ptr(pmalloc_heap *hd, pmalloc_ptr *loc, pmalloc_ptr p)
{
    PM_ENTER_ERR(h, hd);
    nm_err err = check_loc(h, loc, "location");
    if (err) return err;
    uint64_t off;
    if (p != 0 && (!pm_ptr_off(h, p, &off) || off < h->sb->data_off || off >= h->size))
        return nm_fail(NM_EINVAL, "pmalloc_set_ptr: %#llx is not a pointer into this heap's data area", (unsigned long long)p);
    return set_ptr(h, loc, p);
}

nm_err pmalloc_sync(pmalloc_heap *hd)
{
    PM_ENTER_ERR(h, hd);
    return pm_checkpoint(h, 0);
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
    st->extents = __atomic_load_n(&h->nextents, __ATOMIC_RELAXED) + pm_ctr_sum(h, PMC_XC_EXT);
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
    st->checkpoints = __atomic_load_n(&h->c_ckpts, __ATOMIC_RELAXED);
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
        } else if (v->state == PM_VEH_ALLOC && !__atomic_load_n(&v->freeing, __ATOMIC_RELAXED)) { /* freeing: a remote free pending (Sec. 6.3) */
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
    pm_bk_lock_all(h, true);
    nm_err err = pm_large_check(h, pm_xc_pages(h));
    if (!err) err = pm_xc_check(h);
    pm_bk_lock_all(h, false);
    uint64_t live = 0, objs = 0;
    for (uint64_t p = 0; p < h->data_pages && !err;) {
        pm_veh *v = h->pmap[p];
        if (v->state == PM_VEH_SLAB) {
            pm_vslab *s = v->slab;
            if (!s) { err = nm_fail(NM_ECORRUPT, "pmalloc check: slab without vslab"); break; }
            if (pm_slab_digest_bits(h, s) != __atomic_load_n(&s->digest, __ATOMIC_RELAXED)) {
                err = nm_fail(NM_ECORRUPT, "pmalloc check: slab at data page %llu: its bitmap does not match its checksum", (unsigned long long)v->page);
                break;
            }
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
        } else if (v->state == PM_VEH_ALLOC && !__atomic_load_n(&v->freeing, __ATOMIC_RELAXED)) {
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
                pbit_update(h, s, idx, true, &wd);
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
            v->slab->digest = pm_slab_digest_bits(h, v->slab);
        }
        v->mark = false;
        p += v->npages;
    }
    pm_drain(h);
    pm_slab_digest_write_all(h);
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

/* What the layers below call upward (pm_upcalls in pm_internal.h). */
static const pm_upcalls upcalls = {pm_checkpoint, pm_numa_sync_arena, pm_numa_xsync};

/* The node files' header (superblock line PM_FILES_LINE and the start pages
 * after it), into the simulation image (create). */
static void files_persist_hdr(pm_heap *h)
{
    pm_persist(h, (char *)h->sb + PM_FILES_LINE * PM_LINE, PM_LINE + (size_t)h->files->n * 8, PM_META);
}

static void heap_free(pm_heap *h)
{
    if (!h) return;
    pm_handle_drop(h->handle);
    pm_numa_free(h); /* stops the synchronisation threads first */
    pm_slab_free_vol_all(h);
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
    pthread_mutex_destroy(&h->bk_lock);
    for (unsigned l = 0; l < PM_BK_LANES; l++) pthread_mutex_destroy(&h->bk_ln[l].lock);
    pthread_mutex_destroy(&h->tc_lock);
    pthread_mutex_destroy(&h->sim_lock);
    pm_ctr_free(h);
    pthread_mutex_destroy(&h->ckpt_lock);
    pthread_mutex_destroy(&h->old_lock);
    pthread_mutex_destroy(&h->seg_lock);
    pm_ckset_free(h);
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
    if (sb->nrings == 0 || sb->nrings > PM_NRINGS || sb->ring_recs < PM_RING_MIN || sb->ring_recs > PM_RING_MAX || (sb->ring_recs & (sb->ring_recs - 1)))
        return nm_fail(NM_ECORRUPT, "pmalloc: superblock describes %u redo rings of %u records", sb->nrings, sb->ring_recs);
    layout l;
    compute_layout(sb->heap_size, sb->nchunks, numa_bytes, sb->nrings, sb->ring_recs, &l);
    if (sb->nchunks < 4 || sb->nchunks > PM_MAX_CHUNKS || l.data_off + 64 * PM_PAGE > len || sb->heap_size != len || sb->roots_off != l.roots_off || sb->redo_off != l.redo_off || sb->bk_off != l.bk_off ||
        sb->data_off != l.data_off || sb->nchunks != l.nchunks || sb->nroots != PMALLOC_NROOTS ||
        sb->model > PMALLOC_GC || sb->stripes == 0 || sb->stripes > PMALLOC_MAX_STRIPES || sb->ptr_tag == 0 ||
        sb->ptr_tag > PM_TAG_MASK >> PMALLOC_PTR_OFFSET_BITS)
        return nm_fail(NM_ECORRUPT, "pmalloc: superblock layout does not match a %zu-byte heap", len);
    if (sb->state != PM_STATE_CLEAN && sb->state != PM_STATE_RUNNING && sb->state != PM_STATE_RECOVERING)
        return nm_fail(NM_ECORRUPT, "pmalloc: unknown heap state %016llx", (unsigned long long)sb->state);
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

    pm_heap *h = aligned_alloc(_Alignof(pm_heap), NM_ALIGN_UP(sizeof *h, _Alignof(pm_heap)));
    if (!h) return nm_fail(NM_ENOMEM, "pmalloc_open: no host memory");
    memset(h, 0, sizeof *h);
    h->up = &upcalls;
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
    pthread_mutex_init(&h->bk_lock, &ma);
    for (unsigned l = 0; l < PM_BK_LANES; l++) pthread_mutex_init(&h->bk_ln[l].lock, &ma);
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
        uint32_t nr0, rr0;
        pm_redo_layout(o.size, o.redo_records, &nr0, &rr0);
        compute_layout(o.size, o.log_chunks, pm_numa_new_region(h, o.size, &o), nr0, rr0, &l0);
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
    uint32_t nrings, recs;
    if (exists) pm_numa_region_of(h->sb, &numa_bytes); /* validated above */
    else numa_bytes = pm_numa_new_region(h, mapped, &o);
    if (exists) nrings = h->sb->nrings, recs = h->sb->ring_recs;
    else pm_redo_layout(mapped, o.redo_records, &nrings, &recs);
    compute_layout(exists ? h->sb->heap_size : mapped, exists ? h->sb->nchunks : o.log_chunks, numa_bytes, nrings, recs, &l);
    if (!exists) {
        pm_super *sb = h->sb;
        sb->version = h->files->single ? PM_VERSION : PM_VERSION_FILES;
        sb->model = o.model;
        sb->heap_size = mapped;
        sb->stripes = h->stripes;
        sb->nrings = nrings;
        sb->ring_recs = recs;
        sb->nchunks = l.nchunks;
        sb->nroots = PMALLOC_NROOTS;
        sb->roots_off = l.roots_off;
        sb->redo_off = l.redo_off;
        sb->bk_off = l.bk_off;
        sb->data_off = l.data_off;
        sb->state = PM_STATE_RUNNING;
        uint64_t tag = 0;
        if (getrandom(&tag, sizeof tag, 0) != (ssize_t)sizeof tag) tag = nm_now_ns() ^ (uint64_t)getpid() << 20;
        tag &= PM_TAG_MASK >> PMALLOC_PTR_OFFSET_BITS;
        sb->ptr_tag = tag ? tag : 1;
        if (numa_bytes && (err = pm_numa_create(h, l.numa_off))) return create_failed(h, path, err);
    }
    h->model = (pmalloc_model)h->sb->model;
    h->tagbits = h->sb->ptr_tag << PMALLOC_PTR_OFFSET_BITS;
    h->morph_su = o.morph_su == PMALLOC_MORPH_OFF ? 0 : o.morph_su ? o.morph_su : PM_MORPH_DEFAULT_SU;
    h->ckpt_records = o.checkpoint_records;
    uint64_t decay_ns = o.decay_ms == PMALLOC_DECAY_NEVER ? UINT64_MAX : (uint64_t)(o.decay_ms ? o.decay_ms : 10000) * 1000000ull;
    if (h->persist == PMALLOC_PERSIST_SIM) decay_ns = UINT64_MAX; /* the image is compared line by line */
    /* none during recovery: until the records are replayed, pages free in the
     * log may hold live objects (an allocation whose entry was not settled) */
    h->decay_ns = UINT64_MAX;
    h->nchunks = h->sb->nchunks;
    h->data = h->base + h->sb->data_off;
    h->data_pages = (h->size - h->sb->data_off) / PM_PAGE;
    h->narenas = pm_numa_narenas(h, o.narenas ? o.narenas : nm_nproc()); /* a multiple of the nodes */
    h->arenas = aligned_alloc(_Alignof(pm_arena), h->narenas * sizeof *h->arenas);
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
    if ((err = pm_redo_open(h, !exists)) || (err = pm_small_init(h)) || (err = pm_large_init(h, !exists))) {
        if (!exists) return create_failed(h, path, err);
        heap_free(h);
        return err;
    }
    if (!exists) {
        /* the zero-filled file already has empty roots and redo rings; the
         * magic goes last (and the file gets its name after that) */
        h->sb->check = super_check(h->sb);
        pm_persist(h, h->sb, 128, PM_META);
        if (!h->files->single) files_persist_hdr(h); /* written and synced before the node files; this is for the simulation image */
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
    if (!err) { /* the slabs' bitmaps against their checksums (GC after a crash: the mark decides them) */
        bool crashed = exists && h->sb->state != PM_STATE_CLEAN;
        if (crashed && h->model == PMALLOC_GC) {
            for (uint64_t p = 0; p < h->data_pages; p += h->pmap[p]->npages)
                if (h->pmap[p]->state == PM_VEH_SLAB) h->pmap[p]->slab->digest = pm_slab_digest_bits(h, h->pmap[p]->slab);
        } else {
            err = pm_redo_verify(h, exists ? h->sb->state : PM_STATE_CLEAN, pm_numa_live_blocks);
        }
    }
    if (!err) err = pm_numa_open(h); /* validate the deallocation logs; replay them (LOG) */
    if (!err) pm_bk_settle(h);       /* what that replay appended */
    if (!err && !exists) err = pm_files_commit(h); /* the main file gets its name last */
    if (!err && !exists) pm_files_detach(h);       /* one file: an ordinary heap from here */
    if (err) { if (!exists) return create_failed(h, path, err); heap_free(h); return err; }
    if (exists) {
        uint64_t state = h->sb->state;
        h->ri.was_clean = state == PM_STATE_CLEAN;
        h->ri.was_recovering = state == PM_STATE_RECOVERING;
        if (state != PM_STATE_CLEAN) set_state(h, PM_STATE_RECOVERING);
        if (state != PM_STATE_CLEAN) err = pm_redo_recover(h); /* a clean close settled every record */
        if (!err && state != PM_STATE_CLEAN && h->model == PMALLOC_GC) err = gc_recover(h);
        if (!err && pm_bk_tombs(h) > 0) { /* (alone here; the locks as the function expects) */
            pm_bk_lock_all(h, true);
            err = pm_bk_compact(h);
            pm_bk_lock_all(h, false);
        }
        if (err) { heap_free(h); return err; }
        pm_numa_retire(h); /* the recovery wrote back what the deallocation logs name */
        set_state(h, PM_STATE_RUNNING);
    }
    recount(h);
    h->decay_ns = decay_ns;
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
        pm_slab_digest_write_all(h); /* and their checksums, once the bits are durable */
    }
    /* every operation finished: settle them all, then mark the heap clean */
    nm_err err = pm_checkpoint(h, 0);
    if (err) { /* the heap stays RUNNING: the next open recovers it */
        heap_free(h);
        return err;
    }
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
