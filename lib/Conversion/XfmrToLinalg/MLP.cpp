//===- MLP.cpp - xfmr.linear, xfmr.gated_mlp, xfmr.embedding to linalg ----===//
//
// Part of xfmr.
//
// Projections collapse the input's leading dims into rows ([M, K]), multiply
// with one linalg.generic over loops (m, k, n), and expand the rows back.
// The n loop is innermost so that the weights ([K, N]) stream contiguously
// along their rows, which the CPU backend's GEMV relies on. Weights are
// converted to the input's element type (sitofp for integers) as the ops
// define; 16-bit inputs accumulate in f32, and a gated MLP keeps its hidden
// activations in the accumulator type until the result is rounded.
//
//===----------------------------------------------------------------------===//

#include "Patterns.h"
#include "xfmr/Conversion/LoweringUtils.h"
#include "xfmr/Conversion/QuantizedProducts.h"

#include "runtime/ukernels/MatmulNarrow.h"

#include "dialects/xfmr/IR/XfmrOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Quant/IR/Quant.h"
#include "mlir/Dialect/Quant/IR/QuantTypes.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "llvm/Support/MathExtras.h"

#include <cstring>
#include <numeric>

using namespace mlir;

namespace xfmr::lowering {
namespace {



/// A weight scalar (float, or signed integer) as `elem`.
Value convertWeight(OpBuilder &b, Location loc, Value v, Type elem) {
  if (isa<IntegerType>(v.getType()))
    return arith::SIToFPOp::create(b, loc, elem, v);
  return convertFloat(b, loc, v, elem);
}

/// Integer weights must be signless for arith.sitofp.
bool hasSignlessOrFloatElements(Value v) {
  Type e = cast<RankedTensorType>(v.getType()).getElementType();
  return !isa<IntegerType>(e) || e.isSignlessInteger();
}


Value castTo(OpBuilder &b, Location loc, Value v, Type type) {
  return v.getType() == type ? v : tensor::CastOp::create(b, loc, type, v);
}

/// `x` ([..., K]) as a matrix of rows [M, K].
Value flattenRows(OpBuilder &b, Location loc, Value x) {
  auto type = cast<RankedTensorType>(x.getType());
  int64_t rank = type.getRank();
  if (rank == 2)
    return x;
  if (rank == 1) {
    auto matrix =
        RankedTensorType::get({1, type.getDimSize(0)}, type.getElementType());
    SmallVector<ReassociationIndices> groups{{0, 1}};
    SmallVector<OpFoldResult> shape{b.getIndexAttr(1),
                                    tensor::getMixedSize(b, loc, x, 0)};
    return tensor::ExpandShapeOp::create(b, loc, matrix, x, groups, shape);
  }
  ReassociationIndices rows(rank - 1);
  std::iota(rows.begin(), rows.end(), 0);
  SmallVector<ReassociationIndices> groups{rows, {rank - 1}};
  return tensor::CollapseShapeOp::create(b, loc, x, groups);
}

/// The rows `y` ([M, N]) back under the leading dims of `x` ([..., K]):
/// [..., N].
Value unflattenRows(OpBuilder &b, Location loc, Value y, Value x) {
  auto xType = cast<RankedTensorType>(x.getType());
  auto yType = cast<RankedTensorType>(y.getType());
  int64_t rank = xType.getRank();
  if (rank == 2)
    return y;
  if (rank == 1) {
    SmallVector<ReassociationIndices> groups{{0, 1}};
    return tensor::CollapseShapeOp::create(b, loc, y, groups);
  }
  ReassociationIndices rows(rank - 1);
  std::iota(rows.begin(), rows.end(), 0);
  SmallVector<ReassociationIndices> groups{rows, {rank - 1}};
  SmallVector<int64_t> shape(xType.getShape());
  shape.back() = yType.getDimSize(1);
  SmallVector<OpFoldResult> sizes;
  for (int64_t d = 0; d + 1 < rank; ++d)
    sizes.push_back(tensor::getMixedSize(b, loc, x, d));
  sizes.push_back(tensor::getMixedSize(b, loc, y, 1));
  auto type = RankedTensorType::get(shape, yType.getElementType());
  if (llvm::count_if(sizes, [](OpFoldResult s) { return isa<Value>(s); }) < 2)
    return tensor::ExpandShapeOp::create(b, loc, type, y, groups, sizes);
  // memref.expand_shape with two dynamic dims in one group crashes
  // expand-strided-metadata in LLVM 22: reshape through a shape tensor.
  SmallVector<Value> dims;
  for (OpFoldResult s : sizes)
    dims.push_back(arith::IndexCastOp::create(
        b, loc, b.getI64Type(), getValueOrCreateConstantIndexOp(b, loc, s)));
  Value shapeTensor = tensor::FromElementsOp::create(b, loc, dims);
  return tensor::ReshapeOp::create(b, loc, type, y, shapeTensor);
}

/// rows [M, K] · w [K, N] in `acc`, with w's elements first converted to
/// `elem`: out[m, n] += rows[m, k] * w[k, n] over loops (m, k, n).
Value matmul(OpBuilder &b, Location loc, Value rows, Value w, Type elem,
             FloatType acc) {
  MLIRContext *ctx = b.getContext();
  AffineExpr m, k, n;
  bindDims(ctx, m, k, n);
  SmallVector<AffineMap> maps{AffineMap::get(3, 0, {m, k}, ctx),
                              AffineMap::get(3, 0, {k, n}, ctx),
                              AffineMap::get(3, 0, {m, n}, ctx)};
  SmallVector<utils::IteratorType> iters{utils::IteratorType::parallel,
                                         utils::IteratorType::reduction,
                                         utils::IteratorType::parallel};
  SmallVector<OpFoldResult> sizes{tensor::getMixedSize(b, loc, rows, 0),
                                  tensor::getMixedSize(b, loc, w, 1)};
  Value empty = tensor::EmptyOp::create(b, loc, sizes, acc);
  Value zero = floatConstant(b, loc, acc, 0.0);
  Value init = linalg::FillOp::create(b, loc, zero, empty).getResult(0);
  // The sum may be reassociated and fused into FMAs (vectorized k loops).
  auto fm = arith::FastMathFlagsAttr::get(
      ctx, arith::FastMathFlags::reassoc | arith::FastMathFlags::contract);
  return linalg::GenericOp::create(
             b, loc, TypeRange{init.getType()}, ValueRange{rows, w},
             ValueRange{init}, maps, iters,
             [&](OpBuilder &nb, Location l, ValueRange a) {
               Value lhs = convertFloat(nb, l, a[0], acc);
               Value rhs =
                   convertFloat(nb, l, convertWeight(nb, l, a[1], elem), acc);
               Value p = arith::MulFOp::create(nb, l, lhs, rhs, fm);
               Value sum = arith::AddFOp::create(nb, l, a[2], p, fm);
               linalg::YieldOp::create(nb, l, sum);
             })
      .getResult(0);
}

using ScalarFn = function_ref<Value(OpBuilder &, Location, ValueRange)>;

/// An elementwise generic over matrices of the shape of `matrices[0]`
/// producing `elem`; `column` (optional, [N]) is read by column index.
Value mapMatrix(OpBuilder &b, Location loc, ValueRange matrices, Value column,
                Type elem, ScalarFn body) {
  MLIRContext *ctx = b.getContext();
  Value init = tensor::EmptyOp::create(
      b, loc, tensor::getMixedSizes(b, loc, matrices[0]), elem);
  AffineMap identity = AffineMap::getMultiDimIdentityMap(2, ctx);
  SmallVector<Value> ins(matrices);
  SmallVector<AffineMap> maps(matrices.size(), identity);
  if (column) {
    ins.push_back(column);
    maps.push_back(AffineMap::get(2, 0, getAffineDimExpr(1, ctx)));
  }
  maps.push_back(identity);
  SmallVector<utils::IteratorType> iters(2, utils::IteratorType::parallel);
  return linalg::GenericOp::create(
             b, loc, TypeRange{init.getType()}, ins, ValueRange{init}, maps,
             iters,
             [&](OpBuilder &nb, Location l, ValueRange a) {
               linalg::YieldOp::create(nb, l, body(nb, l, a.drop_back()));
             })
      .getResult(0);
}

/// `act(x)` for a scalar of a float type.
Value activate(OpBuilder &b, Location loc, Activation act, Value x) {
  auto type = cast<FloatType>(x.getType());
  auto c = [&](double v) { return floatConstant(b, loc, type, v); };
  auto mul = [&](Value lhs, Value rhs) -> Value {
    return arith::MulFOp::create(b, loc, lhs, rhs);
  };
  auto add = [&](Value lhs, Value rhs) -> Value {
    return arith::AddFOp::create(b, loc, lhs, rhs);
  };
  switch (act) {
  case Activation::silu: {
    // x * sigmoid(x), as x / (1 + exp(-x)).
    Value e = math::ExpOp::create(b, loc, arith::NegFOp::create(b, loc, x));
    return arith::DivFOp::create(b, loc, x, add(c(1.0), e));
  }
  case Activation::gelu: {
    // 0.5 x (1 + erf(x / sqrt 2))
    Value e = math::ErfOp::create(b, loc, mul(x, c(llvm::numbers::inv_sqrt2)));
    return mul(mul(c(0.5), x), add(c(1.0), e));
  }
  case Activation::gelu_tanh: {
    // 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x³)))
    Value x3 = mul(mul(x, x), x);
    Value inner = mul(c(llvm::numbers::sqrt2 * llvm::numbers::inv_sqrtpi),
                      add(x, mul(c(0.044715), x3)));
    Value t = math::TanhOp::create(b, loc, inner);
    return mul(mul(c(0.5), x), add(c(1.0), t));
  }
  case Activation::relu:
    return arith::MaximumFOp::create(b, loc, x, c(0.0));
  }
  llvm_unreachable("unknown activation");
}

/// `rows` [M, K] with K static: when K is known only at run time (after a
/// Reshape with -1), a check that it is `k`, then a cast to the static type.
Value withStaticK(OpBuilder &b, Location loc, Value rows, int64_t k) {
  auto rType = cast<RankedTensorType>(rows.getType());
  if (!rType.isDynamicDim(1))
    return rows;
  Value have = tensor::DimOp::create(b, loc, rows, 1);
  runtimeCheck(b, loc,
               arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, have,
                                     indexConstant(b, loc, k)),
               "xfmr.linear: the input's last dim is not the weights' K");
  auto type = RankedTensorType::get({rType.getDimSize(0), k}, rType.getElementType());
  return tensor::CastOp::create(b, loc, type, rows);
}

/// Columns per micro-kernel call: the unit xfmr-parallelize-loops splits
/// across threads (a multiple of the kernels' 16-column panels).
constexpr int64_t kNarrowColumnTile = 64;

/// The micro-kernel for constant weights of element type `t`, and its bytes
/// per element; empty for other types.
std::pair<StringRef, int64_t> narrowKernel(Type t) {
  if (t.isBF16())
    return {"xfmr_uk_matmul_f32bf16", 2};
  if (isa<Float8E4M3FNType>(t))
    return {"xfmr_uk_matmul_f32fp8", 1};
  if (t.isSignlessInteger(8))
    return {"xfmr_uk_matmul_f32i8", 1};
  return {};
}

/// rows [M, K] f32 · w [K, N] with `w` a constant bf16, fp8 (e4m3fn) or
/// int8 matrix: the weights packed at compile time into the micro-kernel's
/// panels (runtime/ukernels/MatmulNarrow.c) and one call per
/// kNarrowColumnTile columns, in a loop xfmr-parallelize-loops may split
/// across threads. Each weight is read once per call in its own width and
/// widened in registers. Null (having created nothing) unless the operands
/// are that.
Value narrowProduct(OpBuilder &b, Location loc, Operation *anchor, Value rows, Value w) {
  auto rType = cast<RankedTensorType>(rows.getType());
  auto wType = dyn_cast<RankedTensorType>(w.getType());
  if (!rType.getElementType().isF32() || !wType || wType.getRank() != 2 ||
      !wType.hasStaticShape())
    return nullptr;
  auto [kernel, elemBytes] = narrowKernel(wType.getElementType());
  int64_t k = wType.getDimSize(0), n = wType.getDimSize(1);
  std::optional<ArrayRef<char>> bytes = constantBytes(w);
  if (kernel.empty() || k < 1 || n < 1 || !bytes ||
      bytes->size() != static_cast<size_t>(k * n * elemBytes) ||
      (!rType.isDynamicDim(1) && rType.getDimSize(1) != k))
    return nullptr;
  std::vector<char> packed(xfmr_uk_packed_narrow_bytes(n, k, elemBytes));
  xfmr_uk_pack_narrow(reinterpret_cast<const uint8_t *>(bytes->data()), k, n, elemBytes,
                      reinterpret_cast<uint8_t *>(packed.data()));
  rows = withStaticK(b, loc, rows, k);
  rType = cast<RankedTensorType>(rows.getType());

  MLIRContext *ctx = b.getContext();
  Type i8 = IntegerType::get(ctx, 8), i64 = b.getI64Type(), f32 = b.getF32Type();
  Type ptr = LLVM::LLVMPointerType::get(ctx);
  declareKernel(b, anchor, kernel, {ptr, i64, i64, ptr, i64, i64, ptr, i64});
  auto buffer = [&](Value t) {
    auto type = cast<RankedTensorType>(t.getType());
    return bufferization::ToBufferOp::create(
        b, loc, MemRefType::get(type.getShape(), type.getElementType()), t, /*read_only=*/true);
  };
  Value panels = buffer(constantTensor(b, loc, packed, {static_cast<int64_t>(packed.size())}, i8,
                                       elemBytes == 2 ? "xfmr_bf16_panels" : "xfmr_fp8_panels"));
  Value m = tensor::DimOp::create(b, loc, rows, 0);
  // The call reads A through a buffer the tensor analysis cannot see: hand
  // it a copy of its own (a to_buffer of A itself let an in-place write
  // reuse A's buffer: Qwen2's logits came out wrong), as the int8 kernels
  // get their own quantized rows (QuantizedProducts.cpp). One pass over
  // [M, K] against the product's M * K * N.
  Value a = kernelInput(b, loc, rows);
  auto outType = MemRefType::get({rType.getDimSize(0), n}, f32);
  Value out = memref::AllocOp::create(b, loc, outType,
                                      rType.isDynamicDim(0) ? ValueRange{m} : ValueRange{});
  auto c64 = [&](int64_t v) -> Value { return arith::ConstantIntOp::create(b, loc, i64, v); };
  Value m64 = arith::IndexCastOp::create(b, loc, i64, m);
  Value aP = addressOf(b, loc, a), wP = addressOf(b, loc, panels), outP = addressOf(b, loc, out);
  int64_t tiles = (n + kNarrowColumnTile - 1) / kNarrowColumnTile;
  auto loop = scf::ForOp::create(b, loc, indexConstant(b, loc, 0), indexConstant(b, loc, tiles),
                                 indexConstant(b, loc, 1));
  loop->setAttr("xfmr.independent_iterations", b.getUnitAttr());
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value t = arith::IndexCastOp::create(b, loc, i64, loop.getInductionVar());
    Value n0 = arith::MulIOp::create(b, loc, t, c64(kNarrowColumnTile));
    Value n1 = arith::MinSIOp::create(
        b, loc, arith::AddIOp::create(b, loc, n0, c64(kNarrowColumnTile)), c64(n));
    func::CallOp::create(b, loc, kernel, TypeRange{},
                         ValueRange{aP, m64, c64(k), wP, n0, n1, outP, c64(n)});
  }
  return bufferization::ToTensorOp::create(b, loc, RankedTensorType::get(outType.getShape(), f32),
                                           out, b.getUnitAttr(), b.getUnitAttr());
}

