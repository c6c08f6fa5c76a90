/* Small allocations (paper Sec. 4.2, 5.1): per-core arenas holding 64 KiB
 * slabs per size class, per-thread caches (tcaches), and the interleaved
 * bitmap mapping.
 *
 * A slab's persistent header is line 0; its bitmap follows from line 1. With
 * S bit stripes, block i maps to stripe i mod S, bit i div S of that stripe,
 * and stripe s occupies lines s, s+S, s+2S, ... so consecutive blocks have
 * their bits in different cache lines (S = 1 is the sequential mapping). A
 * tcache keeps one sub-cache per stripe and serves allocations round-robin
 * across them, so consecutive allocations flush different lines. */
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "nearmem/common/bitmap.h"
#include "pm_slabs.h"

/* morph_flag is not covered: it changes after creation (morph.c), and a
 * set flag without a morph word is refused on its own */
static uint32_t slab_hdr_check(const pm_slab_hdr *hd)
{
    pm_slab_hdr c;
    memcpy(&c, hd, offsetof(pm_slab_hdr, check));
    c.morph_flag = 0;
    return (uint32_t)XXH64(&c, offsetof(pm_slab_hdr, check), 0x51ab);
}

nm_err pm_small_init(pm_heap *h)
{
    nm_err e = nm_sizeclass_init_geometric(&h->sc, 16, PMALLOC_SMALL_MAX, 4, 16);
    if (e) return e;
    h->ncls = h->sc.count;
    if (h->ncls > PM_NCLS_MAX) return nm_fail(NM_EINVAL, "pmalloc: too many size classes");
    for (unsigned c = 0; c < h->ncls; c++)
        pm_slab_layout((unsigned)h->sc.size[c], h->stripes, &h->slab_nblocks[c], &h->slab_bm_lines[c], &h->slab_data_off[c]);
    return NM_OK;
}

/* Rebuild the vslab of a slab found in the bookkeeping log (open/recovery). */
nm_err pm_slab_adopt(pm_heap *h, pm_veh *v)
{
    pm_slab_hdr *hd = (pm_slab_hdr *)(h->data + v->page * PM_PAGE);
    uint32_t nb, bl, doff;
    if (hd->magic != PM_SLAB_MAGIC || hd->check != slab_hdr_check(hd) || hd->cls >= h->ncls ||
        hd->block_size != h->sc.size[hd->cls] || hd->stripes == 0 || hd->stripes > PMALLOC_MAX_STRIPES)
        return nm_fail(NM_ECORRUPT, "pmalloc: slab at data page %llu has a bad header", (unsigned long long)v->page);
    pm_slab_layout(hd->block_size, hd->stripes, &nb, &bl, &doff);
    if (hd->nblocks != nb || hd->bm_lines != bl || hd->data_off != doff)
        return nm_fail(NM_ECORRUPT, "pmalloc: slab at data page %llu has an inconsistent geometry", (unsigned long long)v->page);
    if (*PM_MORPH_WORD(hd)) return pm_morph_adopt(h, v, NULL); /* morphed: geometry from its header image */
    if (hd->morph_flag) return nm_fail(NM_ECORRUPT, "pmalloc: slab at data page %llu was morphed but its morph word is gone", (unsigned long long)v->page);
    pm_vslab *s = pm_slab_vol_new(h, v, hd);
    if (!s) return nm_fail(NM_ENOMEM, "pmalloc: no host memory for a vslab");
    s->nfree_v = s->nblocks;
    for (uint32_t i = 0; i < s->nblocks; i++)
        if (pm_pbit(s, i)) {
            nm_bitmap_set(s->vbm, i);
            s->nfree_v--;
        }
    /* bits beyond nblocks must be clear */
    if (s->nfree_v) pm_slab_partial_add(s->arena, s);
    pm_morph_lru_add(s->arena, s);
    return NM_OK;
}

/* A new slab for class `cls` in arena a (arena lock held). The header is
 * persisted before the log entry that makes the slab exist. */
