// nearmem's DPU costing (issue 15): the steps of the nearmem-dpu pipeline
// that turn a whole DPU program into code that charges the modeled DPU
// instructions (issue slots) of every basic block it executes, with no call
// in the source (docs/pim-machine.md, "Costing").
//
//   glue     the runtime's glue to the machine (src/pim/dpurt/rt.c: DMA,
//            mutexes, me(), ...) stays out of line so its call sites can be
//            costed as the DPU instructions the SDK emits around the
//            hardware operation, and its own host code is not costed;
//            functions marked NM_PIM_HW_MODEL (nearmem_pim.h) are modeled
//            hardware: not costed either.
//   dpu-opt  whole-program optimisation as the DPU's LLVM would do it: no
//            vector units (no vectorisation), no partial or run-time
//            unrolling (no target preference for it), and 32-bit native
//            integers (induction variables are not widened to 64 bits).
//            The result is the IR that is costed; clang's final -O2 for
//            x86-64 then optimises the instrumented code for the host.
//   cost     every basic block adds the static issue slots of its
//            instructions to the counter __nm_cost_counter (one per
//            program instance; the machine moves it into the running
//            tasklet whenever the tasklet hands control back, exactly as an
//            nm_pim_charge of that count). Data-dependent costs (the
//            mul_step and div_step sequences) are computed next to the
//            operation. The counter's accesses are in their own alias scope,
//            so the host compiler keeps it in a register inside loops
//            without calls: costing stays cheap.
//
// The numbers are the table in nm_dpu_cost.h; this file decides which entry
// each IR operation is.
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "llvm/ADT/StringRef.h"
#include "llvm/Analysis/AssumptionCache.h"
#include "llvm/Analysis/DemandedBits.h"
#include "llvm/Analysis/ValueTracking.h"
#include "llvm/IR/GetElementPtrTypeIterator.h"
#include "llvm/Support/KnownBits.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/DataLayout.h"
#include "llvm/IR/DerivedTypes.h"
#include "llvm/IR/Dominators.h"
#include "llvm/IR/GlobalVariable.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/IntrinsicInst.h"
#include "llvm/IR/Intrinsics.h"
#include "llvm/IR/MDBuilder.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/PassManager.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Transforms/Utils/BasicBlockUtils.h"
#include "llvm/Transforms/Utils/ModuleUtils.h"

#include "nearmem_dpu_passes.h"
#include "nm_dpu_cost.h"

using namespace llvm;

