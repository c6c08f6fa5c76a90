/* The UPMEM SDK surface of plain UPMEM C programs (docs/pim-machine.md, "API
 * against the SDK"): DPU-side libraries and hardware semantics (dpu/sdk.c),
 * host calls and their refusals, bad program files. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dpu/sdk_modes.h"
#include "nearmem/pim/host.h"
#include "nm_test.h"

#define PROG(name) PIM_DPU_DIR "/" name
enum { NDPUS = 4 };

static struct dpu_set_t g_set;
static struct dpu_program_t *g_prog;
static uint8_t g_area[SDK_AREA];

static int setup(void **state)
{
    (void)state;
    if (dpu_alloc(NDPUS, "threads=2", &g_set) != DPU_OK || dpu_load(g_set, PROG("pim_sdk"), &g_prog) != DPU_OK)
        return -1;
    for (int i = 0; i < SDK_AREA; i++)
        g_area[i] = (uint8_t)(i * 7 + 1);
    return dpu_broadcast_to(g_set, "area", 0, g_area, SDK_AREA, DPU_XFER_DEFAULT) == DPU_OK ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return dpu_free(g_set) == DPU_OK ? 0 : -1;
}

/* Runs `mode` on every DPU; returns DPU 0's results. */
static dpu_error_t run(uint32_t mode, uint32_t arg, int64_t res[32])
{
    int64_t zero[32] = {0};
    dpu_error_t e;
    if ((e = dpu_broadcast_to(g_set, "mode", 0, &mode, 4, DPU_XFER_DEFAULT)) != DPU_OK ||
        (e = dpu_broadcast_to(g_set, "arg", 0, &arg, 4, DPU_XFER_DEFAULT)) != DPU_OK ||
        (e = dpu_broadcast_to(g_set, "res", 0, zero, sizeof(zero), DPU_XFER_DEFAULT)) != DPU_OK)
        return e;
    e = dpu_launch(g_set, DPU_SYNCHRONOUS);
    if (res)
        assert_int_equal(dpu_copy_from(nm_pim_set_dpu(g_set, 0), "res", 0, res, 32 * 8), DPU_OK);
    return e;
}

static void area_back(uint8_t *out)
{
    assert_int_equal(dpu_copy_from(nm_pim_set_dpu(g_set, 0), "area", 0, out, SDK_AREA), DPU_OK);
}

static void test_seqread(void **state)
{
    (void)state;
    int64_t r[32];
    for (uint32_t start = 0; start < 9; start += 3) {
        assert_int_equal(run(SDK_SEQREAD, start, r), DPU_OK);
        int64_t sum = 0;
        for (uint32_t i = start; i < start + 3000; i++)
            sum += g_area[i];
        assert_int_equal(r[0], sum);
        assert_int_equal(r[1], start + 3000);
        uint32_t v;
        memcpy(&v, &g_area[64], 4);
        assert_int_equal(r[2], v);
    }
}

static void test_unaligned(void **state)
{
    (void)state;
    int64_t r[32];
    uint8_t back[SDK_AREA];
    for (uint32_t off = 0; off < 8; off++) {
        assert_int_equal(run(SDK_UNALIGNED, off, r), DPU_OK);
        int64_t sum = 0;
        for (uint32_t i = off; i < off + 13; i++)
            sum += g_area[i];
        assert_int_equal(r[0], sum);
        area_back(back);
        for (uint32_t i = 1024; i < 1064; i++) {
            uint8_t want = i >= 1024 + off && i < 1024 + off + 5 ? (uint8_t)(0xA0 + off + (i - 1024 - off)) : g_area[i];
            assert_int_equal(back[i], want);
        }
        assert_int_equal(dpu_broadcast_to(g_set, "area", 0, g_area, SDK_AREA, DPU_XFER_DEFAULT), DPU_OK);
    }
}

/* Hardware semantics (docs: "Hardware semantics"): low 3 bits of DMA
 * addresses ignored; the length is n/8 - 1 in 8 bits; warnings counted. */
