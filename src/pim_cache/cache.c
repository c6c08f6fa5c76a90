/* PIM-CACHE host library: the data reduction module (DRM), per-DPU fingerprint tables, BRB
 * accounting, slots and offset buffers, serial and plain copies, the serial fallback
 * policy, verify mode, VByte and read back. The parallel engine (sampling, decision, rank
 * pipeline) is push.c; write tracking is track.c; chunking cdc.c. Paper sections are cited
 * where the behaviour comes from; what goes beyond the paper is marked as such. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <streamvbyte.h>
#include <sys/mman.h>
#include <unistd.h>
#include <xxhash.h>

#include "nearmem/common/timer.h"
#include "internal.h"

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

uint32_t pimc_table_get(const table *t, uint64_t fp)
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
    atomic_fetch_add_explicit(&pimc_grown_bytes, (uint64_t)(ncap - t->cap) * 12u, memory_order_relaxed);
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

/* Caller checked pimc_table_get(fp) == 0. */
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

/* Sampled fingerprints: a small open-addressing set, 0 = empty (a real 0 is stored as 1;
 * a sample may then mistake one block for another with probability 2^-64). */
uint64_t fpset_fix(uint64_t fp) { return fp ? fp : 1; }

bool fpset_has(const fpset *s, uint64_t fp)
{
    if (!s->cap) return false;
    fp = fpset_fix(fp);
    uint32_t m = s->cap - 1;
    for (uint32_t i = (uint32_t)((fp * 0x9E3779B97F4A7C15ull) >> 40) & m;; i = (i + 1) & m) {
        if (!s->k[i]) return false;
        if (s->k[i] == fp) return true;
    }
}

int fpset_add(fpset *s, uint64_t fp, uint32_t max)
{
    fp = fpset_fix(fp);
    if ((uint64_t)(s->n + 1) * 2 > s->cap) {
        if (s->n >= max) return 0; /* full: the sample stays as it is */
        uint32_t ncap = s->cap ? s->cap * 2 : 64;
        uint64_t *nk = calloc(ncap, sizeof *nk);
        if (!nk) return -1;
        for (uint32_t i = 0; i < s->cap; i++)
            if (s->k[i]) {
                uint32_t j = (uint32_t)((s->k[i] * 0x9E3779B97F4A7C15ull) >> 40) & (ncap - 1);
                while (nk[j]) j = (j + 1) & (ncap - 1);
                nk[j] = s->k[i];
            }
        free(s->k);
        s->k = nk;
        s->cap = ncap;
    }
    uint32_t m = s->cap - 1;
    for (uint32_t i = (uint32_t)((fp * 0x9E3779B97F4A7C15ull) >> 40) & m;; i = (i + 1) & m) {
        if (s->k[i] == fp) return 0;
        if (!s->k[i]) {
            s->k[i] = fp;
            s->n++;
            return 0;
        }
    }
}

void fpset_clear(fpset *s)
{
    if (s->cap) memset(s->k, 0, (size_t)s->cap * sizeof *s->k);
    s->n = 0;
}

/* ------------------------------------------------------------------ create */

void nm_pimc_options_default(nm_pimc_options *o)
{
    memset(o, 0, sizeof *o);
    o->block_size = 1024;
    o->brb_share = 0.9;
    o->hash = NM_PIMC_XXH64;
    o->threads = 0; /* every online CPU */
    o->slots = 2;
    o->fallback_threshold = 0.3; /* the paper's example tau (Sec. 6.8) */
    o->fallback_window = 2;
    o->probe_interval = 4;
    o->probe_stride = 16;
    o->sample_stride = 128;
    o->sample_budget = 0.01;
    o->chunking = NM_PIMC_FIXED;
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
    free(s->ob_len);
    free(s->ob_skip);
    free(s->ob_skip0);
    free(s->tv);
    free(s->prev.k);
    free(s->cur.k);
}

void nm_pimc_destroy(nm_pimc *c)
{
    if (!c) return;
    track_destroy_all(c);
    if (c->d)
        for (unsigned i = 0; i < c->t.nr_dpus; i++) dpu_state_free(&c->d[i], c->o.slots);
    if (c->pool_ok) pool_destroy(&c->pool);
    free(c->d);
    free(c->slot_addr);
    free(c->slot_bytes);
    free(c->slot_gen);
    free(c->slot_epoch);
    free(c->prepared);
    free(c->plain_scratch);
    free(c);
}

int pimc_add_slots(nm_pimc *c, unsigned n)
{
    unsigned want = c->nslots + n;
    if (want > c->slots_cap) {
        unsigned cap = NM_MAX(want, c->slots_cap * 2);
        size_t nd = c->t.nr_dpus;
        uint64_t *a = realloc(c->slot_addr, cap * sizeof *a);
        if (a) c->slot_addr = a;
        uint64_t *by = realloc(c->slot_bytes, cap * sizeof *by);
        if (by) c->slot_bytes = by;
        uint64_t *g = realloc(c->slot_gen, cap * nd * sizeof *g);
        if (g) c->slot_gen = g;
        uint64_t *ep = realloc(c->slot_epoch, cap * nd * sizeof *ep);
        if (ep) c->slot_epoch = ep;
        if (!a || !by || !g || !ep) return -1;
        c->slots_cap = cap;
    }
    for (size_t i = (size_t)c->nslots * c->t.nr_dpus; i < (size_t)want * c->t.nr_dpus; i++) {
        c->slot_gen[i] = NO_GEN;
        c->slot_epoch[i] = 0;
    }
    c->nslots = want;
    return 0;
}

/* The host rates the parallel decision starts from, measured here (not constants): one
 * thread fingerprints 4 MiB at the cache's block size (CDC: chunks it too), and copies 4 MiB
 * (gathering a missing block is a copy). A sample also waits for memory (~0.2 us to fetch a
 * block far from the last). Copies then learn a correction (push.c). */
