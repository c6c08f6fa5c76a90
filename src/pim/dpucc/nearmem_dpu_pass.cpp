// nearmem's DPU program pass plugin (LLVM 16, new pass manager).
//
// nearmem-dpu-cc links every source of a DPU program (plus the DPU runtime,
// src/pim/dpurt/rt.c) into one LLVM module and runs the pipeline
// `nearmem-dpu<nr_tasklets=N;stack_size=S;opt=O>` on it. Seeing the whole
// program lets the pipeline give it the UPMEM memory model inside one host
// process (docs/pim-machine.md, "How a program is built"):
//
//   prepare  main -> __nm_user_main; every definition internal except the
//            query function (nothing can clash with the host program).
//   mram     __mram/__mram_noinit globals (address space 271, x86's 32-bit
//            pointers, so sizeof(__mram_ptr T *) == 4 as on the DPU) get
//            MRAM addresses 0x08000000 + offset, in definition order, and
//            every reference becomes that constant; initialised ones are
//            recorded as segments the loader writes into each DPU's MRAM.
//   lower    loads, stores, memcpy/memmove/memset through MRAM pointers
//            become calls into the runtime, which checks bounds (a DPU fault,
//            never a host crash) and costs them as DMA.
//   dce      drops the runtime's unused parts (and their WRAM).
//   atomic   .atomic globals (ATOMIC_BIT_INIT, MUTEX_INIT, ...) become small
//            integer addresses 0..255, as in the DPU's atomic space.
//   wram     every remaining mutable global (plain, __host, static locals,
//            the runtime's own) becomes a field of one block, __nm_wram_data,
//            which the machine swaps per DPU; constants go to
//            __nm_wram_rodata. Symbol table, sizes, header.
//   glue     the runtime's glue stays out of line until costed; functions
//            marked NM_PIM_HW_MODEL are modeled hardware (nearmem_dpu_cost.cpp).
//   dpu-opt  whole-program optimisation (like -flto) as for the DPU: no
//            vectorisation, 32-bit native integers.
//   cost     every basic block charges the modeled DPU instructions of its
//            IR (issue 15; nearmem_dpu_cost.cpp, table nm_dpu_cost.h).
//   release  the glue may be inlined by the host compiler again.
//   verify   only functions the DPU runtime provides may stay undefined.
//
// Each step is a small module pass; the list is nearmemDpuPipeline() below.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "llvm/ADT/StringRef.h"
#include "llvm/Analysis/ConstantFolding.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/DataLayout.h"
#include "llvm/IR/DerivedTypes.h"
#include "llvm/IR/DiagnosticInfo.h"
#include "llvm/IR/GlobalVariable.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/IntrinsicInst.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/PassManager.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Passes/PassPlugin.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Transforms/IPO/GlobalDCE.h"
#include "llvm/Transforms/Utils/ModuleUtils.h"

#include "../dpurt/nm_dpu_abi.h"
#include "nearmem_dpu_passes.h"

using namespace llvm;

