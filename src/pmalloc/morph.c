/* Slab morphing (paper Sec. 5.2): a slab whose occupancy is below SU may take
 * another size class while its remaining ("old") blocks live on.
 *
 * When: an arena needs a new slab for class c (its partial list for c is
 * empty). Before taking fresh space from the large allocator, tc_fill calls
 * pm_morph_try, which scans the arena's LRU list of slabs from the least
 * recently allocated-from one and morphs the first candidate:
 *  - another class, no old blocks of an earlier morph still live (a slab_in
 *    cannot morph again, as in the paper), occupancy below SU, and not the
 *    first partial slab of its class (the one that class allocates from next);
 *  - every taken block is durably allocated: none sits in a tcache or a
 *    remote-free buffer, none is in flight (the calling thread's own cached
 *    blocks of the slab are returned first); frees that locate blocks without
 *    the arena lock are excluded by the busy/morphing handshake;
 *  - the new header fits (at most PM_MORPH_MAX_HDR) and does not overlap a
 *    live old block.
 *
 * Layout: line 0 is never rewritten; its 8-byte morph word names the line of
 * the active header image (pm_morph_img: current and old geometry). The old
 * bitmap stays where it was, so the old blocks keep their bits, the WAL
 * protocol and recovery apply to them unchanged. The new bitmap and image go
 * to free lines: before the old bitmap if they fit there (a slab morphed
 * before), else after the old bitmap/image; the data area never moves down.
 *
 * Crash protocol (shadow write + one atomic commit; the paper's step flag):
 *  1. zero the new bitmap lines, persist (GC: persist the old bitmap too);
 *  2. write the new image (with checksum) into its line, persist;
 *  3. store the morph word (line, generation, checksum) with one 8-byte
 *     atomic store, persist: the commit.
 * A crash before 3 leaves the old image active and garbage in free lines, so
 * there is nothing to undo; after 3 there is nothing to redo.
 *
 * A block offset names an old block when it lies on the old grid and its old
 * bit is set; otherwise it is a new block. A new block overlapping a live old
 * block is never handed out: cnt[j] (the paper's cnt_block) counts the live
 * old blocks overlapping new block j, and such blocks stay set in the DRAM
 * bitmap. Old blocks are freed straight into the slab (no tcache); when the
 * last one goes, the slab is a regular slab again (in the morphed layout). */
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "nearmem/common/bitmap.h"
#include "pm_slabs.h"

#define SLAB PMALLOC_SLAB_SIZE
#define LRU_SCAN 256u /* candidates examined per attempt */

static inline char *slab_base(const pm_vslab *s) { return (char *)s->hdr; }
static inline uint32_t lines_for(uint32_t n, uint32_t S) { return ((n + 512u * S - 1) / (512u * S)) * S; }
static uint64_t img_check(const pm_morph_img *m) { return XXH64(m, offsetof(pm_morph_img, check), 0x6d6f7270); }

static uint64_t word_make(uint32_t line, uint32_t gen, uint64_t slab_off)
{
    uint64_t w[2] = {(uint64_t)line | (uint64_t)(gen & 0xffffu) << 16, slab_off};
    return w[0] | (uint64_t)(uint32_t)XXH64(w, sizeof w, 0x77) << 32;
}

unsigned pmalloc_morph_step(const pmalloc_heap *hd)
{
    PM_ENTER(h, hd, 0);
    return __atomic_load_n(&h->morph_step, __ATOMIC_RELAXED);
}

/* ---- geometry ---- */

static void geo_of(const pm_vslab *s, pm_geo *g)
{
    if (s->mo) { *g = s->mo->cur; return; }
    const pm_slab_hdr *hd = s->hdr;
    *g = (pm_geo){hd->cls, hd->stripes, (uint16_t)hd->nblocks, (uint16_t)hd->data_off, 1, (uint16_t)hd->bm_lines, 0};
}

static void set_cur(pm_heap *h, pm_vslab *s, const pm_geo *g)
{
    s->cls = g->cls;
    s->block_size = (uint32_t)h->sc.size[g->cls];
    s->nblocks = g->nblocks;
    s->stripes = g->stripes;
    s->pbm = (uint64_t *)(slab_base(s) + (size_t)g->bm_line * PM_LINE);
    s->data = slab_base(s) + g->data_off;
    s->hint = 0;
}

static uint32_t geo_end(const pm_geo *g) { return g->img_line ? g->img_line + 1u : (uint32_t)g->bm_line + g->bm_lines; }

/* Place the new bitmap + image line for class cls with S stripes after
 * geometry og (the slab's current one). Until the commit, the active image
 * still names og and og's own old geometry (pg, if og is a morphed one), and
 * recovery reads both bitmaps: so the new lines avoid both. They go before
 * both when they fit there (lines freed by an earlier morph), else after both.
 * The data area starts no lower than og's. */
