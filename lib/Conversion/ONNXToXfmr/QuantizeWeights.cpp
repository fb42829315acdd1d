//===- QuantizeWeights.cpp - constant MatMul weights to 4 or 8 bits --------===//
//
// Part of xfmr.
//
// Decode streams every weight once per token, so its speed is bytes per
// token. `xfmr-compile --quant=int4-gG` rewrites each onnx.MatMul with a
// constant f32 [K, N] weight into com.microsoft MatMulNBits: 4-bit values in
// blocks of G along K with an f32 scale and an f32 zero point per block
// (GGUF Q4_1's grid, Int4Block.h; 0.5 + 8 / G bytes per weight instead of
// 4), accuracy_level 4 (int8
// activations: the micro-kernel of runtime/ukernels). The same format
// onnxruntime-genai and MatMulNBitsQuantizer write, so everything after this
// pass (lowering, paging, the kernel) is shared with imported int4 models.
//
// `--quant=int8` (option bits=8): per output channel n, symmetric, scale =
// max |w[:, n]| / 127, q = clamp(round(w / scale), -127, 127) (f32, ties to
// even), and MatMul(A, W) becomes xfmr.linear(A, W_q) with W_q =
// quant.scast of the [K, N] int8 constant to
// !quant.uniform<i8<-127:127>:f32:1, {scale_0, ...}>: the scales are part
// of the weight's type. Weight-only: the lowering widens the int8 weights
// inside the f32 product (xfmr_uk_matmul_f32i8) and applies the scales
// after the sum; 1 byte per weight. `--quant=w8a8` (method=smoothquant)
// adds {int8_activations}: A's rows quantized to int8 at run time and
// multiplied in integers (the 8-bit kernel, VNNI where present). In the
// 4-bit and fp8 modes the output product (lm_head) is int8 weight-only too.
// (Group-wise int4 keeps MatMulNBits: a !quant.uniform sub-channel type
// would carry every block's scale in the type, K * N / G values, millions
// for a small LLM.) `--quant=int4-gptq` (method=gptq) chooses the int4
// codes with GPTQ's error feedback instead of rounding each weight alone
// (GPTQ.h).
//
// `--quant=bf16` (option bits=16) rounds each weight to bfloat16 (to
// nearest, ties to even; NaN stays NaN) and replaces the MatMul with
// xfmr.linear(A, W_bf16): the op's weights may have another element type
// than its input, and its lowering widens each weight inside the product,
// so W is never materialized in f32: 2 bytes per weight.
//
// `--quant=fp8-e4m3` (options bits=8 float8=true): per output channel n,
// scale = max |w[:, n]| / 448 (e4m3fn's largest finite value), q = w /
// scale rounded to float8 e4m3fn (to nearest, ties to even; saturated at
// +-448), and MatMul(A, W) becomes xfmr.linear(A, q) * scale (an onnx.Mul
// by the [N] scales after the product): 1 byte per weight, widened inside
// the product's micro-kernel.
//
//===----------------------------------------------------------------------===//

#include "ActivationAware.h"
#include "GPTQ.h"
#include "Int4Block.h"
#include "NarrowFloat.h"
#include "Match.h"

#include "xfmr/Conversion/Calibration.h"
#include "xfmr/Conversion/Passes.h"
#include "xfmr/runtime/Tensor.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Quant/IR/Quant.h"
#include "mlir/Dialect/Quant/IR/QuantTypes.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/Threading.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MathExtras.h"

#include <cmath>
#include <cstring>

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
  int64_t bits, blockSize, blocks;
  std::vector<char> packed; // 4 bits: [N, blocks, blockSize / 2] (value 2i low); 8 bits: [K, N] int8
  std::vector<char> scales; // [N * blocks] f32
  std::vector<char> zeros;  // 4 bits: [N, blocks] f32 (q * scale + lo: zp = -lo / scale); 8 bits: empty
};

using quant::Int4Params;
using quant::toE4M3;
using quant::usableScale;

