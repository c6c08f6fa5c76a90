/* The one counted persistence primitive (flush + drain) and the
 * power-failure simulation.
 *
 * Every cache line PMAlloc writes back goes through pm_flush, which counts it
 * and, for allocator metadata, detects a reflush: the same line flushed again
 * while it is still among the last 4 distinct metadata lines this thread
 * flushed (reflush distance < 4, paper Sec. 3.2). */
#include <libpmem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include "nearmem/common/prng.h"
#include "pm_media.h"

#define PM_REFLUSH_WINDOW 4

/* ---- counters ---- */

static uint64_t g_heap_uid;
PM_TLS pm_tlctr pm_tl_ctr[PM_TL_CTRS];
static PM_TLS unsigned tl_ctr_next;

nm_err pm_ctr_init(pm_heap *h)
{
    h->uid = __atomic_add_fetch(&g_heap_uid, 1, __ATOMIC_RELAXED);
    pthread_mutex_init(&h->ctr_lock, NULL);
    h->ctr_shared = calloc(1, sizeof *h->ctr_shared);
    return h->ctr_shared ? NM_OK : nm_fail(NM_ENOMEM, "pmalloc: counters");
}

void pm_ctr_free(pm_heap *h)
{
    while (h->ctrs) {
        pm_ctrblk *b = h->ctrs;
        h->ctrs = b->next;
        free(b);
    }
    free(h->ctr_shared);
    h->ctr_shared = NULL;
    pthread_mutex_destroy(&h->ctr_lock);
}

/* First use of this heap by this thread: a block of its own (pm_ctr_add's
 * slow path, out of line). */
pm_ctrblk *pm_ctr_block_new(pm_heap *h)
{
    pm_ctrblk *b = aligned_alloc(PM_LINE, NM_ALIGN_UP(sizeof *b, PM_LINE)); /* no line shared with another thread's */
    if (!b) return h->ctr_shared;
    memset(b, 0, sizeof *b);
    pthread_mutex_lock(&h->ctr_lock);
    b->next = h->ctrs;
    h->ctrs = b;
    pthread_mutex_unlock(&h->ctr_lock);
    unsigned k = tl_ctr_next++ % PM_TL_CTRS; /* a thread on more heaps than this gets new blocks */
    pm_tl_ctr[k].uid = h->uid;
    pm_tl_ctr[k].b = b;
    return b;
}

uint64_t pm_ctr_sum(pm_heap *h, int which)
{
    uint64_t s = __atomic_load_n(&h->ctr_base[which], __ATOMIC_RELAXED) + __atomic_load_n(&h->ctr_shared->v[which], __ATOMIC_RELAXED);
    pthread_mutex_lock(&h->ctr_lock);
    for (pm_ctrblk *b = h->ctrs; b; b = b->next) s += __atomic_load_n(&b->v[which], __ATOMIC_RELAXED);
    pthread_mutex_unlock(&h->ctr_lock);
    return s;
}

void pm_ctr_set(pm_heap *h, int which, uint64_t v)
{
    pthread_mutex_lock(&h->ctr_lock);
    for (pm_ctrblk *b = h->ctrs; b; b = b->next) __atomic_store_n(&b->v[which], 0, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&h->ctr_lock);
    __atomic_store_n(&h->ctr_shared->v[which], 0, __ATOMIC_RELAXED);
    __atomic_store_n(&h->ctr_base[which], v, __ATOMIC_RELAXED);
}

/* ---- the flush primitive ---- */

static PM_TLS struct {
    uint64_t uid;
    uint64_t line[PM_REFLUSH_WINDOW];
    unsigned n;
} tl_win;