static pm_vslab *slab_new(pm_heap *h, pm_arena *a, unsigned cls)
{
    pm_veh *v;
    pthread_mutex_lock(&h->large_lock);
    if (pm_numa_extent_alloc(h, a->node, PM_SLAB_PAGES, PM_VEH_SLAB, false, &v)) {
        /* the arenas' extent caches hold free space: give it back and retry once */
        pthread_mutex_unlock(&h->large_lock);
        if (!pm_xc_flush_all(h)) return NULL;
        pthread_mutex_lock(&h->large_lock);
        if (pm_numa_extent_alloc(h, a->node, PM_SLAB_PAGES, PM_VEH_SLAB, false, &v)) {
            pthread_mutex_unlock(&h->large_lock);
            return NULL;
        }
    }
    pm_extent_map(h, v);
    pm_slab_hdr *hd = (pm_slab_hdr *)(h->data + v->page * PM_PAGE);
    size_t hbytes = h->slab_data_off[cls];
    memset(hd, 0, hbytes);
    hd->magic = PM_SLAB_MAGIC;
    hd->cls = (uint16_t)cls;
    hd->stripes = (uint8_t)h->stripes;
    hd->block_size = (uint32_t)h->sc.size[cls];
    hd->nblocks = h->slab_nblocks[cls];
    hd->data_off = h->slab_data_off[cls];
    hd->bm_lines = h->slab_bm_lines[cls];
    hd->hdr_lines = 1 + hd->bm_lines + PM_SLAB_RESERVED_LINES;
    hd->arena = a->id;
    hd->node = a->node;
    hd->check = slab_hdr_check(hd);
    pm_persist(h, hd, hbytes, PM_META);
    pm_numa_slab_created(h, v->page);
    pm_vslab *s = pm_slab_vol_new(h, v, hd);
    pthread_mutex_lock(&h->bk_lock);
    if (!s || pm_bk_record(h, v)) {
        pthread_mutex_unlock(&h->bk_lock);
        if (s) { v->slab = NULL; pm_slab_free_vol(h, s); }
        pm_extent_release(h, v);
        pthread_mutex_unlock(&h->large_lock);
        return NULL;
    }
    /* the slab exists once its entry is settled, before any of its blocks
     * can be allocated (recovery replays records only onto known slabs) */
    pm_bk_settle(h);
    pthread_mutex_unlock(&h->bk_lock);
    pthread_mutex_unlock(&h->large_lock);
    s->nfree_v = s->nblocks;
    s->arena = a;
    pm_slab_partial_add(a, s);
    pm_morph_lru_add(a, s);
    return s;
}

/* Return one block to its vslab (caller holds the slab's arena lock). */
static void vslab_put(pm_heap *h, pm_vslab *s, uint32_t idx)
{
    nm_bitmap_clear(s->vbm, idx);
    s->nfree_v++;
    pm_slab_settle(h, s);
}

/* ---- thread caches ---- */

/* Return the buffered remote frees to their slabs, one lock per arena. A
 * buffered block keeps its slab alive (taken in the vslab), so the vslab
 * pointers stay valid until their own put. */
static void rbuf_flush(pm_heap *h, pm_tcache *tc)
{
    while (tc->rn) {
        pm_arena *a = tc->rbuf[0].s->arena;
        unsigned keep = 0;
        pthread_mutex_lock(&a->lock);
        for (unsigned i = 0; i < tc->rn; i++) {
            pm_tcblk k = tc->rbuf[i];
            if (k.s->arena == a) vslab_put(h, k.s, k.idx);
            else tc->rbuf[keep++] = k;
        }
        pthread_mutex_unlock(&a->lock);
        tc->rn = keep;
    }
}

static void tc_drain(pm_heap *h, pm_tcache *tc)
{
    rbuf_flush(h, tc);
    for (unsigned c = 0; c < h->ncls; c++) {
        pm_tcbin *b = &tc->bins[c];
        if (!b->slot) continue;
        for (unsigned st = 0; st < PMALLOC_MAX_STRIPES; st++)
            for (unsigned i = 0; i < b->n[st]; i++) {
                pm_tcblk k = b->slot[st * PM_TC_PER_STRIPE + i];
                pm_arena *a = k.s->arena; /* vslab_put may free the slab */
                pthread_mutex_lock(&a->lock);
                vslab_put(h, k.s, k.idx);
                pthread_mutex_unlock(&a->lock);
            }
        memset(b->n, 0, sizeof b->n);
        free(b->slot);
        b->slot = NULL;
    }
}

static unsigned tc_cap(const pm_heap *h, unsigned cls)
{
    /* per-stripe capacity: fewer cached blocks for big classes */
    size_t bs = h->sc.size[cls];
    unsigned cap = (unsigned)(16384 / bs / (h->interleave ? h->stripes : 1));
    return NM_MAX(1u, NM_MIN(cap, PM_TC_PER_STRIPE));
}

