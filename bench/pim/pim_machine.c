/* Suite pim-machine: the emulated UPMEM machine itself.
 *
 *   tasklets      VA (PrIM's vector add) on one DPU, 1..20 tasklets, and the
 *                 reduction, 1..24: modeled cycles, speedup over one tasklet.
 *                 (VA with 24 tasklets exceeds WRAM: 24 stacks + 48 KiB of buffers.)
 *   mram-read     modeled MRAM read bandwidth, 8..2048-byte DMAs, 1 and 16 tasklets
 *                 (and host ns per emulated DMA: the emulator's own cost).
 *   va-dpus       VA with 16 tasklets over 1..2560 DPUs (weak scaling): modeled
 *                 kernel and transfer time, host wall time of the emulation.
 *   costing       VA at 2560 DPUs x 16 tasklets built with and without the
 *                 compiler's per-block costing (-fno-nearmem-cost), alternately:
 *                 host seconds of the launch and of the whole run (medians).
 *
 * Every modeled figure comes from the cost model (docs/pim-machine.md);
 * host_* figures are wall time on this machine. They are never mixed.
 * Summary: va_modeled_speedup_16_vs_1_tasklets, mram_read_2048_mbps,
 * host_seconds_2560dpu_16t, costing_host_ratio_2560dpu_16t (costed over
 * uncosted host time of the launch; issue 15: within 2x). */
#include <stdlib.h>
#include <string.h>

#include "nearmem/bench.h"
#include "nearmem/common.h"
#include "nearmem/pim/examples.h"

static int fill_va(uint64_t n, int32_t **a, int32_t **b, int32_t **c, uint64_t seed)
{
    *a = malloc(n * 4);
    *b = malloc(n * 4);
    *c = malloc(n * 4);
    if (!*a || !*b || !*c)
        return NM_ENOMEM;
    nm_rng r;
    nm_rng_seed(&r, seed);
    for (uint64_t i = 0; i < n; i++) {
        (*a)[i] = (int32_t)(nm_rng_u64(&r) >> 40);
        (*b)[i] = (int32_t)(nm_rng_u64(&r) >> 40);
    }
    return NM_OK;
}

/* One row of the tasklet sweeps; speedup against the one-tasklet time. */
static void tasklet_row(nm_bench *b, const char *kernel, uint32_t tasklets, const nm_pim_run_report *r, double t1)
{
    nm_bench_row *row = nm_bench_row_new(b);
    nm_bench_row_str(row, "experiment", "tasklets");
    nm_bench_row_str(row, "kernel", kernel);
    nm_bench_row_num(row, "tasklets", tasklets);
    nm_bench_row_num(row, "modeled_cycles", (double)r->max_cycles);
    nm_bench_row_num(row, "modeled_kernel_s", r->modeled_kernel_s);
    nm_bench_row_num(row, "modeled_speedup", t1 / r->modeled_kernel_s);
    nm_bench_row_num(row, "modeled_ipc", (double)r->instructions / (double)r->max_cycles);
    nm_bench_row_num(row, "host_s", r->host_s);
}

static int check_va(const int32_t *a, const int32_t *b, const int32_t *c, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        if (c[i] != a[i] + b[i])
            return NM_ECORRUPT;
    return NM_OK;
}


