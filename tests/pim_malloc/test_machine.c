/* PIM-malloc on the emulated PIM machine: randomized multi-tasklet stress on
 * many DPUs against a reference model, for every variant. Each tasklet keeps
 * its live blocks in WRAM and stamps the first and last 8 bytes of each block
 * through DMA; the host checks after every phase that the live blocks of each
 * DPU are disjoint, aligned and inside the heap; the last phase frees
 * everything (checking the stamps) and the heap must be empty again. */
#include <string.h>

#include "nearmem/pim/host.h"
#include "nearmem/pim_malloc.h"
#include "nm_test.h"
#include "stress_common.h"

#define NDPUS 12
#define PROG(name) PIMM_DPU_DIR "/" name

static int cmp_pair(const void *a, const void *b)
{
    const uint32_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* Every launch runs the program's TASKLETS tasklets; modes that need fewer
 * leave the others idle. */
static void launch(struct dpu_set_t set, uint32_t mode)
{
    assert_int_equal(dpu_broadcast_to(set, "k_mode", 0, &mode, 4, DPU_XFER_DEFAULT), DPU_OK);
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
    static uint32_t addr[TASKLETS * SLOTS], size[TASKLETS * SLOTS], pairs[TASKLETS * (SLOTS + 1)][2];
    uint32_t bad[TASKLETS];
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
        uint32_t hand[TASKLETS * 2];
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
    assert_int_equal(dpu_load(set, PROG("pimm_stress"), NULL), DPU_OK);
    nm_pimm_config cfg;
    nm_pimm_config_default(&cfg, v, 0);
    cfg.heap_size = 1u << 20; /* small: the workload also meets out-of-memory */
    cfg.tasklets = TASKLETS;
    uint32_t ops = 300;
    assert_int_equal(dpu_broadcast_to(set, "k_cfg", 0, &cfg, sizeof cfg, DPU_XFER_DEFAULT), DPU_OK);
    assert_int_equal(dpu_broadcast_to(set, "k_ops", 0, &ops, 4, DPU_XFER_DEFAULT), DPU_OK);
    uint32_t nt = TASKLETS, hz[TASKLETS * 2] = {0};
    assert_int_equal(dpu_broadcast_to(set, "k_nt", 0, &nt, 4, DPU_XFER_DEFAULT), DPU_OK);
    assert_int_equal(dpu_broadcast_to(set, "k_hand", 0, hz, sizeof hz, DPU_XFER_DEFAULT), DPU_OK);
    DPU_FOREACH(set, dpu, i)
    {
        uint64_t s = seed * 1000003u + i;
        assert_int_equal(dpu_copy_to(dpu, "k_seed", 0, &s, 8), DPU_OK);
    }
    launch(set, 0);
    DPU_FOREACH(set, dpu)
    {
        uint32_t err = 1;
        assert_int_equal(dpu_copy_from(dpu, "k_err", 0, &err, 4), DPU_OK);
        assert_int_equal(err, 0);
    }
    for (int ph = 0; ph < 4; ph++) {
        launch(set, 1);
        check_live(set, &cfg);
    }
    launch(set, 2);
    check_live(set, &cfg);
    launch(set, 3);
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

/* A configuration that needs more WRAM than the kernel reserved is refused
 * (the allocator's state is in the DPU's WRAM). */
static void test_wram_budget(void **st)
{
    (void)st;
    nm_pimm_config c;
    nm_pimm_config_default(&c, NM_PIMM_PINNED, 0);
    c.tasklets = 24; /* 32 MiB heap: the whole 4 KiB tree pinned + 24 thread caches */
    static const char *const progs[] = {PROG("pimm_stress_small"), PROG("pimm_stress")};
    for (int k = 0; k < 2; k++) {
        struct dpu_set_t set;
        assert_int_equal(dpu_alloc(1, NULL, &set), DPU_OK);
        assert_int_equal(dpu_load(set, progs[k], NULL), DPU_OK);
        assert_int_equal(dpu_broadcast_to(set, "k_cfg", 0, &c, sizeof c, DPU_XFER_DEFAULT), DPU_OK);
        launch(set, 0);
        uint32_t err = 0;
        assert_int_equal(dpu_copy_from(set, "k_err", 0, &err, 4), DPU_OK);
        assert_int_equal(err, k == 0 ? NM_ENOMEM : NM_OK); /* 8 KiB reserved, then the default 12 KiB */
        assert_int_equal(dpu_free(set), DPU_OK);
    }
}

static void test_machine_paper_api(void **st)
{
    (void)st;
    struct dpu_set_t set;
    assert_int_equal(dpu_alloc(2, NULL, &set), DPU_OK);
    assert_int_equal(dpu_load(set, PROG("pimm_stress"), NULL), DPU_OK);
    launch(set, 4);
    struct dpu_set_t dpu;
    DPU_FOREACH(set, dpu)
    {
        uint32_t bad[TASKLETS];
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
