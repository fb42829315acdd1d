// RUN: xfmr-opt %s --split-input-file --xfmr-outline-layers | FileCheck %s

// Three layers of the same structure (their node names say which layer they
// belong to) become three calls of one function. What differs between them
// (the weights, the previous layer's output) is passed in; the empty
// tensors and the scalar constant they share are made inside. The check's
// message names the layer as N.
// CHECK-LABEL: func.func @main(
//  CHECK-SAME:     %[[X:[^ ]*]]: tensor<64xf32>) -> tensor<64xf32>
//   CHECK-DAG:   %[[W0:.*]] = arith.constant dense<1.000000e+00> : tensor<64xf32>
//   CHECK-DAG:   %[[W1:.*]] = arith.constant dense<2.000000e+00> : tensor<64xf32>
//   CHECK-DAG:   %[[W2:.*]] = arith.constant dense<3.000000e+00> : tensor<64xf32>
//       CHECK:   %[[R0:.*]] = call @xfmr_layer_0(%[[X]], %[[W0]]) : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
//       CHECK:   %[[R1:.*]] = call @xfmr_layer_0(%[[R0]], %[[W1]])
//       CHECK:   %[[R2:.*]] = call @xfmr_layer_0(%[[R1]], %[[W2]])
//       CHECK:   return %[[R2]]
//       CHECK: func.func private @xfmr_layer_0(%[[A:[^ ]*]]: tensor<64xf32>, %[[W:[^ ]*]]: tensor<64xf32>) -> tensor<64xf32>
//   CHECK-DAG:   arith.constant 2.000000e+00 : f32
//   CHECK-DAG:   tensor.empty() : tensor<64xf32>
//       CHECK:   linalg.generic {{.*}} ins(%[[A]], %[[W]] : tensor<64xf32>, tensor<64xf32>)
//       CHECK:   cf.assert %{{.*}}, "NaN at /model/layers.N/add (a layer function: N is one of 0..2)"
//       CHECK:   return
#map = affine_map<(d0) -> (d0)>
module {
  func.func @main(%x: tensor<64xf32>) -> tensor<64xf32> {
    %c0 = arith.constant 0 : index
    %two = arith.constant 2.0 : f32
    %w0 = arith.constant dense<1.0> : tensor<64xf32> loc("model.layers.0.w")
    %w1 = arith.constant dense<2.0> : tensor<64xf32> loc("model.layers.1.w")
    %w2 = arith.constant dense<3.0> : tensor<64xf32> loc("model.layers.2.w")
    %e0 = tensor.empty() : tensor<64xf32> loc("/model/layers.0/add")
    %a0 = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel"]}
        ins(%x, %w0 : tensor<64xf32>, tensor<64xf32>) outs(%e0 : tensor<64xf32>) {
    ^bb0(%p: f32, %q: f32, %o: f32):
      %s = arith.addf %p, %q : f32
      linalg.yield %s : f32
    } -> tensor<64xf32> loc("/model/layers.0/add")
    %i0 = tensor.extract %a0[%c0] : tensor<64xf32> loc("/model/layers.0/add")
    %ok0 = arith.cmpf ord, %i0, %i0 : f32 loc("/model/layers.0/add")
    cf.assert %ok0, "NaN at /model/layers.0/add" loc("/model/layers.0/add")
    %m0 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]}
        ins(%a0 : tensor<64xf32>) outs(%e0 : tensor<64xf32>) {
    ^bb0(%p: f32, %o: f32):
      %s = arith.mulf %p, %two : f32
      linalg.yield %s : f32
    } -> tensor<64xf32> loc("/model/layers.0/mul")
    %e1 = tensor.empty() : tensor<64xf32> loc("/model/layers.1/add")
    %a1 = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel"]}
        ins(%m0, %w1 : tensor<64xf32>, tensor<64xf32>) outs(%e1 : tensor<64xf32>) {
    ^bb0(%p: f32, %q: f32, %o: f32):
      %s = arith.addf %p, %q : f32
      linalg.yield %s : f32
    } -> tensor<64xf32> loc("/model/layers.1/add")
    %i1 = tensor.extract %a1[%c0] : tensor<64xf32> loc("/model/layers.1/add")
    %ok1 = arith.cmpf ord, %i1, %i1 : f32 loc("/model/layers.1/add")
    cf.assert %ok1, "NaN at /model/layers.1/add" loc("/model/layers.1/add")
    %m1 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]}
        ins(%a1 : tensor<64xf32>) outs(%e1 : tensor<64xf32>) {
    ^bb0(%p: f32, %o: f32):
      %s = arith.mulf %p, %two : f32
      linalg.yield %s : f32
    } -> tensor<64xf32> loc("/model/layers.1/mul")
    %e2 = tensor.empty() : tensor<64xf32> loc("/model/layers.2/add")
    %a2 = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel"]}
        ins(%m1, %w2 : tensor<64xf32>, tensor<64xf32>) outs(%e2 : tensor<64xf32>) {
    ^bb0(%p: f32, %q: f32, %o: f32):
      %s = arith.addf %p, %q : f32
      linalg.yield %s : f32
    } -> tensor<64xf32> loc("/model/layers.2/add")
    %i2 = tensor.extract %a2[%c0] : tensor<64xf32> loc("/model/layers.2/add")
    %ok2 = arith.cmpf ord, %i2, %i2 : f32 loc("/model/layers.2/add")
    cf.assert %ok2, "NaN at /model/layers.2/add" loc("/model/layers.2/add")
    %m2 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]}
        ins(%a2 : tensor<64xf32>) outs(%e2 : tensor<64xf32>) {
    ^bb0(%p: f32, %o: f32):
      %s = arith.mulf %p, %two : f32
      linalg.yield %s : f32
    } -> tensor<64xf32> loc("/model/layers.2/mul")
    return %m2 : tensor<64xf32>
  }
}

