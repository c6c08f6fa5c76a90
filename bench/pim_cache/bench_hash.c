/* Suite pim-cache-hash (paper Sec. 6.5, Fig. 8; Sec. 6.2): fingerprint throughput of XXH64
 * and XXH3 over block sizes, on 1 thread and on all threads, the full DRM (fingerprint,
 * table lookup/insert, gather) on 1 thread, and memcpy bandwidth on this host beside them.
 * Everything here is real host time; no device is involved. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "nearmem/bench.h"
#include "nearmem/common.h"
#include "nearmem/pim_cache.h"
#include "nearmem/pim_cache_machine.h"

static volatile uint64_t g_sink;

typedef struct job {
    const uint8_t *src;
    uint8_t *dst;
    size_t len, bs;
    nm_pimc_hash h;
    int memcpy_mode;
    uint64_t acc;
    pthread_t th;
} job;

static void *run_job(void *arg)
{
    job *j = arg;
    if (j->memcpy_mode) {
        memcpy(j->dst, j->src, j->len);
        j->acc = j->dst[j->len / 2];
    } else {
        uint64_t acc = 0;
        for (size_t at = 0; at + j->bs <= j->len; at += j->bs) acc ^= nm_pimc_fingerprint(j->h, j->src + at, j->bs);
        j->acc = acc;
    }
    return NULL;
}

/* GB/s (1e9 B/s) of hashing or copying `len` bytes split over `nt` threads; median of reps. */
static double measure(const uint8_t *src, uint8_t *dst, size_t len, size_t bs, nm_pimc_hash h, int mc, unsigned nt,
                      unsigned reps)
{
    double gbps[16];
    if (reps > 16) reps = 16;
    size_t per = (len / nt) / bs * bs;
    for (unsigned r = 0; r < reps; r++) {
        job js[64];
        uint64_t t0 = nm_now_ns();
        for (unsigned i = 0; i < nt; i++) {
            js[i] = (job){src + i * per, dst + i * per, per, bs, h, mc, 0, 0};
            if (i) pthread_create(&js[i].th, NULL, run_job, &js[i]);
        }
        run_job(&js[0]);
        for (unsigned i = 1; i < nt; i++) pthread_join(js[i].th, NULL);
        uint64_t ns = nm_now_ns() - t0;
        for (unsigned i = 0; i < nt; i++) g_sink += js[i].acc;
        gbps[r] = (double)(per * nt) / (double)ns;
    }
    return nm_stats_median(gbps, reps);
}

/* The full DRM on one thread: a cache over a host-memory DPU set (no time model; only the
 * DRM wall time of each copy is used). rep = repeated-block probability. */
static double measure_drm(nm_bench *b, size_t total, unsigned nd, nm_pimc_hash h, unsigned threads, double rep,
                          unsigned reps, uint64_t seed, bool verify)
{
    size_t per = total / nd;
    nm_pimc_memdev *m;
    if (nm_pimc_memdev_create(nd, NM_ALIGN_UP(per * 2 + (1u << 20), 8u), &m)) return NAN;
    nm_pimc_transport t = nm_pimc_memdev_transport(m);
    nm_pimc_options o;
    nm_pimc_options_default(&o);
    o.hash = h;
    o.threads = threads;
    o.verify = verify;
    o.fallback_threshold = 0;
    uint8_t *data = malloc(total);
    const void **bufs = malloc(nd * sizeof *bufs);
    size_t *lens = malloc(nd * sizeof *lens);
    nm_rng r;
    nm_rng_seed(&r, seed);
    uint8_t pool[1024];
    for (size_t i = 0; i < sizeof pool; i++) pool[i] = (uint8_t)nm_rng_u64(&r);
    for (size_t at = 0; at < total; at += 1024) {
        if (nm_rng_double(&r) < rep)
            memcpy(data + at, pool, 1024);
        else
            for (size_t i = 0; i < 1024; i += 8) {
                uint64_t v = nm_rng_u64(&r);
                memcpy(data + at + i, &v, 8);
            }
    }
    for (unsigned d = 0; d < nd; d++) {
        bufs[d] = data + d * per;
        lens[d] = per;
    }
    /* Steady state: one long-lived cache (scratch buffers already grown, as in an
     * application that copies repeatedly); every measured copy starts from an invalidated
     * table so at R = 0 every block is missed and gathered. */
    double gbps[17];
    unsigned n = 0;
    nm_pimc *c;
    if (nm_pimc_create(&t, &o, &c) == NM_OK) {
        for (unsigned i = 0; i <= reps && i < 17; i++) {
            nm_pimc_invalidate_all(c);
            if (nm_pimc_copy(c, 0, bufs, lens) != NM_OK) break;
            nm_pimc_stats st;
            nm_pimc_get_stats(c, &st);
            if (i) gbps[n++] = (double)st.last_logical_bytes / (double)st.last_drm_ns; /* 0: warm-up */
        }
        nm_pimc_destroy(c);
    }
    free(data);
    free(bufs);
    free(lens);
    nm_pimc_memdev_destroy(m);
    (void)b;
    return n ? nm_stats_median(gbps, n) : NAN;
}

