/* pim-malloc-design-space: Table I / Fig. 5 / Fig. 6 of the paper. The
 * straw-man buddy allocator (20 levels, 32 MiB heap, 32 B grain) with its
 * metadata on the host or in MRAM, executed by the host CPU or by the DPUs;
 * 1..512 DPUs each need 128 allocations of 32 B.
 *
 *   PIM-Metadata/PIM-Executed   launch: every DPU runs 128 pimMalloc
 *   Host-Metadata/Host-Executed host threads run 128 mallocs per DPU on the
 *                               host's copy, then push the pointers (HOST2PIM)
 *   Host-Metadata/PIM-Executed  push the metadata (HOST2PIM), launch, pull it
 *                               back (PIM2HOST) so the host copy stays current
 *   PIM-Metadata/Host-Executed  pull the metadata (PIM2HOST), host threads
 *                               allocate, push metadata and pointers back
 *
 * DPU execution and host<->DPU transfers are modeled by the emulated machine;
 * host execution is measured wall time on this machine (median of repeats).
 * The two kinds are reported in separate columns; their sum is labeled
 * mixed_seconds. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "nearmem/common/stats.h"
#include "nearmem/common/timer.h"
#include "nearmem/pim_malloc_host.h"
#include "pimm_bench.h"

#define ALLOCS 128
#define ASIZE 32

/* ------------------------------------------------------------- the host */

/* The kernel, dpu/design_space.c (plain UPMEM C, one tasklet). */
extern struct dpu_incbin_t nm_dpu_incbin_pimm_design_space;

typedef struct hostalloc {
    nm_pimm_host *mem;
    nm_pimm *h;
    uint32_t ptrs[ALLOCS];
} hostalloc;

typedef struct hwork {
    hostalloc *ha;
    unsigned from, to;
    unsigned fails;
} hwork;

static void *host_exec(void *arg)
{
    hwork *w = arg;
    nm_pimm_host_set_tasklet(0);
    for (unsigned d = w->from; d < w->to; d++)
        for (int i = 0; i < ALLOCS; i++) {
            w->ha[d].ptrs[i] = nm_pimm_malloc(w->ha[d].h, ASIZE);
            if (!w->ha[d].ptrs[i]) w->fails++;
        }
    return NULL;
}

/* parallel_for_pimMalloc (Fig. 5a/c): host threads over DPUs; wall seconds. */
static nm_err parallel_host_malloc(hostalloc *ha, unsigned n, unsigned threads, double *secs)
{
    pthread_t th[64];
    hwork w[64];
    threads = NM_MAX(1u, NM_MIN(threads, NM_MIN(n, 64u)));
    uint64_t t0 = nm_now_ns();
    for (unsigned k = 0; k < threads; k++) {
        w[k] = (hwork){ha, n * k / threads, n * (k + 1) / threads, 0};
        if (pthread_create(&th[k], NULL, host_exec, &w[k])) return nm_fail(NM_EIO, "pthread_create");
    }
    unsigned fails = 0;
    for (unsigned k = 0; k < threads; k++) {
        pthread_join(th[k], NULL);
        fails += w[k].fails;
    }
    *secs = nm_ns_to_s(nm_now_ns() - t0);
    return fails ? nm_fail(NM_ENOMEM, "host-executed allocation failed") : NM_OK;
}

/* Fresh host-side allocators (host memory stands for the host's copy of
 * each DPU's metadata; host execution touches no DPU). */
static nm_err host_allocs(hostalloc *ha, unsigned n, const nm_pimm_config *dcfg)
{
    for (unsigned d = 0; d < n; d++) {
        nm_pimm_config c = *dcfg;
        c.heap_base = 4096;
        c.meta_base = 0;
        uint32_t meta = nm_pimm_mram_meta_bytes(&c);
        nm_err e = nm_pimm_host_create(&ha[d].mem, c.heap_base + c.heap_size + meta);
        if (e) return e;
        nm_pimm_env env;
        nm_pimm_host_env(ha[d].mem, &env);
        nm_pimm_host_set_tasklet(0);
        e = nm_pimm_create(&ha[d].h, &c, &env);
        if (e) return e;
    }
    return NM_OK;
}

static void host_free(hostalloc *ha, unsigned n)
{
    for (unsigned d = 0; d < n; d++) {
        nm_pimm_destroy(ha[d].h);
        nm_pimm_host_destroy(ha[d].mem);
        ha[d].h = NULL;
        ha[d].mem = NULL;
    }
}

static uint8_t *host_meta(hostalloc *a)
{
    return nm_pimm_host_mram(a->mem) + nm_pimm_get_config(a->h)->meta_base;
}

