/* PIM-malloc on a host DPU: every variant's basic behaviour and bad input. */
#include <string.h>

#include "nm_test.h"
#include "pimm_test_util.h"
#include "nearmem/common/prng.h"
#include "nearmem/common/util.h"

#define NV NM_PIMM_VARIANT_COUNT

static void free_ok(tdpu *d, uint32_t p) { assert_int_equal(nm_pimm_free(d->h, p), NM_OK); }

static void heap_empty(tdpu *d, unsigned tasklets)
{
    for (unsigned t = 0; t < tasklets; t++) {
        nm_pimm_host_set_tasklet(t);
        nm_pimm_release_cache(d->h);
    }
    nm_pimm_host_set_tasklet(0);
    nm_pimm_stats s;
    nm_pimm_get_stats(d->h, &s);
    assert_int_equal(s.reserved, 0);
    uint64_t fr = 0;
    assert_int_equal(nm_pimm_check(d->h, &fr), NM_OK);
    assert_int_equal(fr, d->heap_size);
}

static void test_sizes_and_alignment(void **st)
{
    (void)st;
    for (int v = 0; v < NV; v++) {
        tdpu d;
        assert_int_equal(tdpu_open(&d, (nm_pimm_variant)v, 1u << 20, 4), 0);
        assert_int_equal(nm_pimm_malloc(d.h, 0), 0);
        assert_int_equal(nm_pimm_malloc(d.h, (1u << 20) + 1), 0);
        assert_int_equal(nm_pimm_malloc(d.h, UINT32_MAX), 0);
        uint32_t sizes[] = {1, 8, 15, 16, 17, 31, 32, 100, 256, 1000, 2048, 2049, 4096, 5000, 65536};
        uint32_t p[NM_ARRAY_LEN(sizes)];
        uint8_t *mram = nm_pimm_host_mram(d.host);
        for (unsigned i = 0; i < NM_ARRAY_LEN(sizes); i++) {
            p[i] = nm_pimm_malloc(d.h, sizes[i]);
            assert_int_not_equal(p[i], 0);
            assert_int_equal(p[i] % 8, 0);
            assert_true(p[i] >= d.heap_base && p[i] + sizes[i] <= d.heap_base + d.heap_size);
            memset(mram + p[i], (int)(i + 1), sizes[i]);
        }
        for (unsigned i = 0; i < NM_ARRAY_LEN(sizes); i++)
            for (unsigned j = 0; j < sizes[i]; j++) assert_int_equal(mram[p[i] + j], (i + 1) & 0xff);
        for (unsigned i = 0; i < NM_ARRAY_LEN(sizes); i++) free_ok(&d, p[i]);
        nm_pimm_stats s;
        nm_pimm_get_stats(d.h, &s);
        assert_int_equal(s.fail_size, 3);
        assert_int_equal(s.frees, NM_ARRAY_LEN(sizes));
        heap_empty(&d, 4);
        assert_int_equal(tdpu_violations(&d), 0);
        tdpu_close(&d);
    }
}

