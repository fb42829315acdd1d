// RUN: xfmr-opt %s --split-input-file --convert-xfmr-to-linalg | FileCheck %s

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
// CHECK: func.func private @xfmr_uk_moe_f32(!llvm.ptr, i64, i64, i64, i64, i64, i64, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr)
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

// -----

// DeepSeek-V3's routing: the flags carry renormalisation (1), sigmoid
// scoring (2), a selection bias (16), 4 groups (<< 16) of which the top 2
// (<< 24) are kept: 1 + 2 + 16 + 262144 + 33554432; the constants buffer
// holds the routed scale, the SwiGLU defaults and the bias: 4 + 8 floats.
// CHECK-LABEL: func.func @moe_sigmoid_groups(
// CHECK-DAG: %[[FLAGS:.*]] = arith.constant 33816595 : i64
// CHECK-DAG: arith.constant dense_resource<xfmr_moe_constants{{.*}}> : tensor<12xf32>
// CHECK: func.call @xfmr_uk_moe_f32({{.*}}, %[[FLAGS]], {{.*}})
func.func @moe_sigmoid_groups(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %r = arith.constant dense<[[-0.52, 0.09, -0.26, 0.21, 0.25, -0.87, -0.97, 0.67], [-0.48, -0.53, 0.99, -0.06, 0.67, -0.05, 0.28, -0.70], [0.27, 0.74, 0.05, 0.48, 0.34, -0.87, 0.52, 0.18], [-0.40, -0.94, 0.73, -0.05, 0.44, 0.76, 0.43, 0.84]]> : tensor<4x8xf32>
  %b = arith.constant dense<[0.1, -0.2, 0.3, 0.0, 0.5, -0.1, 0.2, 0.4]> : tensor<8xf32>
  %g = arith.constant dense<[[[-0.21, 0.60], [-0.11, 0.87], [0.76, -0.81], [-0.73, -0.57]], [[0.93, -0.13], [0.25, -0.40], [0.01, -0.23], [-0.30, 0.17]], [[0.17, 0.81], [0.36, 0.86], [0.71, 0.98], [0.34, -0.67]], [[0.72, 0.93], [0.81, 0.14], [0.43, -0.58], [0.66, 0.15]], [[-0.43, -0.87], [0.71, 0.98], [-0.82, 0.60], [-0.18, -0.70]], [[-0.41, 0.54], [0.75, -0.91], [0.23, -0.91], [0.44, -0.34]], [[0.76, 0.96], [0.01, 1.00], [-0.38, -0.85], [0.20, -0.94]], [[-0.61, -0.18], [0.22, -0.69], [-0.92, 0.74], [-0.37, 0.92]]]> : tensor<8x4x2xf32>
  %u = arith.constant dense<[[[0.79, -0.24], [-0.08, 0.04], [0.29, 0.19], [0.12, 0.24]], [[0.88, 0.01], [-0.14, 0.44], [-0.52, -0.40], [0.96, 0.04]], [[0.10, -0.98], [-0.17, 0.16], [-0.96, 0.23], [0.26, -0.88]], [[0.25, -0.07], [0.36, -0.29], [0.41, 0.48], [-0.96, -0.88]], [[0.35, 0.93], [-0.50, -0.09], [0.19, -0.36], [-0.27, -0.37]], [[-0.26, 0.19], [-0.40, -0.25], [0.54, -0.95], [0.14, 0.47]], [[-0.38, -0.55], [0.61, -0.52], [-0.63, -0.13], [0.40, -0.80]], [[-0.36, -0.33], [0.67, -0.12], [0.71, -0.66], [-0.33, 0.30]]]> : tensor<8x4x2xf32>
  %d = arith.constant dense<[[[0.77, -0.10, -0.55, -0.76], [0.06, -0.62, 0.61, 0.68]], [[-0.63, -0.44, 0.61, 0.28], [0.61, -0.31, -0.74, -0.42]], [[0.59, -0.46, -0.31, -0.17], [-0.16, -0.18, 0.84, -0.69]], [[-0.99, 0.89, 0.76, 0.97], [-0.13, 0.90, 0.85, -0.56]], [[0.49, 0.67, 0.33, 0.04], [-0.42, -0.32, -0.55, -0.86]], [[0.18, -0.43, 0.62, -0.91], [0.81, 0.39, 0.85, 0.79]], [[0.80, 0.15, -0.97, 0.49], [-0.66, -0.40, 0.33, 0.05]], [[-0.17, 0.88, 0.22, -0.32], [-0.50, 0.72, -0.05, 0.56]]]> : tensor<8x2x4xf32>
  %y = xfmr.moe silu %x, %r, %g, %u, %d selection_bias(%b : tensor<8xf32>)
      {groups = 4 : i64, normalize_top_k = true, routed_scale = 2.5 : f32, scoring = "sigmoid",
       top_groups = 2 : i64, top_k = 2 : i64}
      : tensor<?x4xf32>, tensor<4x8xf32>, tensor<8x4x2xf32>, tensor<8x4x2xf32>, tensor<8x2x4xf32>
  return %y : tensor<?x4xf32>
}
