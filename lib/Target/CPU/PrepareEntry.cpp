//===- PrepareEntry.cpp - the artifact calling convention -----------------===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#include "xfmr/Target/CPU/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

using namespace mlir;

namespace xfmr::cpu {
#define GEN_PASS_DEF_PREPAREENTRYPASS
#include "xfmr/Target/CPU/Passes.h.inc"
} // namespace xfmr::cpu

namespace xfmr::cpu {
namespace {

struct PrepareEntryPass : impl::PrepareEntryPassBase<PrepareEntryPass> {
  using Base::Base;

  void runOnOperation() override {
    for (auto f : getOperation().getOps<func::FuncOp>()) {
      if (!f.isPublic() || f.isExternal())
        continue;
      f->setAttr("llvm.emit_c_interface", UnitAttr::get(&getContext()));
      // Names and dim params went to the manifest; LLVM has no use for them.
      for (unsigned i = 0; i < f.getNumArguments(); ++i)
        f.setArgAttrs(i, ArrayRef<NamedAttribute>{});
      for (unsigned i = 0; i < f.getNumResults(); ++i)
        f.setResultAttrs(i, ArrayRef<NamedAttribute>{});
      f.walk([&](func::ReturnOp ret) {
        OpBuilder b(ret);
        for (OpOperand &operand : ret->getOpOperands()) {
          Value v = operand.get();
          auto type = dyn_cast<RankedTensorType>(v.getType());
          if (!type)
            continue;
          auto copy = bufferization::AllocTensorOp::create(
              b, ret.getLoc(), type, ValueRange{}, /*copy=*/v);
          operand.set(copy);
        }
      });
    }
  }
};

} // namespace
} // namespace xfmr::cpu