/// A `!quant.uniform` weight (see xfmr.linear): the integer storage under
/// its quant.scast and one f32 scale per output channel.
struct QuantizedWeight {
  Value storage;
  std::vector<float> scales;
};

/// The storage and scales of `w` if its elements are a `!quant.uniform`
/// (the verifier has checked the rest); null storage if `w` is not a
/// quant.scast.
std::optional<QuantizedWeight> quantizedWeight(Value w) {
  auto type = cast<RankedTensorType>(w.getType());
  auto q = dyn_cast<quant::QuantizedType>(type.getElementType());
  if (!q)
    return std::nullopt;
  QuantizedWeight out;
  if (auto cast = w.getDefiningOp<quant::StorageCastOp>())
    out.storage = cast.getInput();
  if (auto axis = dyn_cast<quant::UniformQuantizedPerAxisType>(q))
    out.scales.assign(axis.getScales().begin(), axis.getScales().end());
  else if (!type.isDynamicDim(1))
    out.scales.assign(type.getDimSize(1), cast<quant::UniformQuantizedType>(q).getScale());
  return out;
}

/// rows [M, K] f32 · the 8-bit quantized `w` with each row quantized to
/// int8 at run time (`int8_activations`): the weights packed at compile
/// time for xfmr_uk_matmul_q8q8 as one block spanning K (stored q + 128,
/// the kernel's zero point), scales applied inside the kernel. Null (having
/// created nothing) unless the storage is a constant.
Value int8ActivationLinear(OpBuilder &b, Location loc, Operation *anchor, Value rows,
                           const QuantizedWeight &w) {
  auto sType = cast<RankedTensorType>(w.storage.getType());
  std::optional<ArrayRef<char>> bytes = constantBytes(w.storage);
  if (!cast<RankedTensorType>(rows.getType()).getElementType().isF32() ||
      !sType.hasStaticShape() || !bytes)
    return nullptr;
  int64_t k = sType.getDimSize(0), n = sType.getDimSize(1);
  if (static_cast<int64_t>(bytes->size()) != k * n ||
      static_cast<int64_t>(w.scales.size()) != n)
    return nullptr;
  // [K, N] int8 -> [N, K] uint8 q + 128.
  std::vector<char> columns(k * n);
  for (int64_t i = 0; i < k; ++i)
    for (int64_t col = 0; col < n; ++col)
      columns[col * k + i] =
          static_cast<char>(static_cast<uint8_t>(static_cast<int8_t>((*bytes)[i * n + col]) + 128));
  std::vector<char> scales(n * sizeof(float));
  std::memcpy(scales.data(), w.scales.data(), scales.size());
  KernelWeights kw = packQ8Weights(columns, k, scales, {}, n, k, k);
  rows = withStaticK(b, loc, rows, k);
  auto rType = cast<RankedTensorType>(rows.getType());
  auto accType = RankedTensorType::get({rType.getDimSize(0), n}, b.getF32Type());
  SmallVector<OpFoldResult> sizes{tensor::getMixedSize(b, loc, rows, 0), b.getIndexAttr(n)};
  return int8ActivationProduct(b, loc, anchor, rows, kw, k, n, accType, sizes, "xfmr_q8");
}

