//===- Common.h - shared helpers of the onnx to linalg lowering -*- C++ -*-===//
//
// Part of xfmr.
//
// The typed pattern base, constant operands, signedness-aware
// scalar casts, broadcasting elementwise generics and the record of why an op
// could not be lowered.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_LIB_CONVERSION_ONNXTOLINALG_COMMON_H
#define XFMR_LIB_CONVERSION_ONNXTOLINALG_COMMON_H

#include "xfmr/Conversion/LoweringUtils.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/DialectConversion.h"
#include "llvm/ADT/DenseMap.h"

#include <functional>
#include <optional>
#include <string>

namespace xfmr::lowering {

using mlir::Location;
using mlir::OpBuilder;
using mlir::OpFoldResult;
using mlir::Operation;
using mlir::RankedTensorType;
using mlir::Type;
using mlir::Value;
using mlir::ValueRange;

/// Why ops were left unconverted; the pass reports the first one.
struct UnsupportedLog {
  llvm::DenseMap<Operation *, std::string> reasons;
};

/// Converts ONNX's unsigned integers to signless ones (tensors too).
class ONNXTypeConverter : public mlir::TypeConverter {
public:
  explicit ONNXTypeConverter(mlir::MLIRContext *ctx);
};

/// Records why `op` could not be lowered (the first reason wins); returns
/// failure() so that a pattern can `return recordUnsupported(...)`.
mlir::LogicalResult recordUnsupported(UnsupportedLog &log, Operation *op,
                                      const llvm::Twine &why);

/// Checks the operand and result types every lowering handles: ranked
/// tensors of i1/i8/i16/i32/i64, f16, bf16, f32 or f64, and none; float8
/// e4m3fn only when `allowFloat8` (constants: xfmr-quantize-weights' fp8
/// weights, which only the product's micro-kernel reads).
mlir::LogicalResult checkSupportedTypes(Operation *op, UnsupportedLog &log,
                                        bool allowFloat8);

/// Base of every lowering pattern: a typed pattern for onnx op `OpTy` that
/// first checks the element types (checkSupportedTypes) and then calls
/// lower(), which returns failure() only through unsupported(), before
/// creating any op.
template <typename OpTy>
class ONNXOpLowering : public mlir::OpConversionPattern<OpTy> {
public:
  using OpAdaptor = typename mlir::OpConversionPattern<OpTy>::OpAdaptor;

  ONNXOpLowering(const mlir::TypeConverter &converter, mlir::MLIRContext *ctx,
                 UnsupportedLog &log)
      : mlir::OpConversionPattern<OpTy>(converter, ctx), log(log) {}

  mlir::LogicalResult
  matchAndRewrite(OpTy op, OpAdaptor adaptor,
                  mlir::ConversionPatternRewriter &rewriter) const final {
    if (mlir::failed(checkSupportedTypes(op, log, allowsFloat8())))
      return mlir::failure();
    return lower(op, adaptor, rewriter);
  }

protected:
  virtual mlir::LogicalResult
  lower(OpTy op, OpAdaptor adaptor,
        mlir::ConversionPatternRewriter &rewriter) const = 0;

  /// Whether float8 e4m3fn operands and results are accepted.
  virtual bool allowsFloat8() const { return false; }

  mlir::LogicalResult unsupported(Operation *op, const llvm::Twine &why) const {
    return recordUnsupported(log, op, why);
  }

  /// The converted (signless) result type `i` of `op`; null if unranked.
  RankedTensorType resultType(Operation *op, unsigned i = 0) const {
    return mlir::dyn_cast_or_null<RankedTensorType>(
        this->getTypeConverter()->convertType(op->getResult(i).getType()));
  }

