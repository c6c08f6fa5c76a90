/* The one-line commit (issue 16): a committed malloc_to / free_from makes one
 * cache line durable with one fence. docs/pmalloc.md, "Persistence protocol".
 *
 * Operation (LOG model; extents in both models):
 *   1. a redo record {seq, op, block, pointer word, size} is written to the
 *      thread's ring, flushed, fenced: the commit point;
 *   2. its effects are stored in memory, not written back: the pointer word
 *      (*dst = block, *src = 0), the slab bitmap bit, the bookkeeping-log
 *      entry of an extent (large.c appends without flushing).
 * Checkpoint (when the rings fill up, see "rings of thread caches" below; on
 * demand): with ckpt_lock, take the
 * bound B = the last sequence number handed out, wait for the operations <= B
 * still in flight, write back the lines their effects touched (each line
 * once), settle the bookkeeping log, then store B as the bound G (two copies,
 * each with a checksum, one after the other). Records <= G are dead; their
 * ring slots are free.
 * Recovery: the records > G of every ring, ordered by sequence number (one
 * clock for the heap: an atomic increment agrees with happens-before, so
 * the record order is the order of the operations on each block and each
 * pointer word), decide the final state: each block's allocation bit is its
 * last record's, each extent's its last record's, each pointer word gets its
 * last record's value unless an object holding it was freed by a later
 * record. What was written back early (a checkpoint cut short, a cache
 * eviction) is overwritten with the same values: replay is idempotent, and a
 * crash inside recovery replays again. The bound moves only when recovery is
 * complete.
 *
 * The sequence clock is one counter for the heap (measured: ~25 ns per
 * operation at 2 threads against a ~160 ns flush + fence here); session 3's
 * per-arena clocks ordered only each block's operations, and replaying a
 * pointer word needs the order of operations on that word, whatever blocks
 * they name. */
#include <sched.h>
#include <stdlib.h>
#include <string.h>
/* the record check runs once per operation: inlined (the same function as the
 * library's, specialised for its fixed 32-byte input) */
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "nearmem/common/bitmap.h"
#include "pm_ops.h"

/* ---- layout ---- */

void pm_redo_layout(uint64_t heap_size, unsigned want, uint32_t *nrings, uint32_t *recs)
{
    *nrings = PM_NRINGS;
    uint32_t r = want;
    if (!r) { /* the rings take about 1/32 of the heap: the more records between checkpoints, the fewer lines per operation */
        uint64_t per = heap_size / 32 / PM_NRINGS / sizeof(pm_rec);
        r = PM_RING_MIN;
        while (r * 2 <= per && r < PM_RING_MAX) r *= 2;
    }
    *recs = r;
}

static inline pm_rec *ring_of(pm_heap *h, unsigned ring) { return h->rings + (uint64_t)ring * h->ring_recs; }

static inline uint32_t rec_check(uint64_t w0, uint64_t block, uint64_t loc, uint64_t size)
{
    uint64_t v[4] = {w0, block, loc, size};
    return (uint32_t)XXH3_64bits(v, sizeof v);
}

static uint64_t gw_check(uint64_t gw, int copy) { return XXH64(&gw, sizeof gw, 0x4757u + (uint64_t)copy); }
static pm_gw *gw_copy(pm_heap *h, int copy) { return copy ? (pm_gw *)((char *)h->sb + PM_GW_B_LINE * PM_LINE) : &h->sb->gw_a; }

/* Store the bound: copy A, durable, then copy B. Recovery takes a valid copy
 * (both valid: the larger; a crash between the writes leaves A newer). */
static void gw_write(pm_heap *h, uint64_t gw)
{
    for (int copy = 0; copy < 2; copy++) {
        pm_gw *g = gw_copy(h, copy);
        __atomic_store_n(&g->gw, gw, __ATOMIC_RELAXED);
        __atomic_store_n(&g->check, gw_check(gw, copy), __ATOMIC_RELAXED);
        pm_persist(h, g, sizeof *g, PM_META);
    }
}

static void seg_setup(pm_heap *h);

nm_err pm_redo_open(pm_heap *h, bool fresh)
{
    h->nrings = h->sb->nrings;
    h->ring_recs = h->sb->ring_recs;
    h->rings = (pm_rec *)(h->base + h->sb->redo_off);
    pthread_mutex_init(&h->ckpt_lock, NULL);
    pthread_mutex_init(&h->old_lock, NULL);
    pthread_mutex_init(&h->seg_lock, NULL);
    seg_setup(h);
    /* one side entry per slot of the region (calloc: pages of rings never
     * taken are never touched; the pool hands out the lowest rings first) */
    h->side = calloc((size_t)h->nrings * h->ring_recs, sizeof *h->side);
    if (!h->side) return nm_fail(NM_ENOMEM, "pmalloc: no host memory for the redo rings' side entries");
    if (fresh) {
        gw_write(h, 0);
        h->gw = 0;
    } else {
        pm_gw a = *gw_copy(h, 0), b = *gw_copy(h, 1);
        bool va = a.check == gw_check(a.gw, 0), vb = b.check == gw_check(b.gw, 1);
        if (!va && !vb) return nm_fail(NM_ECORRUPT, "pmalloc: both copies of the checkpoint bound (superblock lines 4 and %u) are damaged", PM_GW_B_LINE);
        /* a damaged copy is repaired from the other (the larger is the later write) */
        h->gw = va && vb ? NM_MAX(a.gw, b.gw) : va ? a.gw : b.gw;
    }
    __atomic_store_n(&h->clock, h->gw + 1, __ATOMIC_RELAXED);
    return NM_OK;
}

/* ---- rings of thread caches ---- */

/* The region's rings are a pool. A thread writes its records into one ring
 * at a time and takes another from the pool when it is full; a checkpoint
 * gives back every full ring whose records it settled. So the rings go to
 * the threads that write records, however many there are, and a checkpoint
 * runs when the region fills up (seg_trig rings pending, or the pool down
 * to seg_low), not when one thread's share does: with few threads, each
 * checkpoint covers many more operations (a pointer word allocated and freed
 * between two checkpoints is written back once, not twice; issue 16). The
 * replay after a crash is bounded by seg_cap: a thread takes a ring only
 * while fewer than seg_cap rings are full and unsettled, so at most
 * seg_cap + (one per thread) rings hold records after the bound. Recovery
 * scans the whole region, so which thread used which ring does not matter
 * after a crash. */

