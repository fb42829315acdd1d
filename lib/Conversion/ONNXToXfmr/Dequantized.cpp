//===- Dequantized.cpp - MatMul on DequantizeLinear'd 8-bit weights ------===//
//
// Part of xfmr.
//
// onnxruntime's quantize_static writes each quantized product as
// MatMul(A, DequantizeLinear(W, scale, zero_point)) with W a constant 8-bit
// [K, N], scale per output channel (axis 1) or per tensor. Lowered as
// written, every step would widen all of W into an f32 buffer before the
// product. Raised, it becomes
//
//   xfmr.linear(A, quant.scast(W') : !quant.uniform<i8:f32:1, {scales}>)
//
// with W' = W - zero_point as int8: the dequantization is the weight's type,
// the product reads W' as stored, 1 byte per weight, widens it in registers
// (runtime/ukernels/MatmulNarrow.c) and multiplies by the scales after the
// sum over K. Asymmetric weights (uint8, or a nonzero zero point) are taken
// when every q - zp fits in int8, else left as written with the reason.
// (A - zp) * s summed in another order than onnxruntime's: the results
// differ by f32 rounding only.
//
//===----------------------------------------------------------------------===//

#include "Match.h"

#include "mlir/Dialect/Quant/IR/Quant.h"
#include "mlir/Dialect/Quant/IR/QuantTypes.h"
#include "mlir/IR/Matchers.h"

#include <limits>

using namespace mlir;

namespace xfmr::raise {
namespace {

/// The zero points of `zp` ([N] or one for all `n` columns; absent: 0), as
/// integers.
std::optional<SmallVector<int64_t>> zeroPoints(Value zp, int64_t n) {
  if (!zp || isa<NoneType>(zp.getType()))
    return SmallVector<int64_t>(n, 0);
  ElementsAttr attr;
  if (!matchPattern(zp, m_Constant(&attr)) ||
      (attr.getNumElements() != 1 && attr.getNumElements() != n))
    return std::nullopt;
  Type type = attr.getElementType();
  bool isUnsigned = type.isUnsignedInteger();
  SmallVector<int64_t> out;
  if (auto dense = dyn_cast<DenseIntElementsAttr>(attr)) {
    for (const APInt &v : dense.getValues<APInt>())
      out.push_back(isUnsigned ? static_cast<int64_t>(v.getZExtValue()) : v.getSExtValue());
  } else if (std::optional<ArrayRef<char>> raw = rawBytes(attr);
             raw && type.isInteger(8) && static_cast<int64_t>(raw->size()) == attr.getNumElements()) {
    for (char c : *raw)
      out.push_back(isUnsigned ? static_cast<uint8_t>(c) : static_cast<int8_t>(c));
  } else {
    return std::nullopt;
  }
  if (out.size() == 1)
    out.assign(n, out.front());
  return out;
}

/// W ([K, N] 8-bit, signed or not) minus the column's zero point as int8
/// bytes, or nothing if a value does not fit.
std::optional<std::vector<char>> shiftedWeights(ArrayRef<char> raw, bool isUnsigned, int64_t k,
                                                int64_t n, ArrayRef<int64_t> zp) {
  std::vector<char> out(k * n);
  for (int64_t i = 0; i < k; ++i)
    for (int64_t col = 0; col < n; ++col) {
      auto byte = raw[i * n + col];
      int64_t q = isUnsigned ? static_cast<uint8_t>(byte) : static_cast<int8_t>(byte);
      int64_t v = q - zp[col];
      if (v < std::numeric_limits<int8_t>::min() || v > std::numeric_limits<int8_t>::max())
        return std::nullopt;
      out[i * n + col] = static_cast<char>(static_cast<int8_t>(v));
    }
  return out;
}

} // namespace

bool raiseDequantizedProjection(Operation *anchor, IRRewriter &rewriter, RaiseLog &log) {
  auto mm = cast<onnx::MatMulOp>(anchor);
  auto dq = mm.getB().getDefiningOp<onnx::DequantizeLinearOp>();
  if (!dq)
    return false;
  Value w = dq.getX(), scale = dq.getXScale();
  Type storage = elementTypeOf(w);
  ElementsAttr wAttr;
  if (rankOf(w) != 2 || !isa<IntegerType>(storage) || storage.getIntOrFloatBitWidth() != 8 ||
      !matchPattern(w, m_Constant(&wAttr)) || !elementTypeOf(mm.getA()).isF32() ||
      !elementTypeOf(mm.getY()).isF32() || !elementTypeOf(scale).isF32() || !isConstant(scale))
    return false;
  int64_t k = dimOf(w, 0), n = dimOf(w, 1);
  bool perTensor = rankOf(scale) == 0 || (rankOf(scale) == 1 && dimOf(scale, 0) == 1);
  auto axis = static_cast<int64_t>(dq.getAxis());
  bool perColumn = rankOf(scale) == 1 && dimOf(scale, 0) == n && (axis == 1 || axis == -1);
  if (dq.getBlockSize() != 0 || (!perTensor && !perColumn)) {
    log.unfused(anchor, "dequantized_linear", "scale is not per tensor or per output channel");
    return false;
  }
  std::optional<SmallVector<float>> scales = floatValues(scale);
  std::optional<SmallVector<int64_t>> zp = zeroPoints(dq.getXZeroPoint(), n);
  std::optional<ArrayRef<char>> raw = rawBytes(wAttr);
  if (!scales || !zp || !raw || static_cast<int64_t>(raw->size()) != k * n)
    return false;
  std::optional<std::vector<char>> shifted =
      shiftedWeights(*raw, storage.isUnsignedInteger(), k, n, *zp);
  if (!shifted) {
    log.unfused(anchor, "dequantized_linear", "weights minus their zero points do not fit int8");
    return false;
  }

  rewriter.setInsertionPoint(mm);
  Location loc = mm.getLoc();
  Type i8 = rewriter.getIntegerType(8);
  Type f32 = rewriter.getF32Type();
  int64_t lo = std::numeric_limits<int8_t>::min(), hi = std::numeric_limits<int8_t>::max();
  Type element;
  if (perTensor) {
    element = quant::UniformQuantizedType::get(quant::QuantizationFlags::Signed, i8, f32,
                                               scales->front(), /*zeroPoint=*/0, lo, hi);
  } else {
    SmallVector<double> perChannel(scales->begin(), scales->end());
    element = quant::UniformQuantizedPerAxisType::get(quant::QuantizationFlags::Signed, i8, f32,
                                                      perChannel, SmallVector<int64_t>(n, 0),
                                                      /*quantizedDimension=*/1, lo, hi);
  }
  Value stored = blobConstant(rewriter, loc, {k, n}, i8, *shifted, "xfmr_int8_weights");
  Value typed = quant::StorageCastOp::create(rewriter, loc,
                                             RankedTensorType::get({k, n}, element), stored);
  Value y = LinearOp::create(rewriter, loc, mm.getY().getType(), mm.getA(), typed, Value());
  rewriter.replaceAllUsesWith(mm.getY(), y);
  log.formed("dequantized_linear");
  return true;
}

} // namespace xfmr::raise
