//===- Linear.cpp - MatMul, Gemm, Einsum, MatMulInteger to linalg ---------===//
//
// Part of xfmr.
//
// Every contraction becomes one linalg.generic whose loops are the batch, row,
// column and reduction dims; broadcast batch dims index with 0. 16-bit float
// contractions accumulate in f32. com.microsoft MatMulNBits unpacks its
// blockwise-quantized weights inside the product.
//
//===----------------------------------------------------------------------===//

#include "Common.h"

#include "dialects/onnx/IR/ONNXOps.h"

#include "xfmr/Conversion/QuantizedProducts.h"

#include "runtime/ukernels/QuantizedMatmul.h"

#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/DialectResourceBlobManager.h"

#include <cstring>
#include <type_traits>

using namespace mlir;

namespace xfmr::lowering {
namespace {

struct Contraction {
  SmallVector<AffineMap> maps; // operands..., result
  SmallVector<utils::IteratorType> iters;
};

/// Builds the contraction `c` over `operands` into `type`, multiplying the
/// operands (each first mapped by `pre`) and summing in `acc`.
Value buildContraction(
    OpBuilder &b, Location loc, RankedTensorType type, ValueRange operands,
    const Contraction &c, ArrayRef<OpFoldResult> sizes, Type acc,
    ArrayRef<Type> origTypes,
    std::function<Value(OpBuilder &, Location, unsigned, Value)> pre = nullptr) {
  Type elem = type.getElementType();
  auto accType = type.clone(acc);
  Value init = filledTensor(b, loc, accType, sizes, scalarConstant(b, loc, acc, 0));
  SmallVector<AffineMap> maps = c.maps;
  Value r =
      linalg::GenericOp::create(
          b, loc, TypeRange{accType}, operands, ValueRange{init}, maps, c.iters,
          [&](OpBuilder &nb, Location l, ValueRange a) {
            Value prod;
            for (unsigned i = 0; i + 1 < a.size(); ++i) {
              Value v = castScalar(nb, l, a[i], origTypes[i], acc);
              if (pre)
                v = pre(nb, l, i, v);
              prod = !prod ? v
                     : isa<FloatType>(acc)
                         ? arith::MulFOp::create(nb, l, prod, v).getResult()
                         : arith::MulIOp::create(nb, l, prod, v).getResult();
            }
            // Float sums may be reassociated (vectorized reductions).
            auto fm = arith::FastMathFlagsAttr::get(
                nb.getContext(),
                arith::FastMathFlags::reassoc | arith::FastMathFlags::contract);
            Value sum =
                isa<FloatType>(acc)
                    ? arith::AddFOp::create(nb, l, a.back(), prod, fm).getResult()
                    : arith::AddIOp::create(nb, l, a.back(), prod).getResult();
            linalg::YieldOp::create(nb, l, sum);
          })
          .getResult(0);
  if (acc == elem)
    return r;
  return buildElementwise(b, loc, type, r,
                          [&](OpBuilder &nb, Location l, ValueRange a) {
                            return castScalar(nb, l, a[0], acc, elem);
                          },
                          sizes);
}

Type accumulatorFor(Type elem) {
  if (auto f = dyn_cast<FloatType>(elem); f && f.getWidth() < 32)
    return Float32Type::get(elem.getContext());
  return elem;
}

//===----------------------------------------------------------------------===//
// MatMul / MatMulInteger (numpy matmul semantics)
//===----------------------------------------------------------------------===//

/// MatMul, and MatMulInteger with its zero points (products in i32).
template <typename OpTy> struct MatMulLowering : ONNXOpLowering<OpTy> {
  using ONNXOpLowering<OpTy>::ONNXOpLowering;
  using OpAdaptor = typename ONNXOpLowering<OpTy>::OpAdaptor;
  static constexpr bool integer = std::is_same_v<OpTy, onnx::MatMulIntegerOp>;

  LogicalResult lower(OpTy op, OpAdaptor adaptor,
                      ConversionPatternRewriter &rewriter) const override;
};

template <typename OpTy>
LogicalResult
MatMulLowering<OpTy>::lower(OpTy op, OpAdaptor adaptor,
                            ConversionPatternRewriter &rewriter) const {
  ValueRange operands = adaptor.getOperands();
  Location loc = op->getLoc();
  Value a = operands[0], bm = operands[1];
  auto aType = cast<RankedTensorType>(a.getType());
  auto bType = cast<RankedTensorType>(bm.getType());
  RankedTensorType type = this->resultType(op);
  int64_t ra = aType.getRank(), rb = bType.getRank();
  if (ra == 0 || rb == 0)
    return this->unsupported(op, "scalar operand");
  Value za, zb;
  bool perAxis[2] = {false, false}; // operand replaced by operand - zero point (i32)
  if (integer) {
    if (operands.size() > 2 && !isNone(operands[2]))
      za = operands[2];
    if (operands.size() > 3 && !isNone(operands[3]))
      zb = operands[3];
    // Per-row (A) / per-column (B) zero points: subtract them elementwise
    // first, in i32 (exact), and multiply the differences.
    for (auto [i, z] : llvm::enumerate(SmallVector<Value>{za, zb})) {
      auto zt = z ? cast<RankedTensorType>(z.getType()) : RankedTensorType();
      if (!z || (zt.hasStaticShape() && zt.getNumElements() == 1))
        continue;
      Value x = i == 0 ? a : bm;
      auto xt = cast<RankedTensorType>(x.getType());
      int64_t axis = i == 0 ? xt.getRank() - 2 : xt.getRank() - 1;
      if (zt.getRank() != 1 || axis < 0)
        return this->unsupported(
            op, "zero points must be scalars, per row of A or per column of B");
      if (i == 0) // [M] -> [M, 1]
        z = tensor::ExpandShapeOp::create(
            rewriter, loc, RankedTensorType::get({zt.getDimSize(0), 1}, zt.getElementType()), z,
            ArrayRef<ReassociationIndices>{{0, 1}},
            ArrayRef<OpFoldResult>{tensor::getMixedSize(rewriter, loc, z, 0),
                                   rewriter.getIndexAttr(1)});
      Type i32 = rewriter.getI32Type();
      Type xOrig = elementType(op->getOperand(i)), zOrig = elementType(op->getOperand(2 + i));
      Value d = buildElementwise(rewriter, loc, xt.clone(i32), ValueRange{x, z},
                                 [&](OpBuilder &b, Location l, ValueRange v) -> Value {
                                   return arith::SubIOp::create(b, l,
                                                                castScalar(b, l, v[0], xOrig, i32),
                                                                castScalar(b, l, v[1], zOrig, i32));
                                 },
                                 mixedSizes(rewriter, loc, x));
      (i == 0 ? a : bm) = d;
      (i == 0 ? za : zb) = Value();
      (i == 0 ? aType : bType) = cast<RankedTensorType>(d.getType());
      perAxis[i] = true;
    }
  }
  bool hasM = ra >= 2, hasN = rb >= 2;
  int64_t rank = type.getRank();
  int64_t nb = rank - hasM - hasN;
  int64_t loops = nb + hasM + hasN + 1;
  MLIRContext *ctx = rewriter.getContext();
  // Loop order batch, k, m, n: with B laid out [K, N] (how exporters store
  // Linear weights) the innermost loop walks B's and the result's rows
  // contiguously, so each row of B is read once per step of k and the loop
  // vectorizes without reassociating the reduction.
  int64_t kDim = nb, mDim = nb + 1, nDim = nb + 1 + hasM;
  auto batchExprs = [&](RankedTensorType t, int64_t matrixRank) {
    SmallVector<AffineExpr> e;
    int64_t tb = t.getRank() - matrixRank;
    for (int64_t j = 0; j < tb; ++j) {
      int64_t d = nb - tb + j;
      bool bc = t.getDimSize(j) == 1 && type.getDimSize(d) != 1;
      e.push_back(bc ? getAffineConstantExpr(0, ctx) : getAffineDimExpr(d, ctx));
    }
    return e;
  };
  SmallVector<AffineExpr> ae = batchExprs(aType, hasM ? 2 : 1);
  if (hasM)
    ae.push_back(getAffineDimExpr(mDim, ctx));
  ae.push_back(getAffineDimExpr(kDim, ctx));
  SmallVector<AffineExpr> be = batchExprs(bType, hasN ? 2 : 1);
  be.push_back(getAffineDimExpr(kDim, ctx));
  if (hasN)
    be.push_back(getAffineDimExpr(nDim, ctx));
  SmallVector<AffineExpr> oe;
  for (int64_t d = 0; d < nb; ++d)
    oe.push_back(getAffineDimExpr(d, ctx));
  if (hasM)
    oe.push_back(getAffineDimExpr(mDim, ctx));
  if (hasN)
    oe.push_back(getAffineDimExpr(nDim, ctx));
  Contraction c;
  c.maps = {AffineMap::get(loops, 0, ae, ctx), AffineMap::get(loops, 0, be, ctx),
            AffineMap::get(loops, 0, oe, ctx)};
  c.iters.assign(loops, utils::IteratorType::parallel);
  c.iters[kDim] = utils::IteratorType::reduction;

  // Result extents: batch dims broadcast, then M from A and N from B.
  SmallVector<OpFoldResult> sizes;
  for (int64_t d = 0; d < nb; ++d) {
    if (!type.isDynamicDim(d)) {
      sizes.push_back(rewriter.getIndexAttr(type.getDimSize(d)));
      continue;
    }
    OpFoldResult s = rewriter.getIndexAttr(1);
    for (auto [v, t, mr] : {std::tuple{a, aType, hasM ? 2 : 1},
                            std::tuple{bm, bType, hasN ? 2 : 1}}) {
      int64_t j = d - (nb - (t.getRank() - mr));
      if (j >= 0 && t.getDimSize(j) != 1)
        s = tensor::getMixedSize(rewriter, loc, v, j);
    }
    sizes.push_back(s);
  }
  if (hasM)
    sizes.push_back(tensor::getMixedSize(rewriter, loc, a, ra - 2));
  if (hasN)
    sizes.push_back(tensor::getMixedSize(rewriter, loc, bm, rb - 1));
  // A dynamic batch extent must be the result's: one that is 1 at run time
  // while the other operand's is not would need broadcasting, which the
  // affine maps above cannot express; abort rather than compute garbage.
  for (auto [v, t, mr] : {std::tuple{a, aType, hasM ? 2 : 1},
                          std::tuple{bm, bType, hasN ? 2 : 1}}) {
    for (int64_t j = 0; j < t.getRank() - mr; ++j) {
      int64_t d = nb - (t.getRank() - mr) + j;
      if (!t.isDynamicDim(j))
        continue;
      Value have = dimValue(rewriter, loc, v, j);
      Value want = getValueOrCreateConstantIndexOp(rewriter, loc, sizes[d]);
      runtimeCheck(rewriter, loc,
                   arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::eq,
                                         have, want),
                   "MatMul: dynamic batch extent would broadcast");
    }
  }
  Value ka = dimValue(rewriter, loc, a, ra - 1);
  Value kb = dimValue(rewriter, loc, bm, hasN ? rb - 2 : 0);
  if (ka != kb && !(getConstantIntValue(ka) && getConstantIntValue(kb)))
    runtimeCheck(rewriter, loc,
                 arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::eq,
                                       ka, kb),
                 "MatMul: inner dimensions differ");

