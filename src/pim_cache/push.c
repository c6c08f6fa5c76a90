/* PIM-CACHE parallel mode (beyond the paper; issue 17): built to be never worse than the
 * transfer a UPMEM programmer already uses, dpu_prepare_xfer + one dpu_push_xfer, and
 * better wherever redundancy exists. Sec. 6.8 of the paper observes that CAC cannot use
 * dpu_push_xfer as is (sizes and destinations differ per DPU) and suggests pushing each
 * DPU's data as soon as its DRM work is done; this is that idea, per rank:
 *
 *  1. Sample: fingerprint every sample_stride-th block (or chunk) of every DPU's buffers
 *     and count the samples the DPU already holds (its table), that write tracking knows
 *     unchanged, that repeat within the sample (spatial), or that only the previous copy's
 *     sample saw (redundancy against data that went plain: it pays off from the next copy).
 *  2. Decide: CAC costs its host work (fingerprinting the bytes not known unchanged, at the
 *     host cost per byte measured on earlier copies) plus the transfer of what is missing;
 *     a plain push costs its transfer. Plain push when CAC is not predicted cheaper.
 *  3. CAC per rank: all host threads plan rank r (DPUs of a rank keep their BRB tops in
 *     lockstep so one dpu_push_xfer per buffer kind serves the rank), then rank r's pushes
 *     go out. On the hardware ranks are independent, so rank r's transfers overlap the
 *     planning of rank r + 1. The emulated machine runs them one after the other; the
 *     copy's total is the schedule they would follow: rank r's transfers start at
 *         S_r = H_pre + sum_{j <= r} H_j
 *     H_pre = host time before the stages (tracking, sampling, decision; measured),
 *     H_j = host time of stage j (measured), and take X_r (modeled, rank r alone) when
 *     no other rank is in flight. Ranks in flight at once share the host-side limit of the
 *     machine's transfer model (n ranks move at most push_gbps x (1 + growth x (n - 1))
 *     GB/s in all): overlap_schedule slows them down accordingly, so the total is
 *     max_r (S_r + X_r) only when the ranks' transfers do not overlap or the host is not
 *     the limit. A plain push is scored the same way: H_pre + its modeled time (the
 *     machine applies the same limit to one push to every rank). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nearmem/common/error.h"
#include "nearmem/common/timer.h"
#include "internal.h"

#define SAMPLE_SET_MAX 4096u

typedef struct sample_job {
    nm_pimc *c;
    const batch *b;
    uint32_t phase;
    unsigned dpu_step;   /* sample DPUs d with d % dpu_step == dpu_first */
    unsigned dpu_first;
    uint32_t per_dpu;    /* at most this many samples per buffer (>= 2) */
    _Atomic unsigned next;
    _Atomic int oom;
    _Atomic uint64_t samples, now_hits, later_hits, clean_samples, sampled_bytes, firsts;
} sample_job;

/* A sample hits when the DPU holds it (table), or it repeats within this copy's sample
 * (spatial); a sample seen only by the previous copy's sample counts for later copies. The
 * first sample of a buffer to miss is the first occurrence of whatever repeats after it,
 * so it is left out of the spatial estimate (with few samples per buffer that bias would
 * dominate: two samples of a buffer of one repeated block would say 50%). */
static inline void classify(dpu_state *s, bool table_hit, uint64_t fp, uint64_t *now, uint64_t *later,
                            uint64_t *firsts, bool *buf_first, int *oom)
{
    if (table_hit || fpset_has(&s->cur, fp)) {
        (*now)++;
        return;
    }
    if (fpset_has(&s->prev, fp)) (*later)++;
    if (*buf_first) {
        (*firsts)++;
        *buf_first = false;
    }
    if (fpset_add(&s->cur, fp, SAMPLE_SET_MAX)) *oom = 1;
}

static inline void prefetch_block(const uint8_t *p, size_t n)
{
    for (size_t at = 0; at < n; at += 64) __builtin_prefetch(p + at);
}

