/* PIM-CACHE host library: the data reduction module (DRM), per-DPU fingerprint tables, BRB
 * accounting, offset buffers, the fallback policy and verify mode. Paper sections are
 * cited where the behaviour comes from; what goes beyond the paper is marked as such. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <streamvbyte.h>
#include <xxhash.h>

#include "nearmem/common/timer.h"
#include "nearmem/common/util.h"
#include "nearmem/pim_cache.h"
#include "nearmem/pim_cache_dpu.h"

#define FALLBACK_WINDOW_MAX 16u
#define MAX_RUNS 8u
#define NO_GEN UINT64_MAX

/* Fingerprint -> BRB offset, open addressing with linear probing. Keys and values live in
 * separate arrays so a slot costs the 8 + 4 bytes of Sec. 6.7; value 0 marks an empty
 * slot (offsets are stored plus one). */
typedef struct table {
    uint64_t *fp;
    uint32_t *off1;
    uint32_t cap, n, shift;
} table;

typedef struct dpu_state {
    table t;
    uint32_t top;     /* BRB bytes in use (relative to the BRB start) */
    uint64_t gen;     /* bumped at every invalidation of this DPU */
    uint8_t *shadow;  /* verify mode: host copy of BRB [0, shadow_cap) */
    size_t shadow_cap;
    /* scratch of the current copy */
    uint8_t *bb;      /* block buffer (the paper's tau_BB) */
    size_t bb_cap;
    uint32_t nmiss;
    /* Serial mode sends up to MAX_RUNS runs of consecutive missing blocks straight from the
     * caller's buffer and gathers only beyond that (beyond the paper: saves a copy of
     * every missing byte when redundancy is low). */
    struct run {
        const uint8_t *src;
        uint32_t n;
    } runs[8];
    unsigned nruns;
    bool gathered;
    uint8_t *tails;   /* zero-padded last blocks of the batch's buffers */
    size_t tails_cap;
    uint32_t **ob;    /* per slot of the batch: descriptor + offsets (tau_OB) */
    size_t *ob_cap;
    uint64_t blocks, hits, invalidations, collisions, verify_bytes;
    /* fallback probes (beyond the paper): fingerprints sampled by the previous probe */
    uint64_t *probe_fp;
    uint32_t probe_n, probe_cap;
} dpu_state;

struct nm_pimc {
    nm_pimc_transport t;
    nm_pimc_options o;
    uint32_t bs;
    uint64_t brb_base, brb_size, slot_area;
    uint32_t max_blocks_slot;
    dpu_state *d;
    uint64_t *slot_gen; /* [slot * nr_dpus + dpu]: DPU generation when the slot was written */
    nm_pimc_mode mode;
    unsigned plain_run;
    double hist[FALLBACK_WINDOW_MAX];
    unsigned hist_n;
    unsigned grace; /* CAC copies not judged: the first one after a probe seeds the table */
    uint32_t seq;
    nm_pimc_stats st;
};

/* ------------------------------------------------------------------ fingerprints */

uint64_t nm_pimc_fingerprint(nm_pimc_hash h, const void *p, size_t n)
{
    switch (h) {
    case NM_PIMC_XXH3: return XXH3_64bits(p, n);
    case NM_PIMC_WEAK8: return XXH64(p, n, 0) & 0xffu;
    case NM_PIMC_XXH64:
    default: return XXH64(p, n, 0);
    }
}

/* ------------------------------------------------------------------ table */

static inline uint32_t tslot(const table *t, uint64_t fp)
{
    return (uint32_t)((fp * 0x9E3779B97F4A7C15ull) >> t->shift);
}

static uint32_t table_get(const table *t, uint64_t fp)
{
    if (!t->cap) return 0;
    uint32_t m = t->cap - 1;
    for (uint32_t i = tslot(t, fp);; i = (i + 1) & m) {
        if (!t->off1[i]) return 0;
        if (t->fp[i] == fp) return t->off1[i];
    }
}

static int table_grow(table *t)
{
    uint32_t ncap = t->cap ? t->cap * 2 : 64;
    uint64_t *nfp = malloc((size_t)ncap * sizeof *nfp);
    uint32_t *noff = calloc(ncap, sizeof *noff);
    if (!nfp || !noff) {
        free(nfp);
        free(noff);
        return -1;
    }
    table nt = {nfp, noff, ncap, 0, 64u - nm_log2_floor(ncap)};
    for (uint32_t i = 0; i < t->cap; i++)
        if (t->off1[i]) {
            uint32_t j = tslot(&nt, t->fp[i]);
            while (nt.off1[j]) j = (j + 1) & (ncap - 1);
            nt.fp[j] = t->fp[i];
            nt.off1[j] = t->off1[i];
            nt.n++;
        }
    free(t->fp);
    free(t->off1);
    *t = nt;
    return 0;
}

/* Caller checked table_get(fp) == 0. */
static int table_put(table *t, uint64_t fp, uint32_t off)
{
    if ((uint64_t)(t->n + 1) * 4 > (uint64_t)t->cap * 3 && table_grow(t)) return -1;
    uint32_t i = tslot(t, fp);
    while (t->off1[i]) i = (i + 1) & (t->cap - 1);
    t->fp[i] = fp;
    t->off1[i] = off + 1;
    t->n++;
    return 0;
}

static void table_clear(table *t)
{
    if (t->cap) memset(t->off1, 0, (size_t)t->cap * sizeof *t->off1);
    t->n = 0;
}

/* ------------------------------------------------------------------ create */

void nm_pimc_options_default(nm_pimc_options *o)
{
    memset(o, 0, sizeof *o);
    o->block_size = 1024;
    o->brb_share = 0.9;
    o->hash = NM_PIMC_XXH64;
    o->threads = 1;
    o->slots = 2;
    o->fallback_threshold = 0.3; /* the paper's example tau (Sec. 6.8) */
    o->fallback_window = 2;
    o->probe_interval = 4;
    o->probe_stride = 16;
}

static void dpu_state_free(dpu_state *s, unsigned slots)
{
    free(s->t.fp);
    free(s->t.off1);
    free(s->shadow);
    free(s->bb);
    free(s->tails);
    if (s->ob)
        for (unsigned i = 0; i < slots; i++) free(s->ob[i]);
    free(s->ob);
    free(s->ob_cap);
    free(s->probe_fp);
}

void nm_pimc_destroy(nm_pimc *c)
{
    if (!c) return;
    if (c->d)
        for (unsigned i = 0; i < c->t.nr_dpus; i++) dpu_state_free(&c->d[i], c->o.slots);
    free(c->d);
    free(c->slot_gen);
    free(c);
}

