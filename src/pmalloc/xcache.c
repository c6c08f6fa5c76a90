/* Per-arena extent stores: the large-object side of the paper's per-arena
 * design (Sec. 4.2, 6.3: every arena has its own extents and bookkeeping
 * log). nearmem keeps one extent allocator and one log for the heap (one
 * file, docs/pmalloc.md); each arena keeps a store of the extents its threads
 * freed, which their large mallocs take from (best fit, split), under the
 * arena's own lock. A free goes in coalesced with the store's own neighbours,
 * so a burst of frees leaves holes as large as the runs of neighbours freed
 * (DBMStest frees 90% of a 2,000-extent burst at random) and the next burst of
 * allocations is served from them, on recently used pages, without the
 * heap-wide extent lock. A 16-entry cache of the last frees, which this was
 * before, sent nearly every one of those allocations to the extent lock (a
 * cross-core cache line per operation at 2 threads, and a queue).
 *
 * Persistence is unchanged: an extent in a store is free in the bookkeeping
 * log (its tombstone is stored before it enters), so a crash forgets the
 * stores and replay sees free space. In DRAM a stored extent is a VEH in
 * state PM_VEH_CACHED whose `owner` is the arena; like a free extent it maps
 * its first and last page only. The extent allocator coalesces only with
 * FREE extents, so it never touches a stored one, and a free of a stored
 * extent's address fails (double free at its start, bad free inside).
 *
 * A store trusts a neighbour found in the page map only if it is CACHED with
 * the store's own arena as owner: those fields change only under the store's
 * lock (an extent leaving a store for the extent allocator gets owner nobody
 * before the lock is dropped; spare VEHs are CACHED with owner nobody), so a
 * stale page-map entry cannot fool it.
 *
 * Bounds: xc_max_pages per arena (a quarter of the data area over all
 * arenas); past it the largest extents go back to the extent allocator, a
 * quarter of the bound per extent-lock round trip. Extents above
 * xc_max_extent pages bypass the stores. Extents idle in a store for the
 * decay time go back too (the extent allocator then decays them, Sec. 2.2).
 * An allocation that finds no space anywhere flushes every store and retries,
 * so holding space never turns a satisfiable request into NM_ENOMEM. */
#include <stdlib.h>
#include <string.h>

#include "nearmem/common/timer.h"

#include "pm_extents.h"

#define PM_XC_MAX_PAGES (1u << 20) /* 4 GiB per arena at most */
#define PM_XC_MAX_EXTENT 4096u     /* 16 MiB: larger extents bypass the stores */
#define PM_XC_POOL_MAX 128u    /* spare VEHs a store keeps; more go back to the heap's pool */
#define PM_XC_BATCH 64u        /* extents given back per extent-lock round trip at most */

void pm_xc_init(pm_heap *h)
{
    /* a quarter of the data area shared by the arenas, 64 KiB .. 4 GiB each
     * (DBMStest's 2,000-extent bursts of 272 KiB per thread want ~550 MiB
     * each; an eighth of the data area capped at 16 MiB, the old cache's
     * bound, served none of them) */
    uint64_t per = h->data_pages / (4u * (h->narenas ? h->narenas : 1u));
    h->xc_max_pages = NM_MIN(NM_MAX(per, (uint64_t)PM_SLAB_PAGES), (uint64_t)PM_XC_MAX_PAGES);
    h->xc_max_extent = NM_MAX(NM_MIN(h->xc_max_pages / 4, (uint64_t)PM_XC_MAX_EXTENT), (uint64_t)1);
    for (unsigned i = 0; i < h->narenas; i++) {
        pm_xcache *c = &h->arenas[i].xc;
        memset(c, 0, sizeof *c);
        pthread_mutex_init(&c->lock, NULL);
    }
}

/* VEHs belong to the heap's pool (large.c) and are freed with it. */
void pm_xc_destroy(pm_heap *h)
{
    for (unsigned i = 0; i < h->narenas; i++) pthread_mutex_destroy(&h->arenas[i].xc.lock);
}

bool pm_xc_eligible(const pm_heap *h, const pm_veh *v) { return v->npages <= h->xc_max_extent; }

