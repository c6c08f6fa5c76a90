/* Demo step: bmem on a small IMI device, with a text map of its banks. */
#include <stdio.h>
#include <string.h>

#include "nearmem/bmem.h"
#include "nearmem/common.h"
#include "nearmem/demo.h"

int nm_demo_bmem(nm_demo *d)
{
    /* 64 rows x 8192 columns x 16 subarrays x 2 banks (2 MiB) */
    bmem_config c = {64, 8192, 16, 2, BMEM_ALGO_FAST, 0};
    bmem_dev *dev;
    nm_err e = bmem_dev_create(&c, &dev);
    if (e) return e;
    bmem_ptr h1, h2, v1, raw, x, y, r;
    /* the paper's example (Sec. 4.3), scaled to this device */
    if ((e = bmem_dev_malloc(dev, 4096, BMEM_HORIZ, &h1)) || (e = bmem_dev_malloc(dev, 2048, BMEM_HORIZ, &h2)) ||
        (e = bmem_dev_malloc(dev, 4, BMEM_VERT, &v1)) || (e = bmem_dev_malloc_raw(dev, 2, 17, &raw)))
        goto out;
    /* AXPY, R = a*X + Y: three vertical 32-bit vectors on the same rows */
    if ((e = bmem_dev_malloc(dev, 4, BMEM_VERT, &x)) ||
        (e = bmem_dev_malloc_near(dev, 4, BMEM_VERT, 0, 0, x, BMEM_NEAR_STRICT, &y)) ||
        (e = bmem_dev_malloc_near(dev, 4, BMEM_VERT, 0, 0, y, BMEM_NEAR_STRICT, &r)))
        goto out;
    if ((e = bmem_dev_free(dev, h2))) goto out;
    nm_err bad = bmem_dev_free(dev, h2);
    bmem_geom g[7];
    bmem_ptr all[7] = {h1, v1, raw, x, y, r, 0};
    const char *names[6] = {"4 KiB horiz", "4 B vert", "raw 2x17", "AXPY X", "AXPY Y", "AXPY R"};
    char line[256];
    int off = 0;
    for (int i = 0; i < 6; i++) {
        if ((e = bmem_dev_geom(dev, all[i], &g[i]))) goto out;
        off += snprintf(line + off, sizeof line - (size_t)off, "%s%s=b%u s%u+%u r%u+%u", off ? ", " : "", names[i],
                        g[i].bank, g[i].sub, g[i].nsubs, g[i].row, g[i].nrows);
        if (i == 2) {
            nm_demo_say(d, "%s", line);
            off = 0;
        }
    }
    nm_demo_say(d, "%s  (bank, first subarray + count, first row + count)", line);
    nm_demo_say(d, "double free of the 2 KiB block -> %s (state unchanged)", nm_errname(bad));
    bmem_stats st;
    bmem_bank_stats bs[2];
    if ((e = bmem_dev_stats(dev, &st, bs))) goto out;
    nm_demo_say(d, "%llu allocations, %llu of %llu cells used, %llu cached (the freed block, parked in this thread's "
                   "cache for the next request of its shape)",
                (unsigned long long)st.allocations, (unsigned long long)st.cells_allocated,
                (unsigned long long)st.cells_total, (unsigned long long)st.cells_cached);
    if ((e = bmem_dev_flush_thread_cache(dev)) || (e = bmem_dev_stats(dev, &st, bs))) goto out;
    nm_demo_say(d, "after bmem_dev_flush_thread_cache: %llu cached; largest free rectangle in bank %u: %u rows x %u subarrays",
                (unsigned long long)st.cells_cached, g[0].bank, bs[g[0].bank].largest_free_rows,
                bs[g[0].bank].largest_free_subs);
    char map[16 * 17 + 1];
    if ((e = bmem_dev_text_map(dev, g[0].bank, 8, map, sizeof map))) goto out;
    nm_demo_say(d, "bank %u map, 16 subarrays across, 8 rows per line (' ' free, '.' '+' '#' fuller):", g[0].bank);
    char *save = NULL;
    for (char *ln = strtok_r(map, "\n", &save); ln; ln = strtok_r(NULL, "\n", &save)) nm_demo_say(d, "  |%s|", ln);
out:
    bmem_dev_destroy(dev);
    return e;
}