nm_err nm_pimc_create(const nm_pimc_transport *t, const nm_pimc_options *opt, nm_pimc **out)
{
    if (!out) return nm_fail(NM_EINVAL, "pim_cache: out is NULL");
    *out = NULL;
    nm_pimc_options o;
    if (opt)
        o = *opt;
    else
        nm_pimc_options_default(&o);
    if (!t || !t->copy_to || !t->push_to || !t->copy_from || t->nr_dpus == 0)
        return nm_fail(NM_EINVAL, "pim_cache: transport needs copy_to, push_to, copy_from and at least one DPU");
    if ((t->mram_base & 7u) || (t->mram_size & 7u) || t->mram_base + t->mram_size > ((uint64_t)1 << 32))
        return nm_fail(NM_EINVAL, "pim_cache: MRAM region [%llu, +%llu) must be 8-byte aligned and below 4 GiB",
                       (unsigned long long)t->mram_base, (unsigned long long)t->mram_size);
    if (!nm_is_pow2(o.block_size) || o.block_size < 64 || o.block_size > 4096)
        return nm_fail(NM_EINVAL, "pim_cache: block size %u is not a power of two in [64, 4096]", o.block_size);
    if (!(o.brb_share > 0.0 && o.brb_share < 1.0))
        return nm_fail(NM_EINVAL, "pim_cache: BRB share %g is not in (0, 1)", o.brb_share);
    if (o.hash > NM_PIMC_WEAK8) return nm_fail(NM_EINVAL, "pim_cache: unknown hash %d", (int)o.hash);
    if (o.threads == 0 || o.threads > 1024) return nm_fail(NM_EINVAL, "pim_cache: %u threads", o.threads);
    if (o.slots == 0 || o.slots > 64) return nm_fail(NM_EINVAL, "pim_cache: %u slots (1..64)", o.slots);
    if (!(o.fallback_threshold >= 0.0 && o.fallback_threshold <= 1.0))
        return nm_fail(NM_EINVAL, "pim_cache: fallback threshold %g is not in [0, 1]", o.fallback_threshold);
    if (o.fallback_window == 0 || o.fallback_window > FALLBACK_WINDOW_MAX || o.probe_interval == 0 ||
        o.probe_stride == 0)
        return nm_fail(NM_EINVAL, "pim_cache: fallback window must be 1..%u, probe interval and stride >= 1",
                       FALLBACK_WINDOW_MAX);
    if (o.compress && !t->svb_decode)
        return nm_fail(NM_EINVAL, "pim_cache: compression needs a transport with a decoder");

    uint64_t brb = (uint64_t)((double)t->mram_size * o.brb_share);
    brb = NM_ALIGN_DOWN(brb, (uint64_t)o.block_size);
    uint64_t work = t->mram_size - brb;
    uint64_t slot_area = NM_ALIGN_DOWN(work / o.slots, 8u);
    if (brb < o.block_size)
        return nm_fail(NM_ERANGE, "pim_cache: a BRB of %llu bytes cannot hold one %u-byte block",
                       (unsigned long long)brb, o.block_size);
    if (slot_area < NM_PIMC_DESC_SIZE + 8)
        return nm_fail(NM_ERANGE, "pim_cache: %llu bytes per slot cannot hold a descriptor and one offset",
                       (unsigned long long)slot_area);

    nm_pimc *c = calloc(1, sizeof *c);
    if (!c) return nm_fail(NM_ENOMEM, "pim_cache: no memory");
    c->t = *t;
    c->o = o;
    c->bs = o.block_size;
    c->brb_base = t->mram_base;
    c->brb_size = brb;
    c->slot_area = slot_area;
    uint64_t mb = (slot_area - NM_PIMC_DESC_SIZE) / 4;
    c->max_blocks_slot = mb > UINT32_MAX - 8 ? UINT32_MAX - 8 : (uint32_t)mb;
    c->d = calloc(t->nr_dpus, sizeof *c->d);
    c->slot_gen = malloc((size_t)o.slots * t->nr_dpus * sizeof *c->slot_gen);
    if (!c->d || !c->slot_gen) goto oom;
    for (size_t i = 0; i < (size_t)o.slots * t->nr_dpus; i++) c->slot_gen[i] = NO_GEN;
    for (unsigned i = 0; i < t->nr_dpus; i++) {
        c->d[i].ob = calloc(o.slots, sizeof *c->d[i].ob);
        c->d[i].ob_cap = calloc(o.slots, sizeof *c->d[i].ob_cap);
        if (!c->d[i].ob || !c->d[i].ob_cap) goto oom;
    }
    c->mode = NM_PIMC_MODE_CAC;
    if (o.fallback_threshold > 0) {
        /* Start as if in fallback with a probe due, so a first copy without redundancy
         * costs a sampled probe instead of a full DRM pass. */
        c->mode = NM_PIMC_MODE_PLAIN;
        c->plain_run = o.probe_interval - 1;
    }
    c->st.last_xfer_modeled_ns = NAN;
    *out = c;
    return NM_OK;
oom:
    nm_pimc_destroy(c);
    return nm_fail(NM_ENOMEM, "pim_cache: no memory for %u DPUs", t->nr_dpus);
}

/* ------------------------------------------------------------------ accessors */

uint64_t nm_pimc_brb_size(const nm_pimc *c) { return c->brb_size; }
uint64_t nm_pimc_brb_top(const nm_pimc *c, unsigned dpu) { return dpu < c->t.nr_dpus ? c->d[dpu].top : 0; }
nm_pimc_mode nm_pimc_current_mode(const nm_pimc *c) { return c->mode; }
uint64_t nm_pimc_slot_desc(const nm_pimc *c, unsigned slot)
{
    return c->brb_base + c->brb_size + (uint64_t)slot * c->slot_area;
}
uint64_t nm_pimc_max_len(const nm_pimc *c)
{
    uint64_t a = c->brb_size, b = (uint64_t)c->max_blocks_slot * c->bs;
    return a < b ? a : b;
}
bool nm_pimc_slot_valid(const nm_pimc *c, unsigned slot, unsigned dpu)
{
    if (slot >= c->o.slots || dpu >= c->t.nr_dpus) return false;
    return c->slot_gen[(size_t)slot * c->t.nr_dpus + dpu] == c->d[dpu].gen;
}

void nm_pimc_get_stats(const nm_pimc *c, nm_pimc_stats *out)
{
    *out = c->st;
    out->invalidations = out->collisions = out->verify_bytes = 0;
    out->table_entries = out->table_bytes = out->shadow_bytes = 0;
    for (unsigned i = 0; i < c->t.nr_dpus; i++) {
        const dpu_state *s = &c->d[i];
        out->invalidations += s->invalidations;
        out->collisions += s->collisions;
        out->verify_bytes += s->verify_bytes;
        out->table_entries += s->t.n;
        out->table_bytes += (uint64_t)s->t.cap * 12u;
        out->shadow_bytes += s->shadow_cap;
    }
}

