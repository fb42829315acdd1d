// RUN: xfmr-opt %s --convert-xfmr-to-linalg --split-input-file | FileCheck %s

// Lowering of xfmr.linear, xfmr.gated_mlp and xfmr.embedding. Projections
// collapse the input into rows [M, K] and multiply over loops (m, k, n) with
// k the reduction, so the weights stream along n.

// f16 with a bias: f32 accumulation, then one generic adds the bias and
// rounds to f16; the rows are expanded back to [2, 16, 128].
// CHECK-LABEL: func.func @linear_bias(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<2x16x64xf16>, %[[W:[a-z0-9]+]]: tensor<64x128xf16>, %[[B:[a-z0-9]+]]: tensor<128xf16>
// CHECK: %[[ROWS:.*]] = tensor.collapse_shape %[[X]] {{\[\[}}0, 1], [2]] : tensor<2x16x64xf16> into tensor<32x64xf16>
// CHECK: %[[INIT:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<32x128xf32>)
// CHECK: %[[MM:.*]] = linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "reduction", "parallel"]
// CHECK-SAME: ins(%[[ROWS]], %[[W]] : tensor<32x64xf16>, tensor<64x128xf16>) outs(%[[INIT]] : tensor<32x128xf32>)
// CHECK: arith.extf %{{.*}} : f16 to f32
// CHECK: arith.mulf {{.*}} fastmath<reassoc,contract>
// CHECK: arith.addf {{.*}} fastmath<reassoc,contract>
// CHECK: %[[OUT:.*]] = linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel"]
// CHECK-SAME: ins(%[[MM]], %[[B]] : tensor<32x128xf32>, tensor<128xf16>)
// CHECK: arith.truncf %{{.*}} : f32 to f16
// CHECK: %[[Y:.*]] = tensor.expand_shape %[[OUT]] {{\[\[}}0, 1], [2]] output_shape [2, 16, 128] : tensor<32x128xf16> into tensor<2x16x128xf16>
// CHECK: return %[[Y]]
func.func @linear_bias(%x: tensor<2x16x64xf16>, %w: tensor<64x128xf16>, %b: tensor<128xf16>)
    -> tensor<2x16x128xf16> {
  %y = xfmr.linear %x, %w, %b
      : tensor<2x16x64xf16>, tensor<64x128xf16>, tensor<128xf16>
      -> tensor<2x16x128xf16>
  return %y : tensor<2x16x128xf16>
}

// -----

// int8 weights on f32 rows: sitofp in the contraction; no reshape and no
// epilogue generic (f32 accumulates in place, no bias).
// CHECK-LABEL: func.func @linear_int8(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<4x64xf32>, %[[W:[a-z0-9]+]]: tensor<64x128xi8>
// CHECK-NOT: tensor.collapse_shape
// CHECK: %[[Y:.*]] = linalg.generic
// CHECK-SAME: ins(%[[X]], %[[W]] : tensor<4x64xf32>, tensor<64x128xi8>)
// CHECK: arith.sitofp %{{.*}} : i8 to f32
// CHECK-NOT: linalg.generic
// CHECK: return %[[Y]]
func.func @linear_int8(%x: tensor<4x64xf32>, %w: tensor<64x128xi8>) -> tensor<4x128xf32> {
  %y = xfmr.linear %x, %w : tensor<4x64xf32>, tensor<64x128xi8> -> tensor<4x128xf32>
  return %y : tensor<4x128xf32>
}

// -----

// A !quant.uniform weight: the product on its storage (a weight known only at
// run time: the sitofp contraction), then one multiply by the per-channel
// scales, then the bias.
// CHECK-LABEL: func.func @linear_quant(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<4x64xf32>, %[[C:[a-z0-9]+]]: tensor<64x2xi8>
// CHECK: %[[S:.*]] = arith.constant dense_resource<xfmr_weight_scales> : tensor<2xf32>
// CHECK: %[[P:.*]] = linalg.generic
// CHECK-SAME: ins(%[[X]], %[[C]] : tensor<4x64xf32>, tensor<64x2xi8>)
// CHECK: arith.sitofp %{{.*}} : i8 to f32
// CHECK: %[[Q:.*]] = linalg.generic {{.*}} ins(%[[P]], %[[S]] : tensor<4x2xf32>, tensor<2xf32>)
// CHECK: arith.mulf
// CHECK: linalg.generic {{.*}} ins(%[[Q]], %{{.*}} : tensor<4x2xf32>, tensor<2xf32>)
// CHECK: arith.addf
// CHECK: xfmr_weight_scales: "0x400000000000003F0000803E"
func.func @linear_quant(%x: tensor<4x64xf32>, %c: tensor<64x2xi8>, %b: tensor<2xf32>) -> tensor<4x2xf32> {
  %w = quant.scast %c : tensor<64x2xi8> to tensor<64x2x!quant.uniform<i8:f32:1, {0.5, 0.25}>>
  %y = xfmr.linear %x, %w, %b : tensor<4x64xf32>, tensor<64x2x!quant.uniform<i8:f32:1, {0.5, 0.25}>>, tensor<2xf32> -> tensor<4x2xf32>
  return %y : tensor<4x2xf32>
}