static void sample_dpu(nm_pimc *c, unsigned d, sample_job *j)
{
    dpu_state *s = &c->d[d];
    const batch *b = j->b;
    const unsigned nd = c->t.nr_dpus, stride = c->o.sample_stride;
    uint8_t tmp[4096] __attribute__((aligned(8)));
    uint64_t samples = 0, now = 0, later = 0, clean = 0, bytes = 0, firsts = 0;
    int oom = 0;
    /* a different phase per DPU and per copy, so that DPUs sample different positions */
    uint32_t phase = j->phase + d * 2654435761u;
    fpset_clear(&s->cur);
    for (unsigned k = 0; k < b->n; k++) {
        const uint8_t *buf = b->bufs[(size_t)k * nd + d];
        size_t len = b->lens[(size_t)k * nd + d];
        track_view *tv = &s->tv[k];
        if (!len || tv->all_clean) continue; /* known: nothing to sample */
        /* A buffer with a valid record (registered, copied before) is compared with what
         * the DPU holds: a written block that is not there is new, not the first copy of
         * a repeat, so no sample is left out. */
        bool buf_first = !tv->seg_valid;
        if (c->o.chunking == NM_PIMC_FIXED) {
            const uint32_t bs = c->bs;
            uint32_t nb = pimc_nblocks(c, len);
            /* at least two samples per buffer, whatever its size; at most per_dpu */
            uint32_t st = NM_MAX(1u, NM_MIN(stride, nb / 2));
            st = NM_MAX(st, (nb + j->per_dpu - 1) / j->per_dpu);
            uint32_t i0 = (phase >> 7) % st;
            /* Samples are far apart, so each one waits for memory: fetch the next one
             * while hashing this one. */
            if (i0 < nb) prefetch_block(buf + (size_t)i0 * bs, NM_MIN((size_t)bs, len - (size_t)i0 * bs));
            for (uint32_t i = i0; i < nb; i += st) {
                size_t at = (size_t)i * bs, n = NM_MIN((size_t)bs, len - at);
                if ((uint64_t)i + st < nb) prefetch_block(buf + at + (size_t)st * bs, bs);
                samples++;
                if (tv->seg_valid && track_clean(tv->reg, (uintptr_t)buf + at, (uintptr_t)buf + at + n)) {
                    clean++;
                    now++;
                    continue;
                }
                const uint8_t *p = buf + at;
                if (n < bs) {
                    memcpy(tmp, p, n);
                    memset(tmp + n, 0, bs - n);
                    p = tmp;
                }
                uint64_t fp = nm_pimc_fingerprint(c->o.hash, p, bs);
                bytes += bs;
                /* the record of this block (a registered buffer) holds it: written, but to the
                 * same bytes */
                const seg *sg = tv->seg_valid && !tv->sg->plain ? tv->sg : NULL;
                bool rec = sg && sg->fp && i < sg->cap && (sg->fp_ok[i / 64] >> (i % 64) & 1) && sg->fp[i] == fp;
                classify(s, rec || pimc_table_get(&s->t, fp) != 0, fp, &now, &later, &firsts, &buf_first, &oom);
            }
        } else {
            /* Chunks: from a sample point, the first cut re-synchronises with the chunking
             * of the whole buffer (cuts depend on the last 64 bytes only); the chunk after
             * it is the sample. */
            size_t st = NM_MAX((size_t)1, NM_MIN((size_t)stride, len / c->o.cdc_avg / 2));
            st = NM_MAX(st, (len / c->o.cdc_avg + j->per_dpu - 1) / j->per_dpu);
            size_t step = st * c->o.cdc_avg;
            for (size_t at = (size_t)((phase >> 7) % st) * c->o.cdc_avg; at < len; at += step) {
                size_t first = cdc_cut(&c->cdc, buf + at, len - at);
                bytes += first;
                if (at + first >= len) break;
                size_t n = cdc_cut(&c->cdc, buf + at + first, len - at - first);
                samples++;
                if (tv->seg_valid && track_clean(tv->reg, (uintptr_t)buf + at + first, (uintptr_t)buf + at + first + n)) {
                    clean++; /* unwritten: reused (a chunk of the last list, or a piece of plain data) */
                    now++;
                    continue;
                }
                uint64_t fp = nm_pimc_fingerprint(c->o.hash, buf + at + first, n);
                bytes += n;
                classify(s, pimc_table_get(&s->t, fp) != 0, fp, &now, &later, &firsts, &buf_first, &oom);
            }
        }
    }
    /* The previous sample is the one of the last copy that sampled this DPU. */
    fpset t = s->prev;
    s->prev = s->cur;
    s->cur = t;
    atomic_fetch_add(&j->samples, samples);
    atomic_fetch_add(&j->now_hits, now);
    atomic_fetch_add(&j->later_hits, later);
    atomic_fetch_add(&j->clean_samples, clean);
    atomic_fetch_add(&j->sampled_bytes, bytes);
    atomic_fetch_add(&j->firsts, firsts);
    if (oom) atomic_store(&j->oom, 1);
}

