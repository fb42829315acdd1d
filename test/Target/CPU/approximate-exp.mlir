// RUN: xfmr-opt %s -xfmr-approximate-exp | FileCheck %s

// f32 exp becomes the polynomial: no math.exp (so no expf call) is left.
// CHECK-LABEL: func.func @silu
// CHECK-NOT: math.exp
// CHECK: math.fma
// CHECK: math.floor
// CHECK: math.fma
// CHECK: arith.shli
// CHECK: arith.bitcast
// CHECK-NOT: math.exp
// CHECK: return
func.func @silu(%x: f32) -> f32 {
  %one = arith.constant 1.0 : f32
  %n = arith.negf %x : f32
  %e = math.exp %n : f32
  %d = arith.addf %one, %e : f32
  %r = arith.divf %x, %d : f32
  return %r : f32
}

// Only f32 is rewritten (16-bit floats are widened to f32 before this pass).
// CHECK-LABEL: func.func @f64
// CHECK: math.exp %{{.*}} : f64
func.func @f64(%x: f64) -> f64 {
  %e = math.exp %x : f64
  return %e : f64
}

