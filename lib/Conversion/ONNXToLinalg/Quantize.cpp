//===- Quantize.cpp - QuantizeLinear, DequantizeLinear, DynamicQuantize ---===//
//
// Part of xfmr.
//
// The ops onnxruntime's quantization tools write around products:
// quantize_static's QDQ graphs (QuantizeLinear / DequantizeLinear pairs on
// activations, DequantizeLinear on int8 weights, per tensor or per output
// channel) and quantize_dynamic's (DynamicQuantizeLinear feeding
// MatMulInteger; DequantizeLinear on quantized embedding rows). Each
// becomes one elementwise linalg.generic, as onnxruntime computes it:
//
//   DequantizeLinear      y = (x - zero_point) * scale
//   QuantizeLinear        y = clamp(roundeven(x / scale) + zero_point, qmin, qmax)
//   DynamicQuantizeLinear lo = min(0, min x), hi = max(0, max x),
//                         scale = hi == lo ? 1 : (hi - lo) / 255,
//                         zero_point = roundeven(clamp(-lo / scale, 0, 255)),
//                         y = clamp(roundeven(x / scale) + zero_point, 0, 255)
//
// with scale and zero point per tensor (scalars) or per `axis` (1-D, the
// length of that dim). Blocked scales (opset 21 block_size) and float8
// outputs are reported unsupported. com.microsoft GatherBlockQuantized (a
// blockwise 2/4/8-bit embedding table) gathers and dequantizes its rows.
//
//===----------------------------------------------------------------------===//

#include "Common.h"

#include "dialects/onnx/IR/ONNXOps.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"

using namespace mlir;

