/* Large allocations: extents managed by virtual extent headers (VEHs) in DRAM,
 * best fit with splitting and coalescing, a page map from address to VEH
 * (paper Sec. 2.2, 4.3), persisted only through the log-structured
 * bookkeeping log (Sec. 5.3).
 *
 * The bookkeeping log is a linked list of 1 KiB chunks (line 0 = header,
 * 15 lines of 8-byte entries). An allocated extent or slab has one live normal
 * entry; freeing it appends a tombstone naming the entry's position. The
 * superblock holds two list heads and an alt bit: the slow GC copies the live
 * entries into fresh chunks, persists them, and flips alt, so a crash at any
 * point leaves one complete list. Appends are interleaved over the chunk's 15
 * entry lines so consecutive appends flush different cache lines. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "nearmem/common/timer.h"

#include "pm_extents.h"

static inline char *chunk_base(pm_heap *h, uint32_t c) { return h->base + h->sb->bk_off + (uint64_t)c * PM_CHUNK_BYTES; }
static inline pm_chunk_hdr *chunk_hdr(pm_heap *h, uint32_t c) { return (pm_chunk_hdr *)chunk_base(h, c); }
static inline uint64_t *chunk_ent(pm_heap *h, uint32_t c) { return (uint64_t *)(chunk_base(h, c) + PM_LINE); }

/* ---- VEH pool, free-extent bins ---- */

#define PM_VEH_BLOCK 256u

/* A zeroed VEH from the pool. VEHs are recycled, never freed while the heap is
 * open, so the unlocked readers of the page map never touch freed memory. */
pm_veh *pm_veh_new(pm_heap *h)
{
    if (!h->veh_pool) {
        /* one block: a link word (padded to a VEH) and PM_VEH_BLOCK - 1 VEHs */
        pm_veh *blk = calloc(PM_VEH_BLOCK, sizeof *blk);
        if (!blk) return NULL;
        *(void **)blk = h->veh_blocks;
        h->veh_blocks = blk;
        for (unsigned i = PM_VEH_BLOCK - 1; i >= 1; i--) {
            blk[i].next = h->veh_pool;
            h->veh_pool = &blk[i];
        }
    }
    pm_veh *v = h->veh_pool;
    h->veh_pool = v->next;
    /* zeroed field by field: the fields that a free reads without a lock
     * (pmalloc_free_from's claim, on a VEH it found in the page map before
     * this one was recycled) are stored atomically */
    __atomic_store_n(&v->state, PM_VEH_FREE, __ATOMIC_RELAXED);
    __atomic_store_n(&v->page, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&v->bkpos, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&v->freeing, false, __ATOMIC_RELAXED);
    __atomic_store_n(&v->slab, NULL, __ATOMIC_RELAXED);
    __atomic_store_n(&v->rec_pending, false, __ATOMIC_RELAXED);
    v->npages = 0;
    v->next = v->prev = NULL;
    v->mark = v->retained = v->mapped = false;
    __atomic_store_n(&v->owner, PM_XC_NOBODY, __ATOMIC_RELAXED);
    v->freed_ns = 0;
    return v;
}

static void veh_put(pm_heap *h, pm_veh *v)
{
    __atomic_store_n(&v->state, PM_VEH_FREE, __ATOMIC_RELAXED);
    __atomic_store_n(&v->slab, NULL, __ATOMIC_RELAXED);
    v->prev = NULL;
    v->next = h->veh_pool;
    h->veh_pool = v;
}

static void free_list_add(pm_heap *h, pm_veh *v)
{
    __atomic_store_n(&v->state, PM_VEH_FREE, __ATOMIC_RELAXED); /* read unlocked by small_lookup */
    if (!v->freed_ns) v->freed_ns = nm_now_ns();
    pm_fbins_push(&h->fbins, v);
    h->free_pages += v->npages;
}

static void free_list_del(pm_heap *h, pm_veh *v)
{
    if (v->retained) h->retained_pages -= v->npages;
    v->retained = false;
    pm_fbins_del(&h->fbins, v);
    h->free_pages -= v->npages;
}

pm_veh *pm_free_first(pm_heap *h)
{
    unsigned b = pm_fbins_next(&h->fbins, 1);
    return b ? h->fbins.bin[b] : NULL;
}

pm_veh *pm_free_next(pm_heap *h, pm_veh *v)
{
    if (v->next) return v->next;
    unsigned b = pm_fbins_next(&h->fbins, pm_fbin_of(v->npages) + 1);
    return b ? h->fbins.bin[b] : NULL;
}

/* VEHs an arena's extent store no longer needs, back to the pool. */
void pm_veh_put_list(pm_heap *h, pm_veh *list)
{
    while (list) {
        pm_veh *v = list;
        list = v->next;
        veh_put(h, v);
    }
}

/* Free extents map only their first and last page (all coalescing needs);
 * allocated ones every page, for lookups of addresses inside them. The
 * extent lock covers the ends only: the inner pages of an extent are mapped
 * by its owner after the lock is released (pm_extent_map) and unmapped
 * before it is taken (pm_extent_unmap), a loop over up to 128 pages of a
 * 512 KiB extent that used to run inside the lock. */
static void pmap_mark_free(pm_heap *h, pm_veh *v)
{
    pm_pmap_set(h, v->page, v);
    pm_pmap_set(h, v->page + v->npages - 1, v);
}

static void pmap_mark_alloc(pm_heap *h, pm_veh *v)
{
    for (uint64_t p = 0; p < v->npages; p++) pm_pmap_set(h, v->page + p, v);
    v->mapped = true;
}

void pm_extent_map(pm_heap *h, pm_veh *v)
{
    if (v->mapped) return;
    for (uint64_t p = 1; p + 1 < v->npages; p++) pm_pmap_set(h, v->page + p, v);
    v->mapped = true;
}

void pm_extent_unmap(pm_heap *h, pm_veh *v)
{
    if (!v->mapped) return;
    for (uint64_t p = 1; p + 1 < v->npages; p++) pm_pmap_set(h, v->page + p, NULL);
    v->mapped = false;
}

/* Carve [page, page+npages) out of free extent f; the part becomes `state`. */
static pm_veh *carve(pm_heap *h, pm_veh *f, uint64_t page, uint64_t npages, int state)
{
    pm_veh *a = pm_veh_new(h), *r = NULL;
    if (!a) return NULL;
    uint64_t fend = f->page + f->npages, end = page + npages, freed = f->freed_ns;
    bool was_retained = f->retained;
    if (end < fend) {
        r = pm_veh_new(h);
        if (!r) { veh_put(h, a); return NULL; }
    }
    free_list_del(h, f);
    pm_pmap_set(h, f->page, NULL);
    pm_pmap_set(h, fend - 1, NULL);
    if (page > f->page) { /* f keeps the left part */
        f->npages = page - f->page;
        free_list_add(h, f);
        pmap_mark_free(h, f);
        if (was_retained) { f->retained = true; h->retained_pages += f->npages; }
    } else {
        veh_put(h, f);
    }
    if (r) {
        __atomic_store_n(&r->page, end, __ATOMIC_RELAXED);
        r->npages = fend - end;
        __atomic_store_n(&r->bkpos, -1, __ATOMIC_RELAXED);
        r->freed_ns = freed;
        free_list_add(h, r);
        pmap_mark_free(h, r);
        if (was_retained) { r->retained = true; h->retained_pages += r->npages; }
    }
    __atomic_store_n(&a->page, page, __ATOMIC_RELAXED);
    a->npages = npages;
    if (end > h->used_top) h->used_top = end;
    __atomic_store_n(&a->bkpos, -1, __ATOMIC_RELAXED);
    __atomic_store_n(&a->state, state, __ATOMIC_RELEASE);
    pmap_mark_free(h, a); /* its ends; the caller maps the rest (pm_extent_map) */
    if (state == PM_VEH_SLAB) h->nslabs++;
    else __atomic_fetch_add(&h->nextents, 1, __ATOMIC_RELAXED);
    return a;
}

nm_err pm_extent_alloc(pm_heap *h, uint64_t npages, int state, pm_veh **out)
{
    pm_veh *best = pm_fbins_fit(&h->fbins, npages);
    if (!best)
        return nm_fail(NM_ENOMEM, "pmalloc: no free extent of %llu pages (%llu pages free in total)",
                       (unsigned long long)npages, (unsigned long long)h->free_pages);
    pm_veh *a = carve(h, best, best->page, npages, state);
    if (!a) return nm_fail(NM_ENOMEM, "pmalloc: out of host memory for an extent header");
    *out = a;
    return NM_OK;
}

