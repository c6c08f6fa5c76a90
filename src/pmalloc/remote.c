/* Two-phase remote free of small blocks (paper Sec. 6.2, Algorithm 2, Fig. 14)
 * and its recovery (Sec. 7, "Completion of delayed remote deallocations").
 *
 * Phase 1, remote recording, by the freeing thread (whose node differs from
 * the block's arena's node), after the WAL entry and the persisted *src = 0:
 *   under the slab's mutex: set the block's bit in the slab's shadow bitmap,
 *   take a timestamp, queue the slab on its arena's pending stack; then
 *   (LOG) append {block, ts} to the deallocation log of the freeing thread's
 *   node and persist it. That entry is the free's completion record: the
 *   persistent bitmap, on the owner's node, is not touched.
 * Phase 2, local synchronisation, under the owner arena's lock: take the
 * slab's shadow bits and a timestamp under the slab mutex, clear the blocks'
 * persistent bits (persisted), then persist the timestamp into the slab's
 * entry of the timestamp table; only then do the blocks become allocatable
 * (regular bitmap). It runs when an allocating thread finds no partial slab
 * of its class in its arena (on demand), in the node's synchronisation
 * thread (every numa_sync_ms, and when a log segment fills: epoch-based),
 * when a log needs its other segment back, and at close.
 * Recovery: a log entry whose timestamp is newer than its slab's was recorded
 * and not yet synchronised: clear the bit. Older entries were applied (the
 * block may have been reallocated since) and are skipped. Idempotent.
 *
 * Timestamps come from one counter per heap (a fetch-and-add), not rdtsc +
 * ORDO: they must also order events across restarts (they persist), and
 * every comparison is between a log entry and its slab's synchronisation. A
 * new slab's timestamp is set above every timestamp issued so far, so stale
 * entries naming a block of an earlier slab at the same place are skipped.
 *
 * GC model: no log entries (the GC model writes no small-block metadata at run
 * time; recovery marks from the roots), shadow bitmaps and synchronisation as
 * above, persistent bits cleared without flushes. */
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>

#include "nearmem/common/bitmap.h"
#include "nearmem/common/timer.h"
#include "pm_ops.h"

/* ---- layout ---- */

void pm_numa_layout_for(uint64_t heap_size, uint32_t nlogs, uint32_t seg_entries, pm_numa_layout *l)
{
    memset(l, 0, sizeof *l);
    if (nlogs < 2) return;
    l->nlogs = nlogs;
    l->seg_entries = seg_entries;
    l->ts_rel = NM_ALIGN_UP((uint64_t)nlogs * 2 * PM_LINE, PM_PAGE);
    l->seg_rel = l->ts_rel + NM_ALIGN_UP(heap_size / PM_PAGE * 8, PM_PAGE);
    l->region_bytes = l->seg_rel + NM_ALIGN_UP((uint64_t)nlogs * 2 * seg_entries * sizeof(pm_dlog_ent), PM_PAGE);
}

static inline pm_numa_hdr *numa_hdr(const pm_super *sb) { return (pm_numa_hdr *)((char *)sb + PM_NUMA_HDR_LINE * PM_LINE); }
static uint64_t numa_hdr_check(const pm_numa_hdr *nh) { return XXH64(nh, offsetof(pm_numa_hdr, check), 0x4e554d41); }
static uint64_t seg_hdr_check(const pm_dlog_hdr *d) { return XXH64(d, offsetof(pm_dlog_hdr, gen), 0x444c4f47); }
/* A segment's generation word: the generation and a check of it, one 8-byte store. */
#define GEN_MASK ((1ull << 48) - 1)
static uint64_t gen_word(unsigned li, unsigned seg, uint64_t gen)
{
    uint64_t v[2] = {(uint64_t)li << 1 | seg, gen & GEN_MASK};
    return (gen & GEN_MASK) | (uint64_t)(uint16_t)XXH64(v, sizeof v, 0x47454e57u) << 48;
}
static inline uint64_t seg_gen(const pm_numa *n, unsigned li, unsigned seg)
{
    return __atomic_load_n(&n->seghdr[li * 2 + seg].gen, __ATOMIC_RELAXED) & GEN_MASK;
}
static uint64_t ent_check(uint64_t block, uint64_t ts, uint64_t gen, unsigned log, unsigned seg)
{
    uint64_t v[4] = {block, ts, gen, (uint64_t)log << 1 | seg};
    return XXH64(v, sizeof v, 0x454e5452);
}

nm_err pm_numa_region_of(const pm_super *sb, uint64_t *bytes)
{
    const pm_numa_hdr *nh = numa_hdr(sb);
    *bytes = 0;
    if (nh->magic == 0 && nh->check == 0) return NM_OK; /* created with one node */
    if (nh->magic != PM_NUMA_MAGIC || nh->check != numa_hdr_check(nh))
        return nm_fail(NM_ECORRUPT, "pmalloc: NUMA header (superblock line %u) is damaged", PM_NUMA_HDR_LINE);
    pm_numa_layout l;
    pm_numa_layout_for(sb->heap_size, nh->nlogs, nh->seg_entries, &l);
    uint64_t off = NM_ALIGN_UP(sb->bk_off + (uint64_t)sb->nchunks * PM_CHUNK_BYTES, PM_PAGE);
    if (nh->nlogs < 2 || nh->nlogs > PM_NUMA_MAX_NODES || nh->seg_entries < 16 || nh->seg_entries > (1u << 20) ||
        nh->region_off != off || nh->region_bytes != l.region_bytes || nh->ts_off != off + l.ts_rel || nh->seg_off != off + l.seg_rel ||
        off + l.region_bytes >= sb->heap_size)
        return nm_fail(NM_ECORRUPT, "pmalloc: NUMA header describes an impossible region");
    *bytes = l.region_bytes;
    return NM_OK;
}

uint64_t pm_numa_new_region(pm_heap *h, uint64_t heap_size, const pmalloc_options *o)
{
    pm_numa *n = h->numa;
    if (n->nnodes < 2) return 0;
    uint32_t se = o->numa_log_entries;
    if (!se) se = (uint32_t)NM_MAX(64u, NM_MIN(4096u, heap_size / PM_PAGE / 16));
    se = NM_MAX(16u, NM_MIN(se, 1u << 20));
    pm_numa_layout l;
    pm_numa_layout_for(heap_size, n->nnodes, se, &l);
    if (l.region_bytes * 4 > heap_size) return 0; /* tiny heap: no room, remote frees go the direct way */
    n->nlogs = n->nnodes;
    n->seg_entries = se;
    return l.region_bytes;
}