static bool bin_full(const pm_tcbin *b, unsigned S, unsigned cap)
{
    for (unsigned k = 0; k < S; k++)
        if (b->n[k] < cap) return false;
    return true;
}

/* Fill the tcache bin from the arena's partial slabs (arena lock held). Each
 * free block goes to the sub-cache of its stripe. */
static bool tc_fill(pm_heap *h, pm_tcache *tc, unsigned cls)
{
    pm_tcbin *b = &tc->bins[cls];
    pm_arena *a = tc->arena;
    unsigned cap = tc_cap(h, cls), S = h->interleave ? h->stripes : 1;
    bool got = false;
    for (;;) {
        pm_vslab *s = a->partial[cls];
        if (!s && pm_up_sync_arena(h, a, PM_SYNC_DEMAND)) continue; /* on-demand sync (Sec. 6.2) */
        if (!s) s = pm_morph_try(h, tc, a, cls); /* Sec. 5.2: an under-occupied slab of another class first */
        if (!s) s = slab_new(h, a, cls);
        if (!s) return got;
        pm_morph_touch(a, s);
        uint32_t i = s->hint < s->nblocks ? s->hint : 0;
        for (uint32_t step = 0; step < s->nblocks && s->nfree_v > 0; step++, i = i + 1 == s->nblocks ? 0 : i + 1) {
            if (nm_bitmap_test(s->vbm, i)) continue;
            unsigned st = S > 1 ? (i % (s->stripes > 1 ? s->stripes : S)) % S : 0; /* 1-stripe (morphed) slabs: spread */
            if (b->n[st] >= cap) continue;
            nm_bitmap_set(s->vbm, i);
            s->nfree_v--;
            b->slot[st * PM_TC_PER_STRIPE + b->n[st]++] = (pm_tcblk){s, i};
            got = true;
            if (bin_full(b, S, cap)) {
                s->hint = i + 1 == s->nblocks ? 0 : i + 1;
                if (s->nfree_v == 0) pm_slab_partial_del(a, s);
                return true;
            }
        }
        s->hint = i;
        if (s->nfree_v > 0) return got; /* what is left maps to full sub-caches */
        pm_slab_partial_del(a, s);
    }
}

nm_err pm_small_take(pm_heap *h, pm_tcache *tc, unsigned cls, pm_tcblk *out)
{
    pm_tcbin *b = &tc->bins[cls];
    unsigned S = h->interleave ? h->stripes : 1;
    if (!b->slot) {
        b->slot = calloc((size_t)PMALLOC_MAX_STRIPES * PM_TC_PER_STRIPE, sizeof *b->slot);
        if (!b->slot) return nm_fail(NM_ENOMEM, "pmalloc: no host memory for a tcache");
    }
    for (int round = 0; round < 2; round++) {
        for (unsigned k = 0; k < S; k++) {
            unsigned st = (b->cursor + k) % S;
            if (b->n[st]) {
                *out = b->slot[st * PM_TC_PER_STRIPE + --b->n[st]];
                b->cursor = (uint8_t)((st + 1) % S); /* next allocation: next stripe */
                return NM_OK;
            }
        }
        if (round) break;
        pthread_mutex_lock(&tc->arena->lock);
        bool ok = tc_fill(h, tc, cls);
        pthread_mutex_unlock(&tc->arena->lock);
        if (!ok) break;
    }
    /* blocks we freed remotely are not reusable until returned: return them, retry */
    if (tc->rn) {
        rbuf_flush(h, tc);
        return pm_small_take(h, tc, cls, out);
    }
    /* our arena is exhausted: try the others directly (paper Alg. 1, lines 4-14) */
    return pm_small_take_other(h, tc, cls, out);
}

/* One block of class cls straight from arena a's partial slabs (lock held). */
bool pm_small_take_from(pm_heap *h, pm_arena *a, unsigned cls, pm_tcblk *out)
{
    NM_UNUSED(h);
    pm_vslab *s = a->partial[cls];
    if (!s || !s->nfree_v) return false;
    uint32_t idx = (uint32_t)nm_bitmap_find_first_clear(s->vbm, s->nblocks, 0);
    nm_bitmap_set(s->vbm, idx);
    if (--s->nfree_v == 0) pm_slab_partial_del(a, s);
    *out = (pm_tcblk){s, idx};
    return true;
}