nm_err pm_extent_claim(pm_heap *h, uint64_t page, uint64_t npages, int state, pm_veh **out)
{
    if (npages == 0 || page + npages > h->data_pages || page + npages < page)
        return nm_fail(NM_ECORRUPT, "pmalloc: extent %llu+%llu pages outside the data area",
                       (unsigned long long)page, (unsigned long long)npages);
    for (pm_veh *v = pm_free_first(h); v; v = pm_free_next(h, v))
        if (v->page <= page && page + npages <= v->page + v->npages) {
            pm_veh *a = carve(h, v, page, npages, state);
            if (!a) return nm_fail(NM_ENOMEM, "pmalloc: out of host memory for an extent header");
            *out = a;
            return NM_OK;
        }
    return nm_fail(NM_ECORRUPT, "pmalloc: extent at page %llu (%llu pages) overlaps an allocated one",
                   (unsigned long long)page, (unsigned long long)npages);
}

void pm_extent_release(pm_heap *h, pm_veh *v)
{
    if (v->state == PM_VEH_SLAB) h->nslabs--;
    else __atomic_fetch_sub(&h->nextents, 1, __ATOMIC_RELAXED);
    pm_extent_free_pages(h, v);
}

void pm_extent_free_pages(pm_heap *h, pm_veh *v)
{
    pm_extent_unmap(h, v); /* (its owner may have done this before taking the lock) */
    pm_pmap_set(h, v->page, NULL);
    pm_pmap_set(h, v->page + v->npages - 1, NULL);
    __atomic_store_n(&v->bkpos, -1, __ATOMIC_RELAXED);
    __atomic_store_n(&v->slab, NULL, __ATOMIC_RELAXED);
    __atomic_store_n(&v->freeing, false, __ATOMIC_RELAXED);
    uint64_t start = v->page, end = v->page + v->npages;
    if (start > 0) {
        pm_veh *l = pm_pmap_get(h, start - 1);
        if (l && __atomic_load_n(&l->state, __ATOMIC_RELAXED) == PM_VEH_FREE) {
            free_list_del(h, l);
            pm_pmap_set(h, l->page, NULL);
            pm_pmap_set(h, start - 1, NULL);
            start = l->page;
            veh_put(h, l);
        }
    }
    if (end < h->data_pages) {
        pm_veh *r = pm_pmap_get(h, end);
        if (r && __atomic_load_n(&r->state, __ATOMIC_RELAXED) == PM_VEH_FREE) {
            free_list_del(h, r);
            uint64_t rend = r->page + r->npages;
            pm_pmap_set(h, end, NULL);
            pm_pmap_set(h, rend - 1, NULL);
            end = rend;
            veh_put(h, r);
        }
    }
    __atomic_store_n(&v->page, start, __ATOMIC_RELAXED);
    v->npages = end - start;
    v->freed_ns = nm_now_ns();
    free_list_add(h, v); /* a merge with a retained neighbour is not retained (some pages are back) */
    pmap_mark_free(h, v);
    pm_extent_decay(h, v->freed_ns);
}

/* Decay (paper Sec. 2.2): a free extent unused for decay_ns moves to the
 * retained state: its pages go back to the file system (FALLOC_FL_PUNCH_HOLE;
 * on DAX this frees persistent memory). Nothing reads free extent contents,
 * so this needs no ordering. A later allocation refaults zero pages.
 *
 * Only pages below used_top are punched: a new heap's space that was never
 * handed out holds nothing of ours (its free extent is as old as the open, so
 * it used to be punched whole, 3 GiB in one call under large_lock, 10 s after
 * the open, and every later allocation there refaulted its pages). A pass
 * punches at most PM_DECAY_PASS_PAGES (beyond one extent) to bound the time
 * it holds the lock; the next pass, 50 ms on, goes on. */
#define PM_DECAY_PASS_PAGES 16384u /* 64 MiB */
bool pm_extent_decay_due(const pm_heap *h, uint64_t now) /* any lock (or none) */
{
    return __atomic_load_n(&h->decay_ns, __ATOMIC_RELAXED) != UINT64_MAX && h->lock_fd >= 0 &&
           now - __atomic_load_n(&h->last_decay_ns, __ATOMIC_RELAXED) >= 50000000ull;
}

void pm_extent_decay(pm_heap *h, uint64_t now)
{
    if (!pm_extent_decay_due(h, now)) return;
    __atomic_store_n(&h->last_decay_ns, now, __ATOMIC_RELAXED);
    uint64_t done = 0;
    for (pm_veh *v = pm_free_first(h); v && done < PM_DECAY_PASS_PAGES; v = pm_free_next(h, v)) {
        if (v->retained || v->npages < PM_SLAB_PAGES || now - v->freed_ns < h->decay_ns || v->page >= h->used_top) continue;
        uint64_t n = NM_MIN(v->npages, h->used_top - v->page); /* the rest was never used */
        if (done && done + n > PM_DECAY_PASS_PAGES) continue;
        if (!pm_data_punch(h, v->page, n)) { /* in the node file(s) holding the pages */
            __atomic_store_n(&h->decay_ns, UINT64_MAX, __ATOMIC_RELAXED); /* not supported here: stop trying */
            return;
        }
        done += n;
        v->retained = true;
        h->retained_pages += v->npages;
    }
}

/* ---- bookkeeping log ---- */

/* A free chunk, searched round-robin from a hint (a scan from chunk 0 passed
 * every listed chunk at each open). */
static uint32_t take_free_chunk(pm_heap *h)
{
    uint32_t n = h->nchunks, c0 = h->bk_free_hint < n ? h->bk_free_hint : 0;
    for (uint32_t k = 0; k < n; k++) {
        uint32_t c = c0 + k < n ? c0 + k : c0 + k - n;
        if (!h->chunks[c].in_list) {
            h->bk_free_hint = c + 1;
            return c;
        }
    }
    return PM_CHUNK_NONE;
}

/* Chunk c has (or is about to have) appends not yet settled. */
static void bk_dirty_prune(pm_heap *h);
static void bk_settle_locked(pm_heap *h);
static void bk_set_tombs(pm_heap *h, uint64_t n);

/* Chunk c, a lane's open chunk from now on, is in the dirty set (bk_lock
 * and the lane locks held). Open chunks stay in the set (bk_dirty_prune), so
 * an append, which holds only its lane's lock, never has to mark one. */
static void bk_mark_dirty(pm_heap *h, uint32_t c)
{
    if (h->chunks[c].dirty) return;
    if (h->bk_ndirty == NM_ARRAY_LEN(h->bk_dirty)) bk_dirty_prune(h);
    if (h->bk_ndirty == NM_ARRAY_LEN(h->bk_dirty)) bk_settle_locked(h); /* never expected: the open chunks and one more */
    h->chunks[c].dirty = true;
    h->bk_dirty[h->bk_ndirty++] = c;
}

/* The k-th append of chunk c goes to entry index slot(k): interleaved over
 * the 15 entry lines (Sec. 5.1) when the chunk was opened that way. */
static inline uint32_t bk_slot(const pm_heap *h, uint32_t c, uint32_t k)
{
    if (!h->chunks[c].inter) return k;
    return (k % PM_CHUNK_ENTRY_LINES) * 8u + k / PM_CHUNK_ENTRY_LINES;
}

/* ---- checksums of the log (issue 16): the descriptor has two copies; a
 * chunk header checks its fixed fields, its next word and its count word
 * carry their own checks (each is one 8-byte store), and the count's digest
 * covers the settled entries. ---- */

static uint64_t desc_check(uint64_t w, int copy) { return XXH64(&w, sizeof w, 0x424b4453u + (uint64_t)copy); }
static pm_bkdesc *desc_copy(pm_heap *h, int copy) { return copy ? (pm_bkdesc *)((char *)h->sb + PM_BK_B_LINE * PM_LINE) : &h->sb->bk_a; }

/* The list starts at `head` from now on: copy A durable, then copy B (a crash
 * between leaves A valid and newer; a copy damaged at rest is the other's twin). */