/// xfmr.linear(x, w, b) -> rows(x) · w + b
struct LinearLowering : public OpRewritePattern<LinearOp> {
  LinearLowering(MLIRContext *ctx, bool microKernels)
      : OpRewritePattern(ctx), microKernels(microKernels) {}

  /// Constant narrow weights go to the host CPU's micro-kernels.
  bool microKernels;

  LogicalResult matchAndRewrite(LinearOp op,
                                PatternRewriter &rewriter) const override {
    Value bias = op.getBias();
    if (!hasSignlessOrFloatElements(op.getWeight()) ||
        (bias && !hasSignlessOrFloatElements(bias)))
      return rewriter.notifyMatchFailure(op, "signed or unsigned integer "
                                             "weights; expected signless");
    Location loc = op.getLoc();
    Value x = op.getInput();
    Type elem = op.getInput().getType().getElementType();
    FloatType acc = accumulatorType(elem);

    Value rows = flattenRows(rewriter, loc, x);
    Value weight = op.getWeight();
    // Quantized weights: the product on the storage, then the scales
    // (inside the kernel with int8_activations).
    std::optional<QuantizedWeight> quantized = quantizedWeight(weight);
    Value scales, y;
    if (quantized) {
      if (!quantized->storage)
        return rewriter.notifyMatchFailure(op, "quantized weight is not a quant.scast");
      if (quantized->scales.empty())
        return rewriter.notifyMatchFailure(op, "per-tensor quantized weight with dynamic N");
      weight = quantized->storage;
      if (op.getInt8Activations() && microKernels)
        y = int8ActivationLinear(rewriter, loc, op, rows, *quantized);
      if (!y) {
        std::vector<char> bytes(quantized->scales.size() * sizeof(float));
        std::memcpy(bytes.data(), quantized->scales.data(), bytes.size());
        scales = constantTensor(rewriter, loc, bytes,
                                {static_cast<int64_t>(quantized->scales.size())},
                                rewriter.getF32Type(), "xfmr_weight_scales");
      }
    }
    if (!y && microKernels)
      y = narrowProduct(rewriter, loc, op, rows, weight);
    if (!y)
      y = matmul(rewriter, loc, rows, weight, elem, acc);
    if (scales)
      y = mapMatrix(rewriter, loc, y, scales, cast<RankedTensorType>(y.getType()).getElementType(),
                    [&](OpBuilder &b, Location l, ValueRange a) -> Value {
                      return arith::MulFOp::create(b, l, a[0],
                                                   convertFloat(b, l, a[1], acc));
                    });
    if (bias || acc != elem)
      y = mapMatrix(
          rewriter, loc, y, bias, elem,
          [&](OpBuilder &b, Location l, ValueRange a) {
            Value v = a[0];
            if (bias)
              v = arith::AddFOp::create(
                  b, l, v,
                  convertFloat(b, l, convertWeight(b, l, a[1], elem), acc));
            return convertFloat(b, l, v, elem);
          });
    y = unflattenRows(rewriter, loc, y, x);
    rewriter.replaceOp(op, castTo(rewriter, loc, y, op.getResult().getType()));
    return success();
  }
};