static void calibrate(nm_pimc *c, unsigned threads)
{
    const nm_pimc_options *o = &c->o;
    const size_t n = (size_t)4 << 20;
    uint8_t *buf = malloc(n), *dst = malloc(n);
    if (!buf || !dst) {
        free(buf);
        free(dst);
        return;
    }
    for (size_t i = 0; i < n; i += 8) {
        uint64_t v = i * 0x9E3779B97F4A7C15ull;
        memcpy(buf + i, &v, 8);
    }
    memset(dst, 0, n);
    /* A copy that needs more scratch than it had touches fresh memory: page faults and
     * zeroing, per byte, beyond a copy's own cost (fresh mappings, best of three). */
    uint64_t touch = UINT64_MAX;
    for (int rep = 0; rep < 3; rep++) {
        uint8_t *f = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (f == MAP_FAILED) break;
        uint64_t t0 = nm_thread_cpu_ns();
        memset(f, 1, n);
        touch = NM_MIN(touch, nm_thread_cpu_ns() - t0);
        munmap(f, n);
    }
    /* best of three (a one-shot measurement on a shared machine can be far off) */
    uint64_t acc = 0, hash_ns = UINT64_MAX, copy_ns = UINT64_MAX, ins_ns = UINT64_MAX;
    table t = {0};
    const unsigned nins = 1u << 16;
    for (int rep = 0; rep < 3; rep++) {
        uint64_t c0 = nm_thread_cpu_ns();
        if (o->chunking == NM_PIMC_CDC) {
            for (size_t at = 0; at < n;) {
                size_t k = cdc_cut(&c->cdc, buf + at, n - at);
                acc ^= nm_pimc_fingerprint(o->hash, buf + at, k);
                at += k;
            }
        } else {
            for (size_t at = 0; at + o->block_size <= n; at += o->block_size)
                acc ^= nm_pimc_fingerprint(o->hash, buf + at, o->block_size);
        }
        uint64_t c1 = nm_thread_cpu_ns();
        memcpy(dst, buf, n);
        uint64_t c2 = nm_thread_cpu_ns();
        acc ^= dst[n / 3 + (size_t)rep];
        /* a missing block is also inserted into its DPU's table (growing from empty) */
        table_clear(&t);
        uint64_t c3 = nm_thread_cpu_ns();
        for (unsigned i = 0; i < nins; i++) {
            uint64_t fp = (i + 1 + (uint64_t)rep * nins) * 0x9E3779B97F4A7C15ull;
            if (!pimc_table_get(&t, fp) && table_put(&t, fp, i * 8u)) break;
        }
        uint64_t c4 = nm_thread_cpu_ns();
        hash_ns = NM_MIN(hash_ns, c1 - c0);
        copy_ns = NM_MIN(copy_ns, c2 - c1);
        ins_ns = NM_MIN(ins_ns, c4 - c3);
    }
    free(t.fp);
    free(t.off1);
    free(buf);
    free(dst);
    c->hash_ns = (double)(hash_ns + (acc & 1)) / (double)n;
    c->copy_ns = (double)copy_ns / (double)n;
    c->insert_ns = (double)ins_ns / nins;
    c->touch_ns = touch == UINT64_MAX ? 0.0 : NM_MAX(0.0, (double)touch / (double)n - c->copy_ns);
    c->drm_corr = 1.2; /* lookups and bookkeeping, until copies measure it */
    c->drm_threads = threads;
    /* a CDC sample cuts from an arbitrary point to the next cut, then the chunk after it */
    double sample_bytes = o->chunking == NM_PIMC_CDC ? 2.0 * o->cdc_avg + o->cdc_max : o->block_size;
    c->sample_ns0 = c->hash_ns * sample_bytes + 200.0;
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
    if (o.threads > 1024) return nm_fail(NM_EINVAL, "pim_cache: %u threads (0 = all CPUs, at most 1024)", o.threads);
    if (o.slots == 0 || o.slots > 64) return nm_fail(NM_EINVAL, "pim_cache: %u slots (1..64)", o.slots);
    if (!(o.fallback_threshold >= 0.0 && o.fallback_threshold <= 1.0))
        return nm_fail(NM_EINVAL, "pim_cache: fallback threshold %g is not in [0, 1]", o.fallback_threshold);
    if (o.fallback_window == 0 || o.fallback_window > FALLBACK_WINDOW_MAX || o.probe_interval == 0 ||
        o.probe_stride == 0 || o.sample_stride == 0 || !(o.sample_budget > 0 && o.sample_budget <= 1))
        return nm_fail(NM_EINVAL,
                       "pim_cache: fallback window must be 1..%u, probe interval, probe and sample strides >= 1, "
                       "sample budget in (0, 1]",
                       FALLBACK_WINDOW_MAX);
    if (o.compress && !t->svb_decode)
        return nm_fail(NM_EINVAL, "pim_cache: compression needs a transport with a decoder");
    if (o.chunking > NM_PIMC_CDC) return nm_fail(NM_EINVAL, "pim_cache: unknown chunking %d", (int)o.chunking);
    if (o.chunking == NM_PIMC_CDC) {
        if (!o.cdc_avg) o.cdc_avg = o.block_size;
        if (!o.cdc_min) o.cdc_min = o.cdc_avg / 4;
        if (!o.cdc_max) o.cdc_max = NM_MIN(4096u, o.cdc_avg * 4);
        if (!nm_is_pow2(o.cdc_avg) || !nm_is_pow2(o.cdc_max) || o.cdc_min < 8 || o.cdc_min >= o.cdc_avg ||
            o.cdc_avg >= o.cdc_max || o.cdc_max > 4096 || o.cdc_max < 64)
            return nm_fail(NM_EINVAL,
                           "pim_cache: CDC sizes min %u avg %u max %u: need powers of two for avg and max, "
                           "8 <= min < avg < max <= 4096, max >= 64",
                           o.cdc_min, o.cdc_avg, o.cdc_max);
    }
    if (o.threads == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        o.threads = n > 0 ? (unsigned)NM_MIN(n, 1024L) : 1;
    }

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
    /* In CDC mode the descriptor's block size is the largest chunk (a kernel's buffer). */
    c->bs = o.chunking == NM_PIMC_CDC ? o.cdc_max : o.block_size;
    c->dpr = t->dpus_per_rank ? t->dpus_per_rank : PIMC_DEFAULT_DPUS_PER_RANK;
    c->nranks = (t->nr_dpus + c->dpr - 1) / c->dpr;
    if (o.chunking == NM_PIMC_CDC) cdc_init(&c->cdc, o.cdc_min, o.cdc_avg, o.cdc_max);
    c->brb_base = t->mram_base;
    c->brb_size = brb;
    c->slot_area = slot_area;
    /* Measured first: it sweeps 8 MiB through the CPU caches, which should not evict the
     * per-DPU state the first copy is about to use. */
    if (o.parallel && o.fallback_threshold > 0 && t->push_gbps > 0) calibrate(c, o.threads);
    c->d = calloc(t->nr_dpus, sizeof *c->d);
    c->prepared = calloc(t->nr_dpus, sizeof *c->prepared);
    if (!c->d || !c->prepared || pimc_add_slots(c, o.slots)) goto oom;
    for (unsigned k = 0; k < o.slots; k++) {
        c->slot_addr[k] = c->brb_base + c->brb_size + (uint64_t)k * slot_area;
        c->slot_bytes[k] = slot_area;
    }
    for (unsigned i = 0; i < t->nr_dpus; i++) {
        dpu_state *s = &c->d[i];
        s->ob = calloc(o.slots, sizeof *s->ob);
        s->ob_cap = calloc(o.slots, sizeof *s->ob_cap);
        s->ob_len = calloc(o.slots, sizeof *s->ob_len);
        s->ob_skip = calloc(o.slots, sizeof *s->ob_skip);
        s->ob_skip0 = calloc(o.slots, sizeof *s->ob_skip0);
        s->tv = calloc(o.slots, sizeof *s->tv);
        if (!s->ob || !s->ob_cap || !s->ob_len || !s->ob_skip || !s->ob_skip0 || !s->tv) goto oom;
    }
    /* First-use allocations made now, not in the first copy (a small copy's budget is a
     * few microseconds): descriptors and sample sets. */
    for (unsigned i = 0; i < t->nr_dpus; i++) {
        dpu_state *s = &c->d[i];
        for (unsigned k = 0; k < o.slots; k++)
            if (pimc_reserve((void **)&s->ob[k], &s->ob_cap[k], 256)) goto oom;
        if (o.parallel && (fpset_add(&s->prev, 1, 8) || fpset_add(&s->cur, 1, 8))) goto oom;
        fpset_clear(&s->prev);
        fpset_clear(&s->cur);
    }
    if (pool_init(&c->pool, o.threads)) goto oom;
    c->pool_ok = true;
    c->mode = NM_PIMC_MODE_CAC;
    if (o.fallback_threshold > 0) {
        /* Start as if in fallback with a probe due, so a first copy without redundancy
         * costs a sampled probe instead of a full DRM pass (serial mode; parallel mode
         * samples every copy). */
        c->mode = NM_PIMC_MODE_PLAIN;
        c->plain_run = o.probe_interval - 1;
    }
    c->st.last_xfer_modeled_ns = NAN;
    c->st.last_total_ns = c->st.last_total_crit_ns = NAN;
    c->st.last_sample_pct = NAN;
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
uint64_t nm_pimc_slot_desc(const nm_pimc *c, unsigned slot) { return slot < c->nslots ? c->slot_addr[slot] : 0; }

/* Largest buffer a slot of `bytes` can describe (worst case: every chunk the minimum). */
static uint64_t max_len_for(const nm_pimc *c, uint64_t bytes)
{
    uint64_t entries = (bytes - NM_PIMC_DESC_SIZE) / (c->o.chunking == NM_PIMC_CDC ? 8u : 4u);
    if (entries > UINT32_MAX - 8) entries = UINT32_MAX - 8;
    uint64_t by_list = c->o.chunking == NM_PIMC_CDC ? entries * c->o.cdc_min : entries * c->bs;
    if (c->o.chunking == NM_PIMC_CDC && by_list > UINT32_MAX) by_list = UINT32_MAX; /* starts are 32-bit */
    return NM_MIN(c->brb_size, by_list);
}

uint64_t nm_pimc_max_len(const nm_pimc *c) { return max_len_for(c, c->slot_area); }

bool nm_pimc_slot_valid(const nm_pimc *c, unsigned slot, unsigned dpu)
{
    if (slot >= c->nslots || dpu >= c->t.nr_dpus) return false;
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
    out->write_faults = track_faults_total();
    out->pool_sync_ns = c->pool.sync_ns;
    if (out->fault_ns <= 0)
        for (const nm_pimc_reg *r = c->regs; r; r = r->next)
            if (r->fault_ns > 0) out->fault_ns = r->fault_ns;
}

void pimc_invalidate(nm_pimc *c, unsigned dpu)
{
    dpu_state *s = &c->d[dpu];
    table_clear(&s->t);
    s->top = 0;
    s->gen++;
    s->invalidations++;
}

void nm_pimc_invalidate_all(nm_pimc *c)
{
    for (unsigned i = 0; i < c->t.nr_dpus; i++) pimc_invalidate(c, i);
}

/* ------------------------------------------------------------------ buffers */

_Atomic uint64_t pimc_grown_bytes;

int pimc_reserve(void **p, size_t *cap, size_t need)
{
    if (need <= *cap) return 0;
    size_t n = *cap ? *cap : 256;
    while (n < need) n *= 2;
    atomic_fetch_add_explicit(&pimc_grown_bytes, n - *cap, memory_order_relaxed);
    void *q = realloc(*p, n);
    if (!q) return -1;
    *p = q;
    *cap = n;
    return 0;
}

uint32_t pimc_nblocks(const nm_pimc *c, size_t len) { return (uint32_t)((len + c->bs - 1) / c->bs); }
/* Bytes of a fixed-block offset buffer: descriptor + offsets, padded to 8. */
static inline size_t ob_bytes(uint32_t nb) { return NM_PIMC_DESC_SIZE + NM_ALIGN_UP((size_t)nb * 4u, 8u); }

size_t pimc_list_cap(const nm_pimc *c, size_t len)
{
    if (c->o.chunking == NM_PIMC_CDC) return NM_PIMC_DESC_SIZE + ((len + c->o.cdc_min - 1) / c->o.cdc_min) * 8u;
    return ob_bytes(pimc_nblocks(c, len));
}

static void put_desc(uint32_t *ob, uint32_t mode, uint64_t len, uint32_t nb, uint32_t bs, uint32_t data_off,
                     uint32_t seq)
{
    nm_pimc_desc d = {NM_PIMC_DESC_MAGIC, mode, len, nb, bs, data_off, seq};
    memcpy(ob, &d, sizeof d);
}

/* ------------------------------------------------------------------ DRM */

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
    if (pimc_reserve((void **)&s->bb, &s->bb_cap, (size_t)(s->nmiss + 1) * bs)) return -1;
    size_t at = 0;
    for (unsigned i = 0; i < s->nruns; i++) {
        memcpy(s->bb + at, s->runs[i].src, (size_t)s->runs[i].n * bs);
        at += (size_t)s->runs[i].n * bs;
    }
    s->gathered = true;
    return 0;
}

