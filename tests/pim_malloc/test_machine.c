/* PIM-malloc on the emulated PIM machine: randomized multi-tasklet stress on
 * many DPUs against a reference model, for every variant. Each tasklet keeps
 * its live blocks in WRAM and stamps the first and last 8 bytes of each block
 * through DMA; the host checks after every phase that the live blocks of each
 * DPU are disjoint, aligned and inside the heap; the last phase frees
 * everything (checking the stamps) and the heap must be empty again. */
#include <string.h>

#include "nearmem/common/prng.h"
#include "nearmem/pim/host.h"
#include "nearmem/pim_malloc_dpu.h"
#include "nm_test.h"
#include "nearmem/pim_malloc_host.h"

#define SLOTS 40
#define NDPUS 12
#define TASKLETS 16

DPU_PROGRAM(pimm_stress);
NM_PIMM_DPU_ALLOCATOR();
DPU_HOST(uint32_t, k_mode); /* 0 init, 1 random ops, 2 free all + release + check, 3 teardown, 4 paper API */
DPU_HOST(nm_pimm_config, k_cfg);
DPU_HOST(uint64_t, k_seed);
DPU_HOST(uint32_t, k_ops);
DPU_HOST(uint32_t, k_addr, [NM_PIM_MAX_TASKLETS * SLOTS]);
DPU_HOST(uint32_t, k_size, [NM_PIM_MAX_TASKLETS * SLOTS]);
DPU_HOST(uint32_t, k_bad, [NM_PIM_MAX_TASKLETS]); /* reference-model violations seen on the DPU */
DPU_HOST(uint32_t, k_oom, [NM_PIM_MAX_TASKLETS]);
DPU_HOST(uint32_t, k_err);
DPU_HOST(uint64_t, k_free_bytes);
DPU_HOST(uint32_t, k_heap_base);
DPU_HOST(uint32_t, k_check);
DPU_HOST(nm_pimm_stats, k_stats);
DPU_WRAM(nm_rng, k_rng, [NM_PIM_MAX_TASKLETS]);
/* Cross-tasklet frees: tasklet t publishes a block in k_hand[t] (addr, size);
 * tasklet t+1 takes and frees it. Tasklets are coroutines switched only at
 * DMA, mutex and barrier calls, so read-and-clear below is atomic. */
DPU_HOST(uint32_t, k_hand, [NM_PIM_MAX_TASKLETS * 2]);
DPU_HOST(uint32_t, k_nt);
BARRIER_INIT(k_bar, TASKLETS);

static uint64_t stamp(uint32_t a, uint32_t size) { return ((uint64_t)a << 32) ^ size ^ 0x5a5a5a5a00000000ull; }

static void put(uint32_t a, uint32_t size)
{
    uint64_t v __dma_aligned = stamp(a, size);
    mram_write(&v, a, 8);
    mram_write(&v, a + ((size + 7) & ~7u) - 8, 8);
}

static int ok(uint32_t a, uint32_t size)
{
    uint64_t v __dma_aligned, w __dma_aligned;
    mram_read(a, &v, 8);
    mram_read(a + ((size + 7) & ~7u) - 8, &w, 8);
    return v == stamp(a, size) && w == stamp(a, size);
}