namespace {

constexpr unsigned MRAM_AS = 271;           // x86 ptr32_uptr: 32-bit pointers
constexpr uint64_t MRAM_BASE = 0x08000000u; // UPMEM's MRAM window
constexpr uint64_t MRAM_SIZE = 64u << 20;
constexpr uint64_t WRAM_SIZE = 64u << 10;
constexpr unsigned ATOMIC_BITS = 256; // the DPU's atomic register

struct Params {
    unsigned nrTasklets = 1;
    bool nrTaskletsGiven = false;
    unsigned stackSize = 1024;
    unsigned opt = 2;
    bool cost = true; // issue 15's per-block costing (cost=0: off, for host-speed comparisons)
};

// Errors are collected and reported together, as a compiler would.
struct Diag {
    std::vector<std::string> errors;
    void error(const Twine &t) { errors.push_back(t.str()); }
    bool flush(Module &M)
    {
        if (errors.empty())
            return false;
        std::string all;
        for (auto &e : errors)
            all += "\n  " + e;
        errors.clear();
        M.getContext().emitError("nearmem-dpu-cc: the program cannot be built for the DPU:" + all);
        return true;
    }
};

std::string fnName(const Instruction &I)
{
    const Function *F = I.getFunction();
    std::string where = F ? ("in function '" + F->getName().str() + "'") : std::string("in a global initialiser");
    if (const DILocation *L = I.getDebugLoc())
        where += " (" + L->getFilename().str() + ":" + std::to_string(L->getLine()) + ")";
    return where;
}

bool isMram(const Type *T) { return T->isPointerTy() && T->getPointerAddressSpace() == MRAM_AS; }

// ---------------------------------------------------------------- prepare
struct PreparePass : PassInfoMixin<PreparePass> {
    PreservedAnalyses run(Module &M, ModuleAnalysisManager &)
    {
        Diag D;
        Function *Main = M.getFunction("main");
        if (!Main || Main->isDeclaration()) {
            D.error("undefined reference to 'main' (a DPU program needs int main(void))");
        } else if (Main->arg_size() != 0) {
            D.error("'main' takes arguments; a DPU program's main is int main(void)");
        } else {
            if (Function *Decl = M.getFunction("__nm_user_main")) {
                if (!Decl->isDeclaration())
                    D.error("'__nm_user_main' is reserved by nearmem");
                else {
                    Decl->replaceAllUsesWith(Main);
                    Decl->eraseFromParent();
                }
            }
            Main->setName("__nm_user_main");
        }
        for (GlobalVariable &G : M.globals())
            if (G.isThreadLocal())
                D.error("'" + G.getName() + "' is thread-local: the DPU has no thread-local storage");
        for (Function &F : M) {
            if (F.isDeclaration() || F.getName() == NM_DPU_QUERY_SYMBOL)
                continue;
            F.setLinkage(GlobalValue::InternalLinkage);
            F.setComdat(nullptr);
        }
        // The program's own globals stay, used or not, as they would in a DPU
        // binary (the host may reach them by name); the runtime's (__nm_*)
        // go when unused.
        std::vector<GlobalValue *> keep;
        for (GlobalVariable &G : M.globals()) {
            if (G.isDeclaration() || G.getName().startswith("llvm."))
                continue;
            G.setLinkage(GlobalValue::InternalLinkage);
            G.setComdat(nullptr);
            if (!G.getName().startswith("__nm_") && G.hasName() && !G.getName().startswith("."))
                keep.push_back(&G);
        }
        appendToCompilerUsed(M, keep);
        for (GlobalAlias &A : M.aliases())
            A.setLinkage(GlobalValue::InternalLinkage);
        D.flush(M);
        return PreservedAnalyses::none();
    }
};

void removeFromUsed(Module &M, GlobalValue *G)
{
    for (const char *name : {"llvm.used", "llvm.compiler.used"}) {
        GlobalVariable *U = M.getGlobalVariable(name);
        if (!U || !U->hasInitializer())
            continue;
        auto *CA = dyn_cast<ConstantArray>(U->getInitializer());
        if (!CA)
            continue;
        std::vector<Constant *> keep;
        bool found = false;
        for (Value *Op : CA->operands()) {
            if (Op->stripPointerCasts() == G)
                found = true;
            else
                keep.push_back(cast<Constant>(Op));
        }
        if (!found)
            continue;
        ArrayType *AT = ArrayType::get(CA->getType()->getElementType(), keep.size());
        U->eraseFromParent();
        if (!keep.empty()) {
            auto *NU = new GlobalVariable(M, AT, false, GlobalValue::AppendingLinkage,
                                          ConstantArray::get(AT, keep), name);
            NU->setSection("llvm.metadata");
        }
    }
}

// ------------------------------------------------------------- byte images
// Serialises a constant into little-endian bytes. Returns false for values
// that are not plain data (a WRAM address inside an MRAM initialiser).
bool serialize(const DataLayout &DL, Constant *C, uint8_t *out, std::string &why)
{
    Type *T = C->getType();
    uint64_t size = DL.getTypeAllocSize(T);
    if (isa<ConstantAggregateZero>(C) || isa<ConstantPointerNull>(C) || isa<UndefValue>(C)) {
        memset(out, 0, size);
        return true;
    }
    if (auto *CI = dyn_cast<ConstantInt>(C)) {
        APInt v = CI->getValue();
        unsigned bytes = (v.getBitWidth() + 7) / 8;
        for (unsigned i = 0; i < bytes && i < size; i++)
            out[i] = (uint8_t)v.extractBitsAsZExtValue(std::min(8u, v.getBitWidth() - 8 * i), 8 * i);
        return true;
    }
    if (auto *CF = dyn_cast<ConstantFP>(C)) {
        APInt v = CF->getValueAPF().bitcastToAPInt();
        unsigned bytes = (v.getBitWidth() + 7) / 8;
        memset(out, 0, size);
        for (unsigned i = 0; i < bytes && i < size; i++)
            out[i] = (uint8_t)v.extractBitsAsZExtValue(8, 8 * i);
        return true;
    }
    if (auto *CDS = dyn_cast<ConstantDataSequential>(C)) {
        uint64_t esz = DL.getTypeAllocSize(CDS->getElementType());
        for (unsigned i = 0; i < CDS->getNumElements(); i++)
            if (!serialize(DL, CDS->getElementAsConstant(i), out + i * esz, why))
                return false;
        return true;
    }
    if (auto *CA = dyn_cast<ConstantArray>(C)) {
        uint64_t esz = DL.getTypeAllocSize(CA->getType()->getElementType());
        for (unsigned i = 0; i < CA->getNumOperands(); i++)
            if (!serialize(DL, CA->getOperand(i), out + i * esz, why))
                return false;
        return true;
    }
    if (auto *CV = dyn_cast<ConstantVector>(C)) {
        uint64_t esz = DL.getTypeAllocSize(CV->getType()->getElementType());
        for (unsigned i = 0; i < CV->getNumOperands(); i++)
            if (!serialize(DL, CV->getOperand(i), out + i * esz, why))
                return false;
        return true;
    }
    if (auto *CS = dyn_cast<ConstantStruct>(C)) {
        const StructLayout *SL = DL.getStructLayout(CS->getType());
        memset(out, 0, size);
        for (unsigned i = 0; i < CS->getNumOperands(); i++)
            if (!serialize(DL, CS->getOperand(i), out + SL->getElementOffset(i), why))
                return false;
        return true;
    }
    if (auto *CE = dyn_cast<ConstantExpr>(C)) {
        Constant *F = ConstantFoldConstant(CE, DL);
        if (F && F != CE)
            return serialize(DL, F, out, why);
        if (CE->getOpcode() == Instruction::IntToPtr) {
            if (auto *CI = dyn_cast<ConstantInt>(CE->getOperand(0))) {
                uint64_t v = CI->getZExtValue();
                memcpy(out, &v, std::min<uint64_t>(size, 8));
                return true;
            }
        }
        // getelementptr over inttoptr(constant) that did not fold.
        if (CE->getOpcode() == Instruction::GetElementPtr && isMram(CE->getType())) {
            APInt off(32, 0);
            auto *GEP = cast<GEPOperator>(CE);
            if (GEP->accumulateConstantOffset(DL, off)) {
                auto *Base = dyn_cast<ConstantExpr>(GEP->getPointerOperand());
                if (Base && Base->getOpcode() == Instruction::IntToPtr)
                    if (auto *CI = dyn_cast<ConstantInt>(Base->getOperand(0))) {
                        uint32_t v = (uint32_t)(CI->getZExtValue() + off.getZExtValue());
                        memcpy(out, &v, 4);
                        return true;
                    }
            }
        }
    }
    if (isa<GlobalValue>(C) || isa<ConstantExpr>(C)) {
        why = "its initial value holds a WRAM or code address, which MRAM images cannot hold";
        return false;
    }
    why = "its initial value is not plain data";
    return false;
}

Constant *mramAddr(Type *PtrTy, uint64_t addr, LLVMContext &Ctx)
{
    return ConstantExpr::getIntToPtr(ConstantInt::get(Type::getInt32Ty(Ctx), addr), PtrTy);
}

// A symbol-table entry, kept until the wram step writes the table.
struct SymRec {
    std::string name;
    uint32_t kind, address, size;
};

// Module-level state shared by the steps of one pipeline run.
struct State {
    Params P;
    std::vector<SymRec> syms;
    uint64_t mramVarsSize = 0;
    unsigned atomicBits = 0;
    uint64_t stdoutSize = 1u << 20;
};

bool hostVisibleName(StringRef n)
{
    return !n.empty() && !n.startswith("__nm_") && !n.startswith("llvm.") && !n.startswith(".") &&
           n.find('.') == StringRef::npos;
}

// ------------------------------------------------------------------- mram
struct MramPass : PassInfoMixin<MramPass> {
    State *S;
    explicit MramPass(State *s) : S(s) {}
    PreservedAnalyses run(Module &M, ModuleAnalysisManager &)
    {
        Diag D;
        const DataLayout &DL = M.getDataLayout();
        LLVMContext &Ctx = M.getContext();
        struct Var {
            GlobalVariable *G;
            uint64_t offset, size;
            bool init;
        };
        std::vector<Var> vars;
        GlobalVariable *HeapEnd = nullptr;
        uint64_t cur = 0;
        for (GlobalVariable &G : M.globals()) {
            if (G.getAddressSpace() != MRAM_AS)
                continue;
            if (G.isDeclaration()) {
                if (G.getName() == "__sys_used_mram_end")
                    HeapEnd = &G;
                else
                    D.error("undefined MRAM symbol '" + G.getName() + "'");
                continue;
            }
            uint64_t align = std::max<uint64_t>(8, G.getAlign() ? G.getAlign()->value() : 8);
            uint64_t size = DL.getTypeAllocSize(G.getValueType());
            cur = alignTo(cur, align);
            bool noinit = G.hasSection() && G.getSection().startswith(".mram.noinit");
            vars.push_back({&G, cur, size, !noinit});
            if (hostVisibleName(G.getName()))
                S->syms.push_back({G.getName().str(), NM_DPU_SYM_MRAM, (uint32_t)(MRAM_BASE + cur), (uint32_t)size});
            cur += size;
        }
        cur = alignTo(cur, 8);
        if (cur > MRAM_SIZE)
            D.error("MRAM variables take " + Twine(cur) + " bytes; the DPU has " + Twine(MRAM_SIZE));
        S->mramVarsSize = cur;
        if (D.flush(M))
            return PreservedAnalyses::none();
        if (HeapEnd) {
            HeapEnd->replaceAllUsesWith(mramAddr(HeapEnd->getType(), MRAM_BASE + cur, Ctx));
            HeapEnd->eraseFromParent();
        }
        for (Var &v : vars)
            removeFromUsed(M, v.G);
        for (Var &v : vars)
            v.G->replaceAllUsesWith(mramAddr(v.G->getType(), MRAM_BASE + v.offset, Ctx));
        // Initial images, now that addresses inside initialisers are constants.
        Type *I32 = Type::getInt32Ty(Ctx), *Ptr = PointerType::get(Ctx, 0);
        StructType *SegTy = StructType::get(Ctx, {I32, I32, Ptr});
        std::vector<Constant *> segs;
        for (Var &v : vars) {
            if (!v.init)
                continue;
            Constant *C = v.G->getInitializer();
            Constant *data = ConstantPointerNull::get(cast<PointerType>(Ptr));
            if (!C->isNullValue()) {
                std::vector<uint8_t> bytes(v.size, 0);
                std::string why;
                if (!serialize(DL, C, bytes.data(), why)) {
                    D.error("MRAM variable '" + v.G->getName() + "': " + why);
                    continue;
                }
                Constant *arr = ConstantDataArray::get(Ctx, ArrayRef<uint8_t>(bytes));
                auto *img = new GlobalVariable(M, arr->getType(), true, GlobalValue::PrivateLinkage, arr,
                                               "__nm_meta_mram_img");
                img->setAlignment(Align(8));
                data = img;
            }
            segs.push_back(ConstantStruct::get(SegTy, {ConstantInt::get(I32, v.offset), ConstantInt::get(I32, v.size),
                                                       data}));
        }
        for (Var &v : vars)
            v.G->eraseFromParent();
        defineMeta(M, "__nm_mram_segs", ArrayType::get(SegTy, segs.size()),
                   ConstantArray::get(ArrayType::get(SegTy, segs.size()), segs));
        defineMeta(M, "__nm_mram_nsegs", I32, ConstantInt::get(I32, segs.size()));
        defineMeta(M, "__nm_mram_vars_size", I32, ConstantInt::get(I32, cur));
        D.flush(M);
        return PreservedAnalyses::none();
    }