namespace nearmem {

namespace {

constexpr const char *COUNTER = "__nm_cost_counter";
constexpr const char *HW_MODEL_ATTR = "nearmem-hw-model";
constexpr const char *GLUE_ATTR = "nearmem-glue";

// How a runtime glue function is costed at its call sites.
enum class GlueCost {
    Fixed,    // `cost` slots
    Dma,      // mram_read/mram_write: 0 for a constant size, else NM_COST_RT_DMA_RUNTIME_SIZE
    MramLd64, // direct MRAM load: by size (argument 1)
    MramSt64, // direct MRAM store: by size (argument 2)
};

struct Glue {
    const char *name;
    GlueCost how;
    unsigned cost;
    bool dpuCall; // a real call on the DPU (its caller is not a leaf)
};

// The runtime's entry points (src/pim/dpurt/rt.c). The machine charges the
// hardware instruction itself (nm_pim_cost); these are the instructions
// around it (nm_dpu_cost.h, "runtime operations").
const Glue GLUE[] = {
    {"__nm_me", GlueCost::Fixed, NM_COST_RT_ME, false},
    {"__nm_dma_read", GlueCost::Dma, 0, false},
    {"__nm_dma_write", GlueCost::Dma, 0, false},
    {"__nm_dma_read_unaligned", GlueCost::Fixed, NM_COST_RT_DMA_UNALIGNED_READ, true},
    {"__nm_dma_write_unaligned", GlueCost::Fixed, NM_COST_RT_DMA_UNALIGNED_WRITE, true},
    {"__nm_mram_ld64", GlueCost::MramLd64, 0, false},
    {"__nm_mram_st64", GlueCost::MramSt64, 0, false},
    {"__nm_mram_ld", GlueCost::Fixed, NM_COST_RT_MRAM_OBJECT, true},
    {"__nm_mram_st", GlueCost::Fixed, NM_COST_RT_MRAM_OBJECT, true},
    {"__nm_mram_to_wram", GlueCost::Fixed, NM_COST_RT_MRAM_OBJECT, true},
    {"__nm_wram_to_mram", GlueCost::Fixed, NM_COST_RT_MRAM_OBJECT, true},
    {"__nm_mram_to_mram", GlueCost::Fixed, NM_COST_RT_MRAM_OBJECT, true},
    {"__nm_mram_set", GlueCost::Fixed, NM_COST_RT_MRAM_OBJECT, true},
    // The machine charges these (instr_mem_alloc, instr_mutex, ...).
    {"__nm_mem_alloc", GlueCost::Fixed, 0, true},
    {"__nm_mem_reset", GlueCost::Fixed, 0, true},
    {"__nm_mutex_lock", GlueCost::Fixed, 0, false},
    {"__nm_mutex_trylock", GlueCost::Fixed, 0, false},
    {"__nm_mutex_unlock", GlueCost::Fixed, 0, false},
    {"__nm_barrier_wait", GlueCost::Fixed, 0, true},
    {"__nm_sem_take", GlueCost::Fixed, 0, true},
    {"__nm_sem_give", GlueCost::Fixed, 0, true},
    {"__nm_handshake_notify", GlueCost::Fixed, 0, true},
    {"__nm_handshake_wait_for", GlueCost::Fixed, 0, true},
    {"__nm_perfcounter_config", GlueCost::Fixed, 0, true},
    {"__nm_perfcounter_get", GlueCost::Fixed, 0, false},
    // Faults, nearmem's own services and hardware units: no DPU code.
    {"__nm_fault", GlueCost::Fixed, 0, false},
    {"__nm_div_fault", GlueCost::Fixed, 0, false},
    {"nm_pim_charge", GlueCost::Fixed, 0, false},
    {"nm_pim_cycle", GlueCost::Fixed, 0, false},
    {"nm_pim_fault", GlueCost::Fixed, 0, false},
    {"nm_pim_hw_state", GlueCost::Fixed, 0, false},
    {"nm_pim_hw_exec", GlueCost::Fixed, 0, false},
    {"nm_pim_hw_refuse", GlueCost::Fixed, 0, false},
    {"check_stack", GlueCost::Fixed, 0, false},
    // DPU printf is a debugging aid and costs nothing (docs).
    {"printf", GlueCost::Fixed, 0, false},
    {"puts", GlueCost::Fixed, 0, false},
    {"putchar", GlueCost::Fixed, 0, false},
    {"__assert_fail", GlueCost::Fixed, 0, false},
    {"abort", GlueCost::Fixed, 0, false},
};

const Glue *findGlue(const Function *F)
{
    if (!F || !F->hasFnAttribute(GLUE_ATTR))
        return nullptr;
    StringRef n = F->getName();
    for (const Glue &g : GLUE)
        if (n == g.name)
            return &g;
    return nullptr;
}

bool isHwModel(const Function *F) { return F && F->hasFnAttribute(HW_MODEL_ATTR); }

void addToCompilerUsed(Module &M, Function *F) { appendToCompilerUsed(M, {F}); }

// Drops `drop` from llvm.compiler.used.
void removeFromCompilerUsed(Module &M, const std::set<GlobalValue *> &drop)
{
    GlobalVariable *U = M.getGlobalVariable("llvm.compiler.used");
    if (!U || !U->hasInitializer())
        return;
    auto *CA = dyn_cast<ConstantArray>(U->getInitializer());
    if (!CA)
        return;
    std::vector<Constant *> keep;
    for (Value *Op : CA->operands())
        if (!drop.count(dyn_cast<GlobalValue>(Op->stripPointerCasts())))
            keep.push_back(cast<Constant>(Op));
    if (keep.size() == CA->getNumOperands())
        return;
    ArrayType *AT = ArrayType::get(CA->getType()->getElementType(), keep.size());
    U->eraseFromParent();
    if (!keep.empty()) {
        auto *NU = new GlobalVariable(M, AT, false, GlobalValue::AppendingLinkage, ConstantArray::get(AT, keep),
                                      "llvm.compiler.used");
        NU->setSection("llvm.metadata");
    }
}

} // namespace

// ------------------------------------------------------------------- glue
PreservedAnalyses GluePass::run(Module &M, ModuleAnalysisManager &)
{
    for (const Glue &g : GLUE) {
        Function *F = M.getFunction(g.name);
        if (!F || F->isDeclaration())
            continue;
        F->addFnAttr(GLUE_ATTR);
        F->removeFnAttr(Attribute::AlwaysInline);
        F->addFnAttr(Attribute::NoInline);
        // Address-taken, so interprocedural passes keep its signature (the
        // costing reads the size arguments of the DMA glue).
        addToCompilerUsed(M, F);
    }
    // Functions marked NM_PIM_HW_MODEL: __attribute__((annotate(...))).
    if (GlobalVariable *A = M.getGlobalVariable("llvm.global.annotations")) {
        if (auto *CA = dyn_cast_or_null<ConstantArray>(A->hasInitializer() ? A->getInitializer() : nullptr)) {
            for (Value *Op : CA->operands()) {
                auto *CS = dyn_cast<ConstantStruct>(Op);
                if (!CS || CS->getNumOperands() < 2)
                    continue;
                auto *F = dyn_cast<Function>(CS->getOperand(0)->stripPointerCasts());
                auto *S = dyn_cast<GlobalVariable>(CS->getOperand(1)->stripPointerCasts());
                if (!F || !S || !S->hasInitializer())
                    continue;
                auto *CDA = dyn_cast<ConstantDataArray>(S->getInitializer());
                if (CDA && CDA->isCString() && CDA->getAsCString() == NM_PIM_HW_MODEL_ANNOTATION) {
                    F->addFnAttr(HW_MODEL_ATTR);
                    F->removeFnAttr(Attribute::AlwaysInline);
                    F->addFnAttr(Attribute::NoInline);
                }
            }
        }
        A->eraseFromParent(); // only a source of references; nothing reads it
    }
    return PreservedAnalyses::none();
}

// ---------------------------------------------------------------- dpu-opt
PreservedAnalyses DpuOptPass::run(Module &M, ModuleAnalysisManager &)
{
    // 32-bit native integers while optimising (the DPU is a 32-bit machine:
    // no widening of induction variables to 64 bits); type sizes do not
    // change, and the x86-64 layout is restored for code generation.
    std::string dl = M.getDataLayoutStr();
    std::string dpuDl = dl;
    size_t at = dpuDl.find("-n8:16:32:64");
    if (at != std::string::npos)
        dpuDl.replace(at, 12, "-n32");
    M.setDataLayout(dpuDl);

    PipelineTuningOptions PTO;
    PTO.LoopVectorization = false; // the DPU has no vector unit
    PTO.SLPVectorization = false;
    PTO.LoopInterleaving = false;
    PassBuilder PB(nullptr, PTO); // no target: generic costs, no unrolling preference
    LoopAnalysisManager LAM;
    FunctionAnalysisManager FAM;
    CGSCCAnalysisManager CGAM;
    ModuleAnalysisManager MAM;
    PB.registerModuleAnalyses(MAM);
    PB.registerCGSCCAnalyses(CGAM);
    PB.registerFunctionAnalyses(FAM);
    PB.registerLoopAnalyses(LAM);
    PB.crossRegisterProxies(LAM, FAM, CGAM, MAM);
    ModulePassManager MPM;
    if (level == 0)
        MPM = PB.buildO0DefaultPipeline(OptimizationLevel::O0);
    else
        MPM = PB.buildPerModuleDefaultPipeline(level >= 3   ? OptimizationLevel::O3
                                               : level == 2 ? OptimizationLevel::O2
                                                            : OptimizationLevel::O1);
    MPM.run(M, MAM);
    M.setDataLayout(dl);
    return PreservedAnalyses::none();
}

// ------------------------------------------------------------------- cost
namespace {

bool fits32(const ConstantInt *C) { return C->getValue().isSignedIntN(32) || C->getValue().isIntN(32); }

bool isPow2Const(const Value *V)
{
    auto *C = dyn_cast<ConstantInt>(V);
    return C && C->getValue().isPowerOf2();
}

class FunctionCoster {
  public:
    FunctionCoster(Function &F, GlobalVariable *Ctr, MDNode *CtrScope, Function *DivFault)
        : F(F), M(*F.getParent()), DL(M.getDataLayout()), Ctx(M.getContext()), Ctr(Ctr), CtrScope(CtrScope),
          DivFault(DivFault), I64(Type::getInt64Ty(Ctx)), I32(Type::getInt32Ty(Ctx))
    {
    }

