// RUN: xfmr-opt %s --xfmr-gpu-attention -verify-diagnostics

// The output tile stays in shared memory: the value head dim must be static
// and at most 256.
func.func @head_dim_too_large(%q: memref<1x1x8x320xf32>, %k: memref<1x1x8x320xf32>,
                              %v: memref<1x1x8x320xf32>, %out: memref<1x1x8x320xf32>) {
  // expected-error @+1 {{xfmr-gpu-attention: the kernel takes a static value head dim of at most 256}}
  xfmr.attention_buffers %q, %k, %v into %out
      {num_heads = 1 : i64, num_kv_heads = 1 : i64, scale = 0.05 : f32}
      : memref<1x1x8x320xf32>, memref<1x1x8x320xf32>, memref<1x1x8x320xf32> into memref<1x1x8x320xf32>
  return
}