static bool place_s(pm_heap *h, const pm_geo *og, const pm_geo *pg, unsigned cls, uint32_t S, pm_geo *ng)
{
    uint32_t bs = (uint32_t)h->sc.size[cls], E = og->data_off;
    uint32_t after = geo_end(og), below = og->bm_line;
    if (pg) {
        after = NM_MAX(after, geo_end(pg));
        below = NM_MIN(below, (uint32_t)pg->bm_line);
    }
    for (uint32_t n = (SLAB - E) / bs; n >= 1; n--) {
        uint32_t nbl = lines_for(n, S), start, doff;
        if (1 + nbl + 1 <= below) {
            start = 1;
            doff = E;
        } else {
            start = after;
            doff = NM_MAX(E, (start + nbl + 1) * PM_LINE);
        }
        if (doff > PM_MORPH_MAX_HDR) return false;
        if ((uint64_t)doff + (uint64_t)n * bs <= SLAB) {
            *ng = (pm_geo){(uint16_t)cls, (uint16_t)S, (uint16_t)n, (uint16_t)doff, (uint16_t)start, (uint16_t)nbl, (uint16_t)(start + nbl)};
            return true;
        }
    }
    return false;
}

/* The most stripes whose bitmap fits into the header's free lines, so that the
 * new header covers no block of the old geometry (with 6 stripes a bitmap
 * takes at least 6 lines; a regular slab has 2 free lines). Fewer stripes
 * mean more reflushes on this slab's bitmap (Sec. 5.1); a header that covers
 * old blocks needs them all free, which under-occupied slabs often are not.
 * If no stripe count fits, the heap's stripe count with a larger header. */
static bool place(pm_heap *h, const pm_geo *og, const pm_geo *pg, unsigned cls, pm_geo *ng)
{
    for (uint32_t S = h->stripes; S >= 1; S--)
        if (place_s(h, og, pg, cls, S, ng) && ng->data_off == og->data_off) return true;
    return place_s(h, og, pg, cls, h->stripes, ng);
}

/* New blocks [*j0, *j1] overlapped by old block i; false if none (the old
 * block lies in the tail behind the last new block). */
static bool overlap(const pm_vslab *s, uint32_t i, uint32_t *j0, uint32_t *j1)
{
    const pm_morph *mo = s->mo;
    uint64_t o0 = mo->old.data_off + (uint64_t)i * mo->obs, o1 = o0 + mo->obs, cd = mo->cur.data_off;
    if (o1 <= cd) return false;
    uint64_t a = o0 > cd ? (o0 - cd) / s->block_size : 0, b = (o1 - 1 - cd) / s->block_size;
    if (a >= s->nblocks) return false;
    *j0 = (uint32_t)a;
    *j1 = (uint32_t)NM_MIN(b, (uint64_t)s->nblocks - 1);
    return true;
}

/* Block or unblock the new blocks that old block i overlaps (cnt_block). */
static void cover(pm_vslab *s, uint32_t i, bool add)
{
    uint32_t j0, j1;
    if (!overlap(s, i, &j0, &j1)) return;
    for (uint32_t j = j0; j <= j1; j++) {
        if (add) {
            if (s->mo->cnt[j]++ == 0) {
                nm_bitmap_set(s->vbm, j);
                s->nfree_v--;
            }
        } else if (--s->mo->cnt[j] == 0) {
            nm_bitmap_clear(s->vbm, j);
            s->nfree_v++;
        }
    }
}

static uint32_t count_bits(const uint64_t *bm, uint32_t lines)
{
    uint32_t n = 0;
    /* acquire: pairs with the release in pbit_update, so a malloc that set its
     * bit has finished reading the geometry before a morph changes it */
    for (uint32_t k = 0; k < lines * 8u; k++) n += (uint32_t)__builtin_popcountll(__atomic_load_n(&bm[k], __ATOMIC_ACQUIRE));
    return n;
}

/* ---- the morph ---- */

/* Give the calling thread's cached blocks of s back to it (arena lock held). */
static void tc_return(pm_heap *h, pm_tcache *tc, pm_vslab *s)
{
    pm_tcbin *b = &tc->bins[s->cls];
    if (!b->slot) return;
    for (unsigned st = 0; st < PMALLOC_MAX_STRIPES; st++)
        for (unsigned i = 0; i < b->n[st];) {
            pm_tcblk *k = &b->slot[st * PM_TC_PER_STRIPE + i];
            if (k->s != s) { i++; continue; }
            nm_bitmap_clear(s->vbm, k->idx);
            s->nfree_v++;
            *k = b->slot[st * PM_TC_PER_STRIPE + --b->n[st]];
        }
    pm_slab_fix_lists(h, s);
}