static void test_dma_hw(void **state)
{
    (void)state;
    int64_t r[32];
    assert_int_equal(run(SDK_DMA_HW, 0, r), DPU_OK);
    uint64_t w;
    memcpy(&w, &g_area[8], 8);
    assert_int_equal((uint64_t)r[0], w);
    memcpy(&w, &g_area[16], 8);
    assert_int_equal((uint64_t)r[1], w);
    assert_int_equal(r[2], 0); /* 12 bytes moved 8: the next word untouched */
    uint8_t back[SDK_AREA];
    area_back(back);
    for (int i = 0; i < 256; i++) { /* the 0-byte write wrote 2048 bytes */
        memcpy(&w, &back[2048 + 8 * i], 8);
        assert_int_equal(w, 0xC0FFEE00u + (uint64_t)i);
    }
    assert_memory_equal(back + 4096, g_area + 4096, SDK_AREA - 4096);
    nm_pim_dpu_stats st;
    nm_pim_tasklet_stats ts;
    assert_int_equal(nm_pim_get_dpu_stats(nm_pim_set_dpu(g_set, 0), &st), DPU_OK);
    assert_int_equal(nm_pim_get_tasklet_stats(nm_pim_set_dpu(g_set, 0), 0, &ts), DPU_OK);
    assert_int_equal(st.warn_dma_unaligned, 2);
    assert_int_equal(st.warn_dma_size, 2);
    assert_int_equal(ts.warn_dma_size, 2);
    assert_int_equal(ts.dma_write_bytes, 2048);
    assert_int_equal(dpu_broadcast_to(g_set, "area", 0, g_area, SDK_AREA, DPU_XFER_DEFAULT), DPU_OK);
}

static void test_direct_mram(void **state)
{
    (void)state;
    int64_t r[32];
    assert_int_equal(run(SDK_DIRECT, 0, r), DPU_OK);
    assert_int_equal(r[0], 0x12 + 0x3456);
    assert_int_equal(r[1], 0x789abcde);
    assert_int_equal((uint64_t)r[2], 0x0123456789abcdefull);
    assert_int_equal(r[3], 15);
    assert_int_equal(r[4], 7 + 300 + 70000 - 3);
    assert_int_equal(r[5], 0x12 + 0xef);
    assert_int_equal((uint64_t)r[6], 0x0123456789abcdefull);
    assert_int_equal(r[7], 0x5a + g_area[4096 + 64 + 19]);
    assert_int_equal(r[8], 0x3333);
    uint8_t back[SDK_AREA];
    area_back(back);
    assert_int_equal(back[4096], g_area[4096]); /* neighbours of the byte store kept */
    assert_int_equal(back[4096 + 1], 0x12);
    uint32_t u;
    memcpy(&u, &back[4096 + 6], 4);
    assert_int_equal(u, 0x789abcde);
    for (int i = 0; i < 19; i++)
        assert_int_equal(back[4096 + 64 + i], 0x5a);
    nm_pim_dpu_stats st;
    assert_int_equal(nm_pim_get_dpu_stats(nm_pim_set_dpu(g_set, 0), &st), DPU_OK);
    /* Direct accesses are DMAs (the compiler may still forward a stored value
     * to a later load, as the DPU's compiler does). */
    assert_true(st.dma_reads >= 6);
    assert_true(st.dma_writes >= 8);
    assert_int_equal(st.warn_dma_size + st.warn_dma_unaligned, 0);
    assert_int_equal(dpu_broadcast_to(g_set, "area", 0, g_area, SDK_AREA, DPU_XFER_DEFAULT), DPU_OK);
}

static void test_sync(void **state)
{
    (void)state;
    int64_t r[32];
    assert_int_equal(run(SDK_HANDSHAKE, 0, r), DPU_OK);
    assert_int_equal(r[0], 1);   /* the chain ran in tasklet order */
    assert_int_equal(r[1], 0);   /* first waiter for tasklet 3: notified */
    assert_int_equal(r[2], 101); /* second one: EALREADY, errno too */
    assert_int_equal(run(SDK_SEM, 0, r), DPU_OK);
    assert_int_equal(r[0], 7);
    assert_int_equal(r[1], 0);
    assert_int_equal(run(SDK_GROUPS, 0, r), DPU_OK);
    assert_int_equal(r[0], 8 * 100); /* mutex id 0 excludes */
    assert_int_equal(r[1], 8);       /* run-time-initialised barriers reset their count */
    assert_int_equal(r[2], 0);
    assert_true(r[3] >= 0 && r[3] < 8); /* an atomic-bit address: 0..(bits used) */
    nm_pim_dpu_stats st;
    assert_int_equal(nm_pim_get_dpu_stats(nm_pim_set_dpu(g_set, 0), &st), DPU_OK);
    assert_true(st.lock_wait_cycles > 0);
    assert_true(st.sync_wait_cycles > 0);
}

