// RUN: xfmr-opt %s -split-input-file -verify-diagnostics

// One case per error message of the onnx op verifiers (ONNXOps.cpp). Each
// starts from a valid op and breaks one invariant of the ONNX spec; the
// comment says which. The shared checks (axis range, 0/1 flags) have a case
// per op that uses them. Constant operands come from onnx.Constant, which is
// how the verifiers see values known at import time.

//===----------------------------------------------------------------------===//
// ArgMax / ArgMin
//===----------------------------------------------------------------------===//

// keepdims is an ONNX INT used as a bool.
func.func @argmax_keepdims(%x: tensor<2x8xf32>) -> tensor<2x1xi64> {
  // expected-error @+1 {{'onnx.ArgMax' op keepdims must be 0 or 1, got 2}}
  %0 = onnx.ArgMax(%x) {axis = 1 : i64, keepdims = 2 : i64} : (tensor<2x8xf32>) -> tensor<2x1xi64>
  return %0 : tensor<2x1xi64>
}

// -----

// select_last_index is an ONNX INT used as a bool.
func.func @argmax_select_last_index(%x: tensor<2x8xf32>) -> tensor<2x1xi64> {
  // expected-error @+1 {{'onnx.ArgMax' op select_last_index must be 0 or 1, got -1}}
  %0 = onnx.ArgMax(%x) {axis = 1 : i64, select_last_index = -1 : i64} : (tensor<2x8xf32>) -> tensor<2x1xi64>
  return %0 : tensor<2x1xi64>
}

// -----

// The reduced axis must name a dim of the input.
func.func @argmax_axis(%x: tensor<2x8xf32>) -> tensor<2x8xi64> {
  // expected-error @+1 {{'onnx.ArgMax' op axis 2 is out of range [-2, 1] for rank 2}}
  %0 = onnx.ArgMax(%x) {axis = 2 : i64} : (tensor<2x8xf32>) -> tensor<2x8xi64>
  return %0 : tensor<2x8xi64>
}

// -----

// ArgMin shares ArgMax's flags: keepdims must be 0 or 1.
func.func @argmin_keepdims(%x: tensor<2x8xf32>) -> tensor<2x1xi64> {
  // expected-error @+1 {{'onnx.ArgMin' op keepdims must be 0 or 1, got 3}}
  %0 = onnx.ArgMin(%x) {axis = 1 : i64, keepdims = 3 : i64} : (tensor<2x8xf32>) -> tensor<2x1xi64>
  return %0 : tensor<2x1xi64>
}

// -----

// ArgMin's axis is range-checked like ArgMax's, negative side included.
func.func @argmin_axis(%x: tensor<2x8xf32>) -> tensor<1x8xi64> {
  // expected-error @+1 {{'onnx.ArgMin' op axis -3 is out of range [-2, 1] for rank 2}}
  %0 = onnx.ArgMin(%x) {axis = -3 : i64} : (tensor<2x8xf32>) -> tensor<1x8xi64>
  return %0 : tensor<1x8xi64>
}

// -----

//===----------------------------------------------------------------------===//
// Softmax / LogSoftmax / Hardmax
//===----------------------------------------------------------------------===//

