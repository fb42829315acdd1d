// RUN: xfmr-opt %s --xfmr-prepare-entry --split-input-file | FileCheck %s

// A returned argument is copied into a fresh allocation (the caller frees
// it); the argument is not writable; the public function gets the C
// interface and loses the importer's argument attributes.
// CHECK: func.func @main(%[[A:.*]]: tensor<?xf32> {bufferization.writable = false}) -> tensor<?xf32> attributes {llvm.emit_c_interface}
// CHECK: %[[C:.*]] = bufferization.alloc_tensor() copy(%[[A]])
// CHECK: return %[[C]]
func.func @main(%a: tensor<?xf32> {onnx.name = "x"}) -> (tensor<?xf32> {onnx.name = "y"}) {
  return %a : tensor<?xf32>
}

// -----

// A value computed into its own tensor.empty is returned without a copy (the
// first time); the same value returned again is copied.
// CHECK-LABEL: func.func @fresh
// CHECK-SAME: %[[X:.*]]: tensor<4xf32> {bufferization.writable = false}
// CHECK: %[[G:.*]] = linalg.generic
// CHECK: %[[C:.*]] = bufferization.alloc_tensor() copy(%[[G]])
// CHECK: return %[[G]], %[[C]]
func.func @fresh(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %e = tensor.empty() : tensor<4xf32>
  %g = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],
                       iterator_types = ["parallel"]}
      ins(%x : tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %a, %a : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  return %g, %g : tensor<4xf32>, tensor<4xf32>
}