/* Push or pull every DPU's metadata copy; modeled seconds added to *modeled. */
static nm_err xfer_meta(struct dpu_set_t set, hostalloc *ha, uint32_t meta_off, uint32_t meta_bytes, dpu_xfer_t dir,
                        double *modeled)
{
    struct dpu_set_t dpu;
    uint32_t i;
    DPU_FOREACH(set, dpu, i)
    {
        nm_err e = pimm_bench_xfer(dpu_prepare_xfer(dpu, host_meta(&ha[i])));
        if (e) return e;
    }
    nm_err e = pimm_bench_xfer(dpu_push_xfer(set, dir, DPU_MRAM_HEAP_POINTER_NAME, meta_off, meta_bytes, DPU_XFER_DEFAULT));
    nm_pim_xfer_stats xs;
    if (!e) e = pimm_bench_xfer(nm_pim_last_xfer(set, &xs));
    if (!e) *modeled += xs.modeled_seconds;
    return e;
}

static nm_err push_ptrs(struct dpu_set_t set, hostalloc *ha, double *modeled)
{
    struct dpu_set_t dpu;
    uint32_t i;
    DPU_FOREACH(set, dpu, i)
    {
        nm_err e = pimm_bench_xfer(dpu_prepare_xfer(dpu, ha[i].ptrs));
        if (e) return e;
    }
    nm_err e = pimm_bench_xfer(dpu_push_xfer(set, DPU_XFER_TO_DPU, "ds_ptrs", 0, sizeof ha[0].ptrs, DPU_XFER_DEFAULT));
    nm_pim_xfer_stats xs;
    if (!e) e = pimm_bench_xfer(nm_pim_last_xfer(set, &xs));
    if (!e) *modeled += xs.modeled_seconds;
    return e;
}

static nm_err launch(struct dpu_set_t set, uint32_t mode, double *modeled)
{
    nm_err e = pimm_bench_xfer(dpu_broadcast_to(set, "ds_mode", 0, &mode, 4, DPU_XFER_DEFAULT));
    if (!e) e = pimm_bench_xfer(dpu_launch(set, DPU_SYNCHRONOUS));
    nm_pim_launch_stats ls;
    if (!e && modeled) {
        e = pimm_bench_xfer(nm_pim_last_launch(set, &ls));
        if (!e) *modeled += ls.modeled_seconds;
    }
    return e;
}

enum { PM_PE = 0, HM_HE, HM_PE, PM_HE, NDESIGNS };
static const char *const design_names[NDESIGNS] = {"PIM-Metadata/PIM-Executed", "Host-Metadata/Host-Executed",
                                                   "Host-Metadata/PIM-Executed", "PIM-Metadata/Host-Executed"};

/* One design point: modeled and measured seconds for one batch of 128 allocations per DPU. */
static nm_err run_design(int design, unsigned n, unsigned threads, double *modeled, double *host)
{
    struct dpu_set_t set;
    nm_err e = pimm_bench_xfer(dpu_alloc(n, NULL, &set));
    if (e) return e;
    nm_pimm_config cfg;
    nm_pimm_config_default(&cfg, NM_PIMM_STRAWMAN, 0);
    cfg.tasklets = 1;
    hostalloc *ha = calloc(n, sizeof *ha);
    uint32_t zero = 0, meta_off = 0, meta_bytes = nm_pimm_mram_meta_bytes(&cfg);
    *modeled = *host = 0;
    if (!ha) e = nm_fail(NM_ENOMEM, "design space");
    if (!e) e = pimm_bench_xfer(dpu_load_from_incbin(set, &nm_dpu_incbin_pimm_design_space, NULL));
    if (!e) e = pimm_bench_xfer(dpu_broadcast_to(set, "ds_cfg", 0, &cfg, sizeof cfg, DPU_XFER_DEFAULT));
    if (!e) e = pimm_bench_xfer(dpu_broadcast_to(set, "ds_fail", 0, &zero, 4, DPU_XFER_DEFAULT));
    if (!e) e = launch(set, 0, NULL); /* initAllocator on every DPU (not timed) */
    if (!e) e = pimm_bench_xfer(dpu_copy_from(nm_pim_set_dpu(set, 0), "ds_meta_off", 0, &meta_off, 4));
    if (!e && design != PM_PE) e = host_allocs(ha, n, &cfg);
    if (e) goto out;
    switch (design) {
    case PM_PE: e = launch(set, 1, modeled); break;
    case HM_HE:
        e = parallel_host_malloc(ha, n, threads, host);
        if (!e) e = push_ptrs(set, ha, modeled);
        break;
    case HM_PE:
        e = xfer_meta(set, ha, meta_off, meta_bytes, DPU_XFER_TO_DPU, modeled);
        if (!e) e = launch(set, 1, modeled);
        if (!e) e = xfer_meta(set, ha, meta_off, meta_bytes, DPU_XFER_FROM_DPU, modeled);
        break;
    case PM_HE:
        e = xfer_meta(set, ha, meta_off, meta_bytes, DPU_XFER_FROM_DPU, modeled);
        if (!e) e = parallel_host_malloc(ha, n, threads, host);
        if (!e) e = xfer_meta(set, ha, meta_off, meta_bytes, DPU_XFER_TO_DPU, modeled);
        if (!e) e = push_ptrs(set, ha, modeled);
        break;
    }
    if (!e && (design == PM_PE || design == HM_PE)) {
        struct dpu_set_t dpu;
        DPU_FOREACH(set, dpu)
        {
            uint32_t f = 0;
            if (!e) e = pimm_bench_xfer(dpu_copy_from(dpu, "ds_fail", 0, &f, 4));
            if (!e && f) e = nm_fail(NM_ENOMEM, "design space: %u allocations failed on a DPU", f);
        }
    }
    if (!e) e = launch(set, 2, NULL);
out:
    if (ha) host_free(ha, n);
    free(ha);
    dpu_free(set);
    return e;
}

