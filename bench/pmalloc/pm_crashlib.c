#include "pm_crashlib.h"

#include "nearmem/common/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PMC_MAGIC 0x4f424a4543544f4bull
#define PMC_SIZEX 0xa5a5a5a5a5a5a5a5ull

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

/* next changes after initialisation: not covered */
static uint64_t obj_check(const pmc_obj *o) { return mix(o->self ^ mix(o->sizex ^ mix(o->seed))); }

static pmalloc_ptr *root(pmalloc_heap *h, unsigned i) { return pmalloc_root_slot(h, PMC_ROOT0 + i); }

static __thread uint64_t tl_steps; /* this thread's workload steps (size phases) */

static size_t pick_size(nm_rng *r, const pmc_config *cfg)
{
    if (nm_rng_below(r, 100) < cfg->large_pct) return (size_t)nm_rng_range(r, PMALLOC_SMALL_MAX + 1, cfg->large_max);
    if (cfg->size_phase) { /* one band of classes at a time */
        static const unsigned lo[] = {56, 100, 200, 400, 64, 300}, hi[] = {64, 128, 256, 600, 96, 400};
        unsigned b = (unsigned)(tl_steps / cfg->size_phase % 6);
        return (size_t)nm_rng_range(r, lo[b], hi[b]);
    }
    return (size_t)nm_rng_range(r, sizeof(pmc_obj) + 8, 600);
}

/* Set while this thread persists its own object data (crash points there are
 * counted apart: they are not allocator flushes). */
static __thread int g_user_persist;

/* Payload words are random 64-bit values: they never look like heap offsets. */
static void fill(pmalloc_heap *h, pmc_obj *o, size_t size, uint64_t seed, pmalloc_ptr self)
{
    uint64_t *pl = (uint64_t *)(o + 1);
    size_t words = (size - sizeof *o) / 8;
    uint64_t s = seed;
    for (size_t i = 0; i < words; i++) pl[i] = mix(s + i) | 1ull << 63;
    o->self = self;
    o->sizex = size ^ PMC_SIZEX;
    o->seed = seed;
    o->next = 0;
    o->check = obj_check(o);
    g_user_persist = 1;
    pmalloc_persist(h, o, size);
    g_user_persist = 0;
    o->magic = PMC_MAGIC;
    pmalloc_persist(h, &o->magic, sizeof o->magic);
}

static bool intact(pmalloc_heap *h, pmalloc_ptr p, const pmc_obj *o, size_t usable)
{
    if (o->magic != PMC_MAGIC || o->self != p || o->check != obj_check(o)) return false;
    size_t size = o->sizex ^ PMC_SIZEX;
    if (size < sizeof *o || size > usable) return false;
    const uint64_t *pl = (const uint64_t *)(o + 1);
    for (size_t i = 0; i < (size - sizeof *o) / 8; i++)
        if (pl[i] != (mix(o->seed + i) | 1ull << 63)) return false;
    NM_UNUSED(h);
    return true;
}

static void scrub(pmalloc_heap *h, pmc_obj *o)
{
    o->magic = 0;
    pmalloc_persist(h, &o->magic, sizeof o->magic);
}

/* Slot that points to the last object of list i (root or a next field), and its length. */
static pmalloc_ptr *tail_slot(pmalloc_heap *h, unsigned i, unsigned *len)
{
    pmalloc_ptr *slot = root(h, i);
    *len = 0;
    while (*slot) {
        pmc_obj *o = pmalloc_direct(h, *slot);
        (*len)++;
        if (o->magic != PMC_MAGIC || !o->next || *len > PMC_MAXLEN * 4) break; /* unfinished objects end a list */
        slot = &o->next;
    }
    return slot;
}

