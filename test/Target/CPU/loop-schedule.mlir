// RUN: xfmr-opt %s --split-input-file --xfmr-loop-schedule | FileCheck %s
// RUN: xfmr-opt %s --split-input-file --xfmr-loop-schedule="kind=dynamic chunk=4" | FileCheck %s --check-prefix=DYN
// RUN: xfmr-opt %s --split-input-file --xfmr-loop-schedule=kind=runtime | FileCheck %s --check-prefix=RT
// RUN: xfmr-opt %s --split-input-file --xfmr-loop-schedule=kind=static | FileCheck %s --check-prefix=STATIC
// RUN: not xfmr-opt %s --split-input-file --xfmr-loop-schedule=kind=auto 2>&1 | FileCheck %s --check-prefix=BAD

// convert-scf-to-openmp's loop (no schedule) gets a guided one with a
// chunk of the induction variable's type; dynamic takes the chunk given,
// runtime has none, static leaves the loop as it was.
// CHECK-LABEL: func.func @unscheduled
//       CHECK:   omp.parallel
//       CHECK:     %[[C:.*]] = arith.constant 1 : index
//       CHECK:     omp.wsloop schedule(guided = %[[C]] : index)
// DYN-LABEL: func.func @unscheduled
//       DYN:     %[[C:.*]] = arith.constant 4 : index
//       DYN:     omp.wsloop schedule(dynamic = %[[C]] : index)
// RT-LABEL: func.func @unscheduled
//       RT:     omp.wsloop schedule(runtime) {
// STATIC-LABEL: func.func @unscheduled
//   STATIC-NOT:   schedule
// BAD: xfmr-loop-schedule: kind must be static, dynamic, guided or runtime, not 'auto'
func.func @unscheduled(%out: memref<?xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %v = arith.constant 1.0 : f32
  omp.parallel {
    omp.wsloop {
      omp.loop_nest (%i) : index = (%c0) to (%n) step (%c1) {
        memref.store %v, %out[%i] : memref<?xf32>
        omp.yield
      }
    }
    omp.terminator
  }
  return
}

// -----

// A loop that already has a schedule keeps it.
// CHECK-LABEL: func.func @scheduled
//       CHECK:   omp.wsloop schedule(static) {
// DYN-LABEL: func.func @scheduled
//       DYN:   omp.wsloop schedule(static) {
// STATIC-LABEL: func.func @scheduled
//       STATIC:   omp.wsloop schedule(static) {
func.func @scheduled(%out: memref<?xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %v = arith.constant 1.0 : f32
  omp.parallel {
    omp.wsloop schedule(static) {
      omp.loop_nest (%i) : index = (%c0) to (%n) step (%c1) {
        memref.store %v, %out[%i] : memref<?xf32>
        omp.yield
      }
    }
    omp.terminator
  }
  return
}
