//===- Dequantized.cpp - MatMul on DequantizeLinear'd int8 weights -------===//
//
// Part of xfmr.
//
// onnxruntime's quantize_static writes each quantized product as
// MatMul(A, DequantizeLinear(W, scale, zero_point)) with W a constant int8
// [K, N], symmetric (zero point 0), scale per output channel (axis 1) or
// per tensor. Lowered as written, every step would widen all of W into an
// f32 buffer before the product. Raised, it becomes
//
//   xfmr.linear(A, W) * scale
//
// (an onnx.Mul by the [N] or scalar scale after the product): the product
// reads W as stored, 1 byte per weight, and widens it in registers
// (runtime/ukernels/MatmulNarrow.c). (A - zp) * s summed in another order
// than onnxruntime's: the results differ by f32 rounding only.
//
//===----------------------------------------------------------------------===//

#include "Match.h"

#include "mlir/IR/Matchers.h"

using namespace mlir;

namespace xfmr::raise {
namespace {

/// Whether `zp` is absent or a constant of zeros.
bool zeroOrNone(Value zp) {
  if (!zp || isa<NoneType>(zp.getType()))
    return true;
  ElementsAttr attr;
  if (!matchPattern(zp, m_Constant(&attr)))
    return false;
  if (auto dense = dyn_cast<DenseIntElementsAttr>(attr))
    return llvm::all_of(dense.getValues<APInt>(), [](const APInt &v) { return v.isZero(); });
  return false;
}

} // namespace

bool raiseDequantizedProjection(Operation *anchor, IRRewriter &rewriter, RaiseLog &log) {
  auto mm = cast<onnx::MatMulOp>(anchor);
  auto dq = mm.getB().getDefiningOp<onnx::DequantizeLinearOp>();
  if (!dq)
    return false;
  Value w = dq.getX(), scale = dq.getXScale();
  if (rankOf(w) != 2 || !elementTypeOf(w).isSignlessInteger(8) || !isConstant(w) ||
      !elementTypeOf(mm.getA()).isF32() || !elementTypeOf(mm.getY()).isF32() ||
      !elementTypeOf(scale).isF32() || !isConstant(scale))
    return false;
  int64_t n = dimOf(w, 1);
  bool perTensor = rankOf(scale) == 0 || (rankOf(scale) == 1 && dimOf(scale, 0) == 1);
  auto axis = static_cast<int64_t>(dq.getAxis());
  bool perColumn = rankOf(scale) == 1 && dimOf(scale, 0) == n && (axis == 1 || axis == -1);
  if (dq.getBlockSize() != 0 || (!perTensor && !perColumn)) {
    log.unfused(anchor, "dequantized_linear", "scale is not per tensor or per output channel");
    return false;
  }
  if (!zeroOrNone(dq.getXZeroPoint())) {
    log.unfused(anchor, "dequantized_linear", "weights are not symmetric (zero point != 0)");
    return false;
  }
  rewriter.setInsertionPoint(mm);
  Type type = mm.getY().getType();
  Value y = LinearOp::create(rewriter, mm.getLoc(), type, mm.getA(), w, Value());
  Value scaled = onnx::MulOp::create(rewriter, mm.getLoc(), type, y, scale);
  rewriter.replaceAllUsesWith(mm.getY(), scaled);
  log.formed("dequantized_linear");
  return true;
}

} // namespace xfmr::raise