static void sample_work(void *arg, unsigned tid, unsigned nt)
{
    (void)tid;
    (void)nt;
    sample_job *j = arg;
    for (;;) {
        unsigned i = atomic_fetch_add(&j->next, 1);
        unsigned d = j->dpu_first + i * j->dpu_step;
        if (d >= j->c->t.nr_dpus) break;
        sample_dpu(j->c, d, j);
    }
}

/* Aggregate GB/s of `n` ranks in flight at once (the transport's multi-rank model). */
static double agg_gbps(const nm_pimc *c, unsigned n)
{
    double g = c->t.push_gbps * (1.0 + c->t.push_rank_growth * (n > 1 ? n - 1 : 0));
    return c->t.push_cap_gbps > 0 ? NM_MIN(g, c->t.push_cap_gbps) : g;
}

double pimc_push_ns(const nm_pimc *c, double max_rank, double total, unsigned active)
{
    if (c->t.push_gbps <= 0 || total <= 0) return 0.0;
    return NM_MAX(max_rank / c->t.push_gbps, total / agg_gbps(c, active));
}

/* When the last of n ranks' transfers ends, rank r's starting at start[r] (non-decreasing)
 * and moving bytes[r] in x[r] ns when alone: while k ranks are in flight each moves at its
 * own rate (bytes[r] / x[r]), all scaled down when together they would exceed the
 * aggregate of k ranks. For equal ranks starting together this is the machine's time for
 * one push to all of them; without a model (or a rank with no bytes) a rank takes x[r]. */
static double overlap_schedule(const nm_pimc *c, const double *start, const double *x, const double *bytes,
                               unsigned n, double *rem)
{
    double end = 0;
    for (unsigned r = 0; r < n; r++) {
        bool shared = c->t.push_gbps > 0 && bytes[r] > 0 && x[r] > 0;
        rem[r] = shared ? bytes[r] : 0.0;
        if (!shared) end = NM_MAX(end, start[r] + x[r]);
    }
    unsigned next = 0; /* first rank not started */
    double t = 0;
    for (;;) {
        while (next < n && (rem[next] <= 0 || start[next] <= t)) next++;
        double sum_v = 0;
        unsigned k = 0;
        for (unsigned r = 0; r < next; r++)
            if (rem[r] > 0) {
                sum_v += bytes[r] / x[r];
                k++;
            }
        if (!k) {
            if (next >= n) break;
            t = start[next]; /* idle until the next rank's stage is done */
            continue;
        }
        double scale = sum_v > agg_gbps(c, k) ? agg_gbps(c, k) / sum_v : 1.0;
        double dt = next < n ? start[next] - t : INFINITY;
        for (unsigned r = 0; r < next; r++)
            if (rem[r] > 0) dt = NM_MIN(dt, rem[r] / (bytes[r] / x[r] * scale));
        t += dt;
        for (unsigned r = 0; r < next; r++)
            if (rem[r] > 0) {
                rem[r] -= bytes[r] / x[r] * scale * dt;
                if (rem[r] <= 1e-9 * bytes[r]) {
                    rem[r] = 0;
                    end = NM_MAX(end, t);
                }
            }
    }
    return end;
}