namespace xfmr::lowering {
namespace {

/// `v` (a scale or zero point: rank 0, or 1-D along `axis` of a rank-`rank`
/// tensor) shaped to broadcast against it: [1, .., D, .., 1].
Value alongAxis(OpBuilder &b, Location loc, Value v, int64_t axis, int64_t rank) {
  auto type = cast<RankedTensorType>(v.getType());
  if (type.getRank() != 1 || rank <= 1)
    return v;
  SmallVector<int64_t> shape(rank, 1);
  shape[axis] = type.getDimSize(0);
  SmallVector<ReassociationIndices> groups(1);
  for (int64_t d = 0; d < rank; ++d)
    groups[0].push_back(d);
  auto expanded = RankedTensorType::get(shape, type.getElementType());
  SmallVector<OpFoldResult> sizes;
  for (int64_t d = 0; d < rank; ++d)
    sizes.push_back(d == axis ? tensor::getMixedSize(b, loc, v, 0) : b.getIndexAttr(1));
  return tensor::ExpandShapeOp::create(b, loc, expanded, v, groups, sizes);
}

/// The elementwise operands of a (De)QuantizeLinear: x, the scale and the
/// zero point (when given), the latter two shaped to broadcast against x
/// (scalars, or 1-D along `axisAttr`); failure: the reason in `why`.
FailureOr<SmallVector<Value>> operandsFor(OpBuilder &b, Location loc,
                                          int64_t axisAttr, int64_t blockSize,
                                          ValueRange operands,
                                          std::string &why) {
  if (blockSize != 0) {
    why = "blocked quantization (block_size) is not supported";
    return failure();
  }
  Value x = operands[0];
  int64_t rank = cast<RankedTensorType>(x.getType()).getRank();
  std::optional<int64_t> axis =
      normalizeAxis(axisAttr, std::max<int64_t>(rank, 1));
  SmallVector<Value> out{x};
  for (Value p : operands.drop_front().take_front(2)) {
    if (isNone(p))
      continue;
    auto t = cast<RankedTensorType>(p.getType());
    if (t.getRank() > 1 || (t.getRank() == 1 && (!axis || rank == 0))) {
      why = "scale and zero point must be scalars or 1-D along the axis";
      return failure();
    }
    out.push_back(alongAxis(b, loc, p, axis.value_or(0), rank));
  }
  return out;
}

/// The integer range of a quantized element type (original, possibly
/// unsigned).
std::optional<std::pair<double, double>> quantRange(Type t) {
  auto i = dyn_cast<IntegerType>(t);
  if (!i || i.getWidth() < 2 || i.getWidth() > 32)
    return std::nullopt;
  unsigned w = i.getWidth();
  if (i.isUnsigned())
    return std::make_pair(0.0, std::ldexp(1.0, w) - 1);
  return std::make_pair(-std::ldexp(1.0, w - 1), std::ldexp(1.0, w - 1) - 1);
}

/// clamp(roundeven(x / scale) + zp, lo, hi) in f32 (every operand f32).
Value quantizeScalar(OpBuilder &b, Location loc, Value x, Value scale, Value zp, double lo,
                     double hi) {
  Type f32 = b.getF32Type();
  Value q = math::RoundEvenOp::create(b, loc, arith::DivFOp::create(b, loc, x, scale));
  if (zp)
    q = arith::AddFOp::create(b, loc, q, zp);
  q = arith::MaximumFOp::create(b, loc, q, scalarConstant(b, loc, f32, lo));
  return arith::MinimumFOp::create(b, loc, q, scalarConstant(b, loc, f32, hi));
}

struct DequantizeLinearLowering : ONNXOpLowering<onnx::DequantizeLinearOp> {
  using ONNXOpLowering::ONNXOpLowering;
  LogicalResult lower(onnx::DequantizeLinearOp op, OpAdaptor adaptor,
                      ConversionPatternRewriter &rewriter) const override;
};

LogicalResult
DequantizeLinearLowering::lower(onnx::DequantizeLinearOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const {
  ValueRange operands = adaptor.getOperands();
  Location loc = op->getLoc();
  RankedTensorType type = resultType(op);
  Type xOrig = elementType(op->getOperand(0));
  if (!type || !isa<FloatType>(type.getElementType()) || !isa<IntegerType>(xOrig))
    return unsupported(op, "only integer inputs and float outputs are supported");
  std::string why;
  FailureOr<SmallVector<Value>> ins = operandsFor(
      rewriter, loc, op.getAxis(), op.getBlockSize(), operands, why);
  if (failed(ins))
    return unsupported(op, why);
  bool hasZp = ins->size() > 2;
  Type f32 = rewriter.getF32Type(), out = elementType(op->getResult(0));
  Type scaleOrig = elementType(op->getOperand(1));
  Type zpOrig = hasZp ? elementType(op->getOperand(2)) : Type();
  Value r = buildElementwise(rewriter, loc, type, *ins,
                             [&](OpBuilder &b, Location l, ValueRange a) -> Value {
                               Value x = castScalar(b, l, a[0], xOrig, f32);
                               if (hasZp)
                                 x = arith::SubFOp::create(b, l, x,
                                                           castScalar(b, l, a[2], zpOrig, f32));
                               Value s = castScalar(b, l, a[1], scaleOrig, f32);
                               return castScalar(b, l, arith::MulFOp::create(b, l, x, s), f32,
                                                 out);
                             });
  rewriter.replaceOp(op, r);
  return success();
}

struct QuantizeLinearLowering : ONNXOpLowering<onnx::QuantizeLinearOp> {
  using ONNXOpLowering::ONNXOpLowering;
  LogicalResult lower(onnx::QuantizeLinearOp op, OpAdaptor adaptor,
                      ConversionPatternRewriter &rewriter) const override;
};

LogicalResult
QuantizeLinearLowering::lower(onnx::QuantizeLinearOp op, OpAdaptor adaptor,
                              ConversionPatternRewriter &rewriter) const {
  ValueRange operands = adaptor.getOperands();
  Location loc = op->getLoc();
  RankedTensorType type = resultType(op);
  Type outOrig = elementType(op->getResult(0));
  Type xOrig = elementType(op->getOperand(0));
  std::optional<std::pair<double, double>> range = quantRange(outOrig);
  if (!type || !range || !isa<FloatType>(xOrig))
    return unsupported(op, "only float inputs and integer outputs are supported");
  std::string why;
  FailureOr<SmallVector<Value>> ins = operandsFor(
      rewriter, loc, op.getAxis(), op.getBlockSize(), operands, why);
  if (failed(ins))
    return unsupported(op, why);
  bool hasZp = ins->size() > 2;
  Type f32 = rewriter.getF32Type(), scaleOrig = elementType(op->getOperand(1));
  Type zpOrig = hasZp ? elementType(op->getOperand(2)) : Type();
  Value r = buildElementwise(
      rewriter, loc, type, *ins, [&](OpBuilder &b, Location l, ValueRange a) -> Value {
        Value x = castScalar(b, l, a[0], xOrig, f32);
        Value s = castScalar(b, l, a[1], scaleOrig, f32);
        Value zp = hasZp ? castScalar(b, l, a[2], zpOrig, f32) : Value();
        return castScalar(b, l, quantizeScalar(b, l, x, s, zp, range->first, range->second),
                          f32, outOrig);
      });
  rewriter.replaceOp(op, r);
  return success();
}

struct DynamicQuantizeLinearLowering
    : ONNXOpLowering<onnx::DynamicQuantizeLinearOp> {
  using ONNXOpLowering::ONNXOpLowering;
  LogicalResult lower(onnx::DynamicQuantizeLinearOp op, OpAdaptor adaptor,
                      ConversionPatternRewriter &rewriter) const override;
};

/// min (or max) of 0 and every element of `x` as a rank-0 f32 tensor.
Value extremeWithZero(OpBuilder &b, Location loc, Value x, Type xOrig, bool max) {
  auto type = cast<RankedTensorType>(x.getType());
  Type f32 = b.getF32Type();
  auto scalar = RankedTensorType::get({}, f32);
  Value init = filledTensor(b, loc, scalar, {}, scalarConstant(b, loc, f32, 0.0));
  int64_t rank = type.getRank();
  SmallVector<AffineMap> maps{b.getMultiDimIdentityMap(rank),
                              AffineMap::get(rank, 0, {}, b.getContext())};
  SmallVector<utils::IteratorType> iters(rank, utils::IteratorType::reduction);
  return linalg::GenericOp::create(
             b, loc, TypeRange{scalar}, ValueRange{x}, ValueRange{init}, maps, iters,
             [&](OpBuilder &nb, Location l, ValueRange a) {
               Value v = castScalar(nb, l, a[0], xOrig, f32);
               Value r = max ? arith::MaximumFOp::create(nb, l, a[1], v).getResult()
                             : arith::MinimumFOp::create(nb, l, a[1], v).getResult();
               linalg::YieldOp::create(nb, l, r);
             })
      .getResult(0);
}

LogicalResult DynamicQuantizeLinearLowering::lower(
    onnx::DynamicQuantizeLinearOp op, OpAdaptor adaptor,
    ConversionPatternRewriter &rewriter) const {
  ValueRange operands = adaptor.getOperands();
  Location loc = op->getLoc();
  RankedTensorType yType = resultType(op, 0), sType = resultType(op, 1),
                   zType = resultType(op, 2);
  Type xOrig = elementType(op->getOperand(0));
  if (!yType || !sType || !zType || !isa<FloatType>(xOrig) ||
      !elementType(op->getResult(0)).isUnsignedInteger(8))
    return unsupported(op, "expected a float input and uint8 outputs");
  Value x = operands[0];
  Type f32 = rewriter.getF32Type();
  Value lo = extremeWithZero(rewriter, loc, x, xOrig, /*max=*/false);
  Value hi = extremeWithZero(rewriter, loc, x, xOrig, /*max=*/true);
  auto scalar = RankedTensorType::get({}, f32);
  // The scale and the zero point (in f32), as onnxruntime derives them.
  Value scale = buildElementwise(
      rewriter, loc, sType, ValueRange{lo, hi}, [&](OpBuilder &b, Location l, ValueRange a) {
        Value same = arith::CmpFOp::create(b, l, arith::CmpFPredicate::OEQ, a[0], a[1]);
        Value range = arith::DivFOp::create(b, l, arith::SubFOp::create(b, l, a[1], a[0]),
                                            scalarConstant(b, l, f32, 255.0));
        return arith::SelectOp::create(b, l, same, scalarConstant(b, l, f32, 1.0), range)
            .getResult();
      });
  Value zpF = buildElementwise(
      rewriter, loc, scalar, ValueRange{lo, scale}, [&](OpBuilder &b, Location l, ValueRange a) {
        Value z = arith::NegFOp::create(b, l, arith::DivFOp::create(b, l, a[0], a[1]));
        z = arith::MaximumFOp::create(b, l, z, scalarConstant(b, l, f32, 0.0));
        z = arith::MinimumFOp::create(b, l, z, scalarConstant(b, l, f32, 255.0));
        return math::RoundEvenOp::create(b, l, z).getResult();
      });
  Type u8 = elementType(op->getResult(0));
  Value y = buildElementwise(rewriter, loc, yType, ValueRange{x, scale, zpF},
                             [&](OpBuilder &b, Location l, ValueRange a) -> Value {
                               Value v = castScalar(b, l, a[0], xOrig, f32);
                               return castScalar(
                                   b, l, quantizeScalar(b, l, v, a[1], a[2], 0.0, 255.0), f32,
                                   u8);
                             });
  Value zp = buildElementwise(rewriter, loc, zType, ValueRange{zpF},
                              [&](OpBuilder &b, Location l, ValueRange a) -> Value {
                                return castScalar(b, l, a[0], f32, u8);
                              });
  rewriter.replaceOp(op, ValueRange{y, scale, zp});
  return success();
}

struct GatherBlockQuantizedLowering
    : ONNXOpLowering<onnx::MsGatherBlockQuantizedOp> {
  using ONNXOpLowering::ONNXOpLowering;
  LogicalResult lower(onnx::MsGatherBlockQuantizedOp op, OpAdaptor adaptor,
                      ConversionPatternRewriter &rewriter) const override;
};

/// `byte >> (slot * bits) & (2^bits - 1)` as i32: element `slot` of a byte
/// that packs 8 / bits of them, the first in the low bits (MatMulNBits' and
/// GatherBlockQuantized's order).
Value unpackBits(OpBuilder &b, Location loc, Value byte, Value slot, int64_t bits) {
  Type i32 = b.getI32Type();
  Value v = arith::ExtUIOp::create(b, loc, i32, byte);
  if (bits == 8)
    return v;
  Value shift = arith::MulIOp::create(b, loc, arith::IndexCastOp::create(b, loc, i32, slot),
                                      scalarConstant(b, loc, i32, bits));
  v = arith::ShRUIOp::create(b, loc, v, shift);
  return arith::AndIOp::create(b, loc, v, scalarConstant(b, loc, i32, (1 << bits) - 1));
}

/// com.microsoft GatherBlockQuantized with uint8 data, as the model builder
/// of onnxruntime-genai writes a 4-bit embedding table shared with the
/// MatMulNBits lm_head: data [V, ..., C * bits / 8] packs C elements per
/// row, 8 / bits per byte, quantized in blocks of `block_size` along the
/// last axis; rows are gathered along axis 0 (onnxruntime requires both
/// axes so for uint8 data). One element per output position:
///
///   q   = data[idx, .., c / (8 / bits)] >> (c % (8 / bits)) * bits & mask
///   out = (q - zp[idx, .., c / block]) * scales[idx, .., c / block]
///
/// with zp packed like the data (default 2^(bits - 1)). Only the gathered
/// rows are read. An index out of range is a run-time error (onnxruntime
/// writes zeros), like Gather's.
LogicalResult
GatherBlockQuantizedLowering::lower(onnx::MsGatherBlockQuantizedOp op,
                                    OpAdaptor adaptor,
                                    ConversionPatternRewriter &rewriter) const {
  ValueRange operands = adaptor.getOperands();
  Location loc = op->getLoc();
  Value data = operands[0], indices = operands[1], scales = operands[2], zps = operands[3];
  auto dType = cast<RankedTensorType>(data.getType());
  int64_t r = dType.getRank(), q = cast<RankedTensorType>(indices.getType()).getRank();
  int64_t bits = op.getBits(), block = op.getBlockSize();
  if (!elementType(op.getData()).isUnsignedInteger(8))
    return unsupported(op, "only uint8 data is supported (int4/uint4/float8 data is not)");
  if (bits != 2 && bits != 4 && bits != 8)
    return unsupported(op, "bits must be 2, 4 or 8 for uint8 data");
  if (r < 2 || normalizeAxis(op.getGatherAxis(), r) != 0 ||
      normalizeAxis(op.getQuantizeAxis(), r) != r - 1)
    return unsupported(op, "uint8 data needs gather_axis 0 and quantize_axis the last axis");
  if (cast<RankedTensorType>(scales.getType()).getRank() != r ||
      (!isNone(zps) && cast<RankedTensorType>(zps.getType()).getRank() != r))
    return unsupported(op, "scales and zero_points must have the data's rank");
  int64_t perByte = 8 / bits;
  RankedTensorType type = resultType(op);
  Type outElem = elementType(op->getResult(0)),
       scaleElem = elementType(op.getScales());
  Type f32 = rewriter.getF32Type();

  // Output [indices..., data dims 1..r-2, C].
  SmallVector<OpFoldResult> sizes = mixedSizes(rewriter, loc, indices);
  for (int64_t d = 1; d < r - 1; ++d)
    sizes.push_back(tensor::getMixedSize(rewriter, loc, data, d));
  Value columns = arith::MulIOp::create(rewriter, loc, dimValue(rewriter, loc, data, r - 1),
                                        indexConstant(rewriter, loc, perByte));
  sizes.push_back(columns);
  Value rows = dimValue(rewriter, loc, data, 0);
  bool uns = isUnsignedInt(elementType(op.getIndices()));
  Value result = buildIndexed(
      rewriter, loc, type, sizes, [&](OpBuilder &b, Location l, ValueRange out) -> Value {
        Value row = checkedIndex(b, l, tensor::ExtractOp::create(b, l, indices, out.take_front(q)),
                                 rows, uns, "GatherBlockQuantized");
        SmallVector<Value> at{row};
        llvm::append_range(at, out.drop_front(q).drop_back());
        Value c = out.back();
        Value per = indexConstant(b, l, perByte);
        at.push_back(arith::DivUIOp::create(b, l, c, per));
        Value v = unpackBits(b, l, tensor::ExtractOp::create(b, l, data, at),
                             arith::RemUIOp::create(b, l, c, per), bits);
        Value blk = arith::DivUIOp::create(b, l, c, indexConstant(b, l, block));
        at.back() = blk;
        Value scale = castScalar(b, l, tensor::ExtractOp::create(b, l, scales, at), scaleElem, f32);
        Value zp = scalarConstant(b, l, b.getI32Type(), 1 << (bits - 1));
        if (!isNone(zps)) {
          at.back() = arith::DivUIOp::create(b, l, blk, per);
          zp = unpackBits(b, l, tensor::ExtractOp::create(b, l, zps, at),
                          arith::RemUIOp::create(b, l, blk, per), bits);
        }
        Value x = arith::SIToFPOp::create(b, l, f32, arith::SubIOp::create(b, l, v, zp));
        return castScalar(b, l, arith::MulFOp::create(b, l, x, scale), f32, outElem);
      });
  rewriter.replaceOp(op, result);
  return success();
}

} // namespace

void populateQuantizePatterns(RewritePatternSet &patterns, const TypeConverter &converter,
                              UnsupportedLog &log) {
  MLIRContext *ctx = patterns.getContext();
  patterns.add<DequantizeLinearLowering>(converter, ctx, log);
  patterns.add<QuantizeLinearLowering>(converter, ctx, log);
  patterns.add<DynamicQuantizeLinearLowering>(converter, ctx, log);
  patterns.add<GatherBlockQuantizedLowering>(converter, ctx, log);
}

} // namespace xfmr::lowering
