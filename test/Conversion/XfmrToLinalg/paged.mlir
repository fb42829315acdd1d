// RUN: xfmr-opt %s --split-input-file --convert-xfmr-to-linalg | FileCheck %s

// kv_write: one insert per token into block slot / 16, offset slot % 16;
// negative slots are skipped, a slot past the pools fails its check and is
// written to slot 0 instead (the call fails; nothing is written out of
// bounds).
// CHECK-LABEL: func.func @kv_write(
// CHECK: %[[R:.*]]:2 = scf.for %[[T:.*]] = %c0 to %{{.*}} step %c1 iter_args(%[[KP:.*]] = %arg2, %[[VP:.*]] = %arg3)
// CHECK: %[[SLOT:.*]] = tensor.extract %arg4[%[[T]]] : tensor<?xi64>
// CHECK: %[[KEEP:.*]] = arith.cmpi sge, %[[SLOT]], %c0_i64
// CHECK: scf.if %[[KEEP]]
// CHECK: %[[IN:.*]] = arith.cmpi slt
// CHECK: cf.assert %[[IN]], "xfmr.kv_write: slot past the end of the KV pool
// CHECK: %[[S:.*]] = arith.select %[[IN]], %{{.*}}, %c0 : index
// CHECK: %[[BLK:.*]] = arith.divui %[[S]], %c16
// CHECK: %[[OFF:.*]] = arith.remui %{{.*}}, %c16
// CHECK: tensor.insert_slice %{{.*}} into %[[KP]][%[[BLK]], %[[OFF]], 0, 0] [1, 1, 2, 8] [1, 1, 1, 1] : tensor<2x8xf32> into tensor<?x16x2x8xf32>
// CHECK: tensor.insert_slice %{{.*}} into %[[VP]][%[[BLK]], %[[OFF]], 0, 0] [1, 1, 2, 8]
// CHECK: return %[[R]]#0, %[[R]]#1
func.func @kv_write(%k: tensor<?x2x8xf32>, %v: tensor<?x2x8xf32>, %kp: tensor<?x16x2x8xf32>,
                    %vp: tensor<?x16x2x8xf32>, %slots: tensor<?xi64>)
    -> (tensor<?x16x2x8xf32>, tensor<?x16x2x8xf32>) {
  %k2, %v2 = xfmr.kv_write %k, %v into %kp, %vp at %slots
      : tensor<?x2x8xf32>, tensor<?x2x8xf32>, tensor<?x16x2x8xf32>, tensor<?x16x2x8xf32>,
        tensor<?xi64>
  return %k2, %v2 : tensor<?x16x2x8xf32>, tensor<?x16x2x8xf32>
}

// -----

