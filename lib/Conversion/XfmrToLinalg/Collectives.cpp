//===- Collectives.cpp - xfmr.all_reduce to a runtime call ----------------===//
//
// Part of xfmr.
//
// xfmr.all_reduce and xfmr.all_gather become calls of xfmr_uk_all_reduce_f32
// and xfmr_uk_all_gather_f32 (runtime/ukernels/Collectives.h) from a copy of
// the input into a fresh buffer: the runtime sums or gathers the ranks'
// tensors over MPI, or copies in one process. The pipeline stages' ops
// (xfmr.stage_receive, xfmr.stage_send, xfmr.stage_broadcast) become calls of
// xfmr_uk_stage_{receive,send,broadcast}_f32 the same way.
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
constexpr llvm::StringLiteral kAllGather = "xfmr_uk_all_gather_f32";
constexpr llvm::StringLiteral kStageSend = "xfmr_uk_stage_send_f32";
constexpr llvm::StringLiteral kStageReceive = "xfmr_uk_stage_receive_f32";
constexpr llvm::StringLiteral kStageBroadcast = "xfmr_uk_stage_broadcast_f32";

/// The product of `t`'s dims [from, to) as an i64 (dynamic ones read), and
/// the dynamic dims of `t` for an allocation of its shape.
Value elementsOf(OpBuilder &b, Location loc, Value t, int64_t from,
                 int64_t to) {
  auto type = cast<RankedTensorType>(t.getType());
  Type i64 = b.getI64Type();
  Value n = arith::ConstantIntOp::create(b, loc, i64, 1);
  for (int64_t d = from; d < to; ++d) {
    Value size =
        type.isDynamicDim(d)
            ? arith::IndexCastOp::create(b, loc, i64,
                                         tensor::DimOp::create(b, loc, t, d))
                  .getResult()
            : arith::ConstantIntOp::create(b, loc, i64, type.getDimSize(d))
                  .getResult();
    n = arith::MulIOp::create(b, loc, n, size);
  }
  return n;
}

struct AllReduceLowering : public OpRewritePattern<AllReduceOp> {
  using Base::Base;

  LogicalResult matchAndRewrite(AllReduceOp op,
                                PatternRewriter &b) const override {
    Location loc = op.getLoc();
    auto type = op.getInput().getType();
    Type i64 = b.getI64Type();
    Type ptr = LLVM::LLVMPointerType::get(b.getContext());
    declareKernel(b, op, kAllReduce, {ptr, ptr, i64});

    SmallVector<Value> dyn;
    for (int64_t d = 0; d < type.getRank(); ++d)
      if (type.isDynamicDim(d))
        dyn.push_back(tensor::DimOp::create(b, loc, op.getInput(), d));
    Value count = elementsOf(b, loc, op.getInput(), 0, type.getRank());
    Value in = kernelInput(b, loc, op.getInput());
    auto memType = MemRefType::get(type.getShape(), type.getElementType());
    Value out = memref::AllocOp::create(b, loc, memType, dyn);
    func::CallOp::create(
        b, loc, kAllReduce, TypeRange{},
        ValueRange{addressOf(b, loc, in), addressOf(b, loc, out), count});
    b.replaceOp(op, bufferization::ToTensorOp::create(
                        b, loc, type, out, b.getUnitAttr(), b.getUnitAttr()));
    return success();
  }
};

/// xfmr.all_gather: the input's rows ([rows, cols], the leading dims
/// collapsed) to a [rows, ranks * cols] result.
struct AllGatherLowering : public OpRewritePattern<AllGatherOp> {
  using Base::Base;

  LogicalResult matchAndRewrite(AllGatherOp op,
                                PatternRewriter &b) const override {
    Location loc = op.getLoc();
    auto inType = op.getInput().getType();
    auto outType = op.getResult().getType();
    int64_t rank = inType.getRank();
    if (outType.isDynamicDim(rank - 1))
      return b.notifyMatchFailure(op, "needs a static gathered width");
    Type i64 = b.getI64Type();
    Type ptr = LLVM::LLVMPointerType::get(b.getContext());
    declareKernel(b, op, kAllGather, {ptr, ptr, i64, i64});
    SmallVector<Value> dyn;
    for (int64_t d = 0; d < rank; ++d)
      if (outType.isDynamicDim(d))
        dyn.push_back(tensor::DimOp::create(b, loc, op.getInput(), d));
    Value rows = elementsOf(b, loc, op.getInput(), 0, rank - 1);
    Value cols = elementsOf(b, loc, op.getInput(), rank - 1, rank);
    Value in = kernelInput(b, loc, op.getInput());
    auto memType =
        MemRefType::get(outType.getShape(), outType.getElementType());
    Value out = memref::AllocOp::create(b, loc, memType, dyn);
    func::CallOp::create(
        b, loc, kAllGather, TypeRange{},
        ValueRange{addressOf(b, loc, in), addressOf(b, loc, out), rows, cols});
    b.replaceOp(op, bufferization::ToTensorOp::create(b, loc, outType, out,
                                                      b.getUnitAttr(),
                                                      b.getUnitAttr()));
    return success();
  }
};

