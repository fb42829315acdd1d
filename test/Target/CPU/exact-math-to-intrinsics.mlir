// RUN: xfmr-opt %s -xfmr-exact-math-to-intrinsics | FileCheck %s

// Exact f32/f64 ops become LLVM intrinsics (convert-math-to-libm would call
// fmaf, floorf, ceilf, truncf, roundf, roundevenf).
// CHECK-LABEL: func.func @exact
// CHECK: %[[F:.*]] = llvm.intr.fma(%{{.*}}, %{{.*}}, %{{.*}}) : (vector<8xf32>, vector<8xf32>, vector<8xf32>) -> vector<8xf32>
// CHECK: %[[L:.*]] = llvm.intr.floor(%[[F]]) : (vector<8xf32>) -> vector<8xf32>
// CHECK: %[[C:.*]] = llvm.intr.ceil(%[[L]]) : (vector<8xf32>) -> vector<8xf32>
// CHECK: %[[T:.*]] = llvm.intr.trunc(%[[C]]) : (vector<8xf32>) -> vector<8xf32>
// CHECK: %[[R:.*]] = llvm.intr.round(%[[T]]) : (vector<8xf32>) -> vector<8xf32>
// CHECK: llvm.intr.roundeven(%[[R]]) : (vector<8xf32>) -> vector<8xf32>
// CHECK-NOT: math.
func.func @exact(%a: vector<8xf32>, %b: vector<8xf32>) -> vector<8xf32> {
  %f = math.fma %a, %b, %a : vector<8xf32>
  %l = math.floor %f : vector<8xf32>
  %c = math.ceil %l : vector<8xf32>
  %t = math.trunc %c : vector<8xf32>
  %r = math.round %t : vector<8xf32>
  %e = math.roundeven %r : vector<8xf32>
  return %e : vector<8xf32>
}

// f64 too; other math ops and other types stay.
// CHECK-LABEL: func.func @others
// CHECK: llvm.intr.floor(%{{.*}}) : (f64) -> f64
// CHECK: math.exp %{{.*}} : f64
// CHECK: math.floor %{{.*}} : f16
func.func @others(%x: f64, %h: f16) -> (f64, f16) {
  %l = math.floor %x : f64
  %e = math.exp %l : f64
  %hf = math.floor %h : f16
  return %e, %hf : f64, f16
}
