// RUN: xfmr-opt %s --xfmr-prepare-entry | FileCheck %s

// Every returned tensor is copied into a fresh allocation (the caller frees
// it), even when it is an argument; the public function gets the C interface
// and loses the importer's argument attributes.
// CHECK: func.func @main(%[[A:.*]]: tensor<?xf32>) -> tensor<?xf32> attributes {llvm.emit_c_interface}
// CHECK: %[[C:.*]] = bufferization.alloc_tensor() copy(%[[A]])
// CHECK: return %[[C]]
func.func @main(%a: tensor<?xf32> {onnx.name = "x"}) -> (tensor<?xf32> {onnx.name = "y"}) {
  return %a : tensor<?xf32>
}
