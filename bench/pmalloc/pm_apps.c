/* Adapter, undo-log transactions and measurement driver of the applications
 * (see pm_apps.h). */
#include "pm_apps.h"

#include <errno.h>
#include <libpmem.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "nearmem/common.h"

#define PA_LAYOUT "nearmem-apps"
#define PA_PMDK_FILE "pmdk-apps.pool"

__thread pa_tcount pa_tl;

const char *pa_kind_name(pa_kind k)
{
    static const char *const n[] = {"PMAlloc-LOG", "PMAlloc-GC", "PMDK", "DRAM-malloc"};
    return k < PA_NKINDS ? n[k] : "?";
}

const char *pa_kind_short(pa_kind k)
{
    static const char *const n[] = {"log", "gc", "pmdk", "malloc"};
    return k < PA_NKINDS ? n[k] : "?";
}

void pa_force_pmem(void) { setenv("PMEM_IS_PMEM_FORCE", "1", 1); }

void pa_remove(const char *dir)
{
    char f[1024];
    (void)pmalloc_remove(dir, NULL);
    snprintf(f, sizeof f, "%s/%s", dir, PA_PMDK_FILE);
    unlink(f);
}

int pa_open(pa_heap *a, const pa_open_opts *o, char *err, size_t errcap)
{
    memset(a, 0, sizeof *a);
    a->k = o->kind;
    if (o->kind == PA_MALLOC) {
        a->root = calloc(1, PA_ROOT_SIZE);
        if (!a->root) { snprintf(err, errcap, "out of memory"); return -1; }
        return 0;
    }
    if (o->kind == PA_PMDK) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", o->dir, PA_PMDK_FILE);
        bool exists = access(path, F_OK) == 0;
        if (!exists && !o->create) { snprintf(err, errcap, "pmemobj: no pool in %s", o->dir); return -1; }
        a->pop = exists ? pmemobj_open(path, PA_LAYOUT) : pmemobj_create(path, PA_LAYOUT, o->size, 0600);
        if (!a->pop) { snprintf(err, errcap, "pmemobj %s: %s", exists ? "open" : "create", pmemobj_errormsg()); return -1; }
        PMEMoid r = pmemobj_root(a->pop, PA_ROOT_SIZE); /* zeroed by libpmemobj when created */
        if (OID_IS_NULL(r)) { snprintf(err, errcap, "pmemobj_root: %s", pmemobj_errormsg()); pmemobj_close(a->pop); return -1; }
        a->root = pmemobj_direct(r);
        return 0;
    }
    pmalloc_options po;
    pmalloc_options_default(&po);
    po.size = o->create ? o->size : 0;
    po.create = o->create;
    po.model = o->kind == PA_GC ? PMALLOC_GC : PMALLOC_LOG;
    po.persist = o->persist;
    po.eadr = o->eadr ? PMALLOC_EADR_ON : PMALLOC_EADR_OFF;
    po.narenas = o->narenas;
    po.log_chunks = o->log_chunks;
    if (pmalloc_open(o->dir, &po, &a->h)) { snprintf(err, errcap, "pmalloc_open: %s", nm_last_errmsg()); return -1; }
    pmalloc_ptr *slot = pmalloc_root_slot(a->h, 0);
    if (*slot == 0) { /* a new heap (or a crash inside its first malloc_to): make the root area */
        if (pmalloc_malloc_to(a->h, PA_ROOT_SIZE, slot)) {
            snprintf(err, errcap, "root area: %s", nm_last_errmsg());
            pmalloc_close(a->h);
            return -1;
        }
        void *r = pmalloc_direct(a->h, *slot);
        memset(r, 0, PA_ROOT_SIZE);
        pmalloc_persist(a->h, r, PA_ROOT_SIZE);
    }
    a->root_pp = *slot;
    a->root = pmalloc_direct(a->h, *slot);
    return 0;
}

void pa_close(pa_heap *a)
{
    if (a->k == PA_MALLOC) free(a->root);
    if (a->pop) pmemobj_close(a->pop);
    if (a->h) pmalloc_close(a->h);
    memset(a, 0, sizeof *a);
}

