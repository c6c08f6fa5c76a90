/* The compiler's per-block costing (issue 15; docs/pim-machine.md,
 * "Costing"): known instruction mixes (tests/pim/dpu/cost.c, built by
 * nearmem-dpu-cc) cost exactly what the cost table (src/pim/dpucc/
 * nm_dpu_cost.h) predicts, the machine turns them into modeled time exactly
 * as nm_pim_charge, the same source built twice costs the same, and a
 * division by zero stops the DPU instead of the host.
 *
 * Each mix runs n = N1 and n = N2 iterations; the difference in costed
 * instructions removes everything outside the loop and must equal the sum
 * of the per-iteration predictions below, which name the IR each loop body
 * compiles to (checked by hand against the pass's input, see the comments;
 * a different LLVM could change that IR and make this test fail loudly). */
#include <stdio.h>
#include <string.h>

#include "dpu/cost_modes.h"
#include "nearmem/pim/host.h"
#include "nm_dpu_cost.h"
#include "nm_test.h"

#define PROG(name) PIM_DPU_DIR "/" name
enum { N1 = 10, N2 = 1010 };

static uint32_t xs[COST_TABLE];
static uint64_t ls[COST_TABLE];
static float fs[COST_TABLE];
static double ds[COST_TABLE];

typedef struct result {
    nm_pim_dpu_stats dpu;
    nm_pim_tasklet_stats t0;
    uint64_t out0;
} result;

static struct dpu_set_t load(const char *prog, uint32_t nr_dpus)
{
    struct dpu_set_t set;
    assert_int_equal(dpu_alloc(nr_dpus, "threads=1", &set), DPU_OK);
    assert_int_equal(dpu_load(set, prog, NULL), DPU_OK);
    assert_int_equal(dpu_broadcast_to(set, "xs", 0, xs, sizeof(xs), DPU_XFER_DEFAULT), DPU_OK);
    assert_int_equal(dpu_broadcast_to(set, "ls", 0, ls, sizeof(ls), DPU_XFER_DEFAULT), DPU_OK);
    assert_int_equal(dpu_broadcast_to(set, "fs", 0, fs, sizeof(fs), DPU_XFER_DEFAULT), DPU_OK);
    assert_int_equal(dpu_broadcast_to(set, "ds", 0, ds, sizeof(ds), DPU_XFER_DEFAULT), DPU_OK);
    assert_int_equal(dpu_broadcast_to(set, "area", 0, ls, sizeof(ls), DPU_XFER_DEFAULT), DPU_OK);
    return set;
}

static dpu_error_t launch(struct dpu_set_t set, uint32_t mode, uint32_t n, uint32_t z, result *r)
{
    assert_int_equal(dpu_broadcast_to(set, "mode", 0, &mode, 4, DPU_XFER_DEFAULT), DPU_OK);
    assert_int_equal(dpu_broadcast_to(set, "n", 0, &n, 4, DPU_XFER_DEFAULT), DPU_OK);
    assert_int_equal(dpu_broadcast_to(set, "z", 0, &z, 4, DPU_XFER_DEFAULT), DPU_OK);
    dpu_error_t e = dpu_launch(set, DPU_SYNCHRONOUS);
    struct dpu_set_t d0 = nm_pim_set_dpu(set, 0);
    assert_int_equal(nm_pim_get_dpu_stats(d0, &r->dpu), DPU_OK);
    assert_int_equal(nm_pim_get_tasklet_stats(d0, 0, &r->t0), DPU_OK);
    if (e == DPU_OK)
        assert_int_equal(dpu_copy_from(d0, "out", 0, &r->out0, 8), DPU_OK);
    return e;
}

/* ---- the table's predictions, per iteration i ------------------------------ */
static uint32_t bits(uint32_t v) { return v ? 32u - (uint32_t)__builtin_clz(v) : 0; }
static uint32_t clz0(uint32_t v) { return v ? (uint32_t)__builtin_clz(v) : 32; }

/* The loop around every mix: `and` of the index, the element's address (a
 * scaled index: lsl_add), its load, the induction variable's add, and the
 * compare-and-jump of the latch. */
#define LOOP (NM_COST_ALU + NM_COST_GEP_INDEX + NM_COST_LOAD + NM_COST_ALU + NM_COST_BR_COND)

