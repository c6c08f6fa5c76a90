/* Host API: every call of host.h, its refusals and the transfer model. */
#include <string.h>

#include "nm_test.h"
#include "pim_test_kernels.h"

/* The multi-rank growth of the default model (Friesel et al.'s calibration
 * points at 1 and 40 ranks: (13.2003 / 5.3014 - 1) / 39). */
#define G 0.0382042

static void test_alloc_free(void **state)
{
    (void)state;
    struct dpu_set_t set;
    uint32_t n = 0;
    assert_int_equal(dpu_alloc(0, NULL, &set), DPU_ERR_ALLOCATION);
    assert_int_equal(dpu_alloc(NM_PIM_MAX_DPUS + 1, NULL, &set), DPU_ERR_ALLOCATION);
    assert_int_equal(dpu_alloc(4, NULL, NULL), DPU_ERR_INVALID_ARGUMENT);
    assert_int_equal(dpu_alloc(4, "frequency", &set), DPU_ERR_INVALID_PROFILE);
    assert_int_equal(dpu_alloc(4, "colour=blue", &set), DPU_ERR_INVALID_PROFILE);
    assert_int_equal(dpu_alloc(4, "frequency=abc", &set), DPU_ERR_INVALID_PROFILE);
    assert_int_equal(dpu_alloc(4, "threads=0", &set), DPU_ERR_INVALID_PROFILE);

    assert_int_equal(dpu_alloc(130, "frequency=400,threads=2", &set), DPU_OK);
    assert_int_equal(dpu_get_nr_dpus(set, &n), DPU_OK);
    assert_int_equal(n, 130);
    assert_int_equal(dpu_get_nr_ranks(set, &n), DPU_OK);
    assert_int_equal(n, 3);
    assert_int_equal(dpu_get_nr_dpus(set, NULL), DPU_ERR_INVALID_ARGUMENT);
    nm_pim_cost c;
    assert_int_equal(nm_pim_get_cost(set, &c), DPU_OK);
    assert_true(c.freq_mhz == 400.0);
    assert_int_equal(nm_pim_host_threads(set), 2);

    /* Iteration: with and without an index, by rank. */
    struct dpu_set_t dpu, rank;
    uint32_t i, count = 0, r;
    DPU_FOREACH(set, dpu, i)
    {
        assert_int_equal(nm_pim_dpu_index(dpu), i);
        count++;
    }
    assert_int_equal(count, 130);
    count = 0;
    DPU_FOREACH(set, dpu) count++;
    assert_int_equal(count, 130);
    uint32_t sizes[3] = {0}, total = 0;
    DPU_RANK_FOREACH(set, rank, r)
    {
        assert_int_equal(dpu_get_nr_dpus(rank, &sizes[r]), DPU_OK);
        DPU_FOREACH(rank, dpu) total++;
    }
    assert_int_equal(sizes[0], 64);
    assert_int_equal(sizes[1], 64);
    assert_int_equal(sizes[2], 2);
    assert_int_equal(total, 130);
    count = 0;
    DPU_RANK_FOREACH(set, rank) count++;
    assert_int_equal(count, 3);
    assert_int_equal(nm_pim_dpu_index(set), UINT32_MAX);

    /* Only the whole allocation can be freed. */
    assert_int_equal(dpu_free(rank), DPU_ERR_INVALID_DPU_SET);
    assert_int_equal(dpu_free(set), DPU_OK);

    assert_int_equal(dpu_alloc(DPU_ALLOCATE_ALL, NULL, &set), DPU_OK);
    assert_int_equal(dpu_get_nr_dpus(set, &n), DPU_OK);
    assert_int_equal(n, NM_PIM_MAX_DPUS);
    assert_int_equal(dpu_free(set), DPU_OK);
    assert_int_equal(dpu_alloc_ranks(2, NULL, &set), DPU_OK);
    assert_int_equal(dpu_get_nr_dpus(set, &n), DPU_OK);
    assert_int_equal(n, 128);
    assert_int_equal(dpu_free(set), DPU_OK);
    assert_int_equal(dpu_alloc_ranks(0, NULL, &set), DPU_ERR_ALLOCATION);
    assert_int_equal(dpu_alloc_ranks(41, NULL, &set), DPU_ERR_ALLOCATION);

    struct dpu_set_t empty = {0};
    assert_int_equal(dpu_free(empty), DPU_ERR_INVALID_DPU_SET);
    assert_int_equal(dpu_get_nr_dpus(empty, &n), DPU_ERR_INVALID_DPU_SET);
    assert_string_equal(dpu_error_to_string(DPU_OK), "DPU_OK: success");
    assert_non_null(strstr(dpu_error_to_string(DPU_ERR_DPU_FAULT), "DPU_ERR_DPU_FAULT"));
    assert_non_null(dpu_error_to_string((dpu_error_t)999));
}

