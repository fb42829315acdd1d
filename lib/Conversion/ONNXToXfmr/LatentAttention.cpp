//===- LatentAttention.cpp - DeepSeek's latent attention in a paged cache
//--===//
//
// Part of xfmr.
//
// Multi-head latent attention (DeepSeek-V2/V3, transformers'
// DeepseekV3Attention) caches per token a compressed latent c [r] and one
// RoPE key k_rope [dr] shared by all heads, and expands them for every head
// h with the kv_b_proj weight W [r, H * (dn + dv)]:
//   key_h   = [c · Wk_h ; k_rope]   (Wk_h [r, dn]: W's columns h*(dn+dv) + [0,
//   dn)) value_h = c · Wv_h              (Wv_h [r, dv]: the next dv columns)
// The exported graph does that expansion over the whole context on every
// step. Matrix products are associative, so the projections can move to the
// query and the output instead (DeepSeek-V2 §2.1.2, "absorbed"):
//   q_h · key_h = [q_nope_h · Wk_hᵀ ; q_rope_h] · [c ; k_rope]
//   Σ p · value_h = (Σ p · c) · Wv_h
// which is attention with one KV head whose key is [c ; k_rope] and whose
// value is c: xfmr.paged_attention's `latent` form, and the cache holds
// r + dr numbers per token and layer instead of H * (dn + dr + dv).
//
//===----------------------------------------------------------------------===//

#include "LatentAttention.h"

#include "mlir/IR/BuiltinDialect.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;

