/* Suite pim-cache-synthetic (paper Sec. 6.3, Fig. 5): segmented arrays of random 32-bit
 * integers with repetition ratio R in each DPU's segment, copied to 256 DPUs with and
 * without content-aware copy (CAC).
 *
 * Times: transfers are MODELED by the emulated machine (PrIM's bandwidths); DRM time
 * (fingerprinting, lookups, gathering) is REAL host wall time on this machine. A CAC total
 * is their sum. Two API settings are reported:
 *   serial   - every copy with dpu_copy_to, one DPU after another: the paper's setting
 *              ("all systems used the serial data transfer API", Sec. 6.8);
 *   parallel - naive copies with one dpu_push_xfer, CAC with lockstep BRB tops and pushes
 *              (our extension). */
#include "pimc_bench_util.h"

/* Segment of `len` bytes: the first R share of its 4-byte values is one repeated value,
 * the rest random (Sec. 6.1 "ratio of repeated values in each segment"). */
static void make_segment(nm_rng *r, uint8_t *p, size_t len, double R)
{
    size_t nv = len / 4, rep = (size_t)(R * (double)nv);
    uint32_t v0 = nm_rng_u32(r);
    uint32_t *u = (uint32_t *)p;
    for (size_t i = 0; i < nv; i++) u[i] = i < rep ? v0 : nm_rng_u32(r);
}

typedef struct cac_run {
    double xfer_s, drm_s, dedup_pct;
} cac_run;

/* One measured CAC copy on a long-lived cache whose tables are invalidated first, so only
 * the spatial redundancy of this buffer counts (as in Fig. 5). */
static nm_err cac_once(nm_pimc *c, const void *const *bufs, const size_t *lens, cac_run *out)
{
    nm_pimc_invalidate_all(c);
    nm_err e = nm_pimc_copy(c, 0, bufs, lens);
    if (!e) {
        nm_pimc_stats st;
        nm_pimc_get_stats(c, &st);
        out->xfer_s = st.last_xfer_modeled_ns * 1e-9;
        out->drm_s = (double)st.last_drm_ns * 1e-9;
        out->dedup_pct = st.last_dedup_pct;
    }
    return e;
}

/* `seq` copies through cache c, each beside the naive copy of the same data (parallel
 * push or serial); with `fresh`, new R = 0 data before every round. Sums modeled
 * transfer + host DRM seconds for CAC, and counts the copies the fallback sent plain. */
static nm_err copy_rounds(pb_machine *m, nm_pimc *c, nm_rng *r, uint8_t *data, unsigned nd, size_t per,
                          const void **bufs, const size_t *lens, unsigned seq, bool par, bool fresh, double *naive,
                          double *cac, unsigned *plain)
{
    nm_err e = NM_OK;
    for (unsigned k = 0; k < seq && !e; k++) {
        if (fresh)
            for (unsigned d = 0; d < nd; d++) make_segment(r, data + (size_t)d * per, per, 0);
        *naive += pb_naive(m, bufs, per, 0, par);
        e = nm_pimc_copy(c, 0, bufs, lens);
        nm_pimc_stats st;
        nm_pimc_get_stats(c, &st);
        *cac += st.last_xfer_modeled_ns * 1e-9 + (double)st.last_drm_ns * 1e-9;
        *plain += st.last_mode == NM_PIMC_MODE_PLAIN;
    }
    return e;
}

