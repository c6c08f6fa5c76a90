/* Process-crash campaigns of the persistent applications (pm_apps_crash.h). */
#include "pm_apps_crash.h"

#include "nearmem/common.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void crash_fail(pa_crash_run *r, const char *what, const char *msg)
{
    r->failures++;
    if (getenv("PA_CRASH_DEBUG")) fprintf(stderr, "crash check failure: %s: %s\n", what, msg);
    if (!r->first_failure[0])
        snprintf(r->first_failure, sizeof r->first_failure, "%s on %s: %s: %s", r->app->name, pa_kind_name(r->kind), what, msg);
}

static pa_open_opts crash_opts(const pa_crash_run *r, const char *dir, bool create)
{
    pa_open_opts o = {.kind = r->kind, .dir = dir, .size = r->pool, .create = create, .persist = PMALLOC_PERSIST_CPU,
                      .narenas = r->threads ? r->threads : 1};
    return o;
}

typedef struct span { const char *p; size_t n; } span;
typedef struct spans { span *v; size_t n, cap; } spans;

static int collect(void *arg, void *addr, size_t usable)
{
    spans *s = arg;
    if (s->n == s->cap) {
        size_t c = s->cap ? s->cap * 2 : 1024;
        span *v = realloc(s->v, c * sizeof *v);
        if (!v) return -1;
        s->v = v;
        s->cap = c;
    }
    s->v[s->n++] = (span){addr, usable};
    return 0;
}

static int cmp_span(const void *a, const void *b)
{
    const char *x = ((const span *)a)->p, *y = ((const span *)b)->p;
    return x < y ? -1 : x > y;
}

static int cmp_ptr(const void *a, const void *b)
{
    const char *x = *(const char *const *)a, *y = *(const char *const *)b;
    return x < y ? -1 : x > y;
}

/* Objects allocated but not conservatively reachable from the root area: any
 * aligned word that points inside an allocated object keeps it (PMAlloc-GC's
 * definition, Sec. 7). Right after PMAlloc-GC's recovery this must be 0. */
static size_t conservative_unreached(pa_heap *a)
{
    spans al = {0};
    if (pa_walk(a, collect, &al)) return (size_t)-1;
    qsort(al.v, al.n, sizeof *al.v, cmp_span);
    char *mark = calloc(al.n ? al.n : 1, 1);
    size_t *stack = malloc((al.n + 1) * sizeof *stack), ns = 0;
    const uint64_t *scan0 = a->root;
    size_t words0 = PA_ROOT_SIZE / 8;
    for (size_t it = 0;; it++) {
        const uint64_t *w = scan0;
        size_t nw = words0;
        if (it > 0) {
            if (!ns) break;
            size_t k = stack[--ns];
            w = (const uint64_t *)al.v[k].p;
            nw = al.v[k].n / 8;
        }
        for (size_t q = 0; q < nw; q++) {
            const char *p = pa_at_off(a, w[q]);
            if (!p || w[q] == 0) continue;
            size_t lo = 0, hi = al.n;
            while (lo < hi) { size_t m = (lo + hi) / 2; if (al.v[m].p <= p) lo = m + 1; else hi = m; }
            if (lo == 0) continue;
            size_t k = lo - 1;
            if (p < al.v[k].p + al.v[k].n && !mark[k]) { mark[k] = 1; stack[ns++] = k; }
        }
    }
    size_t un = 0;
    for (size_t k = 0; k < al.n; k++)
        if (!mark[k]) {
            un++;
        }
    free(mark);
    free(stack);
    free(al.v);
    return un;
}