void pm_small_put(pm_heap *h, pm_tcache *tc, pm_tcblk k)
{
    pm_tcbin *b = &tc->bins[k.s->cls];
    unsigned S = h->interleave ? h->stripes : 1;
    unsigned st = S > 1 ? (k.idx % (k.s->stripes > 1 ? k.s->stripes : S)) % S : 0;
    if (b->slot && k.s->arena == tc->arena && b->n[st] < tc_cap(h, k.s->cls)) {
        b->slot[st * PM_TC_PER_STRIPE + b->n[st]++] = k;
        return;
    }
    if (k.s->arena != tc->arena) {
        tc->rbuf[tc->rn++] = k;
        if (tc->rn == PM_RBUF) rbuf_flush(h, tc);
        return;
    }
    pm_arena *a = k.s->arena; /* vslab_put may free the slab */
    pthread_mutex_lock(&a->lock);
    vslab_put(h, k.s, k.idx);
    pthread_mutex_unlock(&a->lock);
}

/* ---- entry points for numa.c / remote.c ---- */

pm_vslab *pm_small_slab_new(pm_heap *h, pm_arena *a, unsigned cls) { return slab_new(h, a, cls); }

void pm_small_vslab_put(pm_heap *h, pm_vslab *s, uint32_t idx) { vslab_put(h, s, idx); }

void pm_small_drain(pm_heap *h, pm_tcache *tc) { tc_drain(h, tc); }

/* ---- recovery (single-threaded) ---- */

/* The slab block starting at heap offset `off`, if there is one. */
bool pm_small_block_at(pm_heap *h, uint64_t off, pm_vslab **out, uint32_t *idx)
{
    if (off < h->sb->data_off || off >= h->size) return false;
    pm_veh *v = pm_pmap_get(h, (off - h->sb->data_off) / PM_PAGE);
    if (!v || v->state != PM_VEH_SLAB || !v->slab) return false;
    pm_vslab *s = v->slab;
    if (NM_UNLIKELY(s->mo != NULL) && pm_morph_lookup_old(h, s, off, idx)) { *out = s; return true; } /* a live old block */
    uint64_t start = pm_off(h, s->data);
    if (off < start || (off - start) % s->block_size || (off - start) / s->block_size >= s->nblocks) return false;
    *idx = (uint32_t)((off - start) / s->block_size);
    *out = s;
    return true;
}

/* Give block idx of s the state `alloc` in the bitmap and the vslab; true if
 * that changed it. *w: the bitmap word to write back (NULL: written already). */
bool pm_small_recover_bit(pm_heap *h, pm_vslab *s, uint32_t idx, bool alloc, uint64_t **w)
{
    *w = NULL;
    if (idx & PM_IDX_OLD) { /* old blocks are only freed (and that is written back at once) */
        if (alloc) return false;
        bool was = pm_pbit(s, idx);
        pm_morph_recover_free_old(h, s, idx);
        return was;
    }
    uint64_t m, *pw = pm_pbm_word(s, idx, &m);
    uint64_t old = alloc ? __atomic_fetch_or(pw, m, __ATOMIC_RELAXED) : __atomic_fetch_and(pw, ~m, __ATOMIC_RELAXED);
    *w = pw;
    if (((old & m) != 0) != alloc) s->digest ^= pm_blk_hash(pm_blk_off(h, s, idx));
    if (alloc && !nm_bitmap_test(s->vbm, idx)) {
        nm_bitmap_set(s->vbm, idx);
        s->nfree_v--;
    } else if (!alloc && nm_bitmap_test(s->vbm, idx) && !(s->mo && s->mo->cnt && s->mo->cnt[idx])) { /* a covered block stays taken */
        nm_bitmap_clear(s->vbm, idx);
        s->nfree_v++;
    }
    pm_slab_fix_lists(h, s);
    return ((old & m) != 0) != alloc;
}

/* ---- bitmap checksums (issue 16) ---- */

/* The digest of the blocks allocated in s's bitmap(s), from the bits. */
uint64_t pm_slab_digest_bits(pm_heap *h, pm_vslab *s)
{
    uint64_t d = 0;
    for (uint32_t i = 0; i < s->nblocks; i++)
        if (pm_pbit(s, i)) d ^= pm_blk_hash(pm_blk_off(h, s, i));
    if (s->mo)
        for (uint32_t i = 0; i < s->mo->old.nblocks; i++)
            if (pm_pbit(s, i | PM_IDX_OLD)) d ^= pm_blk_hash(pm_blk_off(h, s, i | PM_IDX_OLD));
    return d;
}