static uint64_t udiv_dyn(uint32_t a, uint32_t b)
{
    return clz0(a) > clz0(b) ? NM_COST_UDIV32_QUICK : NM_COST_UDIV32_BASE + (clz0(b) - clz0(a));
}

static uint64_t per_iter(uint32_t mode, uint32_t i, uint32_t z)
{
    uint32_t x = xs[i & (COST_TABLE - 1)];
    switch (mode) {
    case COST_EMPTY: /* a ^= x */
        return LOOP + NM_COST_ALU;
    case COST_ADD32: /* four add + four xor */
        return LOOP + 8 * NM_COST_ALU;
    case COST_MUL32: { /* a ^= x * z: __mul32 with one mul_step per bit of the smaller */
        uint32_t k = bits(x < z ? x : z);
        return LOOP + NM_COST_MUL32_BASE + (k ? k : 1) + NM_COST_ALU;
    }
    case COST_MUL16: { /* (x & 0xffff) * (z & 0xffff): and, mul16, xor (z's and is hoisted) */
        uint32_t o = (x & 0xffffu) | (z & 0xffffu);
        return LOOP + NM_COST_ALU + (o > 255 ? NM_COST_MUL16 : NM_COST_MUL16_SMALL) + NM_COST_ALU;
    }
    case COST_UDIV32: /* a ^= x / z */
        return LOOP + udiv_dyn(x, z) + NM_COST_ALU;
    case COST_SDIV32: { /* a ^= -x / z, compiled as -(x / z): sdiv (on magnitudes), neg, xor */
        uint32_t ax = (int32_t)x < 0 ? 0u - x : x, az = (int32_t)z < 0 ? 0u - z : z;
        return LOOP + udiv_dyn(ax, az) + NM_COST_SDIV32_EXTRA + 2 * NM_COST_ALU;
    }
    case COST_ADD64: /* a += l; a ^= a << 3 (the 8-aligned 64-bit load is one ld) */
        return LOOP + NM_COST_ADD64 + NM_COST_SHIFT64_LT32 + NM_COST_LOGIC64;
    case COST_FADD32:
        return LOOP + NM_COST_FADD32;
    case COST_FMUL32:
        return LOOP + NM_COST_FMUL32;
    case COST_FADD64:
        return LOOP + NM_COST_FADD64;
    case COST_FDIV64:
        return LOOP + NM_COST_FDIV64;
    case COST_CALL: /* call of two arguments; the leaf callee: xor, add, return */
        return LOOP + NM_COST_CALL + 2 * NM_COST_CALL_ARG + 2 * NM_COST_ALU + NM_COST_RET;
    case COST_HW: /* the NM_PIM_HW_MODEL function costs nothing; a ^= result */
        return LOOP + NM_COST_ALU;
    case COST_CHARGE:
        return LOOP + NM_COST_ALU;
    case COST_DMA: /* address (and, lsl_add), constant-size mram_read (0), load, 64-bit xor */
        return NM_COST_ALU + NM_COST_GEP_INDEX + NM_COST_LOAD + NM_COST_LOGIC64 + NM_COST_ALU + NM_COST_BR_COND;
    case COST_MRAM_LOAD: /* address, direct 32-bit MRAM load, xor */
        return NM_COST_ALU + NM_COST_GEP_INDEX + NM_COST_RT_MRAM_LOAD32 + NM_COST_ALU + NM_COST_ALU + NM_COST_BR_COND;
    default:
        fail();
        return 0;
    }
}

/* Instructions the machine charges per iteration besides the costed ones. */
static uint64_t machine_per_iter(uint32_t mode)
{
    switch (mode) {
    case COST_HW: return 1;     /* nm_pim_hw_exec: one unit instruction */
    case COST_CHARGE: return 7; /* nm_pim_charge(7) */
    case COST_DMA: case COST_MRAM_LOAD: return 1; /* the ldma (instr_dma) */
    default: return 0;
    }
}

static uint64_t predict(uint32_t mode, uint32_t n, uint32_t z)
{
    uint64_t s = 0;
    for (uint32_t i = 0; i < n; i++)
        s += per_iter(mode, i, z);
    return s;
}