static inline bool bit_get(const uint64_t *m, uint32_t i) { return m[i / 64] >> (i % 64) & 1; }
static inline void bit_set(uint64_t *m, uint32_t i) { m[i / 64] |= (uint64_t)1 << (i % 64); }

/* A missing block or chunk of n bytes (its BRB room `room`, a multiple of 8): place it at
 * BRB offset *pos, queue it for sending, index it. Returns its BRB offset, or -1 on host
 * memory exhaustion, -2 when the BRB would overflow. */
static int64_t add_miss(nm_pimc *c, dpu_state *s, unsigned k, const uint8_t *p, uint32_t n, uint32_t room,
                        uint64_t fp, bool insert, bool src_is_tmp, uint64_t *pos)
{
    const uint32_t bs = c->bs;
    if (*pos + room > c->brb_size) return -2;
    uint32_t off = (uint32_t)*pos;
    *pos += room;
    if (!s->gathered) {
        /* fixed blocks, serial mode: runs of consecutive source blocks */
        const uint8_t *src = p;
        if (src_is_tmp) { /* the tail block lives in tmp: keep it */
            memcpy(s->tails + (size_t)k * bs, p, bs);
            src = s->tails + (size_t)k * bs;
        }
        struct run *last = s->nruns ? &s->runs[s->nruns - 1] : NULL;
        if (last && last->src + (size_t)last->n * bs == src)
            last->n++;
        else if (s->nruns < (c->o.parallel ? 1u : MAX_RUNS)) /* a push takes one source per DPU */
            s->runs[s->nruns++] = (struct run){src, 1};
        else if (gather_runs(s, bs)) /* too fragmented: gather from now on */
            return -1;
    }
    if (s->gathered) {
        if (pimc_reserve((void **)&s->bb, &s->bb_cap, s->miss_bytes + room)) return -1;
        memcpy(s->bb + s->miss_bytes, p, n);
        memset(s->bb + s->miss_bytes + n, 0, room - n);
    }
    s->nmiss++;
    s->miss_bytes += room;
    if (insert && table_put(&s->t, fp, off)) return -1;
    if (c->o.verify) {
        if (pimc_reserve((void **)&s->shadow, &s->shadow_cap, (size_t)off + room)) return -1;
        memcpy(s->shadow + off, p, n);
        memset(s->shadow + off + n, 0, room - n);
    }
    return off;
}

/* Look fp up (hit: BRB offset + 1; 0 = miss). Verify mode compares the bytes; a mismatch
 * (a collision) is a miss that must not replace the old mapping (*insert = false). */
static uint32_t lookup(nm_pimc *c, dpu_state *s, uint64_t fp, const uint8_t *p, uint32_t n, bool *insert)
{
    uint32_t off1 = pimc_table_get(&s->t, fp);
    *insert = off1 == 0;
    if (off1 && c->o.verify) {
        s->verify_bytes += n;
        if (off1 - 1 + (size_t)n > s->shadow_cap || memcmp(s->shadow + off1 - 1, p, n) != 0) {
            s->collisions++;
            off1 = 0;
        }
    }
    return off1;
}

/* Fixed blocks of one buffer (Sec. 4.2 steps 1-3). With write tracking, a block whose bytes
 * were not written since the last copy of this buffer to this DPU keeps its BRB address
 * without being read (runs of such blocks are taken in bulk); a written block whose
 * fingerprint did not change keeps it too. */
static int plan_fixed(nm_pimc *c, unsigned d, unsigned k, const uint8_t *buf, size_t len, uint32_t *list,
                      uint64_t *pos, bool *same)
{
    dpu_state *s = &c->d[d];
    track_view *tv = &s->tv[k];
    seg *sg = tv->sg;
    const uint32_t bs = c->bs;
    uint8_t tmp[4096] __attribute__((aligned(8)));
    uint32_t nb = pimc_nblocks(c, len);
    /* same: the list comes out as the record's (so a slot holding it needs nothing) */
    *same = sg && tv->seg_valid && !sg->plain;
    if (sg) {
        if (tv->seg_valid && sg->plain) {
            /* A plain record (the data went by plain push) has no fingerprints: its
             * addresses are made explicit, its unwritten blocks keep them unread, and its
             * written blocks are fingerprinted and recorded now (they are read anyway).
             * Fingerprinting the unwritten ones too (an earlier version did) would cost a
             * whole DRM pass for what only later writes might use. */
            if (seg_reserve(sg, nb, true)) return -1;
            for (uint32_t i = 0; i < nb; i++) sg->loc[i] = sg->data_off + i * bs;
            memset(sg->fp_ok, 0, (nb + 63) / 64 * sizeof *sg->fp_ok);
            sg->plain = false;
        } else if (seg_reserve(sg, nb, true)) {
            return -1;
        }
        if (!tv->seg_valid) memset(sg->fp_ok, 0, (nb + 63) / 64 * sizeof *sg->fp_ok);
    }
    uint64_t last_fp = 0;
    uint32_t last_off = 0;
    bool have_last = false;
    const uintptr_t b0 = (uintptr_t)buf, bend = b0 + len;
    for (uint32_t i = 0; i < nb; i++) {
        size_t at = (size_t)i * bs;
        if (tv->seg_valid) {
            /* the run of unwritten blocks from here, in one step */
            uintptr_t dz = track_next_dirty(tv->reg, b0 + at, bend);
            uint32_t j = dz == bend ? nb : (uint32_t)((dz - b0) / bs);
            if (j > i) {
                memcpy(list + i, sg->loc + i, (size_t)(j - i) * sizeof *list);
                s->hits += j - i;
                s->clean_bytes += (j == nb ? len : (size_t)j * bs) - at;
                have_last = false;
                i = j - 1;
                continue;
            }
        }
        const uint8_t *p = block_at(c, buf, len, i, tmp);
        uint64_t fp = nm_pimc_fingerprint(c->o.hash, p, bs);
        s->hashed_bytes += bs;
        uint32_t addr;
        if (tv->seg_valid && bit_get(sg->fp_ok, i) && sg->fp[i] == fp && !c->o.verify) {
            addr = sg->loc[i]; /* written, but to the same bytes */
            s->hits++;
        } else {
            uint32_t off1;
            bool insert;
            /* Last-key optimization (Sec. 6.2): a run of equal blocks skips the table. */
            if (have_last && fp == last_fp && !c->o.verify) {
                off1 = last_off + 1;
                insert = false;
            } else {
                off1 = lookup(c, s, fp, p, bs, &insert);
            }
            uint32_t off;
            if (off1) {
                off = off1 - 1;
                s->hits++;
            } else {
                int64_t r = add_miss(c, s, k, p, bs, bs, fp, insert, p == tmp, pos);
                if (r < 0) return r == -2 ? 1 : -1;
                off = (uint32_t)r;
            }
            addr = (uint32_t)(c->brb_base + off);
            last_fp = fp;
            last_off = off;
            have_last = true;
        }
        list[i] = addr;
        if (sg) {
            *same &= sg->loc[i] == addr;
            sg->loc[i] = addr;
            sg->fp[i] = fp;
            bit_set(sg->fp_ok, i);
        }
    }
    s->blocks += nb;
    /* Zero the padding word so the buffer sent is deterministic. */
    if (nb & 1u) list[nb] = 0;
    return 0;
}

