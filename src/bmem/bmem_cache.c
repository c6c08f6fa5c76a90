/* Per-thread caches of freed rectangles (docs/bmem.md "Thread cache").
 *
 * Why: with glibc's tcache a small malloc/free pair costs ~5 ns and no atomic
 * instruction; one locked instruction costs as much on this host, so a bank
 * lock per call cannot match it. As in glibc's tcache and jemalloc's tcache, a
 * thread keeps a few freed blocks per shape and serves the same shape from
 * them without any lock or read-modify-write. The cached cells stay claimed in
 * their bank until the cache is flushed.
 *
 * Lifetimes. A cache belongs to one (thread, device) pair. The hot path
 * (bmem.c) finds it through a thread-local pointer and the device's serial
 * number, so a destroyed device's cache can never be matched by a new device
 * at the same address. Creation, thread exit and device destroy take one
 * process-wide mutex, g_tc_mu, which also guards each device's list of caches
 * and each cache's `dev`. Lock order: g_tc_mu, then a bank lock.
 *   - thread exit (pthread key destructor): flush each cache whose device is
 *     still alive into its banks, unlink it, free it;
 *   - device destroy: detach every cache (dev = NULL; its entries are lost with
 *     the device), free the caller's own; other threads free theirs at exit or
 *     on their next cache creation. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "bmem_internal.h"

_Thread_local bmem_tcache *bmem_t_tc __attribute__((tls_model("initial-exec")));
static _Thread_local bmem_tcache *t_tcs __attribute__((tls_model("initial-exec"))); /* all of this thread's caches */

static pthread_mutex_t g_tc_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t g_tc_once = PTHREAD_ONCE_INIT;
static pthread_key_t g_tc_key;
static bool g_tc_key_ok;
static _Atomic uint64_t g_dev_serial;

static void dev_unlink(bmem_tcache *tc)
{
    if (tc->dprev)
        tc->dprev->dnext = tc->dnext;
    else
        tc->dev->tcs = tc->dnext;
    if (tc->dnext) tc->dnext->dprev = tc->dprev;
    tc->dnext = tc->dprev = NULL;
}

/* Thread exit: the key's value is the head of the thread's cache list. */
static void tc_thread_exit(void *v)
{
    pthread_mutex_lock(&g_tc_mu);
    for (bmem_tcache *tc = v, *next; tc; tc = next) {
        next = tc->tnext;
        if (tc->dev) {
            bmem_tc_flush(tc->dev, tc);
            dev_unlink(tc);
        }
        free(tc);
    }
    pthread_mutex_unlock(&g_tc_mu);
    t_tcs = NULL;
    bmem_t_tc = NULL;
}

static void tc_key_create(void) { g_tc_key_ok = pthread_key_create(&g_tc_key, tc_thread_exit) == 0; }

void bmem_tc_dev_init(bmem_dev *d)
{
    d->id = atomic_fetch_add_explicit(&g_dev_serial, 1, memory_order_relaxed) + 1;
    d->tcs = NULL;
    d->tc_serial = 0;
    atomic_init(&d->tc_conflicts, 0);
    /* 1/16 of one bank per thread: the most one thread's cache withholds */
    uint64_t per_bank = (uint64_t)d->cfg.rows * d->cfg.subarrays;
    d->tc_budget = per_bank / 16 ? per_bank / 16 : 1;
}

void bmem_tc_dev_fini(bmem_dev *d)
{
    pthread_mutex_lock(&g_tc_mu);
    for (bmem_tcache *tc = d->tcs, *next; tc; tc = next) {
        next = tc->dnext;
        tc->dev = NULL;
        tc->dnext = tc->dprev = NULL;
    }
    d->tcs = NULL;
    /* free the caller's own cache now (threads free theirs when they next
     * create one or exit; the main thread never runs key destructors) */
    for (bmem_tcache **pp = &t_tcs; *pp;) {
        bmem_tcache *tc = *pp;
        if (tc->dev_id == d->id) {
            *pp = tc->tnext;
            if (bmem_t_tc == tc) bmem_t_tc = NULL;
            free(tc);
        } else {
            pp = &tc->tnext;
        }
    }
    if (g_tc_key_ok) pthread_setspecific(g_tc_key, t_tcs);
    pthread_mutex_unlock(&g_tc_mu);
}

bmem_tcache *bmem_tc_find(const bmem_dev *d)
{
    for (bmem_tcache *tc = t_tcs; tc; tc = tc->tnext)
        if (tc->dev_id == d->id) return tc;
    return NULL;
}