namespace xfmr::raise {
namespace {

bool isZeroFill(Value v) {
  auto fill = def<onnx::ConstantOfShapeOp>(v);
  if (!fill)
    return false;
  if (!fill.getValueAttr())
    return true; // ONNX's default: a float 0
  auto dense = dyn_cast<DenseElementsAttr>(fill.getValueAttr());
  return dense && dense.isSplat() && isa<FloatType>(dense.getElementType()) &&
         dense.getSplatValue<APFloat>().isZero();
}

bool hasPerm(Value v, ArrayRef<int64_t> perm) {
  auto t = def<onnx::TransposeOp>(v);
  std::optional<ArrayAttr> attr = t ? t.getPerm() : std::nullopt;
  if (!attr)
    return false;
  SmallVector<int64_t> p;
  for (Attribute a : *attr)
    p.push_back(cast<IntegerAttr>(a).getInt());
  return ArrayRef<int64_t>(p) == perm;
}

/// torch.onnx's dynamo exporter writes `t[..., a:b] = x` as a ScatterND on
/// the last axis moved to the front (Transpose perm [3, 1, 2, 0] around it).
constexpr int64_t kLastToFront[] = {3, 1, 2, 0};

/// `start` if `values` is start, start + 1, ..., start + n - 1.
std::optional<int64_t> contiguousStart(ArrayRef<int64_t> values, int64_t n) {
  if (static_cast<int64_t>(values.size()) != n || n == 0)
    return std::nullopt;
  for (int64_t i = 1; i < n; ++i)
    if (values[i] != values[0] + i)
      return std::nullopt;
  return values[0];
}

/// The first last-axis column that `scatter` writes `width` columns from:
/// dynamo's constant [width, 1] indices into the transposed tensor, or
/// TorchScript's index grid whose last component is a constant range.
std::optional<int64_t> scatterColumn(onnx::ScatterNDOp scatter, int64_t width,
                                     bool transposed) {
  Value indices = scatter.getIndices();
  if (transposed) {
    std::optional<SmallVector<int64_t>> c = constantInts(indices);
    if (!c || rankOf(indices) != 2 || dimOf(indices, 1) != 1)
      return std::nullopt;
    return contiguousStart(*c, width);
  }
  auto grid = def<onnx::ConcatOp>(indices);
  if (!grid || !isLastAxis(grid.getAxis(), rankOf(indices)) ||
      grid.getInputs().size() != 4)
    return std::nullopt;
  Value column = grid.getInputs().back();
  for (bool stripped = true; stripped;) {
    stripped = false;
    if (auto u = def<onnx::UnsqueezeOp>(column))
      column = u.getData(), stripped = true;
    else if (auto e = def<onnx::ExpandOp>(column))
      column = e.getInput(), stripped = true;
  }
  std::optional<SmallVector<int64_t>> c = constantInts(column);
  return c ? contiguousStart(*c, width) : std::nullopt;
}

/// `v` without the shape-only ops between a scattered slice and its source
/// (Reshape to the same shape, Expand, dynamo's Transpose).
Value updateSource(Value v) {
  while (true) {
    if (auto r = def<onnx::ReshapeOp>(v);
        r && r.getData().getType() == v.getType())
      v = r.getData();
    else if (auto e = def<onnx::ExpandOp>(v))
      v = e.getInput();
    else if (hasPerm(v, kLastToFront))
      v = def<onnx::TransposeOp>(v).getData();
    else
      return v;
  }
}

/// The key columns each source fills: [start, start + width) <- source.
struct KeyPart {
  int64_t start, width;
  Value source;
};

/// The slices the key [B, H, S, D] is assembled from: nested ScatterNDs
/// (either exporter's) over a tensor of zeros.
std::optional<SmallVector<KeyPart>> keyParts(Value key) {
  SmallVector<KeyPart> parts;
  Value cur = key;
  for (int guard = 0; guard < 8; ++guard) {
    bool transposed = hasPerm(cur, kLastToFront);
    if (transposed)
      cur = def<onnx::TransposeOp>(cur).getData();
    auto scatter = def<onnx::ScatterNDOp>(cur);
    if (!scatter) {
      if (transposed || !isZeroFill(cur))
        return std::nullopt;
      return parts;
    }
    if (scatter.getReduction() != "none")
      return std::nullopt;
    Value updates = scatter.getUpdates();
    int64_t width = dimOf(updates, transposed ? 0 : -1);
    std::optional<int64_t> start = scatterColumn(scatter, width, transposed);
    if (ShapedType::isDynamic(width) || !start)
      return std::nullopt;
    parts.push_back({*start, width, updateSource(updates)});
    cur = scatter.getData();
    if (transposed) {
      if (!hasPerm(cur, kLastToFront))
        return std::nullopt;
      cur = def<onnx::TransposeOp>(cur).getData();
    }
  }
  return std::nullopt;
}

/// `latent` [B, 1, S, r] expanded by W: Split(Transpose(Reshape(MatMul(
/// latent, W)) to [B, S, H, dn + dv], [0, 2, 1, 3]), [dn, dv]) on the last
/// axis. Fills the latent, the weight and the widths.
onnx::SplitOp expansionOf(Value value, LatentAttention &out) {
  auto split = def<onnx::SplitOp>(value);
  if (!split || split.getOutputs().size() != 2 ||
      value != split.getOutputs()[1] ||
      !isLastAxis(split.getAxis(), rankOf(value)) ||
      !hasPerm(split.getInput(), {0, 2, 1, 3}))
    return nullptr;
  auto reshape =
      def<onnx::ReshapeOp>(def<onnx::TransposeOp>(split.getInput()).getData());
  auto mm = reshape ? def<onnx::MatMulOp>(reshape.getData()) : nullptr;
  if (!mm || !isConstant(mm.getB()) || rankOf(mm.getA()) != 4 ||
      dimOf(mm.getA(), 1) != 1 || rankOf(mm.getB()) != 2 ||
      rankOf(reshape) != 4)
    return nullptr;
  out.latent = mm.getA();
  out.weight = mm.getB();
  out.rank = dimOf(mm.getB(), 0);
  out.noPe = dimOf(split.getOutputs()[0], -1);
  out.valueDim = dimOf(value, -1);
  int64_t heads = dimOf(reshape, 2);
  if (ShapedType::isDynamic(out.rank) || ShapedType::isDynamic(out.noPe) ||
      ShapedType::isDynamic(out.valueDim) || ShapedType::isDynamic(heads) ||
      dimOf(reshape, 3) != out.noPe + out.valueDim ||
      dimOf(mm.getB(), 1) != heads * (out.noPe + out.valueDim))
    return nullptr;
  return split;
}

Value matmul(OpBuilder &b, Location loc, Value x, Value y) {
  auto xt = cast<RankedTensorType>(x.getType());
  auto yt = cast<RankedTensorType>(y.getType());
  SmallVector<int64_t> shape(xt.getShape());
  shape.back() = yt.getShape().back();
  return onnx::MatMulOp::create(b, loc, xt.clone(shape), x, y);
}

/// W's per-head columns [from, from + n) as a constant [H, r, n], or
/// [H, n, r] with `transposed`, rearranged at compile time (a step then reads
/// them as any weight, instead of reshuffling W every step); null when W's
/// values are not at hand here.
Value perHeadConstant(OpBuilder &b, Location loc, const LatentAttention &mla,
                      int64_t heads, int64_t from, int64_t n, bool transposed) {
  std::optional<ArrayRef<float>> w = constantMatrix(mla.weight);
  if (!w)
    return nullptr;
  const int64_t r = mla.rank, cols = heads * (mla.noPe + mla.valueDim);
  std::vector<float> out(static_cast<size_t>(heads * r * n));
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < r; ++i)
      for (int64_t c = 0; c < n; ++c) {
        float v = (*w)[i * cols + h * (mla.noPe + mla.valueDim) + from + c];
        out[static_cast<size_t>(transposed ? (h * n + c) * r + i
                                           : (h * r + i) * n + c)] = v;
      }
  std::string name = "latent_attention";
  ElementsAttr attr;
  if (matchPattern(mla.weight, m_Constant(&attr)))
    if (auto resource = dyn_cast<DenseResourceElementsAttr>(attr))
      name = resource.getRawHandle().getKey().str();
  name += transposed ? ".absorbed_keys" : ".absorbed_values";
  SmallVector<int64_t> shape = transposed ? SmallVector<int64_t>{heads, n, r}
                                          : SmallVector<int64_t>{heads, r, n};
  ArrayRef<char> bytes(reinterpret_cast<const char *>(out.data()),
                       out.size() * sizeof(float));
  return blobConstant(b, loc, shape, b.getF32Type(), bytes, name);
}

/// W [r, H * (dn + dv)] as [H, r, dn + dv], sliced to columns [from, from + n).
Value perHead(OpBuilder &b, Location loc, const LatentAttention &mla,
              int64_t heads, int64_t from, int64_t n) {
  int64_t width = mla.noPe + mla.valueDim;
  auto type = cast<RankedTensorType>(mla.weight.getType());
  Value w = onnx::ReshapeOp::create(
      b, loc, type.clone({mla.rank, heads, width}), mla.weight,
      i64Constant(b, loc, {mla.rank, heads, width}), b.getI64IntegerAttr(0));
  return sliceLast(b, loc, transpose(b, loc, w, {1, 0, 2}), from, n);
}

} // namespace

