//===- ActOrder.cpp - MatMulNBits with g_idx as rows sorted by group ------===//
//
// Part of xfmr.
//
// GPTQ with act-order quantizes a weight's K rows in order of decreasing
// activation, so the group (block of scales and zero points) of row k is
// g_idx[k], not k / block_size. com.microsoft MatMulNBits carries that as its
// g_idx input: W[n, k] = (q[n, k] - zp[n, g_idx[k]]) * scale[n, g_idx[k]]
// (onnxruntime 1.32's CPU kernel; measured in scripts/check-act-order.py).
// The product is the same over any order of k, so the rows are sorted by
// group at compile time (stable: exllama's and vLLM's reordering) and A's
// columns are gathered the same way at run time:
//   Y = A[..., perm] . W[perm, :], perm = the rows of group 0, then 1, ...
// after which every block is contiguous and the blockwise kernels run as
// for any MatMulNBits. One gather of A's K columns per product: K floats
// per row against N x K / 2 weight bytes.
//
//===----------------------------------------------------------------------===//

#include "Match.h"

#include <algorithm>
#include <cstring>
#include <numeric>

using namespace mlir;

namespace xfmr::raise {
namespace {

/// The int32 values of a constant (inline or a resource blob).
std::optional<SmallVector<int64_t>> int32Values(Value v) {
  if (auto ints = constantInts(v))
    return ints;
  auto c = def<onnx::ConstantOp>(v);
  auto attr = c ? dyn_cast_or_null<ElementsAttr>(c.getValueAttr()) : ElementsAttr();
  auto bytes = attr ? rawBytes(attr) : std::nullopt;
  if (!bytes || !attr.getElementType().isInteger(32) ||
      bytes->size() != attr.getNumElements() * sizeof(int32_t))
    return std::nullopt;
  SmallVector<int64_t> out(attr.getNumElements());
  for (size_t i = 0; i < out.size(); ++i) {
    int32_t x;
    std::memcpy(&x, bytes->data() + i * sizeof(int32_t), sizeof(x));
    out[i] = x;
  }
  return out;
}

/// The `bits`-bit field of row k in column n's bytes (low bits first).
uint8_t field(ArrayRef<char> row, int64_t k, int64_t bits) {
  auto byte = static_cast<uint8_t>(row[k * bits / 8]);
  return bits == 8 ? byte : (byte >> (4 * (k % 2))) & 0xF;
}

} // namespace

bool reorderActOrder(Operation *anchor, IRRewriter &rewriter, RaiseLog &log) {
  auto mm = cast<onnx::MsMatMulNBitsOp>(anchor);
  if (isa<NoneType>(mm.getGIdx().getType()))
    return false; // not a candidate
  auto fail = [&](const Twine &why) {
    log.unfused(anchor, "act_order", why);
    return false;
  };
  int64_t k = mm.getK(), n = mm.getN(), bits = mm.getBits(), bs = mm.getBlockSize();
  if ((bits != 4 && bits != 8) || bs <= 0 || k <= 0 || n <= 0 || k % bs)
    return fail("needs 4 or 8 bits and K a multiple of block_size");
  int64_t blocks = k / bs, blob = bs * bits / 8;
  auto groups = int32Values(mm.getGIdx());
  if (!groups || static_cast<int64_t>(groups->size()) != k)
    return fail("g_idx is not a constant of K values");
  // Packed 4-bit zero points: onnxruntime 1.32 reads 8 instead when g_idx is
  // given (the float ones it reads per group), so the model has no one
  // meaning; refused rather than guessed.
  Value zeros = mm.getZeroPoints();
  if (!isa<NoneType>(zeros.getType()) && !isa<FloatType>(elementTypeOf(zeros)))
    return fail("g_idx with uint8 zero points (onnxruntime 1.32 ignores them; give float "
                "zero points or none)");
  SmallVector<int64_t> count(blocks, 0);
  for (int64_t g : *groups) {
    if (g < 0 || g >= blocks)
      return fail("g_idx has a group outside [0, K / block_size)");
    ++count[g];
  }
  if (llvm::any_of(count, [&](int64_t c) { return c != bs; }))
    return fail("g_idx's groups are not block_size rows each");
  auto packedOp = def<onnx::ConstantOp>(mm.getB());
  auto packedAttr = packedOp ? dyn_cast_or_null<ElementsAttr>(packedOp.getValueAttr())
                             : ElementsAttr();
  auto bytes = packedAttr ? rawBytes(packedAttr) : std::nullopt;
  if (!bytes || static_cast<int64_t>(bytes->size()) != n * blocks * blob)
    return fail("B is not a constant [N, K / block_size, block_size * bits / 8]");

  SmallVector<int64_t> perm(k);
  std::iota(perm.begin(), perm.end(), 0);
  std::stable_sort(perm.begin(), perm.end(),
                   [&](int64_t x, int64_t y) { return (*groups)[x] < (*groups)[y]; });
  Location loc = mm.getLoc();
  rewriter.setInsertionPoint(mm);
  Value b = mm.getB(), a = mm.getA();
  // Already in block order (g_idx = k / block_size): only g_idx goes.
  if (!llvm::equal(perm, llvm::seq<int64_t>(0, k))) {
    std::vector<char> sorted(bytes->size(), 0);
    for (int64_t col = 0; col < n; ++col) {
      ArrayRef<char> from = bytes->slice(col * blocks * blob, blocks * blob);
      char *to = sorted.data() + col * blocks * blob;
      for (int64_t r = 0; r < k; ++r) {
        uint8_t q = field(from, perm[r], bits);
        to[r * bits / 8] |= static_cast<char>(bits == 8 ? q : q << (4 * (r % 2)));
      }
    }
    b = blobConstant(rewriter, loc, cast<ShapedType>(b.getType()).getShape(),
                     elementTypeOf(b), sorted, "xfmr_act_order_weights");
    auto aType = cast<RankedTensorType>(a.getType());
    SmallVector<int64_t> shape(aType.getShape());
    shape.back() = k;
    a = onnx::GatherOp::create(rewriter, loc, aType.clone(shape), a,
                               i64Constant(rewriter, loc, perm),
                               rewriter.getI64IntegerAttr(aType.getRank() - 1));
  }
  Value none = onnx::NoValueOp::create(rewriter, loc, rewriter.getNoneType());
  auto sorted = onnx::MsMatMulNBitsOp::create(
      rewriter, loc, mm.getY().getType(), a, b, mm.getScales(), zeros, none, mm.getBias(),
      mm.getKAttr(), mm.getNAttr(), mm.getAccuracyLevelAttr(), mm.getBitsAttr(),
      mm.getBlockSizeAttr(), mm.getWeightPrepackedAttr());
  rewriter.replaceAllUsesWith(mm.getY(), sorted.getY());
  log.formed("act_order");
  return true;
}

} // namespace xfmr::raise