static void attach(pm_heap *h)
{
    pm_numa *n = h->numa;
    pm_numa_hdr *nh = numa_hdr(h->sb);
    n->hdr = nh;
    n->nlogs = nh->nlogs;
    n->seg_entries = nh->seg_entries;
    n->seghdr = (pm_dlog_hdr *)(h->base + nh->region_off);
    n->ts_table = (uint64_t *)(h->base + nh->ts_off);
    n->segs = (pm_dlog_ent *)(h->base + nh->seg_off);
}

static inline pm_dlog_ent *seg_ent(pm_numa *n, unsigned log, unsigned seg, uint32_t i)
{
    return &n->segs[((uint64_t)log * 2 + seg) * n->seg_entries + i];
}

nm_err pm_numa_create(pm_heap *h, uint64_t region_off)
{
    pm_numa *n = h->numa;
    pm_numa_layout l;
    pm_numa_layout_for(h->size, n->nlogs, n->seg_entries, &l);
    pm_numa_hdr *nh = numa_hdr(h->sb);
    nh->nlogs = n->nlogs;
    nh->seg_entries = n->seg_entries;
    nh->region_off = region_off;
    nh->region_bytes = l.region_bytes;
    nh->ts_off = region_off + l.ts_rel;
    nh->seg_off = region_off + l.seg_rel;
    nh->magic = PM_NUMA_MAGIC;
    nh->check = numa_hdr_check(nh);
    pm_dlog_hdr *sh = (pm_dlog_hdr *)(h->base + region_off);
    for (unsigned i = 0; i < n->nlogs * 2; i++) {
        sh[i].magic = PM_DLOG_MAGIC;
        sh[i].log = i / 2;
        sh[i].seg = i % 2;
        sh[i].gen = gen_word(i / 2, i % 2, 1);
        sh[i].check = seg_hdr_check(&sh[i]);
    }
    /* the file is zero-filled: the segments are empty; every timestamp "never set" */
    uint64_t *ts = (uint64_t *)(h->base + nh->ts_off);
    for (uint64_t p = 0; p < h->size / PM_PAGE; p++) ts[p] = pm_ts_word(p, 0);
    pm_flush(h, ts, h->size / PM_PAGE * 8, PM_META);
    pm_flush(h, sh, (size_t)n->nlogs * 2 * PM_LINE, PM_META);
    pm_persist(h, nh, sizeof *nh, PM_META);
    return NM_OK;
}

/* ---- volatile state ---- */