static void desc_write(pm_heap *h, uint32_t head)
{
    h->bk_gen++;
    uint64_t w = (uint64_t)head | (uint64_t)h->bk_gen << 32;
    for (int copy = 0; copy < 2; copy++) {
        pm_bkdesc *d = desc_copy(h, copy);
        __atomic_store_n(&d->w, w, __ATOMIC_RELAXED);
        __atomic_store_n(&d->check, desc_check(w, copy), __ATOMIC_RELAXED);
        pm_persist(h, d, sizeof *d, PM_META);
    }
    h->bk_head = head;
}

static nm_err desc_read(pm_heap *h)
{
    pm_bkdesc a = *desc_copy(h, 0), b = *desc_copy(h, 1);
    bool va = a.check == desc_check(a.w, 0), vb = b.check == desc_check(b.w, 1);
    if (!va && !vb)
        return nm_fail(NM_ECORRUPT, "pmalloc: both copies of the bookkeeping-log descriptor (superblock lines 3 and %u) are damaged", PM_BK_B_LINE);
    uint64_t w = va && vb ? ((a.w >> 32) >= (b.w >> 32) ? a.w : b.w) : va ? a.w : b.w;
    h->bk_head = (uint32_t)w;
    h->bk_gen = (uint32_t)(w >> 32);
    return NM_OK;
}

static uint64_t chunk_check(const pm_chunk_hdr *hd) { return XXH64(hd, offsetof(pm_chunk_hdr, next), 0x43484b48u); }
static inline uint64_t next_word(uint32_t c, const pm_chunk_hdr *hd, uint32_t next)
{
    uint64_t v[3] = {next, c, hd->gen};
    return (uint64_t)next | (uint64_t)(uint32_t)XXH64(v, sizeof v, 0x4e585400u) << 32;
}
/* One append's share of its chunk's digest. */
static inline uint32_t ent_hash(uint32_t a, uint64_t e)
{
    uint64_t v[2] = {a, e};
    return (uint32_t)XXH3_64bits(v, sizeof v);
}

static void set_next(pm_heap *h, uint32_t c, uint32_t next)
{
    pm_chunk_hdr *hd = chunk_hdr(h, c);
    __atomic_store_n(&hd->next, next_word(c, hd, next), __ATOMIC_RELAXED);
    pm_persist(h, &hd->next, sizeof hd->next, PM_META);
    h->chunks[c].next = next;
}

/* Zero a chunk and give it a header with `count` settled appends (already
 * stored in its entries by the caller, who passes their digest); flushed (the
 * caller drains). */
static void chunk_init(pm_heap *h, uint32_t c, uint32_t next, bool inter, uint32_t count, uint32_t digest)
{
    char *b = chunk_base(h, c);
    pm_chunk_hdr *hd = (pm_chunk_hdr *)b;
    /* a new generation: tombstones left naming the chunk's previous life no longer match */
    uint32_t gen = (hd->gen + 1) & PM_BK_GEN_MASK;
    memset(b, 0, PM_LINE);
    if (!count) memset(b + PM_LINE, 0, PM_CHUNK_BYTES - PM_LINE);
    hd->magic = PM_CHUNK_MAGIC;
    hd->id = c;
    hd->gen = gen;
    hd->flags = inter ? PM_CHUNK_INTER : 0;
    hd->check = chunk_check(hd);
    hd->next = next_word(c, hd, next);
    hd->count = (uint64_t)count | (uint64_t)digest << 32;
    h->chunks[c].gen = gen;
    h->chunks[c].inter = inter;
    h->chunks[c].next = next;
    h->chunks[c].appended = h->chunks[c].settled = count;
    h->chunks[c].digest = digest;
    pm_flush(h, b, PM_CHUNK_BYTES, PM_META);
}

static inline bool tomb_valid(const pm_heap *h, uint64_t e)
{
    uint32_t tc = PM_BK_TCHUNK(e);
    return tc < h->nchunks && h->chunks[tc].in_list && h->chunks[tc].gen == PM_BK_TGEN(e);
}

/* Is chunk c some lane's open chunk (appends still go there)? */
static bool bk_open(const pm_heap *h, uint32_t c)
{
    for (unsigned l = 0; l < PM_BK_LANES; l++)
        if (h->bk_lane_chunk[l] == c) return true;
    return false;
}

/* Every append settled: lane 0 goes on in c0, the others open chunks when they need them. */
static void bk_lanes_reset(pm_heap *h, uint32_t c0)
{
    for (uint32_t d = 0; d < h->bk_ndirty; d++) h->chunks[h->bk_dirty[d]].dirty = false;
    h->bk_ndirty = 0;
    for (unsigned l = 0; l < PM_BK_LANES; l++) h->bk_lane_chunk[l] = PM_CHUNK_NONE;
    h->bk_lane_chunk[0] = c0;
    bk_mark_dirty(h, c0);
}

/* Lanes in use: one per 32 chunks of log, at most PM_BK_LANES, so that the
 * lanes' partly filled chunks never take the room a compaction needs (see
 * bk_max_live); a small log has one lane, the single tail of part 1. */
static unsigned bk_nlanes(const pm_heap *h)
{
    unsigned n = h->nchunks / 32u;
    return n < 1 ? 1u : n > PM_BK_LANES ? PM_BK_LANES : n;
}

/* The calling thread's lane: its arena's (lane 0 without a thread cache, e.g. recovery). */
static unsigned bk_lane(pm_heap *h)
{
    const pm_ctrblk *b = pm_ctr_find(h);
    return b ? b->lane % bk_nlanes(h) : 0u;
}

/* Fast GC (Sec. 5.3): unlink, in place, every chunk (but the tail) whose
 * normal entries are all dead. A chunk's tombstones may only disappear once
 * the chunks they point into are gone, so chunks are unlinked in dependency
 * order, one persisted 4-byte store each: any prefix is a consistent log.
 * Tombstones into unlinked chunks become orphans, recognised by the chunk
 * generation and ignored at replay. */
static void bk_fast_gc(pm_heap *h)
{
    uint32_t n = h->nchunks, norder = 0;
    uint64_t *killed = calloc(((size_t)n * 128 + 63) / 64, sizeof(uint64_t));
    uint32_t *live = calloc(n, sizeof *live), *order = malloc(n * sizeof *order);
    uint8_t *st = calloc(n, 1); /* 1 candidate, 2 scheduled */
    uint32_t head = h->bk_head;
    if (!killed || !live || !order || !st) goto out;
    /* (slots past a chunk's appends may hold what a crashed session stored and never settled: not read) */
    for (uint32_t c = head; c != PM_CHUNK_NONE; c = h->chunks[c].next) {
        const uint64_t *ents = chunk_ent(h, c);
        for (uint32_t a = 0; a < h->chunks[c].appended; a++) {
            uint64_t e = ents[bk_slot(h, c, a)];
            if (e && PM_BK_TYPE(e) == PM_BK_TOMB && tomb_valid(h, e)) {
                size_t pos = (size_t)PM_BK_TCHUNK(e) * 128 + PM_BK_TSLOT(e);
                killed[pos / 64] |= 1ull << (pos % 64);
            }
        }
    }
    for (uint32_t c = head; c != PM_CHUNK_NONE; c = h->chunks[c].next) {
        const uint64_t *ents = chunk_ent(h, c);
        for (uint32_t a = 0; a < h->chunks[c].appended; a++) {
            uint32_t i = bk_slot(h, c, a);
            size_t pos = (size_t)c * 128 + i;
            if (ents[i] && PM_BK_TYPE(ents[i]) != PM_BK_TOMB && !(killed[pos / 64] >> (pos % 64) & 1)) live[c]++;
        }
        if (live[c] == 0 && c != h->bk_tail && !bk_open(h, c)) st[c] = 1;
    }
    for (bool changed = true; changed;) {
        changed = false;
        for (uint32_t c = head; c != PM_CHUNK_NONE; c = h->chunks[c].next) {
            if (st[c] != 1) continue;
            const uint64_t *ents = chunk_ent(h, c);
            bool ok = true;
            for (uint32_t a = 0; a < h->chunks[c].appended && ok; a++) {
                uint64_t e = ents[bk_slot(h, c, a)];
                if (e && PM_BK_TYPE(e) == PM_BK_TOMB && tomb_valid(h, e)) {
                    uint32_t tc = PM_BK_TCHUNK(e);
                    ok = tc == c || st[tc] == 2;
                }
            }
            if (ok) { st[c] = 2; order[norder++] = c; changed = true; }
        }
    }
    for (uint32_t k = 0; k < norder; k++) {
        uint32_t c = order[k], cur = h->bk_head, prev = PM_CHUNK_NONE;
        while (cur != c) { prev = cur; cur = h->chunks[cur].next; }
        uint32_t next = h->chunks[c].next;
        if (prev == PM_CHUNK_NONE) desc_write(h, next);
        else set_next(h, prev, next);
        h->chunks[c].in_list = false;
        h->bk_free_count++;
        h->bk_list_len--;
    }
    if (norder) {
        uint64_t tombs = 0;
        for (uint32_t c = h->bk_head; c != PM_CHUNK_NONE; c = h->chunks[c].next) {
            const uint64_t *ents = chunk_ent(h, c);
            for (uint32_t a = 0; a < h->chunks[c].appended; a++) {
                uint64_t e = ents[bk_slot(h, c, a)];
                if (e && PM_BK_TYPE(e) == PM_BK_TOMB && tomb_valid(h, e)) tombs++;
            }
        }
        bk_set_tombs(h, tombs);
        pm_count(&h->c_bkfast, 1);
    }
out:
    free(killed);
    free(live);
    free(order);
    free(st);
}