/* Content-defined chunks of one buffer: each chunk is fingerprinted whole and, when new,
 * stored at an 8-byte aligned BRB address (UPMEM's DMA rule) with zero padding. With write
 * tracking, a chunk of the last copy that starts where the chunker stands now and whose
 * bytes were not written is taken as it was, unread: the chunker, started there, would
 * cut it the same way, since a cut depends only on the bytes from the chunk start. */
static int plan_cdc(nm_pimc *c, unsigned d, unsigned k, const uint8_t *buf, size_t len, uint32_t *list,
                    uint32_t *nent_out, uint64_t *pos)
{
    dpu_state *s = &c->d[d];
    track_view *tv = &s->tv[k];
    const seg *old = tv->seg_valid && !tv->sg->plain ? tv->sg : NULL;
    /* A record of a plain copy (contiguous at data_off, 8-byte aligned) has no chunk list:
     * its unwritten bytes are taken as pieces of cdc_max bytes at cdc_max multiples (8-byte
     * aligned in the BRB, as chunks must be); written stretches are chunked, the chunk
     * before an unwritten piece cut at its boundary. */
    const seg *flat = tv->seg_valid && tv->sg->plain ? tv->sg : NULL;
    const size_t piece = c->o.cdc_max;
    uint32_t oi = 0; /* cursor in the old list */
    uint32_t nent = 0;
    uint64_t last_fp = 0;
    uint32_t last_off = 0;
    bool have_last = false;
    for (size_t at = 0; at < len;) {
        if (flat && at % piece == 0) {
            size_t end = NM_MIN(len, at + piece);
            if (track_clean(tv->reg, (uintptr_t)buf + at, (uintptr_t)buf + end)) {
                list[2 * nent] = (uint32_t)(flat->data_off + at);
                list[2 * nent + 1] = (uint32_t)at;
                nent++;
                s->hits++;
                s->clean_bytes += end - at;
                have_last = false;
                at = end;
                continue;
            }
        }
        if (old) {
            while (oi < old->nb && old->loc[2 * oi + 1] < at) oi++;
            if (oi < old->nb && old->loc[2 * oi + 1] == at) {
                size_t end = oi + 1 < old->nb ? old->loc[2 * oi + 3] : len;
                if (track_clean(tv->reg, (uintptr_t)buf + at, (uintptr_t)buf + end)) {
                    list[2 * nent] = old->loc[2 * oi];
                    list[2 * nent + 1] = (uint32_t)at;
                    nent++;
                    s->hits++;
                    s->clean_bytes += end - at;
                    have_last = false;
                    at = end;
                    continue;
                }
            }
        }
        uint32_t n = (uint32_t)cdc_cut(&c->cdc, buf + at, len - at);
        if (flat) {
            /* stop at the next piece boundary when the piece there is unwritten */
            size_t nb_ = NM_ALIGN_UP(at + 1, piece);
            if (nb_ < at + n && track_clean(tv->reg, (uintptr_t)buf + nb_, (uintptr_t)buf + NM_MIN(len, nb_ + piece)))
                n = (uint32_t)(nb_ - at);
        } else if (old) {
            /* the same at the next chunk of the last list when it is unwritten (it can be
             * taken as it was; a full re-chunk could cut elsewhere, e.g. after pieces) */
            uint32_t j = oi;
            while (j < old->nb && old->loc[2 * j + 1] <= at) j++;
            if (j < old->nb && old->loc[2 * j + 1] < at + n) {
                size_t st = old->loc[2 * j + 1], end = j + 1 < old->nb ? old->loc[2 * j + 3] : len;
                if (track_clean(tv->reg, (uintptr_t)buf + st, (uintptr_t)buf + end)) n = (uint32_t)(st - at);
            }
        }
        const uint8_t *p = buf + at;
        uint64_t fp = nm_pimc_fingerprint(c->o.hash, p, n);
        s->hashed_bytes += n;
        uint32_t off1;
        bool insert;
        if (have_last && fp == last_fp && !c->o.verify) {
            off1 = last_off + 1;
            insert = false;
        } else {
            off1 = lookup(c, s, fp, p, n, &insert);
        }
        uint32_t off;
        if (off1) {
            off = off1 - 1;
            s->hits++;
        } else {
            int64_t r = add_miss(c, s, k, p, n, NM_ALIGN_UP(n, 8u), fp, insert, false, pos);
            if (r < 0) return r == -2 ? 1 : -1;
            off = (uint32_t)r;
        }
        list[2 * nent] = (uint32_t)(c->brb_base + off);
        list[2 * nent + 1] = (uint32_t)at;
        nent++;
        last_fp = fp;
        last_off = off;
        have_last = true;
        at += n;
    }
    s->blocks += nent;
    *nent_out = nent;
    if (tv->sg) {
        if (seg_reserve(tv->sg, 2 * nent, false)) return -1;
        memcpy(tv->sg->loc, list, (size_t)nent * 8u);
        tv->sg->nb = nent;
        tv->sg->plain = false;
    }
    return 0;
}

/* Sec. 4.2 steps 1-3 for one DPU and every slot of the batch: fingerprint, look up, gather
 * the missing blocks (placed from BRB offset `from`), record every block's address.
 * Returns 0, 1 when the BRB would overflow, -1 on host memory exhaustion. */
int pimc_plan_dpu(nm_pimc *c, unsigned d, const batch *b, uint32_t from)
{
    dpu_state *s = &c->d[d];
    const uint32_t bs = c->bs;
    uint64_t pos = from;
    s->nmiss = 0;
    s->miss_bytes = 0;
    s->blocks = s->hits = 0;
    s->hashed_bytes = s->clean_bytes = 0;
    s->nruns = 0;
    /* Chunks are padded, so never runs. A push takes one source per DPU: in parallel mode
     * the missing blocks are gathered only once they stop being one run of the caller's
     * buffer (a buffer that misses everything is pushed from where it is). */
    s->gathered = c->o.chunking == NM_PIMC_CDC;
    if (!s->gathered && pimc_reserve((void **)&s->tails, &s->tails_cap, (size_t)b->n * bs)) return -1;
    for (unsigned k = 0; k < b->n; k++) {
        const uint8_t *buf = b->bufs[(size_t)k * c->t.nr_dpus + d];
        size_t len = b->lens[(size_t)k * c->t.nr_dpus + d];
        unsigned slot = b->slots[k];
        size_t sidx = (size_t)slot * c->t.nr_dpus + d;
        track_view *tv = &s->tv[k];
        s->ob_skip[k] = false;
        if (pimc_reserve((void **)&s->ob[k], &s->ob_cap[k], pimc_list_cap(c, len))) return -1;
        uint32_t *list = s->ob[k] + NM_PIMC_DESC_SIZE / 4;
        if (tv->all_clean) {
            /* Nothing written since the last copy of this buffer to this DPU: its blocks are
             * where they were. If this very slot still holds that copy, send nothing. */
            seg *sg = tv->sg;
            s->hits += sg->plain ? pimc_nblocks(c, len) : sg->nb;
            s->blocks += sg->plain ? pimc_nblocks(c, len) : sg->nb;
            s->clean_bytes += len;
            s->ob_skip[k] = sg->slot == slot && c->slot_epoch[sidx] == sg->slot_epoch &&
                            c->slot_gen[sidx] == c->d[d].gen;
            if (sg->plain) {
                put_desc(s->ob[k], NM_PIMC_MODE_FLAT, len, pimc_nblocks(c, len), bs, sg->data_off, c->seq);
                s->ob_len[k] = NM_PIMC_DESC_SIZE;
                continue;
            }
            if (c->o.chunking == NM_PIMC_CDC) {
                memcpy(list, sg->loc, (size_t)sg->nb * 8u);
                put_desc(s->ob[k], NM_PIMC_MODE_CHUNKS, len, sg->nb, bs, 0, c->seq);
                s->ob_len[k] = NM_PIMC_DESC_SIZE + sg->nb * 8u;
            } else {
                uint32_t nb = pimc_nblocks(c, len);
                memcpy(list, sg->loc, (size_t)nb * 4u);
                if (nb & 1u) list[nb] = 0;
                put_desc(s->ob[k], NM_PIMC_MODE_LIST, len, nb, bs, 0, c->seq);
                s->ob_len[k] = (uint32_t)ob_bytes(nb);
            }
            continue;
        }
        int r;
        if (c->o.chunking == NM_PIMC_CDC) {
            uint32_t nent = 0;
            seg *sg = tv->sg;
            bool was = sg && tv->seg_valid && !sg->plain;
            uint32_t old_n = was ? sg->nb : 0;
            /* keep the old list to compare: if nothing changed, a slot holding it needs nothing */
            uint32_t *old_list = was ? malloc((size_t)old_n * 8u + 8) : NULL;
            if (old_list) memcpy(old_list, sg->loc, (size_t)old_n * 8u);
            r = plan_cdc(c, d, k, buf, len, list, &nent, &pos);
            if (!r && old_list && nent == old_n && memcmp(old_list, list, (size_t)nent * 8u) == 0)
                s->ob_skip[k] = sg->slot == slot && c->slot_epoch[sidx] == sg->slot_epoch &&
                                c->slot_gen[sidx] == c->d[d].gen;
            free(old_list);
            if (!r) {
                put_desc(s->ob[k], NM_PIMC_MODE_CHUNKS, len, nent, bs, 0, c->seq);
                s->ob_len[k] = NM_PIMC_DESC_SIZE + nent * 8u;
            }
        } else {
            bool same = false;
            r = plan_fixed(c, d, k, buf, len, list, &pos, &same);
            if (!r) {
                uint32_t nb = pimc_nblocks(c, len);
                s->ob_skip[k] = same && tv->sg->slot == slot && c->slot_epoch[sidx] == tv->sg->slot_epoch &&
                                c->slot_gen[sidx] == c->d[d].gen;
                put_desc(s->ob[k], NM_PIMC_MODE_LIST, len, nb, bs, 0, c->seq);
                s->ob_len[k] = (uint32_t)ob_bytes(nb);
            }
        }
        if (r) return r;
    }
    return 0;
}