  Type acc = integer ? rewriter.getI32Type() : accumulatorFor(type.getElementType());
  SmallVector<Type> origTypes{elementType(op->getOperand(0)),
                              elementType(op->getOperand(1))};
  for (int i = 0; i < 2; ++i)
    if (perAxis[i])
      origTypes[i] = rewriter.getI32Type();
  std::function<Value(OpBuilder &, Location, unsigned, Value)> pre;
  SmallVector<Value> zeroPoints(2);
  if (integer) {
    for (auto [i, z] : llvm::enumerate(SmallVector<Value>{za, zb})) {
      if (!z)
        continue;
      // The zero point as an i32 scalar.
      auto zt = cast<RankedTensorType>(z.getType());
      SmallVector<Value> idx(zt.getRank(),
                             arith::ConstantIndexOp::create(rewriter, loc, 0));
      Value s = tensor::ExtractOp::create(rewriter, loc, z, idx);
      zeroPoints[i] = castScalar(rewriter, loc, s,
                                 elementType(op->getOperand(2 + i)), acc);
    }
    pre = [&](OpBuilder &b, Location l, unsigned i, Value v) -> Value {
      return zeroPoints[i] ? arith::SubIOp::create(b, l, v, zeroPoints[i]).getResult()
                           : v;
    };
  }
  Value r = buildContraction(rewriter, loc, type, ValueRange{a, bm}, c, sizes, acc,
                             origTypes, pre);
  rewriter.replaceOp(op, r);
  return success();
}

