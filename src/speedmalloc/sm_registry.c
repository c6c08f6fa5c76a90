/* SpeedMalloc: the address registry (one byte per 4 MiB region: not ours / segment /
 * large objects) and the size-class tables behind free()'s block-start check.
 * (see sm_types.h for the data model, sm_internal.h for what the files share). */
#include "sm_internal.h"

/* ---- size classes -------------------------------------------------------- */
bool sm_classes_init(void)
{
    nm_sizeclasses sc;
    if (nm_sizeclass_init_geometric(&sc, 16, MAX_CLASS_SIZE, 4, 16) != 0 || sc.count > NCLS_MAX) return false;
    sm_g.nclass = sc.count;
    for (unsigned c = 0; c < sc.count; c++) {
        size_t s = sc.size[c];
        sm_g.cls_size[c] = (uint32_t)s;
        size_t ns = s <= 8192 ? 1 : (s * 8 + SLICE_SIZE - 1) / SLICE_SIZE;
        if (ns > 32) ns = 32;
        sm_g.cls_nslices[c] = (uint32_t)ns;
        /* a magazine holds up to 128 KiB: at least 8 small blocks, 2 medium ones, and one
         * block above 64 KiB (idle blocks of those sizes are megabytes of RSS) */
        size_t lcap = (128u << 10) / s, lmin = s <= (16u << 10) ? 8 : s <= (64u << 10) ? 2 : 1;
        lcap = lcap < lmin ? lmin : lcap > 255 ? 255 : lcap;
        sm_g.cls_lcap[c] = (uint32_t)lcap;
        /* a small-block magazine that overflows and then misses doubles, up to MAG_GROW_BYTES
         * (sm_client.c); above MAG_GROW_MAX_SIZE a refill costs little next to using the
         * block, and idle big blocks in magazines cost RSS (the data cube: +9 MiB at 2 threads) */
        size_t lmax = s <= MAG_GROW_MAX_SIZE ? MAG_GROW_BYTES / s : 0;
        sm_g.cls_lcap_max[c] = (uint32_t)(lmax < lcap ? lcap : lmax > LCAP_MAX ? LCAP_MAX : lmax);
        size_t tmax = (128u << 10) / s;
        size_t tmin = s <= (64u << 10) ? 2 : 1;
        sm_g.cls_tmax[c] = (uint32_t)(tmax < tmin ? tmin : tmax > RING ? RING : tmax);
        sm_g.cls_recip[c] = ((1ull << 40) + s - 1) / s;
        sm_g.cls_chk[c].div = UINT64_MAX / s + 1;
        sm_g.cls_chk[c].lim = (uint32_t)((ns * SLICE_SIZE) / s * s); /* capacity * size */
    }
    for (size_t i = 0; i < sizeof sm_g.lut_small; i++) {
        size_t s = i ? i * 16 : 1;
        sm_g.lut_small[i] = (uint8_t)nm_sizeclass_lookup(&sc, s);
    }
    for (size_t i = 0; i < sizeof sm_g.lut_big; i++) {
        size_t s = i ? (i - 1) * 1024 + 1 : 1; /* the smallest size mapping to bucket i */
        sm_g.lut_big[i] = (uint8_t)nm_sizeclass_lookup(&sc, s);
    }
    return true;
}

/* ---- the registry ---------------------------------------------------------- */
void sm_reg_set(uintptr_t p, unsigned v) { STORE_REL(&sm_g.registry[p >> SEG_SHIFT], (uint8_t)v); }
void sm_reg_large_add(uintptr_t p)
{
    unsigned k = sm_g.registry[p >> SEG_SHIFT];
    if (k == 0) k = 2;
    else if (k < 255) k++;
    sm_reg_set(p, k);
}
void sm_reg_large_del(uintptr_t p)
{
    unsigned k = sm_g.registry[p >> SEG_SHIFT];
    if (k == 255) return; /* saturated: stays marked (only weakens invalid-free detection) */
    sm_reg_set(p, k <= 2 ? 0 : k - 1);
}

/* Mapping lengths in geometric steps (4 per doubling), so freed mappings fit later
 * requests of similar size; the unused tail is never touched, so it costs no RSS. */