/* After a successful copy: the tracking records of DPU d now describe it. */
void pimc_commit_tracking(nm_pimc *c, const batch *b, unsigned d, bool plain, const uint32_t *data_off)
{
    dpu_state *s = &c->d[d];
    for (unsigned k = 0; k < b->n; k++) {
        track_view *tv = &s->tv[k];
        if (!tv->sg) continue;
        seg *sg = tv->sg;
        size_t sidx = (size_t)b->slots[k] * c->t.nr_dpus + d;
        sg->gen = c->d[d].gen;
        sg->len = b->lens[(size_t)k * c->t.nr_dpus + d];
        if (plain) {
            sg->plain = true;
            sg->data_off = data_off[k];
            if (sg->fp_ok) memset(sg->fp_ok, 0, (sg->cap + 63) / 64 * sizeof *sg->fp_ok);
        }
        sg->slot = b->slots[k];
        sg->slot_epoch = c->slot_epoch[sidx];
    }
}

/* ------------------------------------------------------------------ worker dispatch */

/* DPUs of [d0, d1) handed out one at a time to the pool's threads (dynamic, because DPUs
 * differ in work), each running `mode`. */
typedef struct plan_job {
    nm_pimc *c;
    const batch *b;
    unsigned d0, d1;
    int mode;        /* 0 = plan serial (invalidate + replan on overflow), 1 = plan lockstep, 2 = probe */
    uint32_t from;   /* lockstep: common top */
    _Atomic unsigned next;
    _Atomic int overflow, oom;
    _Atomic uint64_t samples, sample_hits;
} plan_job;

static void probe_dpu(nm_pimc *c, unsigned d, const batch *b, plan_job *j);

static void plan_work(void *arg, unsigned tid, unsigned nt)
{
    (void)tid;
    (void)nt;
    plan_job *j = arg;
    nm_pimc *c = j->c;
    for (;;) {
        unsigned d = atomic_fetch_add(&j->next, 1);
        if (d >= j->d1 || atomic_load(&j->oom)) break;
        if (j->mode == 2) {
            probe_dpu(c, d, j->b, j);
            continue;
        }
        int r = pimc_plan_dpu(c, d, j->b, j->mode == 1 ? j->from : c->d[d].top);
        if (r == 1 && j->mode == 0) {
            /* Global invalidation of this DPU's table (Sec. 4.2), then plan again from an
             * empty BRB: validation guaranteed the batch fits. */
            pimc_invalidate(c, d);
            for (unsigned k = 0; k < j->b->n; k++) c->d[d].tv[k].seg_valid = c->d[d].tv[k].all_clean = false;
            r = pimc_plan_dpu(c, d, j->b, 0);
        }
        if (r == 1) atomic_store(&j->overflow, 1);
        if (r < 0) atomic_store(&j->oom, 1);
    }
}

uint64_t pimc_work_bytes(const nm_pimc *c, const batch *b, unsigned d0, unsigned d1)
{
    uint64_t w = 0;
    for (unsigned d = d0; d < d1; d++)
        for (unsigned k = 0; k < b->n; k++)
            if (!c->d[d].tv[k].all_clean) w += b->lens[(size_t)k * c->t.nr_dpus + d];
    return w;
}

/* Runs `mode` over DPUs [d0, d1) with the pool. Returns the CPU ns spent. */
uint64_t pimc_run_plan(nm_pimc *c, const batch *b, unsigned d0, unsigned d1, int mode, uint32_t from, int *overflow,
                       int *oom, uint64_t *samples, uint64_t *hits)
{
    plan_job j = {.c = c, .b = b, .d0 = d0, .d1 = d1, .mode = mode, .from = from};
    atomic_init(&j.next, d0);
    atomic_init(&j.overflow, 0);
    atomic_init(&j.oom, 0);
    atomic_init(&j.samples, 0);
    atomic_init(&j.sample_hits, 0);
    uint64_t work = pimc_work_bytes(c, b, d0, d1);
    if (mode == 2) work /= c->o.probe_stride;
    uint64_t cpu = pool_run_work(&c->pool, plan_work, &j, work);
    *overflow = atomic_load(&j.overflow);
    *oom = atomic_load(&j.oom);
    if (samples) {
        *samples = atomic_load(&j.samples);
        *hits = atomic_load(&j.sample_hits);
    }
    return cpu;
}

/* Fallback probe of serial mode (beyond the paper): fingerprint every probe_stride-th
 * block and count how many the DPU already holds, or that the previous probe saw, or that
 * repeat within this sample. Nothing is inserted into the table. */
static void probe_dpu(nm_pimc *c, unsigned d, const batch *b, plan_job *j)
{
    dpu_state *s = &c->d[d];
    uint8_t tmp[4096] __attribute__((aligned(8)));
    fpset_clear(&s->cur);
    uint64_t samples = 0, hits = 0;
    for (unsigned k = 0; k < b->n; k++) {
        const uint8_t *buf = b->bufs[(size_t)k * c->t.nr_dpus + d];
        size_t len = b->lens[(size_t)k * c->t.nr_dpus + d];
        uint32_t nb = (uint32_t)((len + c->o.block_size - 1) / c->o.block_size);
        for (uint32_t i = 0; i < nb; i += c->o.probe_stride) {
            size_t at = (size_t)i * c->o.block_size, n = NM_MIN((size_t)c->o.block_size, len - at);
            const uint8_t *p = buf + at;
            if (n < c->o.block_size) {
                memcpy(tmp, p, n);
                memset(tmp + n, 0, c->o.block_size - n);
                p = tmp;
            }
            uint64_t fp = nm_pimc_fingerprint(c->o.hash, p, c->o.block_size);
            bool hit = (c->o.chunking == NM_PIMC_FIXED && pimc_table_get(&s->t, fp) != 0) || fpset_has(&s->prev, fp) ||
                       fpset_has(&s->cur, fp);
            samples++;
            hits += hit;
            if (!hit && fpset_add(&s->cur, fp, 4096)) atomic_store(&j->oom, 1);
        }
    }
    fpset tmpset = s->prev;
    s->prev = s->cur;
    s->cur = tmpset;
    atomic_fetch_add(&j->samples, samples);
    atomic_fetch_add(&j->sample_hits, hits);
}

/* ------------------------------------------------------------------ transfers */

double pimc_modeled_now(const nm_pimc *c) { return c->t.modeled_ns ? c->t.modeled_ns(c->t.ctx) : NAN; }

hclk hclk_now(const nm_pimc *c)
{
    uint64_t me = nm_thread_cpu_ns();
    return (hclk){nm_now_ns(), me + c->pool.extra_cpu_ns, me + c->pool.extra_crit_ns};
}

void pimc_set_host(nm_pimc *c, hclk host)
{
    double x = isnan(c->st.last_xfer_modeled_ns) ? 0 : c->st.last_xfer_modeled_ns;
    c->st.last_host_ns = host.wall;
    c->st.last_host_cpu_ns = host.cpu;
    c->st.last_host_crit_ns = host.crit;
    c->st.last_total_ns = (double)host.wall + x;
    c->st.last_total_crit_ns = (double)host.crit + x;
}

/* Serial mode (the paper's dpu_copy_to per DPU, Sec. 6.8): each DPU its missing blocks
 * (gathered, or straight from the caller's buffer as runs) and its offset buffers. */
