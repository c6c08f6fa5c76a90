/* Suite pim-cache-genome (paper Sec. 6.3, Fig. 6; issue 17): related genomes copied one
 * after another to the DPUs through one cache. The first copy shows the spatial redundancy
 * of a genome, the next ones the temporal redundancy between related genomes.
 *
 * Data: Debian's sibelia-examples (four Staphylococcus aureus chromosomes JH1, N315, TW20,
 * MSSA476; two Helicobacter pylori strains F32 and Gambia94/24; S. aureus NCTC8325 and its
 * derivative RN4220 in 179 contigs). FASTA headers and line breaks are removed, as in the
 * paper. Two layouts:
 *   split - 64 DPUs, DPU i receives bases [i*C, (i+1)*C) of every genome (the paper's);
 *           related strains do not share coordinates (other origins, mobile elements,
 *           RN4220's contigs in another order), so related sequence rarely meets the same
 *           DPU, whatever the chunking;
 *   whole - 8 DPUs, each receives every genome whole (one comparison job per DPU), so
 *           related sequence meets on every DPU and only the chunking decides.
 * Chunkings: fixed 1 KiB blocks (the paper), fixed 256 B, content-defined (gear/FastCDC,
 * 256 B average). Times: PIM-CACHE's totals (host work measured here, critical path, with
 * the wall time beside; transfers modeled), the push of the same bytes (its prepare loop
 * measured, shorter buffers padded as a push user must), the serial copy (modeled). */
#include <stdio.h>

#include "pimc_bench_util.h"

#define SIB "/usr/share/doc/sibelia/examples/"

typedef struct seqs {
    char **s;
    size_t *len;
    unsigned n;
} seqs;

static void seqs_free(seqs *q)
{
    for (unsigned i = 0; i < q->n; i++) free(q->s[i]);
    free(q->s);
    free(q->len);
    q->n = 0;
}

/* Records of a gzipped FASTA (read through gzip -dc: no new library); `join` concatenates
 * every record into one (a draft assembly's contigs). */
static nm_err read_fasta(const char *path, bool join, seqs *out)
{
    memset(out, 0, sizeof *out);
    FILE *t = fopen(path, "rb");
    if (!t) return nm_fail(NM_ENOENT, "%s not found: install sibelia-examples (scripts/install-deps.sh --bench)", path);
    fclose(t);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "gzip -dc '%s'", path);
    FILE *f = popen(cmd, "r");
    if (!f) return nm_fail(NM_EIO, "cannot run gzip on %s", path);
    char line[4096];
    size_t cap = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '>') {
            if (join && out->n) continue;
            char **ns = realloc(out->s, (out->n + 1) * sizeof *ns);
            size_t *nl = realloc(out->len, (out->n + 1) * sizeof *nl);
            if (!ns || !nl) {
                free(ns ? ns : out->s);
                out->s = NULL;
                pclose(f);
                return nm_fail(NM_ENOMEM, "no memory");
            }
            out->s = ns;
            out->len = nl;
            out->s[out->n] = NULL;
            out->len[out->n] = 0;
            out->n++;
            cap = 0;
            continue;
        }
        if (!out->n) continue;
        char **cur = &out->s[out->n - 1];
        size_t *cl = &out->len[out->n - 1];
        for (char *p = line; *p; p++) {
            if (*p == '\n' || *p == '\r') continue;
            if (*cl == cap) {
                cap = cap ? 2 * cap : 1 << 20;
                char *q = realloc(*cur, cap);
                if (!q) {
                    pclose(f);
                    return nm_fail(NM_ENOMEM, "no memory");
                }
                *cur = q;
            }
            (*cur)[(*cl)++] = *p;
        }
    }
    pclose(f);
    if (!out->n) return nm_fail(NM_EFORMAT, "%s: no FASTA records", path);
    return NM_OK;
}

typedef struct layout {
    const char *name;
    unsigned nd;
    bool whole;
} layout;

/* DPU buffers of genome g in layout l (split: the last DPU takes any remainder). */
static void cut(const layout *l, const char *g, size_t len, size_t C, const void **bufs, size_t *lens)
{
    for (unsigned d = 0; d < l->nd; d++) {
        if (l->whole) {
            bufs[d] = g;
            lens[d] = len;
            continue;
        }
        size_t lo = NM_MIN(len, (size_t)d * C), hi = NM_MIN(len, lo + C);
        if (d == l->nd - 1) hi = len;
        bufs[d] = g + lo;
        lens[d] = hi - lo;
    }
}

/* The push of the same bytes: buffers shorter than the longest are copied into padded
 * ones first (host work, counted with the prepare loop). */
