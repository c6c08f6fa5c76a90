/* Modes of tests/pim/dpu/cost.c, shared with tests/pim/test_cost.c. */
#ifndef PIM_COST_MODES_H
#define PIM_COST_MODES_H

enum cost_mode {
    COST_EMPTY = 0, /* the loop alone */
    COST_ADD32,     /* 8 dependent 32-bit ALU ops per iteration */
    COST_MUL32,     /* a loaded value times z (general __mul32) */
    COST_MUL16,     /* two 16-bit values */
    COST_UDIV32,    /* a loaded value divided by z */
    COST_SDIV32,    /* signed: -(loaded value) / z */
    COST_ADD64,     /* 64-bit add, xor, shift */
    COST_FADD32,    /* float add */
    COST_FMUL32,    /* float multiply */
    COST_FADD64,    /* double add */
    COST_FDIV64,    /* double divide */
    COST_CALL,      /* a call to a non-inlined function of two arguments */
    COST_HW,        /* a call to an NM_PIM_HW_MODEL function */
    COST_CHARGE,    /* nm_pim_charge(7) */
    COST_DMA,       /* mram_read of 8 bytes, constant size */
    COST_MRAM_LOAD, /* a direct 32-bit __mram_ptr load */
    COST_DIVZERO,   /* a0 / b0 with b0 = 0: the DPU faults */
    COST_DIVOVF,    /* INT32_MIN / -1 and INT32_MIN % -1: no trap */
    COST_MODES
};

#define COST_TABLE 64 /* elements of the loaded arrays */

#endif