static pm_rslab *get_rs(pm_vslab *s)
{
    pm_rslab *rs = __atomic_load_n(&s->rs, __ATOMIC_ACQUIRE);
    if (rs) return rs;
    rs = calloc(1, sizeof *rs);
    if (!rs) return NULL;
    rs->shadow = calloc(nm_bitmap_words(s->nblocks), sizeof(uint64_t));
    if (!rs->shadow) { free(rs); return NULL; }
    pthread_mutex_init(&rs->lock, NULL);
    rs->slab = s;
    pm_rslab *exp = NULL;
    if (__atomic_compare_exchange_n(&s->rs, &exp, rs, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) return rs;
    pthread_mutex_destroy(&rs->lock);
    free(rs->shadow);
    free(rs);
    return exp;
}

bool pm_numa_is_remote(const pm_heap *h, const pm_tcache *tc, const pm_vslab *s)
{
    const pm_numa *n = h->numa;
    if (NM_LIKELY(n->hdr == NULL)) return false;
    return s->arena->node != tc->node && get_rs((pm_vslab *)s) != NULL; /* no host memory: direct free */
}

/* ---- phase 2: synchronisation ---- */

static int cmp_uptr(const void *a, const void *b)
{
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return x < y ? -1 : x > y;
}

static unsigned rs_sync(pm_heap *h, pm_rslab *rs, int why)
{
    pm_numa *n = h->numa;
    pm_vslab *s = rs->slab;
    uint32_t nw = (uint32_t)nm_bitmap_words(s->nblocks);
    uint64_t bits[(PMALLOC_SLAB_SIZE / 16 + 63) / 64];
    pthread_mutex_lock(&rs->lock);
    unsigned cnt = rs->nshadow;
    for (uint32_t w = 0; w < nw; w++) bits[w] = __atomic_exchange_n(&rs->shadow[w], 0, __ATOMIC_RELAXED);
    rs->nshadow = 0;
    rs->queued = false;
    uint64_t ts = __atomic_fetch_add(&n->dts, 1, __ATOMIC_SEQ_CST);
    pthread_mutex_unlock(&rs->lock);
    if (!cnt) return 0;
    bool log = h->model == PMALLOC_LOG;
    /* clear the bits, then flush each touched bitmap line once: a batch's
     * blocks spread over the stripes' lines, several per line */
    uintptr_t lines[sizeof bits * 8];
    unsigned nl = 0;
    uint64_t dg = 0;
    for (uint32_t w = 0; w < nw; w++)
        for (uint64_t b = bits[w]; b; b &= b - 1) {
            uint32_t idx = w * 64u + (uint32_t)nm_ctz64(b);
            uint64_t m, *pw = pm_pbm_word(s, idx, &m);
            if (__atomic_fetch_and(pw, ~m, __ATOMIC_RELAXED) & m) {
                uint64_t x = pm_blk_hash(pm_blk_off(h, s, idx));
                __atomic_fetch_xor(&s->digest, x, __ATOMIC_RELAXED);
                dg ^= x;
            }
            lines[nl++] = (uintptr_t)pw & ~(uintptr_t)(PM_LINE - 1);
        }
    if (log) {
        pm_sort(lines, nl, sizeof *lines, cmp_uptr);
        for (unsigned i = 0; i < nl; i++)
            if (i == 0 || lines[i] != lines[i - 1]) pm_flush(h, (const void *)lines[i], PM_LINE, PM_META);
        pm_drain(h);
        /* then the slab's checksum (until ts is durable, the entries still name
         * these blocks: recovery treats them as unknown, redo.c) */
        pm_slab_digest_toggle(h, s, dg);
        pm_drain(h);
        /* the bits are durably clear: now the entries recorded before ts are obsolete */
        pm_ts_put(h, s->veh->page, ts);
    }
    /* the blocks become allocatable; the last put may release the slab (and rs) */
    for (uint32_t w = 0; w < nw; w++)
        for (uint64_t b = bits[w]; b; b &= b - 1) pm_small_vslab_put(h, s, w * 64u + (uint32_t)nm_ctz64(b));
    pm_count(&n->c_synced[why], cnt);
    return cnt;
}

unsigned pm_numa_sync_arena(pm_heap *h, pm_arena *a, int why)
{
    pm_numa *n = h->numa;
    if (NM_LIKELY(n->pend == NULL)) return 0;
    if (!__atomic_load_n(&n->pend[a->id].head, __ATOMIC_RELAXED)) return 0;
    pm_rslab *rs = __atomic_exchange_n(&n->pend[a->id].head, NULL, __ATOMIC_ACQ_REL);
    unsigned total = 0;
    while (rs) {
        pm_rslab *next = rs->qnext;
        total += rs_sync(h, rs, why);
        rs = next;
    }
    return total;
}

void pm_numa_lock_arenas(pm_heap *h, bool lock)
{
    for (unsigned i = 0; i < h->narenas; i++) {
        if (lock) pthread_mutex_lock(&h->arenas[i].lock);
        else pthread_mutex_unlock(&h->arenas[i].lock);
    }
}

static void done_max(pm_numa *n, unsigned node, uint64_t e)
{
    uint64_t cur = __atomic_load_n(&n->done[node], __ATOMIC_RELAXED);
    while (cur < e && !__atomic_compare_exchange_n(&n->done[node], &cur, e, false, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {}
}

/* One synchronisation pass over the arenas of `node` (-1: all nodes). Every
 * shadow bit set before the pass read the epoch is applied by its end. */
static void sync_pass(pm_heap *h, int node, int why)
{
    pm_numa *n = h->numa;
    if (!n->pend) return;
    uint64_t e = __atomic_load_n(&n->epoch, __ATOMIC_SEQ_CST);
    unsigned per = n->per_node;
    for (unsigned i = 0; i < h->narenas; i++) {
        if (node >= 0 && i / per != (unsigned)node) continue;
        pthread_mutex_lock(&h->arenas[i].lock);
        pm_numa_sync_arena(h, &h->arenas[i], why);
        pthread_mutex_unlock(&h->arenas[i].lock);
    }
    /* Under large_lock even when nothing is pending: an on-demand xsync
     * (numa.c, large_lock held) may have taken a node's list before this pass
     * read the epoch and still be writing its tombstones; a pass that skipped
     * it would let the log segments holding those frees be recycled before
     * the tombstones are durable (a crash then leaks the extents). */
    pthread_mutex_lock(&h->large_lock);
    for (unsigned k = 0; k < n->nnodes; k++) {
        if ((node >= 0 && k != (unsigned)node) || !__atomic_load_n(&n->xpend[k], __ATOMIC_RELAXED)) continue;
        pm_numa_xsync(h, k, why);
    }
    pthread_mutex_unlock(&h->large_lock);
    for (unsigned k = 0; k < n->nnodes; k++)
        if (node < 0 || k == (unsigned)node) done_max(n, k, e);
    pm_count(&n->c_passes, 1);
}

nm_err pmalloc_numa_sync(pmalloc_heap *hd)
{
    PM_ENTER_ERR(h, hd);
    sync_pass(h, -1, PM_SYNC_OTHER);
    return NM_OK;
}

static void *sync_thread(void *arg)
{
    pm_heap *h = ((void **)arg)[0];
    unsigned node = (unsigned)(uintptr_t)((void **)arg)[1];
    free(arg);
    pm_numa *n = h->numa;
    pthread_mutex_lock(&n->mu);
    while (!n->stop) {
        if (!n->kick[node]) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            uint64_t t = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec + n->sync_ns;
            ts.tv_sec = (time_t)(t / 1000000000ull);
            ts.tv_nsec = (long)(t % 1000000000ull);
            pthread_cond_timedwait(&n->cv, &n->mu, &ts);
            if (n->stop) break;
        }
        n->kick[node] = 0;
        pthread_mutex_unlock(&n->mu);
        sync_pass(h, (int)node, PM_SYNC_EPOCH);
        pthread_mutex_lock(&n->mu);
    }
    pthread_mutex_unlock(&n->mu);
    return NULL;
}

void pm_numa_start(pm_heap *h)
{
    pm_numa *n = h->numa;
    /* the power-failure simulation crashes at chosen flushes of one thread:
     * no background flushes there */
    if (!n->pend || n->nnodes < 2 || !n->sync_ns || h->persist == PMALLOC_PERSIST_SIM) return;
    n->threads = calloc(n->nnodes, sizeof *n->threads);
    if (!n->threads) return; /* on-demand synchronisation still works */
    for (unsigned k = 0; k < n->nnodes; k++) {
        void **arg = malloc(2 * sizeof *arg);
        if (!arg) break;
        arg[0] = h;
        arg[1] = (void *)(uintptr_t)k;
        if (pthread_create(&n->threads[k], NULL, sync_thread, arg) != 0) { free(arg); break; }
        n->nthreads++;
    }
}

static void stop_threads(pm_numa *n)
{
    if (!n->nthreads) return;
    pthread_mutex_lock(&n->mu);
    n->stop = true;
    pthread_cond_broadcast(&n->cv);
    pthread_mutex_unlock(&n->mu);
    for (unsigned k = 0; k < n->nthreads; k++) pthread_join(n->threads[k], NULL);
    n->nthreads = 0;
}

/* ---- phase 1: recording ---- */

static uint64_t min_done(pm_numa *n)
{
    uint64_t m = UINT64_MAX;
    for (unsigned k = 0; k < n->nnodes; k++) m = NM_MIN(m, __atomic_load_n(&n->done[k], __ATOMIC_SEQ_CST));
    return m;
}

static void bump_gen(pm_heap *h, unsigned log, unsigned seg)
{
    pm_dlog_hdr *d = &h->numa->seghdr[log * 2 + seg];
    __atomic_store_n(&d->gen, gen_word(log, seg, seg_gen(h->numa, log, seg) + 1), __ATOMIC_RELAXED);
    pm_persist(h, &d->gen, 8, PM_META);
}

/* The active segment is full (log lock held): close it and reuse the other
 * one once every entry in it is obsolete, i.e. every node has completed a
 * synchronisation pass that started after that segment was closed. */
static void dlog_switch(pm_heap *h, unsigned li)
{
    pm_numa *n = h->numa;
    pm_dlog *L = &n->logs[li];
    unsigned o = 1 - L->active;
    while (__atomic_load_n(&L->writers[o], __ATOMIC_ACQUIRE)) sched_yield();
    /* A free that had reserved its slot in o before o was closed may have
     * queued its shadow bit only after a pass that already counts as "after
     * the close": o then counts as closed only from now, its writers done. */
    if (L->late[o]) {
        L->closed_epoch[o] = __atomic_add_fetch(&n->epoch, 1, __ATOMIC_SEQ_CST);
        L->late[o] = false;
    }
    if (L->closed_epoch[o] > min_done(n)) sync_pass(h, -1, PM_SYNC_OTHER); /* nobody did it yet: do it here */
    bump_gen(h, li, o); /* its entries are dead from here on */
    /* writers only join under L->lock (held): none joins the closing segment now */
    L->late[L->active] = __atomic_load_n(&L->writers[L->active], __ATOMIC_ACQUIRE) != 0;
    L->closed_epoch[L->active] = __atomic_add_fetch(&n->epoch, 1, __ATOMIC_SEQ_CST);
    L->closed_epoch[o] = 0;
    L->active = o;
    L->cursor = 0;
    pm_count(&n->c_switches, 1);
    pthread_mutex_lock(&n->mu); /* wake the synchronisation threads (epoch-based sync) */
    for (unsigned k = 0; k < n->nnodes; k++) n->kick[k] = 1;
    pthread_cond_broadcast(&n->cv);
    pthread_mutex_unlock(&n->mu);
}

/* A slot of the freeing node's deallocation log, taken before the free
 * commits (a segment switch may synchronise, which takes arena locks: not
 * inside an operation, redo.c); the segment cannot be recycled before the
 * entry is written (writers). */
void pm_numa_remote_reserve(pm_heap *h, pm_tcache *tc)
{
    pm_numa *n = h->numa;
    if (!n->hdr) return;
    unsigned li = tc->node % n->nlogs;
    pm_dlog *L = &n->logs[li];
    pthread_mutex_lock(&L->lock);
    if (L->cursor == n->seg_entries) dlog_switch(h, li);
    tc->dl.log = li;
    tc->dl.seg = L->active;
    tc->dl.slot = L->cursor++;
    __atomic_add_fetch(&L->writers[tc->dl.seg], 1, __ATOMIC_ACQ_REL);
    tc->dl.gen = seg_gen(n, li, tc->dl.seg);
    tc->dl.held = true;
    pthread_mutex_unlock(&L->lock);
}

static void dlog_write(pm_heap *h, pm_tcache *tc, uint64_t block, uint64_t ts)
{
    pm_numa *n = h->numa;
    unsigned li = tc->dl.log, seg = tc->dl.seg;
    pm_dlog_ent *e = seg_ent(n, li, seg, tc->dl.slot);
    e->block = block;
    e->ts = ts;
    e->gen = tc->dl.gen;
    e->check = ent_check(block, ts, tc->dl.gen, li, seg);
    pm_persist(h, e, sizeof *e, PM_META);
    tc->dl.held = false;
    __atomic_sub_fetch(&n->logs[li].writers[seg], 1, __ATOMIC_ACQ_REL);
}

nm_err pm_numa_remote_free(pm_heap *h, pm_tcache *tc, pm_vslab *s, uint32_t idx)
{
    pm_numa *n = h->numa;
    pm_rslab *rs = __atomic_load_n(&s->rs, __ATOMIC_ACQUIRE); /* allocated by pm_numa_is_remote; atomic: a losing get_rs CAS may run concurrently */
    uint64_t m = 1ull << (idx % 64u);
    /* once the shadow bit is set and the lock dropped, the owner may apply it
     * and release the slab: nothing of s is read after the unlock */
    uint64_t block = pm_off(h, s->data) + (uint64_t)idx * s->block_size;
    uint64_t cbit = (block - pm_off(h, s->hdr)) / 16u, cm = 1ull << (cbit % 64u); /* the free's claim (pmalloc.c) */
    pthread_mutex_lock(&rs->lock);
    if (__atomic_load_n(&rs->shadow[idx / 64u], __ATOMIC_RELAXED) & m) {
        __atomic_fetch_and(&s->claim[cbit / 64u], ~cm, __ATOMIC_SEQ_CST);
        pthread_mutex_unlock(&rs->lock);
        return nm_fail(NM_EDOUBLEFREE, "pmalloc_free_from: block was freed concurrently");
    }
    __atomic_fetch_or(&rs->shadow[idx / 64u], m, __ATOMIC_SEQ_CST);
    /* the caller's claim (pmalloc_free_from) ends once the shadow bit is
     * visible, and before the owner may apply it and release the slab */
    __atomic_fetch_and(&s->claim[cbit / 64u], ~cm, __ATOMIC_SEQ_CST);
    rs->nshadow++;
    uint64_t ts = __atomic_fetch_add(&n->dts, 1, __ATOMIC_SEQ_CST);
    if (!rs->queued) {
        rs->queued = true;
        pm_pend *p = &n->pend[s->arena->id];
        rs->qnext = __atomic_load_n(&p->head, __ATOMIC_RELAXED);
        while (!__atomic_compare_exchange_n(&p->head, &rs->qnext, rs, true, __ATOMIC_RELEASE, __ATOMIC_RELAXED)) {}
    }
    pthread_mutex_unlock(&rs->lock);
    pm_count(&n->c_remote_frees, 1);
    if (h->model == PMALLOC_LOG) dlog_write(h, tc, block, ts); /* reserved before the commit */
    return NM_OK;
}

/* ---- two-phase remote free of extents (Sec. 6.3) ----
 * Recording (the freeing thread, after the WAL entry and *src = 0): put the
 * extent, still allocated in DRAM and marked `freeing` (so a second free
 * fails and nobody allocates it), on its node's remote-released list and
 * append {offset | PM_DLOG_EXTENT, ts} to the freeing node's log. The owner
 * side appends the tombstone to the bookkeeping log, persists the extent's
 * timestamp (first page's table entry), and only then returns the extent to
 * the free list. Recovery: an entry newer than its page's timestamp whose
 * extent is still allocated there gets its tombstone. Both models (large
 * allocations follow the LOG path in both). */

bool pm_numa_extent_is_remote(const pm_heap *h, const pm_tcache *tc, const pm_veh *v)
{
    const pm_numa *n = h->numa;
    return n->hdr != NULL && n->nnodes > 1 && pm_numa_page_node(h, v->page) != tc->node;
}

void pm_numa_remote_free_extent(pm_heap *h, pm_tcache *tc, pm_veh *v)
{
    pm_numa *n = h->numa;
    uint64_t off = h->sb->data_off + v->page * PM_PAGE;
    unsigned node = pm_numa_page_node(h, v->page);
    pthread_mutex_lock(&n->xlock);
    uint64_t ts = __atomic_fetch_add(&n->dts, 1, __ATOMIC_SEQ_CST);
    v->next = n->xpend[node];
    __atomic_store_n(&n->xpend[node], v, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&n->xlock);
    /* from here the owner may release v: it is not read again */
    pm_count(&n->c_remote_xfrees, 1);
    dlog_write(h, tc, off | PM_DLOG_EXTENT, ts); /* reserved before the commit */
}

unsigned pm_numa_xsync(pm_heap *h, unsigned node, int why)
{
    pm_numa *n = h->numa;
    NM_UNUSED(why);
    if (!n->xpend || node >= n->nnodes || !__atomic_load_n(&n->xpend[node], __ATOMIC_RELAXED)) return 0;
    pthread_mutex_lock(&n->xlock);
    pm_veh *list = n->xpend[node];
    __atomic_store_n(&n->xpend[node], NULL, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&n->xlock);
    unsigned cnt = 0;
    while (list) {
        pm_veh *v = list;
        list = v->next;
        v->next = NULL;
        uint64_t ts = __atomic_fetch_add(&n->dts, 1, __ATOMIC_SEQ_CST);
        pthread_mutex_lock(&h->bk_lock);
        nm_err te = pm_bk_tombstone(h, v);
        /* the tombstone is durable: entries recorded before ts are obsolete */
        if (te == NM_OK) pm_bk_settle(h);
        pthread_mutex_unlock(&h->bk_lock);
        if (te != NM_OK) { /* log full (cannot happen: see large.c): keep it pending */
            pthread_mutex_lock(&n->xlock);
            v->next = n->xpend[node];
            __atomic_store_n(&n->xpend[node], v, __ATOMIC_RELAXED);
            pthread_mutex_unlock(&n->xlock);
            continue;
        }
        pm_ts_put(h, v->page, ts);
        __atomic_store_n(&v->freeing, false, __ATOMIC_RELAXED);
        pm_extent_release(h, v);
        cnt++;
    }
    pm_count(&n->c_xsynced, cnt);
    return cnt;
}

/* ---- open: validate, replay (Sec. 7), retire ---- */

static nm_err small_at(pm_heap *h, uint64_t off, pm_vslab **out, uint32_t *idx)
{
    *out = NULL;
    uint64_t page = (off - h->sb->data_off) / PM_PAGE;
    pm_veh *v = h->pmap[page];
    if (!v || v->state != PM_VEH_SLAB || !v->slab) return NM_OK; /* no slab there any more: stale */
    pm_vslab *s = v->slab;
    uint64_t start = pm_off(h, s->data);
    if (off < start || (off - start) % s->block_size || (off - start) / s->block_size >= s->nblocks) return NM_OK;
    *idx = (uint32_t)((off - start) / s->block_size);
    *out = s;
    return NM_OK;
}

static bool ent_zero(const pm_dlog_ent *e) { return !e->block && !e->ts && !e->gen && !e->check; }
static bool ent_valid(const pm_dlog_ent *e, unsigned li, unsigned seg) { return e->check == ent_check(e->block, e->ts, e->gen, li, seg); }

/* The slab or extent timestamp of an entry's block: an entry newer than it
 * was recorded and not yet synchronised (0: no slab there any more). */
static uint64_t ent_page_ts(pm_heap *h, uint64_t block)
{
    if (block & PM_DLOG_EXTENT) {
        uint64_t off = block & ~PM_DLOG_EXTENT;
        if (off < h->sb->data_off || off >= h->size) return 0;
        return pm_ts_get(h->numa, (off - h->sb->data_off) / PM_PAGE);
    }
    pm_vslab *s;
    uint32_t idx;
    if (block < h->sb->data_off || block >= h->size) return 0;
    small_at(h, block, &s, &idx);
    return s ? pm_ts_get(h->numa, s->veh->page) : 0;
}

static nm_err check_damaged(pm_heap *h)
{
    pm_numa *n = h->numa;
    size_t bad = 0, nlive = 0;
    unsigned bli = 0, bseg = 0;
    uint32_t bi = 0;
    for (unsigned li = 0; li < n->nlogs; li++)
        for (unsigned seg = 0; seg < 2; seg++)
            for (uint32_t i = 0; i < n->seg_entries; i++) {
                const pm_dlog_ent *e = seg_ent(n, li, seg, i);
                if (ent_zero(e)) continue;
                if (!ent_valid(e, li, seg)) {
                    if (!bad++) { bli = li; bseg = seg; bi = i; }
                } else if (e->gen == seg_gen(n, li, seg)) nlive++;
            }
    if (!bad) return NM_OK;
    /* The frees that may have torn their entry; one whose block has a live
     * entry not yet synchronised wrote it whole. Only a live entry newer than
     * its block's timestamp counts: a block freed remotely, synchronised,
     * allocated and freed again keeps the older entry until its segment is
     * recycled (matching by block alone refused the torn second entry). */
    uint64_t *rf, *live = malloc((nlive ? nlive : 1) * sizeof *live);
    size_t nrf, k = 0, unmatched = 0;
    nm_err err = live ? pm_redo_inflight_frees(h, &rf, &nrf) : nm_fail(NM_ENOMEM, "pmalloc: no host memory for the deallocation logs");
    if (err) { free(live); return err; }
    for (unsigned li = 0; li < n->nlogs; li++)
        for (unsigned seg = 0; seg < 2; seg++)
            for (uint32_t i = 0; i < n->seg_entries; i++) {
                const pm_dlog_ent *e = seg_ent(n, li, seg, i);
                if (!ent_zero(e) && ent_valid(e, li, seg) && e->gen == seg_gen(n, li, seg) && e->ts > ent_page_ts(h, e->block)) live[k++] = e->block;
            }
    pm_sort(live, k, sizeof *live, cmp_uptr);
    for (size_t i = 0; i < nrf; i++)
        if (!bsearch(&rf[i], live, k, sizeof *live, cmp_uptr)) unmatched++;
    free(rf);
    free(live);
    if (bad > unmatched)
        return nm_fail(NM_ECORRUPT, "pmalloc: deallocation log %u segment %u entry %u is damaged (%zu damaged entries, %zu frees in flight could have torn them)",
                       bli, bseg, bi, bad, unmatched);
    return NM_OK;
}

static void zero_damaged(pm_heap *h)
{
    pm_numa *n = h->numa;
    for (unsigned li = 0; li < n->nlogs; li++)
        for (unsigned seg = 0; seg < 2; seg++)
            for (uint32_t i = 0; i < n->seg_entries; i++) {
                pm_dlog_ent *e = seg_ent(n, li, seg, i);
                if (ent_zero(e) || ent_valid(e, li, seg)) continue;
                memset(e, 0, sizeof *e);
                pm_flush(h, e, sizeof *e, PM_META);
            }
}

nm_err pm_numa_open(pm_heap *h)
{
    pm_numa *n = h->numa;
    pm_numa_hdr *nh = numa_hdr(h->sb);
    nm_err err;
    if (nh->magic != PM_NUMA_MAGIC) return NM_OK;
    attach(h);
    for (unsigned i = 0; i < n->nlogs * 2; i++) {
        pm_dlog_hdr *d = &n->seghdr[i];
        if (d->magic != PM_DLOG_MAGIC || d->log != i / 2 || d->seg != i % 2 || d->check != seg_hdr_check(d) || d->gen != gen_word(i / 2, i % 2, d->gen & GEN_MASK) ||
            (d->gen & GEN_MASK) == 0)
            return nm_fail(NM_ECORRUPT, "pmalloc: deallocation log %u segment %u has a damaged header", i / 2, i % 2);
    }
    uint64_t maxts = 0;
    for (uint64_t p = 0; p < h->data_pages; p++) {
        uint64_t w = n->ts_table[p];
        if (w != pm_ts_word(p, w & PM_TS_MASK))
            return nm_fail(NM_ECORRUPT, "pmalloc: the NUMA slab timestamp table is damaged (data page %llu)", (unsigned long long)p);
        maxts = NM_MAX(maxts, w & PM_TS_MASK);
    }
    /* An entry is zero, valid (live: the segment's current generation; else
     * dead), or damaged. A damaged one may be torn: written by a remote free
     * whose record is after the bound (the checkpoint that moved the bound
     * waited for the entries of the operations before it) and is the last
     * record of its thread (the entry is written before the thread's next
     * record); there can be as many of those as such frees have no live
     * entry that is not yet synchronised (check_damaged). More damaged
     * entries than that: NM_ECORRUPT. Damaged entries are zeroed once the
     * logs are replayed, so a later crash does not count them again. */
    if ((err = check_damaged(h))) return err;
    uint64_t replayed = 0;
    bool log = h->model == PMALLOC_LOG;
    for (unsigned li = 0; li < n->nlogs; li++)
        for (unsigned seg = 0; seg < 2; seg++) {
            uint64_t gen = seg_gen(n, li, seg);
            for (uint32_t i = 0; i < n->seg_entries; i++) {
                pm_dlog_ent e = *seg_ent(n, li, seg, i);
                if (e.gen != gen || e.check != ent_check(e.block, e.ts, e.gen, li, seg)) continue; /* dead or damaged */
                bool ext = e.block & PM_DLOG_EXTENT;
                uint64_t blk = e.block & ~PM_DLOG_EXTENT;
                if (blk < h->sb->data_off || blk >= h->size || blk % 16 || e.ts == 0 || (ext && (blk - h->sb->data_off) % PM_PAGE))
                    return nm_fail(NM_ECORRUPT, "pmalloc: deallocation log %u entry %u names %#llx, not a block", li, i,
                                   (unsigned long long)e.block);
                maxts = NM_MAX(maxts, e.ts);
                if (ext) { /* both models: extents follow the LOG path */
                    uint64_t page = (blk - h->sb->data_off) / PM_PAGE;
                    pm_veh *v = h->pmap[page];
                    if (!v || v->state != PM_VEH_ALLOC || v->page != page || e.ts <= pm_ts_get(n, page)) continue;
                    pthread_mutex_lock(&h->bk_lock);
                    err = pm_bk_tombstone(h, v);
                    pthread_mutex_unlock(&h->bk_lock);
                    if (err) return err;
                    pm_extent_release(h, v);
                    replayed++;
                    continue;
                }
                if (!log) continue;
                pm_vslab *s;
                uint32_t idx;
                small_at(h, e.block, &s, &idx);
                if (!s || e.ts <= pm_ts_get(n, s->veh->page) || !pm_pbit(s, idx)) continue; /* applied before */
                uint64_t m, *w = pm_pbm_word(s, idx, &m);
                __atomic_fetch_and(w, ~m, __ATOMIC_RELAXED);
                uint64_t x = pm_blk_hash(pm_blk_off(h, s, idx));
                s->digest ^= x;
                pm_flush(h, w, 8, PM_META);
                pm_drain(h);
                /* then the checksum, as an owner-side synchronisation does (a
                 * toggle: the state is still RUNNING here); drained below,
                 * before the entries retire */
                pm_slab_digest_toggle(h, s, x);
                if (nm_bitmap_test(s->vbm, idx)) {
                    nm_bitmap_clear(s->vbm, idx);
                    s->nfree_v++;
                }
                pm_slab_fix_lists(h, s);
                replayed++;
            }
        }
    pm_drain(h);
    pthread_mutex_lock(&h->bk_lock);
    pm_bk_settle(h); /* the tombstones of replayed extent frees, before the entries that name them die */
    pthread_mutex_unlock(&h->bk_lock);
    /* every entry is applied; the segments retire only at the end of the
     * open (pm_numa_retire): a synchronisation cut short left bits durably
     * clear whose checksum toggle may be lost, and until the recovery has
     * written every slab's checksum again the live entries are what tells
     * open's verification (pm_numa_live_blocks) that those bits are unknown */
    zero_damaged(h); /* drained with the next write-back (dead entries either way) */
    n->c_replayed = replayed;
    n->dts = maxts + 1;
    n->logs = calloc(n->nlogs, sizeof *n->logs);
    n->pend = calloc(h->narenas, sizeof *n->pend);
    n->done = calloc(n->nnodes, sizeof *n->done);
    n->kick = calloc(n->nnodes, sizeof *n->kick);
    n->xpend = calloc(n->nnodes, sizeof *n->xpend);
    pthread_mutex_init(&n->xlock, NULL);
    if (!n->logs || !n->pend || !n->done || !n->kick || !n->xpend) return nm_fail(NM_ENOMEM, "pmalloc_open: no host memory for NUMA state");
    for (unsigned li = 0; li < n->nlogs; li++) pthread_mutex_init(&n->logs[li].lock, NULL);
    return NM_OK;
}

/* The end of an open, after the recovery wrote back the bits and checksums
 * the logs' entries name: every entry is dead from here (a crash before this
 * point replays them again: idempotent). */
static void retire_all(pm_heap *h)
{
    for (unsigned li = 0; li < h->numa->nlogs; li++)
        for (unsigned seg = 0; seg < 2; seg++) bump_gen(h, li, seg);
}

void pm_numa_retire(pm_heap *h)
{
    pm_numa *n = h->numa;
    if (!n || !n->hdr || !n->pend) return;
    retire_all(h);
}

void pm_numa_close(pm_heap *h)
{
    pm_numa *n = h->numa;
    if (!n) return;
    stop_threads(n);
    if (!n->pend) return;
    sync_pass(h, -1, PM_SYNC_OTHER);
    retire_all(h);
}

void pm_numa_free(pm_heap *h)
{
    pm_numa *n = h->numa;
    if (!n) return;
    stop_threads(n);
    free(n->threads);
    if (n->logs)
        for (unsigned li = 0; li < n->nlogs; li++) pthread_mutex_destroy(&n->logs[li].lock);
    free(n->logs);
    free(n->pend);
    free(n->done);
    free(n->kick);
    if (n->xpend) pthread_mutex_destroy(&n->xlock);
    free(n->xpend);
    free(n->cpu_node);
    pthread_mutex_destroy(&n->mu);
    pthread_cond_destroy(&n->cv);
    free(n);
    h->numa = NULL;
}

/* ---- check (arena locks and large_lock held) ---- */

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

nm_err pm_numa_check(pm_heap *h)
{
    pm_numa *n = h->numa;
    if (!n->hdr) return NM_OK;
    uint64_t dts = __atomic_load_n(&n->dts, __ATOMIC_RELAXED);
    /* live log entries newer than their slab's timestamp = recorded, not synchronised */
    size_t cap = (size_t)n->nlogs * 2 * n->seg_entries, nlive = 0;
    uint64_t *live = malloc((cap ? cap : 1) * sizeof *live);
    if (!live) return nm_fail(NM_ENOMEM, "pmalloc check: no host memory");
    nm_err err = NM_OK;
    for (unsigned li = 0; li < n->nlogs && !err; li++)
        for (unsigned seg = 0; seg < 2 && !err; seg++) {
            pm_dlog_hdr *d = &n->seghdr[li * 2 + seg];
            if (d->magic != PM_DLOG_MAGIC || d->check != seg_hdr_check(d) || d->gen != gen_word(li, seg, d->gen & GEN_MASK)) {
                err = nm_fail(NM_ECORRUPT, "pmalloc check: deallocation log %u segment %u header damaged", li, seg);
                break;
            }
            for (uint32_t i = 0; i < n->seg_entries; i++) {
                pm_dlog_ent e = *seg_ent(n, li, seg, i);
                if (e.gen != (d->gen & GEN_MASK) || e.check != ent_check(e.block, e.ts, e.gen, li, seg)) continue;
                if (e.block < h->sb->data_off || e.block >= h->size || e.ts >= dts) {
                    err = nm_fail(NM_ECORRUPT, "pmalloc check: deallocation log %u entry %u is out of range", li, i);
                    break;
                }
                if (e.block & PM_DLOG_EXTENT) {
                    uint64_t page = ((e.block & ~PM_DLOG_EXTENT) - h->sb->data_off) / PM_PAGE;
                    if (e.ts > pm_ts_get(n, page)) live[nlive++] = e.block;
                    continue;
                }
                pm_vslab *s;
                uint32_t idx;
                small_at(h, e.block, &s, &idx);
                if (s && e.ts > pm_ts_get(n, s->veh->page)) live[nlive++] = e.block;
            }
        }
    pm_sort(live, nlive, sizeof *live, cmp_u64);
    uint64_t shadowed = 0;
    for (uint64_t p = 0; p < h->data_pages && !err;) {
        pm_veh *v = h->pmap[p];
        if (v->state == PM_VEH_SLAB && v->slab) {
            pm_vslab *s = v->slab;
            if (pm_ts_get(n, v->page) >= dts) err = nm_fail(NM_ECORRUPT, "pmalloc check: slab timestamp ahead of the clock");
            pm_rslab *rs = __atomic_load_n(&s->rs, __ATOMIC_ACQUIRE);
            if (rs && !err) {
                pthread_mutex_lock(&rs->lock);
                uint32_t cnt = 0;
                for (uint32_t i = 0; i < s->nblocks && !err; i++) {
                    if (!pm_numa_shadowed(s, i)) continue;
                    cnt++;
                    uint64_t off = pm_off(h, s->data) + (uint64_t)i * s->block_size;
                    if (!pm_pbit(s, i) || !nm_bitmap_test(s->vbm, i))
                        err = nm_fail(NM_ECORRUPT, "pmalloc check: remotely freed block %#llx is not held in the bitmaps", (unsigned long long)off);
                    else if (h->model == PMALLOC_LOG && !bsearch(&off, live, nlive, sizeof *live, cmp_u64))
                        err = nm_fail(NM_ECORRUPT, "pmalloc check: remotely freed block %#llx has no live log entry", (unsigned long long)off);
                }
                if (!err && (cnt != rs->nshadow || (cnt && !rs->queued)))
                    err = nm_fail(NM_ECORRUPT, "pmalloc check: shadow bitmap has %u bits, count %u, queued %d", cnt, rs->nshadow, rs->queued);
                shadowed += cnt;
                pthread_mutex_unlock(&rs->lock);
            }
        }
        p += v->npages;
    }
    /* remotely freed extents: allocated, marked, with a live entry */
    uint64_t xpending = 0;
    pthread_mutex_lock(&n->xlock);
    for (unsigned k = 0; k < n->nnodes && !err; k++)
        for (pm_veh *v = n->xpend[k]; v && !err; v = v->next) {
            uint64_t off = (h->sb->data_off + v->page * PM_PAGE) | PM_DLOG_EXTENT;
            xpending++;
            if (v->state != PM_VEH_ALLOC || !v->freeing || pm_numa_page_node(h, v->page) != k)
                err = nm_fail(NM_ECORRUPT, "pmalloc check: remotely freed extent at page %llu is not a pending allocated extent",
                              (unsigned long long)v->page);
            else if (!bsearch(&off, live, nlive, sizeof *live, cmp_u64))
                err = nm_fail(NM_ECORRUPT, "pmalloc check: remotely freed extent at page %llu has no live log entry", (unsigned long long)v->page);
        }
    pthread_mutex_unlock(&n->xlock);
    free(live);
    if (!err) {
        pmalloc_numa_stats st;
        pm_numa_stats(h, &st);
        if (st.pending_extents != xpending)
            err = nm_fail(NM_ECORRUPT, "pmalloc check: %llu remote extent frees pending, %llu listed", (unsigned long long)st.pending_extents,
                          (unsigned long long)xpending);
        else if (st.pending != shadowed)
            err = nm_fail(NM_ECORRUPT, "pmalloc check: %llu remote frees pending, %llu shadow bits", (unsigned long long)st.pending,
                          (unsigned long long)shadowed);
    }
    return err;
}

/* Open (before the replay): the blocks (not extents) named by entries of the
 * current generations: recovery treats their bits as unknown when it checks
 * the slabs' checksums (redo.c). */
size_t pm_numa_live_blocks(pm_heap *h, uint64_t **out)
{
    *out = NULL;
    pm_numa *n = h->numa;
    if (!n || numa_hdr(h->sb)->magic != PM_NUMA_MAGIC) return 0;
    attach(h);
    size_t cap = (size_t)n->nlogs * 2 * n->seg_entries, k = 0;
    uint64_t *v = malloc((cap ? cap : 1) * sizeof *v);
    if (!v) return 0;
    for (unsigned li = 0; li < n->nlogs; li++)
        for (unsigned seg = 0; seg < 2; seg++) {
            uint64_t gen = seg_gen(n, li, seg);
            for (uint32_t i = 0; i < n->seg_entries; i++) {
                pm_dlog_ent e = *seg_ent(n, li, seg, i);
                if (e.gen != gen || e.check != ent_check(e.block, e.ts, e.gen, li, seg) || (e.block & PM_DLOG_EXTENT)) continue;
                if (e.block >= h->sb->data_off && e.block < h->size) { /* applied: its bit and checksum were written back */
                    pm_veh *sv = h->pmap[(e.block - h->sb->data_off) / PM_PAGE];
                    if (sv && sv->state == PM_VEH_SLAB && e.ts <= pm_ts_get(n, sv->page)) continue;
                }
                v[k++] = e.block;
            }
        }
    *out = v;
    return k;
}

/* ---- nearmem pmalloc dump (inspect.c): read-only, h->base/size/sb only ---- */

unsigned pm_numa_dump(pm_heap *h, FILE *out)
{
    const pm_numa_hdr *nh = numa_hdr(h->sb);
    unsigned damaged = 0;
    if (nh->magic == 0 && nh->check == 0) {
        fprintf(out, "NUMA deallocation logs: none (created with one node)\n");
        return 0;
    }
    uint64_t bytes;
    if (pm_numa_region_of(h->sb, &bytes) != NM_OK || nh->region_off + bytes > h->size) {
        fprintf(out, "NUMA header (superblock line %u): DAMAGED (%s)\n", PM_NUMA_HDR_LINE, nm_last_errmsg());
        return 1;
    }
    pm_numa n = {0};
    n.seghdr = (pm_dlog_hdr *)(h->base + nh->region_off);
    n.ts_table = (uint64_t *)(h->base + nh->ts_off);
    n.segs = (pm_dlog_ent *)(h->base + nh->seg_off);
    n.seg_entries = nh->seg_entries;
    uint64_t pages = (h->sb->heap_size - h->sb->data_off) / PM_PAGE, tsbad = 0, tsset = 0;
    for (uint64_t p = 0; p < pages; p++) {
        uint64_t w = n.ts_table[p];
        if (w & PM_TS_MASK) tsset++;
        if (w != pm_ts_word(p, w & PM_TS_MASK)) tsbad++;
    }
    fprintf(out, "NUMA deallocation logs: %u logs of 2 segments x %u entries; slab timestamps: %llu set\n", nh->nlogs, nh->seg_entries,
            (unsigned long long)tsset);
    if (tsbad) fprintf(out, "  slab timestamp table: %llu words DAMAGED\n", (unsigned long long)tsbad);
    damaged += tsbad != 0;
    for (unsigned li = 0; li < nh->nlogs; li++)
        for (unsigned seg = 0; seg < 2; seg++) {
            const pm_dlog_hdr *d = &n.seghdr[li * 2 + seg];
            bool ok = d->magic == PM_DLOG_MAGIC && d->log == li && d->seg == seg && d->check == seg_hdr_check(d) &&
                      d->gen == gen_word(li, seg, d->gen & GEN_MASK);
            uint64_t live = 0, dead = 0, bad = 0;
            for (uint32_t i = 0; i < nh->seg_entries; i++) {
                const pm_dlog_ent *e = seg_ent(&n, li, seg, i);
                if (ent_zero(e)) continue;
                if (!ent_valid(e, li, seg)) bad++;
                else if (e->gen == (d->gen & GEN_MASK)) live++;
                else dead++;
            }
            fprintf(out, "  log %u segment %u: generation %llu, %llu live entries, %llu dead, %llu fail their check%s\n", li, seg,
                    (unsigned long long)(d->gen & GEN_MASK), (unsigned long long)live, (unsigned long long)dead, (unsigned long long)bad,
                    ok ? "" : "  HEADER DAMAGED");
            damaged += !ok;
        }
    return damaged;
}
