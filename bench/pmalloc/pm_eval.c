/* Evaluation kit shared by the PMAlloc-vs-PMDK suites (see pm_eval.h).
 *
 * Fairness rules, the same for the three allocators:
 *  - every allocation publishes its pointer atomically into a persistent slot
 *    (pmalloc_malloc_to / pmemobj_alloc with the PMEMoid inside the pool), every
 *    free nulls it (pmalloc_free_from / pmemobj_free): the "allocate and link"
 *    interfaces both papers recommend for crash-consistent code;
 *  - pools are files in the same directory (page cache, no DAX here), persisted
 *    with CPU cache flushes: PMALLOC_PERSIST_CPU for PMAlloc, PMEM_IS_PMEM_FORCE=1
 *    for PMDK (checked: pmem_is_pmem on the pool is reported in every row);
 *  - each measurement runs in its own forked process, whose peak RSS growth
 *    (DRAM metadata + pool pages touched) is the allocator's peak memory. */
#include "pm_eval.h"

#include <errno.h>
#include <libpmem.h>
#include <libpmemobj.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nearmem/common.h"
#include "nearmem/pmalloc.h"

#define PE_LAYOUT "nearmem-eval"
#define PE_PMDK_FILE "pmdk.pool"

const char *pe_kind_name(pe_kind k)
{
    return k == PE_LOG ? "PMAlloc-LOG" : k == PE_GC ? "PMAlloc-GC" : "PMDK";
}

void pe_force_pmem(void) { setenv("PMEM_IS_PMEM_FORCE", "1", 1); }

void pe_cleanup(const char *dir)
{
    char f[700];
    pmalloc_remove(dir, NULL); /* the main file and any node files (virtual nodes) */
    snprintf(f, sizeof f, "%s/%s", dir, PE_PMDK_FILE);
    unlink(f);
    rmdir(dir);
}

/* ---- one allocator behind one interface ---- */

typedef struct pe_heap {
    pe_kind k;
    pmalloc_heap *h;
    PMEMobjpool *pop;
    char *slots; /* persistent array of pointers: pmalloc_ptr or PMEMoid */
    uint64_t nslots;
} pe_heap;

static int pe_fail(pe_result *r, const char *what)
{
    r->err = 1;
    snprintf(r->msg, sizeof r->msg, "%s: %s", what, nm_last_errmsg());
    return 1;
}

static int pe_open(pe_heap *e, const pe_params *p, uint64_t nslots, bool create, pe_result *r)
{
    memset(e, 0, sizeof *e);
    e->k = p->kind;
    e->nslots = nslots;
    if (p->kind == PE_PMDK) {
        char path[700];
        snprintf(path, sizeof path, "%s/%s", p->dir, PE_PMDK_FILE);
        e->pop = create ? pmemobj_create(path, PE_LAYOUT, p->pool_size, 0600) : pmemobj_open(path, PE_LAYOUT);
        if (!e->pop) {
            r->err = 1;
            snprintf(r->msg, sizeof r->msg, "pmemobj %s: %s", create ? "create" : "open", pmemobj_errormsg());
            return 1;
        }
        if (nslots) {
            PMEMoid root = pmemobj_root(e->pop, nslots * sizeof(PMEMoid));
            if (OID_IS_NULL(root)) {
                r->err = 1;
                snprintf(r->msg, sizeof r->msg, "pmemobj_root: %s", pmemobj_errormsg());
                return 1;
            }
            e->slots = pmemobj_direct(root);
            r->is_pmem = pmem_is_pmem(e->slots, 64);
        }
        return 0;
    }
    pmalloc_options o;
    pmalloc_options_default(&o);
    o.size = create ? p->pool_size : 0;
    o.create = create;
    o.model = p->kind == PE_GC ? PMALLOC_GC : PMALLOC_LOG;
    o.persist = PMALLOC_PERSIST_CPU;
    o.eadr = p->eadr ? PMALLOC_EADR_ON : PMALLOC_EADR_OFF;
    if (p->no_morph) o.morph_su = PMALLOC_MORPH_OFF;
    if (pmalloc_open(p->dir, &o, &e->h)) return pe_fail(r, "pmalloc_open");
    r->is_pmem = 1;
    if (nslots) {
        if (pmalloc_malloc_to(e->h, nslots * sizeof(pmalloc_ptr), pmalloc_root_slot(e->h, 0)))
            return pe_fail(r, "slot array");
        e->slots = pmalloc_direct(e->h, pmalloc_get_root(e->h, 0));
        memset(e->slots, 0, nslots * sizeof(pmalloc_ptr));
        pmalloc_persist(e->h, e->slots, nslots * sizeof(pmalloc_ptr));
    }
    return 0;
}

static void pe_close(pe_heap *e)
{
    if (e->pop) pmemobj_close(e->pop);
    if (e->h) pmalloc_close(e->h);
    e->pop = NULL;
    e->h = NULL;
}