static void invalidate(nm_pimc *c, unsigned dpu)
{
    dpu_state *s = &c->d[dpu];
    table_clear(&s->t);
    s->top = 0;
    s->gen++;
    s->invalidations++;
}

void nm_pimc_invalidate_all(nm_pimc *c)
{
    for (unsigned i = 0; i < c->t.nr_dpus; i++) invalidate(c, i);
}

/* ------------------------------------------------------------------ buffers */

static int reserve(void **p, size_t *cap, size_t need)
{
    if (need <= *cap) return 0;
    size_t n = *cap ? *cap : 256;
    while (n < need) n *= 2;
    void *q = realloc(*p, n);
    if (!q) return -1;
    *p = q;
    *cap = n;
    return 0;
}

static inline uint32_t nblocks(const nm_pimc *c, size_t len) { return (uint32_t)((len + c->bs - 1) / c->bs); }
/* Bytes of a slot's offset buffer: descriptor + offsets, padded to 8. */
static inline size_t ob_bytes(uint32_t nb) { return NM_PIMC_DESC_SIZE + NM_ALIGN_UP((size_t)nb * 4u, 8u); }

static void put_desc(uint32_t *ob, uint32_t mode, uint64_t len, uint32_t nb, uint32_t bs, uint32_t data_off,
                     uint32_t seq)
{
    nm_pimc_desc d = {NM_PIMC_DESC_MAGIC, mode, len, nb, bs, data_off, seq};
    memcpy(ob, &d, sizeof d);
}

/* ------------------------------------------------------------------ DRM */

typedef struct batch {
    unsigned n;
    const unsigned *slots;
    const void *const *bufs; /* [i * nr_dpus + d] */
    const size_t *lens;
} batch;

/* Pointer to block i of buf (len bytes): in place, or the zero-padded tail copied to tmp. */
static inline const uint8_t *block_at(const nm_pimc *c, const uint8_t *buf, size_t len, uint32_t i, uint8_t *tmp)
{
    size_t at = (size_t)i * c->bs, n = len - at;
    if (n >= c->bs) return buf + at;
    memcpy(tmp, buf + at, n);
    memset(tmp + n, 0, c->bs - n);
    return tmp;
}

/* Switch from runs to a gathered block buffer: copy the runs so far into it. */
static int gather_runs(dpu_state *s, uint32_t bs)
{
    if (reserve((void **)&s->bb, &s->bb_cap, (size_t)(s->nmiss + 1) * bs)) return -1;
    size_t at = 0;
    for (unsigned i = 0; i < s->nruns; i++) {
        memcpy(s->bb + at, s->runs[i].src, (size_t)s->runs[i].n * bs);
        at += (size_t)s->runs[i].n * bs;
    }
    s->gathered = true;
    return 0;
}

/* Sec. 4.2 steps 1-3 for one DPU and every slot of the batch: fingerprint, look up, gather
 * the missing blocks (placed from BRB offset `from`), record every block's offset. Returns
 * 0, 1 when the BRB would overflow, -1 on host memory exhaustion. */
static int plan_dpu(nm_pimc *c, unsigned d, const batch *b, uint32_t from)
{
    dpu_state *s = &c->d[d];
    const uint32_t bs = c->bs;
    uint8_t tmp[4096];
    uint64_t pos = from;
    s->nmiss = 0;
    s->blocks = s->hits = 0;
    s->nruns = 0;
    s->gathered = c->o.parallel; /* a push needs one contiguous buffer per DPU */
    if (!s->gathered && reserve((void **)&s->tails, &s->tails_cap, (size_t)b->n * bs)) return -1;
    for (unsigned k = 0; k < b->n; k++) {
        const uint8_t *buf = b->bufs[(size_t)k * c->t.nr_dpus + d];
        size_t len = b->lens[(size_t)k * c->t.nr_dpus + d];
        uint32_t nb = nblocks(c, len);
        if (reserve((void **)&s->ob[k], &s->ob_cap[k], ob_bytes(nb))) return -1;
        uint32_t *offs = s->ob[k] + NM_PIMC_DESC_SIZE / 4;
        uint64_t last_fp = 0;
        uint32_t last_off = 0;
        bool have_last = false;
        for (uint32_t i = 0; i < nb; i++) {
            const uint8_t *p = block_at(c, buf, len, i, tmp);
            uint64_t fp = nm_pimc_fingerprint(c->o.hash, p, bs);
            uint32_t off1;
            /* Last-key optimization (Sec. 6.2): a run of equal blocks skips the table. */
            if (have_last && fp == last_fp)
                off1 = last_off + 1;
            else
                off1 = table_get(&s->t, fp);
            bool insert = off1 == 0;
            if (off1 && c->o.verify) {
                s->verify_bytes += bs;
                if (memcmp(s->shadow + off1 - 1, p, bs) != 0) {
                    /* A fingerprint collision: send the block, keep the old mapping. */
                    s->collisions++;
                    off1 = 0;
                    insert = false;
                }
            }
            uint32_t off;
            if (off1) {
                off = off1 - 1;
                s->hits++;
            } else {
                if (pos + bs > c->brb_size) return 1;
                off = (uint32_t)pos;
                pos += bs;
                if (!s->gathered) {
                    const uint8_t *src = p;
                    if (p == tmp) { /* the tail block lives in tmp: keep it */
                        memcpy(s->tails + (size_t)k * bs, tmp, bs);
                        src = s->tails + (size_t)k * bs;
                    }
                    struct run *last = s->nruns ? &s->runs[s->nruns - 1] : NULL;
                    if (last && last->src + (size_t)last->n * bs == src)
                        last->n++;
                    else if (s->nruns < MAX_RUNS)
                        s->runs[s->nruns++] = (struct run){src, 1};
                    else if (gather_runs(s, bs)) /* too fragmented: gather from now on */
                        return -1;
                }
                if (s->gathered) {
                    if (reserve((void **)&s->bb, &s->bb_cap, (size_t)(s->nmiss + 1) * bs)) return -1;
                    memcpy(s->bb + (size_t)s->nmiss * bs, p, bs);
                }
                s->nmiss++;
                if (insert && table_put(&s->t, fp, off)) return -1;
                if (c->o.verify) {
                    if (reserve((void **)&s->shadow, &s->shadow_cap, (size_t)off + bs)) return -1;
                    memcpy(s->shadow + off, p, bs);
                }
            }
            offs[i] = (uint32_t)(c->brb_base + off);
            last_fp = fp;
            last_off = off;
            have_last = true;
        }
        s->blocks += nb;
        /* Zero the padding word so the buffer sent is deterministic. */
        if (nb & 1u) offs[nb] = 0;
    }
    return 0;
}

