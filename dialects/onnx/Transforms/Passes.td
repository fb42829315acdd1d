//===- Passes.td - onnx dialect passes ---------------------*- tablegen -*-===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_ONNX_TRANSFORMS_PASSES
#define XFMR_ONNX_TRANSFORMS_PASSES

include "mlir/Pass/PassBase.td"

def ONNXSimplifyShapesPass : Pass<"onnx-simplify-shapes", "mlir::ModuleOp"> {
  let summary = "Infer shapes and fold the exporter's shape arithmetic";
  let description = [{
    Exporters compute reshape targets, masks and position ranges at run time
    from `Shape` of activations. This pass alternates shape inference with
    folding until nothing changes:

    - `Shape`/`Size` of a tensor whose dims are static become constants; so do
      `Gather`/`Slice` of a `Shape` that only pick static dims;
    - ops whose operands are all small constants (integer shape math, `Cast`,
      `Concat`, `Gather`, `Unsqueeze`, `Range`, `Equal`/`Where`,
      `ConstantOfShape`, `Expand`, reductions...) are evaluated;
    - result types are refined from operand shapes, and function signatures
      follow their returned values.

    With static input dims no `Shape` op is left; with dynamic ones only the
    arithmetic that truly depends on them remains.

    Before:
    ```mlir
    %s = onnx.Shape(%x) : (tensor<2x8x64xf32>) -> tensor<3xi64>
    %i = onnx.Constant() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
    %d = onnx.Gather(%s, %i) {axis = 0 : i64} : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
    ```
    After: `%d = onnx.Constant() {value = dense<8> : tensor<i64>}`.
  }];
  let dependentDialects = ["::xfmr::onnx::ONNXDialect"];
  let options = [
    Option<"maxFoldElements", "max-fold-elements", "int64_t", "4096",
           "Largest constant (in elements) the folder reads or creates">,
  ];
  let statistics = [
    Statistic<"numFolded", "folded-ops", "onnx ops removed by folding and dead-code elimination">,
    Statistic<"numShapesFolded", "folded-shapes",
              "Shape/Size ops (or picks of their static dims) made constant">,
    Statistic<"numTypesRefined", "refined-types", "Result types made more precise">,
  ];
}

#endif // XFMR_ONNX_TRANSFORMS_PASSES
