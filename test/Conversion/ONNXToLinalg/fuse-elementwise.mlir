// RUN: xfmr-opt %s --split-input-file -xfmr-fuse-elementwise | FileCheck %s

#id = affine_map<(i, j) -> (i, j)>
#a = affine_map<(i, j, k) -> (i, k)>
#b = affine_map<(i, j, k) -> (k, j)>
#c = affine_map<(i, j, k) -> (i, j)>

// Elementwise into elementwise: one generic computes both (each element's
// exp is still computed once).
// CHECK-LABEL: func.func @elementwise_chain
// CHECK: linalg.generic
// CHECK: math.exp
// CHECK: arith.mulf
// CHECK-NOT: linalg.generic
// CHECK: return
func.func @elementwise_chain(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %init = tensor.empty() : tensor<4x8xf32>
  %e = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%init : tensor<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %v = math.exp %in : f32
    linalg.yield %v : f32
  } -> tensor<4x8xf32>
  %m = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%e, %x : tensor<4x8xf32>, tensor<4x8xf32>) outs(%init : tensor<4x8xf32>) {
  ^bb0(%in: f32, %in2: f32, %out: f32):
    %v = arith.mulf %in, %in2 : f32
    linalg.yield %v : f32
  } -> tensor<4x8xf32>
  return %m : tensor<4x8xf32>
}

// -----

#id = affine_map<(i, j) -> (i, j)>
#a = affine_map<(i, j, k) -> (i, k)>
#b = affine_map<(i, j, k) -> (k, j)>
#c = affine_map<(i, j, k) -> (i, j)>

// negative_recompute: a product reads its A operand once per output column
// (the map (i, k) skips j): fusing exp into it would evaluate exp 16 times
// per element, so the producer stays a separate generic.
// CHECK-LABEL: func.func @negative_recompute
// CHECK: %[[E:.*]] = linalg.generic
// CHECK: math.exp
// CHECK: linalg.generic {{.*}} ins(%[[E]], %{{.*}} : tensor<4x8xf32>, tensor<8x16xf32>)
// CHECK-NOT: math.exp
// CHECK: arith.mulf
// CHECK: arith.addf
func.func @negative_recompute(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %init = tensor.empty() : tensor<4x8xf32>
  %e = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%init : tensor<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %v = math.exp %in : f32
    linalg.yield %v : f32
  } -> tensor<4x8xf32>
  %zero = arith.constant 0.0 : f32
  %acc0 = tensor.empty() : tensor<4x16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%acc0 : tensor<4x16xf32>) -> tensor<4x16xf32>
  %p = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%e, %w : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) {
  ^bb0(%l: f32, %r: f32, %o: f32):
    %v = arith.mulf %l, %r : f32
    %s = arith.addf %o, %v : f32
    linalg.yield %s : f32
  } -> tensor<4x16xf32>
  return %p : tensor<4x16xf32>
}

// -----

#id = affine_map<(i, j) -> (i, j)>
#a = affine_map<(i, j, k) -> (i, k)>
#b = affine_map<(i, j, k) -> (k, j)>
#c = affine_map<(i, j, k) -> (i, j)>

// A producer that only converts types is fused even so: the product reads
// the f16 weight directly (half the bytes) and widens it in its body.
// CHECK-LABEL: func.func @convert_into_product
// CHECK-SAME: %[[W:[a-z0-9]+]]: tensor<8x16xf16>
// CHECK: linalg.generic {{.*}} ins(%{{.*}}, %[[W]] : tensor<4x8xf32>, tensor<8x16xf16>)
// CHECK: arith.extf
// CHECK: arith.mulf
// CHECK-NOT: linalg.generic
func.func @convert_into_product(%x: tensor<4x8xf32>, %w: tensor<8x16xf16>) -> tensor<4x16xf32> {
  %winit = tensor.empty() : tensor<8x16xf32>
  %wf = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%w : tensor<8x16xf16>) outs(%winit : tensor<8x16xf32>) {
  ^bb0(%in: f16, %out: f32):
    %v = arith.extf %in : f16 to f32
    linalg.yield %v : f32
  } -> tensor<8x16xf32>
  %zero = arith.constant 0.0 : f32
  %acc0 = tensor.empty() : tensor<4x16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%acc0 : tensor<4x16xf32>) -> tensor<4x16xf32>
  %p = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %wf : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) {
  ^bb0(%l: f32, %r: f32, %o: f32):
    %v = arith.mulf %l, %r : f32
    %s = arith.addf %o, %v : f32
    linalg.yield %s : f32
  } -> tensor<4x16xf32>
  return %p : tensor<4x16xf32>
}
