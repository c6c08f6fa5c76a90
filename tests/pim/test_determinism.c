/* Determinism (same inputs -> same modeled cycles and results, on 1 or 2
 * host threads), per-DPU isolation of globals and MRAM, and bounded memory
 * for 2560 DPUs. */
#include <stdlib.h>
#include <string.h>

#include "nearmem/pim/examples.h"
#include "nm_test.h"
#include "pim_test_kernels.h"

enum { NDPUS = 32, NT = 16 };

typedef struct snapshot {
    nm_pim_dpu_stats ds[NDPUS];
    nm_pim_tasklet_stats ts[NDPUS][NT];
    uint64_t res[NDPUS][NM_PIM_MAX_TASKLETS];
    uint64_t mram[NDPUS][NT * 4096 / 8];
} snapshot;

static void run_mix(const char *profile, uint64_t seed, snapshot *s)
{
    struct dpu_set_t set, dpu;
    uint32_t i;
    assert_int_equal(dpu_alloc(NDPUS, profile, &set), DPU_OK);
    assert_int_equal(dpu_load(set, "pim_test", NULL), DPU_OK);
    assert_int_equal(nm_pim_set_tasklets(set, NT), DPU_OK);
    DPU_FOREACH(set, dpu, i) pim_test_set_args(dpu, M_MIX, seed + i, 0, 0);
    assert_int_equal(dpu_launch(set, DPU_SYNCHRONOUS), DPU_OK);
    memset(s, 0, sizeof(*s));
    DPU_FOREACH(set, dpu, i)
    {
        assert_int_equal(nm_pim_get_dpu_stats(dpu, &s->ds[i]), DPU_OK);
        for (uint32_t t = 0; t < NT; t++)
            assert_int_equal(nm_pim_get_tasklet_stats(dpu, t, &s->ts[i][t]), DPU_OK);
        assert_int_equal(dpu_copy_from(dpu, "res", 0, s->res[i], sizeof(s->res[i])), DPU_OK);
        assert_int_equal(dpu_copy_from(dpu, DPU_MRAM_HEAP_POINTER_NAME, 0, s->mram[i], sizeof(s->mram[i])), DPU_OK);
    }
    assert_int_equal(dpu_free(set), DPU_OK);
}

static void test_determinism(void **state)
{
    (void)state;
    uint64_t seed = nm_test_seed(12345);
    snapshot *a = malloc(sizeof(snapshot)), *b = malloc(sizeof(snapshot)), *c = malloc(sizeof(snapshot));
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(c);
    run_mix("threads=1", seed, a);
    run_mix("threads=2", seed, b);
    run_mix("threads=2", seed, c);
    assert_memory_equal(a, b, sizeof(snapshot));
    assert_memory_equal(b, c, sizeof(snapshot));
    /* The mix did exercise everything, and differs between DPUs. */
    assert_true(a->ds[0].dma_reads > 0 && a->ds[0].dma_writes > 0 && a->ds[0].cycles > 0);
    assert_true(a->ds[0].cycles != a->ds[1].cycles || a->ds[0].instructions != a->ds[1].instructions);
    /* A different seed gives a different run (the snapshot is not vacuous). */
    run_mix("threads=2", seed + 1000, c);
    assert_memory_not_equal(a->ds, c->ds, sizeof(a->ds));
    free(a);
    free(b);
    free(c);
}

/* The fast scheduler (default) against the reference one (NEARMEM_PIM_SCHED=
 * reference, read at dpu_alloc): every DPU's and tasklet's statistics, the
 * results and MRAM of the mix (compute, DMA, mutexes, barriers) are
 * bit-identical, and so are the example kernels' modeled cycles. The PrIM-style
 * set is compared the same way by pim_prim_sched_identical. */
static void with_sched(bool reference)
{
    if (reference)
        setenv("NEARMEM_PIM_SCHED", "reference", 1);
    else
        unsetenv("NEARMEM_PIM_SCHED");
}

static void example_runs(bool reference, nm_pim_run_report *rep, uint64_t *sums)
{
    enum { N = 16, PER = 4096 };
    static int32_t a[N * PER], b[N * PER], c[N * PER];
    static uint64_t v[N * PER];
    for (uint32_t i = 0; i < N * PER; i++) {
        a[i] = (int32_t)(i * 3u);
        b[i] = (int32_t)(i ^ 0x5a5au);
        v[i] = (uint64_t)i * 2654435761u;
    }
    const uint32_t tl[] = {1, 11, 16};
    with_sched(reference);
    for (int k = 0; k < 3; k++) {
        struct dpu_set_t set;
        assert_int_equal(dpu_alloc(N, "threads=2", &set), DPU_OK);
        assert_int_equal(nm_pim_va_run(set, tl[k], a, b, c, N * PER, &rep[2 * k]), DPU_OK);
        assert_int_equal(nm_pim_red_run(set, tl[k], v, N * PER, &sums[k], &rep[2 * k + 1]), DPU_OK);
        assert_int_equal(dpu_free(set), DPU_OK);
    }
    with_sched(false);
}

