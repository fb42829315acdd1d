// RUN: xfmr-opt %s --split-input-file --xfmr-contractions-to-blas=min-rows=8 | FileCheck %s

// A projection [1, T, 64] x [64, 32]: sgemm per batch element when T >= 8
// and every operand is BLAS-shaped at run time, the loop otherwise.
#a = affine_map<(b, k, m, n) -> (b, m, k)>
#w = affine_map<(b, k, m, n) -> (k, n)>
#c = affine_map<(b, k, m, n) -> (b, m, n)>
// CHECK-LABEL: func.func @projection
//  CHECK-SAME:   (%[[X:.*]]: memref<1x?x64xf32>, %[[W:.*]]: memref<64x32xf32>, %[[Y:.*]]: memref<1x?x32xf32>)
//   CHECK-DAG:   %[[XP:.*]] = memref.extract_aligned_pointer_as_index %[[X]]
//   CHECK-DAG:   %{{.*}}, %{{.*}}, %[[YS:.*]]:3, %[[YST:.*]]:3 = memref.extract_strided_metadata %[[Y]]
//   CHECK-DAG:   %[[C8:.*]] = arith.constant 8 : index
//       CHECK:   %[[ROWS:.*]] = arith.cmpi sge, %[[YS]]#1, %[[C8]]
//       CHECK:   arith.andi %[[ROWS]],
//       CHECK:   scf.if %{{.*}} {
//   CHECK-DAG:     %[[ROW:.*]] = arith.constant 101 : i32
//   CHECK-DAG:     %[[NT:.*]] = arith.constant 111 : i32
//       CHECK:     scf.for %[[B:.*]] = %{{.*}} to %[[YS]]#0
//       CHECK:       func.call @cblas_sgemm(%[[ROW]], %[[NT]], %[[NT]], {{.*}}) : (i32, i32, i32, i32, i32, i32, f32, !llvm.ptr, i32, !llvm.ptr, i32, f32, !llvm.ptr, i32) -> ()
//       CHECK:   } else {
//       CHECK:     linalg.generic
//  CHECK-SAME:       ins(%[[X]], %[[W]] : memref<1x?x64xf32>, memref<64x32xf32>) outs(%[[Y]] : memref<1x?x32xf32>)
//       CHECK: func.func private @cblas_sgemm(i32, i32, i32, i32, i32, i32, f32, !llvm.ptr, i32, !llvm.ptr, i32, f32, !llvm.ptr, i32)
func.func @projection(%x: memref<1x?x64xf32>, %w: memref<64x32xf32>, %y: memref<1x?x32xf32>) {
  linalg.generic {indexing_maps = [#a, #w, #c], iterator_types = ["parallel", "reduction", "parallel", "parallel"]}
      ins(%x, %w : memref<1x?x64xf32>, memref<64x32xf32>) outs(%y : memref<1x?x32xf32>) {
  ^bb0(%i: f32, %j: f32, %o: f32):
    %p = arith.mulf %i, %j : f32
    %s = arith.addf %o, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// Q·Kᵀ with K stored [n, k]: B is passed transposed (CblasTrans = 112).
#q = affine_map<(m, n, k) -> (m, k)>
#k = affine_map<(m, n, k) -> (n, k)>
#s = affine_map<(m, n, k) -> (m, n)>
// CHECK-LABEL: func.func @transposed_rhs
//   CHECK-DAG:   %[[T:.*]] = arith.constant 112 : i32
//   CHECK-DAG:   %[[NT:.*]] = arith.constant 111 : i32
//       CHECK:   func.call @cblas_sgemm(%{{.*}}, %[[NT]], %[[T]],
func.func @transposed_rhs(%q: memref<?x16xf32>, %kt: memref<?x16xf32>, %s: memref<?x?xf32>) {
  linalg.generic {indexing_maps = [#q, #k, #s], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%q, %kt : memref<?x16xf32>, memref<?x16xf32>) outs(%s : memref<?x?xf32>) {
  ^bb0(%i: f32, %j: f32, %o: f32):
    %p = arith.mulf %i, %j : f32
    %r = arith.addf %o, %p : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// Left alone: a product inside a loop (an attention tile), one whose body is
// not a plain multiply-add, one in f16, and one whose result is transposed.
#a = affine_map<(m, n, k) -> (m, k)>
#b = affine_map<(m, n, k) -> (k, n)>
#c = affine_map<(m, n, k) -> (m, n)>
#ct = affine_map<(m, n, k) -> (n, m)>
// CHECK-LABEL: func.func @left_alone
//   CHECK-NOT:   cblas_sgemm
//   CHECK-NOT:   scf.if
//       CHECK:   return
func.func @left_alone(%a: memref<?x?xf32>, %b: memref<?x?xf32>, %c: memref<?x?xf32>,
                      %h: memref<?x?xf16>, %hc: memref<?x?xf16>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
        ins(%a, %b : memref<?x?xf32>, memref<?x?xf32>) outs(%c : memref<?x?xf32>) {
    ^bb0(%i0: f32, %i1: f32, %o: f32):
      %p = arith.mulf %i0, %i1 : f32
      %r = arith.addf %o, %p : f32
      linalg.yield %r : f32
    }
  }
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<?x?xf32>, memref<?x?xf32>) outs(%c : memref<?x?xf32>) {
  ^bb0(%i0: f32, %i1: f32, %o: f32):
    %e = math.exp %i0 : f32
    %p = arith.mulf %e, %i1 : f32
    %r = arith.addf %o, %p : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%h, %h : memref<?x?xf16>, memref<?x?xf16>) outs(%hc : memref<?x?xf16>) {
  ^bb0(%i0: f16, %i1: f16, %o: f16):
    %p = arith.mulf %i0, %i1 : f16
    %r = arith.addf %o, %p : f16
    linalg.yield %r : f16
  }
  linalg.generic {indexing_maps = [#a, #b, #ct], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<?x?xf32>, memref<?x?xf32>) outs(%c : memref<?x?xf32>) {
  ^bb0(%i0: f32, %i1: f32, %o: f32):
    %p = arith.mulf %i0, %i1 : f32
    %r = arith.addf %o, %p : f32
    linalg.yield %r : f32
  }
  return
}