    void run()
    {
        DT.recalculate(F);
        computeNarrow();
        computeLeaf();
        std::vector<BasicBlock *> blocks;
        for (BasicBlock &BB : F)
            blocks.push_back(&BB);
        for (size_t i = 0; i < blocks.size(); i++)
            layoutNext[blocks[i]] = i + 1 < blocks.size() ? blocks[i + 1] : nullptr;
        for (BasicBlock *BB : blocks)
            costBlock(*BB, BB == &F.getEntryBlock());
        for (Instruction *D : divisions)
            guardDivision(D);
    }

  private:
    Function &F;
    Module &M;
    const DataLayout &DL;
    LLVMContext &Ctx;
    GlobalVariable *Ctr;
    MDNode *CtrScope;
    Function *DivFault;
    Type *I64, *I32;
    std::set<const Value *> narrow; // i64 values that are 32-bit values on the DPU
    std::set<const Value *> lowOnly; // i64 results of which only the low 32 bits are used
    std::map<const BasicBlock *, const BasicBlock *> layoutNext;
    std::vector<Instruction *> divisions;
    DominatorTree DT;
    bool nonLeaf = false, hasFrame = false;

    // A dynamic cost: `value` slots added just before `at`.
    struct Dyn {
        Instruction *at;
        std::function<Value *(IRBuilder<> &)> value;
    };
    std::vector<Dyn> dyns;

    // ---- 64-bit values that are pointer-width values on the DPU ----------
    // On x86-64, size_t, long and pointer differences are 64-bit, and
    // indices are extended to 64 bits for address arithmetic; on the DPU
    // (ILP32) they are 32-bit. An i64 computation is costed as 32-bit when
    // every operand is such a value (a zext/sext of <= 32 bits, a pointer, a
    // 32-bit constant, another such computation) and every use is address
    // arithmetic, a comparison or a truncation (the greatest fixed point).
    static bool candidateOpcode(const Instruction &I)
    {
        switch (I.getOpcode()) {
        case Instruction::Add: case Instruction::Sub: case Instruction::Mul: case Instruction::Shl:
        case Instruction::LShr: case Instruction::AShr: case Instruction::And: case Instruction::Or:
        case Instruction::Xor: case Instruction::UDiv: case Instruction::SDiv: case Instruction::URem:
        case Instruction::SRem: case Instruction::PHI: case Instruction::Select: case Instruction::SExt:
        case Instruction::ZExt: case Instruction::PtrToInt:
            return true;
        default:
            return false;
        }
    }

    bool narrowOperand(const Value *V) const
    {
        if (auto *C = dyn_cast<ConstantInt>(V))
            return fits32(C);
        if (isa<UndefValue>(V))
            return true;
        return narrow.count(V) != 0;
    }

    bool stillNarrow(const Instruction *I) const
    {
        if (lowOnly.count(I))
            return true;
        switch (I->getOpcode()) {
        case Instruction::SExt:
        case Instruction::ZExt:
            if (I->getOperand(0)->getType()->getScalarSizeInBits() > 32)
                return false;
            break;
        case Instruction::PtrToInt:
            break;
        case Instruction::Select:
            if (!narrowOperand(I->getOperand(1)) || !narrowOperand(I->getOperand(2)))
                return false;
            break;
        default:
            for (const Value *Op : I->operands())
                if (!narrowOperand(Op))
                    return false;
        }
        for (const User *U : I->users()) {
            if (narrow.count(U))
                continue;
            if (isa<GetElementPtrInst>(U) || isa<ICmpInst>(U) || isa<TruncInst>(U) || isa<IntToPtrInst>(U) ||
                isa<SwitchInst>(U))
                continue;
            if (auto *MI = dyn_cast<MemIntrinsic>(U))
                if (MI->getLength() == I)
                    continue;
            return false;
        }
        return true;
    }

    // Where only the low 32 bits of an add, sub, mul, shl or bitwise result
    // are ever used (e.g. a size_t product truncated to an address), the
    // DPU's backend computes it in 32 bits (its legaliser drops the dead
    // high half): cost it so (LLVM's DemandedBits).
    static bool lowBitsOnlyOp(const Instruction &I)
    {
        switch (I.getOpcode()) {
        case Instruction::Add: case Instruction::Sub: case Instruction::Mul: case Instruction::Shl:
        case Instruction::And: case Instruction::Or: case Instruction::Xor: case Instruction::Load:
        case Instruction::ZExt: case Instruction::SExt: case Instruction::PHI: case Instruction::Select:
            return true;
        default:
            return false;
        }
    }

    void computeNarrow()
    {
        AssumptionCache AC(F);
        DemandedBits DB(F, AC, DT);
        for (Instruction &I : instructions(F))
            if (I.getType()->isIntegerTy(64) && lowBitsOnlyOp(I) && DB.getDemandedBits(&I).getActiveBits() <= 32)
                lowOnly.insert(&I);
        std::vector<Instruction *> cand;
        for (Instruction &I : instructions(F))
            if (I.getType()->isIntegerTy(64) && (candidateOpcode(I) || lowOnly.count(&I))) {
                cand.push_back(&I);
                narrow.insert(&I);
            }
        for (bool changed = true; changed;) {
            changed = false;
            for (Instruction *I : cand)
                if (narrow.count(I) && !stillNarrow(I)) {
                    narrow.erase(I);
                    changed = true;
                }
        }
    }

    // Width class of an integer value on the DPU: 32 (fits a register) or 64.
    unsigned dpuBits(const Value *V) const
    {
        Type *T = V->getType();
        if (T->isPointerTy())
            return 32;
        unsigned b = T->getScalarSizeInBits();
        if (b <= 32)
            return 32;
        if (b == 64)
            return narrow.count(V) ? 32 : 64;
        return 128;
    }
    static unsigned wideFactor(unsigned bits) { return bits > 64 ? 2 : 1; }