static bool morph(pm_heap *h, pm_arena *a, pm_vslab *s, unsigned cls)
{
    __atomic_store_n(&s->morphing, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&s->busy, __ATOMIC_SEQ_CST)) goto abort; /* a free or lookup is on it */
    pm_rslab *rs = __atomic_load_n(&s->rs, __ATOMIC_ACQUIRE);
    if (rs) { /* NUMA: remote frees recorded and not yet synchronised name blocks of this geometry */
        pthread_mutex_lock(&rs->lock);
        bool pend = rs->nshadow || rs->queued;
        pthread_mutex_unlock(&rs->lock);
        if (pend) goto abort;
    }
    pm_geo og, ng;
    geo_of(s, &og);
    uint32_t live = count_bits(s->pbm, og.bm_lines);
    if (live != s->nblocks - s->nfree_v) goto abort; /* blocks cached, buffered or in flight */
    for (uint32_t i = 0; i < s->nblocks; i++) /* and block by block (cheap next to a morph) */
        if (nm_bitmap_test(s->vbm, i) != pm_pbit(s, i)) goto abort;
    if (!place(h, &og, s->mo ? &s->mo->old : NULL, cls, &ng)) goto abort;
    for (uint32_t i = 0; i < s->nblocks && og.data_off + (uint64_t)i * s->block_size < ng.data_off; i++)
        if (pm_pbit(s, i)) goto abort; /* the new header would cover a live block */
    /* LOG: the records of this slab's blocks settled first: once the morph
     * commits, an offset means what the new geometry (and the old bits) say,
     * and recovery must not replay an older record onto it. Nothing touches
     * the slab meanwhile (`morphing`, and no block of it is cached or in flight). */
    if (h->model == PMALLOC_LOG && pm_up_checkpoint(h, 0) != NM_OK) goto abort;
    uint64_t *nvbm = calloc(nm_bitmap_words(ng.nblocks), sizeof(uint64_t));
    uint16_t *cnt = live ? calloc(ng.nblocks, sizeof(uint16_t)) : NULL;
    uint64_t *nshadow = rs ? calloc(nm_bitmap_words(ng.nblocks), sizeof(uint64_t)) : NULL; /* NUMA shadow bitmap, new size */
    pm_morph *mo = s->mo ? s->mo : calloc(1, sizeof *mo);
    if (!nvbm || (live && !cnt) || (rs && !nshadow) || !mo) {
        free(nvbm);
        free(cnt);
        free(nshadow);
        if (mo != s->mo) free(mo);
        goto abort;
    }
    char *base = slab_base(s);
    uint64_t soff = pm_off(h, base);
    /* 1: the new bitmap, empty (GC: the old bits become exact in the image) */
    __atomic_store_n(&h->morph_step, 1, __ATOMIC_RELAXED);
    memset(base + (size_t)ng.bm_line * PM_LINE, 0, (size_t)ng.bm_lines * PM_LINE);
    pm_flush(h, base + (size_t)ng.bm_line * PM_LINE, (size_t)ng.bm_lines * PM_LINE, PM_META);
    if (h->model == PMALLOC_GC) pm_flush(h, s->pbm, (size_t)og.bm_lines * PM_LINE, PM_META);
    pm_drain(h);
    /* 2: the new header image */
    __atomic_store_n(&h->morph_step, 2, __ATOMIC_RELAXED);
    uint32_t gen = (s->mo ? s->mo->gen : 0) + 1;
    pm_morph_img *im = (pm_morph_img *)(base + (size_t)ng.img_line * PM_LINE);
    memset(im, 0, sizeof *im);
    im->magic = PM_MORPH_MAGIC;
    im->gen = gen;
    im->cur = ng;
    im->old = og;
    im->slab_off = soff;
    uint64_t ohash = 0;
    for (uint32_t i = 0; i < og.nblocks; i++)
        if (pm_pbit(s, i)) ohash ^= pm_blk_hash(soff + og.data_off + (uint64_t)i * s->block_size);
    im->odigest = ohash ^ __atomic_load_n(PM_SLAB_OLD_FREED(s->hdr), __ATOMIC_RELAXED);
    im->check = img_check(im);
    pm_persist(h, im, sizeof *im, PM_META);
    /* 3: commit; walk and check read geometries under large_lock */
    __atomic_store_n(&h->morph_step, 3, __ATOMIC_RELAXED);
    pthread_mutex_lock(&h->large_lock);
    __atomic_store_n(PM_MORPH_WORD(s->hdr), word_make(ng.img_line, gen, soff), __ATOMIC_RELAXED);
    pm_persist(h, PM_MORPH_WORD(s->hdr), sizeof(uint64_t), PM_META);
    if (!s->hdr->morph_flag) { /* after the word: a flag without a word is damage */
        s->hdr->morph_flag = 1;
        pm_persist(h, s->hdr, 8, PM_META);
    }
    pm_slab_partial_del(a, s); /* from the old class's list */
    mo->old = og;
    mo->cur = ng;
    mo->gen = gen;
    mo->obs = s->block_size;
    mo->odata = s->data;
    mo->opbm = s->pbm;
    free(mo->cnt);
    mo->cnt = cnt;
    __atomic_store_n(&mo->nold, live, __ATOMIC_RELAXED);
    s->mo = mo;
    free(s->vbm);
    s->vbm = nvbm;
    if (rs) { /* its shadow bitmap (all clear: nothing pending) takes the new geometry's size */
        pthread_mutex_lock(&rs->lock);
        uint64_t *old = rs->shadow;
        rs->shadow = nshadow;
        pthread_mutex_unlock(&rs->lock);
        free(old);
    }
    set_cur(h, s, &ng);
    s->nfree_v = ng.nblocks;
    for (uint32_t i = 0; i < og.nblocks && live; i++)
        if (pm_pbit(s, i | PM_IDX_OLD)) cover(s, i, true);
    pthread_mutex_unlock(&h->large_lock);
    __atomic_store_n(&h->morph_step, 0, __ATOMIC_RELAXED);
    __atomic_fetch_add(&h->c_morphs, 1, __ATOMIC_RELAXED);
    if (live) {
        __atomic_fetch_add(&h->morph_slabs_in, 1, __ATOMIC_RELAXED);
        __atomic_fetch_add(&h->morph_old_live, live, __ATOMIC_RELAXED);
        pm_morph_lru_del(a, s); /* a slab_in cannot morph again */
    }
    pm_slab_fix_lists(h, s);
    __atomic_store_n(&s->morphing, 0, __ATOMIC_SEQ_CST);
    return true;