static nm_err send_serial(nm_pimc *c, const batch *b, uint64_t *sent, uint64_t *meta)
{
    const unsigned nd = c->t.nr_dpus;
    nm_err e = NM_OK;
    *sent = *meta = 0;
    for (unsigned d = 0; d < nd && !e; d++) {
        dpu_state *s = &c->d[d];
        if (s->miss_bytes && s->gathered) {
            e = c->t.copy_to(c->t.ctx, d, c->brb_base + s->top, s->bb, s->miss_bytes);
            *sent += s->miss_bytes;
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
            if (s->ob_skip[k]) continue;
            e = c->t.copy_to(c->t.ctx, d, c->slot_addr[b->slots[k]], s->ob[k], s->ob_len[k]);
            *meta += s->ob_len[k];
        }
    }
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
        if (b->slots[k] >= c->nslots) return nm_fail(NM_EINVAL, "pim_cache: slot %u of %u", b->slots[k], c->o.slots);
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
            uint64_t max = max_len_for(c, c->slot_bytes[b->slots[k]]);
            if (len > max)
                return nm_fail(NM_ERANGE, "pim_cache: DPU %u: %zu bytes exceed the %llu slot %u can take", d, len,
                               (unsigned long long)max, b->slots[k]);
            /* worst case every block or chunk is new (chunks padded to 8) */
            total += c->o.chunking == NM_PIMC_CDC ? len + 8 * ((len + c->o.cdc_min - 1) / c->o.cdc_min)
                                                  : (uint64_t)pimc_nblocks(c, len) * c->bs;
        }
        /* Worst case every block is new: the batch must fit an empty BRB. */
        if (total > c->brb_size)
            return nm_fail(NM_ERANGE, "pim_cache: DPU %u: %llu bytes in one copy exceed the %llu-byte BRB", d,
                           (unsigned long long)total, (unsigned long long)c->brb_size);
    }
    return NM_OK;
}

/* After a failed transfer nothing can be trusted about the BRBs or the slots written. */
void pimc_poison(nm_pimc *c, const batch *b)
{
    for (unsigned d = 0; d < c->t.nr_dpus; d++) {
        pimc_invalidate(c, d);
        for (unsigned k = 0; k < b->n; k++) c->slot_gen[(size_t)b->slots[k] * c->t.nr_dpus + d] = NO_GEN;
    }
}

void pimc_mark_written(nm_pimc *c, const batch *b)
{
    for (unsigned d = 0; d < c->t.nr_dpus; d++)
        for (unsigned k = 0; k < b->n; k++) {
            size_t i = (size_t)b->slots[k] * c->t.nr_dpus + d;
            if (c->slot_gen[i] != c->d[d].gen || !c->d[d].ob_skip[k]) c->slot_epoch[i]++;
            c->slot_gen[i] = c->d[d].gen;
        }
}

/* Serial CAC copy (the paper's setting). */
static nm_err copy_cac(nm_pimc *c, const batch *b, hclk start)
{
    const unsigned nd = c->t.nr_dpus;
    int overflow, oom;
    c->seq++;
    uint64_t t0 = nm_now_ns();
    pimc_run_plan(c, b, 0, nd, 0, 0, &overflow, &oom, NULL, NULL);
    uint64_t drm = nm_now_ns() - t0;
    if (oom || overflow) {
        pimc_poison(c, b);
        return oom ? nm_fail(NM_ENOMEM, "pim_cache: no host memory for the copy plan")
                   : nm_fail(NM_ECORRUPT, "pim_cache: BRB overflow after invalidation (bug)");
    }
    uint64_t logical = 0, blocks = 0, hits = 0, clean = 0;
    for (unsigned d = 0; d < nd; d++) {
        dpu_state *s = &c->d[d];
        blocks += s->blocks;
        hits += s->hits;
        clean += s->clean_bytes;
        for (unsigned k = 0; k < b->n; k++) logical += b->lens[(size_t)k * nd + d];
    }
    hclk host = hclk_sub(hclk_now(c), start); /* transfers are modeled, not host time */
    double m0 = pimc_modeled_now(c);
    uint64_t sent, meta;
    nm_err e = send_serial(c, b, &sent, &meta);
    if (e) {
        pimc_poison(c, b);
        return e;
    }
    for (unsigned d = 0; d < nd; d++) c->d[d].top += (uint32_t)c->d[d].miss_bytes;
    pimc_mark_written(c, b);
    for (unsigned d = 0; d < nd; d++) pimc_commit_tracking(c, b, d, false, NULL);
    c->st.last_mode = NM_PIMC_MODE_CAC;
    c->st.last_logical_bytes = logical;
    c->st.last_sent_bytes = sent;
    c->st.last_new_bytes = sent;
    c->st.last_meta_bytes = meta;
    c->st.last_blocks = blocks;
    c->st.last_hits = hits;
    c->st.last_clean_bytes = clean;
    c->st.last_dedup_pct = logical ? (1.0 - (double)sent / (double)logical) * 100.0 : 0.0;
    c->st.last_drm_ns += drm;
    c->st.last_xfer_modeled_ns = pimc_modeled_now(c) - m0;
    pimc_set_host(c, host);
    c->st.cac_copies++;
    return NM_OK;
}

/* The plain copy the fallback uses: one push of equal-sized buffers when every DPU gets
 * the same length, serial copies otherwise. Data lands at the BRB top, unindexed. */