/* ---- bins (store lock held) ---- */

static void bin_add(pm_xcache *c, pm_veh *v)
{
    pm_fbins_push(&c->bins, v);
    c->n++;
    __atomic_store_n(&c->pages, c->pages + v->npages, __ATOMIC_RELAXED);
}

static void bin_del(pm_xcache *c, pm_veh *v)
{
    pm_fbins_del(&c->bins, v);
    c->n--;
    __atomic_store_n(&c->pages, c->pages - v->npages, __ATOMIC_RELAXED);
}

static inline bool mine(const pm_veh *v, unsigned id)
{
    return v && __atomic_load_n(&v->state, __ATOMIC_ACQUIRE) == PM_VEH_CACHED && __atomic_load_n(&v->owner, __ATOMIC_RELAXED) == id;
}

static void pool_put(pm_xcache *c, pm_veh *v)
{
    __atomic_store_n(&v->owner, PM_XC_NOBODY, __ATOMIC_RELAXED);
    __atomic_store_n(&v->state, PM_VEH_CACHED, __ATOMIC_RELEASE); /* never FREE: the extent allocator must not take it for a neighbour */
    v->npages = 0;
    v->prev = NULL;
    v->next = c->pool;
    c->pool = v;
    c->npool++;
}

/* Spare VEHs for splits come from the heap pool under large_lock, a few at a
 * time, taken before the store lock (lock order). */
static void refill_pool(pm_heap *h, pm_xcache *c)
{
    pm_veh *got[32];
    unsigned n = 0;
    pthread_mutex_lock(&h->large_lock);
    for (; n < NM_ARRAY_LEN(got); n++)
        if (!(got[n] = pm_veh_new(h))) break;
    pthread_mutex_unlock(&h->large_lock);
    pthread_mutex_lock(&c->lock);
    for (unsigned i = 0; i < n; i++) pool_put(c, got[i]);
    pthread_mutex_unlock(&c->lock);
}

/* v (ends mapped to it, inner pages unmapped) joins the store, merged with
 * the store's extents right before and after it. */
static void insert(pm_heap *h, pm_xcache *c, unsigned id, pm_veh *v)
{
    uint64_t start = v->page, end = v->page + v->npages;
    __atomic_store_n(&v->bkpos, -1, __ATOMIC_RELAXED);
    __atomic_store_n(&v->owner, id, __ATOMIC_RELAXED);
    __atomic_store_n(&v->state, PM_VEH_CACHED, __ATOMIC_RELEASE);
    pm_veh *l = start > 0 ? pm_pmap_get(h, start - 1) : NULL;
    if (mine(l, id) && l != v && l->page + l->npages == start) {
        bin_del(c, l);
        pm_pmap_set(h, start - 1, NULL); /* both become inner pages (the new ends are set below) */
        pm_pmap_set(h, start, NULL);
        start = l->page;
        pool_put(c, l);
    }
    pm_veh *r = end < h->data_pages ? pm_pmap_get(h, end) : NULL;
    if (mine(r, id) && r != v && r->page == end) {
        bin_del(c, r);
        pm_pmap_set(h, end - 1, NULL);
        pm_pmap_set(h, end, NULL);
        end = r->page + r->npages;
        pool_put(c, r);
    }
    __atomic_store_n(&v->page, start, __ATOMIC_RELAXED);
    v->npages = end - start;
    v->mapped = false;
    v->freed_ns = nm_now_ns(); /* (a merge counts as recent: its pages are) */
    pm_pmap_set(h, start, v);
    pm_pmap_set(h, end - 1, v);
    bin_add(c, v);
    /* the claim goes last: a racing free that reads it clear (large_claim reads
     * it first) sees this VEH's final state and page, and the page map's */
    __atomic_store_n(&v->freeing, false, __ATOMIC_RELEASE);
}

/* Take v out of the store for the extent allocator (store lock held). */
static void leave(pm_xcache *c, pm_veh *v)
{
    bin_del(c, v);
    __atomic_store_n(&v->owner, PM_XC_NOBODY, __ATOMIC_RELAXED); /* no longer a neighbour for insert() */
}