abort:
    __atomic_store_n(&s->morphing, 0, __ATOMIC_SEQ_CST);
    return false;
}

pm_vslab *pm_morph_try(pm_heap *h, pm_tcache *tc, pm_arena *a, unsigned cls)
{
    if (!h->morph_su) return NULL;
    unsigned scanned = 0;
    for (pm_vslab *s = a->lru_head, *nx; s && scanned < LRU_SCAN; s = nx, scanned++) {
        nx = s->lru_next;
        if (s->cls == cls || (s->mo && __atomic_load_n(&s->mo->nold, __ATOMIC_RELAXED))) continue;
        /* the first partial slab of its class is the one that class allocates from next:
         * morphing it would only make that class take a new slab (thrashing when a
         * program uses many classes at once, each with one young, sparse slab) */
        bool current = h->morph_su < 100 && a->partial[s->cls] == s; /* SU 100: anything goes (tests) */
        if (!current && (uint64_t)(s->nblocks - s->nfree_v) * 100 < (uint64_t)h->morph_su * s->nblocks) {
            if (tc && tc->arena == a) tc_return(h, tc, s);
            if (morph(h, a, s, cls)) return s;
        }
        /* examined and refused: to the tail, so that the next scan looks at
         * others instead of the same refused slabs at the head */
        pm_morph_touch(a, s);
    }
    return NULL;
}

/* ---- old blocks ---- */

/* Old block i is gone (its bit is durably clear): unblock what it covered. */
static void old_gone(pm_heap *h, pm_vslab *s, uint32_t i)
{
    pm_morph *mo = s->mo;
    cover(s, i, false);
    uint32_t left = __atomic_sub_fetch(&mo->nold, 1, __ATOMIC_RELAXED);
    __atomic_fetch_sub(&h->morph_old_live, 1, __ATOMIC_RELAXED);
    if (left == 0) { /* slab_in -> slab_after: a regular slab again, and a morph candidate */
        free(mo->cnt);
        mo->cnt = NULL;
        __atomic_fetch_sub(&h->morph_slabs_in, 1, __ATOMIC_RELAXED);
        pm_morph_lru_add(s->arena, s);
    }
}

void pm_morph_put_old(pm_heap *h, pm_vslab *s, uint32_t idx)
{
    pm_arena *a = s->arena;
    pthread_mutex_lock(&a->lock);
    old_gone(h, s, idx & ~PM_IDX_OLD);
    pm_slab_settle(h, s); /* may release the slab */
    pthread_mutex_unlock(&a->lock);
}

/* GC: the old bits are exact (written back at every change) and a crash does
 * not rebuild them from a log, so they are checked against the image's
 * odigest ^ PM_SLAB_OLD_FREED, and that word is written back before the bits
 * it covers: after a crash, old blocks it counts as freed may still be set
 * (their free was in flight; the mark frees them again), never the reverse. */
/* The old blocks set in the old bitmap of geometry og (or in `keep`), as
 * pm_blk_hash values: XORed (out == NULL) or listed in out. */