static void note_meta_line(pm_heap *h, uint64_t line)
{
    if (tl_win.uid != h->uid) {
        tl_win.uid = h->uid;
        tl_win.n = 0;
    }
    unsigned i, n = tl_win.n;
    for (i = 0; i < n; i++)
        if (tl_win.line[i] == line) break;
    if (i < n) {
        pm_ctr_add(h, PMC_REFLUSH, 1);
        memmove(&tl_win.line[i], &tl_win.line[i + 1], (n - i - 1) * sizeof(uint64_t));
        n--;
    } else if (n == PM_REFLUSH_WINDOW) {
        memmove(&tl_win.line[0], &tl_win.line[1], (n - 1) * sizeof(uint64_t));
        n--;
    }
    tl_win.line[n++] = line; /* most recent last */
    tl_win.n = n;
}

/* ---- power-failure simulation (PMALLOC_PERSIST_SIM) ----
 *
 * The persisted image (h->shadow) changes only when a thread drains: a flush
 * records the line's content as of that flush in the flushing thread's queue
 * (a store to the line after its flush is not covered), and a drain moves
 * that thread's queue, and only its own, into the image (a fence orders the
 * fencing thread's flushes, not another core's), unless the image holds a
 * later flush of the line already (write-backs of one line reach memory in
 * coherence order: an older one never overwrites a newer). A crash image is the image
 * plus each undrained flushed line torn at 8-byte granularity (every word
 * from its flush or from before), later flushes over earlier ones, plus, on
 * request, lines stored and never flushed that a cache eviction wrote back. */

typedef struct pm_simfl {
    uint64_t stamp;
    uint32_t line;
    uint64_t w[PM_LINE / 8];
} pm_simfl;

typedef struct pm_simq {
    pthread_t tid;
    pm_simfl *v;
    size_t n, cap;
    struct pm_simq *next; /* h->simqs */
} pm_simq;

static PM_TLS uint64_t tl_hook_uid; /* the heap whose simulation hook this thread is running */

/* This thread's queue (sim_lock held): looked up by thread among the heap's
 * few queues, not through the per-thread counter cache, which may forget a
 * heap when a thread uses more than PM_TL_CTRS of them. */
static pm_simq *sim_queue(pm_heap *h)
{
    pthread_t self = pthread_self();
    for (pm_simq *q = h->simqs; q; q = q->next)
        if (pthread_equal(q->tid, self)) return q;
    pm_simq *q = calloc(1, sizeof *q);
    if (!q) return NULL;
    q->tid = self;
    q->next = h->simqs;
    h->simqs = q;
    return q;
}

static inline void line_read(const pm_heap *h, uint64_t line, uint64_t *w)
{
    const uint64_t *src = (const uint64_t *)(h->base + line * PM_LINE);
    for (unsigned i = 0; i < PM_LINE / 8; i++) w[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED); /* other threads may be storing */
}

static void sim_record(pm_heap *h, uint64_t line)
{
    pthread_mutex_lock(&h->sim_lock);
    pm_simq *q = sim_queue(h);
    if (q && q->n == q->cap) {
        size_t cap = q->cap ? q->cap * 2 : 256;
        pm_simfl *v = realloc(q->v, cap * sizeof *v);
        if (v) { q->v = v; q->cap = cap; }
    }
    if (!q || q->n == q->cap) { /* cannot track it: persisted at once (a stronger image, still a valid one) */
        line_read(h, line, (uint64_t *)(h->shadow + line * PM_LINE));
        h->shadow_stamp[line] = ++h->sim_stamp;
    } else {
        pm_simfl *f = &q->v[q->n++];
        f->stamp = ++h->sim_stamp;
        f->line = (uint32_t)line;
        line_read(h, line, f->w);
    }
    pthread_mutex_unlock(&h->sim_lock);
}

static void sim_drain(pm_heap *h)
{
    pthread_mutex_lock(&h->sim_lock);
    pm_simq *q = sim_queue(h);
    for (size_t i = 0; q && i < q->n; i++) {
        const pm_simfl *f = &q->v[i];
        if (f->stamp < h->shadow_stamp[f->line]) continue; /* a later write-back of the line is there already */
        memcpy(h->shadow + (uint64_t)f->line * PM_LINE, f->w, PM_LINE);
        h->shadow_stamp[f->line] = f->stamp;
    }
    if (q) q->n = 0;
    pthread_mutex_unlock(&h->sim_lock);
}