//===----------------------------------------------------------------------===//
// Gemm
//===----------------------------------------------------------------------===//

struct GemmLowering : ONNXOpLowering<onnx::GemmOp> {
  using ONNXOpLowering::ONNXOpLowering;
  LogicalResult lower(onnx::GemmOp op, OpAdaptor adaptor,
                      ConversionPatternRewriter &rewriter) const override;
};

LogicalResult GemmLowering::lower(onnx::GemmOp op, OpAdaptor adaptor,
                                  ConversionPatternRewriter &rewriter) const {
  ValueRange operands = adaptor.getOperands();
  Location loc = op->getLoc();
  Value a = operands[0], bm = operands[1];
  RankedTensorType type = resultType(op);
  bool ta = op.getTransA(), tb = op.getTransB();
  float alpha = op.getAlpha().convertToFloat();
  float beta = op.getBeta().convertToFloat();
  MLIRContext *ctx = rewriter.getContext();
  // Loops m, k, n: the innermost walks rows of B (when not transposed) and Y.
  AffineExpr m = getAffineDimExpr(0, ctx), k = getAffineDimExpr(1, ctx),
             n = getAffineDimExpr(2, ctx);
  Contraction c;
  c.maps = {AffineMap::get(3, 0, ta ? SmallVector<AffineExpr>{k, m}
                                    : SmallVector<AffineExpr>{m, k}, ctx),
            AffineMap::get(3, 0, tb ? SmallVector<AffineExpr>{n, k}
                                    : SmallVector<AffineExpr>{k, n}, ctx),
            AffineMap::get(3, 0, {m, n}, ctx)};
  c.iters = {utils::IteratorType::parallel, utils::IteratorType::reduction,
             utils::IteratorType::parallel};
  SmallVector<OpFoldResult> sizes{tensor::getMixedSize(rewriter, loc, a, ta ? 1 : 0),
                                  tensor::getMixedSize(rewriter, loc, bm, tb ? 0 : 1)};
  Type elem = type.getElementType();
  Type acc = accumulatorFor(elem);
  SmallVector<Type> origTypes{elementType(op->getOperand(0)),
                              elementType(op->getOperand(1))};
  Value ab = buildContraction(rewriter, loc, type.clone(acc), ValueRange{a, bm}, c,
                              sizes, acc, origTypes);
  bool hasC = operands.size() > 2 && !isNone(operands[2]) && beta != 0.0f;
  SmallVector<Value> ins{ab};
  if (hasC)
    ins.push_back(operands[2]);
  Type cOrig = hasC ? elementType(op->getOperand(2)) : Type();
  Value r = buildElementwise(
      rewriter, loc, type, ins,
      [&](OpBuilder &b, Location l, ValueRange v) -> Value {
        bool fp = isa<FloatType>(acc);
        Value y = v[0];
        if (alpha != 1.0f)
          y = fp ? arith::MulFOp::create(b, l, y, scalarConstant(b, l, acc, alpha))
                       .getResult()
                 : arith::MulIOp::create(b, l, y, scalarConstant(b, l, acc, alpha))
                       .getResult();
        if (v.size() > 1) {
          Value cv = castScalar(b, l, v[1], cOrig, acc);
          if (beta != 1.0f)
            cv = fp ? arith::MulFOp::create(b, l, cv, scalarConstant(b, l, acc, beta))
                          .getResult()
                    : arith::MulIOp::create(b, l, cv, scalarConstant(b, l, acc, beta))
                          .getResult();
          y = fp ? arith::AddFOp::create(b, l, y, cv).getResult()
                 : arith::AddIOp::create(b, l, y, cv).getResult();
        }
        return castScalar(b, l, y, acc == elem ? origTypes[0] : acc, origTypes[0]);
      },
      ArrayRef<OpFoldResult>(sizes));
  rewriter.replaceOp(op, r);
  return success();
}

//===----------------------------------------------------------------------===//
// Einsum: one generic over all letters of the equation.
//===----------------------------------------------------------------------===//

struct EinsumLowering : ONNXOpLowering<onnx::EinsumOp> {
  using ONNXOpLowering::ONNXOpLowering;
  LogicalResult lower(onnx::EinsumOp op, OpAdaptor adaptor,
                      ConversionPatternRewriter &rewriter) const override;
};