static void test_alloc_perf(void **state)
{
    (void)state;
    int64_t r[32];
    assert_int_equal(run(SDK_ALLOC, 0, r), DPU_OK);
    for (int i = 0; i < 6; i++)
        assert_int_equal(r[i], 1);
    assert_int_equal(r[6], 16);
    assert_int_equal(r[7], 1);
    assert_int_equal(run(SDK_PERF, 0, r), DPU_OK);
    assert_true(r[0] >= 77 + 8); /* at least the DMA */
    assert_int_equal(r[1], 350000000);
    assert_int_equal(r[2], 1);
}

static char *log_of(struct dpu_set_t dpu, dpu_error_t *e)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    *e = dpu_log_read(dpu, f);
    fclose(f);
    return text;
}

static void test_printf(void **state)
{
    (void)state;
    dpu_error_t e;
    assert_int_equal(run(SDK_PRINT, 0, NULL), DPU_OK);
    char *t = log_of(nm_pim_set_dpu(g_set, 2), &e);
    assert_int_equal(e, DPU_OK);
    assert_string_equal(t, "puts\n!");
    free(t);
    assert_int_equal(run(SDK_PRINT, 3, NULL), DPU_OK);
    t = log_of(nm_pim_set_dpu(g_set, 1), &e);
    assert_int_equal(e, DPU_OK);
    assert_string_equal(t, "line 0 of 3\nline 1 of 3\nline 2 of 3\n");
    free(t);
    /* More than STDOUT_BUFFER_INIT(256) holds: what fits, then the error. */
    assert_int_equal(run(SDK_PRINT, 100, NULL), DPU_OK);
    t = log_of(nm_pim_set_dpu(g_set, 0), &e);
    assert_int_equal(e, DPU_ERR_LOG_BUFFER_TOO_SMALL);
    assert_true(strncmp(t, "line 0 of 100\nline 1 of 100\n", 28) == 0);
    assert_non_null(strstr(t, "more bytes than its 256-byte log holds"));
    free(t);
    t = log_of(g_set, &e); /* a set of 4 DPUs */
    assert_int_equal(e, DPU_ERR_INVALID_DPU_SET);
    free(t);
}

static void expect_fault(uint32_t mode, nm_pim_fault_code code, uint32_t tasklet, const char *msg)
{
    assert_int_equal(run(mode, 0, NULL), DPU_ERR_DPU_FAULT);
    nm_pim_fault_info fi;
    assert_int_equal(nm_pim_get_fault(nm_pim_set_dpu(g_set, 3), &fi), DPU_OK);
    assert_int_equal(fi.code, code);
    assert_int_equal(fi.tasklet, tasklet);
    assert_non_null(strstr(fi.message, msg));
}

static void test_faults(void **state)
{
    (void)state;
    expect_fault(SDK_ASSERT, NM_PIM_FAULT_KERNEL, 5, "t != 5");
    expect_fault(SDK_OUT_OF_MRAM, NM_PIM_FAULT_MRAM_BOUNDS, 3, "outside MRAM");
    expect_fault(SDK_HALT, NM_PIM_FAULT_KERNEL, 2, "halt");
    assert_int_equal(run(SDK_NOTHING, 0, NULL), DPU_OK); /* and the DPUs run again */
}

static dpu_error_t count_ranks(struct dpu_set_t set, uint32_t idx, void *arg)
{
    uint32_t n;
    dpu_get_nr_dpus(set, &n);
    ((uint32_t *)arg)[0]++;
    ((uint32_t *)arg)[1] += n + idx * 1000;
    return DPU_OK;
}

