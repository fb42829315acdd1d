// RUN: xfmr-opt %s --convert-xfmr-to-linalg --split-input-file | FileCheck %s

// Lowering of xfmr.rope: one parallel generic over [B, H, S, D] that reads
// each feature's pair partner and the pair's cos and sin with tensor.extract.

// Llama-style halves over the whole head (f32, 2-D tables): the partner is
// f + R or f - R, no pass-through select.
// CHECK-LABEL: func.func @rope_full(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<2x8x16x64xf32>, %[[COS:[a-z0-9]+]]: tensor<16x32xf32>, %[[SIN:[a-z0-9]+]]: tensor<16x32xf32>
// CHECK: %[[Y:.*]] = linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel", "parallel", "parallel"]
// CHECK-SAME: ins(%[[X]] : tensor<2x8x16x64xf32>) outs(%{{.*}} : tensor<2x8x16x64xf32>)
// CHECK: %[[S:.*]] = linalg.index 2 : index
// CHECK: %[[F:.*]] = linalg.index 3 : index
// CHECK: arith.cmpi ult, %[[F]]
// CHECK: tensor.extract %[[COS]][%[[S]], %{{.*}}] : tensor<16x32xf32>
// CHECK: tensor.extract %[[SIN]][%[[S]], %{{.*}}] : tensor<16x32xf32>
// CHECK: tensor.extract %[[X]][%{{.*}}, %{{.*}}, %[[S]], %{{.*}}] : tensor<2x8x16x64xf32>
// CHECK-DAG: arith.subf
// CHECK-DAG: arith.addf
// CHECK: %[[R:.*]] = arith.select
// CHECK-NEXT: linalg.yield %[[R]] : f32
// CHECK: return %[[Y]]
func.func @rope_full(%x: tensor<2x8x16x64xf32>, %cos: tensor<16x32xf32>, %sin: tensor<16x32xf32>)
    -> tensor<2x8x16x64xf32> {
  %y = xfmr.rope %x, %cos, %sin {rotary_dim = 64 : i64}
      : tensor<2x8x16x64xf32>, tensor<16x32xf32>, tensor<16x32xf32>
  return %y : tensor<2x8x16x64xf32>
}

// -----

// GPT-J style: interleaved pairs (2i, 2i + 1) over the first 32 of 64 f16
// features, rotated in f32; the last 32 features pass through a select, and
// the [1, S, R] tables are read at batch 0.
// CHECK-LABEL: func.func @rope_interleaved_partial(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<2x8x16x64xf16>, %[[COS:[a-z0-9]+]]: tensor<1x16x16xf16>
// CHECK: linalg.generic
// CHECK: ^bb0(%[[IN:[a-z0-9_]+]]: f16, %{{[a-z0-9_]+}}: f16):
// CHECK: %[[F:.*]] = linalg.index 3 : index
// CHECK: %[[ROT:.*]] = arith.cmpi ult, %[[F]]
// CHECK: arith.select %[[ROT]], %[[F]]
// CHECK: arith.divui
// CHECK: arith.remui
// CHECK: tensor.extract %[[COS]][%c0{{[_0-9]*}}, %{{.*}}, %{{.*}}] : tensor<1x16x16xf16>
// CHECK: arith.extf %{{.*}} : f16 to f32
// CHECK: %[[T:.*]] = arith.truncf %{{.*}} : f32 to f16
// CHECK: %[[R:.*]] = arith.select %[[ROT]], %[[T]], %[[IN]] : f16
// CHECK-NEXT: linalg.yield %[[R]] : f16
func.func @rope_interleaved_partial(%x: tensor<2x8x16x64xf16>, %cos: tensor<1x16x16xf16>,
                                    %sin: tensor<1x16x16xf16>) -> tensor<2x8x16x64xf16> {
  %y = xfmr.rope %x, %cos, %sin {interleaved = true, rotary_dim = 32 : i64}
      : tensor<2x8x16x64xf16>, tensor<1x16x16xf16>, tensor<1x16x16xf16>
  return %y : tensor<2x8x16x64xf16>
}

// -----

// Dynamic sequence length, per-batch f32 tables for bf16 activations: the
// tables are read at the output's batch index and need no conversion.
// CHECK-LABEL: func.func @rope_per_batch_dynamic(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<4x32x?x128xbf16>, %[[COS:[a-z0-9]+]]: tensor<4x?x64xf32>
// CHECK: %[[D:.*]] = tensor.dim %[[X]], %{{.*}} : tensor<4x32x?x128xbf16>
// CHECK: tensor.empty(%[[D]]) : tensor<4x32x?x128xbf16>
// CHECK: linalg.generic
// CHECK-SAME: ins(%[[X]] : tensor<4x32x?x128xbf16>)
// CHECK: %[[B:.*]] = linalg.index 0 : index
// CHECK: %[[S:.*]] = linalg.index 2 : index
// CHECK: tensor.extract %[[COS]][%[[B]], %[[S]], %{{.*}}] : tensor<4x?x64xf32>
// CHECK: arith.extf %{{.*}} : bf16 to f32
// CHECK: arith.truncf %{{.*}} : f32 to bf16
func.func @rope_per_batch_dynamic(%x: tensor<4x32x?x128xbf16>, %cos: tensor<4x?x64xf32>,
                                  %sin: tensor<4x?x64xf32>) -> tensor<4x32x?x128xbf16> {
  %y = xfmr.rope %x, %cos, %sin {rotary_dim = 128 : i64}
      : tensor<4x32x?x128xbf16>, tensor<4x?x64xf32>, tensor<4x?x64xf32>
  return %y : tensor<4x32x?x128xbf16>
}

// -----

// Fully dynamic: the tables' leading dim may be 1 at run time (then batch 0
// is read), and the head dim may exceed rotary_dim (pass-through select).
// CHECK-LABEL: func.func @rope_all_dynamic(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<?x8x?x?xf32>, %[[COS:[a-z0-9]+]]: tensor<?x?x32xf32>
// CHECK: %[[N:.*]] = tensor.dim %[[COS]], %{{.*}} : tensor<?x?x32xf32>
// CHECK: %[[ONE:.*]] = arith.cmpi eq, %[[N]], %{{.*}} : index
// CHECK: linalg.generic
// CHECK: %[[B:.*]] = linalg.index 0 : index
// CHECK: %[[F:.*]] = linalg.index 3 : index
// CHECK: %[[ROT:.*]] = arith.cmpi ult, %[[F]], %c64
// CHECK: %[[CB:.*]] = arith.select %[[ONE]], %{{.*}}, %[[B]] : index
// CHECK: tensor.extract %[[COS]][%[[CB]], %{{.*}}, %{{.*}}] : tensor<?x?x32xf32>
// CHECK: arith.select %[[ROT]]
func.func @rope_all_dynamic(%x: tensor<?x8x?x?xf32>, %cos: tensor<?x?x32xf32>,
                            %sin: tensor<?x?x32xf32>) -> tensor<?x8x?x?xf32> {
  %y = xfmr.rope %x, %cos, %sin {rotary_dim = 64 : i64}
      : tensor<?x8x?x?xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32>
  return %y : tensor<?x8x?x?xf32>
}