int nm_suite_pim_machine(nm_bench *b)
{
    const bool quick = nm_bench_quick(b);
    const uint64_t seed = nm_bench_seed(b);
    /* Elements per DPU: the tasklet sweep uses a size where every tasklet
     * streams many blocks; the DPU sweep uses a smaller weak-scaling size. */
    const uint64_t va_one = (uint64_t)nm_bench_param_num(b, "va_elems_one_dpu", quick ? 262144 : 1048576);
    const uint64_t va_per = (uint64_t)nm_bench_param_num(b, "va_elems_per_dpu", quick ? 16384 : 65536);
    const uint32_t threads = nm_bench_threads(b);
    char profile[64];
    snprintf(profile, sizeof(profile), "threads=%u", threads);

    nm_bench_config_num(b, "va_elems_one_dpu", (double)va_one);
    nm_bench_config_num(b, "va_elems_per_dpu", (double)va_per);
    nm_bench_config_num(b, "host_threads", threads);
    nm_pim_cost cost = nm_pim_cost_default();
    nm_bench_config_num(b, "freq_mhz", cost.freq_mhz);
    nm_bench_config_num(b, "revolver_cycles", cost.revolver_cycles);
    nm_bench_config_num(b, "dma_read_alpha", cost.dma_read_alpha);
    nm_bench_config_num(b, "dma_read_beta", cost.dma_read_beta);
    nm_bench_config_num(b, "dma_write_alpha", cost.dma_write_alpha);
    nm_bench_config_str(b, "compute", "costed by nearmem-dpu-cc from the kernels' code (docs/pim-machine.md, Costing)");
    nm_bench_config_str(b, "note", "modeled_* figures come from the cost model; host_* are wall time on this host");
    nm_bench_plot_spec(b,
                       "[{\"title\":\"VA and RED on one DPU (modeled)\",\"x\":\"tasklets\",\"y\":\"modeled_speedup\","
                       "\"series\":\"kernel\",\"kind\":\"line\",\"filter\":{\"experiment\":\"tasklets\"}},"
                       "{\"title\":\"MRAM read bandwidth (modeled)\",\"x\":\"dma_bytes\",\"y\":\"modeled_mbps\","
                       "\"series\":\"tasklets\",\"kind\":\"line\",\"logx\":true,\"filter\":{\"experiment\":\"mram-read\"}},"
                       "{\"title\":\"VA weak scaling, 16 tasklets\",\"x\":\"dpus\",\"y\":\"seconds\",\"series\":\"what\","
                       "\"kind\":\"line\",\"logx\":true,\"logy\":true,\"filter\":{\"experiment\":\"va-dpus\"}}]");

    int rc = NM_OK;
    struct dpu_set_t one;
    if (dpu_alloc(1, profile, &one) != DPU_OK)
        return NM_ENOMEM;

    /* ---- tasklet sweeps on one DPU ---- */
    static const uint32_t tl[] = {1, 2, 4, 8, 11, 12, 16, 20};
    int32_t *a = NULL, *bb = NULL, *c = NULL;
    uint64_t *v = NULL;
    if ((rc = fill_va(va_one, &a, &bb, &c, seed)) != NM_OK)
        goto out;
    double va1 = 0, va16 = 0, red1 = 0;
    for (size_t k = 0; k < NM_ARRAY_LEN(tl); k++) {
        nm_pim_run_report r;
        dpu_error_t e = nm_pim_va_run(one, tl[k], a, bb, c, va_one, &r);
        if (e != DPU_OK || check_va(a, bb, c, va_one) != NM_OK) {
            nm_bench_progress(b, "VA with %u tasklets failed: %s", tl[k], dpu_error_to_string(e));
            rc = NM_EFAULT;
            goto out;
        }
        if (tl[k] == 1)
            va1 = r.modeled_kernel_s;
        if (tl[k] == 16)
            va16 = r.modeled_kernel_s;
        tasklet_row(b, "VA", tl[k], &r, va1);
    }
    v = malloc(va_one * 8);
    if (!v) {
        rc = NM_ENOMEM;
        goto out;
    }
    uint64_t expect = 0;
    for (uint64_t i = 0; i < va_one; i++)
        expect += (v[i] = i * 2654435761u);
    static const uint32_t rtl[] = {1, 2, 4, 8, 11, 12, 16, 20, 24};
    for (size_t k = 0; k < NM_ARRAY_LEN(rtl); k++) {
        nm_pim_run_report r;
        uint64_t sum = 0;
        dpu_error_t e = nm_pim_red_run(one, rtl[k], v, va_one, &sum, &r);
        if (e != DPU_OK || sum != expect) {
            nm_bench_progress(b, "RED with %u tasklets failed: %s", rtl[k], dpu_error_to_string(e));
            rc = NM_EFAULT;
            goto out;
        }
        if (rtl[k] == 1)
            red1 = r.modeled_kernel_s;
        tasklet_row(b, "RED", rtl[k], &r, red1);
    }
    nm_bench_summary_num(b, "va_modeled_speedup_16_vs_1_tasklets", va1 / va16);

    /* ---- MRAM read bandwidth ---- */
    static const uint32_t dma[] = {8, 32, 128, 512, 1024, 2048};
    static const uint32_t dtl[] = {1, 16};
    for (size_t j = 0; j < NM_ARRAY_LEN(dtl); j++)
        for (size_t k = 0; k < NM_ARRAY_LEN(dma); k++) {
            double mbps = 0;
            uint64_t h0 = nm_now_ns();
            dpu_error_t e = nm_pim_mram_stream_run(one, dtl[j], dma[k], 64 * 1024, &mbps);
            double host = nm_ns_to_s(nm_now_ns() - h0);
            double dmas = (double)dtl[j] * (64.0 * 1024 / dma[k]);
            if (e != DPU_OK) {
                rc = NM_EFAULT;
                goto out;
            }
            nm_bench_row *row = nm_bench_row_new(b);
            nm_bench_row_str(row, "experiment", "mram-read");
            nm_bench_row_num(row, "tasklets", dtl[j]);
            nm_bench_row_num(row, "dma_bytes", dma[k]);
            nm_bench_row_num(row, "modeled_mbps", mbps);
            /* Emulator cost: host time per emulated DMA (two context switches each). */
            nm_bench_row_num(row, "host_ns_per_dma", host * 1e9 / dmas);
            if (dma[k] == 2048 && dtl[j] == 16)
                nm_bench_summary_num(b, "mram_read_2048_mbps", mbps);
        }
    dpu_free(one);
    one.sys = NULL;
    free(a);
    free(bb);
    free(c);
    a = bb = c = NULL;

    /* ---- DPU sweep (weak scaling), 16 tasklets ---- */
    static const uint32_t dp[] = {1, 64, 640, 2560};
    for (size_t k = 0; k < NM_ARRAY_LEN(dp); k++) {
        if (quick && dp[k] == 640)
            continue;
        uint64_t n = va_per * dp[k];
        if ((rc = fill_va(n, &a, &bb, &c, seed + k)) != NM_OK)
            goto out;
        struct dpu_set_t set;
        uint64_t t0 = nm_now_ns();
        if (dpu_alloc(dp[k], profile, &set) != DPU_OK) {
            rc = NM_ENOMEM;
            goto out;
        }
        nm_pim_run_report r;
        dpu_error_t e = nm_pim_va_run(set, 16, a, bb, c, n, &r);
        uint64_t resident = nm_pim_mram_resident_bytes(set);
        dpu_free(set);
        double host_total = nm_ns_to_s(nm_now_ns() - t0);
        if (e != DPU_OK || check_va(a, bb, c, n) != NM_OK) {
            rc = NM_EFAULT;
            goto out;
        }
        const char *what[] = {"modeled_kernel_s", "modeled_xfer_s", "host_s"};
        double val[] = {r.modeled_kernel_s, r.modeled_xfer_to_s + r.modeled_xfer_from_s, host_total};
        for (int w = 0; w < 3; w++) {
            nm_bench_row *row = nm_bench_row_new(b);
            nm_bench_row_str(row, "experiment", "va-dpus");
            nm_bench_row_num(row, "dpus", dp[k]);
            nm_bench_row_num(row, "tasklets", 16);
            nm_bench_row_str(row, "what", what[w]);
            nm_bench_row_num(row, "seconds", val[w]);
            nm_bench_row_num(row, "mram_resident_mib", (double)resident / 1048576.0);
        }
        nm_bench_progress(b, "VA %u DPUs x 16 tasklets: modeled kernel %.3g s, modeled transfers %.3g s, host %.2f s",
                          dp[k], r.modeled_kernel_s, r.modeled_xfer_to_s + r.modeled_xfer_from_s, host_total);
        if (dp[k] == 2560) {
            nm_bench_summary_num(b, "host_seconds_2560dpu_16t", host_total);
            nm_bench_summary_num(b, "modeled_kernel_seconds_2560dpu_16t", r.modeled_kernel_s);
            /* ---- costing: the same run, costed and uncosted kernels alternately ---- */
            enum { REPS = 3 };
            int reps = quick ? 1 : REPS;
            double kern[2][REPS], whole[2][REPS];
            for (int rep = 0; rep < reps && rc == NM_OK; rep++)
                for (int cst = 0; cst < 2; cst++) {
                    uint64_t t1 = nm_now_ns();
                    struct dpu_set_t s2;
                    if (dpu_alloc(dp[k], profile, &s2) != DPU_OK) {
                        rc = NM_ENOMEM;
                        break;
                    }
                    nm_pim_run_report r2;
                    memset(c, 0, n * sizeof(*c));
                    dpu_error_t e2 = cst ? nm_pim_va_run(s2, 16, a, bb, c, n, &r2)
                                         : nm_pim_va_run_uncosted(s2, 16, a, bb, c, n, &r2);
                    dpu_free(s2);
                    if (e2 != DPU_OK || check_va(a, bb, c, n) != NM_OK) {
                        rc = NM_EFAULT;
                        break;
                    }
                    kern[cst][rep] = r2.host_kernel_s;
                    whole[cst][rep] = nm_ns_to_s(nm_now_ns() - t1);
                    nm_bench_row *row = nm_bench_row_new(b);
                    nm_bench_row_str(row, "experiment", "costing");
                    nm_bench_row_str(row, "kernel", cst ? "costed" : "uncosted");
                    nm_bench_row_num(row, "dpus", dp[k]);
                    nm_bench_row_num(row, "tasklets", 16);
                    nm_bench_row_num(row, "host_kernel_s", r2.host_kernel_s);
                    nm_bench_row_num(row, "host_s", whole[cst][rep]);
                    nm_bench_row_num(row, "modeled_kernel_s", r2.modeled_kernel_s);
                    nm_bench_row_num(row, "instructions", (double)r2.instructions);
                }
            if (rc != NM_OK)
                goto out;
            double ku = nm_stats_median(kern[0], (size_t)reps), kc = nm_stats_median(kern[1], (size_t)reps);
            double wu = nm_stats_median(whole[0], (size_t)reps), wc = nm_stats_median(whole[1], (size_t)reps);
            nm_bench_summary_num(b, "host_kernel_seconds_2560dpu_16t_uncosted", ku);
            nm_bench_summary_num(b, "host_kernel_seconds_2560dpu_16t_costed", kc);
            nm_bench_summary_num(b, "costing_host_ratio_2560dpu_16t", kc / ku);
            nm_bench_summary_num(b, "costing_host_ratio_whole_2560dpu_16t", wc / wu);
            nm_bench_progress(b, "VA 2560 x 16, host seconds of the launch: costed %.2f, uncosted %.2f (%.2fx); whole run %.2f / %.2f",
                              kc, ku, kc / ku, wc, wu);
        }
        free(a);
        free(bb);
        free(c);
        a = bb = c = NULL;
    }
out:
    if (one.sys)
        dpu_free(one);
    free(a);
    free(bb);
    free(c);
    free(v);
    return rc;
}
