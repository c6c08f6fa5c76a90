/* Plain UPMEM C programs (docs/pim-machine.md, "How a program is built"):
 * a program file built by nearmem-dpu-cc, loaded by path, whose every kind of
 * global is private to each DPU, over many DPUs and two host threads. */
#include <stdio.h>
#include <string.h>

#include "nearmem/pim/host.h"
#include "nm_test.h"

#define PROG(name) PIM_DPU_DIR "/" name
enum { TASKLETS = 4 };

static void check_dpu(struct dpu_set_t dpu, uint64_t tag, uint64_t launch)
{
    uint64_t out[12];
    assert_int_equal(dpu_copy_from(dpu, "out", 0, out, sizeof(out)), DPU_OK);
    assert_int_equal(out[0], TASKLETS * tag * launch);
    assert_int_equal(out[1], 7 + launch);
    assert_int_equal(out[2], tag * launch);
    assert_int_equal(out[3], launch);
    assert_int_equal(out[4], 22 + launch);
    assert_int_equal(out[5], 33 + tag * launch);
    assert_int_equal(out[6], tag);
    assert_int_equal(out[7], 100 * (tag % 4 + 1) + 2 * tag + TASKLETS * tag * launch);
    assert_int_equal(out[8], TASKLETS * tag * 10 + TASKLETS * (TASKLETS - 1) / 2);
    assert_int_equal(out[9], 0x08000000u + 3 * 32); /* after the three 32-byte MRAM arrays */
    assert_int_equal(out[10], 4);                    /* __mram_ptr pointers are 32-bit */
    assert_int_equal(out[11], 0x08000000u + 8);
    uint64_t m[4];
    assert_int_equal(dpu_copy_from(dpu, "m_init", 0, m, sizeof(m)), DPU_OK);
    assert_int_equal(m[0], 11);
    assert_int_equal(m[1], 22 + launch);
    assert_int_equal(m[2], 33 + tag * launch);
    assert_int_equal(m[3], 44);
}

static void run_globals(uint32_t nr_dpus, const char *profile, uint64_t *cycles)
{
    struct dpu_set_t set, dpu;
    struct dpu_program_t *prog = NULL;
    uint32_t i;
    assert_int_equal(dpu_alloc(nr_dpus, profile, &set), DPU_OK);
    assert_int_equal(dpu_load(set, PROG("pim_globals"), &prog), DPU_OK);
    assert_non_null(prog);
    uint32_t nt = 0;
    assert_int_equal(nm_pim_get_nr_tasklets(set, &nt), DPU_OK);
    assert_int_equal(nt, TASKLETS);
    DPU_FOREACH(set, dpu, i)
    {
        uint64_t tag = i + 1;
        assert_int_equal(dpu_copy_to(dpu, "tag", 0, &tag, sizeof(tag)), DPU_OK);
    }
    for (uint64_t launch = 1; launch <= 3; launch++) {
        assert_int_equal(dpu_launch(set, DPU_SYNCHRONOUS), DPU_OK);
        DPU_FOREACH(set, dpu, i) check_dpu(dpu, i + 1, launch);
    }
    /* The log of the last launch. */
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_int_equal(dpu_log_read(nm_pim_set_dpu(set, 5), f), DPU_OK);
    fclose(f);
    assert_string_equal(text, "tag 6 launch 3\n");
    free(text);
    for (i = 0; i < nr_dpus && cycles; i++) {
        nm_pim_dpu_stats st;
        assert_int_equal(nm_pim_get_dpu_stats(nm_pim_set_dpu(set, i), &st), DPU_OK);
        cycles[i] = st.cycles;
        assert_true(st.cycles > 0);
        assert_true(st.dma_reads > 0); /* the direct MRAM accesses are DMA */
    }
    /* Loading again resets WRAM and initialised MRAM; __mram_noinit keeps. */
    assert_int_equal(dpu_load(set, PROG("pim_globals"), NULL), DPU_OK);
    DPU_FOREACH(set, dpu, i)
    {
        uint64_t tag = 0, m[4], noinit;
        assert_int_equal(dpu_copy_from(dpu, "tag", 0, &tag, 8), DPU_OK);
        assert_int_equal(tag, 0);
        assert_int_equal(dpu_copy_from(dpu, "m_init", 0, m, sizeof(m)), DPU_OK);
        assert_int_equal(m[1], 22);
        assert_int_equal(dpu_copy_from(dpu, "m_noinit", 0, &noinit, 8), DPU_OK);
        assert_int_equal(noinit, i + 1);
        tag = 1000 + i;
        assert_int_equal(dpu_copy_to(dpu, "tag", 0, &tag, sizeof(tag)), DPU_OK);
    }
    assert_int_equal(dpu_launch(set, DPU_SYNCHRONOUS), DPU_OK);
    DPU_FOREACH(set, dpu, i) check_dpu(dpu, 1000 + i, 1);
    assert_int_equal(dpu_free(set), DPU_OK);
}

static void test_globals_isolated(void **state)
{
    (void)state;
    run_globals(64, "threads=2", NULL);
}

/* The same program on 1 and 2 host threads gives the same modeled cycles. */
static void test_globals_deterministic(void **state)
{
    (void)state;
    uint64_t c1[16], c2[16];
    run_globals(16, "threads=1", c1);
    run_globals(16, "threads=2", c2);
    assert_memory_equal(c1, c2, sizeof(c1));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_globals_isolated),
        cmocka_unit_test(test_globals_deterministic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