/* With seg_lock: the lowest free ring (the same few rings, and their side
 * entries, stay warm), or -1. */
static int seg_pop(pm_heap *h)
{
    for (unsigned r = 0; r < h->nrings; r++)
        if (!h->ring_used[r]) {
            h->ring_used[r] = 1;
            __atomic_store_n(&h->seg_free, h->seg_free - 1, __ATOMIC_RELAXED);
            return (int)r;
        }
    return -1;
}

static void seg_push(pm_heap *h, unsigned r)
{
    h->ring_used[r] = 0;
    __atomic_store_n(&h->seg_free, h->seg_free + 1, __ATOMIC_RELAXED);
}

static void seg_setup(pm_heap *h)
{
    uint32_t R = h->ring_recs;
    uint64_t want = h->ckpt_records ? h->ckpt_records : PM_CKPT_RECORDS;
    unsigned cap = (unsigned)NM_MIN((uint64_t)h->nrings, NM_MAX(want / R, (uint64_t)1));
    h->seg_cap = cap;
    h->seg_trig = NM_MAX(cap - cap / 8u, 1u);
    h->seg_low = h->nrings / 8u;
    h->seg_free = h->nrings;
    h->seg_pending = 0;
    memset(h->ring_used, 0, sizeof h->ring_used);
}

static inline bool ckpt_due(pm_heap *h)
{
    uint64_t p = __atomic_load_n(&h->seg_pending, __ATOMIC_RELAXED);
    return p >= h->seg_trig || (p && __atomic_load_n(&h->seg_free, __ATOMIC_RELAXED) <= h->seg_low);
}

/* A new cache's first ring (no lock held: a checkpoint may run here). A
 * cache holds at least one ring from its creation: as many threads as rings
 * can use the heap at once (PM_NRINGS), whatever the others wrote. */
nm_err pm_tc_ring_take(pm_heap *h, pm_tcache *tc)
{
    tc->nseg = tc->head = tc->pub = tc->settled = 0;
    tc->last_seq = 0;
    for (int tries = 0;; tries++) {
        pthread_mutex_lock(&h->seg_lock);
        int r = seg_pop(h);
        pthread_mutex_unlock(&h->seg_lock);
        if (r >= 0) {
            tc->seg[0] = (uint8_t)r;
            tc->nseg = 1;
            return NM_OK;
        }
        /* every ring holds records: settle them (the full ones come back) */
        if (tries == 1 || pm_checkpoint(h, 0) != NM_OK)
            return nm_fail(NM_EBUSY, "pmalloc: more than %u threads use the heap at once", h->nrings);
    }
}

/* A leaving cache, settled (tc_lock held): its rings go back (a full ring
 * whose records a checkpoint settled went back then, unless it was the
 * cache's last: that one a cache keeps while it lives, and writes over). */
void pm_tc_ring_drop(pm_heap *h, pm_tcache *tc)
{
    uint32_t R = h->ring_recs;
    pthread_mutex_lock(&h->seg_lock);
    uint64_t from = tc->settled / R;
    if (from == tc->nseg && from > 0) from--;
    for (uint64_t k = from; k < tc->nseg; k++) seg_push(h, tc->seg[k % PM_NRINGS]);
    tc->nseg = from;
    pthread_mutex_unlock(&h->seg_lock);
}

/* A leaving cache whose records could not be settled (no host memory): its
 * rings stay taken until the heap is opened again (recovery settles them);
 * they no longer count as pending, or every operation would checkpoint. */
void pm_tc_ring_abandon(pm_heap *h, pm_tcache *tc)
{
    uint32_t R = h->ring_recs;
    __atomic_fetch_sub(&h->seg_pending, tc->head / R - tc->settled / R, __ATOMIC_RELAXED);
}

/* ---- one operation ---- */

/* A slot for the thread's next record. Its ring full: its ring again if a
 * checkpoint settled it meanwhile, else one from the pool, while fewer than
 * seg_cap rings are pending. Neither: a checkpoint (it settles every record
 * published so far, so every full ring comes back, this thread's included). */
void pm_redo_reserve(pm_heap *h, pm_tcache *tc)
{
    uint32_t R = h->ring_recs;
    if (NM_LIKELY(tc->head < tc->nseg * R)) return;
    for (;;) {
        int r = -1;
        pthread_mutex_lock(&h->seg_lock); /* the checkpoint's keep-or-give-back decision sees nseg */
        if (__atomic_load_n(&tc->settled, __ATOMIC_RELAXED) >= tc->nseg * R) r = tc->seg[(tc->nseg - 1) % PM_NRINGS];
        else if (__atomic_load_n(&h->seg_pending, __ATOMIC_RELAXED) < h->seg_cap) r = seg_pop(h);
        if (r >= 0) {
            tc->seg[tc->nseg % PM_NRINGS] = (uint8_t)r;
            tc->nseg++;
        }
        pthread_mutex_unlock(&h->seg_lock);
        if (r >= 0) return;
        pm_checkpoint(h, 0); /* out of host memory: the next try checkpoints again */
    }
}

/* The ring slot of a thread's record k: with interleaving, consecutive
 * records in different lines (Sec. 5.1). */
static inline pm_rec *rec_at(pm_heap *h, const pm_tcache *tc, uint64_t k)
{
    uint32_t R = h->ring_recs, lines = R / 2u;
    uint32_t i = (uint32_t)(k % R);
    pm_rec *ring = ring_of(h, tc->seg[(k / R) % PM_NRINGS]);
    if (!h->interleave) return ring + i;
    return ring + (i % lines) * 2u + (i / lines) % 2u;
}

static inline pm_side *side_at(pm_heap *h, const pm_tcache *tc, uint64_t k)
{
    uint32_t R = h->ring_recs;
    return &h->side[(uint64_t)tc->seg[(k / R) % PM_NRINGS] * R + k % R];
}

