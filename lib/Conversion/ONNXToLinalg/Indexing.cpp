//===- Indexing.cpp - index-driven onnx ops to linalg.generic -------------===//
//
// Part of xfmr.
//
// Gather, GatherElements, GatherND, Trilu, EyeLike and OneHot: one element per output
// position, read with tensor.extract at a computed index. Indices are
// normalized (negative counts from the end) and checked at run time: an out
// of range index aborts instead of reading out of bounds.
//
//===----------------------------------------------------------------------===//

#include "Common.h"

#include "dialects/onnx/IR/ONNXOps.h"

#include <type_traits>

using namespace mlir;

namespace xfmr::lowering {
namespace {

/// Gather: out[a, i.., b] = data[a, indices[i..], b] along the axis;
/// GatherElements: out[..i..] = data[..indices[..i..]..] (same ranks).
template <typename OpTy> struct GatherLowering : ONNXOpLowering<OpTy> {
  using ONNXOpLowering<OpTy>::ONNXOpLowering;
  using OpAdaptor = typename ONNXOpLowering<OpTy>::OpAdaptor;
  static constexpr bool elements = std::is_same_v<OpTy, onnx::GatherElementsOp>;

  LogicalResult lower(OpTy op, OpAdaptor adaptor,
                      ConversionPatternRewriter &rewriter) const override;
};

template <typename OpTy>
LogicalResult
GatherLowering<OpTy>::lower(OpTy op, OpAdaptor adaptor,
                            ConversionPatternRewriter &rewriter) const {
  StringRef name = elements ? "GatherElements" : "Gather";
  Location loc = op->getLoc();
  Value data = adaptor.getData(), indices = adaptor.getIndices();
  auto dType = cast<RankedTensorType>(data.getType());
  auto iType = cast<RankedTensorType>(indices.getType());
  int64_t r = dType.getRank(), q = iType.getRank();
  int64_t axisAttr = op.getAxis();
  auto axis = normalizeAxis(axisAttr, r);
  if (!axis)
    return this->unsupported(op, "axis out of range");
  bool uns = isUnsignedInt(elementType(op.getIndices()));
  RankedTensorType type = this->resultType(op);
  Value axisDim = dimValue(rewriter, loc, data, *axis);
  int64_t ax = *axis;
  SmallVector<OpFoldResult> sizes;
  if (elements) {
    if (q != r)
      return this->unsupported(op, "indices rank differs from data rank");
    sizes = mixedSizes(rewriter, loc, indices);
  } else {
    for (int64_t d = 0; d < ax; ++d)
      sizes.push_back(tensor::getMixedSize(rewriter, loc, data, d));
    for (int64_t d = 0; d < q; ++d)
      sizes.push_back(tensor::getMixedSize(rewriter, loc, indices, d));
    for (int64_t d = ax + 1; d < r; ++d)
      sizes.push_back(tensor::getMixedSize(rewriter, loc, data, d));
  }
  Value result = buildIndexed(
      rewriter, loc, type, sizes,
      [&](OpBuilder &b, Location l, ValueRange out) -> Value {
        SmallVector<Value> at, in;
        if (elements) {
          Value i = tensor::ExtractOp::create(b, l, indices, out);
          in.assign(out.begin(), out.end());
          in[ax] = checkedIndex(b, l, i, axisDim, uns, name);
          return tensor::ExtractOp::create(b, l, data, in);
        }
        for (int64_t d = 0; d < q; ++d)
          at.push_back(out[ax + d]);
        Value i = tensor::ExtractOp::create(b, l, indices, at);
        for (int64_t d = 0; d < ax; ++d)
          in.push_back(out[d]);
        in.push_back(checkedIndex(b, l, i, axisDim, uns, name));
        for (int64_t d = ax + 1; d < r; ++d)
          in.push_back(out[q + d - 1]);
        return tensor::ExtractOp::create(b, l, data, in);
      });
  rewriter.replaceOp(op, result);
  return success();
}

struct GatherNDLowering : ONNXOpLowering<onnx::GatherNDOp> {
  using ONNXOpLowering::ONNXOpLowering;
  LogicalResult lower(onnx::GatherNDOp op, OpAdaptor adaptor,
                      ConversionPatternRewriter &rewriter) const override;
};

/// out[i_0..i_{q-2}, rest] = data[i_0..i_{b-1}, indices[i_0..i_{q-2}, 0..k-1],
/// rest] for `b` batch dims and k = the static last dim of the indices
/// (the dynamo exporter's advanced indexing, e.g. Hugging Face's masks).
LogicalResult
GatherNDLowering::lower(onnx::GatherNDOp op, OpAdaptor adaptor,
                        ConversionPatternRewriter &rewriter) const {
  ValueRange operands = adaptor.getOperands();
  Location loc = op->getLoc();
  Value data = operands[0], indices = operands[1];
  auto dType = cast<RankedTensorType>(data.getType());
  auto iType = cast<RankedTensorType>(indices.getType());
  int64_t r = dType.getRank(), q = iType.getRank();
  int64_t b = op.getBatchDims();
  if (q < 1 || iType.isDynamicDim(q - 1))
    return unsupported(op, "the indices' last dim is not static");
  int64_t k = iType.getDimSize(q - 1);
  if (b < 0 || b >= q || b >= r || k < 1 || b + k > r)
    return unsupported(op, "batch_dims or the index depth out of range");
  bool uns = isUnsignedInt(elementType(op->getOperand(1)));
  SmallVector<OpFoldResult> sizes;
  for (int64_t d = 0; d < q - 1; ++d)
    sizes.push_back(tensor::getMixedSize(rewriter, loc, indices, d));
  for (int64_t d = b + k; d < r; ++d)
    sizes.push_back(tensor::getMixedSize(rewriter, loc, data, d));
  SmallVector<Value> bounds;
  for (int64_t j = 0; j < k; ++j)
    bounds.push_back(dimValue(rewriter, loc, data, b + j));
  Value result = buildIndexed(
      rewriter, loc, resultType(op), sizes,
      [&](OpBuilder &bld, Location l, ValueRange out) -> Value {
        SmallVector<Value> in(out.begin(), out.begin() + b);
        SmallVector<Value> at(out.begin(), out.begin() + (q - 1));
        at.push_back(Value());
        for (int64_t j = 0; j < k; ++j) {
          at.back() = indexConstant(bld, l, j);
          Value i = tensor::ExtractOp::create(bld, l, indices, at);
          in.push_back(checkedIndex(bld, l, i, bounds[j], uns, "GatherND"));
        }
        in.append(out.begin() + (q - 1), out.end());
        return tensor::ExtractOp::create(bld, l, data, in);
      });
  rewriter.replaceOp(op, result);
  return success();
}

struct TriluLowering : ONNXOpLowering<onnx::TriluOp> {
  using ONNXOpLowering::ONNXOpLowering;
  LogicalResult lower(onnx::TriluOp op, OpAdaptor adaptor,
                      ConversionPatternRewriter &rewriter) const override;
};

LogicalResult TriluLowering::lower(onnx::TriluOp op, OpAdaptor adaptor,
                                   ConversionPatternRewriter &rewriter) const {
  ValueRange operands = adaptor.getOperands();
  Location loc = op->getLoc();
  Value x = operands[0];
  int64_t rank = cast<RankedTensorType>(x.getType()).getRank();
  if (rank < 2)
    return unsupported(op, "input of rank < 2");
  Value k = indexConstant(rewriter, loc, 0);
  if (operands.size() > 1 && !isNone(operands[1])) {
    auto kt = cast<RankedTensorType>(operands[1].getType());
    SmallVector<Value> at(kt.getRank(), indexConstant(rewriter, loc, 0));
    k = toIndex(rewriter, loc, tensor::ExtractOp::create(rewriter, loc, operands[1], at));
  }
  bool upper = op.getUpper();
  Type elem = elementType(x);
  Value r = buildIndexed(
      rewriter, loc, resultType(op), mixedSizes(rewriter, loc, x),
      [&](OpBuilder &b, Location l, ValueRange out) -> Value {
        Value diff = arith::SubIOp::create(b, l, out[rank - 1], out[rank - 2]);
        Value keep = arith::CmpIOp::create(
            b, l, upper ? arith::CmpIPredicate::sge : arith::CmpIPredicate::sle, diff, k);
        Value v = tensor::ExtractOp::create(b, l, x, out);
        return arith::SelectOp::create(b, l, keep, v, scalarConstant(b, l, elem, 0));
      });
  rewriter.replaceOp(op, r);
  return success();
}

struct EyeLikeLowering : ONNXOpLowering<onnx::EyeLikeOp> {
  using ONNXOpLowering::ONNXOpLowering;
  LogicalResult lower(onnx::EyeLikeOp op, OpAdaptor adaptor,
                      ConversionPatternRewriter &rewriter) const override;
};

LogicalResult
EyeLikeLowering::lower(onnx::EyeLikeOp op, OpAdaptor adaptor,
                       ConversionPatternRewriter &rewriter) const {
  ValueRange operands = adaptor.getOperands();
  Location loc = op->getLoc();
  RankedTensorType type = resultType(op);
  if (type.getRank() != 2)
    return unsupported(op, "input of rank other than 2");
  int64_t k = op.getK();
  Type elem = type.getElementType();
  Value r = buildIndexed(
      rewriter, loc, type, mixedSizes(rewriter, loc, operands[0]),
      [&](OpBuilder &b, Location l, ValueRange out) -> Value {
        Value diff = arith::SubIOp::create(b, l, out[1], out[0]);
        Value on = arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq, diff, indexConstant(b, l, k));
        return arith::SelectOp::create(b, l, on, scalarConstant(b, l, elem, 1),
                                       scalarConstant(b, l, elem, 0));
      });
  rewriter.replaceOp(op, r);
  return success();
}

struct OneHotLowering : ONNXOpLowering<onnx::OneHotOp> {
  using ONNXOpLowering::ONNXOpLowering;
  LogicalResult lower(onnx::OneHotOp op, OpAdaptor adaptor,
                      ConversionPatternRewriter &rewriter) const override;
};

LogicalResult OneHotLowering::lower(onnx::OneHotOp op, OpAdaptor adaptor,
                                    ConversionPatternRewriter &rewriter) const {
  ValueRange operands = adaptor.getOperands();
  Location loc = op->getLoc();
  Value indices = operands[0], depthT = operands[1], values = operands[2];
  auto iType = cast<RankedTensorType>(indices.getType());
  RankedTensorType type = resultType(op);
  int64_t q = iType.getRank();
  int64_t axisAttr = op.getAxis();
  auto axis = normalizeAxis(axisAttr, q + 1);
  if (!axis)
    return unsupported(op, "axis out of range");
  auto dt = cast<RankedTensorType>(depthT.getType());
  SmallVector<Value> at(dt.getRank(), indexConstant(rewriter, loc, 0));
  Value depthV = tensor::ExtractOp::create(rewriter, loc, depthT, at);
  Type dOrig = elementType(op->getOperand(1));
  Value depth;
  if (isa<FloatType>(depthV.getType()))
    depth = toIndex(rewriter, loc,
                    arith::FPToSIOp::create(rewriter, loc, rewriter.getI64Type(), depthV));
  else
    depth = toIndex(rewriter, loc, depthV, isUnsignedInt(dOrig));
  Value off = tensor::ExtractOp::create(rewriter, loc, values, ValueRange{indexConstant(rewriter, loc, 0)});
  Value on = tensor::ExtractOp::create(rewriter, loc, values, ValueRange{indexConstant(rewriter, loc, 1)});
  SmallVector<OpFoldResult> sizes = mixedSizes(rewriter, loc, indices);
  sizes.insert(sizes.begin() + *axis, depth);
  Type iOrig = elementType(op->getOperand(0));
  int64_t ax = *axis;
  Value r = buildIndexed(
      rewriter, loc, type, sizes,
      [&](OpBuilder &b, Location l, ValueRange out) -> Value {
        SmallVector<Value> in;
        for (int64_t d = 0; d <= q; ++d)
          if (d != ax)
            in.push_back(out[d]);
        Value i = tensor::ExtractOp::create(b, l, indices, in);
        if (isa<FloatType>(i.getType()))
          i = arith::FPToSIOp::create(b, l, b.getI64Type(), i);
        i = toIndex(b, l, i, isUnsignedInt(iOrig));
        Value neg = arith::CmpIOp::create(b, l, arith::CmpIPredicate::slt, i, indexConstant(b, l, 0));
        i = arith::SelectOp::create(b, l, neg, arith::AddIOp::create(b, l, i, depth), i);
        Value hit = arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq, i, out[ax]);
        return arith::SelectOp::create(b, l, hit, on, off);
      });
  rewriter.replaceOp(op, r);
  return success();
}

} // namespace

void populateIndexingPatterns(RewritePatternSet &patterns,
                              const TypeConverter &converter, UnsupportedLog &log) {
  MLIRContext *ctx = patterns.getContext();
  patterns.add<GatherLowering<onnx::GatherOp>,
               GatherLowering<onnx::GatherElementsOp>>(converter, ctx, log);
  patterns.add<GatherNDLowering>(converter, ctx, log);
  patterns.add<TriluLowering>(converter, ctx, log);
  patterns.add<EyeLikeLowering>(converter, ctx, log);
  patterns.add<OneHotLowering>(converter, ctx, log);
}

} // namespace xfmr::lowering
