//===- DropPoolResults.cpp - remove in-place KV pool results --------------===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#include "xfmr/Target/CPU/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/BitVector.h"

using namespace mlir;

namespace xfmr::cpu {
#define GEN_PASS_DEF_DROPPOOLRESULTSPASS
#include "xfmr/Target/CPU/Passes.h.inc"
} // namespace xfmr::cpu

namespace xfmr::cpu {
namespace {

constexpr llvm::StringLiteral kPoolAttr = "xfmr.kv_pool";

struct DropPoolResultsPass : impl::DropPoolResultsPassBase<DropPoolResultsPass> {
  using Base::Base;

  void runOnOperation() override {
    for (auto f : getOperation().getOps<func::FuncOp>()) {
      if (f.isExternal())
        continue;
      llvm::BitVector drop(f.getNumResults());
      for (unsigned i = 0; i < f.getNumResults(); ++i) {
        auto pool = f.getResultAttrOfType<IntegerAttr>(i, kPoolAttr);
        if (!pool)
          continue;
        int64_t arg = pool.getInt();
        for (auto ret : f.getOps<func::ReturnOp>()) {
          Value v = ret.getOperand(i);
          if (arg >= f.getNumArguments() || v != f.getArgument(arg)) {
            f.emitError("KV pool result ")
                << i << " is not written in place into argument " << arg;
            return signalPassFailure();
          }
        }
        drop.set(i);
      }
      if (drop.none())
        continue;
      for (auto ret : f.getOps<func::ReturnOp>())
        ret->eraseOperands(drop);
      if (failed(f.eraseResults(drop))) {
        f.emitError("cannot drop the KV pool results");
        return signalPassFailure();
      }
    }
  }
};

} // namespace
} // namespace xfmr::cpu