// paged_attention: per sequence its token range and context length are read
// and checked, then per KV head and block of new tokens one key tile per cache
// block (the block id read from the table and checked), causal by position.
// The three inputs that describe the sequences must agree on their number;
// after a failed check the values are clamped into range, so the loops read
// nothing out of bounds (the call fails anyway).
// CHECK-LABEL: func.func @paged(
// CHECK: cf.assert %{{.*}}, "xfmr.paged_attention: context_lens, block_tables and query_start_loc disagree on the number of sequences
// CHECK: scf.for %[[S:.*]] = %c0 to %{{.*}} step %c1 iter_args(
// CHECK: cf.assert %{{.*}}, "xfmr.paged_attention: query_start_loc is not ascending
// CHECK: cf.assert %{{.*}}, "xfmr.paged_attention: context_lens shorter than the new tokens
// CHECK: cf.assert %{{.*}}, "xfmr.paged_attention: context longer than the block table
// CHECK: arith.maxsi
// CHECK: arith.minsi
// One KV head per iteration with its 4 query heads: a [tq, 4, 8] query
// slice as [tq * 4, 8] rows, each K tile read once for the group.
// CHECK: scf.for %[[H:.*]] = %c0 to %c2 step %c1 iter_args(
// CHECK: %[[H0:.*]] = arith.muli %[[H]], %c4
// CHECK: scf.for {{.*}} step %c16{{(_[0-9]+)?}} iter_args(
// CHECK: tensor.extract_slice %arg0[%{{.*}}, %[[H0]], 0] [%{{.*}}, 4, 8] [1, 1, 1] : tensor<?x8x8xbf16> to tensor<?x4x8xbf16>
// CHECK: tensor.collapse_shape %{{.*}} {{\[}}[0, 1], [2]] : tensor<?x4x8xbf16> into tensor<?x8xbf16>
// CHECK: arith.ceildivui %{{.*}}, %c16{{(_[0-9]+)?}}
// CHECK: scf.for %[[KB:.*]] = %c0 to %{{.*}} step %c1 iter_args(
// CHECK: %[[ID:.*]] = tensor.extract %arg3[%[[S]], %[[KB]]] : tensor<?x?xi32>
// CHECK: cf.assert %{{.*}}, "xfmr.paged_attention: block id outside the KV pool
// CHECK: tensor.extract_slice %arg1[%{{.*}}, 0, %{{.*}}, 0] [1, %{{.*}}, 1, 8] [1, 1, 1, 1] : tensor<?x16x2x8xbf16> to tensor<?x8xbf16>
// CHECK: arith.cmpi sgt
// CHECK: math.exp
// CHECK: tensor.expand_shape %{{.*}} {{\[}}[0, 1], [2]] output_shape [%{{.*}}, 4, 8] : tensor<?x8xbf16> into tensor<?x4x8xbf16>
// CHECK: tensor.insert_slice %{{.*}}[%{{.*}}, %[[H0]], 0] [%{{.*}}, 4, 8] [1, 1, 1] : tensor<?x4x8xbf16> into tensor<?x8x8xbf16>
// Sequences are independent: the CPU backend may run them on several cores.
// CHECK: } {xfmr.independent_iterations}
// CHECK: return
func.func @paged(%q: tensor<?x8x8xbf16>, %kp: tensor<?x16x2x8xbf16>, %vp: tensor<?x16x2x8xbf16>,
                 %tables: tensor<?x?xi32>, %lens: tensor<?xi32>, %starts: tensor<?xi32>)
    -> tensor<?x8x8xbf16> {
  %o = xfmr.paged_attention %q, %kp, %vp, %tables, %lens, %starts
      {block_size = 16 : i64, num_heads = 8 : i64, num_kv_heads = 2 : i64, scale = 0.35 : f32}
      : tensor<?x8x8xbf16>, tensor<?x16x2x8xbf16>, tensor<?x16x2x8xbf16>, tensor<?x?xi32>,
        tensor<?xi32>, tensor<?xi32>
  return %o : tensor<?x8x8xbf16>
}

// -----

// A sliding window of 4 keys: each query block's key loop starts at the
// block holding its first row's oldest visible key, max(pos0 - 3, 0) / 16,
// and keys at or before pos - 4 are masked besides those after pos.
// CHECK-LABEL: func.func @paged_window(
// CHECK: arith.ceildivui
// CHECK-NEXT: %[[NEXT:.*]] = arith.addi %[[POS0:.*]], %c1
// CHECK-NEXT: %[[OLD:.*]] = arith.subi %[[NEXT]], %c4
// CHECK: %[[OLD0:.*]] = arith.maxsi %[[OLD]], %c0
// CHECK: %[[FIRST:.*]] = arith.divui %[[OLD0]], %c16
// CHECK: scf.for %{{.*}} = %[[FIRST]] to
// CHECK: linalg.generic
// CHECK: %[[POS:.*]] = arith.addi %[[POS0]]
// CHECK: %[[KEY:.*]] = arith.addi
// CHECK: %[[AFTER:.*]] = arith.cmpi sgt, %[[KEY]], %[[POS]]
// CHECK: %[[S1:.*]] = arith.select %[[AFTER]]
// CHECK: %[[LAST:.*]] = arith.addi %[[KEY]], %c3
// CHECK: %[[BEFORE:.*]] = arith.cmpi sgt, %[[POS]], %[[LAST]]
// CHECK: arith.select %[[BEFORE]], %{{.*}}, %[[S1]]
// CHECK-NOT: sliding window
func.func @paged_window(%q: tensor<?x8x8xf32>, %kp: tensor<?x16x2x8xf32>, %vp: tensor<?x16x2x8xf32>,
                        %tables: tensor<?x?xi32>, %lens: tensor<?xi32>, %starts: tensor<?xi32>)
    -> tensor<?x8x8xf32> {
  %o = xfmr.paged_attention %q, %kp, %vp, %tables, %lens, %starts
      {block_size = 16 : i64, num_heads = 8 : i64, num_kv_heads = 2 : i64, scale = 0.35 : f32,
       sliding_window = 4 : i64}
      : tensor<?x8x8xf32>, tensor<?x16x2x8xf32>, tensor<?x16x2x8xf32>, tensor<?x?xi32>,
        tensor<?xi32>, tensor<?xi32>
  return %o : tensor<?x8x8xf32>
}

