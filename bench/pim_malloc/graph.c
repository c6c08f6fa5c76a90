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

#include "pimm_bench.h"

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
            nm_bench_row_str(row, "structure", s == PIMM_WL_LISTS ? "lists" : "vararray");
            nm_bench_row_str(row, "variant", nm_pimm_variant_name(vs[vi]));
            nm_bench_row_num(row, "update_mallocs", (double)r.mallocs);
            nm_bench_row_num(row, "frontend_fraction", r.mallocs ? (double)r.frontend / (double)r.mallocs : NAN);
            nm_bench_row_num(row, "A_bytes", (double)r.reserved);
            nm_bench_row_num(row, "U_bytes", (double)r.requested);
            nm_bench_row_num(row, "fragmentation_A_over_U", frag);
            nm_bench_summary_num(b, keys[s][vi], frag);
        }
    pimm_graph_free(&g);
    nm_bench_plot_spec(b, "[{\"title\":\"fragmentation A/U (Table III)\",\"x\":\"structure\",\"y\":\"fragmentation_A_over_U\","
                          "\"series\":\"variant\",\"kind\":\"bar\"}]");
    return e;
}