int pmc_step(pmalloc_heap *h, nm_rng *r, const pmc_config *cfg)
{
    unsigned lo = cfg->list_n ? cfg->list_lo : 0, nl = cfg->list_n ? cfg->list_n : PMC_NLISTS;
    unsigned i = lo + (unsigned)nm_rng_below(r, nl), len;
    unsigned what = (unsigned)nm_rng_below(r, 100);
    nm_err e = NM_OK;
    if (cfg->vnodes > 1 && nm_rng_below(r, 4) == 0 && (e = pmalloc_numa_set_node(h, (int)nm_rng_below(r, cfg->vnodes)))) return (int)e;
    if (cfg->locks) pthread_mutex_lock(&cfg->locks[i]);
    pmalloc_ptr *slot = tail_slot(h, i, &len);
    tl_steps++;
    if (what < 8 && len > 0) { /* move list i to an empty root */
        unsigned j = lo + (unsigned)nm_rng_below(r, nl);
        bool locked = j != i && (!cfg->locks || pthread_mutex_trylock(&cfg->locks[j]) == 0);
        if (locked && pmalloc_get_root(h, PMC_ROOT0 + j) == 0) {
            e = pmalloc_set_root(h, PMC_ROOT0 + j, pmalloc_get_root(h, PMC_ROOT0 + i));
            if (!e) e = pmalloc_set_root(h, PMC_ROOT0 + i, 0);
        }
        if (locked && cfg->locks) pthread_mutex_unlock(&cfg->locks[j]);
    } else if (what < 55 && len < PMC_MAXLEN) { /* append */
        pmalloc_ptr *dst = len == 0 ? slot : &((pmc_obj *)pmalloc_direct(h, *slot))->next;
        size_t size = pick_size(r, cfg);
        e = pmalloc_malloc_to(h, size, dst);
        if (!e) fill(h, pmalloc_direct(h, *dst), size, nm_rng_u64(r), *dst);
    } else if (len > 0) { /* free the tail */
        scrub(h, pmalloc_direct(h, *slot));
        e = pmalloc_free_from(h, slot);
    }
    if (cfg->locks) pthread_mutex_unlock(&cfg->locks[i]);
    return e == NM_ENOMEM ? 0 : (int)e;
}

int pmc_repair(pmalloc_heap *h)
{
    for (unsigned i = 0; i < PMC_NLISTS; i++) {
        pmalloc_ptr p = pmalloc_get_root(h, PMC_ROOT0 + i);
        for (unsigned j = 0; p && j < i; j++)
            if (pmalloc_get_root(h, PMC_ROOT0 + j) == p) { /* a move cut short by the crash */
                pmalloc_set_root(h, PMC_ROOT0 + i, 0);
                break;
            }
    }
    for (unsigned i = 0; i < PMC_NLISTS; i++) {
        unsigned len;
        pmalloc_ptr *slot = tail_slot(h, i, &len);
        if (!len) continue;
        pmc_obj *o = pmalloc_direct(h, *slot);
        if (o->magic != PMC_MAGIC) { /* allocated, not initialised before the crash */
            nm_err e = pmalloc_free_from(h, slot);
            if (e) return (int)e;
        }
    }
    return 0;
}

/* ---- checker ---- */

typedef struct span { uint64_t p, n; } span;
typedef struct spans { span *v; size_t n, cap; } spans;

static void spans_add(spans *s, uint64_t p, uint64_t n)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 256;
        s->v = realloc(s->v, s->cap * sizeof *s->v);
    }
    s->v[s->n++] = (span){p, n};
}

static int collect(void *arg, pmalloc_ptr p, size_t usable)
{
    spans_add(arg, p, usable);
    return 0;
}

static int cmp_span(const void *a, const void *b)
{
    const span *x = a, *y = b;
    return x->p < y->p ? -1 : x->p > y->p;
}

#define FAIL(...) do { snprintf(res->msg, sizeof res->msg, __VA_ARGS__); ok = false; goto out; } while (0)

