// RUN: xfmr-opt %s --convert-xfmr-to-linalg | FileCheck %s

// xfmr.moe with constant f32 weights: the weights packed at compile time
// into xfmr_uk_moe_f32's 16-column panels (router [H=4, E=4] -> 1 panel x
// 4 rows x 16; gate/up [4][4, 2] -> 4 x 4 x 16 each; down [4][2, 4] -> 4 x 2
// x 16), the tokens copied into a buffer of their own, and one kernel call
// below 64 tokens or a loop of 32-token calls marked independent (split
// across threads) from 64 on; then the combine of expert parallelism.

// CHECK-LABEL: func.func @moe(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<?x4xf32>
// CHECK-DAG: arith.constant dense_resource<xfmr_moe_panels{{.*}}> : tensor<64xf32>
// CHECK-DAG: arith.constant dense_resource<xfmr_moe_panels{{.*}}> : tensor<256xf32>
// CHECK-DAG: arith.constant dense_resource<xfmr_moe_panels{{.*}}> : tensor<128xf32>
// CHECK: %[[COPY:.*]] = linalg.copy {xfmr.kernel_input} ins(%[[X]] : tensor<?x4xf32>)
// CHECK: bufferization.to_buffer %[[COPY]] read_only
// CHECK: %[[OUT:.*]] = memref.alloc(%{{.*}}) : memref<?x4xf32>
// CHECK: %[[MANY:.*]] = arith.cmpi sge, %{{.*}}, %c64_i64
// CHECK: scf.if %[[MANY]] {
// CHECK: scf.for
// CHECK: func.call @xfmr_uk_moe_f32(
// CHECK: } {xfmr.independent_iterations}
// CHECK: } else {
// CHECK: func.call @xfmr_uk_moe_f32(
// CHECK: call @xfmr_uk_moe_combine(
// CHECK: bufferization.to_tensor %[[OUT]] restrict writable
// CHECK: func.func private @xfmr_uk_moe_f32(!llvm.ptr, i64, i64, i64, i64, i64, i64, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr)
// CHECK: func.func private @xfmr_uk_moe_combine(!llvm.ptr, i64)
func.func @moe(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %r = arith.constant dense<[[0.1, 0.2, 0.3, 0.4], [0.5, 0.6, 0.7, 0.8], [0.9, 1.0, 1.1, 1.2], [1.3, 1.4, 1.5, 1.6]]> : tensor<4x4xf32>
  %g = arith.constant dense<[[[0.1, 0.2], [0.3, 0.4], [0.5, 0.6], [0.7, 0.8]], [[0.9, 1.0], [1.1, 1.2], [1.3, 1.4], [1.5, 1.6]], [[0.1, 0.2], [0.3, 0.4], [0.5, 0.6], [0.7, 0.8]], [[0.9, 1.0], [1.1, 1.2], [1.3, 1.4], [1.5, 1.6]]]> : tensor<4x4x2xf32>
  %u = arith.constant dense<[[[0.2, 0.2], [0.3, 0.4], [0.5, 0.6], [0.7, 0.8]], [[0.9, 1.0], [1.1, 1.2], [1.3, 1.4], [1.5, 1.6]], [[0.1, 0.2], [0.3, 0.4], [0.5, 0.6], [0.7, 0.8]], [[0.9, 1.0], [1.1, 1.2], [1.3, 1.4], [1.5, 1.6]]]> : tensor<4x4x2xf32>
  %d = arith.constant dense<[[[0.1, 0.2, 0.3, 0.4], [0.5, 0.6, 0.7, 0.8]], [[0.9, 1.0, 1.1, 1.2], [1.3, 1.4, 1.5, 1.6]], [[0.1, 0.2, 0.3, 0.4], [0.5, 0.6, 0.7, 0.8]], [[0.9, 1.0, 1.1, 1.2], [1.3, 1.4, 1.5, 1.6]]]> : tensor<4x2x4xf32>
  %y = xfmr.moe silu %x, %r, %g, %u, %d {normalize_top_k = true, top_k = 2 : i64}
      : tensor<?x4xf32>, tensor<4x4xf32>, tensor<4x4x2xf32>, tensor<4x4x2xf32>, tensor<4x2x4xf32>
  return %y : tensor<?x4xf32>
}