  UnsupportedLog &log;
};

//===----------------------------------------------------------------------===//
// Attributes and constant operands
//===----------------------------------------------------------------------===//

/// An integer-list attribute by name. Only for attributes of earlier opsets
/// that the generated op (the latest schema) has no accessor for, such as
/// the `axes` of Squeeze before opset 13; read the others through the
/// generated accessors.
std::optional<llvm::SmallVector<int64_t>> intsAttr(Operation *op,
                                                   llvm::StringRef name);

/// The opset version of the default domain in the module around `op`.
int64_t defaultOpset(Operation *op);

/// Integer contents of a constant operand: an onnx.Constant or
/// arith.constant (`converted` is the adaptor's value, `original` the op's).
std::optional<llvm::SmallVector<int64_t>> constantInts(Value converted,
                                                       Value original);
bool isNone(Value v);

/// Normalizes `axis` into [0, rank); nullopt if out of range.
std::optional<int64_t> normalizeAxis(int64_t axis, int64_t rank);

//===----------------------------------------------------------------------===//
// Types and scalars
//===----------------------------------------------------------------------===//

Type elementType(Value v);
std::string typeName(Type t);
/// True for ONNX's uint8..uint64 (the original, unconverted type).
bool isUnsignedInt(Type originalElement);
bool isFloat(Type t);

/// A scalar constant of `type` (float or integer) with value `v`.
Value scalarConstant(OpBuilder &b, Location loc, Type type, double v);
/// The smallest / largest value of `type` (-inf / +inf for floats).
Value lowestValue(OpBuilder &b, Location loc, Type type, bool isUnsigned);
Value highestValue(OpBuilder &b, Location loc, Type type, bool isUnsigned);

/// Converts scalar `v` from `srcOrig` to `dstOrig` element type (original,
/// possibly unsigned types) with ONNX Cast semantics.
Value castScalar(OpBuilder &b, Location loc, Value v, Type srcOrig,
                 Type dstOrig);

/// Scalar `v` as index (sign- or zero-extending per `isUnsigned`).
Value toIndex(OpBuilder &b, Location loc, Value v, bool isUnsigned = false);


//===----------------------------------------------------------------------===//
// Tensors
//===----------------------------------------------------------------------===//

llvm::SmallVector<OpFoldResult> mixedSizes(OpBuilder &b, Location loc,
                                           Value tensor);
Value emptyTensor(OpBuilder &b, Location loc, RankedTensorType type,
                  llvm::ArrayRef<OpFoldResult> sizes);
/// The dynamic extents among `sizes` for a tensor of `type`.
llvm::SmallVector<Value> dynamicSizes(OpBuilder &b, Location loc,
                                      RankedTensorType type,
                                      llvm::ArrayRef<OpFoldResult> sizes);
Value filledTensor(OpBuilder &b, Location loc, RankedTensorType type,
                   llvm::ArrayRef<OpFoldResult> sizes, Value scalar);

/// The extents of a broadcast result of `type` from `operands` (ranked, ONNX
/// multidirectional broadcasting; a dynamic dim without a static partner is
/// taken from the first operand that has it).
llvm::SmallVector<OpFoldResult>
broadcastSizes(OpBuilder &b, Location loc, RankedTensorType type,
               ValueRange operands);

using ScalarBody =
    std::function<Value(OpBuilder &, Location, ValueRange /*scalars*/)>;

/// A linalg.generic computing `body` elementwise over `operands` broadcast to
/// `type` (sizes from broadcastSizes unless given).
Value buildElementwise(OpBuilder &b, Location loc, RankedTensorType type,
                       ValueRange operands, const ScalarBody &body,
                       std::optional<llvm::ArrayRef<OpFoldResult>> sizes = {});

/// Calls `body(b, loc, outputIndices)` inside a linalg.generic over `type`
/// producing one element per output position (gathers, index-dependent ops).
using IndexBody = std::function<Value(OpBuilder &, Location, ValueRange)>;
Value buildIndexed(OpBuilder &b, Location loc, RankedTensorType type,
                   llvm::ArrayRef<OpFoldResult> sizes, const IndexBody &body);

/// Reshapes `x` to `type` with extents `sizes` (tensor.reshape: a view of
/// contiguous data after bufferization).
Value reshapeTo(OpBuilder &b, Location loc, Value x, RankedTensorType type,
                llvm::ArrayRef<Value> sizes);

/// Patterns, by family.
using Populate = void (*)(mlir::RewritePatternSet &, const mlir::TypeConverter &,
                          UnsupportedLog &);
void populateElementwisePatterns(mlir::RewritePatternSet &,
                                 const mlir::TypeConverter &, UnsupportedLog &);
void populateReductionPatterns(mlir::RewritePatternSet &,
                               const mlir::TypeConverter &, UnsupportedLog &);
void populateQuantizePatterns(mlir::RewritePatternSet &, const mlir::TypeConverter &,
                              UnsupportedLog &);
void populateLinearPatterns(mlir::RewritePatternSet &,
                            const mlir::TypeConverter &, UnsupportedLog &);
void populateShapePatterns(mlir::RewritePatternSet &,
                           const mlir::TypeConverter &, UnsupportedLog &);
void populateScatterPatterns(mlir::RewritePatternSet &,
                             const mlir::TypeConverter &, UnsupportedLog &);
void populateIndexingPatterns(mlir::RewritePatternSet &,
                              const mlir::TypeConverter &, UnsupportedLog &);

} // namespace xfmr::lowering

#endif // XFMR_LIB_CONVERSION_ONNXTOLINALG_COMMON_H
