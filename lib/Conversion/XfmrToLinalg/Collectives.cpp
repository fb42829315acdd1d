//===- Collectives.cpp - xfmr.all_reduce to a runtime call ----------------===//
//
// Part of xfmr.
//
// xfmr.all_reduce becomes a call of xfmr_uk_all_reduce_f32 (runtime/ukernels
// /Collectives.h) from a copy of its input into a fresh buffer: the runtime
// sums the ranks' partial tensors over MPI, or copies in one process.
//
//===----------------------------------------------------------------------===//

#include "Patterns.h"
#include "xfmr/Conversion/LoweringUtils.h"

#include "dialects/xfmr/IR/XfmrOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;

namespace xfmr::lowering {
namespace {

constexpr llvm::StringLiteral kAllReduce = "xfmr_uk_all_reduce_f32";

struct AllReduceLowering : public OpRewritePattern<AllReduceOp> {
  using Base::Base;

  LogicalResult matchAndRewrite(AllReduceOp op, PatternRewriter &b) const override {
    Location loc = op.getLoc();
    auto type = op.getInput().getType();
    Type i64 = b.getI64Type();
    Type ptr = LLVM::LLVMPointerType::get(b.getContext());
    declareKernel(b, op, kAllReduce, {ptr, ptr, i64});

    SmallVector<Value> dyn;
    Value count = arith::ConstantIntOp::create(b, loc, i64, 1);
    for (int64_t d = 0; d < type.getRank(); ++d) {
      Value size;
      if (type.isDynamicDim(d)) {
        Value dim = tensor::DimOp::create(b, loc, op.getInput(), d);
        dyn.push_back(dim);
        size = arith::IndexCastOp::create(b, loc, i64, dim);
      } else {
        size = arith::ConstantIntOp::create(b, loc, i64, type.getDimSize(d));
      }
      count = arith::MulIOp::create(b, loc, count, size);
    }
    Value in = kernelInput(b, loc, op.getInput());
    auto memType = MemRefType::get(type.getShape(), type.getElementType());
    Value out = memref::AllocOp::create(b, loc, memType, dyn);
    func::CallOp::create(b, loc, kAllReduce, TypeRange{},
                         ValueRange{addressOf(b, loc, in), addressOf(b, loc, out), count});
    b.replaceOp(op, bufferization::ToTensorOp::create(b, loc, type, out, b.getUnitAttr(),
                                                      b.getUnitAttr()));
    return success();
  }
};

} // namespace

void populateCollectiveLoweringPatterns(RewritePatternSet &patterns) {
  patterns.add<AllReduceLowering>(patterns.getContext());
}

} // namespace xfmr::lowering
