//===- TileBuilder.cpp - FlashAttention tile steps on tensors -------------===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#include "TileBuilder.h"
#include "KVQuant.h"
#include "xfmr/Conversion/LoweringUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <limits>

using namespace mlir;

namespace xfmr::lowering {
namespace {

constexpr utils::IteratorType par = utils::IteratorType::parallel;
constexpr utils::IteratorType red = utils::IteratorType::reduction;
/// p · v sums in key order (a product xfmr-tile-contractions register-blocks).
const arith::FastMathFlags kContract = arith::FastMathFlags::contract;
/// Reductions may be reassociated (vectorized): the online softmax already
/// sums in a different order than a plain softmax would.
const arith::FastMathFlags kReassoc =
    arith::FastMathFlags::reassoc | arith::FastMathFlags::contract;

AffineMap map(MLIRContext *ctx, unsigned numDims, ArrayRef<unsigned> dims) {
  SmallVector<AffineExpr> exprs;
  for (unsigned d : dims)
    exprs.push_back(getAffineDimExpr(d, ctx));
  return AffineMap::get(numDims, 0, exprs, ctx);
}

Value f32Const(OpBuilder &b, Location loc, double v) {
  return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(static_cast<float>(v)));
}

/// m with -inf replaced by 0, so exp(x - m) of a row that has seen no key
/// yet stays 0 instead of NaN.
Value finiteMax(OpBuilder &b, Location loc, Value m) {
  Value ninf = f32Const(b, loc, -std::numeric_limits<double>::infinity());
  Value isNinf = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, m, ninf);
  return arith::SelectOp::create(b, loc, isNinf, f32Const(b, loc, 0.0), m);
}

} // namespace

Value generic(OpBuilder &b, Location loc, ValueRange ins, Value init,
              ArrayRef<AffineMap> maps, ArrayRef<utils::IteratorType> iterators, GenericBody body) {
  auto op = linalg::GenericOp::create(
      b, loc, init.getType(), ins, init, maps, iterators,
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        linalg::YieldOp::create(nb, nloc, body(nb, nloc, args));
      });
  return op.getResult(0);
}

Value hideAfter(OpBuilder &b, Location loc, Value key, Value lastVisible, Value score) {
  Value hidden = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sgt, key, lastVisible);
  Value ninf = f32Const(b, loc, -std::numeric_limits<double>::infinity());
  return arith::SelectOp::create(b, loc, hidden, ninf, score);
}

Value emptyTensor(OpBuilder &b, Location loc, ArrayRef<OpFoldResult> sizes, Type element) {
  return tensor::EmptyOp::create(b, loc, sizes, element);
}

Value filled(OpBuilder &b, Location loc, ArrayRef<OpFoldResult> sizes, double value) {
  Value empty = emptyTensor(b, loc, sizes, b.getF32Type());
  return linalg::FillOp::create(b, loc, f32Const(b, loc, value), empty).getResult(0);
}

SoftmaxState initialState(OpBuilder &b, Location loc, OpFoldResult rows, OpFoldResult dv) {
  return {filled(b, loc, {rows}, -std::numeric_limits<double>::infinity()),
          filled(b, loc, {rows}, 0.0), filled(b, loc, {rows, dv}, 0.0)};
}