static void test_scheduler_reference(void **state)
{
    (void)state;
    snapshot *a = malloc(sizeof(snapshot)), *b = malloc(sizeof(snapshot));
    assert_non_null(a);
    assert_non_null(b);
    for (uint64_t k = 0; k < 3; k++) {
        uint64_t seed = nm_test_seed(777) + 1000 * k;
        with_sched(true);
        run_mix(k == 1 ? "threads=1" : "threads=2", seed, a);
        with_sched(false);
        run_mix("threads=2", seed, b);
        assert_memory_equal(a, b, sizeof(snapshot));
        assert_true(a->ds[0].cycles > 0 && a->ds[0].lock_wait_cycles + a->ds[0].sync_wait_cycles > 0);
    }
    nm_pim_run_report ra[6], rb[6];
    uint64_t sa[3], sb[3];
    example_runs(true, ra, sa);
    example_runs(false, rb, sb);
    for (int i = 0; i < 6; i++) {
        /* modeled figures only (host_* are wall times) */
        assert_true(ra[i].modeled_kernel_s == rb[i].modeled_kernel_s);
        assert_true(ra[i].max_cycles == rb[i].max_cycles && ra[i].max_cycles > 0);
        assert_true(ra[i].instructions == rb[i].instructions);
        assert_true(ra[i].modeled_xfer_to_s == rb[i].modeled_xfer_to_s);
    }
    assert_memory_equal(sa, sb, sizeof(sa));
    free(a);
    free(b);
}

/* A fault in an operation the scheduler completes: the fast scheduler does
 * the step's completions before its wake-ups, and must still stop where the
 * reference's single pass stops (wake-ups after the faulting tasklet do not
 * happen). Every tasklet's statistics and the fault must match both ways. */
static void fault_run(bool reference, uint64_t charge, uint64_t bytes, uint32_t culprit, nm_pim_fault_info *fi,
                      nm_pim_tasklet_stats ts[NT])
{
    struct dpu_set_t set, dpu;
    uint32_t i;
    with_sched(reference);
    assert_int_equal(dpu_alloc(1, "threads=1", &set), DPU_OK);
    assert_int_equal(dpu_load(set, "pim_test", NULL), DPU_OK);
    assert_int_equal(nm_pim_set_tasklets(set, NT), DPU_OK);
    pim_test_set_args(set, M_FAULT_DMA, charge, bytes, culprit);
    assert_int_not_equal(dpu_launch(set, DPU_SYNCHRONOUS), DPU_OK);
    memset(fi, 0, sizeof(*fi));
    memset(ts, 0, NT * sizeof(*ts));
    DPU_FOREACH(set, dpu, i)
    {
        assert_int_equal(nm_pim_get_fault(dpu, fi), DPU_OK);
        for (uint32_t t = 0; t < NT; t++)
            assert_int_equal(nm_pim_get_tasklet_stats(dpu, t, &ts[t]), DPU_OK);
    }
    assert_int_equal(dpu_free(set), DPU_OK);
    with_sched(false);
}

static void test_scheduler_reference_fault(void **state)
{
    (void)state;
    nm_pim_fault_info fa, fb;
    nm_pim_tasklet_stats ta[NT], tb[NT];
    uint64_t woken_after = 0;
    for (uint32_t culprit = 0; culprit < NT; culprit += 7)
        for (uint64_t charge = 1; charge <= 240; charge++)
            for (uint64_t bytes = 8; bytes <= 512; bytes *= 8) {
                fault_run(true, charge, bytes, culprit, &fa, ta);
                fault_run(false, charge, bytes, culprit, &fb, tb);
                assert_int_equal(fa.code, NM_PIM_FAULT_MUTEX);
                assert_memory_equal(&fa, &fb, sizeof(fa));
                assert_memory_equal(ta, tb, sizeof(ta));
                for (uint32_t t = culprit + 1; t < NT; t++)
                    woken_after += ta[t].dma_wait_cycles;
            }
    assert_true(woken_after > 0); /* tasklets after the culprit did wait on DMA */
}