/* A compaction runs once half the chunks are listed (and something is dead)
 * and must fit the live entries in the other half; up to one partly filled
 * chunk per lane may be listed besides them. */
static uint64_t bk_max_live(const pm_heap *h) { return (uint64_t)(h->nchunks / 2 - bk_nlanes(h)) * PM_CHUNK_ENTRIES; }

/* Free chunks an append may need before the next reservation check: one
 * per lane (each may open a chunk) and one to spare. */
static uint32_t bk_margin(const pm_heap *h) { return bk_nlanes(h) + 1; }

bool pm_bk_gc_due(const pm_heap *h) { return h->bk_free_count <= h->nchunks / 2 && pm_bk_tombs(h) > 0; }

/* ---- locking of the log: bk_lock for everything but the common append,
 * which takes only its lane's lock; whoever reads or changes the lanes'
 * chunks (settles, GCs, opening a chunk, checks) holds bk_lock and every
 * lane lock (lanes in index order, after bk_lock). ---- */
void pm_bk_lanes_lock(pm_heap *h, bool lock)
{
    for (unsigned l = 0; l < PM_BK_LANES; l++) {
        if (lock) pthread_mutex_lock(&h->bk_ln[l].lock);
        else pthread_mutex_unlock(&h->bk_ln[PM_BK_LANES - 1 - l].lock);
    }
}

void pm_bk_lock_all(pm_heap *h, bool lock)
{
    if (lock) {
        pthread_mutex_lock(&h->bk_lock);
        pm_bk_lanes_lock(h, true);
    } else {
        pm_bk_lanes_lock(h, false);
        pthread_mutex_unlock(&h->bk_lock);
    }
}

/* The log's counts: the heap's, plus what each lane changed since (a lane
 * changes its own under its lock; a sum read under bk_lock alone may be a
 * few appends old, which only makes a reservation more careful: an append
 * adds to the live count before it gives its reservation back). */
static uint64_t bk_live(const pm_heap *h)
{
    uint64_t s = h->bk_live_entries;
    for (unsigned l = 0; l < PM_BK_LANES; l++) s += (uint64_t)__atomic_load_n(&h->bk_ln[l].live, __ATOMIC_RELAXED);
    return s;
}

uint64_t pm_bk_tombs(const pm_heap *h)
{
    uint64_t s = h->bk_tombs;
    for (unsigned l = 0; l < PM_BK_LANES; l++) s += (uint64_t)__atomic_load_n(&h->bk_ln[l].tombs, __ATOMIC_RELAXED);
    return s;
}

static uint64_t bk_resv(const pm_heap *h)
{
    uint64_t s = __atomic_load_n(&h->bk_reserved, __ATOMIC_RELAXED);
    for (unsigned l = 0; l < PM_BK_LANES; l++) s -= (uint64_t)__atomic_load_n(&h->bk_ln[l].spent, __ATOMIC_RELAXED);
    return s;
}

/* Set the counts from a recount (bk_lock and every lane lock held). */
static void bk_set_tombs(pm_heap *h, uint64_t n)
{
    h->bk_tombs = n;
    for (unsigned l = 0; l < PM_BK_LANES; l++) __atomic_store_n(&h->bk_ln[l].tombs, 0, __ATOMIC_RELAXED);
}

static void bk_set_live(pm_heap *h, uint64_t n)
{
    h->bk_live_entries = n;
    for (unsigned l = 0; l < PM_BK_LANES; l++) __atomic_store_n(&h->bk_ln[l].live, 0, __ATOMIC_RELAXED);
}

static inline void lane_add(int64_t *x, int64_t d) /* the lane's lock held */
{
    if (d) __atomic_store_n(x, __atomic_load_n(x, __ATOMIC_RELAXED) + d, __ATOMIC_RELAXED);
}

/* Open a new chunk for `lane` and link it at the end of the list (both
 * persisted: a crash before the link leaves a free chunk). */
static nm_err new_tail_chunk(pm_heap *h, unsigned lane)
{
    uint32_t c = take_free_chunk(h);
    if (c == PM_CHUNK_NONE) return nm_fail(NM_ENOMEM, "pmalloc: bookkeeping log full (%u chunks)", h->nchunks);
    chunk_init(h, c, PM_CHUNK_NONE, h->interleave, 0, 0);
    pm_drain(h);
    set_next(h, h->bk_tail, c);
    h->chunks[c].in_list = true;
    h->chunks[c].next = PM_CHUNK_NONE;
    h->bk_free_count--;
    h->bk_list_len++;
    h->bk_tail = c;
    h->bk_lane_chunk[lane] = c;
    bk_mark_dirty(h, c);
    bk_dirty_prune(h); /* the lane's previous chunk, settled and no longer open */
    return NM_OK;
}

/* Before an operation commits: the log has room for its append (and, for a
 * normal entry, the live cap allows it), so the append made after the commit
 * cannot fail. When the log runs short, a checkpoint settles it and runs the
 * GCs first.
 *
 * A thread cache reserves PM_BK_CREDITS appends at a time and spends them
 * without a lock (its credits count in bk_reserved until they are appended or
 * given back, so the log's room and live cap stay exact bounds); the lock is
 * then taken once per PM_BK_CREDITS large operations for the reservation,
 * and once per operation for the append itself. */
#define PM_BK_CREDITS 8u

/* n more appends fit (bk_lock held); normal: they may all be normal entries */
static bool bk_fits(const pm_heap *h, uint64_t n, bool normal)
{
    bool live_ok = !normal || bk_live(h) + bk_resv(h) + n <= bk_max_live(h);
    bool room = h->bk_free_count >= bk_margin(h) + (uint32_t)((bk_resv(h) + n - 1) / PM_CHUNK_ENTRIES);
    return live_ok && room;
}

nm_err pm_bk_reserve(pm_heap *h, pm_tcache *tc, bool normal)
{
    if (tc && tc->bk_credit) {
        tc->bk_credit--;
        return NM_OK;
    }
    for (int round = 0;; round++) {
        pthread_mutex_lock(&h->bk_lock);
        bool due = pm_bk_gc_due(h);
        /* a batch (counted as normal entries: a credit may pay for either), else this one */
        if (tc && !due && bk_fits(h, PM_BK_CREDITS, true)) {
            __atomic_fetch_add(&h->bk_reserved, PM_BK_CREDITS, __ATOMIC_RELAXED);
            tc->bk_credit = PM_BK_CREDITS - 1;
            pthread_mutex_unlock(&h->bk_lock);
            return NM_OK;
        }
        bool fits = bk_fits(h, 1, normal);
        if (fits && (!due || round > 0)) { /* round > 0: GC due but nothing to gain now: go on */
            __atomic_fetch_add(&h->bk_reserved, 1, __ATOMIC_RELAXED);
            pthread_mutex_unlock(&h->bk_lock);
            return NM_OK;
        }
        bool live_ok = !normal || bk_live(h) + bk_resv(h) + 1 <= bk_max_live(h);
        pthread_mutex_unlock(&h->bk_lock);
        if (round > 0)
            return live_ok ? nm_fail(NM_ENOMEM, "pmalloc: bookkeeping log full (%u chunks, %u free)", h->nchunks, h->bk_free_count)
                           : nm_fail(NM_ENOMEM, "pmalloc: bookkeeping log holds its maximum of %llu extents and slabs",
                                     (unsigned long long)bk_max_live(h));
        nm_err e = pm_up_checkpoint(h, PM_CKPT_GC);
        if (e) return e;
    }
}