static uint64_t old_hash(pm_heap *h, pm_slab_hdr *hd, const pm_geo *og, const uint64_t *keep, uint64_t *out, size_t *nout)
{
    uint32_t obs = (uint32_t)h->sc.size[og->cls];
    pm_vslab tmp = {.hdr = hd, .pbm = (uint64_t *)((char *)hd + (size_t)og->bm_line * PM_LINE), .stripes = og->stripes};
    uint64_t x = 0, base = pm_off(h, hd);
    size_t k = 0;
    for (uint32_t i = 0; i < og->nblocks; i++)
        if (keep ? nm_bitmap_test(keep, i) : pm_pbit(&tmp, i)) {
            uint64_t v = pm_blk_hash(base + og->data_off + (uint64_t)i * obs);
            if (out) out[k++] = v;
            x ^= v;
        }
    if (nout) *nout = k;
    return x;
}

void pm_morph_gc_freeing(pm_heap *h, pm_vslab *s, uint32_t idx)
{
    uint64_t *f = PM_SLAB_OLD_FREED(s->hdr);
    __atomic_fetch_xor(f, pm_blk_hash(pm_blk_off(h, s, idx)), __ATOMIC_RELAXED);
    pm_persist(h, f, sizeof *f, PM_META);
}

void pm_morph_recover_free_old(pm_heap *h, pm_vslab *s, uint32_t idx)
{
    uint64_t m, *w = pm_pbm_word(s, idx, &m);
    if (!(__atomic_fetch_and(w, ~m, __ATOMIC_RELAXED) & m)) return;
    s->digest ^= pm_blk_hash(pm_blk_off(h, s, idx));
    pm_flush(h, w, sizeof *w, PM_META);
    old_gone(h, s, idx & ~PM_IDX_OLD);
    pm_slab_fix_lists(h, s);
}

bool pm_morph_lookup_old(pm_heap *h, pm_vslab *s, uint64_t off, uint32_t *idx)
{
    pm_morph *mo = s->mo;
    if (!__atomic_load_n(&mo->nold, __ATOMIC_RELAXED)) return false;
    uint64_t start = pm_off(h, mo->odata);
    if (off < start || (off - start) % mo->obs || (off - start) / mo->obs >= mo->old.nblocks) return false;
    uint32_t i = (uint32_t)((off - start) / mo->obs) | PM_IDX_OLD;
    if (!pm_pbit(s, i)) return false;
    *idx = i;
    return true;
}

bool pm_morph_loc_live(pm_heap *h, pm_vslab *s, uint64_t off)
{
    pm_morph *mo = s->mo;
    if (!__atomic_load_n(&mo->nold, __ATOMIC_RELAXED)) return false;
    uint64_t start = pm_off(h, mo->odata);
    if (off < start || (off - start) / mo->obs >= mo->old.nblocks) return false;
    return pm_pbit(s, (uint32_t)((off - start) / mo->obs) | PM_IDX_OLD);
}

void pm_morph_count(const pm_vslab *s, uint64_t *live, uint64_t *objs)
{
    for (uint32_t i = 0; i < s->mo->old.nblocks; i++)
        if (pm_pbit(s, i | PM_IDX_OLD)) {
            *live += s->mo->obs;
            (*objs)++;
        }
}

int pm_morph_walk(pm_heap *h, pm_vslab *s, pmalloc_walk_fn fn, void *arg)
{
    pm_morph *mo = s->mo;
    uint32_t i = 0, j = 0, on = __atomic_load_n(&mo->nold, __ATOMIC_RELAXED) ? mo->old.nblocks : 0;
    uint64_t ob = pm_off(h, mo->odata), nb = pm_off(h, s->data);
    for (;;) {
        while (i < on && !pm_pbit(s, i | PM_IDX_OLD)) i++;
        while (j < s->nblocks && (!pm_pbit(s, j) || pm_numa_shadowed(s, j))) j++; /* shadowed: freed remotely */
        if (i >= on && j >= s->nblocks) return 0;
        uint64_t po = i < on ? ob + (uint64_t)i * mo->obs : UINT64_MAX, pn = j < s->nblocks ? nb + (uint64_t)j * s->block_size : UINT64_MAX;
        int stop = po < pn ? fn(arg, pm_ptr(h, po), mo->obs) : fn(arg, pm_ptr(h, pn), s->block_size);
        if (stop) return stop;
        if (po < pn) i++;
        else j++;
    }
}

/* ---- open: rebuild the vslab of a morphed slab ---- */

static bool geo_valid(pm_heap *h, const pm_geo *g)
{
    if (g->cls >= h->ncls || !g->stripes || g->stripes > PMALLOC_MAX_STRIPES || !g->nblocks || g->data_off % PM_LINE) return false;
    uint32_t bs = (uint32_t)h->sc.size[g->cls];
    if ((uint64_t)g->data_off + (uint64_t)g->nblocks * bs > SLAB || g->bm_lines != lines_for(g->nblocks, g->stripes)) return false;
    if (g->img_line == 0) { /* regular: the layout of a new slab */
        uint32_t nb, bl, doff;
        pm_slab_layout(bs, g->stripes, &nb, &bl, &doff);
        return g->bm_line == 1 && g->nblocks == nb && g->bm_lines == bl && g->data_off == doff;
    }
    return g->bm_line >= 1 && g->img_line == g->bm_line + g->bm_lines && (g->img_line + 1) * PM_LINE <= g->data_off &&
           g->data_off <= PM_MORPH_MAX_HDR;
}

