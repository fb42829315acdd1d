//===- MergeKernelModules.cpp - one gpu.module for every kernel -----------===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#include "xfmr/Target/GPU/Passes.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

using namespace mlir;

namespace xfmr::gpu {
#define GEN_PASS_DEF_MERGEKERNELMODULESPASS
#include "xfmr/Target/GPU/Passes.h.inc"
} // namespace xfmr::gpu

namespace xfmr::gpu {
namespace {

/// Shared-memory buffers start on 128 bytes: WMMA loads and stores need
/// 256-bit aligned tile rows, and the default alignment is the element's.
void alignWorkgroupBuffers(ModuleOp module) {
  module.walk([](mlir::gpu::GPUFuncOp f) {
    Builder b(f.getContext());
    for (unsigned i = 0; i < f.getNumWorkgroupAttributions(); ++i)
      f.setWorkgroupAttributionAttr(i, LLVM::LLVMDialect::getAlignAttrName(),
                                    b.getI64IntegerAttr(128));
  });
}

struct MergeKernelModulesPass : impl::MergeKernelModulesPassBase<MergeKernelModulesPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    alignWorkgroupBuffers(module);
    auto modules = llvm::to_vector(module.getOps<mlir::gpu::GPUModuleOp>());
    if (modules.size() < 2)
      return;
    mlir::gpu::GPUModuleOp into = modules.front();
    // Outlining names every kernel after its function (all alike) and each
    // module uniquely: a kernel takes its module's name.
    MLIRContext *ctx = module.getContext();
    DenseMap<StringAttr, StringAttr> kernelOf; // module -> its kernel's new name
    for (mlir::gpu::GPUModuleOp m : modules)
      for (auto f : m.getOps<mlir::gpu::GPUFuncOp>())
        if (f.isKernel()) {
          f.setName(m.getName());
          kernelOf[m.getNameAttr()] = f.getNameAttr();
        }
    SymbolTable table(into);
    for (mlir::gpu::GPUModuleOp from : llvm::drop_begin(modules)) {
      for (Operation &op : llvm::make_early_inc_range(from.getBody()->getOperations())) {
        auto name = op.getAttrOfType<StringAttr>(SymbolTable::getSymbolAttrName());
        if (!name)
          continue;
        if (Operation *existing = table.lookup(name)) {
          // Outlining clones the host's constant globals into each module
          // that reads them: the same symbol, the same contents.
          if (isa<mlir::gpu::GPUFuncOp>(op) ||
              existing->getAttrDictionary() != op.getAttrDictionary()) {
            op.emitError("kernel modules disagree on symbol @") << name.getValue();
            return signalPassFailure();
          }
          continue;
        }
        op.moveBefore(into.getBody(), into.getBody()->end());
        table.insert(&op);
      }
    }
    auto intoName = StringAttr::get(ctx, into.getName());
    module.walk([&](mlir::gpu::LaunchFuncOp launch) {
      StringAttr kernel = kernelOf.lookup(launch.getKernelModuleName());
      launch.setKernelAttr(SymbolRefAttr::get(intoName, {FlatSymbolRefAttr::get(kernel)}));
    });
    for (mlir::gpu::GPUModuleOp from : llvm::drop_begin(modules))
      from.erase();
  }
};

} // namespace
} // namespace xfmr::gpu
