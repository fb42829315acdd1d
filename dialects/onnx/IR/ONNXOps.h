//===- ONNXOps.h - onnx dialect operations ----------------------*- C++ -*-===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_DIALECTS_ONNX_IR_ONNXOPS_H
#define XFMR_DIALECTS_ONNX_IR_ONNXOPS_H

#include "dialects/onnx/IR/ONNXDialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#define GET_OP_CLASSES
#include "dialects/onnx/IR/ONNXOps.h.inc"

namespace xfmr::onnx {

/// The module attribute holding the model's opset imports ({domain: version},
/// the default domain spelled "ai.onnx").
inline constexpr llvm::StringLiteral kOpsetImportAttrName = "onnx.opset_import";

/// Reads an integer constant tensor (dense or resource blob, any integer width)
/// as int64 values; std::nullopt if `attr` is not an integer tensor.
std::optional<llvm::SmallVector<int64_t>>
readIntElements(mlir::ElementsAttr attr);

/// Like readIntElements for the value produced by a constant op, if any.
std::optional<llvm::SmallVector<int64_t>> getConstantInts(mlir::Value value);

/// Reads a floating-point constant tensor as doubles (f16/bf16/f32/f64).
std::optional<llvm::SmallVector<double>>
readFloatElements(mlir::ElementsAttr attr);

/// The value of a 0-D/1-D integer shape tensor as far as it is known from
/// constants and Shape/Gather/Slice/Concat/Unsqueeze/Squeeze/Cast; unknown
/// entries are ShapedType::kDynamic. std::nullopt if not even the size is.
std::optional<llvm::SmallVector<int64_t>> getShapeValue(mlir::Value value);

/// Where dim `index` of `value` comes from: the value and dim it is copied
/// from through ops that keep it (elementwise ops, MatMul rows, Gather index
/// dims, Transpose, Reshape's 0 entries...). Two dims with the same origin
/// are equal at run time; (value, index) itself when nothing is known.
std::pair<mlir::Value, int64_t> getDimOrigin(mlir::Value value, int64_t index);

/// Refines the result types of `op` from its operands (shape inference).
/// Returns true if any result type changed. Never makes a type less precise.
bool inferResultTypes(mlir::Operation *op);

/// Maps an ONNX TensorProto data type to the MLIR element type the dialect
/// uses; a null type for unsupported ones (string, complex, ...).
mlir::Type convertONNXElementType(mlir::MLIRContext *ctx, int32_t dataType);

} // namespace xfmr::onnx

#endif // XFMR_DIALECTS_ONNX_IR_ONNXOPS_H