/* The operation will not append after all: its reservation goes back. */
void pm_bk_unreserve(pm_heap *h, pm_tcache *tc)
{
    if (tc) {
        tc->bk_credit++;
        return;
    }
    __atomic_fetch_sub(&h->bk_reserved, 1, __ATOMIC_RELAXED);
}


/* A thread cache goes: its unused credits go back (no lock held). */
void pm_bk_credits_return(pm_heap *h, pm_tcache *tc)
{
    if (!tc->bk_credit) return;
    __atomic_fetch_sub(&h->bk_reserved, (uint64_t)tc->bk_credit, __ATOMIC_RELAXED);
    tc->bk_credit = 0;
}

static void bk_settle_locked(pm_heap *h);

/* Store an entry in the calling thread's lane; not written back (pm_bk_settle,
 * checkpoints). held: the caller holds bk_lock; if not, a lane's lock is all
 * an append takes unless its chunk is full (then bk_lock is taken to settle
 * and open the next chunk). */
static nm_err bk_append(pm_heap *h, pm_veh *v, bool tomb, bool held, bool spend)
{
    unsigned lane = bk_lane(h);
    pm_bklane *ln = &h->bk_ln[lane];
    pthread_mutex_lock(&ln->lock);
    uint32_t c;
    while ((c = h->bk_lane_chunk[lane]) == PM_CHUNK_NONE || h->chunks[c].appended >= PM_CHUNK_ENTRIES) {
        pthread_mutex_unlock(&ln->lock);
        if (!held) pthread_mutex_lock(&h->bk_lock);
        /* (only a holder of bk_lock opens a chunk: no other can meanwhile) */
        pm_bk_lanes_lock(h, true);
        c = h->bk_lane_chunk[lane];
        nm_err e = NM_OK;
        if (c == PM_CHUNK_NONE || h->chunks[c].appended >= PM_CHUNK_ENTRIES) {
            if (c != PM_CHUNK_NONE) bk_settle_locked(h); /* at most one chunk per lane unsettled (see pm_bk_settle_commit) */
            e = new_tail_chunk(h, lane);
        }
        pm_bk_lanes_lock(h, false);
        if (!held) pthread_mutex_unlock(&h->bk_lock);
        if (e) return e;
        /* a settle may come in between (the chunk stays open, and dirty), and
         * without bk_lock a compaction too (the lanes start over): look again */
        pthread_mutex_lock(&ln->lock);
    }
    /* The entry is made under the lane lock: a compaction, which moves
     * entries and resets the lanes, holds every lane lock, so the position a
     * tombstone names (v->bkpos) and its chunk's generation are current. */
    uint64_t entry;
    if (tomb) {
        int64_t pos = __atomic_load_n(&v->bkpos, __ATOMIC_ACQUIRE);
        uint32_t tc = (uint32_t)(pos / 128), slot = (uint32_t)(pos % 128);
        entry = PM_BK_TOMB << 62 | (uint64_t)h->chunks[tc].gen << 31 | (uint64_t)tc << 7 | slot;
    } else {
        uint64_t type = v->state == PM_VEH_SLAB ? PM_BK_SLAB : PM_BK_EXTENT;
        entry = type << 62 | v->npages << 36 | v->page;
    }
    uint64_t *ents = chunk_ent(h, c);
    uint32_t a = h->chunks[c].appended++, idx = bk_slot(h, c, a);
    __atomic_store_n(&ents[idx], entry, __ATOMIC_RELAXED);
    h->chunks[c].digest ^= ent_hash(a, entry);
    /* the counts: a normal entry is live, a tombstone kills one */
    lane_add(&ln->live, tomb ? -1 : 1);
    lane_add(&ln->tombs, tomb);
    lane_add(&ln->spent, spend);
    /* the VEH's entry position (a record's; -1 once tombstoned), under the
     * lane lock: a compaction copies what has an entry, so it must never see
     * a tombstoned extent that still names its entry */
    __atomic_store_n(&v->bkpos, tomb ? -1 : (int64_t)c * 128 + idx, __ATOMIC_RELEASE); /* read by a claim without the lock */
    pthread_mutex_unlock(&ln->lock);
    pm_ctr_add(h, PMC_BK, 1);
    return NM_OK;
}

nm_err pm_bk_record(pm_heap *h, pm_veh *v) { return bk_append(h, v, false, true, false); }
nm_err pm_bk_tombstone(pm_heap *h, pm_veh *v) { return bk_append(h, v, true, true, false); }

nm_err pm_bk_op_append(pm_heap *h, pm_veh *v, bool tomb)
{
    /* (the reservation is spent even if the append failed, which it cannot) */
    nm_err err = bk_append(h, v, tomb, false, true);
    if (err) {
        pm_bklane *ln = &h->bk_ln[bk_lane(h)];
        pthread_mutex_lock(&ln->lock);
        lane_add(&ln->spent, 1);
        pthread_mutex_unlock(&ln->lock);
    }
    if (h->model == PMALLOC_GC) { /* GC settles an extent operation before it returns (redo.c) */
        pthread_mutex_lock(&h->bk_lock);
        pm_bk_settle(h);
        pthread_mutex_unlock(&h->bk_lock);
    }
    return err;
}

/* Settling: the appends made since the last settle become durable, and only
 * then are they counted: recovery reads a chunk's first `count` appends, so
 * an append that was stored but never settled is not read, whatever the cache
 * wrote back. Counts are taken under bk_lock, which every append holds, so
 * a settle's counts are one moment of the log (a tombstone is never counted
 * before the entry it names). The counts of the chunks a settle advances must
 * reach the heap together: they are written first as one settle record (two
 * superblock lines with a checksum: torn, it is not there), then into the
 * chunk headers; recovery applies the last record again (pm_bk_settle_replay).
 * At most one chunk per lane has unsettled appends (a lane's full chunk is
 * settled before the next one opens), so a record holds every pair. */
/* Drop the chunks with nothing left to settle (or no longer listed) from
 * the dirty set, but the lanes' open chunks (bk_lock held; an open chunk's
 * counts are not read: its lane may be appending). */
static void bk_dirty_prune(pm_heap *h)
{
    uint32_t m = 0;
    for (uint32_t d = 0; d < h->bk_ndirty; d++) {
        uint32_t c = h->bk_dirty[d];
        if (h->chunks[c].in_list && (bk_open(h, c) || h->chunks[c].appended != h->chunks[c].settled)) h->bk_dirty[m++] = c;
        else h->chunks[c].dirty = false;
    }
    h->bk_ndirty = m;
}

static pm_settle_rec *settle_rec(pm_heap *h) { return (pm_settle_rec *)((char *)h->sb + PM_SETTLE_LINE * PM_LINE); }
static uint64_t settle_check(const pm_settle_rec *r) { return XXH64(r, offsetof(pm_settle_rec, check), 0x5e771e); }

/* Only the chunks of the dirty set (every chunk with unsettled appends is in
 * it: bk_append marks a chunk before storing) are visited; `counts` is indexed
 * by chunk and only their words are written and read. */
void pm_bk_settle_flush(pm_heap *h, uint64_t *counts)
{
    for (uint32_t d = 0; d < h->bk_ndirty; d++) {
        uint32_t c = h->bk_dirty[d];
        pm_bkchunk *k = &h->chunks[c];
        counts[c] = (uint64_t)k->appended | (uint64_t)k->digest << 32; /* the count word to settle */
        if (!k->in_list || k->appended == k->settled) continue;
        uint64_t *ents = chunk_ent(h, c);
        uint32_t lines = 0; /* each entry line once */
        for (uint32_t a = k->settled; a < k->appended; a++) {
            uint32_t line = bk_slot(h, c, a) / 8u;
            if (lines >> line & 1) continue;
            lines |= 1u << line;
            pm_flush(h, &ents[line * 8u], PM_LINE, PM_META);
        }
    }
}

/* After a drain of pm_bk_settle_flush's lines: the record (drained here),
 * then the headers (flushed; the caller drains). */