/* Extents that left their stores, to the extent allocator (coalesced there),
 * and spare VEHs to the heap's pool: one extent-lock round trip. No lock held. */
static void give_back(pm_heap *h, pm_veh **v, unsigned n, pm_veh *spare)
{
    if (!n && !spare) return;
    pthread_mutex_lock(&h->large_lock);
    for (unsigned i = 0; i < n; i++) pm_extent_free_pages(h, v[i]);
    pm_veh_put_list(h, spare);
    pthread_mutex_unlock(&h->large_lock);
}

/* Spare VEHs beyond the store's need (store lock held). */
static pm_veh *spare_vehs(pm_xcache *c)
{
    pm_veh *list = NULL;
    while (c->npool > PM_XC_POOL_MAX / 2) {
        pm_veh *v = c->pool;
        c->pool = v->next;
        c->npool--;
        v->next = list;
        list = v;
    }
    return list;
}

bool pm_xc_take(pm_heap *h, pm_arena *a, uint64_t npages, pm_veh **out)
{
    pm_xcache *c = &a->xc;
    if (npages > h->xc_max_extent) return false;
    for (int attempt = 0; attempt < 2; attempt++) {
        pthread_mutex_lock(&c->lock);
        pm_veh *f = pm_fbins_fit(&c->bins, npages), *r;
        if (!f) {
            pthread_mutex_unlock(&c->lock);
            return false;
        }
        if (f->npages > npages && !c->pool) { /* a split needs a VEH */
            pthread_mutex_unlock(&c->lock);
            if (attempt == 0) refill_pool(h, c);
            continue;
        }
        bin_del(c, f);
        if (f->npages == npages) {
            r = f;
        } else { /* the front part is allocated; the rest stays */
            r = c->pool;
            c->pool = r->next;
            c->npool--;
            r->next = NULL;
            __atomic_store_n(&r->page, f->page, __ATOMIC_RELAXED);
            r->npages = npages;
            __atomic_store_n(&f->page, f->page + npages, __ATOMIC_RELAXED);
            f->npages -= npages;
            pm_pmap_set(h, f->page, f);
            bin_add(c, f);
            pm_pmap_set(h, r->page, r);
            pm_pmap_set(h, r->page + npages - 1, r);
        }
        __atomic_store_n(&r->owner, PM_XC_NOBODY, __ATOMIC_RELAXED);
        __atomic_store_n(&r->bkpos, -1, __ATOMIC_RELAXED);
        __atomic_store_n(&r->freeing, false, __ATOMIC_RELAXED);
        r->mapped = false;
        __atomic_store_n(&r->state, PM_VEH_ALLOC, __ATOMIC_RELEASE);
        pthread_mutex_unlock(&c->lock);
        pm_extent_map(h, r); /* its inner pages, by its owner, outside the lock */
        *out = r;
        return true;
    }
    return false;
}

/* Every extent stored before `before` goes back (UINT64_MAX: all of them), a
 * batch per extent-lock round trip; true if any did. No lock held. */
static bool give_back_older(pm_heap *h, pm_xcache *c, uint64_t before)
{
    bool any = false;
    for (;;) {
        pm_veh *out[PM_XC_BATCH];
        unsigned n = 0;
        pthread_mutex_lock(&c->lock);
        for (unsigned b = pm_fbins_next(&c->bins, 1); b && n < PM_XC_BATCH; b = pm_fbins_next(&c->bins, b + 1))
            for (pm_veh *x = c->bins.bin[b], *nx; x && n < PM_XC_BATCH; x = nx) {
                nx = x->next;
                if (x->freed_ns < before) {
                    leave(c, x);
                    out[n++] = x;
                }
            }
        pthread_mutex_unlock(&c->lock);
        if (!n) return any;
        give_back(h, out, n, NULL);
        any = true;
    }
}