static void test_isolation(void **state)
{
    (void)state;
    enum { N = 64 };
    struct dpu_set_t set, dpu;
    uint32_t i;
    assert_int_equal(dpu_alloc(N, "threads=2", &set), DPU_OK);
    assert_int_equal(dpu_load(set, "pim_test", NULL), DPU_OK);
    assert_int_equal(nm_pim_set_tasklets(set, 8), DPU_OK);
    DPU_FOREACH(set, dpu, i)
    {
        uint64_t tag = i + 1;
        pim_test_set_args(dpu, M_GLOBALS, 10, 0, 0);
        assert_int_equal(dpu_copy_to(dpu, "g_tag", 0, &tag, 8), DPU_OK);
    }
    for (int launch = 1; launch <= 2; launch++) {
        assert_int_equal(dpu_launch(set, DPU_SYNCHRONOUS), DPU_OK);
        DPU_FOREACH(set, dpu, i)
        {
            uint64_t counter = 0, m = 0;
            /* WRAM globals are per DPU and persist between launches, as on the hardware. */
            assert_int_equal(dpu_copy_from(dpu, "g_counter", 0, &counter, 8), DPU_OK);
            assert_int_equal(counter, (uint64_t)launch * 80 * (i + 1));
            assert_int_equal(dpu_copy_from(dpu, "mvar", 0, &m, 8), DPU_OK);
            assert_int_equal(m, counter);
        }
    }
    /* A pointer to a WRAM global kept in a global stays valid across
     * launches (WRAM addresses are fixed on the hardware). */
    pim_test_set_args(set, M_PTR, 0, 0, 0);
    assert_int_equal(dpu_launch(set, DPU_SYNCHRONOUS), DPU_OK);
    for (int launch = 0; launch < 3; launch++) {
        pim_test_set_args(set, M_PTR, 1, 0, 0);
        assert_int_equal(dpu_launch(set, DPU_SYNCHRONOUS), DPU_OK);
        DPU_FOREACH(set, dpu, i) assert_int_equal(pim_test_res(dpu, 0), i + 1);
    }
    /* dpu_load restores initial values. */
    assert_int_equal(dpu_load(set, "pim_test", NULL), DPU_OK);
    DPU_FOREACH(set, dpu)
    {
        uint64_t counter = 1;
        assert_int_equal(dpu_copy_from(dpu, "g_counter", 0, &counter, 8), DPU_OK);
        assert_int_equal(counter, 0);
    }
    /* MRAM: each DPU transforms only its own data. */
    static uint64_t data[N][PIM_TEST_BLOCK / 8], out[PIM_TEST_BLOCK / 8];
    assert_int_equal(nm_pim_set_tasklets(set, 1), DPU_OK);
    DPU_FOREACH(set, dpu, i)
    {
        for (uint32_t k = 0; k < PIM_TEST_BLOCK / 8; k++)
            data[i][k] = (uint64_t)i * 1000000 + k;
        dpu_prepare_xfer(dpu, data[i]);
        pim_test_set_args(dpu, M_COPY, i, 0, 0);
    }
    assert_int_equal(dpu_push_xfer(set, DPU_XFER_TO_DPU, DPU_MRAM_HEAP_POINTER_NAME, 0, PIM_TEST_BLOCK,
                                   DPU_XFER_DEFAULT),
                     DPU_OK);
    assert_int_equal(dpu_launch(set, DPU_SYNCHRONOUS), DPU_OK);
    DPU_FOREACH(set, dpu, i)
    {
        assert_int_equal(dpu_copy_from(dpu, DPU_MRAM_HEAP_POINTER_NAME, 0, out, sizeof(out)), DPU_OK);
        for (uint32_t k = 0; k < PIM_TEST_BLOCK / 8; k++)
            assert_int_equal(out[k], data[i][k] + i);
    }
    assert_int_equal(dpu_free(set), DPU_OK);
}

static void test_2560_bounded(void **state)
{
    (void)state;
    struct dpu_set_t set;
    assert_int_equal(dpu_alloc(NM_PIM_MAX_DPUS, "threads=2", &set), DPU_OK);
    /* Untouched MRAM costs nothing. */
    assert_int_equal(nm_pim_mram_resident_bytes(set), 0);
    enum { PER = 2048 };
    uint64_t n = (uint64_t)NM_PIM_MAX_DPUS * PER;
    int32_t *a = malloc(n * 4), *b = malloc(n * 4), *c = malloc(n * 4);
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(c);
    for (uint64_t i = 0; i < n; i++) {
        a[i] = (int32_t)i;
        b[i] = (int32_t)(7 * i);
    }
    nm_pim_run_report r;
    assert_int_equal(nm_pim_va_run(set, 16, a, b, c, n, &r), DPU_OK);
    for (uint64_t i = 0; i < n; i++)
        assert_int_equal(c[i], (int32_t)(8 * i));
    /* 16 KiB of data per DPU: one 64 KiB chunk each, not 64 MiB. */
    assert_int_equal(nm_pim_mram_resident_bytes(set), (uint64_t)NM_PIM_MAX_DPUS * 65536);
    assert_true(r.modeled_kernel_s > 0 && r.max_cycles > 0);
    free(a);
    free(b);
    free(c);
    assert_int_equal(dpu_free(set), DPU_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_determinism),
        cmocka_unit_test(test_scheduler_reference),
        cmocka_unit_test(test_scheduler_reference_fault),
        cmocka_unit_test(test_isolation),
        cmocka_unit_test(test_2560_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