void pm_bk_settle_commit(pm_heap *h, const uint64_t *counts)
{
    pm_settle_rec r;
    memset(&r, 0, sizeof r);
    for (uint32_t d = 0; d < h->bk_ndirty; d++) {
        uint32_t c = h->bk_dirty[d];
        if (h->chunks[c].in_list && (uint32_t)counts[c] > h->chunks[c].settled && r.n < PM_SETTLE_PAIRS) {
            r.pair[r.n][0] = (uint64_t)c | (uint64_t)h->chunks[c].gen << 32;
            r.pair[r.n++][1] = counts[c];
        }
    }
    if (r.n == 0) {
        bk_dirty_prune(h);
        return;
    }
    r.seq = ++h->settle_seq;
    r.check = settle_check(&r);
    pm_settle_rec *dst = settle_rec(h);
    uint64_t *d = (uint64_t *)dst;
    const uint64_t *src = (const uint64_t *)&r;
    for (unsigned i = 0; i < sizeof r / 8; i++) __atomic_store_n(&d[i], src[i], __ATOMIC_RELAXED);
    pm_persist(h, dst, sizeof *dst, PM_META); /* the group's commit point */
    for (uint64_t i = 0; i < r.n; i++) {
        uint32_t c = (uint32_t)r.pair[i][0];
        pm_chunk_hdr *hd = chunk_hdr(h, c);
        __atomic_store_n(&hd->count, counts[c], __ATOMIC_RELAXED);
        pm_flush(h, &hd->count, sizeof hd->count, PM_META);
        h->chunks[c].settled = (uint32_t)counts[c];
    }
    bk_dirty_prune(h);
}

/* Open: the last settle record's counts, where its chunks still are what it
 * names and their headers lag behind (a crash between the record and the
 * headers). Before the log is read. */
void pm_bk_settle_replay(pm_heap *h)
{
    pm_settle_rec r = *settle_rec(h);
    if (r.seq == 0 || r.n > PM_SETTLE_PAIRS || r.check != settle_check(&r)) return; /* none, or torn: not committed */
    h->settle_seq = r.seq;
    for (uint64_t i = 0; i < r.n; i++) {
        uint32_t c = (uint32_t)r.pair[i][0], gen = (uint32_t)(r.pair[i][0] >> 32), cnt = (uint32_t)r.pair[i][1];
        if (c >= h->nchunks || cnt > PM_CHUNK_ENTRIES) continue;
        pm_chunk_hdr *hd = chunk_hdr(h, c);
        if (hd->magic != PM_CHUNK_MAGIC || hd->gen != gen || (uint32_t)hd->count >= cnt) continue;
        hd->count = r.pair[i][1];
        pm_persist(h, &hd->count, sizeof hd->count, PM_META);
    }
}

void pm_bk_settle(pm_heap *h)
{
    pm_bk_lanes_lock(h, true);
    bk_settle_locked(h);
    pm_bk_lanes_lock(h, false);
}

void pm_bk_settle_held(pm_heap *h) { bk_settle_locked(h); }

static void bk_settle_locked(pm_heap *h)
{
    bool any = false;
    for (uint32_t d = 0; d < h->bk_ndirty && !any; d++) {
        const pm_bkchunk *k = &h->chunks[h->bk_dirty[d]];
        any = k->in_list && k->appended != k->settled;
    }
    if (!any) { /* nothing to settle; still a drain, as callers had it */
        pm_drain(h);
        return;
    }
    /* the count words of the dirty chunks only (a zeroed array of every
     * chunk's, allocated per settle, was a quarter of a large operation) */
    if (!h->bk_counts && !(h->bk_counts = malloc((size_t)h->nchunks * sizeof *h->bk_counts))) {
        /* no host memory: nothing settles (the caller's operation stays unsettled, recovery replays it) */
        nm_fail(NM_ENOMEM, "pmalloc: no host memory to settle the bookkeeping log");
        return;
    }
    pm_bk_settle_flush(h, h->bk_counts);
    pm_drain(h);
    pm_bk_settle_commit(h, h->bk_counts);
    pm_drain(h);
}

/* The GCs (Sec. 5.3) work on a settled log (a checkpoint runs them). */
nm_err pm_bk_gc(pm_heap *h)
{
    if (!pm_bk_gc_due(h)) return NM_OK;
    bk_fast_gc(h);
    if (!pm_bk_gc_due(h)) return NM_OK;
    /* pm_bk_reserve keeps the live entries under half the log, so the
     * compacted copy always fits in the free half */
    return pm_bk_compact(h);
}

/* Collect every allocated VEH (extents and slabs), in address order. */
static pm_veh **collect_allocated(pm_heap *h, size_t *n)
{
    /* a first guess, grown as needed (extents taken from and put into the
     * arenas' caches are counted per thread, not in nextents, which can then
     * run below zero on its own: an extent from a cache freed another way) */
    size_t cap = h->nslabs + 256, k = 0;
    pm_veh **arr = malloc(cap * sizeof *arr);
    if (!arr) return NULL;
    for (uint64_t p = 0; p < h->data_pages;) {
        pm_veh *v = pm_pmap_get(h, p);
        if (v && v->state != PM_VEH_FREE && v->page == p) {
            /* an extent being allocated has no entry yet: its own append follows */
            if (v->bkpos >= 0) {
                if (k == cap) {
                    pm_veh **t = realloc(arr, 2 * cap * sizeof *arr);
                    if (!t) { free(arr); return NULL; }
                    arr = t;
                    cap *= 2;
                }
                arr[k++] = v;
            }
            p += v->npages;
        } else if (v && v->state == PM_VEH_FREE && v->page == p) {
            p += v->npages;
        } else {
            p++;
        }
    }
    *n = k;
    return arr;
}

/* Slow GC (Sec. 5.3): copy live entries into a new list and flip alt. */
nm_err pm_bk_compact(pm_heap *h)
{
    size_t n;
    pm_veh **live = collect_allocated(h, &n);
    if (!live) return nm_fail(NM_ENOMEM, "pmalloc: no host memory for the log GC");
    uint32_t need = (uint32_t)((n + PM_CHUNK_ENTRIES - 1) / PM_CHUNK_ENTRIES);
    if (need == 0) need = 1;
    if (need > h->bk_free_count) {
        free(live);
        return nm_fail(NM_ENOMEM, "pmalloc: bookkeeping log full: %zu live entries, %u free chunks", n, h->bk_free_count);
    }
    uint32_t *newc = malloc(need * sizeof *newc);
    if (!newc) { free(live); return nm_fail(NM_ENOMEM, "pmalloc: no host memory for the log GC"); }
    uint32_t got = 0;
    for (uint32_t c = 0; c < h->nchunks && got < need; c++)
        if (!h->chunks[c].in_list) newc[got++] = c;
    for (uint32_t i = 0; i < need; i++) { /* entries first (sequential order), then each header with their count and digest */
        uint64_t *ents = chunk_ent(h, newc[i]);
        memset(ents, 0, PM_CHUNK_BYTES - PM_LINE);
        uint32_t cnt = 0, dg = 0;
        for (size_t k = (size_t)i * PM_CHUNK_ENTRIES; k < n && cnt < PM_CHUNK_ENTRIES; k++, cnt++) {
            pm_veh *v = live[k];
            uint64_t type = v->state == PM_VEH_SLAB ? PM_BK_SLAB : PM_BK_EXTENT;
            ents[cnt] = type << 62 | v->npages << 36 | v->page;
            dg ^= ent_hash(cnt, ents[cnt]);
        }
        chunk_init(h, newc[i], i + 1 < need ? newc[i + 1] : PM_CHUNK_NONE, false, cnt, dg);
    }
    pm_drain(h);
    desc_write(h, newc[0]); /* the commit point */
    /* volatile side: old chunks free, new ones listed */
    for (uint32_t c = 0; c < h->nchunks; c++) h->chunks[c].in_list = false;
    for (uint32_t i = 0; i < need; i++) {
        uint32_t c = newc[i];
        h->chunks[c].in_list = true;
        h->chunks[c].next = i + 1 < need ? newc[i + 1] : PM_CHUNK_NONE;
    }
    for (size_t i = 0; i < n; i++)
        __atomic_store_n(&live[i]->bkpos, (int64_t)newc[i / PM_CHUNK_ENTRIES] * 128 + (int64_t)(i % PM_CHUNK_ENTRIES), __ATOMIC_RELAXED);
    h->bk_tail = newc[need - 1];
    bk_lanes_reset(h, newc[need - 1]);
    h->bk_list_len = need;
    h->bk_free_count = h->nchunks - need;
    bk_set_live(h, n);
    bk_set_tombs(h, 0);
    pm_count(&h->c_bkgc, 1);
    free(newc);
    free(live);
    return NM_OK;
}

typedef struct { int64_t pos; uint64_t e; bool dead; } bk_norm;