void pm_flush(pm_heap *h, const void *addr, size_t len, int meta)
{
    if (len == 0) return;
    uintptr_t a = (uintptr_t)addr & ~(uintptr_t)(PM_LINE - 1);
    uintptr_t end = (uintptr_t)addr + len;
    uint64_t nlines = (end - a + PM_LINE - 1) / PM_LINE;
    if (h->eadr) return; /* caches are in the persistence domain: nothing to flush */
    pm_ctr_add(h, PMC_FLUSH, nlines);
    if (meta) pm_ctr_add(h, PMC_META, nlines);
    for (uintptr_t p = a; p < end; p += PM_LINE) {
        uint64_t line = (p - (uintptr_t)h->base) / PM_LINE;
        if (meta) note_meta_line(h, line);
        if (h->persist == PMALLOC_PERSIST_SIM) {
            if (h->sim_hook && tl_hook_uid != h->uid) { /* not from inside this heap's own hook */
                uint64_t no = __atomic_add_fetch(&h->sim_flush_no, 1, __ATOMIC_RELAXED), outer = tl_hook_uid;
                tl_hook_uid = h->uid;
                h->sim_hook(h->sim_arg, h->handle, no);
                tl_hook_uid = outer;
            }
            sim_record(h, line);
        }
    }
    switch (h->persist) {
    case PMALLOC_PERSIST_CPU: pmem_flush((void *)a, end - a); break;
    case PMALLOC_PERSIST_MSYNC: pmem_msync((void *)a, end - a); break;
    default: break;
    }
}

void pm_drain(pm_heap *h)
{
    pm_ctr_add(h, PMC_FENCE, 1);
    if (h->persist == PMALLOC_PERSIST_SIM) {
        sim_drain(h);
        return;
    }
    if (h->eadr || h->persist == PMALLOC_PERSIST_CPU) pmem_drain();
}

nm_err pm_sim_init(pm_heap *h, bool fresh)
{
    h->shadow = fresh ? calloc(1, h->size) : malloc(h->size);
    h->shadow_stamp = calloc(h->size / PM_LINE, sizeof *h->shadow_stamp);
    if (!h->shadow || !h->shadow_stamp) {
        pm_sim_free(h);
        return nm_fail(NM_ENOMEM, "pmalloc: no memory for the %zu-byte simulation image", h->size);
    }
    if (!fresh) memcpy(h->shadow, h->base, h->size);
    return NM_OK;
}

void pm_sim_free(pm_heap *h)
{
    free(h->shadow);
    free(h->shadow_stamp);
    h->shadow = NULL;
    h->shadow_stamp = NULL;
    while (h->simqs) {
        pm_simq *q = h->simqs;
        h->simqs = q->next;
        free(q->v);
        free(q);
    }
}

nm_err pmalloc_sim_set_hook(pmalloc_heap *hd, pmalloc_sim_hook fn, void *arg)
{
    PM_ENTER_ERR(h, hd);
    if (h->persist != PMALLOC_PERSIST_SIM)
        return nm_fail(NM_ESTATE, "pmalloc: the simulation hook needs PMALLOC_PERSIST_SIM");
    h->sim_hook = fn;
    h->sim_arg = arg;
    return NM_OK;
}

typedef struct snap_fl {
    const pm_simfl *f;
    uint8_t words; /* bit i: word i of the flush reached the media */
} snap_fl;

typedef struct snap_ctx {
    pm_heap *h;
    nm_rng *r;
    snap_fl *fl; /* undrained flushes of every thread, oldest first */
    size_t nfl;
    unsigned evict_pct;
} snap_ctx;

static int cmp_stamp(const void *a, const void *b)
{
    const snap_fl *x = a, *y = b;
    return x->f->stamp < y->f->stamp ? -1 : x->f->stamp > y->f->stamp;
}

/* Write heap bytes [start, start+len) of the crash image to fd (from its
 * current position): the persisted image, the torn undrained flushes, then
 * early write-backs (evictions write back the line as it is now). */
