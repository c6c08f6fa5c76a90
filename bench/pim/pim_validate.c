/* Suite pim-validate: the emulated PIM machine against real UPMEM hardware,
 * figure by figure (issue 15).
 *
 * The hardware figures are bench/pim/reference/prim_reference.json (values in
 * hand, each with its source and its fixed role: calibration, validation or
 * excluded). For each point the suite runs what produced it on the hardware,
 * on the machine, and reports the figure in the same unit:
 *
 *   arith, tasklet_scaling  PrIM's arithmetic-throughput kernel (our plain UPMEM
 *                           C version, validate/dpu/arith.c), 1 DPU, 1 Mi
 *                           elements: the max over tasklets of the cycles spent
 *                           in update() (modeled cycles)
 *   kernel_1dpu             the same launch's modeled kernel time (ms)
 *   xfer_serial             1 DPU, dpu_copy_to/from of 4 and 8 MiB (modeled GB/s)
 *   xfer_parallel_ranks     dpu_push_xfer to 1..40 whole ranks (modeled GB/s),
 *                           on the machine set up with that system's own one-rank
 *                           calibration point (profile rank_to=)
 *   xfer_parallel, xfer_broadcast  64 DPUs, and the PrIM sweeps (1..64 DPUs)
 *   bench_1dpu, bench_60dpu the PrIM-style set (bench/pim/prim), unchanged host
 *                           programs run as child processes at the dataset sizes
 *                           the hardware runs used, 16 tasklets: modeled kernel
 *                           time of one repetition (ms)
 *
 * and the microbenchmarks whose hardware values are not in hand yet
 * (prim_pending.json): MRAM latency and bandwidth vs DMA size, STREAM on MRAM
 * and WRAM vs tasklets, SUB/MUL/DIV throughput, the transfer sweeps. Their rows
 * carry our figure only.
 *
 * Error = (ours - hardware) / hardware. Summary (issue 15): validation_figures
 * (validation points compared), validation_median_abs_err_pct,
 * validation_within_20pct_share, calibration_figures (calibration points
 * compared, never counted as validation); per family the count and median.
 * Every figure here is modeled (emulated DPU cycles, modeled transfer time);
 * host_s columns are wall time on this machine and are never compared.
 *
 * --quick: the microbenchmarks at full size (they are cheap to emulate), the
 * whole benchmarks at smaller sizes: those rows are flagged quick_size and are
 * not compared. */
#include <json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nearmem/bench.h"
#include "nearmem/common.h"
#include "nearmem/pim/host.h"
#include "prim_run.h"
#include "validate/support/validate.h"

#ifndef NEARMEM_REFERENCE_DIR
#define NEARMEM_REFERENCE_DIR "bench/pim/reference"
#endif
#ifndef NEARMEM_VALIDATE_BIN
#define NEARMEM_VALIDATE_BIN "build/bench/pim/validate"
#endif
#ifndef NEARMEM_PRIM_BIN
#define NEARMEM_PRIM_BIN "build/bench/pim/prim"
#endif

typedef struct {
    nm_bench *b;
    bool quick;
    const char *vbin, *pbin;
    double timeout;
    /* one row per figure; the summary is computed from these */
    uint32_t nrows;
    struct fig {
        char id[96], family[32], use[16], unit[32];
        double ours, hw;
        bool compared;
    } *figs;
} vctx;

/* ---- small helpers ------------------------------------------------------- */

static const char *jstr(json_object *o, const char *key)
{
    json_object *v;
    return json_object_object_get_ex(o, key, &v) ? json_object_get_string(v) : NULL;
}

static double jnum(json_object *o, const char *key, double dflt)
{
    json_object *v;
    if (!json_object_object_get_ex(o, key, &v) || json_object_is_type(v, json_type_null))
        return dflt;
    return json_object_get_double(v);
}