/* Sub-blocks of one class come from the same 4 KiB block, in order. */
static void test_thread_cache_layout(void **st)
{
    (void)st;
    tdpu d;
    assert_int_equal(tdpu_open(&d, NM_PIMM_SW, 1u << 20, 1), 0);
    uint32_t a = nm_pimm_malloc(d.h, 32), b = nm_pimm_malloc(d.h, 32);
    assert_int_equal(b, a + 32);
    assert_int_equal(a % 4096, 0);
    nm_pimm_stats s;
    nm_pimm_get_stats(d.h, &s);
    assert_int_equal(s.tc_hits, 2); /* pre-populated: no backend call */
    assert_int_equal(s.tc_misses, 0);
    /* 128 more 32 B blocks fill the block and need exactly one refill */
    for (int i = 0; i < 128; i++) assert_int_not_equal(nm_pimm_malloc(d.h, 32), 0);
    nm_pimm_get_stats(d.h, &s);
    assert_int_equal(s.tc_misses, 1);
    tdpu_close(&d);

    /* lazy: the first allocation of a class goes to the backend */
    assert_int_equal(tdpu_open(&d, NM_PIMM_LAZY, 1u << 20, 1), 0);
    nm_pimm_get_stats(d.h, &s);
    assert_int_equal(s.reserved, 0);
    assert_int_not_equal(nm_pimm_malloc(d.h, 32), 0);
    nm_pimm_get_stats(d.h, &s);
    assert_int_equal(s.tc_misses, 1);
    assert_int_equal(s.reserved, 4096);
    tdpu_close(&d);

    /* pre-population as a switch: hwsw without it, lazy with it */
    nm_pimm_config cfg;
    nm_pimm_config_default(&cfg, NM_PIMM_HWSW, 4096);
    cfg.heap_size = 1u << 20;
    cfg.tasklets = 2;
    cfg.prepopulate = NM_PIMM_PREPOP_OFF;
    assert_int_equal(tdpu_open_cfg(&d, &cfg), 0);
    nm_pimm_get_stats(d.h, &s);
    assert_int_equal(s.reserved, 0);
    tdpu_close(&d);
    cfg.variant = NM_PIMM_LAZY;
    cfg.prepopulate = NM_PIMM_PREPOP_ON;
    assert_int_equal(tdpu_open_cfg(&d, &cfg), 0);
    nm_pimm_get_stats(d.h, &s);
    assert_int_equal(s.reserved, 2 * 8 * 4096);
    tdpu_close(&d);
    cfg.prepopulate = 7;
    assert_int_not_equal(tdpu_open_cfg(&d, &cfg), 0);

    /* adaptive: one untyped spare per tasklet serves the first miss */
    assert_int_equal(tdpu_open(&d, NM_PIMM_ADAPTIVE, 1u << 20, 2), 0);
    nm_pimm_get_stats(d.h, &s);
    assert_int_equal(s.reserved, 2 * 4096);
    assert_int_not_equal(nm_pimm_malloc(d.h, 64), 0);
    assert_int_not_equal(nm_pimm_malloc(d.h, 128), 0);
    nm_pimm_get_stats(d.h, &s);
    assert_int_equal(s.tc_spare, 1);
    assert_int_equal(s.tc_misses, 1);
    /* the block that was tasklet 0's spare (never DMA'd): tasklet 1 frees into it */
    uint32_t q = nm_pimm_malloc(d.h, 64);
    nm_pimm_host_set_tasklet(1);
    assert_int_equal(nm_pimm_free(d.h, q), NM_OK);
    assert_int_equal(nm_pimm_free(d.h, q), NM_EDOUBLEFREE);
    nm_pimm_host_set_tasklet(0);
    assert_int_equal(nm_pimm_malloc(d.h, 64), q); /* applied at the owner's next malloc */
    tdpu_close(&d);
}

static void test_bad_frees(void **st)
{
    (void)st;
    for (int v = 0; v < NV; v++) {
        tdpu d;
        assert_int_equal(tdpu_open(&d, (nm_pimm_variant)v, 1u << 20, 2), 0);
        uint32_t small = nm_pimm_malloc(d.h, 48), big = nm_pimm_malloc(d.h, 20000);
        assert_int_not_equal(small, 0);
        assert_int_not_equal(big, 0);
        assert_int_equal(nm_pimm_free(d.h, 0), NM_OK);
        assert_int_equal(nm_pimm_free(d.h, 8), NM_EBADFREE);
        assert_int_equal(nm_pimm_free(d.h, d.heap_base + d.heap_size), NM_EBADFREE);
        assert_int_equal(nm_pimm_free(d.h, small + 4), NM_EALIGN);
        assert_int_equal(nm_pimm_free(d.h, big + 8), NM_EBADFREE);    /* interior */
        assert_int_equal(nm_pimm_free(d.h, big + 4096), NM_EBADFREE); /* interior, block-aligned */
        /* a never-allocated address far away from both */
        assert_int_not_equal(nm_pimm_free(d.h, d.heap_base + d.heap_size - 4096), NM_OK);
        free_ok(&d, small);
        assert_int_equal(nm_pimm_free(d.h, small), NM_EDOUBLEFREE);
        free_ok(&d, big);
        assert_int_equal(nm_pimm_free(d.h, big), NM_EDOUBLEFREE);
        nm_pimm_stats s;
        nm_pimm_get_stats(d.h, &s);
        assert_int_equal(s.misaligned_free, 1);
        assert_int_equal(s.double_free + s.bad_free, 7);
        assert_int_equal(s.frees, 2);
        /* nothing was lost: the heap is whole again */
        heap_empty(&d, 2);
        assert_int_equal(tdpu_violations(&d), 0);
        tdpu_close(&d);
    }
}