int pa_crash_check_dir(pa_crash_run *r, const char *dir)
{
    char msg[400] = "";
    pa_heap a;
    pa_open_opts o = crash_opts(r, dir, false);
    if (pa_open(&a, &o, msg, sizeof msg)) { crash_fail(r, "reopen", msg); return -1; }
    if (a.h) {
        pmalloc_recovery_info ri;
        pmalloc_recovery_info_get(a.h, &ri);
        r->gc_freed += ri.gc_freed;
        r->wal_redone += ri.wal_redone;
        if (pmalloc_check(a.h)) { snprintf(msg, sizeof msg, "%s", nm_last_errmsg()); crash_fail(r, "pmalloc_check", msg); pa_close(&a); return -1; }
    }
    int rec = 0, rc = -1;
    if (a.k == PA_GC) { /* the GC recovery collected everything no root reaches */
        size_t un = conservative_unreached(&a);
        if (un) {
            snprintf(msg, sizeof msg, "%zu allocated objects that no root reaches survived the GC recovery", un);
            crash_fail(r, "GC recovery", msg);
            pa_close(&a);
            return -1;
        }
        r->gc_checked++;
    }
    void *st = r->app->open(&a, r->universe, &rec, msg, sizeof msg);
    if (!st) { crash_fail(r, "application recovery", msg); pa_close(&a); return -1; }
    r->app_recovered += (uint64_t)rec;
    const void **reach = NULL;
    size_t nreach = 0;
    spans alloc = {0};
    if (r->app->reachable(st, &reach, &nreach, msg, sizeof msg)) { crash_fail(r, "structure", msg); goto out; }
    uint64_t tw = nm_now_ns();
    if (pa_walk(&a, collect, &alloc)) { crash_fail(r, "walk", "the allocator's walk failed"); goto out; }
    if (getenv("PA_CRASH_DEBUG")) fprintf(stderr, "walk of %zu objects: %.1f ms\n", alloc.n, (nm_now_ns() - tw) / 1e6);
    qsort(alloc.v, alloc.n, sizeof *alloc.v, cmp_span);
    qsort(reach, nreach, sizeof *reach, cmp_ptr);
    size_t u = 0;
    for (size_t i = 0; i < nreach; i++)
        if (!u || reach[i] != reach[u - 1]) reach[u++] = reach[i];
    nreach = u;
    for (size_t i = 1; i < alloc.n; i++)
        if (alloc.v[i - 1].p + alloc.v[i - 1].n > alloc.v[i].p) { crash_fail(r, "heap", "allocated objects overlap"); goto out; }
    for (size_t i = 0, j = 0; i < nreach; i++) { /* reachable => allocated */
        while (j < alloc.n && alloc.v[j].p < (const char *)reach[i]) j++;
        if (j == alloc.n || alloc.v[j].p != (const char *)reach[i]) {
            snprintf(msg, sizeof msg, "object %zu of %zu reachable but not allocated", i, nreach);
            crash_fail(r, "heap", msg);
            goto out;
        }
    }
    static int dbg_printed;
    if (alloc.n != nreach && getenv("PA_CRASH_DEBUG") && !dbg_printed++) { /* name the unreachable objects and who points into them */
        for (size_t i = 0, j = 0, shown = 0; i < alloc.n && shown < 12; i++) {
            while (j < nreach && (const char *)reach[j] < alloc.v[i].p) j++;
            if (j < nreach && (const char *)reach[j] == alloc.v[i].p) continue;
            const uint64_t *w = (const uint64_t *)alloc.v[i].p;
            fprintf(stderr, "unreachable object %p size %zu words %llx %llx %llx %llx %llx %llx\n", (void *)alloc.v[i].p, alloc.v[i].n,
                    (unsigned long long)w[0], (unsigned long long)w[1], (unsigned long long)w[2], (unsigned long long)w[3],
                    (unsigned long long)w[4], (unsigned long long)w[5]);
            uint64_t lo = pa_off_of(&a, alloc.v[i].p), hi = lo + alloc.v[i].n;
            for (size_t k = 0; k < alloc.n; k++)
                for (size_t q = 0; q < alloc.v[k].n / 8; q++) {
                    uint64_t v = ((const uint64_t *)alloc.v[k].p)[q];
                    if (v >= lo && v < hi)
                        fprintf(stderr, "  pointed to by word %zu of object %p (size %zu, %s)\n", q, (void *)alloc.v[k].p, alloc.v[k].n,
                                bsearch(&alloc.v[k].p, reach, nreach, sizeof *reach, cmp_ptr) ? "reachable" : "unreachable");
                }
            const uint64_t *rw = (const uint64_t *)a.root;
            for (size_t q = 0; q < PA_ROOT_SIZE / 8; q++)
                if (rw[q] >= lo && rw[q] < hi) fprintf(stderr, "  pointed to by word %zu of the root area\n", q);
            shown++;
        }
    }
    if (alloc.n != nreach) {
        /* LOG, PMDK: allocated => reachable (no leak). GC: the mark keeps what any word
         * of a reachable object points to, including the stale contents of a block
         * allocated just before the crash and not yet initialised (its previous life's
         * pointers); the application's recovery then frees that block but not what its
         * stale words revived. Counted, not a failure: the GC check is the one above. */
        if (r->kind == PA_GC) {
            r->gc_retained_now = alloc.n - nreach;
            if (r->gc_retained_now > r->gc_retained_max) r->gc_retained_max = r->gc_retained_now;
        } else {
            snprintf(msg, sizeof msg, "%zu objects allocated, %zu reachable (leak)", alloc.n, nreach);
            crash_fail(r, "leak check", msg);
            goto out;
        }
    } else if (r->kind == PA_GC) r->gc_retained_now = 0;
    r->objects += nreach;
    r->checked++;
    rc = 0;
out:
    free(reach);
    free(alloc.v);
    r->app->close(st);
    pa_close(&a);
    return rc;
}