static void fill_inputs(void)
{
    for (uint32_t i = 0; i < COST_TABLE; i++) {
        /* widths from 1 to 32 bits, and a few zeros: every k and s occurs */
        xs[i] = i % 9 == 4 ? 0 : (uint32_t)((i * 2654435761u) >> (i % 32)) | 1u;
        ls[i] = 0x0123456789abcdefull * (i + 1);
        fs[i] = 1.0f + (float)i / 64.0f;
        ds[i] = 1.0 + (double)i / 128.0;
    }
}

/* Difference between N2 and N1 iterations, against the prediction; and,
 * with one tasklet, the cycles: 11 per instruction plus the DMA latencies. */
static void check_mix(struct dpu_set_t set, uint32_t mode, uint32_t z, double dma_cycles_per_iter)
{
    result a, b;
    assert_int_equal(launch(set, mode, N1, z, &a), DPU_OK);
    assert_int_equal(launch(set, mode, N2, z, &b), DPU_OK);
    uint64_t want = predict(mode, N2, z) - predict(mode, N1, z);
    uint64_t got = b.dpu.costed_instructions - a.dpu.costed_instructions;
    if (got != want)
        fprintf(stderr, "mode %u z %u: costed %llu, table predicts %llu\n", mode, z, (unsigned long long)got,
                (unsigned long long)want);
    assert_int_equal(got, want);
    uint64_t machine = machine_per_iter(mode) * (N2 - N1);
    assert_int_equal(b.dpu.instructions - a.dpu.instructions, want + machine);
    /* One tasklet: every instruction takes the revolver's 11 cycles, DMA in series. */
    double cyc = 11.0 * (double)(want + machine) + dma_cycles_per_iter * (N2 - N1);
    assert_near((double)(b.dpu.cycles - a.dpu.cycles), cyc, 1.0);
}

static void test_mixes(void **state)
{
    (void)state;
    fill_inputs();
    struct dpu_set_t set = load(PROG("pim_cost_t1"), 1);
    nm_pim_cost c;
    assert_int_equal(nm_pim_get_cost(set, &c), DPU_OK);
    double dma8 = c.dma_read_alpha + 8 * c.dma_read_beta;
    check_mix(set, COST_EMPTY, 0, 0);
    check_mix(set, COST_ADD32, 0, 0);
    check_mix(set, COST_MUL32, 5, 0);              /* k = 3 for x >= 5 */
    check_mix(set, COST_MUL32, 1u << 20, 0);       /* k from x or z */
    check_mix(set, COST_MUL32, 0xffffffffu, 0);    /* k = bits(x) */
    check_mix(set, COST_MUL16, 200, 0);
    check_mix(set, COST_MUL16, 300, 0);
    check_mix(set, COST_UDIV32, 100, 0);
    check_mix(set, COST_UDIV32, 1u << 22, 0);
    check_mix(set, COST_UDIV32, 1, 0);             /* s = clz(1) - clz(x): the longest ladders */
    check_mix(set, COST_SDIV32, 7, 0);
    check_mix(set, COST_SDIV32, (uint32_t)-3, 0);
    check_mix(set, COST_ADD64, 0, 0);
    check_mix(set, COST_FADD32, 0, 0);
    check_mix(set, COST_FMUL32, 0, 0);
    check_mix(set, COST_FADD64, 0, 0);
    check_mix(set, COST_FDIV64, 0, 0);
    check_mix(set, COST_CALL, 0, 0);
    check_mix(set, COST_HW, 0, 0);
    check_mix(set, COST_CHARGE, 0, 0);
    check_mix(set, COST_DMA, 0, dma8);
    check_mix(set, COST_MRAM_LOAD, 0, dma8);
    /* The costed results are right: a ^= x * z over 10 iterations. */
    result r;
    assert_int_equal(launch(set, COST_MUL32, 10, 12345, &r), DPU_OK);
    uint32_t want = 0;
    for (uint32_t i = 0; i < 10; i++)
        want ^= xs[i] * 12345u;
    assert_int_equal(r.out0, want);
    assert_int_equal(dpu_free(set), DPU_OK);
}

/* Compiler-costed instructions become modeled time exactly as charged ones:
 * T identical tasklets issuing I instructions each take max(11, T) x I cycles. */