/* Double free and interior frees into a block that left the active slot. */
static void test_bad_frees_retired_block(void **st)
{
    (void)st;
    for (int v = NM_PIMM_SW; v < NV; v++) {
        tdpu d;
        assert_int_equal(tdpu_open(&d, (nm_pimm_variant)v, 1u << 20, 1), 0);
        uint32_t p[300];
        for (int i = 0; i < 300; i++) p[i] = nm_pimm_malloc(d.h, 16); /* 256 per block: 2 blocks */
        assert_int_equal(p[1] - p[0], 16);
        free_ok(&d, p[3]);
        assert_int_equal(nm_pimm_free(d.h, p[3]), NM_EDOUBLEFREE);
        assert_int_equal(nm_pimm_free(d.h, p[5] + 8), NM_EBADFREE);
        p[3] = nm_pimm_malloc(d.h, 16); /* reuses the freed slot eventually */
        assert_int_not_equal(p[3], 0);
        for (int i = 0; i < 300; i++) free_ok(&d, p[i]);
        heap_empty(&d, 1);
        tdpu_close(&d);
    }
}

/* Frees by a tasklet that does not own the block are queued to the owner. */
static void test_remote_free(void **st)
{
    (void)st;
    for (int v = NM_PIMM_SW; v < NV; v++) {
        tdpu d;
        assert_int_equal(tdpu_open(&d, (nm_pimm_variant)v, 1u << 20, 2), 0);
        nm_pimm_host_set_tasklet(0);
        uint32_t p[200];
        for (int i = 0; i < 200; i++) p[i] = nm_pimm_malloc(d.h, 32); /* block 1 retired, block 2 active */
        nm_pimm_host_set_tasklet(1);
        assert_int_equal(nm_pimm_free(d.h, p[0]), NM_OK);   /* retired block */
        assert_int_equal(nm_pimm_free(d.h, p[150]), NM_OK); /* the owner's active block */
        assert_int_equal(nm_pimm_free(d.h, p[0]), NM_EDOUBLEFREE);
        uint8_t *m = nm_pimm_host_mram(d.host);
        memset(m + p[151], 0x5a, 32);
        assert_int_equal(nm_pimm_free(d.h, p[151] + 8), NM_OK); /* interior: refused when applied */
        nm_pimm_stats s;
        nm_pimm_get_stats(d.h, &s);
        assert_int_equal(s.remote_free, 3);
        assert_int_equal(s.double_free, 1);
        /* the owner applies them at its next pimMalloc: both slots are reusable */
        nm_pimm_host_set_tasklet(0);
        uint32_t a = nm_pimm_malloc(d.h, 32), b = nm_pimm_malloc(d.h, 32);
        assert_int_equal(a, p[150]); /* lowest free slot of the active block */
        assert_int_not_equal(b, 0);
        nm_pimm_get_stats(d.h, &s);
        assert_int_equal(s.bad_free, 1); /* the interior free, found when applied */
        for (int i = 0; i < 32; i++) assert_int_equal(m[p[151] + i], 0x5a); /* and it touched no live data */
        free_ok(&d, a);
        free_ok(&d, b);
        for (int i = 1; i < 200; i++)
            if (i != 150) free_ok(&d, p[i]);
        /* a tasklet beyond the configured count gets clean failures */
        nm_pimm_host_set_tasklet(5);
        assert_int_equal(nm_pimm_malloc(d.h, 32), 0);
        assert_int_equal(nm_pimm_free(d.h, p[1]), NM_ESTATE);
        nm_pimm_host_set_tasklet(0);
        heap_empty(&d, 2);
        assert_int_equal(tdpu_violations(&d), 0);
        tdpu_close(&d);
    }
}