static int cmp_norm_pos(const void *a, const void *b)
{
    const bk_norm *x = a, *y = b;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}
static int cmp_norm_page(const void *a, const void *b)
{
    const bk_norm *x = a, *y = b;
    return PM_BK_PAGE(x->e) < PM_BK_PAGE(y->e) ? -1 : PM_BK_PAGE(x->e) > PM_BK_PAGE(y->e);
}

/* Rebuild every volatile large-allocator structure from the log (Sec. 7). */
nm_err pm_large_init(pm_heap *h, bool fresh)
{
    h->chunks = calloc(h->nchunks, sizeof *h->chunks);
    h->pmap = calloc(h->data_pages, sizeof *h->pmap);
    if (!h->chunks || !h->pmap) return nm_fail(NM_ENOMEM, "pmalloc: no host memory for the page map");
    h->used_top = fresh ? 0 : h->data_pages;
    if (fresh) {
        chunk_init(h, 0, PM_CHUNK_NONE, h->interleave, 0, 0);
        pm_drain(h);
        h->bk_gen = 0;
        desc_write(h, 0);
    } else {
        nm_err e = desc_read(h);
        if (e) return e;
        pm_bk_settle_replay(h);
    }
    uint32_t c = h->bk_head;
    size_t nn = 0, capn = 256, nt = 0, capt = 64;
    bk_norm *norm = malloc(capn * sizeof *norm);
    int64_t *tomb = malloc(capt * sizeof *tomb);
    nm_err err = NM_OK;
    if (!norm || !tomb) { err = nm_fail(NM_ENOMEM, "pmalloc: no host memory for log replay"); goto out; }
    uint32_t last = PM_CHUNK_NONE, len = 0;
    while (c != PM_CHUNK_NONE) {
        if (c >= h->nchunks || h->chunks[c].in_list) {
            err = nm_fail(NM_ECORRUPT, "pmalloc: bookkeeping log chunk list is broken at chunk %u", c);
            goto out;
        }
        pm_chunk_hdr *hd = chunk_hdr(h, c);
        uint32_t next = (uint32_t)hd->next, count = (uint32_t)hd->count;
        if (hd->magic != PM_CHUNK_MAGIC || hd->id != c || hd->check != chunk_check(hd) || count > PM_CHUNK_ENTRIES) {
            err = nm_fail(NM_ECORRUPT, "pmalloc: bookkeeping log chunk %u has a damaged header", c);
            goto out;
        }
        if (hd->next != next_word(c, hd, next)) {
            err = nm_fail(NM_ECORRUPT, "pmalloc: bookkeeping log chunk %u has a damaged next pointer", c);
            goto out;
        }
        pm_bkchunk *k = &h->chunks[c];
        k->in_list = true;
        k->next = next;
        k->gen = hd->gen;
        k->inter = hd->flags & PM_CHUNK_INTER;
        k->appended = k->settled = count;
        len++;
        uint64_t *ents = chunk_ent(h, c);
        uint32_t dg = 0;
        for (uint32_t a = 0; a < count; a++) dg ^= ent_hash(a, ents[bk_slot(h, c, a)]);
        if (dg != (uint32_t)(hd->count >> 32)) {
            err = nm_fail(NM_ECORRUPT, "pmalloc: bookkeeping log chunk %u: its %u entries do not match their checksum", c, count);
            goto out;
        }
        k->digest = dg;
        for (uint32_t a = 0; a < count; a++) { /* the settled appends only */
            uint32_t i = bk_slot(h, c, a);
            uint64_t e = ents[i];
            if (!e) {
                err = nm_fail(NM_ECORRUPT, "pmalloc: bookkeeping log chunk %u: settled entry %u is empty", c, a);
                goto out;
            }
            if (PM_BK_TYPE(e) == PM_BK_TOMB) {
                if (nt == capt) { capt *= 2; int64_t *t = realloc(tomb, capt * sizeof *t); if (!t) { err = nm_fail(NM_ENOMEM, "replay"); goto out; } tomb = t; }
                tomb[nt++] = (int64_t)e; /* resolved once every listed chunk is known */
            } else {
                if (nn == capn) { capn *= 2; bk_norm *t = realloc(norm, capn * sizeof *t); if (!t) { err = nm_fail(NM_ENOMEM, "replay"); goto out; } norm = t; }
                norm[nn++] = (bk_norm){(int64_t)c * 128 + i, e, false};
            }
        }
        last = c;
        c = next;
    }
    if (last == PM_CHUNK_NONE) { err = nm_fail(NM_ECORRUPT, "pmalloc: bookkeeping log has no chunk"); goto out; }
    pm_sort(norm, nn, sizeof *norm, cmp_norm_pos);
    size_t valid = 0;
    for (size_t i = 0; i < nt; i++) {
        uint64_t e = (uint64_t)tomb[i];
        if (PM_BK_TCHUNK(e) >= h->nchunks) {
            err = nm_fail(NM_ECORRUPT, "pmalloc: bookkeeping tombstone %016llx names chunk %u of %u",
                          (unsigned long long)e, PM_BK_TCHUNK(e), h->nchunks);
            goto out;
        }
        if (!tomb_valid(h, e)) continue; /* orphan: its chunk was unlinked by a fast GC */
        bk_norm key = {(int64_t)PM_BK_TCHUNK(e) * 128 + PM_BK_TSLOT(e), 0, false};
        bk_norm *t = bsearch(&key, norm, nn, sizeof *norm, cmp_norm_pos);
        if (!t || t->dead) {
            err = nm_fail(NM_ECORRUPT, "pmalloc: bookkeeping tombstone names no live entry (position %lld)", (long long)key.pos);
            goto out;
        }
        t->dead = true;
        valid++;
    }
    h->bk_tombs = valid;
    /* live entries -> extents; gaps -> free extents */
    pm_sort(norm, nn, sizeof *norm, cmp_norm_page);
    uint64_t cur = 0;
    h->bk_live_entries = 0;
    for (size_t i = 0; i < nn; i++) {
        if (norm[i].dead) continue;
        uint64_t e = norm[i].e, pg = PM_BK_PAGE(e), np = PM_BK_NPAGES(e);
        if (np == 0 || pg < cur || pg + np > h->data_pages || (PM_BK_TYPE(e) == PM_BK_SLAB && np != PM_SLAB_PAGES)) {
            err = nm_fail(NM_ECORRUPT, "pmalloc: bookkeeping entry %016llx is out of range or overlaps", (unsigned long long)e);
            goto out;
        }
        if (pg > cur) {
            pm_veh *f = pm_veh_new(h);
            if (!f) { err = nm_fail(NM_ENOMEM, "replay"); goto out; }
            f->page = cur; f->npages = pg - cur; f->bkpos = -1;
            free_list_add(h, f);
            pmap_mark_free(h, f);
        }
        pm_veh *v = pm_veh_new(h);
        if (!v) { err = nm_fail(NM_ENOMEM, "replay"); goto out; }
        v->page = pg; v->npages = np; v->bkpos = norm[i].pos;
        v->state = PM_BK_TYPE(e) == PM_BK_SLAB ? PM_VEH_SLAB : PM_VEH_ALLOC;
        pmap_mark_alloc(h, v);
        if (v->state == PM_VEH_SLAB) h->nslabs++;
        else h->nextents++;
        h->bk_live_entries++;
        cur = pg + np;
    }
    if (cur < h->data_pages) {
        pm_veh *f = pm_veh_new(h);
        if (!f) { err = nm_fail(NM_ENOMEM, "replay"); goto out; }
        f->page = cur; f->npages = h->data_pages - cur; f->bkpos = -1;
        free_list_add(h, f);
        pmap_mark_free(h, f);
    }
    h->bk_tail = last;
    h->bk_list_len = len;
    h->bk_free_count = h->nchunks - len;
    bk_lanes_reset(h, last); /* appends go on after the settled ones (later slots may hold what was never settled) */
    h->ri.bklog_live = h->bk_live_entries;
out:
    free(norm);
    free(tomb);
    return err;
}

void pm_large_free_all(pm_heap *h)
{
    while (h->veh_blocks) {
        void *b = h->veh_blocks;
        h->veh_blocks = *(void **)b;
        free(b);
    }
    h->veh_pool = NULL;
    memset(&h->fbins, 0, sizeof h->fbins);
    free(h->pmap);
    free(h->chunks);
    free(h->bk_counts);
    h->pmap = NULL;
    h->chunks = NULL;
    h->bk_counts = NULL;
    h->bk_ndirty = 0;
}