typedef struct child_thr { const pa_crash_run *r; void *st; unsigned tid; uint64_t seed; } child_thr;

static void *child_loop(void *arg)
{
    child_thr *c = arg;
    nm_rng rng;
    nm_rng_seed(&rng, c->seed);
    char msg[256];
    for (;;)
        if (c->r->app->step(c->st, c->tid, &rng, msg, sizeof msg)) {
            fprintf(stderr, "crash child: %s\n", msg);
            _exit(3);
        }
    return NULL;
}

static void child_run(const pa_crash_run *r, const char *dir, uint64_t seed, int wfd)
{
    char msg[400];
    pa_heap a;
    pa_open_opts o = crash_opts(r, dir, false);
    uint64_t t0 = nm_now_ns();
    if (pa_open(&a, &o, msg, sizeof msg)) { fprintf(stderr, "crash child: %s\n", msg); _exit(2); }
    uint64_t t1 = nm_now_ns();
    int rec;
    void *st = r->app->open(&a, r->universe, &rec, msg, sizeof msg);
    if (!st) { fprintf(stderr, "crash child: %s\n", msg); _exit(4); }
    if (getenv("PA_CRASH_DEBUG")) fprintf(stderr, "child: heap open %.1f ms, application recovery %.1f ms\n", (t1 - t0) / 1e6, (nm_now_ns() - t1) / 1e6);
    char one = 1;
    if (write(wfd, &one, 1) != 1) _exit(5);
    unsigned nt = r->threads ? r->threads : 1;
    child_thr c[8];
    pthread_t th[8];
    if (nt > 8) nt = 8;
    for (unsigned k = 0; k < nt; k++) {
        c[k] = (child_thr){r, st, k, seed * 31 + k};
        if (k > 0 && pthread_create(&th[k], NULL, child_loop, &c[k])) _exit(6);
    }
    child_loop(&c[0]);
}

static void sleep_us(uint64_t us)
{
    struct timespec ts = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) && errno == EINTR) {
    }
}

uint64_t pa_crash_proc(pa_crash_run *r)
{
    char dir[512], msg[400];
    snprintf(dir, sizeof dir, "%s/appcrash-%s-%s", r->tmpdir, r->app->name, pa_kind_short(r->kind));
    mkdir(dir, 0700);
    pa_remove(dir);
    uint64_t f0 = r->failures;
    { /* create the heap and the structure */
        pa_heap a;
        pa_open_opts o = crash_opts(r, dir, true);
        if (pa_open(&a, &o, msg, sizeof msg)) { crash_fail(r, "create", msg); return r->failures - f0; }
        int rec;
        void *st = r->app->open(&a, r->universe, &rec, msg, sizeof msg);
        if (!st) { crash_fail(r, "create", msg); pa_close(&a); return r->failures - f0; }
        r->app->close(st);
        pa_close(&a);
    }
    nm_rng rng;
    nm_rng_seed(&rng, r->seed);
    for (unsigned i = 0; i < r->points; i++) {
        int fd[2];
        if (pipe(fd)) { crash_fail(r, "pipe", strerror(errno)); break; }
        fflush(NULL);
        pid_t pid = fork();
        if (pid < 0) { close(fd[0]); close(fd[1]); crash_fail(r, "fork", strerror(errno)); break; }
        if (pid == 0) {
            close(fd[0]);
            child_run(r, dir, r->seed * 1000003u + i, fd[1]);
        }
        close(fd[1]);
        if (nm_rng_below(&rng, 4) == 0) {
            sleep_us(nm_rng_below(&rng, 3000)); /* anywhere, recoveries included */
        } else {
            struct pollfd p = {fd[0], POLLIN, 0};
            if (poll(&p, 1, 20000) == 1) { /* running: let it work a little */
                char b;
                if (read(fd[0], &b, 1) == 1) sleep_us(200 + nm_rng_below(&rng, 4000));
            }
        }
        kill(pid, SIGKILL);
        int status = 0;
        waitpid(pid, &status, 0);
        close(fd[0]);
        r->tried++;
        if (!WIFSIGNALED(status)) {
            snprintf(msg, sizeof msg, "child exited with status %d before the kill", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
            crash_fail(r, "child", msg);
            continue;
        }
        if (i % 3 == 2 && i + 1 < r->points) continue; /* the next child recovers it */
        pa_crash_check_dir(r, dir);
    }
    pa_remove(dir);
    rmdir(dir);
    return r->failures - f0;
}