static bool lines_meet(uint32_t a0, uint32_t a1, uint32_t b0, uint32_t b1) { return a0 < b1 && b0 < a1; }

nm_err pm_morph_adopt(pm_heap *h, pm_veh *v, pm_vslab *unused)
{
    NM_UNUSED(unused);
    pm_slab_hdr *hd = (pm_slab_hdr *)(h->data + v->page * PM_PAGE);
    char *base = (char *)hd;
    uint64_t w = *PM_MORPH_WORD(hd), soff = pm_off(h, base);
    uint32_t L = (uint32_t)(w & 0xffffu), gen = (uint32_t)(w >> 16) & 0xffffu;
    const pm_morph_img *im = (const pm_morph_img *)(base + (size_t)L * PM_LINE);
    if (w != word_make(L, gen, soff) || L == 0 || L * PM_LINE >= PM_MORPH_MAX_HDR || im->magic != PM_MORPH_MAGIC ||
        im->check != img_check(im) || im->slab_off != soff || (im->gen & 0xffffu) != gen || im->cur.img_line != L)
        return nm_fail(NM_ECORRUPT, "pmalloc: morphed slab at data page %llu has a bad morph word or header image", (unsigned long long)v->page);
    const pm_geo *cg = &im->cur, *og = &im->old;
    bool old_is_line0 = og->img_line == 0;
    if (h->model == PMALLOC_GC && geo_valid(h, og)) {
        uint64_t t = old_hash(h, hd, og, NULL, NULL, NULL) ^ im->odigest ^ *PM_SLAB_OLD_FREED(hd);
        if (t) {
            bool ok = false;
            if (h->sb->state != PM_STATE_CLEAN) { /* the one free in flight: its block is still set; finish it */
                pm_vslab tmp = {.hdr = hd, .pbm = (uint64_t *)(base + (size_t)og->bm_line * PM_LINE), .stripes = og->stripes};
                uint32_t obs = (uint32_t)h->sc.size[og->cls];
                for (uint32_t i = 0; i < og->nblocks && !ok; i++)
                    if (pm_pbit(&tmp, i) && pm_blk_hash(soff + og->data_off + (uint64_t)i * obs) == t) {
                        uint64_t m, *w = pm_pbm_word(&tmp, i, &m);
                        __atomic_fetch_and(w, ~m, __ATOMIC_RELAXED);
                        pm_persist(h, w, sizeof *w, PM_META);
                        ok = true;
                    }
            }
            if (!ok)
                return nm_fail(NM_ECORRUPT, "pmalloc: morphed slab at data page %llu: its old bitmap does not match its checksum",
                               (unsigned long long)v->page);
        }
    }
    if (!geo_valid(h, cg) || cg->img_line == 0 || !geo_valid(h, og) || cg->data_off < og->data_off ||
        (old_is_line0 && (og->cls != hd->cls || og->stripes != hd->stripes)) ||
        lines_meet(cg->bm_line, cg->img_line + 1, og->bm_line, og->bm_line + og->bm_lines) ||
        (!old_is_line0 && lines_meet(cg->bm_line, cg->img_line + 1, og->img_line, og->img_line + 1)))
        return nm_fail(NM_ECORRUPT, "pmalloc: morphed slab at data page %llu has an inconsistent geometry", (unsigned long long)v->page);
    pm_vslab *s = pm_slab_vol_new(h, v, hd);
    pm_morph *mo = calloc(1, sizeof *mo);
    uint64_t *nvbm = calloc(nm_bitmap_words(cg->nblocks), sizeof(uint64_t));
    if (!s || !mo || !nvbm) {
        free(mo);
        free(nvbm);
        if (s) { v->slab = NULL; pm_slab_free_vol(h, s); }
        return nm_fail(NM_ENOMEM, "pmalloc: no host memory for a morphed vslab");
    }
    mo->cur = *cg;
    mo->old = *og;
    mo->gen = im->gen;
    mo->obs = (uint32_t)h->sc.size[og->cls];
    mo->odata = base + og->data_off;
    mo->opbm = (uint64_t *)(base + (size_t)og->bm_line * PM_LINE);
    s->mo = mo;
    free(s->vbm);
    s->vbm = nvbm;
    set_cur(h, s, cg);
    s->nfree_v = s->nblocks;
    nm_err err = NM_OK;
    uint32_t live = 0;
    for (uint32_t i = 0; i < og->nblocks; i++)
        if (pm_pbit(s, i | PM_IDX_OLD)) {
            if (og->data_off + (uint64_t)i * mo->obs < cg->data_off) err = NM_ECORRUPT;
            live++;
        }
    if (live && !err) {
        mo->cnt = calloc(s->nblocks, sizeof(uint16_t));
        if (!mo->cnt) { v->slab = NULL; pm_slab_free_vol(h, s); return nm_fail(NM_ENOMEM, "pmalloc: no host memory for a morphed vslab"); }
        for (uint32_t i = 0; i < og->nblocks; i++)
            if (pm_pbit(s, i | PM_IDX_OLD)) cover(s, i, true);
    }
    mo->nold = live;
    for (uint32_t j = 0; j < s->nblocks && !err; j++)
        if (pm_pbit(s, j)) {
            if (mo->cnt && mo->cnt[j]) err = NM_ECORRUPT; /* a new block on a live old one */
            else { nm_bitmap_set(s->vbm, j); s->nfree_v--; }
        }
    if (err) {
        v->slab = NULL;
        pm_slab_free_vol(h, s);
        return nm_fail(NM_ECORRUPT, "pmalloc: morphed slab at data page %llu has overlapping old and new blocks", (unsigned long long)v->page);
    }
    if (live) {
        __atomic_fetch_add(&h->morph_slabs_in, 1, __ATOMIC_RELAXED);
        __atomic_fetch_add(&h->morph_old_live, live, __ATOMIC_RELAXED);
    } else {
        pm_morph_lru_add(s->arena, s);
    }
    pm_slab_fix_lists(h, s);
    return NM_OK;
}