nm_err pimc_copy_plain(nm_pimc *c, const batch *b, hclk start)
{
    const unsigned nd = c->t.nr_dpus;
    const size_t nk = (size_t)b->n * nd;
    hclk host = {0, 0, 0};
    uint32_t *doff = NULL;
    uint64_t sent = 0, meta = 0, logical = 0;
    double m0 = NAN;
    nm_err e = NM_OK;
    /* Host work first (room, padding, tails, descriptors), then the transfers, so the host
     * time is measured once. */
    /* scratch kept by the cache from copy to copy */
    size_t need = nk * (sizeof(void *) + 8 + sizeof(uint32_t)) + nd * sizeof(void *) + b->n * (sizeof(size_t) + 1) + 64;
    if (pimc_reserve((void **)&c->plain_scratch, &c->plain_scratch_cap, need)) {
        e = nm_fail(NM_ENOMEM, "pim_cache: no memory");
        goto done;
    }
    uint8_t *sp = c->plain_scratch;
    const void **srcs = (const void **)sp;
    sp += nk * sizeof(void *);
    const void **dsrcs = (const void **)sp;
    sp += nd * sizeof(void *);
    size_t *maxlen = (size_t *)sp;
    sp += b->n * sizeof(size_t);
    uint8_t(*tails)[8] = (uint8_t(*)[8])sp;
    sp += nk * 8;
    doff = (uint32_t *)sp;
    sp += nk * sizeof(uint32_t);
    bool *push = (bool *)sp;
    memset(tails, 0, nk * 8);
    memset(maxlen, 0, b->n * sizeof *maxlen);
    c->seq++;
    /* Make room for the whole batch first: invalidating between two of its slots would
     * leave the earlier slot's data in BRB space the cache considers free. From the
     * largest top, the largest per-DPU need fits, whichever slots go by push or serially. */
    uint64_t max_top = 0, max_need = 0, padded_need = 0, pad_bytes = 0;
    for (unsigned d = 0; d < nd; d++) {
        uint64_t need = 0;
        for (unsigned k = 0; k < b->n; k++) need += (uint64_t)pimc_nblocks(c, b->lens[(size_t)k * nd + d]) * c->bs;
        max_top = NM_MAX(max_top, c->d[d].top);
        max_need = NM_MAX(max_need, need);
    }
    /* pushes pad every DPU to each slot's longest buffer */
    for (unsigned k = 0; k < b->n; k++) {
        for (unsigned d = 0; d < nd; d++) maxlen[k] = NM_MAX(maxlen[k], b->lens[(size_t)k * nd + d]);
        padded_need += (uint64_t)pimc_nblocks(c, maxlen[k]) * c->bs;
        for (unsigned d = 0; d < nd; d++)
            if (b->lens[(size_t)k * nd + d] != maxlen[k]) pad_bytes += maxlen[k] + 8;
    }
    bool pad_ok = !c->o.plain_serial && c->o.parallel && padded_need <= c->brb_size;
    if (pad_ok) max_need = NM_MAX(max_need, padded_need);
    if (max_top + max_need > c->brb_size)
        for (unsigned d = 0; d < nd; d++) pimc_invalidate(c, d);
    /* Parallel mode pushes uneven buffers too, as a user of dpu_push_xfer would: the
     * shorter ones copied into zero-padded scratch first. */
    uint8_t *pad = pad_ok && pad_bytes ? malloc(pad_bytes) : NULL;
    if (pad_ok && pad_bytes && !pad) {
        e = nm_fail(NM_ENOMEM, "pim_cache: no memory");
        goto done;
    }
    size_t pad_at = 0;
    for (unsigned k = 0; k < b->n; k++) {
        const size_t *lens = b->lens + (size_t)k * nd;
        const void *const *bufs = b->bufs + (size_t)k * nd;
        bool equal = !c->o.plain_serial;
        for (unsigned d = 1; d < nd; d++) equal &= lens[d] == lens[0];
        push[k] = equal || pad_ok;
        uint64_t at = 0;
        if (push[k])
            for (unsigned d = 0; d < nd; d++) at = NM_MAX(at, c->d[d].top);
        for (unsigned d = 0; d < nd; d++) {
            size_t i = (size_t)k * nd + d, len = push[k] ? maxlen[k] : lens[d];
            const uint8_t *src = bufs[d];
            if (push[k] && lens[d] != maxlen[k]) {
                uint8_t *q = pad + pad_at;
                if (lens[d]) memcpy(q, src, lens[d]);
                memset(q + lens[d], 0, maxlen[k] + 8 - lens[d]);
                pad_at += maxlen[k] + 8;
                src = q;
            }
            srcs[i] = src;
            size_t body = NM_ALIGN_DOWN(len, 8u);
            if (len > body) memcpy(tails[i], src + body, len - body);
            if (!push[k]) at = c->d[d].top;
            c->d[d].top = (uint32_t)(at + (uint64_t)pimc_nblocks(c, len) * c->bs);
            doff[i] = (uint32_t)(c->brb_base + at);
            dpu_state *s = &c->d[d];
            if (pimc_reserve((void **)&s->ob[k], &s->ob_cap[k], NM_PIMC_DESC_SIZE)) {
                e = nm_fail(NM_ENOMEM, "pim_cache: no memory");
                goto done_pad;
            }
            put_desc(s->ob[k], NM_PIMC_MODE_FLAT, lens[d], pimc_nblocks(c, lens[d]), c->bs, doff[i], c->seq);
            s->ob_skip[k] = false;
            logical += lens[d];
        }
    }
    /* the CPU clock is a system call (microseconds in a VM): read it once here */
    host = hclk_sub(hclk_now(c), start);
    m0 = pimc_modeled_now(c);
    for (unsigned k = 0; k < b->n && !e; k++) {
        const size_t *lens = b->lens + (size_t)k * nd;
        const void **ks = srcs + (size_t)k * nd;
        if (push[k]) {
            size_t body = NM_ALIGN_DOWN(maxlen[k], 8u);
            if (body) e = c->t.push_to(c->t.ctx, doff[(size_t)k * nd] , ks, body);
            for (unsigned d = 0; d < nd; d++) dsrcs[d] = tails[(size_t)k * nd + d];
            if (!e && maxlen[k] > body) e = c->t.push_to(c->t.ctx, doff[(size_t)k * nd] + body, dsrcs, 8);
            sent += (uint64_t)NM_ALIGN_UP(maxlen[k], 8u) * nd;
        } else {
            for (unsigned d = 0; d < nd && !e; d++) {
                size_t i = (size_t)k * nd + d, body = NM_ALIGN_DOWN(lens[d], 8u);
                if (body) e = c->t.copy_to(c->t.ctx, d, doff[i], ks[d], body);
                if (!e && lens[d] > body) e = c->t.copy_to(c->t.ctx, d, doff[i] + body, tails[i], 8);
                sent += NM_ALIGN_UP(lens[d], 8u);
            }
        }
        /* Descriptors are 32 bytes everywhere: one push (unless plain_serial). */
        for (unsigned d = 0; d < nd; d++) dsrcs[d] = c->d[d].ob[k];
        if (!e && !c->o.plain_serial) e = c->t.push_to(c->t.ctx, c->slot_addr[b->slots[k]], dsrcs, NM_PIMC_DESC_SIZE);
        for (unsigned d = 0; d < nd && !e && c->o.plain_serial; d++)
            e = c->t.copy_to(c->t.ctx, d, c->slot_addr[b->slots[k]], dsrcs[d], NM_PIMC_DESC_SIZE);
        meta += (uint64_t)NM_PIMC_DESC_SIZE * nd;
    }
done_pad:
    free(pad);
done:
    if (e) {
        pimc_poison(c, b);
        return e;
    }
    pimc_mark_written(c, b);
    uint32_t offs[64];
    for (unsigned d = 0; d < nd; d++) {
        for (unsigned k = 0; k < b->n; k++) offs[k] = doff[(size_t)k * nd + d];
        pimc_commit_tracking(c, b, d, true, offs);
    }
    c->st.last_mode = NM_PIMC_MODE_PLAIN;
    c->st.last_logical_bytes = logical;
    c->st.last_sent_bytes = sent;
    c->st.last_new_bytes = logical;
    c->st.last_meta_bytes = meta;
    c->st.last_blocks = c->st.last_hits = 0;
    c->st.last_clean_bytes = 0;
    c->st.last_dedup_pct = 0.0;
    c->st.last_xfer_modeled_ns = pimc_modeled_now(c) - m0;
    pimc_set_host(c, host);
    c->st.plain_copies++;
    return NM_OK;
}

/* Fallback policy of serial mode (beyond the paper; Sec. 6.8 sketches it): average the
 * dedup fraction of the last fallback_window CAC copies; below the threshold, copy
 * plainly; every probe_interval plain copies, probe a sample and return to CAC if
 * redundancy is back. */
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

/* Write tracking views of every (slot, DPU) of the batch; returns the logical bytes known
 * unwritten since their last copy (all_clean buffers). */
static uint64_t prepare_tracking(nm_pimc *c, const batch *b, uint64_t *total)
{
    uint64_t clean = 0;
    *total = 0;
    for (unsigned d = 0; d < c->t.nr_dpus; d++)
        for (unsigned k = 0; k < b->n; k++) {
            size_t i = (size_t)k * c->t.nr_dpus + d;
            track_view_of(c, b->bufs[i], b->lens[i], d, &c->d[d].tv[k]);
            *total += b->lens[i];
            clean += c->d[d].tv[k].clean_bytes;
        }
    return clean;
}

static nm_err copy_inner(nm_pimc *c, const batch *b, hclk t0)
{
    uint64_t total;
    uint64_t clean = prepare_tracking(c, b, &total);
    c->st.last_drm_ns = 0;
    c->st.last_probe = false;
    c->st.last_sample_pct = NAN;
    c->st.copies++;
    if (c->o.parallel) return pimc_copy_parallel(c, b, t0);
    if (c->mode == NM_PIMC_MODE_PLAIN && ++c->plain_run % c->o.probe_interval == 0) {
        int overflow, oom;
        uint64_t samples, hits;
        uint64_t p0 = nm_now_ns();
        pimc_run_plan(c, b, 0, c->t.nr_dpus, 2, 0, &overflow, &oom, &samples, &hits);
        c->st.last_drm_ns = nm_now_ns() - p0;
        c->st.last_probe = true;
        c->st.probes++;
        if (oom) return nm_fail(NM_ENOMEM, "pim_cache: no memory for a probe");
        if (samples && (double)hits / (double)samples >= c->o.fallback_threshold) {
            c->mode = NM_PIMC_MODE_CAC;
            c->grace = 1;
            c->st.mode_switches++;
        }
    }
    /* Buffers tracked as unwritten cost nothing in CAC: go CAC when they are enough. */
    bool cac = c->mode == NM_PIMC_MODE_CAC ||
               (total && clean > 0 && (double)clean / (double)total >= NM_MAX(c->o.fallback_threshold, 1e-9));
    if (!cac) return pimc_copy_plain(c, b, t0);
    nm_err e = copy_cac(c, b, t0);
    if (!e && c->st.last_logical_bytes && c->mode == NM_PIMC_MODE_CAC) record_dedup(c, c->st.last_dedup_pct / 100.0);
    return e;
}

static nm_err copy_batch(nm_pimc *c, const batch *b)
{
    nm_err e = validate(c, b);
    if (e) return e;
    hclk t0 = hclk_now(c);
    c->copy_no++;
    c->cur_batch = b;
    e = track_begin_copy(c);
    c->cur_batch = NULL;
    if (e) return e;
    e = copy_inner(c, b, t0);
    if (e || !c->regs) return e;
    /* Protection put in place after the transfers were issued (first protection of a
     * buffer, probe runs): host work that overlaps them, as a rank's DRM overlaps another
     * rank's push: total = max(schedule so far, host so far + this). */
    hclk arm = track_end_copy(c, b);
    if (arm.wall || arm.crit) {
        c->st.last_total_ns = NM_MAX(c->st.last_total_ns, (double)(c->st.last_host_ns + arm.wall));
        c->st.last_total_crit_ns = NM_MAX(c->st.last_total_crit_ns, (double)(c->st.last_host_crit_ns + arm.crit));
        c->st.last_host_ns += arm.wall;
        c->st.last_host_cpu_ns += arm.cpu;
        c->st.last_host_crit_ns += arm.crit;
    }
    return NM_OK;
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
    unsigned nd;
    const uint32_t *const *bufs;
    const size_t *counts;
    uint8_t **enc;
    size_t *enc_len;
} enc_job;

