// RUN: xfmr-opt %s --split-input-file --xfmr-pack-weights | FileCheck %s

// A constant f32 B [K, N] (N a multiple of 16) of a matrix product becomes
// its panels Bp [N / 16, K, 16] (Bp[p, k, j] = B[k, 16p + j]), read through
// (n floordiv 16, k, n mod 16): the product is unchanged, each panel one
// contiguous stream for xfmr-tile-contractions.
// CHECK: #[[PANEL:.*]] = affine_map<(d0, d1, d2) -> (d2 floordiv 16, d1, d2 mod 16)>
// CHECK-LABEL: func.func @plain
// CHECK: %[[P:.*]] = arith.constant dense_resource<xfmr_packed_weights> : tensor<2x2x16xf32>
// CHECK-NOT: tensor<2x32xf32>
// CHECK: linalg.generic {indexing_maps = [#{{.*}}, #[[PANEL]], #{{.*}}]{{.*}} ins(%{{.*}}, %[[P]] : tensor<?x2xf32>, tensor<2x2x16xf32>)
// Panel 0 holds columns 0..15 of both rows (0..15, then 32..47), panel 1
// columns 16..31 (16..31, then 48..63).
// CHECK: xfmr_packed_weights: "0x04000000000000000000803F0000004000004040000080400000A0400000C0400000E040000000410000104100002041000030410000404100005041000060410000704100000042000004420000084200000C4200001042000014420000184200001C4200002042000024420000284200002C4200003042000034420000384200003C42000080410000884100009041000098410000A0410000A8410000B0410000B8410000C0410000C8410000D0410000D8410000E0410000E8410000F0410000F84100004042000044420000484200004C4200005042000054420000584200005C4200006042000064420000684200006C4200007042000074420000784200007C42"
#a = affine_map<(m, k, n) -> (m, k)>
#b = affine_map<(m, k, n) -> (k, n)>
#c = affine_map<(m, k, n) -> (m, n)>
func.func @plain(%x: tensor<?x2xf32>) -> tensor<?x32xf32> {
  %w = arith.constant dense<[[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0, 17.0, 18.0, 19.0, 20.0, 21.0, 22.0, 23.0, 24.0, 25.0, 26.0, 27.0, 28.0, 29.0, 30.0, 31.0], [32.0, 33.0, 34.0, 35.0, 36.0, 37.0, 38.0, 39.0, 40.0, 41.0, 42.0, 43.0, 44.0, 45.0, 46.0, 47.0, 48.0, 49.0, 50.0, 51.0, 52.0, 53.0, 54.0, 55.0, 56.0, 57.0, 58.0, 59.0, 60.0, 61.0, 62.0, 63.0]]> : tensor<2x32xf32>
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %x, %c0 : tensor<?x2xf32>
  %empty = tensor.empty(%m) : tensor<?x32xf32>
  %fill = linalg.fill ins(%zero : f32) outs(%empty : tensor<?x32xf32>) -> tensor<?x32xf32>
  %r = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%x, %w : tensor<?x2xf32>, tensor<2x32xf32>) outs(%fill : tensor<?x32xf32>) {
  ^bb0(%in: f32, %wv: f32, %out: f32):
    %p = arith.mulf %in, %wv : f32
    %s = arith.addf %out, %p : f32
    linalg.yield %s : f32
  } -> tensor<?x32xf32>
  return %r : tensor<?x32xf32>
}

// -----

// negative_narrow: N = 8 is no multiple of 16, so B stays as it is.
// CHECK-LABEL: func.func @negative_narrow
// CHECK: arith.constant dense<{{.*}}> : tensor<2x8xf32>
// CHECK: ins(%{{.*}}, %{{.*}} : tensor<?x2xf32>, tensor<2x8xf32>)
#a = affine_map<(m, k, n) -> (m, k)>
#b = affine_map<(m, k, n) -> (k, n)>
#c = affine_map<(m, k, n) -> (m, n)>
func.func @negative_narrow(%x: tensor<?x2xf32>) -> tensor<?x8xf32> {
  %w = arith.constant dense<[[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0], [8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0]]> : tensor<2x8xf32>
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %x, %c0 : tensor<?x2xf32>
  %empty = tensor.empty(%m) : tensor<?x8xf32>
  %fill = linalg.fill ins(%zero : f32) outs(%empty : tensor<?x8xf32>) -> tensor<?x8xf32>
  %r = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%x, %w : tensor<?x2xf32>, tensor<2x8xf32>) outs(%fill : tensor<?x8xf32>) {
  ^bb0(%in: f32, %wv: f32, %out: f32):
    %p = arith.mulf %in, %wv : f32
    %s = arith.addf %out, %p : f32
    linalg.yield %s : f32
  } -> tensor<?x8xf32>
  return %r : tensor<?x8xf32>
}