uint64_t pm_redo_begin(pm_heap *h, pm_tcache *tc)
{
    /* announced before the increment: a checkpoint that reads the clock after
     * it sees 1 here and waits for the number */
    __atomic_store_n(&tc->inflight, 1, __ATOMIC_SEQ_CST);
    uint64_t seq = __atomic_fetch_add(&h->clock, 1, __ATOMIC_SEQ_CST);
    __atomic_store_n(&tc->inflight, seq, __ATOMIC_RELEASE);
    return seq;
}

void pm_redo_commit(pm_heap *h, pm_tcache *tc, uint64_t seq, unsigned op, uint64_t block, uint64_t loc, uint64_t size)
{
    pm_rec *e = rec_at(h, tc, tc->head);
    if (tc->dl.held) op |= PM_OP_REMOTE;
    uint64_t back = tc->last_seq && seq - tc->last_seq <= PM_REC_BACK_MAX ? seq - tc->last_seq : 0;
    tc->last_seq = seq;
    loc |= back << PM_REC_LOC_BITS;
    uint64_t w0 = seq << 8 | op;
    e->seq_op = w0;
    e->block = block;
    e->loc = loc;
    e->aux = size << 32 | rec_check(w0, block, loc, size);
    pm_flush(h, e, sizeof *e, PM_META);
    pm_drain(h); /* the operation's one fence */
    pm_ctr_add(h, PMC_WAL, 1);
}

void pm_redo_done(pm_heap *h, pm_tcache *tc, uint64_t seq, uint64_t *bitw, uint64_t *loc, struct pm_vslab *s, uint64_t blk)
{
    pm_side *sd = side_at(h, tc, tc->head);
    sd->bitw = bitw;
    sd->loc = loc;
    sd->s = s;
    sd->bh = s ? pm_blk_hash(blk) : 0;
    __atomic_store_n(&sd->seq, seq, __ATOMIC_RELAXED);
    tc->head++;
    __atomic_store_n(&tc->pub, tc->head, __ATOMIC_RELEASE);
    __atomic_store_n(&tc->inflight, 0, __ATOMIC_RELEASE);
    if (tc->head % h->ring_recs == 0) __atomic_fetch_add(&h->seg_pending, 1, __ATOMIC_RELAXED); /* a full ring */
    /* the region filling up: a checkpoint, unless one is under way */
    if (ckpt_due(h)) pm_checkpoint(h, PM_CKPT_TRY);
}

/* ---- checkpoint ---- */

/* A checkpoint's lines to write back and slabs whose checksum it toggles:
 * two open-addressing hash sets (a sort of every touched line cost a fifth of
 * a LOG operation), kept in the heap between checkpoints (under ckpt_lock) and
 * emptied through their key lists. */
typedef struct ck_ent {
    uintptr_t key; /* 0 = empty */
    uint64_t val;
} ck_ent;
typedef struct ck_set {
    ck_ent *t;
    size_t cap; /* a power of two */
    uintptr_t *keys;
    size_t n, kcap;
} ck_set;
struct pm_ckset {
    ck_set lines, slabs;
};

static bool ck_reserve(ck_set *s, size_t want)
{
    if (want * 2 > s->cap) {
        size_t cap = s->cap ? s->cap : 1024;
        while (want * 2 > cap) cap *= 2;
        ck_ent *t = calloc(cap, sizeof *t);
        if (!t) return false;
        free(s->t);
        s->t = t;
        s->cap = cap;
    }
    if (want > s->kcap) {
        uintptr_t *k = realloc(s->keys, want * sizeof *k);
        if (!k) return false;
        s->keys = k;
        s->kcap = want;
    }
    return true;
}
static ck_ent *ck_get(ck_set *s, uintptr_t key)
{
    size_t mask = s->cap - 1, i = (size_t)(((uint64_t)key * 0x9e3779b97f4a7c15ull) >> 17) & mask;
    while (s->t[i].key && s->t[i].key != key) i = (i + 1) & mask;
    if (!s->t[i].key) {
        s->t[i].key = key;
        s->t[i].val = 0;
        s->keys[s->n++] = key;
    }
    return &s->t[i];
}
static void ck_clear(ck_set *s)
{
    size_t mask = s->cap - 1;
    for (size_t k = 0; k < s->n; k++) { /* only the slots used (probing from each key's home finds it) */
        size_t i = (size_t)(((uint64_t)s->keys[k] * 0x9e3779b97f4a7c15ull) >> 17) & mask;
        while (s->t[i].key != s->keys[k]) i = (i + 1) & mask;
        s->t[i].key = 0;
    }
    s->n = 0;
}

void pm_ckset_free(pm_heap *h)
{
    free(h->side);
    h->side = NULL;
    if (!h->ckset) return;
    free(h->ckset->lines.t);
    free(h->ckset->lines.keys);
    free(h->ckset->slabs.t);
    free(h->ckset->slabs.keys);
    free(h->ckset);
    h->ckset = NULL;
}

typedef struct ck_tc {
    pm_tcache *tc;
    uint64_t upto;
} ck_tc;