// -----

// A constant quantized weight with int8_activations: A's rows quantized to
// int8 (one block spanning K), then the 8-bit micro-kernel on panels packed
// at compile time with the scales; no scale multiply after it.
// CHECK-LABEL: func.func @linear_int8_activations(
// CHECK: call @xfmr_uk_quantize_rows(
// CHECK: call @xfmr_uk_matmul_q8q8(
// CHECK-NOT: arith.mulf
// CHECK: return
func.func @linear_int8_activations(%x: tensor<?x4xf32>) -> tensor<?x16xf32> {
  %c = arith.constant dense<[[-3, -2, -1, 0, 1, 2, 3, -3, -2, -1, 0, 1, 2, 3, -3, -2], [-1, 0, 1, 2, 3, -3, -2, -1, 0, 1, 2, 3, -3, -2, -1, 0], [1, 2, 3, -3, -2, -1, 0, 1, 2, 3, -3, -2, -1, 0, 1, 2], [3, -3, -2, -1, 0, 1, 2, 3, -3, -2, -1, 0, 1, 2, 3, -3]]> : tensor<4x16xi8>
  %w = quant.scast %c : tensor<4x16xi8> to tensor<4x16x!quant.uniform<i8<-127:127>:f32, 0.5>>
  %y = xfmr.linear %x, %w {int8_activations} : tensor<?x4xf32>, tensor<4x16x!quant.uniform<i8<-127:127>:f32, 0.5>> -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

// Two products on one input, each handing a micro-kernel a copy of the
// rows: the second reads the first's copy (mergeKernelInputs), which
// nothing writes after it; the epilogue after the first call gets its own
// tensor.empty, never the copy's buffer (that clobbered the copy of A the
// next call read, when both were tensor.empty and CSE merged them).
// CHECK-LABEL: func.func @shared_kernel_input(
// CHECK: %[[INIT:.*]] = bufferization.alloc_tensor
// CHECK: %[[COPY:.*]] = linalg.copy {xfmr.kernel_input} ins(%{{.*}} : tensor<?x2xf32>) outs(%[[INIT]]
// CHECK: %[[BUF:.*]] = bufferization.to_buffer %[[COPY]] read_only
// CHECK: memref.extract_aligned_pointer_as_index %[[BUF]]
// CHECK: call @xfmr_uk_matmul_f32bf16(
// CHECK-NOT: linalg.copy
// CHECK: memref.extract_aligned_pointer_as_index %[[BUF]]
// CHECK: call @xfmr_uk_matmul_f32bf16(
func.func @shared_kernel_input(%x: tensor<?x?x2xf32>, %b: tensor<16xf32>) -> (tensor<?x?x16xf32>, tensor<?x?x16xf32>) {
  %w = arith.constant dense<[[-2.0, -1.0, 0.0, 1.0, 2.0, -2.0, -1.0, 0.0, 1.0, 2.0, -2.0, -1.0, 0.0, 1.0, 2.0, -2.0], [-1.0, 0.0, 1.0, 2.0, -2.0, -1.0, 0.0, 1.0, 2.0, -2.0, -1.0, 0.0, 1.0, 2.0, -2.0, -1.0]]> : tensor<2x16xbf16>
  %y = xfmr.linear %x, %w, %b : tensor<?x?x2xf32>, tensor<2x16xbf16>, tensor<16xf32> -> tensor<?x?x16xf32>
  %z = xfmr.linear %x, %w : tensor<?x?x2xf32>, tensor<2x16xbf16> -> tensor<?x?x16xf32>
  return %y, %z : tensor<?x?x16xf32>, tensor<?x?x16xf32>
}

// -----

// Dynamic leading dims and N: the rows collapse to [?, 64] and expand back
// with sizes from tensor.dim; bf16 weights widen to the f32 input type.
// CHECK-LABEL: func.func @linear_dynamic(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<?x?x64xf32>, %[[W:[a-z0-9]+]]: tensor<64x?xbf16>
// CHECK: %[[ROWS:.*]] = tensor.collapse_shape %[[X]] {{\[\[}}0, 1], [2]] : tensor<?x?x64xf32> into tensor<?x64xf32>
// CHECK: tensor.empty(%{{.*}}, %{{.*}}) : tensor<?x?xf32>
// CHECK: %[[MM:.*]] = linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "reduction", "parallel"]
// CHECK-SAME: ins(%[[ROWS]], %[[W]] : tensor<?x64xf32>, tensor<64x?xbf16>)
// CHECK: arith.extf %{{.*}} : bf16 to f32
// Two dynamic leading dims: a reshape through a shape tensor (expand_shape
// with two dynamic dims in one group crashes expand-strided-metadata).
// CHECK: %[[D0:.*]] = tensor.dim %[[X]], %{{.*}} : tensor<?x?x64xf32>
// CHECK: %[[D1:.*]] = tensor.dim %[[X]], %{{.*}} : tensor<?x?x64xf32>
// CHECK: %[[N:.*]] = tensor.dim %[[MM]], %{{.*}} : tensor<?x?xf32>
// CHECK: %[[SHAPE:.*]] = tensor.from_elements
// CHECK: tensor.reshape %[[MM]](%[[SHAPE]]) : (tensor<?x?xf32>, tensor<3xi64>) -> tensor<?x?x?xf32>
func.func @linear_dynamic(%x: tensor<?x?x64xf32>, %w: tensor<64x?xbf16>) -> tensor<?x?x?xf32> {
  %y = xfmr.linear %x, %w : tensor<?x?x64xf32>, tensor<64x?xbf16> -> tensor<?x?x?xf32>
  return %y : tensor<?x?x?xf32>
}

// -----

// A single token as a vector: expanded to one row and collapsed back.
// CHECK-LABEL: func.func @linear_vector(
// CHECK: tensor.expand_shape %{{.*}} {{\[\[}}0, 1]] output_shape [1, 64] : tensor<64xf32> into tensor<1x64xf32>
// CHECK: linalg.generic
// CHECK: tensor.collapse_shape %{{.*}} {{\[\[}}0, 1]] : tensor<1x128xf32> into tensor<128xf32>
func.func @linear_vector(%x: tensor<64xf32>, %w: tensor<64x128xf32>) -> tensor<128xf32> {
  %y = xfmr.linear %x, %w : tensor<64xf32>, tensor<64x128xf32> -> tensor<128xf32>
  return %y : tensor<128xf32>
}

// -----

// SwiGLU in f32: gate and up contractions, silu(gate) * up elementwise as
// gate / (1 + exp(-gate)) * up, then the down contraction; no rounding.
// CHECK-LABEL: func.func @gated_mlp_silu(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<2x16x64xf32>, %[[WG:[a-z0-9]+]]: tensor<64x256xf32>, %[[WU:[a-z0-9]+]]: tensor<64x256xf32>, %[[WD:[a-z0-9]+]]: tensor<256x64xf32>
// CHECK: %[[ROWS:.*]] = tensor.collapse_shape %[[X]]
// CHECK: %[[G:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "reduction", "parallel"]
// CHECK-SAME: ins(%[[ROWS]], %[[WG]] :
// CHECK: %[[U:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "reduction", "parallel"]
// CHECK-SAME: ins(%[[ROWS]], %[[WU]] :
// CHECK: %[[H:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel"]
// CHECK-SAME: ins(%[[G]], %[[U]] : tensor<32x256xf32>, tensor<32x256xf32>)
// CHECK: arith.negf
// CHECK: math.exp
// CHECK: arith.addf
// CHECK: arith.divf
// CHECK: arith.mulf
// CHECK: %[[D:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "reduction", "parallel"]
// CHECK-SAME: ins(%[[H]], %[[WD]] : tensor<32x256xf32>, tensor<256x64xf32>)
// CHECK-NOT: linalg.generic
// CHECK: tensor.expand_shape %[[D]]
func.func @gated_mlp_silu(%x: tensor<2x16x64xf32>, %wg: tensor<64x256xf32>,
                          %wu: tensor<64x256xf32>, %wd: tensor<256x64xf32>)
    -> tensor<2x16x64xf32> {
  %y = xfmr.gated_mlp silu %x, %wg, %wu, %wd
      : tensor<2x16x64xf32>, tensor<64x256xf32>, tensor<64x256xf32>,
        tensor<256x64xf32>
  return %y : tensor<2x16x64xf32>
}

// -----

// Exact GELU on dynamic bf16 rows: the hidden activations stay in f32 and
// the down projection's result is rounded to bf16 in a last generic.
// CHECK-LABEL: func.func @gated_mlp_gelu_dynamic(
// CHECK: tensor.collapse_shape %{{.*}} : tensor<?x?x64xbf16> into tensor<?x64xbf16>
// CHECK: math.erf
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "reduction", "parallel"]
// CHECK-SAME: ins(%{{.*}}, %{{.*}} : tensor<?x128xf32>, tensor<128x64xbf16>)
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel"]
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK: tensor.reshape %{{.*}} : (tensor<?x64xbf16>, tensor<3xi64>) -> tensor<?x?x64xbf16>
func.func @gated_mlp_gelu_dynamic(%x: tensor<?x?x64xbf16>, %wg: tensor<64x128xbf16>,
                                  %wu: tensor<64x128xbf16>, %wd: tensor<128x64xbf16>)
    -> tensor<?x?x64xbf16> {
  %y = xfmr.gated_mlp gelu %x, %wg, %wu, %wd
      : tensor<?x?x64xbf16>, tensor<64x128xbf16>, tensor<64x128xbf16>,
        tensor<128x64xbf16>
  return %y : tensor<?x?x64xbf16>
}