    // ---- leaf functions -----------------------------------------------------
    // On the DPU a function that calls anything, including the runtime's
    // __mul32/__udiv32 and float routines, saves its return address.
    bool isDpuCall(const Instruction &I) const
    {
        if (auto *CB = dyn_cast<CallBase>(&I)) {
            Function *Callee = CB->getCalledFunction();
            if (Callee && Callee->isIntrinsic()) {
                if (auto *MI = dyn_cast<MemIntrinsic>(&I))
                    return !memInline(MI);
                return false;
            }
            if (isHwModel(Callee))
                return false;
            if (const Glue *g = findGlue(Callee))
                return g->dpuCall;
            return true;
        }
        switch (I.getOpcode()) {
        case Instruction::Mul:
            return dpuBits(&I) == 64 || mulKind(I) == MulKind::General;
        case Instruction::UDiv: case Instruction::SDiv: case Instruction::URem: case Instruction::SRem:
            return !isPow2Const(I.getOperand(1));
        case Instruction::FAdd: case Instruction::FSub: case Instruction::FMul: case Instruction::FDiv:
        case Instruction::FRem: case Instruction::FCmp: case Instruction::FPToSI: case Instruction::FPToUI:
        case Instruction::SIToFP: case Instruction::UIToFP: case Instruction::FPExt: case Instruction::FPTrunc:
        case Instruction::AtomicRMW: case Instruction::AtomicCmpXchg:
            return true;
        default:
            return false;
        }
    }

    void computeLeaf()
    {
        for (Instruction &I : instructions(F)) {
            if (isDpuCall(I))
                nonLeaf = true;
            if (isa<AllocaInst>(I))
                hasFrame = true;
        }
    }

    // ---- individual costs -----------------------------------------------------
    enum class MulKind { Pow2, Mul8, Mul16, General };
    MulKind mulKind(const Instruction &I) const
    {
        if (isPow2Const(I.getOperand(0)) || isPow2Const(I.getOperand(1)))
            return MulKind::Pow2;
        unsigned lz0 = computeKnownBits(I.getOperand(0), DL).countMinLeadingZeros();
        unsigned lz1 = computeKnownBits(I.getOperand(1), DL).countMinLeadingZeros();
        unsigned w = I.getType()->getScalarSizeInBits();
        unsigned b0 = w - std::min(lz0, w), b1 = w - std::min(lz1, w);
        if (b0 <= 8 && b1 <= 8)
            return MulKind::Mul8;
        if (b0 <= 16 && b1 <= 16)
            return MulKind::Mul16;
        return MulKind::General;
    }

    // A 32-bit view of an integer operand (truncating pointer-width i64s).
    Value *as32(IRBuilder<> &B, Value *V) { return B.CreateZExtOrTrunc(V, I32); }

    Value *clz32(IRBuilder<> &B, Value *V)
    {
        return B.CreateBinaryIntrinsic(Intrinsic::ctlz, V, B.getFalse()); // clz(0) = 32, as the DPU's clz
    }

    bool foldedCompare(const ICmpInst &C) const
    {
        if (C.use_empty())
            return false;
        for (const User *U : C.users()) {
            auto *UI = dyn_cast<Instruction>(U);
            if (!UI || UI->getParent() != C.getParent())
                return false;
            if (isa<BranchInst>(UI))
                continue;
            if (auto *S = dyn_cast<SelectInst>(UI))
                if (S->getCondition() == &C)
                    continue;
            return false;
        }
        return true;
    }

    // Pieces of an inline memcpy/memset (0 when it is a runtime call).
    unsigned memPieces(const MemIntrinsic *MI) const
    {
        auto *Len = dyn_cast<ConstantInt>(MI->getLength());
        if (!Len)
            return 0;
        uint64_t n = Len->getZExtValue();
        uint64_t align = MI->getDestAlign() ? MI->getDestAlign()->value() : 1;
        if (auto *MT = dyn_cast<MemTransferInst>(MI))
            align = std::min<uint64_t>(align, MT->getSourceAlign() ? MT->getSourceAlign()->value() : 1);
        uint64_t w = std::min<uint64_t>(align, 8), pieces = 0;
        while (n) { // widest legal piece first, as SelectionDAG's getMemcpy
            while (w > n)
                w /= 2;
            pieces += n / w;
            n %= w;
        }
        return pieces <= NM_COST_MEMOP_MAX_INLINE ? (unsigned)pieces : 0;
    }
    bool memInline(const MemIntrinsic *MI) const
    {
        auto *Len = dyn_cast<ConstantInt>(MI->getLength());
        return Len && (Len->isZero() || memPieces(MI) > 0);
    }

    unsigned memAccessCost(Type *T, MaybeAlign A) const
    {
        if (T->isVectorTy() || T->isAggregateType()) {
            uint64_t bytes = DL.getTypeStoreSize(T);
            return (unsigned)std::max<uint64_t>(1, (bytes + 7) / 8);
        }
        if (T->isPointerTy() || DL.getTypeStoreSize(T) <= 4)
            return NM_COST_LOAD;
        if (DL.getTypeStoreSize(T) > 8)
            return 2 * NM_COST_LOAD;
        uint64_t a = A ? A->value() : 1;
        return a >= 8 ? NM_COST_LOAD : a >= 4 ? NM_COST_MEM64_ALIGN4 : a >= 2 ? NM_COST_MEM64_ALIGN2 : NM_COST_MEM64_ALIGN1;
    }

    unsigned floatCost(unsigned op, Type *T) const
    {
        bool dbl = !T->getScalarType()->isFloatTy();
        switch (op) {
        case Instruction::FAdd: return dbl ? NM_COST_FADD64 : NM_COST_FADD32;
        case Instruction::FSub: return dbl ? NM_COST_FSUB64 : NM_COST_FSUB32;
        case Instruction::FMul: return dbl ? NM_COST_FMUL64 : NM_COST_FMUL32;
        case Instruction::FDiv: return dbl ? NM_COST_FDIV64 : NM_COST_FDIV32;
        case Instruction::FRem:
            return dbl ? NM_COST_FDIV64 + NM_COST_FMUL64 + NM_COST_FSUB64 : NM_COST_FDIV32 + NM_COST_FMUL32 + NM_COST_FSUB32;
        case Instruction::FCmp: return dbl ? NM_COST_FCMP64 : NM_COST_FCMP32;
        default: return 0;
        }
    }

    unsigned convCost(const CastInst &C) const
    {
        Type *S = C.getSrcTy()->getScalarType(), *D = C.getDestTy()->getScalarType();
        Type *fp = S->isFloatingPointTy() ? S : D, *in = S->isFloatingPointTy() ? D : S;
        if (C.getOpcode() == Instruction::FPExt || C.getOpcode() == Instruction::FPTrunc)
            return NM_COST_FCVT64;
        if (fp->isFloatTy() && in->getScalarSizeInBits() <= 32)
            return NM_COST_FCVT32;
        return NM_COST_FCVT64;
    }