pa_ptr pa_ptr_of(const pa_heap *a, const void *addr)
{
    pa_ptr p;
    memset(&p, 0, sizeof p);
    if (!addr) return p;
    switch (a->k) {
    case PA_PMDK: p.oid = pmemobj_oid(addr); break;
    case PA_MALLOC: p.vp = (void *)addr; break;
    default: p.pp = pmalloc_ptr_of(a->h, addr); break;
    }
    return p;
}

uint64_t pa_off_of(const pa_heap *a, const void *addr)
{
    switch (a->k) {
    case PA_PMDK: return (uint64_t)((const char *)addr - (const char *)a->pop);
    case PA_MALLOC: return (uint64_t)(uintptr_t)addr;
    default: return pmalloc_ptr_of(a->h, addr);
    }
}

void *pa_at_off(const pa_heap *a, uint64_t off)
{
    switch (a->k) {
    case PA_PMDK: return (char *)a->pop + off;
    case PA_MALLOC: return (void *)(uintptr_t)off;
    default: return pmalloc_direct(a->h, off);
    }
}

size_t pa_usable(pa_heap *a, const void *addr)
{
    switch (a->k) {
    case PA_PMDK: {
        PMEMoid o = pmemobj_oid(addr);
        return OID_IS_NULL(o) ? 0 : pmemobj_alloc_usable_size(o);
    }
    case PA_MALLOC: return addr ? malloc_usable_size((void *)addr) : 0;
    default: {
        pmalloc_ptr p = pmalloc_ptr_of(a->h, addr);
        return p ? pmalloc_usable_size(a->h, p) : 0;
    }
    }
}

typedef struct walk_ctx { pa_heap *a; pa_walk_fn fn; void *arg; } walk_ctx;

static int walk_pm(void *arg, pmalloc_ptr p, size_t usable)
{
    walk_ctx *w = arg;
    if (p == w->a->root_pp) return 0;
    return w->fn(w->arg, pmalloc_direct(w->a->h, p), usable);
}

int pa_walk(pa_heap *a, pa_walk_fn fn, void *arg)
{
    if (a->k == PA_MALLOC) return -1;
    if (a->k == PA_PMDK) {
        for (PMEMoid o = pmemobj_first(a->pop); !OID_IS_NULL(o); o = pmemobj_next(o)) {
            int rc = fn(arg, pmemobj_direct(o), pmemobj_alloc_usable_size(o));
            if (rc) return rc;
        }
        return 0;
    }
    walk_ctx w = {a, fn, arg};
    return pmalloc_walk(a->h, walk_pm, &w) ? -1 : 0;
}

/* ---- undo-log transactions ----
 * Undo entry: {off, len, gen, check} then len bytes rounded up to 8. The check
 * (over off, len, gen and the data) makes a torn entry invalid; entries of an
 * older generation are stale. Protocol (fences in brackets):
 *   begin: state = 1 (made durable with the first entry or allocation)
 *   add:   entry persisted [1], then the caller changes the range
 *   alloc: state durable first, then allocation into a log slot (the allocator persists it)
 *   commit: changed and new ranges, the deferred-free slots [1]; state = 2 [1] (commit point)
 *           when anything is to be freed or was allocated; allocation slots zeroed [1];
 *           the deferred frees; gen++, state = 0 [1]
 * Recovery: state 1: roll back this generation's entries (newest first), free
 * the allocation slots, forget the deferred frees; state 2: zero the allocation
 * slots, do the deferred frees left; state 0: zero leftovers. Then gen++, state 0. */

/* The header's offset is stored XOR PA_OFF_MASK, so that it never looks like a
 * pointer to a conservative collector. The old images themselves are stored as
 * they are: while a transaction is active an image may hold the only reference
 * to an object a rollback would link back, and PMAlloc-GC's mark must see it.
 * Once the transaction is committed (or recovered) its images are scrubbed
 * before any deferred free, so that a stale image never revives a freed object
 * (the scrub is not flushed: after a power failure a stale image can only make
 * the conservative mark keep an object, never lose one). */
typedef struct pa_undo_hdr { uint64_t off, len, gen, check; } pa_undo_hdr;
#define PA_OFF_MASK 0xc3a5c85c97cb3127ull