nm_err pm_checkpoint(pm_heap *h, unsigned flags)
{
    if (flags & PM_CKPT_TRY) {
        /* due when the caller looked: not if another is running, or just ran */
        if (pthread_mutex_trylock(&h->ckpt_lock) != 0) return NM_OK;
        if (!ckpt_due(h)) {
            pthread_mutex_unlock(&h->ckpt_lock);
            return NM_OK;
        }
    } else {
        pthread_mutex_lock(&h->ckpt_lock);
    }
    uint64_t B = __atomic_load_n(&h->clock, __ATOMIC_SEQ_CST) - 1; /* every number <= B is handed out */
    /* the operations <= B still storing their effects finish (they never wait
     * for a checkpoint, nor for a lock a checkpoint's caller may hold) */
    for (;;) {
        bool busy = false;
        pthread_mutex_lock(&h->tc_lock);
        for (pm_tcache *t = h->tcaches; t && !busy; t = t->next) {
            uint64_t f = __atomic_load_n(&t->inflight, __ATOMIC_SEQ_CST);
            busy = f == 1 || (f != 0 && f <= B);
        }
        pthread_mutex_unlock(&h->tc_lock);
        if (!busy) break;
        sched_yield();
    }
    /* the lines their effects touched; a thread cache leaves the list only
     * under ckpt_lock (tc_destroy, tcache.c), so none of ours goes meanwhile */
    nm_err err = NM_OK;
    if (!h->ckset && !(h->ckset = calloc(1, sizeof *h->ckset))) err = nm_fail(NM_ENOMEM, "pmalloc: no host memory for a checkpoint");
    ck_set *ls = err ? NULL : &h->ckset->lines, *ss = err ? NULL : &h->ckset->slabs;
    size_t ntc = 0, pending = 0;
    ck_tc *tcs = NULL;
    pthread_mutex_lock(&h->tc_lock);
    for (pm_tcache *t = h->tcaches; t; t = t->next) ntc++;
    if (!err && !(tcs = malloc((ntc ? ntc : 1) * sizeof *tcs))) err = nm_fail(NM_ENOMEM, "pmalloc: no host memory for a checkpoint");
    /* each cache's published records now: every operation <= B is among them
     * (they finished above); what is published later is > B */
    ntc = 0;
    for (pm_tcache *t = h->tcaches; t && !err; t = t->next) {
        tcs[ntc] = (ck_tc){t, __atomic_load_n(&t->pub, __ATOMIC_ACQUIRE)};
        pending += tcs[ntc++].upto - __atomic_load_n(&t->settled, __ATOMIC_RELAXED);
    }
    if (!err && (!ck_reserve(ls, 2 * pending + 2) || !ck_reserve(ss, pending + 1)))
        err = nm_fail(NM_ENOMEM, "pmalloc: no host memory for a checkpoint");
    for (size_t k = 0; k < ntc && !err; k++) {
        pm_tcache *t = tcs[k].tc;
        uint64_t pos = __atomic_load_n(&t->settled, __ATOMIC_RELAXED), end = tcs[k].upto;
        for (; pos < end; pos++) {
            const pm_side *sd = side_at(h, t, pos);
            if (__atomic_load_n(&sd->seq, __ATOMIC_RELAXED) > B) break;
            if (sd->bitw) ck_get(ls, (uintptr_t)sd->bitw & ~(uintptr_t)(PM_LINE - 1));
            if (sd->loc) ck_get(ls, (uintptr_t)sd->loc & ~(uintptr_t)(PM_LINE - 1))->val = 1; /* a user pointer word: a user flush */
            if (sd->s) ck_get(ss, (uintptr_t)sd->s)->val ^= sd->bh;                           /* its slab's checksum toggle */
        }
        tcs[k].upto = pos;
    }
    pthread_mutex_unlock(&h->tc_lock);
    if (err) {
        free(tcs);
        pthread_mutex_unlock(&h->ckpt_lock);
        return err;
    }
    /* the checksums of the slabs these operations touched: each gets the
     * toggles of exactly these operations (one atomic XOR per slab), so a
     * header's checksum is always that of its bits as of a checkpoint bound
     * (pm_redo_verify), whatever later operations did in memory */
    for (size_t i = 0; i < ss->n; i++) pm_slab_digest_toggle(h, (pm_vslab *)ss->keys[i], ck_get(ss, ss->keys[i])->val);
    for (size_t i = 0; i < ls->n; i++) pm_flush(h, (const void *)ls->keys[i], PM_LINE, ck_get(ls, ls->keys[i])->val ? PM_USER : PM_META);
    ck_clear(ls);
    ck_clear(ss);
    /* the bookkeeping log: every append so far (those of operations <= B
     * included: appends are made inside an operation) durable, then counted */
    uint64_t *counts = malloc((size_t)h->nchunks * sizeof *counts);
    pthread_mutex_lock(&h->large_lock); /* the log GC's compaction reads the extents */
    pm_bk_lock_all(h, true);
    if (counts) pm_bk_settle_flush(h, counts);
    pm_drain(h);
    if (counts) pm_bk_settle_commit(h, counts);
    else pm_bk_settle_held(h); /* (no host memory for the counts: one settle does both phases) */
    pm_drain(h);
    if ((flags & PM_CKPT_GC) || pm_bk_gc_due(h)) err = pm_bk_gc(h);
    pm_bk_lock_all(h, false);
    pthread_mutex_unlock(&h->large_lock);
    free(counts);
    if (!err) {
        gw_write(h, B);
        __atomic_store_n(&h->gw, B, __ATOMIC_RELEASE);
        /* the full rings whose records are all settled go back to the pool,
         * but a cache's current one (full, its next ring not taken yet): it
         * keeps that one and writes over it (pm_redo_reserve), so a cache
         * always holds a ring and never waits for one that another took */
        uint32_t R = h->ring_recs;
        uint64_t back = 0;
        pthread_mutex_lock(&h->seg_lock);
        for (size_t i = 0; i < ntc; i++) {
            pm_tcache *t = tcs[i].tc;
            for (uint64_t k = __atomic_load_n(&t->settled, __ATOMIC_RELAXED) / R; k < tcs[i].upto / R; k++, back++)
                if (k + 1 < t->nseg) seg_push(h, t->seg[k % PM_NRINGS]);
            __atomic_store_n(&t->settled, tcs[i].upto, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(&h->seg_lock);
        __atomic_fetch_sub(&h->seg_pending, back, __ATOMIC_RELAXED);
        pm_count(&h->c_ckpts, 1);
    }
    free(tcs);
    pthread_mutex_unlock(&h->ckpt_lock);
    if (!err) pm_slab_sweep(h, false); /* empty slabs whose records this settled */
    return err;
}

/* ---- recovery (Sec. 7): replay the records after the bound ---- */

typedef struct rrec {
    uint64_t seq, block, loc, size, back;
    unsigned op;  /* PM_OP_* */
    bool remote;  /* PM_OP_REMOTE */
} rrec;

static int cmp_seq(const void *a, const void *b)
{
    const rrec *x = a, *y = b;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}
/* by block (and extent size), newest first */
static int cmp_block(const void *a, const void *b)
{
    const rrec *x = a, *y = b;
    if (x->block != y->block) return x->block < y->block ? -1 : 1;
    if (x->size != y->size) return x->size < y->size ? -1 : 1;
    return x->seq > y->seq ? -1 : x->seq < y->seq;
}
static int cmp_loc(const void *a, const void *b)
{
    const rrec *x = a, *y = b;
    if (x->loc != y->loc) return x->loc < y->loc ? -1 : 1;
    return x->seq > y->seq ? -1 : x->seq < y->seq;
}

typedef struct ival {
    uint64_t lo, hi, seq;
} ival;
static int cmp_ival(const void *a, const void *b)
{
    const ival *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Was heap offset `loc` inside an object that a record after `seq` freed? */
static bool freed_after(const ival *sm, size_t nsm, const ival *lg, size_t nlg, uint64_t loc, uint64_t seq)
{
    size_t lo = 0, hi = nsm; /* first small interval starting after loc */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (sm[mid].lo <= loc) lo = mid + 1;
        else hi = mid;
    }
    for (size_t i = lo; i-- > 0 && sm[i].lo + PMALLOC_SMALL_MAX > loc;)
        if (loc < sm[i].hi && sm[i].seq > seq) return true;
    for (size_t i = 0; i < nlg; i++)
        if (lg[i].lo <= loc && loc < lg[i].hi && lg[i].seq > seq) return true;
    return false;
}

/* The final state of the extents named by records: frees first (their
 * extents may overlap later allocations), then allocations, which may find
 * stale extents in the settled log (an allocation that came after them, whose
 * entry a checkpoint settled while their free was in flight). */
static nm_err replay_large(pm_heap *h, rrec *r, size_t n, uint64_t *done)
{
    pm_sort(r, n, sizeof *r, cmp_block);
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < n; i++) {
            if (i > 0 && r[i].block == r[i - 1].block && r[i].size == r[i - 1].size) continue; /* the newest per extent */
            bool alloc = r[i].op == PM_OP_ALLOC_LARGE;
            if (alloc != (pass == 1)) continue;
            uint64_t page = (r[i].block - h->sb->data_off) / PM_PAGE, np = r[i].size;
            if (r[i].block < h->sb->data_off || (r[i].block - h->sb->data_off) % PM_PAGE || np == 0 || page + np > h->data_pages)
                return nm_fail(NM_ECORRUPT, "pmalloc: redo record %llu names extent %#llx (%llu pages) outside the data area",
                               (unsigned long long)r[i].seq, (unsigned long long)r[i].block, (unsigned long long)np);
            pm_veh *v = pm_pmap_get(h, page);
            bool exact = v && v->state == PM_VEH_ALLOC && v->page == page && v->npages == np;
            if (h->model == PMALLOC_GC) {
                /* GC settles an extent operation before it returns and writes its
                 * pointer word first: only the last one can be unfinished, and its
                 * pointer word says how far it got */
                uint64_t at = __atomic_load_n((uint64_t *)(h->base + r[i].loc), __ATOMIC_RELAXED), want = pm_ptr(h, r[i].block);
                if (alloc && (exact || at != want)) continue;   /* done, or not begun in the heap */
                if (!alloc && (!exact || at == want)) continue; /* done, or the pointer still holds it */
                if (!alloc) {
                    nm_err e = pm_bk_tombstone(h, v);
                    if (e) return e;
                    pm_extent_release(h, v);
                    (*done)++;
                    continue;
                }
            } else if (!alloc) {
                if (exact) {
                    nm_err e = pm_bk_tombstone(h, v);
                    if (e) return e;
                    pm_extent_release(h, v);
                    (*done)++;
                }
                continue;
            }
            if (exact) continue;
            for (uint64_t p = page; p < page + np;) {
                pm_veh *x = pm_pmap_get(h, p);
                if (!x) { p++; continue; }
                if (x->state == PM_VEH_SLAB)
                    return nm_fail(NM_ECORRUPT, "pmalloc: redo record %llu allocates pages of the slab at data page %llu",
                                   (unsigned long long)r[i].seq, (unsigned long long)x->page);
                uint64_t next = x->page + x->npages;
                if (x->state == PM_VEH_ALLOC) { /* stale: freed before this allocation */
                    nm_err e = pm_bk_tombstone(h, x);
                    if (e) return e;
                    pm_extent_release(h, x);
                }
                p = next > p ? next : p + 1;
            }
            pm_veh *nv;
            nm_err e = pm_extent_claim(h, page, np, PM_VEH_ALLOC, &nv);
            if (!e) pm_extent_map(h, nv);
            if (!e) e = pm_bk_record(h, nv);
            if (e) return e;
            (*done)++;
        }
    return NM_OK;
}

static bool has_seq(const rrec *r, size_t n, uint64_t seq) /* r sorted by seq */
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (r[mid].seq == seq) return true;
        if (r[mid].seq < seq) lo = mid + 1;
        else hi = mid;
    }
    return false;
}