static void test_host_calls(void **state)
{
    (void)state;
    /* Symbols. */
    struct dpu_symbol_t s_res, s_area, s_init, s_heap;
    assert_int_equal(dpu_get_symbol(g_prog, "res", &s_res), DPU_OK);
    assert_int_equal(dpu_get_symbol(g_prog, "area", &s_area), DPU_OK);
    assert_int_equal(dpu_get_symbol(g_prog, "init_words", &s_init), DPU_OK);
    assert_int_equal(dpu_get_symbol(g_prog, DPU_MRAM_HEAP_POINTER_NAME, &s_heap), DPU_OK);
    assert_int_equal(dpu_get_symbol(g_prog, "no_such_symbol", &s_res), DPU_ERR_UNKNOWN_SYMBOL);
    assert_true(s_res.address < 0x10000);
    assert_int_equal(s_res.size, 32 * 8);
    /* MRAM variables (area, init_words, the 256-byte stdout buffer) are laid
     * out from 0x08000000, 8-byte aligned; the heap follows them. */
    assert_int_equal(s_area.size, SDK_AREA);
    assert_int_equal(s_init.size, 32);
    assert_true(s_area.address >= 0x08000000u && s_area.address % 8 == 0);
    assert_true(s_init.address >= 0x08000000u && s_init.address % 8 == 0);
    assert_true(s_area.address + SDK_AREA <= s_init.address || s_init.address + 32 <= s_area.address);
    assert_int_equal(s_heap.address, 0x08000000u + SDK_AREA + 32 + 256);
    assert_int_equal(s_heap.size, (64u << 20) - (SDK_AREA + 32 + 256));
    uint64_t w[4];
    assert_int_equal(dpu_copy_from_symbol(nm_pim_set_dpu(g_set, 1), s_init, 8, w, 16), DPU_OK);
    assert_int_equal(w[0], 0x2222);
    uint64_t v = 77;
    assert_int_equal(dpu_copy_to_symbol(nm_pim_set_dpu(g_set, 1), s_res, 8, &v, 8), DPU_OK);
    int64_t r1[32];
    assert_int_equal(dpu_copy_from(nm_pim_set_dpu(g_set, 1), "res", 0, r1, sizeof(r1)), DPU_OK);
    assert_int_equal(r1[1], 77);
    assert_int_equal(dpu_copy_to_symbol(g_set, s_res, 4, &v, 8), DPU_OK);
    assert_int_equal(dpu_copy_to_symbol(g_set, s_res, 252, &v, 8), DPU_ERR_INVALID_SYMBOL_ACCESS);
    assert_int_equal(dpu_copy_to(g_set, "no_such_symbol", 0, &v, 8), DPU_ERR_UNKNOWN_SYMBOL);
    /* Constants are the program's: the host reads them, cannot write them. */
    struct dpu_symbol_t s_clk;
    uint32_t clk = 0;
    assert_int_equal(dpu_get_symbol(g_prog, "CLOCKS_PER_SEC", &s_clk), DPU_OK);
    assert_int_equal(dpu_copy_from(g_set, "CLOCKS_PER_SEC", 0, &clk, 4), DPU_OK);
    assert_int_equal(clk, 350000000);
    assert_int_equal(dpu_copy_to(g_set, "CLOCKS_PER_SEC", 0, &clk, 4), DPU_ERR_INVALID_WRAM_ACCESS);
    /* Parallel transfers by symbol. */
    struct dpu_set_t dpu;
    uint32_t i;
    uint64_t bufs[NDPUS][2];
    DPU_FOREACH(g_set, dpu, i)
    {
        bufs[i][0] = 500 + i;
        bufs[i][1] = 600 + i;
        assert_int_equal(dpu_prepare_xfer(dpu, bufs[i]), DPU_OK);
    }
    assert_int_equal(dpu_push_xfer_symbol(g_set, DPU_XFER_TO_DPU, s_area, 16, 16, DPU_XFER_DEFAULT), DPU_OK);
    memset(bufs, 0, sizeof(bufs));
    DPU_FOREACH(g_set, dpu, i) assert_int_equal(dpu_prepare_xfer(dpu, bufs[i]), DPU_OK);
    assert_int_equal(dpu_push_xfer_symbol(g_set, DPU_XFER_FROM_DPU, s_area, 16, 16, DPU_XFER_DEFAULT), DPU_OK);
    for (i = 0; i < NDPUS; i++)
        assert_true(bufs[i][0] == 500 + i && bufs[i][1] == 600 + i);
    assert_int_equal(dpu_broadcast_to_symbol(g_set, s_area, 0, g_area, SDK_AREA, DPU_XFER_DEFAULT), DPU_OK);
    /* Raw MRAM, both forms of the SDK's call. */
    struct dpu_t *d2 = dpu_from_set(nm_pim_set_dpu(g_set, 2));
    assert_non_null(d2);
    assert_null(dpu_from_set(g_set));
    uint8_t raw[24] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, back[24];
    assert_int_equal(dpu_copy_to_mram(d2, 5, raw, 24), DPU_OK);
    assert_int_equal(dpu_copy_from_mram(d2, back, 5, 24, 0), DPU_OK);
    assert_memory_equal(raw, back, 24);
    assert_int_equal(dpu_copy_to_mram(d2, (64u << 20) - 8, raw, 16), DPU_ERR_INVALID_MRAM_ACCESS);
    assert_int_equal(dpu_copy_to_mram(d2, 0, raw, 8, 1), DPU_ERR_INVALID_MRAM_ACCESS);
    assert_int_equal(dpu_copy_to_mram(d2, 0, raw, 0), DPU_OK);
    assert_int_equal(dpu_broadcast_to(g_set, "area", 0, g_area, SDK_AREA, DPU_XFER_DEFAULT), DPU_OK);
    /* Callbacks: per rank, or once. */
    uint32_t acc[2] = {0, 0};
    assert_int_equal(dpu_callback(g_set, count_ranks, acc, DPU_CALLBACK_DEFAULT), DPU_OK);
    assert_true(acc[0] == 1 && acc[1] == NDPUS);
    acc[0] = acc[1] = 0;
    assert_int_equal(dpu_callback(g_set, count_ranks, acc,
                                  DPU_CALLBACK_ASYNC | DPU_CALLBACK_NONBLOCKING | DPU_CALLBACK_SINGLE_CALL),
                     DPU_OK);
    assert_true(acc[0] == 1 && acc[1] == NDPUS);
    assert_int_equal(dpu_callback(g_set, count_ranks, acc, DPU_CALLBACK_NONBLOCKING),
                     DPU_ERR_NONBLOCKING_SYNC_CALLBACK);
    /* SDK members of a set, and sets built from them. */
    assert_int_equal(g_set.kind, DPU_SET_RANKS);
    assert_int_equal(g_set.list.nr_ranks, 1);
    struct dpu_set_t built;
    memset(&built, 0, sizeof(built));
    built.kind = DPU_SET_RANKS;
    built.list.nr_ranks = 1;
    built.list.ranks = g_set.list.ranks;
    uint32_t n = 0;
    assert_int_equal(dpu_get_nr_dpus(built, &n), DPU_OK);
    assert_int_equal(n, NDPUS);
    DPU_FOREACH(g_set, dpu, i)
    {
        assert_int_equal(dpu.kind, DPU_SET_DPU);
        struct dpu_set_t one;
        memset(&one, 0, sizeof(one));
        one.kind = DPU_SET_DPU;
        one.dpu = dpu.dpu;
        assert_int_equal(nm_pim_dpu_index(one), i);
    }
    /* Asynchronous launch, then sync. */
    uint32_t mode = SDK_NOTHING;
    assert_int_equal(dpu_broadcast_to(g_set, "mode", 0, &mode, 4, DPU_XFER_ASYNC), DPU_OK);
    assert_int_equal(dpu_launch(g_set, DPU_ASYNCHRONOUS), DPU_OK);
    assert_int_equal(dpu_sync(g_set), DPU_OK);
    /* Probes: modeled kernel time between start and stop; energy is not modeled. */
    struct dpu_probe_t probe;
    double tsum = -1, e = 0;
    assert_int_equal(dpu_probe_init("energy_probe", &probe), DPU_OK);
    assert_int_equal(dpu_probe_start(&probe), DPU_OK);
    assert_int_equal(run(SDK_PERF, 0, NULL), DPU_OK);
    assert_int_equal(dpu_probe_stop(&probe), DPU_OK);
    nm_pim_launch_stats ls;
    assert_int_equal(nm_pim_last_launch(g_set, &ls), DPU_OK);
    assert_int_equal(dpu_probe_get(&probe, DPU_TIME, DPU_ACCUMULATE, &tsum), DPU_OK);
    assert_true(tsum > 0 && fabs(tsum - ls.modeled_seconds) < 1e-9);
    assert_int_equal(dpu_probe_get(&probe, DPU_ENERGY, DPU_AVERAGE, &e), DPU_ERR_SYSTEM);
    assert_int_equal(dpu_probe_stop(&probe), DPU_ERR_INVALID_ARGUMENT); /* not running */
    /* A program file's tasklet count is fixed. */
    assert_int_equal(nm_pim_set_tasklets(g_set, 8), DPU_OK);
    assert_int_equal(nm_pim_set_tasklets(g_set, 4), DPU_ERR_INVALID_THREAD_ID);
}