static uint64_t undo_check(const pa_undo_hdr *e, const void *data)
{
    uint64_t h = pa_mix64(e->off ^ pa_mix64(e->len ^ pa_mix64(e->gen)));
    const unsigned char *d = data;
    for (uint64_t i = 0; i < e->len; i += 8) {
        uint64_t w = 0;
        memcpy(&w, d + i, e->len - i < 8 ? e->len - i : 8);
        h = pa_mix64(h ^ w) + i;
    }
    return h | 1; /* never 0: a zeroed log has no valid entry */
}

void pa_tx_init(pa_tx *t, pa_heap *a, pa_txlog *log)
{
    memset(t, 0, sizeof *t);
    t->a = a;
    t->log = log;
}

void pa_tx_begin(pa_tx *t)
{
    t->undo_used = 0;
    t->nalloc = t->nfree = t->nranges = 0;
    t->overflow = false;
    t->state_durable = false;
    t->log->state = 1; /* made durable with the first undo entry or before the first allocation */
}

static bool tx_logged(const pa_tx *t, const void *p, size_t n)
{
    const char *c = p;
    for (unsigned i = 0; i < t->nranges; i++) {
        const char *r = t->ranges[i].p;
        if (c >= r && c + n <= r + t->ranges[i].n) return true;
    }
    return false;
}

static void tx_range(pa_tx *t, void *p, size_t n)
{
    if (t->nranges == sizeof t->ranges / sizeof t->ranges[0]) { t->overflow = true; return; }
    t->ranges[t->nranges].p = p;
    t->ranges[t->nranges].n = n;
    t->nranges++;
}

int pa_tx_add(pa_tx *t, void *p, size_t n)
{
    if (tx_logged(t, p, n)) return 0;
    size_t need = sizeof(pa_undo_hdr) + ((n + 7) & ~(size_t)7);
    if (t->undo_used + need + sizeof(pa_undo_hdr) > PA_TX_UNDO) { t->overflow = true; return -1; }
    unsigned char *at = t->log->undo + t->undo_used;
    pa_undo_hdr e = {pa_off_of(t->a, p) ^ PA_OFF_MASK, n, t->log->gen, 0};
    memcpy(at + sizeof e, p, n);
    e.check = undo_check(&e, at + sizeof e);
    memcpy(at, &e, sizeof e);
    t->undo_used += need;
    /* the entry after this one must not look valid: its header is stale (older
     * generation) or zero, since each generation starts writing at offset 0 */
    pa_flush(t->a, at, need);
    if (!t->state_durable) pa_flush(t->a, &t->log->state, 8);
    pa_drain(t->a);
    t->state_durable = true;
    tx_range(t, p, n);
    return 0;
}

void pa_tx_new(pa_tx *t, void *p, size_t n) { tx_range(t, p, n); }

pa_ptr *pa_tx_alloc(pa_tx *t, size_t size)
{
    if (t->nalloc == PA_TX_SLOTS) { t->overflow = true; return NULL; }
    if (!t->state_durable) pa_persist(t->a, &t->log->state, 8);
    t->state_durable = true;
    pa_ptr *slot = &t->log->alloc[t->nalloc];
    if (pa_alloc(t->a, size, slot)) return NULL;
    t->nalloc++;
    return slot;
}

int pa_tx_free(pa_tx *t, pa_ptr p)
{
    if (t->nfree == PA_TX_SLOTS) { t->overflow = true; return -1; }
    pa_set_ptr(t->a, &t->log->frees[t->nfree++], p, false); /* a free_from source before: see pa_set_ptr */
    return 0;
}

/* After the commit point (state 2) or at recovery: drop the allocation slots
 * first (durably), then run the deferred frees in the order they were asked
 * for, then retire the generation. Dropping the slots first matters under a
 * conservative collector: an object allocated and freed in the same transaction
 * must not stay pointed to by its allocation slot once it is freed. */
static void tx_finish(pa_heap *a, pa_txlog *log, unsigned nalloc, unsigned nfree, size_t undo_used)
{
    /* past a durable commit point (state 2) the images go before the frees; else
     * after the final persist (a partly scrubbed log must not be rolled back) */
    bool scrub_first = log->state == 2;
    if (scrub_first) memset(log->undo, 0, undo_used);
    if (nalloc) { /* malloc_to destinations: cleared through pa_set_ptr */
        pa_ptr zero;
        memset(&zero, 0, sizeof zero);
        for (unsigned i = 0; i < nalloc; i++)
            if (!pa_isnull(a, log->alloc[i])) pa_set_ptr(a, &log->alloc[i], zero, false);
        pa_drain(a);
    }
    for (unsigned i = 0; i < nfree; i++)
        if (!pa_isnull(a, log->frees[i])) pa_free(a, &log->frees[i]);
    log->gen++;
    log->state = 0;
    pa_persist(a, log, 16);
    if (!scrub_first) memset(log->undo, 0, undo_used);
}