/* The valid records after the bound, from every slot of the region, sorted by
 * sequence number. A record that fails its check is taken as torn (its
 * operation never returned: its effects were never stored) unless a later
 * record of its thread names it: a thread commits one operation at a time,
 * so only its last record can be torn; any other is damage (NM_ECORRUPT).
 * A thread's last record is what no checksum can tell from a torn write. */
static nm_err collect(pm_heap *h, rrec **out, size_t *nout, uint64_t *maxout)
{
    uint64_t gw = h->gw, maxseq = gw;
    size_t cap = 1024, n = 0;
    rrec *all = malloc(cap * sizeof *all);
    if (!all) return nm_fail(NM_ENOMEM, "pmalloc: no host memory for recovery");
    for (unsigned ring = 0; ring < h->nrings; ring++) {
        const pm_rec *rg = ring_of(h, ring);
        for (uint32_t i = 0; i < h->ring_recs; i++) {
            pm_rec e = rg[i];
            if (!e.seq_op || (uint32_t)e.aux != rec_check(e.seq_op, e.block, e.loc, e.aux >> 32)) continue; /* empty, or torn */
            uint64_t seq = e.seq_op >> 8, loc = PM_REC_LOC(e.loc);
            unsigned op = (unsigned)(e.seq_op & PM_OP_MASK);
            if (seq <= gw) continue;
            if (op < PM_OP_ALLOC_SMALL || op > PM_OP_SET || (e.seq_op & 0xf0) || loc & 7 || loc >= h->size ||
                PM_REC_BACK(e.loc) >= seq) {
                free(all);
                return nm_fail(NM_ECORRUPT, "pmalloc: redo ring %u slot %u holds an impossible record", ring, i);
            }
            if (n == cap) {
                rrec *x = realloc(all, (cap *= 2) * sizeof *x);
                if (!x) { free(all); return nm_fail(NM_ENOMEM, "pmalloc: no host memory for recovery"); }
                all = x;
            }
            all[n++] = (rrec){seq, e.block, loc, e.aux >> 32, PM_REC_BACK(e.loc), op, (e.seq_op & PM_OP_REMOTE) != 0};
            if (seq > maxseq) maxseq = seq;
        }
    }
    pm_sort(all, n, sizeof *all, cmp_seq);
    for (size_t i = 0; i < n; i++) {
        uint64_t prev = all[i].back ? all[i].seq - all[i].back : 0;
        if (prev > gw && !has_seq(all, n, prev)) {
            uint64_t next = all[i].seq;
            free(all);
            return nm_fail(NM_ECORRUPT, "pmalloc: redo record %llu is damaged (record %llu of the same thread follows it)",
                           (unsigned long long)prev, (unsigned long long)next);
        }
    }
    *out = all;
    *nout = n;
    *maxout = maxseq;
    return NM_OK;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

nm_err pm_redo_inflight_frees(pm_heap *h, uint64_t **out, size_t *nout)
{
    rrec *all;
    size_t n, k = 0;
    uint64_t maxseq;
    *out = NULL;
    *nout = 0;
    nm_err e = collect(h, &all, &n, &maxseq);
    if (e) return e;
    /* a thread writes its entry after its record and before its next record:
     * only a remote free that no later record of its thread follows can have
     * left a torn entry (records point back to their thread's previous one) */
    uint64_t *prev = malloc((n ? n : 1) * sizeof *prev), *v = malloc((n ? n : 1) * sizeof *v);
    if (!prev || !v) {
        free(prev);
        free(v);
        free(all);
        return nm_fail(NM_ENOMEM, "pmalloc: no host memory for recovery");
    }
    size_t np = 0;
    for (size_t i = 0; i < n; i++)
        if (all[i].back) prev[np++] = all[i].seq - all[i].back;
    pm_sort(prev, np, sizeof *prev, cmp_u64);
    for (size_t i = 0; i < n; i++)
        if (all[i].remote && (all[i].op == PM_OP_FREE_SMALL || all[i].op == PM_OP_FREE_LARGE) &&
            !(np && bsearch(&all[i].seq, prev, np, sizeof *prev, cmp_u64)))
            v[k++] = all[i].block | (all[i].op == PM_OP_FREE_LARGE ? PM_DLOG_EXTENT : 0);
    free(prev);
    free(all);
    *out = v;
    *nout = k;
    return NM_OK;
}


/* Is t in the span (over GF(2)) of the n vectors v? */
static bool in_span(uint64_t t, const uint64_t *v, size_t n)
{
    uint64_t basis[64] = {0};
    for (size_t i = 0; i < n; i++) {
        uint64_t x = v[i];
        for (int b = 63; b >= 0 && x; b--) {
            if (!(x >> b & 1)) continue;
            if (!basis[b]) { basis[b] = x; break; }
            x ^= basis[b];
        }
    }
    for (int b = 63; b >= 0 && t; b--)
        if ((t >> b & 1) && basis[b]) t ^= basis[b];
    return t == 0;
}

/* A GF(2) basis of up to 64 vectors; reduce(x) == 0 iff x is in their span. */
typedef struct gf2 { uint64_t b[64]; } gf2;
static void gf2_add(gf2 *g, uint64_t x)
{
    for (int i = 63; i >= 0 && x; i--) {
        if (!(x >> i & 1)) continue;
        if (!g->b[i]) { g->b[i] = x; return; }
        x ^= g->b[i];
    }
}
static uint64_t gf2_reduce(const gf2 *g, uint64_t x)
{
    for (int i = 63; i >= 0 && x; i--)
        if ((x >> i & 1) && g->b[i]) x ^= g->b[i];
    return x;
}

/* Is the block starting at heap offset off set in s's bitmaps (either grid)? */
static bool off_set(pm_heap *h, uint64_t off)
{
    pm_vslab *s;
    uint32_t idx;
    return pm_small_block_at(h, off, &s, &idx) && pm_pbit(s, idx);
}

static int cmp_blkseq(const void *a, const void *b)
{
    const rrec *x = a, *y = b;
    if (x->block != y->block) return x->block < y->block ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* One slab after a crash in normal operation (state RUNNING; LOG). Its
 * header's checksum is that of its bits at the last checkpoint bound, XOR
 * the toggles of the records on the slab up to some X >= the bound (a
 * checkpoint cut short applied them with one XOR), XOR the toggles of
 * owner-side NUMA synchronisations (each one XOR after its bits were
 * durable). The image's bits of the blocks those records name may be
 * anything (lazy write-back): they are taken as before their first record.
 * Unknown: X (tried at every record), and which synchronisations of remote
 * frees after the bound, or cut short (a live entry, bit clear), got their
 * XOR in (a span). r: the slab's small records after the bound, by block
 * then sequence number; dl: its blocks with live unapplied
 * deallocation-log entries. */
static bool slab_ok(pm_heap *h, pm_vslab *s, uint64_t stored, const rrec *r, size_t n, const uint64_t *dl, size_t ndl)
{
    gf2 v;
    memset(&v, 0, sizeof v);
    for (size_t i = 0; i < n; i++)
        if (r[i].remote) gf2_add(&v, pm_blk_hash(r[i].block));
    for (size_t i = 0; i < ndl; i++)
        if (!off_set(h, dl[i])) gf2_add(&v, pm_blk_hash(dl[i]));
    uint64_t d = s->digest; /* the image's bits, then those of named blocks as before their first record */
    const rrec *first = NULL;
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && r[i].block != r[i - 1].block) first = NULL;
        if (r[i].remote || first) continue;
        first = &r[i];
        if (off_set(h, r[i].block) != (r[i].op == PM_OP_FREE_SMALL)) d ^= pm_blk_hash(r[i].block);
    }
    if (!gf2_reduce(&v, stored ^ d)) return true;
    rrec *bs = malloc((n ? n : 1) * sizeof *bs);
    if (!bs) return false;
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (!r[i].remote) bs[m++] = r[i];
    pm_sort(bs, m, sizeof *bs, cmp_seq);
    bool ok = false;
    for (size_t i = 0; i < m && !ok; i++) {
        d ^= pm_blk_hash(bs[i].block);
        ok = !gf2_reduce(&v, stored ^ d);
    }
    free(bs);
    return ok;
}

