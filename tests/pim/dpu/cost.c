/* Known instruction mixes for the exact-cost tests (tests/pim/test_cost.c):
 * every tasklet runs `n` iterations of the loop of `mode`; the host compares
 * the difference in costed instructions between two values of n with the
 * cost table's prediction (src/pim/dpucc/nm_dpu_cost.h). The loops read
 * their operands from WRAM arrays the host fills, so the optimiser can
 * neither fold nor strength-reduce them. No nm_pim_charge except in
 * COST_CHARGE: the compiler costs everything else. */
#include <defs.h>
#include <mram.h>
#include <nearmem_pim.h>
#include <stdint.h>

#include "cost_modes.h"

__host uint32_t mode;
__host uint32_t n;
__host uint32_t z;           /* the multiplier / divisor */
__host uint32_t a0, b0;      /* operands of the single division modes */
__host uint32_t xs[COST_TABLE];
__host uint64_t ls[COST_TABLE];
__host float fs[COST_TABLE];
__host double ds[COST_TABLE];
__host uint64_t out[NR_TASKLETS];

__mram_noinit uint64_t area[COST_TABLE];

static const nm_pim_hw_unit unit = {"cost-test-unit", 8, NULL};

/* Modeled hardware: the loop is the unit's behaviour, not DPU code. */
NM_PIM_HW_MODEL static uint32_t hw_op(uint32_t x)
{
    uint32_t h = x;
    for (uint32_t i = 0; i < 100; i++)
        h = h * 31u + i;
    nm_pim_hw_exec(&unit, 0);
    return h;
}

__attribute__((noinline)) static uint32_t callee(uint32_t x, uint32_t y) { return (x ^ y) + y; }

int main(void)
{
    const uint32_t m = mode, cnt = n, zz = z;
    uint64_t r = 0;
    switch (m) {
    case COST_EMPTY: {
        uint32_t a = 0;
        for (uint32_t i = 0; i < cnt; i++)
            a ^= xs[i & (COST_TABLE - 1)];
        r = a;
        break;
    }
    case COST_ADD32: {
        uint32_t a = 1, b = 2;
        for (uint32_t i = 0; i < cnt; i++) {
            a += xs[i & (COST_TABLE - 1)];
            b ^= a;
            a += b;
            b ^= a;
            a += b;
            b ^= a;
            a += b;
            b ^= a;
        }
        r = a + b;
        break;
    }
    case COST_MUL32: {
        uint32_t a = 0;
        for (uint32_t i = 0; i < cnt; i++)
            a ^= xs[i & (COST_TABLE - 1)] * zz;
        r = a;
        break;
    }
    case COST_MUL16: {
        uint32_t a = 0;
        for (uint32_t i = 0; i < cnt; i++)
            a ^= (xs[i & (COST_TABLE - 1)] & 0xffffu) * (zz & 0xffffu);
        r = a;
        break;
    }
    case COST_UDIV32: {
        uint32_t a = 0;
        for (uint32_t i = 0; i < cnt; i++)
            a ^= xs[i & (COST_TABLE - 1)] / zz;
        r = a;
        break;
    }
    case COST_SDIV32: {
        int32_t a = 0;
        for (uint32_t i = 0; i < cnt; i++)
            a ^= -(int32_t)xs[i & (COST_TABLE - 1)] / (int32_t)zz;
        r = (uint32_t)a;
        break;
    }
    case COST_ADD64: {
        uint64_t a = 0;
        for (uint32_t i = 0; i < cnt; i++) {
            a += ls[i & (COST_TABLE - 1)];
            a ^= a << 3;
        }
        r = a;
        break;
    }
    case COST_FADD32: {
        float a = 0;
        for (uint32_t i = 0; i < cnt; i++)
            a = a + fs[i & (COST_TABLE - 1)];
        r = (uint64_t)(a >= 0 ? a : -a);
        break;
    }
    case COST_FMUL32: {
        float a = 1;
        for (uint32_t i = 0; i < cnt; i++)
            a = a * fs[i & (COST_TABLE - 1)];
        r = (uint64_t)(a >= 0 ? a : -a);
        break;
    }
    case COST_FADD64: {
        double a = 0;
        for (uint32_t i = 0; i < cnt; i++)
            a = a + ds[i & (COST_TABLE - 1)];
        r = (uint64_t)(a >= 0 ? a : -a);
        break;
    }
    case COST_FDIV64: {
        double a = 1e300;
        for (uint32_t i = 0; i < cnt; i++)
            a = a / ds[i & (COST_TABLE - 1)];
        r = (uint64_t)(a >= 0 ? a : -a);
        break;
    }
    case COST_CALL: {
        uint32_t a = 0;
        for (uint32_t i = 0; i < cnt; i++)
            a = callee(a, xs[i & (COST_TABLE - 1)]);
        r = a;
        break;
    }
    case COST_HW: {
        uint32_t a = 0;
        for (uint32_t i = 0; i < cnt; i++)
            a ^= hw_op(xs[i & (COST_TABLE - 1)]);
        r = a;
        break;
    }
    case COST_CHARGE: {
        uint32_t a = 0;
        for (uint32_t i = 0; i < cnt; i++) {
            a ^= xs[i & (COST_TABLE - 1)];
            nm_pim_charge(7);
        }
        r = a;
        break;
    }
    case COST_DMA: {
        uint64_t a = 0, buf[1];
        for (uint32_t i = 0; i < cnt; i++) {
            mram_read(&area[i & (COST_TABLE - 1)], buf, 8);
            a ^= buf[0];
        }
        r = a;
        break;
    }
    case COST_MRAM_LOAD: {
        uint32_t a = 0;
        __mram_ptr uint32_t *p = (__mram_ptr uint32_t *)area;
        for (uint32_t i = 0; i < cnt; i++)
            a ^= p[i & (COST_TABLE - 1)];
        r = a;
        break;
    }
    case COST_DIVZERO:
        r = a0 / b0;
        break;
    case COST_DIVOVF:
        r = (uint32_t)((int32_t)a0 / (int32_t)b0) ^ ((uint64_t)(uint32_t)((int32_t)a0 % (int32_t)b0) << 32);
        break;
    default:
        break;
    }
    out[me()] = r;
    return 0;
}
