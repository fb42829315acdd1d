// RUN: xfmr-opt %s --convert-onnx-to-linalg --split-input-file | FileCheck %s

// com.microsoft MatMulNBits at accuracy_level 4 (onnxruntime-genai's int4
// for the CPU): A is quantized to int8 per block and the product runs in the
// micro-kernel (runtime/ukernels/QuantizedMatmul.c) on weights repacked at
// compile time into 16-column panels (N = 6 -> 16 columns: 256 bytes, 16
// scales), one call per 64 columns in a loop xfmr-parallelize-loops may
// split across threads.
// CHECK-LABEL: func.func @nbits_int8_activations(
// CHECK: %[[A:.*]] = tensor.collapse_shape %{{.*}} {{\[}}[0, 1], [2]] : tensor<?x?x32xf32> into tensor<?x32xf32>
// A's rows quantized to int8 per block by xfmr_uk_quantize_rows (max |a|,
// round half to even, block sums; runtime/ukernels/QuantizeRows.c) from a
// copy of A, in blocks of 32 rows across threads from 64 rows on, then
// handed to the kernel:
// CHECK: %[[COPY:.*]] = linalg.copy {xfmr.kernel_input} ins(%[[A]] : tensor<?x32xf32>)
// CHECK: bufferization.to_buffer %[[COPY]] read_only : tensor<?x32xf32> to memref<?x32xf32>
// CHECK: %[[AQ:.*]] = memref.alloc(%{{.*}}) : memref<?x32xi8>
// CHECK: arith.cmpi sge, %{{.*}}, %c64_i64
// CHECK: scf.for
// CHECK:   func.call @xfmr_uk_quantize_rows(
// CHECK: } {{[{]}}xfmr.independent_iterations}
// CHECK: } else {
// CHECK:   func.call @xfmr_uk_quantize_rows(
// CHECK: %[[W:.*]] = arith.constant dense_resource<xfmr_q4_weights{{[_0-9]*}}> : tensor<256xi8>
// CHECK: bufferization.to_buffer %[[W]] read_only
// CHECK: %[[S:.*]] = arith.constant dense_resource<xfmr_q4_scales{{[_0-9]*}}> : tensor<16xf32>
// CHECK: bufferization.to_buffer %[[S]] read_only
// CHECK: %[[OUT:.*]] = memref.alloc(%{{.*}}, %{{.*}}) : memref<?x?x6xf32>
// CHECK: scf.for
// CHECK:   func.call @xfmr_uk_matmul_q4q8(
// CHECK: } {{[{]}}xfmr.independent_iterations}
// CHECK: bufferization.to_tensor %[[OUT]] restrict writable : memref<?x?x6xf32> to tensor<?x?x6xf32>
// CHECK-NOT: "reduction"
// CHECK-DAG: func.func private @xfmr_uk_matmul_q4q8(!llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, i64, !llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, !llvm.ptr, i64)
func.func @nbits_int8_activations(%a: tensor<?x?x32xf32>) -> tensor<?x?x6xf32> {
  %none = onnx.NoValue : none
  %b = onnx.Constant() {value = dense<[[[68,32,130,60,253,230,241,194,107,48,249,14,199,221,1,228]],[[136,117,52,162,15,11,13,4,195,110,216,14,113,224,253,119]],[[176,118,112,235,148,11,213,51,95,151,61,170,216,97,155,145]],[[255,201,17,245,124,206,212,88,187,191,44,224,55,83,201,189]],[[250,15,240,22,157,201,87,86,116,6,102,118,207,176,180,235]],[[137,2,196,66,105,218,28,246,186,102,211,248,182,212,177,0]]]> : tensor<6x1x16xui8>} : () -> tensor<6x1x16xui8>
  %s = onnx.Constant() {value = dense<[0.01,0.02,0.03,0.04,0.05,0.06]> : tensor<6xf32>} : () -> tensor<6xf32>
  %0 = onnx.ms.MatMulNBits(%a, %b, %s, %none, %none, %none)
      {K = 32 : i64, N = 6 : i64, accuracy_level = 4 : i64, bits = 4 : i64, block_size = 32 : i64}
      : (tensor<?x?x32xf32>, tensor<6x1x16xui8>, tensor<6xf32>, none, none, none) -> tensor<?x?x6xf32>
  return %0 : tensor<?x?x6xf32>
}