int pa_tx_commit(pa_tx *t)
{
    pa_heap *a = t->a;
    pa_txlog *log = t->log;
    if (t->overflow) return -1;
    if (!t->state_durable && !t->nranges && !t->nfree && !t->nalloc) { /* read-only: nothing was made durable */
        log->state = 0;
        return 0;
    }
    for (unsigned i = 0; i < t->nranges; i++) pa_flush(a, t->ranges[i].p, t->ranges[i].n);
    pa_drain(a); /* also drains the deferred-free slots pa_tx_free flushed */
    if (t->nfree || t->nalloc) {
        log->state = 2;
        pa_persist(a, &log->state, 8);
    }
    tx_finish(a, log, t->nalloc, t->nfree, t->undo_used);
    return 0;
}

int pa_tx_abort(pa_tx *t)
{
    /* the log holds what recovery would undo: the same rollback, in process */
    int rc = pa_tx_recover(t->a, t->log);
    t->undo_used = 0;
    t->nalloc = t->nfree = t->nranges = 0;
    t->overflow = false;
    t->state_durable = false;
    return rc < 0 ? -1 : 0;
}

int pa_tx_recover(pa_heap *a, pa_txlog *log)
{
    int what = 0;
    if (log->state == 1) {
        /* collect this generation's valid entries, undo them newest first */
        size_t offs[PA_TX_UNDO / sizeof(pa_undo_hdr)], n = 0, used = 0;
        while (used + sizeof(pa_undo_hdr) <= PA_TX_UNDO) {
            pa_undo_hdr e;
            memcpy(&e, log->undo + used, sizeof e);
            if (e.gen != log->gen || e.len == 0 || e.len > PA_TX_UNDO) break;
            size_t need = sizeof e + ((e.len + 7) & ~(size_t)7);
            if (used + need > PA_TX_UNDO || undo_check(&e, log->undo + used + sizeof e) != e.check) break;
            offs[n++] = used;
            used += need;
        }
        while (n-- > 0) {
            pa_undo_hdr e;
            memcpy(&e, log->undo + offs[n], sizeof e);
            void *dst = pa_at_off(a, e.off ^ PA_OFF_MASK);
            if (!dst) return -1;
            memcpy(dst, log->undo + offs[n] + sizeof e, e.len);
            pa_flush(a, dst, e.len);
        }
        pa_drain(a);
        for (unsigned i = 0; i < PA_TX_SLOTS; i++)
            if (!pa_isnull(a, log->alloc[i]) && pa_free(a, &log->alloc[i])) return -1;
        pa_ptr zero;
        memset(&zero, 0, sizeof zero);
        for (unsigned i = 0; i < PA_TX_SLOTS; i++)
            if (!pa_isnull(a, log->frees[i])) pa_set_ptr(a, &log->frees[i], zero, false);
        pa_drain(a);
        what = 1;
    } else if (log->state == 2) {
        what = 2;
    } else {
        bool busy = false;
        for (unsigned i = 0; i < PA_TX_SLOTS && !busy; i++) busy = !pa_isnull(a, log->alloc[i]) || !pa_isnull(a, log->frees[i]);
        if (!busy) { /* idle: entries of this generation cannot exist; scrub stale images */
            memset(log->undo, 0, PA_TX_UNDO);
            return 0;
        }
    }
    tx_finish(a, log, PA_TX_SLOTS, PA_TX_SLOTS, PA_TX_UNDO);
    return what;
}

/* ---- measurement driver ---- */

int pa_fail(pa_ctx *x, const char *fmt, ...)
{
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&mu);
    if (!x->msg[0]) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(x->msg, sizeof x->msg, fmt, ap);
        va_end(ap);
    }
    pthread_mutex_unlock(&mu);
    return -1;
}

