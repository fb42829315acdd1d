// RUN: xfmr-opt %s --split-input-file --xfmr-pack-weights | FileCheck %s --check-prefix=SMALL
// RUN: xfmr-opt %s --split-input-file --xfmr-pack-weights="lazy-min-bytes=64" | FileCheck %s --check-prefix=LAZY

// A product whose B is the transpose of a constant (a tied embedding read as
// the lm_head: the dynamo exporter writes MatMul(x, Transpose(E)), E also the
// embedding's table) reads a packed transposed copy instead of transposing E
// at every call. E stays for its other user; the transpose goes.

// SMALL: #[[PANEL:.*]] = affine_map<(d0, d1, d2) -> (d2 floordiv 16, d1, d2 mod 16)>
// SMALL-LABEL: func.func @tied_small
// SMALL-NOT: linalg.transpose
// SMALL-DAG: %[[E:.*]] = arith.constant dense<{{\[\[}}0.000000e+00, 1.000000e+00], [2.000000e+00, 3.000000e+00]{{.*}} : tensor<16x2xf32>
// SMALL-DAG: %[[P:.*]] = arith.constant dense_resource<xfmr_packed_weights> : tensor<1x2x16xf32>
// SMALL: tensor.extract %[[E]]
// SMALL: linalg.generic {indexing_maps = [#{{.*}}, #[[PANEL]], #{{.*}}]{{.*}} ins(%{{.*}}, %[[P]] : tensor<?x2xf32>, tensor<1x2x16xf32>)
// Bp[0, k, j] = E[j, k]: 0, 2, ..., 30, then 1, 3, ..., 31.
// SMALL: xfmr_packed_weights: "0x040000000000000000000040000080400000C0400000004100002041000040410000604100008041000090410000A0410000B0410000C0410000D0410000E0410000F0410000803F000040400000A0400000E0400000104100003041000050410000704100008841000098410000A8410000B8410000C8410000D8410000E8410000F841"
#a = affine_map<(m, k, n) -> (m, k)>
#b = affine_map<(m, k, n) -> (k, n)>
#c = affine_map<(m, k, n) -> (m, n)>
func.func @tied_small(%x: tensor<?x2xf32>, %i: index) -> (tensor<?x16xf32>, f32) {
  %e = arith.constant dense<[[0.0, 1.0], [2.0, 3.0], [4.0, 5.0], [6.0, 7.0], [8.0, 9.0], [10.0, 11.0], [12.0, 13.0], [14.0, 15.0], [16.0, 17.0], [18.0, 19.0], [20.0, 21.0], [22.0, 23.0], [24.0, 25.0], [26.0, 27.0], [28.0, 29.0], [30.0, 31.0]]> : tensor<16x2xf32>
  %row = tensor.extract %e[%i, %i] : tensor<16x2xf32>
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %x, %c0 : tensor<?x2xf32>
  %init = tensor.empty() : tensor<2x16xf32>
  %t = linalg.transpose ins(%e : tensor<16x2xf32>) outs(%init : tensor<2x16xf32>) permutation = [1, 0]
  %empty = tensor.empty(%m) : tensor<?x16xf32>
  %fill = linalg.fill ins(%zero : f32) outs(%empty : tensor<?x16xf32>) -> tensor<?x16xf32>
  %r = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%x, %t : tensor<?x2xf32>, tensor<2x16xf32>) outs(%fill : tensor<?x16xf32>) {
  ^bb0(%in: f32, %w: f32, %out: f32):
    %p = arith.mulf %in, %w : f32
    %s = arith.addf %out, %p : f32
    linalg.yield %s : f32
  } -> tensor<?x16xf32>
  return %r, %row : tensor<?x16xf32>, f32
}

// -----

// A resource of at least lazy-min-bytes: a linalg.pack of the transposed
// copy (w.T), carried out when the weights are written; the original, read
// by nothing else, goes with the transpose.

// LAZY-LABEL: func.func @resource
// LAZY-NOT: linalg.transpose
// LAZY-NOT: dense_resource<w> :
// LAZY: %[[T:.*]] = arith.constant dense_resource<w.T> : tensor<2x16xf32>
// LAZY: %[[P:.*]] = linalg.pack %[[T]] outer_dims_perm = [1, 0] inner_dims_pos = [1] inner_tiles = [16] into %{{.*}} : tensor<2x16xf32> -> tensor<1x2x16xf32>
// LAZY: linalg.generic {{.*}} ins(%{{.*}}, %[[P]] : tensor<?x2xf32>, tensor<1x2x16xf32>)
// LAZY: w.T: "0x040000000000000000000040000080400000C0400000004100002041000040410000604100008041000090410000A0410000B0410000C0410000D0410000E0410000F0410000803F000040400000A0400000E0400000104100003041000050410000704100008841000098410000A8410000B8410000C8410000D8410000E8410000F841"
#a = affine_map<(m, k, n) -> (m, k)>
#b = affine_map<(m, k, n) -> (k, n)>
#c = affine_map<(m, k, n) -> (m, n)>
func.func @resource(%x: tensor<?x2xf32>) -> tensor<?x16xf32> {
  %e = arith.constant dense_resource<w> : tensor<16x2xf32>
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %x, %c0 : tensor<?x2xf32>
  %init = tensor.empty() : tensor<2x16xf32>
  %t = linalg.transpose ins(%e : tensor<16x2xf32>) outs(%init : tensor<2x16xf32>) permutation = [1, 0]
  %empty = tensor.empty(%m) : tensor<?x16xf32>
  %fill = linalg.fill ins(%zero : f32) outs(%empty : tensor<?x16xf32>) -> tensor<?x16xf32>
  %r = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%x, %t : tensor<?x2xf32>, tensor<2x16xf32>) outs(%fill : tensor<?x16xf32>) {
  ^bb0(%in: f32, %w: f32, %out: f32):
    %p = arith.mulf %in, %w : f32
    %s = arith.addf %out, %p : f32
    linalg.yield %s : f32
  } -> tensor<?x16xf32>
  return %r : tensor<?x16xf32>
}

{-#
  dialect_resources: {
    builtin: {
      w: "0x04000000000000000000803F0000004000004040000080400000A0400000C0400000E0400000004100001041000020410000304100004041000050410000604100007041000080410000884100009041000098410000A0410000A8410000B0410000B8410000C0410000C8410000D0410000D8410000E0410000E8410000F0410000F841"
    }
  }
#-}