/* Out of memory returns 0, the allocator stays usable and consistent. */
static void test_oom(void **st)
{
    (void)st;
    for (int v = 0; v < NV; v++) {
        tdpu d;
        assert_int_equal(tdpu_open(&d, (nm_pimm_variant)v, 256u << 10, 2), 0);
        uint32_t p[4096];
        unsigned n = 0;
        uint32_t sizes[] = {40, 3000, 700, 16};
        for (;;) {
            uint32_t a = nm_pimm_malloc(d.h, sizes[n % 4]);
            if (!a) break;
            assert_true(n < 4096);
            p[n++] = a;
        }
        assert_true(n > 50);
        nm_pimm_stats s;
        nm_pimm_get_stats(d.h, &s);
        assert_int_equal(s.fail_oom, 1);
        assert_int_equal(nm_pimm_check(d.h, NULL), NM_OK);
        assert_int_equal(nm_pimm_malloc(d.h, 128u << 10), 0);
        for (unsigned i = 0; i < n; i += 2) free_ok(&d, p[i]);
        for (unsigned i = 0; i < n; i += 2) {
            p[i] = nm_pimm_malloc(d.h, sizes[i % 4]);
            assert_int_not_equal(p[i], 0);
        }
        for (unsigned i = 0; i < n; i++) free_ok(&d, p[i]);
        heap_empty(&d, 2);
        assert_non_null(&d); /* whole heap usable again: */
        uint32_t all = nm_pimm_malloc(d.h, 256u << 10);
        if (v == NM_PIMM_STRAWMAN || v == NM_PIMM_LAZY) { /* no blocks held by caches after release */
            assert_int_equal(all, d.heap_base);
            free_ok(&d, all);
        }
        assert_int_equal(tdpu_violations(&d), 0);
        tdpu_close(&d);
    }
}

/* The straw-man tree has 20 levels over 32 MiB at 32 B; SW's has 13. */
static void test_geometry(void **st)
{
    (void)st;
    nm_pimm_config c;
    nm_pimm_config_default(&c, NM_PIMM_STRAWMAN, 4096);
    uint32_t straw = nm_pimm_mram_meta_bytes(&c);
    assert_int_equal(straw, 512u << 10); /* 2^21 nodes x 2 bits, Sec. II-B */
    nm_pimm_config_default(&c, NM_PIMM_SW, 4096);
    uint32_t sw = nm_pimm_mram_meta_bytes(&c);
    assert_int_equal(sw, 4096 + 8192 * 120); /* tree (Sec. VI-E) + block table */
    nm_pimm_config_default(&c, NM_PIMM_SW, 4096);
    c.heap_size = 3u << 20;
    assert_int_equal(nm_pimm_mram_meta_bytes(&c), 0);
    tdpu d;
    assert_int_not_equal(tdpu_open_cfg(&d, &c), 0);
    nm_pimm_config_default(&c, NM_PIMM_SW, 100);
    c.heap_size = 1u << 20;
    assert_int_not_equal(tdpu_open_cfg(&d, &c), 0);
    nm_pimm_config_default(&c, NM_PIMM_SW, 4096);
    c.heap_size = 1u << 20;
    c.nclasses = 2;
    c.classes[0] = 64;
    c.classes[1] = 48;
    assert_int_not_equal(tdpu_open_cfg(&d, &c), 0);
    c.classes[0] = 24;
    c.classes[1] = 1000;
    assert_int_equal(tdpu_open_cfg(&d, &c), 0);
    uint32_t a = nm_pimm_malloc(d.h, 20), b = nm_pimm_malloc(d.h, 20), x = nm_pimm_malloc(d.h, 1001);
    assert_int_equal(b - a, 24);
    assert_int_equal(x % 4096, 0); /* bypass */
    assert_int_equal(nm_pimm_free(d.h, a + 8), NM_EBADFREE);
    free_ok(&d, a);
    free_ok(&d, b);
    free_ok(&d, x);
    tdpu_close(&d);
}