    unsigned callArgs(const CallBase &CB) const { return NM_COST_CALL_ARG * (unsigned)CB.arg_size(); }

    unsigned intrinsicCost(IntrinsicInst &II)
    {
        Type *T = II.getType();
        unsigned bits = T->isIntOrIntVectorTy() ? dpuBits(&II) : 32;
        switch (II.getIntrinsicID()) {
        case Intrinsic::dbg_declare: case Intrinsic::dbg_value: case Intrinsic::dbg_label:
        case Intrinsic::lifetime_start: case Intrinsic::lifetime_end: case Intrinsic::assume:
        case Intrinsic::expect: case Intrinsic::expect_with_probability: case Intrinsic::is_constant:
        case Intrinsic::experimental_noalias_scope_decl: case Intrinsic::invariant_start:
        case Intrinsic::invariant_end: case Intrinsic::annotation: case Intrinsic::var_annotation:
        case Intrinsic::ptr_annotation: case Intrinsic::donothing: case Intrinsic::sideeffect:
        case Intrinsic::launder_invariant_group: case Intrinsic::strip_invariant_group:
        case Intrinsic::objectsize: case Intrinsic::prefetch: case Intrinsic::pseudoprobe:
            return 0;
        case Intrinsic::memcpy: case Intrinsic::memmove: case Intrinsic::memcpy_inline:
        case Intrinsic::memset: case Intrinsic::memset_inline: {
            auto *MI = cast<MemIntrinsic>(&II);
            bool set = isa<MemSetInst>(MI) || II.getIntrinsicID() == Intrinsic::memset_inline;
            if (memInline(MI))
                return memPieces(MI) * (set ? NM_COST_STORE : NM_COST_LOAD + NM_COST_STORE);
            unsigned perWord = set ? NM_COST_MEMSET_PER_WORD : NM_COST_MEMCPY_PER_WORD;
            Value *Len = MI->getLength();
            if (auto *C = dyn_cast<ConstantInt>(Len))
                return NM_COST_MEMCALL_BASE + perWord * (unsigned)((C->getZExtValue() + 3) / 4);
            dyns.push_back({&II, [this, Len, perWord](IRBuilder<> &B) {
                                Value *n = B.CreateZExtOrTrunc(Len, I64);
                                return B.CreateMul(B.CreateLShr(B.CreateAdd(n, B.getInt64(3)), 2), B.getInt64(perWord));
                            }});
            return NM_COST_MEMCALL_BASE;
        }
        case Intrinsic::umin: case Intrinsic::umax: case Intrinsic::smin: case Intrinsic::smax:
        case Intrinsic::abs:
            return bits == 32 ? NM_COST_MINMAX : NM_COST_MINMAX64 * wideFactor(bits);
        case Intrinsic::ctlz:
            return bits == 32 ? NM_COST_CLZ : 3 * NM_COST_CLZ * wideFactor(bits);
        case Intrinsic::cttz:
            return bits == 32 ? NM_COST_CTTZ : 2 * NM_COST_CTTZ * wideFactor(bits);
        case Intrinsic::ctpop:
            return bits == 32 ? NM_COST_CTPOP : 3 * NM_COST_CTPOP * wideFactor(bits);
        case Intrinsic::fshl: case Intrinsic::fshr: {
            unsigned c = II.getArgOperand(0) == II.getArgOperand(1) ? NM_COST_ROTATE : NM_COST_FUNNEL;
            return bits == 32 ? c : 2 * c * wideFactor(bits);
        }
        case Intrinsic::bswap:
            return NM_COST_BSWAP * (bits == 32 ? 1 : 2 * wideFactor(bits));
        case Intrinsic::bitreverse:
            return NM_COST_BITREVERSE * (bits == 32 ? 1 : 2 * wideFactor(bits));
        case Intrinsic::uadd_with_overflow: case Intrinsic::sadd_with_overflow:
        case Intrinsic::usub_with_overflow: case Intrinsic::ssub_with_overflow:
            return NM_COST_OVERFLOW_OP * (II.getArgOperand(0)->getType()->getScalarSizeInBits() <= 32 ? 1 : 2);
        case Intrinsic::umul_with_overflow: case Intrinsic::smul_with_overflow:
            return NM_COST_MUL64; // the full product is needed
        case Intrinsic::uadd_sat: case Intrinsic::sadd_sat: case Intrinsic::usub_sat: case Intrinsic::ssub_sat:
            return NM_COST_SAT_OP * (bits == 32 ? 1 : 2 * wideFactor(bits));
        case Intrinsic::fmuladd: case Intrinsic::fma:
            return floatCost(Instruction::FMul, T) + floatCost(Instruction::FAdd, T);
        case Intrinsic::fabs:
            return NM_COST_FNEG;
        case Intrinsic::copysign:
            return NM_COST_FCOPYSIGN;
        case Intrinsic::minnum: case Intrinsic::maxnum: case Intrinsic::minimum: case Intrinsic::maximum:
            return floatCost(Instruction::FCmp, T) + NM_COST_SELECT;
        case Intrinsic::sqrt: case Intrinsic::floor: case Intrinsic::ceil: case Intrinsic::trunc:
        case Intrinsic::round: case Intrinsic::roundeven: case Intrinsic::rint: case Intrinsic::nearbyint:
        case Intrinsic::pow: case Intrinsic::powi: case Intrinsic::exp: case Intrinsic::exp2: case Intrinsic::log:
        case Intrinsic::log2: case Intrinsic::log10: case Intrinsic::sin: case Intrinsic::cos:
        case Intrinsic::lround: case Intrinsic::llround: case Intrinsic::lrint: case Intrinsic::llrint:
            return floatCost(Instruction::FDiv, T->isFloatingPointTy() ? T : II.getArgOperand(0)->getType());
        default:
            return NM_COST_INTRINSIC_OTHER;
        }
    }

