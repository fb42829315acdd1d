// RUN: xfmr-opt %s --split-input-file --xfmr-gpu-attention --canonicalize | FileCheck %s
// RUN: xfmr-opt %s --split-input-file --xfmr-gpu-attention=emulate=true | FileCheck %s --check-prefix=EMU
// RUN: xfmr-opt %s --split-input-file --xfmr-gpu-attention --xfmr-gpu-map-loops --gpu-kernel-outlining | FileCheck %s --check-prefix=OUTLINED

// Causal grouped-query attention (4 query heads over 2 KV heads, head dim
// 24, value head dim 40 padded to 64): one block of 4 warps per 16 query
// rows of a head and batch; keys 32 at a time up to the block's last
// visible key; S = Q·Kᵀ per 32-wide chunk of the head dim and O += P·V
// per 32 value columns on tensor cores (3xTF32: three products per WMMA
// step); the softmax by 16 threads; O / sum written at the end.
// CHECK-LABEL: func.func @gqa_causal
//       CHECK:   %[[GX:[0-9]+]] = arith.maxui %{{.*}}, %c1
//       CHECK:   gpu.launch blocks({{.*}}) in (%{{.*}} = %[[GX]], %{{.*}} = %c4, %{{.*}} = %c1{{.*}}) threads({{.*}}) in (%{{.*}} = %c128, {{.*}}) module(@xfmr_kernels) function(@attn0) workgroup(%[[QHI:[a-z0-9]+]] : memref<16x32xf32, #gpu.address_space<workgroup>>, %{{.*}} : memref<16x32xf32, #gpu.address_space<workgroup>>, %[[XHI:[a-z0-9]+]] : memref<32x32xf32, #gpu.address_space<workgroup>>, %{{.*}} : memref<32x32xf32, #gpu.address_space<workgroup>>, %[[PART:[a-z0-9]+]] : memref<32x32xf32, #gpu.address_space<workgroup>>, %{{.*}} : memref<16x32xf32, #gpu.address_space<workgroup>>, %{{.*}} : memref<16x32xf32, #gpu.address_space<workgroup>>, %[[O:[a-z0-9]+]] : memref<16x64xf32, #gpu.address_space<workgroup>>, %{{.*}} : memref<16xf32, #gpu.address_space<workgroup>>, %{{.*}} : memref<16xf32, #gpu.address_space<workgroup>>, %{{.*}} : memref<16xf32, #gpu.address_space<workgroup>>)
// The KV head of query head h: h / 2.
//       CHECK:     arith.divui %{{.*}}, %c2
// Causal: the key loop ends at min(q0 + tq + Skv - Sq, Skv).
//       CHECK:     arith.minsi
//       CHECK:     %[[END:[0-9]+]] = arith.maxsi %{{.*}}, %c0
//       CHECK:     gpu.barrier
//       CHECK:     scf.for %{{.*}} = %c0 to %[[END]] step %c32
// (Head dim 24: one chunk of 32, its loop folded away.)
//       CHECK:         arith.andi %{{.*}}, %c-8192_i32
//       CHECK:         memref.store %{{.*}}, %[[QHI]]
//       CHECK:         gpu.barrier
//       CHECK:         gpu.subgroup_mma_load_matrix %[[PART]]
//  CHECK-COUNT-6:      gpu.subgroup_mma_compute
//       CHECK:         gpu.subgroup_mma_store_matrix %{{.*}}, %[[PART]]
//       CHECK:         gpu.barrier
//       CHECK:       math.exp
//       CHECK:       gpu.barrier
//       CHECK:       scf.for %{{.*}} = %c0 to %c64 step %c32
//       CHECK:         memref.store %{{.*}}, %[[XHI]]
//       CHECK:         gpu.barrier
//       CHECK:         gpu.subgroup_mma_constant_matrix
//  CHECK-COUNT-6:      gpu.subgroup_mma_compute
//       CHECK:         gpu.barrier
//       CHECK:         memref.store %{{.*}}, %[[O]]
//       CHECK:         gpu.barrier
//       CHECK:     arith.divf
//       CHECK:     memref.store %{{.*}}, %arg3[
//   CHECK-NOT:   xfmr.attention_buffers

// Emulated: shared memory as heap buffers, blocks, threads and warps as
// host loops, no GPU op.
// EMU-LABEL: func.func @gqa_causal
//       EMU:   memref.alloc() : memref<16x32xf32>
//       EMU:   memref.alloc() : memref<16x64xf32>
//   EMU-NOT:   gpu.
//       EMU:   math.exp
//   EMU-NOT:   gpu.
//       EMU:   memref.dealloc
//   EMU-NOT:   xfmr.attention_buffers

// Outlined, the kernel takes its operands and keeps its shared memory.
// OUTLINED: gpu.module @xfmr_kernels
// OUTLINED: gpu.func @attn0(
// OUTLINED-SAME: workgroup(
// OUTLINED: gpu.subgroup_mma_compute
func.func @gqa_causal(%q: memref<1x4x?x24xf32>, %k: memref<1x2x?x24xf32>,
                      %v: memref<1x2x?x40xf32>, %out: memref<1x4x?x40xf32>) {
  xfmr.attention_buffers %q, %k, %v into %out
      {causal = true, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.2 : f32}
      : memref<1x4x?x24xf32>, memref<1x2x?x24xf32>, memref<1x2x?x40xf32> into memref<1x4x?x40xf32>
  return
}

// -----

// A mask broadcasts: its dims of size 1 read index 0 (decided at run
// time: `dim == 1`); an i1 mask selects -inf, a float mask is added.
// CHECK-LABEL: func.func @masked
//       CHECK:   memref.dim %arg3, %c0
//       CHECK:   arith.cmpi eq, %{{.*}}, %c1
//       CHECK:   gpu.launch
//       CHECK:     memref.load %arg3[{{.*}}] : memref<?x1x?x?xi1, strided<[?, ?, ?, ?], offset: ?>>
//       CHECK:     arith.select %{{.*}}, %{{.*}}, %cst
func.func @masked(%q: memref<2x2x8x16xf32>, %k: memref<2x2x?x16xf32>, %v: memref<2x2x?x16xf32>,
                  %m: memref<?x1x?x?xi1, strided<[?, ?, ?, ?], offset: ?>>,
                  %out: memref<2x2x8x16xf32>) {
  xfmr.attention_buffers %q, %k, %v mask %m into %out
      {num_heads = 2 : i64, num_kv_heads = 2 : i64, scale = 0.25 : f32}
      : memref<2x2x8x16xf32>, memref<2x2x?x16xf32>, memref<2x2x?x16xf32>,
        memref<?x1x?x?xi1, strided<[?, ?, ?, ?], offset: ?>> into memref<2x2x8x16xf32>
  return
}