void pm_xc_put(pm_heap *h, pm_arena *a, pm_veh *v)
{
    pm_xcache *c = &a->xc;
    pm_veh *out[PM_XC_BATCH];
    unsigned nout = 0;
    pm_extent_unmap(h, v); /* its inner pages, outside the lock */
    pthread_mutex_lock(&c->lock);
    insert(h, c, a->id, v);
    /* Past the bound: the largest extents go back until a quarter of the
     * bound is free again (a free burst costs one extent-lock round trip per
     * quarter, and the store keeps its smaller pieces for the next requests) */
    if (c->pages > h->xc_max_pages) {
        uint64_t target = h->xc_max_pages - h->xc_max_pages / 4;
        for (unsigned b; nout < PM_XC_BATCH && c->pages > target && (b = pm_fbins_last(&c->bins));) {
            pm_veh *x = c->bins.bin[b];
            leave(c, x);
            out[nout++] = x;
        }
    }
    /* extents idle for the decay time go back, to decay there (a look every 50 ms at most) */
    uint64_t now = nm_now_ns(), dn = __atomic_load_n(&h->decay_ns, __ATOMIC_RELAXED);
    bool idle = dn != UINT64_MAX && now - c->idle_check_ns >= 50000000ull;
    if (idle) c->idle_check_ns = now;
    pm_veh *spare = c->npool > PM_XC_POOL_MAX ? spare_vehs(c) : NULL;
    pthread_mutex_unlock(&c->lock);
    if (idle) give_back_older(h, c, now - dn);
    if (nout || spare) {
        give_back(h, out, nout, spare);
    } else if (pm_extent_decay_due(h, now)) {
        /* free extents age while the stores absorb frees: the pass (every
         * 50 ms at most) runs here too, the extent lock taken only then */
        pthread_mutex_lock(&h->large_lock);
        pm_extent_decay(h, now);
        pthread_mutex_unlock(&h->large_lock);
    }
}

bool pm_xc_flush_all(pm_heap *h)
{
    bool any = false;
    for (unsigned i = 0; i < h->narenas; i++) any |= give_back_older(h, &h->arenas[i].xc, UINT64_MAX);
    return any;
}

void pm_xc_lock_all(pm_heap *h, bool lock)
{
    for (unsigned i = 0; i < h->narenas; i++) {
        if (lock) pthread_mutex_lock(&h->arenas[i].xc.lock);
        else pthread_mutex_unlock(&h->arenas[i].xc.lock);
    }
}

uint64_t pm_xc_pages(pm_heap *h)
{
    uint64_t s = 0;
    for (unsigned i = 0; i < h->narenas; i++) s += __atomic_load_n(&h->arenas[i].xc.pages, __ATOMIC_RELAXED);
    return s;
}

nm_err pm_xc_check(pm_heap *h)
{
    for (unsigned i = 0; i < h->narenas; i++) {
        const pm_xcache *c = &h->arenas[i].xc;
        uint64_t pages = 0;
        unsigned n = 0;
        for (unsigned b = 1; b < PM_FBINS; b++) {
            if (!c->bins.bin[b] != !(c->bins.map[b / 64] >> (b % 64) & 1))
                return nm_fail(NM_ECORRUPT, "pmalloc check: arena %u's extent store: bin %u and its bitmap disagree", i, b);
            for (const pm_veh *v = c->bins.bin[b]; v; v = v->next) {
                if (v->state != PM_VEH_CACHED || v->owner != i || pm_fbin_of(v->npages) != b || v->npages == 0 ||
                    v->page + v->npages > h->data_pages || h->pmap[v->page] != v || h->pmap[v->page + v->npages - 1] != v)
                    return nm_fail(NM_ECORRUPT, "pmalloc check: arena %u's extent store holds a damaged extent at page %llu", i,
                                   (unsigned long long)v->page);
                for (uint64_t q = 1; q + 1 < v->npages; q++)
                    if (h->pmap[v->page + q])
                        return nm_fail(NM_ECORRUPT, "pmalloc check: stored extent at page %llu has an inner page mapped", (unsigned long long)v->page);
                pages += v->npages;
                n++;
            }
        }
        if (pages != c->pages || n != c->n)
            return nm_fail(NM_ECORRUPT, "pmalloc check: arena %u's extent store holds %u extents of %llu pages, counts %u of %llu", i, n,
                           (unsigned long long)pages, c->n, (unsigned long long)c->pages);
    }
    return NM_OK;
}