/* xc_pages: the pages the arenas' extent caches (xcache.c) count, which the
 * cached extents must add up to */
nm_err pm_large_check(pm_heap *h, uint64_t xc_pages)
{
    uint64_t covered = 0, freep = 0, cachedp = 0;
    for (uint64_t p = 0; p < h->data_pages;) {
        pm_veh *v = h->pmap[p];
        if (!v || v->page != p || v->npages == 0 || p + v->npages > h->data_pages)
            return nm_fail(NM_ECORRUPT, "pmalloc check: page %llu is not the start of an extent", (unsigned long long)p);
        if (v->state == PM_VEH_FREE) {
            freep += v->npages;
            if (h->pmap[p + v->npages - 1] != v)
                return nm_fail(NM_ECORRUPT, "pmalloc check: free extent at %llu lacks its end mark", (unsigned long long)p);
        } else if (v->state == PM_VEH_CACHED) { /* ends only, as free extents (its store checks the rest: pm_xc_check) */
            if (h->pmap[p + v->npages - 1] != v)
                return nm_fail(NM_ECORRUPT, "pmalloc check: cached extent at %llu lacks its end mark", (unsigned long long)p);
            if (v->bkpos >= 0) return nm_fail(NM_ECORRUPT, "pmalloc check: cached extent %llu has a live log entry", (unsigned long long)p);
            cachedp += v->npages;
        } else {
            for (uint64_t q = 0; q < v->npages; q++)
                if (h->pmap[p + q] != v) return nm_fail(NM_ECORRUPT, "pmalloc check: page map hole in extent %llu", (unsigned long long)p);
            if (v->bkpos < 0) return nm_fail(NM_ECORRUPT, "pmalloc check: extent %llu has no log entry", (unsigned long long)p);
            uint64_t e = chunk_ent(h, (uint32_t)(v->bkpos / 128))[v->bkpos % 128];
            if (PM_BK_TYPE(e) == PM_BK_TOMB || PM_BK_PAGE(e) != v->page || PM_BK_NPAGES(e) != v->npages)
                return nm_fail(NM_ECORRUPT, "pmalloc check: log entry of extent %llu does not match", (unsigned long long)p);
        }
        covered += v->npages;
        p += v->npages;
    }
    if (cachedp != xc_pages)
        return nm_fail(NM_ECORRUPT, "pmalloc check: %llu pages in cached extents, the caches count %llu",
                       (unsigned long long)cachedp, (unsigned long long)xc_pages);
    if (covered != h->data_pages || freep != h->free_pages)
        return nm_fail(NM_ECORRUPT, "pmalloc check: extents cover %llu of %llu pages, %llu free vs %llu counted",
                       (unsigned long long)covered, (unsigned long long)h->data_pages, (unsigned long long)freep,
                       (unsigned long long)h->free_pages);
    return NM_OK;
}

/* ---- nearmem pmalloc dump (inspect.c): read-only, h->base/size/sb only ---- */

unsigned pm_bk_listed(pm_heap *h)
{
    const pm_super *sb = h->sb;
    uint64_t w = 0;
    bool any = false;
    for (int copy = 0; copy < 2; copy++) {
        const pm_bkdesc *d = (const pm_bkdesc *)((const char *)sb + (copy ? PM_BK_B_LINE : 3u) * PM_LINE);
        if (d->check == desc_check(d->w, copy) && (!any || (d->w >> 32) > (w >> 32))) w = d->w, any = true;
    }
    if (!any || sb->bk_off + (uint64_t)sb->nchunks * PM_CHUNK_BYTES > h->size) return 0;
    unsigned len = 0;
    for (uint32_t c = (uint32_t)w; c != PM_CHUNK_NONE && c < sb->nchunks && len <= sb->nchunks; len++)
        c = (uint32_t)((const pm_chunk_hdr *)(h->base + sb->bk_off + (uint64_t)c * PM_CHUNK_BYTES))->next;
    return len;
}

unsigned pm_bk_dump(pm_heap *h, FILE *out)
{
    const pm_super *sb = h->sb;
    uint64_t w = 0;
    bool any = false;
    unsigned damaged = 0;
    for (int copy = 0; copy < 2; copy++) {
        const pm_bkdesc *d = (const pm_bkdesc *)((const char *)sb + (copy ? PM_BK_B_LINE : 3u) * PM_LINE);
        bool ok = d->check == desc_check(d->w, copy);
        fprintf(out, "bookkeeping-log descriptor, copy %c (superblock line %u): head chunk %u, generation %u%s\n", 'A' + copy,
                copy ? PM_BK_B_LINE : 3u, (uint32_t)d->w, (uint32_t)(d->w >> 32), ok ? "" : "  DAMAGED (open repairs it from the other copy)");
        if (ok && (!any || (d->w >> 32) > (w >> 32))) w = d->w, any = true;
    }
    const pm_settle_rec *sr = (const pm_settle_rec *)((const char *)sb + PM_SETTLE_LINE * PM_LINE);
    if (sr->seq == 0) fprintf(out, "settle record (superblock lines %u-%u): none\n", PM_SETTLE_LINE, PM_SETTLE_LINE + 2);
    else
        fprintf(out, "settle record (superblock lines %u-%u): number %llu, %llu chunks%s\n", PM_SETTLE_LINE, PM_SETTLE_LINE + 2,
                (unsigned long long)sr->seq, (unsigned long long)sr->n,
                sr->n <= PM_SETTLE_PAIRS && sr->check == settle_check(sr) ? "" : "  (fails its check: torn or damaged, not applied)");
    if (!any || sb->bk_off + (uint64_t)sb->nchunks * PM_CHUNK_BYTES > h->size) {
        fprintf(out, "bookkeeping log: no valid descriptor, or outside the file  DAMAGED\n");
        return damaged + 1;
    }
    fprintf(out, "bookkeeping log: %u chunks of %u entries at %#llx; the list:\n", sb->nchunks, PM_CHUNK_ENTRIES,
            (unsigned long long)sb->bk_off);
    uint64_t tot[4] = {0}, len = 0;
    for (uint32_t c = (uint32_t)w; c != PM_CHUNK_NONE && len <= sb->nchunks; len++) {
        if (c >= sb->nchunks) { fprintf(out, "  chunk %u: out of range  DAMAGED\n", c); damaged++; break; }
        const pm_chunk_hdr *hd = (const pm_chunk_hdr *)(h->base + sb->bk_off + (uint64_t)c * PM_CHUNK_BYTES);
        uint32_t next = (uint32_t)hd->next, count = (uint32_t)hd->count;
        bool hok = hd->magic == PM_CHUNK_MAGIC && hd->id == c && hd->check == chunk_check(hd) && count <= PM_CHUNK_ENTRIES;
        bool nok = hd->next == next_word(c, hd, next);
        const uint64_t *ents = (const uint64_t *)((const char *)hd + PM_LINE);
        uint32_t dg = 0, n[4] = {0};
        for (uint32_t a = 0; hok && a < count; a++) {
            uint32_t i = hd->flags & PM_CHUNK_INTER ? (a % PM_CHUNK_ENTRY_LINES) * 8u + a / PM_CHUNK_ENTRY_LINES : a;
            dg ^= ent_hash(a, ents[i]);
            n[PM_BK_TYPE(ents[i])]++;
        }
        bool dok = hok && dg == (uint32_t)(hd->count >> 32);
        fprintf(out, "  chunk %u: generation %u, %u settled entries (%u extents, %u slabs, %u tombstones)%s%s%s\n", c, hd->gen, count,
                n[PM_BK_EXTENT], n[PM_BK_SLAB], n[PM_BK_TOMB], hok ? "" : "  HEADER DAMAGED", nok ? "" : "  NEXT DAMAGED",
                !hok || dok ? "" : "  ENTRIES DAMAGED");
        for (int t = 1; t < 4; t++) tot[t] += n[t];
        damaged += !hok || !nok || (hok && !dok);
        if (!hok || !nok) break;
        c = next;
    }
    fprintf(out, "  %llu chunks listed: %llu extent entries, %llu slab entries, %llu tombstones\n", (unsigned long long)len,
            (unsigned long long)tot[PM_BK_EXTENT], (unsigned long long)tot[PM_BK_SLAB], (unsigned long long)tot[PM_BK_TOMB]);
    return damaged;
}