    unsigned glueCost(const Glue &g, CallBase &CB) const
    {
        auto constArg = [&](unsigned i) -> const ConstantInt * {
            return i < CB.arg_size() ? dyn_cast<ConstantInt>(CB.getArgOperand(i)) : nullptr;
        };
        switch (g.how) {
        case GlueCost::Fixed:
            return g.cost;
        case GlueCost::Dma:
            return constArg(2) ? 0 : NM_COST_RT_DMA_RUNTIME_SIZE;
        case GlueCost::MramLd64: {
            const ConstantInt *n = constArg(1);
            return n && n->getZExtValue() > 4 ? NM_COST_RT_MRAM_LOAD64 : NM_COST_RT_MRAM_LOAD32;
        }
        case GlueCost::MramSt64: {
            const ConstantInt *n = constArg(2);
            return n && n->getZExtValue() > 4 ? NM_COST_RT_MRAM_STORE64 : NM_COST_RT_MRAM_STORE32;
        }
        }
        return 0;
    }

    // Multiply: the static part, and the data-dependent part as a Dyn.
    unsigned mulCost(Instruction &I)
    {
        if (dpuBits(&I) > 32)
            return NM_COST_MUL64 * wideFactor(dpuBits(&I));
        switch (mulKind(I)) {
        case MulKind::Pow2:
            return NM_COST_MUL_POW2;
        case MulKind::Mul8:
            return NM_COST_MUL8;
        case MulKind::Mul16: {
            Value *A = I.getOperand(0), *Bv = I.getOperand(1);
            dyns.push_back({&I, [this, A, Bv](IRBuilder<> &B) {
                                Value *o = B.CreateOr(as32(B, A), as32(B, Bv));
                                Value *big = B.CreateICmpUGT(o, B.getInt32(255));
                                return B.CreateSelect(big, B.getInt64(NM_COST_MUL16 - NM_COST_MUL16_SMALL), B.getInt64(0));
                            }});
            return NM_COST_MUL16_SMALL;
        }
        case MulKind::General: {
            Value *A = I.getOperand(0), *Bv = I.getOperand(1);
            dyns.push_back({&I, [this, A, Bv](IRBuilder<> &B) {
                                // k = significant bits of min(a, b), at least 1
                                Value *m = B.CreateBinaryIntrinsic(Intrinsic::umin, as32(B, A), as32(B, Bv));
                                Value *k = B.CreateSub(B.getInt32(32), clz32(B, m));
                                k = B.CreateBinaryIntrinsic(Intrinsic::umax, k, B.getInt32(1));
                                return B.CreateZExt(k, I64);
                            }});
            return NM_COST_MUL32_BASE;
        }
        }
        return NM_COST_MUL32_BASE;
    }

    unsigned divCost(Instruction &I)
    {
        unsigned op = I.getOpcode();
        bool sign = op == Instruction::SDiv || op == Instruction::SRem;
        Value *A = I.getOperand(0), *Bv = I.getOperand(1);
        if (isPow2Const(Bv))
            return sign ? 3 * NM_COST_ALU : NM_COST_ALU; // shift / and (signed: rounding fix-up)
        if (!isa<ConstantInt>(Bv) || cast<ConstantInt>(Bv)->isZero() ||
            (sign && cast<ConstantInt>(Bv)->isMinusOne()))
            divisions.push_back(&I);
        unsigned bits = dpuBits(&I);
        if (bits <= 32) {
            dyns.push_back({&I, [this, A, Bv, sign](IRBuilder<> &B) {
                                Value *a = as32(B, A), *b = as32(B, Bv);
                                if (sign) {
                                    a = B.CreateBinaryIntrinsic(Intrinsic::abs, a, B.getFalse());
                                    b = B.CreateBinaryIntrinsic(Intrinsic::abs, b, B.getFalse());
                                }
                                Value *ca = clz32(B, a), *cb = clz32(B, b);
                                Value *quick = B.CreateICmpUGT(ca, cb);
                                Value *s = B.CreateSub(cb, ca);
                                Value *slow = B.CreateAdd(s, B.getInt32(NM_COST_UDIV32_BASE - NM_COST_UDIV32_QUICK));
                                return B.CreateZExt(B.CreateSelect(quick, B.getInt32(0), slow), I64);
                            }});
            return NM_COST_UDIV32_QUICK + (sign ? NM_COST_SDIV32_EXTRA : 0);
        }
        // [prov] 64-bit: one loop iteration per quotient bit.
        dyns.push_back({&I, [this, A, Bv, sign](IRBuilder<> &B) {
                            Type *T = A->getType();
                            Value *a = A, *b = Bv;
                            if (sign) {
                                a = B.CreateBinaryIntrinsic(Intrinsic::abs, a, B.getFalse());
                                b = B.CreateBinaryIntrinsic(Intrinsic::abs, b, B.getFalse());
                            }
                            Value *ca = B.CreateBinaryIntrinsic(Intrinsic::ctlz, a, B.getFalse());
                            Value *cb = B.CreateBinaryIntrinsic(Intrinsic::ctlz, b, B.getFalse());
                            Value *quick = B.CreateICmpUGT(ca, cb);
                            Value *steps = B.CreateAdd(B.CreateSub(cb, ca), ConstantInt::get(T, 1));
                            Value *slow = B.CreateMul(steps, ConstantInt::get(T, NM_COST_DIV64_STEP));
                            return B.CreateZExtOrTrunc(B.CreateSelect(quick, ConstantInt::get(T, 0), slow), I64);
                        }});
        return NM_COST_DIV64_BASE + (sign ? NM_COST_SDIV32_EXTRA : 0);
    }