static nm_err snap_write(void *arg, int fd, uint64_t start, uint64_t len)
{
    snap_ctx *c = arg;
    pm_heap *h = c->h;
    nm_err err = NM_OK;
    char *buf = malloc((size_t)NM_MIN((uint64_t)1 << 20, len ? len : 1));
    if (!buf) return nm_fail(NM_ENOMEM, "pmalloc: snapshot buffer");
    for (uint64_t off = start; off < start + len && err == NM_OK;) {
        size_t chunk = (size_t)NM_MIN((uint64_t)1 << 20, start + len - off);
        memcpy(buf, h->shadow + off, chunk);
        for (size_t i = 0; i < c->nfl; i++) {
            uint64_t lo = (uint64_t)c->fl[i].f->line * PM_LINE;
            if (lo < off || lo >= off + chunk) continue;
            if (c->fl[i].f->stamp < c->h->shadow_stamp[c->fl[i].f->line]) continue; /* older than what the image holds */
            uint64_t *dst = (uint64_t *)(buf + (lo - off));
            for (unsigned w = 0; w < PM_LINE / 8; w++)
                if (c->fl[i].words >> w & 1) dst[w] = c->fl[i].f->w[w];
        }
        for (size_t l = 0; c->evict_pct && l < chunk; l += PM_LINE) {
            uint64_t now[PM_LINE / 8];
            line_read(h, (off + l) / PM_LINE, now);
            if (memcmp(buf + l, now, PM_LINE) != 0 && nm_rng_below(c->r, 100) < c->evict_pct) memcpy(buf + l, now, PM_LINE);
        }
        if (write(fd, buf, chunk) != (ssize_t)chunk) err = nm_fail(NM_EIO, "pmalloc: writing the crash image");
        off += chunk;
    }
    free(buf);
    return err;
}

nm_err pmalloc_sim_snapshot(pmalloc_heap *hd, const char *dir, uint64_t seed, unsigned evict_pct)
{
    PM_ENTER_ERR(h, hd);
    if (!dir || h->persist != PMALLOC_PERSIST_SIM)
        return nm_fail(NM_ESTATE, "pmalloc: snapshots need PMALLOC_PERSIST_SIM");
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, PMALLOC_FILE_NAME);
    (void)pmalloc_remove(dir, NULL); /* the previous image, if any */
    nm_rng r;
    nm_rng_seed(&r, seed);
    pthread_mutex_lock(&h->sim_lock);
    size_t n = 0;
    for (pm_simq *q = h->simqs; q; q = q->next) n += q->n;
    snap_fl *fl = malloc((n + 1) * sizeof *fl);
    n = 0;
    for (pm_simq *q = h->simqs; fl && q; q = q->next)
        for (size_t i = 0; i < q->n; i++) fl[n++] = (snap_fl){&q->v[i], (uint8_t)nm_rng_u64(&r)}; /* torn at 8 bytes */
    pm_sort(fl, n, sizeof *fl, cmp_stamp);
    snap_ctx c = {h, &r, fl, fl ? n : 0, evict_pct};
    nm_err err = NM_OK;
    bool uncommitted = h->files && !h->files->committed;
    if (uncommitted && h->files->single) {
        /* a create that had not given the file its name: what a crash leaves is the temporary file */
        snprintf(path, sizeof path, "%s/%s.creating", dir, PMALLOC_FILE_NAME);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        err = fd < 0 ? nm_fail(NM_EIO, "pmalloc: cannot create %s", path) : snap_write(&c, fd, 0, h->size);
        if (fd >= 0) close(fd);
    } else if (uncommitted) {
        /* node files: nothing (the next create removes such leftovers itself) */
    } else if (h->files) {
        err = pm_files_snapshot(h, dir, snap_write, &c); /* one image file per heap file */
    } else {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        err = fd < 0 ? nm_fail(NM_EIO, "pmalloc: cannot create %s", path) : snap_write(&c, fd, 0, h->size);
        if (fd >= 0) close(fd);
    }
    pthread_mutex_unlock(&h->sim_lock);
    free(fl);
    return err;
}