  public:
    // Defines a metadata constant, taking over a declaration of that name
    // (rt.c declares them extern).
    static GlobalVariable *defineMeta(Module &M, StringRef name, Type *T, Constant *init)
    {
        GlobalVariable *Old = M.getGlobalVariable(name, true);
        auto *G = new GlobalVariable(M, T, true, GlobalValue::InternalLinkage, init, name + ".def");
        G->setAlignment(Align(8));
        if (Old) {
            Old->replaceAllUsesWith(G);
            Old->eraseFromParent();
        }
        G->setName(name);
        return G;
    }
};

// ----------------------------------------------------------------- atomic
struct AtomicPass : PassInfoMixin<AtomicPass> {
    State *S;
    explicit AtomicPass(State *s) : S(s) {}
    PreservedAnalyses run(Module &M, ModuleAnalysisManager &)
    {
        Diag D;
        const DataLayout &DL = M.getDataLayout();
        LLVMContext &Ctx = M.getContext();
        Type *I64 = Type::getInt64Ty(Ctx);
        std::vector<GlobalVariable *> dead;
        unsigned next = 0;
        for (GlobalVariable &G : M.globals()) {
            bool atomic = G.hasSection() && G.getSection() == ".atomic";
            if (G.getName() == "__atomic_start_addr" && G.isDeclaration()) {
                G.replaceAllUsesWith(ConstantExpr::getIntToPtr(ConstantInt::get(I64, 0), G.getType()));
                dead.push_back(&G);
                continue;
            }
            if (!atomic)
                continue;
            if (G.isDeclaration()) {
                D.error("undefined atomic bit '" + G.getName() + "'");
                continue;
            }
            uint64_t n = DL.getTypeAllocSize(G.getValueType());
            for (User *U : G.users())
                if (isa<LoadInst>(U) || isa<StoreInst>(U))
                    D.error("atomic bit '" + G.getName() +
                            "' is read or written like memory; the DPU only acquires and releases atomic bits");
            removeFromUsed(M, &G);
            G.replaceAllUsesWith(ConstantExpr::getIntToPtr(ConstantInt::get(I64, next), G.getType()));
            next += (unsigned)n;
            dead.push_back(&G);
        }
        if (next > ATOMIC_BITS)
            D.error("the program uses " + Twine(next) + " atomic bits (mutexes, barriers, semaphores); the DPU has " +
                    Twine(ATOMIC_BITS));
        for (GlobalVariable *G : dead)
            G->eraseFromParent();
        S->atomicBits = next;
        D.flush(M);
        return PreservedAnalyses::none();
    }
};

// ------------------------------------------------------------------ lower
struct LowerPass : PassInfoMixin<LowerPass> {
    PreservedAnalyses run(Module &M, ModuleAnalysisManager &)
    {
        Diag D;
        const DataLayout &DL = M.getDataLayout();
        LLVMContext &Ctx = M.getContext();
        Type *I32 = Type::getInt32Ty(Ctx), *I64 = Type::getInt64Ty(Ctx), *Void = Type::getVoidTy(Ctx);
        Type *Ptr = PointerType::get(Ctx, 0);
        FunctionCallee Ld64 = M.getOrInsertFunction("__nm_mram_ld64", I64, I32, I32);
        FunctionCallee St64 = M.getOrInsertFunction("__nm_mram_st64", Void, I32, I64, I32);
        FunctionCallee Ld = M.getOrInsertFunction("__nm_mram_ld", Void, I32, Ptr, I64);
        FunctionCallee St = M.getOrInsertFunction("__nm_mram_st", Void, I32, Ptr, I64);
        FunctionCallee M2W = M.getOrInsertFunction("__nm_mram_to_wram", Void, Ptr, I32, I64);
        FunctionCallee W2M = M.getOrInsertFunction("__nm_wram_to_mram", Void, I32, Ptr, I64);
        FunctionCallee M2M = M.getOrInsertFunction("__nm_mram_to_mram", Void, I32, I32, I64);
        FunctionCallee Set = M.getOrInsertFunction("__nm_mram_set", Void, I32, I32, I64);

        // Casts between MRAM and WRAM pointers (the DPU compiler refuses them).
        for (GlobalVariable &G : M.globals())
            if (G.hasInitializer())
                checkCasts(G.getInitializer(), "global '" + G.getName().str() + "'", D);

        std::vector<Instruction *> work;
        for (Function &F : M)
            for (Instruction &I : instructions(F)) {
                for (Value *Op : I.operands())
                    if (auto *C = dyn_cast<Constant>(Op))
                        checkCasts(C, fnName(I), D);
                if (auto *AC = dyn_cast<AddrSpaceCastInst>(&I)) {
                    if (isMram(AC->getSrcTy()) || isMram(AC->getDestTy()))
                        D.error("cast between an MRAM and a WRAM pointer " + fnName(I) +
                                " (not allowed on the DPU: use (uintptr_t) and mram_read/mram_write)");
                    continue;
                }
                if (auto *LI = dyn_cast<LoadInst>(&I)) {
                    if (isMram(LI->getPointerOperandType()))
                        work.push_back(&I);
                } else if (auto *SI = dyn_cast<StoreInst>(&I)) {
                    if (isMram(SI->getPointerOperandType())) // storing an MRAM address in WRAM is fine
                        work.push_back(&I);
                } else if (isa<AtomicRMWInst>(&I) || isa<AtomicCmpXchgInst>(&I)) {
                    Value *P = isa<AtomicRMWInst>(&I) ? cast<AtomicRMWInst>(&I)->getPointerOperand()
                                                      : cast<AtomicCmpXchgInst>(&I)->getPointerOperand();
                    if (isMram(P->getType()))
                        D.error("atomic operation on MRAM " + fnName(I) + " (the DPU has none)");
                } else if (auto *MI = dyn_cast<MemIntrinsic>(&I)) {
                    bool dm = isMram(MI->getRawDest()->getType());
                    bool sm = isa<MemTransferInst>(MI) && isMram(cast<MemTransferInst>(MI)->getRawSource()->getType());
                    if (dm || sm)
                        work.push_back(&I);
                } else if (auto *CB = dyn_cast<CallBase>(&I)) {
                    if (CB->getIntrinsicID() != Intrinsic::not_intrinsic && !isa<MemIntrinsic>(CB)) {
                        for (Value *A : CB->args())
                            if (isMram(A->getType()) && CB->getIntrinsicID() != Intrinsic::lifetime_start &&
                                CB->getIntrinsicID() != Intrinsic::lifetime_end) {
                                D.error("intrinsic '" + CB->getCalledFunction()->getName() +
                                        "' on an MRAM pointer " + fnName(I) + " is not supported");
                                break;
                            }
                    }
                }
            }
        if (D.flush(M))
            return PreservedAnalyses::none();

        for (Instruction *I : work) {
            IRBuilder<> B(I);
            auto addrOf = [&](Value *P) { return B.CreatePtrToInt(P, I32); };
            if (auto *LI = dyn_cast<LoadInst>(I)) {
                Type *T = LI->getType();
                uint64_t n = DL.getTypeStoreSize(T);
                Value *R;
                if (n <= 8 && fitsRegister(T)) {
                    Value *v = B.CreateCall(Ld64, {addrOf(LI->getPointerOperand()), ConstantInt::get(I32, n)});
                    R = fromInt(B, B.CreateTrunc(v, B.getIntNTy(8 * n)), T, DL);
                } else {
                    AllocaInst *tmp = entryAlloca(*LI->getFunction(), T, DL);
                    B.CreateCall(Ld, {addrOf(LI->getPointerOperand()), tmp, ConstantInt::get(I64, n)});
                    R = B.CreateLoad(T, tmp);
                }
                LI->replaceAllUsesWith(R);
            } else if (auto *SI = dyn_cast<StoreInst>(I)) {
                Value *V = SI->getValueOperand();
                Type *T = V->getType();
                uint64_t n = DL.getTypeStoreSize(T);
                if (n <= 8 && fitsRegister(T)) {
                    Value *iv = B.CreateZExt(toInt(B, V, DL), I64);
                    B.CreateCall(St64, {addrOf(SI->getPointerOperand()), iv, ConstantInt::get(I32, n)});
                } else {
                    AllocaInst *tmp = entryAlloca(*SI->getFunction(), T, DL);
                    B.CreateStore(V, tmp);
                    B.CreateCall(St, {addrOf(SI->getPointerOperand()), tmp, ConstantInt::get(I64, n)});
                }
            } else if (auto *MT = dyn_cast<MemTransferInst>(I)) {
                Value *Dst = MT->getRawDest(), *Src = MT->getRawSource();
                Value *Len = B.CreateZExtOrTrunc(MT->getLength(), I64);
                bool dm = isMram(Dst->getType()), sm = isMram(Src->getType());
                if (dm && sm)
                    B.CreateCall(M2M, {addrOf(Dst), addrOf(Src), Len});
                else if (dm)
                    B.CreateCall(W2M, {addrOf(Dst), Src, Len});
                else
                    B.CreateCall(M2W, {Dst, addrOf(Src), Len});
            } else if (auto *MS = dyn_cast<MemSetInst>(I)) {
                Value *Len = B.CreateZExtOrTrunc(MS->getLength(), I64);
                B.CreateCall(Set, {addrOf(MS->getRawDest()), B.CreateZExt(MS->getValue(), I32), Len});
            }
            I->eraseFromParent();
        }
        return PreservedAnalyses::none();
    }