/* Store s's digest in its header (line 0) and flush it; the caller drains. */
void pm_slab_digest_write(pm_heap *h, pm_vslab *s)
{
    uint64_t *w = PM_SLAB_DIGEST(s->hdr);
    __atomic_store_n(w, __atomic_load_n(&s->digest, __ATOMIC_RELAXED), __ATOMIC_RELAXED);
    pm_flush(h, w, sizeof *w, PM_META);
}

/* XOR d into s's checksum in its header and flush it; the caller drains.
 * LOG at run time: the toggles of a checkpoint's operations and of an
 * owner-side NUMA synchronisation (concurrent XORs commute). */
void pm_slab_digest_toggle(pm_heap *h, pm_vslab *s, uint64_t d)
{
    uint64_t *w = PM_SLAB_DIGEST(s->hdr);
    if (d) __atomic_fetch_xor(w, d, __ATOMIC_RELAXED);
    pm_flush(h, w, sizeof *w, PM_META);
}

/* Every slab's digest written where the stored one differs (close of a GC
 * heap, end of a recovery: one read per slab, a flush only where needed); drained. */
void pm_slab_digest_write_all(pm_heap *h)
{
    for (uint64_t p = 0; p < h->data_pages;) {
        pm_veh *v = h->pmap[p];
        if (v->state == PM_VEH_SLAB && v->slab && *PM_SLAB_DIGEST(v->slab->hdr) != __atomic_load_n(&v->slab->digest, __ATOMIC_RELAXED))
            pm_slab_digest_write(h, v->slab);
        p += v->npages;
    }
    pm_drain(h);
}

/* Algorithm 1, lines 4-14: our arena could not fill the tcache (its range is
 * exhausted). Other arenas of our node first, then the arenas of the other
 * nodes, each after applying its pending remote frees; then a new slab in a
 * remote node's arena. Blocks from here bypass the tcache (Sec. 6.4), so the
 * cache only ever holds local blocks. */
nm_err pm_small_take_other(pm_heap *h, pm_tcache *tc, unsigned cls, pm_tcblk *out)
{
    pm_numa *n = h->numa;
    unsigned nn = n->nnodes > 1 ? n->nnodes : 1, per = n->nnodes > 1 ? n->per_node : h->narenas;
    unsigned order[PM_NUMA_MAX_NODES];
    order[0] = 0;
    if (nn > 1) pm_numa_node_order(h, tc->node, order);
    for (unsigned d = 0; d < nn; d++) {
        unsigned node = order[d];
        for (unsigned i = 0; i < per; i++) {
            pm_arena *a = &h->arenas[node * per + i];
            if (a == tc->arena) continue;
            pthread_mutex_lock(&a->lock);
            pm_up_sync_arena(h, a, PM_SYNC_DEMAND);
            bool ok = pm_small_take_from(h, a, cls, out);
            pthread_mutex_unlock(&a->lock);
            if (ok) {
                if (d) pm_count(&n->c_remote_allocs, 1);
                return NM_OK;
            }
        }
    }
    for (unsigned d = 1; d < nn; d++) {
        pm_arena *a = &h->arenas[order[d] * per];
        pthread_mutex_lock(&a->lock);
        bool ok = pm_small_slab_new(h, a, cls) != NULL && pm_small_take_from(h, a, cls, out);
        pthread_mutex_unlock(&a->lock);
        if (ok) {
            pm_count(&n->c_remote_allocs, 1);
            return NM_OK;
        }
    }
    if (nn > 1) { /* no node range has room for a slab: a slab for our arena wherever it fits */
        pm_arena *a = tc->arena;
        pthread_mutex_lock(&a->lock);
        pm_numa_place_anywhere = true;
        bool ok = pm_small_slab_new(h, a, cls) != NULL && pm_small_take_from(h, a, cls, out);
        pm_numa_place_anywhere = false;
        pthread_mutex_unlock(&a->lock);
        if (ok) return NM_OK;
    }
    return nm_fail(NM_ENOMEM, "pmalloc: heap exhausted for a %zu-byte block", h->sc.size[cls]);
}