// -----

// A layer of another structure (here: subtracting instead of adding) stays
// inline; the two equal ones still share a function. Ops whose locations
// name no layer are left alone.
// CHECK-LABEL: func.func @mixed(
//       CHECK:   arith.subf
//       CHECK:   call @xfmr_layer_1(
//       CHECK:   call @xfmr_layer_1(
//       CHECK:   linalg.generic
//       CHECK:   return
//       CHECK: func.func private @xfmr_layer_1(
#map = affine_map<(d0) -> (d0)>
module {
  func.func @mixed(%x: tensor<64xf32>) -> tensor<64xf32> {
    %w0 = arith.constant dense<1.0> : tensor<64xf32>
    %w1 = arith.constant dense<2.0> : tensor<64xf32>
    %w2 = arith.constant dense<3.0> : tensor<64xf32>
    %e = tensor.empty() : tensor<64xf32>
    %a0 = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel"]}
        ins(%x, %w0 : tensor<64xf32>, tensor<64xf32>) outs(%e : tensor<64xf32>) {
    ^bb0(%p: f32, %q: f32, %o: f32):
      %s = arith.subf %p, %q : f32
      linalg.yield %s : f32
    } -> tensor<64xf32> loc("/model/layers.0/sub")
    %a1 = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel"]}
        ins(%a0, %w1 : tensor<64xf32>, tensor<64xf32>) outs(%e : tensor<64xf32>) {
    ^bb0(%p: f32, %q: f32, %o: f32):
      %s = arith.addf %p, %q : f32
      linalg.yield %s : f32
    } -> tensor<64xf32> loc("/model/layers.1/add")
    %a2 = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel"]}
        ins(%a1, %w2 : tensor<64xf32>, tensor<64xf32>) outs(%e : tensor<64xf32>) {
    ^bb0(%p: f32, %q: f32, %o: f32):
      %s = arith.addf %p, %q : f32
      linalg.yield %s : f32
    } -> tensor<64xf32> loc("/model/layers.2/add")
    %n = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]}
        ins(%a2 : tensor<64xf32>) outs(%e : tensor<64xf32>) {
    ^bb0(%p: f32, %o: f32):
      %s = arith.negf %p : f32
      linalg.yield %s : f32
    } -> tensor<64xf32> loc("/lm_head/neg")
    return %n : tensor<64xf32>
  }
}

// -----

