//===- QuantizeWeights.cpp - constant MatMul weights to 4-bit blocks -------===//
//
// Part of xfmr.
//
// Decode streams every weight once per token, so its speed is bytes per
// token. `xfmr-compile --quant=int4-gG` rewrites each onnx.MatMul with a
// constant f32 [K, N] weight into com.microsoft MatMulNBits: 4-bit values in
// blocks of G along K with an f32 scale and a 4-bit zero point per block
// (0.5 + 4.5 / G bytes per weight instead of 4), accuracy_level 4 (int8
// activations: the micro-kernel of runtime/ukernels). The same format
// onnxruntime-genai and MatMulNBitsQuantizer write, so everything after this
// pass (lowering, paging, the kernel) is shared with imported int4 models.
//
//===----------------------------------------------------------------------===//

#include "Match.h"

#include "xfmr/Conversion/Passes.h"

#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/Matchers.h"

#include <cmath>

using namespace mlir;

namespace xfmr {
#define GEN_PASS_DEF_QUANTIZEWEIGHTSPASS
#include "xfmr/Conversion/Passes.h.inc"
} // namespace xfmr

namespace xfmr {
namespace {

using namespace raise;

/// A [K, N] f32 weight as MatMulNBits' operands (row n of each is column n
/// of the weight).
struct Blockwise {
  std::vector<char> packed; // [N, K / G, G / 2]: value 2i in the low nibble
  std::vector<char> scales; // [N * K / G] f32
  std::vector<char> zeros;  // [N, ceil(K / G / 2)]: block 2j in the low nibble
};

/// Round to nearest, asymmetric, per block of `group` along K (see the
/// pass description); f32 arithmetic, ties to even.
Blockwise quantize(const float *w, int64_t k, int64_t n, int64_t group) {
  int64_t blocks = k / group, zeroCols = (blocks + 1) / 2;
  Blockwise q;
  q.packed.assign(n * k / 2, 0);
  q.scales.resize(n * blocks * sizeof(float));
  q.zeros.assign(n * zeroCols, 0);
  for (int64_t col = 0; col < n; ++col)
    for (int64_t b = 0; b < blocks; ++b) {
      float lo = 0.0f, hi = 0.0f;
      for (int64_t i = 0; i < group; ++i) {
        float x = w[(b * group + i) * n + col];
        lo = std::min(lo, x);
        hi = std::max(hi, x);
      }
      float scale = (hi - lo) / 15.0f;
      if (!(scale > 0.0f) || !std::isfinite(scale))
        scale = 1.0f; // an all-zero block (or a non-finite weight): q = zp = 0
      float zp = std::clamp(std::nearbyint(-lo / scale), 0.0f, 15.0f);
      std::memcpy(&q.scales[(col * blocks + b) * sizeof(float)], &scale, sizeof(float));
      auto z = static_cast<uint8_t>(zp);
      q.zeros[col * zeroCols + b / 2] |= static_cast<char>(z << (4 * (b % 2)));
      for (int64_t i = 0; i < group; ++i) {
        float x = w[(b * group + i) * n + col];
        float v = std::clamp(std::nearbyint(x / scale) + zp, 0.0f, 15.0f);
        auto nibble = static_cast<uint8_t>(std::isfinite(v) ? v : zp);
        q.packed[col * (k / 2) + (b * group + i) / 2] |=
            static_cast<char>(nibble << (4 * (i % 2)));
      }
    }
  return q;
}

Value constant(OpBuilder &b, Location loc, ArrayRef<int64_t> shape, Type element,
               const std::vector<char> &bytes, StringRef name) {
  auto type = RankedTensorType::get(shape, element);
  auto attr = DenseResourceElementsAttr::get(
      type, name, HeapAsmResourceBlob::allocateAndCopyWithAlign(ArrayRef<char>(bytes), 64));
  return makeConstant(b, loc, attr);
}

/// The f32 [K, N] weight of `mm`, or nothing.
std::optional<ArrayRef<float>> constantWeight(onnx::MatMulOp mm, int64_t group) {
  ElementsAttr w;
  if (rankOf(mm.getB()) != 2 || !matchPattern(mm.getB(), m_Constant(&w)))
    return std::nullopt;
  auto type = cast<RankedTensorType>(w.getType());
  if (!type.hasStaticShape() || !type.getElementType().isF32() ||
      !elementTypeOf(mm.getA()).isF32() || type.getDimSize(0) % group ||
      type.getDimSize(0) < group)
    return std::nullopt;
  ArrayRef<char> raw;
  if (auto dense = dyn_cast<DenseElementsAttr>(w); dense && !dense.isSplat())
    raw = dense.getRawData();
  else if (auto resource = dyn_cast<DenseResourceElementsAttr>(w))
    if (AsmResourceBlob *blob = resource.getRawHandle().getBlob())
      raw = blob->getData();
  if (raw.size() != static_cast<size_t>(type.getNumElements()) * sizeof(float))
    return std::nullopt;
  return ArrayRef<float>(reinterpret_cast<const float *>(raw.data()), type.getNumElements());
}

struct QuantizeWeightsPass : impl::QuantizeWeightsPassBase<QuantizeWeightsPass> {
  using Base::Base;

  void runOnOperation() override {
    if (group != 32 && group != 64 && group != 128) {
      getOperation().emitError() << "xfmr-quantize-weights: group " << static_cast<int64_t>(group)
                                 << " is not 32, 64 or 128";
      return signalPassFailure();
    }
    SmallVector<onnx::MatMulOp> products;
    getOperation().walk([&](onnx::MatMulOp mm) { products.push_back(mm); });
    for (onnx::MatMulOp mm : products) {
      std::optional<ArrayRef<float>> w = constantWeight(mm, group);
      if (!w) {
        ++numSkipped;
        continue;
      }
      rewrite(mm, *w);
      ++numQuantized;
    }
  }

  void rewrite(onnx::MatMulOp mm, ArrayRef<float> w) {
    auto type = cast<RankedTensorType>(mm.getB().getType());
    int64_t k = type.getDimSize(0), n = type.getDimSize(1), blocks = k / group;
    Blockwise q = quantize(w.data(), k, n, group);
    OpBuilder b(mm);
    Location loc = mm.getLoc();
    Type u8 = IntegerType::get(b.getContext(), 8, IntegerType::Unsigned);
    Value packed = constant(b, loc, {n, blocks, group / 2}, u8, q.packed, "xfmr_int4_weights");
    Value scales = constant(b, loc, {n * blocks}, b.getF32Type(), q.scales, "xfmr_int4_scales");
    Value zeros = constant(b, loc, {n * ((blocks + 1) / 2)}, u8, q.zeros, "xfmr_int4_zeros");
    Value none = onnx::NoValueOp::create(b, loc, b.getNoneType());
    auto i64 = [&](int64_t v) { return b.getI64IntegerAttr(v); };
    Value y = onnx::MsMatMulNBitsOp::create(b, loc, mm.getY().getType(), mm.getA(), packed,
                                            scales, zeros, none, none, i64(k), i64(n), i64(4),
                                            i64(4), i64(group));
    mm.getY().replaceAllUsesWith(y);
    mm.erase();
  }
};

} // namespace
} // namespace xfmr
