/* Demo step: the common core in a few lines. */
#include <stdint.h>
#include <stdio.h>

#include "nearmem/common.h"
#include "nearmem/demo.h"

int nm_demo_common(nm_demo *d)
{
    uint64_t bm[4];
    nm_bitmap_zero(bm, 256);
    nm_bitmap_set_range(bm, 0, 60);
    nm_bitmap_set_range(bm, 70, 100);
    size_t run = nm_bitmap_find_clear_run(bm, 256, 50, 0);
    nm_demo_say(d, "bitmap: 160 of 256 bits set; first clear run of 50 starts at bit %zu (crosses a word)", run);
    if (run != 170) return nm_fail(NM_ECORRUPT, "bitmap run search gave %zu, expected 170", run);

    nm_sizeclasses sc;
    nm_err e = nm_sizeclass_init_pow2(&sc, 16, 2048);
    if (e) return e;
    nm_demo_say(d, "size classes 16 B..2 KiB (PIM-malloc's): %u classes; 100 B -> class %d (%zu B)", sc.count,
                nm_sizeclass_lookup(&sc, 100), nm_sizeclass_size(&sc, (unsigned)nm_sizeclass_lookup(&sc, 100)));

    nm_rng r;
    nm_rng_seed(&r, nm_demo_seed(d));
    double xs[2000];
    for (int i = 0; i < 2000; i++) xs[i] = (double)nm_rng_poisson(&r, 12.0);
    nm_stats_summary s;
    nm_stats_summarize(xs, 2000, &s);
    nm_demo_say(d, "PRNG (seed %llu): 2000 Poisson(12) draws: mean %.2f, median %.0f, p99 %.0f", nm_demo_seed(d), s.mean,
                s.median, s.p99);
    uint64_t deg[8] = {0};
    for (int i = 0; i < 100000; i++) {
        uint64_t u, v;
        nm_rng_rmat_edge(&r, 3, 0.57, 0.19, 0.19, &u, &v);
        deg[u]++;
    }
    nm_demo_say(d, "R-MAT on 8 vertices, 100k edges: out-degrees %llu %llu %llu %llu %llu %llu %llu %llu (skewed)",
                (unsigned long long)deg[0], (unsigned long long)deg[1], (unsigned long long)deg[2],
                (unsigned long long)deg[3], (unsigned long long)deg[4], (unsigned long long)deg[5],
                (unsigned long long)deg[6], (unsigned long long)deg[7]);
    return 0;
}