/* ---- pmalloc_check ---- */

nm_err pm_morph_check(pm_heap *h, pm_vslab *s, uint64_t *live, uint64_t *objs)
{
    pm_morph *mo = s->mo;
    char *base = slab_base(s);
    uint64_t w = *PM_MORPH_WORD(s->hdr);
    const pm_morph_img *im = (const pm_morph_img *)(base + (size_t)mo->cur.img_line * PM_LINE);
    if (w != word_make(mo->cur.img_line, mo->gen, pm_off(h, base)) || im->magic != PM_MORPH_MAGIC || im->check != img_check(im) ||
        memcmp(&im->cur, &mo->cur, sizeof mo->cur) || memcmp(&im->old, &mo->old, sizeof mo->old))
        return nm_fail(NM_ECORRUPT, "pmalloc check: morphed slab %#llx: header image does not match the vslab", (unsigned long long)pm_off(h, base));
    if (s->cls != mo->cur.cls || s->nblocks != mo->cur.nblocks || s->data != base + mo->cur.data_off)
        return nm_fail(NM_ECORRUPT, "pmalloc check: morphed slab %#llx: vslab geometry differs from its header", (unsigned long long)pm_off(h, base));
    uint16_t *cnt = calloc(s->nblocks, sizeof *cnt);
    if (!cnt) return nm_fail(NM_ENOMEM, "pmalloc check: host memory");
    nm_err err = NM_OK;
    uint32_t nold = 0, taken = 0;
    for (uint32_t i = 0; i < mo->old.nblocks; i++) {
        if (!pm_pbit(s, i | PM_IDX_OLD)) continue;
        nold++;
        *live += mo->obs;
        (*objs)++;
        uint32_t j0, j1;
        if (mo->old.data_off + (uint64_t)i * mo->obs < mo->cur.data_off) err = nm_fail(NM_ECORRUPT, "pmalloc check: live old block %u under the new header", i);
        if (overlap(s, i, &j0, &j1))
            for (uint32_t j = j0; j <= j1; j++) cnt[j]++;
    }
    if (!err && nold != __atomic_load_n(&mo->nold, __ATOMIC_RELAXED))
        err = nm_fail(NM_ECORRUPT, "pmalloc check: morphed slab has %u live old blocks, vslab says %u", nold, mo->nold);
    for (uint32_t j = 0; j < s->nblocks && !err; j++) {
        bool pb = pm_pbit(s, j), vb = nm_bitmap_test(s->vbm, j);
        uint16_t c = mo->cnt ? mo->cnt[j] : 0;
        if (c != cnt[j]) err = nm_fail(NM_ECORRUPT, "pmalloc check: new block %u: cnt_block %u, old blocks say %u", j, c, cnt[j]);
        else if (pb && c) err = nm_fail(NM_ECORRUPT, "pmalloc check: new block %u is allocated over a live old block", j);
        else if ((pb || c) && !vb) err = nm_fail(NM_ECORRUPT, "pmalloc check: new block %u allocated or covered but free in the vslab", j);
        taken += vb;
        if (pb && !pm_numa_shadowed(s, j)) { *live += s->block_size; (*objs)++; }
    }
    if (!err && taken + s->nfree_v != s->nblocks)
        err = nm_fail(NM_ECORRUPT, "pmalloc check: morphed vslab free count %u, bitmap says %u", s->nfree_v, s->nblocks - taken);
    free(cnt);
    return err;
}

