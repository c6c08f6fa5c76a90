/* Suite pim-cache-e2e (paper Sec. 6.6, Fig. 9; issue 17): vector addition C = A + B of
 * uint32 vectors with repetition ratio R, end to end on 256 DPUs: copy A and B in, run the
 * kernel. Copying C back is not included, as in the paper.
 *   cpu-1, cpu-all   host threads adding the vectors (host time, measured)
 *   dpu-push         the baseline: dpu_prepare_xfer loops (host, measured) + dpu_push_xfer
 *                    of A, B and two plain descriptors (modeled) + kernel (modeled)
 *   dpu-cac          PIM-CACHE parallel mode as a user gets it (sampled decision, rank
 *                    pipeline): the copy's total (host measured + transfers modeled, as
 *                    scheduled, docs/pim-cache.md) + kernel (modeled)
 *   dpu-serial, dpu-cac-serial   the paper's setting (dpu_copy_to; serial CAC), labelled
 * Every DPU variant runs the same kernel, which reads A and B block by block through the
 * pim_cache descriptors (plain descriptors for the naive copies). */
#include <pthread.h>

#include "pimc_bench_util.h"
#include "nearmem/pim_cache_dpu.h"

static void make_segment(nm_rng *r, uint32_t *u, size_t nv, double R)
{
    size_t rep = (size_t)(R * (double)nv);
    uint32_t v0 = nm_rng_u32(r) >> 2;
    for (size_t i = 0; i < nv; i++) u[i] = i < rep ? v0 : nm_rng_u32(r) >> 2;
}

typedef struct cpu_job {
    const uint32_t *a, *b;
    uint32_t *c;
    size_t n;
    pthread_t th;
} cpu_job;

static void *cpu_add(void *arg)
{
    cpu_job *j = arg;
    for (size_t i = 0; i < j->n; i++) j->c[i] = j->a[i] + j->b[i];
    return NULL;
}

static double cpu_run(const uint32_t *a, const uint32_t *b, uint32_t *c, size_t n, unsigned nt)
{
    cpu_job js[64];
    size_t per = (n + nt - 1) / nt;
    uint64_t t0 = nm_now_ns();
    for (unsigned i = 0; i < nt; i++) {
        size_t lo = NM_MIN(n, (size_t)i * per), hi = NM_MIN(n, lo + per);
        js[i] = (cpu_job){a + lo, b + lo, c + lo, hi - lo, 0};
        if (i) pthread_create(&js[i].th, NULL, cpu_add, &js[i]);
    }
    cpu_add(&js[0]);
    for (unsigned i = 1; i < nt; i++) pthread_join(js[i].th, NULL);
    return (double)(nm_now_ns() - t0) * 1e-9;
}

/* Compare C of a few DPUs with the host's sum (not timed). */
static nm_err check_c(pb_machine *m, uint64_t out_off, uint32_t **a, uint32_t **b, size_t nv)
{
    uint32_t *c = malloc(nv * 4);
    if (!c) return nm_fail(NM_ENOMEM, "no memory");
    nm_err e = NM_OK;
    for (unsigned d = 0; d < m->nr && !e; d += m->nr / 4 ? m->nr / 4 : 1) {
        if (dpu_copy_from(nm_pim_set_dpu(m->set, d), DPU_MRAM_HEAP_POINTER_NAME, (uint32_t)out_off, c, nv * 4))
            e = nm_fail(NM_EIO, "dpu_copy_from");
        for (size_t i = 0; i < nv && !e; i++)
            if (c[i] != a[d][i] + b[d][i]) e = nm_fail(NM_ECORRUPT, "DPU %u: C[%zu] wrong", d, i);
    }
    free(c);
    return e;
}