static pb_cost push_of(pb_machine *m, const void *const *bufs, const size_t *lens, uint8_t *pad)
{
    size_t maxlen = 0;
    for (unsigned d = 0; d < m->nr; d++) maxlen = NM_MAX(maxlen, lens[d]);
    const void **src = malloc(m->nr * sizeof *src);
    uint64_t t0 = nm_now_ns(), c0 = nm_thread_cpu_ns();
    size_t at = 0;
    for (unsigned d = 0; d < m->nr; d++) {
        src[d] = bufs[d];
        if (lens[d] != maxlen) {
            memcpy(pad + at, bufs[d], lens[d]);
            memset(pad + at + lens[d], 0, maxlen - lens[d]);
            src[d] = pad + at;
            at += NM_ALIGN_UP(maxlen, 8u);
        }
    }
    double h = (double)(nm_now_ns() - t0) * 1e-9, hc = (double)(nm_thread_cpu_ns() - c0) * 1e-9;
    pb_cost r = pb_push(m, src, NM_ALIGN_UP(maxlen, 8u), 0);
    r.host_s += h;
    r.host_crit_s += hc;
    r.total_s += h;
    r.total_crit_s += hc;
    free(src);
    return r;
}

static double serial_of(pb_machine *m, const size_t *lens)
{
    nm_pim_cost cost;
    nm_pim_get_cost(m->set, &cost);
    double bytes = 0;
    for (unsigned d = 0; d < m->nr; d++) bytes += (double)NM_ALIGN_UP(lens[d], 8u);
    return bytes / (cost.bw_serial_to_dpu * 1e9);
}