/* ---- GC recovery: mark and rewrite both bitmaps ---- */

/* Called after the new bitmap was cleared. The persisted old bits are exact
 * at run time (morph and old frees persist them), so they are the candidates;
 * a new block overlapping a candidate was never handed out and stays covered.
 * The old bitmap is not cleared here (unlike the new one, it cannot be
 * rebuilt without its candidates): gc_end clears the unmarked bits only, so a
 * crash during recovery leaves a superset and the next recovery redoes it. */
nm_err pm_morph_gc_begin(pm_heap *h, pm_vslab *s, uint64_t *before)
{
    pm_morph *mo = s->mo;
    uint32_t was = __atomic_load_n(&mo->nold, __ATOMIC_RELAXED), n = 0;
    size_t words = nm_bitmap_words(mo->old.nblocks);
    free(mo->gcold);
    mo->gcold = calloc(2 * words, sizeof(uint64_t)); /* candidates, then marks */
    if (!mo->gcold) return nm_fail(NM_ENOMEM, "pmalloc: GC of a morphed slab: host memory");
    for (uint32_t i = 0; i < mo->old.nblocks; i++)
        if (pm_pbit(s, i | PM_IDX_OLD)) { nm_bitmap_set(mo->gcold, i); n++; }
    *before += n;
    if (mo->cnt) memset(mo->cnt, 0, s->nblocks * sizeof *mo->cnt);
    else if (n && !(mo->cnt = calloc(s->nblocks, sizeof *mo->cnt))) return nm_fail(NM_ENOMEM, "pmalloc: GC of a morphed slab: host memory");
    for (uint32_t i = 0; i < mo->old.nblocks; i++)
        if (nm_bitmap_test(mo->gcold, i)) cover(s, i, true);
    mo->nold = 0;
    __atomic_fetch_sub(&h->morph_old_live, was, __ATOMIC_RELAXED);
    if (was) __atomic_fetch_sub(&h->morph_slabs_in, 1, __ATOMIC_RELAXED);
    return NM_OK;
}

bool pm_morph_gc_mark(pm_heap *h, pm_vslab *s, uint64_t w, const uint64_t **push, size_t *words, uint64_t *marked)
{
    pm_morph *mo = s->mo;
    uint64_t start = pm_off(h, mo->odata);
    if (!mo->gcold || w < start || (w - start) / mo->obs >= mo->old.nblocks) return false;
    uint32_t i = (uint32_t)((w - start) / mo->obs);
    if (!nm_bitmap_test(mo->gcold, i)) return false;
    *push = NULL;
    uint64_t *marks = mo->gcold + nm_bitmap_words(mo->old.nblocks);
    if (nm_bitmap_test(marks, i)) return true; /* marked already */
    nm_bitmap_set(marks, i);
    mo->nold++;
    (*marked)++;
    *push = (const uint64_t *)(mo->odata + (size_t)i * mo->obs);
    *words = mo->obs / 8;
    return true;
}

void pm_morph_gc_end(pm_heap *h, pm_vslab *s)
{
    pm_morph *mo = s->mo;
    if (!mo->gcold) return;
    const uint64_t *marks = mo->gcold + nm_bitmap_words(mo->old.nblocks);
    for (uint32_t i = 0; i < mo->old.nblocks; i++)
        if (nm_bitmap_test(mo->gcold, i) && !nm_bitmap_test(marks, i)) { /* unreachable: freed */
            uint64_t m, *wd = pm_pbm_word(s, i | PM_IDX_OLD, &m);
            if (h->model == PMALLOC_GC) { /* one at a time, as at run time: a crash leaves at most one block ahead */
                pm_morph_gc_freeing(h, s, i | PM_IDX_OLD);
                __atomic_fetch_and(wd, ~m, __ATOMIC_RELAXED);
                pm_persist(h, wd, sizeof *wd, PM_META);
            } else {
                __atomic_fetch_and(wd, ~m, __ATOMIC_RELAXED);
            }
            cover(s, i, false);
        }
    free(mo->gcold);
    mo->gcold = NULL;
    pm_flush(h, mo->opbm, (size_t)mo->old.bm_lines * PM_LINE, PM_META);
    if (mo->nold) {
        __atomic_fetch_add(&h->morph_old_live, mo->nold, __ATOMIC_RELAXED);
        __atomic_fetch_add(&h->morph_slabs_in, 1, __ATOMIC_RELAXED);
        pm_morph_lru_del(s->arena, s);
    } else {
        free(mo->cnt);
        mo->cnt = NULL;
        pm_morph_lru_add(s->arena, s);
    }
}
