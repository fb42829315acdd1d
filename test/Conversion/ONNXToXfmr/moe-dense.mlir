// RUN: xfmr-opt %s --split-input-file --xfmr-raise=report=true | FileCheck %s

// The dense coefficient MoE form (MoEDense.cpp): every expert runs on every
// token, times a coefficient that is its routing weight or zero, summed over
// the experts; one xfmr.moe replaces the block whatever the coefficient's
// spelling. Written with 2 experts, top 1 (renormalised), hidden 4,
// intermediate 2, random weights (a small script; regenerate by hand).

// coef: c_e = ReduceSum(w * Cast(Equal(idx, e)), -1, keepdims).
// CHECK-LABEL: xfmr-raise @dense_coef: formed 1 moe; 0 candidate(s) left unfused
// CHECK-LABEL: func.func @dense_coef(
// CHECK: xfmr.moe silu %{{.*}} {normalize_top_k = true, top_k = 1 : i64} : tensor<?x4xf32>, tensor<4x2xf32>, tensor<2x4x2xf32>, tensor<2x4x2xf32>, tensor<2x2x4xf32>
// CHECK-NOT: onnx.MatMul
// CHECK: return
func.func @dense_coef(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %wr = onnx.Constant() {value = dense<[[0.001, 0.299], [-0.274, -0.891], [-0.455, -0.992], [0.060, 1.340]]> : tensor<4x2xf32>} : () -> tensor<4x2xf32>
  %logits = onnx.MatMul(%x, %wr) : (tensor<?x4xf32>, tensor<4x2xf32>) -> tensor<?x2xf32>
  %p = onnx.Softmax(%logits) {axis = 1 : i64} : (tensor<?x2xf32>) -> tensor<?x2xf32>
  %k = onnx.Constant() {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %v, %idx = onnx.TopK(%p, %k) : (tensor<?x2xf32>, tensor<1xi64>) -> (tensor<?x1xf32>, tensor<?x1xi64>)
  %m1 = onnx.Constant() {value = dense<-1> : tensor<1xi64>} : () -> tensor<1xi64>
  %s = onnx.ReduceSum(%v, %m1) : (tensor<?x1xf32>, tensor<1xi64>) -> tensor<?x1xf32>
  %w = onnx.Div(%v, %s) : (tensor<?x1xf32>, tensor<?x1xf32>) -> tensor<?x1xf32>
  %c0_id = onnx.Constant() {value = dense<0> : tensor<i64>} : () -> tensor<i64>
  %c0_eq = onnx.Equal(%idx, %c0_id) : (tensor<?x1xi64>, tensor<i64>) -> tensor<?x1xi1>
  %c0_f = onnx.Cast(%c0_eq) {to = 1 : i64} : (tensor<?x1xi1>) -> tensor<?x1xf32>
  %c0_m = onnx.Mul(%w, %c0_f) : (tensor<?x1xf32>, tensor<?x1xf32>) -> tensor<?x1xf32>
  %c0 = onnx.ReduceSum(%c0_m, %m1) : (tensor<?x1xf32>, tensor<1xi64>) -> tensor<?x1xf32>
  %e0_w1 = onnx.Constant() {value = dense<[[-0.492, -0.620], [0.490, 0.357], [0.105, -0.930], [-0.029, 0.695]]> : tensor<4x2xf32>} : () -> tensor<4x2xf32>
  %e0_w3 = onnx.Constant() {value = dense<[[-1.344, -0.458], [-1.901, -1.290], [-1.842, -0.235], [-1.267, 0.271]]> : tensor<4x2xf32>} : () -> tensor<4x2xf32>
  %e0_w2 = onnx.Constant() {value = dense<[[0.157, -0.187, -2.517, -0.539], [-0.049, 0.113, -1.530, -0.478]]> : tensor<2x4xf32>} : () -> tensor<2x4xf32>
  %e0_g = onnx.MatMul(%x, %e0_w1) : (tensor<?x4xf32>, tensor<4x2xf32>) -> tensor<?x2xf32>
  %e0_sg = onnx.Sigmoid(%e0_g) : (tensor<?x2xf32>) -> tensor<?x2xf32>
  %e0_silu = onnx.Mul(%e0_g, %e0_sg) : (tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x2xf32>
  %e0_u = onnx.MatMul(%x, %e0_w3) : (tensor<?x4xf32>, tensor<4x2xf32>) -> tensor<?x2xf32>
  %e0_h = onnx.Mul(%e0_silu, %e0_u) : (tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x2xf32>
  %e0_y = onnx.MatMul(%e0_h, %e0_w2) : (tensor<?x2xf32>, tensor<2x4xf32>) -> tensor<?x4xf32>
  %e0_t = onnx.Mul(%c0, %e0_y) : (tensor<?x1xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  %c1_id = onnx.Constant() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %c1_eq = onnx.Equal(%idx, %c1_id) : (tensor<?x1xi64>, tensor<i64>) -> tensor<?x1xi1>
  %c1_f = onnx.Cast(%c1_eq) {to = 1 : i64} : (tensor<?x1xi1>) -> tensor<?x1xf32>
  %c1_m = onnx.Mul(%w, %c1_f) : (tensor<?x1xf32>, tensor<?x1xf32>) -> tensor<?x1xf32>
  %c1 = onnx.ReduceSum(%c1_m, %m1) : (tensor<?x1xf32>, tensor<1xi64>) -> tensor<?x1xf32>
  %e1_w1 = onnx.Constant() {value = dense<[[-0.979, -0.809], [1.061, -0.808], [-0.033, 0.884], [-0.584, -0.112]]> : tensor<4x2xf32>} : () -> tensor<4x2xf32>
  %e1_w3 = onnx.Constant() {value = dense<[[0.110, 0.064], [-1.225, 0.076], [1.359, -1.547], [0.859, 0.119]]> : tensor<4x2xf32>} : () -> tensor<4x2xf32>
  %e1_w2 = onnx.Constant() {value = dense<[[-0.641, 2.000, 0.762, -1.199], [0.075, 0.577, -0.189, 0.683]]> : tensor<2x4xf32>} : () -> tensor<2x4xf32>
  %e1_g = onnx.MatMul(%x, %e1_w1) : (tensor<?x4xf32>, tensor<4x2xf32>) -> tensor<?x2xf32>
  %e1_sg = onnx.Sigmoid(%e1_g) : (tensor<?x2xf32>) -> tensor<?x2xf32>
  %e1_silu = onnx.Mul(%e1_g, %e1_sg) : (tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x2xf32>
  %e1_u = onnx.MatMul(%x, %e1_w3) : (tensor<?x4xf32>, tensor<4x2xf32>) -> tensor<?x2xf32>
  %e1_h = onnx.Mul(%e1_silu, %e1_u) : (tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x2xf32>
  %e1_y = onnx.MatMul(%e1_h, %e1_w2) : (tensor<?x2xf32>, tensor<2x4xf32>) -> tensor<?x4xf32>
  %e1_t = onnx.Mul(%c1, %e1_y) : (tensor<?x1xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  %out = onnx.Add(%e0_t, %e1_t) : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  return %out : tensor<?x4xf32>
}

// -----

// where: c_e = ReduceSum(Where(Equal(idx, e), w, zeros), -1, keepdims).
// CHECK-LABEL: xfmr-raise @dense_where: formed 1 moe; 0 candidate(s) left unfused
// CHECK-LABEL: func.func @dense_where(
// CHECK: xfmr.moe silu %{{.*}} {normalize_top_k = true, top_k = 1 : i64} : tensor<?x4xf32>, tensor<4x2xf32>, tensor<2x4x2xf32>, tensor<2x4x2xf32>, tensor<2x2x4xf32>
// CHECK-NOT: onnx.MatMul
// CHECK: return
func.func @dense_where(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %wr = onnx.Constant() {value = dense<[[-0.067, 0.667], [1.439, -0.676], [0.203, -0.463], [0.127, -1.187]]> : tensor<4x2xf32>} : () -> tensor<4x2xf32>
  %logits = onnx.MatMul(%x, %wr) : (tensor<?x4xf32>, tensor<4x2xf32>) -> tensor<?x2xf32>
  %p = onnx.Softmax(%logits) {axis = 1 : i64} : (tensor<?x2xf32>) -> tensor<?x2xf32>
  %k = onnx.Constant() {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %v, %idx = onnx.TopK(%p, %k) : (tensor<?x2xf32>, tensor<1xi64>) -> (tensor<?x1xf32>, tensor<?x1xi64>)
  %m1 = onnx.Constant() {value = dense<-1> : tensor<1xi64>} : () -> tensor<1xi64>
  %s = onnx.ReduceSum(%v, %m1) : (tensor<?x1xf32>, tensor<1xi64>) -> tensor<?x1xf32>
  %w = onnx.Div(%v, %s) : (tensor<?x1xf32>, tensor<?x1xf32>) -> tensor<?x1xf32>
  %zshape = onnx.Shape(%w) : (tensor<?x1xf32>) -> tensor<2xi64>
  %zeros = onnx.ConstantOfShape(%zshape) : (tensor<2xi64>) -> tensor<?x1xf32>
  %c0_id = onnx.Constant() {value = dense<0> : tensor<i64>} : () -> tensor<i64>
  %c0_eq = onnx.Equal(%idx, %c0_id) : (tensor<?x1xi64>, tensor<i64>) -> tensor<?x1xi1>
  %c0_m = onnx.Where(%c0_eq, %w, %zeros) : (tensor<?x1xi1>, tensor<?x1xf32>, tensor<?x1xf32>) -> tensor<?x1xf32>
  %c0 = onnx.ReduceSum(%c0_m, %m1) : (tensor<?x1xf32>, tensor<1xi64>) -> tensor<?x1xf32>
  %e0_w1 = onnx.Constant() {value = dense<[[-0.579, -0.196], [0.899, 1.145], [-1.324, -0.795], [0.647, -1.992]]> : tensor<4x2xf32>} : () -> tensor<4x2xf32>
  %e0_w3 = onnx.Constant() {value = dense<[[-0.463, -0.097], [1.257, 0.689], [-0.327, -0.369], [-0.250, 1.524]]> : tensor<4x2xf32>} : () -> tensor<4x2xf32>
  %e0_w2 = onnx.Constant() {value = dense<[[-0.428, -0.304, 0.353, -0.121], [-0.197, -1.114, -0.012, -0.444]]> : tensor<2x4xf32>} : () -> tensor<2x4xf32>
  %e0_g = onnx.MatMul(%x, %e0_w1) : (tensor<?x4xf32>, tensor<4x2xf32>) -> tensor<?x2xf32>
  %e0_sg = onnx.Sigmoid(%e0_g) : (tensor<?x2xf32>) -> tensor<?x2xf32>
  %e0_silu = onnx.Mul(%e0_g, %e0_sg) : (tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x2xf32>
  %e0_u = onnx.MatMul(%x, %e0_w3) : (tensor<?x4xf32>, tensor<4x2xf32>) -> tensor<?x2xf32>
  %e0_h = onnx.Mul(%e0_silu, %e0_u) : (tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x2xf32>
  %e0_y = onnx.MatMul(%e0_h, %e0_w2) : (tensor<?x2xf32>, tensor<2x4xf32>) -> tensor<?x4xf32>
  %e0_t = onnx.Mul(%c0, %e0_y) : (tensor<?x1xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  %c1_id = onnx.Constant() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %c1_eq = onnx.Equal(%idx, %c1_id) : (tensor<?x1xi64>, tensor<i64>) -> tensor<?x1xi1>
  %c1_m = onnx.Where(%c1_eq, %w, %zeros) : (tensor<?x1xi1>, tensor<?x1xf32>, tensor<?x1xf32>) -> tensor<?x1xf32>
  %c1 = onnx.ReduceSum(%c1_m, %m1) : (tensor<?x1xf32>, tensor<1xi64>) -> tensor<?x1xf32>
  %e1_w1 = onnx.Constant() {value = dense<[[1.166, 0.653], [-0.024, 0.668], [-0.340, 1.052], [-0.005, 0.583]]> : tensor<4x2xf32>} : () -> tensor<4x2xf32>
  %e1_w3 = onnx.Constant() {value = dense<[[-1.291, 0.347], [-1.688, -2.035], [-0.304, -0.900], [0.164, 2.245]]> : tensor<4x2xf32>} : () -> tensor<4x2xf32>
  %e1_w2 = onnx.Constant() {value = dense<[[-0.832, -0.624, 0.205, 0.493], [-0.176, -0.206, 0.702, 0.520]]> : tensor<2x4xf32>} : () -> tensor<2x4xf32>
  %e1_g = onnx.MatMul(%x, %e1_w1) : (tensor<?x4xf32>, tensor<4x2xf32>) -> tensor<?x2xf32>
  %e1_sg = onnx.Sigmoid(%e1_g) : (tensor<?x2xf32>) -> tensor<?x2xf32>
  %e1_silu = onnx.Mul(%e1_g, %e1_sg) : (tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x2xf32>
  %e1_u = onnx.MatMul(%x, %e1_w3) : (tensor<?x4xf32>, tensor<4x2xf32>) -> tensor<?x2xf32>
  %e1_h = onnx.Mul(%e1_silu, %e1_u) : (tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x2xf32>
  %e1_y = onnx.MatMul(%e1_h, %e1_w2) : (tensor<?x2xf32>, tensor<2x4xf32>) -> tensor<?x4xf32>
  %e1_t = onnx.Mul(%c1, %e1_y) : (tensor<?x1xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  %out = onnx.Add(%e0_t, %e1_t) : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  return %out : tensor<?x4xf32>
}

// -----

// one-hot: D = ReduceSum(Unsqueeze(w, -1) * Cast(OneHot(idx, E)), 1),
// c_e = Slice(D, e, e + 1, axis 1).
// CHECK-LABEL: xfmr-raise @dense_onehot: formed 1 moe; 0 candidate(s) left unfused
// CHECK-LABEL: func.func @dense_onehot(
// CHECK: xfmr.moe silu %{{.*}} {normalize_top_k = true, top_k = 1 : i64} : tensor<?x4xf32>, tensor<4x2xf32>, tensor<2x4x2xf32>, tensor<2x4x2xf32>, tensor<2x2x4xf32>
// CHECK-NOT: onnx.MatMul
// CHECK: return
func.func @dense_onehot(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %wr = onnx.Constant() {value = dense<[[-1.034, -0.079], [0.035, -1.054], [0.260, -0.858], [0.972, 0.193]]> : tensor<4x2xf32>} : () -> tensor<4x2xf32>
  %logits = onnx.MatMul(%x, %wr) : (tensor<?x4xf32>, tensor<4x2xf32>) -> tensor<?x2xf32>
  %p = onnx.Softmax(%logits) {axis = 1 : i64} : (tensor<?x2xf32>) -> tensor<?x2xf32>
  %k = onnx.Constant() {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %v, %idx = onnx.TopK(%p, %k) : (tensor<?x2xf32>, tensor<1xi64>) -> (tensor<?x1xf32>, tensor<?x1xi64>)
  %m1 = onnx.Constant() {value = dense<-1> : tensor<1xi64>} : () -> tensor<1xi64>
  %s = onnx.ReduceSum(%v, %m1) : (tensor<?x1xf32>, tensor<1xi64>) -> tensor<?x1xf32>
  %w = onnx.Div(%v, %s) : (tensor<?x1xf32>, tensor<?x1xf32>) -> tensor<?x1xf32>
  %depth = onnx.Constant() {value = dense<2> : tensor<i64>} : () -> tensor<i64>
  %onoff = onnx.Constant() {value = dense<[0, 1]> : tensor<2xi64>} : () -> tensor<2xi64>
  %oh = onnx.OneHot(%idx, %depth, %onoff) {axis = -1 : i64} : (tensor<?x1xi64>, tensor<i64>, tensor<2xi64>) -> tensor<?x1x2xi64>
  %ohf = onnx.Cast(%oh) {to = 1 : i64} : (tensor<?x1x2xi64>) -> tensor<?x1x2xf32>
  %wu = onnx.Unsqueeze(%w, %m1) : (tensor<?x1xf32>, tensor<1xi64>) -> tensor<?x1x1xf32>
  %prod = onnx.Mul(%wu, %ohf) : (tensor<?x1x1xf32>, tensor<?x1x2xf32>) -> tensor<?x1x2xf32>
  %one = onnx.Constant() {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %dense = onnx.ReduceSum(%prod, %one) {keepdims = 0 : i64} : (tensor<?x1x2xf32>, tensor<1xi64>) -> tensor<?x2xf32>
  %c0_b = onnx.Constant() {value = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %c0_e = onnx.Constant() {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %c0 = onnx.Slice(%dense, %c0_b, %c0_e, %one, %one) : (tensor<?x2xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x1xf32>
  %e0_w1 = onnx.Constant() {value = dense<[[0.089, -0.591], [-0.119, -1.998], [-1.131, 0.363], [-2.129, 0.847]]> : tensor<4x2xf32>} : () -> tensor<4x2xf32>
  %e0_w3 = onnx.Constant() {value = dense<[[-1.746, 0.757], [-0.845, 0.779], [0.131, -1.537], [1.249, 1.442]]> : tensor<4x2xf32>} : () -> tensor<4x2xf32>
  %e0_w2 = onnx.Constant() {value = dense<[[-0.066, -0.274, -0.160, -0.975], [1.099, -0.543, -0.051, -0.793]]> : tensor<2x4xf32>} : () -> tensor<2x4xf32>
  %e0_g = onnx.MatMul(%x, %e0_w1) : (tensor<?x4xf32>, tensor<4x2xf32>) -> tensor<?x2xf32>
  %e0_sg = onnx.Sigmoid(%e0_g) : (tensor<?x2xf32>) -> tensor<?x2xf32>
  %e0_silu = onnx.Mul(%e0_g, %e0_sg) : (tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x2xf32>
  %e0_u = onnx.MatMul(%x, %e0_w3) : (tensor<?x4xf32>, tensor<4x2xf32>) -> tensor<?x2xf32>
  %e0_h = onnx.Mul(%e0_silu, %e0_u) : (tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x2xf32>
  %e0_y = onnx.MatMul(%e0_h, %e0_w2) : (tensor<?x2xf32>, tensor<2x4xf32>) -> tensor<?x4xf32>
  %e0_t = onnx.Mul(%c0, %e0_y) : (tensor<?x1xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  %c1_b = onnx.Constant() {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %c1_e = onnx.Constant() {value = dense<2> : tensor<1xi64>} : () -> tensor<1xi64>
  %c1 = onnx.Slice(%dense, %c1_b, %c1_e, %one, %one) : (tensor<?x2xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x1xf32>
  %e1_w1 = onnx.Constant() {value = dense<[[-0.626, -1.278], [1.257, -0.154], [0.966, 0.013], [-0.694, -0.327]]> : tensor<4x2xf32>} : () -> tensor<4x2xf32>
  %e1_w3 = onnx.Constant() {value = dense<[[-0.560, 0.008], [-0.375, -0.300], [-1.379, -0.807], [1.654, -0.671]]> : tensor<4x2xf32>} : () -> tensor<4x2xf32>
  %e1_w2 = onnx.Constant() {value = dense<[[-1.054, 0.337, 1.407, -1.454], [-0.209, -0.632, -1.761, 0.735]]> : tensor<2x4xf32>} : () -> tensor<2x4xf32>
  %e1_g = onnx.MatMul(%x, %e1_w1) : (tensor<?x4xf32>, tensor<4x2xf32>) -> tensor<?x2xf32>
  %e1_sg = onnx.Sigmoid(%e1_g) : (tensor<?x2xf32>) -> tensor<?x2xf32>
  %e1_silu = onnx.Mul(%e1_g, %e1_sg) : (tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x2xf32>
  %e1_u = onnx.MatMul(%x, %e1_w3) : (tensor<?x4xf32>, tensor<4x2xf32>) -> tensor<?x2xf32>
  %e1_h = onnx.Mul(%e1_silu, %e1_u) : (tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x2xf32>
  %e1_y = onnx.MatMul(%e1_h, %e1_w2) : (tensor<?x2xf32>, tensor<2x4xf32>) -> tensor<?x4xf32>
  %e1_t = onnx.Mul(%c1, %e1_y) : (tensor<?x1xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  %out = onnx.Add(%e0_t, %e1_t) : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  return %out : tensor<?x4xf32>
}

// -----

// one-hot spelled Equal(Unsqueeze(idx, -1), [0 .. E-1]) (the dynamo
// exporter's one_hot), c_e = Unsqueeze(Gather(D, e, axis 1), 1).
// CHECK-LABEL: xfmr-raise @dense_iota: formed 1 moe; 0 candidate(s) left unfused
// CHECK-LABEL: func.func @dense_iota(
// CHECK: xfmr.moe silu %{{.*}} {normalize_top_k = true, top_k = 1 : i64} : tensor<?x4xf32>, tensor<4x2xf32>, tensor<2x4x2xf32>, tensor<2x4x2xf32>, tensor<2x2x4xf32>
// CHECK-NOT: onnx.MatMul
// CHECK: return
func.func @dense_iota(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %wr = onnx.Constant() {value = dense<[[-0.023, 0.071], [-0.752, 0.455], [-0.539, -0.143], [-1.108, -1.216]]> : tensor<4x2xf32>} : () -> tensor<4x2xf32>
  %logits = onnx.MatMul(%x, %wr) : (tensor<?x4xf32>, tensor<4x2xf32>) -> tensor<?x2xf32>
  %p = onnx.Softmax(%logits) {axis = 1 : i64} : (tensor<?x2xf32>) -> tensor<?x2xf32>
  %k = onnx.Constant() {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %v, %idx = onnx.TopK(%p, %k) : (tensor<?x2xf32>, tensor<1xi64>) -> (tensor<?x1xf32>, tensor<?x1xi64>)
  %m1 = onnx.Constant() {value = dense<-1> : tensor<1xi64>} : () -> tensor<1xi64>
  %s = onnx.ReduceSum(%v, %m1) : (tensor<?x1xf32>, tensor<1xi64>) -> tensor<?x1xf32>
  %w = onnx.Div(%v, %s) : (tensor<?x1xf32>, tensor<?x1xf32>) -> tensor<?x1xf32>
  %iota = onnx.Constant() {value = dense<[0, 1]> : tensor<2xi64>} : () -> tensor<2xi64>
  %idxu = onnx.Unsqueeze(%idx, %m1) : (tensor<?x1xi64>, tensor<1xi64>) -> tensor<?x1x1xi64>
  %eq = onnx.Equal(%idxu, %iota) : (tensor<?x1x1xi64>, tensor<2xi64>) -> tensor<?x1x2xi1>
  %eqf = onnx.Cast(%eq) {to = 1 : i64} : (tensor<?x1x2xi1>) -> tensor<?x1x2xf32>
  %wu = onnx.Unsqueeze(%w, %m1) : (tensor<?x1xf32>, tensor<1xi64>) -> tensor<?x1x1xf32>
  %prod = onnx.Mul(%wu, %eqf) : (tensor<?x1x1xf32>, tensor<?x1x2xf32>) -> tensor<?x1x2xf32>
  %one = onnx.Constant() {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %dense = onnx.ReduceSum(%prod, %one) {keepdims = 0 : i64} : (tensor<?x1x2xf32>, tensor<1xi64>) -> tensor<?x2xf32>
  %c0_id = onnx.Constant() {value = dense<0> : tensor<i64>} : () -> tensor<i64>
  %c0_g = onnx.Gather(%dense, %c0_id) {axis = 1 : i64} : (tensor<?x2xf32>, tensor<i64>) -> tensor<?xf32>
  %c0 = onnx.Unsqueeze(%c0_g, %one) : (tensor<?xf32>, tensor<1xi64>) -> tensor<?x1xf32>
  %e0_w1 = onnx.Constant() {value = dense<[[1.336, -0.507], [0.292, -0.034], [-0.441, -0.508], [0.630, -0.302]]> : tensor<4x2xf32>} : () -> tensor<4x2xf32>
  %e0_w3 = onnx.Constant() {value = dense<[[-0.151, 0.022], [1.177, 0.681], [0.383, -0.564], [-1.382, 0.950]]> : tensor<4x2xf32>} : () -> tensor<4x2xf32>
  %e0_w2 = onnx.Constant() {value = dense<[[0.966, -0.141, 0.542, 0.781], [0.831, 0.921, -0.456, 1.515]]> : tensor<2x4xf32>} : () -> tensor<2x4xf32>
  %e0_g = onnx.MatMul(%x, %e0_w1) : (tensor<?x4xf32>, tensor<4x2xf32>) -> tensor<?x2xf32>
  %e0_sg = onnx.Sigmoid(%e0_g) : (tensor<?x2xf32>) -> tensor<?x2xf32>
  %e0_silu = onnx.Mul(%e0_g, %e0_sg) : (tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x2xf32>
  %e0_u = onnx.MatMul(%x, %e0_w3) : (tensor<?x4xf32>, tensor<4x2xf32>) -> tensor<?x2xf32>
  %e0_h = onnx.Mul(%e0_silu, %e0_u) : (tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x2xf32>
  %e0_y = onnx.MatMul(%e0_h, %e0_w2) : (tensor<?x2xf32>, tensor<2x4xf32>) -> tensor<?x4xf32>
  %e0_t = onnx.Mul(%c0, %e0_y) : (tensor<?x1xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  %c1_id = onnx.Constant() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %c1_g = onnx.Gather(%dense, %c1_id) {axis = 1 : i64} : (tensor<?x2xf32>, tensor<i64>) -> tensor<?xf32>
  %c1 = onnx.Unsqueeze(%c1_g, %one) : (tensor<?xf32>, tensor<1xi64>) -> tensor<?x1xf32>
  %e1_w1 = onnx.Constant() {value = dense<[[-1.247, 0.862], [0.494, 0.874], [1.879, 1.484], [-1.145, -1.689]]> : tensor<4x2xf32>} : () -> tensor<4x2xf32>
  %e1_w3 = onnx.Constant() {value = dense<[[0.817, -1.015], [-0.012, 0.840], [-1.644, -2.110], [0.259, 0.044]]> : tensor<4x2xf32>} : () -> tensor<4x2xf32>
  %e1_w2 = onnx.Constant() {value = dense<[[-0.246, 0.039, -0.861, -1.513], [-0.167, -0.972, -1.643, 0.506]]> : tensor<2x4xf32>} : () -> tensor<2x4xf32>
  %e1_g = onnx.MatMul(%x, %e1_w1) : (tensor<?x4xf32>, tensor<4x2xf32>) -> tensor<?x2xf32>
  %e1_sg = onnx.Sigmoid(%e1_g) : (tensor<?x2xf32>) -> tensor<?x2xf32>
  %e1_silu = onnx.Mul(%e1_g, %e1_sg) : (tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x2xf32>
  %e1_u = onnx.MatMul(%x, %e1_w3) : (tensor<?x4xf32>, tensor<4x2xf32>) -> tensor<?x2xf32>
  %e1_h = onnx.Mul(%e1_silu, %e1_u) : (tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x2xf32>
  %e1_y = onnx.MatMul(%e1_h, %e1_w2) : (tensor<?x2xf32>, tensor<2x4xf32>) -> tensor<?x4xf32>
  %e1_t = onnx.Mul(%c1, %e1_y) : (tensor<?x1xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  %out = onnx.Add(%e0_t, %e1_t) : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  return %out : tensor<?x4xf32>
}

// -----

// scatter: D = ScatterElements(zeros [T, E], idx, w, axis 1), c_e a Slice.
// CHECK-LABEL: xfmr-raise @dense_scatter: formed 1 moe; 0 candidate(s) left unfused
// CHECK-LABEL: func.func @dense_scatter(
// CHECK: xfmr.moe silu %{{.*}} {normalize_top_k = true, top_k = 1 : i64} : tensor<?x4xf32>, tensor<4x2xf32>, tensor<2x4x2xf32>, tensor<2x4x2xf32>, tensor<2x2x4xf32>
// CHECK-NOT: onnx.MatMul
// CHECK: return
func.func @dense_scatter(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %wr = onnx.Constant() {value = dense<[[-0.061, 0.407], [-0.989, -0.658], [-0.999, -0.887], [0.195, -0.783]]> : tensor<4x2xf32>} : () -> tensor<4x2xf32>
  %logits = onnx.MatMul(%x, %wr) : (tensor<?x4xf32>, tensor<4x2xf32>) -> tensor<?x2xf32>
  %p = onnx.Softmax(%logits) {axis = 1 : i64} : (tensor<?x2xf32>) -> tensor<?x2xf32>
  %k = onnx.Constant() {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %v, %idx = onnx.TopK(%p, %k) : (tensor<?x2xf32>, tensor<1xi64>) -> (tensor<?x1xf32>, tensor<?x1xi64>)
  %m1 = onnx.Constant() {value = dense<-1> : tensor<1xi64>} : () -> tensor<1xi64>
  %s = onnx.ReduceSum(%v, %m1) : (tensor<?x1xf32>, tensor<1xi64>) -> tensor<?x1xf32>
  %w = onnx.Div(%v, %s) : (tensor<?x1xf32>, tensor<?x1xf32>) -> tensor<?x1xf32>
  %zs = onnx.Constant() {value = dense<[-1, 2]> : tensor<2xi64>} : () -> tensor<2xi64>
  %xs = onnx.Shape(%x) {end = 1 : i64} : (tensor<?x4xf32>) -> tensor<1xi64>
  %two = onnx.Constant() {value = dense<2> : tensor<1xi64>} : () -> tensor<1xi64>
  %zshape = onnx.Concat(%xs, %two) {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>) -> tensor<2xi64>
  %zeros = onnx.ConstantOfShape(%zshape) : (tensor<2xi64>) -> tensor<?x2xf32>
  %dense = onnx.ScatterElements(%zeros, %idx, %w) {axis = 1 : i64} : (tensor<?x2xf32>, tensor<?x1xi64>, tensor<?x1xf32>) -> tensor<?x2xf32>
  %one = onnx.Constant() {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %c0_b = onnx.Constant() {value = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %c0_e = onnx.Constant() {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %c0 = onnx.Slice(%dense, %c0_b, %c0_e, %one, %one) : (tensor<?x2xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x1xf32>
  %e0_w1 = onnx.Constant() {value = dense<[[0.356, 0.340], [2.025, -1.393], [0.888, -0.089], [-0.014, -1.450]]> : tensor<4x2xf32>} : () -> tensor<4x2xf32>
  %e0_w3 = onnx.Constant() {value = dense<[[-0.460, 0.743], [-0.082, 0.081], [-0.291, 1.155], [-0.021, -2.200]]> : tensor<4x2xf32>} : () -> tensor<4x2xf32>
  %e0_w2 = onnx.Constant() {value = dense<[[-0.692, -1.969, -3.251, -0.530], [1.334, 0.047, -1.173, -0.941]]> : tensor<2x4xf32>} : () -> tensor<2x4xf32>
  %e0_g = onnx.MatMul(%x, %e0_w1) : (tensor<?x4xf32>, tensor<4x2xf32>) -> tensor<?x2xf32>
  %e0_sg = onnx.Sigmoid(%e0_g) : (tensor<?x2xf32>) -> tensor<?x2xf32>
  %e0_silu = onnx.Mul(%e0_g, %e0_sg) : (tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x2xf32>
  %e0_u = onnx.MatMul(%x, %e0_w3) : (tensor<?x4xf32>, tensor<4x2xf32>) -> tensor<?x2xf32>
  %e0_h = onnx.Mul(%e0_silu, %e0_u) : (tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x2xf32>
  %e0_y = onnx.MatMul(%e0_h, %e0_w2) : (tensor<?x2xf32>, tensor<2x4xf32>) -> tensor<?x4xf32>
  %e0_t = onnx.Mul(%c0, %e0_y) : (tensor<?x1xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  %c1_b = onnx.Constant() {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %c1_e = onnx.Constant() {value = dense<2> : tensor<1xi64>} : () -> tensor<1xi64>
  %c1 = onnx.Slice(%dense, %c1_b, %c1_e, %one, %one) : (tensor<?x2xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x1xf32>
  %e1_w1 = onnx.Constant() {value = dense<[[1.131, 0.158], [0.048, -0.053], [0.038, 0.805], [0.553, 0.216]]> : tensor<4x2xf32>} : () -> tensor<4x2xf32>
  %e1_w3 = onnx.Constant() {value = dense<[[-1.043, 0.511], [-0.684, 1.094], [-1.271, -0.138], [-0.007, -1.325]]> : tensor<4x2xf32>} : () -> tensor<4x2xf32>
  %e1_w2 = onnx.Constant() {value = dense<[[1.722, 1.460, -0.464, 0.772], [0.379, -2.614, 0.250, -0.061]]> : tensor<2x4xf32>} : () -> tensor<2x4xf32>
  %e1_g = onnx.MatMul(%x, %e1_w1) : (tensor<?x4xf32>, tensor<4x2xf32>) -> tensor<?x2xf32>
  %e1_sg = onnx.Sigmoid(%e1_g) : (tensor<?x2xf32>) -> tensor<?x2xf32>
  %e1_silu = onnx.Mul(%e1_g, %e1_sg) : (tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x2xf32>
  %e1_u = onnx.MatMul(%x, %e1_w3) : (tensor<?x4xf32>, tensor<4x2xf32>) -> tensor<?x2xf32>
  %e1_h = onnx.Mul(%e1_silu, %e1_u) : (tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x2xf32>
  %e1_y = onnx.MatMul(%e1_h, %e1_w2) : (tensor<?x2xf32>, tensor<2x4xf32>) -> tensor<?x4xf32>
  %e1_t = onnx.Mul(%c1, %e1_y) : (tensor<?x1xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  %out = onnx.Add(%e0_t, %e1_t) : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  return %out : tensor<?x4xf32>
}