// -----

// The other activations: tanh GELU and ReLU.
// CHECK-LABEL: func.func @gated_mlp_gelu_tanh(
// CHECK: math.tanh
// CHECK-LABEL: func.func @gated_mlp_relu(
// CHECK: arith.maximumf
func.func @gated_mlp_gelu_tanh(%x: tensor<4x64xf32>, %wg: tensor<64x128xf32>,
                               %wu: tensor<64x128xf32>, %wd: tensor<128x64xf32>)
    -> tensor<4x64xf32> {
  %y = xfmr.gated_mlp gelu_tanh %x, %wg, %wu, %wd
      : tensor<4x64xf32>, tensor<64x128xf32>, tensor<64x128xf32>, tensor<128x64xf32>
  return %y : tensor<4x64xf32>
}
func.func @gated_mlp_relu(%x: tensor<4x64xf32>, %wg: tensor<64x128xf32>,
                          %wu: tensor<64x128xf32>, %wd: tensor<128x64xf32>)
    -> tensor<4x64xf32> {
  %y = xfmr.gated_mlp relu %x, %wg, %wu, %wd
      : tensor<4x64xf32>, tensor<64x128xf32>, tensor<64x128xf32>, tensor<128x64xf32>
  return %y : tensor<4x64xf32>
}

