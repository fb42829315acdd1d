// RUN: xfmr-opt %s --split-input-file --convert-xfmr-to-linalg="fused-attention=256" | FileCheck %s

// For a target with a fused attention kernel (GPU), f32 attention stays one
// op on buffers: the operands' buffers read in place (any strides), the
// result a new buffer handed back as a tensor.
// CHECK-LABEL: func.func @fused(
//   CHECK-NOT: scf.for
//       CHECK: %[[Q:.*]] = bufferization.to_buffer %arg0 read_only : tensor<1x4x?x16xf32> to memref<1x4x?x16xf32, strided<[?, ?, ?, ?], offset: ?>>
//       CHECK: %[[K:.*]] = bufferization.to_buffer %arg1 read_only
//       CHECK: %[[V:.*]] = bufferization.to_buffer %arg2 read_only
//       CHECK: %[[M:.*]] = bufferization.to_buffer %arg3 read_only : tensor<1x1x?x?xi1> to memref<1x1x?x?xi1, strided<[?, ?, ?, ?], offset: ?>>
//       CHECK: %[[OUT:.*]] = memref.alloc(%{{.*}}) : memref<1x4x?x16xf32>
//       CHECK: xfmr.attention_buffers %[[Q]], %[[K]], %[[V]] mask %[[M]] into %[[OUT]] {causal = true, num_heads = 4 : i64, num_kv_heads = 2 : i64
//       CHECK: %[[T:.*]] = bufferization.to_tensor %[[OUT]] restrict writable
//       CHECK: return %[[T]]
func.func @fused(%q: tensor<1x4x?x16xf32>, %k: tensor<1x2x?x16xf32>, %v: tensor<1x2x?x16xf32>,
                 %m: tensor<1x1x?x?xi1>) -> tensor<1x4x?x16xf32> {
  %o = xfmr.attention %q, %k, %v mask %m
      {causal = true, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.25 : f32}
      : tensor<1x4x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x1x?x?xi1>
      -> tensor<1x4x?x16xf32>
  return %o : tensor<1x4x?x16xf32>
}

// -----

// Not f32, or a value head dim above the limit: the FlashAttention loops.
// CHECK-LABEL: func.func @bf16(
//   CHECK-NOT: xfmr.attention_buffers
//       CHECK: scf.for
func.func @bf16(%q: tensor<1x2x8x16xbf16>, %k: tensor<1x2x8x16xbf16>, %v: tensor<1x2x8x16xbf16>)
    -> tensor<1x2x8x16xbf16> {
  %o = xfmr.attention %q, %k, %v {num_heads = 2 : i64, num_kv_heads = 2 : i64, scale = 0.25 : f32}
      : tensor<1x2x8x16xbf16>, tensor<1x2x8x16xbf16>, tensor<1x2x8x16xbf16> -> tensor<1x2x8x16xbf16>
  return %o : tensor<1x2x8x16xbf16>
}

// -----

// CHECK-LABEL: func.func @wide_heads(
//   CHECK-NOT: xfmr.attention_buffers
//       CHECK: scf.for
func.func @wide_heads(%q: tensor<1x1x8x512xf32>, %k: tensor<1x1x8x512xf32>, %v: tensor<1x1x8x512xf32>)
    -> tensor<1x1x8x512xf32> {
  %o = xfmr.attention %q, %k, %v {num_heads = 1 : i64, num_kv_heads = 1 : i64, scale = 0.04 : f32}
      : tensor<1x1x8x512xf32>, tensor<1x1x8x512xf32>, tensor<1x1x8x512xf32> -> tensor<1x1x8x512xf32>
  return %o : tensor<1x1x8x512xf32>
}

// -----

// Soft-capped scores (Gemma-2) and sinks (gpt-oss): the fused kernels have
// neither, so the op is lowered by the tiled loops: each query tile's running
// max starts at its head's sink, and 30 * tanh(s / 30) caps every score
// before the mask.
// CHECK-LABEL: func.func @softcap(
//   CHECK-NOT: xfmr.attention_buffers
//       CHECK: %[[SINKS:.*]] = arith.constant dense<2.500000e-01> : tensor<1xf32>
//       CHECK: scf.for
//       CHECK: tensor.extract %[[SINKS]]
//       CHECK: math.tanh
func.func @softcap(%q: tensor<1x1x8x16xf32>, %k: tensor<1x1x8x16xf32>, %v: tensor<1x1x8x16xf32>)
    -> tensor<1x1x8x16xf32> {
  %o = xfmr.attention %q, %k, %v {causal = true, num_heads = 1 : i64, num_kv_heads = 1 : i64,
                                  scale = 0.25 : f32, softcap = 30.0 : f32,
                                  sinks = array<f32: 0.25>}
      : tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32> -> tensor<1x1x8x16xf32>
  return %o : tensor<1x1x8x16xf32>
}
