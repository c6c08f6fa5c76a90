/* pim-malloc-graph: dynamic graph update (Sec. III-A case study #1, Sec. V,
 * VI-B, Table III) on a seeded power-law graph of loc-gowalla's size.
 *
 * This part replays the allocation sequence of one DPU's partition (the one
 * with the median edge count) (64 DPUs,
 * 16 tasklets) on the host stand-in: thread-cache share and fragmentation A/U
 * of an array of linked lists (256 B elements) and of variable-size arrays
 * (power-of-two, 64 B up), for PIM-malloc as-is (pre-populated), lazy and
 * adaptive. A = bytes the allocator took from its heap, U = bytes the data
 * structure holds, both at the end of the update (Table III). */
#include <math.h>
#include <stdlib.h>

#include "pimm_bench.h"

#ifdef PIMM_WITH_MACHINE
/* The update timed on the emulated machine (graph_update.c): partitions
 * 0..nparts-1 of ndpus, 16 tasklets each; kernel time is the slowest DPU's. */
static nm_err graph_timed(nm_bench *b, double scale, unsigned ndpus)
{
    unsigned nparts = (unsigned)nm_bench_param_num(b, "timed_dpus", nm_bench_quick(b) ? 8 : 16);
    if (nparts > ndpus) nparts = ndpus;
    pimm_graph *parts = calloc(nparts, sizeof *parts);
    if (!parts) return nm_fail(NM_ENOMEM, "partitions");
    nm_err e = pimm_graph_make_all(parts, scale, ndpus, nparts, nm_bench_seed(b));
    nm_bench_config_num(b, "timed_dpus", nparts);
    double t_csr = 0, t[2][3] = {{0}};
    static const nm_pimm_variant vs[] = {NM_PIMM_STRAWMAN, NM_PIMM_SW, NM_PIMM_HWSW};
    if (!e) {
        nm_bench_progress(b, "CSR update on %u DPUs", nparts);
        e = pimm_graph_update_time(parts, nparts, 0, NM_PIMM_SW, 0, &t_csr, NULL, NULL);
    }
    if (!e) {
        nm_bench_row *row = nm_bench_row_new(b);
        nm_bench_row_str(row, "experiment", "update_time");
        nm_bench_row_str(row, "structure", "csr");
        nm_bench_row_str(row, "variant", "static");
        nm_bench_row_num(row, "modeled_seconds", t_csr);
    }
    for (int s = 0; s < 2 && !e; s++)
        for (unsigned vi = 0; vi < NM_ARRAY_LEN(vs) && !e; vi++) {
            nm_pimm_stats st;
            nm_bench_progress(b, "%s update with %s", s ? "array" : "list", nm_pimm_variant_name(vs[vi]));
            uint64_t hist[32];
            e = pimm_graph_update_time(parts, nparts, s + 1, vs[vi], 0, &t[s][vi], &st, hist);
            if (e) break;
            nm_bench_row *row = nm_bench_row_new(b);
            nm_bench_row_str(row, "experiment", "update_time");
            nm_bench_row_str(row, "structure", s ? "vararray" : "lists");
            nm_bench_row_str(row, "variant", nm_pimm_variant_name(vs[vi]));
            nm_bench_row_num(row, "modeled_seconds", t[s][vi]);
            nm_bench_row_num(row, "speedup_over_csr", t_csr / t[s][vi]);
            nm_bench_row_num(row, "dpu0_mallocs", (double)st.mallocs);
            /* latency distribution over every DPU and tasklet (Fig. 17b): percentiles
             * at bucket resolution (upper bound of the bucket, cycles) */
            uint64_t total = 0, acc = 0;
            for (int k = 0; k < 32; k++) total += hist[k];
            double pct[] = {50, 90, 99};
            const char *names[] = {"malloc_p50_cycles_le", "malloc_p90_cycles_le", "malloc_p99_cycles_le"};
            for (int q = 0, k = 0; q < 3 && total; q++) {
                while (k < 31 && (double)(acc + hist[k]) < pct[q] / 100.0 * (double)total) acc += hist[k++];
                nm_bench_row_num(row, names[q], (double)(2ull << k));
            }
        }
    /* A cheaper static baseline: rebuild the CSR once per batch of new edges */
    static const uint32_t batches[] = {64, 512, 0};
    for (unsigned k = 0; k < NM_ARRAY_LEN(batches) && !e; k++) {
        double tb = 0;
        nm_bench_progress(b, "CSR rebuilt per batch of %u", batches[k]);
        e = pimm_graph_update_time(parts, nparts, 3, NM_PIMM_SW, batches[k], &tb, NULL, NULL);
        if (e) break;
        nm_bench_row *row = nm_bench_row_new(b);
        nm_bench_row_str(row, "experiment", "update_time");
        static const char *const names[] = {"csr_rebuild_64", "csr_rebuild_512", "csr_rebuild_all"};
        nm_bench_row_str(row, "structure", names[k]);
        nm_bench_row_str(row, "variant", "static");
        nm_bench_row_num(row, "batch_edges", batches[k]);
        nm_bench_row_num(row, "modeled_seconds", tb);
        nm_bench_row_num(row, "lists_hwsw_speedup_over_this", tb / t[0][2]);
        nm_bench_row_num(row, "vararray_hwsw_speedup_over_this", tb / t[1][2]);
        static const char *const kl[] = {"speedup_lists_vs_csr_rebuild_batch64", "speedup_lists_vs_csr_rebuild_batch512",
                                         "speedup_lists_vs_csr_rebuild_once"};
        static const char *const ka[] = {"speedup_vararray_vs_csr_rebuild_batch64",
                                         "speedup_vararray_vs_csr_rebuild_batch512", "speedup_vararray_vs_csr_rebuild_once"};
        nm_bench_summary_num(b, kl[k], tb / t[0][2]);
        nm_bench_summary_num(b, ka[k], tb / t[1][2]);
    }
    for (unsigned p = 0; p < nparts; p++) pimm_graph_free(&parts[p]);
    free(parts);
    if (e) return e;
    nm_bench_summary_num(b, "speedup_lists_vs_csr", t_csr / t[0][2]); /* HW/SW, as Sec. VI-B */
    nm_bench_summary_num(b, "speedup_vararray_vs_csr", t_csr / t[1][2]);
    nm_bench_summary_num(b, "speedup_lists_sw_vs_csr", t_csr / t[0][1]);
    nm_bench_summary_num(b, "speedup_lists_strawman_vs_csr", t_csr / t[0][0]);
    nm_bench_summary_num(b, "speedup_vararray_sw_vs_csr", t_csr / t[1][1]);
    nm_bench_summary_num(b, "speedup_vararray_strawman_vs_csr", t_csr / t[1][0]);
    return NM_OK;
}
#endif