/* Open: every slab's bitmap against the checksum in its header (and sets the
 * DRAM digest). A clean heap must match exactly; after a crash in normal
 * operation see slab_ok; after a crash inside a recovery (which writes
 * checksums of partly replayed bits), the checksum must differ from the bits'
 * by a combination of the hashes of the blocks named by records after the
 * bound or by live deallocation-log entries (weaker: 64 or more such blocks
 * in one slab leave nothing to check). live_blocks names the latter
 * (pm_numa_live_blocks, remote.c, a layer above: passed in by pmalloc.c). */
nm_err pm_redo_verify(pm_heap *h, uint64_t state, size_t (*live_blocks)(pm_heap *h, uint64_t **out))
{
    bool clean = state == PM_STATE_CLEAN, weak = state == PM_STATE_RECOVERING;
    rrec *all = NULL;
    size_t n = 0, ndl = 0;
    uint64_t *dl = NULL;
    if (!clean) {
        uint64_t maxseq;
        nm_err e = collect(h, &all, &n, &maxseq);
        if (e) return e;
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
            if (all[i].op == PM_OP_ALLOC_SMALL || all[i].op == PM_OP_FREE_SMALL) all[k++] = all[i];
        n = k;
        pm_sort(all, n, sizeof *all, cmp_blkseq);
        ndl = live_blocks(h, &dl);
        pm_sort(dl, ndl, sizeof *dl, cmp_u64);
    }
    uint64_t hv[64 * 8];
    nm_err err = NM_OK;
    size_t a = 0, b = 0;
    for (uint64_t p = 0; p < h->data_pages && !err;) {
        pm_veh *v = h->pmap[p];
        if (v->state == PM_VEH_SLAB && v->slab) {
            pm_vslab *s = v->slab;
            s->digest = pm_slab_digest_bits(h, s);
            uint64_t stored = *PM_SLAB_DIGEST(s->hdr), t = s->digest ^ stored;
            uint64_t lo = pm_off(h, s->hdr), hi = lo + PMALLOC_SLAB_SIZE;
            while (a < n && all[a].block < lo) a++;
            while (b < ndl && dl[b] < lo) b++;
            size_t a1 = a, b1 = b;
            while (a1 < n && all[a1].block < hi) a1++;
            while (b1 < ndl && dl[b1] < hi) b1++;
            bool ok = t == 0;
            if (!ok && weak) {
                size_t k = 0;
                for (size_t i = a; i < a1 && k < NM_ARRAY_LEN(hv); i++)
                    if (i == a || all[i].block != all[i - 1].block) hv[k++] = pm_blk_hash(all[i].block);
                for (size_t i = b; i < b1 && k < NM_ARRAY_LEN(hv); i++) hv[k++] = pm_blk_hash(dl[i]);
                ok = in_span(t, hv, k);
            } else if (!ok && !clean) {
                ok = slab_ok(h, s, stored, all + a, a1 - a, dl + b, b1 - b);
            }
            if (!ok)
                err = nm_fail(NM_ECORRUPT, "pmalloc: slab at data page %llu: its bitmap does not match its checksum",
                              (unsigned long long)v->page);
            a = a1;
            b = b1;
        }
        p += v->npages;
    }
    free(all);
    free(dl);
    return err;
}