bool pmc_check(pmalloc_heap *h, bool full, pmc_result *res)
{
    pmalloc_stats st;
    pmalloc_stats_get(h, &st);
    /* GC recovery marks conservatively: it may keep what a stale word points to */
    bool leakcheck = st.model == PMALLOC_LOG;
    memset(res, 0, sizeof *res);
    bool ok = true;
    spans alloc = {0}, reach = {0};
    if (pmalloc_check(h)) FAIL("pmalloc_check: %s", nm_last_errmsg());
    pmalloc_walk(h, collect, &alloc);
    for (size_t i = 1; i < alloc.n; i++)
        if (alloc.v[i - 1].p + alloc.v[i - 1].n > alloc.v[i].p)
            FAIL("allocated objects overlap at %#llx", (unsigned long long)alloc.v[i].p);
    for (unsigned i = 0; i < PMALLOC_NROOTS; i++) {
        pmalloc_ptr p = pmalloc_get_root(h, i);
        if (p && (i < PMC_ROOT0 || i >= PMC_ROOT0 + PMC_NLISTS)) FAIL("root %u is set outside the workload's roots", i);
        unsigned depth = 0;
        while (p) {
            size_t us = pmalloc_usable_size(h, p);
            if (!us) FAIL("root %u: object %#llx at depth %u is reachable but not allocated", i, (unsigned long long)p, depth);
            pmc_obj *o = pmalloc_direct(h, p);
            spans_add(&reach, p, us);
            if (o->magic != PMC_MAGIC) {
                /* a last object whose initialisation the crash cut short */
                res->uninit++;
                break;
            }
            if (!intact(h, p, o, us)) FAIL("root %u: object %#llx at depth %u is damaged", i, (unsigned long long)p, depth);
            if (++depth > PMC_MAXLEN * 4) FAIL("root %u: list too long (cycle?)", i);
            p = o->next;
        }
    }
    if (reach.n) qsort(reach.v, reach.n, sizeof *reach.v, cmp_span);
    size_t u = 0;
    for (size_t i = 0; i < reach.n; i++) /* lists moved between roots appear twice */
        if (!u || reach.v[i].p != reach.v[u - 1].p) reach.v[u++] = reach.v[i];
    reach.n = u;
    res->reachable = reach.n;
    res->allocated = alloc.n;
    for (size_t i = 0, j = 0; i < alloc.n && leakcheck; i++) {
        while (j < reach.n && reach.v[j].p < alloc.v[i].p) j++;
        if (j >= reach.n || reach.v[j].p != alloc.v[i].p)
            FAIL("leak: %#llx (%llu bytes) is allocated but unreachable", (unsigned long long)alloc.v[i].p,
                 (unsigned long long)alloc.v[i].n);
    }
    if (alloc.n != reach.n && leakcheck) FAIL("%zu reachable objects, %zu allocated", reach.n, alloc.n);
    if (full) { /* everything free can be allocated again, and given back */
        pmalloc_stats st0, st1;
        pmalloc_stats_get(h, &st0);
        pmalloc_ptr *anchor = pmalloc_root_slot(h, 1);
        if (*anchor) FAIL("reuse anchor root is busy");
        pmalloc_ptr *dst = anchor;
        uint64_t got = 0;
        /* extents first (the whole free-extent space in 16 KiB pieces), then slab blocks */
        size_t sizes[] = {16384, 512, 64};
        for (size_t k = 0; k < 3; k++) {
            for (;;) {
                nm_err e = pmalloc_malloc_to(h, sizes[k], dst);
                if (e == NM_ENOMEM) break;
                if (e) FAIL("reuse: malloc_to(%zu): %s", sizes[k], nm_last_errmsg());
                uint64_t *o = pmalloc_direct(h, *dst);
                o[0] = 0;
                got += pmalloc_usable_size(h, *dst);
                dst = (pmalloc_ptr *)o;
            }
        }
        /* the 16 KiB pieces alone must take every free extent's whole 16 KiB multiples */
        if (got < st0.free_bytes / 2) FAIL("reuse: only %llu bytes allocatable, %llu were free", (unsigned long long)got,
                                           (unsigned long long)st0.free_bytes);
        while (*anchor) { /* free the chain from the head: the next pointer is in the object */
            pmalloc_ptr next = *(pmalloc_ptr *)pmalloc_direct(h, *anchor);
            nm_err e = pmalloc_free_from(h, anchor);
            if (e) FAIL("reuse: free_from: %s", nm_last_errmsg());
            pmalloc_set_root(h, 1, next);
        }
        pmalloc_stats_get(h, &st1);
        if (st1.bytes_live != st0.bytes_live) FAIL("reuse: live bytes %llu -> %llu", (unsigned long long)st0.bytes_live, (unsigned long long)st1.bytes_live);
        if (pmalloc_check(h)) FAIL("after reuse: %s", nm_last_errmsg());
    }
out:
    free(alloc.v);
    free(reach.v);
    return ok;
}

/* ---- crash campaigns ---- */

#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

void pmc_run_defaults(pmc_run *r, pmalloc_model m, const char *tmpdir)
{
    memset(r, 0, sizeof *r);
    r->model = m;
    r->heap_size = 4u << 20;
    r->points = 100;
    r->gap = 40;
    r->evict_pct = 10;
    r->recovery_crash_pct = 25;
    r->seed = 1;
    r->cfg.large_pct = 30;
    r->log_chunks = 6; /* 720 entries: the log GC runs every few hundred operations */
    r->cfg.large_max = 24 * 1024;
    r->tmpdir = tmpdir;
}

static void fail_note(pmc_run *r, const char *fmt, const char *a, const char *b)
{
    if (getenv("PMC_STOP")) { /* debugging: stop at the first failure (PMC_KEEP holds its image) */
        fprintf(stderr, fmt, a, b);
        fprintf(stderr, "\n");
        _exit(9);
    }
    r->failures++;
    if (!r->first_failure[0]) snprintf(r->first_failure, sizeof r->first_failure, fmt, a, b);
}