/* Predicted critical-path ns of the DRM (cache.c, calibrate; learned correction): every
 * missing byte may be gathered and every missing block (or chunk) is inserted; scratch
 * that must grow is fresh memory (page faults, zeroing). */
double pimc_drm_predict(const nm_pimc *c, double hashed, double missed, double grown)
{
    unsigned t = c->drm_threads ? c->drm_threads : 1;
    double unit = c->o.chunking == NM_PIMC_CDC ? c->o.cdc_avg : c->bs;
    return (c->hash_ns * hashed + c->copy_ns * missed + c->insert_ns * missed / unit + c->touch_ns * grown) / t *
           (c->drm_corr > 0 ? c->drm_corr : 1.2);
}
#define drm_predict(c, h, m) pimc_drm_predict(c, h, m, 0)

/* Step 1 and 2: returns true for CAC. */
static bool decide(nm_pimc *c, const batch *b)
{
    const unsigned nd = c->t.nr_dpus;
    uint64_t t0 = nm_now_ns(); /* wall only: the CPU clock is a system call */
    /* Bytes per rank: all of them (plain), the unknown ones (CAC host work). */
    double total = 0, known = 0, max_rank = 0, max_list = 0, all_bytes = 0, all_list = 0;
    unsigned active = 0;
    for (unsigned r = 0; r < c->nranks; r++) {
        uint64_t rank_bytes = 0, rank_list = 0;
        for (unsigned d = r * c->dpr; d < NM_MIN(nd, (r + 1) * c->dpr); d++)
            for (unsigned k = 0; k < b->n; k++) {
                size_t len = b->lens[(size_t)k * nd + d];
                rank_bytes += NM_ALIGN_UP(len, 8u);
                rank_list += pimc_list_cap(c, len);
                total += (double)len;
                const track_view *tv = &c->d[d].tv[k];
                if (tv->all_clean) known += (double)len;
            }
        active += rank_bytes > 0;
        max_rank = NM_MAX(max_rank, (double)rank_bytes);
        max_list = NM_MAX(max_list, (double)rank_list);
        all_bytes += (double)rank_bytes;
        all_list += (double)rank_list;
    }
    /* The push and the lists as the machine models them: every rank at once, host-limited. */
    double plain_x = pimc_push_ns(c, max_rank, all_bytes, active);
    double list_x = pimc_push_ns(c, max_list, all_list, active);
    /* The sample's budget: a share of the push it may replace. Few samples go to pairs on
     * a subset of the DPUs (a pair is the least that can show a repeat). */
    uint64_t budget = UINT64_MAX;
    if (c->t.push_gbps > 0) {
        double per = c->sample_ns > 0 ? c->sample_ns : c->sample_ns0 > 0 ? c->sample_ns0 : 500.0;
        budget = (uint64_t)(c->o.sample_budget * plain_x / per);
    }
    unsigned sampled = nd;
    uint32_t per_dpu = UINT32_MAX;
    if (budget < (uint64_t)2 * nd) {
        sampled = (unsigned)(budget / 2);
        per_dpu = 2;
    } else if (budget != UINT64_MAX) {
        per_dpu = (uint32_t)NM_MIN(budget / nd, (uint64_t)UINT32_MAX);
    }
    sample_job j = {.c = c, .b = b, .phase = c->seq * 37u + c->o.sample_stride / 2, .per_dpu = per_dpu};
    j.dpu_step = sampled ? (nd + sampled - 1) / sampled : 1;
    j.dpu_first = sampled ? (c->seq * 7u) % j.dpu_step : nd;
    atomic_init(&j.next, 0);
    atomic_init(&j.oom, 0);
    atomic_init(&j.samples, 0);
    atomic_init(&j.now_hits, 0);
    atomic_init(&j.later_hits, 0);
    atomic_init(&j.clean_samples, 0);
    atomic_init(&j.sampled_bytes, 0);
    atomic_init(&j.firsts, 0);
    if (sampled) {
        uint64_t work = NM_MIN(pimc_work_bytes(c, b, 0, nd) / c->o.sample_stride / j.dpu_step,
                               (uint64_t)per_dpu * sampled * c->bs);
        pool_run_work(&c->pool, sample_work, &j, work);
    }
    uint64_t sample_ns = nm_now_ns() - t0;
    c->st.last_probe = sampled > 0;
    c->st.probes += sampled > 0;
    uint64_t taken = atomic_load(&j.samples);
    if (taken >= 4) {
        /* learn the cost of a sample (wall: more samples when the machine is quiet; bounded
         * moves, as for the DRM) */
        double per = (double)sample_ns / (double)taken, cur = c->sample_ns > 0 ? c->sample_ns : c->sample_ns0;
        if (cur > 0) per = NM_MIN(NM_MAX(per, cur / 2), cur * 2);
        c->sample_ns = cur > 0 ? 0.5 * cur + 0.5 * per : per;
    }
    /* the first miss of each DPU is left out (see classify) */
    double samples = (double)(taken - atomic_load(&j.firsts)), now = (double)atomic_load(&j.now_hits),
           later = (double)atomic_load(&j.later_hits), clean = (double)atomic_load(&j.clean_samples);
    /* no sample at all: every byte is known unwritten, or nothing could be sampled */
    double rate_now = samples > 0 ? now / samples : 0.0, rate_later = samples > 0 ? later / samples : 0.0;
    double all = (double)atomic_load(&j.samples), rate_clean = all > 0 ? clean / all : 0.0;
    double f_now = total > 0 ? (known + (total - known) * rate_now) / total : 1.0;
    double hash_bytes = (total - known) * (1.0 - rate_clean);
    c->st.last_sample_pct = f_now * 100.0;
    c->st.last_drm_ns += sample_ns;
    if (atomic_load(&j.oom)) return false; /* no memory for a sample: the push needs none */
    bool cac;
    if (c->t.push_gbps > 0) {
        /* The DRM's critical path (so the decision does not swing with the load of other
         * programs): fingerprint what is not known unwritten, gather what is missing. */
        double miss_bytes = (total - known) * (1.0 - f_now);
        /* Gather buffers must hold each DPU's misses, padded to its rank's most (lockstep;
         * the most taken as 1.5x the estimate) and grown by doubling: what they lack is
         * fresh memory this copy touches (page faults). A copy that must grow them is a
         * risky bet (a wrong one costs a multiple of the push, right ones pay off later),
         * so it must win by a quarter. */
        double grown = 0;
        for (unsigned r = 0; r < c->nranks; r++) {
            double need = 0;
            for (unsigned d = r * c->dpr; d < NM_MIN(nd, (r + 1) * c->dpr); d++) {
                double bytes = 0;
                for (unsigned k = 0; k < b->n; k++)
                    if (!c->d[d].tv[k].all_clean) bytes += (double)b->lens[(size_t)k * nd + d];
                need = NM_MAX(need, 1.5 * bytes * (1.0 - f_now));
            }
            for (unsigned d = r * c->dpr; d < NM_MIN(nd, (r + 1) * c->dpr); d++) {
                double cap = (double)c->d[d].bb_cap, n = cap > 0 ? cap : 256.0;
                if (need <= cap) continue;
                while (n < need) n *= 2;
                grown += n - cap;
            }
        }
        double t_cac = pimc_drm_predict(c, hash_bytes, miss_bytes, grown) + plain_x * (1.0 - f_now) + list_x;
        cac = t_cac < (grown > 0 ? 0.75 : 1.0) * plain_x;
        /* Growing is a one-time cost (the buffers are kept), which a copy-by-copy rule never
         * pays when it exceeds one copy's gain: CAC would win every copy but the first, and
         * every copy goes plain. Rent-or-buy: push plain while the predicted savings given up
         * stay below the cost of growing, then grow (at most twice the cost of knowing the
         * future: the savings given up, plus the growth). */
        double growth = grown > 0 ? pimc_drm_predict(c, 0, 0, grown) : 0.0;
        if (!cac && grown > 0 && t_cac - growth < plain_x) {
            c->forgone_ns += plain_x - (t_cac - growth);
            cac = c->forgone_ns >= growth;
        }
        if (cac) c->forgone_ns = 0;
        /* A correction learned on a bad day would keep CAC away for good (only CAC copies
         * measure it): while plain copies are chosen near the break-even point, it drifts
         * back to its start value, so CAC is tried again. */
        if (!cac && t_cac < 2 * plain_x) c->drm_corr += 0.1 * (1.2 - c->drm_corr);
    } else {
        cac = f_now >= c->o.fallback_threshold;
    }
    /* Redundancy against what went plain (samples only the previous copy's sample saw) is
     * reported but not acted on: the table does not hold those blocks, so CAC would send
     * them all once more (about twice a push here) and win back a fraction of a push per
     * later copy. Repeated buffers are what registration (write tracking) is for. */
    c->st.last_sample_later_pct = rate_later * 100.0;
    return cac;
}