int nm_bench_pim_cache_genome(nm_bench *b)
{
    unsigned nd_split = (unsigned)nm_bench_param_num(b, "dpus", 64);
    unsigned nd_whole = (unsigned)nm_bench_param_num(b, "dpus_whole", 8);
    unsigned reps = (unsigned)nm_bench_param_num(b, "reps", nm_bench_quick(b) ? 3 : 5);
    if (reps > 15) reps = 15;
    const char *dir = nm_bench_param(b, "sibelia", SIB);
    nm_bench_config_num(b, "dpus_split", nd_split);
    nm_bench_config_num(b, "dpus_whole", nd_whole);
    nm_bench_config_num(b, "reps", reps);
    nm_bench_config_str(b, "data", "sibelia-examples (Debian): S. aureus x4, H. pylori x2, NCTC8325 + RN4220");
    nm_bench_config_str(b, "cdc", "gear hash, FastCDC normalized chunking level 2: min 64, avg 256, max 1024 bytes");
    nm_bench_config_str(b, "time", "cac = host work (measured: critical path; _wall: wall) + modeled transfers; push = "
                                   "prepare loop and padding (measured) + modeled push; serial = modeled serial copy");
    nm_bench_plot_spec(b, "[{\"title\":\"duplicates per copy, whole genomes per DPU\",\"x\":\"genome\",\"y\":\"dedup_pct\","
                          "\"series\":\"chunking\",\"kind\":\"bar\",\"filter\":{\"layout\":\"whole\",\"run\":\"dup\"},"
                          "\"ylabel\":\"% duplicate bytes\"},"
                          "{\"title\":\"duplicates per copy, split across DPUs\",\"x\":\"genome\",\"y\":\"dedup_pct\","
                          "\"series\":\"chunking\",\"kind\":\"bar\",\"filter\":{\"layout\":\"split\",\"run\":\"dup\"},"
                          "\"ylabel\":\"% duplicate bytes\"}]");
    pb_record_load(b, "start");
    struct {
        const char *set, *file1, *file2;
        bool join2;
    } sets[3] = {{"S.aureus x4", "Sibelia/Staphylococcus_aureus/Staphylococcus.fasta.gz", NULL, false},
                 {"H.pylori x2", "Sibelia/Helicobacter_pylori/Helicobacter_pylori.fasta.gz", NULL, false},
                 {"NCTC8325+RN4220", "C-Sibelia/Staphylococcus_aureus/NCTC8325.fasta.gz",
                  "C-Sibelia/Staphylococcus_aureus/RN4220.fasta.gz", true}};
    const layout layouts[2] = {{"split", nd_split, false}, {"whole", nd_whole, true}};
    struct {
        const char *name;
        nm_pimc_chunking ch;
        uint32_t bs;
    } chunkings[3] = {{"fixed-1KiB", NM_PIMC_FIXED, 1024}, {"fixed-256B", NM_PIMC_FIXED, 256}, {"cdc-256B", NM_PIMC_CDC, 256}};
    double dup_sum[2][3] = {{0}}, first_cac[2] = {0}, first_push[2] = {0}, first_cac_w[2] = {0}, first_push_w[2] = {0},
           first_cold[2] = {0};
    unsigned dup_n[2][3] = {{0}};
    nm_err e = NM_OK;
    for (unsigned li = 0; li < 2 && !e; li++) {
        const layout *l = &layouts[li];
        pb_machine m;
        if ((e = pb_open(&m, l->nd, 48u << 20))) break;
        const void **bufs = malloc(l->nd * sizeof *bufs);
        size_t *lens = malloc(l->nd * sizeof *lens);
        uint8_t *pad = NULL;
        for (unsigned si = 0; si < 3 && !e; si++) {
            seqs q = {0}, q2 = {0};
            char path[512];
            snprintf(path, sizeof path, "%s%s", dir, sets[si].file1);
            e = read_fasta(path, false, &q);
            if (!e && sets[si].file2) {
                snprintf(path, sizeof path, "%s%s", dir, sets[si].file2);
                e = read_fasta(path, sets[si].join2, &q2);
            }
            if (e) {
                seqs_free(&q);
                break;
            }
            const char *g[8];
            size_t gl[8];
            unsigned ng = 0;
            for (unsigned i = 0; i < q.n && ng < 8; i++, ng++) g[ng] = q.s[i], gl[ng] = q.len[i];
            for (unsigned i = 0; i < q2.n && ng < 8; i++, ng++) g[ng] = q2.s[i], gl[ng] = q2.len[i];
            size_t maxlen = 0;
            for (unsigned i = 0; i < ng; i++) maxlen = NM_MAX(maxlen, gl[i]);
            size_t C = NM_ALIGN_UP((maxlen + l->nd - 1) / l->nd, (size_t)1024);
            free(pad);
            pad = malloc((l->whole ? maxlen : C) * l->nd + 4096);
            /* Redundancy and CAC's own cost, per chunking (fallback off: measure it all). */
            for (unsigned ci = 0; ci < 3 && !e; ci++) {
                nm_pimc_options o;
                nm_pimc_options_default(&o);
                o.block_size = chunkings[ci].bs;
                o.chunking = chunkings[ci].ch;
                o.parallel = true;
                o.fallback_threshold = 0;
                o.threads = nm_bench_threads(b);
                nm_pimc *c;
                if ((e = nm_pimc_create(&m.t, &o, &c))) break;
                for (unsigned i = 0; i <= ng && !e; i++) {
                    unsigned gi = i < ng ? i : 0; /* then the first genome again */
                    cut(l, g[gi], gl[gi], C, bufs, lens);
                    if ((e = nm_pimc_copy(c, 0, bufs, lens))) break;
                    pb_cac a = pb_cac_of(c);
                    pb_cost p = push_of(&m, bufs, lens, pad);
                    double ser = serial_of(&m, lens);
                    nm_bench_row *row = nm_bench_row_new(b);
                    nm_bench_row_str(row, "run", "dup");
                    nm_bench_row_str(row, "layout", l->name);
                    nm_bench_row_str(row, "set", sets[si].set);
                    nm_bench_row_str(row, "chunking", chunkings[ci].name);
                    nm_bench_row_num(row, "genome", i + 1);
                    nm_bench_row_num(row, "bases", (double)gl[gi]);
                    nm_bench_row_str(row, "redundancy", i == ng ? "same genome again" : i ? "temporal+spatial" : "spatial");
                    nm_bench_row_num(row, "dedup_pct", a.dup_pct);
                    nm_bench_row_num(row, "sent_saving_pct", a.dedup_pct); /* lockstep padding counted */
                    nm_bench_row_num(row, "cac_total_s", a.total_crit_s);
                    nm_bench_row_num(row, "cac_total_wall_s", a.total_s);
                    nm_bench_row_num(row, "cac_host_crit_s", a.host_crit_s);
                    nm_bench_row_num(row, "push_s", p.total_crit_s);
                    nm_bench_row_num(row, "serial_s", ser);
                    nm_bench_row_num(row, "speedup_vs_push", p.total_crit_s / a.total_crit_s);
                    nm_bench_row_num(row, "speedup_vs_serial_paper_setting", ser / a.total_crit_s);
                    nm_bench_progress(b, "%s %s %s genome %u: %.1f%% duplicate bytes; vs push %.2fx, vs serial %.2fx",
                                      l->name, sets[si].set, chunkings[ci].name, i + 1, a.dup_pct,
                                      p.total_crit_s / a.total_crit_s, ser / a.total_crit_s);
                    if (i > 0 && i < ng) {
                        dup_sum[li][ci] += a.dup_pct;
                        dup_n[li][ci]++;
                    }
                }
                nm_pimc_destroy(c);
            }
            /* Nothing repeats: the first genome through a default cache (parallel, CDC,
             * sampled decision) against the push of the same bytes, median of reps: (a) a
             * cache in use (it copied random bytes of the same shape first), (b) a new one
             * (its first copy touches its per-DPU state and buffers for the first time). */
            double cc[15], pp[15], ccw[15], ppw[15], cold[15];
            unsigned plain = 0;
            uint8_t *noise = malloc(gl[0] + 8);
            nm_rng r;
            nm_rng_seed(&r, nm_bench_seed(b) + si);
            for (unsigned k = 0; k < reps && !e && noise; k++) {
                nm_pimc_options o;
                nm_pimc_options_default(&o);
                o.block_size = 256;
                o.chunking = NM_PIMC_CDC;
                o.parallel = true;
                o.threads = nm_bench_threads(b);
                nm_pimc *c;
                if ((e = nm_pimc_create(&m.t, &o, &c))) break;
                cut(l, g[0], gl[0], C, bufs, lens);
                if ((e = nm_pimc_copy(c, 0, bufs, lens))) break; /* cold */
                cold[k] = pb_cac_of(c).total_crit_s;
                for (size_t i = 0; i < gl[0]; i++) noise[i] = "ACGT"[nm_rng_below(&r, 4)];
                cut(l, (const char *)noise, gl[0], C, bufs, lens);
                nm_pimc_invalidate_all(c);
                if (!e) e = nm_pimc_copy(c, 0, bufs, lens); /* in use: unrelated bytes */
                nm_pimc_invalidate_all(c);
                cut(l, g[0], gl[0], C, bufs, lens);
                if (!e) e = nm_pimc_copy(c, 0, bufs, lens);
                pb_cac a = pb_cac_of(c);
                nm_pimc_destroy(c);
                pb_cost p = push_of(&m, bufs, lens, pad);
                cc[k] = a.total_crit_s;
                ccw[k] = a.total_s;
                pp[k] = p.total_crit_s;
                ppw[k] = p.total_s;
                plain += a.plain;
            }
            free(noise);
            if (!e) {
                double mc = pb_median(cc, reps), mp = pb_median(pp, reps), mcold = pb_median(cold, reps);
                first_cac[li] += mc;
                first_push[li] += mp;
                first_cac_w[li] += pb_median(ccw, reps);
                first_push_w[li] += pb_median(ppw, reps);
                first_cold[li] += mcold;
                nm_bench_row *row = nm_bench_row_new(b);
                nm_bench_row_str(row, "run", "first_genome_default");
                nm_bench_row_str(row, "layout", l->name);
                nm_bench_row_str(row, "set", sets[si].set);
                nm_bench_row_num(row, "cac_total_s", mc);
                nm_bench_row_num(row, "cac_total_new_cache_s", mcold);
                nm_bench_row_num(row, "push_s", mp);
                nm_bench_row_num(row, "slowdown_vs_push", mc / mp);
                nm_bench_row_num(row, "slowdown_vs_push_new_cache", mcold / mp);
                nm_bench_row_num(row, "slowdown_vs_push_wall", pb_median(ccw, reps) / pb_median(ppw, reps));
                nm_bench_row_num(row, "plain_copies", plain);
                nm_bench_progress(b, "%s %s first genome, default cache: %.4fx of the push (new cache %.4fx; %u/%u plain)",
                                  l->name, sets[si].set, mc / mp, mcold / mp, plain, reps);
            }
            seqs_free(&q);
            seqs_free(&q2);
        }
        free(pad);
        free(bufs);
        free(lens);
        pb_close(&m);
    }
    pb_record_load(b, "end");
    if (!e) {
        nm_bench_summary_num(b, "genome_cdc_dup_pct", dup_sum[1][2] / NM_MAX(dup_n[1][2], 1u));
        nm_bench_summary_num(b, "genome_cdc_dup_pct_split", dup_sum[0][2] / NM_MAX(dup_n[0][2], 1u));
        nm_bench_summary_num(b, "genome_fixed1k_dup_pct_whole", dup_sum[1][0] / NM_MAX(dup_n[1][0], 1u));
        nm_bench_summary_num(b, "genome_temporal_dup_pct", dup_sum[0][0] / NM_MAX(dup_n[0][0], 1u)); /* paper's */
        nm_bench_summary_num(b, "genome_push_slowdown", first_cac[0] / first_push[0]);
        nm_bench_summary_num(b, "genome_push_slowdown_whole", first_cac[1] / first_push[1]);
        nm_bench_summary_num(b, "genome_push_slowdown_wall", first_cac_w[0] / first_push_w[0]);
        nm_bench_summary_num(b, "genome_push_slowdown_new_cache", first_cold[0] / first_push[0]);
        nm_bench_summary_num(b, "genome_push_slowdown_whole_new_cache", first_cold[1] / first_push[1]);
    }
    return e;
}