// -----

// Embedding: one generic over the result reading the ids; the row index is
// the id (negative ids count from the end, as in Gather) checked against the
// table and clamped to 0 when the check fails, the column the generic's last
// loop.
// CHECK-LABEL: func.func @embedding(
// CHECK-SAME: %[[T:[a-z0-9]+]]: tensor<32000x64xf16>, %[[IDS:[a-z0-9]+]]: tensor<2x16xi64>
// CHECK: %[[Y:.*]] = linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel", "parallel"]
// CHECK-SAME: ins(%[[IDS]] : tensor<2x16xi64>) outs(%{{.*}} : tensor<2x16x64xf16>)
// CHECK: %[[ID:.*]] = arith.index_cast %{{.*}} : i64 to index
// CHECK: %[[OK:.*]] = arith.andi
// CHECK: cf.assert %[[OK]], "xfmr.embedding: token id: index out of range at loc(
// CHECK: %[[ROW:.*]] = arith.select %[[OK]], %{{.*}}, %c0 : index
// CHECK: %[[COL:.*]] = linalg.index 2 : index
// CHECK: tensor.extract %[[T]][%[[ROW]], %[[COL]]] : tensor<32000x64xf16>
// CHECK: return %[[Y]]
func.func @embedding(%table: tensor<32000x64xf16>, %ids: tensor<2x16xi64>)
    -> tensor<2x16x64xf16> {
  %h = xfmr.embedding %table, %ids : tensor<32000x64xf16>, tensor<2x16xi64> -> tensor<2x16x64xf16>
  return %h : tensor<2x16x64xf16>
}

// -----

// Dynamic ids and table: sizes from tensor.dim of both.
// CHECK-LABEL: func.func @embedding_dynamic(
// CHECK-SAME: %[[T:[a-z0-9]+]]: tensor<?x?xf32>, %[[IDS:[a-z0-9]+]]: tensor<?xi32>
// CHECK: %[[N:.*]] = tensor.dim %[[IDS]], %{{.*}} : tensor<?xi32>
// CHECK: %[[H:.*]] = tensor.dim %[[T]], %{{.*}} : tensor<?x?xf32>
// CHECK: tensor.empty(%[[N]], %[[H]]) : tensor<?x?xf32>
// CHECK: linalg.generic
// CHECK: arith.index_cast %{{.*}} : i32 to index
func.func @embedding_dynamic(%table: tensor<?x?xf32>, %ids: tensor<?xi32>) -> tensor<?x?xf32> {
  %h = xfmr.embedding %table, %ids : tensor<?x?xf32>, tensor<?xi32> -> tensor<?x?xf32>
  return %h : tensor<?x?xf32>
}
