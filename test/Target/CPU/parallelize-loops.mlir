// RUN: xfmr-opt %s --split-input-file --xfmr-parallelize-loops | FileCheck %s

// A marked loop without results becomes scf.parallel with the same body.
// CHECK-LABEL: func.func @marked
//       CHECK:   scf.parallel (%[[I:.*]]) = (%{{.*}}) to (%{{.*}}) step (%{{.*}}) {
//       CHECK:     memref.store %{{.*}}, %{{.*}}[%[[I]]]
//   CHECK-NOT:   scf.for
func.func @marked(%out: memref<?xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %v = arith.constant 1.0 : f32
  scf.for %i = %c0 to %n step %c1 {
    memref.store %v, %out[%i] : memref<?xf32>
  } {xfmr.independent_iterations}
  return
}

// -----

// Unmarked loops, and marked loops that carry values, stay sequential.
// CHECK-LABEL: func.func @left_alone
//   CHECK-NOT:   scf.parallel
//       CHECK:   scf.for
//       CHECK:   scf.for
func.func @left_alone(%out: memref<?xf32>, %n: index) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %v = arith.constant 1.0 : f32
  scf.for %i = %c0 to %n step %c1 {
    memref.store %v, %out[%i] : memref<?xf32>
  }
  %s = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %v) -> f32 {
    %x = arith.addf %acc, %v : f32
    scf.yield %x : f32
  } {xfmr.independent_iterations}
  return %s : f32
}
