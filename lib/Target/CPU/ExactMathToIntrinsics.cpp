//===- ExactMathToIntrinsics.cpp - exact math ops as LLVM intrinsics ------===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#include "xfmr/Target/CPU/Passes.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"

using namespace mlir;

namespace xfmr::cpu {
#define GEN_PASS_DEF_EXACTMATHTOINTRINSICSPASS
#include "xfmr/Target/CPU/Passes.h.inc"
} // namespace xfmr::cpu

namespace xfmr::cpu {
namespace {

/// `op` as the LLVM intrinsic `To` on the same operands, if it is a `From`.
template <typename From, typename To>
bool replaceWith(Operation *op) {
  if (!isa<From>(op))
    return false;
  OpBuilder b(op);
  Value repl = To::create(b, op->getLoc(), op->getOperands()).getResult();
  op->getResult(0).replaceAllUsesWith(repl);
  op->erase();
  return true;
}

struct ExactMathToIntrinsicsPass
    : impl::ExactMathToIntrinsicsPassBase<ExactMathToIntrinsicsPass> {
  using Base::Base;

  void runOnOperation() override {
    getOperation()->walk([](Operation *op) {
      // f32 / f64 scalars and vectors (narrower floats were widened by
      // math-extend-to-supported-types).
      if (op->getNumResults() != 1)
        return;
      Type element = getElementTypeOrSelf(op->getResult(0).getType());
      if (!element.isF32() && !element.isF64())
        return;
      (void)(replaceWith<math::FmaOp, LLVM::FMAOp>(op) ||
             replaceWith<math::FloorOp, LLVM::FFloorOp>(op) ||
             replaceWith<math::CeilOp, LLVM::FCeilOp>(op) ||
             replaceWith<math::TruncOp, LLVM::FTruncOp>(op) ||
             replaceWith<math::RoundOp, LLVM::RoundOp>(op) ||
             replaceWith<math::RoundEvenOp, LLVM::RoundEvenOp>(op));
    });
  }
};

} // namespace
} // namespace xfmr::cpu