int nm_bench_pim_cache_e2e(nm_bench *b)
{
    bool quick = nm_bench_quick(b);
    unsigned nd = (unsigned)nm_bench_param_num(b, "dpus", 256);
    size_t nv = (size_t)nm_bench_param_num(b, "elems_per_dpu", quick ? 65536 : 1048576);
    unsigned reps = (unsigned)nm_bench_param_num(b, "reps", quick ? 3 : 5), nt = nm_bench_threads(b);
    if (reps > 15) reps = 15;
    if (nt > 64) nt = 64;
    size_t vbytes = nv * 4, region = 48u << 20;
    nm_bench_config_num(b, "dpus", nd);
    nm_bench_config_num(b, "elems_per_dpu", (double)nv);
    nm_bench_config_num(b, "bytes_copied", 2.0 * (double)vbytes * nd);
    nm_bench_config_num(b, "cpu_threads_all", nt);
    nm_bench_config_num(b, "tasklets", NM_PIMC_TASKLETS);
    nm_bench_config_str(b, "time",
                        "cpu = host wall time (measured); dpu = host work (measured: critical path = thread CPU time, "
                        "_wall = wall time) + transfers (modeled, scheduled per rank for dpu-cac, ranks in flight sharing the host-limited aggregate) + kernel (modeled)");
    nm_bench_plot_spec(b, "[{\"title\":\"vector add end to end\",\"x\":\"R\",\"y\":[\"cpu_1_s\",\"cpu_all_s\","
                          "\"dpu_push_s\",\"dpu_cac_s\",\"dpu_serial_s\",\"dpu_cac_serial_s\"],\"kind\":\"bar\",\"logy\":true,"
                          "\"ylabel\":\"seconds\"}]");
    pb_record_load(b, "start");
    if (2 * vbytes + 4096 > region / 2) return nm_fail(NM_ERANGE, "pim-cache-e2e: %zu elements per DPU is too many", nv);
    pb_machine m;
    nm_err e = pb_open(&m, nd, region);
    if (e) return e;
    uint32_t **A = calloc(nd, sizeof *A), **B = calloc(nd, sizeof *B);
    uint32_t *ha = malloc(vbytes * nd), *hb = malloc(vbytes * nd), *hc = malloc(vbytes * nd);
    const void **bufs = malloc(2 * nd * sizeof *bufs);
    size_t *lens = malloc(2 * nd * sizeof *lens);
    nm_pimc_desc *descs = calloc(2 * (size_t)nd, sizeof *descs);
    nm_pimc *c = NULL;
    if (!A || !B || !ha || !hb || !hc || !bufs || !lens || !descs) {
        e = nm_fail(NM_ENOMEM, "pim-cache-e2e: no memory");
        goto out;
    }
    for (unsigned d = 0; d < nd; d++) {
        A[d] = ha + (size_t)d * nv;
        B[d] = hb + (size_t)d * nv;
        bufs[d] = A[d];
        bufs[nd + d] = B[d];
        lens[d] = lens[nd + d] = vbytes;
    }
    nm_pimc_options o;
    nm_pimc_options_default(&o);
    o.threads = nt;
    o.fallback_threshold = 0; /* the paper's serial CAC (Fig. 9 measures CAC itself) */
    nm_pimc *cp = NULL;
    if ((e = nm_pimc_create(&m.t, &o, &c))) goto out;
    nm_pimc_options_default(&o);
    o.threads = nt;
    o.parallel = true;
    if ((e = nm_pimc_create(&m.t, &o, &cp))) goto out;
    uint32_t out_addr = nm_pimc_machine_addr(&m.t, region);
    /* naive layout: A at heap 0, B after it, two plain descriptors after B. */
    uint64_t nb_off = NM_ALIGN_UP(vbytes, 1024u), ndesc_off = 2 * nb_off;
    nm_rng r;
    nm_rng_seed(&r, nm_bench_seed(b));
    const double Rs[3] = {0, 0.5, 1};
    unsigned slots[2] = {0, 1};
    /* warm-up: scratch buffers grow, the parallel cache learns its host cost per byte */
    for (unsigned d = 0; d < nd; d++) {
        make_segment(&r, A[d], nv, 0.5);
        make_segment(&r, B[d], nv, 0.5);
    }
    if ((e = nm_pimc_copy_multi(cp, 2, slots, bufs, lens))) goto out;
    for (unsigned ri = 0; ri < 3 && !e; ri++) {
        double c1[15], ca[15], dn[15], dp[15], dph[15], dc[15], dcx[15], dcd[15], dck[15], dnk[15], dcs[15], dd = 0;
        double dpw[15], dcw[15];
        unsigned plain = 0;
        for (unsigned k = 0; k < reps && !e; k++) {
            for (unsigned d = 0; d < nd; d++) {
                make_segment(&r, A[d], nv, Rs[ri]);
                make_segment(&r, B[d], nv, Rs[ri]);
            }
            c1[k] = cpu_run(ha, hb, hc, nv * nd, 1);
            ca[k] = cpu_run(ha, hb, hc, nv * nd, nt);
            /* naive copies: the push (baseline) and the paper's serial copies */
            for (int push = 1; push >= 0 && !e; push--) {
                double host = 0, hostc = 0, x;
                if (push) {
                    pb_cost pa = pb_push(&m, bufs, vbytes, 0), pbb = pb_push(&m, bufs + nd, vbytes, nb_off);
                    host = pa.host_s + pbb.host_s;
                    hostc = pa.host_crit_s + pbb.host_crit_s;
                    x = pa.xfer_s + pbb.xfer_s;
                } else {
                    x = pb_naive(&m, bufs, vbytes, 0, false) + pb_naive(&m, bufs + nd, vbytes, nb_off, false);
                }
                uint32_t base = nm_pimc_machine_addr(&m.t, 0);
                uint64_t h0 = nm_now_ns(), hc0 = nm_thread_cpu_ns();
                for (unsigned d = 0; d < nd; d++) {
                    uint32_t nbk = (uint32_t)((vbytes + 1023) / 1024);
                    descs[2 * d] = (nm_pimc_desc){NM_PIMC_DESC_MAGIC, 1, vbytes, nbk, 1024, base, 0};
                    descs[2 * d + 1] = (nm_pimc_desc){NM_PIMC_DESC_MAGIC, 1, vbytes, nbk, 1024, base + (uint32_t)nb_off, 0};
                    dpu_prepare_xfer(nm_pim_set_dpu(m.set, d), &descs[2 * d]);
                }
                host += (double)(nm_now_ns() - h0) * 1e-9;
                hostc += (double)(nm_thread_cpu_ns() - hc0) * 1e-9;
                double t0 = pb_modeled_s(&m);
                if (dpu_push_xfer(m.set, DPU_XFER_TO_DPU, DPU_MRAM_HEAP_POINTER_NAME, (uint32_t)ndesc_off,
                                  2 * sizeof *descs, DPU_XFER_DEFAULT))
                    e = nm_fail(NM_EIO, "descriptor push");
                double t1 = pb_modeled_s(&m);
                if (!e)
                    e = nm_pimc_machine_vadd(&m.t, base + (uint32_t)ndesc_off, base + (uint32_t)ndesc_off + 32, out_addr);
                double kern = pb_modeled_s(&m) - t1;
                if (push) {
                    dp[k] = hostc + x + (t1 - t0) + kern;
                    dpw[k] = host + x + (t1 - t0) + kern;
                    dph[k] = host;
                } else {
                    dn[k] = x + (t1 - t0) + kern;
                    dnk[k] = kern;
                }
            }
            if (!e && k == 0) e = check_c(&m, region, A, B, nv);
            /* dpu-cac (parallel, default) and the paper's serial CAC: both vectors in one
             * batch (slots 0 and 1), then the same kernel. */
            for (int par = 1; par >= 0 && !e; par--) {
                nm_pimc *cc = par ? cp : c;
                nm_pimc_invalidate_all(cc); /* only this data's redundancy counts */
                e = nm_pimc_copy_multi(cc, 2, slots, bufs, lens);
                if (e) break;
                pb_cac st = pb_cac_of(cc);
                double t1 = pb_modeled_s(&m);
                e = nm_pimc_machine_vadd(&m.t, (uint32_t)nm_pimc_slot_desc(cc, 0), (uint32_t)nm_pimc_slot_desc(cc, 1),
                                         out_addr);
                double kern = pb_modeled_s(&m) - t1;
                if (par) {
                    dck[k] = kern;
                    dcx[k] = st.xfer_s;
                    dcd[k] = st.host_crit_s;
                    dc[k] = st.total_crit_s + kern;
                    dcw[k] = st.total_s + kern;
                    plain += st.plain;
                    dd = st.dedup_pct;
                } else {
                    dcs[k] = st.total_crit_s + kern;
                }
                if (!e && k == 0) e = check_c(&m, region, A, B, nv);
            }
        }
        if (e) break;
        nm_bench_row *row = nm_bench_row_new(b);
        nm_bench_row_num(row, "R", Rs[ri]);
        nm_bench_row_num(row, "dedup_pct", dd);
        nm_bench_row_num(row, "cpu_1_s", pb_median(c1, reps));
        nm_bench_row_num(row, "cpu_all_s", pb_median(ca, reps));
        nm_bench_row_num(row, "dpu_push_s", pb_median(dp, reps));
        nm_bench_row_num(row, "dpu_push_wall_s", pb_median(dpw, reps));
        nm_bench_row_num(row, "dpu_push_host_wall_s", pb_median(dph, reps));
        nm_bench_row_num(row, "dpu_serial_s", pb_median(dn, reps));
        nm_bench_row_num(row, "dpu_kernel_modeled_s", pb_median(dnk, reps));
        nm_bench_row_num(row, "dpu_cac_s", pb_median(dc, reps));
        nm_bench_row_num(row, "dpu_cac_xfer_modeled_sum_s", pb_median(dcx, reps));
        nm_bench_row_num(row, "dpu_cac_wall_s", pb_median(dcw, reps));
        nm_bench_row_num(row, "dpu_cac_host_crit_s", pb_median(dcd, reps));
        nm_bench_row_num(row, "dpu_cac_kernel_modeled_s", pb_median(dck, reps));
        nm_bench_row_num(row, "dpu_cac_plain_copies", plain);
        nm_bench_row_num(row, "dpu_cac_serial_s", pb_median(dcs, reps));
        double sp = pb_median(dp, reps) / pb_median(dc, reps), sps = pb_median(dn, reps) / pb_median(dcs, reps);
        nm_bench_row_num(row, "speedup_cac_vs_push", sp);
        nm_bench_row_num(row, "speedup_cac_vs_serial_paper_setting", sps);
        nm_bench_progress(b,
                          "R=%.1f: cpu-1 %.4fs cpu-%u %.4fs | push %.4fs -> cac %.4fs (%.2fx, %u/%u plain) | "
                          "serial %.4fs -> serial cac %.4fs (%.2fx)",
                          Rs[ri], pb_median(c1, reps), nt, pb_median(ca, reps), pb_median(dp, reps), pb_median(dc, reps),
                          sp, plain, reps, pb_median(dn, reps), pb_median(dcs, reps), sps);
        if (ri == 2) {
            nm_bench_summary_num(b, "e2e_speedup_R1_vs_push", sp);
            nm_bench_summary_num(b, "e2e_speedup_R1_vs_push_wall", pb_median(dpw, reps) / pb_median(dcw, reps));
            nm_bench_summary_num(b, "e2e_speedup_R1", sps); /* paper setting (serial) */
            nm_bench_summary_num(b, "e2e_cpu_all_over_cac_R1", pb_median(ca, reps) / pb_median(dc, reps));
        }
        if (ri == 0) nm_bench_summary_num(b, "e2e_slowdown_R0_vs_push", pb_median(dc, reps) / pb_median(dp, reps));
    }
    pb_record_load(b, "end");
    nm_pimc_destroy(cp);
out:
    nm_pimc_destroy(c);
    free(A);
    free(B);
    free(ha);
    free(hb);
    free(hc);
    free(bufs);
    free(lens);
    free(descs);
    pb_close(&m);
    return e;
}