static pmalloc_options run_opts(const pmc_run *r, pmalloc_persist_mode pm, bool create)
{
    pmalloc_options o;
    pmalloc_options_default(&o);
    o.size = r->heap_size;
    o.model = r->model;
    o.persist = pm;
    o.eadr = PMALLOC_EADR_OFF;
    o.narenas = 1; /* one thread: one arena keeps slab space small */
    o.create = create;
    o.log_chunks = r->log_chunks;
    o.decay_ms = 1; /* process crashes also hit extents being punched out of the file */
    o.morph_su = r->morph_su;
    o.numa_vnodes = r->vnodes;
    if (r->vnodes > 1) o.numa_log_entries = 16; /* segment switches (and their syncs) under crashes */
    return o;
}

/* The workload's checkpoint_records: r's, or one of four by k (round, child) */
static unsigned ckpt_pick(const pmc_run *r, uint64_t k)
{
    static const unsigned v[4] = {64, 256, 1024, 0};
    return r->ckpt_records ? r->ckpt_records : v[k % 4];
}

static void rm_heap(const char *dir)
{
    (void)pmalloc_remove(dir, NULL); /* with virtual nodes: the node files too */
}

/* Open the heap in dir (recovering it), check, close cleanly. */
static void verify_dir(pmc_run *r, const char *dir, bool full, const char *what)
{
    const char *keep = getenv("PMC_KEEP"); /* debugging: a copy of every image before it is recovered */
    if (keep && *keep) {
        char cmd[2048];
        snprintf(cmd, sizeof cmd, "rm -rf %s; cp -r %s %s", keep, dir, keep);
        if (system(cmd) != 0) fprintf(stderr, "PMC_KEEP: copy failed\n");
    }
    pmalloc_options o = run_opts(r, PMALLOC_PERSIST_CPU, false);
    pmalloc_heap *h;
    nm_err e = pmalloc_open(dir, &o, &h);
    if (e) { fail_note(r, "%s: open failed: %s", what, nm_last_errmsg()); return; }
    pmalloc_numa_stats ns;
    if (pmalloc_numa_stats_get(h, &ns) == NM_OK && ns.replayed) {
        r->replay_points++;
        r->replayed_entries += ns.replayed;
    }
    pmc_result res;
    if (!pmc_check(h, full, &res)) fail_note(r, "%s: %s", what, res.msg);
    pmalloc_close(h);
}

typedef struct sim_ctx {
    pmc_run *r;
    pthread_mutex_t mu; /* one crash point at a time (hooks of several threads, the crasher) */
    nm_rng rng;         /* under mu */
    uint64_t next_point;
    char s1[512], s2[512];
    /* nested: crash during recovery */
    uint64_t rec_point;
    bool rec_fired;
    uint64_t flushes; /* flushes of the live heap this round (atomic) */
    uint64_t alloc_flushes; /* ... of allocator metadata (under mu; every flush under a trylock that succeeded) */
    int phase;        /* PH_*: what the live heap is doing (atomic) */
    uint64_t create_point, close_mod;
    unsigned running; /* workload threads running (atomic) */
    bool stop;        /* workers and crasher stop (atomic) */
} sim_ctx;

enum { PH_CREATE, PH_RUN, PH_CLOSE, PH_DONE };

static void rec_hook(void *arg, pmalloc_heap *h, uint64_t no)
{
    sim_ctx *c = arg;
    if (c->rec_fired || no != c->rec_point) return;
    c->rec_fired = true;
    if (pmalloc_sim_snapshot(h, c->s2, nm_rng_u64(&c->rng), c->r->evict_pct)) fail_note(c->r, "snapshot: %s%s", nm_last_errmsg(), "");
}

/* A crash image taken inside a create: no heap (the file never got its name),
 * and a create after it works and gives an empty, consistent heap. */
static void verify_create_image(pmc_run *r, const char *dir)
{
    pmalloc_options o = run_opts(r, PMALLOC_PERSIST_CPU, false);
    pmalloc_heap *h;
    nm_err e = pmalloc_open(dir, &o, &h);
    if (e == NM_OK) { /* committed just before the crash point: a whole heap */
        pmc_result res;
        if (!pmc_check(h, false, &res)) fail_note(r, "crash in create: %s%s", res.msg, "");
        pmalloc_close(h);
        return;
    }
    if (e != NM_ENOENT) { fail_note(r, "crash in create: open says %s%s", nm_last_errmsg(), ""); return; }
    o.create = true;
    if ((e = pmalloc_open(dir, &o, &h))) { fail_note(r, "crash in create: the next create failed: %s%s", nm_last_errmsg(), ""); return; }
    pmalloc_stats st;
    pmalloc_stats_get(h, &st);
    pmc_result res;
    if (st.objects_live != 0) fail_note(r, "crash in create: the new heap is not empty%s%s", "", "");
    else if (!pmc_check(h, false, &res)) fail_note(r, "crash in create: %s%s", res.msg, "");
    pmalloc_close(h);
}