    // The static issue slots of one instruction (dynamic parts go to dyns).
    unsigned cost(Instruction &I)
    {
        switch (I.getOpcode()) {
        case Instruction::PHI: case Instruction::Freeze: case Instruction::Trunc: case Instruction::BitCast:
        case Instruction::PtrToInt: case Instruction::IntToPtr: case Instruction::AddrSpaceCast:
        case Instruction::Unreachable: case Instruction::Alloca: case Instruction::ExtractValue:
        case Instruction::InsertValue: case Instruction::Fence:
            return 0;
        case Instruction::Ret:
            return NM_COST_RET;
        case Instruction::Br: {
            auto *Br = cast<BranchInst>(&I);
            const BasicBlock *next = layoutNext[I.getParent()];
            if (Br->isUnconditional())
                return Br->getSuccessor(0) == next ? 0 : NM_COST_BR;
            unsigned c = NM_COST_BR_COND;
            if (auto *C = dyn_cast<ICmpInst>(Br->getCondition()))
                if (foldedCompare(*C) && dpuBits(C->getOperand(0)) > 32)
                    c = NM_COST_ICMP64_BR * wideFactor(dpuBits(C->getOperand(0)));
            // A loop's back edge: the backend lays the loop out with the
            // latch at its bottom and the exit after it.
            bool backEdge = DT.dominates(Br->getSuccessor(0), I.getParent()) ||
                            DT.dominates(Br->getSuccessor(1), I.getParent());
            if (Br->getSuccessor(0) != next && Br->getSuccessor(1) != next && !backEdge)
                c += NM_COST_BR_EXTRA_JUMP;
            return c;
        }
        case Instruction::Switch: {
            auto *SW = cast<SwitchInst>(&I);
            unsigned n = SW->getNumCases();
            unsigned c = n <= NM_COST_SWITCH_SMALL_MAX ? n * NM_COST_BR_COND : NM_COST_SWITCH_TABLE;
            return std::max(c, 1u) * (dpuBits(SW->getCondition()) > 32 ? 2 : 1);
        }
        case Instruction::ICmp: {
            auto *C = cast<ICmpInst>(&I);
            if (foldedCompare(*C))
                return 0;
            unsigned b = std::max(dpuBits(C->getOperand(0)), dpuBits(C->getOperand(1)));
            return b > 32 ? NM_COST_ICMP64_VALUE * wideFactor(b) : NM_COST_ICMP_VALUE;
        }
        case Instruction::Select:
            return dpuBits(&I) > 32 && I.getType()->isIntegerTy() ? NM_COST_SELECT64 : NM_COST_SELECT;
        case Instruction::Add: case Instruction::Sub: {
            unsigned b = dpuBits(&I);
            return b > 32 ? NM_COST_ADD64 * wideFactor(b) : NM_COST_ALU;
        }
        case Instruction::And: case Instruction::Or: case Instruction::Xor: {
            unsigned b = dpuBits(&I);
            return b > 32 ? NM_COST_LOGIC64 * wideFactor(b) : NM_COST_ALU;
        }
        case Instruction::Shl: case Instruction::LShr: case Instruction::AShr: {
            unsigned b = dpuBits(&I);
            if (b <= 32)
                return NM_COST_ALU;
            if (auto *C = dyn_cast<ConstantInt>(I.getOperand(1))) {
                uint64_t s = C->getZExtValue();
                return (s < 32 ? NM_COST_SHIFT64_LT32 : s == 32 ? NM_COST_SHIFT64_EQ32 : NM_COST_SHIFT64_GT32) *
                       wideFactor(b);
            }
            return NM_COST_SHIFT64_VAR * wideFactor(b);
        }
        case Instruction::Mul:
            return mulCost(I);
        case Instruction::UDiv: case Instruction::SDiv: case Instruction::URem: case Instruction::SRem:
            return divCost(I);
        case Instruction::FAdd: case Instruction::FSub: case Instruction::FMul: case Instruction::FDiv:
        case Instruction::FRem: case Instruction::FCmp:
            return floatCost(I.getOpcode(), I.getOperand(0)->getType());
        case Instruction::FNeg:
            return NM_COST_FNEG;
        case Instruction::FPToSI: case Instruction::FPToUI: case Instruction::SIToFP: case Instruction::UIToFP:
        case Instruction::FPExt: case Instruction::FPTrunc:
            return convCost(cast<CastInst>(I));
        case Instruction::ZExt: case Instruction::SExt: {
            Value *Src = I.getOperand(0);
            unsigned from = Src->getType()->getScalarSizeInBits();
            bool toWide = dpuBits(&I) > 32;
            unsigned c = 0;
            if (from == 1)
                c = I.getOpcode() == Instruction::SExt ? NM_COST_EXT : 0; // set gives 0/1
            else if (from < 32)
                c = (I.getOpcode() == Instruction::ZExt && isa<LoadInst>(Src)) ? 0 : NM_COST_EXT;
            if (toWide)
                c += NM_COST_EXT64;
            return c;
        }
        case Instruction::Load: {
            auto *L = cast<LoadInst>(&I);
            return memAccessCost(L->getType(), L->getAlign());
        }
        case Instruction::Store: {
            auto *S = cast<StoreInst>(&I);
            return memAccessCost(S->getValueOperand()->getType(), S->getAlign());
        }
        case Instruction::GetElementPtr: {
            auto *G = cast<GetElementPtrInst>(&I);
            unsigned c = 0;
            for (gep_type_iterator GTI = gep_type_begin(G), E = gep_type_end(G); GTI != E; ++GTI) {
                if (isa<Constant>(GTI.getOperand()))
                    continue;
                uint64_t scale = GTI.isStruct() ? 1 : DL.getTypeAllocSize(GTI.getIndexedType()).getFixedValue();
                c += (scale & (scale - 1)) == 0 ? NM_COST_GEP_INDEX : NM_COST_GEP_INDEX_SCALED;
            }
            return c;
        }
        case Instruction::AtomicRMW: case Instruction::AtomicCmpXchg:
            return NM_COST_ATOMIC;
        case Instruction::VAArg:
            return NM_COST_LOAD + NM_COST_ALU;
        case Instruction::Call: case Instruction::Invoke: case Instruction::CallBr: {
            auto *CB = cast<CallBase>(&I);
            if (auto *II = dyn_cast<IntrinsicInst>(&I))
                return intrinsicCost(*II);
            Function *Callee = CB->getCalledFunction();
            if (isHwModel(Callee))
                return 0; // modeled hardware: its instructions are charged by nm_pim_hw_exec
            if (const Glue *g = findGlue(Callee))
                return glueCost(*g, *CB);
            if (Callee && Callee->isDeclaration())
                return NM_COST_LIBC_CALL + callArgs(*CB); // a host C library function
            return NM_COST_CALL + callArgs(*CB);
        }
        default:
            return NM_COST_INTRINSIC_OTHER;
        }
    }

    // ---- instrumentation -------------------------------------------------------
    void addCounter(IRBuilder<> &B, Value *V)
    {
        LoadInst *L = B.CreateLoad(I64, Ctr, "nm.cost");
        L->setMetadata(LLVMContext::MD_alias_scope, CtrScope);
        StoreInst *S = B.CreateStore(B.CreateAdd(L, V), Ctr);
        S->setMetadata(LLVMContext::MD_alias_scope, CtrScope);
    }

