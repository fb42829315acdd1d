//===- DecodeBytes.cpp - bytes a decode step reads, for --report ----------===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#include "xfmr/Pipelines/DecodeBytes.h"

#include "dialects/onnx/IR/ONNXOps.h"
#include "dialects/xfmr/IR/XfmrOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Quant/IR/Quant.h"
#include "mlir/Dialect/Quant/IR/QuantTypes.h"
#include "llvm/Support/Format.h"

using namespace mlir;

namespace xfmr {
namespace {

/// Bytes of `type`'s elements as stored (sub-byte types rounded up).
int64_t storedBytes(ShapedType type) {
  return (type.getNumElements() * type.getElementTypeBitWidth() + 7) / 8;
}

/// Whether every user of `v` reads it as an embedding table (or a
/// quantized table's row scales): a row per token.
bool onlyEmbeddingTable(Value v) {
  return !v.use_empty() && llvm::all_of(v.getUses(), [](OpOperand &use) {
    auto e = dyn_cast<EmbeddingOp>(use.getOwner());
    return e && use.getOperandNumber() != 1;
  });
}

/// The bytes a MatMulNBits kernel reads of `v` when it is only a
/// MatMulNBits' packed B: K x N values of `bits` bits (a block longer than
/// K pads the constant, not the packed weights the kernel streams).
std::optional<int64_t> nbitsWeightBytes(Value v) {
  if (!v.hasOneUse() || v.getUses().begin()->getOperandNumber() != 1)
    return std::nullopt;
  auto nbits = dyn_cast<onnx::MsMatMulNBitsOp>(v.getUses().begin()->getOwner());
  if (!nbits)
    return std::nullopt;
  return static_cast<int64_t>((nbits.getK() * nbits.getN() * nbits.getBits() + 7) / 8);
}

/// The f32 scales a quantized weight carries in its `!quant.uniform` type
/// (per channel: one each; per tensor: one) when `v` is the storage under a
/// quant.scast: the kernel reads them with the weights.
int64_t typeScaleBytes(Value v) {
  int64_t bytes = 0;
  for (Operation *user : v.getUsers()) {
    auto scast = dyn_cast<quant::StorageCastOp>(user);
    if (!scast)
      continue;
    Type elem = getElementTypeOrSelf(scast.getResult().getType());
    if (auto axis = dyn_cast<quant::UniformQuantizedPerAxisType>(elem))
      bytes += static_cast<int64_t>(axis.getScales().size() * sizeof(float));
    else if (isa<quant::UniformQuantizedType>(elem))
      bytes += sizeof(float);
  }
  return bytes;
}

/// If every user of `v` reads it as xfmr.moe expert weights: the fraction
/// of them one token reads (top_k / E), and the op.
std::optional<std::pair<double, MoEOp>> expertFraction(Value v) {
  MoEOp first;
  for (OpOperand &use : v.getUses()) {
    auto moe = dyn_cast<MoEOp>(use.getOwner());
    // Routed experts only (operands 2-4); a shared expert is read whole.
    if (!moe || use.getOperandNumber() < 2 || use.getOperandNumber() > 4)
      return std::nullopt;
    first = first ? first : moe;
  }
  if (!first)
    return std::nullopt;
  int64_t experts = first.getWGate().getType().getDimSize(0);
  return std::make_pair(static_cast<double>(first.getTopK()) / experts, first);
}

std::string human(double bytes) {
  const char *units[] = {"B", "KB", "MB", "GB", "TB"};
  int u = 0;
  while (bytes >= 1000 && u < 4) {
    bytes /= 1000;
    ++u;
  }
  std::string s;
  llvm::raw_string_ostream os(s);
  os << llvm::format(u == 0 ? "%.0f %s" : "%.2f %s", bytes, units[u]);
  return s;
}

} // namespace

DecodeBytes measureDecodeBytes(ModuleOp module, int64_t minBytes) {
  DecodeBytes b;
  module.walk([&](Operation *op) {
    ElementsAttr value;
    if (auto c = dyn_cast<onnx::ConstantOp>(op))
      value = dyn_cast_or_null<ElementsAttr>(c.getValueAttr());
    else if (auto c = dyn_cast<arith::ConstantOp>(op))
      value = dyn_cast<ElementsAttr>(c.getValue());
    if (!value || op->getNumResults() != 1)
      return;
    auto type = cast<ShapedType>(value.getType());
    if (!type.hasStaticShape() || !type.getElementType().isIntOrFloat())
      return;
    int64_t bytes = storedBytes(type);
    if (bytes < minBytes)
      return;
    bytes = nbitsWeightBytes(op->getResult(0)).value_or(bytes) + typeScaleBytes(op->getResult(0));
    b.weights += bytes;
    ++b.weightTensors;
    if (auto expert = expertFraction(op->getResult(0))) {
      b.expertWeights += bytes;
      b.expertPerToken += expert->first * bytes;
      b.experts = expert->second.getWGate().getType().getDimSize(0);
      b.topK = expert->second.getTopK();
      Type elem = expert->second.getWGate().getType().getElementType();
      if (elem != expert->second.getInput().getType().getElementType()) {
        b.expertType.clear();
        llvm::raw_string_ostream(b.expertType) << elem;
      }
    }
    if ((type.getRank() == 2 || type.getRank() == 1) && onlyEmbeddingTable(op->getResult(0))) {
      b.embeddingTables += bytes;
      b.embeddingRow += bytes / std::max<int64_t>(1, type.getDimSize(0));
    }
  });
  auto kv = module->getAttrOfType<DictionaryAttr>("xfmr.kv_cache");
  if (!kv)
    return b;
  auto get = [&](StringRef name) {
    auto a = kv.getAs<IntegerAttr>(name);
    return a ? a.getInt() : 0;
  };
  b.kvLayers = get("num_layers");
  b.kvHeads = get("num_kv_heads");
  b.headDim = get("head_dim");
  b.valueHeadDim = get("value_head_dim");
  b.kvLatent = kv.contains("latent");
  if (auto dtype = kv.getAs<StringAttr>("dtype"))
    b.kvDtype = dtype.getValue().str();
  // Every pool's bytes per token: [num_blocks, block_size, rest...].
  for (auto f : module.getOps<func::FuncOp>())
    for (unsigned i = 0; i < f.getNumArguments(); ++i)
      if (f.getArgAttr(i, "xfmr.kv_pool"))
        if (auto t = dyn_cast<ShapedType>(f.getArgument(i).getType())) {
          int64_t elementBytes = (t.getElementTypeBitWidth() + 7) / 8;
          int64_t perToken = elementBytes;
          for (int64_t d = 2; d < t.getRank(); ++d)
            perToken *= t.getDimSize(d);
          if (t.getRank() == 4)
            b.kvElementBytes = elementBytes;
          else
            b.kvScaleBytes += perToken;
          b.kvPerToken += perToken;
        }
  return b;
}

void printDecodeBytes(const DecodeBytes &b, llvm::raw_ostream &os) {
  os << "xfmr-compile: weights " << human(b.weights) << " in " << b.weightTensors
     << " tensors";
  if (b.embeddingTables)
    os << " (embedding tables " << human(b.embeddingTables) << ", read a row per token)";
  os << "\n";
  if (b.expertWeights) {
    os << "xfmr-compile: experts " << human(b.expertWeights) << " of the weights ("
       << b.experts << " experts, top " << b.topK
       << (b.expertType.empty() ? "" : ", " + b.expertType +
                                            (b.expertType == "bf16" ? "" : " with column scales"))
       << "): a decode token reads "
       << human(b.expertPerToken) << " of them, the dense graph "
       << human(b.expertWeights) << "\n";
    // Expert parallel over N ranks: E / N experts each; a token's top_k
    // experts land on k / N ranks' worth on average, at most min(k, E / N)
    // on one rank.
    double perExpert = static_cast<double>(b.expertWeights) / b.experts;
    for (int64_t n : {1, 2, 4, 8}) {
      if (b.experts % n)
        continue;
      os << "xfmr-compile:   EP=" << n << ": " << b.experts / n << " experts ("
         << human(perExpert * (b.experts / n)) << ") per rank; expert bytes per rank per "
         << "decode token: " << human(perExpert * b.topK / n) << " on average, at most "
         << human(perExpert * std::min(b.topK, b.experts / n)) << "\n";
    }
  }
  if (b.kvPerToken) {
    os << "xfmr-compile: KV cache " << human(b.kvPerToken) << " per token (" << b.kvLayers;
    if (b.valueHeadDim)
      os << " layers x " << b.kvHeads << " KV heads x (" << b.headDim
         << (b.kvLatent ? " RoPE key + " : " key + ") << b.valueHeadDim
         << (b.kvLatent ? " latent" : " value") << ") x " << b.kvElementBytes << " B";
    else
      os << " layers x 2 x " << b.kvHeads << " KV heads x " << b.headDim << " x "
         << b.kvElementBytes << " B";
    if (b.kvScaleBytes)
      os << " + " << human(b.kvScaleBytes) << " of f32 scales";
    os << ", " << (b.kvDtype.empty() ? "f32" : b.kvDtype) << ")\n";
    os << "xfmr-compile: bytes per decode token: " << human(b.perToken(0)) << " + "
       << human(b.kvPerToken) << " x context (at 1024 tokens: " << human(b.perToken(1024))
       << ", at 4096: " << human(b.perToken(4096)) << ")\n";
  } else {
    os << "xfmr-compile: bytes per decode token: " << human(b.perToken(0))
       << " of weights (not a step function: --kv-cache=paged adds the KV cache)\n";
  }
}

} // namespace xfmr