/* Threads partition the DPUs (Sec. 5): each table is touched by one thread only. */
typedef struct worker {
    nm_pimc *c;
    const batch *b;
    unsigned d0, d1;
    int mode;        /* 0 = plan serial (invalidate + replan on overflow), 1 = plan lockstep, 2 = probe */
    uint32_t from;   /* lockstep: common top */
    int overflow, oom;
    uint64_t samples, sample_hits;
    pthread_t th;
} worker;

static void probe_dpu(nm_pimc *c, unsigned d, const batch *b, worker *w);

static void *work(void *arg)
{
    worker *w = arg;
    nm_pimc *c = w->c;
    for (unsigned d = w->d0; d < w->d1 && !w->oom; d++) {
        if (w->mode == 2) {
            probe_dpu(c, d, w->b, w);
            continue;
        }
        int r = plan_dpu(c, d, w->b, w->mode == 1 ? w->from : c->d[d].top);
        if (r == 1 && w->mode == 0) {
            /* Global invalidation of this DPU's table (Sec. 4.2), then plan again from an
             * empty BRB: validation guaranteed the batch fits. */
            invalidate(c, d);
            r = plan_dpu(c, d, w->b, 0);
        }
        if (r == 1) w->overflow = 1;
        if (r < 0) w->oom = 1;
    }
    return NULL;
}

/* Runs `mode` over every DPU with the configured threads (a thread that cannot be started
 * has its share run by the caller). */
static void run_workers(nm_pimc *c, const batch *b, int mode, uint32_t from, int *overflow, int *oom,
                        uint64_t *samples, uint64_t *hits)
{
    unsigned nt = c->o.threads < c->t.nr_dpus ? c->o.threads : c->t.nr_dpus;
    worker ws[nt];
    unsigned per = c->t.nr_dpus / nt, extra = c->t.nr_dpus % nt, at = 0;
    for (unsigned i = 0; i < nt; i++) {
        unsigned n = per + (i < extra);
        ws[i] = (worker){.c = c, .b = b, .d0 = at, .d1 = at + n, .mode = mode, .from = from};
        at += n;
    }
    bool started[nt];
    for (unsigned i = 1; i < nt; i++) started[i] = pthread_create(&ws[i].th, NULL, work, &ws[i]) == 0;
    work(&ws[0]);
    for (unsigned i = 1; i < nt; i++) {
        if (started[i])
            pthread_join(ws[i].th, NULL);
        else
            work(&ws[i]);
    }
    *overflow = *oom = 0;
    if (samples) *samples = *hits = 0;
    for (unsigned i = 0; i < nt; i++) {
        *overflow |= ws[i].overflow;
        *oom |= ws[i].oom;
        if (samples) {
            *samples += ws[i].samples;
            *hits += ws[i].sample_hits;
        }
    }
}

/* Fallback probe (beyond the paper): fingerprint every probe_stride-th block and count how
 * many the DPU already holds, or that the previous probe saw, or that repeat within this
 * sample. Nothing is inserted into the table. */
static void probe_dpu(nm_pimc *c, unsigned d, const batch *b, worker *w)
{
    dpu_state *s = &c->d[d];
    uint8_t tmp[4096];
    uint64_t *prev = s->probe_fp;
    uint32_t prev_n = s->probe_n;
    uint64_t *cur = NULL;
    uint32_t cur_n = 0, cur_cap = 0;
    for (unsigned k = 0; k < b->n; k++) {
        const uint8_t *buf = b->bufs[(size_t)k * c->t.nr_dpus + d];
        size_t len = b->lens[(size_t)k * c->t.nr_dpus + d];
        uint32_t nb = nblocks(c, len);
        for (uint32_t i = 0; i < nb; i += c->o.probe_stride) {
            uint64_t fp = nm_pimc_fingerprint(c->o.hash, block_at(c, buf, len, i, tmp), c->bs);
            bool hit = table_get(&s->t, fp) != 0;
            for (uint32_t j = 0; !hit && j < prev_n; j++) hit = prev[j] == fp;
            for (uint32_t j = 0; !hit && j < cur_n; j++) hit = cur[j] == fp;
            w->samples++;
            w->sample_hits += hit;
            /* Keep a bounded sample (the linear scans above stay cheap). */
            if (!hit && cur_n < 256) {
                if (cur_n == cur_cap) {
                    uint32_t nc = cur_cap ? cur_cap * 2 : 32;
                    uint64_t *q = realloc(cur, nc * sizeof *q);
                    if (!q) {
                        w->oom = 1;
                        free(cur);
                        return;
                    }
                    cur = q;
                    cur_cap = nc;
                }
                cur[cur_n++] = fp;
            }
        }
    }
    free(s->probe_fp);
    s->probe_fp = cur;
    s->probe_n = cur_n;
    s->probe_cap = cur_cap;
}

/* ------------------------------------------------------------------ transfers */

static double modeled_now(const nm_pimc *c) { return c->t.modeled_ns ? c->t.modeled_ns(c->t.ctx) : NAN; }

/* Send the plans: serial (the paper's dpu_copy_to per DPU, Sec. 6.8) or one push per
 * buffer kind with lockstep BRB tops (`from` common to all DPUs). */
static nm_err send_cac(nm_pimc *c, const batch *b, bool lockstep, uint32_t from, uint64_t *sent, uint64_t *meta)
{
    const unsigned nd = c->t.nr_dpus;
    nm_err e = NM_OK;
    *sent = *meta = 0;
    if (!lockstep) {
        for (unsigned d = 0; d < nd && !e; d++) {
            dpu_state *s = &c->d[d];
            if (s->nmiss && s->gathered) {
                size_t n = (size_t)s->nmiss * c->bs;
                e = c->t.copy_to(c->t.ctx, d, c->brb_base + s->top, s->bb, n);
                *sent += n;
            } else {
                uint64_t at = c->brb_base + s->top;
                for (unsigned i = 0; i < s->nruns && !e; i++) {
                    size_t n = (size_t)s->runs[i].n * c->bs;
                    e = c->t.copy_to(c->t.ctx, d, at, s->runs[i].src, n);
                    at += n;
                    *sent += n;
                }
            }
            for (unsigned k = 0; k < b->n && !e; k++) {
                uint32_t nb = nblocks(c, b->lens[(size_t)k * nd + d]);
                e = c->t.copy_to(c->t.ctx, d, nm_pimc_slot_desc(c, b->slots[k]), s->ob[k], ob_bytes(nb));
                *meta += ob_bytes(nb);
            }
        }
        return e;
    }
    uint32_t maxmiss = 0;
    for (unsigned d = 0; d < nd; d++) maxmiss = NM_MAX(maxmiss, c->d[d].nmiss);
    const void **srcs = malloc(nd * sizeof *srcs);
    if (!srcs) return nm_fail(NM_ENOMEM, "pim_cache: no memory");
    if (maxmiss) {
        /* Every DPU gets maxmiss blocks; the extra ones are padding that only uses BRB room. */
        size_t n = (size_t)maxmiss * c->bs;
        for (unsigned d = 0; d < nd && !e; d++) {
            dpu_state *s = &c->d[d];
            if (reserve((void **)&s->bb, &s->bb_cap, n)) {
                e = nm_fail(NM_ENOMEM, "pim_cache: no memory");
                break;
            }
            memset(s->bb + (size_t)s->nmiss * c->bs, 0, n - (size_t)s->nmiss * c->bs);
            srcs[d] = s->bb;
        }
        if (!e) e = c->t.push_to(c->t.ctx, c->brb_base + from, srcs, n);
        *sent += n * nd;
    }
    for (unsigned k = 0; k < b->n && !e; k++) {
        uint32_t maxnb = 0;
        for (unsigned d = 0; d < nd; d++) maxnb = NM_MAX(maxnb, nblocks(c, b->lens[(size_t)k * nd + d]));
        size_t n = ob_bytes(maxnb);
        for (unsigned d = 0; d < nd && !e; d++) {
            dpu_state *s = &c->d[d];
            size_t have = ob_bytes(nblocks(c, b->lens[(size_t)k * nd + d]));
            if (reserve((void **)&s->ob[k], &s->ob_cap[k], n)) {
                e = nm_fail(NM_ENOMEM, "pim_cache: no memory");
                break;
            }
            memset((uint8_t *)s->ob[k] + have, 0, n - have);
            srcs[d] = s->ob[k];
        }
        if (!e) e = c->t.push_to(c->t.ctx, nm_pimc_slot_desc(c, b->slots[k]), srcs, n);
        *meta += n * nd;
    }
    free(srcs);
    return e;
}