static void test_load_launch(void **state)
{
    (void)state;
    struct dpu_set_t set;
    assert_int_equal(dpu_alloc(3, "threads=2", &set), DPU_OK);
    assert_int_equal(dpu_launch(set, DPU_SYNCHRONOUS), DPU_ERR_NO_PROGRAM_LOADED);
    assert_int_equal(dpu_load(set, "no_such_program", NULL), DPU_ERR_ELF_NO_SUCH_FILE);
    assert_int_equal(dpu_load(set, "/nonexistent/lib.so:pim_test", NULL), DPU_ERR_ELF_NO_SUCH_FILE);
    assert_int_equal(dpu_load(set, NULL, NULL), DPU_ERR_INVALID_ARGUMENT);
    assert_int_equal(dpu_load(set, "pim_test_mutexes", NULL), DPU_ERR_INVALID_WRAM_ACCESS);
    struct dpu_program_t *prog = NULL;
    assert_int_equal(dpu_load(set, "pim_test", &prog), DPU_OK);
    assert_non_null(prog);
    assert_non_null(nm_pim_find_program("pim_test"));
    assert_null(nm_pim_find_program("nope"));
    assert_int_equal(dpu_launch(set, (dpu_launch_policy_t)7), DPU_ERR_INVALID_LAUNCH_POLICY);

    /* me(), NR_TASKLETS, heap pointer */
    assert_int_equal(nm_pim_set_tasklets(set, 0), DPU_ERR_INVALID_THREAD_ID);
    assert_int_equal(nm_pim_set_tasklets(set, 5), DPU_OK);
    pim_test_set_args(set, M_ME, 0, 0, 0);
    assert_int_equal(dpu_launch(set, DPU_SYNCHRONOUS), DPU_OK);
    struct dpu_set_t dpu;
    DPU_FOREACH(set, dpu)
    {
        for (uint32_t t = 0; t < 5; t++)
            assert_int_equal(pim_test_res(dpu, t), t);
        uint64_t nt = 0, hp = 0;
        assert_int_equal(dpu_copy_from(dpu, "res2", 0, &nt, 8), DPU_OK);
        assert_int_equal(dpu_copy_from(dpu, "res3", 0, &hp, 8), DPU_OK);
        assert_int_equal(nt, 5);
        /* mvar (64 x 8 bytes) is the only MRAM variable: the heap starts after it. */
        assert_int_equal(hp, NM_PIM_MRAM_BASE + 512);
    }

    /* Asynchronous launch, status, sync. */
    pim_test_set_args(set, M_CHARGE, 100000, 0, 0);
    assert_int_equal(dpu_launch(set, DPU_ASYNCHRONOUS), DPU_OK);
    bool done = false, fault = true;
    assert_int_equal(dpu_sync(set), DPU_OK);
    assert_int_equal(dpu_status(set, &done, &fault), DPU_OK);
    assert_true(done);
    assert_false(fault);
    assert_int_equal(dpu_status(set, NULL, &fault), DPU_ERR_INVALID_ARGUMENT);
    /* A transfer right after an async launch waits for it (the SDK queues). */
    assert_int_equal(dpu_launch(set, DPU_ASYNCHRONOUS), DPU_OK);
    DPU_FOREACH(set, dpu) assert_int_equal(pim_test_res(dpu, 0), 100000 * 11);
    nm_pim_launch_stats ls;
    assert_int_equal(nm_pim_last_launch(set, &ls), DPU_OK);
    assert_int_equal(ls.nr_dpus, 3);
    assert_int_equal(ls.faulted_dpus, 0);
    assert_true(ls.max_cycles >= 100000 * 11);
    assert_true(ls.modeled_seconds > 0 && ls.host_seconds >= 0);

    /* Launch of a subset. */
    DPU_FOREACH(set, dpu) { break; }
    pim_test_set_args(set, M_CHARGE, 10, 0, 0);
    assert_int_equal(dpu_launch(dpu, DPU_SYNCHRONOUS), DPU_OK);
    assert_int_equal(nm_pim_last_launch(set, &ls), DPU_OK);
    assert_int_equal(ls.nr_dpus, 1);

    /* Fixed NR_TASKLETS program. */
    assert_int_equal(dpu_load(set, "pim_test_fixed", NULL), DPU_OK);
    assert_int_equal(nm_pim_set_tasklets(set, 8), DPU_ERR_INVALID_THREAD_ID);
    assert_int_equal(nm_pim_set_tasklets(set, 4), DPU_OK);
    assert_int_equal(dpu_launch(set, DPU_SYNCHRONOUS), DPU_OK);
    uint32_t out[4];
    DPU_FOREACH(set, dpu)
    {
        assert_int_equal(dpu_copy_from(dpu, "fixed_out", 0, out, sizeof(out)), DPU_OK);
        for (uint32_t t = 0; t < 4; t++)
            assert_int_equal(out[t], 40 + t);
    }
    assert_int_equal(dpu_free(set), DPU_OK);
}