static void enc_work(void *arg, unsigned tid, unsigned nt)
{
    enc_job *j = arg;
    for (unsigned d = tid; d < j->nd; d += nt) {
        size_t n = streamvbyte_encode(j->bufs[d], (uint32_t)j->counts[d], j->enc[d]);
        size_t padded = NM_ALIGN_UP(n, 8u);
        memset(j->enc[d] + n, 0, padded - n);
        j->enc_len[d] = padded;
    }
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
        uint64_t out = (uint64_t)pimc_nblocks(c, counts[d] > UINT32_MAX ? SIZE_MAX : counts[d] * 4) * c->bs;
        uint64_t in = NM_ALIGN_UP((uint64_t)streamvbyte_max_compressedbytes(counts[d] > UINT32_MAX ? 0 : (uint32_t)counts[d]), 8u);
        if (counts[d] > UINT32_MAX || counts[d] * 4 > nm_pimc_max_len(c) || out + in > c->brb_size)
            return nm_fail(NM_ERANGE, "pim_cache: DPU %u: %zu integers do not fit the BRB with their stream", d,
                           counts[d]);
    }
    /* Encode (real host time, like the DRM), host threads partitioning the DPUs (Sec. 4.2
     * "the CE partitions input buffers across host CPU threads"); each DPU's stream goes
     * into its block-buffer scratch. */
    hclk t0 = hclk_now(c);
    uint8_t **enc = calloc(nd, sizeof *enc);
    size_t *enc_len = calloc(nd, sizeof *enc_len);
    nm_pimc_svb_job *jobs = calloc(nd, sizeof *jobs);
    const void **srcs = malloc(nd * sizeof *srcs);
    nm_err e = NM_OK;
    bool started = false;
    if (!enc || !enc_len || !jobs || !srcs) e = nm_fail(NM_ENOMEM, "pim_cache: no memory");
    for (unsigned d = 0; d < nd && !e; d++) {
        size_t cap = NM_ALIGN_UP(streamvbyte_max_compressedbytes((uint32_t)counts[d]), 8u) + 8;
        if (pimc_reserve((void **)&c->d[d].bb, &c->d[d].bb_cap, cap)) e = nm_fail(NM_ENOMEM, "pim_cache: no memory");
        else enc[d] = c->d[d].bb;
    }
    if (!e) {
        enc_job ej = {nd, bufs, counts, enc, enc_len};
        pool_run(&c->pool, enc_work, &ej);
    }
    size_t maxlen = 0;
    bool equal = true;
    for (unsigned d = 0; d < nd && !e; d++) {
        maxlen = NM_MAX(maxlen, enc_len[d]);
        equal &= enc_len[d] == enc_len[0];
    }
    hclk host = hclk_sub(hclk_now(c), t0);
    c->st.last_drm_ns = host.wall;
    double m0 = pimc_modeled_now(c);
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
                need = NM_MAX(need, (uint64_t)pimc_nblocks(c, counts[d] * 4) * c->bs);
            }
            if (at + need + maxlen > c->brb_size) {
                for (unsigned d = 0; d < nd; d++) pimc_invalidate(c, d);
                at = 0;
            }
            for (unsigned d = 0; d < nd && !e; d++) {
                c->d[d].top = (uint32_t)at; /* lockstep for the push */
                /* every stream is pushed with the longest one's length: pad with zeros */
                if (pimc_reserve((void **)&c->d[d].bb, &c->d[d].bb_cap, maxlen)) {
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
                uint64_t need = (uint64_t)pimc_nblocks(c, counts[d] * 4) * c->bs;
                if (c->d[d].top + need + enc_len[d] > c->brb_size) pimc_invalidate(c, d);
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
            if (pimc_reserve((void **)&s->ob[0], &s->ob_cap[0], NM_PIMC_DESC_SIZE)) {
                e = nm_fail(NM_ENOMEM, "pim_cache: no memory");
                break;
            }
            s->ob_skip[0] = false;
            put_desc(s->ob[0], NM_PIMC_MODE_FLAT, counts[d] * 4, pimc_nblocks(c, counts[d] * 4), c->bs, (uint32_t)jobs[d].out_off, c->seq);
            srcs[d] = s->ob[0];
            logical += counts[d] * 4;
        }
        if (!e) e = c->t.push_to(c->t.ctx, c->slot_addr[slot], srcs, NM_PIMC_DESC_SIZE);
    }
    batch b = {1, &slot, NULL, NULL};
    if (e) {
        if (started) pimc_poison(c, &b);
    } else {
        pimc_mark_written(c, &b);
        c->st.last_mode = NM_PIMC_MODE_PLAIN;
        c->st.last_logical_bytes = logical;
        c->st.last_sent_bytes = sent;
        c->st.last_new_bytes = logical;
        c->st.last_meta_bytes = (uint64_t)NM_PIMC_DESC_SIZE * nd;
        c->st.last_blocks = c->st.last_hits = 0;
        c->st.last_dedup_pct = logical ? (1.0 - (double)sent / (double)logical) * 100.0 : 0.0;
        c->st.last_xfer_modeled_ns = pimc_modeled_now(c) - m0;
        pimc_set_host(c, host);
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
    if (!c || slot >= c->nslots || dpu >= c->t.nr_dpus || (len && !dst))
        return nm_fail(NM_EINVAL, "pim_cache: read back of slot %u DPU %u", slot, dpu);
    if (!nm_pimc_slot_valid(c, slot, dpu))
        return nm_fail(NM_ESTATE, "pim_cache: slot %u of DPU %u is stale or was never written", slot, dpu);
    uint64_t at = c->slot_addr[slot];
    nm_pimc_desc d;
    uint64_t raw[NM_PIMC_DESC_SIZE / 8];
    nm_err e = c->t.copy_from(c->t.ctx, dpu, at, raw, sizeof raw);
    if (e) return e;
    memcpy(&d, raw, sizeof d);
    bool chunks = d.mode == NM_PIMC_MODE_CHUNKS;
    if (d.magic != NM_PIMC_DESC_MAGIC || d.block_size != c->bs || d.mode > NM_PIMC_MODE_CHUNKS ||
        (!chunks && d.nblocks != pimc_nblocks(c, d.length)) || (chunks && d.nblocks > d.length))
        return nm_fail(NM_ECORRUPT, "pim_cache: slot %u of DPU %u: bad descriptor", slot, dpu);
    if (len > d.length)
        return nm_fail(NM_ERANGE, "pim_cache: %zu bytes asked, slot holds %llu", len, (unsigned long long)d.length);
    uint32_t nb = chunks ? d.nblocks : pimc_nblocks(c, len);
    size_t list_bytes = chunks ? (size_t)nb * 8u : NM_ALIGN_UP((size_t)nb * 4, 8u);
    uint32_t *offs = NULL;
    uint8_t *blk = malloc(c->bs);
    if (!blk) return nm_fail(NM_ENOMEM, "pim_cache: no memory");
    if (d.mode != NM_PIMC_MODE_FLAT && nb) {
        offs = malloc(list_bytes);
        if (!offs) e = nm_fail(NM_ENOMEM, "pim_cache: no memory");
        if (!e) e = c->t.copy_from(c->t.ctx, dpu, at + NM_PIMC_DESC_SIZE, offs, list_bytes);
    }
    for (uint32_t i = 0; i < nb && !e; i++) {
        uint64_t src, lo, n;
        if (chunks) {
            src = offs[2 * i];
            lo = offs[2 * i + 1];
            uint64_t hi = i + 1 < nb ? offs[2 * i + 3] : d.length;
            if (hi < lo || hi - lo > c->bs) {
                e = nm_fail(NM_ECORRUPT, "pim_cache: slot %u of DPU %u: bad chunk %u", slot, dpu, i);
                break;
            }
            n = hi - lo;
            if (lo >= len) break;
            if (lo + n > len) n = len - lo;
        } else {
            src = d.mode == NM_PIMC_MODE_LIST ? offs[i] : d.data_off + (uint64_t)i * c->bs;
            lo = (uint64_t)i * c->bs;
            n = NM_MIN((size_t)c->bs, len - (size_t)lo);
        }
        if (!n) continue;
        e = c->t.copy_from(c->t.ctx, dpu, src, blk, NM_ALIGN_UP(n, 8u));
        if (!e) memcpy((uint8_t *)dst + lo, blk, n);
    }
    free(offs);
    free(blk);
    return e;
}