/* ------------------------------------------------------------------ copy */

static nm_err validate(const nm_pimc *c, const batch *b)
{
    const unsigned nd = c->t.nr_dpus;
    if (b->n == 0 || b->n > c->o.slots)
        return nm_fail(NM_EINVAL, "pim_cache: %u slots in one copy (1..%u)", b->n, c->o.slots);
    if (!b->slots || !b->bufs || !b->lens) return nm_fail(NM_EINVAL, "pim_cache: NULL slots, buffers or lengths");
    for (unsigned k = 0; k < b->n; k++) {
        if (b->slots[k] >= c->o.slots)
            return nm_fail(NM_EINVAL, "pim_cache: slot %u of %u", b->slots[k], c->o.slots);
        for (unsigned j = 0; j < k; j++)
            if (b->slots[j] == b->slots[k])
                return nm_fail(NM_EINVAL, "pim_cache: slot %u twice in one copy", b->slots[k]);
    }
    for (unsigned d = 0; d < nd; d++) {
        uint64_t total = 0;
        for (unsigned k = 0; k < b->n; k++) {
            size_t len = b->lens[(size_t)k * nd + d];
            if (len && !b->bufs[(size_t)k * nd + d])
                return nm_fail(NM_EINVAL, "pim_cache: DPU %u slot %u: NULL buffer of %zu bytes", d, b->slots[k], len);
            if (len > nm_pimc_max_len(c))
                return nm_fail(NM_ERANGE, "pim_cache: DPU %u: %zu bytes exceed the %llu a slot can take", d, len,
                               (unsigned long long)nm_pimc_max_len(c));
            total += (uint64_t)nblocks(c, len) * c->bs;
        }
        /* Worst case every block is new: the batch must fit an empty BRB. */
        if (total > c->brb_size)
            return nm_fail(NM_ERANGE, "pim_cache: DPU %u: %llu bytes in one copy exceed the %llu-byte BRB", d,
                           (unsigned long long)total, (unsigned long long)c->brb_size);
    }
    return NM_OK;
}

/* After a failed transfer nothing can be trusted about the BRBs or the slots written. */
static void poison(nm_pimc *c, const batch *b)
{
    for (unsigned d = 0; d < c->t.nr_dpus; d++) {
        invalidate(c, d);
        for (unsigned k = 0; k < b->n; k++) c->slot_gen[(size_t)b->slots[k] * c->t.nr_dpus + d] = NO_GEN;
    }
}

static void mark_written(nm_pimc *c, const batch *b)
{
    for (unsigned d = 0; d < c->t.nr_dpus; d++)
        for (unsigned k = 0; k < b->n; k++) c->slot_gen[(size_t)b->slots[k] * c->t.nr_dpus + d] = c->d[d].gen;
}

static nm_err copy_cac(nm_pimc *c, const batch *b)
{
    const unsigned nd = c->t.nr_dpus;
    int overflow, oom;
    uint32_t from = 0;
    bool lockstep = c->o.parallel;
    uint64_t t0 = nm_now_ns();
    if (lockstep) {
        for (unsigned d = 0; d < nd; d++) from = NM_MAX(from, c->d[d].top);
        run_workers(c, b, 1, from, &overflow, &oom, NULL, NULL);
        if (!oom && overflow) {
            for (unsigned d = 0; d < nd; d++) invalidate(c, d);
            from = 0;
            run_workers(c, b, 1, 0, &overflow, &oom, NULL, NULL);
        }
    } else {
        run_workers(c, b, 0, 0, &overflow, &oom, NULL, NULL);
    }
    uint64_t drm = nm_now_ns() - t0;
    if (oom || overflow) {
        poison(c, b);
        return oom ? nm_fail(NM_ENOMEM, "pim_cache: no host memory for the copy plan")
                   : nm_fail(NM_ECORRUPT, "pim_cache: BRB overflow after invalidation (bug)");
    }
    uint64_t logical = 0, blocks = 0, hits = 0;
    uint32_t maxmiss = 0;
    c->seq++;
    for (unsigned d = 0; d < nd; d++) {
        dpu_state *s = &c->d[d];
        blocks += s->blocks;
        hits += s->hits;
        maxmiss = NM_MAX(maxmiss, s->nmiss);
        for (unsigned k = 0; k < b->n; k++) {
            size_t len = b->lens[(size_t)k * nd + d];
            logical += len;
            put_desc(s->ob[k], 0, len, nblocks(c, len), c->bs, 0, c->seq);
        }
    }
    double m0 = modeled_now(c);
    uint64_t sent, meta;
    nm_err e = send_cac(c, b, lockstep, from, &sent, &meta);
    if (e) {
        poison(c, b);
        return e;
    }
    for (unsigned d = 0; d < nd; d++)
        c->d[d].top = lockstep ? from + maxmiss * c->bs : c->d[d].top + c->d[d].nmiss * c->bs;
    mark_written(c, b);
    c->st.last_mode = NM_PIMC_MODE_CAC;
    c->st.last_logical_bytes = logical;
    c->st.last_sent_bytes = sent;
    c->st.last_meta_bytes = meta;
    c->st.last_blocks = blocks;
    c->st.last_hits = hits;
    c->st.last_dedup_pct = logical ? (1.0 - (double)sent / (double)logical) * 100.0 : 0.0;
    c->st.last_drm_ns += drm;
    c->st.last_xfer_modeled_ns = modeled_now(c) - m0;
    c->st.cac_copies++;
    return NM_OK;
}