static void test_transfers(void **state)
{
    (void)state;
    struct dpu_set_t set, dpu;
    uint32_t i;
    assert_int_equal(dpu_alloc(130, "threads=2", &set), DPU_OK);
    uint64_t v = 7;
    assert_int_equal(dpu_copy_to(set, "arg0", 0, &v, 8), DPU_ERR_NO_PROGRAM_LOADED);
    assert_int_equal(dpu_load(set, "pim_test", NULL), DPU_OK);

    /* Refusals. */
    assert_int_equal(dpu_copy_to(set, "nope", 0, &v, 8), DPU_ERR_UNKNOWN_SYMBOL);
    assert_int_equal(dpu_copy_to(set, NULL, 0, &v, 8), DPU_ERR_UNKNOWN_SYMBOL);
    assert_int_equal(dpu_copy_to(set, "arg0", 0, NULL, 8), DPU_ERR_INVALID_MEMORY_TRANSFER);
    assert_int_equal(dpu_copy_to(set, "arg0", 0, &v, 0), DPU_ERR_INVALID_MEMORY_TRANSFER);
    assert_int_equal(dpu_copy_to(set, "arg0", 2, &v, 4), DPU_ERR_INVALID_WRAM_ACCESS);
    assert_int_equal(dpu_copy_to(set, "arg0", 0, &v, 6), DPU_ERR_INVALID_WRAM_ACCESS);
    assert_int_equal(dpu_copy_to(set, "arg0", 4, &v, 8), DPU_ERR_INVALID_SYMBOL_ACCESS);
    assert_int_equal(dpu_copy_to(set, "arg0", 4, &v, 4), DPU_OK); /* 4-byte granular WRAM is fine */
    assert_int_equal(dpu_copy_to(set, "mvar", 4, &v, 8), DPU_ERR_INVALID_MRAM_ACCESS);
    assert_int_equal(dpu_copy_to(set, "mvar", 0, &v, 4), DPU_ERR_INVALID_MRAM_ACCESS);
    assert_int_equal(dpu_copy_to(set, "mvar", 512, &v, 8), DPU_ERR_INVALID_SYMBOL_ACCESS);
    assert_int_equal(dpu_copy_to(set, DPU_MRAM_HEAP_POINTER_NAME, NM_PIM_MRAM_SIZE - 512, &v, 8),
                     DPU_ERR_INVALID_MRAM_ACCESS);
    assert_int_equal(dpu_copy_to(set, DPU_MRAM_HEAP_POINTER_NAME, NM_PIM_MRAM_SIZE - 520, &v, 8), DPU_OK);
    assert_int_equal(dpu_prepare_xfer(set, &v), DPU_ERR_TRANSFER_ALREADY_SET);
    assert_int_equal(dpu_push_xfer(set, (dpu_xfer_t)5, "arg0", 0, 8, DPU_XFER_DEFAULT),
                     DPU_ERR_INVALID_MEMORY_TRANSFER);
    assert_int_equal(dpu_broadcast_to(set, "arg0", 0, NULL, 8, DPU_XFER_DEFAULT), DPU_ERR_INVALID_MEMORY_TRANSFER);

    /* Serial copy to every DPU: modeled at the serial bandwidth. */
    uint64_t buf[64];
    for (int k = 0; k < 64; k++)
        buf[k] = 1000 + (uint64_t)k;
    assert_int_equal(dpu_copy_to(set, "mvar", 0, buf, sizeof(buf)), DPU_OK);
    nm_pim_xfer_stats x;
    assert_int_equal(nm_pim_last_xfer(set, &x), DPU_OK);
    assert_int_equal(x.kind, NM_PIM_XFER_SERIAL);
    assert_true(x.to_dpu);
    assert_int_equal(x.bytes, 130u * 512u);
    assert_int_equal(x.nr_dpus, 130);
    assert_near(x.modeled_seconds, 130.0 * 512 / 0.33e9, 1e-12);
    uint64_t back[64];
    DPU_FOREACH(set, dpu)
    {
        memset(back, 0, sizeof(back));
        assert_int_equal(dpu_copy_from(dpu, "mvar", 0, back, sizeof(back)), DPU_OK);
        assert_memory_equal(back, buf, sizeof(buf));
    }
    assert_int_equal(nm_pim_last_xfer(set, &x), DPU_OK);
    assert_false(x.to_dpu);
    assert_near(x.modeled_seconds, 512 / 0.12e9, 1e-12);

    /* Parallel push: per-DPU buffers; ranks in parallel under the host-side
     * limit. 130 DPUs = 64 + 64 + 2: the slowest full rank takes 64 x 256 B at
     * 6.68 GB/s, the 2-DPU rank 512 B at 2 x 0.33; three active ranks move at
     * most 6.68 x (1 + 2 g) GB/s in all, which binds. */
    static uint64_t per[130][32];
    DPU_FOREACH(set, dpu, i)
    {
        for (int k = 0; k < 32; k++)
            per[i][k] = (uint64_t)i << 32 | (uint64_t)k;
        assert_int_equal(dpu_prepare_xfer(dpu, per[i]), DPU_OK);
    }
    assert_int_equal(dpu_push_xfer(set, DPU_XFER_TO_DPU, DPU_MRAM_HEAP_POINTER_NAME, 256, 256, DPU_XFER_DEFAULT),
                     DPU_OK);
    assert_int_equal(nm_pim_last_xfer(set, &x), DPU_OK);
    assert_int_equal(x.kind, NM_PIM_XFER_PARALLEL);
    assert_int_equal(x.nr_dpus, 130);
    assert_int_equal(x.nr_ranks, 3);
    assert_near(x.modeled_seconds, 130.0 * 256 / (6.68e9 * (1 + 2 * G)), 1e-15);
    /* Buffers were reset: a push without prepare moves nothing. */
    assert_int_equal(dpu_push_xfer(set, DPU_XFER_FROM_DPU, DPU_MRAM_HEAP_POINTER_NAME, 256, 256, DPU_XFER_DEFAULT),
                     DPU_OK);
    assert_int_equal(nm_pim_last_xfer(set, &x), DPU_OK);
    assert_int_equal(x.nr_dpus, 0);
    assert_int_equal(x.bytes, 0);
    /* Read back with NO_RESET, only from the DPUs that prepared a buffer. */
    static uint64_t got[130][32];
    memset(got, 0, sizeof(got));
    DPU_FOREACH(set, dpu, i)
    {
        if (i % 2 == 0)
            dpu_prepare_xfer(dpu, got[i]);
    }
    assert_int_equal(dpu_push_xfer(set, DPU_XFER_FROM_DPU, DPU_MRAM_HEAP_POINTER_NAME, 256, 256, DPU_XFER_NO_RESET),
                     DPU_OK);
    assert_int_equal(nm_pim_last_xfer(set, &x), DPU_OK);
    assert_int_equal(x.nr_dpus, 65);
    /* 32 + 32 + 1 DPUs: one DPU alone moves 256 B at 0.12 GB/s, 32 at
     * 32 x 0.12 < 4.74; the host bound over three ranks binds. */
    assert_near(x.modeled_seconds, 65.0 * 256 / (4.74e9 * (1 + 2 * G)), 1e-15);
    for (i = 0; i < 130; i++) {
        if (i % 2 == 0)
            assert_memory_equal(got[i], per[i], 256);
        else
            assert_int_equal(got[i][0], 0);
    }
    assert_int_equal(dpu_push_xfer(set, DPU_XFER_FROM_DPU, DPU_MRAM_HEAP_POINTER_NAME, 256, 256, DPU_XFER_DEFAULT),
                     DPU_OK);
    assert_int_equal(nm_pim_last_xfer(set, &x), DPU_OK);
    assert_int_equal(x.nr_dpus, 65); /* NO_RESET kept them */
    /* Parallel push to a WRAM symbol, 4-byte rules. */
    DPU_FOREACH(set, dpu, i) dpu_prepare_xfer(dpu, per[i]);
    assert_int_equal(dpu_push_xfer(set, DPU_XFER_TO_DPU, "res", 4, 12, DPU_XFER_DEFAULT), DPU_OK);
    DPU_FOREACH(set, dpu, i) dpu_prepare_xfer(dpu, per[i]);
    assert_int_equal(dpu_push_xfer(set, DPU_XFER_TO_DPU, "res", 2, 8, DPU_XFER_DEFAULT), DPU_ERR_INVALID_WRAM_ACCESS);

    /* Broadcast. */
    uint64_t bc[4] = {11, 22, 33, 44};
    assert_int_equal(dpu_broadcast_to(set, "mvar", 8, bc, sizeof(bc), DPU_XFER_DEFAULT), DPU_OK);
    assert_int_equal(nm_pim_last_xfer(set, &x), DPU_OK);
    assert_int_equal(x.kind, NM_PIM_XFER_BROADCAST);
    assert_int_equal(x.bytes, 130u * 32u);
    assert_near(x.modeled_seconds, 130.0 * 32 / (16.88e9 * (1 + 2 * G)), 1e-15);
    DPU_FOREACH(set, dpu)
    {
        assert_int_equal(dpu_copy_from(dpu, "mvar", 8, back, 32), DPU_OK);
        assert_memory_equal(back, bc, 32);
    }

    /* Totals, peek, resident bytes. */
    nm_pim_totals t;
    assert_int_equal(nm_pim_get_totals(set, &t), DPU_OK);
    assert_true(t.xfers > 5 && t.xfer_bytes_to_dpu > 0 && t.xfer_bytes_from_dpu > 0);
    assert_true(t.modeled_xfer_seconds > 0);
    assert_int_equal(nm_pim_reset_totals(set), DPU_OK);
    assert_int_equal(nm_pim_get_totals(set, &t), DPU_OK);
    assert_int_equal(t.xfers, 0);
    DPU_FOREACH(set, dpu, i)
    {
        uint64_t w[2];
        assert_int_equal(nm_pim_mram_peek(dpu, 512 + 256, w, 16), DPU_OK);
        assert_int_equal(w[0], per[i][0]);
        assert_int_equal(nm_pim_mram_peek(dpu, NM_PIM_MRAM_SIZE - 8, w, 16), DPU_ERR_INVALID_MRAM_ACCESS);
    }
    assert_int_equal(nm_pim_mram_peek(set, 0, back, 8), DPU_ERR_INVALID_DPU_SET);
    /* One 64 KiB chunk for the low MRAM, one for the write near the end. */
    assert_int_equal(nm_pim_mram_resident_bytes(set), 130u * 2u * 65536u);

    /* Different programs in one set. */
    DPU_FOREACH(set, dpu) { break; }
    assert_int_equal(dpu_load(dpu, "pim_test_fixed", NULL), DPU_OK);
    assert_int_equal(dpu_copy_to(set, "arg0", 0, &v, 8), DPU_ERR_DIFFERENT_DPU_PROGRAMS);
    assert_int_equal(dpu_free(set), DPU_OK);
}