std::optional<LatentAttention> matchLatentAttention(AttentionOp op) {
  LatentAttention mla;
  onnx::SplitOp split = expansionOf(op.getValue(), mla);
  if (!split || op.getNumKvHeads() != op.getNumHeads() ||
      dimOf(op.getValue(), 1) != op.getNumHeads())
    return std::nullopt;
  std::optional<SmallVector<KeyPart>> parts = keyParts(op.getKey());
  if (!parts || parts->size() != 2)
    return std::nullopt;
  // [k_nope ; k_rope]: the expansion's first part, then the RoPE key
  // broadcast over the heads.
  llvm::sort(*parts, [](const KeyPart &x, const KeyPart &y) {
    return x.start < y.start;
  });
  const KeyPart &nope = (*parts)[0], &rope = (*parts)[1];
  if (nope.start != 0 || nope.width != mla.noPe ||
      nope.source != split.getOutputs()[0] || rope.start != mla.noPe ||
      rankOf(rope.source) != 4 || dimOf(rope.source, 1) != 1 ||
      dimOf(rope.source, 3) != rope.width ||
      dimOf(op.getKey(), 3) != mla.noPe + rope.width ||
      dimOf(op.getQuery(), 3) != mla.noPe + rope.width)
    return std::nullopt;
  mla.ropeKey = rope.source;
  mla.ropeDim = rope.width;
  return mla;
}

Value absorbQuery(OpBuilder &b, Location loc, const LatentAttention &mla,
                  Value query) {
  int64_t heads = dimOf(query, 1);
  // q_nope_h · Wk_hᵀ per head: [H, T, dn] x [H, dn, r] -> [H, T, r].
  Value wk =
      perHeadConstant(b, loc, mla, heads, 0, mla.noPe, /*transposed=*/true);
  if (!wk)
    wk = transpose(b, loc, perHead(b, loc, mla, heads, 0, mla.noPe), {0, 2, 1});
  Value nope =
      transpose(b, loc, sliceLast(b, loc, query, 0, mla.noPe), {1, 0, 2});
  Value latentQuery = transpose(b, loc, matmul(b, loc, nope, wk), {1, 0, 2});
  Value rope = sliceLast(b, loc, query, mla.noPe, mla.ropeDim);
  auto type = cast<RankedTensorType>(query.getType());
  SmallVector<int64_t> shape(type.getShape());
  shape.back() = mla.rank + mla.ropeDim;
  return onnx::ConcatOp::create(b, loc, type.clone(shape),
                                ValueRange{latentQuery, rope},
                                b.getI64IntegerAttr(-1));
}

Value expandOutput(OpBuilder &b, Location loc, const LatentAttention &mla,
                   Value out) {
  int64_t heads = dimOf(out, 1);
  // (Σ p · c) · Wv_h per head: [H, T, r] x [H, r, dv] -> [H, T, dv].
  Value wv = perHeadConstant(b, loc, mla, heads, mla.noPe, mla.valueDim,
                             /*transposed=*/false);
  if (!wv)
    wv = perHead(b, loc, mla, heads, mla.noPe, mla.valueDim);
  return transpose(
      b, loc, matmul(b, loc, transpose(b, loc, out, {1, 0, 2}), wv), {1, 0, 2});
}

} // namespace xfmr::raise