bmem_tcache *bmem_tc_get_slow(bmem_dev *d)
{
    bmem_tcache *tc = bmem_tc_find(d);
    if (tc) {
        bmem_t_tc = tc;
        return tc;
    }
    pthread_once(&g_tc_once, tc_key_create);
    if (!g_tc_key_ok) return NULL; /* no exit hook: run without a cache */
    tc = aligned_alloc(NM_CACHELINE, NM_ALIGN_UP(sizeof *tc, (size_t)NM_CACHELINE));
    if (!tc) return NULL;
    memset(tc, 0, sizeof *tc);
    tc->dev_id = d->id;
    tc->cap = d->cache;
    tc->last = &tc->bin[0];
    tc->last_a = &tc->none;
    tc->budget = d->tc_budget;
    pthread_mutex_lock(&g_tc_mu);
    /* drop this thread's caches of destroyed devices */
    for (bmem_tcache **pp = &t_tcs; *pp;) {
        bmem_tcache *x = *pp;
        if (!x->dev) {
            *pp = x->tnext;
            if (bmem_t_tc == x) bmem_t_tc = NULL;
            free(x);
        } else {
            pp = &x->tnext;
        }
    }
    tc->tag = (uint64_t)(1 + d->tc_serial++ % 15) << ANC_TAG_SHIFT;
    tc->dev = d;
    tc->dnext = d->tcs;
    if (d->tcs) d->tcs->dprev = tc;
    d->tcs = tc;
    tc->tnext = t_tcs;
    t_tcs = tc;
    pthread_setspecific(g_tc_key, t_tcs);
    pthread_mutex_unlock(&g_tc_mu);
    bmem_t_tc = tc;
    return tc;
}

void bmem_tc_flush(bmem_dev *d, bmem_tcache *tc)
{
    for (unsigned bi = 0; bi < BMEM_TC_BINS; bi++) {
        bmem_tc_bin *bn = &tc->bin[bi];
        unsigned n = atomic_load_explicit(&bn->n, memory_order_relaxed);
        if (!n) continue;
        uint32_t key = atomic_load_explicit(&bn->key, memory_order_relaxed);
        const unsigned p = (key & 0x3ff) + 1, q = ((key >> (ANC_Q_SHIFT - ANC_SHAPE_SHIFT)) & 0xffff) + 1;
        for (unsigned i = 0; i < n; i++) {
            bmem_ptr h = atomic_load_explicit(&bn->e[i].h, memory_order_relaxed);
            unsigned bank = (unsigned)(h >> H_BANK_SHIFT), r = (unsigned)((h >> H_ROW_SHIFT) & 0xffff),
                     s = (unsigned)((h >> H_SUB_SHIFT) & 0x3ff);
            bmem_bank *b = &d->banks[bank];
            _Atomic uint64_t *a = bn->e[i].a;
            const uint64_t want = bn->parked | (h & ANC_GEN_MASK);
            bmem_bank_lock(b);
            if (atomic_load_explicit(a, memory_order_relaxed) == want) {
                /* freed state: not live, same generation (stale handles stay
                 * recognisable) */
                atomic_store_explicit(a, want & ~(ANC_CACHED | ANC_TAG_MASK), memory_order_relaxed);
                bmem_s_mark(d, b, r, s, p, q, false);
                b->live--;
                atomic_store_explicit(&b->free_cells,
                                      atomic_load_explicit(&b->free_cells, memory_order_relaxed) + (uint64_t)p * q,
                                      memory_order_relaxed);
            } else {
                atomic_fetch_add_explicit(&d->tc_conflicts, 1, memory_order_relaxed);
            }
            bmem_bank_unlock(b);
        }
        atomic_store_explicit(&bn->n, 0, memory_order_relaxed);
    }
}

bool bmem_tc_nonempty(const bmem_tcache *tc)
{
    for (unsigned bi = 0; bi < BMEM_TC_BINS; bi++)
        if (atomic_load_explicit(&tc->bin[bi].n, memory_order_relaxed)) return true;
    return false;
}

bool bmem_tc_holds_bank(const bmem_tcache *tc, unsigned bank)
{
    for (unsigned bi = 0; bi < BMEM_TC_BINS; bi++) {
        unsigned n = atomic_load_explicit(&tc->bin[bi].n, memory_order_relaxed);
        for (unsigned i = 0; i < n; i++)
            if ((unsigned)(atomic_load_explicit(&tc->bin[bi].e[i].h, memory_order_relaxed) >> H_BANK_SHIFT) == bank)
                return true;
    }
    return false;
}

void bmem_tc_count(bmem_dev *d, uint64_t *allocs, uint64_t *cells)
{
    pthread_mutex_lock(&g_tc_mu);
    for (bmem_tcache *tc = d->tcs; tc; tc = tc->dnext)
        for (unsigned bi = 0; bi < BMEM_TC_BINS; bi++) {
            unsigned n = atomic_load_explicit(&tc->bin[bi].n, memory_order_relaxed);
            if (!n) continue;
            uint64_t c = bmem_key_cells(atomic_load_explicit(&tc->bin[bi].key, memory_order_relaxed));
            for (unsigned i = 0; i < n && i < tc->cap; i++) {
                unsigned bank =
                    (unsigned)(atomic_load_explicit(&tc->bin[bi].e[i].h, memory_order_relaxed) >> H_BANK_SHIFT);
                if (bank >= d->cfg.banks) continue; /* a slot being written */
                allocs[bank]++;
                cells[bank] += c;
            }
        }
    pthread_mutex_unlock(&g_tc_mu);
}