/* Take a crash point of the live heap now (mu held). */
static void crash_point(sim_ctx *c, pmalloc_heap *h, int phase)
{
    pmc_run *r = c->r;
    unsigned ms = pmalloc_morph_step(h);
    if (ms < 4) r->morph_points[ms]++;
    pmalloc_numa_stats ns;
    if (pmalloc_numa_stats_get(h, &ns) == NM_OK && (ns.pending || ns.pending_extents)) r->between_phases++;
    if (__atomic_load_n(&c->running, __ATOMIC_RELAXED) > 1) r->mt_points++;
    if (g_user_persist) r->user_flush_points++;
    /* half the points also let unflushed lines reach the image early (evictions) */
    unsigned evict = nm_rng_below(&c->rng, 2) ? r->evict_pct : 0;
    if (pmalloc_sim_snapshot(h, c->s1, nm_rng_u64(&c->rng), evict)) { fail_note(r, "snapshot: %s%s", nm_last_errmsg(), ""); return; }
    r->tried++;
    if (phase == PH_CREATE) {
        r->create_points++;
        verify_create_image(r, c->s1);
        return;
    }
    if (phase == PH_CLOSE) r->close_points++;
    if (nm_rng_below(&c->rng, 100) < r->recovery_crash_pct) {
        /* recover the image under simulation and crash that recovery */
        pmalloc_options o = run_opts(r, PMALLOC_PERSIST_SIM, false);
        c->rec_fired = false;
        c->rec_point = 1 + nm_rng_below(&c->rng, 48);
        o.sim_hook = rec_hook;
        o.sim_arg = c;
        pmalloc_heap *h2;
        nm_err e = pmalloc_open(c->s1, &o, &h2);
        if (e) { fail_note(r, "recovery of a crash image failed: %s%s", nm_last_errmsg(), ""); return; }
        pmalloc_abandon(h2);
        if (c->rec_fired) {
            verify_dir(r, c->s2, false, "crash during recovery");
            r->recovery_tried++;
            r->tried++;
        }
    }
    verify_dir(r, c->s1, r->tried % 8 == 0, phase == PH_CLOSE ? "power failure in close" : "power failure");
}

/* Crash points: chosen flushes of any thread (allocator or user flushes), a
 * flush inside a slab morph out of turn, and flushes inside create and close. */
static void live_hook(void *arg, pmalloc_heap *h, uint64_t no)
{
    sim_ctx *c = arg;
    pmc_run *r = c->r;
    NM_UNUSED(no);
    uint64_t k = __atomic_add_fetch(&c->flushes, 1, __ATOMIC_RELAXED);
    int phase = __atomic_load_n(&c->phase, __ATOMIC_ACQUIRE);
    if (phase == PH_DONE || pthread_mutex_trylock(&c->mu) != 0) return; /* another thread is taking one */
    if (r->tried < r->points || phase == PH_CREATE || phase == PH_CLOSE) { /* those two come on top */
        bool take = false;
        if (phase == PH_CREATE) take = k == c->create_point;
        else if (phase == PH_CLOSE) /* one in close_mod flushes; surely one if no close was crashed yet (a close has few flushes) */
            take = c->close_mod && (nm_rng_below(&c->rng, c->close_mod) == 0 || r->close_points == 0);
        else if (g_user_persist) { /* the workload's own data: rarely, at most once per persist call */
            /* (and surely one, if half the run went by without: a campaign
             * whose threads persisted little could end with none) */
            take = g_user_persist == 1 && (nm_rng_below(&c->rng, 2 * (uint64_t)r->gap) == 0 ||
                                           (r->user_flush_points == 0 && r->tried >= r->points / 2));
            g_user_persist = 2; /* one draw per persist call, at its first line */
        } else {
            unsigned ms = pmalloc_morph_step(h); /* a flush inside a slab morph may be taken out of turn */
            uint64_t ka = ++c->alloc_flushes;
            take = ka >= c->next_point || (ms && r->morph_target_pct && nm_rng_below(&c->rng, 100) < r->morph_target_pct);
            if (take) c->next_point = ka + 1 + nm_rng_below(&c->rng, 2 * (uint64_t)r->gap);
        }
        if (take) {
            if (phase == PH_CLOSE) c->close_mod = 0; /* one per close */
            r->flush_points_seen = k;
            crash_point(c, h, phase);
        }
    }
    pthread_mutex_unlock(&c->mu);
}