/// A fresh buffer of `type` (`sizes` its dynamic dims, as index) and its
/// element count as an i64.
std::pair<Value, Value> allocate(OpBuilder &b, Location loc, RankedTensorType type,
                                 ValueRange sizes) {
  auto memType = MemRefType::get(type.getShape(), type.getElementType());
  Value buffer = memref::AllocOp::create(b, loc, memType, sizes);
  Type i64 = b.getI64Type();
  Value n = arith::ConstantIntOp::create(b, loc, i64, 1);
  auto next = sizes.begin();
  for (int64_t d = 0; d < type.getRank(); ++d) {
    Value size = type.isDynamicDim(d)
                     ? arith::IndexCastOp::create(b, loc, i64, *next++).getResult()
                     : arith::ConstantIntOp::create(b, loc, i64, type.getDimSize(d)).getResult();
    n = arith::MulIOp::create(b, loc, n, size);
  }
  return {buffer, n};
}

/// xfmr.stage_receive: the previous stage's hidden states into a fresh
/// buffer.
struct StageReceiveLowering : public OpRewritePattern<StageReceiveOp> {
  using Base::Base;

  LogicalResult matchAndRewrite(StageReceiveOp op, PatternRewriter &b) const override {
    Location loc = op.getLoc();
    auto type = op.getResult().getType();
    Type ptr = LLVM::LLVMPointerType::get(b.getContext());
    declareKernel(b, op, kStageReceive, {ptr, b.getI64Type()});
    auto [out, count] = allocate(b, loc, type, op.getSizes());
    func::CallOp::create(b, loc, kStageReceive, TypeRange{},
                         ValueRange{addressOf(b, loc, out), count});
    b.replaceOp(op, bufferization::ToTensorOp::create(b, loc, type, out, b.getUnitAttr(),
                                                      b.getUnitAttr()));
    return success();
  }
};

/// xfmr.stage_send: the hidden states to the next stage, then the last
/// stage's logits into a fresh buffer.
struct StageSendLowering : public OpRewritePattern<StageSendOp> {
  using Base::Base;

  LogicalResult matchAndRewrite(StageSendOp op, PatternRewriter &b) const override {
    Location loc = op.getLoc();
    auto inType = op.getHidden().getType();
    auto type = op.getResult().getType();
    Type i64 = b.getI64Type();
    Type ptr = LLVM::LLVMPointerType::get(b.getContext());
    declareKernel(b, op, kStageSend, {ptr, i64});
    declareKernel(b, op, kStageBroadcast, {ptr, i64});
    Value sent = elementsOf(b, loc, op.getHidden(), 0, inType.getRank());
    Value in = kernelInput(b, loc, op.getHidden());
    func::CallOp::create(b, loc, kStageSend, TypeRange{}, ValueRange{addressOf(b, loc, in), sent});
    auto [out, count] = allocate(b, loc, type, op.getSizes());
    func::CallOp::create(b, loc, kStageBroadcast, TypeRange{},
                         ValueRange{addressOf(b, loc, out), count});
    b.replaceOp(op, bufferization::ToTensorOp::create(b, loc, type, out, b.getUnitAttr(),
                                                      b.getUnitAttr()));
    return success();
  }
};

/// xfmr.stage_broadcast: the logits, read from a copy, to the other stages;
/// the result is the input.
struct StageBroadcastLowering : public OpRewritePattern<StageBroadcastOp> {
  using Base::Base;

  LogicalResult matchAndRewrite(StageBroadcastOp op, PatternRewriter &b) const override {
    Location loc = op.getLoc();
    auto type = op.getInput().getType();
    Type ptr = LLVM::LLVMPointerType::get(b.getContext());
    declareKernel(b, op, kStageBroadcast, {ptr, b.getI64Type()});
    Value count = elementsOf(b, loc, op.getInput(), 0, type.getRank());
    Value in = kernelInput(b, loc, op.getInput());
    func::CallOp::create(b, loc, kStageBroadcast, TypeRange{},
                         ValueRange{addressOf(b, loc, in), count});
    b.replaceOp(op, op.getInput());
    return success();
  }
};

} // namespace

void populateCollectiveLoweringPatterns(RewritePatternSet &patterns) {
  patterns.add<AllReduceLowering, AllGatherLowering, StageReceiveLowering, StageSendLowering,
               StageBroadcastLowering>(patterns.getContext());
}

} // namespace xfmr::lowering
