// RUN: xfmr-opt %s "--xfmr-quantize-weights=bits=8 method=smoothquant calibration=%S/Inputs/smooth.json" --mlir-print-debuginfo=false | FileCheck %s --check-prefix=SQ

// Activation-aware scales (xfmr-compile --quant=w8a8 / int4-awq with
// --calibration): the products sharing an input get one scale per input
// channel s; weights are multiplied by s along K, the input divided by s.

// SmoothQuant, alpha 0.5, by hand. Products 0 and 1 share x * gamma:
// max|x| = [4, 1], max|w| over both = [1, 4], s = sqrt(max|x| / max|w|) =
// [2, 0.5], folded into the norm's weight: gamma / s = [0.5, 6] (f32
// 0x3F000000, 0x40C00000). Product 2's input is an argument: an onnx.Mul
// by 1 / s = [2, 1/3] (s = [sqrt(1/4), sqrt(9/1)]). w0 * s = [2, 2]: int8 127, 127.
// SQ-LABEL: func.func @smooth(
// SQ-DAG: %[[INV:.*]] = onnx.Constant() {value = dense_resource<xfmr_smoothing> : tensor<2xf32>}
// SQ-DAG: %[[H:.*]] = onnx.Mul(%arg1, %[[INV]])
// SQ-DAG: %[[G:.*]] = onnx.Constant() {value = dense_resource<xfmr_smoothed_scale> : tensor<2xf32>}
// SQ-DAG: %[[N:.*]] = onnx.Mul(%arg0, %[[G]])
// Each product is xfmr.linear on int8 weights typed per output channel
// (scale max|w * s| / 127: 2 / 127, 1 / 127, 3 / 127 as f32).
// SQ: %[[W0:.*]] = quant.scast %{{.*}} : tensor<2x1xi8> to tensor<2x1x!quant.uniform<i8<-127:127>:f32:1, {0.015748031437397003}>>
// SQ: xfmr.linear %[[N]], %[[W0]] {int8_activations}
// SQ: xfmr.linear %[[N]], %{{.*}} {int8_activations} : tensor<?x2xf32>, tensor<2x1x!quant.uniform<i8<-127:127>:f32:1, {0.0078740157186985015}>>
// SQ: xfmr.linear %[[H]], %{{.*}} {int8_activations} : tensor<?x2xf32>, tensor<2x1x!quant.uniform<i8<-127:127>:f32:1, {0.023622047156095505}>>
// SQ: xfmr_smoothing: "0x4000000000000040ABAAAA3E"
// SQ: xfmr_smoothed_scale: "0x400000000000003F0000C040"
// SQ: xfmr_int8_weights: "0x400000007F7F"
func.func @smooth(%x: tensor<?x2xf32>, %h: tensor<?x2xf32>) -> (tensor<?x1xf32>, tensor<?x1xf32>, tensor<?x1xf32>) {
  %g = onnx.Constant() {value = dense<[1.0, 3.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %n = onnx.Mul(%x, %g) : (tensor<?x2xf32>, tensor<2xf32>) -> tensor<?x2xf32>
  %w0 = onnx.Constant() {value = dense<[[1.0], [4.0]]> : tensor<2x1xf32>} : () -> tensor<2x1xf32>
  %w1 = onnx.Constant() {value = dense<[[0.5], [-2.0]]> : tensor<2x1xf32>} : () -> tensor<2x1xf32>
  %w2 = onnx.Constant() {value = dense<[[4.0], [1.0]]> : tensor<2x1xf32>} : () -> tensor<2x1xf32>
  %a = onnx.MatMul(%n, %w0) : (tensor<?x2xf32>, tensor<2x1xf32>) -> tensor<?x1xf32>
  %b = onnx.MatMul(%n, %w1) : (tensor<?x2xf32>, tensor<2x1xf32>) -> tensor<?x1xf32>
  %c = onnx.MatMul(%h, %w2) : (tensor<?x2xf32>, tensor<2x1xf32>) -> tensor<?x1xf32>
  return %a, %b, %c : tensor<?x1xf32>, tensor<?x1xf32>, tensor<?x1xf32>
}