// -----

// int8 cache: per token, each head's max |x| gives its scale (/ 127), the
// row is stored as round(x / s) (saturated, 0 where s = 0) and the scales go
// to [block, offset, :] of the scale pools.
// CHECK-LABEL: func.func @kv_write_int8(
// CHECK: scf.for {{.*}} iter_args(%[[KP:.*]] = %arg2, %[[VP:.*]] = %arg3, %[[KS:.*]] = %arg5, %[[VS:.*]] = %arg6)
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]
// CHECK: math.absf
// CHECK: arith.maximumf
// CHECK: arith.divf %{{.*}}, %cst{{.*}} : f32
// CHECK: math.roundeven
// CHECK: arith.fptosi %{{.*}} : f32 to i8
// CHECK: tensor.insert_slice %{{.*}} into %[[KS]][%{{.*}}, %{{.*}}, 0] [1, 1, 2] [1, 1, 1] : tensor<2xf32> into tensor<?x16x2xf32>
// CHECK: tensor.insert_slice %{{.*}} into %[[KP]][%{{.*}}, %{{.*}}, 0, 0] [1, 1, 2, 8] [1, 1, 1, 1] : tensor<2x8xi8> into tensor<?x16x2x8xi8>
func.func @kv_write_int8(%k: tensor<?x2x8xf32>, %v: tensor<?x2x8xf32>, %kp: tensor<?x16x2x8xi8>,
                         %vp: tensor<?x16x2x8xi8>, %slots: tensor<?xi64>,
                         %ks: tensor<?x16x2xf32>, %vs: tensor<?x16x2xf32>)
    -> (tensor<?x16x2x8xi8>, tensor<?x16x2x8xi8>, tensor<?x16x2xf32>, tensor<?x16x2xf32>) {
  %k2, %v2, %s:2 = xfmr.kv_write %k, %v into %kp, %vp
      scales(%ks, %vs : tensor<?x16x2xf32>, tensor<?x16x2xf32>) at %slots
      : tensor<?x2x8xf32>, tensor<?x2x8xf32>, tensor<?x16x2x8xi8>, tensor<?x16x2x8xi8>,
        tensor<?xi64>
  return %k2, %v2, %s#0, %s#1
      : tensor<?x16x2x8xi8>, tensor<?x16x2x8xi8>, tensor<?x16x2xf32>, tensor<?x16x2xf32>
}

// -----

