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
        /* Pages of 8 blocks up to 32 KiB (one slice up to 8 KiB); from 64 KiB up, one block
         * per page: an empty page goes back to its segment at once, and its slices (still
         * resident) serve the next page of any class, as a span allocator would. With 8
         * blocks (up to 32 slices) per page, a freed medium block stayed resident in a page
         * whose other blocks were live, for its class only: the data cube peaked at 1.2x
         * (1 thread) and 1.6x (2 threads) mimalloc's RSS. */
        size_t ns = s <= 8192 ? 1 : s < (64u << 10) ? (s * 8 + SLICE_SIZE - 1) / SLICE_SIZE : (s + SLICE_SIZE - 1) / SLICE_SIZE;
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
        /* free()'s block-start check (see sm_types.h): mul = ceil(2^64 / s), e = mul * s - 2^64
         * (0 for a power of two, whose pages have no slack), lim = (cap - 1) * e + 1 */
        uint64_t cap = (ns * SLICE_SIZE) / s, mul = UINT64_MAX / s + 1, e = mul * (uint64_t)s;
        sm_g.cls_chk[c + 1].mul = mul;
        sm_g.cls_chk[c + 1].lim = (cap - 1) * e + 1;
    }
    sm_g.cls_chk[0].mul = 1; /* no class: lim 0 rejects every pointer */
    sm_g.cls_chk[0].lim = 0;
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

/* ---- the segment window ------------------------------------------------------
 * free() must not dereference a pointer before it knows it is ours. With a registry
 * alone that costs a range test, a registry byte and a load from the segment's header.
 * Instead, one range of WIN_SIZE bytes of address space is chosen around the first
 * segment (7/8 of it below: the kernel places later mappings below earlier ones) and a
 * map holds one slice word per 64 KiB of it, zero where there is no page of ours. A
 * pointer is then checked with one compare and one load of the map, and the slice
 * word says everything else. Nothing is reserved: whatever else the process maps inside
 * the window has zero slice words, and a segment the kernel places outside it keeps its
 * slice words in its header and is freed through the registry (a slower path). */
void sm_window_init(void)
{
    sm_g.win_base = WIN_OFF;
    sm_g.win_map = sm_os_map(WIN_SLICES * sizeof(uint64_t));
    /* the first segment fixes the window (sm_seg_new), before any client copies it */
    if (sm_g.win_map && !sm_seg_new()) {
        munmap(sm_g.win_map, WIN_SLICES * sizeof(uint64_t));
        sm_g.win_map = NULL;
    }
}
/* The slice words of a new segment at a: in the window map, or in its header. */
uint64_t *sm_window_place(uintptr_t a, uint64_t *own)
{
    if (!sm_g.win_map) return own;
    if (sm_g.win_base == WIN_OFF) {
        uintptr_t below = WIN_SIZE - WIN_SIZE / 8;
        uintptr_t base = a > below + SEG_SIZE ? a - below : SEG_SIZE; /* SEG-aligned; NULL stays outside */
        STORE_REL(&sm_g.win_base, base);
    }
    uintptr_t q = a - sm_g.win_base;
    if (q >= WIN_SIZE) return own;
    return &sm_g.win_map[q >> SLICE_SHIFT];
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