int DPU_MAIN(void)
{
    unsigned t = me();
    if (k_mode == 0) {
        if (t == 0) {
            k_err = nm_pimm_dpu_init(&k_cfg);
            if (!k_err) k_heap_base = nm_pimm_get_config(nm_pimm_dpu_heap())->heap_base;
        }
        nm_rng_seed_stream(&k_rng[t], k_seed, t);
        return 0;
    }
    if (k_mode == 4) { /* the paper's API (Table II) with custom size classes */
        static const uint32_t classes[] = {24, 200, 0};
        if (t == 0) {
            initAllocator(1u << 20, classes);
            mram_addr_t a = pimMalloc(20), b = pimMalloc(20), c = pimMalloc(150), big = pimMalloc(5000);
            if (!a || b != a + 24 || !c || c % 8 || !big || big % 4096) k_bad[0]++;
            if (pimMalloc(0) || pimMalloc(2u << 20)) k_bad[0]++;
            pimFree(a);
            pimFree(a); /* double free: counted, not fatal */
            pimFree(b + 4);
            pimFree(b);
            pimFree(c);
            pimFree(big);
            nm_pimm_get_stats(nm_pimm_dpu_heap(), &k_stats);
            nm_pimm_dpu_teardown();
        }
        return 0;
    }
    if (k_mode == 3) {
        if (t == 0) {
            nm_pimm_get_stats(nm_pimm_dpu_heap(), &k_stats);
            k_check = nm_pimm_check(nm_pimm_dpu_heap(), &k_free_bytes);
            nm_pimm_dpu_teardown();
        }
        return 0;
    }
    uint32_t *addr = &k_addr[t * SLOTS], *size = &k_size[t * SLOTS];
    if (k_mode == 2) {
        unsigned from = (t + 1) % k_nt;
        if (k_hand[2 * from]) { /* the last handoffs (published in mode 1) */
            if (!ok(k_hand[2 * from], k_hand[2 * from + 1])) k_bad[t]++;
            if (nm_pimm_free(nm_pimm_dpu_heap(), k_hand[2 * from]) != NM_OK) k_bad[t]++;
            k_hand[2 * from] = 0;
        }
        barrier_wait(&k_bar); /* every cross-tasklet free is queued before caches are released */
        for (int i = 0; i < SLOTS; i++)
            if (addr[i]) {
                if (!ok(addr[i], size[i])) k_bad[t]++;
                if (nm_pimm_free(nm_pimm_dpu_heap(), addr[i]) != NM_OK) k_bad[t]++;
                addr[i] = 0;
            }
        nm_pimm_release_cache(nm_pimm_dpu_heap());
        return 0;
    }
    nm_rng *r = &k_rng[t];
    unsigned from = (t + 1) % k_nt;
    for (uint32_t op = 0; op < k_ops; op++) {
        if (op % 8 == 0 && k_hand[2 * from]) {
            uint32_t a = k_hand[2 * from], sz = k_hand[2 * from + 1];
            k_hand[2 * from] = 0;
            if (!ok(a, sz)) k_bad[t]++;
            if (nm_pimm_free(nm_pimm_dpu_heap(), a) != NM_OK) k_bad[t]++;
        }
        if (op % 8 == 4 && !k_hand[2 * t]) {
            uint32_t sz = (uint32_t)nm_rng_range(r, 1, 600), a = pimMalloc(sz);
            if (a) {
                put(a, sz);
                k_hand[2 * t + 1] = sz;
                k_hand[2 * t] = a;
            }
        }
        unsigned i = (unsigned)nm_rng_below(r, SLOTS);
        nm_pim_charge(20);
        if (addr[i]) {
            if (!ok(addr[i], size[i])) k_bad[t]++;
            pimFree(addr[i]);
            addr[i] = 0;
        } else {
            uint64_t k = nm_rng_below(r, 100);
            uint32_t sz = (uint32_t)(k < 75 ? nm_rng_range(r, 1, 300) : k < 95 ? nm_rng_range(r, 301, 2048)
                                                                               : nm_rng_range(r, 2049, 20000));
            uint32_t a = pimMalloc(sz);
            if (!a) {
                k_oom[t]++;
                continue;
            }
            addr[i] = a;
            size[i] = sz;
            put(a, sz);
        }
    }
    return 0;
}