/// int4 weights as MatMulNBits' operands (Int4Block.h's grids: an f32
/// scale and an f32 zero point -lo / scale per block). When K is not a
/// whole number of blocks the last block is padded with code 0, as
/// MatMulNBits stores it (the padding multiplies nothing).
Blockwise packInt4(const quant::Int4Weights &w) {
  int64_t k = w.k, n = w.n, group = w.group, blocks = w.blocks(), kp = blocks * group;
  Blockwise q{4, group, blocks};
  q.packed.assign(n * kp / 2, 0);
  q.scales.resize(n * blocks * sizeof(float));
  q.zeros.resize(n * blocks * sizeof(float));
  for (int64_t col = 0; col < n; ++col)
    for (int64_t b = 0; b < blocks; ++b) {
      const Int4Params &p = w.params[col * blocks + b];
      float zp = p.zp();
      std::memcpy(&q.scales[(col * blocks + b) * sizeof(float)], &p.scale, sizeof(float));
      std::memcpy(&q.zeros[(col * blocks + b) * sizeof(float)], &zp, sizeof(float));
    }
  for (int64_t r = 0; r < k; ++r)
    for (int64_t col = 0; col < n; ++col)
      q.packed[col * (kp / 2) + r / 2] |= static_cast<char>(w.codes[r * n + col] << (4 * (r % 2)));
  return q;
}

/// int4: round to nearest, asymmetric with a float offset, per block of
/// `group` along K (Int4Block.h); f32 arithmetic, ties to even. With `importance`
/// ([K]: E[x_k^2] of the input the weights multiply), each block's range
/// is clipped by the ratio of least expected output error (AWQ).
Blockwise quantizeInt4(const float *w, int64_t k, int64_t n, int64_t group,
                       const float *importance = nullptr) {
  return packInt4(quant::roundToNearest(w, k, n, group, importance));
}

/// int8: round to nearest, symmetric, per column, in one block spanning K
/// (see the file comment); f32 arithmetic, ties to even.
/// Symmetric int8 of `count` values `stride` apart: scale = max |x| / 127,
/// q = clamp(round(x / scale), -127, 127) (f32, ties to even; a non-finite
/// value gives 0), each passed to `store(i, q)`; returns the scale.
template <typename Store>
float quantizeSymmetric8(const float *x, int64_t count, int64_t stride, Store store) {
  float amax = 0.0f;
  for (int64_t i = 0; i < count; ++i)
    amax = std::max(amax, std::fabs(x[i * stride]));
  float scale = usableScale(amax / 127.0f);
  for (int64_t i = 0; i < count; ++i) {
    float v = std::clamp(std::nearbyint(x[i * stride] / scale), -127.0f, 127.0f);
    store(i, static_cast<int>(std::isfinite(v) ? v : 0.0f));
  }
  return scale;
}

/// int8 as xfmr.linear's storage: packed [K, N] int8 (W's layout), scales [N].
Blockwise quantizeInt8(const float *w, int64_t k, int64_t n) {
  Blockwise q{8, k, 1};
  q.packed.assign(k * n, 0);
  q.scales.resize(n * sizeof(float));
  for (int64_t col = 0; col < n; ++col) {
    float scale = quantizeSymmetric8(w + col, k, n, [&](int64_t i, int v) {
      q.packed[i * n + col] = static_cast<char>(v);
    });
    std::memcpy(&q.scales[col * sizeof(float)], &scale, sizeof(float));
  }
  return q;
}

/// `w` rounded to bfloat16 (to nearest, ties to even), as bytes.
std::vector<char> bf16Bytes(ArrayRef<float> w) {
  std::vector<char> bytes(w.size() * sizeof(uint16_t));
  for (auto [i, x] : llvm::enumerate(w)) {
    uint16_t h = rt::floatToBf16(x);
    std::memcpy(&bytes[i * sizeof(h)], &h, sizeof(h));
  }
  return bytes;
}

struct QuantizeWeightsPass : impl::QuantizeWeightsPassBase<QuantizeWeightsPass> {
  using Base::Base;

