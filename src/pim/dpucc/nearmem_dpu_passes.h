// The costing steps of the nearmem-dpu pipeline (nearmem_dpu_cost.cpp),
// used by nearmemDpuPipeline() in nearmem_dpu_pass.cpp.
#ifndef NEARMEM_DPU_PASSES_H
#define NEARMEM_DPU_PASSES_H

#include "llvm/IR/PassManager.h"

// The annotation NM_PIM_HW_MODEL puts on a function (nearmem_pim.h).
#define NM_PIM_HW_MODEL_ANNOTATION "nearmem.hw_model"

namespace nearmem {

// Keeps the runtime's glue out of line and reads NM_PIM_HW_MODEL marks.
struct GluePass : llvm::PassInfoMixin<GluePass> {
    llvm::PreservedAnalyses run(llvm::Module &M, llvm::ModuleAnalysisManager &);
};

// Whole-program optimisation as for the DPU (no vectors, 32-bit integers).
struct DpuOptPass : llvm::PassInfoMixin<DpuOptPass> {
    unsigned level;
    explicit DpuOptPass(unsigned l) : level(l) {}
    llvm::PreservedAnalyses run(llvm::Module &M, llvm::ModuleAnalysisManager &);
};

// Per-block charging of the modeled DPU instructions.
struct CostPass : llvm::PassInfoMixin<CostPass> {
    llvm::PreservedAnalyses run(llvm::Module &M, llvm::ModuleAnalysisManager &);
};

// Lets the host compiler inline the glue again.
struct ReleasePass : llvm::PassInfoMixin<ReleasePass> {
    llvm::PreservedAnalyses run(llvm::Module &M, llvm::ModuleAnalysisManager &);
};

} // namespace nearmem

#endif