// fp8 cache: the products read the e4m3fn bytes and widen them in
// registers (the byte's bits placed in an f16: the value / 256); the
// scores are multiplied by the keys' scales (times 256), the
// probabilities by the values' scales (times 256). No f32 copy of a tile.
// CHECK-LABEL: func.func @paged_attention_fp8(
// CHECK: scf.for
// CHECK: %[[KT:.*]] = tensor.extract_slice %arg1[{{.*}}] [1, %{{.*}}, 1, 8] [1, 1, 1, 1] : tensor<?x16x2x8xf8E4M3FN> to tensor<?x8xf8E4M3FN>
// CHECK: %[[VT:.*]] = tensor.extract_slice %arg2[{{.*}}] : tensor<?x16x2x8xf8E4M3FN> to tensor<?x8xf8E4M3FN>
// CHECK: %[[KSC:.*]] = tensor.extract_slice %arg6[{{.*}}] [1, %{{.*}}, 1] [1, 1, 1] : tensor<?x16x2xf32> to tensor<?xf32>
// CHECK: %[[VSC:.*]] = tensor.extract_slice %arg7[{{.*}}] : tensor<?x16x2xf32> to tensor<?xf32>
// CHECK: %[[DOT:.*]] = linalg.generic {{.*}} ins(%{{.*}}, %[[KT]] : tensor<?x8xf32>, tensor<?x8xf8E4M3FN>)
// CHECK: arith.bitcast %{{.*}} : f8E4M3FN to i8
// CHECK: arith.bitcast %{{.*}} : i16 to f16
// CHECK: arith.extf %{{.*}} : f16 to f32
// CHECK: linalg.generic {{.*}} ins(%[[DOT]], %[[KSC]] : tensor<?x?xf32>, tensor<?xf32>)
// CHECK: linalg.generic {{.*}} ins(%{{.*}}, %[[VSC]] : tensor<?x?xf32>, tensor<?xf32>)
// CHECK: linalg.generic {{.*}} ins(%{{.*}}, %[[VT]] : tensor<?x?xf32>, tensor<?x8xf8E4M3FN>)
func.func @paged_attention_fp8(%q: tensor<?x4x8xf32>, %kp: tensor<?x16x2x8xf8E4M3FN>,
                               %vp: tensor<?x16x2x8xf8E4M3FN>, %tables: tensor<?x?xi32>,
                               %lens: tensor<?xi32>, %starts: tensor<?xi32>,
                               %ks: tensor<?x16x2xf32>, %vs: tensor<?x16x2xf32>) -> tensor<?x4x8xf32> {
  %0 = xfmr.paged_attention %q, %kp, %vp, %tables, %lens, %starts
      scales(%ks, %vs : tensor<?x16x2xf32>, tensor<?x16x2xf32>)
      {block_size = 16 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.35 : f32}
      : tensor<?x4x8xf32>, tensor<?x16x2x8xf8E4M3FN>, tensor<?x16x2x8xf8E4M3FN>, tensor<?x?xi32>,
        tensor<?xi32>, tensor<?xi32>
  return %0 : tensor<?x4x8xf32>
}

// -----

// Soft-capped scores (Gemma-2): 0.2 * tanh(s / 0.2) on every score, before
// the causal test hides the later keys. Sinks (gpt-oss): each tile's running
// max starts at its row's sink (row i is query head h0 + i % 4), its sum at 1.
// CHECK-LABEL: func.func @paged_softcap(
// CHECK: %[[SINKS:.*]] = arith.constant dense<[1.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00, 5.000000e+00, 6.000000e+00, 7.000000e+00, 8.000000e+00]> : tensor<8xf32>
// CHECK: linalg.index 0
// CHECK: %[[R:.*]] = arith.remui %{{.*}}, %c4
// CHECK: %[[H:.*]] = arith.addi %{{.*}}, %[[R]]
// CHECK: tensor.extract %[[SINKS]][%[[H]]]
// CHECK: linalg.generic
// CHECK: %[[INV:.*]] = arith.constant 5.000000e+00 : f32
// CHECK: %[[X:.*]] = arith.mulf %{{.*}}, %[[INV]] : f32
// CHECK: %[[T:.*]] = math.tanh %[[X]] : f32
// CHECK: %[[CAP:.*]] = arith.constant 2.000000e-01 : f32
// CHECK: %[[C:.*]] = arith.mulf %[[T]], %[[CAP]] : f32
// CHECK: arith.cmpi sgt
// CHECK: arith.select %{{.*}}, %{{.*}}, %[[C]] : f32
func.func @paged_softcap(%q: tensor<?x8x8xf32>, %kp: tensor<?x16x2x8xf32>, %vp: tensor<?x16x2x8xf32>,
                         %tables: tensor<?x?xi32>, %lens: tensor<?xi32>, %starts: tensor<?xi32>)
    -> tensor<?x8x8xf32> {
  %o = xfmr.paged_attention %q, %kp, %vp, %tables, %lens, %starts
      {block_size = 16 : i64, num_heads = 8 : i64, num_kv_heads = 2 : i64, scale = 0.35 : f32,
       softcap = 0.2 : f32, sinks = array<f32: 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0>}
      : tensor<?x8x8xf32>, tensor<?x16x2x8xf32>, tensor<?x16x2x8xf32>, tensor<?x?xi32>,
        tensor<?xi32>, tensor<?xi32>
  return %o : tensor<?x8x8xf32>
}

// -----