    static bool fitsRegister(Type *T)
    {
        if (T->isIntegerTy() || T->isFloatingPointTy() || T->isPointerTy())
            return !T->isX86_FP80Ty() && !T->isFP128Ty() && !T->isPPC_FP128Ty();
        if (auto *VT = dyn_cast<FixedVectorType>(T))
            return VT->getElementType()->isIntegerTy() || VT->getElementType()->isFloatingPointTy();
        return false;
    }
    static Value *toInt(IRBuilder<> &B, Value *V, const DataLayout &DL)
    {
        Type *T = V->getType();
        Type *IT = B.getIntNTy(8 * DL.getTypeStoreSize(T));
        if (T->isPointerTy())
            return B.CreateZExtOrTrunc(B.CreatePtrToInt(V, B.getIntNTy(DL.getPointerSizeInBits(T->getPointerAddressSpace()))), IT);
        if (T->isIntegerTy())
            return B.CreateZExtOrTrunc(V, IT);
        return B.CreateBitCast(V, IT);
    }
    static Value *fromInt(IRBuilder<> &B, Value *V, Type *T, const DataLayout &DL)
    {
        if (T->isPointerTy())
            return B.CreateIntToPtr(
                B.CreateZExtOrTrunc(V, B.getIntNTy(DL.getPointerSizeInBits(T->getPointerAddressSpace()))), T);
        if (T->isIntegerTy())
            return B.CreateZExtOrTrunc(V, T);
        return B.CreateBitCast(V, T);
    }
    static AllocaInst *entryAlloca(Function &F, Type *T, const DataLayout &DL)
    {
        IRBuilder<> B(&*F.getEntryBlock().getFirstInsertionPt());
        AllocaInst *A = B.CreateAlloca(T);
        A->setAlignment(std::max(Align(8), DL.getPrefTypeAlign(T)));
        return A;
    }
    static void checkCasts(Constant *C, const std::string &where, Diag &D)
    {
        std::vector<Constant *> stack{C};
        std::set<Constant *> seen;
        while (!stack.empty()) {
            Constant *X = stack.back();
            stack.pop_back();
            if (!seen.insert(X).second || isa<GlobalValue>(X))
                continue;
            if (auto *CE = dyn_cast<ConstantExpr>(X))
                if (CE->getOpcode() == Instruction::AddrSpaceCast &&
                    (isMram(CE->getType()) || isMram(CE->getOperand(0)->getType()))) {
                    D.error("cast between an MRAM and a WRAM pointer in " + where + " (not allowed on the DPU)");
                    return;
                }
            for (Value *Op : X->operands())
                if (auto *OC = dyn_cast<Constant>(Op))
                    stack.push_back(OC);
        }
    }
};

// ------------------------------------------------------------------- wram
struct WramPass : PassInfoMixin<WramPass> {
    State *S;
    explicit WramPass(State *s) : S(s) {}

