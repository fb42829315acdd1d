// RUN: xfmr-opt %s --split-input-file --xfmr-raise=report=true | FileCheck %s

// xfmr-raise on rotary embeddings, x * cos + rotate_half(x) * sin, from
// real exports: Llama's cos/sin computed as Cos/Sin(Concat(f, f)), and
// Mixtral's rows of constant cos/sin caches; then cases where one detail
// must stop the match.

// Llama, layer 0 of llama_gqa_static.onnx: f = positions x inverse
// frequencies ([1, 8, 8]), cos/sin = Cos/Sin(Concat(f, f)) * 1.0,
// unsqueezed to [1, 1, 8, 16] and shared by the q and k rotations. Each
// rope gets Cos(f) and Sin(f) of the half width; the unit scaling is
// dropped.
// CHECK-LABEL: xfmr-raise @llama_rope: formed 2 rope; 0 candidate(s) left unfused
// CHECK-LABEL: func.func @llama_rope(
// CHECK-SAME: %[[Q:[a-z0-9]+]]: tensor<1x4x8x16xf32>, %[[K:[a-z0-9]+]]: tensor<1x2x8x16xf32>, %[[POS:[a-z0-9]+]]: tensor<1x8xi64>
// CHECK-NOT: onnx.Concat
// CHECK: %[[F:.*]] = onnx.Transpose(%{{.*}}) {perm = [0, 2, 1]} : (tensor<1x8x8xf32>) -> tensor<1x8x8xf32>
// CHECK-NOT: onnx.Concat
// CHECK: %[[COS:.*]] = onnx.Cos(%[[F]]) : (tensor<1x8x8xf32>) -> tensor<1x8x8xf32>
// CHECK: %[[SIN:.*]] = onnx.Sin(%[[F]]) : (tensor<1x8x8xf32>) -> tensor<1x8x8xf32>
// CHECK: %[[RQ:.*]] = xfmr.rope %[[Q]], %[[COS]], %[[SIN]] {rotary_dim = 16 : i64} : tensor<1x4x8x16xf32>, tensor<1x8x8xf32>, tensor<1x8x8xf32>
// CHECK: %[[COS2:.*]] = onnx.Cos(%[[F]]) : (tensor<1x8x8xf32>) -> tensor<1x8x8xf32>
// CHECK: %[[SIN2:.*]] = onnx.Sin(%[[F]]) : (tensor<1x8x8xf32>) -> tensor<1x8x8xf32>
// CHECK: %[[RK:.*]] = xfmr.rope %[[K]], %[[COS2]], %[[SIN2]] {rotary_dim = 16 : i64} : tensor<1x2x8x16xf32>, tensor<1x8x8xf32>, tensor<1x8x8xf32>
// CHECK-NOT: onnx.Neg
// CHECK-NOT: onnx.Slice
// CHECK-NOT: onnx.Mul
// CHECK: return %[[RQ]], %[[RK]]
func.func @llama_rope(%78: tensor<1x4x8x16xf32>, %80: tensor<1x2x8x16xf32>, %arg2: tensor<1x8xi64>)
    -> (tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>) {
  %0 = onnx.Constant() {value = dense<[[[1.000000e+00], [0.316227764], [1.000000e-01], [0.0316227786], [0.00999999977], [0.00316227786], [1.000000e-03], [3.16227786E-4]]]> : tensor<1x8x1xf32>} : () -> tensor<1x8x1xf32>
  %12 = onnx.Constant() {value = dense<1.000000e+00> : tensor<f32>} : () -> tensor<f32>
  %13 = onnx.Constant() {value = dense<9223372036854775807> : tensor<1xi64>} : () -> tensor<1xi64>
  %18 = onnx.Constant() {value = dense<8> : tensor<1xi64>} : () -> tensor<1xi64>
  %19 = onnx.Constant() {value = dense<3> : tensor<1xi64>} : () -> tensor<1xi64>
  %20 = onnx.Constant() {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %21 = onnx.Constant() {value = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %58 = onnx.Unsqueeze(%arg2, %20) : (tensor<1x8xi64>, tensor<1xi64>) -> tensor<1x1x8xi64>
  %59 = onnx.Cast(%58) {to = 1 : i64} : (tensor<1x1x8xi64>) -> tensor<1x1x8xf32>
  %60 = onnx.MatMul(%0, %59) : (tensor<1x8x1xf32>, tensor<1x1x8xf32>) -> tensor<1x8x8xf32>
  %61 = onnx.Transpose(%60) {perm = [0, 2, 1]} : (tensor<1x8x8xf32>) -> tensor<1x8x8xf32>
  %62 = onnx.Concat(%61, %61) {axis = -1 : i64} : (tensor<1x8x8xf32>, tensor<1x8x8xf32>) -> tensor<1x8x16xf32>
  %63 = onnx.Cos(%62) : (tensor<1x8x16xf32>) -> tensor<1x8x16xf32>
  %64 = onnx.Sin(%62) : (tensor<1x8x16xf32>) -> tensor<1x8x16xf32>
  %65 = onnx.Mul(%63, %12) : (tensor<1x8x16xf32>, tensor<f32>) -> tensor<1x8x16xf32>
  %66 = onnx.Mul(%64, %12) : (tensor<1x8x16xf32>, tensor<f32>) -> tensor<1x8x16xf32>
  %83 = onnx.Unsqueeze(%65, %20) : (tensor<1x8x16xf32>, tensor<1xi64>) -> tensor<1x1x8x16xf32>
  %84 = onnx.Unsqueeze(%66, %20) : (tensor<1x8x16xf32>, tensor<1xi64>) -> tensor<1x1x8x16xf32>
  %85 = onnx.Mul(%78, %83) : (tensor<1x4x8x16xf32>, tensor<1x1x8x16xf32>) -> tensor<1x4x8x16xf32>
  %86 = onnx.Slice(%78, %21, %18, %19, %20) : (tensor<1x4x8x16xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1x4x8x8xf32>
  %87 = onnx.Slice(%78, %18, %13, %19, %20) : (tensor<1x4x8x16xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1x4x8x8xf32>
  %88 = onnx.Neg(%87) : (tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  %89 = onnx.Concat(%88, %86) {axis = -1 : i64} : (tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32>) -> tensor<1x4x8x16xf32>
  %90 = onnx.Mul(%89, %84) : (tensor<1x4x8x16xf32>, tensor<1x1x8x16xf32>) -> tensor<1x4x8x16xf32>
  %91 = onnx.Add(%85, %90) : (tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32>
  %92 = onnx.Mul(%80, %83) : (tensor<1x2x8x16xf32>, tensor<1x1x8x16xf32>) -> tensor<1x2x8x16xf32>
  %93 = onnx.Slice(%80, %21, %18, %19, %20) : (tensor<1x2x8x16xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1x2x8x8xf32>
  %94 = onnx.Slice(%80, %18, %13, %19, %20) : (tensor<1x2x8x16xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1x2x8x8xf32>
  %95 = onnx.Neg(%94) : (tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32>
  %96 = onnx.Concat(%95, %93) {axis = -1 : i64} : (tensor<1x2x8x8xf32>, tensor<1x2x8x8xf32>) -> tensor<1x2x8x16xf32>
  %97 = onnx.Mul(%96, %84) : (tensor<1x2x8x16xf32>, tensor<1x1x8x16xf32>) -> tensor<1x2x8x16xf32>
  %98 = onnx.Add(%92, %97) : (tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32>
  return %91, %98 : tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>
}

// -----

// Llama, layer 0 of llama_gqa.onnx (dynamic batch and sequence): the
// inverse frequencies are expanded to the batch at run time, so
// f is [?, ?, 8].
// CHECK-LABEL: xfmr-raise @llama_rope_dynamic: formed 1 rope; 0 candidate(s) left unfused
// CHECK-LABEL: func.func @llama_rope_dynamic(
// CHECK-SAME: %[[Q:[a-z0-9]+]]: tensor<?x4x?x16xf32>
// CHECK: %[[F:.*]] = onnx.Transpose(%{{.*}}) {perm = [0, 2, 1]} : (tensor<?x8x?xf32>) -> tensor<?x?x8xf32>
// CHECK: %[[COS:.*]] = onnx.Cos(%[[F]]) : (tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
// CHECK: %[[SIN:.*]] = onnx.Sin(%[[F]]) : (tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
// CHECK: %[[R:.*]] = xfmr.rope %[[Q]], %[[COS]], %[[SIN]] {rotary_dim = 16 : i64} : tensor<?x4x?x16xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>
// CHECK-NOT: onnx.Concat
// CHECK-NOT: onnx.Neg
// CHECK: return %[[R]]
func.func @llama_rope_dynamic(%146: tensor<?x4x?x16xf32>, %arg2: tensor<?x?xi64>) -> tensor<?x4x?x16xf32> {
  %2 = onnx.Constant() {value = dense<8> : tensor<1xi64>} : () -> tensor<1xi64>
  %3 = onnx.Constant() {value = dense<-1> : tensor<3xi64>} : () -> tensor<3xi64>
  %4 = onnx.Constant() {value = dense<1> : tensor<3xi64>} : () -> tensor<3xi64>
  %12 = onnx.Constant() {value = dense<1.000000e+00> : tensor<f32>} : () -> tensor<f32>
  %13 = onnx.Constant() {value = dense<[[[1.000000e+00], [0.316227764], [1.000000e-01], [0.0316227786], [0.00999999977], [0.00316227786], [1.000000e-03], [3.16227786E-4]]]> : tensor<1x8x1xf32>} : () -> tensor<1x8x1xf32>
  %14 = onnx.Constant() {value = dense<9223372036854775807> : tensor<1xi64>} : () -> tensor<1xi64>
  %23 = onnx.Constant() {value = dense<3> : tensor<1xi64>} : () -> tensor<1xi64>
  %24 = onnx.Constant() {value = dense<-1> : tensor<1xi64>} : () -> tensor<1xi64>
  %25 = onnx.Constant() {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %27 = onnx.Constant() {value = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %28 = onnx.Constant() {value = dense<0> : tensor<i64>} : () -> tensor<i64>
  %112 = onnx.Shape(%arg2) : (tensor<?x?xi64>) -> tensor<2xi64>
  %113 = onnx.Gather(%112, %28) : (tensor<2xi64>, tensor<i64>) -> tensor<i64>
  %114 = onnx.Unsqueeze(%113, %27) : (tensor<i64>, tensor<1xi64>) -> tensor<1xi64>
  %115 = onnx.Concat(%114, %24, %25) {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<3xi64>
  %116 = onnx.Reshape(%115, %24) : (tensor<3xi64>, tensor<1xi64>) -> tensor<3xi64>
  %117 = onnx.Equal(%116, %3) : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xi1>
  %118 = onnx.Where(%117, %4, %116) : (tensor<3xi1>, tensor<3xi64>, tensor<3xi64>) -> tensor<3xi64>
  %119 = onnx.Expand(%13, %118) : (tensor<1x8x1xf32>, tensor<3xi64>) -> tensor<?x8x?xf32>
  %120 = onnx.Unsqueeze(%arg2, %25) : (tensor<?x?xi64>, tensor<1xi64>) -> tensor<?x1x?xi64>
  %121 = onnx.Cast(%120) {to = 1 : i64} : (tensor<?x1x?xi64>) -> tensor<?x1x?xf32>
  %122 = onnx.MatMul(%119, %121) : (tensor<?x8x?xf32>, tensor<?x1x?xf32>) -> tensor<?x8x?xf32>
  %123 = onnx.Transpose(%122) {perm = [0, 2, 1]} : (tensor<?x8x?xf32>) -> tensor<?x?x8xf32>
  %124 = onnx.Concat(%123, %123) {axis = -1 : i64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x16xf32>
  %125 = onnx.Cos(%124) : (tensor<?x?x16xf32>) -> tensor<?x?x16xf32>
  %126 = onnx.Sin(%124) : (tensor<?x?x16xf32>) -> tensor<?x?x16xf32>
  %127 = onnx.Mul(%125, %12) : (tensor<?x?x16xf32>, tensor<f32>) -> tensor<?x?x16xf32>
  %128 = onnx.Mul(%126, %12) : (tensor<?x?x16xf32>, tensor<f32>) -> tensor<?x?x16xf32>
  %152 = onnx.Unsqueeze(%127, %25) : (tensor<?x?x16xf32>, tensor<1xi64>) -> tensor<?x1x?x16xf32>
  %153 = onnx.Unsqueeze(%128, %25) : (tensor<?x?x16xf32>, tensor<1xi64>) -> tensor<?x1x?x16xf32>
  %154 = onnx.Mul(%146, %152) : (tensor<?x4x?x16xf32>, tensor<?x1x?x16xf32>) -> tensor<?x4x?x16xf32>
  %155 = onnx.Slice(%146, %27, %2, %23, %25) : (tensor<?x4x?x16xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x4x?x8xf32>
  %156 = onnx.Slice(%146, %2, %14, %23, %25) : (tensor<?x4x?x16xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x4x?x8xf32>
  %157 = onnx.Neg(%156) : (tensor<?x4x?x8xf32>) -> tensor<?x4x?x8xf32>
  %158 = onnx.Concat(%157, %155) {axis = -1 : i64} : (tensor<?x4x?x8xf32>, tensor<?x4x?x8xf32>) -> tensor<?x4x?x16xf32>
  %159 = onnx.Mul(%158, %153) : (tensor<?x4x?x16xf32>, tensor<?x1x?x16xf32>) -> tensor<?x4x?x16xf32>
  %160 = onnx.Add(%154, %159) : (tensor<?x4x?x16xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x16xf32>
  return %160 : tensor<?x4x?x16xf32>
}

// -----

// Mixtral, layer 0 of mixtral_moe.onnx (dynamic): rows of constant
// [positions, 16] cos/sin caches (small ones here, halves equal as the
// exporter writes them), sliced to the key length and gathered by
// position ids. The op reads the gathered first halves of the caches.
// CHECK-LABEL: xfmr-raise @mixtral_rope_cached: formed 1 rope; 0 candidate(s) left unfused
// CHECK-LABEL: func.func @mixtral_rope_cached(
// CHECK-SAME: %[[Q:[a-z0-9]+]]: tensor<?x4x?x16xf32>, %[[K:[a-z0-9]+]]: tensor<?x2x?x16xf32>, %[[POS:[a-z0-9]+]]: tensor<?x?xi64>
// CHECK-NOT: xfmr.embedding
// CHECK-NOT: onnx.Gather(%{{.*}}, %[[POS]]) : (tensor<?x16xf32>
// CHECK: %[[CC:.*]] = onnx.Constant() {value = dense<{{\[\[}}1.000000e+00, 1.000000e+00, 1.000000e+00, 1.000000e+00, 1.000000e+00, 1.000000e+00, 1.000000e+00, 1.000000e+00], [5.403000e-01, 0.950399994, 9.950000e-01, 0.999499976, 1.000000e+00, 1.000000e+00, 1.000000e+00, 1.000000e+00], [-4.161000e-01, {{.*}}]]> : tensor<4x8xf32>}
// CHECK: %[[COS:.*]] = onnx.Gather(%[[CC]], %[[POS]]) : (tensor<4x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
// CHECK: %[[SC:.*]] = onnx.Constant() {value = dense<{{\[\[}}0.000000e+00, 0.000000e+00, 0.000000e+00, 0.000000e+00, 0.000000e+00, 0.000000e+00, 0.000000e+00, 0.000000e+00], [0.841499984, 3.110000e-01, {{.*}}]]> : tensor<4x8xf32>}
// CHECK: %[[SIN:.*]] = onnx.Gather(%[[SC]], %[[POS]]) : (tensor<4x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
// CHECK: %[[R:.*]] = xfmr.rope %[[Q]], %[[COS]], %[[SIN]] {rotary_dim = 16 : i64} : tensor<?x4x?x16xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>
// CHECK-NOT: xfmr.embedding
// CHECK-NOT: onnx.Neg
// CHECK: return %[[R]]
func.func @mixtral_rope_cached(%155: tensor<?x4x?x16xf32>, %158: tensor<?x2x?x16xf32>, %arg2: tensor<?x?xi64>)
    -> tensor<?x4x?x16xf32> {
  %3 = onnx.Constant() {value = dense<8> : tensor<1xi64>} : () -> tensor<1xi64>
  %13 = onnx.Constant() {value = dense<[[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0], [0.8415, 0.311, 0.0998, 0.0316, 0.01, 0.0032, 0.001, 0.0003, 0.8415, 0.311, 0.0998, 0.0316, 0.01, 0.0032, 0.001, 0.0003], [0.9093, 0.5911, 0.1987, 0.0632, 0.02, 0.0063, 0.002, 0.0006, 0.9093, 0.5911, 0.1987, 0.0632, 0.02, 0.0063, 0.002, 0.0006], [0.1411, 0.8126, 0.2955, 0.0947, 0.03, 0.0095, 0.003, 0.0009, 0.1411, 0.8126, 0.2955, 0.0947, 0.03, 0.0095, 0.003, 0.0009]]> : tensor<4x16xf32>} : () -> tensor<4x16xf32>
  %14 = onnx.Constant() {value = dense<[[1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0], [0.5403, 0.9504, 0.995, 0.9995, 1.0, 1.0, 1.0, 1.0, 0.5403, 0.9504, 0.995, 0.9995, 1.0, 1.0, 1.0, 1.0], [-0.4161, 0.8066, 0.9801, 0.998, 0.9998, 1.0, 1.0, 1.0, -0.4161, 0.8066, 0.9801, 0.998, 0.9998, 1.0, 1.0, 1.0], [-0.99, 0.5828, 0.9553, 0.9955, 0.9996, 1.0, 1.0, 1.0, -0.99, 0.5828, 0.9553, 0.9955, 0.9996, 1.0, 1.0, 1.0]]> : tensor<4x16xf32>} : () -> tensor<4x16xf32>
  %21 = onnx.Constant() {value = dense<9223372036854775807> : tensor<1xi64>} : () -> tensor<1xi64>
  %28 = onnx.Constant() {value = dense<3> : tensor<1xi64>} : () -> tensor<1xi64>
  %31 = onnx.Constant() {value = dense<2> : tensor<i64>} : () -> tensor<i64>
  %32 = onnx.Constant() {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %34 = onnx.Constant() {value = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %161 = onnx.Shape(%158) : (tensor<?x2x?x16xf32>) -> tensor<4xi64>
  %162 = onnx.Gather(%161, %31) : (tensor<4xi64>, tensor<i64>) -> tensor<i64>
  %163 = onnx.Unsqueeze(%162, %34) : (tensor<i64>, tensor<1xi64>) -> tensor<1xi64>
  %164 = onnx.Slice(%14, %34, %163, %34, %32) : (tensor<4x16xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x16xf32>
  %165 = onnx.Slice(%13, %34, %163, %34, %32) : (tensor<4x16xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x16xf32>
  %166 = onnx.Gather(%164, %arg2) : (tensor<?x16xf32>, tensor<?x?xi64>) -> tensor<?x?x16xf32>
  %167 = onnx.Unsqueeze(%166, %32) : (tensor<?x?x16xf32>, tensor<1xi64>) -> tensor<?x1x?x16xf32>
  %168 = onnx.Gather(%165, %arg2) : (tensor<?x16xf32>, tensor<?x?xi64>) -> tensor<?x?x16xf32>
  %169 = onnx.Unsqueeze(%168, %32) : (tensor<?x?x16xf32>, tensor<1xi64>) -> tensor<?x1x?x16xf32>
  %170 = onnx.Mul(%155, %167) : (tensor<?x4x?x16xf32>, tensor<?x1x?x16xf32>) -> tensor<?x4x?x16xf32>
  %171 = onnx.Slice(%155, %34, %3, %28, %32) : (tensor<?x4x?x16xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x4x?x8xf32>
  %172 = onnx.Slice(%155, %3, %21, %28, %32) : (tensor<?x4x?x16xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x4x?x8xf32>
  %173 = onnx.Neg(%172) : (tensor<?x4x?x8xf32>) -> tensor<?x4x?x8xf32>
  %174 = onnx.Concat(%173, %171) {axis = -1 : i64} : (tensor<?x4x?x8xf32>, tensor<?x4x?x8xf32>) -> tensor<?x4x?x16xf32>
  %175 = onnx.Mul(%174, %169) : (tensor<?x4x?x16xf32>, tensor<?x1x?x16xf32>) -> tensor<?x4x?x16xf32>
  %176 = onnx.Add(%170, %175) : (tensor<?x4x?x16xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x16xf32>
  return %176 : tensor<?x4x?x16xf32>
}

// -----

// Mixtral, layer 0 of mixtral_moe_static.onnx: with static shapes the
// slice to the sequence length is folded away and the caches are gathered
// directly, which looks like an embedding lookup; it must become the rope's
// tables, not an xfmr.embedding.
// CHECK-LABEL: xfmr-raise @mixtral_rope_cached_static: formed 1 rope; 0 candidate(s) left unfused
// CHECK-LABEL: func.func @mixtral_rope_cached_static(
// CHECK-SAME: %[[Q:[a-z0-9]+]]: tensor<1x4x4x16xf32>, %[[POS:[a-z0-9]+]]: tensor<1x4xi64>
// CHECK-NOT: xfmr.embedding
// CHECK: %[[CC:.*]] = onnx.Constant() {value = dense<{{\[\[}}1.000000e+00, {{.*}}]]> : tensor<4x8xf32>}
// CHECK: %[[COS:.*]] = onnx.Gather(%[[CC]], %[[POS]]) : (tensor<4x8xf32>, tensor<1x4xi64>) -> tensor<1x4x8xf32>
// CHECK: %[[SC:.*]] = onnx.Constant() {value = dense<{{\[\[}}0.000000e+00, {{.*}}]]> : tensor<4x8xf32>}
// CHECK: %[[SIN:.*]] = onnx.Gather(%[[SC]], %[[POS]]) : (tensor<4x8xf32>, tensor<1x4xi64>) -> tensor<1x4x8xf32>
// CHECK: %[[R:.*]] = xfmr.rope %[[Q]], %[[COS]], %[[SIN]] {rotary_dim = 16 : i64} : tensor<1x4x4x16xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>
// CHECK-NOT: xfmr.embedding
// CHECK: return %[[R]]
func.func @mixtral_rope_cached_static(%104: tensor<1x4x4x16xf32>, %arg2: tensor<1x4xi64>) -> tensor<1x4x4x16xf32> {
  %13 = onnx.Constant() {value = dense<9223372036854775807> : tensor<1xi64>} : () -> tensor<1xi64>
  %24 = onnx.Constant() {value = dense<[[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0], [0.8415, 0.311, 0.0998, 0.0316, 0.01, 0.0032, 0.001, 0.0003, 0.8415, 0.311, 0.0998, 0.0316, 0.01, 0.0032, 0.001, 0.0003], [0.9093, 0.5911, 0.1987, 0.0632, 0.02, 0.0063, 0.002, 0.0006, 0.9093, 0.5911, 0.1987, 0.0632, 0.02, 0.0063, 0.002, 0.0006], [0.1411, 0.8126, 0.2955, 0.0947, 0.03, 0.0095, 0.003, 0.0009, 0.1411, 0.8126, 0.2955, 0.0947, 0.03, 0.0095, 0.003, 0.0009]]> : tensor<4x16xf32>} : () -> tensor<4x16xf32>
  %25 = onnx.Constant() {value = dense<[[1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0], [0.5403, 0.9504, 0.995, 0.9995, 1.0, 1.0, 1.0, 1.0, 0.5403, 0.9504, 0.995, 0.9995, 1.0, 1.0, 1.0, 1.0], [-0.4161, 0.8066, 0.9801, 0.998, 0.9998, 1.0, 1.0, 1.0, -0.4161, 0.8066, 0.9801, 0.998, 0.9998, 1.0, 1.0, 1.0], [-0.99, 0.5828, 0.9553, 0.9955, 0.9996, 1.0, 1.0, 1.0, -0.99, 0.5828, 0.9553, 0.9955, 0.9996, 1.0, 1.0, 1.0]]> : tensor<4x16xf32>} : () -> tensor<4x16xf32>
  %37 = onnx.Constant() {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %38 = onnx.Constant() {value = dense<8> : tensor<1xi64>} : () -> tensor<1xi64>
  %39 = onnx.Constant() {value = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %40 = onnx.Constant() {value = dense<3> : tensor<1xi64>} : () -> tensor<1xi64>
  %109 = onnx.Gather(%25, %arg2) : (tensor<4x16xf32>, tensor<1x4xi64>) -> tensor<1x4x16xf32>
  %110 = onnx.Unsqueeze(%109, %37) : (tensor<1x4x16xf32>, tensor<1xi64>) -> tensor<1x1x4x16xf32>
  %111 = onnx.Gather(%24, %arg2) : (tensor<4x16xf32>, tensor<1x4xi64>) -> tensor<1x4x16xf32>
  %112 = onnx.Unsqueeze(%111, %37) : (tensor<1x4x16xf32>, tensor<1xi64>) -> tensor<1x1x4x16xf32>
  %113 = onnx.Mul(%104, %110) : (tensor<1x4x4x16xf32>, tensor<1x1x4x16xf32>) -> tensor<1x4x4x16xf32>
  %114 = onnx.Slice(%104, %39, %38, %40, %37) : (tensor<1x4x4x16xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1x4x4x8xf32>
  %115 = onnx.Slice(%104, %38, %13, %40, %37) : (tensor<1x4x4x16xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1x4x4x8xf32>
  %116 = onnx.Neg(%115) : (tensor<1x4x4x8xf32>) -> tensor<1x4x4x8xf32>
  %117 = onnx.Concat(%116, %114) {axis = -1 : i64} : (tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32>) -> tensor<1x4x4x16xf32>
  %118 = onnx.Mul(%117, %112) : (tensor<1x4x4x16xf32>, tensor<1x1x4x16xf32>) -> tensor<1x4x4x16xf32>
  %119 = onnx.Add(%113, %118) : (tensor<1x4x4x16xf32>, tensor<1x4x4x16xf32>) -> tensor<1x4x4x16xf32>
  return %119 : tensor<1x4x4x16xf32>
}

// -----

// Partial rotary done wrong for the op: rotate_half splits the 16 dims at
// 4 (Neg(x[..., 4:]), x[..., :4]) instead of at 8.
// CHECK-LABEL: xfmr-raise @negative_partial_rotary: formed nothing; 1 candidate(s) left unfused
// CHECK-NEXT: unfused rope at node '/m/model/layers.0/self_attn/Concat' (Concat): rotate_half does not split the last axis in halves (partial rotary is not raised yet)
// CHECK-LABEL: func.func @negative_partial_rotary(
// CHECK-NOT: xfmr.rope
// CHECK: onnx.Neg
// CHECK: onnx.Concat
func.func @negative_partial_rotary(%78: tensor<1x4x8x16xf32>, %83: tensor<1x1x8x16xf32>, %84: tensor<1x1x8x16xf32>)
    -> tensor<1x4x8x16xf32> {
  %13 = onnx.Constant() {value = dense<9223372036854775807> : tensor<1xi64>} : () -> tensor<1xi64>
  %18 = onnx.Constant() {value = dense<4> : tensor<1xi64>} : () -> tensor<1xi64>
  %19 = onnx.Constant() {value = dense<3> : tensor<1xi64>} : () -> tensor<1xi64>
  %20 = onnx.Constant() {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %21 = onnx.Constant() {value = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %85 = onnx.Mul(%78, %83) : (tensor<1x4x8x16xf32>, tensor<1x1x8x16xf32>) -> tensor<1x4x8x16xf32>
  %86 = onnx.Slice(%78, %21, %18, %19, %20) : (tensor<1x4x8x16xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1x4x8x4xf32>
  %87 = onnx.Slice(%78, %18, %13, %19, %20) : (tensor<1x4x8x16xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1x4x8x12xf32>
  %88 = onnx.Neg(%87) : (tensor<1x4x8x12xf32>) -> tensor<1x4x8x12xf32>
  %89 = onnx.Concat(%88, %86) {axis = -1 : i64} : (tensor<1x4x8x12xf32>, tensor<1x4x8x4xf32>) -> tensor<1x4x8x16xf32> loc("/m/model/layers.0/self_attn/Concat"("Concat"))
  %90 = onnx.Mul(%89, %84) : (tensor<1x4x8x16xf32>, tensor<1x1x8x16xf32>) -> tensor<1x4x8x16xf32>
  %91 = onnx.Add(%85, %90) : (tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32>
  return %91 : tensor<1x4x8x16xf32>
}

// -----

// The static Mixtral subgraph with one value of the cos cache's second half
// changed (row 1, column 9): the halves differ, so the cache is not
// Concat(f, f) of any angle table the op could take.
// CHECK-LABEL: xfmr-raise @negative_cached_halves_differ: formed {{.*}}; 1 candidate(s) left unfused
// CHECK-NEXT: unfused rope at node '/m/model/layers.0/self_attn/Concat' (Concat): cos/sin are neither Unsqueeze(Cos/Sin(Concat(f, f)), 1) nor rows of constant caches with equal halves
// CHECK-LABEL: func.func @negative_cached_halves_differ(
// CHECK-NOT: xfmr.rope
// CHECK: onnx.Concat
func.func @negative_cached_halves_differ(%104: tensor<1x4x4x16xf32>, %arg2: tensor<1x4xi64>) -> tensor<1x4x4x16xf32> {
  %13 = onnx.Constant() {value = dense<9223372036854775807> : tensor<1xi64>} : () -> tensor<1xi64>
  %24 = onnx.Constant() {value = dense<[[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0], [0.8415, 0.311, 0.0998, 0.0316, 0.01, 0.0032, 0.001, 0.0003, 0.8415, 0.311, 0.0998, 0.0316, 0.01, 0.0032, 0.001, 0.0003], [0.9093, 0.5911, 0.1987, 0.0632, 0.02, 0.0063, 0.002, 0.0006, 0.9093, 0.5911, 0.1987, 0.0632, 0.02, 0.0063, 0.002, 0.0006], [0.1411, 0.8126, 0.2955, 0.0947, 0.03, 0.0095, 0.003, 0.0009, 0.1411, 0.8126, 0.2955, 0.0947, 0.03, 0.0095, 0.003, 0.0009]]> : tensor<4x16xf32>} : () -> tensor<4x16xf32>
  %25 = onnx.Constant() {value = dense<[[1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0], [0.5403, 0.9504, 0.995, 0.9995, 1.0, 1.0, 1.0, 1.0, 0.5403, 0.9505, 0.995, 0.9995, 1.0, 1.0, 1.0, 1.0], [-0.4161, 0.8066, 0.9801, 0.998, 0.9998, 1.0, 1.0, 1.0, -0.4161, 0.8066, 0.9801, 0.998, 0.9998, 1.0, 1.0, 1.0], [-0.99, 0.5828, 0.9553, 0.9955, 0.9996, 1.0, 1.0, 1.0, -0.99, 0.5828, 0.9553, 0.9955, 0.9996, 1.0, 1.0, 1.0]]> : tensor<4x16xf32>} : () -> tensor<4x16xf32>
  %37 = onnx.Constant() {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %38 = onnx.Constant() {value = dense<8> : tensor<1xi64>} : () -> tensor<1xi64>
  %39 = onnx.Constant() {value = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %40 = onnx.Constant() {value = dense<3> : tensor<1xi64>} : () -> tensor<1xi64>
  %109 = onnx.Gather(%25, %arg2) : (tensor<4x16xf32>, tensor<1x4xi64>) -> tensor<1x4x16xf32>
  %110 = onnx.Unsqueeze(%109, %37) : (tensor<1x4x16xf32>, tensor<1xi64>) -> tensor<1x1x4x16xf32>
  %111 = onnx.Gather(%24, %arg2) : (tensor<4x16xf32>, tensor<1x4xi64>) -> tensor<1x4x16xf32>
  %112 = onnx.Unsqueeze(%111, %37) : (tensor<1x4x16xf32>, tensor<1xi64>) -> tensor<1x1x4x16xf32>
  %113 = onnx.Mul(%104, %110) : (tensor<1x4x4x16xf32>, tensor<1x1x4x16xf32>) -> tensor<1x4x4x16xf32>
  %114 = onnx.Slice(%104, %39, %38, %40, %37) : (tensor<1x4x4x16xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1x4x4x8xf32>
  %115 = onnx.Slice(%104, %38, %13, %40, %37) : (tensor<1x4x4x16xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1x4x4x8xf32>
  %116 = onnx.Neg(%115) : (tensor<1x4x4x8xf32>) -> tensor<1x4x4x8xf32>
  %117 = onnx.Concat(%116, %114) {axis = -1 : i64} : (tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32>) -> tensor<1x4x4x16xf32> loc("/m/model/layers.0/self_attn/Concat"("Concat"))
  %118 = onnx.Mul(%117, %112) : (tensor<1x4x4x16xf32>, tensor<1x1x4x16xf32>) -> tensor<1x4x4x16xf32>
  %119 = onnx.Add(%113, %118) : (tensor<1x4x4x16xf32>, tensor<1x4x4x16xf32>) -> tensor<1x4x4x16xf32>
  return %119 : tensor<1x4x4x16xf32>
}

// -----

// Cos and Sin of Concat(f, g) with two different angle tables: the halves
// of the table are not provably equal.
// CHECK-LABEL: xfmr-raise @negative_concat_of_different_angles: formed nothing; 1 candidate(s) left unfused
// CHECK-NEXT: unfused rope at node 'rot' (Concat): cos/sin are neither Unsqueeze(Cos/Sin(Concat(f, f)), 1) nor rows of constant caches with equal halves
// CHECK-LABEL: func.func @negative_concat_of_different_angles(
// CHECK-NOT: xfmr.rope
// CHECK: onnx.Cos
func.func @negative_concat_of_different_angles(%x: tensor<1x4x8x16xf32>, %f: tensor<1x8x8xf32>, %g: tensor<1x8x8xf32>)
    -> tensor<1x4x8x16xf32> {
  %lo_end = onnx.Constant() {value = dense<8> : tensor<1xi64>} : () -> tensor<1xi64>
  %max = onnx.Constant() {value = dense<9223372036854775807> : tensor<1xi64>} : () -> tensor<1xi64>
  %axis = onnx.Constant() {value = dense<-1> : tensor<1xi64>} : () -> tensor<1xi64>
  %one = onnx.Constant() {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %zero = onnx.Constant() {value = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %fg = onnx.Concat(%f, %g) {axis = -1 : i64} : (tensor<1x8x8xf32>, tensor<1x8x8xf32>) -> tensor<1x8x16xf32>
  %c = onnx.Cos(%fg) : (tensor<1x8x16xf32>) -> tensor<1x8x16xf32>
  %s = onnx.Sin(%fg) : (tensor<1x8x16xf32>) -> tensor<1x8x16xf32>
  %cos = onnx.Unsqueeze(%c, %one) : (tensor<1x8x16xf32>, tensor<1xi64>) -> tensor<1x1x8x16xf32>
  %sin = onnx.Unsqueeze(%s, %one) : (tensor<1x8x16xf32>, tensor<1xi64>) -> tensor<1x1x8x16xf32>
  %xc = onnx.Mul(%x, %cos) : (tensor<1x4x8x16xf32>, tensor<1x1x8x16xf32>) -> tensor<1x4x8x16xf32>
  %lo = onnx.Slice(%x, %zero, %lo_end, %axis, %one) : (tensor<1x4x8x16xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1x4x8x8xf32>
  %hi = onnx.Slice(%x, %lo_end, %max, %axis, %one) : (tensor<1x4x8x16xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1x4x8x8xf32>
  %nhi = onnx.Neg(%hi) : (tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  %rot = onnx.Concat(%nhi, %lo) {axis = -1 : i64} : (tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32>) -> tensor<1x4x8x16xf32> loc("rot"("Concat"))
  %rs = onnx.Mul(%rot, %sin) : (tensor<1x4x8x16xf32>, tensor<1x1x8x16xf32>) -> tensor<1x4x8x16xf32>
  %y = onnx.Add(%xc, %rs) : (tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32>
  return %y : tensor<1x4x8x16xf32>
}

// -----

// x * cos - rotate_half(x) * sin (the inverse rotation): not the form the
// op computes.
// CHECK-LABEL: xfmr-raise @negative_sub_instead_of_add: formed nothing; 1 candidate(s) left unfused
// CHECK-NEXT: unfused rope at node 'rot' (Concat): not of the form x * cos + rotate_half(x) * sin
// CHECK-LABEL: func.func @negative_sub_instead_of_add(
// CHECK-NOT: xfmr.rope
// CHECK: onnx.Sub
func.func @negative_sub_instead_of_add(%x: tensor<1x4x8x16xf32>, %cos: tensor<1x1x8x16xf32>, %sin: tensor<1x1x8x16xf32>)
    -> tensor<1x4x8x16xf32> {
  %lo_end = onnx.Constant() {value = dense<8> : tensor<1xi64>} : () -> tensor<1xi64>
  %max = onnx.Constant() {value = dense<9223372036854775807> : tensor<1xi64>} : () -> tensor<1xi64>
  %axis = onnx.Constant() {value = dense<3> : tensor<1xi64>} : () -> tensor<1xi64>
  %one = onnx.Constant() {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %zero = onnx.Constant() {value = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %xc = onnx.Mul(%x, %cos) : (tensor<1x4x8x16xf32>, tensor<1x1x8x16xf32>) -> tensor<1x4x8x16xf32>
  %lo = onnx.Slice(%x, %zero, %lo_end, %axis, %one) : (tensor<1x4x8x16xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1x4x8x8xf32>
  %hi = onnx.Slice(%x, %lo_end, %max, %axis, %one) : (tensor<1x4x8x16xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1x4x8x8xf32>
  %nhi = onnx.Neg(%hi) : (tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  %rot = onnx.Concat(%nhi, %lo) {axis = -1 : i64} : (tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32>) -> tensor<1x4x8x16xf32> loc("rot"("Concat"))
  %rs = onnx.Mul(%rot, %sin) : (tensor<1x4x8x16xf32>, tensor<1x1x8x16xf32>) -> tensor<1x4x8x16xf32>
  %y = onnx.Sub(%xc, %rs) : (tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32>
  return %y : tensor<1x4x8x16xf32>
}

// -----

// Rotation applied to [batch, sequence, hidden] before the head split: the
// op wants [batch, heads, sequence, head_dim].
// CHECK-LABEL: xfmr-raise @negative_rank3_input: formed nothing; 1 candidate(s) left unfused
// CHECK-NEXT: unfused rope at node 'rot' (Concat): input is not [batch, heads, sequence, head_dim]
// CHECK-LABEL: func.func @negative_rank3_input(
// CHECK-NOT: xfmr.rope
// CHECK: onnx.Concat
func.func @negative_rank3_input(%x: tensor<1x8x16xf32>, %cos: tensor<1x8x16xf32>, %sin: tensor<1x8x16xf32>)
    -> tensor<1x8x16xf32> {
  %lo_end = onnx.Constant() {value = dense<8> : tensor<1xi64>} : () -> tensor<1xi64>
  %max = onnx.Constant() {value = dense<9223372036854775807> : tensor<1xi64>} : () -> tensor<1xi64>
  %axis = onnx.Constant() {value = dense<2> : tensor<1xi64>} : () -> tensor<1xi64>
  %one = onnx.Constant() {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %zero = onnx.Constant() {value = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %xc = onnx.Mul(%x, %cos) : (tensor<1x8x16xf32>, tensor<1x8x16xf32>) -> tensor<1x8x16xf32>
  %lo = onnx.Slice(%x, %zero, %lo_end, %axis, %one) : (tensor<1x8x16xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1x8x8xf32>
  %hi = onnx.Slice(%x, %lo_end, %max, %axis, %one) : (tensor<1x8x16xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1x8x8xf32>
  %nhi = onnx.Neg(%hi) : (tensor<1x8x8xf32>) -> tensor<1x8x8xf32>
  %rot = onnx.Concat(%nhi, %lo) {axis = -1 : i64} : (tensor<1x8x8xf32>, tensor<1x8x8xf32>) -> tensor<1x8x16xf32> loc("rot"("Concat"))
  %rs = onnx.Mul(%rot, %sin) : (tensor<1x8x16xf32>, tensor<1x8x16xf32>) -> tensor<1x8x16xf32>
  %y = onnx.Add(%xc, %rs) : (tensor<1x8x16xf32>, tensor<1x8x16xf32>) -> tensor<1x8x16xf32>
  return %y : tensor<1x8x16xf32>
}

// -----

// gpt-oss: the two halves (Split) rotated with half-width tables,
// Concat(x1 * cos - x2 * sin, x2 * cos + x1 * sin), cos/sin =
// Unsqueeze(Cos/Sin(f) * 1.3465 (YaRN's attention scaling), 1). One rope
// with the scaled half tables.
// CHECK-LABEL: xfmr-raise @gpt_oss_rope: formed 1 rope; 0 candidate(s) left unfused
// CHECK-LABEL: func.func @gpt_oss_rope(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<?x4x?x8xf32>, %[[F:[a-z0-9]+]]: tensor<?x?x4xf32>
// CHECK: %[[C:.*]] = onnx.Cos(%[[F]])
// CHECK: %[[CS:.*]] = onnx.Mul(%[[C]], %{{.*}})
// CHECK: %[[S:.*]] = onnx.Sin(%[[F]])
// CHECK: %[[SS:.*]] = onnx.Mul(%[[S]], %{{.*}})
// CHECK: %[[R:.*]] = xfmr.rope %[[X]], %[[CS]], %[[SS]] {rotary_dim = 8 : i64} : tensor<?x4x?x8xf32>, tensor<?x?x4xf32>, tensor<?x?x4xf32>
// CHECK-NOT: onnx.Concat
// CHECK: return %[[R]]
func.func @gpt_oss_rope(%x: tensor<?x4x?x8xf32>, %f: tensor<?x?x4xf32>) -> tensor<?x4x?x8xf32> {
  %none = onnx.NoValue : none
  %one = onnx.Constant() {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %scale = onnx.Constant() {value = dense<1.3465736> : tensor<f32>} : () -> tensor<f32>
  %c0 = onnx.Cos(%f) : (tensor<?x?x4xf32>) -> tensor<?x?x4xf32>
  %c1 = onnx.Mul(%c0, %scale) : (tensor<?x?x4xf32>, tensor<f32>) -> tensor<?x?x4xf32>
  %cos = onnx.Unsqueeze(%c1, %one) : (tensor<?x?x4xf32>, tensor<1xi64>) -> tensor<?x1x?x4xf32>
  %s0 = onnx.Sin(%f) : (tensor<?x?x4xf32>) -> tensor<?x?x4xf32>
  %s1 = onnx.Mul(%s0, %scale) : (tensor<?x?x4xf32>, tensor<f32>) -> tensor<?x?x4xf32>
  %sin = onnx.Unsqueeze(%s1, %one) : (tensor<?x?x4xf32>, tensor<1xi64>) -> tensor<?x1x?x4xf32>
  %h:2 = onnx.Split(%x, %none) {axis = 3 : i64, num_outputs = 2 : i64} : (tensor<?x4x?x8xf32>, none) -> (tensor<?x4x?x4xf32>, tensor<?x4x?x4xf32>)
  %a = onnx.Mul(%h#0, %cos) : (tensor<?x4x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x4x?x4xf32>
  %b = onnx.Mul(%h#1, %sin) : (tensor<?x4x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x4x?x4xf32>
  %first = onnx.Sub(%a, %b) : (tensor<?x4x?x4xf32>, tensor<?x4x?x4xf32>) -> tensor<?x4x?x4xf32>
  %c = onnx.Mul(%h#1, %cos) : (tensor<?x4x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x4x?x4xf32>
  %d = onnx.Mul(%h#0, %sin) : (tensor<?x4x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x4x?x4xf32>
  %second = onnx.Add(%c, %d) : (tensor<?x4x?x4xf32>, tensor<?x4x?x4xf32>) -> tensor<?x4x?x4xf32>
  %y = onnx.Concat(%first, %second) {axis = -1 : i64} : (tensor<?x4x?x4xf32>, tensor<?x4x?x4xf32>) -> tensor<?x4x?x8xf32>
  return %y : tensor<?x4x?x8xf32>
}

// -----

// The same with the second half's terms swapped (x1 * cos + x2 * sin): not
// a rotation; nothing is formed.
// CHECK-LABEL: xfmr-raise @negative_halves_not_rotated: formed nothing; 0 candidate(s) left unfused
// CHECK: onnx.Concat
func.func @negative_halves_not_rotated(%x: tensor<?x4x?x8xf32>, %f: tensor<?x?x4xf32>) -> tensor<?x4x?x8xf32> {
  %none = onnx.NoValue : none
  %one = onnx.Constant() {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %c0 = onnx.Cos(%f) : (tensor<?x?x4xf32>) -> tensor<?x?x4xf32>
  %cos = onnx.Unsqueeze(%c0, %one) : (tensor<?x?x4xf32>, tensor<1xi64>) -> tensor<?x1x?x4xf32>
  %s0 = onnx.Sin(%f) : (tensor<?x?x4xf32>) -> tensor<?x?x4xf32>
  %sin = onnx.Unsqueeze(%s0, %one) : (tensor<?x?x4xf32>, tensor<1xi64>) -> tensor<?x1x?x4xf32>
  %h:2 = onnx.Split(%x, %none) {axis = 3 : i64, num_outputs = 2 : i64} : (tensor<?x4x?x8xf32>, none) -> (tensor<?x4x?x4xf32>, tensor<?x4x?x4xf32>)
  %a = onnx.Mul(%h#0, %cos) : (tensor<?x4x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x4x?x4xf32>
  %b = onnx.Mul(%h#1, %sin) : (tensor<?x4x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x4x?x4xf32>
  %first = onnx.Sub(%a, %b) : (tensor<?x4x?x4xf32>, tensor<?x4x?x4xf32>) -> tensor<?x4x?x4xf32>
  %c = onnx.Mul(%h#0, %cos) : (tensor<?x4x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x4x?x4xf32>
  %d = onnx.Mul(%h#1, %sin) : (tensor<?x4x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x4x?x4xf32>
  %second = onnx.Add(%c, %d) : (tensor<?x4x?x4xf32>, tensor<?x4x?x4xf32>) -> tensor<?x4x?x4xf32>
  %y = onnx.Concat(%first, %second) {axis = -1 : i64} : (tensor<?x4x?x4xf32>, tensor<?x4x?x4xf32>) -> tensor<?x4x?x8xf32>
  return %y : tensor<?x4x?x8xf32>
}

// -----

// A head size shape inference left dynamic: `view(B, S, 4, -1)` with B and
// S read from another input. The rotary width is the split reshape's 64 / 4
// = 16, asserted at run time before the rotation.
// CHECK-LABEL: xfmr-raise @rope_symbolic_head_size: formed 1 rope; 0 candidate(s) left unfused
// CHECK-LABEL: func.func @rope_symbolic_head_size(
// CHECK: cf.assert {{.*}}"node 'rot' (Concat): the rotated axis: dim 3 must be 16 (derived at compile time)"
// CHECK-NEXT: %[[X:.*]] = tensor.cast {{.*}} : tensor<?x4x?x?xf32> to tensor<?x4x?x16xf32>
// CHECK: xfmr.rope %[[X]], {{.*}} {rotary_dim = 16 : i64} : tensor<?x4x?x16xf32>, tensor<1x8x8xf32>, tensor<1x8x8xf32>
// CHECK-NOT: onnx.Neg
func.func @rope_symbolic_head_size(%h: tensor<1x8x64xf32>, %m: tensor<?x?xi64>, %arg2: tensor<1x8xi64>)
    -> tensor<?x4x?x?xf32> {
  %w = onnx.Constant() {value = dense<0.5> : tensor<64x64xf32>} : () -> tensor<64x64xf32>
  %hd = onnx.Constant() {value = dense<[4, -1]> : tensor<2xi64>} : () -> tensor<2xi64>
  %sm = onnx.Shape(%m) : (tensor<?x?xi64>) -> tensor<2xi64>
  %shape = onnx.Concat(%sm, %hd) {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %p = onnx.MatMul(%h, %w) : (tensor<1x8x64xf32>, tensor<64x64xf32>) -> tensor<1x8x64xf32>
  %r = onnx.Reshape(%p, %shape) : (tensor<1x8x64xf32>, tensor<4xi64>) -> tensor<?x?x4x?xf32>
  %78 = onnx.Transpose(%r) {perm = [0, 2, 1, 3]} : (tensor<?x?x4x?xf32>) -> tensor<?x4x?x?xf32>
  %0 = onnx.Constant() {value = dense<[[[1.000000e+00], [0.316227764], [1.000000e-01], [0.0316227786], [0.00999999977], [0.00316227786], [1.000000e-03], [3.16227786E-4]]]> : tensor<1x8x1xf32>} : () -> tensor<1x8x1xf32>
  %13 = onnx.Constant() {value = dense<9223372036854775807> : tensor<1xi64>} : () -> tensor<1xi64>
  %18 = onnx.Constant() {value = dense<8> : tensor<1xi64>} : () -> tensor<1xi64>
  %19 = onnx.Constant() {value = dense<3> : tensor<1xi64>} : () -> tensor<1xi64>
  %20 = onnx.Constant() {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %21 = onnx.Constant() {value = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %58 = onnx.Unsqueeze(%arg2, %20) : (tensor<1x8xi64>, tensor<1xi64>) -> tensor<1x1x8xi64>
  %59 = onnx.Cast(%58) {to = 1 : i64} : (tensor<1x1x8xi64>) -> tensor<1x1x8xf32>
  %60 = onnx.MatMul(%0, %59) : (tensor<1x8x1xf32>, tensor<1x1x8xf32>) -> tensor<1x8x8xf32>
  %61 = onnx.Transpose(%60) {perm = [0, 2, 1]} : (tensor<1x8x8xf32>) -> tensor<1x8x8xf32>
  %62 = onnx.Concat(%61, %61) {axis = -1 : i64} : (tensor<1x8x8xf32>, tensor<1x8x8xf32>) -> tensor<1x8x16xf32>
  %63 = onnx.Cos(%62) : (tensor<1x8x16xf32>) -> tensor<1x8x16xf32>
  %64 = onnx.Sin(%62) : (tensor<1x8x16xf32>) -> tensor<1x8x16xf32>
  %83 = onnx.Unsqueeze(%63, %20) : (tensor<1x8x16xf32>, tensor<1xi64>) -> tensor<1x1x8x16xf32>
  %84 = onnx.Unsqueeze(%64, %20) : (tensor<1x8x16xf32>, tensor<1xi64>) -> tensor<1x1x8x16xf32>
  %85 = onnx.Mul(%78, %83) : (tensor<?x4x?x?xf32>, tensor<1x1x8x16xf32>) -> tensor<?x4x?x?xf32>
  %86 = onnx.Slice(%78, %21, %18, %19, %20) : (tensor<?x4x?x?xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x4x?x?xf32>
  %87 = onnx.Slice(%78, %18, %13, %19, %20) : (tensor<?x4x?x?xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x4x?x?xf32>
  %88 = onnx.Neg(%87) : (tensor<?x4x?x?xf32>) -> tensor<?x4x?x?xf32>
  %89 = onnx.Concat(%88, %86) {axis = -1 : i64} : (tensor<?x4x?x?xf32>, tensor<?x4x?x?xf32>) -> tensor<?x4x?x?xf32> loc("rot"("Concat"))
  %90 = onnx.Mul(%89, %84) : (tensor<?x4x?x?xf32>, tensor<1x1x8x16xf32>) -> tensor<?x4x?x?xf32>
  %91 = onnx.Add(%85, %90) : (tensor<?x4x?x?xf32>, tensor<?x4x?x?xf32>) -> tensor<?x4x?x?xf32>
  return %91 : tensor<?x4x?x?xf32>
}