/* The plain copy the fallback uses: one push of equal-sized buffers when every DPU gets
 * the same length, serial copies otherwise. Data lands at the BRB top, unindexed. */
static nm_err copy_plain(nm_pimc *c, const batch *b)
{
    const unsigned nd = c->t.nr_dpus;
    double m0 = modeled_now(c);
    uint64_t sent = 0, meta = 0, logical = 0;
    nm_err e = NM_OK;
    const void **srcs = malloc(nd * sizeof *srcs);
    uint8_t(*tails)[8] = malloc(nd * sizeof *tails);
    if (!srcs || !tails) {
        free(srcs);
        free(tails);
        return nm_fail(NM_ENOMEM, "pim_cache: no memory");
    }
    c->seq++;
    /* Make room for the whole batch first: invalidating between two of its slots would
     * leave the earlier slot's data in BRB space the cache considers free. From the
     * largest top, the largest per-DPU need fits, whichever slots go by push or serially. */
    uint64_t max_top = 0, max_need = 0;
    for (unsigned d = 0; d < nd; d++) {
        uint64_t need = 0;
        for (unsigned k = 0; k < b->n; k++) need += (uint64_t)nblocks(c, b->lens[(size_t)k * nd + d]) * c->bs;
        max_top = NM_MAX(max_top, c->d[d].top);
        max_need = NM_MAX(max_need, need);
    }
    if (max_top + max_need > c->brb_size)
        for (unsigned d = 0; d < nd; d++) invalidate(c, d);
    for (unsigned k = 0; k < b->n && !e; k++) {
        const size_t *lens = b->lens + (size_t)k * nd;
        const void *const *bufs = b->bufs + (size_t)k * nd;
        bool equal = !c->o.plain_serial;
        for (unsigned d = 1; d < nd; d++) equal &= lens[d] == lens[0];
        uint32_t data_off[nd];
        if (equal) {
            uint64_t res = (uint64_t)nblocks(c, lens[0]) * c->bs, at = 0;
            for (unsigned d = 0; d < nd; d++) at = NM_MAX(at, c->d[d].top);
            size_t body = NM_ALIGN_DOWN(lens[0], 8u), tail = lens[0] - body;
            for (unsigned d = 0; d < nd; d++) {
                srcs[d] = bufs[d];
                memset(tails[d], 0, 8);
                if (tail) memcpy(tails[d], (const uint8_t *)bufs[d] + body, tail);
                c->d[d].top = (uint32_t)(at + res);
                data_off[d] = (uint32_t)(c->brb_base + at);
            }
            if (body) e = c->t.push_to(c->t.ctx, c->brb_base + at, srcs, body);
            for (unsigned d = 0; d < nd; d++) srcs[d] = tails[d];
            if (!e && tail) e = c->t.push_to(c->t.ctx, c->brb_base + at + body, srcs, 8);
            sent += (uint64_t)NM_ALIGN_UP(lens[0], 8u) * nd;
        } else {
            for (unsigned d = 0; d < nd && !e; d++) {
                uint64_t res = (uint64_t)nblocks(c, lens[d]) * c->bs;
                uint64_t at = c->d[d].top;
                size_t body = NM_ALIGN_DOWN(lens[d], 8u), tail = lens[d] - body;
                if (body) e = c->t.copy_to(c->t.ctx, d, c->brb_base + at, bufs[d], body);
                if (!e && tail) {
                    memset(tails[d], 0, 8);
                    memcpy(tails[d], (const uint8_t *)bufs[d] + body, tail);
                    e = c->t.copy_to(c->t.ctx, d, c->brb_base + at + body, tails[d], 8);
                }
                c->d[d].top = (uint32_t)(at + res);
                data_off[d] = (uint32_t)(c->brb_base + at);
                sent += NM_ALIGN_UP(lens[d], 8u);
            }
        }
        /* Descriptors are 32 bytes everywhere: one push (unless plain_serial). */
        for (unsigned d = 0; d < nd && !e; d++) {
            dpu_state *s = &c->d[d];
            if (reserve((void **)&s->ob[k], &s->ob_cap[k], NM_PIMC_DESC_SIZE)) {
                e = nm_fail(NM_ENOMEM, "pim_cache: no memory");
                break;
            }
            put_desc(s->ob[k], 1, lens[d], nblocks(c, lens[d]), c->bs, data_off[d], c->seq);
            srcs[d] = s->ob[k];
            logical += lens[d];
        }
        if (!e && !c->o.plain_serial) e = c->t.push_to(c->t.ctx, nm_pimc_slot_desc(c, b->slots[k]), srcs, NM_PIMC_DESC_SIZE);
        for (unsigned d = 0; d < nd && !e && c->o.plain_serial; d++)
            e = c->t.copy_to(c->t.ctx, d, nm_pimc_slot_desc(c, b->slots[k]), srcs[d], NM_PIMC_DESC_SIZE);
        meta += (uint64_t)NM_PIMC_DESC_SIZE * nd;
    }
    free(srcs);
    free(tails);
    if (e) {
        poison(c, b);
        return e;
    }
    mark_written(c, b);
    c->st.last_mode = NM_PIMC_MODE_PLAIN;
    c->st.last_logical_bytes = logical;
    c->st.last_sent_bytes = sent;
    c->st.last_meta_bytes = meta;
    c->st.last_blocks = c->st.last_hits = 0;
    c->st.last_dedup_pct = 0.0;
    c->st.last_xfer_modeled_ns = modeled_now(c) - m0;
    c->st.plain_copies++;
    return NM_OK;
}

/* Fallback policy (beyond the paper; Sec. 6.8 sketches it): average the dedup fraction of
 * the last fallback_window CAC copies; below the threshold, copy plainly; every
 * probe_interval plain copies, probe a sample and return to CAC if redundancy is back. */
static void record_dedup(nm_pimc *c, double frac)
{
    unsigned w = c->o.fallback_window;
    if (c->grace) {
        /* The probe saw redundancy against blocks the table does not hold (they came by
         * plain copies), so this first CAC copy had to send them: do not judge it. */
        c->grace--;
        return;
    }
    if (c->hist_n < w)
        c->hist[c->hist_n++] = frac;
    else {
        memmove(c->hist, c->hist + 1, (w - 1) * sizeof *c->hist);
        c->hist[w - 1] = frac;
    }
    double sum = 0;
    for (unsigned i = 0; i < c->hist_n; i++) sum += c->hist[i];
    if (c->o.fallback_threshold > 0 && sum / c->hist_n < c->o.fallback_threshold) {
        c->mode = NM_PIMC_MODE_PLAIN;
        c->plain_run = 0;
        c->hist_n = 0;
        c->st.mode_switches++;
    }
}