/* Step 3: CAC, rank by rank. The schedule is worked out twice, with the host stages' wall
 * time and with their critical path (hclk). */
static nm_err cac_pipeline(nm_pimc *c, const batch *b, hclk host_pre)
{
    const unsigned nd = c->t.nr_dpus;
    const void **srcs = calloc(nd, sizeof *srcs);
    const uint8_t **bsrc = calloc(nd, sizeof *bsrc);
    if (!srcs || !bsrc) {
        free(srcs);
        free(bsrc);
        return nm_fail(NM_ENOMEM, "pim_cache: no memory");
    }
    c->seq++;
    uint64_t grown0 = atomic_load_explicit(&pimc_grown_bytes, memory_order_relaxed);
    double ready = (double)host_pre.wall, ready_c = (double)host_pre.crit, sched = 0, sched_c = 0, xsum = 0;
    /* per rank: start of its transfers (wall, critical path), their modeled time alone, bytes */
    double *rs = calloc((size_t)c->nranks * 5, sizeof *rs);
    if (!rs) {
        free(srcs);
        free(bsrc);
        return nm_fail(NM_ENOMEM, "pim_cache: no memory");
    }
    double *rs_c = rs + c->nranks, *rx = rs_c + c->nranks, *rbytes = rx + c->nranks, *rrem = rbytes + c->nranks;
    bool modeled = c->t.modeled_ns != NULL;
    hclk drm = {0, 0, 0};
    uint64_t sent = 0, meta = 0, hashed = 0, logical = 0, blocks = 0, hits = 0, clean = 0, newb = 0;
    nm_err e = NM_OK;
    for (unsigned r = 0; r < c->nranks && !e; r++) {
        unsigned d0 = r * c->dpr, d1 = NM_MIN(nd, d0 + c->dpr);
        hclk h0 = hclk_now(c);
        uint32_t from = 0;
        for (unsigned d = d0; d < d1; d++) from = NM_MAX(from, c->d[d].top);
        int overflow, oom;
        pimc_run_plan(c, b, d0, d1, 1, from, &overflow, &oom, NULL, NULL);
        if (!oom && overflow) {
            /* Global invalidation (Sec. 4.2) of the rank, whose tops move together. */
            for (unsigned d = d0; d < d1; d++) {
                pimc_invalidate(c, d);
                for (unsigned k = 0; k < b->n; k++) c->d[d].tv[k].seg_valid = c->d[d].tv[k].all_clean = false;
            }
            from = 0;
            pimc_run_plan(c, b, d0, d1, 1, 0, &overflow, &oom, NULL, NULL);
        }
        if (oom || overflow) {
            e = oom ? nm_fail(NM_ENOMEM, "pim_cache: no host memory for the copy plan")
                    : nm_fail(NM_ECORRUPT, "pim_cache: BRB overflow after invalidation (bug)");
            break;
        }
        /* Stage the rank's pushes: every DPU sends as many bytes as the one with most
         * misses (the rest is zero padding that only takes BRB room) and lists as long as
         * the longest. */
        uint64_t maxmiss = 0;
        for (unsigned d = d0; d < d1; d++) maxmiss = NM_MAX(maxmiss, c->d[d].miss_bytes);
        for (unsigned d = d0; d < d1 && !e; d++) {
            dpu_state *s = &c->d[d];
            if (!maxmiss) {
                bsrc[d] = NULL;
            } else if (!s->gathered && s->nruns == 1 && s->miss_bytes == maxmiss) {
                bsrc[d] = s->runs[0].src; /* one run of the caller's buffer, as long as the push */
            } else if (pimc_reserve((void **)&s->bb, &s->bb_cap, maxmiss)) {
                e = nm_fail(NM_ENOMEM, "pim_cache: no memory");
            } else {
                if (!s->gathered && s->nruns) memcpy(s->bb, s->runs[0].src, s->miss_bytes);
                memset(s->bb + s->miss_bytes, 0, maxmiss - s->miss_bytes);
                bsrc[d] = s->bb;
            }
            blocks += s->blocks;
            hits += s->hits;
            newb += s->miss_bytes;
            hashed += s->hashed_bytes;
            clean += s->clean_bytes;
            for (unsigned k = 0; k < b->n; k++) logical += b->lens[(size_t)k * nd + d];
        }
        uint32_t maxob[64] = {0};
        bool need[64] = {false};
        for (unsigned k = 0; k < b->n && !e; k++) {
            for (unsigned d = d0; d < d1; d++) {
                maxob[k] = NM_MAX(maxob[k], c->d[d].ob_len[k]);
                need[k] |= !c->d[d].ob_skip[k];
            }
            for (unsigned d = d0; d < d1 && need[k]; d++) {
                dpu_state *s = &c->d[d];
                s->ob_skip0[k] = s->ob_skip[k]; /* unchanged lists need no serial copy */
                if (pimc_reserve((void **)&s->ob[k], &s->ob_cap[k], maxob[k])) {
                    e = nm_fail(NM_ENOMEM, "pim_cache: no memory");
                    break;
                }
                memset((uint8_t *)s->ob[k] + s->ob_len[k], 0, maxob[k] - s->ob_len[k]);
                s->ob_skip[k] = false; /* sent after all */
            }
        }
        hclk h = hclk_sub(hclk_now(c), h0);
        drm = hclk_add(drm, h);
        if (e) break;
        double m0 = pimc_modeled_now(c);
        uint64_t moved0 = sent + meta;
        if (maxmiss) {
            /* One push pads every DPU of the rank to the most misses; when only a few DPUs
             * have any (a few pages written), serial copies of just those cost less. */
            uint64_t total_miss = 0;
            for (unsigned d = d0; d < d1; d++) total_miss += c->d[d].miss_bytes;
            bool serial = c->t.serial_gbps > 0 && c->t.push_gbps > 0 &&
                          (double)total_miss / c->t.serial_gbps < (double)(maxmiss * (d1 - d0)) / c->t.push_gbps;
            if (serial) {
                for (unsigned d = d0; d < d1 && !e; d++)
                    if (c->d[d].miss_bytes) {
                        e = c->t.copy_to(c->t.ctx, d, c->brb_base + from, bsrc[d], c->d[d].miss_bytes);
                        sent += c->d[d].miss_bytes;
                    }
            } else {
                for (unsigned d = d0; d < d1; d++) srcs[d] = bsrc[d];
                e = c->t.push_range ? c->t.push_range(c->t.ctx, d0, d1, c->brb_base + from, srcs, maxmiss)
                                    : c->t.push_to(c->t.ctx, c->brb_base + from, srcs, maxmiss);
                sent += maxmiss * (d1 - d0);
            }
        }
        for (unsigned k = 0; k < b->n && !e; k++) {
            if (!need[k]) continue;
            uint64_t at = c->slot_addr[b->slots[k]], changed = 0;
            for (unsigned d = d0; d < d1; d++) changed += c->d[d].ob_skip0[k] ? 0 : c->d[d].ob_len[k];
            bool serial = c->t.serial_gbps > 0 && c->t.push_gbps > 0 &&
                          (double)changed / c->t.serial_gbps < (double)maxob[k] * (d1 - d0) / c->t.push_gbps;
            if (serial) {
                for (unsigned d = d0; d < d1 && !e; d++)
                    if (!c->d[d].ob_skip0[k]) {
                        e = c->t.copy_to(c->t.ctx, d, at, c->d[d].ob[k], c->d[d].ob_len[k]);
                        meta += c->d[d].ob_len[k];
                    }
                continue;
            }
            for (unsigned d = d0; d < d1; d++) srcs[d] = c->d[d].ob[k];
            e = c->t.push_range ? c->t.push_range(c->t.ctx, d0, d1, at, srcs, maxob[k])
                                : c->t.push_to(c->t.ctx, at, srcs, maxob[k]);
            meta += (uint64_t)maxob[k] * (d1 - d0);
        }
        double x = modeled ? pimc_modeled_now(c) - m0 : 0.0;
        for (unsigned d = d0; d < d1; d++) c->d[d].top = (uint32_t)(from + maxmiss);
        ready += (double)h.wall;
        ready_c += (double)h.crit;
        rs[r] = ready;
        rs_c[r] = ready_c;
        rx[r] = x;
        rbytes[r] = (double)(sent + meta - moved0);
        xsum += x;
    }
    if (!e) {
        sched = overlap_schedule(c, rs, rx, rbytes, c->nranks, rrem);
        sched_c = overlap_schedule(c, rs_c, rx, rbytes, c->nranks, rrem);
    }
    free(rs);
    free(srcs);
    free(bsrc);
    if (e) {
        pimc_poison(c, b);
        return e;
    }
    pimc_mark_written(c, b);
    for (unsigned d = 0; d < nd; d++) pimc_commit_tracking(c, b, d, false, NULL);
    /* Learn the correction: observed critical path over prediction, the fresh memory this
     * copy touched (grown scratch and tables: page faults) included in the prediction; one
     * observation moves it at most 2x. */
    double grown = (double)(atomic_load_explicit(&pimc_grown_bytes, memory_order_relaxed) - grown0);
    double pred = pimc_drm_predict(c, (double)hashed, (double)newb, grown);
    if (hashed >= ((uint64_t)1 << 20) && pred > 0 && c->hash_ns > 0) {
        double f = (double)drm.crit / pred * c->drm_corr;
        f = NM_MIN(NM_MAX(f, c->drm_corr / 2), c->drm_corr * 2);
        c->drm_corr = 0.5 * c->drm_corr + 0.5 * f;
    }
    c->mode = NM_PIMC_MODE_CAC;
    c->st.last_mode = NM_PIMC_MODE_CAC;
    c->st.last_logical_bytes = logical;
    c->st.last_sent_bytes = sent;
    c->st.last_new_bytes = newb;
    c->st.last_meta_bytes = meta;
    c->st.last_blocks = blocks;
    c->st.last_hits = hits;
    c->st.last_clean_bytes = clean;
    c->st.last_dedup_pct = logical ? (1.0 - (double)sent / (double)logical) * 100.0 : 0.0;
    c->st.last_drm_ns += drm.wall;
    c->st.last_xfer_modeled_ns = modeled ? xsum : NAN;
    hclk host = hclk_add(host_pre, drm);
    c->st.last_host_ns = host.wall;
    c->st.last_host_cpu_ns = host.cpu;
    c->st.last_host_crit_ns = host.crit;
    /* no transfer at all (nothing changed): the schedule is the host work */
    c->st.last_total_ns = NM_MAX(sched, (double)host.wall);
    c->st.last_total_crit_ns = NM_MAX(sched_c, (double)host.crit);
    c->st.cac_copies++;
    return NM_OK;
}

nm_err pimc_copy_parallel(nm_pimc *c, const batch *b, hclk start)
{
    bool cac = true;
    if (c->o.fallback_threshold > 0) cac = decide(c, b);
    if (!cac) {
        c->mode = NM_PIMC_MODE_PLAIN;
        return pimc_copy_plain(c, b, start);
    }
    return cac_pipeline(c, b, hclk_sub(hclk_now(c), start));
}
