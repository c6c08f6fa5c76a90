/* Suite bmem-map: the allocation map of a device after a mixed workload
 * (horizontal, vertical and raw requests with frees, plus AXPY operand
 * triplets placed with the co-location hint), drawn through bench/plot.py.
 *
 * Each bank is a heatmap of the rows of kind "cell" (bank, row, subarray,
 * owner; owner 0 = free, drawn white), see docs/bmem.md, "Visibility". */
#include <stdio.h>
#include <stdlib.h>

#include "nearmem/bench.h"
#include "nearmem/bmem.h"
#include "nearmem/common.h"

#define MAP_ROWS 128
#define MAP_SUBS 16
#define MAP_BANKS 4

int nm_suite_bmem_map(nm_bench *b)
{
    bmem_config c = {MAP_ROWS, 8192, MAP_SUBS, MAP_BANKS, BMEM_ALGO_FAST, 0};
    bmem_dev *d;
    nm_err e = bmem_dev_create(&c, &d);
    if (e) return e;
    nm_rng rng;
    nm_rng_seed(&rng, nm_bench_seed(b));
    const unsigned ops = (unsigned)nm_bench_param_num(b, "ops", 600);
    nm_bench_config_str(b, "device", "128 rows x 8192 columns x 16 subarrays x 4 banks");
    nm_bench_config_num(b, "ops", ops);
    nm_bench_config_str(b, "workload",
                        "60% allocations (horizontal 16 B-4 KiB, vertical 1-16 B, raw 1-4 x 1-24), 40% frees, "
                        "then 8 AXPY triplets (vertical 4 B, co-located)");

    bmem_ptr live[1024];
    unsigned n = 0;
    for (unsigned i = 0; i < ops; i++) {
        if (n && (nm_rng_below(&rng, 10) < 4 || n == 1024)) {
            unsigned k = (unsigned)nm_rng_below(&rng, n);
            if ((e = bmem_dev_free(d, live[k]))) goto out;
            live[k] = live[--n];
            continue;
        }
        bmem_ptr h;
        uint64_t kind = nm_rng_below(&rng, 3);
        nm_err ae = kind == 0   ? bmem_dev_malloc(d, 16 + nm_rng_below(&rng, 4080), BMEM_HORIZ, &h)
                    : kind == 1 ? bmem_dev_malloc(d, 1 + nm_rng_below(&rng, 16), BMEM_VERT, &h)
                                : bmem_dev_malloc_raw(d, 1 + (unsigned)nm_rng_below(&rng, 4),
                                                      1 + (unsigned)nm_rng_below(&rng, 24), &h);
        if (ae == NM_OK) live[n++] = h;
    }
    unsigned triplets = 0, colocated = 0;
    for (int t = 0; t < 8 && n + 3 <= 1024; t++) {
        bmem_ptr x, y, r;
        if (bmem_dev_malloc(d, 4, BMEM_VERT, &x)) break;
        live[n++] = x;
        if (bmem_dev_malloc_near(d, 4, BMEM_VERT, 0, 0, x, 0, &y)) break;
        live[n++] = y;
        if (bmem_dev_malloc_near(d, 4, BMEM_VERT, 0, 0, y, 0, &r)) break;
        live[n++] = r;
        bmem_geom gx, gy, gr;
        bmem_dev_geom(d, x, &gx);
        bmem_dev_geom(d, y, &gy);
        bmem_dev_geom(d, r, &gr);
        triplets++;
        colocated += gy.bank == gx.bank && gr.bank == gx.bank && gy.row == gx.row && gr.row == gx.row;
    }

    bmem_stats st;
    bmem_bank_stats bs[MAP_BANKS];
    if ((e = bmem_dev_stats(d, &st, bs))) goto out;
    static uint8_t snap[MAP_ROWS * MAP_SUBS];
    char panels[4096];
    int off = snprintf(panels, sizeof panels, "[");
    for (unsigned bank = 0; bank < MAP_BANKS; bank++) {
        if ((e = bmem_dev_snapshot(d, bank, snap, sizeof snap))) goto out;
        for (unsigned s = 0; s < MAP_SUBS; s++) {
            unsigned used_total = 0;
            for (unsigned r = 0; r < MAP_ROWS; r++) used_total += snap[r * MAP_SUBS + s] != 0;
            nm_bench_row *row = nm_bench_row_new(b);
            nm_bench_row_str(row, "kind", "occupancy");
            nm_bench_row_num(row, "bank", bank);
            nm_bench_row_num(row, "subarray", s);
            nm_bench_row_num(row, "allocated_cells", used_total);
        }
        for (unsigned r = 0; r < MAP_ROWS; r++)
            for (unsigned s = 0; s < MAP_SUBS; s++) {
                nm_bench_row *row = nm_bench_row_new(b);
                nm_bench_row_str(row, "kind", "cell");
                nm_bench_row_num(row, "bank", bank);
                nm_bench_row_num(row, "row", r);
                nm_bench_row_num(row, "subarray", s);
                nm_bench_row_num(row, "owner", snap[r * MAP_SUBS + s]);
            }
        off += snprintf(panels + off, sizeof panels - (size_t)off,
                        "{\"title\":\"bank %u: owner of each (row, subarray) cell (largest free %u x %u)\","
                        "\"kind\":\"heatmap\",\"x\":\"subarray\",\"y\":\"row\",\"value\":\"owner\",\"mask\":0,"
                        "\"filter\":{\"kind\":\"cell\",\"bank\":%u}},",
                        bank, bs[bank].largest_free_rows, bs[bank].largest_free_subs, bank);
        char key[64], map[MAP_SUBS * 40];
        snprintf(key, sizeof key, "text_map_bank%u", bank);
        if ((e = bmem_dev_text_map(d, bank, 32, map, sizeof map))) goto out;
        nm_bench_config_str(b, key, map);
        snprintf(key, sizeof key, "largest_free_cells_bank%u", bank);
        nm_bench_summary_num(b, key, (double)bs[bank].largest_free_rows * bs[bank].largest_free_subs);
    }
    snprintf(panels + off, sizeof panels - (size_t)off,
             "{\"title\":\"allocated cells per subarray\",\"x\":\"subarray\",\"y\":\"allocated_cells\","
             "\"series\":\"bank\",\"kind\":\"bar\",\"filter\":{\"kind\":\"occupancy\"}}]");
    nm_bench_plot_spec(b, panels);
    nm_bench_summary_num(b, "allocated_pct", 100.0 * (double)st.cells_allocated / (double)st.cells_total);
    nm_bench_summary_num(b, "allocations", (double)st.allocations);
    /* freed rectangles parked in this thread's cache: still claimed, drawn
     * with their own label (BMEM_SNAP_CACHED) */
    nm_bench_summary_num(b, "cached_cells", (double)st.cells_cached);
    nm_bench_summary_num(b, "axpy_triplets", triplets);
    nm_bench_summary_num(b, "axpy_colocated_pct", triplets ? 100.0 * colocated / triplets : 0);
    nm_bench_progress(b, "%llu allocations, %.1f%% of cells allocated, %u/%u AXPY triplets co-located",
                      (unsigned long long)st.allocations, 100.0 * (double)st.cells_allocated / (double)st.cells_total,
                      colocated, triplets);
out:
    bmem_dev_destroy(d);
    return e;
}