typedef struct sim_worker {
    sim_ctx *c;
    pmalloc_heap *h;
    pmc_config cfg;
    uint64_t seed;
    unsigned steps;
} sim_worker;

static void *sim_worker_run(void *p)
{
    sim_worker *w = p;
    nm_rng rng;
    nm_rng_seed(&rng, w->seed);
    pmc_run *r = w->c->r;
    for (unsigned i = 0; i < w->steps && !__atomic_load_n(&w->c->stop, __ATOMIC_RELAXED); i++) {
        if (__atomic_load_n(&r->tried, __ATOMIC_RELAXED) >= r->points) break;
        int err = pmc_step(w->h, &rng, &w->cfg);
        if (err) {
            pthread_mutex_lock(&w->c->mu);
            fail_note(r, "workload step failed: %s%s", nm_last_errmsg(), "");
            pthread_mutex_unlock(&w->c->mu);
            break;
        }
    }
    __atomic_sub_fetch(&w->c->running, 1, __ATOMIC_RELAXED);
    return NULL;
}

/* Crash points at arbitrary moments, not at a flush: every 0.05-2 ms. */
typedef struct crasher_arg { sim_ctx *c; pmalloc_heap *h; } crasher_arg;
static void *crasher_run(void *p)
{
    crasher_arg *a = p;
    sim_ctx *c = a->c;
    for (;;) {
        pthread_mutex_lock(&c->mu);
        useconds_t us = (useconds_t)(50 + nm_rng_below(&c->rng, 1950));
        pthread_mutex_unlock(&c->mu);
        usleep(us);
        if (__atomic_load_n(&c->stop, __ATOMIC_RELAXED)) break;
        pthread_mutex_lock(&c->mu);
        /* at most half the points: on a loaded machine the workload threads may
         * be descheduled for long stretches, and the points at flushes (user
         * flushes among them) must keep their share whatever the load */
        if (c->r->tried < c->r->points && c->r->timer_points < c->r->points / 2 &&
            __atomic_load_n(&c->phase, __ATOMIC_ACQUIRE) == PH_RUN) {
            c->r->timer_points++;
            crash_point(c, a->h, PH_RUN);
        }
        pthread_mutex_unlock(&c->mu);
    }
    return NULL;
}

