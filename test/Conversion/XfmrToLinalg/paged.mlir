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
