/* Thread caches (API layer; docs/pmalloc.md, "Code layout"): a thread's
 * cache is its context for every operation: its redo ring (redo.c), its
 * arena and cached blocks (small.c) and its NUMA node (numa.c). This file
 * creates and destroys caches and moves them between arenas when their thread
 * migrates (paper Sec. 4.2, 6.4); the layers below only use a cache they are
 * handed. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "pm_api.h"

/* The calling thread's cache of the heap it used last (heap uids are never
 * reused, so a closed heap's entry never matches): every operation looks its
 * cache up, and pthread_getspecific is a call and a two-level table walk. */
static PM_TLS struct {
    uint64_t uid;
    pm_tcache *tc;
} tl_tc;

static void tc_destroy(void *p)
{
    pm_tcache *tc = p;
    pm_heap *h = tc->h;
    if (tl_tc.tc == tc) tl_tc.uid = 0; /* this thread's (at its exit): a later call makes a new one */
    pm_small_drain(h, tc);
    pm_bk_credits_return(h, tc);
    /* its records settled before its ring and side array go (and its ring
     * may hold records of other threads' heaps' pasts no more) */
    while (__atomic_load_n(&tc->settled, __ATOMIC_ACQUIRE) < tc->head)
        if (pm_checkpoint(h, 0) != NM_OK) break; /* out of host memory: recovery settles them */
    /* a checkpoint running now may have taken this cache into its list (with
     * nothing new to settle, the loop above took no checkpoint of its own) and
     * publishes `settled` into it at its end: leave only between checkpoints */
    pthread_mutex_lock(&h->ckpt_lock);
    pthread_mutex_lock(&h->tc_lock);
    for (pm_tcache **pp = &h->tcaches; *pp; pp = &(*pp)->next)
        if (*pp == tc) { *pp = tc->next; break; }
    if (tc->settled == tc->head) pm_tc_ring_drop(h, tc);
    else pm_tc_ring_abandon(h, tc); /* its rings keep unsettled records: they stay taken */
    tc->arena->nthreads--;
    pthread_mutex_unlock(&h->tc_lock);
    pthread_mutex_unlock(&h->ckpt_lock);
    free(tc);
}

void pm_tc_destructor(void *p) { tc_destroy(p); }

void pm_tc_destroy_all(pm_heap *h)
{
    while (h->tcaches) tc_destroy(h->tcaches);
}

pm_tcache *pm_tc_get(pm_heap *h)
{
    if (NM_LIKELY(tl_tc.uid == h->uid)) return tl_tc.tc;
    pm_tcache *tc = pthread_getspecific(h->tc_key);
    if (NM_LIKELY(tc != NULL)) {
        tl_tc.uid = h->uid;
        tl_tc.tc = tc;
        return tc;
    }
    /* its own cache lines: `inflight` is written twice per operation */
    tc = aligned_alloc(PM_LINE, NM_ALIGN_UP(sizeof *tc, PM_LINE));
    if (!tc) return NULL;
    memset(tc, 0, sizeof *tc);
    tc->h = h;
    if (pm_tc_ring_take(h, tc) != NM_OK) { /* before tc_lock: it may checkpoint */
        free(tc);
        return NULL;
    }
    pthread_mutex_lock(&h->tc_lock);
    /* each thread goes to the arena with the fewest threads (paper Sec. 4.2) of its node */
    pm_arena *best = pm_numa_pick_arena(h, tc);
    best->nthreads++;
    tc->arena = best;
    pm_set_lane(h, best->id);
    tc->next = h->tcaches;
    h->tcaches = tc;
    pthread_mutex_unlock(&h->tc_lock);
    pthread_setspecific(h->tc_key, tc);
    tl_tc.uid = h->uid;
    tl_tc.tc = tc;
    return tc;
}

void pm_tc_forget_all(pm_heap *h)
{
    while (h->tcaches) {
        pm_tcache *tc = h->tcaches;
        h->tcaches = tc->next;
        if (tl_tc.tc == tc) tl_tc.uid = 0;
        for (unsigned c = 0; c < PM_NCLS_MAX; c++) free(tc->bins[c].slot);
        free(tc);
    }
}

void pm_tc_rebind(pm_heap *h, pm_tcache *tc)
{
    pm_small_drain(h, tc);
    pthread_mutex_lock(&h->tc_lock);
    tc->arena->nthreads--;
    pm_arena *a = pm_numa_pick_arena(h, tc);
    a->nthreads++;
    tc->arena = a;
    pthread_mutex_unlock(&h->tc_lock);
    pm_set_lane(h, a->id);
}

/* Thread migration (Sec. 6.4): a cache whose thread now runs on another node
 * returns its blocks and moves to an arena of the new node. */
static void migrate(pm_heap *h, pm_tcache *tc)
{
    unsigned node = pm_numa_node_now(h);
    if (node == tc->node) return;
    pm_tc_rebind(h, tc);
    pm_count(&h->numa->c_migrations, 1);
}

void pm_numa_tick(pm_heap *h, pm_tcache *tc)
{
    if (NM_LIKELY(h->numa->nnodes <= 1) || tc->pinned) return;
    if (++tc->nops < PM_NUMA_CHECK_EVERY) return;
    tc->nops = 0;
    migrate(h, tc);
}

nm_err pmalloc_numa_migrate_check(pmalloc_heap *hd)
{
    PM_ENTER_ERR(h, hd);
    pm_tcache *tc = pm_tc_get(h);
    if (!tc) return nm_fail(NM_ENOMEM, "pmalloc: no thread cache: %s", nm_last_errmsg());
    if (h->numa->nnodes > 1 && !tc->pinned) migrate(h, tc);
    return NM_OK;
}

nm_err pmalloc_numa_set_node(pmalloc_heap *hd, int node)
{
    PM_ENTER_ERR(h, hd);
    if (node < -1 || node >= (int)h->numa->nnodes)
        return nm_fail(NM_EINVAL, "pmalloc_numa_set_node: node %d, the heap has %u", node, h->numa->nnodes);
    pm_tcache *tc = pm_tc_get(h);
    if (!tc) return nm_fail(NM_ENOMEM, "pmalloc: no thread cache: %s", nm_last_errmsg());
    tc->pinned = node >= 0;
    tc->node = node >= 0 ? (unsigned)node : pm_numa_node_now(h);
    if (tc->arena->node != tc->node) pm_tc_rebind(h, tc); /* its cache holds only the new node's blocks */
    return NM_OK;
}

int pmalloc_numa_current_node(pmalloc_heap *hd)
{
    PM_ENTER(h, hd, -1);
    pm_tcache *tc = pm_tc_get(h);
    return tc ? (int)tc->node : -1;
}