int pmc_run_sim(pmc_run *r)
{
    sim_ctx c;
    memset(&c, 0, sizeof c);
    c.r = r;
    pthread_mutex_init(&c.mu, NULL);
    r->cfg.vnodes = r->vnodes;
    nm_rng_seed(&c.rng, r->seed);
    char live[512];
    snprintf(live, sizeof live, "%s/sim-live", r->tmpdir);
    snprintf(c.s1, sizeof c.s1, "%s/sim-s1", r->tmpdir);
    snprintf(c.s2, sizeof c.s2, "%s/sim-s2", r->tmpdir);
    mkdir(live, 0700);
    mkdir(c.s1, 0700);
    mkdir(c.s2, 0700);
    rm_heap(live);
    uint64_t start = r->tried;
    unsigned rounds = 0, nt = r->threads ? NM_MIN(r->threads, 8u) : 1;
    static pthread_mutex_t locks[PMC_NLISTS];
    for (unsigned k = 0; k < PMC_NLISTS; k++) pthread_mutex_init(&locks[k], NULL);
    while (r->tried - start < r->points && rounds++ < 5000) {
        pmalloc_options o = run_opts(r, PMALLOC_PERSIST_SIM, true);
        o.narenas = nt;
        o.checkpoint_records = ckpt_pick(r, rounds - 1); /* the first round checkpoints most */
        o.sim_hook = live_hook;
        o.sim_arg = &c;
        c.flushes = 0;
        c.alloc_flushes = 0;
        c.next_point = 1 + nm_rng_below(&c.rng, 2 * (uint64_t)r->gap);
        /* one round in four has a crash point inside the create */
        c.create_point = rounds == 1 || nm_rng_below(&c.rng, 2) == 0 ? 1 + nm_rng_below(&c.rng, 12) : 0;
        __atomic_store_n(&c.phase, PH_CREATE, __ATOMIC_RELEASE);
        __atomic_store_n(&c.stop, false, __ATOMIC_RELAXED);
        pmalloc_heap *h;
        nm_err e = pmalloc_open(live, &o, &h);
        if (e) { fail_note(r, "create: %s%s", nm_last_errmsg(), ""); break; }
        c.flushes = 0;
        __atomic_store_n(&c.phase, PH_RUN, __ATOMIC_RELEASE);
        /* several threads: half the rounds share every list (per-list locks, so a
         * block allocated by one thread is freed by another), half split them */
        bool shared = nt > 1 && (rounds & 1);
        sim_worker w[8];
        pthread_t t[8];
        c.running = nt;
        for (unsigned k = 0; k < nt; k++) {
            /* short rounds (unless asked otherwise): many creates and closes to crash */
            unsigned steps = r->round_steps ? r->round_steps : 100 + (unsigned)nm_rng_below(&c.rng, 500);
            w[k] = (sim_worker){&c, h, r->cfg, r->seed * 1000003u + rounds * 17u + k, steps};
            if (nt > 1) {
                w[k].cfg.list_lo = shared ? 0 : k * (PMC_NLISTS / nt);
                w[k].cfg.list_n = shared ? 0 : PMC_NLISTS / nt;
                w[k].cfg.locks = shared ? locks : NULL;
            }
        }
        pthread_t ct;
        crasher_arg ca = {&c, h};
        bool crasher = r->crasher && pthread_create(&ct, NULL, crasher_run, &ca) == 0;
        for (unsigned k = 1; k < nt; k++) pthread_create(&t[k], NULL, sim_worker_run, &w[k]);
        sim_worker_run(&w[0]);
        for (unsigned k = 1; k < nt; k++) pthread_join(t[k], NULL);
        __atomic_store_n(&c.stop, true, __ATOMIC_RELAXED);
        if (crasher) pthread_join(ct, NULL);
        pmalloc_stats st;
        pmalloc_stats_get(h, &st);
        r->log_gcs += st.bklog_gcs + st.bklog_fast_gcs;
        r->morphs += st.morphs;
        r->checkpoints += st.checkpoints;
        if (getenv("PMC_DEBUG")) fprintf(stderr, "round %u: %llu log appends, %llu gcs, %llu flushes\n", rounds, (unsigned long long)st.bklog_appends, (unsigned long long)st.bklog_gcs, (unsigned long long)st.flushes);
        /* half the rounds end with a clean close that may itself be crashed */
        if (rounds == 1 || nm_rng_below(&c.rng, 2)) {
            c.close_mod = 16;
            __atomic_store_n(&c.phase, PH_CLOSE, __ATOMIC_RELEASE);
            if (pmalloc_close(h)) fail_note(r, "close: %s%s", nm_last_errmsg(), "");
        } else {
            __atomic_store_n(&c.phase, PH_DONE, __ATOMIC_RELEASE);
            pmalloc_abandon(h);
        }
        __atomic_store_n(&c.phase, PH_DONE, __ATOMIC_RELEASE);
        rm_heap(live);
    }
    rm_heap(c.s1);
    rm_heap(c.s2);
    rmdir(live);
    rmdir(c.s1);
    rmdir(c.s2);
    pthread_mutex_destroy(&c.mu);
    return r->failures ? 1 : 0;
}

/* Shared with the children: what the child was doing when it was killed. */
enum { CH_OPEN = 1, CH_RUN, CH_CLOSE };
static volatile int *g_child_phase;
/* The same shared page, after the phase: why a child gave up before the kill. */
static char *g_child_msg;
enum { CHILD_MSG_OFF = 64, CHILD_MSG_LEN = 200 };

static _Noreturn void child_fail(int code, const char *what)
{
    if (g_child_msg) snprintf(g_child_msg, CHILD_MSG_LEN, "%s: %s", what, nm_last_errmsg());
    _exit(code);
}

typedef struct child_worker {
    pmalloc_heap *h;
    pmc_config cfg;
    uint64_t seed;
} child_worker;

static void *child_thread(void *p)
{
    child_worker *w = p;
    nm_rng rng;
    nm_rng_seed(&rng, w->seed);
    for (;;)
        if (pmc_step(w->h, &rng, &w->cfg)) child_fail(3, "step");
    return NULL;
}