// CSE gave each layer's second product the previous layer's empty tensor
// (same extents): each layer makes its own copy, which reads the previous
// layer's extent. That extent is then an output of the previous layer's
// function (before, it was collected before the copies existed, and the
// calls left the copies reading erased values).
// CHECK-LABEL: func.func @shared_extent(
//       CHECK:   %[[L1:.*]]:2 = call @xfmr_layer_1(%{{.*}}, %{{.*}}) : (tensor<?xf32>, index) -> (index, tensor<?xf32>)
//       CHECK:   %[[L2:.*]]:2 = call @xfmr_layer_1(%[[L1]]#1, %[[L1]]#0)
//       CHECK:   call @xfmr_layer_1(%[[L2]]#1, %[[L2]]#0)
//       CHECK: func.func private @xfmr_layer_1(%{{.*}}: tensor<?xf32>, %[[PREV:.*]]: index) -> (index, tensor<?xf32>)
//       CHECK:   %[[DIM:.*]] = tensor.dim
//       CHECK:   tensor.empty(%[[PREV]])
//       CHECK:   return %[[DIM]], %{{.*}} : index, tensor<?xf32>
#map = affine_map<(d0) -> (d0)>
module {
  func.func @shared_extent(%x: tensor<?xf32>) -> tensor<?xf32> {
    %c0 = arith.constant 0 : index
    %d0 = tensor.dim %x, %c0 : tensor<?xf32> loc("/model/layers.0/neg")
    %e0 = tensor.empty(%d0) : tensor<?xf32> loc("/model/layers.0/neg")
    %a0 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]}
        ins(%x : tensor<?xf32>) outs(%e0 : tensor<?xf32>) {
    ^bb0(%p: f32, %o: f32):
      %s = arith.negf %p : f32
      linalg.yield %s : f32
    } -> tensor<?xf32> loc("/model/layers.0/neg")
    %d1 = tensor.dim %a0, %c0 : tensor<?xf32> loc("/model/layers.1/add")
    %e1 = tensor.empty(%d1) : tensor<?xf32> loc("/model/layers.1/add")
    %a1 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]}
        ins(%a0 : tensor<?xf32>) outs(%e1 : tensor<?xf32>) {
    ^bb0(%p: f32, %o: f32):
      %s = arith.addf %p, %p : f32
      linalg.yield %s : f32
    } -> tensor<?xf32> loc("/model/layers.1/add")
    %b1 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]}
        ins(%a1 : tensor<?xf32>) outs(%e0 : tensor<?xf32>) {
    ^bb0(%p: f32, %o: f32):
      %s = arith.mulf %p, %p : f32
      linalg.yield %s : f32
    } -> tensor<?xf32> loc("/model/layers.1/mul")
    %d2 = tensor.dim %b1, %c0 : tensor<?xf32> loc("/model/layers.2/add")
    %e2 = tensor.empty(%d2) : tensor<?xf32> loc("/model/layers.2/add")
    %a2 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]}
        ins(%b1 : tensor<?xf32>) outs(%e2 : tensor<?xf32>) {
    ^bb0(%p: f32, %o: f32):
      %s = arith.addf %p, %p : f32
      linalg.yield %s : f32
    } -> tensor<?xf32> loc("/model/layers.2/add")
    %b2 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]}
        ins(%a2 : tensor<?xf32>) outs(%e1 : tensor<?xf32>) {
    ^bb0(%p: f32, %o: f32):
      %s = arith.mulf %p, %p : f32
      linalg.yield %s : f32
    } -> tensor<?xf32> loc("/model/layers.2/mul")
    %d3 = tensor.dim %b2, %c0 : tensor<?xf32> loc("/model/layers.3/add")
    %e3 = tensor.empty(%d3) : tensor<?xf32> loc("/model/layers.3/add")
    %a3 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]}
        ins(%b2 : tensor<?xf32>) outs(%e3 : tensor<?xf32>) {
    ^bb0(%p: f32, %o: f32):
      %s = arith.addf %p, %p : f32
      linalg.yield %s : f32
    } -> tensor<?xf32> loc("/model/layers.3/add")
    %b3 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]}
        ins(%a3 : tensor<?xf32>) outs(%e2 : tensor<?xf32>) {
    ^bb0(%p: f32, %o: f32):
      %s = arith.mulf %p, %p : f32
      linalg.yield %s : f32
    } -> tensor<?xf32> loc("/model/layers.3/mul")
    return %b3 : tensor<?xf32>
  }
}