static double err_pct(double ours, double hw) { return (ours - hw) / hw * 100.0; }

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, uint32_t n)
{
    if (!n)
        return NAN;
    qsort(v, n, sizeof(double), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Records one figure: a row, and a line of the printed table. */
static void figure(vctx *v, const char *id, const char *family, const char *use, const char *what, double ours,
                   double hw, const char *unit, const char *flag, double host_s)
{
    bool compared = isfinite(ours) && isfinite(hw) && hw != 0 && !flag;
    nm_bench_row *r = nm_bench_row_new(v->b);
    nm_bench_row_str(r, "id", id);
    nm_bench_row_str(r, "family", family);
    nm_bench_row_str(r, "use", use);
    nm_bench_row_str(r, "what", what);
    nm_bench_row_num(r, "ours", ours);
    nm_bench_row_num(r, "hardware", hw);
    nm_bench_row_str(r, "unit", unit);
    nm_bench_row_num(r, "err_pct", compared ? err_pct(ours, hw) : NAN);
    nm_bench_row_num(r, "abs_err_pct", compared ? fabs(err_pct(ours, hw)) : NAN);
    nm_bench_row_str(r, "compared", compared ? "yes" : "no");
    nm_bench_row_str(r, "flag", flag ? flag : "");
    nm_bench_row_num(r, "host_s", host_s);
    char e[32];
    if (compared)
        snprintf(e, sizeof(e), "%+7.1f %%", err_pct(ours, hw));
    else
        snprintf(e, sizeof(e), "%9s", "-");
    nm_bench_progress(v->b, "%-38s %-19s %-11s %12.5g %12.5g %-14s %s%s%s", id, family, use, ours, hw, unit, e,
                      flag ? "  " : "", flag ? flag : "");
    struct fig *f = realloc(v->figs, (v->nrows + 1) * sizeof(*f));
    if (!f)
        return;
    v->figs = f;
    f = &v->figs[v->nrows++];
    memset(f, 0, sizeof(*f));
    snprintf(f->id, sizeof(f->id), "%s", id);
    snprintf(f->family, sizeof(f->family), "%s", family);
    snprintf(f->use, sizeof(f->use), "%s", use);
    snprintf(f->unit, sizeof(f->unit), "%s", unit);
    f->ours = ours;
    f->hw = hw;
    f->compared = compared;
}

/* ---- arithmetic throughput ---------------------------------------------- */

static const char *const type_names[VT_NR_TYPES] = {"INT32", "UINT32", "INT64", "UINT64", "FLOAT", "DOUBLE"};
static const uint32_t type_bytes[VT_NR_TYPES] = {4, 4, 8, 8, 4, 8};
static const char *const op_names[VT_NR_OPS] = {"ADD", "SUB", "MUL", "DIV"};

typedef struct {
    bool done;
    double cycles, kernel_ms, host_s;
} arith_result;

/* Cached per (op, type, tasklets): the ADD points need the cycles and the
 * kernel time of one run. */
static arith_result arith_cache[VT_NR_OPS][VT_NR_TYPES][25];

static int type_index(const char *t)
{
    for (int i = 0; i < VT_NR_TYPES; i++)
        if (t && !strcmp(t, type_names[i]))
            return i;
    return -1;
}

static int op_index(const char *o)
{
    for (int i = 0; i < VT_NR_OPS; i++)
        if (o && !strcmp(o, op_names[i]))
            return i;
    return -1;
}

static arith_result run_arith(vctx *v, int op, int type, uint32_t tasklets, uint32_t elems)
{
    arith_result *c = &arith_cache[op][type][tasklets];
    if (c->done)
        return *c;
    c->done = true;
    c->cycles = c->kernel_ms = c->host_s = NAN;
    char path[1024];
    snprintf(path, sizeof(path), "%s/arith_t%u", v->vbin, tasklets);
    if (access(path, R_OK) != 0) {
        nm_bench_progress(v->b, "arith: %s is not built", path);
        return *c;
    }
    uint64_t t0 = nm_now_ns();
    struct dpu_set_t set;
    if (dpu_alloc(1, NULL, &set) != DPU_OK)
        return *c;
    uint32_t bytes = elems * type_bytes[type];
    /* PrIM's loop bound: whole rounds of NR_TASKLETS blocks. */
    uint8_t *a = malloc(bytes);
    uint64_t *cyc = calloc(tasklets, sizeof(uint64_t));
    if (!a || !cyc || dpu_load(set, path, NULL) != DPU_OK)
        goto out;
    for (uint32_t i = 0; i < elems; i++) {
        /* 1..255: small non-zero operands, the same for every type */
        uint32_t x = 1 + i % 255;
        switch (type) {
        case VT_INT32: ((int32_t *)a)[i] = (int32_t)x; break;
        case VT_UINT32: ((uint32_t *)a)[i] = x; break;
        case VT_INT64: ((int64_t *)a)[i] = x; break;
        case VT_UINT64: ((uint64_t *)a)[i] = x; break;
        case VT_FLOAT: ((float *)a)[i] = (float)x; break;
        default: ((double *)a)[i] = (double)x; break;
        }
    }
    vt_arith_args args = {.kernel = (uint32_t)(op * VT_NR_TYPES + type), .bytes = bytes, .elems = elems};
    if (dpu_copy_to(set, DPU_MRAM_HEAP_POINTER_NAME, 0, a, bytes) != DPU_OK ||
        dpu_copy_to(set, "ARGS", 0, &args, sizeof(args)) != DPU_OK || dpu_launch(set, DPU_SYNCHRONOUS) != DPU_OK ||
        dpu_copy_from(set, "RESULT_CYCLES", 0, cyc, tasklets * sizeof(uint64_t)) != DPU_OK)
        goto out;
    nm_pim_launch_stats ls;
    nm_pim_last_launch(set, &ls);
    uint64_t mx = 0;
    for (uint32_t t = 0; t < tasklets; t++)
        mx = NM_MAX(mx, cyc[t]);
    c->cycles = (double)mx;
    c->kernel_ms = ls.modeled_seconds * 1e3;
out:
    free(a);
    free(cyc);
    dpu_free(set);
    c->host_s = nm_ns_to_s(nm_now_ns() - t0);
    return *c;
}

/* ---- transfers ---------------------------------------------------------- */

/* Modeled GB/s of one transfer of `bytes` per DPU over `dpus` DPUs. kind:
 * 's' serial (dpu_copy_to/from on the set), 'p' parallel push, 'b' broadcast. */
static double xfer_gbs(vctx *v, const char *profile, uint32_t dpus, uint32_t bytes, char kind, bool to_dpu)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/arith_t1", v->vbin); /* any program: its MRAM heap */
    struct dpu_set_t set, dpu;
    double gbs = NAN;
    if (dpu_alloc(dpus, profile, &set) != DPU_OK)
        return NAN;
    /* A push from the DPUs needs a buffer per DPU (host threads copy DPUs in
     * parallel); the other transfers read one shared buffer. */
    bool per_dpu = kind == 'p' && !to_dpu;
    uint8_t *buf = calloc(per_dpu ? dpus : 1, bytes);
    if (!buf || dpu_load(set, path, NULL) != DPU_OK)
        goto out;
    dpu_error_t e;
    if (kind == 's')
        e = to_dpu ? dpu_copy_to(set, DPU_MRAM_HEAP_POINTER_NAME, 0, buf, bytes)
                   : dpu_copy_from(set, DPU_MRAM_HEAP_POINTER_NAME, 0, buf, bytes);
    else if (kind == 'b')
        e = dpu_broadcast_to(set, DPU_MRAM_HEAP_POINTER_NAME, 0, buf, bytes, DPU_XFER_DEFAULT);
    else {
        /* to the DPUs: one shared source buffer moves the same bytes and keeps
         * host memory small (the model counts bytes) */
        uint32_t i;
        DPU_FOREACH(set, dpu, i) dpu_prepare_xfer(dpu, per_dpu ? buf + (size_t)i * bytes : buf);
        e = dpu_push_xfer(set, to_dpu ? DPU_XFER_TO_DPU : DPU_XFER_FROM_DPU, DPU_MRAM_HEAP_POINTER_NAME, 0, bytes,
                          DPU_XFER_DEFAULT);
    }
    nm_pim_xfer_stats x;
    if (e == DPU_OK && nm_pim_last_xfer(set, &x) == DPU_OK && x.modeled_seconds > 0)
        gbs = (double)x.bytes / x.modeled_seconds / 1e9;
out:
    free(buf);
    dpu_free(set);
    return gbs;
}

/* ---- whole benchmarks ---------------------------------------------------- */

/* Smaller datasets for --quick (flagged, not compared). */
static const char *quick_args(const char *name)
{
    static const struct {
        const char *name, *args;
    } q[] = {{"VA", "-n 262144"},       {"RED", "-n 655360"},           {"SCAN-SSA", "-n 393216"},
             {"SEL", "-n 393216"},      {"UNI", "-n 393216"},           {"HST-S", "-n 157286 -b 256"},
             {"HST-L", "-n 157286 -b 256"}, {"BS", "-n 204857 -q 26214"}, {"GEMV", "-m 1024 -n 1024"},
             {"MLP", "-l 3 -n 916"},    {"TRNS", "-M 1536 -m 16 -N 8 -n 8"}};
    for (size_t i = 0; i < NM_ARRAY_LEN(q); i++)
        if (!strcmp(q[i].name, name))
            return q[i].args;
    return NULL;
}

static void bench_point(vctx *v, json_object *p, const char *id, const char *family, const char *use, double hw,
                        const char *unit)
{
    json_object *params = NULL;
    json_object_object_get_ex(p, "params", &params);
    const char *name = jstr(params, "benchmark"), *args = jstr(params, "our_args");
    uint32_t dpus = (uint32_t)jnum(params, "dpus", 1), tasklets = (uint32_t)jnum(params, "tasklets", 16);
    char what[256];
    if (!name || !args) {
        snprintf(what, sizeof(what), "%s: not run (%s)", name ? name : "?", "no counterpart in the set or no data set");
        figure(v, id, family, use, what, NAN, hw, unit, "not run", NAN);
        return;
    }
    const char *flag = NULL;
    if (v->quick) {
        const char *q = quick_args(name);
        if (q)
            args = q;
        flag = "quick_size";
    }
    char full[256];
    snprintf(full, sizeof(full), "%s -w 0 -e 1", args);
    prim_run r;
    int rc = run_prim(v->b, v->pbin, name, tasklets, dpus, full, v->timeout, &r);
    snprintf(what, sizeof(what), "%s %u DPUs x %u tasklets, %s", name, dpus, tasklets, args);
    double ours = rc == NM_OK && r.correct ? r.modeled_kernel_s * 1e3 : NAN;
    if (rc == NM_OK && r.status == 2)
        flag = "not run: does not fit our program"; /* the host refused the size (its message is logged) */
    else if (rc == NM_OK && !r.correct)
        flag = "wrong result";
    figure(v, id, family, use, what, ours, hw, unit, flag, rc == NM_OK ? r.host_s : NAN);
}

/* ---- the reference points ------------------------------------------------- */

static void reference_point(vctx *v, json_object *p)
{
    const char *id = jstr(p, "id"), *family = jstr(p, "family"), *use = jstr(p, "use"), *unit = jstr(p, "unit");
    double hw = jnum(p, "value", NAN);
    json_object *params = NULL;
    json_object_object_get_ex(p, "params", &params);
    if (!id || !family || !use || !unit)
        return;
    char what[256];
    if (!strcmp(family, "arith") || !strcmp(family, "tasklet_scaling") || !strcmp(family, "kernel_1dpu")) {
        int op = op_index(jstr(params, "op")), type = type_index(jstr(params, "type"));
        uint32_t t = (uint32_t)jnum(params, "tasklets", 0), elems = (uint32_t)jnum(params, "elements", 0);
        if (op < 0 || type < 0 || t < 1 || t > 24 || !elems)
            return;
        arith_result a = run_arith(v, op, type, t, elems);
        bool kernel = !strcmp(family, "kernel_1dpu");
        snprintf(what, sizeof(what), "%s %s, %u tasklets, %u elements: %s", op_names[op], type_names[type], t, elems,
                 kernel ? "kernel time" : "max update() cycles");
        figure(v, id, family, use, what, kernel ? a.kernel_ms : a.cycles, hw, unit, NULL, a.host_s);
    } else if (!strcmp(family, "xfer_serial") || !strcmp(family, "xfer_parallel") ||
               !strcmp(family, "xfer_broadcast")) {
        const char *dir = jstr(params, "direction");
        bool to = dir && !strncmp(dir, "CPU", 3);
        uint32_t dpus = (uint32_t)jnum(params, "dpus", 1);
        double bytes = jnum(params, "bytes", jnum(params, "bytes_per_dpu", 0));
        const char *mode = jstr(params, "mode");
        char kind = !strcmp(family, "xfer_serial") ? 's' : !strcmp(family, "xfer_broadcast") ? 'b' : 'p';
        (void)mode;
        /* The model's bandwidth does not depend on the size: large sizes are
         * run at 1 MiB per DPU (same GB/s, bounded host memory). */
        uint32_t run_bytes = (uint32_t)NM_MIN(bytes, (double)(8u << 20));
        if (dpus > 1)
            run_bytes = NM_MIN(run_bytes, 1u << 20);
        uint64_t t0 = nm_now_ns();
        double g = xfer_gbs(v, NULL, dpus, run_bytes, kind, to);
        snprintf(what, sizeof(what), "%s %s, %u DPU(s), %.0f B per DPU (run with %u)", kind == 's' ? "serial" : kind == 'b' ? "broadcast" : "push",
                 to ? "CPU->DPU" : "DPU->CPU", dpus, bytes, run_bytes);
        figure(v, id, family, use, what, g, hw, unit, NULL, nm_ns_to_s(nm_now_ns() - t0));
    } else if (!strcmp(family, "xfer_parallel_ranks")) {
        uint32_t ranks = (uint32_t)jnum(params, "ranks", 1);
        /* That system's own one-rank bandwidth (its calibration point). */
        char profile[64];
        snprintf(profile, sizeof(profile), "rank_to=%.6g", jnum(params, "_rank_to", 0));
        uint64_t t0 = nm_now_ns();
        double g = xfer_gbs(v, profile, ranks * 64, 64u << 10, 'p', true);
        snprintf(what, sizeof(what), "push CPU->DPU, %u rank(s), profile %s (64 KiB per DPU run)", ranks, profile);
        figure(v, id, family, use, what, g, hw, unit, NULL, nm_ns_to_s(nm_now_ns() - t0));
    } else if (!strncmp(family, "bench_", 6)) {
        bench_point(v, p, id, family, use, hw, unit);
    } else {
        figure(v, id, family, use, "no runner for this family", NAN, hw, unit, "not run", NAN);
    }
}

/* ---- microbenchmarks without hardware values yet (prim_pending.json) ----- */

static void pending_arith(vctx *v)
{
    for (int op = VT_SUB; op < VT_NR_OPS; op++)
        for (int type = 0; type < VT_NR_TYPES; type++) {
            arith_result a = run_arith(v, op, type, 16, 1048576);
            char id[96], what[128];
            snprintf(id, sizeof(id), "arith.%s.%s.tl16", op_names[op], type_names[type]);
            for (char *c = id; *c; c++)
                *c = (char)(*c >= 'A' && *c <= 'Z' ? *c + 32 : *c);
            /* MOPS at 350 MHz, as PrIM plots it */
            double mops = 1048576.0 / (a.cycles / 350e6) / 1e6;
            snprintf(what, sizeof(what), "%s %s, 16 tasklets: MOPS (max update() cycles %.4g)", op_names[op],
                     type_names[type], a.cycles);
            bool cal = (op == VT_MUL || op == VT_DIV) && type != VT_INT32 && type != VT_UINT32;
            figure(v, id, "arith", cal ? "calibration" : "validation", what, mops, NAN, "MOPS", "no hardware value",
                   a.host_s);
        }
}

static void pending_mram(vctx *v)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/mram_t1", v->vbin);
    for (int w = 0; w < 2; w++)
        for (uint32_t size = 8; size <= 2048; size *= 2) {
            struct dpu_set_t set;
            double lat = NAN;
            uint64_t t0 = nm_now_ns();
            if (dpu_alloc(1, NULL, &set) != DPU_OK)
                continue;
            vt_mram_args a = {.write = (uint32_t)w, .size = size, .count = 4096};
            uint64_t cyc = 0;
            if (dpu_load(set, path, NULL) == DPU_OK && dpu_copy_to(set, "ARGS", 0, &a, sizeof(a)) == DPU_OK &&
                dpu_launch(set, DPU_SYNCHRONOUS) == DPU_OK &&
                dpu_copy_from(set, "RESULT_CYCLES", 0, &cyc, sizeof(cyc)) == DPU_OK)
                lat = (double)cyc / a.count;
            dpu_free(set);
            double host = nm_ns_to_s(nm_now_ns() - t0);
            char id[96], what[128];
            snprintf(id, sizeof(id), "mram.latency.%s.%u", w ? "write" : "read", size);
            snprintf(what, sizeof(what), "mram_%s of %u B, 1 tasklet: cycles per DMA", w ? "write" : "read", size);
            figure(v, id, "mram_latency", "calibration", what, lat, NAN, "cycles", "no hardware value", host);
            snprintf(id, sizeof(id), "mram.bandwidth.%s.%u", w ? "write" : "read", size);
            snprintf(what, sizeof(what), "mram_%s of %u B, 1 tasklet: MB/s at 350 MHz", w ? "write" : "read", size);
            figure(v, id, "mram_bw", "calibration", what, size / (lat / 350e6) / 1e6, NAN, "MB/s",
                   "no hardware value", host);
        }
}