int nm_bench_pim_cache_synthetic(nm_bench *b)
{
    bool quick = nm_bench_quick(b);
    unsigned nd = (unsigned)nm_bench_param_num(b, "dpus", 256);
    size_t per = (size_t)nm_bench_param_num(b, "kib_per_dpu", quick ? 256 : 4096) * 1024;
    unsigned reps = (unsigned)nm_bench_param_num(b, "reps", quick ? 3 : 5);
    unsigned seq = (unsigned)nm_bench_param_num(b, "r0_copies", 8);
    unsigned threads = nm_bench_threads(b);
    if (reps > 15) reps = 15;
    nm_bench_config_num(b, "dpus", nd);
    nm_bench_config_num(b, "bytes_per_dpu", (double)per);
    nm_bench_config_num(b, "total_bytes", (double)per * nd);
    nm_bench_config_num(b, "block_size", 1024);
    nm_bench_config_num(b, "drm_threads", threads);
    nm_bench_config_num(b, "reps", reps);
    nm_bench_config_str(b, "hash", "xxh64");
    nm_bench_config_str(b, "time", "xfer = modeled by the emulated machine; drm = real host wall time; total = sum");
    nm_bench_plot_spec(b, "[{\"title\":\"serial API (paper's setting)\",\"x\":\"R\",\"y\":[\"naive_serial_s\","
                          "\"cac_serial_total_s\"],\"kind\":\"bar\",\"logy\":true,\"ylabel\":\"seconds (modeled xfer + host DRM)\"},"
                          "{\"title\":\"parallel API (push)\",\"x\":\"R\",\"y\":[\"naive_push_s\",\"cac_parallel_total_s\"],"
                          "\"kind\":\"bar\",\"logy\":true,\"ylabel\":\"seconds\"}]");
    pb_machine m;
    nm_pimc *cser = NULL, *cpar = NULL;
    nm_err e = pb_open(&m, nd, 60u << 20);
    if (e) return e;
    uint8_t *data = malloc(per * nd);
    const void **bufs = malloc(nd * sizeof *bufs);
    size_t *lens = malloc(nd * sizeof *lens);
    if (!data || !bufs || !lens) {
        e = nm_fail(NM_ENOMEM, "pim-cache-synthetic: no memory for %zu bytes", per * nd);
        goto out;
    }
    for (unsigned d = 0; d < nd; d++) {
        bufs[d] = data + (size_t)d * per;
        lens[d] = per;
    }
    nm_rng r;
    nm_rng_seed(&r, nm_bench_seed(b));
    nm_pimc_options os, op;
    nm_pimc_options_default(&os);
    os.threads = threads;
    os.fallback_threshold = 0; /* Fig. 5 measures CAC itself */
    op = os;
    op.parallel = true;
    if ((e = nm_pimc_create(&m.t, &os, &cser)) || (e = nm_pimc_create(&m.t, &op, &cpar))) goto out;
    /* Warm-up: the caches' scratch buffers grow once, as in a long-running application
     * (the cold first copy is part of the R = 0 sequence below). */
    for (unsigned d = 0; d < nd; d++) make_segment(&r, data + (size_t)d * per, per, 0);
    cac_run w;
    if ((e = cac_once(cser, bufs, lens, &w)) || (e = cac_once(cpar, bufs, lens, &w))) goto out;
    {
        /* Sec. 6.7 metadata formulas against the bytes of this all-distinct copy (N bytes,
         * D DPUs): index 12 N / 1024 + 4 D; offsets N / 256 (+ our 32-byte descriptors). */
        nm_pimc_stats st;
        nm_pimc_get_stats(cser, &st);
        double N = (double)per * nd;
        nm_bench_summary_num(b, "meta_index_formula_bytes", 12.0 * N / 1024 + 4.0 * nd);
        nm_bench_summary_num(b, "meta_index_entries_bytes", 12.0 * (double)st.table_entries + 4.0 * nd);
        nm_bench_summary_num(b, "meta_index_allocated_bytes", (double)st.table_bytes + 4.0 * nd);
        nm_bench_summary_num(b, "meta_offsets_formula_bytes", N / 256);
        nm_bench_summary_num(b, "meta_offsets_sent_bytes", (double)st.last_meta_bytes);
    }
    const double Rs[5] = {0, 0.25, 0.5, 0.75, 1};
    double sum_R1[2] = {NAN, NAN}, dedup_R1 = NAN, slow_R0_nofb = NAN;
    for (unsigned ri = 0; ri < 5 && !e; ri++) {
        double ns[15], np[15], cs[15], cp[15], ds[15], dp[15], xs[15], xp[15], dd = 0;
        for (unsigned k = 0; k < reps && !e; k++) {
            for (unsigned d = 0; d < nd; d++) make_segment(&r, data + (size_t)d * per, per, Rs[ri]);
            ns[k] = pb_naive(&m, bufs, per, 0, false);
            np[k] = pb_naive(&m, bufs, per, 0, true);
            cac_run a, p;
            e = cac_once(cser, bufs, lens, &a);
            if (!e) e = cac_once(cpar, bufs, lens, &p);
            if (e) break;
            xs[k] = a.xfer_s;
            ds[k] = a.drm_s;
            cs[k] = a.xfer_s + a.drm_s;
            xp[k] = p.xfer_s;
            dp[k] = p.drm_s;
            cp[k] = p.xfer_s + p.drm_s;
            dd = a.dedup_pct;
        }
        if (e) break;
        nm_bench_row *row = nm_bench_row_new(b);
        nm_bench_row_num(row, "R", Rs[ri]);
        nm_bench_row_num(row, "dedup_pct", dd);
        nm_bench_row_num(row, "naive_serial_s", pb_median(ns, reps));
        nm_bench_row_num(row, "naive_push_s", pb_median(np, reps));
        nm_bench_row_num(row, "cac_serial_xfer_modeled_s", pb_median(xs, reps));
        nm_bench_row_num(row, "cac_serial_drm_host_s", pb_median(ds, reps));
        nm_bench_row_num(row, "cac_serial_total_s", pb_median(cs, reps));
        nm_bench_row_num(row, "cac_parallel_xfer_modeled_s", pb_median(xp, reps));
        nm_bench_row_num(row, "cac_parallel_drm_host_s", pb_median(dp, reps));
        nm_bench_row_num(row, "cac_parallel_total_s", pb_median(cp, reps));
        double sp_s = pb_median(ns, reps) / pb_median(cs, reps), sp_p = pb_median(np, reps) / pb_median(cp, reps);
        nm_bench_row_num(row, "speedup_serial", sp_s);
        nm_bench_row_num(row, "speedup_parallel", sp_p);
        nm_bench_progress(b, "R=%.2f dedup %.1f%%: serial %.3fs -> CAC %.3fs (%.2fx); push %.4fs -> CAC %.4fs (%.2fx)",
                          Rs[ri], dd, pb_median(ns, reps), pb_median(cs, reps), sp_s, pb_median(np, reps),
                          pb_median(cp, reps), sp_p);
        if (ri == 4) {
            sum_R1[0] = sp_s;
            sum_R1[1] = sp_p;
            dedup_R1 = dd;
        }
        if (ri == 0) slow_R0_nofb = 1.0 / sp_s;
    }
    /* R = 0 with the fallback on: `seq` copies of fresh data through one new cache (its
     * cold first copy included). */
    double slow_fb[2] = {NAN, NAN};
    for (int par = 0; par < 2 && !e; par++) {
        nm_pimc_options o;
        nm_pimc_options_default(&o);
        o.threads = threads;
        o.parallel = par;
        o.plain_serial = !par; /* same API as the baseline it is compared with */
        nm_pimc *c;
        e = nm_pimc_create(&m.t, &o, &c);
        if (e) break;
        double naive = 0, cac = 0;
        unsigned plain = 0;
        e = copy_rounds(&m, c, &r, data, nd, per, bufs, lens, seq, par, true, &naive, &cac, &plain);
        nm_pimc_destroy(c);
        slow_fb[par] = cac / naive;
        nm_bench_row *row = nm_bench_row_new(b);
        nm_bench_row_str(row, "run", par ? "R0_fallback_parallel" : "R0_fallback_serial");
        nm_bench_row_num(row, "copies", seq);
        nm_bench_row_num(row, "plain_copies", plain);
        nm_bench_row_num(row, "naive_total_s", naive);
        nm_bench_row_num(row, "cac_fallback_total_s", cac);
        nm_bench_row_num(row, "slowdown", cac / naive);
        nm_bench_progress(b, "R=0 x%u with fallback (%s): %.3fx of naive (%u plain copies)", seq,
                          par ? "push" : "serial", cac / naive, plain);
    }
    /* Temporal redundancy (training epochs): the same R = 0 data `seq` times through a new
     * cache, serial API, with the fallback on and off. */
    double epochs[2] = {NAN, NAN};
    if (!e)
        for (unsigned d = 0; d < nd; d++) make_segment(&r, data + (size_t)d * per, per, 0);
    for (int fb = 0; fb < 2 && !e; fb++) {
        nm_pimc_options o;
        nm_pimc_options_default(&o);
        o.threads = threads;
        o.plain_serial = true;
        if (!fb) o.fallback_threshold = 0;
        nm_pimc *c;
        if ((e = nm_pimc_create(&m.t, &o, &c))) break;
        double naive = 0, cac = 0;
        unsigned plain = 0;
        e = copy_rounds(&m, c, &r, data, nd, per, bufs, lens, seq, false, false, &naive, &cac, &plain);
        nm_pimc_destroy(c);
        epochs[fb] = naive / cac;
        nm_bench_row *row = nm_bench_row_new(b);
        nm_bench_row_str(row, "run", fb ? "epochs_fallback" : "epochs_nofallback");
        nm_bench_row_num(row, "copies", seq);
        nm_bench_row_num(row, "plain_copies", plain);
        nm_bench_row_num(row, "naive_total_s", naive);
        nm_bench_row_num(row, "cac_total_s", cac);
        nm_bench_row_num(row, "speedup", naive / cac);
        nm_bench_progress(b, "same data x%u (epochs), fallback %s: %.2fx (%u plain copies)", seq, fb ? "on" : "off",
                          naive / cac, plain);
    }
    if (!e) {
        nm_bench_summary_num(b, "epochs_speedup_nofallback", epochs[0]);
        nm_bench_summary_num(b, "epochs_speedup_fallback", epochs[1]);
        nm_bench_summary_num(b, "dedup_pct_R1", dedup_R1);
        nm_bench_summary_num(b, "transfer_speedup_R1", sum_R1[0]);
        nm_bench_summary_num(b, "transfer_slowdown_R0", slow_fb[0]);
        nm_bench_summary_num(b, "transfer_speedup_R1_parallel", sum_R1[1]);
        nm_bench_summary_num(b, "transfer_slowdown_R0_parallel", slow_fb[1]);
        nm_bench_summary_num(b, "transfer_slowdown_R0_nofallback", slow_R0_nofb);
    }
out:
    nm_pimc_destroy(cser);
    nm_pimc_destroy(cpar);
    free(data);
    free(bufs);
    free(lens);
    pb_close(&m);
    return e;
}