int nm_bench_pim_cache_hash(nm_bench *b)
{
    bool quick = nm_bench_quick(b);
    size_t len = (size_t)nm_bench_param_num(b, "mib", quick ? 32 : 256) << 20;
    unsigned reps = quick ? 5 : 9, nt = nm_bench_threads(b);
    if (nt < 1) nt = 1;
    if (nt > 64) nt = 64;
    nm_bench_config_num(b, "buffer_bytes", (double)len);
    nm_bench_config_num(b, "threads_all", nt);
    nm_bench_config_num(b, "reps", reps);
    nm_bench_config_str(b, "time", "real host wall time; the push and serial rates are the machine's model (modeled)");
    nm_bench_config_str(b, "xxhash", "libxxhash 0.8.1 (Debian)");
    nm_bench_plot_spec(b, "[{\"title\":\"fingerprint throughput, 1 thread\",\"x\":\"block_size\",\"y\":\"gbps\","
                          "\"series\":\"hash\",\"filter\":{\"threads\":1,\"kind\":\"hash\"},\"logx\":true,"
                          "\"ylabel\":\"GB/s\"},"
                          "{\"title\":\"fingerprint throughput, all threads\",\"x\":\"block_size\",\"y\":\"gbps\","
                          "\"series\":\"hash\",\"filter\":{\"kind\":\"hash_all\"},\"logx\":true,\"ylabel\":\"GB/s\"}]");
    uint8_t *src = malloc(len), *dst = malloc(len);
    if (!src || !dst) {
        free(src);
        free(dst);
        return nm_fail(NM_ENOMEM, "pim-cache-hash: cannot allocate 2 x %zu bytes", len);
    }
    nm_rng r;
    nm_rng_seed(&r, nm_bench_seed(b));
    for (size_t i = 0; i + 8 <= len; i += 8) {
        uint64_t v = nm_rng_u64(&r);
        memcpy(src + i, &v, 8);
    }
    memset(dst, 1, len); /* fault the pages in before timing memcpy */
    const char *names[2] = {"xxh64", "xxh3"};
    double x64_1k = NAN, x3_1k = NAN;
    for (int h = 0; h < 2; h++)
        for (size_t bs = 256; bs <= 4096; bs *= 2)
            for (int all = 0; all < 2; all++) {
                unsigned th = all ? nt : 1;
                double g = measure(src, dst, len, bs, (nm_pimc_hash)h, 0, th, reps);
                nm_bench_row *row = nm_bench_row_new(b);
                nm_bench_row_str(row, "kind", all ? "hash_all" : "hash");
                nm_bench_row_str(row, "hash", names[h]);
                nm_bench_row_num(row, "block_size", (double)bs);
                nm_bench_row_num(row, "threads", th);
                nm_bench_row_num(row, "gbps", g);
                nm_bench_row_num(row, "gbps_per_thread", g / th);
                if (bs == 1024 && !all) *(h ? &x3_1k : &x64_1k) = g;
                nm_bench_progress(b, "%s bs=%zu threads=%u: %.2f GB/s", names[h], bs, th, g);
            }
    double mc1 = measure(src, dst, len, 4096, 0, 1, 1, reps);
    double mcn = measure(src, dst, len, 4096, 0, 1, nt, reps);
    for (int all = 0; all < 2; all++) {
        nm_bench_row *row = nm_bench_row_new(b);
        nm_bench_row_str(row, "kind", "memcpy");
        nm_bench_row_num(row, "threads", all ? nt : 1);
        nm_bench_row_num(row, "gbps", all ? mcn : mc1);
        nm_bench_row_num(row, "gbps_per_thread", all ? mcn / nt : mc1);
    }
    free(dst);
    free(src);
    /* Full DRM, 64 DPUs: worst case (R = 0, every block missing and gathered) and R = 1. */
    double drm = NAN, drm_all[2] = {NAN, NAN};
    for (int h = 0; h < 2; h++)
        for (int rr = 0; rr < 2; rr++)
            for (int all = 0; all < 2; all++) {
                unsigned th = all ? nt : 1;
                double g = measure_drm(b, len, 64, (nm_pimc_hash)h, th, rr ? 1.0 : 0.0, reps, nm_bench_seed(b) + 1, false);
                nm_bench_row *row = nm_bench_row_new(b);
                nm_bench_row_str(row, "kind", "drm");
                nm_bench_row_str(row, "hash", names[h]);
                nm_bench_row_num(row, "R", rr);
                nm_bench_row_num(row, "threads", th);
                nm_bench_row_num(row, "gbps", g);
                nm_bench_row_num(row, "gbps_per_thread", g / th);
                if (h == 0 && rr == 0 && !all) drm = g;
                if (h == 0 && all) drm_all[rr] = g;
                nm_bench_progress(b, "DRM %s R=%d threads=%u: %.2f GB/s", names[h], rr, th, g);
            }
    /* Verify mode (beyond the paper): the same DRM with byte comparison on every hit and a
     * host shadow of every BRB; its cost relative to the plain DRM, 1 thread, XXH64. */
    for (int rr = 0; rr < 2; rr++) {
        double base = measure_drm(b, len, 64, NM_PIMC_XXH64, 1, rr ? 1.0 : 0.0, reps, nm_bench_seed(b) + 2, false);
        double ver = measure_drm(b, len, 64, NM_PIMC_XXH64, 1, rr ? 1.0 : 0.0, reps, nm_bench_seed(b) + 2, true);
        nm_bench_row *row = nm_bench_row_new(b);
        nm_bench_row_str(row, "kind", "drm_verify");
        nm_bench_row_num(row, "R", rr);
        nm_bench_row_num(row, "gbps", ver);
        nm_bench_row_num(row, "gbps_without_verify", base);
        nm_bench_row_num(row, "time_ratio", base / ver);
        nm_bench_summary_num(b, rr ? "verify_time_ratio_R1" : "verify_time_ratio_R0", base / ver);
        nm_bench_progress(b, "DRM verify R=%d: %.2f GB/s vs %.2f GB/s without (%.2fx time)", rr, ver, base, base / ver);
    }
    /* Both baselines as rates, from the machine's cost model (docs/pim-machine.md): the
     * push moves 4 ranks (256 DPUs) at once, host-limited (rank bandwidth x (1 + growth x
     * 3)), the serial copy one DPU at a time. The
     * DRM must read every byte it fingerprints, so the host's DRM rate on all threads
     * against the push's rate bounds CAC's gain on data nothing is known about. */
    struct dpu_set_t set;
    if (dpu_alloc(256, NULL, &set) == DPU_OK) {
        nm_pim_cost cost;
        if (nm_pim_get_cost(set, &cost) == DPU_OK) {
            double push = cost.bw_rank_to_dpu * (1 + 3 * cost.bw_rank_growth), serial = cost.bw_serial_to_dpu;
            if (cost.bw_host_cap > 0) push = NM_MIN(push, cost.bw_host_cap);
            nm_bench_summary_num(b, "push_gbps_256dpu_modeled", push);
            nm_bench_summary_num(b, "serial_gbps_modeled", serial);
            nm_bench_summary_num(b, "drm_all_threads_over_push_R0", drm_all[0] / push);
            nm_bench_summary_num(b, "drm_all_threads_over_push_R1", drm_all[1] / push);
            nm_bench_summary_num(b, "drm_all_threads_over_serial_R0", drm_all[0] / serial);
        }
        dpu_free(set);
    }
    nm_bench_summary_num(b, "drm_gbps_per_thread", drm);
    nm_bench_summary_num(b, "memcpy_gbps_per_thread", mc1);
    nm_bench_summary_num(b, "drm_over_memcpy", drm / mc1);
    nm_bench_summary_num(b, "xxh64_gbps_1t_1k", x64_1k);
    nm_bench_summary_num(b, "xxh3_gbps_1t_1k", x3_1k);
    return 0;
}
