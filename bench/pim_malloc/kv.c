/* pim-malloc-kv: the largest LLM decode batch whose KV cache fits one DPU's
 * heap, static reservation vs PIM-malloc (Sec. III-A case study #2, Fig. 4b).
 *
 * Llama-2-7B: 32 layers x 32 heads x head dim 128, fp16. Attention runs on
 * PIM with one head of one layer per DPU (1024 DPUs per model copy), so one
 * token adds K and V of 128 x 2 B each = 512 B on a DPU: exactly the paper's
 * 512 B allocation block (Sec. V). Static allocation reserves, per request,
 * room for the prompt plus the longest output it may produce (as PAISE does);
 * dynamic allocation grows each request's cache block by block and frees it
 * when the request ends. Output lengths: a seeded long-tailed log-normal
 * draw with ShareGPT's mean output length (338 tokens, as reported by Kwon et
 * al., vLLM, SOSP 2023) and sigma 1, capped at max_output; ShareGPT itself is
 * not available offline. Prompts: 128 tokens (the paper's trace, Sec. V).
 * The batch is the largest prefix of the request stream that decodes to the
 * end without running out of memory (binary search over the batch size).
 * Allocation events are replayed on the host stand-in: no time is modeled. */
#include <math.h>
#include <stdlib.h>

#include "nearmem/common/prng.h"
#include "nearmem/common/stats.h"
#include "pimm_bench.h"

#define KV_TOKEN_BYTES 512u

static nm_err fits(const uint32_t *lens, unsigned n, uint32_t prompt, nm_pimm_variant v, uint32_t heap, bool *ok,
                   pimm_wl_result *r)
{
    nm_err e = pimm_wl_kv(lens, n, prompt, v, 16, heap, r);
    *ok = !e && !r->oom;
    return e;
}

int nm_suite_pim_malloc_kv(nm_bench *b)
{
    bool quick = nm_bench_quick(b);
    uint32_t heap = (uint32_t)nm_bench_param_num(b, "heap_mib", quick ? 8 : 32) << 20;
    uint32_t prompt = (uint32_t)nm_bench_param_num(b, "prompt", 128);
    uint32_t max_out = (uint32_t)nm_bench_param_num(b, "max_output", 2048);
    double mean_out = nm_bench_param_num(b, "mean_output", 338), sigma = nm_bench_param_num(b, "sigma", 1.0);
    double mu = log(mean_out) - sigma * sigma / 2;
    unsigned trials = quick ? 1 : 3;
    nm_bench_config_num(b, "heap_bytes", heap);
    nm_bench_config_num(b, "prompt_tokens", prompt);
    nm_bench_config_num(b, "max_output_tokens", max_out);
    nm_bench_config_num(b, "kv_bytes_per_token_per_dpu", KV_TOKEN_BYTES);
    nm_bench_config_str(b, "output_lengths", "log-normal, mean 338 (ShareGPT), sigma 1, capped at max_output, seeded");
    nm_bench_config_str(b, "model", "event replay on the host stand-in; counts, no time");

    unsigned static_batch = heap / ((prompt + max_out) * KV_TOKEN_BYTES);
    double ratios[3];
    static const nm_pimm_variant vs[] = {NM_PIMM_SW, NM_PIMM_LAZY, NM_PIMM_ADAPTIVE};
    double frag[NM_ARRAY_LEN(vs)] = {0};
    for (unsigned tr = 0; tr < trials; tr++) {
        unsigned cap = static_batch * 64 + 64;
        uint32_t *lens = malloc(cap * sizeof *lens);
        if (!lens) return nm_fail(NM_ENOMEM, "kv lengths");
        nm_rng r;
        nm_rng_seed_stream(&r, nm_bench_seed(b), tr);
        for (unsigned i = 0; i < cap; i++) lens[i] = (uint32_t)NM_MIN((double)max_out, ceil(exp(nm_rng_normal(&r, mu, sigma))));
        for (unsigned vi = 0; vi < NM_ARRAY_LEN(vs); vi++) {
            unsigned lo = 1, hi = cap; /* lo fits, hi does not (checked) */
            bool ok;
            pimm_wl_result res;
            nm_err e = fits(lens, lo, prompt, vs[vi], heap, &ok, &res);
            if (!e && !ok) e = nm_fail(NM_ENOMEM, "pim-malloc-kv: a single request does not fit");
            if (!e) e = fits(lens, hi, prompt, vs[vi], heap, &ok, &res);
            if (!e && ok) e = nm_fail(NM_ERANGE, "pim-malloc-kv: %u requests all fit; raise the cap", hi);
            while (!e && hi - lo > 1) {
                unsigned mid = lo + (hi - lo) / 2;
                e = fits(lens, mid, prompt, vs[vi], heap, &ok, &res);
                if (ok) lo = mid;
                else hi = mid;
            }
            if (e) {
                free(lens);
                return e;
            }
            (void)fits(lens, lo, prompt, vs[vi], heap, &ok, &res);
            double f = (double)res.reserved_peak / (double)res.requested;
            frag[vi] += f / trials;
            nm_bench_row *row = nm_bench_row_new(b);
            nm_bench_row_num(row, "trial", tr);
            nm_bench_row_str(row, "variant", nm_pimm_variant_name(vs[vi]));
            nm_bench_row_num(row, "static_batch", static_batch);
            nm_bench_row_num(row, "dynamic_batch", lo);
            nm_bench_row_num(row, "ratio", (double)lo / static_batch);
            nm_bench_row_num(row, "fragmentation_peak_A_over_U", f);
            if (vs[vi] == NM_PIMM_SW) ratios[tr] = (double)lo / static_batch;
            nm_bench_progress(b, "trial %u %s: static %u, dynamic %u", tr, nm_pimm_variant_name(vs[vi]), static_batch,
                              lo);
        }
        free(lens);
    }
    nm_bench_summary_num(b, "batch_dynamic_over_static", nm_stats_median(ratios, trials));
    nm_bench_summary_num(b, "static_batch", static_batch);
    nm_bench_summary_num(b, "frag_asis_kv", frag[0]);
    nm_bench_summary_num(b, "frag_lazy_kv", frag[1]);
    nm_bench_summary_num(b, "frag_adaptive_kv", frag[2]);
    nm_bench_plot_spec(b, "[{\"title\":\"largest batch (KV cache in one DPU heap)\",\"x\":\"variant\",\"y\":\"dynamic_batch\","
                          "\"kind\":\"bar\",\"filter\":{\"trial\":0}}]");
    return NM_OK;
}