int nm_suite_pim_malloc_graph(nm_bench *b)
{
    double scale = nm_bench_param_num(b, "scale", nm_bench_quick(b) ? 0.25 : 1.0);
    unsigned ndpus = (unsigned)nm_bench_param_num(b, "dpus", 64), tasklets = 16;
    nm_bench_config_num(b, "scale", scale);
    nm_bench_config_num(b, "dpus", ndpus);
    nm_bench_config_num(b, "tasklets", tasklets);
    nm_bench_config_str(b, "graph", "R-MAT (0.57, 0.19, 0.19) with loc-gowalla's node and edge counts x scale");
    nm_bench_config_str(b, "model", "event replay of the median-load DPU's partition on the host stand-in; counts, no time");
    pimm_graph g;
    nm_err e = pimm_graph_make(&g, scale, ndpus, PIMM_GRAPH_MEDIAN_DPU, nm_bench_seed(b));
    if (e) return e;
    nm_bench_config_num(b, "dpu", g.dpu);
    nm_bench_config_num(b, "dpu_old_edges", g.n_old);
    nm_bench_config_num(b, "dpu_new_edges", g.n_new);
    static const nm_pimm_variant vs[] = {NM_PIMM_SW, NM_PIMM_LAZY, NM_PIMM_ADAPTIVE};
    static const char *const keys[2][3] = {{"frag_asis_lists", "frag_lazy_lists", "frag_adaptive_lists"},
                                           {"frag_asis_vararray", "frag_lazy_vararray", "frag_adaptive_vararray"}};
    for (int s = 0; s < 2 && !e; s++)
        for (unsigned vi = 0; vi < NM_ARRAY_LEN(vs) && !e; vi++) {
            pimm_wl_result r;
            e = pimm_wl_graph(&g, s, vs[vi], tasklets, &r);
            if (e) break;
            double frag = (double)r.reserved / (double)r.requested;
            nm_bench_row *row = nm_bench_row_new(b);
            nm_bench_row_str(row, "experiment", "fragmentation");
            nm_bench_row_str(row, "structure", s == PIMM_WL_LISTS ? "lists" : "vararray");
            nm_bench_row_str(row, "variant", nm_pimm_variant_name(vs[vi]));
            nm_bench_row_num(row, "update_mallocs", (double)r.mallocs);
            nm_bench_row_num(row, "frontend_fraction", r.mallocs ? (double)r.frontend / (double)r.mallocs : NAN);
            nm_bench_row_num(row, "A_bytes", (double)r.reserved);
            nm_bench_row_num(row, "U_bytes", (double)r.requested);
            nm_bench_row_num(row, "fragmentation_A_over_U", frag);
            nm_bench_row_num(row, "allocator_wram_bytes", r.wram_bytes);
            nm_bench_row_num(row, "allocator_mram_meta_bytes", r.mram_meta_bytes);
            nm_bench_summary_num(b, keys[s][vi], frag);
        }
    pimm_graph_free(&g);
    if (e) return e;
#ifdef PIMM_WITH_MACHINE
    e = graph_timed(b, scale, ndpus);
#else
    nm_bench_config_str(b, "timed_update", "not built: needs the emulated PIM machine (src/pim)");
#endif
    nm_bench_plot_spec(b, "[{\"title\":\"fragmentation A/U (Table III)\",\"x\":\"structure\",\"y\":\"fragmentation_A_over_U\","
                          "\"series\":\"variant\",\"kind\":\"bar\",\"filter\":{\"experiment\":\"fragmentation\"}},"
                          "{\"title\":\"graph update, modeled seconds\",\"x\":\"structure\",\"y\":\"modeled_seconds\","
                          "\"series\":\"variant\",\"kind\":\"bar\",\"logy\":true,\"filter\":{\"experiment\":\"update_time\"}}]");
    return e;
}