static uint8_t *read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(*n);
    assert_int_equal(fread(b, 1, *n, f), *n);
    fclose(f);
    return b;
}

DPU_INCBIN(sdk_incbin, PROG("pim_sdk"));

static void test_bad_programs(void **state)
{
    (void)state;
    struct dpu_set_t set;
    assert_int_equal(dpu_alloc(2, "threads=2", &set), DPU_OK);
    assert_int_equal(dpu_load(set, PROG("no_such_program"), NULL), DPU_ERR_ELF_NO_SUCH_FILE);
    assert_int_equal(dpu_load(set, "no_such_program_either", NULL), DPU_ERR_ELF_NO_SUCH_FILE);
    assert_int_equal(dpu_load(set, PIM_DPU_DIR, NULL), DPU_ERR_ELF_INVALID_FILE); /* a directory */
    assert_int_equal(dpu_load(set, PIM_TEST_SOURCE, NULL), DPU_ERR_ELF_INVALID_FILE); /* C source */
    assert_int_equal(dpu_load(set, PIM_TEST_SO_PATH, NULL), DPU_ERR_ELF_INVALID_FILE); /* a shared object */
    assert_int_equal(dpu_launch(set, DPU_SYNCHRONOUS), DPU_ERR_NO_PROGRAM_LOADED);
    /* From memory: the file, then corrupted copies of it. */
    size_t n;
    uint8_t *b = read_file(PROG("pim_sdk"), &n);
    struct dpu_program_t *p = NULL;
    assert_int_equal(dpu_load_from_memory(set, b, n, &p), DPU_OK);
    assert_non_null(p);
    struct dpu_symbol_t sym;
    assert_int_equal(dpu_get_symbol(p, "area", &sym), DPU_OK);
    assert_ptr_equal(nm_pim_loaded_program(set), p);
    uint8_t *magic = memmem(b, n, "NMDPUPRG", 8);
    assert_non_null(magic);
    uint32_t *hdr = (uint32_t *)(magic + 8);
    hdr[1] = 30; /* NR_TASKLETS */
    assert_int_equal(dpu_load_from_memory(set, b, n, NULL), DPU_ERR_INVALID_THREAD_ID);
    hdr[1] = 8;
    hdr[0] = 999; /* ABI version */
    assert_int_equal(dpu_load_from_memory(set, b, n, NULL), DPU_ERR_ELF_INVALID_FILE);
    hdr[0] = 1;
    magic[0] = 'X';
    assert_int_equal(dpu_load_from_memory(set, b, n, NULL), DPU_ERR_ELF_INVALID_FILE);
    assert_int_equal(dpu_load_from_memory(set, b, 40, NULL), DPU_ERR_ELF_INVALID_FILE); /* truncated */
    assert_int_equal(dpu_load_from_memory(set, NULL, 40, NULL), DPU_ERR_INVALID_ARGUMENT);
    free(b);
    /* Embedded in the binary. */
    assert_int_equal(dpu_load_from_incbin(set, &sdk_incbin, NULL), DPU_OK);
    assert_int_equal(dpu_free(set), DPU_OK);
    /* The allocation asks for 4 tasklets; the program was built for 8. */
    assert_int_equal(dpu_alloc(1, "tasklets=4", &set), DPU_OK);
    assert_int_equal(dpu_load(set, PROG("pim_sdk"), NULL), DPU_ERR_INVALID_THREAD_ID);
    assert_int_equal(dpu_free(set), DPU_OK);
    assert_int_equal(dpu_alloc(1, "tasklets=8", &set), DPU_OK);
    assert_int_equal(dpu_load(set, PROG("pim_sdk"), NULL), DPU_OK);
    assert_int_equal(dpu_free(set), DPU_OK);
    assert_int_equal(dpu_alloc(1, "tasklets=25", &set), DPU_ERR_INVALID_PROFILE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seqread),    cmocka_unit_test(test_unaligned),   cmocka_unit_test(test_dma_hw),
        cmocka_unit_test(test_direct_mram), cmocka_unit_test(test_sync),       cmocka_unit_test(test_alloc_perf),
        cmocka_unit_test(test_printf),     cmocka_unit_test(test_faults),      cmocka_unit_test(test_host_calls),
        cmocka_unit_test(test_bad_programs),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