static nm_err copy_batch(nm_pimc *c, const batch *b)
{
    nm_err e = validate(c, b);
    if (e) return e;
    c->st.last_drm_ns = 0;
    c->st.last_probe = false;
    c->st.copies++;
    if (c->mode == NM_PIMC_MODE_PLAIN && ++c->plain_run % c->o.probe_interval == 0) {
        int overflow, oom;
        uint64_t samples, hits;
        uint64_t t0 = nm_now_ns();
        run_workers(c, b, 2, 0, &overflow, &oom, &samples, &hits);
        c->st.last_drm_ns = nm_now_ns() - t0;
        c->st.last_probe = true;
        c->st.probes++;
        if (oom) return nm_fail(NM_ENOMEM, "pim_cache: no memory for a probe");
        if (samples && (double)hits / (double)samples >= c->o.fallback_threshold) {
            c->mode = NM_PIMC_MODE_CAC;
            c->grace = 1;
            c->st.mode_switches++;
        }
    }
    if (c->mode == NM_PIMC_MODE_PLAIN) return copy_plain(c, b);
    e = copy_cac(c, b);
    if (!e && c->st.last_logical_bytes) record_dedup(c, c->st.last_dedup_pct / 100.0);
    return e;
}

nm_err nm_pimc_copy_multi(nm_pimc *c, unsigned nslots, const unsigned *slots, const void *const *bufs,
                          const size_t *lens)
{
    if (!c) return nm_fail(NM_EINVAL, "pim_cache: cache is NULL");
    batch b = {nslots, slots, bufs, lens};
    return copy_batch(c, &b);
}

nm_err nm_pimc_copy(nm_pimc *c, unsigned slot, const void *const *bufs, const size_t *lens)
{
    return nm_pimc_copy_multi(c, 1, &slot, bufs, lens);
}

/* ------------------------------------------------------------------ VByte */

typedef struct enc_job {
    const uint32_t *const *bufs;
    const size_t *counts;
    uint8_t **enc;
    size_t *enc_len;
} enc_job;

typedef struct enc_worker {
    enc_job *j;
    unsigned d0, d1;
    pthread_t th;
} enc_worker;

static void *enc_work(void *arg)
{
    enc_worker *w = arg;
    for (unsigned d = w->d0; d < w->d1; d++) {
        size_t n = streamvbyte_encode(w->j->bufs[d], (uint32_t)w->j->counts[d], w->j->enc[d]);
        size_t padded = NM_ALIGN_UP(n, 8u);
        memset(w->j->enc[d] + n, 0, padded - n);
        w->j->enc_len[d] = padded;
    }
    return NULL;
}

