// RUN: xfmr-opt %s -xfmr-approximate-exp | FileCheck %s

// f32 exp becomes the polynomial: no math.exp (so no expf call) is left,
// and its FMAs and floor are LLVM intrinsics (not fmaf / floorf calls).
// CHECK-LABEL: func.func @silu
// CHECK-NOT: math.
// CHECK: llvm.intr.fma
// CHECK: llvm.intr.floor
// CHECK: llvm.intr.fma
// CHECK: arith.shli
// CHECK: arith.bitcast
// CHECK-NOT: math.
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

// Any math.fma / math.floor becomes the intrinsic.
// CHECK-LABEL: func.func @fma_floor
// CHECK: %[[F:.*]] = llvm.intr.fma(%{{.*}}, %{{.*}}, %{{.*}}) : (vector<8xf32>, vector<8xf32>, vector<8xf32>) -> vector<8xf32>
// CHECK: llvm.intr.floor(%[[F]]) : (vector<8xf32>) -> vector<8xf32>
func.func @fma_floor(%a: vector<8xf32>, %b: vector<8xf32>) -> vector<8xf32> {
  %f = math.fma %a, %b, %a : vector<8xf32>
  %r = math.floor %f : vector<8xf32>
  return %r : vector<8xf32>
}