LogicalResult EinsumLowering::lower(onnx::EinsumOp op, OpAdaptor adaptor,
                                    ConversionPatternRewriter &rewriter) const {
  ValueRange operands = adaptor.getOperands();
  Location loc = op->getLoc();
  std::string eq;
  for (char ch : op.getEquation())
    if (ch != ' ')
      eq.push_back(ch);
  if (eq.find("...") != std::string::npos)
    return unsupported(op, "Einsum with an ellipsis");
  size_t arrow = eq.find("->");
  if (arrow == std::string::npos)
    return unsupported(op, "Einsum without an explicit output");
  SmallVector<StringRef> terms;
  StringRef(eq).substr(0, arrow).split(terms, ',');
  StringRef out = StringRef(eq).substr(arrow + 2);
  if (terms.size() != operands.size())
    return unsupported(op, "Einsum term count differs from its inputs");
  std::string letters;
  auto note = [&](StringRef t) {
    for (char ch : t)
      if (letters.find(ch) == std::string::npos)
        letters.push_back(ch);
  };
  note(out);
  for (StringRef t : terms)
    note(t);
  MLIRContext *ctx = rewriter.getContext();
  int64_t loops = letters.size();
  Contraction c;
  SmallVector<OpFoldResult> letterSize(loops);
  for (auto [i, t] : llvm::enumerate(terms)) {
    auto vt = cast<RankedTensorType>(operands[i].getType());
    if (static_cast<int64_t>(t.size()) != vt.getRank())
      return unsupported(op, "Einsum term rank differs from its input");
    SmallVector<AffineExpr> e;
    for (auto [j, ch] : llvm::enumerate(t)) {
      if (t.count(ch) > 1)
        return unsupported(op, "Einsum with a repeated index in one term");
      int64_t l = letters.find(ch);
      e.push_back(getAffineDimExpr(l, ctx));
      if (!letterSize[l])
        letterSize[l] = tensor::getMixedSize(rewriter, loc, operands[i], j);
    }
    c.maps.push_back(AffineMap::get(loops, 0, e, ctx));
  }
  SmallVector<AffineExpr> oe;
  SmallVector<OpFoldResult> sizes;
  for (char ch : out) {
    int64_t l = letters.find(ch);
    if (!letterSize[l] || out.count(ch) > 1)
      return unsupported(op, "Einsum output index not in any input");
    oe.push_back(getAffineDimExpr(l, ctx));
    sizes.push_back(letterSize[l]);
  }
  c.maps.push_back(AffineMap::get(loops, 0, oe, ctx));
  for (int64_t l = 0; l < loops; ++l)
    c.iters.push_back(l < static_cast<int64_t>(out.size())
                          ? utils::IteratorType::parallel
                          : utils::IteratorType::reduction);
  RankedTensorType type = resultType(op);
  SmallVector<Type> origTypes;
  for (Value v : op->getOperands())
    origTypes.push_back(elementType(v));
  Value r = buildContraction(rewriter, loc, type, operands, c, sizes,
                             accumulatorFor(type.getElementType()), origTypes);
  rewriter.replaceOp(op, r);
  return success();
}

//===----------------------------------------------------------------------===//
// com.microsoft MatMulNBits (blockwise 4- or 8-bit weights)
//===----------------------------------------------------------------------===//

struct MatMulNBitsLowering : ONNXOpLowering<onnx::MsMatMulNBitsOp> {
  using ONNXOpLowering::ONNXOpLowering;
  LogicalResult lower(onnx::MsMatMulNBitsOp op, OpAdaptor adaptor,
                      ConversionPatternRewriter &rewriter) const override;
};

/// `v` [n0 * n1] (or already [n0, n1]) as [n0, n1].
Value asMatrix(OpBuilder &b, Location loc, Value v, int64_t n0, int64_t n1) {
  auto type = cast<RankedTensorType>(v.getType());
  if (type.getRank() == 2)
    return v;
  auto matrix = RankedTensorType::get({n0, n1}, type.getElementType());
  return tensor::ExpandShapeOp::create(b, loc, matrix, v,
                                       ArrayRef<ReassociationIndices>{{0, 1}});
}

