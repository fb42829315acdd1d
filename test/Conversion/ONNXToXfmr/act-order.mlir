// RUN: xfmr-opt %s --split-input-file --xfmr-raise=report=true | FileCheck %s

// xfmr-raise on MatMulNBits with g_idx (GPTQ act-order): the rows are sorted
// by group at compile time (their 4-bit fields repacked) and A's columns are
// gathered the same way, leaving a MatMulNBits without g_idx.

// Rows 0-31 are group 1 (q = 1), rows 32-63 group 0 (q = 2): sorted, each
// column's bytes start with group 0's 0x22s.
// CHECK-LABEL: xfmr-raise @act_order: formed 1 act_order; 0 candidate(s) left unfused
// CHECK-LABEL: func.func @act_order(
// CHECK-SAME: %[[A:[a-z0-9]+]]: tensor<3x64xf32>
// CHECK-DAG: %[[P:.*]] = onnx.Constant() {value = dense<[32, 33, {{.*}}, 63, 0, 1, {{.*}}, 31]> : tensor<64xi64>}
// CHECK-DAG: %[[B:.*]] = onnx.Constant() {value = dense_resource<xfmr_act_order_weights> : tensor<2x2x16xui8>}
// CHECK: %[[G:.*]] = onnx.Gather(%[[A]], %[[P]]) {axis = 1 : i64} : (tensor<3x64xf32>, tensor<64xi64>) -> tensor<3x64xf32>
// CHECK: onnx.ms.MatMulNBits(%[[G]], %[[B]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) {K = 64 : i64, N = 2 : i64, block_size = 32 : i64} : (tensor<3x64xf32>, tensor<2x2x16xui8>, tensor<4xf32>, none, none, none) -> tensor<3x2xf32>
// CHECK: xfmr_act_order_weights: "0x4000000022222222222222222222222222222222111111111111111111111111111111112222222222222222222222222222222211111111111111111111111111111111"
func.func @act_order(%a: tensor<3x64xf32>) -> tensor<3x2xf32> {
  %none = onnx.NoValue : none
  %b = onnx.Constant() {value = dense<[[[17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17], [34, 34, 34, 34, 34, 34, 34, 34, 34, 34, 34, 34, 34, 34, 34, 34]], [[17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17], [34, 34, 34, 34, 34, 34, 34, 34, 34, 34, 34, 34, 34, 34, 34, 34]]]> : tensor<2x2x16xui8>} : () -> tensor<2x2x16xui8>
  %s = onnx.Constant() {value = dense<[0.5, 0.25, 0.125, 1.0]> : tensor<4xf32>} : () -> tensor<4xf32>
  %g = onnx.Constant() {value = dense<[1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]> : tensor<64xi32>} : () -> tensor<64xi32>
  %y = onnx.ms.MatMulNBits(%a, %b, %s, %none, %g, %none) {K = 64 : i64, N = 2 : i64, bits = 4 : i64, block_size = 32 : i64} : (tensor<3x64xf32>, tensor<2x2x16xui8>, tensor<4xf32>, none, tensor<64xi32>, none) -> tensor<3x2xf32>
  return %y : tensor<3x2xf32>
}

// -----

// g_idx = k / block_size: already in block order, only g_idx goes.
// CHECK-LABEL: xfmr-raise @act_order_identity: formed 1 act_order; 0 candidate(s) left unfused
// CHECK-LABEL: func.func @act_order_identity(
// CHECK-NOT: onnx.Gather
// CHECK: onnx.ms.MatMulNBits({{.*}} : (tensor<3x64xf32>, tensor<2x2x16xui8>, tensor<4xf32>, none, none, none) -> tensor<3x2xf32>
func.func @act_order_identity(%a: tensor<3x64xf32>) -> tensor<3x2xf32> {
  %none = onnx.NoValue : none
  %b = onnx.Constant() {value = dense<[[[17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17], [34, 34, 34, 34, 34, 34, 34, 34, 34, 34, 34, 34, 34, 34, 34, 34]], [[17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17], [34, 34, 34, 34, 34, 34, 34, 34, 34, 34, 34, 34, 34, 34, 34, 34]]]> : tensor<2x2x16xui8>} : () -> tensor<2x2x16xui8>
  %s = onnx.Constant() {value = dense<[0.5, 0.25, 0.125, 1.0]> : tensor<4xf32>} : () -> tensor<4xf32>
  %g = onnx.Constant() {value = dense<[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]> : tensor<64xi32>} : () -> tensor<64xi32>
  %y = onnx.ms.MatMulNBits(%a, %b, %s, %none, %g, %none) {K = 64 : i64, N = 2 : i64, bits = 4 : i64, block_size = 32 : i64} : (tensor<3x64xf32>, tensor<2x2x16xui8>, tensor<4xf32>, none, tensor<64xi32>, none) -> tensor<3x2xf32>
  return %y : tensor<3x2xf32>
}

