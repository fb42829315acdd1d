// RUN: xfmr-opt %s --split-input-file --xfmr-split-rows | FileCheck %s
// RUN: not xfmr-opt %s --split-input-file --xfmr-split-rows=min-rows=0 2>&1 | FileCheck %s --check-prefix=BAD

// BAD: xfmr-split-rows: min-rows and rows-per-task must be positive

// A row-wise op on [?, 64] (an RMS-norm-like reduction along the rows):
// from 64 rows on, a loop over blocks of 16 rows marked independent, each
// the same generic on subviews of its rows; the broadcast weight [64] is
// read whole; fewer rows keep the op as it was.
#row = affine_map<(m, k) -> (m, k)>
#wt = affine_map<(m, k) -> (k)>
#out = affine_map<(m, k) -> (m)>
// CHECK-LABEL: func.func @row_sums
//       CHECK:   %[[ROWS:.*]] = memref.dim %{{.*}}, %c0
//       CHECK:   %[[MANY:.*]] = arith.cmpi sge, %[[ROWS]], %c64
//       CHECK:   scf.if %[[MANY]] {
//       CHECK:     scf.for %[[I:.*]] = %{{.*}} to %[[ROWS]] step %c16
//       CHECK:       %[[N:.*]] = arith.minsi %c16{{.*}}, %{{.*}}
//       CHECK:       %[[X:.*]] = memref.subview %{{.*}}[%[[I]], 0] [%[[N]], 64] [1, 1]
//       CHECK:       %[[Y:.*]] = memref.subview %{{.*}}[%[[I]]] [%[[N]]] [1]
//       CHECK:       linalg.generic {{.*}} ins(%[[X]], %{{.*}} : memref<?x64xf32, strided<[64, 1], offset: ?>>, memref<64xf32>) outs(%[[Y]] : memref<?xf32, strided<[1], offset: ?>>)
//       CHECK:     } {xfmr.independent_iterations}
//       CHECK:   } else {
//       CHECK:     linalg.generic {{.*}} ins(%{{.*}}, %{{.*}} : memref<?x64xf32>, memref<64xf32>) outs(%{{.*}} : memref<?xf32>)
func.func @row_sums(%x: memref<?x64xf32>, %w: memref<64xf32>, %y: memref<?xf32>) {
  linalg.generic {indexing_maps = [#row, #wt, #out], iterator_types = ["parallel", "reduction"]}
      ins(%x, %w : memref<?x64xf32>, memref<64xf32>) outs(%y : memref<?xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %o, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// [batch, sequence, 32] with both dynamic: the rows are in the first or the
// second loop, so the batch is split when it has 64 rows, else the sequence;
// linalg.index of the split loop counts from the block's first row.
#id3 = affine_map<(b, s, h) -> (b, s, h)>
// CHECK-LABEL: func.func @positions
//       CHECK:   scf.if %{{.*}} {
//       CHECK:     scf.for
//       CHECK:       memref.subview %{{.*}}[%{{.*}}, 0, 0]
//       CHECK:       linalg.generic
//       CHECK:         %[[B:.*]] = linalg.index 1
//       CHECK:         arith.index_cast %[[B]]
//       CHECK:   } else {
//       CHECK:     scf.if %{{.*}} {
//       CHECK:       scf.for
//       CHECK:         memref.subview %{{.*}}[0, %{{.*}}, 0]
//       CHECK:         linalg.generic
//       CHECK:           %[[S:.*]] = linalg.index 1
//       CHECK:           arith.addi %[[S]], %{{.*}} : index
//       CHECK:     } else {
//       CHECK:       linalg.generic
func.func @positions(%y: memref<?x?x32xi64>) {
  linalg.generic {indexing_maps = [#id3], iterator_types = ["parallel", "parallel", "parallel"]}
      outs(%y : memref<?x?x32xi64>) {
  ^bb0(%o: i64):
    %s = linalg.index 1 : index
    %v = arith.index_cast %s : index to i64
    linalg.yield %v : i64
  }
  return
}

// -----

// Left alone: a reduction first (a product's k loop), a loop an operand uses
// in a compound expression, a small static op (8 x 128: fewer than 16384
// iterations) and an op inside a loop (an attention tile).
#k = affine_map<(k, m) -> (m, k)>
#o = affine_map<(k, m) -> (m)>
#shift = affine_map<(m, n) -> (m + n)>
#plain = affine_map<(m, n) -> (m, n)>
#o2 = affine_map<(m, n) -> (m)>
// CHECK-LABEL: func.func @left_alone
//   CHECK-NOT:   scf.if
//   CHECK-NOT:   memref.subview
func.func @left_alone(%x: memref<?x?xf32>, %y: memref<?xf32>, %s: memref<?xf32>, %z: memref<?x?xf32>,
                      %small: memref<8x128xf32>, %n: index) {
  linalg.generic {indexing_maps = [#k, #o], iterator_types = ["reduction", "parallel"]}
      ins(%x : memref<?x?xf32>) outs(%y : memref<?xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.addf %a, %o : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [#shift, #plain], iterator_types = ["parallel", "parallel"]}
      ins(%s : memref<?xf32>) outs(%z : memref<?x?xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  }
  linalg.generic {indexing_maps = [#plain], iterator_types = ["parallel", "parallel"]}
      outs(%small : memref<8x128xf32>) {
  ^bb0(%o: f32):
    %r = arith.addf %o, %o : f32
    linalg.yield %r : f32
  }
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    linalg.generic {indexing_maps = [#plain], iterator_types = ["parallel", "parallel"]}
        outs(%z : memref<?x?xf32>) {
    ^bb0(%o: f32):
      %r = arith.addf %o, %o : f32
      linalg.yield %r : f32
    }
  }
  return
}

// -----

// A copy (the copy of A behind the int8 kernels) is made a generic and
// split like the rest.
// CHECK-LABEL: func.func @copy
//       CHECK:   scf.for
//       CHECK:     linalg.generic
//   CHECK-NOT:   linalg.copy
func.func @copy(%x: memref<?x64xf32>, %y: memref<?x64xf32>) {
  linalg.copy ins(%x : memref<?x64xf32>) outs(%y : memref<?x64xf32>)
  return
}

// -----

// A sum that may be reassociated (RMSNorm's sum of squares): LLVM could
// vectorize a split copy and an unsplit copy differently, so there is no
// unsplit copy: the loop over blocks of rows runs for every row count and a
// row's result does not depend on the batch.
#plain = affine_map<(m, n) -> (m, n)>
#o2 = affine_map<(m, n) -> (m)>
// CHECK-LABEL: func.func @reassociated_sum
//   CHECK-NOT:   scf.if
//       CHECK:   %[[ROWS:.*]] = memref.dim %{{.*}}, %c0
//       CHECK:   scf.for %[[I:.*]] = %{{.*}} to %[[ROWS]] step %c16
//       CHECK:     memref.subview %{{.*}}[%[[I]], 0]
//       CHECK:     linalg.generic
//       CHECK:       arith.addf %{{.*}}, %{{.*}} fastmath<reassoc>
//       CHECK:   } {xfmr.independent_iterations}
//   CHECK-NOT:   linalg.generic
//       CHECK:   return
func.func @reassociated_sum(%z: memref<?x1024xf32>, %s: memref<?xf32>) {
  linalg.generic {indexing_maps = [#plain, #o2], iterator_types = ["parallel", "reduction"]}
      ins(%z : memref<?x1024xf32>) outs(%s : memref<?xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.addf %o, %a fastmath<reassoc> : f32
    linalg.yield %r : f32
  }
  return
}
