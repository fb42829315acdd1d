// RUN: xfmr-opt %s --split-input-file -xfmr-drop-pool-results --verify-diagnostics | FileCheck %s

// A step function returns each KV pool it updated in place as the buffer it
// received (xfmr.kv_pool = its argument's index): those results are dropped
// from the signature and the return, the model's outputs stay.
// CHECK-LABEL: func.func @step
// CHECK-SAME: (%[[X:[a-z0-9]+]]: memref<4xf32>, %[[K:[a-z0-9]+]]: memref<?x8xf32>, %[[V:[a-z0-9]+]]: memref<?x8xf32>) -> (memref<4xf32> {onnx.name = "logits"})
// CHECK: return %[[X]] : memref<4xf32>
func.func @step(%x: memref<4xf32>, %k: memref<?x8xf32>, %v: memref<?x8xf32>)
    -> (memref<4xf32> {onnx.name = "logits"}, memref<?x8xf32> {xfmr.kv_pool = 1 : i64},
        memref<?x8xf32> {xfmr.kv_pool = 2 : i64}) {
  return %x, %k, %v : memref<4xf32>, memref<?x8xf32>, memref<?x8xf32>
}

// -----

// negative_no_pools: a function without pool results is left alone.
// CHECK-LABEL: func.func @negative_no_pools
// CHECK-SAME: -> (memref<4xf32>, memref<4xf32>)
// CHECK: return %{{.*}}, %{{.*}} : memref<4xf32>, memref<4xf32>
func.func @negative_no_pools(%x: memref<4xf32>) -> (memref<4xf32>, memref<4xf32>) {
  return %x, %x : memref<4xf32>, memref<4xf32>
}

// -----

// A pool result that is not its argument's buffer (bufferized out of
// place) would leave the caller's pool stale: an error.
// expected-error @+1 {{KV pool result 1 is not written in place into argument 1}}
func.func @copied_pool(%x: memref<4xf32>, %k: memref<?x8xf32>, %k2: memref<?x8xf32>)
    -> (memref<4xf32>, memref<?x8xf32> {xfmr.kv_pool = 1 : i64}) {
  return %x, %k2 : memref<4xf32>, memref<?x8xf32>
}