static int cmp_pair(const void *a, const void *b)
{
    const uint32_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

static void launch(struct dpu_set_t set, uint32_t mode, uint32_t tasklets)
{
    assert_int_equal(dpu_broadcast_to(set, "k_mode", 0, &mode, 4, DPU_XFER_DEFAULT), DPU_OK);
    assert_int_equal(nm_pim_set_tasklets(set, tasklets), DPU_OK);
    dpu_error_t e = dpu_launch(set, DPU_SYNCHRONOUS);
    if (e == DPU_ERR_DPU_FAULT) {
        struct dpu_set_t dpu;
        DPU_FOREACH(set, dpu)
        {
            nm_pim_fault_info fi;
            if (nm_pim_get_fault(dpu, &fi) == DPU_OK && fi.code != NM_PIM_FAULT_NONE)
                fail_msg("DPU fault %s (tasklet %u): %s", nm_pim_fault_name(fi.code), fi.tasklet, fi.message);
        }
    }
    assert_int_equal(e, DPU_OK);
}

static void check_live(struct dpu_set_t set, const nm_pimm_config *cfg)
{
    struct dpu_set_t dpu;
    static uint32_t addr[NM_PIM_MAX_TASKLETS * SLOTS], size[NM_PIM_MAX_TASKLETS * SLOTS],
        pairs[NM_PIM_MAX_TASKLETS * (SLOTS + 1)][2];
    uint32_t bad[NM_PIM_MAX_TASKLETS];
    DPU_FOREACH(set, dpu)
    {
        assert_int_equal(dpu_copy_from(dpu, "k_addr", 0, addr, sizeof addr), DPU_OK);
        assert_int_equal(dpu_copy_from(dpu, "k_size", 0, size, sizeof size), DPU_OK);
        assert_int_equal(dpu_copy_from(dpu, "k_bad", 0, bad, sizeof bad), DPU_OK);
        for (int t = 0; t < TASKLETS; t++) assert_int_equal(bad[t], 0);
        uint32_t base = 0;
        assert_int_equal(dpu_copy_from(dpu, "k_heap_base", 0, &base, 4), DPU_OK);
        unsigned n = 0;
        for (unsigned i = 0; i < TASKLETS * SLOTS; i++)
            if (addr[i]) {
                assert_int_equal(addr[i] % 8, 0);
                assert_true(addr[i] >= base && addr[i] + size[i] <= base + cfg->heap_size);
                pairs[n][0] = addr[i];
                pairs[n++][1] = size[i];
            }
        uint32_t hand[NM_PIM_MAX_TASKLETS * 2];
        assert_int_equal(dpu_copy_from(dpu, "k_hand", 0, hand, sizeof hand), DPU_OK);
        for (int t = 0; t < TASKLETS; t++)
            if (hand[2 * t]) {
                pairs[n][0] = hand[2 * t];
                pairs[n++][1] = hand[2 * t + 1];
            }
        qsort(pairs, n, sizeof pairs[0], cmp_pair);
        for (unsigned i = 1; i < n; i++) assert_true(pairs[i - 1][0] + pairs[i - 1][1] <= pairs[i][0]);
    }
}

static void run_variant(nm_pimm_variant v, uint64_t seed)
{
    struct dpu_set_t set, dpu;
    uint32_t i;
    assert_int_equal(dpu_alloc(NDPUS, NULL, &set), DPU_OK);
    assert_int_equal(dpu_load(set, "pimm_stress", NULL), DPU_OK);
    nm_pimm_config cfg;
    nm_pimm_config_default(&cfg, v, 0);
    cfg.heap_size = 1u << 20; /* small: the workload also meets out-of-memory */
    cfg.tasklets = TASKLETS;
    uint32_t ops = 300;
    assert_int_equal(dpu_broadcast_to(set, "k_cfg", 0, &cfg, sizeof cfg, DPU_XFER_DEFAULT), DPU_OK);
    assert_int_equal(dpu_broadcast_to(set, "k_ops", 0, &ops, 4, DPU_XFER_DEFAULT), DPU_OK);
    uint32_t nt = TASKLETS, hz[NM_PIM_MAX_TASKLETS * 2] = {0};
    assert_int_equal(dpu_broadcast_to(set, "k_nt", 0, &nt, 4, DPU_XFER_DEFAULT), DPU_OK);
    assert_int_equal(dpu_broadcast_to(set, "k_hand", 0, hz, sizeof hz, DPU_XFER_DEFAULT), DPU_OK);
    DPU_FOREACH(set, dpu, i)
    {
        uint64_t s = seed * 1000003u + i;
        assert_int_equal(dpu_copy_to(dpu, "k_seed", 0, &s, 8), DPU_OK);
    }
    launch(set, 0, TASKLETS);
    DPU_FOREACH(set, dpu)
    {
        uint32_t err = 1;
        assert_int_equal(dpu_copy_from(dpu, "k_err", 0, &err, 4), DPU_OK);
        assert_int_equal(err, 0);
    }
    for (int ph = 0; ph < 4; ph++) {
        launch(set, 1, TASKLETS);
        check_live(set, &cfg);
    }
    launch(set, 2, TASKLETS);
    check_live(set, &cfg);
    launch(set, 3, 1);
    uint64_t mallocs = 0;
    DPU_FOREACH(set, dpu)
    {
        nm_pimm_stats st;
        assert_int_equal(dpu_copy_from(dpu, "k_stats", 0, &st, sizeof st), DPU_OK);
        assert_int_equal(st.bad_free + st.double_free + st.misaligned_free, 0);
        if (v != NM_PIMM_STRAWMAN) assert_true(st.remote_free > 10); /* cross-tasklet frees happened */
        assert_int_equal(st.reserved, 0); /* every block went back: the heap is empty */
        uint32_t chk = 1;
        uint64_t fb = 0;
        assert_int_equal(dpu_copy_from(dpu, "k_check", 0, &chk, 4), DPU_OK);
        assert_int_equal(dpu_copy_from(dpu, "k_free_bytes", 0, &fb, 8), DPU_OK);
        assert_int_equal(chk, NM_OK);
        assert_int_equal(fb, cfg.heap_size);
        mallocs += st.mallocs;
    }
    assert_true(mallocs > NDPUS * TASKLETS * 300);
    assert_int_equal(dpu_free(set), DPU_OK);
}

/* A configuration that needs more WRAM than the kernel reserved is refused. */
static void test_wram_budget(void **st)
{
    (void)st;
    nm_pimm_host *hd;
    nm_pimm_env env;
    nm_pimm *h = NULL;
    nm_pimm_config c;
    nm_pimm_config_default(&c, NM_PIMM_PINNED, 4096);
    c.tasklets = 24; /* 32 MiB heap: the whole 4 KiB tree pinned + 24 thread caches */
    assert_int_equal(nm_pimm_host_create(&hd, 4096 + c.heap_size + nm_pimm_mram_meta_bytes(&c)), NM_OK);
    nm_pimm_host_env(hd, &env);
    assert_int_equal(nm_pimm_create_checked(&h, &c, &env, 8192), NM_ENOMEM);
    assert_null(h);
    assert_int_equal(nm_pimm_create_checked(&h, &c, &env, NM_PIMM_DPU_WRAM_BYTES), NM_OK);
    nm_pimm_destroy(h);
    nm_pimm_host_destroy(hd);
}

static void test_machine_paper_api(void **st)
{
    (void)st;
    struct dpu_set_t set;
    assert_int_equal(dpu_alloc(2, NULL, &set), DPU_OK);
    assert_int_equal(dpu_load(set, "pimm_stress", NULL), DPU_OK);
    launch(set, 4, 4);
    struct dpu_set_t dpu;
    DPU_FOREACH(set, dpu)
    {
        uint32_t bad[NM_PIM_MAX_TASKLETS];
        nm_pimm_stats st;
        assert_int_equal(dpu_copy_from(dpu, "k_bad", 0, bad, sizeof bad), DPU_OK);
        assert_int_equal(bad[0], 0);
        assert_int_equal(dpu_copy_from(dpu, "k_stats", 0, &st, sizeof st), DPU_OK);
        assert_int_equal(st.mallocs, 6);
        assert_int_equal(st.fail_size, 2);
        assert_int_equal(st.frees, 4);
        assert_int_equal(st.double_free, 1);
        assert_int_equal(st.misaligned_free, 1);
    }
    assert_int_equal(dpu_free(set), DPU_OK);
}

static void test_machine_stress(void **st)
{
    (void)st;
    uint64_t seed = nm_test_seed(99);
    for (int v = 0; v < NM_PIMM_VARIANT_COUNT; v++) run_variant((nm_pimm_variant)v, seed + (uint64_t)v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_wram_budget), cmocka_unit_test(test_machine_paper_api), cmocka_unit_test(test_machine_stress)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
