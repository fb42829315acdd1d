// RUN: xfmr-opt %s -split-input-file -verify-each | xfmr-opt -split-input-file | FileCheck %s

// Round trip of representative onnx ops through the dialect's assembly
// format: the first xfmr-opt parses and verifies, the second parses the
// printed form again. Missing optional inputs and outputs are `none` values;
// attributes equal to their ODS default are not printed.

// Elementwise ops with numpy broadcasting; the op's own types are kept.
// CHECK-LABEL: func.func @elementwise(
// CHECK-SAME: %[[A:[a-z0-9]+]]: tensor<2x3xf32>, %[[B:[a-z0-9]+]]: tensor<3xf32>
// CHECK: %[[ADD:.*]] = onnx.Add(%[[A]], %[[B]]) : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
// CHECK: %[[MUL:.*]] = onnx.Mul(%[[ADD]], %[[A]]) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: %[[RELU:.*]] = onnx.Relu(%[[MUL]]) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: %[[SQRT:.*]] = onnx.Sqrt(%[[RELU]]) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: return %[[SQRT]]
func.func @elementwise(%a: tensor<2x3xf32>, %b: tensor<3xf32>) -> tensor<2x3xf32> {
  %0 = onnx.Add(%a, %b) : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %1 = onnx.Mul(%0, %a) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %2 = onnx.Relu(%1) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %3 = onnx.Sqrt(%2) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %3 : tensor<2x3xf32>
}

// -----

// Batched MatMul with dynamic batch and a broadcast 2-D right operand.
// CHECK-LABEL: func.func @matmul_batched(
// CHECK-SAME: %[[A:[a-z0-9]+]]: tensor<?x4x8xf16>, %[[B:[a-z0-9]+]]: tensor<8x16xf16>
// CHECK: %[[Y:.*]] = onnx.MatMul(%[[A]], %[[B]]) : (tensor<?x4x8xf16>, tensor<8x16xf16>) -> tensor<?x4x16xf16>
// CHECK: return %[[Y]]
func.func @matmul_batched(%a: tensor<?x4x8xf16>, %b: tensor<8x16xf16>) -> tensor<?x4x16xf16> {
  %0 = onnx.MatMul(%a, %b) : (tensor<?x4x8xf16>, tensor<8x16xf16>) -> tensor<?x4x16xf16>
  return %0 : tensor<?x4x16xf16>
}

// -----