  using Member = std::pair<onnx::MatMulOp, int64_t>; // a product and its index

  LogicalResult checkOptions() {
    auto error = [&]() { return getOperation().emitError() << "xfmr-quantize-weights: "; };
    if (float8 && bits != 8)
      return error() << "float8 needs bits=8";
    if (bits != 4 && bits != 8 && bits != 16)
      return error() << "bits " << static_cast<int64_t>(bits) << " is not 4, 8 or 16";
    if (bits == 4 && group != 32 && group != 64 && group != 128)
      return error() << "group " << static_cast<int64_t>(group) << " is not 32, 64 or 128";
    if (method != "rtn" && method != "awq" && method != "gptq" && method != "smoothquant")
      return error() << "method '" << method << "' is not rtn, awq, gptq or smoothquant";
    if ((method == "awq" || method == "gptq") && bits != 4)
      return error() << "method=" << method << " needs bits=4";
    if (!(damp > 0.0 && damp <= 1.0))
      return error() << "damp must be in (0, 1]";
    if (!(shrink >= 0.0 && shrink <= 1.0))
      return error() << "shrink must be in [0, 1]";
    if (method == "smoothquant" && (bits != 8 || float8))
      return error() << "method=smoothquant needs bits=8 (int8)";
    if (method != "rtn" && calibration.empty())
      return error() << "method=" << method << " needs calibration=FILE";
    if (!(alpha >= 0.0 && alpha <= 1.0))
      return error() << "alpha must be in [0, 1]";
    return success();
  }

  void runOnOperation() override {
    if (failed(checkOptions()))
      return signalPassFailure();
    std::optional<CalibrationStats> stats;
    if (method != "rtn") {
      std::string error;
      if (!(stats = readCalibrationStats(calibration, error))) {
        getOperation().emitError() << "xfmr-quantize-weights: " << error;
        return signalPassFailure();
      }
    }
    // The products to quantize, grouped by the input they share (q/k/v,
    // gate/up): activation-aware scales are per input channel.
    llvm::MapVector<Value, SmallVector<Member>> groups;
    DenseMap<Value, SmallVector<int64_t>> productsOf; // every product of an input
    // 4-bit and fp8 modes: the model's output products, to int8.
    SmallVector<onnx::MatMulOp> outputs;
    forEachProduct(getOperation(), [&](onnx::MatMulOp mm, int64_t index) {
      productsOf[mm.getA()].push_back(index);
      if (named(mm, mm.getB()))
        ++numNamed;
      else if ((bits == 4 || float8) && isOutput(mm) && constantWeight(mm))
        outputs.push_back(mm);
      else if (!constantWeight(mm))
        ++numSkipped;
      else
        groups[mm.getA()].push_back({mm, index});
    });
    SmallVector<Group> plan;
    for (auto &[input, members] : groups) {
      Group g{input, members};
      g.stats = stats ? statsOf(*stats, productsOf[input]) : nullptr;
      if (stats && !g.stats)
        numUncalibrated += members.size();
      if (g.stats && failed(checkChannels(g)))
        return signalPassFailure();
      plan.push_back(std::move(g));
    }
    // The numbers, group by group on the context's threads (scale searches
    // and packing are most of a large model's quantization time); then the
    // IR, in order.
    mlir::parallelForEach(&getContext(), plan, [&](Group &g) { prepare(g); });
    for (Group &g : plan)
      if (!g.error.empty()) {
        g.members.front().first.emitError() << "xfmr-quantize-weights: " << calibration << ": "
                                            << g.error;
        return signalPassFailure();
      }
    if (report)
      printReport(plan);
    for (Group &g : plan) {
      if (!g.scales.empty())
        divideInput(g.input, g.members, g.scales);
      for (auto [i, member] : llvm::enumerate(g.members)) {
        onnx::MatMulOp mm = member.first;
        if (bits == 16)
          rewriteBF16(mm, *constantWeight(mm));
        else if (float8)
          rewriteFP8(mm, *constantWeight(mm));
        else if (bits == 8)
          emitInt8(mm, g.packed[i], /*int8Activations=*/method == "smoothquant");
        else
          emitBlockwise(mm, g.packed[i]);
        ++numQuantized;
      }
    }
    for (onnx::MatMulOp mm : outputs) {
      ArrayRef<float> w = *constantWeight(mm);
      emitInt8(mm, quantizeInt8(w.data(), dimOf(mm.getB(), 0), dimOf(mm.getB(), 1)),
               /*int8Activations=*/false);
      ++numQuantized;
      ++numOutputs;
    }
    quantizeEmbeddings();
  }

