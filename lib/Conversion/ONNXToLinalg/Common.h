//===- Common.h - shared helpers of the onnx to linalg lowering -*- C++ -*-===//
//
// Part of xfmr.
//
// Attribute access with ONNX defaults, constant operands, signedness-aware
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

/// Base of every lowering pattern: matches any op of the onnx dialect whose
/// name (without the dialect prefix) is in `names`.
class ONNXLoweringPattern : public mlir::ConversionPattern {
public:
  ONNXLoweringPattern(const mlir::TypeConverter &converter,
                      mlir::MLIRContext *ctx, UnsupportedLog &log,
                      llvm::ArrayRef<llvm::StringRef> names);

  mlir::LogicalResult
  matchAndRewrite(Operation *op, llvm::ArrayRef<Value> operands,
                  mlir::ConversionPatternRewriter &rewriter) const final;

protected:
  /// Lowers `op` (named `name`); returns failure() only through
  /// unsupported(), before creating any op.
  virtual mlir::LogicalResult
  lower(Operation *op, llvm::StringRef name, llvm::ArrayRef<Value> operands,
        mlir::ConversionPatternRewriter &rewriter) const = 0;

  mlir::LogicalResult unsupported(Operation *op, const llvm::Twine &why) const;

  /// The converted (signless) result type `i` of `op`; null if unranked.
  RankedTensorType resultType(Operation *op, unsigned i = 0) const;

private:
  UnsupportedLog &log;
  llvm::SmallVector<std::string> names;
};

//===----------------------------------------------------------------------===//
// Attributes and constant operands
//===----------------------------------------------------------------------===//

int64_t intAttr(Operation *op, llvm::StringRef name, int64_t dflt);
float floatAttr(Operation *op, llvm::StringRef name, float dflt);
std::optional<llvm::SmallVector<int64_t>> intsAttr(Operation *op,
                                                   llvm::StringRef name);
std::string stringAttr(Operation *op, llvm::StringRef name,
                       llvm::StringRef dflt);

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

/// Declares a pattern class `NAME` handling the onnx ops listed in the
/// constructor call; its lower() is defined out of line.
#define XFMR_LOWERING_PATTERN(NAME)                                            \
  struct NAME : public ::xfmr::lowering::ONNXLoweringPattern {                 \
    using ONNXLoweringPattern::ONNXLoweringPattern;                            \
    ::mlir::LogicalResult                                                      \
    lower(::mlir::Operation *op, ::llvm::StringRef name,                       \
          ::llvm::ArrayRef<::mlir::Value> operands,                            \
          ::mlir::ConversionPatternRewriter &rewriter) const override;         \
  }

} // namespace xfmr::lowering

#endif // XFMR_LIB_CONVERSION_ONNXTOLINALG_COMMON_H
