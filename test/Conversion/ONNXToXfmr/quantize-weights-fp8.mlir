// RUN: xfmr-opt %s --xfmr-quantize-weights="bits=8 float8=true" --mlir-print-debuginfo=false | FileCheck %s

// --quant=fp8-e4m3: the layers' products take float8 e4m3fn weights with a
// scale per output channel; a language model's output product (returned by
// a function taking input_ids: lm_head) becomes int8 per channel,
// weight-only, as in the 4-bit modes (an fp8 lm_head cost SmolLM2-135M two
// thirds of fp8's +3.2% perplexity).
// CHECK-LABEL: func.func @fp8_layers_int8_lm_head(
// CHECK: xfmr.linear %{{.*}}, %{{.*}} : tensor<?x32xf32>, tensor<32x1xf8E4M3FN>
// CHECK: onnx.Mul
// CHECK: %[[W:.*]] = quant.scast %{{.*}} : tensor<1x2xi8> to tensor<1x2x!quant.uniform<i8<-127:127>:f32:1
// CHECK: xfmr.linear %{{.*}}, %[[W]] :
// CHECK-NOT: int8_activations
// CHECK: return
func.func @fp8_layers_int8_lm_head(%ids: tensor<?xi64> {onnx.name = "input_ids"}, %x: tensor<?x32xf32>) -> tensor<?x2xf32> {
  %w = onnx.Constant() {value = dense<[[-0.25], [-0.15], [-0.05], [0.05], [0.15], [0.25], [0.35], [0.45], [0.55], [0.65], [0.75], [0.85], [0.95], [1.05], [1.15], [1.25], [-0.25], [-0.15], [-0.05], [0.05], [0.15], [0.25], [0.35], [0.45], [0.55], [0.65], [0.75], [0.85], [0.95], [1.05], [1.15], [1.25]]> : tensor<32x1xf32>} : () -> tensor<32x1xf32>
  %h = onnx.MatMul(%x, %w) : (tensor<?x32xf32>, tensor<32x1xf32>) -> tensor<?x1xf32>
  %lm = onnx.Constant() {value = dense<[[1.0, -0.5]]> : tensor<1x2xf32>} : () -> tensor<1x2xf32>
  %y = onnx.MatMul(%h, %lm) : (tensor<?x1xf32>, tensor<1x2xf32>) -> tensor<?x2xf32>
  return %y : tensor<?x2xf32>
}