    // Gathers `gs` into one packed struct global `name`; returns its size.
    uint64_t gather(Module &M, const std::vector<GlobalVariable *> &gs, StringRef name, bool constant,
                    uint32_t symKind, uint32_t symBase)
    {
        const DataLayout &DL = M.getDataLayout();
        LLVMContext &Ctx = M.getContext();
        Type *I8 = Type::getInt8Ty(Ctx);
        std::vector<Type *> fields;
        std::vector<Constant *> inits;
        std::vector<std::pair<GlobalVariable *, unsigned>> where;
        std::vector<uint64_t> offsets;
        uint64_t cur = 0, maxAlign = 8;
        for (GlobalVariable *G : gs) {
            Type *T = G->getValueType();
            uint64_t align = G->getAlign() ? G->getAlign()->value() : DL.getABITypeAlign(T).value();
            maxAlign = std::max(maxAlign, align);
            uint64_t at = alignTo(cur, align);
            if (at > cur) {
                ArrayType *pad = ArrayType::get(I8, at - cur);
                fields.push_back(pad);
                inits.push_back(ConstantAggregateZero::get(pad));
            }
            where.push_back({G, (unsigned)fields.size()});
            offsets.push_back(at);
            fields.push_back(T);
            inits.push_back(G->hasInitializer() ? G->getInitializer() : Constant::getNullValue(T));
            cur = at + DL.getTypeAllocSize(T);
        }
        uint64_t size = alignTo(cur, 8);
        if (size > cur) {
            ArrayType *pad = ArrayType::get(I8, size - cur);
            fields.push_back(pad);
            inits.push_back(ConstantAggregateZero::get(pad));
        }
        if (fields.empty()) { // keep the block addressable
            ArrayType *pad = ArrayType::get(I8, 8);
            fields.push_back(pad);
            inits.push_back(ConstantAggregateZero::get(pad));
        }
        StructType *ST = StructType::get(Ctx, fields, /*isPacked=*/true);
        GlobalVariable *Old = M.getGlobalVariable(name, true);
        auto *Block = new GlobalVariable(M, ST, constant, GlobalValue::InternalLinkage,
                                         ConstantStruct::get(ST, inits), name + ".def");
        Block->setAlignment(Align(std::max<uint64_t>(maxAlign, 64)));
        Type *I32 = Type::getInt32Ty(Ctx);
        for (size_t i = 0; i < where.size(); i++) {
            GlobalVariable *G = where[i].first;
            if (hostVisibleName(G->getName()))
                S->syms.push_back({G->getName().str(), symKind, (uint32_t)(symBase + offsets[i]),
                                   (uint32_t)DL.getTypeAllocSize(G->getValueType())});
            Constant *idx[] = {ConstantInt::get(I32, 0), ConstantInt::get(I32, where[i].second)};
            Constant *Field = ConstantExpr::getInBoundsGetElementPtr(ST, Block, idx);
            G->replaceAllUsesWith(Field);
        }
        for (auto &w : where)
            w.first->eraseFromParent();
        if (Old) {
            Old->replaceAllUsesWith(Block);
            Old->eraseFromParent();
        }
        Block->setName(name);
        return size;
    }