/* The transfer model from one DPU to all 40 ranks (docs/pim-machine.md,
 * "Transfer model"): exact modeled times for each regime. */
static double push_seconds(struct dpu_set_t set, uint32_t n, uint32_t bytes, bool to_dpu)
{
    uint8_t *buf = calloc(n, bytes); /* a buffer per DPU: host threads copy DPUs in parallel */
    assert_non_null(buf);
    struct dpu_set_t dpu;
    uint32_t i;
    DPU_FOREACH(set, dpu, i)
    {
        if (i < n)
            assert_int_equal(dpu_prepare_xfer(dpu, buf + (size_t)i * bytes), DPU_OK);
    }
    assert_int_equal(dpu_push_xfer(set, to_dpu ? DPU_XFER_TO_DPU : DPU_XFER_FROM_DPU, DPU_MRAM_HEAP_POINTER_NAME, 0,
                                   bytes, DPU_XFER_DEFAULT),
                     DPU_OK);
    nm_pim_xfer_stats x;
    assert_int_equal(nm_pim_last_xfer(set, &x), DPU_OK);
    assert_int_equal(x.nr_dpus, n);
    assert_int_equal(x.bytes, (uint64_t)n * bytes);
    free(buf);
    return x.modeled_seconds;
}

static void test_transfer_model(void **state)
{
    (void)state;
    struct dpu_set_t set;
    assert_int_equal(dpu_alloc(4, "rank_growth=2", &set), DPU_ERR_INVALID_PROFILE);
    assert_int_equal(dpu_alloc(4, "rank_to=0", &set), DPU_ERR_INVALID_PROFILE);
    assert_int_equal(dpu_alloc(4, "serial_from=-1", &set), DPU_ERR_INVALID_PROFILE);

    assert_int_equal(dpu_alloc(NM_PIM_MAX_DPUS, "threads=2", &set), DPU_OK);
    assert_int_equal(dpu_load(set, "pim_test", NULL), DPU_OK);
    /* One DPU: a push is as fast as a serial copy. */
    assert_near(push_seconds(set, 1, 2048, true), 2048 / 0.33e9, 1e-15);
    assert_near(push_seconds(set, 1, 2048, false), 2048 / 0.12e9, 1e-15);
    /* Part of a rank: k x the one-DPU bandwidth until the rank's is reached. */
    assert_near(push_seconds(set, 16, 2048, true), 16.0 * 2048 / (16 * 0.33e9), 1e-15);
    assert_near(push_seconds(set, 32, 2048, true), 32.0 * 2048 / 6.68e9, 1e-15);
    assert_near(push_seconds(set, 64, 2048, false), 64.0 * 2048 / 4.74e9, 1e-15);
    /* Whole ranks: the host-side bound, not 40 x one rank. */
    for (uint32_t ranks = 2; ranks <= 40; ranks *= 2) {
        double t = push_seconds(set, 64 * ranks, 2048, true);
        assert_near(t, 64.0 * ranks * 2048 / (6.68e9 * (1 + G * (ranks - 1))), 1e-15);
    }
    double t40 = push_seconds(set, NM_PIM_MAX_DPUS, 2048, true);
    double gbs = 2560.0 * 2048 / t40 / 1e9;
    assert_true(gbs > 16.5 && gbs < 16.8); /* 6.68 x 2.49, where ranks in parallel gave 267 */
    assert_near(push_seconds(set, NM_PIM_MAX_DPUS, 2048, false), 2560.0 * 2048 / (4.74e9 * (1 + 39 * G)), 1e-15);
    /* Broadcast: bytes delivered; one DPU as a serial copy, all ranks host-bound. */
    uint64_t b[256] = {0};
    struct dpu_set_t rank;
    uint32_t r;
    DPU_RANK_FOREACH(set, rank, r)
    {
        if (r == 0) {
            struct dpu_set_t dpu;
            DPU_FOREACH(rank, dpu)
            {
                assert_int_equal(dpu_broadcast_to(dpu, DPU_MRAM_HEAP_POINTER_NAME, 0, b, 2048, DPU_XFER_DEFAULT),
                                 DPU_OK);
                break;
            }
        }
    }
    nm_pim_xfer_stats x;
    assert_int_equal(nm_pim_last_xfer(set, &x), DPU_OK);
    assert_near(x.modeled_seconds, 2048 / 0.33e9, 1e-15);
    assert_int_equal(dpu_broadcast_to(set, DPU_MRAM_HEAP_POINTER_NAME, 0, b, 2048, DPU_XFER_DEFAULT), DPU_OK);
    assert_int_equal(nm_pim_last_xfer(set, &x), DPU_OK);
    assert_near(x.modeled_seconds, 2560.0 * 2048 / (16.88e9 * (1 + 39 * G)), 1e-15);
    /* Serial copies stay one DPU after another, whatever the ranks. */
    assert_int_equal(dpu_copy_to(set, DPU_MRAM_HEAP_POINTER_NAME, 0, b, 2048), DPU_OK);
    assert_int_equal(nm_pim_last_xfer(set, &x), DPU_OK);
    assert_near(x.modeled_seconds, 2560.0 * 2048 / 0.33e9, 1e-12);
    assert_int_equal(dpu_free(set), DPU_OK);

    /* Another system from its own calibration points: Friesel et al.'s one-rank
     * push (5.3014 GB/s) gives their 40-rank point (13.2003) back. */
    assert_int_equal(dpu_alloc(NM_PIM_MAX_DPUS, "threads=2,rank_to=5.3014", &set), DPU_OK);
    assert_int_equal(dpu_load(set, "pim_test", NULL), DPU_OK);
    gbs = 2560.0 * 2048 / push_seconds(set, NM_PIM_MAX_DPUS, 2048, true) / 1e9;
    assert_true(fabs(gbs - 13.2003) < 1e-4);
    assert_int_equal(dpu_free(set), DPU_OK);
    /* rank_growth=1: ranks fully in parallel (the model before issue 15). */
    assert_int_equal(dpu_alloc(NM_PIM_MAX_DPUS, "threads=2,rank_growth=1", &set), DPU_OK);
    assert_int_equal(dpu_load(set, "pim_test", NULL), DPU_OK);
    assert_near(push_seconds(set, NM_PIM_MAX_DPUS, 2048, true), 64.0 * 2048 / 6.68e9, 1e-15);
    assert_int_equal(dpu_free(set), DPU_OK);
}

