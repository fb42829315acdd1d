//===- PrepareEntry.cpp - the artifact calling convention -----------------===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#include "xfmr/Target/CPU/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"
#include "llvm/ADT/SmallBitVector.h"
#include "llvm/ADT/SmallPtrSet.h"

using namespace mlir;

namespace xfmr::cpu {
#define GEN_PASS_DEF_PREPAREENTRYPASS
#include "xfmr/Target/CPU/Passes.h.inc"
} // namespace xfmr::cpu

namespace xfmr::cpu {
namespace {

/// Marks the KV pool arguments and results of a step function (xfmr-paged-kv).
constexpr llvm::StringLiteral kPoolAttr = "xfmr.kv_pool";

/// True when bufferization gives `v` a buffer of its own: a result of a
/// destination-style op (linalg.generic, fill...) computed into a
/// tensor.empty, possibly through fills.
bool isFreshAllocation(Value v) {
  while (auto r = dyn_cast<OpResult>(v)) {
    auto dps = dyn_cast<DestinationStyleOpInterface>(r.getOwner());
    if (!dps)
      return false;
    v = dps.getDpsInitOperand(r.getResultNumber())->get();
    if (v.getDefiningOp<tensor::EmptyOp>())
      return true;
  }
  return false;
}

struct PrepareEntryPass : impl::PrepareEntryPassBase<PrepareEntryPass> {
  using Base::Base;

  void runOnOperation() override {
    for (auto f : getOperation().getOps<func::FuncOp>()) {
      if (!f.isPublic() || f.isExternal())
        continue;
      f->setAttr("llvm.emit_c_interface", UnitAttr::get(&getContext()));
      // Names and dim params went to the manifest; LLVM has no use for them.
      // Inputs belong to the caller: never bufferized in place, except the
      // KV pools of a step function, which the function updates in place
      // and returns (bufferization then drops those results).
      SmallVector<unsigned> poolArgs;
      for (unsigned i = 0; i < f.getNumArguments(); ++i) {
        bool pool = f.getArgAttr(i, kPoolAttr) != nullptr;
        if (pool)
          poolArgs.push_back(i);
        f.setArgAttrs(i, ArrayRef<NamedAttribute>{});
        if (isa<TensorType>(f.getArgument(i).getType()))
          f.setArgAttr(i, "bufferization.writable", BoolAttr::get(&getContext(), pool));
      }
      llvm::SmallBitVector poolResults(f.getNumResults());
      size_t nextPool = 0;
      for (unsigned i = 0; i < f.getNumResults(); ++i) {
        Attribute pool = f.getResultAttr(i, kPoolAttr);
        poolResults[i] = pool != nullptr;
        f.setResultAttrs(i, ArrayRef<NamedAttribute>{});
        // For xfmr-drop-pool-results: the argument it updates (the k-th
        // pool result is the k-th pool argument).
        if (pool && nextPool < poolArgs.size())
          f.setResultAttr(i, kPoolAttr,
                          IntegerAttr::get(IntegerType::get(&getContext(), 64),
                                           poolArgs[nextPool++]));
      }
      f.walk([&](func::ReturnOp ret) {
        OpBuilder b(ret);
        llvm::SmallPtrSet<Value, 4> returned;
        for (OpOperand &operand : ret->getOpOperands()) {
          Value v = operand.get();
          auto type = dyn_cast<RankedTensorType>(v.getType());
          // A value computed into its own new buffer is returned as is (once).
          if (!type || poolResults[operand.getOperandNumber()] ||
              (isFreshAllocation(v) && returned.insert(v).second))
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
