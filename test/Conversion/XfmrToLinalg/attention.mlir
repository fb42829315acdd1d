// RUN: xfmr-opt %s --split-input-file --convert-xfmr-to-linalg="query-block=16 key-block=64" | FileCheck %s

// FlashAttention: batch x head x query-block loops, an inner loop over key
// blocks carrying (row max, row sum, accumulator), GQA by dividing the head
// index, and no S x S tensor anywhere (256x256 would be the score matrix).
// CHECK-LABEL: func.func @causal_gqa(
// CHECK-NOT: 256x256
// CHECK: scf.for %[[B:.*]] = %c0 to %{{.*}} step %c1 iter_args(
// CHECK: scf.for %[[H:.*]] = %c0 to %{{.*}} step %c1 iter_args(
// CHECK: %[[HK:.*]] = arith.divui %[[H]], %c2
// CHECK: scf.for %[[Q0:.*]] = %c0 to %{{.*}} step %c16 iter_args(
// Causal: the key loop ends at the block's last visible key.
// CHECK: %[[END:.*]] = arith.maxsi %c0, %{{.*}}
// CHECK: scf.for %{{.*}} = %c0 to %[[END]] step %c64 iter_args(%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) -> (tensor<?xf32>, tensor<?xf32>, tensor<?x16xf32>)
// CHECK: tensor.extract_slice %arg1[%[[B]], %[[HK]], %{{.*}}, 0] [1, 1, %{{.*}}, 16] [1, 1, 1, 1] : tensor<1x2x256x16xf32> to tensor<?x16xf32>
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]
// CHECK: arith.cmpi sgt
// CHECK: arith.maximumf
// CHECK: math.exp
// CHECK: tensor.insert_slice %{{.*}} into %{{.*}}[%[[B]], %[[H]], %[[Q0]], 0] [1, 1, %{{.*}}, 16]
// CHECK-NOT: 256x256
// CHECK: return
func.func @causal_gqa(%q: tensor<1x4x256x16xf32>, %k: tensor<1x2x256x16xf32>,
                      %v: tensor<1x2x256x16xf32>) -> tensor<1x4x256x16xf32> {
  %o = xfmr.attention %q, %k, %v
      {causal = true, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.25 : f32}
      : tensor<1x4x256x16xf32>, tensor<1x2x256x16xf32>, tensor<1x2x256x16xf32>
      -> tensor<1x4x256x16xf32>
  return %o : tensor<1x4x256x16xf32>
}

// -----

// A float mask is added per tile; its size-1 dims (static, or 1 at run time)
// read index 0. Without `causal`, the key loop covers every key.
// CHECK-LABEL: func.func @masked_dynamic(
// CHECK-DAG: %[[D1:.*]] = tensor.dim %arg3, %c1
// CHECK-DAG: %[[ONE1:.*]] = arith.cmpi eq, %[[D1]], %c1
// CHECK: scf.for
// CHECK: scf.for
// CHECK: scf.for
// CHECK: scf.for %{{.*}} = %c0 to %[[SKV:.*]] step %c64
// CHECK: arith.select %[[ONE1]], %c0
// CHECK: tensor.extract %arg3[
// CHECK: arith.addf
// CHECK-NOT: arith.cmpi sgt
// CHECK: return
func.func @masked_dynamic(%q: tensor<?x2x?x8xf16>, %k: tensor<?x2x?x8xf16>,
                          %v: tensor<?x2x?x8xf16>, %m: tensor<?x?x?x?xf32>)
    -> tensor<?x2x?x8xf16> {
  %o = xfmr.attention %q, %k, %v mask %m
      {num_heads = 2 : i64, num_kv_heads = 2 : i64, scale = 0.35 : f32}
      : tensor<?x2x?x8xf16>, tensor<?x2x?x8xf16>, tensor<?x2x?x8xf16>, tensor<?x?x?x?xf32>
      -> tensor<?x2x?x8xf16>
  return %o : tensor<?x2x?x8xf16>
}