// Gemm with transB, non-default alpha and a bias; beta = 1.0 is the default
// and is not printed.
// CHECK-LABEL: func.func @gemm_bias(
// CHECK-SAME: %[[A:[a-z0-9]+]]: tensor<4x8xf32>, %[[B:[a-z0-9]+]]: tensor<16x8xf32>, %[[C:[a-z0-9]+]]: tensor<16xf32>
// CHECK: %[[Y:.*]] = onnx.Gemm(%[[A]], %[[B]], %[[C]]) {alpha = 5.000000e-01 : f32, transB = 1 : i64} : (tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<4x16xf32>
// CHECK: return %[[Y]]
func.func @gemm_bias(%a: tensor<4x8xf32>, %b: tensor<16x8xf32>, %c: tensor<16xf32>) -> tensor<4x16xf32> {
  %0 = onnx.Gemm(%a, %b, %c) {alpha = 0.5 : f32, beta = 1.0 : f32, transB = 1 : i64}
      : (tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

// Gemm without the optional C: the absent input is an explicit `none`.
// CHECK-LABEL: func.func @gemm_no_bias(
// CHECK: %[[NONE:.*]] = onnx.NoValue : none
// CHECK: %[[Y:.*]] = onnx.Gemm(%{{[a-z0-9]+}}, %{{[a-z0-9]+}}, %[[NONE]]) {transA = 1 : i64} : (tensor<8x4xf32>, tensor<8x16xf32>, none) -> tensor<4x16xf32>
// CHECK: return %[[Y]]
func.func @gemm_no_bias(%a: tensor<8x4xf32>, %b: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %none = onnx.NoValue : none
  %0 = onnx.Gemm(%a, %b, %none) {transA = 1 : i64}
      : (tensor<8x4xf32>, tensor<8x16xf32>, none) -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

// Softmax on a non-default axis keeps the attribute; the default (-1) is
// elided on print.
// CHECK-LABEL: func.func @softmax(
// CHECK: %[[S0:.*]] = onnx.Softmax(%{{[a-z0-9]+}}) {axis = 1 : i64} : (tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
// CHECK: %[[S1:.*]] = onnx.Softmax(%[[S0]]) : (tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
// CHECK: return %[[S1]]
func.func @softmax(%x: tensor<2x8x16xf32>) -> tensor<2x8x16xf32> {
  %0 = onnx.Softmax(%x) {axis = 1 : i64} : (tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %1 = onnx.Softmax(%0) {axis = -1 : i64} : (tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  return %1 : tensor<2x8x16xf32>
}

// -----

// LayerNormalization with a bias and only the first of its three results
// used: Mean and InvStdDev are `none` results. Multi-result ops name their
// results after the ONNX outputs; epsilon = 1e-5 is the default and is elided.
// CHECK-LABEL: func.func @layer_norm(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<2x16x64xf32>, %[[S:[a-z0-9]+]]: tensor<64xf32>, %[[B:[a-z0-9]+]]: tensor<64xf32>
// CHECK: %[[Y:[A-Za-z0-9_]+]], %{{[A-Za-z0-9_]+}}, %{{[A-Za-z0-9_]+}} = onnx.LayerNormalization(%[[X]], %[[S]], %[[B]]) : (tensor<2x16x64xf32>, tensor<64xf32>, tensor<64xf32>) -> (tensor<2x16x64xf32>, none, none)
// CHECK: return %[[Y]] :
func.func @layer_norm(%x: tensor<2x16x64xf32>, %scale: tensor<64xf32>, %bias: tensor<64xf32>)
    -> tensor<2x16x64xf32> {
  %y, %mean, %inv = onnx.LayerNormalization(%x, %scale, %bias) {epsilon = 1.0e-5 : f32}
      : (tensor<2x16x64xf32>, tensor<64xf32>, tensor<64xf32>)
      -> (tensor<2x16x64xf32>, none, none)
  return %y : tensor<2x16x64xf32>
}

// -----

// RMSNormalization (opset 23) on the last axis with a custom epsilon.
// CHECK-LABEL: func.func @rms_norm(
// CHECK: %[[Y:.*]] = onnx.RMSNormalization(%{{[a-z0-9]+}}, %{{[a-z0-9]+}}) {epsilon = 9.99999997E-7 : f32} : (tensor<?x?x64xbf16>, tensor<64xbf16>) -> tensor<?x?x64xbf16>
// CHECK: return %[[Y]]
func.func @rms_norm(%x: tensor<?x?x64xbf16>, %scale: tensor<64xbf16>) -> tensor<?x?x64xbf16> {
  %0 = onnx.RMSNormalization(%x, %scale) {epsilon = 1.0e-6 : f32}
      : (tensor<?x?x64xbf16>, tensor<64xbf16>) -> tensor<?x?x64xbf16>
  return %0 : tensor<?x?x64xbf16>
}

// -----

// Reshape from a constant shape with a -1 entry, then Transpose with a perm
// (an INTS attribute prints as an array of i64).
// CHECK-LABEL: func.func @reshape_transpose(
// CHECK: %[[SHAPE:.*]] = onnx.Constant() {value = dense<[2, 16, 8, -1]> : tensor<4xi64>} : () -> tensor<4xi64>
// CHECK: %[[R:.*]] = onnx.Reshape(%{{[a-z0-9]+}}, %[[SHAPE]]) : (tensor<2x16x512xf32>, tensor<4xi64>) -> tensor<2x16x8x64xf32>
// CHECK: %[[T:.*]] = onnx.Transpose(%[[R]]) {perm = [0, 2, 1, 3]} : (tensor<2x16x8x64xf32>) -> tensor<2x8x16x64xf32>
// CHECK: return %[[T]]
func.func @reshape_transpose(%x: tensor<2x16x512xf32>) -> tensor<2x8x16x64xf32> {
  %shape = onnx.Constant() {value = dense<[2, 16, 8, -1]> : tensor<4xi64>} : () -> tensor<4xi64>
  %0 = onnx.Reshape(%x, %shape) : (tensor<2x16x512xf32>, tensor<4xi64>) -> tensor<2x16x8x64xf32>
  %1 = onnx.Transpose(%0) {perm = [0, 2, 1, 3]} : (tensor<2x16x8x64xf32>) -> tensor<2x8x16x64xf32>
  return %1 : tensor<2x8x16x64xf32>
}

// -----

// Reshape with a run-time shape and allowzero set.
// CHECK-LABEL: func.func @reshape_dynamic_shape(
// CHECK: onnx.Reshape(%{{[a-z0-9]+}}, %{{[a-z0-9]+}}) {allowzero = 1 : i64} : (tensor<?x64xf32>, tensor<3xi64>) -> tensor<?x?x?xf32>
func.func @reshape_dynamic_shape(%x: tensor<?x64xf32>, %shape: tensor<3xi64>) -> tensor<?x?x?xf32> {
  %0 = onnx.Reshape(%x, %shape) {allowzero = 1 : i64}
      : (tensor<?x64xf32>, tensor<3xi64>) -> tensor<?x?x?xf32>
  return %0 : tensor<?x?x?xf32>
}

// -----

// Variadic Concat of three inputs, one of them with a dynamic concat dim.
// CHECK-LABEL: func.func @concat(
// CHECK-SAME: %[[A:[a-z0-9]+]]: tensor<2x3xf32>, %[[B:[a-z0-9]+]]: tensor<2x5xf32>, %[[C:[a-z0-9]+]]: tensor<2x?xf32>
// CHECK: %[[Y:.*]] = onnx.Concat(%[[A]], %[[B]], %[[C]]) {axis = 1 : i64} : (tensor<2x3xf32>, tensor<2x5xf32>, tensor<2x?xf32>) -> tensor<2x?xf32>
// CHECK: return %[[Y]]
func.func @concat(%a: tensor<2x3xf32>, %b: tensor<2x5xf32>, %c: tensor<2x?xf32>) -> tensor<2x?xf32> {
  %0 = onnx.Concat(%a, %b, %c) {axis = 1 : i64}
      : (tensor<2x3xf32>, tensor<2x5xf32>, tensor<2x?xf32>) -> tensor<2x?xf32>
  return %0 : tensor<2x?xf32>
}

// -----

// Split with constant sizes: one result per size (variadic results).
// CHECK-LABEL: func.func @split_sizes(
// CHECK: %[[SIZES:.*]] = onnx.Constant() {value = dense<[64, 32, 32]> : tensor<3xi64>} : () -> tensor<3xi64>
// CHECK: %[[S:.*]]:3 = onnx.Split(%{{[a-z0-9]+}}, %[[SIZES]]) {axis = -1 : i64} : (tensor<2x16x128xf32>, tensor<3xi64>) -> (tensor<2x16x64xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>)
// CHECK: return %[[S]]#0, %[[S]]#1, %[[S]]#2
func.func @split_sizes(%x: tensor<2x16x128xf32>)
    -> (tensor<2x16x64xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>) {
  %sizes = onnx.Constant() {value = dense<[64, 32, 32]> : tensor<3xi64>} : () -> tensor<3xi64>
  %q, %k, %v = onnx.Split(%x, %sizes) {axis = -1 : i64}
      : (tensor<2x16x128xf32>, tensor<3xi64>)
      -> (tensor<2x16x64xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>)
  return %q, %k, %v : tensor<2x16x64xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>
}

// -----

// Split (opset 18) into equal parts by num_outputs; the split input is none.
// CHECK-LABEL: func.func @split_num_outputs(
// CHECK: %[[NONE:.*]] = onnx.NoValue : none
// CHECK: %[[S:.*]]:2 = onnx.Split(%{{[a-z0-9]+}}, %[[NONE]]) {axis = 1 : i64, num_outputs = 2 : i64} : (tensor<4x6xi64>, none) -> (tensor<4x3xi64>, tensor<4x3xi64>)
// CHECK: return %[[S]]#1
func.func @split_num_outputs(%x: tensor<4x6xi64>) -> tensor<4x3xi64> {
  %none = onnx.NoValue : none
  %0:2 = onnx.Split(%x, %none) {axis = 1 : i64, num_outputs = 2 : i64}
      : (tensor<4x6xi64>, none) -> (tensor<4x3xi64>, tensor<4x3xi64>)
  return %0#1 : tensor<4x3xi64>
}

// -----

// Gather of embedding rows by i64 token ids (axis 0, the default).
// CHECK-LABEL: func.func @gather_embedding(
// CHECK-SAME: %[[TABLE:[a-z0-9]+]]: tensor<32000x512xf16>, %[[IDS:[a-z0-9]+]]: tensor<?x?xi64>
// CHECK: %[[Y:.*]] = onnx.Gather(%[[TABLE]], %[[IDS]]) : (tensor<32000x512xf16>, tensor<?x?xi64>) -> tensor<?x?x512xf16>
// CHECK: return %[[Y]]
func.func @gather_embedding(%table: tensor<32000x512xf16>, %ids: tensor<?x?xi64>) -> tensor<?x?x512xf16> {
  %0 = onnx.Gather(%table, %ids) {axis = 0 : i64}
      : (tensor<32000x512xf16>, tensor<?x?xi64>) -> tensor<?x?x512xf16>
  return %0 : tensor<?x?x512xf16>
}

// -----

// Slice with constant starts/ends; the optional axes and steps are none.
// CHECK-LABEL: func.func @slice_no_axes_steps(
// CHECK-DAG: %[[NONE:.*]] = onnx.NoValue : none
// CHECK-DAG: %[[STARTS:.*]] = onnx.Constant() {value = dense<[0, 2]> : tensor<2xi64>} : () -> tensor<2xi64>
// CHECK-DAG: %[[ENDS:.*]] = onnx.Constant() {value = dense<[1, 6]> : tensor<2xi64>} : () -> tensor<2xi64>
// CHECK: %[[Y:.*]] = onnx.Slice(%{{[a-z0-9]+}}, %[[STARTS]], %[[ENDS]], %[[NONE]], %[[NONE]]) : (tensor<4x8xf32>, tensor<2xi64>, tensor<2xi64>, none, none) -> tensor<1x4xf32>
// CHECK: return %[[Y]]
func.func @slice_no_axes_steps(%x: tensor<4x8xf32>) -> tensor<1x4xf32> {
  %none = onnx.NoValue : none
  %starts = onnx.Constant() {value = dense<[0, 2]> : tensor<2xi64>} : () -> tensor<2xi64>
  %ends = onnx.Constant() {value = dense<[1, 6]> : tensor<2xi64>} : () -> tensor<2xi64>
  %0 = onnx.Slice(%x, %starts, %ends, %none, %none)
      : (tensor<4x8xf32>, tensor<2xi64>, tensor<2xi64>, none, none) -> tensor<1x4xf32>
  return %0 : tensor<1x4xf32>
}

// -----

// Slice with given axes but no steps: only the trailing input is none; i32
// index tensors are accepted too.
// CHECK-LABEL: func.func @slice_axes_no_steps(
// CHECK: onnx.Slice(%{{[a-z0-9]+}}, %{{[a-z0-9]+}}, %{{[a-z0-9]+}}, %{{[a-z0-9]+}}, %{{[a-z0-9]+}}) : (tensor<2x?x64xf32>, tensor<1xi32>, tensor<1xi32>, tensor<1xi32>, none) -> tensor<2x?x32xf32>
func.func @slice_axes_no_steps(%x: tensor<2x?x64xf32>) -> tensor<2x?x32xf32> {
  %none = onnx.NoValue : none
  %starts = onnx.Constant() {value = dense<32> : tensor<1xi32>} : () -> tensor<1xi32>
  %ends = onnx.Constant() {value = dense<64> : tensor<1xi32>} : () -> tensor<1xi32>
  %axes = onnx.Constant() {value = dense<-1> : tensor<1xi32>} : () -> tensor<1xi32>
  %0 = onnx.Slice(%x, %starts, %ends, %axes, %none)
      : (tensor<2x?x64xf32>, tensor<1xi32>, tensor<1xi32>, tensor<1xi32>, none) -> tensor<2x?x32xf32>
  return %0 : tensor<2x?x32xf32>
}

// -----

// Constants hold any ElementsAttr: a dense splat, a dense f16 list and a
// dense_resource blob (how the importer references weights). The blob
// section must survive the round trip.
// CHECK-LABEL: func.func @constants(
// CHECK: onnx.Constant() {value = dense<0.000000e+00> : tensor<2x2xf32>} : () -> tensor<2x2xf32>
// CHECK: onnx.Constant() {value = dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf16>} : () -> tensor<2xf16>
// CHECK: onnx.Constant() {value = dense_resource<weight> : tensor<2xi32>} : () -> tensor<2xi32>
// CHECK: dialect_resources
// CHECK: weight: "0x040000000100000002000000"
func.func @constants() -> (tensor<2x2xf32>, tensor<2xf16>, tensor<2xi32>) {
  %0 = onnx.Constant() {value = dense<0.0> : tensor<2x2xf32>} : () -> tensor<2x2xf32>
  %1 = onnx.Constant() {value = dense<[1.0, 2.0]> : tensor<2xf16>} : () -> tensor<2xf16>
  %2 = onnx.Constant() {value = dense_resource<weight> : tensor<2xi32>} : () -> tensor<2xi32>
  return %0, %1, %2 : tensor<2x2xf32>, tensor<2xf16>, tensor<2xi32>
}

{-#
  dialect_resources: {
    builtin: {
      weight: "0x040000000100000002000000"
    }
  }
#-}

// -----

// Cast carries the target as an ONNX TensorProto data type (10 = float16).
// CHECK-LABEL: func.func @cast(
// CHECK: %[[Y:.*]] = onnx.Cast(%{{[a-z0-9]+}}) {to = 10 : i64} : (tensor<2x?xf32>) -> tensor<2x?xf16>
// CHECK: return %[[Y]]
func.func @cast(%x: tensor<2x?xf32>) -> tensor<2x?xf16> {
  %0 = onnx.Cast(%x) {to = 10 : i64} : (tensor<2x?xf32>) -> tensor<2x?xf16>
  return %0 : tensor<2x?xf16>
}

// -----

// Where with an i1 condition broadcast against the two branches (the causal
// mask idiom).
// CHECK-LABEL: func.func @where(
// CHECK-SAME: %[[C:[a-z0-9]+]]: tensor<1x1x16x16xi1>, %[[X:[a-z0-9]+]]: tensor<2x8x16x16xf32>, %[[Y:[a-z0-9]+]]: tensor<f32>
// CHECK: %[[R:.*]] = onnx.Where(%[[C]], %[[X]], %[[Y]]) : (tensor<1x1x16x16xi1>, tensor<2x8x16x16xf32>, tensor<f32>) -> tensor<2x8x16x16xf32>
// CHECK: return %[[R]]
func.func @where(%c: tensor<1x1x16x16xi1>, %x: tensor<2x8x16x16xf32>, %y: tensor<f32>)
    -> tensor<2x8x16x16xf32> {
  %0 = onnx.Where(%c, %x, %y)
      : (tensor<1x1x16x16xi1>, tensor<2x8x16x16xf32>, tensor<f32>) -> tensor<2x8x16x16xf32>
  return %0 : tensor<2x8x16x16xf32>
}

// -----

// ReduceMean (opset 18) with axes as an input and keepdims = 0; and one with
// the axes input absent (reduce over all dims, keepdims = 1 default).
// CHECK-LABEL: func.func @reduce_mean(
// CHECK: %[[AXES:.*]] = onnx.Constant() {value = dense<-1> : tensor<1xi64>} : () -> tensor<1xi64>
// CHECK: %[[M:.*]] = onnx.ReduceMean(%{{[a-z0-9]+}}, %[[AXES]]) {keepdims = 0 : i64} : (tensor<2x16x64xf32>, tensor<1xi64>) -> tensor<2x16xf32>
// CHECK: %[[NONE:.*]] = onnx.NoValue : none
// CHECK: %[[ALL:.*]] = onnx.ReduceMean(%[[M]], %[[NONE]]) : (tensor<2x16xf32>, none) -> tensor<1x1xf32>
// CHECK: return %[[ALL]]
func.func @reduce_mean(%x: tensor<2x16x64xf32>) -> tensor<1x1xf32> {
  %axes = onnx.Constant() {value = dense<-1> : tensor<1xi64>} : () -> tensor<1xi64>
  %0 = onnx.ReduceMean(%x, %axes) {keepdims = 0 : i64}
      : (tensor<2x16x64xf32>, tensor<1xi64>) -> tensor<2x16xf32>
  %none = onnx.NoValue : none
  %1 = onnx.ReduceMean(%0, %none) : (tensor<2x16xf32>, none) -> tensor<1x1xf32>
  return %1 : tensor<1x1xf32>
}

// -----

// TopK has two results: the values and their i64 indices.
// CHECK-LABEL: func.func @topk(
// CHECK: %[[K:.*]] = onnx.Constant() {value = dense<5> : tensor<1xi64>} : () -> tensor<1xi64>
// CHECK: %[[VALS:[A-Za-z0-9_]+]], %[[IDX:[A-Za-z0-9_]+]] = onnx.TopK(%{{[a-z0-9]+}}, %[[K]]) {largest = 0 : i64} : (tensor<2x32000xf32>, tensor<1xi64>) -> (tensor<2x5xf32>, tensor<2x5xi64>)
// CHECK: return %[[VALS]], %[[IDX]] :
func.func @topk(%logits: tensor<2x32000xf32>) -> (tensor<2x5xf32>, tensor<2x5xi64>) {
  %k = onnx.Constant() {value = dense<5> : tensor<1xi64>} : () -> tensor<1xi64>
  %values, %indices = onnx.TopK(%logits, %k) {axis = -1 : i64, largest = 0 : i64}
      : (tensor<2x32000xf32>, tensor<1xi64>) -> (tensor<2x5xf32>, tensor<2x5xi64>)
  return %values, %indices : tensor<2x5xf32>, tensor<2x5xi64>
}

// -----

// Inference-time Dropout: ratio and training_mode inputs absent, and the
// optional mask result is `none`.
// CHECK-LABEL: func.func @dropout_no_mask(
// CHECK: %[[NONE:.*]] = onnx.NoValue : none
// CHECK: %[[D:[A-Za-z0-9_]+]], %{{[A-Za-z0-9_]+}} = onnx.Dropout(%{{[a-z0-9]+}}, %[[NONE]], %[[NONE]]) : (tensor<2x16xf32>, none, none) -> (tensor<2x16xf32>, none)
// CHECK: return %[[D]] :
func.func @dropout_no_mask(%x: tensor<2x16xf32>) -> tensor<2x16xf32> {
  %none = onnx.NoValue : none
  %y, %mask = onnx.Dropout(%x, %none, %none) : (tensor<2x16xf32>, none, none) -> (tensor<2x16xf32>, none)
  return %y : tensor<2x16xf32>
}

// -----

// Attention-23 on 4-D inputs with grouped KV heads (8 over 2), a boolean
// mask and is_causal; past KV and the extra outputs are absent.
// CHECK-LABEL: func.func @attention_4d_gqa(
// CHECK-SAME: %[[Q:[a-z0-9]+]]: tensor<2x8x16x64xf32>, %[[K:[a-z0-9]+]]: tensor<2x2x16x64xf32>, %[[V:[a-z0-9]+]]: tensor<2x2x16x64xf32>, %[[M:[a-z0-9]+]]: tensor<16x16xi1>
// CHECK: %[[NONE:.*]] = onnx.NoValue : none
// CHECK: %[[A:[A-Za-z0-9_]+]], %{{[A-Za-z0-9_]+}}, %{{[A-Za-z0-9_]+}}, %{{[A-Za-z0-9_]+}} = onnx.Attention(%[[Q]], %[[K]], %[[V]], %[[M]], %[[NONE]], %[[NONE]], %[[NONE]]) {is_causal = 1 : i64, scale = 1.250000e-01 : f32} : (tensor<2x8x16x64xf32>, tensor<2x2x16x64xf32>, tensor<2x2x16x64xf32>, tensor<16x16xi1>, none, none, none) -> (tensor<2x8x16x64xf32>, none, none, none)
// CHECK: return %[[A]] :
func.func @attention_4d_gqa(%q: tensor<2x8x16x64xf32>, %k: tensor<2x2x16x64xf32>,
                            %v: tensor<2x2x16x64xf32>, %mask: tensor<16x16xi1>)
    -> tensor<2x8x16x64xf32> {
  %none = onnx.NoValue : none
  %y, %pk, %pv, %qk = onnx.Attention(%q, %k, %v, %mask, %none, %none, %none)
      {is_causal = 1 : i64, scale = 0.125 : f32}
      : (tensor<2x8x16x64xf32>, tensor<2x2x16x64xf32>, tensor<2x2x16x64xf32>,
         tensor<16x16xi1>, none, none, none)
      -> (tensor<2x8x16x64xf32>, none, none, none)
  return %y : tensor<2x8x16x64xf32>
}

// -----

// Attention-23 on 3-D inputs names its head counts; with a KV cache the
// present_key/present_value results are tensors.
// CHECK-LABEL: func.func @attention_3d_kv_cache(
// CHECK: %[[Y:[A-Za-z0-9_]+]], %[[PK:[A-Za-z0-9_]+]], %[[PV:[A-Za-z0-9_]+]], %{{[A-Za-z0-9_]+}} = onnx.Attention(%{{[a-z0-9]+}}, %{{[a-z0-9]+}}, %{{[a-z0-9]+}}, %{{[a-z0-9]+}}, %{{[a-z0-9]+}}, %{{[a-z0-9]+}}, %{{[a-z0-9]+}}) {kv_num_heads = 4 : i64, q_num_heads = 4 : i64} : (tensor<1x1x256xf16>, tensor<1x1x256xf16>, tensor<1x1x256xf16>, none, tensor<1x4x7x64xf16>, tensor<1x4x7x64xf16>, none) -> (tensor<1x1x256xf16>, tensor<1x4x8x64xf16>, tensor<1x4x8x64xf16>, none)
// CHECK: return %[[Y]], %[[PK]], %[[PV]] :
func.func @attention_3d_kv_cache(%q: tensor<1x1x256xf16>, %k: tensor<1x1x256xf16>,
                                 %v: tensor<1x1x256xf16>, %pk: tensor<1x4x7x64xf16>,
                                 %pv: tensor<1x4x7x64xf16>)
    -> (tensor<1x1x256xf16>, tensor<1x4x8x64xf16>, tensor<1x4x8x64xf16>) {
  %none = onnx.NoValue : none
  %y, %k2, %v2, %qk = onnx.Attention(%q, %k, %v, %none, %pk, %pv, %none)
      {kv_num_heads = 4 : i64, q_num_heads = 4 : i64}
      : (tensor<1x1x256xf16>, tensor<1x1x256xf16>, tensor<1x1x256xf16>, none,
         tensor<1x4x7x64xf16>, tensor<1x4x7x64xf16>, none)
      -> (tensor<1x1x256xf16>, tensor<1x4x8x64xf16>, tensor<1x4x8x64xf16>, none)
  return %y, %k2, %v2 : tensor<1x1x256xf16>, tensor<1x4x8x64xf16>, tensor<1x4x8x64xf16>
}

// -----

// RotaryEmbedding (opset 23) on 4-D input with position ids and a partial
// rotary dim.
// CHECK-LABEL: func.func @rotary_embedding(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<2x8x16x64xf32>, %[[COS:[a-z0-9]+]]: tensor<128x16xf32>, %[[SIN:[a-z0-9]+]]: tensor<128x16xf32>, %[[POS:[a-z0-9]+]]: tensor<2x16xi64>
// CHECK: %[[Y:.*]] = onnx.RotaryEmbedding(%[[X]], %[[COS]], %[[SIN]], %[[POS]]) {interleaved = 1 : i64, rotary_embedding_dim = 32 : i64} : (tensor<2x8x16x64xf32>, tensor<128x16xf32>, tensor<128x16xf32>, tensor<2x16xi64>) -> tensor<2x8x16x64xf32>
// CHECK: return %[[Y]]
func.func @rotary_embedding(%x: tensor<2x8x16x64xf32>, %cos: tensor<128x16xf32>,
                            %sin: tensor<128x16xf32>, %pos: tensor<2x16xi64>)
    -> tensor<2x8x16x64xf32> {
  %0 = onnx.RotaryEmbedding(%x, %cos, %sin, %pos) {interleaved = 1 : i64, rotary_embedding_dim = 32 : i64}
      : (tensor<2x8x16x64xf32>, tensor<128x16xf32>, tensor<128x16xf32>, tensor<2x16xi64>)
      -> tensor<2x8x16x64xf32>
  return %0 : tensor<2x8x16x64xf32>
}

// -----

// RotaryEmbedding on 3-D input needs num_heads; the position ids are absent
// (caches already gathered per position).
// CHECK-LABEL: func.func @rotary_embedding_3d(
// CHECK: onnx.RotaryEmbedding(%{{[a-z0-9]+}}, %{{[a-z0-9]+}}, %{{[a-z0-9]+}}, %{{[a-z0-9]+}}) {num_heads = 8 : i64} : (tensor<2x16x512xf16>, tensor<2x16x32xf16>, tensor<2x16x32xf16>, none) -> tensor<2x16x512xf16>
func.func @rotary_embedding_3d(%x: tensor<2x16x512xf16>, %cos: tensor<2x16x32xf16>,
                               %sin: tensor<2x16x32xf16>) -> tensor<2x16x512xf16> {
  %none = onnx.NoValue : none
  %0 = onnx.RotaryEmbedding(%x, %cos, %sin, %none) {num_heads = 8 : i64}
      : (tensor<2x16x512xf16>, tensor<2x16x32xf16>, tensor<2x16x32xf16>, none) -> tensor<2x16x512xf16>
  return %0 : tensor<2x16x512xf16>
}

// -----

// com.microsoft GroupQueryAttention as onnxruntime-genai exports it: packed
// KV cache, rotary applied inside, optional inputs none and output_qk none.
// CHECK-LABEL: func.func @ms_group_query_attention(
// CHECK: %[[OUT:[A-Za-z0-9_]+]], %[[PK:[A-Za-z0-9_]+]], %[[PV:[A-Za-z0-9_]+]], %{{[A-Za-z0-9_]+}} = onnx.ms.GroupQueryAttention(%{{[a-z0-9]+}}, %{{[a-z0-9]+}}, %{{[a-z0-9]+}}, %{{[a-z0-9]+}}, %{{[a-z0-9]+}}, %{{[a-z0-9]+}}, %{{[a-z0-9]+}}, %{{[a-z0-9]+}}, %{{[a-z0-9]+}}, %{{[a-z0-9]+}}, %{{[a-z0-9]+}}, %{{[a-z0-9]+}}, %{{[a-z0-9]+}}, %{{[a-z0-9]+}}, %{{[a-z0-9]+}}, %{{[a-z0-9]+}}, %{{[a-z0-9]+}})
// CHECK-SAME: {do_rotary = 1 : i64, kv_num_heads = 2 : i64, num_heads = 8 : i64, scale = 1.250000e-01 : f32}
// CHECK-SAME: : (tensor<1x16x512xf16>, tensor<1x16x128xf16>, tensor<1x16x128xf16>, tensor<1x2x64x64xf16>, tensor<1x2x64x64xf16>, tensor<1xi32>, tensor<i32>, tensor<64x32xf16>, tensor<64x32xf16>, none, none, none, none, none, none, none, none) -> (tensor<1x16x512xf16>, tensor<1x2x64x64xf16>, tensor<1x2x64x64xf16>, none)
// CHECK: return %[[OUT]], %[[PK]], %[[PV]] :
func.func @ms_group_query_attention(
    %q: tensor<1x16x512xf16>, %k: tensor<1x16x128xf16>, %v: tensor<1x16x128xf16>,
    %pk: tensor<1x2x64x64xf16>, %pv: tensor<1x2x64x64xf16>, %seqlens: tensor<1xi32>,
    %total: tensor<i32>, %cos: tensor<64x32xf16>, %sin: tensor<64x32xf16>)
    -> (tensor<1x16x512xf16>, tensor<1x2x64x64xf16>, tensor<1x2x64x64xf16>) {
  %none = onnx.NoValue : none
  %out, %present_k, %present_v, %qk = onnx.ms.GroupQueryAttention(
      %q, %k, %v, %pk, %pv, %seqlens, %total, %cos, %sin, %none, %none, %none,
      %none, %none, %none, %none, %none)
      {do_rotary = 1 : i64, kv_num_heads = 2 : i64, num_heads = 8 : i64, scale = 0.125 : f32}
      : (tensor<1x16x512xf16>, tensor<1x16x128xf16>, tensor<1x16x128xf16>,
         tensor<1x2x64x64xf16>, tensor<1x2x64x64xf16>, tensor<1xi32>, tensor<i32>,
         tensor<64x32xf16>, tensor<64x32xf16>, none, none, none, none, none, none, none, none)
      -> (tensor<1x16x512xf16>, tensor<1x2x64x64xf16>, tensor<1x2x64x64xf16>, none)
  return %out, %present_k, %present_v
      : tensor<1x16x512xf16>, tensor<1x2x64x64xf16>, tensor<1x2x64x64xf16>
}

// -----

// com.microsoft MatMulNBits: 4-bit weights packed [N, K/block, block/2] with
// per-block scales; zero points, g_idx and bias absent.
// CHECK-LABEL: func.func @ms_matmul_nbits(
// CHECK-SAME: %[[A:[a-z0-9]+]]: tensor<?x?x256xf16>, %[[B:[a-z0-9]+]]: tensor<512x8x16xui8>, %[[S:[a-z0-9]+]]: tensor<4096xf16>
// CHECK: %[[NONE:.*]] = onnx.NoValue : none
// CHECK: %[[Y:.*]] = onnx.ms.MatMulNBits(%[[A]], %[[B]], %[[S]], %[[NONE]], %[[NONE]], %[[NONE]]) {K = 256 : i64, N = 512 : i64, accuracy_level = 4 : i64, block_size = 32 : i64} : (tensor<?x?x256xf16>, tensor<512x8x16xui8>, tensor<4096xf16>, none, none, none) -> tensor<?x?x512xf16>
// CHECK: return %[[Y]]
func.func @ms_matmul_nbits(%a: tensor<?x?x256xf16>, %b: tensor<512x8x16xui8>,
                           %scales: tensor<4096xf16>) -> tensor<?x?x512xf16> {
  %none = onnx.NoValue : none
  %0 = onnx.ms.MatMulNBits(%a, %b, %scales, %none, %none, %none)
      {K = 256 : i64, N = 512 : i64, accuracy_level = 4 : i64, bits = 4 : i64, block_size = 32 : i64}
      : (tensor<?x?x256xf16>, tensor<512x8x16xui8>, tensor<4096xf16>, none, none, none)
      -> tensor<?x?x512xf16>
  return %0 : tensor<?x?x512xf16>
}