    // A call can hand control to the machine (and to another tasklet): the
    // slots before it, its own included, are charged before it; the rest
    // of the block after it.
    static bool endsSegment(const Instruction &I)
    {
        auto *CB = dyn_cast<CallBase>(&I);
        return CB && !isa<IntrinsicInst>(CB);
    }

    void costBlock(BasicBlock &BB, bool entry)
    {
        struct Seg {
            Instruction *start;
            uint64_t slots;
        };
        std::vector<Seg> segs;
        Instruction *first = &*BB.getFirstInsertionPt();
        uint64_t cur = 0;
        if (entry)
            cur += nonLeaf ? NM_COST_FRAME_NONLEAF : hasFrame ? NM_COST_FRAME_LEAF : 0;
        Instruction *segStart = first;
        std::vector<Instruction *> insts;
        for (Instruction &I : BB)
            insts.push_back(&I);
        for (size_t i = 0; i < insts.size(); i++) {
            Instruction &I = *insts[i];
            cur += cost(I);
            if (endsSegment(I) && i + 1 < insts.size()) {
                segs.push_back({segStart, cur});
                cur = 0;
                segStart = insts[i + 1];
            }
        }
        segs.push_back({segStart, cur});
        for (Seg &s : segs)
            if (s.slots) {
                IRBuilder<> B(s.start);
                addCounter(B, B.getInt64(s.slots));
            }
        for (Dyn &d : dyns) {
            IRBuilder<> B(d.at);
            addCounter(B, d.value(B));
        }
        dyns.clear();
    }

    // The DPU faults on a zero divisor (udiv32.S: `fault 2`); x86 would
    // kill the host process. INT_MIN / -1 wraps (the DPU divides magnitudes),
    // where x86 traps too.
    void guardDivision(Instruction *D)
    {
        Value *B0 = D->getOperand(1);
        Type *T = B0->getType();
        {
            IRBuilder<> B(D);
            Value *zero = B.CreateICmpEQ(B0, ConstantInt::get(T, 0));
            Instruction *Then = SplitBlockAndInsertIfThen(zero, D, /*Unreachable=*/true);
            IRBuilder<> TB(Then);
            TB.CreateCall(DivFault);
        }
        unsigned op = D->getOpcode();
        if (op != Instruction::SDiv && op != Instruction::SRem)
            return;
        IRBuilder<> B(D);
        Value *m1 = B.CreateICmpEQ(B0, ConstantInt::get(T, -1, true));
        Value *safeB = B.CreateSelect(m1, ConstantInt::get(T, 1), B0);
        D->setOperand(1, safeB);
        B.SetInsertPoint(D->getNextNode());
        Value *alt = op == Instruction::SDiv ? B.CreateNeg(D->getOperand(0)) : ConstantInt::get(T, 0);
        Value *sel = B.CreateSelect(m1, alt, D);
        D->replaceUsesWithIf(sel, [&](Use &U) { return U.getUser() != sel; });
    }
};

} // namespace

PreservedAnalyses CostPass::run(Module &M, ModuleAnalysisManager &)
{
    LLVMContext &Ctx = M.getContext();
    GlobalVariable *Ctr = M.getGlobalVariable(COUNTER, true);
    Function *DivFault = M.getFunction("__nm_div_fault");
    if (!Ctr || !DivFault) {
        Ctx.emitError("nearmem-dpu-cc: the DPU runtime lacks __nm_cost_counter or __nm_div_fault");
        return PreservedAnalyses::all();
    }
    MDBuilder MDB(Ctx);
    MDNode *Domain = MDB.createAnonymousAliasScopeDomain("nearmem.cost");
    MDNode *Scope = MDB.createAnonymousAliasScope(Domain, "nearmem.cost.counter");
    MDNode *ScopeList = MDNode::get(Ctx, {Scope});

    std::vector<Function *> fns;
    for (Function &F : M)
        if (!F.isDeclaration() && !findGlue(&F) && !isHwModel(&F) && F.getName() != "__nm_dpu_query")
            fns.push_back(&F);
    // The optimiser may have found functions that touch no memory; with the
    // counter they do. Drop what it inferred (on functions and calls): the
    // host compiler infers it again from the instrumented code.
    for (Function &F : M) {
        if (F.isIntrinsic())
            continue;
        F.removeFnAttr(Attribute::Memory);
        F.removeFnAttr(Attribute::Speculatable);
        F.removeFnAttr(Attribute::NoSync);
        for (Instruction &I : instructions(F))
            if (auto *CB = dyn_cast<CallBase>(&I))
                if (!isa<IntrinsicInst>(CB)) {
                    CB->removeFnAttr(Attribute::Memory);
                    CB->removeFnAttr(Attribute::Speculatable);
                    CB->removeFnAttr(Attribute::NoSync);
                }
    }
    for (Function *F : fns)
        FunctionCoster(*F, Ctr, ScopeList, DivFault).run();

    // Nothing but the counter's own accesses touches it: say so, so that the
    // host compiler may keep it in a register between calls (calls are
    // left alone: the machine reads and clears it inside them).
    for (Function &F : M)
        for (Instruction &I : instructions(F)) {
            if (!I.mayReadOrWriteMemory() || I.getMetadata(LLVMContext::MD_alias_scope) == ScopeList)
                continue;
            if (isa<CallBase>(I) && !isa<MemIntrinsic>(I))
                continue;
            I.setMetadata(LLVMContext::MD_noalias,
                          MDNode::concatenate(I.getMetadata(LLVMContext::MD_noalias), ScopeList));
        }
    return PreservedAnalyses::none();
}

// ---------------------------------------------------------------- release
// After costing, the glue may be inlined into the host code like anything else.
PreservedAnalyses ReleasePass::run(Module &M, ModuleAnalysisManager &)
{
    std::set<GlobalValue *> glue;
    for (const Glue &g : GLUE)
        if (Function *F = M.getFunction(g.name)) {
            F->removeFnAttr(Attribute::NoInline);
            F->removeFnAttr(GLUE_ATTR);
            if (g.name != std::string("__nm_div_fault"))
                glue.insert(F);
        }
    removeFromCompilerUsed(M, glue);
    for (Function &F : M)
        if (F.hasFnAttribute(HW_MODEL_ATTR)) {
            F.removeFnAttr(HW_MODEL_ATTR);
            F.removeFnAttr(Attribute::NoInline);
        }
    return PreservedAnalyses::none();
}

} // namespace nearmem