static void test_revolver(void **state)
{
    (void)state;
    fill_inputs();
    struct dpu_set_t set = load(PROG("pim_cost_t16"), 1);
    result r;
    assert_int_equal(launch(set, COST_ADD32, 500, 0, &r), DPU_OK);
    nm_pim_tasklet_stats ts[16];
    for (uint32_t t = 0; t < 16; t++)
        assert_int_equal(nm_pim_get_tasklet_stats(nm_pim_set_dpu(set, 0), t, &ts[t]), DPU_OK);
    for (int t = 1; t < 16; t++)
        assert_int_equal(ts[t].instructions, ts[0].instructions);
    assert_int_equal(ts[0].instructions, ts[0].costed_instructions);
    assert_int_equal(r.dpu.cycles, 16 * ts[0].instructions);
    assert_int_equal(r.dpu.costed_instructions, 16 * ts[0].costed_instructions);
    assert_int_equal(dpu_free(set), DPU_OK);

    set = load(PROG("pim_cost_t1"), 1);
    assert_int_equal(launch(set, COST_ADD32, 500, 0, &r), DPU_OK);
    assert_int_equal(r.dpu.cycles, 11 * r.t0.instructions);
    assert_int_equal(dpu_free(set), DPU_OK);
}

static uint8_t *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)len);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    *n = (size_t)len;
    return b;
}

/* The same source built twice (two nearmem-dpu-cc runs): the same file, the
 * same cycles. */
static void test_reproducible(void **state)
{
    (void)state;
    fill_inputs();
    size_t n1, n2;
    uint8_t *a = slurp(PROG("pim_cost_t1"), &n1), *b = slurp(PROG("pim_cost_t1_again"), &n2);
    assert_int_equal(n1, n2);
    assert_memory_equal(a, b, n1);
    free(a);
    free(b);
    const char *progs[2] = {PROG("pim_cost_t1"), PROG("pim_cost_t1_again")};
    uint64_t cycles[2][COST_DIVZERO];
    for (int p = 0; p < 2; p++) {
        struct dpu_set_t set = load(progs[p], 1);
        for (uint32_t m = 0; m < COST_DIVZERO; m++) {
            result r;
            assert_int_equal(launch(set, m, 100, 77, &r), DPU_OK);
            cycles[p][m] = r.dpu.cycles;
        }
        assert_int_equal(dpu_free(set), DPU_OK);
    }
    assert_memory_equal(cycles[0], cycles[1], sizeof(cycles[0]));
}

/* A zero divisor stops the DPU (the DPU's __udiv32 faults), never the host;
 * INT32_MIN / -1 wraps as the DPU's division of magnitudes does. */
static void test_division_edges(void **state)
{
    (void)state;
    fill_inputs();
    struct dpu_set_t set = load(PROG("pim_cost_t1"), 2);
    uint32_t a0 = 10, b0 = 0;
    assert_int_equal(dpu_broadcast_to(set, "a0", 0, &a0, 4, DPU_XFER_DEFAULT), DPU_OK);
    assert_int_equal(dpu_broadcast_to(set, "b0", 0, &b0, 4, DPU_XFER_DEFAULT), DPU_OK);
    result r;
    assert_int_equal(launch(set, COST_DIVZERO, 0, 0, &r), DPU_ERR_DPU_FAULT);
    nm_pim_fault_info f;
    assert_int_equal(nm_pim_get_fault(nm_pim_set_dpu(set, 1), &f), DPU_OK);
    assert_int_equal(f.code, NM_PIM_FAULT_KERNEL);
    assert_non_null(strstr(f.message, "division by zero"));
    a0 = 0x80000000u;
    b0 = 0xffffffffu;
    assert_int_equal(dpu_broadcast_to(set, "a0", 0, &a0, 4, DPU_XFER_DEFAULT), DPU_OK);
    assert_int_equal(dpu_broadcast_to(set, "b0", 0, &b0, 4, DPU_XFER_DEFAULT), DPU_OK);
    assert_int_equal(launch(set, COST_DIVOVF, 0, 0, &r), DPU_OK);
    assert_int_equal(r.out0, 0x80000000u); /* quotient INT32_MIN, remainder 0 */
    /* The DPU runs again after the fault. */
    assert_int_equal(launch(set, COST_EMPTY, 5, 0, &r), DPU_OK);
    assert_int_equal(dpu_free(set), DPU_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mixes),
        cmocka_unit_test(test_revolver),
        cmocka_unit_test(test_reproducible),
        cmocka_unit_test(test_division_edges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
