//===- QuantizeExperts.cpp - xfmr.moe expert weights to bf16, int8, fp8 ---===//
//
// Part of xfmr.
//
// A mixture-of-experts model keeps most of its weights in its experts
// (Mixtral: ~96%), and a decode step reads top_k / E of them: quantizing
// them is most of what `--quant` can save on such a model. xfmr-quantize-
// weights works on the exported MatMuls before raising; the experts only
// exist as such once raised (xfmr.moe's [E, H, I] / [E, I, H] weights), so
// this pass runs after xfmr-raise, in the same modes:
//
//   bf16      each weight rounded to bfloat16 (to nearest, ties to even);
//   int8      per expert and output column, symmetric: scale = max |w| /
//             127, q = clamp(round(w / scale), -127, 127) (f32, ties to even);
//   fp8-e4m3  per expert and output column: scale = max |w| / 448, q = w /
//             scale as float8 e4m3fn (to nearest, ties to even, saturated).
//
// The op then holds the narrow weights and, for int8 and fp8, `scales`
// ([E, I], [E, I], [E, H] f32); its lowering packs them for the MoE
// micro-kernel, which widens each weight inside the product. The router
// and a shared expert stay in f32. Experts whose op's node name contains a
// `skip` entry are left alone.
//
//===----------------------------------------------------------------------===//

#include "Int4Block.h"
#include "Match.h"
#include "MoE.h"
#include "NarrowFloat.h"

#include "xfmr/Conversion/Passes.h"
#include "xfmr/runtime/Tensor.h"

#include <cmath>
#include <cstring>

using namespace mlir;

namespace xfmr {
#define GEN_PASS_DEF_QUANTIZEEXPERTSPASS
#include "xfmr/Conversion/Passes.h.inc"
} // namespace xfmr

namespace xfmr {
namespace {

using namespace raise;

/// One [E, K, N] expert weight in the pass's mode: the narrow values and,
/// for int8 / fp8, the [E, N] column scales.
struct Quantized {
  std::vector<char> values, scales;
};

Quantized quantize(ArrayRef<float> w, int64_t experts, int64_t k, int64_t n, StringRef mode) {
  Quantized q;
  if (mode == "bf16") {
    q.values.resize(w.size() * sizeof(uint16_t));
    for (size_t i = 0; i < w.size(); ++i) {
      uint16_t h = rt::floatToBf16(w[i]);
      std::memcpy(&q.values[i * sizeof(h)], &h, sizeof(h));
    }
    return q;
  }
  bool fp8 = mode == "fp8-e4m3";
  float top = fp8 ? 448.0f : 127.0f;
  q.values.resize(w.size());
  q.scales.resize(experts * n * sizeof(float));
  for (int64_t e = 0; e < experts; ++e)
    for (int64_t j = 0; j < n; ++j) {
      const float *col = w.data() + e * k * n + j;
      float mx = 0.0f;
      for (int64_t i = 0; i < k; ++i)
        mx = std::max(mx, std::fabs(col[i * n]));
      float scale = quant::usableScale(mx / top);
      std::memcpy(&q.scales[(e * n + j) * sizeof(float)], &scale, sizeof(float));
      for (int64_t i = 0; i < k; ++i) {
        float v = col[i * n] / scale;
        char &out = q.values[(e * k + i) * n + j];
        if (fp8)
          out = static_cast<char>(quant::toE4M3(v));
        else
          out = static_cast<char>(
              static_cast<int8_t>(std::clamp(std::nearbyint(v), -127.0f, 127.0f)));
      }
    }
  return q;
}

struct QuantizeExpertsPass : impl::QuantizeExpertsPassBase<QuantizeExpertsPass> {
  using Base::Base;

  void runOnOperation() override {
    if (mode != "bf16" && mode != "int8" && mode != "fp8-e4m3") {
      getOperation().emitError() << "xfmr-quantize-experts: mode is bf16, int8 or fp8-e4m3, not '"
                                 << mode << "'";
      return signalPassFailure();
    }
    getOperation().walk([&](MoEOp op) { rewrite(op); });
  }

  /// Whether `op` keeps f32 experts: not f32 constants, or named by `skip`.
  bool leftAlone(MoEOp op) {
    for (Value w : {op.getWGate(), op.getWUp(), op.getWDown()}) {
      auto type = cast<RankedTensorType>(w.getType());
      if (!type.getElementType().isF32() || !type.hasStaticShape() ||
          !moe::constantBytes(w))
        return true;
    }
    std::string name = nodeName(op);
    return llvm::any_of(skip, [&](const std::string &s) {
      return name.find(s) != std::string::npos;
    });
  }

  void rewrite(MoEOp op) {
    if (leftAlone(op))
      return;
    OpBuilder b(op);
    Location loc = op.getLoc();
    std::string base = nodeName(op) + "." + std::string(mode);
    Type narrow = mode == "bf16"  ? Type(b.getBF16Type())
                  : mode == "int8" ? Type(b.getI8Type())
                                   : Type(b.getType<Float8E4M3FNType>());
    SmallVector<Value> weights, scales;
    for (auto [w, what] : {std::pair(op.getWGate(), "w_gate"), std::pair(op.getWUp(), "w_up"),
                           std::pair(op.getWDown(), "w_down")}) {
      auto type = cast<RankedTensorType>(w.getType());
      ArrayRef<int64_t> shape = type.getShape();
      ArrayRef<char> raw = *moe::constantBytes(w);
      ArrayRef<float> values(reinterpret_cast<const float *>(raw.data()),
                             raw.size() / sizeof(float));
      Quantized q = quantize(values, shape[0], shape[1], shape[2], mode);
      weights.push_back(blobConstant(b, loc, shape, narrow, q.values, base + "." + what));
      if (!q.scales.empty())
        scales.push_back(blobConstant(b, loc, {shape[0], shape[2]}, b.getF32Type(), q.scales,
                                  base + "." + what + "_scales"));
    }
    op.getWGateMutable().assign(weights[0]);
    op.getWUpMutable().assign(weights[1]);
    op.getWDownMutable().assign(weights[2]);
    if (!scales.empty()) {
      op.getWGateScalesMutable().assign(scales[0]);
      op.getWUpScalesMutable().assign(scales[1]);
      op.getWDownScalesMutable().assign(scales[2]);
    }
    ++numQuantized;
  }
};

} // namespace
} // namespace xfmr