nm_err pm_redo_recover(pm_heap *h)
{
    rrec *all;
    size_t n;
    uint64_t maxseq;
    nm_err cerr = collect(h, &all, &n, &maxseq);
    if (cerr) return cerr;
    nm_err err = NM_OK;
    h->ri.wal_entries = (unsigned)n;
    if (n == 0) goto done;
    /* frees, as intervals: a pointer word inside an object freed after the
     * record that wrote it is not replayed (the memory may be another object now) */
    size_t nsm = 0, nlg = 0, nl = 0;
    ival *sm = malloc(n * sizeof *sm), *lg = malloc(n * sizeof *lg);
    rrec *large = malloc(n * sizeof *large), *small = malloc(n * sizeof *small), *locs = malloc(n * sizeof *locs);
    uint64_t **touched = malloc(2 * n * sizeof *touched);
    size_t ntouched = 0, ns = 0;
    if (!sm || !lg || !large || !small || !locs || !touched) { err = nm_fail(NM_ENOMEM, "pmalloc: no host memory for recovery"); goto out; }
    for (size_t i = 0; i < n; i++) {
        rrec *x = &all[i];
        if (x->op == PM_OP_FREE_SMALL) sm[nsm++] = (ival){x->block, x->block + x->size, x->seq};
        if (x->op == PM_OP_FREE_LARGE) lg[nlg++] = (ival){x->block, x->block + x->size * PM_PAGE, x->seq};
        if (x->op == PM_OP_ALLOC_LARGE || x->op == PM_OP_FREE_LARGE) large[nl++] = *x;
        if (x->op == PM_OP_ALLOC_SMALL || x->op == PM_OP_FREE_SMALL) small[ns++] = *x;
        locs[i] = *x;
    }
    pm_sort(sm, nsm, sizeof *sm, cmp_ival);
    uint64_t redone = 0;
    pthread_mutex_lock(&h->bk_lock); /* recovery runs alone; the log's functions expect it held */
    err = replay_large(h, large, nl, &redone);
    pthread_mutex_unlock(&h->bk_lock);
    if (err) goto out;
    /* each block's last record decides its bit */
    pm_sort(small, ns, sizeof *small, cmp_block);
    for (size_t i = 0; i < ns; i++) {
        if (i > 0 && small[i].block == small[i - 1].block) continue;
        bool alloc = small[i].op == PM_OP_ALLOC_SMALL;
        pm_vslab *s;
        uint32_t idx;
        bool found = pm_small_block_at(h, small[i].block, &s, &idx);
        /* a morphed slab: an old block's free was written back before it
         * returned, and its offset may now start a new block of another size */
        if (found && pm_blk_size(s, idx) != small[i].size) found = false;
        if (!found) {
            if (!alloc) continue; /* its slab is gone, or the block is an old one already freed */
            err = nm_fail(NM_ECORRUPT, "pmalloc: redo record %llu allocates %#llx, which is not a block", (unsigned long long)small[i].seq,
                          (unsigned long long)small[i].block);
            goto out;
        }
        uint64_t *w;
        if (pm_small_recover_bit(h, s, idx, alloc, &w)) redone++;
        if (w) touched[ntouched++] = w;
    }
    /* each pointer word gets its last record's value (LOG: the GC model
     * persists its pointer words before it returns, and has no records for
     * its small blocks, so it replays none) */
    if (h->model == PMALLOC_LOG) {
        pm_sort(locs, n, sizeof *locs, cmp_loc);
        for (size_t i = 0; i < n; i++) {
            if (i > 0 && locs[i].loc == locs[i - 1].loc) continue;
            rrec *x = &locs[i];
            if (freed_after(sm, nsm, lg, nlg, x->loc, x->seq)) continue;
            uint64_t v = x->op == PM_OP_ALLOC_SMALL || x->op == PM_OP_ALLOC_LARGE ? pm_ptr(h, x->block) : x->op == PM_OP_SET ? x->block : 0;
            uint64_t *p = (uint64_t *)(h->base + x->loc);
            if (__atomic_load_n(p, __ATOMIC_RELAXED) != v) {
                __atomic_store_n(p, v, __ATOMIC_RELAXED);
                redone++;
            }
            touched[ntouched++] = p;
        }
    }
    h->ri.wal_redone = (unsigned)redone;
    for (size_t i = 0; i < ntouched; i++) pm_flush(h, touched[i], 8, PM_META);
    pm_drain(h);
    pthread_mutex_lock(&h->bk_lock);
    pm_bk_settle(h);
    pthread_mutex_unlock(&h->bk_lock);
out:
    free(sm);
    free(lg);
    free(large);
    free(small);
    free(locs);
    free(touched);
done:
    free(all);
    if (err) return err;
    /* the bits are written back: now their checksums (also with no record to
     * replay: a NUMA synchronisation cut short may have left one behind its bits) */
    pm_slab_digest_write_all(h);
    /* everything replayed is written back: the records are dead */
    if (maxseq > h->gw) {
        gw_write(h, maxseq);
        h->gw = maxseq;
    }
    __atomic_store_n(&h->clock, h->gw + 1, __ATOMIC_RELAXED);
    return NM_OK;
}

