// RUN: xfmr-opt %s --convert-xfmr-to-linalg --split-input-file | FileCheck %s

// Lowering of xfmr.rms_norm and xfmr.layer_norm: a last-dim reduction into a
// tensor of one rank less (computed in f32), then one elementwise generic.

// bf16 activations with f32 weights: the sum of squares is accumulated in
// f32 and the output rounded back to bf16.
// CHECK-LABEL: func.func @rms_norm_bf16(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<2x16x64xbf16>, %[[W:[a-z0-9]+]]: tensor<64xf32>
// CHECK: %[[INIT:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<2x16xf32>)
// CHECK: %[[SUMSQ:.*]] = linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel", "reduction"]
// CHECK-SAME: ins(%[[X]] : tensor<2x16x64xbf16>) outs(%[[INIT]] : tensor<2x16xf32>)
// CHECK: arith.extf %{{.*}} : bf16 to f32
// CHECK: arith.mulf
// CHECK: arith.addf {{.*}} fastmath<reassoc>
// CHECK: %[[Y:.*]] = linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel", "parallel"]
// CHECK-SAME: ins(%[[X]], %[[SUMSQ]], %[[W]] : tensor<2x16x64xbf16>, tensor<2x16xf32>, tensor<64xf32>)
// CHECK: arith.divf
// CHECK: math.sqrt
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK: return %[[Y]]
func.func @rms_norm_bf16(%x: tensor<2x16x64xbf16>, %w: tensor<64xf32>)
    -> tensor<2x16x64xbf16> {
  %y = xfmr.rms_norm %x, %w {epsilon = 1.0e-05 : f32}
      : tensor<2x16x64xbf16>, tensor<64xf32>
  return %y : tensor<2x16x64xbf16>
}

// -----

// Dynamic rows and features: every tensor.empty takes its sizes from
// tensor.dim, and the row length is converted from the last dim at run time.
// CHECK-LABEL: func.func @rms_norm_dynamic(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<?x?xf16>
// CHECK: %[[D:.*]] = tensor.dim %[[X]], %{{.*}} : tensor<?x?xf16>
// CHECK: %[[D64:.*]] = arith.index_cast %[[D]] : index to i64
// CHECK: arith.sitofp %[[D64]] : i64 to f32
// CHECK: tensor.empty(%{{.*}}) : tensor<?xf32>
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]
// CHECK-SAME: outs(%{{.*}} : tensor<?xf32>)
// CHECK: tensor.empty(%{{.*}}, %{{.*}}) : tensor<?x?xf16>
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel"]
// CHECK: math.sqrt
// CHECK: arith.truncf %{{.*}} : f32 to f16
func.func @rms_norm_dynamic(%x: tensor<?x?xf16>, %w: tensor<?xf16>) -> tensor<?x?xf16> {
  %y = xfmr.rms_norm %x, %w {epsilon = 1.0e-06 : f32} : tensor<?x?xf16>, tensor<?xf16>
  return %y : tensor<?x?xf16>
}

// -----

// Layer norm with a bias: a sum, a sum of squared deviations from the mean
// (which reads the first sum per row), then the output; all in f32 already.
// CHECK-LABEL: func.func @layer_norm_bias(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<2x16x64xf32>, %[[W:[a-z0-9]+]]: tensor<64xf32>, %[[B:[a-z0-9]+]]: tensor<64xf32>
// CHECK: %[[SUM:.*]] = linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel", "reduction"]
// CHECK-SAME: ins(%[[X]] : tensor<2x16x64xf32>)
// CHECK: %[[SQ:.*]] = linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel", "reduction"]
// CHECK-SAME: ins(%[[X]], %[[SUM]] : tensor<2x16x64xf32>, tensor<2x16xf32>)
// CHECK: arith.subf
// CHECK: arith.mulf
// CHECK: arith.addf
// CHECK: %[[Y:.*]] = linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel", "parallel"]
// CHECK-SAME: ins(%[[X]], %[[SUM]], %[[SQ]], %[[W]], %[[B]] :
// CHECK: math.sqrt
// CHECK-NOT: arith.truncf
// CHECK: return %[[Y]]
func.func @layer_norm_bias(%x: tensor<2x16x64xf32>, %w: tensor<64xf32>, %b: tensor<64xf32>)
    -> tensor<2x16x64xf32> {
  %y = xfmr.layer_norm %x, %w, %b {epsilon = 1.0e-05 : f32}
      : tensor<2x16x64xf32>, tensor<64xf32>, tensor<64xf32>
  return %y : tensor<2x16x64xf32>
}

// -----

// Layer norm without a bias on dynamic rows of f16: the output generic reads
// only the weight after the two statistics.
// CHECK-LABEL: func.func @layer_norm_no_bias_dynamic(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<?x768xf16>, %[[W:[a-z0-9]+]]: tensor<768xf16>
// CHECK: tensor.dim %[[X]], %{{.*}} : tensor<?x768xf16>
// CHECK: %[[SUM:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]
// CHECK-SAME: outs(%{{.*}} : tensor<?xf32>)
// CHECK: %[[SQ:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel"]
// CHECK-SAME: ins(%[[X]], %[[SUM]], %[[SQ]], %[[W]] : tensor<?x768xf16>, tensor<?xf32>, tensor<?xf32>, tensor<768xf16>)
// CHECK-SAME: outs(%{{.*}} : tensor<?x768xf16>)
// CHECK: math.sqrt
// CHECK: arith.truncf %{{.*}} : f32 to f16
func.func @layer_norm_no_bias_dynamic(%x: tensor<?x768xf16>, %w: tensor<768xf16>)
    -> tensor<?x768xf16> {
  %y = xfmr.layer_norm %x, %w {epsilon = 1.0e-05 : f32} : tensor<?x768xf16>, tensor<768xf16>
  return %y : tensor<?x768xf16>
}
