/* Per-arena extent caches: the large-object side of the paper's per-arena
 * design (Sec. 4.2, 6.3: every arena has its own extents and bookkeeping
 * log). nearmem keeps one extent allocator and one log for the heap (one
 * file, docs/pmalloc.md); without more, every large malloc and free took the
 * heap-wide extent lock twice, for a best-fit search, a carve or a coalesce,
 * and two threads serialised on it. A freed extent now goes, once its
 * tombstone is durable, to a small cache of its arena's, and an allocation of
 * the arena takes the best fit from there (splitting it) under the arena's
 * own lock; the extent lock is left for the log appends, which are short.
 *
 * Persistence is unchanged: a cached extent is free in the bookkeeping log
 * (its tombstone is durable before it is cached), so a crash forgets the
 * caches and replay sees free space. In DRAM it stays mapped in the page map
 * to its VEH (state PM_VEH_CACHED), so the extent allocator never coalesces
 * with it or hands it out, and a free of its address fails as a double free.
 *
 * Bounds: PM_XC_N extents and xc_max_pages pages per arena; extents above
 * xc_max_extent pages bypass the cache. Past a bound the oldest entries go
 * back to the extent allocator (coalesced there). An allocation that finds no
 * space anywhere flushes every cache and retries, so caching never turns a
 * satisfiable request into NM_ENOMEM. */
#include <stdlib.h>
#include <string.h>

#include "nearmem/common/timer.h"

#include "pm_extents.h"