Value scoreTile(OpBuilder &b, Location loc, Value q, Value k, double scale, MaskFn mask,
                Value kScales) {
  MLIRContext *ctx = b.getContext();
  OpFoldResult tq = tensor::getMixedSize(b, loc, q, 0);
  OpFoldResult tk = tensor::getMixedSize(b, loc, k, 0);
  // Loops (i, j, d): the innermost reduction over the head dim reads q and
  // k contiguously; reassociation lets it vectorize.
  Value dot = generic(b, loc, {q, k}, filled(b, loc, {tq, tk}, 0.0),
                      {map(ctx, 3, {0, 2}), map(ctx, 3, {1, 2}), map(ctx, 3, {0, 1})},
                      {par, par, red}, [](OpBuilder &nb, Location l, ValueRange a) -> Value {
                        Value p = arith::MulFOp::create(
                            nb, l, convertFloat(nb, l, a[0], nb.getF32Type()),
                            widenKV(nb, l, a[1]), kReassoc);
                        return arith::AddFOp::create(nb, l, a[2], p, kReassoc);
                      });
  Type kElement = cast<RankedTensorType>(k.getType()).getElementType();
  Value scaleV = f32Const(b, loc, scale * widenedScale(kElement));
  AffineMap id2 = map(ctx, 2, {0, 1});
  SmallVector<Value, 2> ins{dot};
  SmallVector<AffineMap, 3> maps{id2};
  if (kScales) {
    ins.push_back(kScales);
    maps.push_back(map(ctx, 2, {1}));
  }
  maps.push_back(id2);
  return generic(b, loc, ins, emptyTensor(b, loc, {tq, tk}, b.getF32Type()), maps,
                 {par, par}, [&](OpBuilder &nb, Location l, ValueRange a) -> Value {
                   Value s = arith::MulFOp::create(nb, l, a[0], scaleV);
                   if (kScales) // the key's own scale (times 256 for fp8)
                     s = arith::MulFOp::create(nb, l, s, a[1]);
                   Value i = linalg::IndexOp::create(nb, l, 0);
                   Value j = linalg::IndexOp::create(nb, l, 1);
                   return mask(nb, l, i, j, s);
                 });
}

Value sinksConstant(OpBuilder &b, Location loc, std::optional<ArrayRef<float>> sinks) {
  if (!sinks)
    return nullptr;
  auto type = RankedTensorType::get({static_cast<int64_t>(sinks->size())}, b.getF32Type());
  return arith::ConstantOp::create(b, loc, DenseElementsAttr::get(type, *sinks));
}

SoftmaxState withSinks(OpBuilder &b, Location loc, SoftmaxState state, RowFn sinkOfRow) {
  MLIRContext *ctx = b.getContext();
  AffineMap i1 = map(ctx, 1, {0});
  state.max = generic(b, loc, {}, state.max, {i1}, {par},
                      [&](OpBuilder &nb, Location l, ValueRange) -> Value {
                        return sinkOfRow(nb, l, linalg::IndexOp::create(nb, l, 0));
                      });
  state.sum = generic(b, loc, {}, state.sum, {i1}, {par},
                      [&](OpBuilder &nb, Location l, ValueRange) -> Value {
                        return f32Const(nb, l, 1.0);
                      });
  return state;
}

Value softcapScore(OpBuilder &b, Location loc, Value score, std::optional<APFloat> cap) {
  if (!cap)
    return score;
  double c = cap->convertToDouble();
  Value t = math::TanhOp::create(b, loc, arith::MulFOp::create(b, loc, score, f32Const(b, loc, 1.0 / c)));
  return arith::MulFOp::create(b, loc, t, f32Const(b, loc, c));
}

