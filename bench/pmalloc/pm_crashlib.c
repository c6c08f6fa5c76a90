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

/* Set while the workload persists its own object data: crash points are
 * moved past those flushes so that they land on allocator operations. */
static int g_user_persist;

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

static void rm_heap(const char *dir)
{
    (void)pmalloc_remove(dir, NULL); /* with virtual nodes: the node files too */
}

/* Open the heap in dir (recovering it), check, close cleanly. */
static void verify_dir(pmc_run *r, const char *dir, bool full, const char *what)
{
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
    nm_rng rng;
    uint64_t next_point;
    char s1[512], s2[512];
    /* nested: crash during recovery */
    uint64_t rec_point;
    bool rec_fired;
    uint64_t alloc_flushes;
    bool ready; /* the live heap's create finished (a crash inside create leaves
                 * a file without magic, refused with NM_EFORMAT: not a crash point) */
} sim_ctx;

static void rec_hook(void *arg, pmalloc_heap *h, uint64_t no)
{
    sim_ctx *c = arg;
    if (c->rec_fired || no != c->rec_point) return;
    c->rec_fired = true;
    if (pmalloc_sim_snapshot(h, c->s2, nm_rng_u64(&c->rng), c->r->evict_pct)) fail_note(c->r, "snapshot: %s%s", nm_last_errmsg(), "");
}

static void live_hook(void *arg, pmalloc_heap *h, uint64_t no)
{
    sim_ctx *c = arg;
    pmc_run *r = c->r;
    NM_UNUSED(no);
    if (!c->ready || g_user_persist) return; /* only allocator flushes are crash points */
    uint64_t k = ++c->alloc_flushes;
    r->flush_points_seen = k;
    /* a flush inside a slab morph may be taken as a crash point out of turn */
    unsigned ms = pmalloc_morph_step(h);
    bool target = ms && r->morph_target_pct && nm_rng_below(&c->rng, 100) < r->morph_target_pct;
    if ((k != c->next_point && !target) || r->tried >= r->points) return;
    c->next_point = k + 1 + nm_rng_below(&c->rng, 2 * (uint64_t)r->gap);
    if (ms < 4) r->morph_points[ms]++;
    pmalloc_numa_stats ns;
    if (pmalloc_numa_stats_get(h, &ns) == NM_OK && (ns.pending || ns.pending_extents)) r->between_phases++;
    /* half the points also let unflushed lines reach the image early (evictions) */
    unsigned evict = nm_rng_below(&c->rng, 2) ? r->evict_pct : 0;
    if (pmalloc_sim_snapshot(h, c->s1, nm_rng_u64(&c->rng), evict)) { fail_note(r, "snapshot: %s%s", nm_last_errmsg(), ""); return; }
    if (nm_rng_below(&c->rng, 100) < r->recovery_crash_pct) {
        /* recover the image under simulation and crash that recovery */
        pmalloc_options o = run_opts(r, PMALLOC_PERSIST_SIM, false);
        c->rec_fired = false;
        c->rec_point = 1 + nm_rng_below(&c->rng, 48);
        o.sim_hook = rec_hook;
        o.sim_arg = c;
        pmalloc_heap *h2;
        nm_err e = pmalloc_open(c->s1, &o, &h2);
        if (e) { fail_note(r, "recovery of a crash image failed: %s%s", nm_last_errmsg(), ""); r->tried++; return; }
        pmalloc_abandon(h2);
        if (c->rec_fired) {
            verify_dir(r, c->s2, false, "crash during recovery");
            r->recovery_tried++;
            r->tried++;
        }
    }
    verify_dir(r, c->s1, r->tried % 8 == 0, "power failure");
    r->tried++;
}

int pmc_run_sim(pmc_run *r)
{
    sim_ctx c;
    memset(&c, 0, sizeof c);
    c.r = r;
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
    unsigned rounds = 0;
    while (r->tried - start < r->points && rounds++ < 1000) {
        pmalloc_options o = run_opts(r, PMALLOC_PERSIST_SIM, true);
        o.sim_hook = live_hook;
        o.sim_arg = &c;
        c.alloc_flushes = 0;
        c.next_point = 1 + nm_rng_below(&c.rng, 2 * (uint64_t)r->gap);
        pmalloc_heap *h;
        nm_err e = pmalloc_open(live, &o, &h);
        if (e) { fail_note(r, "create: %s%s", nm_last_errmsg(), ""); break; }
        c.ready = true;
        nm_rng w;
        nm_rng_seed_stream(&w, r->seed, rounds);
        for (unsigned i = 0; i < 20000 && r->tried - start < r->points; i++) {
            int err = pmc_step(h, &w, &r->cfg);
            if (err) { fail_note(r, "workload step failed: %s%s", nm_last_errmsg(), ""); break; }
        }
        pmalloc_stats st;
        pmalloc_stats_get(h, &st);
        r->log_gcs += st.bklog_gcs + st.bklog_fast_gcs;
        r->morphs += st.morphs;
        if (getenv("PMC_DEBUG")) fprintf(stderr, "round %u: %llu log appends, %llu gcs, %llu flushes\n", rounds, (unsigned long long)st.bklog_appends, (unsigned long long)st.bklog_gcs, (unsigned long long)st.flushes);
        pmalloc_abandon(h);
        c.ready = false;
        rm_heap(live);
    }
    rm_heap(c.s1);
    rm_heap(c.s2);
    rmdir(live);
    rmdir(c.s1);
    rmdir(c.s2);
    return r->failures ? 1 : 0;
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
        if (pmc_step(w->h, &rng, &w->cfg)) _exit(3);
    return NULL;
}

static void child_run(const pmc_run *r, const char *dir, uint64_t seed)
{
    pmalloc_options o = run_opts(r, PMALLOC_PERSIST_CPU, false);
    unsigned nt = r->threads ? r->threads : 1;
    o.narenas = nt;
    pmalloc_heap *h;
    if (pmalloc_open(dir, &o, &h)) _exit(2);
    if (pmc_repair(h)) _exit(4);
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
        if (k > 0 && pthread_create(&t[k], NULL, child_thread, &w[k])) _exit(5);
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
    for (unsigned i = 0; i < r->points; i++) {
        fflush(NULL);
        pid_t pid = fork();
        if (pid < 0) { fail_note(r, "fork failed%s%s", "", ""); break; }
        if (pid == 0) child_run(r, dir, r->seed * 1000003 + i);
        usleep((useconds_t)(300 + nm_rng_below(&rng, 6000)));
        kill(pid, SIGKILL);
        int status = 0;
        waitpid(pid, &status, 0);
        r->tried++;
        if (!WIFSIGNALED(status)) {
            char b[64];
            snprintf(b, sizeof b, "%d", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
            fail_note(r, "child exited with status %s before the kill%s", b, "");
            continue;
        }
        /* every third crash is left for the next child to recover (and maybe be killed in) */
        if (i % 3 == 2 && i + 1 < r->points) continue;
        verify_dir(r, dir, i % 8 == 0, "process crash");
    }
    rm_heap(dir);
    rmdir(dir);
    return r->failures ? 1 : 0;
}