void pm_xc_init(pm_heap *h)
{
    /* an eighth of the data area shared by the arenas, 64 KiB .. 16 MiB each */
    uint64_t per = h->data_pages / (8u * (h->narenas ? h->narenas : 1u));
    h->xc_max_pages = NM_MIN(NM_MAX(per, (uint64_t)PM_SLAB_PAGES), (uint64_t)4096);
    h->xc_max_extent = h->xc_max_pages / 2;
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

/* Spare VEHs for splits come from the heap pool under large_lock, a few at a
 * time, taken before the cache lock (lock order). */
static void refill_pool(pm_heap *h, pm_xcache *c)
{
    pm_veh *got = NULL;
    unsigned n = 0;
    pthread_mutex_lock(&h->large_lock);
    for (; n < 8; n++) {
        pm_veh *v = pm_veh_new(h);
        if (!v) break;
        v->next = got;
        got = v;
    }
    pthread_mutex_unlock(&h->large_lock);
    pthread_mutex_lock(&c->lock);
    while (got) {
        pm_veh *v = got;
        got = v->next;
        v->next = c->pool;
        c->pool = v;
        c->npool++;
    }
    pthread_mutex_unlock(&c->lock);
}

static void drop_at(pm_xcache *c, unsigned i)
{
    __atomic_store_n(&c->pages, c->pages - c->v[i]->npages, __ATOMIC_RELAXED);
    memmove(&c->v[i], &c->v[i + 1], (c->n - i - 1) * sizeof c->v[0]);
    c->n--;
}

bool pm_xc_take(pm_heap *h, pm_arena *a, uint64_t npages, pm_veh **out)
{
    pm_xcache *c = &a->xc;
    if (npages > h->xc_max_extent) return false;
    for (int attempt = 0; attempt < 2; attempt++) {
        pthread_mutex_lock(&c->lock);
        int best = -1;
        for (unsigned i = 0; i < c->n; i++) { /* best fit, ties to the lowest address */
            const pm_veh *v = c->v[i];
            if (v->npages >= npages && (best < 0 || v->npages < c->v[best]->npages ||
                                        (v->npages == c->v[best]->npages && v->page < c->v[best]->page)))
                best = (int)i;
        }
        if (best < 0) {
            pthread_mutex_unlock(&c->lock);
            return false;
        }
        pm_veh *f = c->v[best], *r;
        if (f->npages == npages) {
            drop_at(c, (unsigned)best);
            r = f;
        } else {
            if (!c->pool) { /* a split needs a VEH */
                pthread_mutex_unlock(&c->lock);
                if (attempt == 0) refill_pool(h, c);
                continue;
            }
            /* the front part is allocated: its pages are remapped; the rest stays cached */
            r = c->pool;
            c->pool = r->next;
            c->npool--;
            r->next = NULL;
            __atomic_store_n(&r->page, f->page, __ATOMIC_RELAXED);
            r->npages = npages;
            __atomic_store_n(&f->page, f->page + npages, __ATOMIC_RELAXED);
            f->npages -= npages;
            __atomic_store_n(&c->pages, c->pages - npages, __ATOMIC_RELAXED);
        }
        __atomic_store_n(&r->bkpos, -1, __ATOMIC_RELAXED);
        __atomic_store_n(&r->freeing, false, __ATOMIC_RELAXED);
        __atomic_store_n(&r->state, PM_VEH_ALLOC, __ATOMIC_RELEASE);
        for (uint64_t p = 0; p < npages; p++) pm_pmap_set(h, r->page + p, r);
        r->mapped = true;
        pthread_mutex_unlock(&c->lock);
        *out = r;
        return true;
    }
    return false;
}

static void release_list(pm_heap *h, pm_veh **v, unsigned n)
{
    if (!n) return;
    for (unsigned i = 0; i < n; i++) pm_extent_unmap(h, v[i]); /* out of every cache: ours; outside the lock */
    pthread_mutex_lock(&h->large_lock);
    for (unsigned i = 0; i < n; i++) pm_extent_free_pages(h, v[i]);
    pthread_mutex_unlock(&h->large_lock);
}

/* Cache v (cache lock held); the oldest entries it pushes out go to out[]. */
static unsigned xc_insert(pm_heap *h, pm_xcache *c, pm_veh *v, pm_veh **out)
{
    unsigned nout = 0;
    __atomic_store_n(&v->state, PM_VEH_CACHED, __ATOMIC_RELEASE);
    __atomic_store_n(&v->freeing, false, __ATOMIC_RELEASE); /* after the state (large_claim reads them the other way) */
    /* Full: the oldest half goes back at once (one extent-lock round trip
     * per PM_XC_N / 2 frees, not per free, when frees outrun allocations;
     * DBMStest frees 90% of what it allocates in a burst) */
    bool full = c->n == PM_XC_N || c->pages + v->npages > h->xc_max_pages;
    unsigned keep = full ? PM_XC_N / 2 : PM_XC_N;
    while (c->n && (c->n > keep || c->n == PM_XC_N || c->pages + v->npages > h->xc_max_pages)) { /* oldest out */
        out[nout++] = c->v[0];
        drop_at(c, 0);
    }
    c->v[c->n++] = v;
    __atomic_store_n(&c->pages, c->pages + v->npages, __ATOMIC_RELAXED);
    return nout;
}

void pm_xc_put(pm_heap *h, pm_arena *a, pm_veh *v)
{
    pm_xcache *c = &a->xc;
    pm_veh *out[PM_XC_N];
    pthread_mutex_lock(&c->lock);
    unsigned nout = xc_insert(h, c, v, out);
    pthread_mutex_unlock(&c->lock);
    if (nout) {
        release_list(h, out, nout); /* runs a decay pass when one is due */
    } else if (pm_extent_decay_due(h, nm_now_ns())) {
        /* free extents age while the caches absorb frees: the pass (every
         * 50 ms at most) runs here too, the extent lock taken only then */
        pthread_mutex_lock(&h->large_lock);
        pm_extent_decay(h, nm_now_ns());
        pthread_mutex_unlock(&h->large_lock);
    }
}

bool pm_xc_flush_all(pm_heap *h)
{
    bool any = false;
    for (unsigned i = 0; i < h->narenas; i++) {
        pm_xcache *c = &h->arenas[i].xc;
        pm_veh *out[PM_XC_N];
        pthread_mutex_lock(&c->lock);
        unsigned n = c->n;
        memcpy(out, c->v, n * sizeof out[0]);
        c->n = 0;
        __atomic_store_n(&c->pages, 0, __ATOMIC_RELAXED);
        pthread_mutex_unlock(&c->lock);
        release_list(h, out, n);
        any |= n > 0;
    }
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