/* ---- nearmem pmalloc dump (inspect.c): read-only, h->base/size/sb only ---- */

void pm_redo_summary(pm_heap *h, uint64_t *bound, uint64_t *pending)
{
    const pm_super *sb = h->sb;
    uint64_t gw = 0, n = 0, nslots = (uint64_t)sb->nrings * sb->ring_recs;
    for (int copy = 0; copy < 2; copy++) {
        const pm_gw *g = (const pm_gw *)((const char *)sb + (copy ? PM_GW_B_LINE : 4u) * PM_LINE);
        if (g->check == gw_check(g->gw, copy) && g->gw > gw) gw = g->gw;
    }
    if (sb->redo_off + nslots * sizeof(pm_rec) <= h->size) {
        const pm_rec *r = (const pm_rec *)(h->base + sb->redo_off);
        for (uint64_t i = 0; i < nslots; i++)
            if (r[i].seq_op && (uint32_t)r[i].aux == rec_check(r[i].seq_op, r[i].block, r[i].loc, r[i].aux >> 32) && (r[i].seq_op >> 8) > gw) n++;
    }
    *bound = gw;
    *pending = n;
}

unsigned pm_redo_dump(pm_heap *h, FILE *out)
{
    const pm_super *sb = h->sb;
    uint64_t gw = 0;
    unsigned damaged = 0, valid = 0;
    for (int copy = 0; copy < 2; copy++) {
        const pm_gw *g = (const pm_gw *)((const char *)sb + (copy ? PM_GW_B_LINE : 4u) * PM_LINE);
        bool ok = g->check == gw_check(g->gw, copy);
        fprintf(out, "checkpoint bound, copy %c (superblock line %u): %llu%s\n", 'A' + copy, copy ? PM_GW_B_LINE : 4u,
                (unsigned long long)g->gw, ok ? "" : "  DAMAGED (open repairs it from the other copy)");
        if (ok && g->gw > gw) gw = g->gw;
        valid += ok;
    }
    if (!valid) damaged++;
    uint64_t nslots = (uint64_t)sb->nrings * sb->ring_recs;
    if (sb->redo_off + nslots * sizeof(pm_rec) > h->size) {
        fprintf(out, "redo rings: outside the file  DAMAGED\n");
        return damaged + 1;
    }
    const pm_rec *r = (const pm_rec *)(h->base + sb->redo_off);
    uint64_t used = 0, bad = 0, after = 0, byop[8] = {0}, maxseq = 0;
    for (uint64_t i = 0; i < nslots; i++) {
        pm_rec e = r[i];
        if (!e.seq_op && !e.block && !e.loc && !e.aux) continue;
        used++;
        if ((uint32_t)e.aux != rec_check(e.seq_op, e.block, e.loc, e.aux >> 32)) { bad++; continue; }
        uint64_t seq = e.seq_op >> 8;
        maxseq = NM_MAX(maxseq, seq);
        if (seq > gw) { after++; byop[e.seq_op & PM_OP_MASK]++; }
    }
    fprintf(out, "redo rings: %u x %u records at %#llx: %llu slots used, %llu fail their check (torn or damaged), newest %llu\n",
            sb->nrings, sb->ring_recs, (unsigned long long)sb->redo_off, (unsigned long long)used, (unsigned long long)bad,
            (unsigned long long)maxseq);
    fprintf(out, "  records after the bound (recovery replays them): %llu (alloc %llu, free %llu, alloc extent %llu, free extent %llu, set %llu)\n",
            (unsigned long long)after, (unsigned long long)byop[PM_OP_ALLOC_SMALL], (unsigned long long)byop[PM_OP_FREE_SMALL],
            (unsigned long long)byop[PM_OP_ALLOC_LARGE], (unsigned long long)byop[PM_OP_FREE_LARGE], (unsigned long long)byop[PM_OP_SET]);
    return damaged;
}