/* Metadata store parameters that force evictions, partial pinning. */
static void test_small_metadata_stores(void **st)
{
    (void)st;
    struct {
        nm_pimm_variant v;
        unsigned bc;
        uint32_t pin, sb;
    } cases[] = {{NM_PIMM_HWSW, 2, 0, 256},  {NM_PIMM_HWSW, 3, 0, 256},    {NM_PIMM_PINNED, 16, 8, 256},
                 {NM_PIMM_PINNED, 16, 64, 256}, {NM_PIMM_ADAPTIVE, 16, 0, 256}, {NM_PIMM_SW, 16, 0, 8},
                 {NM_PIMM_STRAWMAN, 16, 0, 16}};
    nm_rng r;
    nm_rng_seed(&r, nm_test_seed(7));
    for (unsigned k = 0; k < NM_ARRAY_LEN(cases); k++) {
        nm_pimm_config c;
        nm_pimm_config_default(&c, cases[k].v, 8192);
        c.heap_size = 8u << 20;
        c.tasklets = 1;
        c.bc_entries = cases[k].bc;
        c.pin_budget = cases[k].pin;
        c.swbuf_bytes = cases[k].sb;
        tdpu d;
        if (tdpu_open_cfg(&d, &c)) fail_msg("case %u: %s", k, nm_last_errmsg());
        uint32_t p[400] = {0};
        for (int it = 0; it < 4000; it++) {
            unsigned i = (unsigned)nm_rng_below(&r, 400);
            if (p[i]) {
                free_ok(&d, p[i]);
                p[i] = 0;
            } else {
                uint32_t sz = nm_rng_below(&r, 4) ? (uint32_t)nm_rng_range(&r, 1, 2048)
                                                   : (uint32_t)nm_rng_range(&r, 2049, 40000);
                p[i] = nm_pimm_malloc(d.h, sz);
                assert_int_not_equal(p[i], 0);
            }
        }
        assert_int_equal(nm_pimm_check(d.h, NULL), NM_OK);
        for (int i = 0; i < 400; i++)
            if (p[i]) free_ok(&d, p[i]);
        heap_empty(&d, 1);
        assert_int_equal(tdpu_violations(&d), 0);
        tdpu_close(&d);
    }
}

/* Event counters behave as the paper describes for the 4 KiB point. */
static void test_metadata_counters(void **st)
{
    (void)st;
    nm_pimm_stats s[NV];
    for (int v = 0; v < NV; v++) {
        tdpu d;
        assert_int_equal(tdpu_open(&d, (nm_pimm_variant)v, 32u << 20, 1), 0);
        nm_pimm_reset_counters(d.h);
        for (int i = 0; i < 128; i++) assert_int_not_equal(nm_pimm_malloc(d.h, 4096), 0);
        nm_pimm_get_stats(d.h, &s[v]);
        assert_int_equal(s[v].backend_ops, 128);
        tdpu_close(&d);
    }
    /* pinned: the whole depth-13 tree (4 KiB) is in WRAM, nothing moves */
    assert_int_equal(s[NM_PIMM_PINNED].meta_dma_read + s[NM_PIMM_PINNED].meta_dma_written, 0);
    assert_int_equal(s[NM_PIMM_PINNED].meta_hits, s[NM_PIMM_PINNED].meta_accesses);
    /* the buddy cache moves far less metadata than the coarse buffer */
    uint64_t hw = s[NM_PIMM_HWSW].meta_dma_read + s[NM_PIMM_HWSW].meta_dma_written;
    uint64_t sw = s[NM_PIMM_SW].meta_dma_read + s[NM_PIMM_SW].meta_dma_written;
    assert_true(hw * 10 < sw);
    /* 128 x 32 B: the straw-man walks its 20-level tree every time, SW's
     * pre-populated block (exactly 128 slots) needs no backend call */
    for (int v = NM_PIMM_STRAWMAN; v <= NM_PIMM_SW; v++) {
        tdpu d;
        assert_int_equal(tdpu_open(&d, (nm_pimm_variant)v, 32u << 20, 1), 0);
        nm_pimm_reset_counters(d.h);
        for (int i = 0; i < 128; i++) assert_int_not_equal(nm_pimm_malloc(d.h, 32), 0);
        nm_pimm_get_stats(d.h, &s[v]);
        tdpu_close(&d);
    }
    assert_int_equal(s[NM_PIMM_STRAWMAN].backend_ops, 128);
    assert_true(s[NM_PIMM_STRAWMAN].meta_accesses >= 128 * 20);
    assert_int_equal(s[NM_PIMM_SW].backend_ops, 0);
    assert_int_equal(s[NM_PIMM_SW].tc_hits, 128);
}

