/* Shared pieces of the PIM-CACHE suites that run on the emulated machine. */
#ifndef PIMC_BENCH_UTIL_H
#define PIMC_BENCH_UTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nearmem/bench.h"
#include "nearmem/common.h"
#include "nearmem/pim_cache.h"
#include "nearmem/pim_cache_machine.h"

/* A machine with the pim_cache program and a cache region of `region` bytes per DPU. */
typedef struct pb_machine {
    struct dpu_set_t set;
    nm_pimc_transport t;
    unsigned nr;
} pb_machine;

static inline nm_err pb_open(pb_machine *m, unsigned nr, uint64_t region)
{
    dpu_error_t de = dpu_alloc(nr, NULL, &m->set);
    if (de) return nm_fail(NM_ENOMEM, "dpu_alloc(%u): %s", nr, dpu_error_to_string(de));
    if ((de = dpu_load(m->set, NM_PIMC_PROGRAM, NULL))) {
        dpu_free(m->set);
        return nm_fail(NM_ENOENT, "dpu_load: %s", dpu_error_to_string(de));
    }
    m->nr = nr;
    nm_err e = nm_pimc_machine_transport(m->set, 0, region, &m->t);
    if (e) dpu_free(m->set);
    return e;
}

static inline void pb_close(pb_machine *m)
{
    nm_pimc_machine_transport_free(&m->t);
    dpu_free(m->set);
}

/* Modeled device seconds so far (transfers + launches). */
static inline double pb_modeled_s(pb_machine *m)
{
    nm_pim_totals t;
    nm_pim_get_totals(m->set, &t);
    return t.modeled_xfer_seconds + t.modeled_kernel_seconds;
}

/* Content-oblivious copies into the heap at `off`: serial (dpu_copy_to per DPU, the paper's
 * baseline, Sec. 6.8) or parallel (one dpu_push_xfer; needs equal lengths). Returns the
 * modeled seconds, NAN on error. */
static inline double pb_naive(pb_machine *m, const void *const *bufs, size_t len, uint64_t off, bool push)
{
    double t0 = pb_modeled_s(m);
    size_t n = NM_ALIGN_DOWN(len, 8u);
    if (!n) return 0.0;
    if (push) {
        for (unsigned d = 0; d < m->nr; d++) dpu_prepare_xfer(nm_pim_set_dpu(m->set, d), (void *)(uintptr_t)bufs[d]);
        if (dpu_push_xfer(m->set, DPU_XFER_TO_DPU, DPU_MRAM_HEAP_POINTER_NAME, (uint32_t)off, n, DPU_XFER_DEFAULT))
            return NAN;
    } else {
        for (unsigned d = 0; d < m->nr; d++)
            if (dpu_copy_to(nm_pim_set_dpu(m->set, d), DPU_MRAM_HEAP_POINTER_NAME, (uint32_t)off, bufs[d], n))
                return NAN;
    }
    return pb_modeled_s(m) - t0;
}

static inline double pb_median(double *x, unsigned n) { return nm_stats_median(x, n); }

/* The parallel push a UPMEM programmer would write: dpu_prepare_xfer per DPU (host work,
 * measured here) + one dpu_push_xfer (modeled). Its host work precedes the transfer, as
 * a copy's host work does in PIM-CACHE's schedule (docs/pim-cache.md). */
typedef struct pb_cost {
    double host_s, host_crit_s, xfer_s, total_s, total_crit_s;
} pb_cost;

static inline pb_cost pb_push(pb_machine *m, const void *const *bufs, size_t len, uint64_t off)
{
    pb_cost r = {0, 0, 0, 0, 0};
    size_t n = NM_ALIGN_DOWN(len, 8u);
    if (!n) return r;
    uint64_t t0 = nm_now_ns(), c0 = nm_thread_cpu_ns();
    for (unsigned d = 0; d < m->nr; d++) dpu_prepare_xfer(nm_pim_set_dpu(m->set, d), (void *)(uintptr_t)bufs[d]);
    r.host_s = (double)(nm_now_ns() - t0) * 1e-9;
    r.host_crit_s = (double)(nm_thread_cpu_ns() - c0) * 1e-9; /* one thread: its CPU time */
    double x0 = pb_modeled_s(m);
    if (dpu_push_xfer(m->set, DPU_XFER_TO_DPU, DPU_MRAM_HEAP_POINTER_NAME, (uint32_t)off, n, DPU_XFER_DEFAULT)) {
        r.total_s = r.total_crit_s = NAN;
        return r;
    }
    r.xfer_s = pb_modeled_s(m) - x0;
    r.total_s = r.host_s + r.xfer_s;
    r.total_crit_s = r.host_crit_s + r.xfer_s;
    return r;
}

/* A PIM-CACHE copy's cost from its statistics (pim_cache.h, last_*). */
typedef struct pb_cac {
    double total_s, host_s, cpu_s, xfer_s, dedup_pct, sample_pct, clean_pct;
    bool plain;
    double total_crit_s, host_crit_s;
    double dup_pct; /* 1 - new bytes / logical: the redundancy found, lockstep padding left out */
    /* write tracking: faults of the interval before the copy and their cost (the
     * application's, measured per fault on this host), bytes new and sent */
    double write_faults, fault_cost_s, new_bytes, sent_bytes;
} pb_cac;

static inline pb_cac pb_cac_of(const nm_pimc *c)
{
    nm_pimc_stats st;
    nm_pimc_get_stats(c, &st);
    pb_cac r = {st.last_total_ns * 1e-9,
                (double)st.last_host_ns * 1e-9,
                (double)st.last_host_cpu_ns * 1e-9,
                st.last_xfer_modeled_ns * 1e-9,
                st.last_dedup_pct,
                st.last_sample_pct,
                st.last_logical_bytes ? 100.0 * (double)st.last_clean_bytes / (double)st.last_logical_bytes : 0.0,
                st.last_mode == NM_PIMC_MODE_PLAIN,
                st.last_total_crit_ns * 1e-9,
                (double)st.last_host_crit_ns * 1e-9,
                st.last_logical_bytes ? 100.0 * (1.0 - (double)st.last_new_bytes / (double)st.last_logical_bytes) : 0.0,
                (double)st.last_write_faults,
                st.last_fault_cost_ns * 1e-9,
                (double)st.last_new_bytes,
                (double)st.last_sent_bytes};
    return r;
}

/* The machine is shared: record its load with every figure (config keys load_<tag>). */
static inline void pb_record_load(nm_bench *b, const char *tag)
{
    double l[3] = {NAN, NAN, NAN};
    if (getloadavg(l, 3) < 1) return;
    char k[64];
    snprintf(k, sizeof k, "load1_%s", tag);
    nm_bench_config_num(b, k, l[0]);
}

#endif