static void pending_stream(vctx *v)
{
    static const char *const kn[VT_S_NR] = {"copy", "copyw", "add", "scale", "triad"};
    static const uint32_t tl[] = {1, 2, 4, 8, 11, 16};
    for (int wram = 0; wram < 2; wram++)
        for (int k = wram ? VT_S_COPYW : VT_S_COPY_DMA; k < VT_S_NR; k++)
            for (size_t i = 0; i < NM_ARRAY_LEN(tl); i++) {
                char path[1024];
                snprintf(path, sizeof(path), "%s/stream_t%u", v->vbin, tl[i]);
                struct dpu_set_t set;
                uint64_t t0 = nm_now_ns();
                if (dpu_alloc(1, NULL, &set) != DPU_OK)
                    continue;
                /* MRAM: 2 Mi 8-byte elements per array, as PrIM; WRAM: 512 B per
                 * array per tasklet, 64 passes */
                vt_stream_args a = {.kernel = (uint32_t)k, .wram = (uint32_t)wram,
                                    .bytes = wram ? 512u : (uint32_t)(2097152u * 8u), .reps = 64};
                uint64_t cyc = 0;
                double mbs = NAN;
                if (dpu_load(set, path, NULL) == DPU_OK && dpu_copy_to(set, "ARGS", 0, &a, sizeof(a)) == DPU_OK &&
                    dpu_launch(set, DPU_SYNCHRONOUS) == DPU_OK &&
                    dpu_copy_from(set, "RESULT_CYCLES", 0, &cyc, sizeof(cyc)) == DPU_OK && cyc) {
                    /* bytes read + written by the kernel */
                    double per = (k == VT_S_ADD || k == VT_S_TRIAD) ? 3.0 : 2.0;
                    double bytes = wram ? per * a.bytes * tl[i] * a.reps : per * a.bytes;
                    mbs = bytes / ((double)cyc / 350e6) / 1e6;
                }
                dpu_free(set);
                char id[96], what[128];
                snprintf(id, sizeof(id), "%s.stream.%s.tl%u", wram ? "wram" : "mram", kn[k], tl[i]);
                snprintf(what, sizeof(what), "%s STREAM %s, %u tasklets: MB/s", wram ? "WRAM" : "MRAM", kn[k], tl[i]);
                figure(v, id, wram ? "wram" : "mram_bw", "validation", what, mbs, NAN, "MB/s", "no hardware value",
                       nm_ns_to_s(nm_now_ns() - t0));
            }
}