/// xfmr.gated_mlp(x, wg, wu, wd) -> (act(rows(x) · wg) * (rows(x) · wu)) · wd
struct GatedMLPLowering : public OpRewritePattern<GatedMLPOp> {
  using Base::Base;

  LogicalResult matchAndRewrite(GatedMLPOp op,
                                PatternRewriter &rewriter) const override {
    for (Value w : {op.getWGate(), op.getWUp(), op.getWDown()})
      if (!hasSignlessOrFloatElements(w))
        return rewriter.notifyMatchFailure(op, "signed or unsigned integer "
                                               "weights; expected signless");
    Location loc = op.getLoc();
    Value x = op.getInput();
    Type elem = op.getInput().getType().getElementType();
    FloatType acc = accumulatorType(elem);
    Activation act = op.getActivation();

    Value rows = flattenRows(rewriter, loc, x);
    Value gate = matmul(rewriter, loc, rows, op.getWGate(), elem, acc);
    Value up = matmul(rewriter, loc, rows, op.getWUp(), elem, acc);
    Value hidden =
        mapMatrix(rewriter, loc, ValueRange{gate, up}, Value(), acc,
                  [&](OpBuilder &b, Location l, ValueRange a) {
                    Value g = activate(b, l, act, a[0]);
                    return arith::MulFOp::create(b, l, g, a[1]).getResult();
                  });
    Value y = matmul(rewriter, loc, hidden, op.getWDown(), elem, acc);
    if (acc != elem)
      y = mapMatrix(rewriter, loc, y, Value(), elem,
                    [&](OpBuilder &b, Location l, ValueRange a) {
                      return convertFloat(b, l, a[0], elem);
                    });
    y = unflattenRows(rewriter, loc, y, x);
    rewriter.replaceOp(op, castTo(rewriter, loc, y, op.getResult().getType()));
    return success();
  }
};