SoftmaxState softmaxStep(OpBuilder &b, Location loc, const SoftmaxState &state, Value scores,
                         Value v, Value vScales) {
  MLIRContext *ctx = b.getContext();
  OpFoldResult tq = tensor::getMixedSize(b, loc, scores, 0);
  OpFoldResult tk = tensor::getMixedSize(b, loc, scores, 1);
  OpFoldResult dv = tensor::getMixedSize(b, loc, v, 1);
  AffineMap ij = map(ctx, 2, {0, 1}), i2 = map(ctx, 2, {0}), i1 = map(ctx, 1, {0});

  // m' = max(m, rowmax(s))
  Value newMax = generic(b, loc, {scores}, state.max, {ij, i2}, {par, red},
                         [](OpBuilder &nb, Location l, ValueRange a) -> Value {
                           return arith::MaximumFOp::create(nb, l, a[0], a[1]);
                         });
  // p = exp(s - m')
  Value probs = generic(b, loc, {scores, newMax}, emptyTensor(b, loc, {tq, tk}, b.getF32Type()),
                        {ij, i2, ij}, {par, par},
                        [](OpBuilder &nb, Location l, ValueRange a) -> Value {
                          Value d = arith::SubFOp::create(nb, l, a[0], finiteMax(nb, l, a[1]));
                          return math::ExpOp::create(nb, l, d);
                        });
  // alpha = exp(m - m')
  Value alpha = generic(b, loc, {state.max, newMax}, emptyTensor(b, loc, {tq}, b.getF32Type()),
                        {i1, i1, i1}, {par}, [](OpBuilder &nb, Location l, ValueRange a) -> Value {
                          Value d = arith::SubFOp::create(nb, l, a[0], finiteMax(nb, l, a[1]));
                          return math::ExpOp::create(nb, l, d);
                        });
  // l' = l * alpha + rowsum(p)
  Value scaledSum = generic(b, loc, {state.sum, alpha}, emptyTensor(b, loc, {tq}, b.getF32Type()),
                            {i1, i1, i1}, {par}, [](OpBuilder &nb, Location l, ValueRange a) -> Value {
                              return arith::MulFOp::create(nb, l, a[0], a[1]);
                            });
  Value newSum = generic(b, loc, {probs}, scaledSum, {ij, i2}, {par, red},
                         [](OpBuilder &nb, Location l, ValueRange a) -> Value {
                           return arith::AddFOp::create(nb, l, a[0], a[1], kReassoc);
                         });
  // acc' = acc * alpha + p · v
  Value scaledAcc = generic(b, loc, {state.acc, alpha},
                            emptyTensor(b, loc, {tq, dv}, b.getF32Type()), {ij, i2, ij},
                            {par, par}, [](OpBuilder &nb, Location l, ValueRange a) -> Value {
                              return arith::MulFOp::create(nb, l, a[0], a[1]);
                            });
  // Loops (i, key, d): the innermost loop runs along a contiguous row of v
  // and of acc (acc[i, :] += p[i, key] * v[key, :]) and vectorizes; with the
  // key innermost it would stride through v.
  // A quantized v: p[i, key] * scale[key] (times 256 for fp8), then the
  // product widens v in registers.
  Value weights = probs;
  if (vScales) {
    Value factor = f32Const(b, loc, widenedScale(cast<RankedTensorType>(v.getType()).getElementType()));
    weights = generic(b, loc, {probs, vScales}, emptyTensor(b, loc, {tq, tk}, b.getF32Type()),
                      {ij, map(ctx, 2, {1}), ij}, {par, par},
                      [&](OpBuilder &nb, Location l, ValueRange a) -> Value {
                        return arith::MulFOp::create(
                            nb, l, a[0], arith::MulFOp::create(nb, l, a[1], factor));
                      });
  }
  Value newAcc = generic(b, loc, {weights, v}, scaledAcc,
                         {map(ctx, 3, {0, 1}), map(ctx, 3, {1, 2}), map(ctx, 3, {0, 2})},
                         {par, red, par}, [](OpBuilder &nb, Location l, ValueRange a) -> Value {
                           Value p = arith::MulFOp::create(nb, l, a[0], widenKV(nb, l, a[1]),
                                                           kContract);
                           return arith::AddFOp::create(nb, l, a[2], p, kContract);
                         });
  return {newMax, newSum, newAcc};
}

Value finishTile(OpBuilder &b, Location loc, const SoftmaxState &state, Type element) {
  MLIRContext *ctx = b.getContext();
  OpFoldResult tq = tensor::getMixedSize(b, loc, state.acc, 0);
  OpFoldResult dv = tensor::getMixedSize(b, loc, state.acc, 1);
  AffineMap ij = map(ctx, 2, {0, 1}), i2 = map(ctx, 2, {0});
  return generic(b, loc, {state.acc, state.sum}, emptyTensor(b, loc, {tq, dv}, element),
                 {ij, i2, ij}, {par, par}, [&](OpBuilder &nb, Location l, ValueRange a) -> Value {
                   Value zero = f32Const(nb, l, 0.0);
                   Value empty = arith::CmpFOp::create(nb, l, arith::CmpFPredicate::OEQ, a[1], zero);
                   Value q = arith::DivFOp::create(nb, l, a[0], a[1]);
                   Value r = arith::SelectOp::create(nb, l, empty, zero, q);
                   return convertFloat(nb, l, r, element);
                 });
}

Value readOnlyBuffer(OpBuilder &b, Location loc, Value t) {
  auto type = cast<RankedTensorType>(t.getType());
  SmallVector<int64_t> strides(type.getRank(), ShapedType::kDynamic);
  auto layout = StridedLayoutAttr::get(b.getContext(), ShapedType::kDynamic, strides);
  auto memref = MemRefType::get(type.getShape(), type.getElementType(), layout);
  return bufferization::ToBufferOp::create(b, loc, memref, t, /*read_only=*/true);
}

} // namespace xfmr::lowering
