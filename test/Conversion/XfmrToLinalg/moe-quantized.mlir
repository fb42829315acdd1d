// RUN: xfmr-opt %s --convert-xfmr-to-linalg | FileCheck %s

// xfmr.moe with int8 experts (xfmr-quantize-experts): each expert matrix
// packed by xfmr_uk_pack_narrow (one byte a weight; gate/up [4][4, 2] -> 4
// x 4 x 16 bytes, down [4][2, 4] -> 4 x 2 x 16), the scales as f32 buffers,
// the router still in f32 panels, and xfmr_uk_moe_narrow called with the
// int8 format (2).

// CHECK-LABEL: func.func @moe_int8(
// CHECK-DAG: arith.constant dense_resource<xfmr_moe_panels{{.*}}> : tensor<64xf32>
// CHECK-DAG: arith.constant dense_resource<xfmr_moe_narrow_panels{{.*}}> : tensor<256xi8>
// CHECK-DAG: arith.constant dense_resource<xfmr_moe_narrow_panels{{.*}}> : tensor<128xi8>
// CHECK-DAG: arith.constant dense_resource<xfmr_moe_scales{{.*}}> : tensor<8xf32>
// CHECK-DAG: arith.constant dense_resource<xfmr_moe_scales{{.*}}> : tensor<16xf32>
// CHECK-DAG: %[[FMT:.*]] = arith.constant 2 : i64
// CHECK: func.call @xfmr_uk_moe_narrow({{.*}}, %[[FMT]], {{.*}})
// CHECK: call @xfmr_uk_moe_combine(
// CHECK: func.func private @xfmr_uk_moe_narrow(!llvm.ptr, i64, i64, i64, i64, i64, i64, i64, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr)
func.func @moe_int8(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %r = arith.constant dense<[[0.1, 0.2, 0.3, 0.4], [0.5, 0.6, 0.7, 0.8], [0.9, 1.0, 1.1, 1.2], [1.3, 1.4, 1.5, 1.6]]> : tensor<4x4xf32>
  %g = arith.constant dense<[[[1, 2], [3, 4], [5, 6], [7, 8]], [[9, 10], [11, 12], [13, 14], [15, 16]], [[-1, -2], [-3, -4], [-5, -6], [-7, -8]], [[9, 10], [11, 12], [13, 14], [15, 16]]]> : tensor<4x4x2xi8>
  %d = arith.constant dense<[[[1, 2, 3, 4], [5, 6, 7, 8]], [[9, 10, 11, 12], [13, 14, 15, 16]], [[1, 2, 3, 4], [5, 6, 7, 8]], [[9, 10, 11, 12], [13, 14, 15, 16]]]> : tensor<4x2x4xi8>
  %sg = arith.constant dense<[[0.1, 0.2], [0.3, 0.4], [0.5, 0.6], [0.7, 0.8]]> : tensor<4x2xf32>
  %sd = arith.constant dense<[[0.1, 0.2, 0.3, 0.4], [0.5, 0.6, 0.7, 0.8], [0.9, 1.0, 1.1, 1.2], [1.3, 1.4, 1.5, 1.6]]> : tensor<4x4xf32>
  %y = xfmr.moe silu %x, %r, %g, %g, %d scales(%sg, %sg, %sd : tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x4xf32>)
      {normalize_top_k = true, top_k = 2 : i64}
      : tensor<?x4xf32>, tensor<4x4xf32>, tensor<4x4x2xi8>, tensor<4x4x2xi8>, tensor<4x2x4xi8>
  return %y : tensor<?x4xf32>
}
