// RUN: xfmr-opt %s --split-input-file --xfmr-raise=report=true | FileCheck %s

// xfmr-raise on attention: Softmax(mask(scale(Q·Kᵀ)))·V from real exports
// (Llama GQA static and dynamic, GPT-2, torch TransformerEncoder) and the
// ONNX Attention-23 op, then cases where one detail must stop the match.

// Llama GQA, layer 0 of llama_gqa_static.onnx: 4 query heads, 2 KV heads
// repeated by repeat_kv (Unsqueeze/Expand/Reshape), Div by sqrt(16), the
// additive causal+padding mask sliced to the keys. The op reads the
// un-repeated K and V ([1, 2, 8, 16]) and the sliced mask.
// CHECK-LABEL: xfmr-raise @llama_gqa_static: formed 1 attention; 0 candidate(s) left unfused
// CHECK-LABEL: func.func @llama_gqa_static(
// CHECK-SAME: %[[Q:[a-z0-9]+]]: tensor<1x4x8x16xf32>, %[[K:[a-z0-9]+]]: tensor<1x2x8x16xf32>, %[[V:[a-z0-9]+]]: tensor<1x2x8x16xf32>, %[[MASK:[a-z0-9]+]]: tensor<1x1x8x8xf32>
// CHECK-NOT: onnx.Softmax
// CHECK-NOT: onnx.Expand
// CHECK: %[[SLICED:.*]] = onnx.Slice(%[[MASK]],
// CHECK-NOT: onnx.Softmax
// CHECK-NOT: onnx.Expand
// CHECK: %[[OUT:.*]] = xfmr.attention %[[Q]], %[[K]], %[[V]] mask %[[SLICED]] {num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 2.500000e-01 : f32} : tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x1x8x8xf32> -> tensor<1x4x8x16xf32>
// CHECK-NOT: onnx.Softmax
// CHECK-NOT: onnx.MatMul
// CHECK: return %[[OUT]]
func.func @llama_gqa_static(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x8x16xf32>,
                            %v: tensor<1x2x8x16xf32>, %mask: tensor<1x1x8x8xf32>)
    -> tensor<1x4x8x16xf32> {
  %2 = onnx.Constant() {value = dense<[1, 2, 2, 8, 16]> : tensor<5xi64>} : () -> tensor<5xi64>
  %6 = onnx.Constant() {value = dense<4.000000e+00> : tensor<f32>} : () -> tensor<f32>
  %7 = onnx.Constant() {value = dense<[1, 4, 8, 16]> : tensor<4xi64>} : () -> tensor<4xi64>
  %17 = onnx.Constant() {value = dense<2> : tensor<1xi64>} : () -> tensor<1xi64>
  %18 = onnx.Constant() {value = dense<8> : tensor<1xi64>} : () -> tensor<1xi64>
  %19 = onnx.Constant() {value = dense<3> : tensor<1xi64>} : () -> tensor<1xi64>
  %20 = onnx.Constant() {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %21 = onnx.Constant() {value = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %99 = onnx.Unsqueeze(%k, %17) : (tensor<1x2x8x16xf32>, tensor<1xi64>) -> tensor<1x2x1x8x16xf32>
  %100 = onnx.Expand(%99, %2) : (tensor<1x2x1x8x16xf32>, tensor<5xi64>) -> tensor<1x2x2x8x16xf32>
  %101 = onnx.Reshape(%100, %7) : (tensor<1x2x2x8x16xf32>, tensor<4xi64>) -> tensor<1x4x8x16xf32>
  %102 = onnx.Unsqueeze(%v, %17) : (tensor<1x2x8x16xf32>, tensor<1xi64>) -> tensor<1x2x1x8x16xf32>
  %103 = onnx.Expand(%102, %2) : (tensor<1x2x1x8x16xf32>, tensor<5xi64>) -> tensor<1x2x2x8x16xf32>
  %104 = onnx.Reshape(%103, %7) : (tensor<1x2x2x8x16xf32>, tensor<4xi64>) -> tensor<1x4x8x16xf32>
  %105 = onnx.Transpose(%101) {perm = [0, 1, 3, 2]} : (tensor<1x4x8x16xf32>) -> tensor<1x4x16x8xf32>
  %106 = onnx.MatMul(%q, %105) : (tensor<1x4x8x16xf32>, tensor<1x4x16x8xf32>) -> tensor<1x4x8x8xf32>
  %107 = onnx.Div(%106, %6) : (tensor<1x4x8x8xf32>, tensor<f32>) -> tensor<1x4x8x8xf32>
  %108 = onnx.Slice(%mask, %21, %18, %19, %20) : (tensor<1x1x8x8xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1x1x8x8xf32>
  %109 = onnx.Add(%107, %108) : (tensor<1x4x8x8xf32>, tensor<1x1x8x8xf32>) -> tensor<1x4x8x8xf32>
  %110 = onnx.Softmax(%109) : (tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  %111 = onnx.MatMul(%110, %104) : (tensor<1x4x8x8xf32>, tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32>
  return %111 : tensor<1x4x8x16xf32>
}

// -----

// Llama GQA, layer 0 of llama_gqa.onnx (dynamic batch and sequence):
// repeat_kv's expand shape is computed at run time (Shape/Gather/Concat and
// torch's -1 handling), so the Expand's dim 2 is dynamic and n_rep = 2 is
// only known from the Reshape to 4 heads. The mask is sliced to the key
// length read from the repeated K's shape (which keeps K's repeat_kv
// alive for its Shape; V's repeat_kv goes).
// CHECK-LABEL: xfmr-raise @llama_gqa_dynamic: formed 1 attention; 0 candidate(s) left unfused
// CHECK-LABEL: func.func @llama_gqa_dynamic(
// CHECK-SAME: %[[Q:[a-z0-9]+]]: tensor<?x4x?x16xf32>, %[[K:[a-z0-9]+]]: tensor<?x2x?x16xf32>, %[[V:[a-z0-9]+]]: tensor<?x2x?x16xf32>, %[[MASK:[a-z0-9]+]]: tensor<?x?x?x?xf32>
// CHECK-NOT: onnx.Softmax
// CHECK-NOT: onnx.Unsqueeze(%[[V]],
// CHECK-NOT: onnx.MatMul
// CHECK: %[[SLICED:.*]] = onnx.Slice(%[[MASK]],
// CHECK-NOT: onnx.Softmax
// CHECK: %[[OUT:.*]] = xfmr.attention %[[Q]], %[[K]], %[[V]] mask %[[SLICED]] {num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 2.500000e-01 : f32} : tensor<?x4x?x16xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>, tensor<?x?x?x?xf32> -> tensor<?x4x?x16xf32>
// CHECK-NOT: onnx.Softmax
// CHECK: return %[[OUT]]
func.func @llama_gqa_dynamic(%160: tensor<?x4x?x16xf32>, %167: tensor<?x2x?x16xf32>,
                             %151: tensor<?x2x?x16xf32>, %111: tensor<?x?x?x?xf32>)
    -> tensor<?x4x?x16xf32> {
  %0 = onnx.Constant() {value = dense<-1> : tensor<5xi64>} : () -> tensor<5xi64>
  %1 = onnx.Constant() {value = dense<1> : tensor<5xi64>} : () -> tensor<5xi64>
  %8 = onnx.Constant() {value = dense<4.000000e+00> : tensor<f32>} : () -> tensor<f32>
  %9 = onnx.Constant() {value = dense<16> : tensor<1xi64>} : () -> tensor<1xi64>
  %15 = onnx.Constant() {value = dense<4> : tensor<1xi64>} : () -> tensor<1xi64>
  %19 = onnx.Constant() {value = dense<2> : tensor<i64>} : () -> tensor<i64>
  %22 = onnx.Constant() {value = dense<2> : tensor<1xi64>} : () -> tensor<1xi64>
  %23 = onnx.Constant() {value = dense<3> : tensor<1xi64>} : () -> tensor<1xi64>
  %24 = onnx.Constant() {value = dense<-1> : tensor<1xi64>} : () -> tensor<1xi64>
  %25 = onnx.Constant() {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %27 = onnx.Constant() {value = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %28 = onnx.Constant() {value = dense<0> : tensor<i64>} : () -> tensor<i64>
  %168 = onnx.Shape(%167) : (tensor<?x2x?x16xf32>) -> tensor<4xi64>
  %169 = onnx.Gather(%168, %28) : (tensor<4xi64>, tensor<i64>) -> tensor<i64>
  %170 = onnx.Gather(%168, %19) : (tensor<4xi64>, tensor<i64>) -> tensor<i64>
  %171 = onnx.Unsqueeze(%167, %22) : (tensor<?x2x?x16xf32>, tensor<1xi64>) -> tensor<?x2x1x?x16xf32>
  %172 = onnx.Unsqueeze(%169, %27) : (tensor<i64>, tensor<1xi64>) -> tensor<1xi64>
  %173 = onnx.Unsqueeze(%170, %27) : (tensor<i64>, tensor<1xi64>) -> tensor<1xi64>
  %174 = onnx.Concat(%172, %22, %22, %173, %9) {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<5xi64>
  %175 = onnx.Reshape(%174, %24) : (tensor<5xi64>, tensor<1xi64>) -> tensor<5xi64>
  %176 = onnx.Equal(%175, %0) : (tensor<5xi64>, tensor<5xi64>) -> tensor<5xi1>
  %177 = onnx.Where(%176, %1, %175) : (tensor<5xi1>, tensor<5xi64>, tensor<5xi64>) -> tensor<5xi64>
  %178 = onnx.Expand(%171, %177) : (tensor<?x2x1x?x16xf32>, tensor<5xi64>) -> tensor<?x2x?x?x16xf32>
  %179 = onnx.Concat(%172, %15, %173, %9) {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<4xi64>
  %180 = onnx.Reshape(%178, %179) : (tensor<?x2x?x?x16xf32>, tensor<4xi64>) -> tensor<?x4x?x16xf32>
  %181 = onnx.Shape(%151) : (tensor<?x2x?x16xf32>) -> tensor<4xi64>
  %182 = onnx.Gather(%181, %28) : (tensor<4xi64>, tensor<i64>) -> tensor<i64>
  %183 = onnx.Gather(%181, %19) : (tensor<4xi64>, tensor<i64>) -> tensor<i64>
  %184 = onnx.Unsqueeze(%151, %22) : (tensor<?x2x?x16xf32>, tensor<1xi64>) -> tensor<?x2x1x?x16xf32>
  %185 = onnx.Unsqueeze(%182, %27) : (tensor<i64>, tensor<1xi64>) -> tensor<1xi64>
  %186 = onnx.Unsqueeze(%183, %27) : (tensor<i64>, tensor<1xi64>) -> tensor<1xi64>
  %187 = onnx.Concat(%185, %22, %22, %186, %9) {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<5xi64>
  %188 = onnx.Reshape(%187, %24) : (tensor<5xi64>, tensor<1xi64>) -> tensor<5xi64>
  %189 = onnx.Equal(%188, %0) : (tensor<5xi64>, tensor<5xi64>) -> tensor<5xi1>
  %190 = onnx.Where(%189, %1, %188) : (tensor<5xi1>, tensor<5xi64>, tensor<5xi64>) -> tensor<5xi64>
  %191 = onnx.Expand(%184, %190) : (tensor<?x2x1x?x16xf32>, tensor<5xi64>) -> tensor<?x2x?x?x16xf32>
  %192 = onnx.Concat(%185, %15, %186, %9) {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<4xi64>
  %193 = onnx.Reshape(%191, %192) : (tensor<?x2x?x?x16xf32>, tensor<4xi64>) -> tensor<?x4x?x16xf32>
  %194 = onnx.Transpose(%180) {perm = [0, 1, 3, 2]} : (tensor<?x4x?x16xf32>) -> tensor<?x4x16x?xf32>
  %195 = onnx.MatMul(%160, %194) : (tensor<?x4x?x16xf32>, tensor<?x4x16x?xf32>) -> tensor<?x4x?x?xf32>
  %196 = onnx.Div(%195, %8) : (tensor<?x4x?x?xf32>, tensor<f32>) -> tensor<?x4x?x?xf32>
  %197 = onnx.Shape(%180) : (tensor<?x4x?x16xf32>) -> tensor<4xi64>
  %198 = onnx.Gather(%197, %19) : (tensor<4xi64>, tensor<i64>) -> tensor<i64>
  %199 = onnx.Unsqueeze(%198, %27) : (tensor<i64>, tensor<1xi64>) -> tensor<1xi64>
  %200 = onnx.Slice(%111, %27, %199, %23, %25) : (tensor<?x?x?x?xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x?x?x?xf32>
  %201 = onnx.Add(%196, %200) : (tensor<?x4x?x?xf32>, tensor<?x?x?x?xf32>) -> tensor<?x4x?x?xf32>
  %202 = onnx.Softmax(%201) : (tensor<?x4x?x?xf32>) -> tensor<?x4x?x?xf32>
  %203 = onnx.MatMul(%202, %193) : (tensor<?x4x?x?xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x16xf32>
  return %203 : tensor<?x4x?x16xf32>
}

// -----

// GPT-2, layer 0 of gpt2_static.onnx: K transposed straight from
// [B, S, H, D] with perm [0, 2, 3, 1], the scale computed as
// 0 + 16^0.5, the causal mask applied by Where(bool, scores, -3.4e38) and
// the padding mask added after it. K goes back to [B, H, S, D]; the bool
// mask (folded here to the constant lower triangle) is exactly causal for
// these lengths, so the op is `causal` and keeps only the padding bias.
// CHECK-LABEL: xfmr-raise @gpt2_static: formed 1 causal_mask, 1 attention; 0 candidate(s) left unfused
// CHECK-LABEL: func.func @gpt2_static(
// CHECK-SAME: %[[Q:[a-z0-9]+]]: tensor<1x8x4x16xf32>, %[[K:[a-z0-9]+]]: tensor<1x8x4x16xf32>, %[[V:[a-z0-9]+]]: tensor<1x8x4x16xf32>, %[[PAD:[a-z0-9]+]]: tensor<1x8xi64>
// CHECK-NOT: tensor<1x1x8x8xi1>
// CHECK-DAG: %[[BIAS:.*]] = onnx.Mul(%{{.*}}, %{{.*}}) : (tensor<1x1x1x8xf32>, tensor<f32>) -> tensor<1x1x1x8xf32>
// CHECK-DAG: %[[QT:.*]] = onnx.Transpose(%[[Q]]) {perm = [0, 2, 1, 3]}
// CHECK-DAG: %[[VT:.*]] = onnx.Transpose(%[[V]]) {perm = [0, 2, 1, 3]}
// CHECK: %[[KT:.*]] = onnx.Transpose(%[[K]]) {perm = [0, 2, 1, 3]} : (tensor<1x8x4x16xf32>) -> tensor<1x4x8x16xf32>
// CHECK: %[[OUT:.*]] = xfmr.attention %[[QT]], %[[KT]], %[[VT]] mask %[[BIAS]] {causal = true, num_heads = 4 : i64, num_kv_heads = 4 : i64, scale = 2.500000e-01 : f32} : tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x1x1x8xf32> -> tensor<1x4x8x16xf32>
// CHECK-NOT: onnx.Softmax
// CHECK-NOT: onnx.MatMul
// CHECK: return %[[OUT]]
func.func @gpt2_static(%q50: tensor<1x8x4x16xf32>, %53: tensor<1x8x4x16xf32>,
                       %54: tensor<1x8x4x16xf32>, %arg1: tensor<1x8xi64>)
    -> tensor<1x4x8x16xf32> {
  %0 = onnx.Constant() {value = dense<0.000000e+00> : tensor<f32>} : () -> tensor<f32>
  %8 = onnx.Constant() {value = dense<[[[[true, false, false, false, false, false, false, false], [true, true, false, false, false, false, false, false], [true, true, true, false, false, false, false, false], [true, true, true, true, false, false, false, false], [true, true, true, true, true, false, false, false], [true, true, true, true, true, true, false, false], [true, true, true, true, true, true, true, false], [true, true, true, true, true, true, true, true]]]]> : tensor<1x1x8x8xi1>} : () -> tensor<1x1x8x8xi1>
  %9 = onnx.Constant() {value = dense<5.000000e-01> : tensor<f32>} : () -> tensor<f32>
  %10 = onnx.Constant() {value = dense<1.600000e+01> : tensor<f32>} : () -> tensor<f32>
  %15 = onnx.Constant() {value = dense<-3.40282347E+38> : tensor<f32>} : () -> tensor<f32>
  %16 = onnx.Constant() {value = dense<1.000000e+00> : tensor<f32>} : () -> tensor<f32>
  %17 = onnx.Constant() {value = dense<2> : tensor<1xi64>} : () -> tensor<1xi64>
  %18 = onnx.Constant() {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %19 = onnx.Constant() {value = dense<[1, -1]> : tensor<2xi64>} : () -> tensor<2xi64>
  %41 = onnx.Reshape(%arg1, %19) : (tensor<1x8xi64>, tensor<2xi64>) -> tensor<1x8xi64>
  %42 = onnx.Unsqueeze(%41, %18) : (tensor<1x8xi64>, tensor<1xi64>) -> tensor<1x1x8xi64>
  %43 = onnx.Unsqueeze(%42, %17) : (tensor<1x1x8xi64>, tensor<1xi64>) -> tensor<1x1x1x8xi64>
  %44 = onnx.Cast(%43) {to = 1 : i64} : (tensor<1x1x1x8xi64>) -> tensor<1x1x1x8xf32>
  %45 = onnx.Sub(%16, %44) : (tensor<f32>, tensor<1x1x1x8xf32>) -> tensor<1x1x1x8xf32>
  %46 = onnx.Mul(%45, %15) : (tensor<1x1x1x8xf32>, tensor<f32>) -> tensor<1x1x1x8xf32>
  %52 = onnx.Transpose(%q50) {perm = [0, 2, 1, 3]} : (tensor<1x8x4x16xf32>) -> tensor<1x4x8x16xf32>
  %55 = onnx.Transpose(%54) {perm = [0, 2, 1, 3]} : (tensor<1x8x4x16xf32>) -> tensor<1x4x8x16xf32>
  %56 = onnx.Transpose(%53) {perm = [0, 2, 3, 1]} : (tensor<1x8x4x16xf32>) -> tensor<1x4x16x8xf32>
  %57 = onnx.MatMul(%52, %56) : (tensor<1x4x8x16xf32>, tensor<1x4x16x8xf32>) -> tensor<1x4x8x8xf32>
  %58 = onnx.Pow(%10, %9) : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %59 = onnx.Add(%0, %58) : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %60 = onnx.Div(%57, %59) : (tensor<1x4x8x8xf32>, tensor<f32>) -> tensor<1x4x8x8xf32>
  %61 = onnx.Where(%8, %60, %15) : (tensor<1x1x8x8xi1>, tensor<1x4x8x8xf32>, tensor<f32>) -> tensor<1x4x8x8xf32>
  %62 = onnx.Add(%61, %46) : (tensor<1x4x8x8xf32>, tensor<1x1x1x8xf32>) -> tensor<1x4x8x8xf32>
  %63 = onnx.Softmax(%62) : (tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  %64 = onnx.MatMul(%63, %55) : (tensor<1x4x8x8xf32>, tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32>
  return %64 : tensor<1x4x8x16xf32>
}

// -----

// torch TransformerEncoder, layer 0 of transformer_encoder_static.onnx:
// rank-3 attention over [batch * heads, S, D] with q divided by 4 before
// Q·Kᵀ and K transposed from [S, B*H, D] by perm [1, 2, 0]. Each of the 4
// batch*head rows becomes one batch of one head: Q, K, V (K transposed
// back by [1, 0, 2]) are unsqueezed at 1 and the result squeezed.
// CHECK-LABEL: xfmr-raise @transformer_encoder_static: formed 1 attention; 0 candidate(s) left unfused
// CHECK-LABEL: func.func @transformer_encoder_static(
// CHECK-SAME: %[[QIN:[a-z0-9]+]]: tensor<8x1x64xf32>, %[[KIN:[a-z0-9]+]]: tensor<8x1x64xf32>, %[[VIN:[a-z0-9]+]]: tensor<8x1x64xf32>
// CHECK-NOT: onnx.Div
// CHECK-DAG: %[[Q:.*]] = onnx.Transpose(%{{.*}}) {perm = [1, 0, 2]} : (tensor<8x4x16xf32>) -> tensor<4x8x16xf32>
// CHECK-DAG: %[[K:.*]] = onnx.Reshape(%[[KIN]], %{{.*}}) : (tensor<8x1x64xf32>, tensor<3xi64>) -> tensor<8x4x16xf32>
// CHECK-DAG: %[[V:.*]] = onnx.Transpose(%{{.*}}) {perm = [1, 0, 2]} : (tensor<8x4x16xf32>) -> tensor<4x8x16xf32>
// CHECK: %[[KT:.*]] = onnx.Transpose(%[[K]]) {perm = [1, 0, 2]} : (tensor<8x4x16xf32>) -> tensor<4x8x16xf32>
// CHECK: %[[Q4:.*]] = onnx.Unsqueeze(%[[Q]], %{{.*}}) : (tensor<4x8x16xf32>, tensor<1xi64>) -> tensor<4x1x8x16xf32>
// CHECK: %[[K4:.*]] = onnx.Unsqueeze(%[[KT]], %{{.*}}) : (tensor<4x8x16xf32>, tensor<1xi64>) -> tensor<4x1x8x16xf32>
// CHECK: %[[V4:.*]] = onnx.Unsqueeze(%[[V]], %{{.*}}) : (tensor<4x8x16xf32>, tensor<1xi64>) -> tensor<4x1x8x16xf32>
// CHECK: %[[A:.*]] = xfmr.attention %[[Q4]], %[[K4]], %[[V4]] {num_heads = 1 : i64, num_kv_heads = 1 : i64, scale = 2.500000e-01 : f32} : tensor<4x1x8x16xf32>, tensor<4x1x8x16xf32>, tensor<4x1x8x16xf32> -> tensor<4x1x8x16xf32>
// CHECK: %[[OUT:.*]] = onnx.Squeeze(%[[A]], %{{.*}}) : (tensor<4x1x8x16xf32>, tensor<1xi64>) -> tensor<4x8x16xf32>
// CHECK-NOT: onnx.Div
// CHECK-NOT: onnx.Softmax
// CHECK-NOT: onnx.MatMul
// CHECK: return %[[OUT]]
func.func @transformer_encoder_static(%22: tensor<8x1x64xf32>, %23: tensor<8x1x64xf32>,
                                      %24: tensor<8x1x64xf32>) -> tensor<4x8x16xf32> {
  %5 = onnx.Constant() {value = dense<4.000000e+00> : tensor<f32>} : () -> tensor<f32>
  %6 = onnx.Constant() {value = dense<[8, 4, 16]> : tensor<3xi64>} : () -> tensor<3xi64>
  %25 = onnx.Reshape(%22, %6) : (tensor<8x1x64xf32>, tensor<3xi64>) -> tensor<8x4x16xf32>
  %26 = onnx.Transpose(%25) {perm = [1, 0, 2]} : (tensor<8x4x16xf32>) -> tensor<4x8x16xf32>
  %27 = onnx.Reshape(%23, %6) : (tensor<8x1x64xf32>, tensor<3xi64>) -> tensor<8x4x16xf32>
  %28 = onnx.Reshape(%24, %6) : (tensor<8x1x64xf32>, tensor<3xi64>) -> tensor<8x4x16xf32>
  %29 = onnx.Transpose(%28) {perm = [1, 0, 2]} : (tensor<8x4x16xf32>) -> tensor<4x8x16xf32>
  %30 = onnx.Div(%26, %5) : (tensor<4x8x16xf32>, tensor<f32>) -> tensor<4x8x16xf32>
  %31 = onnx.Transpose(%27) {perm = [1, 2, 0]} : (tensor<8x4x16xf32>) -> tensor<4x16x8xf32>
  %32 = onnx.MatMul(%30, %31) : (tensor<4x8x16xf32>, tensor<4x16x8xf32>) -> tensor<4x8x8xf32>
  %33 = onnx.Softmax(%32) : (tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %34 = onnx.MatMul(%33, %29) : (tensor<4x8x8xf32>, tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  return %34 : tensor<4x8x16xf32>
}

// -----

// ONNX Attention-23 (written by hand, no exporter emits it yet): 4 query
// heads over 2 KV heads, no scale attribute (1/sqrt(16)), is_causal with as
// many queries as keys, so the top-left and bottom-right triangles agree.
// CHECK-LABEL: xfmr-raise @attention23_causal: formed 1 attention; 0 candidate(s) left unfused
// CHECK-LABEL: func.func @attention23_causal(
// CHECK-SAME: %[[Q:[a-z0-9]+]]: tensor<1x4x8x16xf32>, %[[K:[a-z0-9]+]]: tensor<1x2x8x16xf32>, %[[V:[a-z0-9]+]]: tensor<1x2x8x16xf32>
// CHECK-NOT: onnx.Attention
// CHECK-NOT: cf.assert
// CHECK: %[[OUT:.*]] = xfmr.attention %[[Q]], %[[K]], %[[V]] {causal = true, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 2.500000e-01 : f32} : tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32> -> tensor<1x4x8x16xf32>
// CHECK-NOT: onnx.Attention
// CHECK: return %[[OUT]]
func.func @attention23_causal(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x8x16xf32>,
                              %v: tensor<1x2x8x16xf32>) -> tensor<1x4x8x16xf32> {
  %none = onnx.NoValue : none
  %y, %pk, %pv, %qk = onnx.Attention(%q, %k, %v, %none, %none, %none, %none) {is_causal = 1 : i64}
      : (tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, none, none, none, none)
      -> (tensor<1x4x8x16xf32>, none, none, none)
  return %y : tensor<1x4x8x16xf32>
}

// -----

// Attention-23 with an explicit scale and a bool mask as long as the keys,
// not causal: the mask is passed through and the scale attribute is kept.
// CHECK-LABEL: xfmr-raise @attention23_mask_scale: formed 1 attention; 0 candidate(s) left unfused
// CHECK-LABEL: func.func @attention23_mask_scale(
// CHECK-SAME: %[[Q:[a-z0-9]+]]: tensor<2x4x3x16xf32>, %[[K:[a-z0-9]+]]: tensor<2x4x8x16xf32>, %[[V:[a-z0-9]+]]: tensor<2x4x8x16xf32>, %[[M:[a-z0-9]+]]: tensor<2x1x3x8xi1>
// CHECK: %[[OUT:.*]] = xfmr.attention %[[Q]], %[[K]], %[[V]] mask %[[M]] {num_heads = 4 : i64, num_kv_heads = 4 : i64, scale = 1.250000e-01 : f32}
// CHECK-NOT: onnx.Attention
// CHECK: return %[[OUT]]
func.func @attention23_mask_scale(%q: tensor<2x4x3x16xf32>, %k: tensor<2x4x8x16xf32>,
                                  %v: tensor<2x4x8x16xf32>, %m: tensor<2x1x3x8xi1>)
    -> tensor<2x4x3x16xf32> {
  %none = onnx.NoValue : none
  %y, %pk, %pv, %qk = onnx.Attention(%q, %k, %v, %m, %none, %none, %none) {scale = 1.250000e-01 : f32}
      : (tensor<2x4x3x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x1x3x8xi1>, none, none, none)
      -> (tensor<2x4x3x16xf32>, none, none, none)
  return %y : tensor<2x4x3x16xf32>
}

// -----

// Attention-23 is_causal with dynamic query and key lengths: the op is
// formed bottom-right aligned, guarded by a run-time check that the lengths
// are equal (where top-left and bottom-right agree).
// CHECK-LABEL: xfmr-raise @attention23_causal_dynamic: formed 1 attention; 0 candidate(s) left unfused
// CHECK-LABEL: func.func @attention23_causal_dynamic(
// CHECK-SAME: %[[Q:[a-z0-9]+]]: tensor<1x4x?x16xf32>, %[[K:[a-z0-9]+]]: tensor<1x2x?x16xf32>, %[[V:[a-z0-9]+]]: tensor<1x2x?x16xf32>
// CHECK-DAG: %[[SQ:.*]] = tensor.dim %[[Q]], %{{.*}} : tensor<1x4x?x16xf32>
// CHECK-DAG: %[[SK:.*]] = tensor.dim %[[K]], %{{.*}} : tensor<1x2x?x16xf32>
// CHECK: %[[SAME:.*]] = arith.cmpi eq, %[[SQ]], %[[SK]] : index
// CHECK: cf.assert %[[SAME]], "{{.*}}: is_causal needs as many queries as keys"
// CHECK: %[[OUT:.*]] = xfmr.attention %[[Q]], %[[K]], %[[V]] {causal = true, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 2.500000e-01 : f32}
// CHECK: return %[[OUT]]
func.func @attention23_causal_dynamic(%q: tensor<1x4x?x16xf32>, %k: tensor<1x2x?x16xf32>,
                                      %v: tensor<1x2x?x16xf32>) -> tensor<1x4x?x16xf32> {
  %none = onnx.NoValue : none
  %y, %pk, %pv, %qk = onnx.Attention(%q, %k, %v, %none, %none, %none, %none) {is_causal = 1 : i64}
      : (tensor<1x4x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>, none, none, none, none)
      -> (tensor<1x4x?x16xf32>, none, none, none)
  return %y : tensor<1x4x?x16xf32>
}

// -----

// The Llama subgraph with the scale applied after the mask is added:
// softmax((q·kᵀ + mask) / 4) scales the mask too, which the op cannot say.
// CHECK-LABEL: xfmr-raise @negative_scale_after_mask: formed nothing; 1 candidate(s) left unfused
// CHECK-NEXT: unfused attention at node '/m/model/layers.0/self_attn/Softmax' (Softmax): the mask is added before the scores are scaled
// CHECK-LABEL: func.func @negative_scale_after_mask(
// CHECK-NOT: xfmr.attention
// CHECK: onnx.Add
// CHECK: onnx.Div
// CHECK: onnx.Softmax
func.func @negative_scale_after_mask(%q: tensor<1x4x8x16xf32>, %k: tensor<1x4x8x16xf32>,
                                     %v: tensor<1x4x8x16xf32>, %mask: tensor<1x1x8x8xf32>)
    -> tensor<1x4x8x16xf32> {
  %6 = onnx.Constant() {value = dense<4.000000e+00> : tensor<f32>} : () -> tensor<f32>
  %105 = onnx.Transpose(%k) {perm = [0, 1, 3, 2]} : (tensor<1x4x8x16xf32>) -> tensor<1x4x16x8xf32>
  %106 = onnx.MatMul(%q, %105) : (tensor<1x4x8x16xf32>, tensor<1x4x16x8xf32>) -> tensor<1x4x8x8xf32>
  %107 = onnx.Add(%106, %mask) : (tensor<1x4x8x8xf32>, tensor<1x1x8x8xf32>) -> tensor<1x4x8x8xf32>
  %108 = onnx.Div(%107, %6) : (tensor<1x4x8x8xf32>, tensor<f32>) -> tensor<1x4x8x8xf32>
  %110 = onnx.Softmax(%108) : (tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32> loc("/m/model/layers.0/self_attn/Softmax"("Softmax"))
  %111 = onnx.MatMul(%110, %v) : (tensor<1x4x8x8xf32>, tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32>
  return %111 : tensor<1x4x8x16xf32>
}

// -----

// Softmax over the query axis (2) instead of the keys: not attention, and
// not even a candidate.
// CHECK-LABEL: xfmr-raise @negative_softmax_axis: formed nothing; 0 candidate(s) left unfused
// CHECK-LABEL: func.func @negative_softmax_axis(
// CHECK-NOT: xfmr.attention
// CHECK: onnx.Softmax(%{{.*}}) {axis = 2 : i64}
func.func @negative_softmax_axis(%q: tensor<1x4x8x16xf32>, %k: tensor<1x4x8x16xf32>,
                                 %v: tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32> {
  %6 = onnx.Constant() {value = dense<4.000000e+00> : tensor<f32>} : () -> tensor<f32>
  %105 = onnx.Transpose(%k) {perm = [0, 1, 3, 2]} : (tensor<1x4x8x16xf32>) -> tensor<1x4x16x8xf32>
  %106 = onnx.MatMul(%q, %105) : (tensor<1x4x8x16xf32>, tensor<1x4x16x8xf32>) -> tensor<1x4x8x8xf32>
  %107 = onnx.Div(%106, %6) : (tensor<1x4x8x8xf32>, tensor<f32>) -> tensor<1x4x8x8xf32>
  %110 = onnx.Softmax(%107) {axis = 2 : i64} : (tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  %111 = onnx.MatMul(%110, %v) : (tensor<1x4x8x8xf32>, tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32>
  return %111 : tensor<1x4x8x16xf32>
}

// -----

// Scores divided by a run-time value (a learned temperature, say): the
// scale must be a constant.
// CHECK-LABEL: xfmr-raise @negative_runtime_scale: formed nothing; 1 candidate(s) left unfused
// CHECK-NEXT: unfused attention at node 'softmax' (Softmax): scores are scaled by a non-constant
// CHECK-LABEL: func.func @negative_runtime_scale(
// CHECK-NOT: xfmr.attention
// CHECK: onnx.Softmax
func.func @negative_runtime_scale(%q: tensor<1x4x8x16xf32>, %k: tensor<1x4x8x16xf32>,
                                  %v: tensor<1x4x8x16xf32>, %t: tensor<f32>)
    -> tensor<1x4x8x16xf32> {
  %105 = onnx.Transpose(%k) {perm = [0, 1, 3, 2]} : (tensor<1x4x8x16xf32>) -> tensor<1x4x16x8xf32>
  %106 = onnx.MatMul(%q, %105) : (tensor<1x4x8x16xf32>, tensor<1x4x16x8xf32>) -> tensor<1x4x8x8xf32>
  %107 = onnx.Div(%106, %t) : (tensor<1x4x8x8xf32>, tensor<f32>) -> tensor<1x4x8x8xf32>
  %110 = onnx.Softmax(%107) : (tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32> loc("softmax"("Softmax"))
  %111 = onnx.MatMul(%110, %v) : (tensor<1x4x8x8xf32>, tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32>
  return %111 : tensor<1x4x8x16xf32>
}

// -----

// GPT-2's causal Where with -10000 (its masked_bias, older exports): in the
// f32 softmax exp(-1e4 - max) is exactly 0 whenever the row keeps a score
// above -9896, so -1e4 masks (kMaskingFill) and the Where is the keep mask.
// CHECK-LABEL: xfmr-raise @where_minus_1e4: formed 1 attention; 0 candidate(s) left unfused
// CHECK-LABEL: func.func @where_minus_1e4(
// CHECK-NOT: onnx.Softmax
// CHECK: xfmr.attention
func.func @where_minus_1e4(%q: tensor<1x4x8x16xf32>, %k: tensor<1x4x8x16xf32>,
                                     %v: tensor<1x4x8x16xf32>, %causal: tensor<1x1x8x8xi1>)
    -> tensor<1x4x8x16xf32> {
  %15 = onnx.Constant() {value = dense<-1.000000e+04> : tensor<f32>} : () -> tensor<f32>
  %56 = onnx.Transpose(%k) {perm = [0, 1, 3, 2]} : (tensor<1x4x8x16xf32>) -> tensor<1x4x16x8xf32>
  %57 = onnx.MatMul(%q, %56) : (tensor<1x4x8x16xf32>, tensor<1x4x16x8xf32>) -> tensor<1x4x8x8xf32>
  %61 = onnx.Where(%causal, %57, %15) : (tensor<1x1x8x8xi1>, tensor<1x4x8x8xf32>, tensor<f32>) -> tensor<1x4x8x8xf32>
  %63 = onnx.Softmax(%61) : (tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32> loc("softmax"("Softmax"))
  %64 = onnx.MatMul(%63, %v) : (tensor<1x4x8x8xf32>, tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32>
  return %64 : tensor<1x4x8x16xf32>
}

// -----

// -1000 does not underflow the softmax for every score range: not a mask.
// CHECK-LABEL: xfmr-raise @where_minus_1e3: formed nothing; 1 candidate(s) left unfused
// CHECK-NEXT: unfused attention at node 'softmax' (Softmax): a Where on the scores does not mask with a very negative constant (<= -1e4
// CHECK-LABEL: func.func @where_minus_1e3(
// CHECK-NOT: xfmr.attention
// CHECK: onnx.Where
// CHECK: onnx.Softmax
func.func @where_minus_1e3(%q: tensor<1x4x8x16xf32>, %k: tensor<1x4x8x16xf32>,
                                     %v: tensor<1x4x8x16xf32>, %causal: tensor<1x1x8x8xi1>)
    -> tensor<1x4x8x16xf32> {
  %15 = onnx.Constant() {value = dense<-1.000000e+03> : tensor<f32>} : () -> tensor<f32>
  %56 = onnx.Transpose(%k) {perm = [0, 1, 3, 2]} : (tensor<1x4x8x16xf32>) -> tensor<1x4x16x8xf32>
  %57 = onnx.MatMul(%q, %56) : (tensor<1x4x8x16xf32>, tensor<1x4x16x8xf32>) -> tensor<1x4x8x8xf32>
  %61 = onnx.Where(%causal, %57, %15) : (tensor<1x1x8x8xi1>, tensor<1x4x8x8xf32>, tensor<f32>) -> tensor<1x4x8x8xf32>
  %63 = onnx.Softmax(%61) : (tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32> loc("softmax"("Softmax"))
  %64 = onnx.MatMul(%63, %v) : (tensor<1x4x8x8xf32>, tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32>
  return %64 : tensor<1x4x8x16xf32>
}

// -----

// K given already transposed ([B, H, D, S], e.g. a KV cache stored that
// way): without a Transpose the pass cannot tell K's layout.
// CHECK-LABEL: xfmr-raise @negative_k_not_transposed: formed nothing; 1 candidate(s) left unfused
// CHECK-NEXT: unfused attention at node 'softmax' (Softmax): K is not transposed by a Transpose
// CHECK-LABEL: func.func @negative_k_not_transposed(
// CHECK-NOT: xfmr.attention
// CHECK: onnx.Softmax
func.func @negative_k_not_transposed(%q: tensor<1x4x8x16xf32>, %kt: tensor<1x4x16x8xf32>,
                                     %v: tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32> {
  %6 = onnx.Constant() {value = dense<4.000000e+00> : tensor<f32>} : () -> tensor<f32>
  %106 = onnx.MatMul(%q, %kt) : (tensor<1x4x8x16xf32>, tensor<1x4x16x8xf32>) -> tensor<1x4x8x8xf32>
  %107 = onnx.Div(%106, %6) : (tensor<1x4x8x8xf32>, tensor<f32>) -> tensor<1x4x8x8xf32>
  %110 = onnx.Softmax(%107) : (tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32> loc("softmax"("Softmax"))
  %111 = onnx.MatMul(%110, %v) : (tensor<1x4x8x8xf32>, tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32>
  return %111 : tensor<1x4x8x16xf32>
}

// -----

// The probabilities are also returned (output_attentions): the softmax
// must stay, so nothing is fused.
// CHECK-LABEL: xfmr-raise @negative_probs_used: formed nothing; 1 candidate(s) left unfused
// CHECK-NEXT: unfused attention at node 'softmax' (Softmax): the probabilities are not multiplied by V
// CHECK-LABEL: func.func @negative_probs_used(
// CHECK-NOT: xfmr.attention
// CHECK: onnx.Softmax
func.func @negative_probs_used(%q: tensor<1x4x8x16xf32>, %k: tensor<1x4x8x16xf32>,
                               %v: tensor<1x4x8x16xf32>)
    -> (tensor<1x4x8x16xf32>, tensor<1x4x8x8xf32>) {
  %6 = onnx.Constant() {value = dense<4.000000e+00> : tensor<f32>} : () -> tensor<f32>
  %105 = onnx.Transpose(%k) {perm = [0, 1, 3, 2]} : (tensor<1x4x8x16xf32>) -> tensor<1x4x16x8xf32>
  %106 = onnx.MatMul(%q, %105) : (tensor<1x4x8x16xf32>, tensor<1x4x16x8xf32>) -> tensor<1x4x8x8xf32>
  %107 = onnx.Div(%106, %6) : (tensor<1x4x8x8xf32>, tensor<f32>) -> tensor<1x4x8x8xf32>
  %110 = onnx.Softmax(%107) : (tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32> loc("softmax"("Softmax"))
  %111 = onnx.MatMul(%110, %v) : (tensor<1x4x8x8xf32>, tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32>
  return %111, %110 : tensor<1x4x8x16xf32>, tensor<1x4x8x8xf32>
}

// -----

// 4 query heads over 3 KV heads: not a grouping the op can express.
// CHECK-LABEL: xfmr-raise @negative_kv_heads_do_not_divide: formed nothing; 1 candidate(s) left unfused
// CHECK-NEXT: unfused attention at node 'softmax' (Softmax): the K/V heads do not divide the query heads
// CHECK-LABEL: func.func @negative_kv_heads_do_not_divide(
// CHECK-NOT: xfmr.attention
// CHECK: onnx.Softmax
func.func @negative_kv_heads_do_not_divide(%q: tensor<1x4x8x16xf32>, %k: tensor<1x3x8x16xf32>,
                                           %v: tensor<1x3x8x16xf32>) -> tensor<1x4x8x16xf32> {
  %105 = onnx.Transpose(%k) {perm = [0, 1, 3, 2]} : (tensor<1x3x8x16xf32>) -> tensor<1x3x16x8xf32>
  %106 = onnx.MatMul(%q, %105) : (tensor<1x4x8x16xf32>, tensor<1x3x16x8xf32>) -> tensor<1x4x8x8xf32>
  %110 = onnx.Softmax(%106) : (tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32> loc("softmax"("Softmax"))
  %111 = onnx.MatMul(%110, %v) : (tensor<1x4x8x8xf32>, tensor<1x3x8x16xf32>) -> tensor<1x4x8x16xf32>
  return %111 : tensor<1x4x8x16xf32>
}

// -----

// Attention-23 with is_causal and one query over 8 keys: ONNX aligns the
// triangle top-left (the query sees only key 0), xfmr bottom-right.
// CHECK-LABEL: xfmr-raise @negative_attention23_causal_decode: formed nothing; 1 candidate(s) left unfused
// CHECK-NEXT: unfused attention at node 'attn' (Attention): is_causal with fewer queries than keys (top-left alignment)
// CHECK-LABEL: func.func @negative_attention23_causal_decode(
// CHECK-NOT: xfmr.attention
// CHECK: onnx.Attention
func.func @negative_attention23_causal_decode(%q: tensor<1x4x1x16xf32>, %k: tensor<1x2x8x16xf32>,
                                              %v: tensor<1x2x8x16xf32>) -> tensor<1x4x1x16xf32> {
  %none = onnx.NoValue : none
  %y, %pk, %pv, %qk = onnx.Attention(%q, %k, %v, %none, %none, %none, %none) {is_causal = 1 : i64}
      : (tensor<1x4x1x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, none, none, none, none)
      -> (tensor<1x4x1x16xf32>, none, none, none) loc("attn"("Attention"))
  return %y : tensor<1x4x1x16xf32>
}

// -----

// Attention-23 with a softcap (Gemma 2): the scaled scores are capped before
// the mask (onnxruntime and ONNX's reference agree), xfmr.attention's softcap.
// CHECK-LABEL: xfmr-raise @attention23_softcap: formed 1 attention; 0 candidate(s) left unfused
// CHECK-LABEL: func.func @attention23_softcap(
// CHECK: xfmr.attention {{.*}} {num_heads = 4 : i64, num_kv_heads = 4 : i64, scale = 2.500000e-01 : f32, softcap = 5.000000e+01 : f32}
// CHECK-NOT: onnx.Attention
func.func @attention23_softcap(%q: tensor<1x4x8x16xf32>, %k: tensor<1x4x8x16xf32>,
                                        %v: tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32> {
  %none = onnx.NoValue : none
  %y, %pk, %pv, %qk = onnx.Attention(%q, %k, %v, %none, %none, %none, %none) {softcap = 5.000000e+01 : f32}
      : (tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>, none, none, none, none)
      -> (tensor<1x4x8x16xf32>, none, none, none) loc("attn"("Attention"))
  return %y : tensor<1x4x8x16xf32>
}

// -----

// Hugging Face in half precision: softmax in f32 between two Casts, and the
// causal Where filling f16's lowest value (-65504).
// CHECK-LABEL: xfmr-raise @f16_softmax_in_f32: formed 1 attention; 0 candidate(s) left unfused
// CHECK-LABEL: func.func @f16_softmax_in_f32(
// CHECK: xfmr.attention %arg0, %arg1, %arg2 mask %arg3 {num_heads = 2 : i64, num_kv_heads = 2 : i64, scale = 2.500000e-01 : f32} : tensor<1x2x8x16xf16>, tensor<1x2x8x16xf16>, tensor<1x2x8x16xf16>, tensor<1x1x8x8xi1> -> tensor<1x2x8x16xf16>
// CHECK-NOT: onnx.Softmax
// CHECK: return
func.func @f16_softmax_in_f32(%q: tensor<1x2x8x16xf16>, %k: tensor<1x2x8x16xf16>,
                              %v: tensor<1x2x8x16xf16>, %keep: tensor<1x1x8x8xi1>)
    -> tensor<1x2x8x16xf16> {
  %four = onnx.Constant() {value = dense<4.0> : tensor<f16>} : () -> tensor<f16>
  %low = onnx.Constant() {value = dense<-65504.0> : tensor<f16>} : () -> tensor<f16>
  %kt = onnx.Transpose(%k) {perm = [0, 1, 3, 2]} : (tensor<1x2x8x16xf16>) -> tensor<1x2x16x8xf16>
  %s = onnx.MatMul(%q, %kt) : (tensor<1x2x8x16xf16>, tensor<1x2x16x8xf16>) -> tensor<1x2x8x8xf16>
  %d = onnx.Div(%s, %four) : (tensor<1x2x8x8xf16>, tensor<f16>) -> tensor<1x2x8x8xf16>
  %w = onnx.Where(%keep, %d, %low) : (tensor<1x1x8x8xi1>, tensor<1x2x8x8xf16>, tensor<f16>) -> tensor<1x2x8x8xf16>
  %c = onnx.Cast(%w) {to = 1 : i64} : (tensor<1x2x8x8xf16>) -> tensor<1x2x8x8xf32>
  %p = onnx.Softmax(%c) {axis = -1 : i64} : (tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32>
  %p16 = onnx.Cast(%p) {to = 10 : i64} : (tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf16>
  %o = onnx.MatMul(%p16, %v) : (tensor<1x2x8x8xf16>, tensor<1x2x8x16xf16>) -> tensor<1x2x8x16xf16>
  return %o : tensor<1x2x8x16xf16>
}

// -----

// The exporter also reads the repeated K's shape (HF slices its mask to the
// key length): the Shape is rebuilt from the un-repeated K (heads x n_rep),
// so the repeated tensor is not computed just for its shape.
// CHECK-LABEL: func.func @repeated_k_shape(
// CHECK: %[[SHAPE:.*]] = onnx.Shape(%arg1) : (tensor<?x2x?x16xf32>) -> tensor<4xi64>
// CHECK: %[[REP:.*]] = onnx.Constant() {value = dense<[1, 2, 1, 1]> : tensor<4xi64>}
// CHECK: %[[LEN:.*]] = onnx.Mul(%[[SHAPE]], %[[REP]])
// CHECK: xfmr.attention %arg0, %arg1, %arg2 {num_heads = 4 : i64, num_kv_heads = 2 : i64
// CHECK-NOT: onnx.Expand
// CHECK: return %{{.*}}, %[[LEN]]
func.func @repeated_k_shape(%q: tensor<?x4x?x16xf32>, %k: tensor<?x2x?x16xf32>,
                            %v: tensor<?x2x?x16xf32>, %expand: tensor<5xi64>, %flat: tensor<4xi64>)
    -> (tensor<?x4x?x16xf32>, tensor<4xi64>) {
  %two = onnx.Constant() {value = dense<2> : tensor<1xi64>} : () -> tensor<1xi64>
  %four = onnx.Constant() {value = dense<4.0> : tensor<f32>} : () -> tensor<f32>
  %ku = onnx.Unsqueeze(%k, %two) : (tensor<?x2x?x16xf32>, tensor<1xi64>) -> tensor<?x2x1x?x16xf32>
  %ke = onnx.Expand(%ku, %expand) : (tensor<?x2x1x?x16xf32>, tensor<5xi64>) -> tensor<?x2x?x?x16xf32>
  %kr = onnx.Reshape(%ke, %flat) : (tensor<?x2x?x?x16xf32>, tensor<4xi64>) -> tensor<?x4x?x16xf32>
  %vu = onnx.Unsqueeze(%v, %two) : (tensor<?x2x?x16xf32>, tensor<1xi64>) -> tensor<?x2x1x?x16xf32>
  %ve = onnx.Expand(%vu, %expand) : (tensor<?x2x1x?x16xf32>, tensor<5xi64>) -> tensor<?x2x?x?x16xf32>
  %vr = onnx.Reshape(%ve, %flat) : (tensor<?x2x?x?x16xf32>, tensor<4xi64>) -> tensor<?x4x?x16xf32>
  %len = onnx.Shape(%kr) : (tensor<?x4x?x16xf32>) -> tensor<4xi64>
  %kt = onnx.Transpose(%kr) {perm = [0, 1, 3, 2]} : (tensor<?x4x?x16xf32>) -> tensor<?x4x16x?xf32>
  %s = onnx.MatMul(%q, %kt) : (tensor<?x4x?x16xf32>, tensor<?x4x16x?xf32>) -> tensor<?x4x?x?xf32>
  %d = onnx.Div(%s, %four) : (tensor<?x4x?x?xf32>, tensor<f32>) -> tensor<?x4x?x?xf32>
  %p = onnx.Softmax(%d) {axis = -1 : i64} : (tensor<?x4x?x?xf32>) -> tensor<?x4x?x?xf32>
  %o = onnx.MatMul(%p, %vr) : (tensor<?x4x?x?xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x16xf32>
  return %o, %len : tensor<?x4x?x16xf32>, tensor<4xi64>
}

// -----

// A Where keep mask that is a window of a constant that is not lower
// triangular (one entry above the diagonal set) stays a mask: not causal.
// CHECK-LABEL: xfmr-raise @negative_window_not_triangular: formed 1 attention; 0 candidate(s) left unfused
// CHECK-LABEL: func.func @negative_window_not_triangular(
// CHECK: xfmr.attention %arg0, %arg1, %arg2 mask %{{.*}} {num_heads = 2 : i64, num_kv_heads = 2 : i64, scale = 2.500000e-01 : f32} : {{.*}}, tensor<1x1x?x?xi1>
func.func @negative_window_not_triangular(%q: tensor<1x2x?x16xf32>, %k: tensor<1x2x?x16xf32>,
                                          %v: tensor<1x2x?x16xf32>, %r0: tensor<1xi64>,
                                          %r1: tensor<1xi64>) -> tensor<1x2x?x16xf32> {
  %bias = onnx.Constant() {value = dense<[[[[true, true, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]]]> : tensor<1x1x4x4xi1>} : () -> tensor<1x1x4x4xi1>
  %two = onnx.Constant() {value = dense<2> : tensor<1xi64>} : () -> tensor<1xi64>
  %three = onnx.Constant() {value = dense<3> : tensor<1xi64>} : () -> tensor<1xi64>
  %zero = onnx.Constant() {value = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %low = onnx.Constant() {value = dense<-3.40282347E+38> : tensor<f32>} : () -> tensor<f32>
  %four = onnx.Constant() {value = dense<4.0> : tensor<f32>} : () -> tensor<f32>
  %one = onnx.Constant() {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %rows = onnx.Slice(%bias, %r0, %r1, %two, %one) : (tensor<1x1x4x4xi1>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1x1x?x4xi1>
  %keep = onnx.Slice(%rows, %zero, %r1, %three, %one) : (tensor<1x1x?x4xi1>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1x1x?x?xi1>
  %kt = onnx.Transpose(%k) {perm = [0, 1, 3, 2]} : (tensor<1x2x?x16xf32>) -> tensor<1x2x16x?xf32>
  %s = onnx.MatMul(%q, %kt) : (tensor<1x2x?x16xf32>, tensor<1x2x16x?xf32>) -> tensor<1x2x?x?xf32>
  %d = onnx.Div(%s, %four) : (tensor<1x2x?x?xf32>, tensor<f32>) -> tensor<1x2x?x?xf32>
  %w = onnx.Where(%keep, %d, %low) : (tensor<1x1x?x?xi1>, tensor<1x2x?x?xf32>, tensor<f32>) -> tensor<1x2x?x?xf32>
  %p = onnx.Softmax(%w) {axis = -1 : i64} : (tensor<1x2x?x?xf32>) -> tensor<1x2x?x?xf32>
  %o = onnx.MatMul(%p, %v) : (tensor<1x2x?x?xf32>, tensor<1x2x?x16xf32>) -> tensor<1x2x?x16xf32>
  return %o : tensor<1x2x?x16xf32>
}

// -----

// Gemma-2's attention logit soft-capping: scores * scaling, then
// 50 * tanh(x / 50), then the additive mask. The op's scale is the scores'
// (0.25 / 50) times the cap; softcap = 50.
// CHECK-LABEL: xfmr-raise @gemma2_softcap: formed 1 attention; 0 candidate(s) left unfused
// CHECK-LABEL: func.func @gemma2_softcap(
// CHECK: xfmr.attention %{{.*}}, %{{.*}}, %{{.*}} mask %{{.*}} {num_heads = 4 : i64, num_kv_heads = 4 : i64, scale = 2.500000e-01 : f32, softcap = 5.000000e+01 : f32}
// CHECK-NOT: onnx.Tanh
func.func @gemma2_softcap(%q: tensor<1x4x8x16xf32>, %k: tensor<1x4x8x16xf32>,
                          %v: tensor<1x4x8x16xf32>, %mask: tensor<1x1x8x8xf32>)
    -> tensor<1x4x8x16xf32> {
  %scaling = onnx.Constant() {value = dense<2.500000e-01> : tensor<f32>} : () -> tensor<f32>
  %cap = onnx.Constant() {value = dense<5.000000e+01> : tensor<f32>} : () -> tensor<f32>
  %kt = onnx.Transpose(%k) {perm = [0, 1, 3, 2]} : (tensor<1x4x8x16xf32>) -> tensor<1x4x16x8xf32>
  %qk = onnx.MatMul(%q, %kt) : (tensor<1x4x8x16xf32>, tensor<1x4x16x8xf32>) -> tensor<1x4x8x8xf32>
  %s = onnx.Mul(%qk, %scaling) : (tensor<1x4x8x8xf32>, tensor<f32>) -> tensor<1x4x8x8xf32>
  %d = onnx.Div(%s, %cap) : (tensor<1x4x8x8xf32>, tensor<f32>) -> tensor<1x4x8x8xf32>
  %t = onnx.Tanh(%d) : (tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  %c = onnx.Mul(%t, %cap) : (tensor<1x4x8x8xf32>, tensor<f32>) -> tensor<1x4x8x8xf32>
  %m = onnx.Add(%c, %mask) : (tensor<1x4x8x8xf32>, tensor<1x1x8x8xf32>) -> tensor<1x4x8x8xf32>
  %p = onnx.Softmax(%m) {axis = -1 : i64} : (tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  %o = onnx.MatMul(%p, %v) : (tensor<1x4x8x8xf32>, tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32>
  return %o : tensor<1x4x8x16xf32>
}

// -----

// A Tanh on the scores that is not a soft-cap (two of them) stays unfused.
// CHECK-LABEL: xfmr-raise @negative_double_tanh: formed nothing; 1 candidate(s) left unfused
// CHECK: Tanh that is not one soft-cap
func.func @negative_double_tanh(%q: tensor<1x4x8x16xf32>, %k: tensor<1x4x8x16xf32>,
                                %v: tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32> {
  %kt = onnx.Transpose(%k) {perm = [0, 1, 3, 2]} : (tensor<1x4x8x16xf32>) -> tensor<1x4x16x8xf32>
  %qk = onnx.MatMul(%q, %kt) : (tensor<1x4x8x16xf32>, tensor<1x4x16x8xf32>) -> tensor<1x4x8x8xf32>
  %t1 = onnx.Tanh(%qk) : (tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  %t2 = onnx.Tanh(%t1) : (tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  %p = onnx.Softmax(%t2) {axis = -1 : i64} : (tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  %o = onnx.MatMul(%p, %v) : (tensor<1x4x8x8xf32>, tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32>
  return %o : tensor<1x4x8x16xf32>
}

// -----

// gpt-oss's attention sinks: the softmax runs over Concat(scores, sinks) on
// the key axis, less its row max; a Slice drops the sink column before the
// product with V. The sinks ([1, Hq, 1, 1], one logit per query head) become
// the op's `sinks`; the row max, the concat and the slice are gone.
// CHECK-LABEL: xfmr-raise @gpt_oss_sinks: formed 1 attention; 0 candidate(s) left unfused
// CHECK-LABEL: func.func @gpt_oss_sinks(
// CHECK: xfmr.attention %{{.*}}, %{{.*}}, %{{.*}} mask %{{.*}} {num_heads = 2 : i64, num_kv_heads = 2 : i64, scale = 2.500000e-01 : f32, sinks = array<f32: 5.000000e-01, -1.000000e+00>}
// CHECK-NOT: onnx.Softmax
// CHECK-NOT: onnx.Slice
func.func @gpt_oss_sinks(%q: tensor<?x2x?x16xf32>, %k: tensor<?x2x?x16xf32>,
                         %v: tensor<?x2x?x16xf32>, %mask: tensor<?x1x?x?xf32>,
                         %eshape: tensor<4xi64>) -> tensor<?x2x?x16xf32> {
  %scaling = onnx.Constant() {value = dense<2.500000e-01> : tensor<f32>} : () -> tensor<f32>
  %sinks = onnx.Constant() {value = dense<[[[[0.5]], [[-1.0]]]]> : tensor<1x2x1x1xf32>} : () -> tensor<1x2x1x1xf32>
  %last = onnx.Constant() {value = dense<-1> : tensor<1xi64>} : () -> tensor<1xi64>
  %zero = onnx.Constant() {value = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %one = onnx.Constant() {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %kt = onnx.Transpose(%k) {perm = [0, 1, 3, 2]} : (tensor<?x2x?x16xf32>) -> tensor<?x2x16x?xf32>
  %qk = onnx.MatMul(%q, %kt) : (tensor<?x2x?x16xf32>, tensor<?x2x16x?xf32>) -> tensor<?x2x?x?xf32>
  %s = onnx.Mul(%qk, %scaling) : (tensor<?x2x?x?xf32>, tensor<f32>) -> tensor<?x2x?x?xf32>
  %m = onnx.Add(%s, %mask) : (tensor<?x2x?x?xf32>, tensor<?x1x?x?xf32>) -> tensor<?x2x?x?xf32>
  %e = onnx.Expand(%sinks, %eshape) : (tensor<1x2x1x1xf32>, tensor<4xi64>) -> tensor<?x2x?x1xf32>
  %c = onnx.Concat(%m, %e) {axis = -1 : i64} : (tensor<?x2x?x?xf32>, tensor<?x2x?x1xf32>) -> tensor<?x2x?x?xf32>
  %mx = onnx.ReduceMax(%c, %last) : (tensor<?x2x?x?xf32>, tensor<1xi64>) -> tensor<?x2x?x1xf32>
  %d = onnx.Sub(%c, %mx) : (tensor<?x2x?x?xf32>, tensor<?x2x?x1xf32>) -> tensor<?x2x?x?xf32>
  %p = onnx.Softmax(%d) {axis = -1 : i64} : (tensor<?x2x?x?xf32>) -> tensor<?x2x?x?xf32>
  %ps = onnx.Slice(%p, %zero, %last, %last, %one) : (tensor<?x2x?x?xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x2x?x?xf32>
  %o = onnx.MatMul(%ps, %v) : (tensor<?x2x?x?xf32>, tensor<?x2x?x16xf32>) -> tensor<?x2x?x16xf32>
  return %o : tensor<?x2x?x16xf32>
}

// -----

// A dynamo export without value_info: the projections are reshaped with
// batch and sequence read from another input (Shape(mask)), so shape
// inference cannot prove the -1 and leaves the heads dynamic. The reshape
// splits the static 32 of the projection into [-1, 8]: 4 heads, asserted at
// run time.
// CHECK-LABEL: xfmr-raise @symbolic_heads_from_split: formed 1 attention; 0 candidate(s) left unfused
// CHECK-LABEL: func.func @symbolic_heads_from_split(
// CHECK: cf.assert {{.*}}"node 'softmax' (Softmax): the query: dim 1 must be 4 (derived at compile time)"
// CHECK-NEXT: %[[Q:.*]] = tensor.cast {{.*}} : tensor<?x?x?x8xf32> to tensor<?x4x?x8xf32>
// CHECK: cf.assert {{.*}}"node 'softmax' (Softmax): the key: dim 1 must be 4 (derived at compile time)"
// CHECK-NEXT: %[[K:.*]] = tensor.cast
// CHECK: cf.assert {{.*}}"node 'softmax' (Softmax): the value: dim 1 must be 4 (derived at compile time)"
// CHECK-NEXT: %[[V:.*]] = tensor.cast
// CHECK: xfmr.attention %[[Q]], %[[K]], %[[V]] {num_heads = 4 : i64, num_kv_heads = 4 : i64, scale = 0.353553385 : f32} : tensor<?x4x?x8xf32>, tensor<?x4x?x8xf32>, tensor<?x4x?x8xf32> -> tensor<?x4x?x8xf32>
func.func @symbolic_heads_from_split(%x: tensor<?x?x32xf32>, %m: tensor<?x?xi64>) -> tensor<?x4x?x8xf32> {
  %wq = onnx.Constant() {value = dense<0.5> : tensor<32x32xf32>} : () -> tensor<32x32xf32>
  %minus1 = onnx.Constant() {value = dense<-1> : tensor<1xi64>} : () -> tensor<1xi64>
  %eight = onnx.Constant() {value = dense<8> : tensor<1xi64>} : () -> tensor<1xi64>
  %scale = onnx.Constant() {value = dense<0.353553385> : tensor<f32>} : () -> tensor<f32>
  %b = onnx.Shape(%m) {end = 1 : i64} : (tensor<?x?xi64>) -> tensor<1xi64>
  %s = onnx.Shape(%m) {end = 2 : i64, start = 1 : i64} : (tensor<?x?xi64>) -> tensor<1xi64>
  %shape = onnx.Concat(%b, %s, %minus1, %eight) {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<4xi64>
  %p = onnx.MatMul(%x, %wq) : (tensor<?x?x32xf32>, tensor<32x32xf32>) -> tensor<?x?x32xf32>
  %r = onnx.Reshape(%p, %shape) : (tensor<?x?x32xf32>, tensor<4xi64>) -> tensor<?x?x?x8xf32>
  %q = onnx.Transpose(%r) {perm = [0, 2, 1, 3]} : (tensor<?x?x?x8xf32>) -> tensor<?x?x?x8xf32>
  %kt = onnx.Transpose(%r) {perm = [0, 2, 3, 1]} : (tensor<?x?x?x8xf32>) -> tensor<?x?x8x?xf32>
  %qk = onnx.MatMul(%q, %kt) : (tensor<?x?x?x8xf32>, tensor<?x?x8x?xf32>) -> tensor<?x?x?x?xf32>
  %sc = onnx.Mul(%qk, %scale) : (tensor<?x?x?x?xf32>, tensor<f32>) -> tensor<?x?x?x?xf32>
  %sm = onnx.Softmax(%sc) : (tensor<?x?x?x?xf32>) -> tensor<?x?x?x?xf32> loc("softmax"("Softmax"))
  %o = onnx.MatMul(%sm, %q) : (tensor<?x?x?x?xf32>, tensor<?x?x?x8xf32>) -> tensor<?x?x?x8xf32>
  %c = tensor.cast %o : tensor<?x?x?x8xf32> to tensor<?x4x?x8xf32>
  return %c : tensor<?x4x?x8xf32>
}

// -----

// Heads read from an input: nothing in the graph fixes them, and the report
// says where the dimension comes from.
// CHECK-LABEL: xfmr-raise @negative_heads_from_input: formed nothing; 1 candidate(s) left unfused
// CHECK-NEXT: unfused attention at node 'softmax' (Softmax): the query heads are dynamic (input 'q' dim 1 ('heads'))
func.func @negative_heads_from_input(%q: tensor<1x?x8x16xf32> {onnx.name = "q", onnx.dim_params = ["", "heads", "", ""]})
    -> tensor<1x?x8x16xf32> {
  %6 = onnx.Constant() {value = dense<4.000000e+00> : tensor<f32>} : () -> tensor<f32>
  %105 = onnx.Transpose(%q) {perm = [0, 1, 3, 2]} : (tensor<1x?x8x16xf32>) -> tensor<1x?x16x8xf32>
  %106 = onnx.MatMul(%q, %105) : (tensor<1x?x8x16xf32>, tensor<1x?x16x8xf32>) -> tensor<1x?x8x8xf32>
  %107 = onnx.Div(%106, %6) : (tensor<1x?x8x8xf32>, tensor<f32>) -> tensor<1x?x8x8xf32>
  %110 = onnx.Softmax(%107) : (tensor<1x?x8x8xf32>) -> tensor<1x?x8x8xf32> loc("softmax"("Softmax"))
  %111 = onnx.MatMul(%110, %q) : (tensor<1x?x8x8xf32>, tensor<1x?x8x16xf32>) -> tensor<1x?x8x16xf32>
  return %111 : tensor<1x?x8x16xf32>
}