  /// Whether `mm` is a language model's output product (lm_head): its
  /// result is returned by a function that takes input_ids. The 4-bit and
  /// fp8 modes quantize it to int8 per output channel, weight-only, as
  /// llama.cpp keeps its output tensor at 6 or 8 bits: on SmolLM2-135M
  /// (tied embeddings, 49152 x 576) a 4-bit lm_head alone cost +4% to +6%
  /// perplexity, an int8 one -0.05%, an fp8-e4m3 one two thirds of fp8's
  /// +3.2% (docs/quantization.md).
  static bool isOutput(onnx::MatMulOp mm) {
    auto f = mm->getParentOfType<func::FuncOp>();
    if (!f || !llvm::any_of(f.getArguments(), [](BlockArgument a) { return isTokenIds(a); }))
      return false;
    return llvm::any_of(mm.getY().getUsers(),
                        [](Operation *u) { return isa<func::ReturnOp>(u); });
  }

  /// Token embedding tables in the mode's storage: bf16 for bits=16, else
  /// int8 rows with an f32 scale each (scale = max |row| / 127, symmetric,
  /// round to nearest even): the 8- and 4-bit modes all take int8 rows, since
  /// decode reads one row per token and the saving is in memory. A table is
  /// a constant f32 [V, H] that only Gathers along axis 0 read, indexed by
  /// the model's input_ids; a table tied to lm_head (also read by a MatMul)
  /// stays f32, since a second copy would cost more than it saves.
  void quantizeEmbeddings() {
    SmallVector<onnx::GatherOp> gathers;
    getOperation().walk([&](onnx::GatherOp g) { gathers.push_back(g); });
    for (onnx::GatherOp g : gathers) {
      Value table = g.getData();
      if (g.getAxis() != 0 || !isTokenIds(g.getIndices()) ||
          !llvm::all_of(table.getUsers(), [](Operation *u) { return isa<onnx::GatherOp>(u); }))
        continue;
      std::optional<ArrayRef<float>> w = constantMatrix(table);
      if (!w || !elementTypeOf(g.getOutput()).isF32())
        continue;
      if (named(g, table)) {
        ++numNamed;
        continue;
      }
      OpBuilder b(g);
      g.getOutput().replaceAllUsesWith(quantizedEmbedding(b, g, *w));
      g.erase();
      ++numEmbeddings;
    }
  }

  /// xfmr.embedding for the Gather `g` of the table `w`: bf16 (bits=16) or
  /// int8 rows with their scales.
  Value quantizedEmbedding(OpBuilder &b, onnx::GatherOp g, ArrayRef<float> w) {
    auto type = cast<RankedTensorType>(g.getData().getType());
    int64_t v = type.getDimSize(0), h = type.getDimSize(1);
    Location loc = g.getLoc();
    Type result = g.getOutput().getType();
    if (bits == 16) {
      Value narrow = blobConstant(b, loc, {v, h}, b.getBF16Type(), bf16Bytes(w), "xfmr_bf16_embedding");
      return EmbeddingOp::create(b, loc, result, narrow, g.getIndices());
    }
    std::vector<char> q(v * h), scales(v * sizeof(float));
    for (int64_t row = 0; row < v; ++row) {
      float scale = quantizeSymmetric8(w.data() + row * h, h, 1, [&](int64_t i, int x) {
        q[row * h + i] = static_cast<char>(x);
      });
      std::memcpy(&scales[row * sizeof(float)], &scale, sizeof(float));
    }
    Value table = blobConstant(b, loc, {v, h}, b.getIntegerType(8), q, "xfmr_int8_embedding");
    Value s = blobConstant(b, loc, {v}, b.getF32Type(), scales, "xfmr_int8_embedding_scales");
    return EmbeddingOp::create(b, loc, result, table, g.getIndices(), s);
  }