// -----

// accuracy_level 0 (float activations): the weights are unpacked inside one
// linalg.generic; no micro-kernel.
// CHECK-LABEL: func.func @nbits_float_activations(
// CHECK-NOT: xfmr_uk_
// CHECK: linalg.generic
// CHECK-NOT: xfmr_uk_
func.func @nbits_float_activations(%a: tensor<?x?x32xf32>) -> tensor<?x?x6xf32> {
  %none = onnx.NoValue : none
  %b = onnx.Constant() {value = dense<[[[68,32,130,60,253,230,241,194,107,48,249,14,199,221,1,228]],[[136,117,52,162,15,11,13,4,195,110,216,14,113,224,253,119]],[[176,118,112,235,148,11,213,51,95,151,61,170,216,97,155,145]],[[255,201,17,245,124,206,212,88,187,191,44,224,55,83,201,189]],[[250,15,240,22,157,201,87,86,116,6,102,118,207,176,180,235]],[[137,2,196,66,105,218,28,246,186,102,211,248,182,212,177,0]]]> : tensor<6x1x16xui8>} : () -> tensor<6x1x16xui8>
  %s = onnx.Constant() {value = dense<[0.01,0.02,0.03,0.04,0.05,0.06]> : tensor<6xf32>} : () -> tensor<6xf32>
  %0 = onnx.ms.MatMulNBits(%a, %b, %s, %none, %none, %none)
      {K = 32 : i64, N = 6 : i64, accuracy_level = 0 : i64, bits = 4 : i64, block_size = 32 : i64}
      : (tensor<?x?x32xf32>, tensor<6x1x16xui8>, tensor<6xf32>, none, none, none) -> tensor<?x?x6xf32>
  return %0 : tensor<?x?x6xf32>
}

// -----

// accuracy_level 4 with 16-value blocks (the kernel works in 32-value
// chunks): float activations.
// CHECK-LABEL: func.func @nbits_block16(
// CHECK-NOT: xfmr_uk_
// CHECK: linalg.generic
func.func @nbits_block16(%a: tensor<?x?x32xf32>) -> tensor<?x?x6xf32> {
  %none = onnx.NoValue : none
  %b = onnx.Constant() {value = dense<[[[169,234,14,117,90,92,46,130],[16,36,42,8,231,7,143,127]],[[137,56,94,176,148,35,85,81],[130,86,139,150,232,164,254,242]],[[58,12,159,197,175,215,96,132],[55,129,107,221,10,115,9,203]],[[74,18,82,228,218,112,230,114],[15,202,164,218,30,152,64,108]],[[24,156,36,39,158,152,81,213],[129,66,4,19,111,235,87,19]],[[193,102,177,50,105,221,99,252],[53,199,151,255,8,166,205,144]]]> : tensor<6x2x8xui8>} : () -> tensor<6x2x8xui8>
  %s = onnx.Constant() {value = dense<[0.01,0.02,0.03,0.04,0.05,0.06,0.07,0.08,0.09,0.1,0.11,0.12]> : tensor<12xf32>} : () -> tensor<12xf32>
  %0 = onnx.ms.MatMulNBits(%a, %b, %s, %none, %none, %none)
      {K = 32 : i64, N = 6 : i64, accuracy_level = 4 : i64, bits = 4 : i64, block_size = 16 : i64}
      : (tensor<?x?x32xf32>, tensor<6x2x8xui8>, tensor<12xf32>, none, none, none) -> tensor<?x?x6xf32>
  return %0 : tensor<?x?x6xf32>
}
