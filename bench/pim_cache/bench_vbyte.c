/* Suite pim-cache-vbyte (paper Sec. 6.4, Fig. 7): uint32 arrays in [0, 2^7) (group 1) and
 * [2^7, 2^14) (group 2; Stream VByte codes 1 byte below 2^8 and 2 bytes above, so its
 * streams are 1.78x smaller, not 2x as with classic VByte) sent to 256 DPUs raw or Stream VByte-encoded (host: libstreamvbyte,
 * real time; DPUs: 16 tasklets decode into MRAM, modeled). Transfers are modeled by the
 * emulated machine. Serial setting (the paper's: dpu_copy_to for both) and parallel setting
 * (dpu_push_xfer for both) are reported; the DPUs' decoded arrays are checked. */
#include "pimc_bench_util.h"
#include "nearmem/pim_cache_dpu.h"

int nm_bench_pim_cache_vbyte(nm_bench *b)
{
    bool quick = nm_bench_quick(b);
    unsigned nd = (unsigned)nm_bench_param_num(b, "dpus", 256);
    size_t nv = (size_t)nm_bench_param_num(b, "ints_per_dpu", quick ? 65536 : 1048576);
    unsigned reps = (unsigned)nm_bench_param_num(b, "reps", quick ? 3 : 5), nt = nm_bench_threads(b);
    if (reps > 15) reps = 15;
    nm_bench_config_num(b, "dpus", nd);
    nm_bench_config_num(b, "ints_per_dpu", (double)nv);
    nm_bench_config_num(b, "encode_threads", nt);
    nm_bench_config_num(b, "decode_tasklets", NM_PIMC_TASKLETS);
    nm_bench_config_str(b, "streamvbyte", "libstreamvbyte 0.4.1 (Debian)");
    nm_bench_config_str(b, "time", "raw = modeled xfer; vbyte = real host encode + modeled xfer + modeled DPU decode");
    nm_bench_plot_spec(b, "[{\"title\":\"VByte, serial API\",\"x\":\"group\",\"y\":[\"raw_serial_s\",\"vbyte_serial_s\"],"
                          "\"kind\":\"bar\",\"ylabel\":\"seconds\"},"
                          "{\"title\":\"VByte, parallel API\",\"x\":\"group\",\"y\":[\"raw_push_s\",\"vbyte_push_s\"],"
                          "\"kind\":\"bar\",\"ylabel\":\"seconds\"}]");
    pb_machine m;
    nm_err e = pb_open(&m, nd, 48u << 20);
    if (e) return e;
    uint32_t *all = malloc(nv * 4 * nd);
    const uint32_t **bufs = malloc(nd * sizeof *bufs);
    size_t *counts = malloc(nd * sizeof *counts);
    uint64_t *sums = malloc(nd * sizeof *sums);
    nm_pimc *cs = NULL, *cp = NULL;
    if (!all || !bufs || !counts || !sums) {
        e = nm_fail(NM_ENOMEM, "pim-cache-vbyte: no memory");
        goto out;
    }
    for (unsigned d = 0; d < nd; d++) {
        bufs[d] = all + (size_t)d * nv;
        counts[d] = nv;
    }
    nm_pimc_options o;
    nm_pimc_options_default(&o);
    o.compress = true;
    o.threads = nt;
    o.plain_serial = true;
    if ((e = nm_pimc_create(&m.t, &o, &cs))) goto out;
    o.plain_serial = false;
    o.parallel = true; /* Stream VByte lengths differ per DPU in group 2: pad to the longest and push */
    if ((e = nm_pimc_create(&m.t, &o, &cp))) goto out;
    nm_rng r;
    nm_rng_seed(&r, nm_bench_seed(b));
    double sp[2][2] = {{NAN, NAN}, {NAN, NAN}};
    for (int g = 0; g < 2 && !e; g++) {
        double rs[15], rp[15], vs[15], vp[15], enc[15], dec[15], ratio = 0;
        for (unsigned k = 0; k < reps && !e; k++) {
            for (size_t i = 0; i < nv * nd; i++)
                all[i] = g == 0 ? (uint32_t)nm_rng_below(&r, 1u << 7) : (uint32_t)nm_rng_range(&r, 1u << 7, (1u << 14) - 1);
            rs[k] = pb_naive(&m, (const void *const *)bufs, nv * 4, 0, false);
            rp[k] = pb_naive(&m, (const void *const *)bufs, nv * 4, 0, true);
            for (int par = 0; par < 2 && !e; par++) {
                nm_pimc *c = par ? cp : cs;
                nm_pimc_invalidate_all(c);
                double t0 = pb_modeled_s(&m);
                e = nm_pimc_copy_u32(c, 0, bufs, counts);
                if (e) break;
                nm_pimc_stats st;
                nm_pimc_get_stats(c, &st);
                nm_pim_launch_stats ls;
                nm_pim_last_launch(m.set, &ls);
                double total = pb_modeled_s(&m) - t0 + (double)st.last_drm_ns * 1e-9;
                (par ? vp : vs)[k] = total;
                if (par) {
                    enc[k] = (double)st.last_drm_ns * 1e-9;
                    dec[k] = ls.modeled_seconds;
                    ratio = (double)st.last_logical_bytes / (double)st.last_sent_bytes;
                }
                if (k == 0) { /* the DPUs' decoded arrays, read through the descriptor */
                    e = nm_pimc_machine_sum(&m.t, (uint32_t)nm_pimc_slot_desc(c, 0), sums);
                    for (unsigned d = 0; d < nd && !e; d++)
                        if (sums[d] != nm_pimc_checksum(bufs[d], nv * 4))
                            e = nm_fail(NM_ECORRUPT, "DPU %u decoded a different array", d);
                }
            }
        }
        if (e) break;
        nm_bench_row *row = nm_bench_row_new(b);
        nm_bench_row_str(row, "group", g ? "g2 [2^7,2^14)" : "g1 [0,2^7)");
        nm_bench_row_num(row, "compression_ratio", ratio);
        nm_bench_row_num(row, "raw_serial_s", pb_median(rs, reps));
        nm_bench_row_num(row, "raw_push_s", pb_median(rp, reps));
        nm_bench_row_num(row, "vbyte_serial_s", pb_median(vs, reps));
        nm_bench_row_num(row, "vbyte_push_s", pb_median(vp, reps));
        nm_bench_row_num(row, "encode_host_s", pb_median(enc, reps));
        nm_bench_row_num(row, "decode_modeled_s", pb_median(dec, reps));
        sp[g][0] = pb_median(rs, reps) / pb_median(vs, reps);
        sp[g][1] = pb_median(rp, reps) / pb_median(vp, reps);
        nm_bench_row_num(row, "speedup_serial", sp[g][0]);
        nm_bench_row_num(row, "speedup_push", sp[g][1]);
        nm_bench_progress(b, "group %d: ratio %.2f, serial %.4fs -> %.4fs (%.2fx); push %.4fs -> %.4fs (%.2fx); "
                             "encode %.4fs decode %.4fs",
                          g + 1, ratio, pb_median(rs, reps), pb_median(vs, reps), sp[g][0], pb_median(rp, reps),
                          pb_median(vp, reps), sp[g][1], pb_median(enc, reps), pb_median(dec, reps));
    }
    if (!e) {
        nm_bench_summary_num(b, "vbyte_speedup_g1", sp[0][0]);
        nm_bench_summary_num(b, "vbyte_speedup_g2", sp[1][0]);
        nm_bench_summary_num(b, "vbyte_speedup_g1_push", sp[0][1]);
        nm_bench_summary_num(b, "vbyte_speedup_g2_push", sp[1][1]);
    }
out:
    nm_pimc_destroy(cs);
    nm_pimc_destroy(cp);
    free(all);
    free(bufs);
    free(counts);
    free(sums);
    pb_close(&m);
    return e;
}
