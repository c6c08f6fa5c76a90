/* The DPU cost table: issue slots (DPU instructions) per LLVM IR operation,
 * charged by nearmem-dpu-cc's costing step (nearmem_dpu_cost.cpp) into the
 * running tasklet, which the machine turns into modeled time exactly as an
 * nm_pim_charge() of the same count (revolver pipeline: a tasklet issues at
 * most every 11 cycles, the DPU at most one instruction per cycle).
 *
 * ONE table: the pass and the exact-cost tests (tests/pim/test_cost.c) both
 * read it from here, and docs/pim-machine.md ("The cost table") lists every
 * entry with its source. Fixed before any validation run (issue 15); never
 * changed to reach a validation figure.
 *
 * Kinds (as in bench/pim/reference/dpu_cost_table.md, which this reviews):
 *   [doc]   read off UPMEM's own compiler backend or runtime source
 *           (upmem/llvm-project: llvm/lib/Target/DPU/DPUTargetLowering.cpp,
 *           compiler-rt/lib/builtins/dpu/ sources) or the SDK documentation;
 *   [cal]   derived from a PrIM calibration point (prim_reference.json,
 *           "use": "calibration"; never used for validation);
 *   [est]   estimate: a short sequence whose shape is known, exact code not read;
 *   [prov]  provisional: a structural guess with a named PrIM calibration
 *           point (prim_pending.json) that must replace it once transcribed.
 * Sources: UPMEM-LLVM, UPMEM-SDK-DOC, PRIM-REPO as in bench/pim/reference/README.md. */
#ifndef NM_DPU_COST_H
#define NM_DPU_COST_H

/* ---- integer, 8..32 bits ------------------------------------------------ */
/* [doc] add/sub/and/or/xor/shl/lshr/ashr: one DPU instruction each. PrIM's
 * INT32 ADD loop runs 6 instructions per element (ADD_INT32_tl1/tl16). */
#define NM_COST_ALU 1
/* [doc] lw/sw/lbu/lhu/ld/sd...: one instruction (naturally aligned WRAM). */
#define NM_COST_LOAD 1
#define NM_COST_STORE 1
/* [doc] EmitUnaligned{Load,Store}WramDoubleRegister: a 64-bit WRAM access
 * only 4-, 2- or 1-byte aligned takes 2 (two lw/sw), 6 or 15 instructions. */
#define NM_COST_MEM64_ALIGN4 2
#define NM_COST_MEM64_ALIGN2 6
#define NM_COST_MEM64_ALIGN1 15
/* [doc] getelementptr: a register index scaled by a power of two is one
 * lsl_add; constant offsets fold into the access's immediate (0).
 * [est] a scale that is not a power of two: shift-and-add chain of 3. */
#define NM_COST_GEP_INDEX 1
#define NM_COST_GEP_INDEX_SCALED 3
/* [doc] compare-and-jump (jeq/jltu...): an icmp used only by the branch or
 * select of its block costs 0, the conditional branch 1.
 * [est] +1 jump when neither successor is the next block in layout order
 * (the IR's block order stands for the backend's layout) and the branch is
 * not a loop's back edge (loops are laid out with the latch at the bottom
 * and the exit after it). */
#define NM_COST_BR_COND 1
#define NM_COST_BR_EXTRA_JUMP 1
/* [est] an unconditional branch: a jump, 0 when the target is the next block. */
#define NM_COST_BR 1
/* [est] an icmp whose value is used otherwise: one conditional-set instruction. */
#define NM_COST_ICMP_VALUE 1
/* [doc] EmitSelectWithCustomInserter: move + conditional jump. */
#define NM_COST_SELECT 2
/* [est] switch: up to 3 cases, one compare-and-jump per case; more: a jump
 * table (bounds check, address, load, jump). */
#define NM_COST_SWITCH_SMALL_MAX 3
#define NM_COST_SWITCH_TABLE 4
/* [est] zext from i8/i16 (and 0xff/0xffff), sext (extsb/extsh, asr): 1;
 * zext of a loaded value or of an i1 (set instructions give 0/1): 0;
 * trunc, bitcast, ptrtoint, inttoptr, freeze, phi: 0 (register renaming). */
#define NM_COST_EXT 1
/* [est] min/max/abs (compare + conditional move), 32-bit. */
#define NM_COST_MINMAX 2
/* [doc] clz, cao (popcount), rol/ror: one instruction each. [est] cttz 3
 * (x & -x, clz, sub), bswap 6, bitreverse 32, funnel shift (not a rotate) 3,
 * add/sub with overflow flag 1, saturating arithmetic 3. */
#define NM_COST_CLZ 1
#define NM_COST_CTPOP 1
#define NM_COST_CTTZ 3
#define NM_COST_ROTATE 1
#define NM_COST_FUNNEL 3
#define NM_COST_BSWAP 6
#define NM_COST_BITREVERSE 32
#define NM_COST_OVERFLOW_OP 1
#define NM_COST_SAT_OP 3
/* [est] any other intrinsic the DPU implements inline. */
#define NM_COST_INTRINSIC_OTHER 1