static void pending_xfer(vctx *v)
{
    static const uint32_t dpus[] = {1, 2, 4, 8, 16, 32, 64};
    static const struct {
        char kind;
        bool to;
        const char *name, *family;
    } k[] = {{'s', true, "serial.cpu-dpu", "xfer_serial"},   {'s', false, "serial.dpu-cpu", "xfer_serial"},
             {'p', true, "push.cpu-dpu", "xfer_parallel"},   {'p', false, "push.dpu-cpu", "xfer_parallel"},
             {'b', true, "broadcast.cpu-dpu", "xfer_broadcast"}};
    for (size_t j = 0; j < NM_ARRAY_LEN(k); j++)
        for (size_t i = 0; i < NM_ARRAY_LEN(dpus); i++) {
            char id[96], what[160];
            snprintf(id, sizeof(id), "xfer.%s.%udpus.32MiB", k[j].name, dpus[i]);
            /* the 32 MiB points in hand are reference points, compared above */
            if ((dpus[i] == 1 && k[j].kind == 's') || (dpus[i] == 64 && k[j].kind != 's'))
                continue;
            uint64_t t0 = nm_now_ns();
            double g = xfer_gbs(v, NULL, dpus[i], 1u << 20, k[j].kind, k[j].to);
            snprintf(what, sizeof(what), "%s, %u DPU(s), 32 MiB per DPU (run with 1 MiB: the model is linear in bytes)",
                     k[j].name, dpus[i]);
            figure(v, id, k[j].family, "validation", what, g, NAN, "GB/s (1e9 B/s)", "no hardware value",
                   nm_ns_to_s(nm_now_ns() - t0));
        }
    /* Beyond one rank: the host-side limit (no hardware points but Friesel's push). */
    for (uint32_t ranks = 1; ranks <= 40; ranks = ranks < 32 ? ranks * 2 : 40) {
        char id[96], what[160];
        for (int kk = 0; kk < 3; kk++) {
            char kind = kk == 2 ? 'b' : 'p';
            bool to = kk != 1;
            snprintf(id, sizeof(id), "xfer.%s.ranks%u.model", kk == 0 ? "push.to" : kk == 1 ? "push.from" : "broadcast",
                     ranks);
            uint64_t t0 = nm_now_ns();
            double g = xfer_gbs(v, NULL, ranks * 64, 64u << 10, kind, to);
            snprintf(what, sizeof(what), "PrIM's system (default constants), %u rank(s), 64 KiB per DPU", ranks);
            figure(v, id, "xfer_ranks_model", "model", what, g, NAN, "GB/s (1e9 B/s)", "no hardware value",
                   nm_ns_to_s(nm_now_ns() - t0));
        }
        if (ranks == 40)
            break;
    }
}