// The softmax axis must name a dim of the input.
func.func @softmax_axis(%x: tensor<2x8x16xf32>) -> tensor<2x8x16xf32> {
  // expected-error @+1 {{'onnx.Softmax' op axis 3 is out of range [-3, 2] for rank 3}}
  %0 = onnx.Softmax(%x) {axis = 3 : i64} : (tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  return %0 : tensor<2x8x16xf32>
}

// -----

// LogSoftmax checks its axis like Softmax.
func.func @log_softmax_axis(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{'onnx.LogSoftmax' op axis -3 is out of range [-2, 1] for rank 2}}
  %0 = onnx.LogSoftmax(%x) {axis = -3 : i64} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

// Hardmax checks its axis like Softmax; the default axis (-1) is checked too,
// so a 0-D input has no valid axis.
func.func @hardmax_axis_scalar(%x: tensor<f32>) -> tensor<f32> {
  // expected-error @+1 {{'onnx.Hardmax' op axis needs an input of rank >= 1}}
  %0 = onnx.Hardmax(%x) : (tensor<f32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

//===----------------------------------------------------------------------===//
// Attention (opset 23)
//===----------------------------------------------------------------------===//

// is_causal is an ONNX INT used as a bool.
func.func @attention_is_causal(%q: tensor<2x8x16x64xf32>, %k: tensor<2x8x16x64xf32>,
                               %v: tensor<2x8x16x64xf32>) -> tensor<2x8x16x64xf32> {
  %none = onnx.NoValue : none
  // expected-error @+1 {{'onnx.Attention' op is_causal must be 0 or 1, got 2}}
  %y, %pk, %pv, %qk = onnx.Attention(%q, %k, %v, %none, %none, %none, %none) {is_causal = 2 : i64}
      : (tensor<2x8x16x64xf32>, tensor<2x8x16x64xf32>, tensor<2x8x16x64xf32>, none, none, none, none)
      -> (tensor<2x8x16x64xf32>, none, none, none)
  return %y : tensor<2x8x16x64xf32>
}

// -----

// qk_matmul_output_mode selects one of four tensors (0..3).
func.func @attention_qk_mode(%q: tensor<2x8x16x64xf32>, %k: tensor<2x8x16x64xf32>,
                             %v: tensor<2x8x16x64xf32>) -> tensor<2x8x16x64xf32> {
  %none = onnx.NoValue : none
  // expected-error @+1 {{'onnx.Attention' op qk_matmul_output_mode must be in [0, 3], got 4}}
  %y, %pk, %pv, %qk = onnx.Attention(%q, %k, %v, %none, %none, %none, %none) {qk_matmul_output_mode = 4 : i64}
      : (tensor<2x8x16x64xf32>, tensor<2x8x16x64xf32>, tensor<2x8x16x64xf32>, none, none, none, none)
      -> (tensor<2x8x16x64xf32>, none, none, none)
  return %y : tensor<2x8x16x64xf32>
}

// -----

// Q is [B, S, H*D] or [B, H, S, D]; nothing else.
func.func @attention_q_rank(%q: tensor<16x64xf32>, %k: tensor<16x64xf32>,
                            %v: tensor<16x64xf32>) -> tensor<16x64xf32> {
  %none = onnx.NoValue : none
  // expected-error @+1 {{'onnx.Attention' op Q must have rank 3 or 4, got 2}}
  %y, %pk, %pv, %qk = onnx.Attention(%q, %k, %v, %none, %none, %none, %none)
      : (tensor<16x64xf32>, tensor<16x64xf32>, tensor<16x64xf32>, none, none, none, none)
      -> (tensor<16x64xf32>, none, none, none)
  return %y : tensor<16x64xf32>
}

// -----

// 3-D inputs pack the heads into the last dim; the head counts say how.
func.func @attention_3d_without_heads(%q: tensor<2x16x512xf32>, %k: tensor<2x16x512xf32>,
                                      %v: tensor<2x16x512xf32>) -> tensor<2x16x512xf32> {
  %none = onnx.NoValue : none
  // expected-error @+1 {{'onnx.Attention' op 3-D inputs need q_num_heads and kv_num_heads}}
  %y, %pk, %pv, %qk = onnx.Attention(%q, %k, %v, %none, %none, %none, %none) {q_num_heads = 8 : i64}
      : (tensor<2x16x512xf32>, tensor<2x16x512xf32>, tensor<2x16x512xf32>, none, none, none, none)
      -> (tensor<2x16x512xf32>, none, none, none)
  return %y : tensor<2x16x512xf32>
}

// -----

// Head counts must be positive.
func.func @attention_zero_heads(%q: tensor<2x16x512xf32>, %k: tensor<2x16x512xf32>,
                                %v: tensor<2x16x512xf32>) -> tensor<2x16x512xf32> {
  %none = onnx.NoValue : none
  // expected-error @+1 {{'onnx.Attention' op q_num_heads and kv_num_heads must be positive}}
  %y, %pk, %pv, %qk = onnx.Attention(%q, %k, %v, %none, %none, %none, %none)
      {kv_num_heads = 0 : i64, q_num_heads = 8 : i64}
      : (tensor<2x16x512xf32>, tensor<2x16x512xf32>, tensor<2x16x512xf32>, none, none, none, none)
      -> (tensor<2x16x512xf32>, none, none, none)
  return %y : tensor<2x16x512xf32>
}

// -----

// Grouped-query attention shares each KV head by a whole number of Q heads.
func.func @attention_heads_not_multiple(%q: tensor<2x16x384xf32>, %k: tensor<2x16x256xf32>,
                                        %v: tensor<2x16x256xf32>) -> tensor<2x16x384xf32> {
  %none = onnx.NoValue : none
  // expected-error @+1 {{'onnx.Attention' op q_num_heads 6 is not a multiple of kv_num_heads 4}}
  %y, %pk, %pv, %qk = onnx.Attention(%q, %k, %v, %none, %none, %none, %none)
      {kv_num_heads = 4 : i64, q_num_heads = 6 : i64}
      : (tensor<2x16x384xf32>, tensor<2x16x256xf32>, tensor<2x16x256xf32>, none, none, none, none)
      -> (tensor<2x16x384xf32>, none, none, none)
  return %y : tensor<2x16x384xf32>
}

// -----

// With 4-D inputs the head counts are dim 1 of Q and K, checked the same way.
func.func @attention_4d_heads_not_multiple(%q: tensor<2x6x16x64xf32>, %k: tensor<2x4x16x64xf32>,
                                           %v: tensor<2x4x16x64xf32>) -> tensor<2x6x16x64xf32> {
  %none = onnx.NoValue : none
  // expected-error @+1 {{'onnx.Attention' op query heads 6 are not a multiple of key heads 4}}
  %y, %pk, %pv, %qk = onnx.Attention(%q, %k, %v, %none, %none, %none, %none)
      : (tensor<2x6x16x64xf32>, tensor<2x4x16x64xf32>, tensor<2x4x16x64xf32>, none, none, none, none)
      -> (tensor<2x6x16x64xf32>, none, none, none)
  return %y : tensor<2x6x16x64xf32>
}

// -----

// Q·Kᵀ contracts the head dim: Q and K must agree on it.
func.func @attention_head_size(%q: tensor<2x8x16x64xf32>, %k: tensor<2x8x16x32xf32>,
                               %v: tensor<2x8x16x64xf32>) -> tensor<2x8x16x64xf32> {
  %none = onnx.NoValue : none
  // expected-error @+1 {{'onnx.Attention' op Q head size 64 differs from K head size 32}}
  %y, %pk, %pv, %qk = onnx.Attention(%q, %k, %v, %none, %none, %none, %none)
      : (tensor<2x8x16x64xf32>, tensor<2x8x16x32xf32>, tensor<2x8x16x64xf32>, none, none, none, none)
      -> (tensor<2x8x16x64xf32>, none, none, none)
  return %y : tensor<2x8x16x64xf32>
}

// -----

//===----------------------------------------------------------------------===//
// Cast
//===----------------------------------------------------------------------===//

// 'to' is a TensorProto data type; 8 (string) has no MLIR element type.
func.func @cast_unsupported_type(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'onnx.Cast' op 'to' names unsupported data type 8}}
  %0 = onnx.Cast(%x) {to = 8 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// saturate is an ONNX INT used as a bool.
func.func @cast_saturate(%x: tensor<4xf32>) -> tensor<4xf8E4M3FN> {
  // expected-error @+1 {{'onnx.Cast' op saturate must be 0 or 1, got 2}}
  %0 = onnx.Cast(%x) {saturate = 2 : i64, to = 17 : i64} : (tensor<4xf32>) -> tensor<4xf8E4M3FN>
  return %0 : tensor<4xf8E4M3FN>
}

// -----

//===----------------------------------------------------------------------===//
// Concat
//===----------------------------------------------------------------------===//

// ONNX Concat takes one or more inputs.
func.func @concat_no_inputs() -> tensor<0xf32> {
  // expected-error @+1 {{'onnx.Concat' op needs at least one input}}
  %0 = onnx.Concat() {axis = 0 : i64} : () -> tensor<0xf32>
  return %0 : tensor<0xf32>
}

// -----

// All inputs have the same rank.
func.func @concat_ranks(%a: tensor<2x3xf32>, %b: tensor<2x3x1xf32>) -> tensor<2x6xf32> {
  // expected-error @+1 {{'onnx.Concat' op inputs have different ranks 2 and 3}}
  %0 = onnx.Concat(%a, %b) {axis = 1 : i64} : (tensor<2x3xf32>, tensor<2x3x1xf32>) -> tensor<2x6xf32>
  return %0 : tensor<2x6xf32>
}

// -----

// 0-D tensors have no axis to concatenate along.
func.func @concat_scalars(%a: tensor<i64>, %b: tensor<i64>) -> tensor<2xi64> {
  // expected-error @+1 {{'onnx.Concat' op cannot concatenate scalars}}
  %0 = onnx.Concat(%a, %b) {axis = 0 : i64} : (tensor<i64>, tensor<i64>) -> tensor<2xi64>
  return %0 : tensor<2xi64>
}

// -----

// The concat axis must name a dim of the inputs.
func.func @concat_axis(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>) -> tensor<2x6xf32> {
  // expected-error @+1 {{'onnx.Concat' op axis 2 is out of range [-2, 1] for rank 2}}
  %0 = onnx.Concat(%a, %b) {axis = 2 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x6xf32>
  return %0 : tensor<2x6xf32>
}

// -----

// Off the concat axis, static dims must agree.
func.func @concat_dims(%a: tensor<2x3xf32>, %b: tensor<3x3xf32>) -> tensor<2x6xf32> {
  // expected-error @+1 {{'onnx.Concat' op inputs disagree on dim 0: 2 vs 3}}
  %0 = onnx.Concat(%a, %b) {axis = 1 : i64} : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x6xf32>
  return %0 : tensor<2x6xf32>
}

// -----

//===----------------------------------------------------------------------===//
// ConstantOfShape
//===----------------------------------------------------------------------===//

// The input is a shape: a 1-D list of dims.
func.func @constant_of_shape_input_rank(%s: tensor<1x2xi64>) -> tensor<?x?xf32> {
  // expected-error @+1 {{'onnx.ConstantOfShape' op shape input must be 1-D}}
  %0 = onnx.ConstantOfShape(%s) : (tensor<1x2xi64>) -> tensor<?x?xf32>
  return %0 : tensor<?x?xf32>
}

// -----

// The fill value is a one-element tensor.
func.func @constant_of_shape_value(%s: tensor<2xi64>) -> tensor<?x?xf32> {
  // expected-error @+1 {{'onnx.ConstantOfShape' op value must hold exactly one element}}
  %0 = onnx.ConstantOfShape(%s) {value = dense<[1.0, 2.0]> : tensor<2xf32>} : (tensor<2xi64>) -> tensor<?x?xf32>
  return %0 : tensor<?x?xf32>
}

// -----

//===----------------------------------------------------------------------===//
// CumSum
//===----------------------------------------------------------------------===//

// exclusive is an ONNX INT used as a bool.
func.func @cumsum_exclusive(%x: tensor<2x8xf32>, %axis: tensor<i64>) -> tensor<2x8xf32> {
  // expected-error @+1 {{'onnx.CumSum' op exclusive must be 0 or 1, got 2}}
  %0 = onnx.CumSum(%x, %axis) {exclusive = 2 : i64} : (tensor<2x8xf32>, tensor<i64>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

// reverse is an ONNX INT used as a bool.
func.func @cumsum_reverse(%x: tensor<2x8xf32>, %axis: tensor<i64>) -> tensor<2x8xf32> {
  // expected-error @+1 {{'onnx.CumSum' op reverse must be 0 or 1, got -1}}
  %0 = onnx.CumSum(%x, %axis) {reverse = -1 : i64} : (tensor<2x8xf32>, tensor<i64>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

// The axis input is a 0-D (or one-element 1-D) tensor.
func.func @cumsum_axis_input_rank(%x: tensor<2x8xf32>, %axis: tensor<1x1xi64>) -> tensor<2x8xf32> {
  // expected-error @+1 {{'onnx.CumSum' op axis input must be a scalar or 1-D}}
  %0 = onnx.CumSum(%x, %axis) : (tensor<2x8xf32>, tensor<1x1xi64>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

// A constant axis input names exactly one axis.
func.func @cumsum_axis_count(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %axis = onnx.Constant() {value = dense<[0, 1]> : tensor<2xi64>} : () -> tensor<2xi64>
  // expected-error @+1 {{'onnx.CumSum' op axis input must hold one value}}
  %0 = onnx.CumSum(%x, %axis) : (tensor<2x8xf32>, tensor<2xi64>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

// A constant axis input is range-checked against the data rank.
func.func @cumsum_axis_range(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %axis = onnx.Constant() {value = dense<2> : tensor<i32>} : () -> tensor<i32>
  // expected-error @+1 {{'onnx.CumSum' op axis 2 is out of range [-2, 1] for rank 2}}
  %0 = onnx.CumSum(%x, %axis) : (tensor<2x8xf32>, tensor<i32>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

//===----------------------------------------------------------------------===//
// DequantizeLinear / QuantizeLinear
//===----------------------------------------------------------------------===//

// block_size counts elements per block; 0 means no blocking.
func.func @dequantize_block_size_negative(%x: tensor<4x64xi8>, %s: tensor<4x2xf32>) -> tensor<4x64xf32> {
  %none = onnx.NoValue : none
  // expected-error @+1 {{'onnx.DequantizeLinear' op block_size must be >= 0, got -1}}
  %0 = onnx.DequantizeLinear(%x, %s, %none) {block_size = -1 : i64}
      : (tensor<4x64xi8>, tensor<4x2xf32>, none) -> tensor<4x64xf32>
  return %0 : tensor<4x64xf32>
}

// -----

// A per-axis scale names the quantized axis; it must be a dim of x.
func.func @dequantize_axis(%x: tensor<4x8xi8>, %s: tensor<8xf32>) -> tensor<4x8xf32> {
  %none = onnx.NoValue : none
  // expected-error @+1 {{'onnx.DequantizeLinear' op axis 2 is out of range [-2, 1] for rank 2}}
  %0 = onnx.DequantizeLinear(%x, %s, %none) {axis = 2 : i64}
      : (tensor<4x8xi8>, tensor<8xf32>, none) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// A per-axis scale has one element per channel of the quantized axis.
func.func @dequantize_per_axis_count(%x: tensor<4x8xi8>, %s: tensor<4xf32>) -> tensor<4x8xf32> {
  %none = onnx.NoValue : none
  // expected-error @+1 {{'onnx.DequantizeLinear' op per-axis scale has 4 elements but axis 1 has 8 channels}}
  %0 = onnx.DequantizeLinear(%x, %s, %none)
      : (tensor<4x8xi8>, tensor<4xf32>, none) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// A blocked scale has ceil(dim / block_size) entries on the blocked axis.
func.func @dequantize_blocked_count(%x: tensor<4x64xi8>, %s: tensor<4x3xf32>) -> tensor<4x64xf32> {
  %none = onnx.NoValue : none
  // expected-error @+1 {{'onnx.DequantizeLinear' op blocked scale has 3 blocks on axis 1, expected ceil(64/32)}}
  %0 = onnx.DequantizeLinear(%x, %s, %none) {axis = 1 : i64, block_size = 32 : i64}
      : (tensor<4x64xi8>, tensor<4x3xf32>, none) -> tensor<4x64xf32>
  return %0 : tensor<4x64xf32>
}

// -----

// A constant scale of 0 (or negative, inf, NaN) cannot dequantize anything.
func.func @dequantize_scale_zero(%x: tensor<4x8xi8>) -> tensor<4x8xf32> {
  %s = onnx.Constant() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
  %none = onnx.NoValue : none
  // expected-error @+1 {{'onnx.DequantizeLinear' op scale 0.000000e+00 must be positive and finite}}
  %0 = onnx.DequantizeLinear(%x, %s, %none) : (tensor<4x8xi8>, tensor<f32>, none) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// The zero point is given per scale entry, so both have the same shape.
func.func @dequantize_zero_point_shape(%x: tensor<4x8xi8>, %s: tensor<8xf32>,
                                       %zp: tensor<1x8xi8>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'onnx.DequantizeLinear' op zero point and scale must have the same shape}}
  %0 = onnx.DequantizeLinear(%x, %s, %zp)
      : (tensor<4x8xi8>, tensor<8xf32>, tensor<1x8xi8>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// The zero point has the quantized type (x for DequantizeLinear).
func.func @dequantize_zero_point_type(%x: tensor<4x8xui8>, %s: tensor<8xf32>,
                                      %zp: tensor<8xi8>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'onnx.DequantizeLinear' op zero point type 'i8' differs from the quantized type 'ui8'}}
  %0 = onnx.DequantizeLinear(%x, %s, %zp)
      : (tensor<4x8xui8>, tensor<8xf32>, tensor<8xi8>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// int32 inputs are symmetric: ONNX requires their zero point to be 0.
func.func @dequantize_int32_zero_point(%x: tensor<16xi32>, %s: tensor<f32>) -> tensor<16xf32> {
  %zp = onnx.Constant() {value = dense<3> : tensor<i32>} : () -> tensor<i32>
  // expected-error @+1 {{'onnx.DequantizeLinear' op int32 zero points must be 0}}
  %0 = onnx.DequantizeLinear(%x, %s, %zp) : (tensor<16xi32>, tensor<f32>, tensor<i32>) -> tensor<16xf32>
  return %0 : tensor<16xf32>
}

// -----

// saturate is an ONNX INT used as a bool.
func.func @quantize_saturate(%x: tensor<4x8xf32>, %s: tensor<f32>,
                             %zp: tensor<f8E4M3FN>) -> tensor<4x8xf8E4M3FN> {
  // expected-error @+1 {{'onnx.QuantizeLinear' op saturate must be 0 or 1, got 2}}
  %0 = onnx.QuantizeLinear(%x, %s, %zp) {saturate = 2 : i64}
      : (tensor<4x8xf32>, tensor<f32>, tensor<f8E4M3FN>) -> tensor<4x8xf8E4M3FN>
  return %0 : tensor<4x8xf8E4M3FN>
}

// -----

// QuantizeLinear shares the scale checks: the per-axis axis must name a dim.
func.func @quantize_axis(%x: tensor<4x8xf32>, %s: tensor<4xf32>) -> tensor<4x8xi8> {
  %none = onnx.NoValue : none
  // expected-error @+1 {{'onnx.QuantizeLinear' op axis -3 is out of range [-2, 1] for rank 2}}
  %0 = onnx.QuantizeLinear(%x, %s, %none) {axis = -3 : i64}
      : (tensor<4x8xf32>, tensor<4xf32>, none) -> tensor<4x8xi8>
  return %0 : tensor<4x8xi8>
}

// -----

// For QuantizeLinear the quantized type is the result's: the zero point
// must match y, not the float input.
func.func @quantize_zero_point_type(%x: tensor<4x8xf32>, %s: tensor<f32>,
                                    %zp: tensor<ui8>) -> tensor<4x8xi8> {
  // expected-error @+1 {{'onnx.QuantizeLinear' op zero point type 'ui8' differs from the quantized type 'i8'}}
  %0 = onnx.QuantizeLinear(%x, %s, %zp)
      : (tensor<4x8xf32>, tensor<f32>, tensor<ui8>) -> tensor<4x8xi8>
  return %0 : tensor<4x8xi8>
}

// -----

//===----------------------------------------------------------------------===//
// Einsum
//===----------------------------------------------------------------------===//

// An equation has at most one output term.
func.func @einsum_two_arrows(%x: tensor<2x3xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'onnx.Einsum' op equation 'ij->j->i' has more than one '->'}}
  %0 = onnx.Einsum(%x) {equation = "ij->j->i"} : (tensor<2x3xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// One input term per input.
func.func @einsum_term_count(%x: tensor<2x3xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{'onnx.Einsum' op equation 'ij,jk->ik' has 2 input terms for 1 inputs}}
  %0 = onnx.Einsum(%x) {equation = "ij,jk->ik"} : (tensor<2x3xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

// A term broadcasts over at most one ellipsis.
func.func @einsum_two_ellipses(%x: tensor<2x3x4xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{'onnx.Einsum' op term '...i...' has two ellipses}}
  %0 = onnx.Einsum(%x) {equation = "...i...->i"} : (tensor<2x3x4xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

// Subscripts are letters (plus '...').
func.func @einsum_invalid_character(%x: tensor<2x3xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'onnx.Einsum' op equation 'i1->i' has invalid character '1'}}
  %0 = onnx.Einsum(%x) {equation = "i1->i"} : (tensor<2x3xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// Without an ellipsis a term names every dim of its input.
func.func @einsum_term_rank(%x: tensor<2x3x4xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'onnx.Einsum' op term 'ij' names 2 dims but its input has rank 3}}
  %0 = onnx.Einsum(%x) {equation = "ij->i"} : (tensor<2x3x4xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// With an ellipsis a term names at most rank dims.
func.func @einsum_ellipsis_rank(%x: tensor<2x3xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'onnx.Einsum' op term '...ijk' names more dims than rank 2}}
  %0 = onnx.Einsum(%x) {equation = "...ijk->i"} : (tensor<2x3xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// The output term is checked for characters too.
func.func @einsum_output_character(%x: tensor<2x3xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'onnx.Einsum' op equation 'ij->i_' has invalid character '_'}}
  %0 = onnx.Einsum(%x) {equation = "ij->i_"} : (tensor<2x3xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

//===----------------------------------------------------------------------===//
// Expand / Flatten / Gather / GatherElements
//===----------------------------------------------------------------------===//

// Expand's shape input is a 1-D list of dims.
func.func @expand_shape_rank(%x: tensor<1x8xf32>, %s: tensor<1x2xi64>) -> tensor<?x?xf32> {
  // expected-error @+1 {{'onnx.Expand' op shape input must be 1-D}}
  %0 = onnx.Expand(%x, %s) : (tensor<1x8xf32>, tensor<1x2xi64>) -> tensor<?x?xf32>
  return %0 : tensor<?x?xf32>
}

// -----

// Flatten's axis may equal the rank (everything goes to the outer dim), but
// not exceed it.
func.func @flatten_axis(%x: tensor<2x3x4xf32>) -> tensor<24x1xf32> {
  // expected-error @+1 {{'onnx.Flatten' op axis 4 is out of range [-3, 3] for rank 3}}
  %0 = onnx.Flatten(%x) {axis = 4 : i64} : (tensor<2x3x4xf32>) -> tensor<24x1xf32>
  return %0 : tensor<24x1xf32>
}

// -----

// Gather indexes along an axis, which a 0-D tensor does not have.
func.func @gather_scalar_data(%x: tensor<f32>, %i: tensor<i64>) -> tensor<f32> {
  // expected-error @+1 {{'onnx.Gather' op data must have rank >= 1}}
  %0 = onnx.Gather(%x, %i) : (tensor<f32>, tensor<i64>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// The gather axis must name a dim of the data.
func.func @gather_axis(%x: tensor<4x8xf32>, %i: tensor<2xi64>) -> tensor<4x2xf32> {
  // expected-error @+1 {{'onnx.Gather' op axis 2 is out of range [-2, 1] for rank 2}}
  %0 = onnx.Gather(%x, %i) {axis = 2 : i64} : (tensor<4x8xf32>, tensor<2xi64>) -> tensor<4x2xf32>
  return %0 : tensor<4x2xf32>
}

// -----

// GatherElements picks one element per index: indices has the data's rank.
func.func @gather_elements_rank(%x: tensor<4x8xf32>, %i: tensor<4xi64>) -> tensor<4xf32> {
  // expected-error @+1 {{'onnx.GatherElements' op indices rank 1 differs from data rank 2}}
  %0 = onnx.GatherElements(%x, %i) : (tensor<4x8xf32>, tensor<4xi64>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// The GatherElements axis must name a dim of the data.
func.func @gather_elements_axis(%x: tensor<4x8xf32>, %i: tensor<4x2xi64>) -> tensor<4x2xf32> {
  // expected-error @+1 {{'onnx.GatherElements' op axis -3 is out of range [-2, 1] for rank 2}}
  %0 = onnx.GatherElements(%x, %i) {axis = -3 : i64} : (tensor<4x8xf32>, tensor<4x2xi64>) -> tensor<4x2xf32>
  return %0 : tensor<4x2xf32>
}

// -----

//===----------------------------------------------------------------------===//
// Gemm / MatMul
//===----------------------------------------------------------------------===//

// transA is an ONNX INT used as a bool.
func.func @gemm_trans_a(%a: tensor<8x4xf32>, %b: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %none = onnx.NoValue : none
  // expected-error @+1 {{'onnx.Gemm' op transA must be 0 or 1, got 2}}
  %0 = onnx.Gemm(%a, %b, %none) {transA = 2 : i64} : (tensor<8x4xf32>, tensor<8x16xf32>, none) -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

// transB is an ONNX INT used as a bool.
func.func @gemm_trans_b(%a: tensor<4x8xf32>, %b: tensor<16x8xf32>) -> tensor<4x16xf32> {
  %none = onnx.NoValue : none
  // expected-error @+1 {{'onnx.Gemm' op transB must be 0 or 1, got -1}}
  %0 = onnx.Gemm(%a, %b, %none) {transB = -1 : i64} : (tensor<4x8xf32>, tensor<16x8xf32>, none) -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

// Gemm is a plain matrix product: no batch dims (that is MatMul).
func.func @gemm_rank(%a: tensor<2x4x8xf32>, %b: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %none = onnx.NoValue : none
  // expected-error @+1 {{'onnx.Gemm' op A and B must be 2-D}}
  %0 = onnx.Gemm(%a, %b, %none) : (tensor<2x4x8xf32>, tensor<8x16xf32>, none) -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

// The contraction dims agree after transposition: with transB, B (16x12)
// contracts over 12 while A (4x8) contracts over 8.
func.func @gemm_contraction(%a: tensor<4x8xf32>, %b: tensor<16x12xf32>) -> tensor<4x16xf32> {
  %none = onnx.NoValue : none
  // expected-error @+1 {{'onnx.Gemm' op contraction dims differ: 8 vs 12}}
  %0 = onnx.Gemm(%a, %b, %none) {transB = 1 : i64} : (tensor<4x8xf32>, tensor<16x12xf32>, none) -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

// MatMul follows numpy.matmul, which rejects 0-D operands.
func.func @matmul_scalar(%a: tensor<f32>, %b: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'onnx.MatMul' op operands must have rank >= 1}}
  %0 = onnx.MatMul(%a, %b) : (tensor<f32>, tensor<8xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

// MatMul contracts A's last dim with B's second-to-last.
func.func @matmul_contraction(%a: tensor<2x4x8xf32>, %b: tensor<2x6x16xf32>) -> tensor<2x4x16xf32> {
  // expected-error @+1 {{'onnx.MatMul' op contraction dims differ: 8 vs 6}}
  %0 = onnx.MatMul(%a, %b) : (tensor<2x4x8xf32>, tensor<2x6x16xf32>) -> tensor<2x4x16xf32>
  return %0 : tensor<2x4x16xf32>
}

// -----

//===----------------------------------------------------------------------===//
// LayerNormalization / RMSNormalization
//===----------------------------------------------------------------------===//

// The first normalized axis must name a dim of X.
func.func @layer_norm_axis(%x: tensor<2x16x64xf32>, %s: tensor<64xf32>) -> tensor<2x16x64xf32> {
  %none = onnx.NoValue : none
  // expected-error @+1 {{'onnx.LayerNormalization' op axis 3 is out of range [-3, 2] for rank 3}}
  %y, %m, %i = onnx.LayerNormalization(%x, %s, %none) {axis = 3 : i64}
      : (tensor<2x16x64xf32>, tensor<64xf32>, none) -> (tensor<2x16x64xf32>, none, none)
  return %y : tensor<2x16x64xf32>
}

// -----

// Scale broadcasts over the normalized dims [axis, rank) only.
func.func @layer_norm_scale_rank(%x: tensor<2x16x64xf32>, %s: tensor<16x64xf32>) -> tensor<2x16x64xf32> {
  %none = onnx.NoValue : none
  // expected-error @+1 {{'onnx.LayerNormalization' op scale rank 2 exceeds the normalized rank 1}}
  %y, %m, %i = onnx.LayerNormalization(%x, %s, %none)
      : (tensor<2x16x64xf32>, tensor<16x64xf32>, none) -> (tensor<2x16x64xf32>, none, none)
  return %y : tensor<2x16x64xf32>
}

// -----

// RMSNormalization checks its axis like LayerNormalization.
func.func @rms_norm_axis(%x: tensor<2x16x64xf32>, %s: tensor<64xf32>) -> tensor<2x16x64xf32> {
  // expected-error @+1 {{'onnx.RMSNormalization' op axis -4 is out of range [-3, 2] for rank 3}}
  %0 = onnx.RMSNormalization(%x, %s) {axis = -4 : i64}
      : (tensor<2x16x64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>
  return %0 : tensor<2x16x64xf32>
}

// -----

// RMSNormalization's scale is limited to the normalized dims too.
func.func @rms_norm_scale_rank(%x: tensor<2x16x64xf32>, %s: tensor<2x16x64xf32>) -> tensor<2x16x64xf32> {
  // expected-error @+1 {{'onnx.RMSNormalization' op scale rank 3 exceeds the normalized rank 2}}
  %0 = onnx.RMSNormalization(%x, %s) {axis = 1 : i64}
      : (tensor<2x16x64xf32>, tensor<2x16x64xf32>) -> tensor<2x16x64xf32>
  return %0 : tensor<2x16x64xf32>
}

// -----

//===----------------------------------------------------------------------===//
// Reshape
//===----------------------------------------------------------------------===//

// allowzero is an ONNX INT used as a bool.
func.func @reshape_allowzero(%x: tensor<2x8xf32>, %s: tensor<2xi64>) -> tensor<?x?xf32> {
  // expected-error @+1 {{'onnx.Reshape' op allowzero must be 0 or 1, got 2}}
  %0 = onnx.Reshape(%x, %s) {allowzero = 2 : i64} : (tensor<2x8xf32>, tensor<2xi64>) -> tensor<?x?xf32>
  return %0 : tensor<?x?xf32>
}

// -----

// The shape input is a 1-D list of dims.
func.func @reshape_shape_rank(%x: tensor<2x8xf32>, %s: tensor<1x2xi64>) -> tensor<?x?xf32> {
  // expected-error @+1 {{'onnx.Reshape' op shape input must be 1-D}}
  %0 = onnx.Reshape(%x, %s) : (tensor<2x8xf32>, tensor<1x2xi64>) -> tensor<?x?xf32>
  return %0 : tensor<?x?xf32>
}

// -----

// Dims are >= 0, or -1 for "inferred".
func.func @reshape_invalid_dim(%x: tensor<2x8xf32>) -> tensor<?x?xf32> {
  %s = onnx.Constant() {value = dense<[4, -2]> : tensor<2xi64>} : () -> tensor<2xi64>
  // expected-error @+1 {{'onnx.Reshape' op shape has invalid dim -2}}
  %0 = onnx.Reshape(%x, %s) : (tensor<2x8xf32>, tensor<2xi64>) -> tensor<?x?xf32>
  return %0 : tensor<?x?xf32>
}

// -----

// At most one dim can be inferred.
func.func @reshape_two_inferred(%x: tensor<2x8xf32>) -> tensor<?x?xf32> {
  %s = onnx.Constant() {value = dense<[-1, -1]> : tensor<2xi64>} : () -> tensor<2xi64>
  // expected-error @+1 {{'onnx.Reshape' op shape has more than one -1}}
  %0 = onnx.Reshape(%x, %s) : (tensor<2x8xf32>, tensor<2xi64>) -> tensor<?x?xf32>
  return %0 : tensor<?x?xf32>
}

// -----

// With allowzero = 1 a 0 is a real zero-sized dim, so -1 cannot be inferred
// (the ONNX spec forbids the mix).
func.func @reshape_allowzero_mix(%x: tensor<0x8xf32>) -> tensor<?x?xf32> {
  %s = onnx.Constant() {value = dense<[0, -1]> : tensor<2xi64>} : () -> tensor<2xi64>
  // expected-error @+1 {{'onnx.Reshape' op shape mixes -1 with 0 while allowzero = 1}}
  %0 = onnx.Reshape(%x, %s) {allowzero = 1 : i64} : (tensor<0x8xf32>, tensor<2xi64>) -> tensor<?x?xf32>
  return %0 : tensor<?x?xf32>
}

// -----

//===----------------------------------------------------------------------===//
// RotaryEmbedding (opset 23) / ms.RotaryEmbedding
//===----------------------------------------------------------------------===//

// X is [B, S, H*D] or [B, H, S, D].
func.func @rotary_input_rank(%x: tensor<16x64xf32>, %cos: tensor<16x32xf32>,
                             %sin: tensor<16x32xf32>) -> tensor<16x64xf32> {
  %none = onnx.NoValue : none
  // expected-error @+1 {{'onnx.RotaryEmbedding' op input must have rank 3 or 4, got 2}}
  %0 = onnx.RotaryEmbedding(%x, %cos, %sin, %none)
      : (tensor<16x64xf32>, tensor<16x32xf32>, tensor<16x32xf32>, none) -> tensor<16x64xf32>
  return %0 : tensor<16x64xf32>
}

// -----

// A 3-D input packs the heads into the last dim; num_heads says how.
func.func @rotary_3d_without_heads(%x: tensor<2x16x512xf32>, %cos: tensor<2x16x32xf32>,
                                   %sin: tensor<2x16x32xf32>) -> tensor<2x16x512xf32> {
  %none = onnx.NoValue : none
  // expected-error @+1 {{'onnx.RotaryEmbedding' op 3-D input needs num_heads}}
  %0 = onnx.RotaryEmbedding(%x, %cos, %sin, %none)
      : (tensor<2x16x512xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>, none) -> tensor<2x16x512xf32>
  return %0 : tensor<2x16x512xf32>
}

// -----

// interleaved is an ONNX INT used as a bool.
func.func @rotary_interleaved(%x: tensor<2x8x16x64xf32>, %cos: tensor<2x16x32xf32>,
                              %sin: tensor<2x16x32xf32>) -> tensor<2x8x16x64xf32> {
  %none = onnx.NoValue : none
  // expected-error @+1 {{'onnx.RotaryEmbedding' op interleaved must be 0 or 1, got 2}}
  %0 = onnx.RotaryEmbedding(%x, %cos, %sin, %none) {interleaved = 2 : i64}
      : (tensor<2x8x16x64xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>, none) -> tensor<2x8x16x64xf32>
  return %0 : tensor<2x8x16x64xf32>
}

// -----

// Rotation works on pairs of channels: the rotary dim is even.
func.func @rotary_dim_odd(%x: tensor<2x8x16x64xf32>, %cos: tensor<2x16x16xf32>,
                          %sin: tensor<2x16x16xf32>) -> tensor<2x8x16x64xf32> {
  %none = onnx.NoValue : none
  // expected-error @+1 {{'onnx.RotaryEmbedding' op rotary_embedding_dim must be even and >= 0, got 33}}
  %0 = onnx.RotaryEmbedding(%x, %cos, %sin, %none) {rotary_embedding_dim = 33 : i64}
      : (tensor<2x8x16x64xf32>, tensor<2x16x16xf32>, tensor<2x16x16xf32>, none) -> tensor<2x8x16x64xf32>
  return %0 : tensor<2x8x16x64xf32>
}

// -----

// A head count cannot be negative.
func.func @rotary_num_heads_negative(%x: tensor<2x16x512xf32>, %cos: tensor<2x16x32xf32>,
                                     %sin: tensor<2x16x32xf32>) -> tensor<2x16x512xf32> {
  %none = onnx.NoValue : none
  // expected-error @+1 {{'onnx.RotaryEmbedding' op num_heads must be >= 0}}
  %0 = onnx.RotaryEmbedding(%x, %cos, %sin, %none) {num_heads = -8 : i64}
      : (tensor<2x16x512xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>, none) -> tensor<2x16x512xf32>
  return %0 : tensor<2x16x512xf32>
}

// -----

// The com.microsoft variant shares the attribute checks; interleaved is a
// bool there too.
func.func @ms_rotary_interleaved(%x: tensor<2x16x512xf16>, %pos: tensor<2x16xi64>,
                                 %cos: tensor<128x32xf16>, %sin: tensor<128x32xf16>)
    -> tensor<2x16x512xf16> {
  // expected-error @+1 {{'onnx.ms.RotaryEmbedding' op interleaved must be 0 or 1, got 2}}
  %0 = onnx.ms.RotaryEmbedding(%x, %pos, %cos, %sin) {interleaved = 2 : i64, num_heads = 8 : i64}
      : (tensor<2x16x512xf16>, tensor<2x16xi64>, tensor<128x32xf16>, tensor<128x32xf16>) -> tensor<2x16x512xf16>
  return %0 : tensor<2x16x512xf16>
}

// -----

// ms.RotaryEmbedding's rotary dim is even and non-negative as well.
func.func @ms_rotary_dim_negative(%x: tensor<2x16x512xf16>, %pos: tensor<2x16xi64>,
                                  %cos: tensor<128x32xf16>, %sin: tensor<128x32xf16>)
    -> tensor<2x16x512xf16> {
  // expected-error @+1 {{'onnx.ms.RotaryEmbedding' op rotary_embedding_dim must be even and >= 0, got -2}}
  %0 = onnx.ms.RotaryEmbedding(%x, %pos, %cos, %sin) {num_heads = 8 : i64, rotary_embedding_dim = -2 : i64}
      : (tensor<2x16x512xf16>, tensor<2x16xi64>, tensor<128x32xf16>, tensor<128x32xf16>) -> tensor<2x16x512xf16>
  return %0 : tensor<2x16x512xf16>
}

// -----

//===----------------------------------------------------------------------===//
// Split
//===----------------------------------------------------------------------===//

// The split axis must name a dim of the input.
func.func @split_axis(%x: tensor<4x6xf32>) -> (tensor<4x3xf32>, tensor<4x3xf32>) {
  %none = onnx.NoValue : none
  // expected-error @+1 {{'onnx.Split' op axis 2 is out of range [-2, 1] for rank 2}}
  %0:2 = onnx.Split(%x, %none) {axis = 2 : i64, num_outputs = 2 : i64}
      : (tensor<4x6xf32>, none) -> (tensor<4x3xf32>, tensor<4x3xf32>)
  return %0#0, %0#1 : tensor<4x3xf32>, tensor<4x3xf32>
}

// -----

// The spec allows the split sizes or num_outputs, never both.
func.func @split_both(%x: tensor<4x6xf32>) -> (tensor<4x3xf32>, tensor<4x3xf32>) {
  %s = onnx.Constant() {value = dense<[3, 3]> : tensor<2xi64>} : () -> tensor<2xi64>
  // expected-error @+1 {{'onnx.Split' op takes either a split input or num_outputs, not both}}
  %0:2 = onnx.Split(%x, %s) {axis = 1 : i64, num_outputs = 2 : i64}
      : (tensor<4x6xf32>, tensor<2xi64>) -> (tensor<4x3xf32>, tensor<4x3xf32>)
  return %0#0, %0#1 : tensor<4x3xf32>, tensor<4x3xf32>
}

// -----

// num_outputs is the number of results.
func.func @split_num_outputs(%x: tensor<4x6xf32>) -> (tensor<4x3xf32>, tensor<4x3xf32>) {
  %none = onnx.NoValue : none
  // expected-error @+1 {{'onnx.Split' op num_outputs 3 but the op has 2 results}}
  %0:2 = onnx.Split(%x, %none) {axis = 1 : i64, num_outputs = 3 : i64}
      : (tensor<4x6xf32>, none) -> (tensor<4x3xf32>, tensor<4x3xf32>)
  return %0#0, %0#1 : tensor<4x3xf32>, tensor<4x3xf32>
}

// -----

// One constant split size per result.
func.func @split_size_count(%x: tensor<4x6xf32>) -> (tensor<4x3xf32>, tensor<4x3xf32>) {
  %s = onnx.Constant() {value = dense<[2, 2, 2]> : tensor<3xi64>} : () -> tensor<3xi64>
  // expected-error @+1 {{'onnx.Split' op split has 3 sizes for 2 outputs}}
  %0:2 = onnx.Split(%x, %s) {axis = 1 : i64}
      : (tensor<4x6xf32>, tensor<3xi64>) -> (tensor<4x3xf32>, tensor<4x3xf32>)
  return %0#0, %0#1 : tensor<4x3xf32>, tensor<4x3xf32>
}

// -----

// Split sizes are lengths: never negative.
func.func @split_size_negative(%x: tensor<4x6xf32>) -> (tensor<4x?xf32>, tensor<4x?xf32>) {
  %s = onnx.Constant() {value = dense<[8, -2]> : tensor<2xi64>} : () -> tensor<2xi64>
  // expected-error @+1 {{'onnx.Split' op split size -2 is negative}}
  %0:2 = onnx.Split(%x, %s) {axis = 1 : i64}
      : (tensor<4x6xf32>, tensor<2xi64>) -> (tensor<4x?xf32>, tensor<4x?xf32>)
  return %0#0, %0#1 : tensor<4x?xf32>, tensor<4x?xf32>
}

// -----

// The sizes cover the split dim exactly.
func.func @split_size_sum(%x: tensor<4x6xf32>) -> (tensor<4x3xf32>, tensor<4x2xf32>) {
  %s = onnx.Constant() {value = dense<[3, 2]> : tensor<2xi64>} : () -> tensor<2xi64>
  // expected-error @+1 {{'onnx.Split' op split sizes sum to 5 but dim 1 is 6}}
  %0:2 = onnx.Split(%x, %s) {axis = -1 : i64}
      : (tensor<4x6xf32>, tensor<2xi64>) -> (tensor<4x3xf32>, tensor<4x2xf32>)
  return %0#0, %0#1 : tensor<4x3xf32>, tensor<4x2xf32>
}

// -----

//===----------------------------------------------------------------------===//
// Squeeze / Unsqueeze
//===----------------------------------------------------------------------===//

// Squeezed axes must name dims of the input.
func.func @squeeze_axis(%x: tensor<1x8x1xf32>) -> tensor<8xf32> {
  %axes = onnx.Constant() {value = dense<[0, 3]> : tensor<2xi64>} : () -> tensor<2xi64>
  // expected-error @+1 {{'onnx.Squeeze' op axis 3 is out of range [-3, 2] for rank 3}}
  %0 = onnx.Squeeze(%x, %axes) : (tensor<1x8x1xf32>, tensor<2xi64>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

// An axis listed twice (here as 2 and -1 of a rank-3 input) is an error.
func.func @squeeze_axis_twice(%x: tensor<1x8x1xf32>) -> tensor<1x8xf32> {
  %axes = onnx.Constant() {value = dense<[2, -1]> : tensor<2xi64>} : () -> tensor<2xi64>
  // expected-error @+1 {{'onnx.Squeeze' op axis -1 appears twice}}
  %0 = onnx.Squeeze(%x, %axes) : (tensor<1x8x1xf32>, tensor<2xi64>) -> tensor<1x8xf32>
  return %0 : tensor<1x8xf32>
}

// -----

// Unsqueeze axes index the output, whose rank is rank(x) + len(axes).
func.func @unsqueeze_axis(%x: tensor<8xf32>) -> tensor<1x8x1xf32> {
  %axes = onnx.Constant() {value = dense<[0, 3]> : tensor<2xi64>} : () -> tensor<2xi64>
  // expected-error @+1 {{'onnx.Unsqueeze' op axis 3 is out of range [-3, 2] for rank 3}}
  %0 = onnx.Unsqueeze(%x, %axes) : (tensor<8xf32>, tensor<2xi64>) -> tensor<1x8x1xf32>
  return %0 : tensor<1x8x1xf32>
}

// -----

// Each output axis is inserted once.
func.func @unsqueeze_axis_twice(%x: tensor<8xf32>) -> tensor<1x1x8xf32> {
  %axes = onnx.Constant() {value = dense<[0, -3]> : tensor<2xi64>} : () -> tensor<2xi64>
  // expected-error @+1 {{'onnx.Unsqueeze' op axis -3 appears twice}}
  %0 = onnx.Unsqueeze(%x, %axes) : (tensor<8xf32>, tensor<2xi64>) -> tensor<1x1x8xf32>
  return %0 : tensor<1x1x8xf32>
}

// -----

//===----------------------------------------------------------------------===//
// TopK
//===----------------------------------------------------------------------===//

// largest is an ONNX INT used as a bool.
func.func @topk_largest(%x: tensor<2x16xf32>, %k: tensor<1xi64>) -> (tensor<2x?xf32>, tensor<2x?xi64>) {
  // expected-error @+1 {{'onnx.TopK' op largest must be 0 or 1, got 2}}
  %v, %i = onnx.TopK(%x, %k) {largest = 2 : i64}
      : (tensor<2x16xf32>, tensor<1xi64>) -> (tensor<2x?xf32>, tensor<2x?xi64>)
  return %v, %i : tensor<2x?xf32>, tensor<2x?xi64>
}

// -----

// sorted is an ONNX INT used as a bool.
func.func @topk_sorted(%x: tensor<2x16xf32>, %k: tensor<1xi64>) -> (tensor<2x?xf32>, tensor<2x?xi64>) {
  // expected-error @+1 {{'onnx.TopK' op sorted must be 0 or 1, got 5}}
  %v, %i = onnx.TopK(%x, %k) {sorted = 5 : i64}
      : (tensor<2x16xf32>, tensor<1xi64>) -> (tensor<2x?xf32>, tensor<2x?xi64>)
  return %v, %i : tensor<2x?xf32>, tensor<2x?xi64>
}

// -----

// K is a one-element tensor.
func.func @topk_k_count(%x: tensor<2x16xf32>) -> (tensor<2x?xf32>, tensor<2x?xi64>) {
  %k = onnx.Constant() {value = dense<[3, 4]> : tensor<2xi64>} : () -> tensor<2xi64>
  // expected-error @+1 {{'onnx.TopK' op K must hold one value}}
  %v, %i = onnx.TopK(%x, %k)
      : (tensor<2x16xf32>, tensor<2xi64>) -> (tensor<2x?xf32>, tensor<2x?xi64>)
  return %v, %i : tensor<2x?xf32>, tensor<2x?xi64>
}

// -----

// K is a count of elements: never negative.
func.func @topk_k_negative(%x: tensor<2x16xf32>) -> (tensor<2x?xf32>, tensor<2x?xi64>) {
  %k = onnx.Constant() {value = dense<-1> : tensor<1xi64>} : () -> tensor<1xi64>
  // expected-error @+1 {{'onnx.TopK' op K must be >= 0, got -1}}
  %v, %i = onnx.TopK(%x, %k)
      : (tensor<2x16xf32>, tensor<1xi64>) -> (tensor<2x?xf32>, tensor<2x?xi64>)
  return %v, %i : tensor<2x?xf32>, tensor<2x?xi64>
}

// -----

// The TopK axis must name a dim of the input.
func.func @topk_axis(%x: tensor<2x16xf32>, %k: tensor<1xi64>) -> (tensor<2x?xf32>, tensor<2x?xi64>) {
  // expected-error @+1 {{'onnx.TopK' op axis 2 is out of range [-2, 1] for rank 2}}
  %v, %i = onnx.TopK(%x, %k) {axis = 2 : i64}
      : (tensor<2x16xf32>, tensor<1xi64>) -> (tensor<2x?xf32>, tensor<2x?xi64>)
  return %v, %i : tensor<2x?xf32>, tensor<2x?xi64>
}

// -----

//===----------------------------------------------------------------------===//
// Transpose / Trilu
//===----------------------------------------------------------------------===//

// perm has one entry per input dim.
func.func @transpose_perm_size(%x: tensor<2x3x4xf32>) -> tensor<3x2xf32> {
  // expected-error @+1 {{'onnx.Transpose' op perm has 2 entries for rank 3}}
  %0 = onnx.Transpose(%x) {perm = [1, 0]} : (tensor<2x3x4xf32>) -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}

// -----

// perm names every dim exactly once.
func.func @transpose_not_permutation(%x: tensor<2x3x4xf32>) -> tensor<3x3x4xf32> {
  // expected-error @+1 {{'onnx.Transpose' op perm is not a permutation of [0, rank)}}
  %0 = onnx.Transpose(%x) {perm = [1, 1, 2]} : (tensor<2x3x4xf32>) -> tensor<3x3x4xf32>
  return %0 : tensor<3x3x4xf32>
}

// -----

// upper is an ONNX INT used as a bool.
func.func @trilu_upper(%x: tensor<16x16xf32>) -> tensor<16x16xf32> {
  %none = onnx.NoValue : none
  // expected-error @+1 {{'onnx.Trilu' op upper must be 0 or 1, got 2}}
  %0 = onnx.Trilu(%x, %none) {upper = 2 : i64} : (tensor<16x16xf32>, none) -> tensor<16x16xf32>
  return %0 : tensor<16x16xf32>
}

// -----

// Trilu works on the last two dims (matrices).
func.func @trilu_rank(%x: tensor<16xf32>) -> tensor<16xf32> {
  %none = onnx.NoValue : none
  // expected-error @+1 {{'onnx.Trilu' op input must have rank >= 2, got 1}}
  %0 = onnx.Trilu(%x, %none) : (tensor<16xf32>, none) -> tensor<16xf32>
  return %0 : tensor<16xf32>
}

// -----

//===----------------------------------------------------------------------===//
// ms.GroupQueryAttention
//===----------------------------------------------------------------------===//

// Head counts must be positive.
func.func @ms_gqa_zero_heads(%q: tensor<1x16x512xf16>, %k: tensor<1x16x128xf16>,
                             %v: tensor<1x16x128xf16>, %pk: tensor<1x2x64x64xf16>,
                             %pv: tensor<1x2x64x64xf16>, %seqlens: tensor<1xi32>,
                             %total: tensor<i32>) -> tensor<1x16x512xf16> {
  %none = onnx.NoValue : none
  // expected-error @+1 {{'onnx.ms.GroupQueryAttention' op num_heads and kv_num_heads must be positive}}
  %out, %present_k, %present_v, %qk = onnx.ms.GroupQueryAttention(
      %q, %k, %v, %pk, %pv, %seqlens, %total, %none, %none, %none, %none, %none,
      %none, %none, %none, %none, %none)
      {kv_num_heads = 0 : i64, num_heads = 8 : i64}
      : (tensor<1x16x512xf16>, tensor<1x16x128xf16>, tensor<1x16x128xf16>,
         tensor<1x2x64x64xf16>, tensor<1x2x64x64xf16>, tensor<1xi32>, tensor<i32>,
         none, none, none, none, none, none, none, none, none, none)
      -> (tensor<1x16x512xf16>, tensor<1x2x64x64xf16>, tensor<1x2x64x64xf16>, none)
  return %out : tensor<1x16x512xf16>
}

// -----

// Each KV head is shared by a whole number of query heads.
func.func @ms_gqa_heads_not_multiple(%q: tensor<1x16x384xf16>, %k: tensor<1x16x256xf16>,
                                     %v: tensor<1x16x256xf16>, %pk: tensor<1x4x64x64xf16>,
                                     %pv: tensor<1x4x64x64xf16>, %seqlens: tensor<1xi32>,
                                     %total: tensor<i32>) -> tensor<1x16x384xf16> {
  %none = onnx.NoValue : none
  // expected-error @+1 {{'onnx.ms.GroupQueryAttention' op num_heads 6 is not a multiple of kv_num_heads 4}}
  %out, %present_k, %present_v, %qk = onnx.ms.GroupQueryAttention(
      %q, %k, %v, %pk, %pv, %seqlens, %total, %none, %none, %none, %none, %none,
      %none, %none, %none, %none, %none)
      {kv_num_heads = 4 : i64, num_heads = 6 : i64}
      : (tensor<1x16x384xf16>, tensor<1x16x256xf16>, tensor<1x16x256xf16>,
         tensor<1x4x64x64xf16>, tensor<1x4x64x64xf16>, tensor<1xi32>, tensor<i32>,
         none, none, none, none, none, none, none, none, none, none)
      -> (tensor<1x16x384xf16>, tensor<1x4x64x64xf16>, tensor<1x4x64x64xf16>, none)
  return %out : tensor<1x16x384xf16>
}

// -----

//===----------------------------------------------------------------------===//
// ms.MatMulNBits
//===----------------------------------------------------------------------===//

// Only 2-, 4- and 8-bit packings exist.
func.func @ms_matmul_nbits_bits(%a: tensor<2x256xf16>, %b: tensor<512x8x12xui8>,
                                %s: tensor<4096xf16>) -> tensor<2x512xf16> {
  %none = onnx.NoValue : none
  // expected-error @+1 {{'onnx.ms.MatMulNBits' op bits must be 2, 4 or 8, got 3}}
  %0 = onnx.ms.MatMulNBits(%a, %b, %s, %none, %none, %none)
      {K = 256 : i64, N = 512 : i64, bits = 3 : i64, block_size = 32 : i64}
      : (tensor<2x256xf16>, tensor<512x8x12xui8>, tensor<4096xf16>, none, none, none) -> tensor<2x512xf16>
  return %0 : tensor<2x512xf16>
}

// -----

// Blocks are powers of two of at least 16 elements.
func.func @ms_matmul_nbits_block_size(%a: tensor<2x240xf16>, %b: tensor<512x10x12xui8>,
                                      %s: tensor<5120xf16>) -> tensor<2x512xf16> {
  %none = onnx.NoValue : none
  // expected-error @+1 {{'onnx.ms.MatMulNBits' op block_size must be a power of 2 >= 16, got 24}}
  %0 = onnx.ms.MatMulNBits(%a, %b, %s, %none, %none, %none)
      {K = 240 : i64, N = 512 : i64, block_size = 24 : i64}
      : (tensor<2x240xf16>, tensor<512x10x12xui8>, tensor<5120xf16>, none, none, none) -> tensor<2x512xf16>
  return %0 : tensor<2x512xf16>
}

// -----

// The matrix dims K and N are positive.
func.func @ms_matmul_nbits_k_n(%a: tensor<2x256xf16>, %b: tensor<512x8x16xui8>,
                               %s: tensor<4096xf16>) -> tensor<2x512xf16> {
  %none = onnx.NoValue : none
  // expected-error @+1 {{'onnx.ms.MatMulNBits' op K and N must be positive, got K=0 N=512}}
  %0 = onnx.ms.MatMulNBits(%a, %b, %s, %none, %none, %none)
      {K = 0 : i64, N = 512 : i64, block_size = 32 : i64}
      : (tensor<2x256xf16>, tensor<512x8x16xui8>, tensor<4096xf16>, none, none, none) -> tensor<2x512xf16>
  return %0 : tensor<2x512xf16>
}

// -----

// K = 250 is ceil(250 / 32) = 8 blocks, the last one partial: B needs 8.
func.func @ms_matmul_nbits_k_blocks(%a: tensor<2x250xf16>, %b: tensor<512x7x16xui8>,
                                    %s: tensor<3584xf16>) -> tensor<2x512xf16> {
  %none = onnx.NoValue : none
  // expected-error @+1 {{'onnx.ms.MatMulNBits' op packed weight B has type 'tensor<512x7x16xui8>', expected [512, 8, 16]}}
  %0 = onnx.ms.MatMulNBits(%a, %b, %s, %none, %none, %none)
      {K = 250 : i64, N = 512 : i64, block_size = 32 : i64}
      : (tensor<2x250xf16>, tensor<512x7x16xui8>, tensor<3584xf16>, none, none, none) -> tensor<2x512xf16>
  return %0 : tensor<2x512xf16>
}

// -----

// B is packed [N, K/block_size, block_size*bits/8] (or that flattened to 2-D).
func.func @ms_matmul_nbits_packed_b(%a: tensor<2x256xf16>, %b: tensor<512x8x32xui8>,
                                    %s: tensor<4096xf16>) -> tensor<2x512xf16> {
  %none = onnx.NoValue : none
  // expected-error @+1 {{'onnx.ms.MatMulNBits' op packed weight B has type 'tensor<512x8x32xui8>', expected [512, 8, 16]}}
  %0 = onnx.ms.MatMulNBits(%a, %b, %s, %none, %none, %none)
      {K = 256 : i64, N = 512 : i64, block_size = 32 : i64}
      : (tensor<2x256xf16>, tensor<512x8x32xui8>, tensor<4096xf16>, none, none, none) -> tensor<2x512xf16>
  return %0 : tensor<2x512xf16>
}

// -----

// A's last dim is the contraction dim K.
func.func @ms_matmul_nbits_a_dim(%a: tensor<2x128xf16>, %b: tensor<512x8x16xui8>,
                                 %s: tensor<4096xf16>) -> tensor<2x512xf16> {
  %none = onnx.NoValue : none
  // expected-error @+1 {{'onnx.ms.MatMulNBits' op A's last dim 128 differs from K=256}}
  %0 = onnx.ms.MatMulNBits(%a, %b, %s, %none, %none, %none)
      {K = 256 : i64, N = 512 : i64, block_size = 32 : i64}
      : (tensor<2x128xf16>, tensor<512x8x16xui8>, tensor<4096xf16>, none, none, none) -> tensor<2x512xf16>
  return %0 : tensor<2x512xf16>
}