/* Coarse-buffer flush (fidelity audit): by default every miss writes the
 * whole buffer back, as the paper's flushBuddyMetadata() (Fig. 13a); with
 * swbuf_dirty_only a clean buffer is dropped without a write. 32 B
 * allocations in a 20-level tree miss on reads that dirty nothing. */
static void test_swbuf_flush_policy(void **st)
{
    (void)st;
    nm_pimm_stats s[2];
    for (int dirty_only = 0; dirty_only < 2; dirty_only++) {
        nm_pimm_config c;
        nm_pimm_config_default(&c, NM_PIMM_STRAWMAN, 8192);
        c.tasklets = 1;
        c.swbuf_dirty_only = dirty_only;
        tdpu d;
        if (tdpu_open_cfg(&d, &c)) fail_msg("%s", nm_last_errmsg());
        for (int i = 0; i < 64; i++) assert_int_not_equal(nm_pimm_malloc(d.h, 32), 0);
        nm_pimm_reset_counters(d.h);
        for (int i = 0; i < 64; i++) assert_int_not_equal(nm_pimm_malloc(d.h, 32), 0);
        nm_pimm_get_stats(d.h, &s[dirty_only]);
        assert_int_equal(nm_pimm_check(d.h, NULL), NM_OK);
        assert_int_equal(tdpu_violations(&d), 0);
        tdpu_close(&d);
    }
    /* same walk, same misses */
    assert_int_equal(s[0].meta_accesses, s[1].meta_accesses);
    assert_int_equal(s[0].meta_dma_read, s[1].meta_dma_read);
    /* paper flush: one whole-buffer write per miss (the buffer is always valid here) */
    assert_int_equal(s[0].meta_dma_written, s[0].meta_dma_read);
    /* dirty only: some misses find the buffer clean and write nothing */
    assert_true(s[1].meta_dma_written < s[1].meta_dma_read);
    assert_true(s[1].meta_dma_written > 0);
}

/* The consistency check finds a cached block the tree calls free, and unmerged buddies. */
static void test_check_detects_corruption(void **st)
{
    (void)st;
    tdpu d;
    assert_int_equal(tdpu_open(&d, NM_PIMM_LAZY, 1u << 20, 1), 0);
    uint8_t *m = nm_pimm_host_mram(d.host);
    uint32_t meta = d.heap_base + d.heap_size; /* default meta_base */
    assert_int_equal(nm_pimm_check(d.h, NULL), NM_OK);
    /* block table: the tree is 4 KiB-grain, depth 8 for 1 MiB: 512 nodes = 128 B, rounded to 256 B */
    uint32_t blk_table = meta + 256;
    m[blk_table + 100 * 120] = 1; /* block 100 "cached" but never allocated */
    assert_int_equal(nm_pimm_check(d.h, NULL), NM_ECORRUPT);
    m[blk_table + 100 * 120] = 0;
    assert_int_equal(nm_pimm_check(d.h, NULL), NM_OK);
    /* tree: root PART with both children FREE (unmerged buddies) */
    m[meta] = (uint8_t)(1u << 2); /* node 1 = PART; nodes 2, 3 = FREE */
    assert_int_equal(nm_pimm_check(d.h, NULL), NM_ECORRUPT);
    tdpu_close(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sizes_and_alignment),
        cmocka_unit_test(test_thread_cache_layout),
        cmocka_unit_test(test_bad_frees),
        cmocka_unit_test(test_bad_frees_retired_block),
        cmocka_unit_test(test_remote_free),
        cmocka_unit_test(test_oom),
        cmocka_unit_test(test_geometry),
        cmocka_unit_test(test_small_metadata_stores),
        cmocka_unit_test(test_metadata_counters),
        cmocka_unit_test(test_swbuf_flush_policy),
        cmocka_unit_test(test_check_detects_corruption),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