/// A constant [rows, cols] of `element` (given as `bytes`, row-major)
/// transposed to [cols, rows] and shaped `shape` (whose product is the same).
Value transposedConstant(OpBuilder &b, Location loc, ArrayRef<char> bytes, int64_t rows,
                         int64_t cols, Type element, ArrayRef<int64_t> shape) {
  size_t size = (element.getIntOrFloatBitWidth() + 7) / 8;
  std::vector<char> out(bytes.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      std::memcpy(&out[(c * rows + r) * size], &bytes[(r * cols + c) * size], size);
  return constantTensor(b, loc, out, shape, element, "xfmr_nbits_weights");
}

/// One MatMulNBits' quantization, and the scalar dequantization both loop
/// nests share: W[n, k] = (q - zp) * scale with q the `bits`-bit field
/// k % (8 / bits) (low bits first) of its byte.
struct NBits {
  NBits(int64_t k, int64_t n, int64_t bits, int64_t bs, Value a, Value packed, Value scales,
        Value zeros, Type zeroOrig)
      : k(k), n(n), bits(bits), bs(bs), blocks((k + bs - 1) / bs), perByte(8 / bits),
        blob(bs / perByte), a(a), packed(packed), scales(scales), zeros(zeros),
        zeroOrig(zeroOrig), packedZeros(zeros && isa<IntegerType>(zeroType())),
        zeroCols(packedZeros ? (blocks * bits + 7) / 8 : blocks) {}

  int64_t k, n, bits, bs, blocks, perByte, blob;
  Value a, packed, scales, zeros; // zeros: null when absent
  Type zeroOrig;                  // the zero points' original element type
  bool packedZeros;               // uint8, two 4-bit points per byte
  int64_t zeroCols;               // zero points per row of N

  Type scaleType() const { return cast<ShapedType>(scales.getType()).getElementType(); }
  Type zeroType() const { return cast<ShapedType>(zeros.getType()).getElementType(); }

  /// Field `shift / bits` of `wide` (a byte zero-extended to i32; null
  /// shift: field 0).
  Value field(OpBuilder &b, Location loc, Value wide, Value shift) const {
    if (perByte == 1)
      return wide;
    Value v = shift ? arith::ShRUIOp::create(b, loc, wide, shift).getResult() : wide;
    return arith::AndIOp::create(b, loc, v,
                                 arith::ConstantIntOp::create(b, loc, b.getI32Type(),
                                                              (1 << bits) - 1));
  }
  /// The i32 shift of field `index % perByte`.
  Value shiftOf(OpBuilder &b, Location loc, Value index) const {
    Value sub = arith::RemUIOp::create(b, loc, index,
                                       arith::ConstantIndexOp::create(b, loc, perByte));
    return arith::MulIOp::create(b, loc, arith::IndexCastOp::create(b, loc, b.getI32Type(), sub),
                                 arith::ConstantIntOp::create(b, loc, b.getI32Type(), bits));
  }
  /// The f32 zero point of block `block` from its element `z` (absent:
  /// 2^(bits - 1)).
  Value zeroPoint(OpBuilder &b, Location loc, Value z, Value block) const {
    Type f32 = b.getF32Type();
    if (!zeros)
      return arith::ConstantFloatOp::create(b, loc, cast<FloatType>(f32),
                                            APFloat(static_cast<float>(1 << (bits - 1))));
    if (!packedZeros)
      return castScalar(b, loc, z, zeroOrig, f32);
    Value wide = arith::ExtUIOp::create(b, loc, b.getI32Type(), z);
    return arith::UIToFPOp::create(b, loc, f32, field(b, loc, wide, shiftOf(b, loc, block)));
  }
  /// sum + x * (q - zp) * scale, q an i32 field.
  Value accumulate(OpBuilder &b, Location loc, Value sum, Value x, Value q, Value zp,
                   Value scale) const {
    Type f32 = b.getF32Type();
    auto fm = arith::FastMathFlagsAttr::get(
        b.getContext(), arith::FastMathFlags::reassoc | arith::FastMathFlags::contract);
    Value w = arith::MulFOp::create(
        b, loc, arith::SubFOp::create(b, loc, arith::UIToFPOp::create(b, loc, f32, q), zp), scale);
    x = castScalar(b, loc, x, cast<ShapedType>(a.getType()).getElementType(), f32);
    return arith::AddFOp::create(b, loc, sum, arith::MulFOp::create(b, loc, x, w, fm), fm);
  }
};

/// The quantized product with the weights repacked at compile time column
/// by column ([blocks, block_size * bits / 8, N] bytes, scales and zero
/// points [*, N]) and loops (batch..., block, byte, n): n innermost, so
/// every operand is read contiguously and the n loop vectorizes like the
/// f32 product's; a 4-bit byte's two fields are both used in one iteration
/// (A read at field 0 and field 1), so each weight byte is loaded and
/// widened once. Needs constant weights, scales and zero points and K a
/// whole number of blocks; returns null (having created nothing) otherwise.
Value columnMajorNBits(OpBuilder &b, Location loc, const NBits &q, RankedTensorType accType,
                       ArrayRef<OpFoldResult> sizes) {
  if (q.k % q.bs)
    return nullptr;
  std::optional<ArrayRef<char>> bBytes = constantBytes(q.packed);
  std::optional<ArrayRef<char>> sBytes = constantBytes(q.scales);
  std::optional<ArrayRef<char>> zBytes = q.zeros ? constantBytes(q.zeros) : std::nullopt;
  if (!bBytes || !sBytes || (q.zeros && !zBytes))
    return nullptr;
  MLIRContext *ctx = b.getContext();
  Value bT = transposedConstant(b, loc, *bBytes, q.n, q.blocks * q.blob, IntegerType::get(ctx, 8),
                                {q.blocks, q.blob, q.n});
  Value sT = transposedConstant(b, loc, *sBytes, q.n, q.blocks, q.scaleType(), {q.blocks, q.n});
  Value zT = q.zeros ? transposedConstant(b, loc, *zBytes, q.n, q.zeroCols, q.zeroType(),
                                          {q.zeroCols, q.n})
                     : Value();
  // A [..., K] -> [..., blocks, blob(, fields)].
  auto aType = cast<RankedTensorType>(q.a.getType());
  int64_t batch = aType.getRank() - 1;
  SmallVector<int64_t> aShape(aType.getShape().drop_back());
  SmallVector<OpFoldResult> aSizes(sizes.drop_back());
  SmallVector<ReassociationIndices> reassoc(batch);
  for (int64_t d = 0; d < batch; ++d)
    reassoc[d] = {d};
  reassoc.emplace_back();
  for (int64_t e : q.perByte > 1 ? SmallVector<int64_t>{q.blocks, q.blob, q.perByte}
                                 : SmallVector<int64_t>{q.blocks, q.blob}) {
    reassoc.back().push_back(aShape.size());
    aShape.push_back(e);
    aSizes.push_back(b.getIndexAttr(e));
  }
  Value aBlocks =
      tensor::ExpandShapeOp::create(b, loc, aType.clone(aShape), q.a, reassoc, aSizes);

  int64_t blkDim = batch, byteDim = batch + 1, nDim = batch + 2, loops = nDim + 1;
  auto dim = [&](int64_t d) { return getAffineDimExpr(d, ctx); };
  auto map = [&](ArrayRef<AffineExpr> e) { return AffineMap::get(loops, 0, e, ctx); };
  SmallVector<AffineExpr> batchDims;
  for (int64_t d = 0; d < batch; ++d)
    batchDims.push_back(dim(d));
  SmallVector<Value> ins;
  SmallVector<AffineMap> maps;
  for (int64_t f = 0; f < q.perByte; ++f) {
    SmallVector<AffineExpr> ae(batchDims);
    ae.append({dim(blkDim), dim(byteDim)});
    if (q.perByte > 1)
      ae.push_back(getAffineConstantExpr(f, ctx));
    ins.push_back(aBlocks);
    maps.push_back(map(ae));
  }
  ins.append({bT, sT});
  maps.append({map({dim(blkDim), dim(byteDim), dim(nDim)}), map({dim(blkDim), dim(nDim)})});
  if (zT) {
    ins.push_back(zT);
    maps.push_back(map({q.packedZeros ? dim(blkDim).floorDiv(q.perByte) : dim(blkDim), dim(nDim)}));
  }
  SmallVector<AffineExpr> oe(batchDims);
  oe.push_back(dim(nDim));
  maps.push_back(map(oe));
  SmallVector<utils::IteratorType> iters(loops, utils::IteratorType::reduction);
  for (int64_t d = 0; d < batch; ++d)
    iters[d] = utils::IteratorType::parallel;
  iters[nDim] = utils::IteratorType::parallel;
  Type acc = accType.getElementType(), i32 = b.getI32Type();
  Value init = filledTensor(b, loc, accType, sizes, scalarConstant(b, loc, acc, 0));
  int64_t bArg = q.perByte;
  return linalg::GenericOp::create(
             b, loc, TypeRange{accType}, ins, ValueRange{init}, maps, iters,
             [&](OpBuilder &nb, Location l, ValueRange args) {
               Value wide = arith::ExtUIOp::create(nb, l, i32, args[bArg]);
               Value scale = castScalar(nb, l, args[bArg + 1], q.scaleType(), acc);
               Value zp = q.zeroPoint(nb, l, zT ? args[bArg + 2] : Value(),
                                      zT ? linalg::IndexOp::create(nb, l, blkDim) : Value());
               Value sum = args.back();
               for (int64_t f = 0; f < q.perByte; ++f) {
                 Value shift = f ? arith::ConstantIntOp::create(nb, l, i32, f * q.bits).getResult()
                                 : Value();
                 sum = q.accumulate(nb, l, sum, args[f], q.field(nb, l, wide, shift), zp, scale);
               }
               linalg::YieldOp::create(nb, l, sum);
             })
      .getResult(0);
}

/// The quantized product on the weights as stored (any constness, partial
/// last blocks): loops (batch..., n, k).
Value rowMajorNBits(OpBuilder &b, Location loc, const NBits &q, RankedTensorType accType,
                    ArrayRef<OpFoldResult> sizes) {
  MLIRContext *ctx = b.getContext();
  Value packed = q.packed;
  auto pType = cast<RankedTensorType>(packed.getType());
  if (pType.getRank() == 2) // [N, blocks * blob]
    packed = tensor::ExpandShapeOp::create(
        b, loc, RankedTensorType::get({q.n, q.blocks, q.blob}, pType.getElementType()), packed,
        ArrayRef<ReassociationIndices>{{0}, {1, 2}});
  int64_t rank = accType.getRank(); // loops: batch..., n, k
  int64_t kDim = rank;
  AffineExpr nE = getAffineDimExpr(rank - 1, ctx), kE = getAffineDimExpr(kDim, ctx);
  AffineExpr blockE = kE.floorDiv(q.bs);
  SmallVector<AffineExpr> ae, oe;
  for (int64_t d = 0; d + 1 < rank; ++d) {
    ae.push_back(getAffineDimExpr(d, ctx));
    oe.push_back(getAffineDimExpr(d, ctx));
  }
  ae.push_back(kE);
  oe.push_back(nE);
  SmallVector<Value> ins{q.a, packed, asMatrix(b, loc, q.scales, q.n, q.blocks)};
  SmallVector<AffineMap> maps{
      AffineMap::get(rank + 1, 0, ae, ctx),
      AffineMap::get(rank + 1, 0, {nE, blockE, (kE % q.bs).floorDiv(q.perByte)}, ctx),
      AffineMap::get(rank + 1, 0, {nE, blockE}, ctx)};
  if (q.zeros) {
    ins.push_back(asMatrix(b, loc, q.zeros, q.n, q.zeroCols));
    maps.push_back(AffineMap::get(
        rank + 1, 0, {nE, q.packedZeros ? blockE.floorDiv(q.perByte) : blockE}, ctx));
  }
  maps.push_back(AffineMap::get(rank + 1, 0, oe, ctx));
  SmallVector<utils::IteratorType> iters(rank, utils::IteratorType::parallel);
  iters.push_back(utils::IteratorType::reduction);
  Type acc = accType.getElementType();
  Value init = filledTensor(b, loc, accType, sizes, scalarConstant(b, loc, acc, 0));
  return linalg::GenericOp::create(
             b, loc, TypeRange{accType}, ins, ValueRange{init}, maps, iters,
             [&](OpBuilder &nb, Location l, ValueRange args) {
               Value kIdx = linalg::IndexOp::create(nb, l, kDim);
               Value block = arith::DivUIOp::create(nb, l, kIdx,
                                                    arith::ConstantIndexOp::create(nb, l, q.bs));
               Value wide = arith::ExtUIOp::create(nb, l, nb.getI32Type(), args[1]);
               Value field = q.field(nb, l, wide, q.perByte > 1 ? q.shiftOf(nb, l, kIdx) : Value());
               Value zp = q.zeroPoint(nb, l, q.zeros ? args[3] : Value(), block);
               Value scale = castScalar(nb, l, args[2], q.scaleType(), acc);
               linalg::YieldOp::create(
                   nb, l, q.accumulate(nb, l, args.back(), args[0], field, zp, scale));
             })
      .getResult(0);
}

//===----------------------------------------------------------------------===//
// accuracy_level 4: int8 activations, the micro-kernel (runtime/ukernels)
//===----------------------------------------------------------------------===//

/// The scales [N, blocks] as f32 bytes (f16 and bf16 widened exactly).
std::optional<std::vector<char>> scalesAsF32(ArrayRef<char> bytes, Type type, int64_t count) {
  std::vector<char> out(count * sizeof(float));
  for (int64_t i = 0; i < count; ++i) {
    float v;
    if (type.isF32()) {
      std::memcpy(&v, &bytes[i * 4], 4);
    } else if (type.isF16() || type.isBF16()) {
      uint16_t raw;
      std::memcpy(&raw, &bytes[i * 2], 2);
      APFloat f(type.isF16() ? APFloat::IEEEhalf() : APFloat::BFloat(), APInt(16, raw));
      bool lost;
      f.convert(APFloat::IEEEsingle(), APFloat::rmNearestTiesToEven, &lost);
      v = f.convertToFloat();
    } else {
      return std::nullopt;
    }
    std::memcpy(&out[i * sizeof(float)], &v, sizeof(float));
  }
  return out;
}

/// 4-bit weights in xfmr_uk_pack_q4's layout: block_size a multiple of 32
/// (K need not be a whole number of blocks: MatMulNBits' padded last block
/// is packed as it is and meets zeros in A's quantized rows), zero points (if any; `zBytes` empty: none) 4-bit packed or
/// one f32 per block (xfmr-quantize-weights' float offsets), given to the
/// kernel as f32.
std::optional<KernelWeights> packQ4(const NBits &q, ArrayRef<char> bBytes, ArrayRef<char> scales,
                                    ArrayRef<char> zBytes) {
  if (q.bs % 32 || (q.zeros && !q.packedZeros && !q.zeroType().isF32()))
    return std::nullopt;
  std::vector<float> zeros;
  if (!zBytes.empty()) {
    zeros.resize(q.n * q.blocks);
    if (!q.packedZeros) // f32 [N, blocks]
      std::memcpy(zeros.data(), zBytes.data(), zeros.size() * sizeof(float));
    else // two 4-bit points per byte, low first
      for (int64_t n = 0; n < q.n; ++n)
        for (int64_t blk = 0; blk < q.blocks; ++blk) {
          auto byte = static_cast<uint8_t>(zBytes[n * q.zeroCols + blk / 2]);
          zeros[n * q.blocks + blk] = static_cast<float>((byte >> (4 * (blk % 2))) & 0xF);
        }
  }
  int64_t groups = (q.n + XFMR_UK_Q4_COLUMNS - 1) / XFMR_UK_Q4_COLUMNS;
  int64_t perGroup = groups * XFMR_UK_Q4_COLUMNS * q.blocks;
  int64_t kp = q.blocks * q.bs; // K rounded up to whole blocks
  KernelWeights kw{kMatmulQ4Q8, q.bs, std::vector<char>(xfmr_uk_packed_q4_bytes(q.n, kp)),
                   std::vector<char>(perGroup * sizeof(float)),
                   std::vector<char>(zBytes.empty() ? 0 : perGroup * sizeof(float))};
  xfmr_uk_pack_q4(reinterpret_cast<const uint8_t *>(bBytes.data()),
                  reinterpret_cast<const float *>(scales.data()),
                  zeros.empty() ? nullptr : zeros.data(), q.n, kp, q.bs,
                  reinterpret_cast<uint8_t *>(kw.w.data()), reinterpret_cast<float *>(kw.sw.data()),
                  kw.zw.empty() ? nullptr : reinterpret_cast<float *>(kw.zw.data()));
  return kw;
}

/// 8-bit weights in xfmr_uk_pack_q8's layout: K a whole number of blocks or
/// one block of block_size > K (what xfmr-quantize-weights writes for
/// int8), zero points (if any; `zBytes` empty: none) one uint8 per block.
std::optional<KernelWeights> packQ8(const NBits &q, ArrayRef<char> bBytes, ArrayRef<char> scales,
                                    ArrayRef<char> zBytes) {
  int64_t blk = std::min(q.bs, q.k);
  if (q.k % blk || (q.zeros && !q.packedZeros))
    return std::nullopt;
  return packQ8Weights(bBytes, q.blocks * q.blob, scales, zBytes, q.n, q.k, blk);
}

/// The quantized product as onnxruntime computes it at accuracy_level 4
/// (int8ActivationProduct, include/xfmr/Conversion/QuantizedProducts.h) on
/// the weights packed by packQ4 or packQ8. Needs f32 A, constant weights,
/// scales and zero points and what the packing needs; returns null (having
/// created nothing) otherwise.
Value int8ActivationNBits(OpBuilder &b, Location loc, Operation *op, const NBits &q,
                          RankedTensorType accType, ArrayRef<OpFoldResult> sizes) {
  auto aType = cast<RankedTensorType>(q.a.getType());
  if (aType.getRank() < 2 || !aType.getElementType().isF32())
    return nullptr;
  std::optional<ArrayRef<char>> bBytes = constantBytes(q.packed);
  std::optional<ArrayRef<char>> sBytes = constantBytes(q.scales);
  std::optional<ArrayRef<char>> zBytes = q.zeros ? constantBytes(q.zeros) : std::nullopt;
  if (!bBytes || !sBytes || (q.zeros && !zBytes))
    return nullptr;
  std::optional<std::vector<char>> scales = scalesAsF32(*sBytes, q.scaleType(), q.n * q.blocks);
  if (!scales)
    return nullptr;
  ArrayRef<char> zeros = zBytes.value_or(ArrayRef<char>());
  std::optional<KernelWeights> kw =
      q.bits == 4 ? packQ4(q, *bBytes, *scales, zeros) : packQ8(q, *bBytes, *scales, zeros);
  if (!kw)
    return nullptr;
  return int8ActivationProduct(b, loc, op, q.a, *kw, q.k, q.n, accType, sizes,
                               q.bits == 4 ? "xfmr_q4" : "xfmr_q8");
}

/// Y[..., n] = sum_k A[..., k] * W[n, k] (+ bias[n]) with
///   W[n, k] = (q(n, k) - zp(n, k / bs)) * scale(n, k / bs),
/// q(n, k) the `bits`-bit field k % (8 / bits) (low bits first) of byte
/// B[n, k / bs, (k % bs) / (8 / bits)], zp 2^(bits - 1) when absent; as
/// onnxruntime dequantizes (q - zp is exact in f32, so the order of the
/// subtraction and the conversion does not matter). The weights are
/// unpacked inside the product: no f32 copy of W is materialized.
LogicalResult
MatMulNBitsLowering::lower(onnx::MsMatMulNBitsOp op, OpAdaptor adaptor,
                           ConversionPatternRewriter &rewriter) const {
  ValueRange operands = adaptor.getOperands();
  Location loc = op->getLoc();
  Value a = operands[0], packed = operands[1], scales = operands[2];
  Value zeros = operands.size() > 3 && !isNone(operands[3]) ? operands[3] : Value();
  Value bias = operands.size() > 5 && !isNone(operands[5]) ? operands[5] : Value();
  if (operands.size() > 4 && !isNone(operands[4]))
    return unsupported(op, "g_idx (act-order) that xfmr-raise could not sort into blocks "
                           "(--report says why)");
  int64_t k = op.getK(), n = op.getN();
  int64_t bits = op.getBits(), bs = op.getBlockSize();
  // A's last dim may only be known at run time (after a Reshape with -1):
  // check it is K, then give it the static type.
  if (auto t = dyn_cast<RankedTensorType>(a.getType());
      t && t.getRank() >= 1 && t.isDynamicDim(t.getRank() - 1) && k > 0) {
    Value have = dimValue(rewriter, loc, a, t.getRank() - 1);
    runtimeCheck(rewriter, loc,
                 arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::eq, have,
                                       arith::ConstantIndexOp::create(rewriter, loc, k)),
                 "MatMulNBits: A's last dim is not K");
    SmallVector<int64_t> shape(t.getShape());
    shape.back() = k;
    a = tensor::CastOp::create(rewriter, loc, t.clone(shape), a);
  }
  if (bits != 4 && bits != 8)
    return unsupported(op, "only 4- and 8-bit weights are supported");
  if (k <= 0 || n <= 0 || bs < 16 || (bs & (bs - 1)))
    return unsupported(op, "K, N or block_size is invalid (block_size: a power of 2 >= 16)");
  NBits q(k, n, bits, bs, a, packed, scales, zeros,
          zeros ? elementType(op->getOperand(3)) : Type());
  auto aType = cast<RankedTensorType>(a.getType());
  auto pType = cast<RankedTensorType>(packed.getType());
  auto sType = cast<RankedTensorType>(scales.getType());
  RankedTensorType type = resultType(op);
  if (!type || aType.getRank() < 1 || aType.getDimSize(aType.getRank() - 1) != k)
    return unsupported(op, "A's last dim is not K");
  if (pType.getShape() != ArrayRef<int64_t>{n, q.blocks * q.blob} &&
      pType.getShape() != ArrayRef<int64_t>{n, q.blocks, q.blob})
    return unsupported(op, "B is not [N, ceil(K / block_size), block_size * bits / 8]");
  if (sType.getNumElements() != n * q.blocks || !sType.hasStaticShape())
    return unsupported(op, "scales are not N * ceil(K / block_size) values");
  if (zeros) {
    auto zType = cast<RankedTensorType>(zeros.getType());
    if (!zType.hasStaticShape() || zType.getNumElements() != n * q.zeroCols)
      return unsupported(op, "zero_points do not match N and the block count");
  }
  if (bias && cast<RankedTensorType>(bias.getType()).getNumElements() != n)
    return unsupported(op, "bias is not [N]");

  SmallVector<OpFoldResult> sizes = mixedSizes(rewriter, loc, a);
  sizes.back() = rewriter.getIndexAttr(n);
  auto accType = type.clone(Float32Type::get(rewriter.getContext()));
  Value product;
  if (op.getAccuracyLevel() == 4)
    product = int8ActivationNBits(rewriter, loc, op, q, accType, sizes);
  if (!product)
    product = columnMajorNBits(rewriter, loc, q, accType, sizes);
  if (!product)
    product = rowMajorNBits(rewriter, loc, q, accType, sizes);
  SmallVector<Value> tail{product};
  if (bias)
    tail.push_back(bias);
  Type acc = accType.getElementType(), elem = type.getElementType();
  Type biasType = bias ? elementType(op->getOperand(5)) : Type();
  Value result = buildElementwise(
      rewriter, loc, type, tail,
      [&](OpBuilder &nb, Location l, ValueRange v) {
        Value y = v[0];
        if (v.size() > 1)
          y = arith::AddFOp::create(nb, l, y, castScalar(nb, l, v[1], biasType, acc));
        return castScalar(nb, l, y, acc, elem);
      },
      sizes);
  rewriter.replaceOp(op, result);
  return success();
}

} // namespace

void populateLinearPatterns(RewritePatternSet &patterns,
                            const TypeConverter &converter, UnsupportedLog &log) {
  MLIRContext *ctx = patterns.getContext();
  patterns.add<MatMulLowering<onnx::MatMulOp>,
               MatMulLowering<onnx::MatMulIntegerOp>>(converter, ctx, log);
  patterns.add<GemmLowering>(converter, ctx, log);
  patterns.add<EinsumLowering>(converter, ctx, log);
  patterns.add<MatMulNBitsLowering>(converter, ctx, log);
}

} // namespace xfmr::lowering