/* ---- multiply and divide, 32 bits (data-dependent, charged at run time) -- */
/* [doc] MUL8_* nodes: both operands known to fit 8 bits: one mul_ul_ul. */
#define NM_COST_MUL8 1
/* [doc] EmitMul16WithCustomInserter: both operands known to fit 16 bits:
 * mul_ul_ul and an exit when both values are < 256 (1), else mul_uh_ul,
 * lsl_add, mul_uh_ul, lsl_add, mul_uh_uh, lsl_add (7). */
#define NM_COST_MUL16_SMALL 1
#define NM_COST_MUL16 7
/* [est] multiply by a power of two: lsl. */
#define NM_COST_MUL_POW2 1
/* [doc] general 32-bit multiply: NM_COST_MUL32_BASE + k, k = significant
 * bits of min(a, b) as unsigned (at least 1): caller (argument moves, call
 * r23 __mul32, result move) + __mul32 (compiler-rt/lib/builtins/dpu/mul32.S:
 * jgtu, moves, one mul_step per bit of the smaller operand with an early
 * exit on zero, move, jump r23). 10..41 slots. */
#define NM_COST_MUL32_BASE 9
/* [doc] 32-bit unsigned divide/remainder: __udiv32
 * (compiler-rt/lib/builtins/dpu/udiv32.S): clz, clz, sub+branch; when
 * clz(a) > clz(b) the quotient is 0: move.u, jump r23 (QUICK, with the
 * caller's moves and call: 9); else move, move.u, computed jump into the
 * div_step ladder, s + 1 div_step (s = clz(b) - clz(a)), jump r23:
 * NM_COST_UDIV32_BASE + s (12..43). A zero divisor faults (clz ... max,
 * then `fault 2`): here the DPU stops with NM_PIM_FAULT_KERNEL. */
#define NM_COST_UDIV32_QUICK 9
#define NM_COST_UDIV32_BASE 12
/* [est] signed: sign tests and negations around __udiv32 (div32.c), +8 on
 * the unsigned cost of |a| / |b|. */
#define NM_COST_SDIV32_EXTRA 8

/* ---- 64-bit integers ----------------------------------------------------- */
/* [doc] add+addc / sub+subc; PrIM's INT64 ADD loop is one instruction longer
 * than INT32's (ADD_INT64_tl16: 6.97 vs 5.99 cycles/element). */
#define NM_COST_ADD64 2
/* [est] and/or/xor: one per half; icmp feeding a branch: sub/subc with a
 * condition (2); an icmp i64 value: 3; zext/sext i32 -> i64: 1 (move 0 or
 * asr 31 into the high half); select: 2; min/max: 4. */
#define NM_COST_LOGIC64 2
#define NM_COST_ICMP64_BR 2
#define NM_COST_ICMP64_VALUE 3
#define NM_COST_EXT64 1
#define NM_COST_SELECT64 2
#define NM_COST_MINMAX64 4
/* [doc] EmitLsl64RegisterWithCustomInserter: shift by a register 4;
 * [est] by a constant: < 32: 3, == 32: 2, > 32: 2 (LSL64_LT32/_32/_GT32). */
#define NM_COST_SHIFT64_VAR 4
#define NM_COST_SHIFT64_LT32 3
#define NM_COST_SHIFT64_EQ32 2
#define NM_COST_SHIFT64_GT32 2
/* [prov] mul i64: __muldi3 (compiler-rt/lib/builtins/dpu/muldi3.c: UPMEM's
 * comment "in the magnitude of 150 instructions") + call/return.
 * Replace from arith.mul.int64.tl16. */
#define NM_COST_MUL64 152
/* [prov] udiv/urem i64: __udiv64 (udiv64.c: a C loop, one iteration per
 * quotient bit): NM_COST_DIV64_BASE + NM_COST_DIV64_STEP * (s + 1), s =
 * clz64(b) - clz64(a); NM_COST_DIV64_BASE when clz64(a) > clz64(b).
 * Signed: + NM_COST_SDIV32_EXTRA. Replace from arith.div.int64.tl16. */
#define NM_COST_DIV64_BASE 25
#define NM_COST_DIV64_STEP 12

/* ---- floating point: software emulation (compiler-rt), call included ---- */
/* [cal] fadd float: PrIM ADD_FLOAT_tl16: 71.133 cycles/element at a saturated
 * pipeline minus the INT32 loop's 4.991 non-add instructions = 66.1. */
#define NM_COST_FADD32 66
/* [est] fsub = fadd with b's sign flipped (subsf3 calls addsf3): +2. */
#define NM_COST_FSUB32 68
/* [cal] fadd double: PrIM ADD_DOUBLE_tl16: 105.189 - 4.972 = 100.2. */
#define NM_COST_FADD64 100
#define NM_COST_FSUB64 102
/* [prov] fmul float 190 (unpack/round ~40 + a 32x32->64 significand
 * product through __muldi3 ~150; replace from arith.mul.float.tl16);
 * fdiv float 1300 (Newton-Raphson, ~8 widening products; arith.div.float.tl16);
 * fmul double 700 (four 32x32->64 products + ~100; arith.mul.double.tl16);
 * fdiv double 2800 (arith.div.double.tl16). */