/* ---- the suite ------------------------------------------------------------ */

static const char *const families[] = {"arith",         "tasklet_scaling", "kernel_1dpu",    "xfer_serial",
                                       "xfer_parallel", "xfer_broadcast",  "xfer_parallel_ranks", "bench_1dpu",
                                       "bench_60dpu"};

int nm_suite_pim_validate(nm_bench *b)
{
    vctx v = {.b = b,
              .quick = nm_bench_quick(b),
              .vbin = nm_bench_param(b, "validate_bin", NEARMEM_VALIDATE_BIN),
              .pbin = nm_bench_param(b, "prim_bin", NEARMEM_PRIM_BIN),
              .timeout = nm_bench_param_num(b, "timeout_s", 900)};
    const char *refdir = nm_bench_param(b, "reference", NEARMEM_REFERENCE_DIR);
    const char *only = nm_bench_param(b, "only", "all"); /* all | micro | bench */
    char path[1024];
    snprintf(path, sizeof(path), "%s/prim_reference.json", refdir);
    json_object *ref = json_object_from_file(path);
    if (!ref) {
        nm_bench_progress(b, "cannot read %s", path);
        return NM_ENOENT;
    }
    json_object *points = NULL;
    if (!json_object_object_get_ex(ref, "points", &points) || !json_object_is_type(points, json_type_array)) {
        json_object_put(ref);
        return NM_EINVAL;
    }
    size_t n = json_object_array_length(points);
    /* The one-rank push of the multi-rank system: its calibration point sets
     * that system's rank bandwidth for the multi-rank validation points. */
    double friesel_rank = NAN;
    for (size_t i = 0; i < n; i++) {
        json_object *p = json_object_array_get_idx(points, i);
        const char *id = jstr(p, "id");
        if (id && !strcmp(id, "xfer.push.to.ranks1"))
            friesel_rank = jnum(p, "value", NAN);
    }

    nm_bench_config_str(b, "reference", path);
    nm_bench_config_str(b, "validate_bin", v.vbin);
    nm_bench_config_str(b, "prim_bin", v.pbin);
    nm_bench_config_str(b, "note",
                        "ours: modeled figures (emulated DPU cycles, modeled transfer time); hardware: "
                        "prim_reference.json; err = (ours - hardware) / hardware; host_s is wall time here");
    nm_bench_plot_spec(
        b, "[{\"title\":\"arith (ADD, 16 tasklets): max update() cycles\",\"x\":\"id\",\"y\":[\"ours\",\"hardware\"],"
           "\"kind\":\"bar\",\"logy\":true,\"filter\":{\"family\":\"arith\",\"compared\":\"yes\"}},"
           "{\"title\":\"tasklet_scaling: cycles\",\"x\":\"id\",\"y\":[\"ours\",\"hardware\"],\"kind\":\"bar\","
           "\"logy\":true,\"filter\":{\"family\":\"tasklet_scaling\"}},"
           "{\"title\":\"kernel_1dpu: ms\",\"x\":\"id\",\"y\":[\"ours\",\"hardware\"],\"kind\":\"bar\",\"logy\":true,"
           "\"filter\":{\"family\":\"kernel_1dpu\"}},"
           "{\"title\":\"xfer_serial: GB/s\",\"x\":\"id\",\"y\":[\"ours\",\"hardware\"],\"kind\":\"bar\","
           "\"filter\":{\"family\":\"xfer_serial\",\"compared\":\"yes\"}},"
           "{\"title\":\"xfer_parallel, xfer_broadcast (64 DPUs): GB/s\",\"x\":\"id\",\"y\":[\"ours\",\"hardware\"],"
           "\"kind\":\"bar\",\"filter\":{\"use\":\"calibration\",\"unit\":\"GB/s (1e9 B/s)\"}},"
           "{\"title\":\"xfer_parallel_ranks: GB/s\",\"x\":\"id\",\"y\":[\"ours\",\"hardware\"],\"kind\":\"bar\","
           "\"filter\":{\"family\":\"xfer_parallel_ranks\"}},"
           "{\"title\":\"bench_1dpu: kernel ms\",\"x\":\"id\",\"y\":[\"ours\",\"hardware\"],\"kind\":\"bar\","
           "\"logy\":true,\"filter\":{\"family\":\"bench_1dpu\"}},"
           "{\"title\":\"bench_60dpu: kernel ms\",\"x\":\"id\",\"y\":[\"ours\",\"hardware\"],\"kind\":\"bar\","
           "\"logy\":true,\"filter\":{\"family\":\"bench_60dpu\"}}]");
    nm_bench_progress(b, "%-38s %-19s %-11s %12s %12s %-14s %s", "figure", "family", "use", "ours", "hardware", "unit",
                      "error");

    for (size_t i = 0; i < n; i++) {
        json_object *p = json_object_array_get_idx(points, i);
        const char *fam = jstr(p, "family");
        bool bench = fam && !strncmp(fam, "bench_", 6);
        if ((!strcmp(only, "micro") && bench) || (!strcmp(only, "bench") && !bench))
            continue;
        if (fam && !strcmp(fam, "xfer_parallel_ranks")) {
            json_object *params = NULL;
            json_object_object_get_ex(p, "params", &params);
            if (params)
                json_object_object_add(params, "_rank_to", json_object_new_double(friesel_rank));
        }
        reference_point(&v, p);
    }
    if (strcmp(only, "bench")) {
        pending_arith(&v);
        pending_mram(&v);
        pending_stream(&v);
        pending_xfer(&v);
    }
    json_object_put(ref);

    /* Summary: validation and calibration apart, per family. */
    double *errs = calloc(v.nrows + 1, sizeof(double));
    uint32_t nval = 0, ncal = 0, within = 0;
    for (uint32_t i = 0; i < v.nrows; i++) {
        struct fig *f = &v.figs[i];
        if (!f->compared)
            continue;
        if (!strcmp(f->use, "validation")) {
            double e = fabs(err_pct(f->ours, f->hw));
            errs[nval++] = e;
            within += e <= 20.0;
        } else if (!strcmp(f->use, "calibration")) {
            ncal++;
        }
    }
    nm_bench_summary_num(b, "validation_figures", nval);
    nm_bench_summary_num(b, "validation_median_abs_err_pct", median(errs, nval));
    nm_bench_summary_num(b, "validation_within_20pct_share", nval ? (double)within / nval : NAN);
    nm_bench_summary_num(b, "calibration_figures", ncal);
    nm_bench_progress(b, "validation: %u figures, median |error| %.1f %%, %.0f %% within 20 %%; calibration: %u", nval,
                      median(errs, nval), nval ? 100.0 * within / nval : NAN, ncal);
    for (size_t k = 0; k < NM_ARRAY_LEN(families); k++) {
        uint32_t m = 0, cal = 0;
        for (uint32_t i = 0; i < v.nrows; i++) {
            struct fig *f = &v.figs[i];
            if (!f->compared || strcmp(f->family, families[k]))
                continue;
            if (!strcmp(f->use, "validation"))
                errs[m++] = fabs(err_pct(f->ours, f->hw));
            else if (!strcmp(f->use, "calibration"))
                cal++;
        }
        char key[96];
        snprintf(key, sizeof(key), "validation_figures_%s", families[k]);
        nm_bench_summary_num(b, key, m);
        double med = median(errs, m);
        snprintf(key, sizeof(key), "validation_median_abs_err_pct_%s", families[k]);
        nm_bench_summary_num(b, key, med);
        nm_bench_progress(b, "  %-20s validation %3u, median |error| %6.1f %%; calibration %u", families[k], m, med, cal);
    }
    free(errs);
    free(v.figs);
    return NM_OK;
}
