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
#include "pm_internal.h"

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

static void sim_record(pm_heap *h, uint64_t line)
{
    pthread_mutex_lock(&h->sim_lock);
    if (!(h->pending_bm[line / 64] & (1ull << (line % 64)))) {
        if (h->npending == h->cap_pending) {
            size_t cap = h->cap_pending ? h->cap_pending * 2 : 1024;
            uint32_t *p = realloc(h->pending, cap * sizeof *p);
            if (!p) { /* cannot track: persist it at once (a stronger image, still valid) */
                memcpy(h->shadow + line * PM_LINE, h->base + line * PM_LINE, PM_LINE);
                pthread_mutex_unlock(&h->sim_lock);
                return;
            }
            h->pending = p;
            h->cap_pending = cap;
        }
        h->pending_bm[line / 64] |= 1ull << (line % 64);
        h->pending[h->npending++] = (uint32_t)line;
    }
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
            if (h->sim_hook && !h->in_hook) {
                uint64_t no = __atomic_add_fetch(&h->sim_flush_no, 1, __ATOMIC_RELAXED);
                h->in_hook = true;
                h->sim_hook(h->sim_arg, h->handle, no);
                h->in_hook = false;
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
        pthread_mutex_lock(&h->sim_lock);
        for (size_t i = 0; i < h->npending; i++) {
            uint64_t line = h->pending[i];
            memcpy(h->shadow + line * PM_LINE, h->base + line * PM_LINE, PM_LINE);
            h->pending_bm[line / 64] &= ~(1ull << (line % 64));
        }
        h->npending = 0;
        pthread_mutex_unlock(&h->sim_lock);
        return;
    }
    if (h->eadr || h->persist == PMALLOC_PERSIST_CPU) pmem_drain();
}

nm_err pm_sim_init(pm_heap *h, bool fresh)
{
    h->shadow = fresh ? calloc(1, h->size) : malloc(h->size);
    size_t nlines = h->size / PM_LINE;
    h->pending_bm = calloc((nlines + 63) / 64, sizeof(uint64_t));
    if (!h->shadow || !h->pending_bm) {
        pm_sim_free(h);
        return nm_fail(NM_ENOMEM, "pmalloc: no memory for the %zu-byte simulation image", h->size);
    }
    if (!fresh) memcpy(h->shadow, h->base, h->size);
    return NM_OK;
}

void pm_sim_free(pm_heap *h)
{
    free(h->shadow);
    free(h->pending);
    free(h->pending_bm);
    h->shadow = NULL;
    h->pending = NULL;
    h->pending_bm = NULL;
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

typedef struct snap_ctx {
    pm_heap *h;
    nm_rng *r;
    const uint32_t *torn;
    size_t nt;
    unsigned evict_pct;
} snap_ctx;

/* Write heap bytes [start, start+len) of the crash image to fd (from its
 * current position): the persisted image, early write-backs, torn lines. */
static nm_err snap_write(void *arg, int fd, uint64_t start, uint64_t len)
{
    snap_ctx *c = arg;
    pm_heap *h = c->h;
    nm_err err = NM_OK;
    for (uint64_t off = start; off < start + len && err == NM_OK;) {
        size_t chunk = (size_t)NM_MIN((uint64_t)1 << 20, start + len - off);
        char *buf = malloc(chunk);
        if (!buf) return nm_fail(NM_ENOMEM, "pmalloc: snapshot buffer");
        memcpy(buf, h->shadow + off, chunk);
        for (size_t l = 0; c->evict_pct && l < chunk; l += PM_LINE) /* early write-backs */
            if (memcmp(buf + l, h->base + off + l, PM_LINE) != 0 && nm_rng_below(c->r, 100) < c->evict_pct)
                memcpy(buf + l, h->base + off + l, PM_LINE);
        for (size_t i = 0; i < c->nt; i++) {
            uint64_t lo = (uint64_t)c->torn[i] * PM_LINE;
            if (lo >= off && lo < off + chunk) memcpy(buf + (lo - off), h->base + lo, PM_LINE);
        }
        if (write(fd, buf, chunk) != (ssize_t)chunk) err = nm_fail(NM_EIO, "pmalloc: writing the crash image");
        free(buf);
        off += chunk;
    }
    return err;
}

nm_err pmalloc_sim_snapshot(pmalloc_heap *hd, const char *dir, uint64_t seed, unsigned evict_pct)
{
    PM_ENTER_ERR(h, hd);
    if (!dir || h->persist != PMALLOC_PERSIST_SIM)
        return nm_fail(NM_ESTATE, "pmalloc: snapshots need PMALLOC_PERSIST_SIM");
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, PMALLOC_FILE_NAME);
    int fd = -1;
    if (!h->files && (fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600)) < 0) return nm_fail(NM_EIO, "pmalloc: cannot create %s", path);
    nm_rng r;
    nm_rng_seed(&r, seed);
    pthread_mutex_lock(&h->sim_lock);
    /* Lines flushed but not drained may or may not have reached the media. */
    uint32_t *torn = malloc((h->npending + 1) * sizeof *torn);
    size_t nt = 0;
    for (size_t i = 0; torn && i < h->npending; i++)
        if (nm_rng_u64(&r) & 1) torn[nt++] = h->pending[i];
    snap_ctx c = {h, &r, torn, nt, evict_pct};
    /* the image with the chosen pending lines applied; a heap with node files
     * gets one image file per heap file (files.c) */
    nm_err err = h->files ? pm_files_snapshot(h, dir, snap_write, &c) : snap_write(&c, fd, 0, h->size);
    pthread_mutex_unlock(&h->sim_lock);
    free(torn);
    if (fd >= 0) close(fd);
    return err;
}