nm_err nm_pimc_copy_u32(nm_pimc *c, unsigned slot, const uint32_t *const *bufs, const size_t *counts)
{
    if (!c || !bufs || !counts) return nm_fail(NM_EINVAL, "pim_cache: NULL argument");
    const unsigned nd = c->t.nr_dpus;
    if (!c->o.compress) {
        const void **b = malloc(nd * sizeof *b);
        size_t *l = malloc(nd * sizeof *l);
        nm_err e = NM_OK;
        if (!b || !l)
            e = nm_fail(NM_ENOMEM, "pim_cache: no memory");
        for (unsigned d = 0; d < nd && !e; d++) {
            if (counts[d] > SIZE_MAX / 4) e = nm_fail(NM_ERANGE, "pim_cache: %zu integers", counts[d]);
            b[d] = bufs ? (const void *)bufs[d] : NULL;
            if (!e) l[d] = counts[d] * 4;
        }
        if (!e) e = nm_pimc_copy(c, slot, b, l);
        free(b);
        free(l);
        return e;
    }
    if (slot >= c->o.slots) return nm_fail(NM_EINVAL, "pim_cache: slot %u of %u", slot, c->o.slots);
    for (unsigned d = 0; d < nd; d++) {
        if (counts[d] && !bufs[d]) return nm_fail(NM_EINVAL, "pim_cache: DPU %u: NULL buffer", d);
        uint64_t out = (uint64_t)nblocks(c, counts[d] > UINT32_MAX ? SIZE_MAX : counts[d] * 4) * c->bs;
        uint64_t in = NM_ALIGN_UP((uint64_t)streamvbyte_max_compressedbytes(counts[d] > UINT32_MAX ? 0 : (uint32_t)counts[d]), 8u);
        if (counts[d] > UINT32_MAX || counts[d] * 4 > nm_pimc_max_len(c) || out + in > c->brb_size)
            return nm_fail(NM_ERANGE, "pim_cache: DPU %u: %zu integers do not fit the BRB with their stream", d,
                           counts[d]);
    }
    /* Encode (real host time, like the DRM), host threads partitioning the DPUs (Sec. 4.2
     * "the CE partitions input buffers across host CPU threads"); each DPU's stream goes
     * into its block-buffer scratch. */
    uint64_t t0 = nm_now_ns();
    uint8_t **enc = calloc(nd, sizeof *enc);
    size_t *enc_len = calloc(nd, sizeof *enc_len);
    nm_pimc_svb_job *jobs = calloc(nd, sizeof *jobs);
    const void **srcs = malloc(nd * sizeof *srcs);
    nm_err e = NM_OK;
    bool started = false;
    if (!enc || !enc_len || !jobs || !srcs) e = nm_fail(NM_ENOMEM, "pim_cache: no memory");
    for (unsigned d = 0; d < nd && !e; d++) {
        size_t cap = NM_ALIGN_UP(streamvbyte_max_compressedbytes((uint32_t)counts[d]), 8u) + 8;
        if (reserve((void **)&c->d[d].bb, &c->d[d].bb_cap, cap)) e = nm_fail(NM_ENOMEM, "pim_cache: no memory");
        else enc[d] = c->d[d].bb;
    }
    if (!e) {
        enc_job ej = {bufs, counts, enc, enc_len};
        unsigned nt = c->o.threads < nd ? c->o.threads : nd;
        enc_worker ws[nt];
        unsigned per = nd / nt, extra = nd % nt, at = 0;
        for (unsigned i = 0; i < nt; i++) {
            unsigned n = per + (i < extra);
            ws[i] = (enc_worker){&ej, at, at + n, 0};
            at += n;
        }
        bool ok[nt];
        for (unsigned i = 1; i < nt; i++) ok[i] = pthread_create(&ws[i].th, NULL, enc_work, &ws[i]) == 0;
        enc_work(&ws[0]);
        for (unsigned i = 1; i < nt; i++) {
            if (ok[i])
                pthread_join(ws[i].th, NULL);
            else
                enc_work(&ws[i]);
        }
    }
    size_t maxlen = 0;
    bool equal = true;
    for (unsigned d = 0; d < nd && !e; d++) {
        maxlen = NM_MAX(maxlen, enc_len[d]);
        equal &= enc_len[d] == enc_len[0];
    }
    c->st.last_drm_ns = nm_now_ns() - t0;
    double m0 = modeled_now(c);
    uint64_t sent = 0, logical = 0;
    if (!e) {
        started = true;
        c->seq++;
        c->st.copies++;
        /* Decoded integers at the BRB top (plain data), the stream right after them. */
        bool push = !c->o.plain_serial && (equal || c->o.parallel);
        uint64_t at = 0;
        if (push) {
            uint64_t need = 0;
            for (unsigned d = 0; d < nd; d++) {
                at = NM_MAX(at, c->d[d].top);
                need = NM_MAX(need, (uint64_t)nblocks(c, counts[d] * 4) * c->bs);
            }
            if (at + need + maxlen > c->brb_size) {
                for (unsigned d = 0; d < nd; d++) invalidate(c, d);
                at = 0;
            }
            for (unsigned d = 0; d < nd && !e; d++) {
                c->d[d].top = (uint32_t)at; /* lockstep for the push */
                /* every stream is pushed with the longest one's length: pad with zeros */
                if (reserve((void **)&c->d[d].bb, &c->d[d].bb_cap, maxlen)) {
                    e = nm_fail(NM_ENOMEM, "pim_cache: no memory");
                    break;
                }
                enc[d] = c->d[d].bb;
                memset(enc[d] + enc_len[d], 0, maxlen - enc_len[d]);
                srcs[d] = enc[d];
            }
            uint64_t in_off = c->brb_base + at + need;
            if (maxlen && !e) e = c->t.push_to(c->t.ctx, in_off, srcs, maxlen);
            sent = (uint64_t)maxlen * nd;
            for (unsigned d = 0; d < nd; d++) {
                jobs[d] = (nm_pimc_svb_job){in_off, maxlen, c->brb_base + at, (uint32_t)counts[d]};
                c->d[d].top = (uint32_t)(at + need);
            }
        } else {
            for (unsigned d = 0; d < nd && !e; d++) {
                uint64_t need = (uint64_t)nblocks(c, counts[d] * 4) * c->bs;
                if (c->d[d].top + need + enc_len[d] > c->brb_size) invalidate(c, d);
                uint64_t a = c->d[d].top, in_off = c->brb_base + a + need;
                if (enc_len[d]) e = c->t.copy_to(c->t.ctx, d, in_off, enc[d], enc_len[d]);
                sent += enc_len[d];
                jobs[d] = (nm_pimc_svb_job){in_off, enc_len[d], c->brb_base + a, (uint32_t)counts[d]};
                c->d[d].top = (uint32_t)(a + need);
            }
        }
        if (!e) e = c->t.svb_decode(c->t.ctx, jobs);
        for (unsigned d = 0; d < nd && !e; d++) {
            dpu_state *s = &c->d[d];
            if (reserve((void **)&s->ob[0], &s->ob_cap[0], NM_PIMC_DESC_SIZE)) {
                e = nm_fail(NM_ENOMEM, "pim_cache: no memory");
                break;
            }
            put_desc(s->ob[0], 1, counts[d] * 4, nblocks(c, counts[d] * 4), c->bs, (uint32_t)jobs[d].out_off, c->seq);
            srcs[d] = s->ob[0];
            logical += counts[d] * 4;
        }
        if (!e) e = c->t.push_to(c->t.ctx, nm_pimc_slot_desc(c, slot), srcs, NM_PIMC_DESC_SIZE);
    }
    batch b = {1, &slot, NULL, NULL};
    if (e) {
        if (started) poison(c, &b);
    } else {
        mark_written(c, &b);
        c->st.last_mode = NM_PIMC_MODE_PLAIN;
        c->st.last_logical_bytes = logical;
        c->st.last_sent_bytes = sent;
        c->st.last_meta_bytes = (uint64_t)NM_PIMC_DESC_SIZE * nd;
        c->st.last_blocks = c->st.last_hits = 0;
        c->st.last_dedup_pct = logical ? (1.0 - (double)sent / (double)logical) * 100.0 : 0.0;
        c->st.last_xfer_modeled_ns = modeled_now(c) - m0;
        c->st.last_probe = false;
    }
    free(enc);
    free(enc_len);
    free(jobs);
    free(srcs);
    return e;
}

/* ------------------------------------------------------------------ read back */

nm_err nm_pimc_read_back(nm_pimc *c, unsigned slot, unsigned dpu, void *dst, size_t len)
{
    if (!c || slot >= c->o.slots || dpu >= c->t.nr_dpus || (len && !dst))
        return nm_fail(NM_EINVAL, "pim_cache: read back of slot %u DPU %u", slot, dpu);
    if (!nm_pimc_slot_valid(c, slot, dpu))
        return nm_fail(NM_ESTATE, "pim_cache: slot %u of DPU %u is stale or was never written", slot, dpu);
    uint64_t at = nm_pimc_slot_desc(c, slot);
    nm_pimc_desc d;
    uint64_t raw[NM_PIMC_DESC_SIZE / 8];
    nm_err e = c->t.copy_from(c->t.ctx, dpu, at, raw, sizeof raw);
    if (e) return e;
    memcpy(&d, raw, sizeof d);
    if (d.magic != NM_PIMC_DESC_MAGIC || d.block_size != c->bs || d.nblocks != nblocks(c, d.length))
        return nm_fail(NM_ECORRUPT, "pim_cache: slot %u of DPU %u: bad descriptor", slot, dpu);
    if (len > d.length)
        return nm_fail(NM_ERANGE, "pim_cache: %zu bytes asked, slot holds %llu", len, (unsigned long long)d.length);
    uint32_t nb = nblocks(c, len);
    uint32_t *offs = NULL;
    uint8_t *blk = malloc(c->bs);
    if (!blk) return nm_fail(NM_ENOMEM, "pim_cache: no memory");
    if (d.mode == 0 && nb) {
        offs = malloc(NM_ALIGN_UP((size_t)nb * 4, 8u));
        if (!offs) e = nm_fail(NM_ENOMEM, "pim_cache: no memory");
        if (!e) e = c->t.copy_from(c->t.ctx, dpu, at + NM_PIMC_DESC_SIZE, offs, NM_ALIGN_UP((size_t)nb * 4, 8u));
    }
    for (uint32_t i = 0; i < nb && !e; i++) {
        uint64_t src = d.mode == 0 ? offs[i] : d.data_off + (uint64_t)i * c->bs;
        e = c->t.copy_from(c->t.ctx, dpu, src, blk, c->bs);
        size_t n = NM_MIN((size_t)c->bs, len - (size_t)i * c->bs);
        if (!e) memcpy((uint8_t *)dst + (size_t)i * c->bs, blk, n);
    }
    free(offs);
    free(blk);
    return e;
}