static inline void *pe_ptr(pe_heap *e, uint64_t i);

/* Every object's first line is written after allocation, as an application
 * initialising its header would: otherwise an allocator that keeps metadata out
 * of the object (PMAlloc's extents) would never fault in the object's pages
 * while one with in-object headers (PMDK) would, and the comparison would
 * measure first-touch page faults of the file system. */
static inline int pe_alloc(pe_heap *e, uint64_t i, size_t size)
{
    int rc;
    if (e->k == PE_PMDK) rc = pmemobj_alloc(e->pop, &((PMEMoid *)e->slots)[i], size, 0, NULL, NULL);
    else rc = pmalloc_malloc_to(e->h, size, &((pmalloc_ptr *)e->slots)[i]) ? -1 : 0;
    if (rc == 0) memset(pe_ptr(e, i), 0x5a, 64);
    return rc;
}

static inline int pe_free(pe_heap *e, uint64_t i)
{
    if (e->k == PE_PMDK) {
        pmemobj_free(&((PMEMoid *)e->slots)[i]);
        return 0;
    }
    return pmalloc_free_from(e->h, &((pmalloc_ptr *)e->slots)[i]) ? -1 : 0;
}

static inline bool pe_used(const pe_heap *e, uint64_t i)
{
    if (e->k == PE_PMDK) return !OID_IS_NULL(((PMEMoid *)e->slots)[i]);
    return ((pmalloc_ptr *)e->slots)[i] != 0;
}

static inline void *pe_ptr(pe_heap *e, uint64_t i)
{
    if (e->k == PE_PMDK) return pmemobj_direct(((PMEMoid *)e->slots)[i]);
    return pmalloc_direct(e->h, ((pmalloc_ptr *)e->slots)[i]);
}

static inline void pe_persist(pe_heap *e, const void *a, size_t n)
{
    if (e->k == PE_PMDK) pmemobj_persist(e->pop, a, n);
    else pmalloc_persist(e->h, a, n);
}

/* ---- workloads ---- */

typedef struct pe_shared {
    pe_heap *e;
    const pe_params *p;
    pthread_barrier_t bar;
    /* the timed phase, first worker start to last worker end (atomics): the
     * workers read the clock, not the main thread, which may be descheduled
     * after the barrier while they run on both cores */
    uint64_t t_start, t_end;
    /* prod-con: one ring per pair, counters on their own lines */
    struct { uint64_t v; char pad[56]; } produced[64], consumed[64];
} pe_shared;

typedef struct pe_thr {
    pe_shared *s;
    unsigned tid;
    uint64_t ops;
    int err;
} pe_thr;

#define PE_RING 1024u

static size_t shb_size(nm_rng *r)
{
    double u = nm_rng_double(r);
    return 64 + (size_t)(936.0 * u * u * u); /* 64..1000 B, smaller ones more frequent */
}

static size_t dbms_size(nm_rng *r)
{
    /* Poisson-distributed between 32 KiB and 512 KiB (Sec. 8.2): 4 KiB steps around the middle */
    uint64_t k = nm_rng_poisson(r, 60.0);
    if (k > 120) k = 120;
    return (32u << 10) + (size_t)k * 4096u;
}

static bool pe_two_phase(const pe_params *p)
{
    return p->work == PE_LARSON_SMALL || p->work == PE_LARSON_LARGE || p->work == PE_KV || p->work == PE_DBMSTEST;
}