#define NM_COST_FMUL32 190
#define NM_COST_FDIV32 1300
#define NM_COST_FMUL64 700
#define NM_COST_FDIV64 2800
/* [prov] fcmp: comparesf2/comparedf2 + call: 20 / 30. Conversions
 * i32 <-> float: 35; fpext, fptrunc, anything with i64 or double: 50. No
 * PrIM measurement exists for these. fneg, fabs: one xor/and of the sign
 * bit (1) [doc: IEEE layout]; copysign 3 [est]; frem: fdiv + fmul + fsub;
 * fmuladd: fmul + fadd (the DPU has no fused operation); other float
 * intrinsics (sqrt, floor, ...): as a division [est]. */
#define NM_COST_FCMP32 20
#define NM_COST_FCMP64 30
#define NM_COST_FCVT32 35
#define NM_COST_FCVT64 50
#define NM_COST_FNEG 1
#define NM_COST_FCOPYSIGN 3

/* ---- calls ---------------------------------------------------------------- */
/* [doc] DPU ABI (UPMEM-SDK-DOC 201_DPU_ABI): call r23, f (1); return = jump
 * r23 (1). [est] one move per argument (r0-r7); a function that calls
 * anything (including the runtime's __mul32, __udiv32, float routines) or
 * keeps a stack frame: save/restore of the r22/r23 pair (sd, ld) and the
 * frame adjustment (add): 3; a leaf with a stack frame: 2. Callee-saved
 * registers (r14-r21) are not counted: register allocation is not modeled. */
#define NM_COST_CALL 1
#define NM_COST_CALL_ARG 1
#define NM_COST_RET 1
#define NM_COST_FRAME_NONLEAF 3
#define NM_COST_FRAME_LEAF 2

/* ---- memory intrinsics in WRAM -------------------------------------------- */
/* [doc] MaxStoresPerMemcpy = MaxStoresPerMemset = 4 (DPUTargetLowering.cpp):
 * a constant-size copy of at most 4 stores (of the widest width the
 * alignment allows, up to 8 bytes) is inline: load + store per piece;
 * memset: a store per piece. [est] otherwise a runtime call: call + return
 * + argument moves (4), then 2 per 4 bytes copied, 1 per 4 bytes set. */
#define NM_COST_MEMOP_MAX_INLINE 4
#define NM_COST_MEMCALL_BASE 4
#define NM_COST_MEMCPY_PER_WORD 2
#define NM_COST_MEMSET_PER_WORD 1
/* [est] atomicrmw/cmpxchg in WRAM: __dpu_sync_* libcall (lock, op, unlock). */
#define NM_COST_ATOMIC 8
/* [est] a host C library function the DPU runtime provides (string
 * functions, qsort, sscanf...): the call only (not modeled inside). */
#define NM_COST_LIBC_CALL 2

/* ---- runtime operations (what the DPU code around the hardware costs) ---- */
/* The machine charges the hardware instruction itself (ldma/sdma: 1 each,
 * mutex acquire/release 2 per attempt, barrier 8, semaphore 4, mem_alloc 4,
 * perfcounter 1; nm_pim_cost in include/nearmem/pim/types.h). These are the
 * instructions the DPU compiler emits around them, charged at the call:
 * [doc] mram_read/mram_write with a run-time size: lsr_add + lsl_add build
 *       the length field (UPMEM compiler output, docs "Hardware semantics");
 *       constant size: 0 (an immediate);
 * [doc] me(): one move from the thread-id register;
 * [doc] direct __mram_ptr load <= 32 bit: add, add, ldma, and, add, load =
 *       6 with the ldma (EmitMramSubLoadWithCustomInserter); store <= 32 bit:
 *       add, add, ldma, and, add, store, sdma = 7 with both DMAs
 *       (EmitMramSubStoreWithCustomInserter); 64-bit store: add, add, sd,
 *       sdma = 4 (EmitMramStoreDoubleWithCustomInserter); [est] 64-bit load:
 *       add, ldma, ld = 3; larger objects and memcpy/memset on MRAM: a
 *       runtime call (4) around the machine's DMAs;
 * [est] mram_read_unaligned / mram_write_unaligned (SDK C functions: range
 *       arithmetic, partial words): 8 / 16 besides their DMAs. */
#define NM_COST_RT_DMA_RUNTIME_SIZE 2
#define NM_COST_RT_ME 1
#define NM_COST_RT_MRAM_LOAD32 5
#define NM_COST_RT_MRAM_STORE32 5
#define NM_COST_RT_MRAM_STORE64 3
#define NM_COST_RT_MRAM_LOAD64 2
#define NM_COST_RT_MRAM_OBJECT 4
#define NM_COST_RT_DMA_UNALIGNED_READ 8
#define NM_COST_RT_DMA_UNALIGNED_WRITE 16

#endif