/// xfmr.embedding(table, ids) -> y[..., h] = table[ids[...], h]
struct EmbeddingLowering : public OpRewritePattern<EmbeddingOp> {
  using Base::Base;

  LogicalResult matchAndRewrite(EmbeddingOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = rewriter.getContext();
    Value table = op.getTable(), ids = op.getIds();
    int64_t rank = op.getIds().getType().getRank();
    Type elem = op.getResult().getType().getElementType();
    Value scales = op.getScales();

    SmallVector<OpFoldResult> sizes = tensor::getMixedSizes(rewriter, loc, ids);
    sizes.push_back(tensor::getMixedSize(rewriter, loc, table, 1));
    Value init = tensor::EmptyOp::create(rewriter, loc, sizes, elem);
    Value vocab = dimValue(rewriter, loc, table, 0);
    AffineMap identity = AffineMap::getMultiDimIdentityMap(rank + 1, ctx);
    SmallVector<AffineMap> maps{identity.dropResult(rank), identity};
    SmallVector<utils::IteratorType> iters(rank + 1,
                                           utils::IteratorType::parallel);
    Value y =
        linalg::GenericOp::create(
            rewriter, loc, TypeRange{init.getType()}, ValueRange{ids},
            ValueRange{init}, maps, iters,
            [&](OpBuilder &b, Location l, ValueRange a) {
              // A token id outside the table fails the call (negative ids
              // count from the end, as in the Gather this was raised from).
              Value row = checkedIndex(b, l, a[0], vocab, /*isUnsigned=*/false,
                                       "xfmr.embedding: token id");
              Value col = linalg::IndexOp::create(b, l, rank);
              Value v =
                  tensor::ExtractOp::create(b, l, table, ValueRange{row, col});
              if (scales) // an i8 row times its scale
                v = arith::MulFOp::create(
                    b, l, arith::SIToFPOp::create(b, l, elem, v),
                    tensor::ExtractOp::create(b, l, scales, ValueRange{row}));
              else if (v.getType() != elem) // a bf16/f16 table read as f32
                v = arith::ExtFOp::create(b, l, elem, v);
              linalg::YieldOp::create(b, l, v);
            })
            .getResult(0);
    rewriter.replaceOp(op, castTo(rewriter, loc, y, op.getResult().getType()));
    return success();
  }
};

} // namespace

void populateMLPLoweringPatterns(RewritePatternSet &patterns, bool microKernels) {
  patterns.add<LinearLowering>(patterns.getContext(), microKernels);
  patterns.add<GatedMLPLowering, EmbeddingLowering>(patterns.getContext());
}

} // namespace xfmr::lowering