static void test_stats_api(void **state)
{
    (void)state;
    struct dpu_set_t set, dpu;
    assert_int_equal(dpu_alloc(2, NULL, &set), DPU_OK);
    assert_int_equal(dpu_load(set, "pim_test", NULL), DPU_OK);
    assert_int_equal(nm_pim_set_tasklets(set, 4), DPU_OK);
    pim_test_set_args(set, M_COPY, 5, 0, 0);
    assert_int_equal(dpu_launch(set, DPU_SYNCHRONOUS), DPU_OK);
    nm_pim_dpu_stats ds;
    nm_pim_tasklet_stats ts;
    nm_pim_fault_info fi;
    assert_int_equal(nm_pim_get_dpu_stats(set, &ds), DPU_ERR_INVALID_DPU_SET);
    DPU_FOREACH(set, dpu)
    {
        assert_int_equal(nm_pim_get_dpu_stats(dpu, &ds), DPU_OK);
        assert_int_equal(ds.nr_tasklets, 4);
        assert_int_equal(ds.dma_reads, 4);
        assert_int_equal(ds.dma_writes, 4);
        assert_int_equal(ds.dma_read_bytes, 4 * PIM_TEST_BLOCK);
        assert_int_equal(ds.dma_write_bytes, 4 * PIM_TEST_BLOCK);
        assert_int_equal(ds.launches, 1);
        assert_true(ds.wram_high_water >= ds.wram_static_bytes + 4 * PIM_TEST_BLOCK);
        assert_true(ds.instructions >= 4 * (PIM_TEST_BLOCK / 8 * 4));
        assert_true(ds.dma_busy_cycles >= 4 * (77 + 1024) + 4 * (61 + 1024) - 8);
        for (uint32_t t = 0; t < 4; t++) {
            assert_int_equal(nm_pim_get_tasklet_stats(dpu, t, &ts), DPU_OK);
            assert_int_equal(ts.dma_reads, 1);
            assert_int_equal(ts.wram_alloc_bytes, PIM_TEST_BLOCK);
            assert_true(ts.cycles > 0 && ts.cycles <= ds.cycles);
        }
        assert_int_equal(nm_pim_get_tasklet_stats(dpu, 4, &ts), DPU_ERR_INVALID_THREAD_ID);
        assert_int_equal(nm_pim_get_tasklet_stats(dpu, 0, NULL), DPU_ERR_INVALID_ARGUMENT);
        assert_int_equal(nm_pim_get_fault(dpu, &fi), DPU_OK);
        assert_int_equal(fi.code, NM_PIM_FAULT_NONE);
    }
    assert_int_equal(dpu_free(set), DPU_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alloc_free),
        cmocka_unit_test(test_load_launch),
        cmocka_unit_test(test_transfers),
        cmocka_unit_test(test_transfer_model),
        cmocka_unit_test(test_stats_api),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