// Latent keys (DeepSeek's MLA, absorbed): a key is its value (the 16-wide
// latent) followed by its key-pool entry (the 4-wide RoPE key); each block's
// key tile is the two tiles side by side, the value tile the latent alone,
// and the result [T, Hq, 16].
// CHECK-LABEL: func.func @paged_latent(
// CHECK: %[[OUT:.*]] = tensor.empty(%{{.*}}) : tensor<?x4x16xf32>
// CHECK: %[[K:.*]] = tensor.extract_slice %{{.*}} : tensor<?x16x1x4xf32> to tensor<?x4xf32>
// CHECK: %[[V:.*]] = tensor.extract_slice %{{.*}} : tensor<?x16x1x16xf32> to tensor<?x16xf32>
// CHECK: %[[E:.*]] = tensor.empty(%{{.*}}) : tensor<?x20xf32>
// CHECK: %[[KV:.*]] = tensor.insert_slice %[[V]] into %[[E]][0, 0] [%{{.*}}, 16] [1, 1] : tensor<?x16xf32> into tensor<?x20xf32>
// CHECK: tensor.insert_slice %[[K]] into %[[KV]][0, 16] [%{{.*}}, 4] [1, 1] : tensor<?x4xf32> into tensor<?x20xf32>
func.func @paged_latent(%q: tensor<?x4x20xf32>, %kp: tensor<?x16x1x4xf32>, %vp: tensor<?x16x1x16xf32>,
                        %tables: tensor<?x?xi32>, %lens: tensor<?xi32>, %starts: tensor<?xi32>)
    -> tensor<?x4x16xf32> {
  %o = xfmr.paged_attention %q, %kp, %vp, %tables, %lens, %starts
      {block_size = 16 : i64, latent, num_heads = 4 : i64, num_kv_heads = 1 : i64, scale = 0.25 : f32}
      : tensor<?x4x20xf32>, tensor<?x16x1x4xf32>, tensor<?x16x1x16xf32>, tensor<?x?xi32>,
        tensor<?xi32>, tensor<?xi32>
  return %o : tensor<?x4x16xf32>
}

// -----

// Quantized latent pools: the latent and the RoPE key tiles are widened to
// f32 with their own rows' scales before they are joined into the key tile
// (one score product, no scale per key row left).
// CHECK-LABEL: func.func @paged_latent_int8(
// CHECK: %[[KS:.*]] = tensor.extract_slice %{{.*}} : tensor<?x16x1xf32> to tensor<?xf32>
// CHECK: %[[VS:.*]] = tensor.extract_slice %{{.*}} : tensor<?x16x1xf32> to tensor<?xf32>
// CHECK: %[[VF:.*]] = linalg.generic {{.*}} ins(%{{.*}}, %[[VS]] : tensor<?x16xi8>, tensor<?xf32>) outs(%{{.*}} : tensor<?x16xf32>)
// CHECK: %[[KF:.*]] = linalg.generic {{.*}} ins(%{{.*}}, %[[KS]] : tensor<?x4xi8>, tensor<?xf32>) outs(%{{.*}} : tensor<?x4xf32>)
// CHECK: tensor.insert_slice %[[VF]] into %{{.*}}[0, 0] [%{{.*}}, 16] [1, 1] : tensor<?x16xf32> into tensor<?x20xf32>
// CHECK: tensor.insert_slice %[[KF]] into %{{.*}}[0, 16] [%{{.*}}, 4] [1, 1] : tensor<?x4xf32> into tensor<?x20xf32>
func.func @paged_latent_int8(%q: tensor<?x4x20xf32>, %kp: tensor<?x16x1x4xi8>, %vp: tensor<?x16x1x16xi8>,
                             %tables: tensor<?x?xi32>, %lens: tensor<?xi32>, %starts: tensor<?xi32>,
                             %ks: tensor<?x16x1xf32>, %vs: tensor<?x16x1xf32>)
    -> tensor<?x4x16xf32> {
  %o = xfmr.paged_attention %q, %kp, %vp, %tables, %lens, %starts
      scales(%ks, %vs : tensor<?x16x1xf32>, tensor<?x16x1xf32>)
      {block_size = 16 : i64, latent, num_heads = 4 : i64, num_kv_heads = 1 : i64, scale = 0.25 : f32}
      : tensor<?x4x20xf32>, tensor<?x16x1x4xi8>, tensor<?x16x1x16xi8>, tensor<?x?xi32>,
        tensor<?xi32>, tensor<?xi32>
  return %o : tensor<?x4x16xf32>
}