void pa_rng(const pa_ctx *x, unsigned tid, nm_rng *r) { nm_rng_seed_stream(r, x->c->seed, tid + 1); }

typedef struct pa_thr {
    pa_ctx *x;
    unsigned tid;
    uint64_t app_ops;
    int err;
    pa_tcount c0, c1;
    uint64_t l0, n0, f0, l1, n1, f1;
    uint64_t cpu0, cpu1;
    bool began;
} pa_thr;

static __thread pa_thr *tl_thr;

static void count_now(uint64_t *l, uint64_t *n, uint64_t *f)
{
    *l = *n = *f = 0;
    if (pa_count_read) pa_count_read(l, n, f);
}

void pa_timed_begin(pa_ctx *x)
{
    /* the serial thread reads PMAlloc's counters between two barriers */
    if (pthread_barrier_wait(&x->bar) == PTHREAD_BARRIER_SERIAL_THREAD && x->a->h) {
        pmalloc_stats st;
        pmalloc_stats_get(x->a->h, &st);
        x->pm_flushes0 = st.flushes;
    }
    pthread_barrier_wait(&x->bar);
    pa_thr *t = tl_thr;
    if (t) {
        t->began = true;
        t->c0 = pa_tl;
        count_now(&t->l0, &t->n0, &t->f0);
        t->cpu0 = nm_thread_cpu_ns();
    }
    uint64_t now = nm_now_ns(), cur = __atomic_load_n(&x->t_start, __ATOMIC_RELAXED);
    while (now < cur && !__atomic_compare_exchange_n(&x->t_start, &cur, now, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
}

static void *pa_worker(void *arg)
{
    pa_thr *t = arg;
    pa_ctx *x = t->x;
    tl_thr = t;
    t->err = x->app->work(x, t->tid, &t->app_ops);
    if (!t->began) { pa_fail(x, "worker %u never started its timed phase", t->tid); t->err = -1; pa_timed_begin(x); }
    uint64_t now = nm_now_ns(), cur = __atomic_load_n(&x->t_end, __ATOMIC_RELAXED);
    while (now > cur && !__atomic_compare_exchange_n(&x->t_end, &cur, now, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
    t->cpu1 = nm_thread_cpu_ns();
    t->c1 = pa_tl;
    count_now(&t->l1, &t->n1, &t->f1);
    return NULL;
}

/* Write-fault every page of the pool (an atomic add of 0 changes no byte), so
 * timed runs do not measure the page cache's first-touch faults. */
static void pa_prefault(pa_heap *a, size_t size)
{
    char *base = NULL;
    if (a->k == PA_PMDK) base = (char *)a->pop;
    else if (a->k != PA_MALLOC) base = (char *)pmalloc_root_slot(a->h, 0) - 4096;
    if (!base) return;
    for (size_t off = 0; off + 8 <= size; off += 4096) __atomic_fetch_add((uint64_t *)(base + off), 0, __ATOMIC_RELAXED);
}

int pa_run_inproc(const pa_run_opts *o, pa_result *r)
{
    memset(r, 0, sizeof *r);
    r->lines = r->nt_lines = r->fences = -1;
    nm_peak_rss_reset();
    size_t rss0 = nm_current_rss_bytes();
    const pa_app *app = o->app;
    pa_cfg cfg = o->cfg;
    if (!app->mt) cfg.threads = 1;
    if (cfg.threads < 1) cfg.threads = 1;
    size_t pool = o->pool ? o->pool : app->pool_size(&cfg);
    pa_heap a;
    pa_open_opts oo = {.kind = o->kind, .dir = o->dir, .size = pool, .create = true, .persist = PMALLOC_PERSIST_CPU, .eadr = o->eadr};
    if (pa_open(&a, &oo, r->msg, sizeof r->msg)) return r->err = 1;
    r->pmem = o->kind == PA_PMDK ? pmem_is_pmem(a.root, 64) : o->kind != PA_MALLOC;
    if (o->prefault) pa_prefault(&a, pool);
    pa_ctx *x = calloc(1, sizeof *x);
    pa_thr *t = calloc(cfg.threads, sizeof *t);
    pthread_t *th = calloc(cfg.threads, sizeof *th);
    if (!x || !t || !th) {
        free(x); free(t); free(th);
        snprintf(r->msg, sizeof r->msg, "out of memory");
        return r->err = 1;
    }
    x->a = &a;
    x->c = &cfg;
    x->t_start = UINT64_MAX;
    x->app = app;
    int rc = app->init(x);
    if (!rc) {
        pthread_barrier_init(&x->bar, NULL, cfg.threads);
        unsigned started = 0;
        for (unsigned i = 0; i < cfg.threads; i++) {
            t[i] = (pa_thr){.x = x, .tid = i};
            if (pthread_create(&th[i], NULL, pa_worker, &t[i])) break;
            started++;
        }
        if (started < cfg.threads) { /* cannot happen short of resource exhaustion: give up loudly */
            fprintf(stderr, "pa_run: pthread_create failed\n");
            _exit(3);
        }
        for (unsigned i = 0; i < cfg.threads; i++) {
            pthread_join(th[i], NULL);
            if (t[i].err) rc = -1;
            r->app_ops += (double)t[i].app_ops;
            if (t[i].cpu1 > t[i].cpu0) r->cpu_seconds += (double)(t[i].cpu1 - t[i].cpu0) / 1e9;
            r->allocs += (double)(t[i].c1.allocs - t[i].c0.allocs);
            r->frees += (double)(t[i].c1.frees - t[i].c0.frees);
            if (pa_count_read) {
                if (r->lines < 0) r->lines = r->nt_lines = r->fences = 0;
                r->lines += (double)(t[i].l1 - t[i].l0);
                r->nt_lines += (double)(t[i].n1 - t[i].n0);
                r->fences += (double)(t[i].f1 - t[i].f0);
            }
        }
        pthread_barrier_destroy(&x->bar);
        if (x->t_end > x->t_start) r->seconds = (double)(x->t_end - x->t_start) / 1e9;
        if (a.h) {
            pmalloc_stats st;
            pmalloc_stats_get(a.h, &st);
            r->pm_lines = (double)(st.flushes - x->pm_flushes0);
        }
        if (!rc) rc = app->verify(x);
    }
    if (app->fini) app->fini(x);
    if (rc) {
        r->err = 1;
        snprintf(r->msg, sizeof r->msg, "%.20s on %.12s: %.200s", app->name, pa_kind_name(o->kind), x->msg[0] ? x->msg : "failed");
    }
    pa_close(&a);
    size_t pk = nm_peak_rss_hwm_bytes();
    r->peak_bytes = pk > rss0 ? (double)(pk - rss0) : 0;
    free(x);
    free(t);
    free(th);
    return r->err;
}

void pa_result_print(const pa_result *r)
{
    char msg[sizeof r->msg];
    snprintf(msg, sizeof msg, "%s", r->msg);
    for (char *c = msg; *c; c++)
        if (*c == '\n') *c = ' ';
    printf("PA_RESULT err=%d seconds=%.9g cpu=%.9g app_ops=%.17g allocs=%.17g frees=%.17g lines=%.17g nt_lines=%.17g fences=%.17g "
           "pm_lines=%.17g peak=%.17g pmem=%g msg=%s\n",
           r->err, r->seconds, r->cpu_seconds, r->app_ops, r->allocs, r->frees, r->lines, r->nt_lines, r->fences, r->pm_lines, r->peak_bytes,
           r->pmem, msg);
    fflush(stdout);
}

int pa_result_parse(const char *out, pa_result *r)
{
    memset(r, 0, sizeof *r);
    const char *at = out ? strstr(out, "PA_RESULT ") : NULL;
    if (!at) return -1;
    int used = 0;
    if (sscanf(at,
               "PA_RESULT err=%d seconds=%lf cpu=%lf app_ops=%lf allocs=%lf frees=%lf lines=%lf nt_lines=%lf fences=%lf pm_lines=%lf "
               "peak=%lf pmem=%lf msg=%n",
               &r->err, &r->seconds, &r->cpu_seconds, &r->app_ops, &r->allocs, &r->frees, &r->lines, &r->nt_lines, &r->fences, &r->pm_lines,
               &r->peak_bytes, &r->pmem, &used) != 12 ||
        used == 0)
        return -1;
    size_t k = 0;
    for (const char *c = at + used; *c && *c != '\n' && k + 1 < sizeof r->msg; c++) r->msg[k++] = *c;
    r->msg[k] = 0;
    return 0;
}