  /// Whether `ids` is the model's input_ids (perhaps through a Cast).
  static bool isTokenIds(Value ids) {
    if (auto cast = ids.getDefiningOp<onnx::CastOp>())
      ids = cast.getInput();
    auto arg = dyn_cast<BlockArgument>(ids);
    auto f = arg ? dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp()) : func::FuncOp();
    auto name = f ? f.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "onnx.name") : nullptr;
    return name && name.getValue() == "input_ids";
  }

  /// The products that share one input, and what quantizing them takes.
  struct Group {
    Value input;
    SmallVector<Member> members;
    const ChannelStats *stats = nullptr; // AWQ / GPTQ / SmoothQuant; else round to nearest
    std::vector<float> scales;           // s per input channel (AWQ, SmoothQuant)
    std::vector<Blockwise> packed;       // per member (integer modes)
    std::string error;                   // why prepare() could not
    /// `report`: per member, the output error on the calibration rows
    /// (relative, tr(D^T H D) / tr(W^T H W)) of round to nearest and GPTQ.
    SmallVector<std::pair<double, double>> report;
  };

  /// The statistics of an input read by `products`: one of them carries
  /// the sampled rows (xfmr-calibration-outputs), whichever is quantized.
  static const ChannelStats *statsOf(const CalibrationStats &stats, ArrayRef<int64_t> products) {
    const ChannelStats *found = nullptr;
    for (int64_t index : products)
      if (const ChannelStats *s = stats.find(index)) {
        if (s->sampleRows > 0)
          return s;
        found = found ? found : s;
      }
    return found;
  }

  LogicalResult checkChannels(const Group &g) {
    onnx::MatMulOp first = g.members.front().first;
    int64_t k = dimOf(first.getB(), 0);
    if (static_cast<int64_t>(g.stats->maxAbs.size()) == k)
      return success();
    return first.emitError() << "xfmr-quantize-weights: " << calibration << ": product "
                             << g.stats->product << " has " << g.stats->maxAbs.size()
                             << " input channels there, " << k
                             << " in this model (statistics of another model?)";
  }

  /// The group's scales (AWQ or SmoothQuant: weights times s along K, the
  /// input divided by s) and packed blocks. Reads the IR, changes nothing:
  /// groups run in parallel.
  void prepare(Group &g) {
    if (bits == 16 || float8)
      return; // rewritten in place, in order
    SmallVector<quant::ProductWeight> weights;
    for (auto [mm, index] : g.members)
      weights.push_back({constantWeight(mm)->data(), dimOf(mm.getB(), 1)});
    int64_t k = dimOf(g.members.front().first.getB(), 0);
    if (!g.stats) {
      for (const quant::ProductWeight &w : weights)
        g.packed.push_back(pack(w.w, k, w.n, nullptr));
      return;
    }
    if (method == "gptq")
      return prepareGptq(g, weights, k);
    g.scales = method == "awq"
                   ? quant::awqScales(weights, k, *g.stats, group)
                   : quant::smoothQuantScales(weights, k, *g.stats, static_cast<float>(alpha));
    // E[x_k^2] of the divided input: what each scaled weight row multiplies.
    std::vector<float> importance(k);
    for (int64_t i = 0; i < k; ++i)
      importance[i] = g.stats->meanSquare[i] / (g.scales[i] * g.scales[i]);
    for (const quant::ProductWeight &w : weights) {
      std::vector<float> scaled(k * w.n);
      for (int64_t i = 0; i < k; ++i)
        for (int64_t col = 0; col < w.n; ++col)
          scaled[i * w.n + col] = w.w[i * w.n + col] * g.scales[i];
      g.packed.push_back(pack(scaled.data(), k, w.n, method == "awq" ? importance.data() : nullptr));
    }
  }

  /// One line per GPTQ'd product: its node, shape and output error on the
  /// calibration rows with round to nearest and with GPTQ; then the mean.
  void printReport(ArrayRef<Group> plan) {
    llvm::raw_ostream &os = llvm::outs();
    double rtn = 0, gptq = 0;
    int64_t count = 0;
    for (const Group &g : plan)
      for (auto [member, errors] : llvm::zip(g.members, g.report)) {
        onnx::MatMulOp mm = member.first;
        os << llvm::formatv("quant-report: product {0} {1} [{2} x {3}]: output error on the "
                            "calibration rows {4:P2} round to nearest, {5:P2} gptq\n",
                            member.second, nodeName(mm), dimOf(mm.getB(), 0),
                            dimOf(mm.getB(), 1), errors.first, errors.second);
        rtn += errors.first;
        gptq += errors.second;
        ++count;
      }
    if (count)
      os << llvm::formatv("quant-report: {0} products, mean output error {1:P2} round to "
                          "nearest, {2:P2} gptq\n",
                          count, rtn / count, gptq / count);
  }

  /// GPTQ of each member against the group's input's H (one factorization
  /// for the group).
  void prepareGptq(Group &g, ArrayRef<quant::ProductWeight> weights, int64_t k) {
    if (g.stats->gram.empty()) {
      g.error = "product " + std::to_string(g.stats->product) +
                " has no second moment (E[x x^T]): measure the file with --quant=int4-gptq";
      return;
    }
    std::optional<quant::GptqHessian> h =
        quant::gptqHessian(g.stats->gram.data(), k, actOrder, damp, shrink, g.error);
    if (!h)
      return;
    if (h->damping > damp)
      ++numGptqDamped;
    for (const quant::ProductWeight &w : weights) {
      quant::Int4Weights q = quant::gptqQuantize(w.w, k, w.n, group, *h);
      if (report)
        g.report.push_back(
            {quant::relativeOutputError(w.w, quant::roundToNearest(w.w, k, w.n, group),
                                        g.stats->gram.data()),
             quant::relativeOutputError(w.w, q, g.stats->gram.data())});
      g.packed.push_back(packInt4(q));
    }
  }

  Blockwise pack(const float *w, int64_t k, int64_t n, const float *importance) const {
    return bits == 8 ? quantizeInt8(w, k, n) : quantizeInt4(w, k, n, group, importance);
  }

  /// Divides the products' shared input `a` by `s`: into the constant
  /// multiplier that makes it (x * c, c a constant [K], e.g. an RMS norm's
  /// weight) when these products are its only users, else by an onnx.Mul.
  void divideInput(Value a, ArrayRef<Member> members, ArrayRef<float> s) {
    int64_t k = static_cast<int64_t>(s.size());
    auto isMember = [&](Operation *op) {
      return llvm::any_of(members, [&](const Member &m) { return m.first == op; });
    };
    auto mul = a.getDefiningOp<onnx::MulOp>();
    if (mul && llvm::all_of(a.getUsers(), isMember)) {
      for (unsigned i = 0; i < 2; ++i) {
        Value c = mul->getOperand(i), x = mul->getOperand(1 - i);
        std::optional<std::vector<float>> values = channelVector(c, k);
        if (!values || x.getType() != a.getType())
          continue;
        std::vector<char> bytes(k * sizeof(float));
        for (int64_t j = 0; j < k; ++j) {
          float v = (*values)[j] / s[j];
          std::memcpy(&bytes[j * sizeof(float)], &v, sizeof(float));
        }
        OpBuilder b(mul);
        auto type = cast<RankedTensorType>(c.getType());
        mul->setOperand(i, blobConstant(b, c.getLoc(), type.getShape(), b.getF32Type(), bytes,
                                    "xfmr_smoothed_scale"));
        ++numFolded;
        return;
      }
    }
    OpBuilder b(a.getContext());
    if (Operation *def = a.getDefiningOp())
      b.setInsertionPointAfter(def);
    else
      b.setInsertionPointToStart(cast<BlockArgument>(a).getOwner());
    std::vector<char> bytes(k * sizeof(float));
    for (int64_t j = 0; j < k; ++j) {
      float v = 1.0f / s[j];
      std::memcpy(&bytes[j * sizeof(float)], &v, sizeof(float));
    }
    Value inverse = blobConstant(b, a.getLoc(), {k}, b.getF32Type(), bytes, "xfmr_smoothing");
    Value divided = onnx::MulOp::create(b, a.getLoc(), a.getType(), a, inverse);
    for (const Member &m : members)
      m.first->setOperand(0, divided);
    ++numDivided;
  }

  /// The values of `c` if it is a constant f32 [K] (or [1, ..., 1, K]).
  static std::optional<std::vector<float>> channelVector(Value c, int64_t k) {
    ElementsAttr attr;
    if (!matchPattern(c, m_Constant(&attr)))
      return std::nullopt;
    auto type = dyn_cast<RankedTensorType>(attr.getType());
    if (!type || !type.getElementType().isF32() || type.getRank() < 1 ||
        type.getNumElements() != k || type.getShape().back() != k)
      return std::nullopt;
    if (auto dense = dyn_cast<DenseElementsAttr>(attr)) {
      auto v = dense.getValues<float>();
      return std::vector<float>(v.begin(), v.end());
    }
    if (auto resource = dyn_cast<DenseResourceElementsAttr>(attr))
      if (AsmResourceBlob *blob = resource.getRawHandle().getBlob())
        if (blob->getData().size() == k * sizeof(float)) {
          auto *p = reinterpret_cast<const float *>(blob->getData().data());
          return std::vector<float>(p, p + k);
        }
    return std::nullopt;
  }

  /// Whether `skip` names `op` (its node or its weight `w`).
  bool named(Operation *op, Value w) {
    for (const std::string &name : namesOf(op, w))
      for (const std::string &s : skip)
        if (!s.empty() && StringRef(name).contains(s))
          return true;
    return false;
  }

  /// MatMul(A, W) -> xfmr.linear(A, W as bf16).
  void rewriteBF16(onnx::MatMulOp mm, ArrayRef<float> w) {
    auto type = cast<RankedTensorType>(mm.getB().getType());
    OpBuilder b(mm);
    Location loc = mm.getLoc();
    Value narrow =
        blobConstant(b, loc, type.getShape(), b.getBF16Type(), bf16Bytes(w), "xfmr_bf16_weights");
    Value y = LinearOp::create(b, loc, mm.getY().getType(), mm.getA(), narrow, Value());
    mm.getY().replaceAllUsesWith(y);
    mm.erase();
  }

  /// MatMul(A, W) -> xfmr.linear(A, W / scale as e4m3fn) * scale.
  void rewriteFP8(onnx::MatMulOp mm, ArrayRef<float> w) {
    auto type = cast<RankedTensorType>(mm.getB().getType());
    int64_t k = type.getDimSize(0), n = type.getDimSize(1);
    std::vector<float> scales(n);
    for (int64_t col = 0; col < n; ++col) {
      float amax = 0.0f;
      for (int64_t i = 0; i < k; ++i)
        amax = std::max(amax, std::fabs(w[i * n + col]));
      scales[col] = usableScale(amax / 448.0f);
    }
    std::vector<char> q(k * n);
    for (int64_t i = 0; i < k; ++i)
      for (int64_t col = 0; col < n; ++col)
        q[i * n + col] = static_cast<char>(toE4M3(w[i * n + col] / scales[col]));
    OpBuilder b(mm);
    Location loc = mm.getLoc();
    Value narrow = blobConstant(b, loc, type.getShape(), b.getType<Float8E4M3FNType>(), q,
                            "xfmr_fp8_weights");
    std::vector<char> scaleBytes(n * sizeof(float));
    std::memcpy(scaleBytes.data(), scales.data(), scaleBytes.size());
    Value s = blobConstant(b, loc, {n}, b.getF32Type(), scaleBytes, "xfmr_fp8_scales");
    Value y = LinearOp::create(b, loc, mm.getY().getType(), mm.getA(), narrow, Value());
    Value scaled = onnx::MulOp::create(b, loc, mm.getY().getType(), y, s);
    mm.getY().replaceAllUsesWith(scaled);
    mm.erase();
  }

  /// MatMul(A, W) -> xfmr.linear(A, quant.scast(q.packed) : the
  /// per-channel !quant.uniform<i8<-127:127>:f32:1, {scales}>), with
  /// int8_activations for w8a8 only: `--quant=int8` is weight-only (f32
  /// activations, the weights widened inside the f32 x int8 kernel).
  void emitInt8(onnx::MatMulOp mm, const Blockwise &q, bool int8Activations) {
    auto type = cast<RankedTensorType>(mm.getB().getType());
    int64_t n = type.getDimSize(1);
    OpBuilder b(mm);
    Location loc = mm.getLoc();
    SmallVector<double> scales(n);
    SmallVector<int64_t> zeros(n, 0);
    for (int64_t col = 0; col < n; ++col) {
      float v;
      std::memcpy(&v, &q.scales[col * sizeof(float)], sizeof(float));
      scales[col] = v;
    }
    Type i8 = b.getIntegerType(8);
    auto element = mlir::quant::UniformQuantizedPerAxisType::get(
        mlir::quant::QuantizationFlags::Signed, i8, b.getF32Type(), scales, zeros,
        /*quantizedDimension=*/1, /*storageTypeMin=*/-127, /*storageTypeMax=*/127);
    Value storage = blobConstant(b, loc, type.getShape(), i8, q.packed, "xfmr_int8_weights");
    Value w = mlir::quant::StorageCastOp::create(
        b, loc, RankedTensorType::get(type.getShape(), element), storage);
    auto y = LinearOp::create(b, loc, mm.getY().getType(), mm.getA(), w, Value());
    y.setInt8Activations(int8Activations);
    mm.getY().replaceAllUsesWith(y.getResult());
    mm.erase();
  }

  /// MatMul(A, W) -> MatMulNBits(A, q.packed, q.scales, q.zeros).
  void emitBlockwise(onnx::MatMulOp mm, const Blockwise &q) {
    auto type = cast<RankedTensorType>(mm.getB().getType());
    int64_t k = type.getDimSize(0), n = type.getDimSize(1);
    OpBuilder b(mm);
    Location loc = mm.getLoc();
    Type u8 = IntegerType::get(b.getContext(), 8, IntegerType::Unsigned);
    std::string name = "xfmr_int" + std::to_string(q.bits);
    Value packed =
        blobConstant(b, loc, {n, q.blocks, q.blockSize * q.bits / 8}, u8, q.packed, name + "_weights");
    Value scales = blobConstant(b, loc, {n * q.blocks}, b.getF32Type(), q.scales, name + "_scales");
    Value none = onnx::NoValueOp::create(b, loc, b.getNoneType());
    Value zeros = q.zeros.empty()
                      ? none
                      : blobConstant(b, loc, {n, q.blocks}, b.getF32Type(), q.zeros, name + "_zeros");
    auto i64 = [&](int64_t v) { return b.getI64IntegerAttr(v); };
    Value y = onnx::MsMatMulNBitsOp::create(
        b, loc, mm.getY().getType(), mm.getA(), packed, scales, zeros, none, none, i64(k), i64(n),
        /*accuracy_level=*/i64(4), /*bits=*/i64(q.bits), /*block_size=*/i64(q.blockSize));
    mm.getY().replaceAllUsesWith(y);
    mm.erase();
  }
};

} // namespace
} // namespace xfmr
