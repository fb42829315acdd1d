// RUN: xfmr-opt %s --split-input-file --xfmr-raise=report=true | FileCheck %s

// xfmr-raise on mixture-of-experts blocks in the form of transformers'
// batched experts (MoE.cpp; the Mixtral and Qwen2-MoE exports of
// examples/hf are checked in hf-models.test): router softmax, TopK,
// renormalisation, GatherND of the selected experts' [E, out, in] weights,
// batched MatMuls, the score-weighted sum over the k slots. Then cases that
// must stay unraised, with the reason. (Generated shape: H 4, E 4, I 2, k 2.)

// Gemm router (transB), renormalised scores, fused gate_up weights: one
// xfmr.moe with the weights re-laid out at compile time.
// CHECK-LABEL: xfmr-raise @mixtral_like: formed 1 moe; 0 candidate(s) left unfused
// CHECK-LABEL: func.func @mixtral_like(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<?x4xf32>
// CHECK-NOT: onnx.GatherND
// CHECK: %[[Y:.*]] = xfmr.moe silu %[[X]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {normalize_top_k = true, top_k = 2 : i64} : tensor<?x4xf32>, tensor<4x4xf32>, tensor<4x4x2xf32>, tensor<4x4x2xf32>, tensor<4x2x4xf32>
// CHECK-NOT: onnx.GatherND
// CHECK: return %[[Y]]
func.func @mixtral_like(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %none = onnx.NoValue : none
  %wr = onnx.Constant() {value = dense<[[1.764, 0.400, 0.979, 2.241], [1.868, -0.977, 0.950, -0.151], [-0.103, 0.411, 0.144, 1.454], [0.761, 0.122, 0.444, 0.334]]> : tensor<4x4xf32>} : () -> tensor<4x4xf32>
  %logits = onnx.Gemm(%x, %wr, %none) {transB = 1 : i64} : (tensor<?x4xf32>, tensor<4x4xf32>, none) -> tensor<?x4xf32>
  %p = onnx.Softmax(%logits) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %k = onnx.Constant() {value = dense<2> : tensor<1xi64>} : () -> tensor<1xi64>
  %m1 = onnx.Constant() {value = dense<-1> : tensor<1xi64>} : () -> tensor<1xi64>
  %one = onnx.Constant() {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %v, %idx = onnx.TopK(%p, %k) : (tensor<?x4xf32>, tensor<1xi64>) -> (tensor<?x2xf32>, tensor<?x2xi64>)
  %s = onnx.ReduceSum(%v, %m1) : (tensor<?x2xf32>, tensor<1xi64>) -> tensor<?x1xf32>
  %w = onnx.Div(%v, %s) : (tensor<?x2xf32>, tensor<?x1xf32>) -> tensor<?x2xf32>
  %rshape = onnx.Constant() {value = dense<[-1, 2, 4]> : tensor<3xi64>} : () -> tensor<3xi64>
  %fshape = onnx.Constant() {value = dense<[-1, 4]> : tensor<2xi64>} : () -> tensor<2xi64>
  %xu = onnx.Unsqueeze(%x, %one) : (tensor<?x4xf32>, tensor<1xi64>) -> tensor<?x1x4xf32>
  %xe = onnx.Expand(%xu, %rshape) : (tensor<?x1x4xf32>, tensor<3xi64>) -> tensor<?x2x4xf32>
  %xr = onnx.Reshape(%xe, %fshape) : (tensor<?x2x4xf32>, tensor<2xi64>) -> tensor<?x4xf32>
  %ids1 = onnx.Reshape(%idx, %m1) : (tensor<?x2xi64>, tensor<1xi64>) -> tensor<?xi64>
  %ids = onnx.Unsqueeze(%ids1, %m1) : (tensor<?xi64>, tensor<1xi64>) -> tensor<?x1xi64>
  %wgu = onnx.Constant() {value = dense<[[[1.494, -0.205, 0.313, -0.854], [-2.553, 0.654, 0.864, -0.742], [2.270, -1.454, 0.046, -0.187], [1.533, 1.469, 0.155, 0.378]], [[-0.888, -1.981, -0.348, 0.156], [1.230, 1.202, -0.387, -0.302], [-1.049, -1.420, -1.706, 1.951], [-0.510, -0.438, -1.253, 0.777]], [[-1.614, -0.213, -0.895, 0.387], [-0.511, -1.181, -0.028, 0.428], [0.067, 0.302, -0.634, -0.363], [-0.672, -0.360, -0.813, -1.726]], [[0.177, -0.402, -1.630, 0.463], [-0.907, 0.052, 0.729, 0.129], [1.139, -1.235, 0.402, -0.685], [-0.871, -0.579, -0.312, 0.056]]]> : tensor<4x4x4xf32>} : () -> tensor<4x4x4xf32>
  %wd = onnx.Constant() {value = dense<[[[-1.165, 0.901], [0.466, -1.536], [1.488, 1.896], [1.179, -0.180]], [[-1.071, 1.054], [-0.403, 1.222], [0.208, 0.977], [0.356, 0.707]], [[0.011, 1.786], [0.127, 0.402], [1.883, -1.348], [-1.270, 0.969]], [[-1.173, 1.944], [-0.414, -0.747], [1.923, 1.481], [1.868, 0.906]]]> : tensor<4x4x2xf32>} : () -> tensor<4x4x2xf32>
  %g1 = onnx.GatherND(%wgu, %ids) : (tensor<4x4x4xf32>, tensor<?x1xi64>) -> tensor<?x4x4xf32>
  %xc = onnx.Unsqueeze(%xr, %m1) : (tensor<?x4xf32>, tensor<1xi64>) -> tensor<?x4x1xf32>
  %gu3 = onnx.MatMul(%g1, %xc) : (tensor<?x4x4xf32>, tensor<?x4x1xf32>) -> tensor<?x4x1xf32>
  %gu = onnx.Squeeze(%gu3, %m1) : (tensor<?x4x1xf32>, tensor<1xi64>) -> tensor<?x4xf32>
  %gs:2 = onnx.Split(%gu, %none) {axis = 1 : i64, num_outputs = 2 : i64} : (tensor<?x4xf32>, none) -> (tensor<?x2xf32>, tensor<?x2xf32>)
  %sg = onnx.Sigmoid(%gs#0) : (tensor<?x2xf32>) -> tensor<?x2xf32>
  %silu = onnx.Mul(%gs#0, %sg) : (tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x2xf32>
  %a = onnx.Mul(%silu, %gs#1) : (tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x2xf32>
  %d1 = onnx.GatherND(%wd, %ids) : (tensor<4x4x2xf32>, tensor<?x1xi64>) -> tensor<?x4x2xf32>
  %ac = onnx.Unsqueeze(%a, %m1) : (tensor<?x2xf32>, tensor<1xi64>) -> tensor<?x2x1xf32>
  %y3 = onnx.MatMul(%d1, %ac) : (tensor<?x4x2xf32>, tensor<?x2x1xf32>) -> tensor<?x4x1xf32>
  %y = onnx.Squeeze(%y3, %m1) : (tensor<?x4x1xf32>, tensor<1xi64>) -> tensor<?x4xf32>
  %wf = onnx.Reshape(%w, %m1) : (tensor<?x2xf32>, tensor<1xi64>) -> tensor<?xf32>
  %wc = onnx.Unsqueeze(%wf, %m1) : (tensor<?xf32>, tensor<1xi64>) -> tensor<?x1xf32>
  %yw = onnx.Mul(%y, %wc) : (tensor<?x4xf32>, tensor<?x1xf32>) -> tensor<?x4xf32>
  %y3k = onnx.Reshape(%yw, %rshape) : (tensor<?x4xf32>, tensor<3xi64>) -> tensor<?x2x4xf32>
  %out = onnx.ReduceSum(%y3k, %one) {keepdims = 0 : i64} : (tensor<?x2x4xf32>, tensor<1xi64>) -> tensor<?x4xf32>
  return %out : tensor<?x4xf32>
}

// -----

// MatMul router ([H, E] as is), scores not renormalised (Qwen2-MoE's default).
// CHECK-LABEL: xfmr-raise @matmul_router_unnormalized: formed 1 moe; 0 candidate(s) left unfused
// CHECK: xfmr.moe silu %{{.*}} {top_k = 2 : i64} : tensor<?x4xf32>, tensor<4x4xf32>
func.func @matmul_router_unnormalized(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %none = onnx.NoValue : none
  %wr = onnx.Constant() {value = dense<[[-0.861, 1.910, -0.268, 0.802], [0.947, -0.155, 0.614, 0.922], [0.376, -1.099, 0.298, 1.326], [-0.695, -0.150, -0.435, 1.849]]> : tensor<4x4xf32>} : () -> tensor<4x4xf32>
  %logits = onnx.MatMul(%x, %wr) : (tensor<?x4xf32>, tensor<4x4xf32>) -> tensor<?x4xf32>
  %p = onnx.Softmax(%logits) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %k = onnx.Constant() {value = dense<2> : tensor<1xi64>} : () -> tensor<1xi64>
  %m1 = onnx.Constant() {value = dense<-1> : tensor<1xi64>} : () -> tensor<1xi64>
  %one = onnx.Constant() {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %v, %idx = onnx.TopK(%p, %k) : (tensor<?x4xf32>, tensor<1xi64>) -> (tensor<?x2xf32>, tensor<?x2xi64>)
  %rshape = onnx.Constant() {value = dense<[-1, 2, 4]> : tensor<3xi64>} : () -> tensor<3xi64>
  %fshape = onnx.Constant() {value = dense<[-1, 4]> : tensor<2xi64>} : () -> tensor<2xi64>
  %xu = onnx.Unsqueeze(%x, %one) : (tensor<?x4xf32>, tensor<1xi64>) -> tensor<?x1x4xf32>
  %xe = onnx.Expand(%xu, %rshape) : (tensor<?x1x4xf32>, tensor<3xi64>) -> tensor<?x2x4xf32>
  %xr = onnx.Reshape(%xe, %fshape) : (tensor<?x2x4xf32>, tensor<2xi64>) -> tensor<?x4xf32>
  %ids1 = onnx.Reshape(%idx, %m1) : (tensor<?x2xi64>, tensor<1xi64>) -> tensor<?xi64>
  %ids = onnx.Unsqueeze(%ids1, %m1) : (tensor<?xi64>, tensor<1xi64>) -> tensor<?x1xi64>
  %wgu = onnx.Constant() {value = dense<[[[0.672, 0.407, -0.770, 0.539], [-0.674, 0.032, -0.636, 0.676], [0.577, -0.208, 0.396, -1.093], [-1.491, 0.439, 0.167, 0.635]], [[2.383, 0.944, -0.913, 1.117], [-1.316, -0.462, -0.068, 1.713], [-0.745, -0.826, -0.098, -0.663], [1.127, -1.080, -1.147, -0.438]], [[-0.498, 1.930, 0.949, 0.088], [-1.225, 0.844, -1.000, -1.545], [1.188, 0.317, 0.921, 0.319], [0.857, -0.651, -1.034, 0.682]], [[-0.803, -0.690, -0.456, 0.017], [-0.354, -1.375, -0.644, -2.223], [0.625, -1.602, -1.104, 0.052], [-0.740, 1.543, -1.293, 0.267]]]> : tensor<4x4x4xf32>} : () -> tensor<4x4x4xf32>
  %wd = onnx.Constant() {value = dense<[[[-0.039, -1.168], [0.523, -0.172], [0.772, 0.824], [2.163, 1.337]], [[-0.369, -0.239], [1.100, 0.655], [0.640, -1.617], [-0.024, -0.738]], [[0.280, -0.098], [0.910, 0.317], [0.786, -0.466], [-0.944, -0.410]], [[-0.017, 0.379], [2.259, -0.042], [-0.956, -0.346], [-0.464, 0.481]]]> : tensor<4x4x2xf32>} : () -> tensor<4x4x2xf32>
  %g1 = onnx.GatherND(%wgu, %ids) : (tensor<4x4x4xf32>, tensor<?x1xi64>) -> tensor<?x4x4xf32>
  %xc = onnx.Unsqueeze(%xr, %m1) : (tensor<?x4xf32>, tensor<1xi64>) -> tensor<?x4x1xf32>
  %gu3 = onnx.MatMul(%g1, %xc) : (tensor<?x4x4xf32>, tensor<?x4x1xf32>) -> tensor<?x4x1xf32>
  %gu = onnx.Squeeze(%gu3, %m1) : (tensor<?x4x1xf32>, tensor<1xi64>) -> tensor<?x4xf32>
  %gs:2 = onnx.Split(%gu, %none) {axis = 1 : i64, num_outputs = 2 : i64} : (tensor<?x4xf32>, none) -> (tensor<?x2xf32>, tensor<?x2xf32>)
  %sg = onnx.Sigmoid(%gs#0) : (tensor<?x2xf32>) -> tensor<?x2xf32>
  %silu = onnx.Mul(%gs#0, %sg) : (tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x2xf32>
  %a = onnx.Mul(%silu, %gs#1) : (tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x2xf32>
  %d1 = onnx.GatherND(%wd, %ids) : (tensor<4x4x2xf32>, tensor<?x1xi64>) -> tensor<?x4x2xf32>
  %ac = onnx.Unsqueeze(%a, %m1) : (tensor<?x2xf32>, tensor<1xi64>) -> tensor<?x2x1xf32>
  %y3 = onnx.MatMul(%d1, %ac) : (tensor<?x4x2xf32>, tensor<?x2x1xf32>) -> tensor<?x4x1xf32>
  %y = onnx.Squeeze(%y3, %m1) : (tensor<?x4x1xf32>, tensor<1xi64>) -> tensor<?x4xf32>
  %wf = onnx.Reshape(%v, %m1) : (tensor<?x2xf32>, tensor<1xi64>) -> tensor<?xf32>
  %wc = onnx.Unsqueeze(%wf, %m1) : (tensor<?xf32>, tensor<1xi64>) -> tensor<?x1xf32>
  %yw = onnx.Mul(%y, %wc) : (tensor<?x4xf32>, tensor<?x1xf32>) -> tensor<?x4xf32>
  %y3k = onnx.Reshape(%yw, %rshape) : (tensor<?x4xf32>, tensor<3xi64>) -> tensor<?x2x4xf32>
  %out = onnx.ReduceSum(%y3k, %one) {keepdims = 0 : i64} : (tensor<?x2x4xf32>, tensor<1xi64>) -> tensor<?x4xf32>
  return %out : tensor<?x4xf32>
}

// -----

// The same block as the TorchScript exporter writes it: repeat_interleave as
// Flatten(Tile(Unsqueeze(x, 1), [1, k, 1]), 2), expert weights gathered with
// Gather(W, ids) (axis 0), gate and up cut by two Slices (chunk).
// CHECK-LABEL: xfmr-raise @torchscript_form: formed 1 moe; 0 candidate(s) left unfused
// CHECK-NOT: onnx.Tile
// CHECK: xfmr.moe silu %{{.*}} {top_k = 2 : i64} : tensor<?x4xf32>, tensor<4x4xf32>, tensor<4x4x2xf32>, tensor<4x4x2xf32>, tensor<4x2x4xf32>
// CHECK-NOT: onnx.Gather
func.func @torchscript_form(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %none = onnx.NoValue : none
  %wr = onnx.Constant() {value = dense<[[-0.861, 1.910, -0.268, 0.802], [0.947, -0.155, 0.614, 0.922], [0.376, -1.099, 0.298, 1.326], [-0.695, -0.150, -0.435, 1.849]]> : tensor<4x4xf32>} : () -> tensor<4x4xf32>
  %logits = onnx.MatMul(%x, %wr) : (tensor<?x4xf32>, tensor<4x4xf32>) -> tensor<?x4xf32>
  %p = onnx.Softmax(%logits) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %k = onnx.Constant() {value = dense<2> : tensor<1xi64>} : () -> tensor<1xi64>
  %m1 = onnx.Constant() {value = dense<-1> : tensor<1xi64>} : () -> tensor<1xi64>
  %one = onnx.Constant() {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %v, %idx = onnx.TopK(%p, %k) : (tensor<?x4xf32>, tensor<1xi64>) -> (tensor<?x2xf32>, tensor<?x2xi64>)
  %rshape = onnx.Constant() {value = dense<[-1, 2, 4]> : tensor<3xi64>} : () -> tensor<3xi64>
  %fshape = onnx.Constant() {value = dense<[-1, 4]> : tensor<2xi64>} : () -> tensor<2xi64>
  %xu = onnx.Unsqueeze(%x, %one) : (tensor<?x4xf32>, tensor<1xi64>) -> tensor<?x1x4xf32>
  %reps = onnx.Constant() {value = dense<[1, 2, 1]> : tensor<3xi64>} : () -> tensor<3xi64>
  %xt = onnx.Tile(%xu, %reps) : (tensor<?x1x4xf32>, tensor<3xi64>) -> tensor<?x2x4xf32>
  %xr = onnx.Flatten(%xt) {axis = 2 : i64} : (tensor<?x2x4xf32>) -> tensor<?x4xf32>
  %ids1 = onnx.Reshape(%idx, %m1) : (tensor<?x2xi64>, tensor<1xi64>) -> tensor<?xi64>
  %wgu = onnx.Constant() {value = dense<[[[0.672, 0.407, -0.770, 0.539], [-0.674, 0.032, -0.636, 0.676], [0.577, -0.208, 0.396, -1.093], [-1.491, 0.439, 0.167, 0.635]], [[2.383, 0.944, -0.913, 1.117], [-1.316, -0.462, -0.068, 1.713], [-0.745, -0.826, -0.098, -0.663], [1.127, -1.080, -1.147, -0.438]], [[-0.498, 1.930, 0.949, 0.088], [-1.225, 0.844, -1.000, -1.545], [1.188, 0.317, 0.921, 0.319], [0.857, -0.651, -1.034, 0.682]], [[-0.803, -0.690, -0.456, 0.017], [-0.354, -1.375, -0.644, -2.223], [0.625, -1.602, -1.104, 0.052], [-0.740, 1.543, -1.293, 0.267]]]> : tensor<4x4x4xf32>} : () -> tensor<4x4x4xf32>
  %wd = onnx.Constant() {value = dense<[[[-0.039, -1.168], [0.523, -0.172], [0.772, 0.824], [2.163, 1.337]], [[-0.369, -0.239], [1.100, 0.655], [0.640, -1.617], [-0.024, -0.738]], [[0.280, -0.098], [0.910, 0.317], [0.786, -0.466], [-0.944, -0.410]], [[-0.017, 0.379], [2.259, -0.042], [-0.956, -0.346], [-0.464, 0.481]]]> : tensor<4x4x2xf32>} : () -> tensor<4x4x2xf32>
  %g1 = onnx.Gather(%wgu, %ids1) : (tensor<4x4x4xf32>, tensor<?xi64>) -> tensor<?x4x4xf32>
  %xc = onnx.Unsqueeze(%xr, %m1) : (tensor<?x4xf32>, tensor<1xi64>) -> tensor<?x4x1xf32>
  %gu3 = onnx.MatMul(%g1, %xc) : (tensor<?x4x4xf32>, tensor<?x4x1xf32>) -> tensor<?x4x1xf32>
  %gu = onnx.Squeeze(%gu3, %m1) : (tensor<?x4x1xf32>, tensor<1xi64>) -> tensor<?x4xf32>
  %zero = onnx.Constant() {value = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %half = onnx.Constant() {value = dense<2> : tensor<1xi64>} : () -> tensor<1xi64>
  %end = onnx.Constant() {value = dense<9223372036854775807> : tensor<1xi64>} : () -> tensor<1xi64>
  %g = onnx.Slice(%gu, %zero, %half, %one, %none) : (tensor<?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, none) -> tensor<?x2xf32>
  %u = onnx.Slice(%gu, %half, %end, %one, %none) : (tensor<?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, none) -> tensor<?x2xf32>
  %sg = onnx.Sigmoid(%g) : (tensor<?x2xf32>) -> tensor<?x2xf32>
  %silu = onnx.Mul(%g, %sg) : (tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x2xf32>
  %a = onnx.Mul(%silu, %u) : (tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x2xf32>
  %d1 = onnx.Gather(%wd, %ids1) : (tensor<4x4x2xf32>, tensor<?xi64>) -> tensor<?x4x2xf32>
  %ac = onnx.Unsqueeze(%a, %m1) : (tensor<?x2xf32>, tensor<1xi64>) -> tensor<?x2x1xf32>
  %y3 = onnx.MatMul(%d1, %ac) : (tensor<?x4x2xf32>, tensor<?x2x1xf32>) -> tensor<?x4x1xf32>
  %y = onnx.Squeeze(%y3, %m1) : (tensor<?x4x1xf32>, tensor<1xi64>) -> tensor<?x4xf32>
  %wf = onnx.Reshape(%v, %m1) : (tensor<?x2xf32>, tensor<1xi64>) -> tensor<?xf32>
  %wc = onnx.Unsqueeze(%wf, %m1) : (tensor<?xf32>, tensor<1xi64>) -> tensor<?x1xf32>
  %yw = onnx.Mul(%y, %wc) : (tensor<?x4xf32>, tensor<?x1xf32>) -> tensor<?x4xf32>
  %y3k = onnx.Reshape(%yw, %rshape) : (tensor<?x4xf32>, tensor<3xi64>) -> tensor<?x2x4xf32>
  %out = onnx.ReduceSum(%y3k, %one) {keepdims = 0 : i64} : (tensor<?x2x4xf32>, tensor<1xi64>) -> tensor<?x4xf32>
  return %out : tensor<?x4xf32>
}

// -----

// Slices that do not cut the product into its two halves are not gate and up.
// CHECK-LABEL: xfmr-raise @torchscript_overlapping_slices: formed nothing; 1 candidate(s) left unfused
// CHECK-NEXT: unfused moe at {{.*}}: gate and up are not expert products of the same tokens
// CHECK-NOT: xfmr.moe
func.func @torchscript_overlapping_slices(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %none = onnx.NoValue : none
  %wr = onnx.Constant() {value = dense<[[-0.861, 1.910, -0.268, 0.802], [0.947, -0.155, 0.614, 0.922], [0.376, -1.099, 0.298, 1.326], [-0.695, -0.150, -0.435, 1.849]]> : tensor<4x4xf32>} : () -> tensor<4x4xf32>
  %logits = onnx.MatMul(%x, %wr) : (tensor<?x4xf32>, tensor<4x4xf32>) -> tensor<?x4xf32>
  %p = onnx.Softmax(%logits) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %k = onnx.Constant() {value = dense<2> : tensor<1xi64>} : () -> tensor<1xi64>
  %m1 = onnx.Constant() {value = dense<-1> : tensor<1xi64>} : () -> tensor<1xi64>
  %one = onnx.Constant() {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %v, %idx = onnx.TopK(%p, %k) : (tensor<?x4xf32>, tensor<1xi64>) -> (tensor<?x2xf32>, tensor<?x2xi64>)
  %rshape = onnx.Constant() {value = dense<[-1, 2, 4]> : tensor<3xi64>} : () -> tensor<3xi64>
  %fshape = onnx.Constant() {value = dense<[-1, 4]> : tensor<2xi64>} : () -> tensor<2xi64>
  %xu = onnx.Unsqueeze(%x, %one) : (tensor<?x4xf32>, tensor<1xi64>) -> tensor<?x1x4xf32>
  %reps = onnx.Constant() {value = dense<[1, 2, 1]> : tensor<3xi64>} : () -> tensor<3xi64>
  %xt = onnx.Tile(%xu, %reps) : (tensor<?x1x4xf32>, tensor<3xi64>) -> tensor<?x2x4xf32>
  %xr = onnx.Flatten(%xt) {axis = 2 : i64} : (tensor<?x2x4xf32>) -> tensor<?x4xf32>
  %ids1 = onnx.Reshape(%idx, %m1) : (tensor<?x2xi64>, tensor<1xi64>) -> tensor<?xi64>
  %wgu = onnx.Constant() {value = dense<[[[0.672, 0.407, -0.770, 0.539], [-0.674, 0.032, -0.636, 0.676], [0.577, -0.208, 0.396, -1.093], [-1.491, 0.439, 0.167, 0.635]], [[2.383, 0.944, -0.913, 1.117], [-1.316, -0.462, -0.068, 1.713], [-0.745, -0.826, -0.098, -0.663], [1.127, -1.080, -1.147, -0.438]], [[-0.498, 1.930, 0.949, 0.088], [-1.225, 0.844, -1.000, -1.545], [1.188, 0.317, 0.921, 0.319], [0.857, -0.651, -1.034, 0.682]], [[-0.803, -0.690, -0.456, 0.017], [-0.354, -1.375, -0.644, -2.223], [0.625, -1.602, -1.104, 0.052], [-0.740, 1.543, -1.293, 0.267]]]> : tensor<4x4x4xf32>} : () -> tensor<4x4x4xf32>
  %wd = onnx.Constant() {value = dense<[[[-0.039, -1.168], [0.523, -0.172], [0.772, 0.824], [2.163, 1.337]], [[-0.369, -0.239], [1.100, 0.655], [0.640, -1.617], [-0.024, -0.738]], [[0.280, -0.098], [0.910, 0.317], [0.786, -0.466], [-0.944, -0.410]], [[-0.017, 0.379], [2.259, -0.042], [-0.956, -0.346], [-0.464, 0.481]]]> : tensor<4x4x2xf32>} : () -> tensor<4x4x2xf32>
  %g1 = onnx.Gather(%wgu, %ids1) : (tensor<4x4x4xf32>, tensor<?xi64>) -> tensor<?x4x4xf32>
  %xc = onnx.Unsqueeze(%xr, %m1) : (tensor<?x4xf32>, tensor<1xi64>) -> tensor<?x4x1xf32>
  %gu3 = onnx.MatMul(%g1, %xc) : (tensor<?x4x4xf32>, tensor<?x4x1xf32>) -> tensor<?x4x1xf32>
  %gu = onnx.Squeeze(%gu3, %m1) : (tensor<?x4x1xf32>, tensor<1xi64>) -> tensor<?x4xf32>
  %zero = onnx.Constant() {value = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %half = onnx.Constant() {value = dense<2> : tensor<1xi64>} : () -> tensor<1xi64>
  %end = onnx.Constant() {value = dense<9223372036854775807> : tensor<1xi64>} : () -> tensor<1xi64>
  %g = onnx.Slice(%gu, %zero, %half, %one, %none) : (tensor<?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, none) -> tensor<?x2xf32>
  %three = onnx.Constant() {value = dense<3> : tensor<1xi64>} : () -> tensor<1xi64>
  %u = onnx.Slice(%gu, %one, %three, %one, %none) : (tensor<?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, none) -> tensor<?x2xf32>
  %sg = onnx.Sigmoid(%g) : (tensor<?x2xf32>) -> tensor<?x2xf32>
  %silu = onnx.Mul(%g, %sg) : (tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x2xf32>
  %a = onnx.Mul(%silu, %u) : (tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x2xf32>
  %d1 = onnx.Gather(%wd, %ids1) : (tensor<4x4x2xf32>, tensor<?xi64>) -> tensor<?x4x2xf32>
  %ac = onnx.Unsqueeze(%a, %m1) : (tensor<?x2xf32>, tensor<1xi64>) -> tensor<?x2x1xf32>
  %y3 = onnx.MatMul(%d1, %ac) : (tensor<?x4x2xf32>, tensor<?x2x1xf32>) -> tensor<?x4x1xf32>
  %y = onnx.Squeeze(%y3, %m1) : (tensor<?x4x1xf32>, tensor<1xi64>) -> tensor<?x4xf32>
  %wf = onnx.Reshape(%v, %m1) : (tensor<?x2xf32>, tensor<1xi64>) -> tensor<?xf32>
  %wc = onnx.Unsqueeze(%wf, %m1) : (tensor<?xf32>, tensor<1xi64>) -> tensor<?x1xf32>
  %yw = onnx.Mul(%y, %wc) : (tensor<?x4xf32>, tensor<?x1xf32>) -> tensor<?x4xf32>
  %y3k = onnx.Reshape(%yw, %rshape) : (tensor<?x4xf32>, tensor<3xi64>) -> tensor<?x2x4xf32>
  %out = onnx.ReduceSum(%y3k, %one) {keepdims = 0 : i64} : (tensor<?x2x4xf32>, tensor<1xi64>) -> tensor<?x4xf32>
  return %out : tensor<?x4xf32>
}

// -----

// Sigmoid scores weighted by TopK's values (the sigmoids at its indices):
// sigmoid routing without bias or groups. (DeepSeek-V3's biased,
// group-limited choice is checked on its exports in hf-models.test.)
// CHECK-LABEL: xfmr-raise @sigmoid_router: formed 1 moe; 0 candidate(s) left unfused
// CHECK: xfmr.moe silu %{{.*}} {normalize_top_k = true, scoring = "sigmoid", top_k = 2 : i64}
func.func @sigmoid_router(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %none = onnx.NoValue : none
  %wr = onnx.Constant() {value = dense<[[-1.541, 0.063, 0.157, 0.232], [-0.597, -0.238, -1.424, -0.493], [-0.543, 0.416, -1.156, 0.781], [1.494, -2.070, 0.426, 0.677]]> : tensor<4x4xf32>} : () -> tensor<4x4xf32>
  %logits = onnx.Gemm(%x, %wr, %none) {transB = 1 : i64} : (tensor<?x4xf32>, tensor<4x4xf32>, none) -> tensor<?x4xf32>
  %p = onnx.Sigmoid(%logits) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %k = onnx.Constant() {value = dense<2> : tensor<1xi64>} : () -> tensor<1xi64>
  %m1 = onnx.Constant() {value = dense<-1> : tensor<1xi64>} : () -> tensor<1xi64>
  %one = onnx.Constant() {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %v, %idx = onnx.TopK(%p, %k) : (tensor<?x4xf32>, tensor<1xi64>) -> (tensor<?x2xf32>, tensor<?x2xi64>)
  %s = onnx.ReduceSum(%v, %m1) : (tensor<?x2xf32>, tensor<1xi64>) -> tensor<?x1xf32>
  %w = onnx.Div(%v, %s) : (tensor<?x2xf32>, tensor<?x1xf32>) -> tensor<?x2xf32>
  %rshape = onnx.Constant() {value = dense<[-1, 2, 4]> : tensor<3xi64>} : () -> tensor<3xi64>
  %fshape = onnx.Constant() {value = dense<[-1, 4]> : tensor<2xi64>} : () -> tensor<2xi64>
  %xu = onnx.Unsqueeze(%x, %one) : (tensor<?x4xf32>, tensor<1xi64>) -> tensor<?x1x4xf32>
  %xe = onnx.Expand(%xu, %rshape) : (tensor<?x1x4xf32>, tensor<3xi64>) -> tensor<?x2x4xf32>
  %xr = onnx.Reshape(%xe, %fshape) : (tensor<?x2x4xf32>, tensor<2xi64>) -> tensor<?x4xf32>
  %ids1 = onnx.Reshape(%idx, %m1) : (tensor<?x2xi64>, tensor<1xi64>) -> tensor<?xi64>
  %ids = onnx.Unsqueeze(%ids1, %m1) : (tensor<?xi64>, tensor<1xi64>) -> tensor<?x1xi64>
  %wgu = onnx.Constant() {value = dense<[[[-0.637, -0.397, -0.133, -0.298], [-0.309, -1.676, 1.152, 1.080], [-0.813, -1.466, 0.521, -0.576], [0.142, -0.319, 0.692, 0.695]], [[-0.726, -1.383, -1.583, 0.610], [-1.189, -0.507, -0.596, -0.053], [-1.936, 0.189, 0.524, 0.088], [-0.311, 0.097, 0.399, -2.773]], [[1.956, 0.390, -0.652, -0.391], [0.494, -0.116, -2.031, 2.064], [-0.111, 1.020, -0.692, 1.536], [0.286, 0.609, -1.045, 1.211]], [[0.690, 1.302, -0.628, -0.481], [2.304, -1.060, -0.136, 1.137], [0.098, 0.583, -0.399, 0.370], [-1.307, 1.658, -0.118, -0.680]]]> : tensor<4x4x4xf32>} : () -> tensor<4x4x4xf32>
  %wd = onnx.Constant() {value = dense<[[[0.666, -0.461], [-1.334, -1.347], [0.694, -0.160], [-0.134, 1.078]], [[-1.127, -0.731], [-0.385, 0.094], [-0.042, -0.287], [-0.062, -0.107]], [[-0.720, -0.813], [0.275, -0.891], [-1.157, -0.312], [-0.158, 2.257]], [[-0.705, 0.943], [0.747, -1.189], [0.773, -1.184], [-2.659, 0.606]]]> : tensor<4x4x2xf32>} : () -> tensor<4x4x2xf32>
  %g1 = onnx.GatherND(%wgu, %ids) : (tensor<4x4x4xf32>, tensor<?x1xi64>) -> tensor<?x4x4xf32>
  %xc = onnx.Unsqueeze(%xr, %m1) : (tensor<?x4xf32>, tensor<1xi64>) -> tensor<?x4x1xf32>
  %gu3 = onnx.MatMul(%g1, %xc) : (tensor<?x4x4xf32>, tensor<?x4x1xf32>) -> tensor<?x4x1xf32>
  %gu = onnx.Squeeze(%gu3, %m1) : (tensor<?x4x1xf32>, tensor<1xi64>) -> tensor<?x4xf32>
  %gs:2 = onnx.Split(%gu, %none) {axis = 1 : i64, num_outputs = 2 : i64} : (tensor<?x4xf32>, none) -> (tensor<?x2xf32>, tensor<?x2xf32>)
  %sg = onnx.Sigmoid(%gs#0) : (tensor<?x2xf32>) -> tensor<?x2xf32>
  %silu = onnx.Mul(%gs#0, %sg) : (tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x2xf32>
  %a = onnx.Mul(%silu, %gs#1) : (tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x2xf32>
  %d1 = onnx.GatherND(%wd, %ids) : (tensor<4x4x2xf32>, tensor<?x1xi64>) -> tensor<?x4x2xf32>
  %ac = onnx.Unsqueeze(%a, %m1) : (tensor<?x2xf32>, tensor<1xi64>) -> tensor<?x2x1xf32>
  %y3 = onnx.MatMul(%d1, %ac) : (tensor<?x4x2xf32>, tensor<?x2x1xf32>) -> tensor<?x4x1xf32>
  %y = onnx.Squeeze(%y3, %m1) : (tensor<?x4x1xf32>, tensor<1xi64>) -> tensor<?x4xf32>
  %wf = onnx.Reshape(%w, %m1) : (tensor<?x2xf32>, tensor<1xi64>) -> tensor<?xf32>
  %wc = onnx.Unsqueeze(%wf, %m1) : (tensor<?xf32>, tensor<1xi64>) -> tensor<?x1xf32>
  %yw = onnx.Mul(%y, %wc) : (tensor<?x4xf32>, tensor<?x1xf32>) -> tensor<?x4xf32>
  %y3k = onnx.Reshape(%yw, %rshape) : (tensor<?x4xf32>, tensor<3xi64>) -> tensor<?x2x4xf32>
  %out = onnx.ReduceSum(%y3k, %one) {keepdims = 0 : i64} : (tensor<?x2x4xf32>, tensor<1xi64>) -> tensor<?x4xf32>
  return %out : tensor<?x4xf32>
}

// -----

// Expert weights that are inputs, not constants.
// CHECK-LABEL: xfmr-raise @runtime_weights: formed nothing; 1 candidate(s) left unfused
// CHECK: moe at {{.*}}: gate and up are not expert products
// CHECK-NOT: xfmr.moe
func.func @runtime_weights(%x: tensor<?x4xf32>, %wgu: tensor<4x4x4xf32>) -> tensor<?x4xf32> {
  %none = onnx.NoValue : none
  %wr = onnx.Constant() {value = dense<[[-1.756, 0.451, -0.684, 1.660], [1.069, -0.453, -0.688, -1.214], [-0.441, -0.280, -0.365, 0.157], [0.579, 0.350, -0.764, -1.438]]> : tensor<4x4xf32>} : () -> tensor<4x4xf32>
  %logits = onnx.Gemm(%x, %wr, %none) {transB = 1 : i64} : (tensor<?x4xf32>, tensor<4x4xf32>, none) -> tensor<?x4xf32>
  %p = onnx.Softmax(%logits) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %k = onnx.Constant() {value = dense<2> : tensor<1xi64>} : () -> tensor<1xi64>
  %m1 = onnx.Constant() {value = dense<-1> : tensor<1xi64>} : () -> tensor<1xi64>
  %one = onnx.Constant() {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %v, %idx = onnx.TopK(%p, %k) : (tensor<?x4xf32>, tensor<1xi64>) -> (tensor<?x2xf32>, tensor<?x2xi64>)
  %s = onnx.ReduceSum(%v, %m1) : (tensor<?x2xf32>, tensor<1xi64>) -> tensor<?x1xf32>
  %w = onnx.Div(%v, %s) : (tensor<?x2xf32>, tensor<?x1xf32>) -> tensor<?x2xf32>
  %rshape = onnx.Constant() {value = dense<[-1, 2, 4]> : tensor<3xi64>} : () -> tensor<3xi64>
  %fshape = onnx.Constant() {value = dense<[-1, 4]> : tensor<2xi64>} : () -> tensor<2xi64>
  %xu = onnx.Unsqueeze(%x, %one) : (tensor<?x4xf32>, tensor<1xi64>) -> tensor<?x1x4xf32>
  %xe = onnx.Expand(%xu, %rshape) : (tensor<?x1x4xf32>, tensor<3xi64>) -> tensor<?x2x4xf32>
  %xr = onnx.Reshape(%xe, %fshape) : (tensor<?x2x4xf32>, tensor<2xi64>) -> tensor<?x4xf32>
  %ids1 = onnx.Reshape(%idx, %m1) : (tensor<?x2xi64>, tensor<1xi64>) -> tensor<?xi64>
  %ids = onnx.Unsqueeze(%ids1, %m1) : (tensor<?xi64>, tensor<1xi64>) -> tensor<?x1xi64>
  %wd = onnx.Constant() {value = dense<[[[1.365, -0.689], [-0.652, -0.521], [-1.843, -0.478], [-0.480, 0.620]], [[0.698, 0.004], [0.932, 0.340], [-0.016, 0.161], [-0.191, -0.395]], [[-0.268, -1.128], [0.280, -0.993], [0.842, -0.249], [0.049, 0.494]], [[0.643, -1.571], [-0.207, 0.880], [-1.698, 0.387], [-2.256, -1.023]]]> : tensor<4x4x2xf32>} : () -> tensor<4x4x2xf32>
  %g1 = onnx.GatherND(%wgu, %ids) : (tensor<4x4x4xf32>, tensor<?x1xi64>) -> tensor<?x4x4xf32>
  %xc = onnx.Unsqueeze(%xr, %m1) : (tensor<?x4xf32>, tensor<1xi64>) -> tensor<?x4x1xf32>
  %gu3 = onnx.MatMul(%g1, %xc) : (tensor<?x4x4xf32>, tensor<?x4x1xf32>) -> tensor<?x4x1xf32>
  %gu = onnx.Squeeze(%gu3, %m1) : (tensor<?x4x1xf32>, tensor<1xi64>) -> tensor<?x4xf32>
  %gs:2 = onnx.Split(%gu, %none) {axis = 1 : i64, num_outputs = 2 : i64} : (tensor<?x4xf32>, none) -> (tensor<?x2xf32>, tensor<?x2xf32>)
  %sg = onnx.Sigmoid(%gs#0) : (tensor<?x2xf32>) -> tensor<?x2xf32>
  %silu = onnx.Mul(%gs#0, %sg) : (tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x2xf32>
  %a = onnx.Mul(%silu, %gs#1) : (tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x2xf32>
  %d1 = onnx.GatherND(%wd, %ids) : (tensor<4x4x2xf32>, tensor<?x1xi64>) -> tensor<?x4x2xf32>
  %ac = onnx.Unsqueeze(%a, %m1) : (tensor<?x2xf32>, tensor<1xi64>) -> tensor<?x2x1xf32>
  %y3 = onnx.MatMul(%d1, %ac) : (tensor<?x4x2xf32>, tensor<?x2x1xf32>) -> tensor<?x4x1xf32>
  %y = onnx.Squeeze(%y3, %m1) : (tensor<?x4x1xf32>, tensor<1xi64>) -> tensor<?x4xf32>
  %wf = onnx.Reshape(%w, %m1) : (tensor<?x2xf32>, tensor<1xi64>) -> tensor<?xf32>
  %wc = onnx.Unsqueeze(%wf, %m1) : (tensor<?xf32>, tensor<1xi64>) -> tensor<?x1xf32>
  %yw = onnx.Mul(%y, %wc) : (tensor<?x4xf32>, tensor<?x1xf32>) -> tensor<?x4xf32>
  %y3k = onnx.Reshape(%yw, %rshape) : (tensor<?x4xf32>, tensor<3xi64>) -> tensor<?x2x4xf32>
  %out = onnx.ReduceSum(%y3k, %one) {keepdims = 0 : i64} : (tensor<?x2x4xf32>, tensor<1xi64>) -> tensor<?x4xf32>
  return %out : tensor<?x4xf32>
}

