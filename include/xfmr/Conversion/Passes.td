//===- Passes.td - xfmr conversion passes ------------------*- tablegen -*-===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_CONVERSION_PASSES
#define XFMR_CONVERSION_PASSES

include "mlir/Pass/PassBase.td"

def ConvertONNXToLinalgPass : Pass<"convert-onnx-to-linalg", "mlir::ModuleOp"> {
  let summary = "Lower onnx dialect ops to linalg, tensor, arith and math";
  let description = [{
    Rewrites every onnx op into destination-passing linalg/tensor ops on
    signless element types (ONNX's unsigned integers become signless, and the
    lowering picks unsigned arithmetic for them). Broadcasting follows ONNX's
    multidirectional rule; a dim that is dynamic on both sides is assumed
    equal and checked at run time. Operands that decide a result's rank or
    layout (axes, perm) must be constants; shape-like operands (Reshape's
    shape, Slice's starts/ends, Expand's shape, Range's bounds...) may be run
    time values.

    An op the lowering cannot handle stops the pass with one error at the
    node: `node 'name' (Op): unsupported: <reason>`.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::cf::ControlFlowDialect",
    "::mlir::linalg::LinalgDialect", "::mlir::math::MathDialect",
    "::mlir::tensor::TensorDialect", "::mlir::bufferization::BufferizationDialect",
    "::mlir::scf::SCFDialect",
  ];
  let statistics = [
    Statistic<"numConverted", "converted-ops", "onnx ops lowered">,
  ];
}

#endif // XFMR_CONVERSION_PASSES
