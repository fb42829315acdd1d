// RUN: xfmr-opt %s --split-input-file --xfmr-gpu-products | FileCheck %s
// RUN: xfmr-opt %s --split-input-file --xfmr-gpu-products=emulate=true | FileCheck %s --check-prefix=EMU

#a = affine_map<(d0, d1, d2) -> (d0, d2)>
#b = affine_map<(d0, d1, d2) -> (d2, d1)>
#c = affine_map<(d0, d1, d2) -> (d0, d1)>

// C[M, N] += A[M, K] * B[K, N]: a grid of 64-column x 32-row tiles, 4
// warps, A and B staged in shared memory as tf32 hi and lo parts, three
// WMMA products per fragment and K step (lo*hi, hi*lo, hi*hi), then C +=.
// CHECK-LABEL: func.func @matmul
//       CHECK:   %[[GX:[0-9]+]] = arith.maxui %{{.*}}, %c1
//       CHECK:   %[[GY:[0-9]+]] = arith.maxui %{{.*}}, %c1
//       CHECK:   gpu.launch blocks({{.*}}) in (%{{.*}} = %[[GX]], %{{.*}} = %[[GY]], {{.*}}) threads({{.*}}) in (%{{.*}} = %c128, {{.*}}) module(@xfmr_kernels) function(@mma0) workgroup(%[[AHI:[a-z0-9]+]] : memref<32x32xf32, #gpu.address_space<workgroup>>, %[[ALO:[a-z0-9]+]] : memref<32x32xf32, #gpu.address_space<workgroup>>, %[[BHI:[a-z0-9]+]] : memref<32x64xf32, #gpu.address_space<workgroup>>, %[[BLO:[a-z0-9]+]] : memref<32x64xf32, #gpu.address_space<workgroup>>, %[[TILE:[a-z0-9]+]] : memref<32x64xf32, #gpu.address_space<workgroup>>)
//       CHECK:     gpu.subgroup_mma_constant_matrix
//       CHECK:     scf.for
//       CHECK:       arith.andi %{{.*}}, %c-8192_i32
//       CHECK:       memref.store %{{.*}}, %[[AHI]]
//       CHECK:       memref.store %{{.*}}, %[[ALO]]
//       CHECK:       gpu.barrier
//       CHECK:       scf.for
//       CHECK-COUNT-6: gpu.subgroup_mma_compute
//       CHECK:       gpu.barrier
//       CHECK:     gpu.subgroup_mma_store_matrix %{{.*}}, %[[TILE]]
//       CHECK:     gpu.subgroup_mma_store_matrix %{{.*}}, %[[TILE]]
//       CHECK:     gpu.barrier
//       CHECK:     memref.load %{{.*}}[%{{.*}}, %{{.*}}] : memref<?x?xf32>
//       CHECK:     arith.addf
//   CHECK-NOT:   linalg.generic

// The emulated kernel: the same staging as host loops, the warps' WMMA as
// scalar loops.
// EMU-LABEL: func.func @matmul
//       EMU:   memref.alloc() : memref<32x32xf32>
//   EMU-NOT:   gpu.
//       EMU:   memref.dealloc
//   EMU-NOT:   linalg.generic
func.func @matmul(%A: memref<?x?xf32>, %B: memref<?x?xf32>, %C: memref<?x?xf32>) {
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%A, %B : memref<?x?xf32>, memref<?x?xf32>) outs(%C : memref<?x?xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

#qa = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#kb = affine_map<(d0, d1, d2, d3) -> (d0, d2, d3)>
#sc = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>

// Batched Q K^T (B transposed): the batch is the grid's z, B read as
// B[b, n, k].
// CHECK-LABEL: func.func @batched_transposed
//       CHECK:   gpu.launch blocks({{.*}}) in ({{.*}}) threads
//       CHECK:     memref.load %arg1[%{{.*}}, %{{.*}}, %{{.*}}] : memref<4x?x16xf32>
//       CHECK:     gpu.subgroup_mma_compute
// EMU-LABEL: func.func @batched_transposed
func.func @batched_transposed(%Q: memref<4x?x16xf32>, %K: memref<4x?x16xf32>, %S: memref<4x?x?xf32>) {
  linalg.generic {indexing_maps = [#qa, #kb, #sc], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%Q, %K : memref<4x?x16xf32>, memref<4x?x16xf32>) outs(%S : memref<4x?x?xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

#a = affine_map<(d0, d1, d2) -> (d0, d2)>
#b = affine_map<(d0, d1, d2) -> (d2, d1)>
#c = affine_map<(d0, d1, d2) -> (d0, d1)>

// int8 weights (an xfmr.linear on a !quant.uniform weight, before its
// scales): B read 1 byte per weight and widened as it is staged; an int8 is
// exact in tf32, so B has no lo part: 4 WMMA products per K step (lo*hi,
// hi*hi for 2 fragments), not 6.
// CHECK-LABEL: func.func @int8_weights
//       CHECK:   gpu.launch
//       CHECK:     scf.for
//       CHECK:       memref.load %arg1[%{{.*}}, %{{.*}}] : memref<?x?xi8>
//       CHECK:       arith.sitofp %{{.*}} : i8 to f32
//       CHECK:       gpu.barrier
//       CHECK:       scf.for
//       CHECK-COUNT-4: gpu.subgroup_mma_compute
//   CHECK-NOT:       gpu.subgroup_mma_compute
//       CHECK:       gpu.barrier
// EMU-LABEL: func.func @int8_weights
//       EMU:   arith.sitofp %{{.*}} : i8 to f32
//   EMU-NOT:   linalg.generic
//       EMU:   return
func.func @int8_weights(%A: memref<?x?xf32>, %B: memref<?x?xi8>, %C: memref<?x?xf32>) {
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%A, %B : memref<?x?xf32>, memref<?x?xi8>) outs(%C : memref<?x?xf32>) {
  ^bb0(%x: f32, %y: i8, %acc: f32):
    %w = arith.sitofp %y : i8 to f32
    %p = arith.mulf %x, %w : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

#m = affine_map<(d0, d1) -> (d0, d1)>
#r = affine_map<(d0, d1) -> (d0)>

// Not a product (a row sum): left for xfmr-gpu-map-loops.
// CHECK-LABEL: func.func @not_a_product
//   CHECK-NOT:   gpu.launch
//       CHECK:   linalg.generic
func.func @not_a_product(%X: memref<?x?xf32>, %Y: memref<?xf32>) {
  linalg.generic {indexing_maps = [#m, #r], iterator_types = ["parallel", "reduction"]}
      ins(%X : memref<?x?xf32>) outs(%Y : memref<?xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %s = arith.addf %acc, %x : f32
    linalg.yield %s : f32
  }
  return
}