/* The barrier that starts the timed phase. */
static void pe_timed_start(pe_shared *s)
{
    pthread_barrier_wait(&s->bar);
    pthread_barrier_wait(&s->bar); /* the main thread probes the host (and marks) in between */
    uint64_t now = nm_now_ns(), cur = __atomic_load_n(&s->t_start, __ATOMIC_RELAXED);
    while (now < cur && !__atomic_compare_exchange_n(&s->t_start, &cur, now, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
}

static void *pe_worker(void *arg)
{
    pe_thr *t = arg;
    pe_shared *s = t->s;
    pe_heap *e = s->e;
    const pe_params *p = s->p;
    unsigned T = p->threads, tid = t->tid;
    nm_rng rng;
    nm_rng_seed_stream(&rng, p->seed, tid);
    uint64_t n = p->n, ops = 0;
    int err = 0;
    if (pe_two_phase(p)) pthread_barrier_wait(&s->bar);
    else pe_timed_start(s);
    switch (p->work) {
    case PE_THREADTEST: { /* i iterations: allocate n objects of 64 B, free them all */
        uint64_t base = tid * n;
        for (uint64_t it = 0; it < p->iters && !err; it++) {
            for (uint64_t i = 0; i < n && !err; i++) err = pe_alloc(e, base + i, 64);
            for (uint64_t i = 0; i < n && !err; i++) err = pe_free(e, base + i);
            ops += 2 * n;
        }
        break;
    }
    case PE_PRODCON: { /* pairs: even thread allocates 64 B objects, odd thread frees them */
        if (T == 1) { /* one thread: produce a ring-full, consume it */
            for (uint64_t done = 0; done < n && !err; done += PE_RING) {
                uint64_t m = n - done < PE_RING ? n - done : PE_RING;
                for (uint64_t i = 0; i < m && !err; i++) err = pe_alloc(e, i, 64);
                for (uint64_t i = 0; i < m && !err; i++) err = pe_free(e, i);
                ops += 2 * m;
            }
            break;
        }
        unsigned pair = tid / 2;
        uint64_t base = (uint64_t)pair * PE_RING, per = n / (T / 2);
        uint64_t *prod = &s->produced[pair].v, *cons = &s->consumed[pair].v;
        if (tid % 2 == 0) {
            for (uint64_t i = 0; i < per && !err; i++) {
                while (i - __atomic_load_n(cons, __ATOMIC_ACQUIRE) >= PE_RING) sched_yield();
                err = pe_alloc(e, base + i % PE_RING, 64);
                __atomic_store_n(prod, i + 1, __ATOMIC_RELEASE);
                ops++;
            }
            if (err) __atomic_store_n(prod, UINT64_MAX, __ATOMIC_RELEASE);
        } else {
            for (uint64_t i = 0; i < per && !err; i++) {
                uint64_t pv;
                while ((pv = __atomic_load_n(prod, __ATOMIC_ACQUIRE)) <= i) sched_yield();
                if (pv == UINT64_MAX) break;
                err = pe_free(e, base + i % PE_RING);
                __atomic_store_n(cons, i + 1, __ATOMIC_RELEASE);
                ops++;
            }
        }
        break;
    }
    case PE_SHBENCH: { /* per iteration: 100 objects of 64..1000 B, free the even ones,
                          refill them, free all in reverse order */
        uint64_t base = tid * 100u;
        for (uint64_t it = 0; it < p->iters && !err; it++) {
            for (unsigned i = 0; i < 100 && !err; i++) err = pe_alloc(e, base + i, shb_size(&rng));
            for (unsigned i = 0; i < 100 && !err; i += 2) err = pe_free(e, base + i);
            for (unsigned i = 0; i < 100 && !err; i += 2) err = pe_alloc(e, base + i, shb_size(&rng));
            for (unsigned i = 100; i-- > 0 && !err;) err = pe_free(e, base + i);
            ops += 300;
        }
        break;
    }
    case PE_LARSON_SMALL:
    case PE_LARSON_LARGE: { /* n slots per thread; each op frees a random slot and
                               refills it; after each round the threads hand their
                               slots on (objects freed by another thread than the
                               one that allocated them, as in Larson) */
        bool large = p->work == PE_LARSON_LARGE;
        size_t lo = large ? 32u << 10 : 64, hi = large ? 512u << 10 : 256;
        for (uint64_t i = 0; i < n && !err; i++) err = pe_alloc(e, tid * n + i, nm_rng_range(&rng, lo, hi));
        pe_timed_start(s);
        uint64_t per_round = p->ops / p->iters;
        for (uint64_t r = 0; r < p->iters; r++) {
            uint64_t base = ((tid + r) % T) * n;
            for (uint64_t k = 0; k < per_round && !err; k++) {
                uint64_t i = base + nm_rng_below(&rng, n);
                err = pe_free(e, i);
                if (!err) err = pe_alloc(e, i, nm_rng_range(&rng, lo, hi));
                ops += 2;
            }
            pthread_barrier_wait(&s->bar);
        }
        break;
    }
    case PE_DBMSTEST: { /* per iteration: n objects of 32..512 KiB (Poisson), delete 90% at
                           random; the survivors go two iterations later */
        uint64_t base = tid * 2 * n;
        uint64_t *idx = malloc(n * sizeof *idx);
        if (!idx) err = 1;
        /* warm-up iterations first (Sec. 8.2: 50 warm-up, 50 timed), uncounted */
        for (uint64_t it = 0; it < p->warm + p->iters; it++) {
            if (it == p->warm) { pe_timed_start(s); ops = 0; }
            if (err) continue; /* (still at the barrier with the others) */
            uint64_t h = base + (it % 2) * n;
            for (uint64_t i = 0; i < n && !err; i++)
                if (pe_used(e, h + i)) { err = pe_free(e, h + i); ops++; }
            for (uint64_t i = 0; i < n && !err; i++) { err = pe_alloc(e, h + i, dbms_size(&rng)); idx[i] = h + i; ops++; }
            nm_rng_shuffle(&rng, idx, n, sizeof *idx);
            for (uint64_t i = 0; i < n * 9 / 10 && !err; i++) { err = pe_free(e, idx[i]); ops++; }
        }
        if (p->iters == 0) pe_timed_start(s);
        free(idx);
        break;
    }
    case PE_KV: { /* a persistent hash index (one bucket per key of a fixed key universe,
                     2 keys per live pair) of 128 B key-value pairs: 50% inserts of an
                     absent key, 50% deletes of a present key (Sec. 8.5's FPTree mix) */
        uint64_t K = 2 * n, base = tid * K, npres = 0, nabs = K;
        uint64_t *pres = malloc(K * sizeof *pres), *abs_ = malloc(K * sizeof *abs_);
        if (!pres || !abs_) { free(pres); free(abs_); err = 1; pe_timed_start(s); break; }
        for (uint64_t i = 0; i < K; i++) abs_[i] = i;
        for (uint64_t q = 0; q < n + p->ops; q++) {
            if (q == n) pe_timed_start(s); /* warm-up done: the timed phase starts */
            if (err) continue;
            bool ins = q < n ? true : (nm_rng_u64(&rng) & 1) ? nabs > 0 : npres == 0;
            if (ins) {
                uint64_t j = nm_rng_below(&rng, nabs), key = abs_[j];
                abs_[j] = abs_[--nabs];
                err = pe_alloc(e, base + key, 128);
                if (err) continue;
                uint64_t *kv = pe_ptr(e, base + key);
                kv[0] = key;
                for (unsigned w = 1; w < 16; w++) kv[w] = key * 0x9e3779b97f4a7c15ull + w;
                pe_persist(e, kv, 128);
                pres[npres++] = key;
            } else {
                uint64_t j = nm_rng_below(&rng, npres), key = pres[j];
                pres[j] = pres[--npres];
                const uint64_t *kv = pe_ptr(e, base + key);
                if (!kv || kv[0] != key) { err = 2; continue; }
                err = pe_free(e, base + key);
                abs_[nabs++] = key;
            }
            if (q >= n) ops++;
        }
        if (p->ops == 0) pe_timed_start(s);
        free(pres);
        free(abs_);
        break;
    }
    case PE_FRAG: { /* Fragbench (Sec. 3, Table 1): Before: allocate n bytes from the first
                       distribution, deleting random live objects to keep live data <= ops;
                       Delete: delete a fraction of the live objects; After: as Before with
                       the second distribution */
        static const struct { unsigned b_lo, b_hi, del_pct, a_lo, a_hi; } W[4] = {
            {100, 100, 90, 130, 130}, {100, 150, 0, 200, 250}, {100, 150, 90, 200, 250}, {100, 200, 50, 1000, 2000}};
        unsigned w = (unsigned)(p->iters - 1) % 4;
        uint64_t M = p->ops / 100 + 1, nlive = 0, live_bytes = 0;
        uint64_t *live = malloc(M * sizeof *live), *fre = malloc(M * sizeof *fre);
        uint32_t *sz = malloc(M * sizeof *sz);
        if (!live || !fre || !sz) { free(live); free(fre); free(sz); err = 1; break; }
        uint64_t nfree = M;
        for (uint64_t i = 0; i < M; i++) fre[i] = M - 1 - i;
        for (int phase = 0; phase < 3 && !err; phase++) {
            if (phase == 1) {
                uint64_t del = nlive * W[w].del_pct / 100;
                for (uint64_t d = 0; d < del && !err; d++) {
                    uint64_t j = nm_rng_below(&rng, nlive), slot = live[j];
                    live[j] = live[--nlive];
                    err = pe_free(e, slot);
                    live_bytes -= sz[slot];
                    fre[nfree++] = slot;
                    ops++;
                }
                continue;
            }
            unsigned lo = phase == 0 ? W[w].b_lo : W[w].a_lo, hi = phase == 0 ? W[w].b_hi : W[w].a_hi;
            for (uint64_t allocated = 0; allocated < n && !err;) {
                uint32_t size = (uint32_t)nm_rng_range(&rng, lo, hi);
                while ((live_bytes + size > p->ops || nfree == 0) && nlive > 0 && !err) {
                    uint64_t j = nm_rng_below(&rng, nlive), slot = live[j];
                    live[j] = live[--nlive];
                    err = pe_free(e, slot);
                    live_bytes -= sz[slot];
                    fre[nfree++] = slot;
                    ops++;
                }
                uint64_t slot = fre[--nfree];
                err = err ? err : pe_alloc(e, slot, size);
                sz[slot] = size;
                live[nlive++] = slot;
                live_bytes += size;
                allocated += size;
                ops++;
            }
        }
        free(live);
        free(fre);
        free(sz);
        break;
    }
    default: err = 1;
    }
    uint64_t now = nm_now_ns(), cur = __atomic_load_n(&s->t_end, __ATOMIC_RELAXED);
    while (now > cur && !__atomic_compare_exchange_n(&s->t_end, &cur, now, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
    t->ops = ops;
    t->err = err;
    return NULL;
}

static uint64_t pe_nslots(const pe_params *p)
{
    switch (p->work) {
    case PE_THREADTEST: case PE_LARSON_SMALL: case PE_LARSON_LARGE: return p->threads * p->n;
    case PE_PRODCON: return (p->threads / 2 + 1) * (uint64_t)PE_RING;
    case PE_SHBENCH: return p->threads * 100u;
    case PE_DBMSTEST: return p->threads * 2 * p->n;
    case PE_KV: return p->threads * 4 * p->n;
    case PE_FRAG: return p->ops / 100 + 1;
    default: return 0;
    }
}

/* Timed part: the workers run between two barriers; Larson and KV time only
 * their steady phase (a second barrier after the fill / warm-up). */
static int pe_run_threads(pe_heap *e, const pe_params *p, pe_result *r)
{
    pe_shared *s = calloc(1, sizeof *s);
    pe_thr *t = calloc(p->threads, sizeof *t);
    pthread_t *th = calloc(p->threads, sizeof *th);
    if (!s || !t || !th) { free(s); free(t); free(th); return pe_fail(r, "out of memory"); }
    s->e = e;
    s->p = p;
    s->t_start = UINT64_MAX;
    pthread_barrier_init(&s->bar, NULL, p->threads + 1);
    for (unsigned i = 0; i < p->threads; i++) {
        t[i] = (pe_thr){s, i, 0, 0};
        pthread_create(&th[i], NULL, pe_worker, &t[i]);
    }
    struct rusage ru0, ru1;
    bool two_phase = pe_two_phase(p);
    pthread_barrier_wait(&s->bar);
    if (two_phase) pthread_barrier_wait(&s->bar); /* the workers fill between the two barriers */
    /* every worker waits at the second barrier of pe_timed_start: the CPUs are
     * free for a look at the host's cross-CPU handoff, which on a VM has slow
     * stretches that a 2-thread timed phase may fall into (docs/pmalloc.md,
     * "The slow mode, looked at again"); outside the timed phase and its CPU */
    r->handoff0 = nm_handoff_ns();
    getrusage(RUSAGE_SELF, &ru0);
    if (p->mark) {
        if (e->h) pmalloc_stats_reset_counters(e->h);
        pe_mark_begin();
    }
    pthread_barrier_wait(&s->bar);
    uint64_t t0 = nm_now_ns();
    if (p->work == PE_LARSON_SMALL || p->work == PE_LARSON_LARGE)
        for (uint64_t k = 0; k < p->iters; k++) pthread_barrier_wait(&s->bar);
    int err = 0;
    for (unsigned i = 0; i < p->threads; i++) {
        pthread_join(th[i], NULL);
        err |= t[i].err;
        r->ops += (double)t[i].ops;
    }
    uint64_t t1 = nm_now_ns();
    getrusage(RUSAGE_SELF, &ru1);
    r->cpu_seconds = (double)(ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec + ru1.ru_stime.tv_sec - ru0.ru_stime.tv_sec) +
                     (double)(ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec + ru1.ru_stime.tv_usec - ru0.ru_stime.tv_usec) / 1e6;
    r->minflt = (double)(ru1.ru_minflt - ru0.ru_minflt);
    r->majflt = (double)(ru1.ru_majflt - ru0.ru_majflt);
    r->nvcsw = (double)(ru1.ru_nvcsw - ru0.ru_nvcsw);
    r->nivcsw = (double)(ru1.ru_nivcsw - ru0.ru_nivcsw);
    r->handoff1 = nm_handoff_ns(); /* and right after it */
    if (p->mark) {
        pe_mark_end();
        if (e->h) {
            pmalloc_stats st;
            pmalloc_stats_get(e->h, &st);
            r->flushes = (double)st.flushes;
            r->fences = (double)st.fences;
        }
    }
    if (s->t_start != UINT64_MAX && s->t_end > s->t_start) { t0 = s->t_start; t1 = s->t_end; }
    r->seconds = (double)(t1 - t0) / 1e9;
    pthread_barrier_destroy(&s->bar);
    free(s);
    free(t);
    free(th);
    if (err) {
        r->err = 1;
        snprintf(r->msg, sizeof r->msg, "workload error: %s", e->k == PE_PMDK ? strerror(errno) : nm_last_errmsg());
    }
    return err;
}

/* Recovery: a linked list of p->n nodes of 64..128 B (Table 3). */
typedef struct pe_node_pm { pmalloc_ptr next; uint64_t seq; } pe_node_pm;
typedef struct pe_node_pmdk { PMEMoid next; uint64_t seq; } pe_node_pmdk;
typedef struct pe_root_pmdk { PMEMoid head; } pe_root_pmdk;

static int pe_recovery_build(const pe_params *p, pe_result *r)
{
    pe_heap e;
    if (pe_open(&e, p, 0, true, r)) return 1;
    nm_rng rng;
    nm_rng_seed(&rng, p->seed);
    uint64_t t0 = nm_now_ns();
    if (p->kind == PE_PMDK) {
        PMEMoid root = pmemobj_root(e.pop, sizeof(pe_root_pmdk));
        PMEMoid *dst = &((pe_root_pmdk *)pmemobj_direct(root))->head;
        r->is_pmem = pmem_is_pmem(pmemobj_direct(root), 64);
        for (uint64_t i = 0; i < p->n; i++) {
            if (pmemobj_alloc(e.pop, dst, nm_rng_range(&rng, 64, 128), 0, NULL, NULL)) {
                snprintf(r->msg, sizeof r->msg, "pmemobj_alloc: %s", pmemobj_errormsg());
                r->err = 1;
                return 1;
            }
            pe_node_pmdk *nd = pmemobj_direct(*dst);
            nd->next = OID_NULL;
            nd->seq = i;
            pmemobj_persist(e.pop, nd, sizeof *nd);
            dst = &nd->next;
        }
    } else {
        pmalloc_ptr *dst = pmalloc_root_slot(e.h, 0);
        for (uint64_t i = 0; i < p->n; i++) {
            if (pmalloc_malloc_to(e.h, nm_rng_range(&rng, 64, 128), dst)) return pe_fail(r, "malloc_to");
            pe_node_pm *nd = pmalloc_direct(e.h, *dst);
            nd->next = 0;
            nd->seq = i;
            pmalloc_persist(e.h, nd, sizeof *nd);
            dst = &nd->next;
        }
    }
    r->seconds = (double)(nm_now_ns() - t0) / 1e9;
    r->ops = (double)p->n;
    return 0; /* the caller exits without closing: the next open recovers */
}

static int pe_recovery_open(const pe_params *p, pe_result *r)
{
    pe_heap e;
    uint64_t t0 = nm_now_ns();
    if (pe_open(&e, p, 0, false, r)) return 1;
    uint64_t found = 0;
    if (p->kind == PE_PMDK) {
        /* PMDK rebuilds a zone's free lists lazily, at the first allocation that
         * touches it: one alloc + free is part of its recovery time */
        PMEMoid tmp = OID_NULL;
        if (pmemobj_alloc(e.pop, &tmp, 64, 0, NULL, NULL) == 0) pmemobj_free(&tmp);
        r->seconds = (double)(nm_now_ns() - t0) / 1e9;
        PMEMoid root = pmemobj_root(e.pop, sizeof(pe_root_pmdk));
        PMEMoid cur = ((pe_root_pmdk *)pmemobj_direct(root))->head;
        while (!OID_IS_NULL(cur)) {
            found++;
            cur = ((pe_node_pmdk *)pmemobj_direct(cur))->next;
        }
    } else {
        r->seconds = (double)(nm_now_ns() - t0) / 1e9;
        pmalloc_ptr cur = pmalloc_get_root(e.h, 0);
        while (cur) {
            found++;
            cur = ((pe_node_pm *)pmalloc_direct(e.h, cur))->next;
        }
        pmalloc_recovery_info ri;
        pmalloc_recovery_info_get(e.h, &ri);
        if (ri.was_clean) { r->err = 1; snprintf(r->msg, sizeof r->msg, "heap was closed cleanly: no recovery ran"); }
        r->ops = ri.wal_entries; /* the redo records after the checkpoint bound that the open replayed */
    }
    r->aux = (double)found;
    (void)pe_close; /* no clean close: the next open is again a post-crash open */
    return r->err;
}

/* Write-fault every page of the pool without changing a byte (an atomic add of
 * 0), so that timed runs do not measure the page cache's first-touch faults. */
static void pe_prefault(pe_heap *e, size_t size)
{
    char *base = e->k == PE_PMDK ? (char *)e->pop : (char *)pmalloc_root_slot(e->h, 0) - 4096;
    for (size_t off = 0; off + 8 <= size; off += 4096) __atomic_fetch_add((uint64_t *)(base + off), 0, __ATOMIC_RELAXED);
}

int pe_run_inproc(const pe_params *p, pe_result *r)
{
    memset(r, 0, sizeof *r);
    r->handoff0 = r->handoff1 = NAN; /* taken around a threaded timed phase only */
    /* reset this process's peak-RSS mark, so the peak is this run's */
    nm_peak_rss_reset();
    size_t rss0 = nm_current_rss_bytes();
    int rc;
    if (p->work == PE_RECOVERY_BUILD) rc = pe_recovery_build(p, r);
    else if (p->work == PE_RECOVERY_OPEN) rc = pe_recovery_open(p, r);
    else {
        pe_heap e;
        rc = pe_open(&e, p, pe_nslots(p), true, r);
        if (!rc && p->prefault) pe_prefault(&e, p->pool_size);
        if (!rc) rc = pe_run_threads(&e, p, r);
        if (!rc && e.h) {
            pmalloc_stats st;
            pmalloc_stats_get(e.h, &st);
            r->aux = (double)st.morphs;
        }
        if (!rc) pe_close(&e);
    }
    size_t pk = nm_peak_rss_hwm_bytes();
    r->peak_bytes = pk > rss0 ? (double)(pk - rss0) : 0;
    return rc;
}

int pe_run(const pe_params *p, pe_result *r)
{
    if (p->pmdk_noflush) {
        static const char *const env[] = {"PMEM_NO_FLUSH=1", NULL};
        mkdir(p->dir, 0700);
        return pe_run_exec(p, r, NULL, env, NULL, 0);
    }
    memset(r, 0, sizeof *r);
    mkdir(p->dir, 0700);
    int fd[2];
    if (pipe(fd)) return 1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(fd[0]);
        close(fd[1]);
        snprintf(r->msg, sizeof r->msg, "fork: %s", strerror(errno));
        return r->err = 1;
    }
    if (pid == 0) {
        close(fd[0]);
        pe_result cr;
        memset(&cr, 0, sizeof cr);
        pe_run_inproc(p, &cr);
        ssize_t w = write(fd[1], &cr, sizeof cr);
        _exit(w == (ssize_t)sizeof cr ? 0 : 3); /* no clean close: recovery runs need it */
    }
    close(fd[1]);
    size_t got = 0;
    while (got < sizeof *r) {
        ssize_t n = read(fd[0], (char *)r + got, sizeof *r - got);
        if (n <= 0) break;
        got += (size_t)n;
    }
    close(fd[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    if (got != sizeof *r) {
        memset(r, 0, sizeof *r);
        r->err = 1;
        snprintf(r->msg, sizeof r->msg, "child died (status %d)", st);
    }
    return r->err;
}

/* ---- the helper process: markers, argv form, exec ---- */

__attribute__((noinline)) void pe_mark_begin(void) { __asm__ volatile("" ::: "memory"); }
__attribute__((noinline)) void pe_mark_end(void) { __asm__ volatile("" ::: "memory"); }

const char *pe_helper_path(void)
{
    static char path[4200];
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return NULL;
    self[n] = 0;
    char *slash = strrchr(self, '/');
    if (!slash) return NULL;
    *slash = 0;
    snprintf(path, sizeof path, "%s/nearmem-pmalloc-evalrun", self);
    return access(path, X_OK) == 0 ? path : NULL;
}

int pe_params_format(const pe_params *p, char *buf, size_t cap)
{
    int n = snprintf(buf, cap, "work=%d kind=%d threads=%u n=%llu iters=%llu warm=%llu ops=%llu seed=%llu pool=%zu prefault=%d eadr=%d "
                               "no_morph=%d mark=%d",
                     (int)p->work, (int)p->kind, p->threads, (unsigned long long)p->n, (unsigned long long)p->iters,
                     (unsigned long long)p->warm,
                     (unsigned long long)p->ops, (unsigned long long)p->seed, p->pool_size, p->prefault, p->eadr,
                     p->no_morph, p->mark);
    return n > 0 && (size_t)n < cap ? 0 : -1;
}

int pe_params_parse(int argc, char **argv, pe_params *p)
{
    memset(p, 0, sizeof *p);
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *eq = strchr(a, '=');
        if (!eq) return -1;
        size_t kl = (size_t)(eq - a);
        const char *v = eq + 1;
        unsigned long long u = strtoull(v, NULL, 10);
#define PE_KEY(k) (kl == sizeof(k) - 1 && strncmp(a, k, kl) == 0)
        if (PE_KEY("work")) p->work = (pe_work)u;
        else if (PE_KEY("kind")) p->kind = (pe_kind)u;
        else if (PE_KEY("threads")) p->threads = (unsigned)u;
        else if (PE_KEY("n")) p->n = u;
        else if (PE_KEY("iters")) p->iters = u;
        else if (PE_KEY("warm")) p->warm = u;
        else if (PE_KEY("ops")) p->ops = u;
        else if (PE_KEY("seed")) p->seed = u;
        else if (PE_KEY("pool")) p->pool_size = (size_t)u;
        else if (PE_KEY("prefault")) p->prefault = (int)u;
        else if (PE_KEY("eadr")) p->eadr = (int)u;
        else if (PE_KEY("no_morph")) p->no_morph = (int)u;
        else if (PE_KEY("mark")) p->mark = (int)u;
        else if (PE_KEY("dir")) snprintf(p->dir, sizeof p->dir, "%s", v);
        else return -1;
#undef PE_KEY
    }
    return p->threads >= 1 && p->kind < PE_NKINDS && p->dir[0] ? 0 : -1;
}

void pe_result_print(const pe_result *r)
{
    char msg[sizeof r->msg];
    snprintf(msg, sizeof msg, "%s", r->msg);
    for (char *c = msg; *c; c++)
        if (*c == '\n') *c = ' ';
    printf("PE_RESULT err=%d seconds=%.9g ops=%.17g peak=%.17g aux=%.17g is_pmem=%.17g flushes=%.17g fences=%.17g "
           "cpu=%.9g minflt=%.17g majflt=%.17g nvcsw=%.17g nivcsw=%.17g handoff0=%.9g handoff1=%.9g msg=%s\n",
           r->err, r->seconds, r->ops, r->peak_bytes, r->aux, r->is_pmem, r->flushes, r->fences, r->cpu_seconds, r->minflt,
           r->majflt, r->nvcsw, r->nivcsw, r->handoff0, r->handoff1, msg);
    fflush(stdout);
}

int pe_result_parse(const char *out, pe_result *r)
{
    memset(r, 0, sizeof *r);
    const char *at = out ? strstr(out, "PE_RESULT ") : NULL;
    if (!at) return -1;
    int used = 0;
    if (sscanf(at, "PE_RESULT err=%d seconds=%lf ops=%lf peak=%lf aux=%lf is_pmem=%lf flushes=%lf fences=%lf %n", &r->err,
               &r->seconds, &r->ops, &r->peak_bytes, &r->aux, &r->is_pmem, &r->flushes, &r->fences, &used) != 8 ||
        used == 0)
        return -1;
    at += used;
    used = 0; /* the timed phase's rusage figures are optional (older helpers print none) */
    if (sscanf(at, "cpu=%lf minflt=%lf majflt=%lf nvcsw=%lf nivcsw=%lf %n", &r->cpu_seconds, &r->minflt, &r->majflt, &r->nvcsw,
               &r->nivcsw, &used) == 5 && used > 0)
        at += used;
    used = 0; /* the host probes around the timed phase are optional too (nan when not taken) */
    if (sscanf(at, "handoff0=%lf handoff1=%lf %n", &r->handoff0, &r->handoff1, &used) == 2 && used > 0) at += used;
    else r->handoff0 = r->handoff1 = NAN;
    used = 0;
    if (sscanf(at, "msg=%n", &used) != 0 || used == 0) return -1;
    size_t k = 0;
    for (const char *c = at + used; *c && *c != '\n' && k + 1 < sizeof r->msg; c++) r->msg[k++] = *c;
    r->msg[k] = 0;
    return 0;
}

int pe_run_exec(const pe_params *p, pe_result *r, const char *const *prefix, const char *const *env_add, char *out,
                size_t outcap)
{
    memset(r, 0, sizeof *r);
    r->err = 1;
    const char *helper = pe_helper_path();
    if (!helper) {
        snprintf(r->msg, sizeof r->msg, "helper nearmem-pmalloc-evalrun not found next to this executable");
        return 1;
    }
    char pbuf[1024], dirarg[600];
    if (pe_params_format(p, pbuf, sizeof pbuf)) return 1;
    snprintf(dirarg, sizeof dirarg, "dir=%s", p->dir);
    char *argv[64];
    int ac = 0;
    for (unsigned i = 0; prefix && prefix[i] && ac < 40; i++) argv[ac++] = (char *)prefix[i];
    argv[ac++] = (char *)helper;
    for (char *tok = strtok(pbuf, " "); tok && ac < 62; tok = strtok(NULL, " ")) argv[ac++] = tok;
    argv[ac++] = dirarg;
    argv[ac] = NULL;
    int fd[2];
    if (pipe(fd)) return 1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(fd[0]);
        close(fd[1]);
        return 1;
    }
    if (pid == 0) {
        close(fd[0]);
        dup2(fd[1], 1);
        dup2(fd[1], 2);
        close(fd[1]);
        for (unsigned i = 0; env_add && env_add[i]; i++) putenv((char *)env_add[i]);
        execvp(argv[0], argv);
        _exit(127);
    }
    close(fd[1]);
    size_t cap = 1 << 16, got = 0;
    char *buf = malloc(cap);
    bool oom = !buf;
    for (;;) { /* drain the pipe even without memory, so the child never blocks */
        if (!oom && got + 4096 > cap) {
            char *nb = realloc(buf, cap * 2);
            if (nb) { buf = nb; cap *= 2; }
            else oom = true;
        }
        ssize_t n = oom ? read(fd[0], pbuf, sizeof pbuf) : read(fd[0], buf + got, cap - got - 1);
        if (n <= 0) break;
        if (!oom) got += (size_t)n;
    }
    close(fd[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    if (oom) {
        free(buf);
        snprintf(r->msg, sizeof r->msg, "out of memory reading the helper's output");
        return 1;
    }
    buf[got] = 0;
    if (out && outcap) snprintf(out, outcap, "%s", buf);
    if (pe_result_parse(buf, r)) {
        r->err = 1;
        snprintf(r->msg, sizeof r->msg, "%s: no result (exit status %d)", argv[0], st);
    }
    free(buf);
    return r->err;
}