    PreservedAnalyses run(Module &M, ModuleAnalysisManager &)
    {
        Diag D;
        LLVMContext &Ctx = M.getContext();
        const DataLayout &DL = M.getDataLayout();
        Type *I32 = Type::getInt32Ty(Ctx), *Ptr = PointerType::get(Ctx, 0);
        // NR_TASKLETS and STACK_SIZE_DEFAULT: _nearmem_rt.h leaves their
        // values in every unit that saw them defined (the driver's -D values
        // are the fallback, then 1 tasklet and 1 KiB stacks).
        std::set<uint64_t> seenN, seenS;
        std::vector<GlobalVariable *> markers;
        for (GlobalVariable &G : M.globals()) {
            StringRef n = G.getName();
            std::set<uint64_t> *into = n.startswith("__nm_nr_tasklets_val") ? &seenN
                                       : n.startswith("__nm_stack_size_val") ? &seenS
                                                                             : nullptr;
            if (into) {
                if (G.hasInitializer())
                    if (auto *CI = dyn_cast<ConstantInt>(G.getInitializer()))
                        into->insert(CI->getZExtValue());
                markers.push_back(&G);
            } else if (n == "__stdout_buffer_size" && G.hasInitializer()) {
                if (auto *CI = dyn_cast<ConstantInt>(G.getInitializer()))
                    S->stdoutSize = CI->getZExtValue();
            }
        }
        for (GlobalVariable *G : markers) {
            removeFromUsed(M, G);
            G->removeDeadConstantUsers();
            if (G->use_empty())
                G->eraseFromParent();
        }
        if (seenN.size() > 1)
            D.error("source files were compiled with different NR_TASKLETS");
        else if (seenN.size() == 1)
            S->P.nrTasklets = (unsigned)*seenN.begin();
        if (seenS.size() > 1)
            D.error("source files were compiled with different STACK_SIZE_DEFAULT");
        else if (seenS.size() == 1)
            S->P.stackSize = (unsigned)*seenS.begin();
        if (S->P.stackSize == 0 || S->P.stackSize % 8 || S->P.stackSize > WRAM_SIZE)
            D.error("STACK_SIZE_DEFAULT=" + Twine(S->P.stackSize) + " is not a multiple of 8 between 8 and 65536");
        if (S->P.nrTasklets == 0 || S->P.nrTasklets > 24)
            D.error("NR_TASKLETS=" + Twine(S->P.nrTasklets) + ": the DPU runs 1 to 24 tasklets");

        std::vector<GlobalVariable *> data, rodata;
        for (GlobalVariable &G : M.globals()) {
            if (G.isDeclaration()) {
                if (!G.getName().startswith("__nm_") && !G.getName().startswith("llvm."))
                    D.error("undefined reference to '" + G.getName() + "' (a variable the DPU program does not define)");
                continue;
            }
            StringRef n = G.getName();
            if (n.startswith("llvm.") || n.startswith("__nm_meta") || n == "__nm_rt" || n == "__nm_cost_counter" ||
                n.startswith("__nm_mram_") ||
                n == "__nm_wram_data" || n == "__nm_wram_rodata")
                continue;
            if (G.getAddressSpace() != 0)
                continue;
            (G.isConstant() ? rodata : data).push_back(&G);
        }
        if (D.flush(M))
            return PreservedAnalyses::none();
        // Drop llvm.used/compiler.used entries of globals we are moving: the
        // block is referenced from the query function anyway.
        for (auto *G : data)
            removeFromUsed(M, G);
        for (auto *G : rodata)
            removeFromUsed(M, G);
        uint64_t dsize = gather(M, data, "__nm_wram_data", false, NM_DPU_SYM_WRAM, 0);
        uint64_t rsize = gather(M, rodata, "__nm_wram_rodata", true, NM_DPU_SYM_RODATA, (uint32_t)dsize);
        uint64_t stacks = (uint64_t)S->P.nrTasklets * S->P.stackSize;
        if (dsize + rsize + stacks > WRAM_SIZE)
            D.error("WRAM overflow: globals " + Twine(dsize) + " B + constants " + Twine(rsize) + " B + " +
                    Twine(S->P.nrTasklets) + " stacks x " + Twine(S->P.stackSize) + " B = " +
                    Twine(dsize + rsize + stacks) + " B > " + Twine(WRAM_SIZE) + " B");

        // Symbol table.
        StructType *SymTy = StructType::get(Ctx, {Ptr, I32, I32, I32, I32});
        std::vector<Constant *> rows;
        std::sort(S->syms.begin(), S->syms.end(), [](const SymRec &a, const SymRec &b) { return a.name < b.name; });
        for (auto &s : S->syms) {
            Constant *str = ConstantDataArray::getString(Ctx, s.name);
            auto *sg = new GlobalVariable(M, str->getType(), true, GlobalValue::PrivateLinkage, str, "__nm_meta_name");
            rows.push_back(ConstantStruct::get(SymTy, {sg, ConstantInt::get(I32, s.kind), ConstantInt::get(I32, s.address),
                                                       ConstantInt::get(I32, s.size), ConstantInt::get(I32, 0)}));
        }
        ArrayType *SymArr = ArrayType::get(SymTy, rows.size());
        MramPass::defineMeta(M, "__nm_symtab", SymArr, ConstantArray::get(SymArr, rows));
        MramPass::defineMeta(M, "__nm_nsyms", I32, ConstantInt::get(I32, rows.size()));
        MramPass::defineMeta(M, "__nm_wram_data_size", I32, ConstantInt::get(I32, dsize));
        MramPass::defineMeta(M, "__nm_wram_rodata_size", I32, ConstantInt::get(I32, rsize));
        MramPass::defineMeta(M, "__nm_nr_tasklets", I32, ConstantInt::get(I32, S->P.nrTasklets));
        MramPass::defineMeta(M, "__nm_stack_size", I32, ConstantInt::get(I32, S->P.stackSize));
        MramPass::defineMeta(M, "__nm_atomic_bits", I32, ConstantInt::get(I32, S->atomicBits));
        MramPass::defineMeta(M, "__nm_stdout_size", I32, ConstantInt::get(I32, S->stdoutSize));

        // The header the loader reads without mapping the file.
        ArrayType *Magic = ArrayType::get(Type::getInt8Ty(Ctx), 8);
        std::vector<Type *> ht{Magic};
        for (int i = 0; i < 9; i++)
            ht.push_back(I32);
        StructType *HT = StructType::get(Ctx, ht);
        std::vector<Constant *> hv{ConstantDataArray::getString(Ctx, StringRef(NM_DPU_MAGIC, 8), false)};
        uint32_t vals[9] = {NM_DPU_ABI_VERSION,  S->P.nrTasklets,          S->P.stackSize,
                            (uint32_t)dsize,     (uint32_t)rsize,          (uint32_t)S->mramVarsSize,
                            S->atomicBits,       (uint32_t)S->stdoutSize,  0};
        for (uint32_t v : vals)
            hv.push_back(ConstantInt::get(I32, v));
        auto *H = new GlobalVariable(M, HT, true, GlobalValue::InternalLinkage, ConstantStruct::get(HT, hv),
                                     "__nm_meta_header");
        H->setSection(NM_DPU_SECTION);
        H->setAlignment(Align(8));
        appendToUsed(M, {H});
        (void)DL;
        D.flush(M);
        return PreservedAnalyses::none();
    }

};

// ----------------------------------------------------------------- verify
// The DPU runtime is small: a program may only leave undefined what it
// provides (string and memory functions, a few of stdlib/ctype), as the
// DPU's linker would refuse anything else.
struct VerifyPass : PassInfoMixin<VerifyPass> {
    PreservedAnalyses run(Module &M, ModuleAnalysisManager &)
    {
        static const char *const allowed[] = {
            "memcpy", "memmove", "memset", "memcmp", "memchr", "strlen", "strnlen", "strcmp", "strncmp", "strcpy",
            "strncpy", "strcat", "strncat", "strchr", "strrchr", "strstr", "strspn", "strcspn", "strpbrk", "strtok_r",
            "stpcpy", "bzero", "memrchr", "strtol", "strtoul", "strtoll", "strtoull", "atoi", "atol", "atoll", "abs",
            "labs", "llabs", "div", "ldiv", "__ctype_b_loc", "__ctype_tolower_loc", "__ctype_toupper_loc", "tolower",
            "toupper", "isdigit", "isalpha", "isalnum", "isspace", "isupper", "islower", "isxdigit", "isprint",
            "ispunct", "__errno_location", "qsort", "bsearch", "rand_r", "__isoc99_sscanf", "sscanf", "snprintf",
            "sprintf", "vsnprintf"};
        std::set<std::string> ok(std::begin(allowed), std::end(allowed));
        Diag D;
        for (Function &F : M) {
            if (!F.isDeclaration() || F.isIntrinsic() || F.use_empty())
                continue;
            if (F.hasFnAttribute("dontcall-error")) { // __attribute__((error(...))): a refused constant
                for (User *U : F.users())
                    if (auto *CB = dyn_cast<CallBase>(U))
                        D.error(F.getFnAttribute("dontcall-error").getValueAsString() + " " + fnName(*CB));
            } else if (!ok.count(F.getName().str())) {
                D.error("undefined reference to '" + F.getName() + "' (not provided by the DPU runtime)");
            }
        }
        D.flush(M);
        return PreservedAnalyses::all();
    }
};

bool parseParams(StringRef Name, Params &P)
{
    if (!Name.consume_front("nearmem-dpu"))
        return false;
    if (Name.empty())
        return true;
    if (!Name.consume_front("<") || !Name.consume_back(">"))
        return false;
    SmallVector<StringRef, 4> parts;
    Name.split(parts, ';', -1, false);
    for (StringRef kv : parts) {
        auto [k, v] = kv.split('=');
        unsigned x;
        if (v.getAsInteger(10, x))
            return false;
        if (k == "nr_tasklets") {
            P.nrTasklets = x;
            P.nrTaskletsGiven = true;
        } else if (k == "stack_size")
            P.stackSize = x;
        else if (k == "opt")
            P.opt = x;
        else if (k == "cost")
            P.cost = x != 0;
        else
            return false;
    }
    return true;
}

// The whole pipeline, in order.
void nearmemDpuPipeline(ModulePassManager &MPM, const Params &P)
{
    auto *S = new State(); // lives as long as the process (one module per opt run)
    S->P = P;
    MPM.addPass(PreparePass());
    MPM.addPass(nearmem::GluePass()); // before wram moves the annotation strings
    MPM.addPass(MramPass(S));
    MPM.addPass(LowerPass());
    MPM.addPass(GlobalDCEPass()); // drop runtime code the program does not use, before laying out WRAM
    MPM.addPass(AtomicPass(S));
    MPM.addPass(WramPass(S));
    MPM.addPass(nearmem::DpuOptPass(P.opt));
    if (P.cost)
        MPM.addPass(nearmem::CostPass());
    MPM.addPass(nearmem::ReleasePass());
    MPM.addPass(VerifyPass());
}

} // namespace

extern "C" LLVM_ATTRIBUTE_WEAK PassPluginLibraryInfo llvmGetPassPluginInfo()
{
    return {LLVM_PLUGIN_API_VERSION, "nearmem-dpu", "1", [](PassBuilder &PB) {
                PB.registerPipelineParsingCallback(
                    [](StringRef Name, ModulePassManager &MPM, ArrayRef<PassBuilder::PipelineElement>) {
                        Params P;
                        if (!parseParams(Name, P))
                            return false;
                        nearmemDpuPipeline(MPM, P);
                        return true;
                    });
            }};
}