int nm_suite_pim_malloc_design_space(nm_bench *b)
{
    bool quick = nm_bench_quick(b);
    unsigned threads = nm_bench_threads(b), reps = quick ? 3 : 5;
    static const unsigned all[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512}, some[] = {1, 16, 64};
    const unsigned *ns = quick ? some : all;
    unsigned nn = quick ? NM_ARRAY_LEN(some) : NM_ARRAY_LEN(all);
    nm_bench_config_num(b, "allocations_per_dpu", ALLOCS);
    nm_bench_config_num(b, "allocation_bytes", ASIZE);
    nm_bench_config_num(b, "host_threads", threads);
    nm_bench_config_str(b, "allocator", "straw-man buddy, 20 levels, 32 MiB heap, 512 KiB metadata per DPU");
    nm_bench_config_str(b, "time", "modeled_seconds: DPU execution and transfers (emulated machine); "
                                   "host_seconds: measured wall time of host execution (median of repeats); "
                                   "mixed_seconds: their sum");
    double last[NDESIGNS] = {0}, first[NDESIGNS] = {0};
    for (unsigned k = 0; k < nn; k++)
        for (int d = 0; d < NDESIGNS; d++) {
            double mod = 0, hs[8];
            for (unsigned r = 0; r < reps; r++) {
                nm_err e = run_design(d, ns[k], threads, &mod, &hs[r]);
                if (e) return e;
            }
            double host = nm_stats_median(hs, reps), total = mod + host;
            nm_bench_progress(b, "%u DPUs, %s: modeled %.3g s + host %.3g s", ns[k], design_names[d], mod, host);
            nm_bench_row *row = nm_bench_row_new(b);
            nm_bench_row_str(row, "design", design_names[d]);
            nm_bench_row_num(row, "dpus", ns[k]);
            nm_bench_row_num(row, "modeled_seconds", mod);
            nm_bench_row_num(row, "host_seconds", host);
            nm_bench_row_num(row, "mixed_seconds", total);
            nm_bench_row_num(row, "mixed_us_per_allocation", total / ALLOCS * 1e6);
            if (k == 0) first[d] = total;
            last[d] = total;
        }
    int best = 0;
    for (int d = 1; d < NDESIGNS; d++)
        if (last[d] < last[best]) best = d;
    nm_bench_summary_str(b, "fastest_design_at_max_dpus", design_names[best]);
    nm_bench_summary_num(b, "max_dpus", ns[nn - 1]);
    static const char *const keys[NDESIGNS] = {"scaling_pm_pe", "scaling_hm_he", "scaling_hm_pe", "scaling_pm_he"};
    for (int d = 0; d < NDESIGNS; d++) nm_bench_summary_num(b, keys[d], last[d] / first[d]);
    nm_bench_summary_num(b, "pm_pe_speedup_over_next_best_at_max_dpus", NAN);
    double next = INFINITY;
    for (int d = 1; d < NDESIGNS; d++) next = NM_MIN(next, last[d]);
    nm_bench_summary_num(b, "pm_pe_speedup_over_next_best_at_max_dpus", next / last[PM_PE]);
    nm_bench_plot_spec(b, "[{\"title\":\"128 x 32 B allocations per DPU (Fig. 6a)\",\"x\":\"dpus\","
                          "\"y\":\"mixed_us_per_allocation\",\"series\":\"design\",\"kind\":\"line\",\"logx\":true,"
                          "\"logy\":true}]");
    return NM_OK;
}