static void child_run(const pmc_run *r, const char *dir, uint64_t seed)
{
    pmalloc_options o = run_opts(r, PMALLOC_PERSIST_CPU, false);
    unsigned nt = r->threads ? r->threads : 1;
    o.narenas = nt;
    o.checkpoint_records = ckpt_pick(r, seed >> 2);
    pmalloc_heap *h;
    *g_child_phase = CH_OPEN;
    if (pmalloc_open(dir, &o, &h)) child_fail(2, "open");
    if (pmc_repair(h)) child_fail(4, "repair");
    *g_child_phase = CH_RUN;
    if (nt == 1 && (seed & 2)) {
        /* one child in two closes and reopens the heap every few hundred steps,
         * so kills land inside a clean close and inside an open too */
        nm_rng rng;
        nm_rng_seed(&rng, seed);
        pmc_config cfg = r->cfg;
        for (;;) {
            for (unsigned n = 100 + (unsigned)nm_rng_below(&rng, 400); n; n--)
                if (pmc_step(h, &rng, &cfg)) child_fail(3, "step");
            *g_child_phase = CH_CLOSE;
            if (pmalloc_close(h)) child_fail(6, "close");
            *g_child_phase = CH_OPEN;
            if (pmalloc_open(dir, &o, &h)) child_fail(7, "reopen");
            *g_child_phase = CH_RUN;
        }
    }
    child_worker w[8];
    pthread_t t[8];
    if (nt > 8) nt = 8;
    /* Every other child shares all lists between its threads (per-list locks),
     * so blocks are freed by another thread than their allocator while both WAL
     * entries are live (the WAL order across threads); the others give each
     * thread its own slice of the lists (no locks; blocks still cross arenas). */
    static pthread_mutex_t locks[PMC_NLISTS];
    bool shared = nt > 1 && (seed & 1);
    for (unsigned k = 0; shared && k < PMC_NLISTS; k++) pthread_mutex_init(&locks[k], NULL);
    for (unsigned k = 0; k < nt; k++) {
        w[k] = (child_worker){h, r->cfg, seed * 31 + k};
        w[k].cfg.list_lo = shared ? 0 : k * (PMC_NLISTS / nt);
        w[k].cfg.list_n = shared ? 0 : PMC_NLISTS / nt;
        w[k].cfg.locks = shared ? locks : NULL;
        if (k > 0 && pthread_create(&t[k], NULL, child_thread, &w[k])) child_fail(5, "pthread_create");
    }
    child_thread(&w[0]);
}

int pmc_run_proc(pmc_run *r)
{
    char dir[512];
    r->cfg.vnodes = r->vnodes;
    snprintf(dir, sizeof dir, "%s/proc", r->tmpdir);
    mkdir(dir, 0700);
    rm_heap(dir);
    pmalloc_options o = run_opts(r, PMALLOC_PERSIST_CPU, true);
    pmalloc_heap *h;
    if (pmalloc_open(dir, &o, &h)) { fail_note(r, "create: %s%s", nm_last_errmsg(), ""); return 1; }
    pmalloc_close(h);
    nm_rng rng;
    nm_rng_seed(&rng, r->seed);
    g_child_phase = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (g_child_phase == MAP_FAILED) { fail_note(r, "mmap failed%s%s", "", ""); return 1; }
    g_child_msg = (char *)g_child_phase + CHILD_MSG_OFF;
    for (unsigned i = 0; i < r->points; i++) {
        *g_child_phase = 0;
        g_child_msg[0] = 0;
        fflush(NULL);
        pid_t pid = fork();
        if (pid < 0) { fail_note(r, "fork failed%s%s", "", ""); break; }
        if (pid == 0) child_run(r, dir, r->seed * 1000003 + i);
        usleep((useconds_t)(300 + nm_rng_below(&rng, 6000)));
        kill(pid, SIGKILL);
        int status = 0;
        waitpid(pid, &status, 0);
        r->tried++;
        int ph = *g_child_phase;
        if (ph == CH_CLOSE) r->kills_in_close++;
        if (ph == CH_OPEN) r->kills_in_open++;
        if (r->threads > 1 && ph == CH_RUN) r->mt_points++;
        if (!WIFSIGNALED(status)) {
            char b[64];
            snprintf(b, sizeof b, "%d", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
            char m[CHILD_MSG_LEN + 8];
            snprintf(m, sizeof m, " (%s)", g_child_msg[0] ? g_child_msg : "no message");
            fail_note(r, "child exited with status %s before the kill%s", b, m);
            continue;
        }
        /* every third crash is left for the next child to recover (and maybe be killed in) */
        if (i % 3 == 2 && i + 1 < r->points) continue;
        verify_dir(r, dir, i % 8 == 0, "process crash");
    }
    munmap((void *)g_child_phase, 4096);
    g_child_phase = NULL;
    g_child_msg = NULL;
    rm_heap(dir);
    rmdir(dir);
    return r->failures ? 1 : 0;
}
