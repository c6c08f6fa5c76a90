/* Suite pim-cache-genome (paper Sec. 6.3, Fig. 6): related genomes copied one after another
 * to the DPUs through one cache. The first copy shows the spatial redundancy of a genome,
 * the next ones the temporal redundancy between related genomes.
 *
 * Data: Debian's sibelia-examples (four Staphylococcus aureus chromosomes JH1, N315, TW20,
 * MSSA476; two Helicobacter pylori strains; S. aureus NCTC8325 and its derivative RN4220 in
 * 179 contigs). FASTA headers and line breaks are removed, as in the paper. Every genome is
 * cut into the same per-DPU chunk size, so DPU i always receives bases [i*C, (i+1)*C).
 * Transfers are MODELED by the emulated machine; DRM time is real host time. */
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

typedef struct copy_fig {
    double dedup_pct, cac_s, naive_s, drm_s, xfer_s;
} copy_fig;

/* Copy one genome: DPU i gets bases [i*C, (i+1)*C). */
static nm_err copy_genome(pb_machine *m, nm_pimc *c, const char *g, size_t len, size_t C, copy_fig *fig)
{
    const void **bufs = malloc(m->nr * sizeof *bufs);
    size_t *lens = malloc(m->nr * sizeof *lens);
    if (!bufs || !lens) {
        free(bufs);
        free(lens);
        return nm_fail(NM_ENOMEM, "no memory");
    }
    size_t total8 = 0;
    for (unsigned d = 0; d < m->nr; d++) {
        size_t lo = NM_MIN(len, (size_t)d * C), hi = NM_MIN(len, lo + C);
        if (d == m->nr - 1) hi = len; /* the last DPU takes any remainder */
        bufs[d] = g + lo;
        lens[d] = hi - lo;
        total8 += NM_ALIGN_UP(hi - lo, 8u);
    }
    nm_pim_cost cost;
    nm_pim_get_cost(m->set, &cost);
    nm_err e = nm_pimc_copy(c, 0, bufs, lens);
    if (!e) {
        nm_pimc_stats st;
        nm_pimc_get_stats(c, &st);
        fig->dedup_pct = st.last_dedup_pct;
        fig->xfer_s = st.last_xfer_modeled_ns * 1e-9;
        fig->drm_s = (double)st.last_drm_ns * 1e-9;
        fig->cac_s = fig->xfer_s + fig->drm_s;
        /* the serial naive copy of the same bytes, by the machine's serial bandwidth */
        fig->naive_s = (double)total8 / (cost.bw_serial_to_dpu * 1e9);
    }
    free(bufs);
    free(lens);
    return e;
}

int nm_bench_pim_cache_genome(nm_bench *b)
{
    unsigned nd = (unsigned)nm_bench_param_num(b, "dpus", 64);
    const char *dir = nm_bench_param(b, "sibelia", SIB);
    nm_bench_config_num(b, "dpus", nd);
    nm_bench_config_str(b, "data", "sibelia-examples (Debian): S. aureus x4, H. pylori x2, NCTC8325 + RN4220");
    nm_bench_config_str(b, "time", "cac = modeled xfer + real host DRM; naive = modeled serial copy of the same bytes");
    nm_bench_plot_spec(b, "[{\"title\":\"duplicates per copy (1 KiB blocks)\",\"x\":\"genome\",\"y\":\"dedup_pct\","
                          "\"series\":\"set\",\"kind\":\"bar\",\"filter\":{\"block_size\":1024},\"ylabel\":\"% duplicate blocks\"}]");
    struct {
        const char *set, *file1, *file2;
        bool join2;
    } sets[3] = {{"S.aureus x4", "Sibelia/Staphylococcus_aureus/Staphylococcus.fasta.gz", NULL, false},
                 {"H.pylori x2", "Sibelia/Helicobacter_pylori/Helicobacter_pylori.fasta.gz", NULL, false},
                 {"NCTC8325+RN4220", "C-Sibelia/Staphylococcus_aureus/NCTC8325.fasta.gz",
                  "C-Sibelia/Staphylococcus_aureus/RN4220.fasta.gz", true}};
    pb_machine m;
    nm_err e = pb_open(&m, nd, 32u << 20);
    if (e) return e;
    double temporal_sum = 0;
    unsigned temporal_n = 0;
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
        /* genomes in copy order */
        const char *g[8];
        size_t gl[8];
        unsigned ng = 0;
        for (unsigned i = 0; i < q.n && ng < 8; i++, ng++) g[ng] = q.s[i], gl[ng] = q.len[i];
        for (unsigned i = 0; i < q2.n && ng < 8; i++, ng++) g[ng] = q2.s[i], gl[ng] = q2.len[i];
        size_t maxlen = 0;
        for (unsigned i = 0; i < ng; i++) maxlen = NM_MAX(maxlen, gl[i]);
        for (uint32_t bs = 256; bs <= 1024 && !e; bs *= 4) {
            nm_pimc_options o;
            nm_pimc_options_default(&o);
            o.block_size = bs;
            o.fallback_threshold = 0; /* measure the redundancy itself */
            o.threads = nm_bench_threads(b);
            nm_pimc *c;
            if ((e = nm_pimc_create(&m.t, &o, &c))) break;
            size_t C = NM_ALIGN_UP((maxlen + nd - 1) / nd, (size_t)bs);
            for (unsigned i = 0; i < ng && !e; i++) {
                copy_fig f;
                e = copy_genome(&m, c, g[i], gl[i], C, &f);
                if (e) break;
                nm_bench_row *row = nm_bench_row_new(b);
                nm_bench_row_str(row, "set", sets[si].set);
                nm_bench_row_num(row, "genome", i + 1);
                nm_bench_row_num(row, "bases", (double)gl[i]);
                nm_bench_row_num(row, "block_size", bs);
                nm_bench_row_num(row, "dedup_pct", f.dedup_pct);
                nm_bench_row_str(row, "redundancy", i ? "temporal+spatial" : "spatial");
                nm_bench_row_num(row, "naive_serial_modeled_s", f.naive_s);
                nm_bench_row_num(row, "cac_xfer_modeled_s", f.xfer_s);
                nm_bench_row_num(row, "cac_drm_host_s", f.drm_s);
                nm_bench_row_num(row, "cac_total_s", f.cac_s);
                nm_bench_row_num(row, "speedup", f.naive_s / f.cac_s);
                nm_bench_progress(b, "%s genome %u (%zu bp) bs=%u: %.2f%% duplicate blocks, %.2fx vs naive serial",
                                  sets[si].set, i + 1, gl[i], bs, f.dedup_pct, f.naive_s / f.cac_s);
                if (i && bs == 1024) {
                    temporal_sum += f.dedup_pct;
                    temporal_n++;
                }
            }
            /* Upper bound: the first genome once more. */
            if (!e) {
                copy_fig f;
                e = copy_genome(&m, c, g[0], gl[0], C, &f);
                nm_bench_row *row = nm_bench_row_new(b);
                nm_bench_row_str(row, "set", sets[si].set);
                nm_bench_row_str(row, "redundancy", "same genome again");
                nm_bench_row_num(row, "block_size", bs);
                nm_bench_row_num(row, "dedup_pct", f.dedup_pct);
                nm_bench_row_num(row, "speedup", f.naive_s / f.cac_s);
            }
            nm_pimc_destroy(c);
        }
        seqs_free(&q);
        seqs_free(&q2);
    }
    if (!e) nm_bench_summary_num(b, "genome_temporal_dup_pct", temporal_n ? temporal_sum / temporal_n : NAN);
    pb_close(&m);
    return e;
}