// -----

// Groups of 40 and 24 rows: not blocks of 32.
// CHECK-LABEL: xfmr-raise @act_order_uneven_groups: formed nothing; 1 candidate(s) left unfused
// CHECK-NEXT: unfused act_order at node 'mm' (ms.MatMulNBits): g_idx's groups are not block_size rows each
func.func @act_order_uneven_groups(%a: tensor<3x64xf32>) -> tensor<3x2xf32> {
  %none = onnx.NoValue : none
  %b = onnx.Constant() {value = dense<[[[17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17], [34, 34, 34, 34, 34, 34, 34, 34, 34, 34, 34, 34, 34, 34, 34, 34]], [[17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17], [34, 34, 34, 34, 34, 34, 34, 34, 34, 34, 34, 34, 34, 34, 34, 34]]]> : tensor<2x2x16xui8>} : () -> tensor<2x2x16xui8>
  %s = onnx.Constant() {value = dense<[0.5, 0.25, 0.125, 1.0]> : tensor<4xf32>} : () -> tensor<4xf32>
  %g = onnx.Constant() {value = dense<[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]> : tensor<64xi32>} : () -> tensor<64xi32>
  %y = onnx.ms.MatMulNBits(%a, %b, %s, %none, %g, %none) {K = 64 : i64, N = 2 : i64, bits = 4 : i64, block_size = 32 : i64} : (tensor<3x64xf32>, tensor<2x2x16xui8>, tensor<4xf32>, none, tensor<64xi32>, none) -> tensor<3x2xf32> loc("mm"("ms.MatMulNBits"))
  return %y : tensor<3x2xf32>
}

// -----

// Packed zero points: onnxruntime 1.32 ignores them when g_idx is given.
// CHECK-LABEL: xfmr-raise @act_order_packed_zero_points: formed nothing; 1 candidate(s) left unfused
// CHECK-NEXT: unfused act_order at node 'mm' (ms.MatMulNBits): g_idx with uint8 zero points (onnxruntime 1.32 ignores them; give float zero points or none)
func.func @act_order_packed_zero_points(%a: tensor<3x64xf32>) -> tensor<3x2xf32> {
  %none = onnx.NoValue : none
  %b = onnx.Constant() {value = dense<[[[17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17], [34, 34, 34, 34, 34, 34, 34, 34, 34, 34, 34, 34, 34, 34, 34, 34]], [[17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17], [34, 34, 34, 34, 34, 34, 34, 34, 34, 34, 34, 34, 34, 34, 34, 34]]]> : tensor<2x2x16xui8>} : () -> tensor<2x2x16xui8>
  %s = onnx.Constant() {value = dense<[0.5, 0.25, 0.125, 1.0]> : tensor<4xf32>} : () -> tensor<4xf32>
  %z = onnx.Constant() {value = dense<[136, 136]> : tensor<2xui8>} : () -> tensor<2xui8>
  %g = onnx.Constant() {value = dense<[1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]> : tensor<64xi32>} : () -> tensor<64xi32>
  %y = onnx.ms.MatMulNBits(%a, %b, %s, %z, %g, %none) {K = 64 : i64, N = 2 : i64, bits = 4 : i64, block_size = 32 : i64} : (tensor<3x64xf32>, tensor<2x2x16xui8>, tensor<4xf32>, tensor<2xui8>, tensor<64xi32>, none) -> tensor<3x2xf32> loc("mm"("ms.MatMulNBits"))
  return %y : tensor<3x2xf32>
}
