// RUN: xfmr-opt %s -split-input-file -verify-each -onnx-simplify-shapes | FileCheck %s

// onnx-simplify-shapes alternates shape inference with folding of the shape
// arithmetic exporters emit. Folded constants are hoisted to the top of the
// function and deduplicated, so constants are matched in any order.

// Shape of a fully static tensor is a constant.
// CHECK-LABEL: func.func @shape_static(
// CHECK: %[[S:.*]] = onnx.Constant() {value = dense<[2, 8, 64]> : tensor<3xi64>} : () -> tensor<3xi64>
// CHECK-NOT: onnx.Shape
// CHECK: return %[[S]]
func.func @shape_static(%x: tensor<2x8x64xf32>) -> tensor<3xi64> {
  %s = onnx.Shape(%x) : (tensor<2x8x64xf32>) -> tensor<3xi64>
  return %s : tensor<3xi64>
}

// -----

// Shape with start/end only reads the picked dims: a dynamic dim outside the
// window does not block the fold (negative start/end count from the back).
// CHECK-LABEL: func.func @shape_start_end_static_window(
// CHECK-DAG: %[[TAIL:.*]] = onnx.Constant() {value = dense<[16, 64]> : tensor<2xi64>} : () -> tensor<2xi64>
// CHECK-DAG: %[[MID:.*]] = onnx.Constant() {value = dense<16> : tensor<1xi64>} : () -> tensor<1xi64>
// CHECK-NOT: onnx.Shape
// CHECK: return %[[TAIL]], %[[MID]]
func.func @shape_start_end_static_window(%x: tensor<?x16x64xf32>) -> (tensor<2xi64>, tensor<1xi64>) {
  %tail = onnx.Shape(%x) {start = 1 : i64} : (tensor<?x16x64xf32>) -> tensor<2xi64>
  %mid = onnx.Shape(%x) {end = -1 : i64, start = -2 : i64} : (tensor<?x16x64xf32>) -> tensor<1xi64>
  return %tail, %mid : tensor<2xi64>, tensor<1xi64>
}

// -----

// Gather(Shape(x), 1) folds when dim 1 is static, even though x has other
// dynamic dims (so the Shape itself cannot fold).
// CHECK-LABEL: func.func @gather_of_shape_static_dim(
// CHECK: %[[D:.*]] = onnx.Constant() {value = dense<8> : tensor<i64>} : () -> tensor<i64>
// CHECK-NOT: onnx.Shape
// CHECK-NOT: onnx.Gather
// CHECK: return %[[D]]
func.func @gather_of_shape_static_dim(%x: tensor<?x8x?xf32>) -> tensor<i64> {
  %s = onnx.Shape(%x) : (tensor<?x8x?xf32>) -> tensor<3xi64>
  %i = onnx.Constant() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %d = onnx.Gather(%s, %i) {axis = 0 : i64} : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
  return %d : tensor<i64>
}

// -----

// Size of a static tensor is its element count.
// CHECK-LABEL: func.func @size_static(
// CHECK: %[[N:.*]] = onnx.Constant() {value = dense<1024> : tensor<i64>} : () -> tensor<i64>
// CHECK-NOT: onnx.Size
// CHECK: return %[[N]]
func.func @size_static(%x: tensor<2x8x64xf32>) -> tensor<i64> {
  %n = onnx.Size(%x) : (tensor<2x8x64xf32>) -> tensor<i64>
  return %n : tensor<i64>
}

// -----

// The exporter's head-split idiom: Shape -> Gather -> Unsqueeze -> Concat ->
// Reshape, with Shape recomputed per use as exporters do. With static input
// dims everything folds into a Reshape with a constant shape, the unranked
// Reshape result becomes static and the function signature follows.
// CHECK-LABEL: func.func @reshape_idiom_static(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<2x16x512xf32>) -> tensor<2x16x8x64xf32>
// CHECK: %[[SHAPE:.*]] = onnx.Constant() {value = dense<[2, 16, 8, 64]> : tensor<4xi64>} : () -> tensor<4xi64>
// CHECK-NOT: onnx.Shape
// CHECK-NOT: onnx.Gather
// CHECK-NOT: onnx.Unsqueeze
// CHECK-NOT: onnx.Concat
// CHECK: %[[R:.*]] = onnx.Reshape(%[[X]], %[[SHAPE]]) : (tensor<2x16x512xf32>, tensor<4xi64>) -> tensor<2x16x8x64xf32>
// CHECK: return %[[R]] : tensor<2x16x8x64xf32>
func.func @reshape_idiom_static(%x: tensor<2x16x512xf32>) -> tensor<*xf32> {
  %c0 = onnx.Constant() {value = dense<0> : tensor<i64>} : () -> tensor<i64>
  %c1 = onnx.Constant() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %s0 = onnx.Shape(%x) : (tensor<2x16x512xf32>) -> tensor<3xi64>
  %b = onnx.Gather(%s0, %c0) {axis = 0 : i64} : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
  %s1 = onnx.Shape(%x) : (tensor<2x16x512xf32>) -> tensor<3xi64>
  %l = onnx.Gather(%s1, %c1) {axis = 0 : i64} : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
  %ax = onnx.Constant() {value = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %bu = onnx.Unsqueeze(%b, %ax) : (tensor<i64>, tensor<1xi64>) -> tensor<1xi64>
  %lu = onnx.Unsqueeze(%l, %ax) : (tensor<i64>, tensor<1xi64>) -> tensor<1xi64>
  %heads = onnx.Constant() {value = dense<[8, 64]> : tensor<2xi64>} : () -> tensor<2xi64>
  %shape = onnx.Concat(%bu, %lu, %heads) {axis = 0 : i64}
      : (tensor<1xi64>, tensor<1xi64>, tensor<2xi64>) -> tensor<4xi64>
  %r = onnx.Reshape(%x, %shape) : (tensor<2x16x512xf32>, tensor<4xi64>) -> tensor<*xf32>
  return %r : tensor<*xf32>
}

// -----

// The same idiom with a dynamic batch: Shape of the dynamic dim must stay
// (it is only known at run time) and the Reshape result keeps a `?` there.
// The sequence dim still folds, the duplicate Shape is merged, and the other
// Reshape dims are refined through the Concat.
// CHECK-LABEL: func.func @negative_reshape_dynamic_batch(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<?x16x512xf32>) -> tensor<?x16x8x64xf32>
// CHECK-DAG: %[[SEQ:.*]] = onnx.Constant() {value = dense<16> : tensor<1xi64>} : () -> tensor<1xi64>
// CHECK-DAG: %[[HEADS:.*]] = onnx.Constant() {value = dense<[8, 64]> : tensor<2xi64>} : () -> tensor<2xi64>
// CHECK: %[[S:.*]] = onnx.Shape(%[[X]]) : (tensor<?x16x512xf32>) -> tensor<3xi64>
// CHECK-NOT: onnx.Shape
// CHECK: %[[B:.*]] = onnx.Gather(%[[S]], %{{[a-z0-9]+}}) : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
// CHECK: %[[BU:.*]] = onnx.Unsqueeze(%[[B]], %{{[a-z0-9]+}})
// CHECK: %[[SHAPE:.*]] = onnx.Concat(%[[BU]], %[[SEQ]], %[[HEADS]]) {axis = 0 : i64}
// CHECK: %[[R:.*]] = onnx.Reshape(%[[X]], %[[SHAPE]]) : (tensor<?x16x512xf32>, tensor<4xi64>) -> tensor<?x16x8x64xf32>
// CHECK: return %[[R]] : tensor<?x16x8x64xf32>
func.func @negative_reshape_dynamic_batch(%x: tensor<?x16x512xf32>) -> tensor<*xf32> {
  %c0 = onnx.Constant() {value = dense<0> : tensor<i64>} : () -> tensor<i64>
  %c1 = onnx.Constant() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %s0 = onnx.Shape(%x) : (tensor<?x16x512xf32>) -> tensor<3xi64>
  %b = onnx.Gather(%s0, %c0) {axis = 0 : i64} : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
  %s1 = onnx.Shape(%x) : (tensor<?x16x512xf32>) -> tensor<3xi64>
  %l = onnx.Gather(%s1, %c1) {axis = 0 : i64} : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
  %ax = onnx.Constant() {value = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %bu = onnx.Unsqueeze(%b, %ax) : (tensor<i64>, tensor<1xi64>) -> tensor<1xi64>
  %lu = onnx.Unsqueeze(%l, %ax) : (tensor<i64>, tensor<1xi64>) -> tensor<1xi64>
  %heads = onnx.Constant() {value = dense<[8, 64]> : tensor<2xi64>} : () -> tensor<2xi64>
  %shape = onnx.Concat(%bu, %lu, %heads) {axis = 0 : i64}
      : (tensor<1xi64>, tensor<1xi64>, tensor<2xi64>) -> tensor<4xi64>
  %r = onnx.Reshape(%x, %shape) : (tensor<?x16x512xf32>, tensor<4xi64>) -> tensor<*xf32>
  return %r : tensor<*xf32>
}

// -----

// Range on constant integer bounds folds; its `?` length becomes static.
// CHECK-LABEL: func.func @range_int(
// CHECK-SAME: -> tensor<4xi64>
// CHECK: %[[R:.*]] = onnx.Constant() {value = dense<[1, 3, 5, 7]> : tensor<4xi64>} : () -> tensor<4xi64>
// CHECK-NOT: onnx.Range
// CHECK: return %[[R]] : tensor<4xi64>
func.func @range_int() -> tensor<?xi64> {
  %start = onnx.Constant() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %limit = onnx.Constant() {value = dense<8> : tensor<i64>} : () -> tensor<i64>
  %delta = onnx.Constant() {value = dense<2> : tensor<i64>} : () -> tensor<i64>
  %r = onnx.Range(%start, %limit, %delta) : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  return %r : tensor<?xi64>
}

// -----

// Range on constant float bounds folds as well.
// CHECK-LABEL: func.func @range_float(
// CHECK: %[[R:.*]] = onnx.Constant() {value = dense<[0.000000e+00, 2.500000e-01, 5.000000e-01, 7.500000e-01]> : tensor<4xf32>} : () -> tensor<4xf32>
// CHECK-NOT: onnx.Range
// CHECK: return %[[R]] : tensor<4xf32>
func.func @range_float() -> tensor<?xf32> {
  %start = onnx.Constant() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
  %limit = onnx.Constant() {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
  %delta = onnx.Constant() {value = dense<0.25> : tensor<f32>} : () -> tensor<f32>
  %r = onnx.Range(%start, %limit, %delta) : (tensor<f32>, tensor<f32>, tensor<f32>) -> tensor<?xf32>
  return %r : tensor<?xf32>
}

// -----

// OneHot of constants folds (TorchScript's repeat_interleave builds Tile
// repeats this way); the Tile behind it gets a static shape. Negative
// indices count from the end; out-of-range ones give an all-off row.
// CHECK-LABEL: func.func @one_hot_tile_repeats(
// CHECK-SAME: -> (tensor<?x2x4xf32>, tensor<3x4xi64>)
// CHECK-DAG: onnx.Constant() {value = dense<[1, 2, 1]> : tensor<3xi64>}
// CHECK-DAG: onnx.Constant() {value = dense<{{\[}}[0, 0, 0, 7], [7, 0, 0, 0], [0, 0, 0, 0]]> : tensor<3x4xi64>}
// CHECK-NOT: onnx.OneHot
// CHECK: onnx.Tile
func.func @one_hot_tile_repeats(%x: tensor<?x1x4xf32>) -> (tensor<*xf32>, tensor<?x?xi64>) {
  %idx = onnx.Constant() {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %depth = onnx.Constant() {value = dense<3> : tensor<i64>} : () -> tensor<i64>
  %vals = onnx.Constant() {value = dense<[1, 2]> : tensor<2xi64>} : () -> tensor<2xi64>
  %oh = onnx.OneHot(%idx, %depth, %vals) : (tensor<1xi64>, tensor<i64>, tensor<2xi64>) -> tensor<1x3xi64>
  %flat = onnx.Constant() {value = dense<-1> : tensor<1xi64>} : () -> tensor<1xi64>
  %reps = onnx.Reshape(%oh, %flat) : (tensor<1x3xi64>, tensor<1xi64>) -> tensor<3xi64>
  %t = onnx.Tile(%x, %reps) : (tensor<?x1x4xf32>, tensor<3xi64>) -> tensor<*xf32>
  %idx2 = onnx.Constant() {value = dense<[3, -4, 9]> : tensor<3xi64>} : () -> tensor<3xi64>
  %depth2 = onnx.Constant() {value = dense<4> : tensor<1xi64>} : () -> tensor<1xi64>
  %vals2 = onnx.Constant() {value = dense<[0, 7]> : tensor<2xi64>} : () -> tensor<2xi64>
  %oh2 = onnx.OneHot(%idx2, %depth2, %vals2) : (tensor<3xi64>, tensor<1xi64>, tensor<2xi64>) -> tensor<?x?xi64>
  return %t, %oh2 : tensor<*xf32>, tensor<?x?xi64>
}

// -----

// ConstantOfShape of a constant shape is a splat of its value; without a
// value attribute the fill is 0.
// CHECK-LABEL: func.func @constant_of_shape(
// CHECK-SAME: -> (tensor<2x3xf32>, tensor<4xi64>)
// CHECK-DAG: %[[F:.*]] = onnx.Constant() {value = dense<1.500000e+00> : tensor<2x3xf32>} : () -> tensor<2x3xf32>
// CHECK-DAG: %[[Z:.*]] = onnx.Constant() {value = dense<0> : tensor<4xi64>} : () -> tensor<4xi64>
// CHECK-NOT: onnx.ConstantOfShape
// CHECK: return %[[F]], %[[Z]]
func.func @constant_of_shape() -> (tensor<*xf32>, tensor<?xi64>) {
  %shape = onnx.Constant() {value = dense<[2, 3]> : tensor<2xi64>} : () -> tensor<2xi64>
  %f = onnx.ConstantOfShape(%shape) {value = dense<1.5> : tensor<1xf32>} : (tensor<2xi64>) -> tensor<*xf32>
  %n = onnx.Constant() {value = dense<4> : tensor<1xi64>} : () -> tensor<1xi64>
  %z = onnx.ConstantOfShape(%n) : (tensor<1xi64>) -> tensor<?xi64>
  return %f, %z : tensor<*xf32>, tensor<?xi64>
}

// -----

// Expand of a constant to a constant shape broadcasts the data.
// CHECK-LABEL: func.func @expand(
// CHECK: %[[E:.*]] = onnx.Constant() {value = dense<{{\[}}[7, 7, 7], [8, 8, 8]]> : tensor<2x3xi64>} : () -> tensor<2x3xi64>
// CHECK-NOT: onnx.Expand
// CHECK: return %[[E]] : tensor<2x3xi64>
func.func @expand() -> tensor<*xi64> {
  %v = onnx.Constant() {value = dense<[[7], [8]]> : tensor<2x1xi64>} : () -> tensor<2x1xi64>
  %shape = onnx.Constant() {value = dense<[2, 3]> : tensor<2xi64>} : () -> tensor<2xi64>
  %e = onnx.Expand(%v, %shape) : (tensor<2x1xi64>, tensor<2xi64>) -> tensor<*xi64>
  return %e : tensor<*xi64>
}

// -----

// Equal on constants gives a constant i1 tensor (with broadcasting), and
// Where on constants selects elementwise.
// CHECK-LABEL: func.func @equal_where(
// CHECK-SAME: -> (tensor<3xi1>, tensor<3xf32>)
// CHECK-DAG: %[[EQ:.*]] = onnx.Constant() {value = dense<[false, true, false]> : tensor<3xi1>} : () -> tensor<3xi1>
// CHECK-DAG: %[[W:.*]] = onnx.Constant() {value = dense<[0.000000e+00, -1.000000e+04, 0.000000e+00]> : tensor<3xf32>} : () -> tensor<3xf32>
// CHECK-NOT: onnx.Equal
// CHECK-NOT: onnx.Where
// CHECK: return %[[EQ]], %[[W]]
func.func @equal_where() -> (tensor<*xi1>, tensor<*xf32>) {
  %a = onnx.Constant() {value = dense<[0, 1, 2]> : tensor<3xi64>} : () -> tensor<3xi64>
  %one = onnx.Constant() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %eq = onnx.Equal(%a, %one) : (tensor<3xi64>, tensor<i64>) -> tensor<*xi1>
  %masked = onnx.Constant() {value = dense<-1.0e4> : tensor<f32>} : () -> tensor<f32>
  %zero = onnx.Constant() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
  %w = onnx.Where(%eq, %masked, %zero) : (tensor<*xi1>, tensor<f32>, tensor<f32>) -> tensor<*xf32>
  return %eq, %w : tensor<*xi1>, tensor<*xf32>
}

// -----

// A causal mask built from the sequence length of a static input: Shape ->
// Gather -> Range -> Unsqueeze x2 -> LessOrEqual -> Where all fold into one
// 4x4 constant.
// CHECK-LABEL: func.func @causal_mask_from_shape(
// CHECK-SAME: -> tensor<4x4xf32>
// CHECK: %[[M:.*]] = onnx.Constant() {value = dense<{{\[}}[0.000000e+00, -1.000000e+04, -1.000000e+04, -1.000000e+04], [0.000000e+00, 0.000000e+00, -1.000000e+04, -1.000000e+04], [0.000000e+00, 0.000000e+00, 0.000000e+00, -1.000000e+04], [0.000000e+00, 0.000000e+00, 0.000000e+00, 0.000000e+00]]> : tensor<4x4xf32>}
// CHECK-NOT: onnx.Shape
// CHECK-NOT: onnx.Range
// CHECK-NOT: onnx.Where
// CHECK: return %[[M]] : tensor<4x4xf32>
func.func @causal_mask_from_shape(%x: tensor<1x4x64xf32>) -> tensor<*xf32> {
  %s = onnx.Shape(%x) : (tensor<1x4x64xf32>) -> tensor<3xi64>
  %c0 = onnx.Constant() {value = dense<0> : tensor<i64>} : () -> tensor<i64>
  %c1 = onnx.Constant() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %n = onnx.Gather(%s, %c1) {axis = 0 : i64} : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
  %r = onnx.Range(%c0, %n, %c1) : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  %a0 = onnx.Constant() {value = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %a1 = onnx.Constant() {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %rows = onnx.Unsqueeze(%r, %a1) : (tensor<?xi64>, tensor<1xi64>) -> tensor<*xi64>
  %cols = onnx.Unsqueeze(%r, %a0) : (tensor<?xi64>, tensor<1xi64>) -> tensor<*xi64>
  %visible = onnx.LessOrEqual(%cols, %rows) : (tensor<*xi64>, tensor<*xi64>) -> tensor<*xi1>
  %zero = onnx.Constant() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
  %masked = onnx.Constant() {value = dense<-1.0e4> : tensor<f32>} : () -> tensor<f32>
  %m = onnx.Where(%visible, %zero, %masked) : (tensor<*xi1>, tensor<f32>, tensor<f32>) -> tensor<*xf32>
  return %m : tensor<*xf32>
}

// -----

// Without any constant to fold, shape inference alone refines unranked
// results through broadcasting, MatMul, Transpose, Softmax and ReduceMean;
// the signature follows the returned value.
// CHECK-LABEL: func.func @refine_unranked_results(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<2x16x64xf32>, %[[B:[a-z0-9]+]]: tensor<64xf32>, %[[W:[a-z0-9]+]]: tensor<64x32xf32>) -> tensor<2x32xf32>
// CHECK: %[[ADD:.*]] = onnx.Add(%[[X]], %[[B]]) : (tensor<2x16x64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>
// CHECK: %[[MM:.*]] = onnx.MatMul(%[[ADD]], %[[W]]) : (tensor<2x16x64xf32>, tensor<64x32xf32>) -> tensor<2x16x32xf32>
// CHECK: %[[T:.*]] = onnx.Transpose(%[[MM]]) {perm = [0, 2, 1]} : (tensor<2x16x32xf32>) -> tensor<2x32x16xf32>
// CHECK: %[[SM:.*]] = onnx.Softmax(%[[T]]) : (tensor<2x32x16xf32>) -> tensor<2x32x16xf32>
// CHECK: %[[RM:.*]] = onnx.ReduceMean(%[[SM]], %{{[a-z0-9]+}}) {keepdims = 0 : i64} : (tensor<2x32x16xf32>, tensor<1xi64>) -> tensor<2x32xf32>
// CHECK: return %[[RM]] : tensor<2x32xf32>
func.func @refine_unranked_results(%x: tensor<2x16x64xf32>, %b: tensor<64xf32>, %w: tensor<64x32xf32>)
    -> tensor<*xf32> {
  %0 = onnx.Add(%x, %b) : (tensor<2x16x64xf32>, tensor<64xf32>) -> tensor<*xf32>
  %1 = onnx.MatMul(%0, %w) : (tensor<*xf32>, tensor<64x32xf32>) -> tensor<*xf32>
  %2 = onnx.Transpose(%1) {perm = [0, 2, 1]} : (tensor<*xf32>) -> tensor<*xf32>
  %3 = onnx.Softmax(%2) : (tensor<*xf32>) -> tensor<*xf32>
  %axes = onnx.Constant() {value = dense<-1> : tensor<1xi64>} : () -> tensor<1xi64>
  %4 = onnx.ReduceMean(%3, %axes) {keepdims = 0 : i64} : (tensor<*xf32>, tensor<1xi64>) -> tensor<*xf32>
  return %4 : tensor<*xf32>
}

// -----

// A Gather index outside the shape's length is a run-time error in ONNX; the
// pass must not fold it, neither through the evaluator (x static: its Shape
// becomes a constant) nor through the Gather-of-Shape rule (y dynamic).
// CHECK-LABEL: func.func @negative_gather_out_of_range(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<2x3xf32>, %[[Y:[a-z0-9]+]]: tensor<?x3xf32>
// CHECK-DAG: %[[I:.*]] = onnx.Constant() {value = dense<5> : tensor<i64>} : () -> tensor<i64>
// CHECK-DAG: %[[SX:.*]] = onnx.Constant() {value = dense<[2, 3]> : tensor<2xi64>} : () -> tensor<2xi64>
// CHECK: %[[GX:.*]] = onnx.Gather(%[[SX]], %[[I]]) : (tensor<2xi64>, tensor<i64>) -> tensor<i64>
// CHECK: %[[SY:.*]] = onnx.Shape(%[[Y]]) : (tensor<?x3xf32>) -> tensor<2xi64>
// CHECK: %[[GY:.*]] = onnx.Gather(%[[SY]], %[[I]]) : (tensor<2xi64>, tensor<i64>) -> tensor<i64>
// CHECK: return %[[GX]], %[[GY]]
func.func @negative_gather_out_of_range(%x: tensor<2x3xf32>, %y: tensor<?x3xf32>)
    -> (tensor<i64>, tensor<i64>) {
  %i = onnx.Constant() {value = dense<5> : tensor<i64>} : () -> tensor<i64>
  %sx = onnx.Shape(%x) : (tensor<2x3xf32>) -> tensor<2xi64>
  %gx = onnx.Gather(%sx, %i) {axis = 0 : i64} : (tensor<2xi64>, tensor<i64>) -> tensor<i64>
  %sy = onnx.Shape(%y) : (tensor<?x3xf32>) -> tensor<2xi64>
  %gy = onnx.Gather(%sy, %i) {axis = 0 : i64} : (tensor<2xi64>, tensor<i64>) -> tensor<i64>
  return %gx, %gy : tensor<i64>, tensor<i64>
}

// -----

// Split with constant sizes refines each result on the split axis and keeps
// the other dims (dynamic ones included).
// CHECK-LABEL: func.func @split_constant_sizes(
// CHECK-SAME: -> (tensor<2x?x64xf32>, tensor<2x?x16xf32>, tensor<2x?x16xf32>)
// CHECK: %[[S:.*]]:3 = onnx.Split(%{{[a-z0-9]+}}, %{{[a-z0-9]+}}) {axis = -1 : i64} : (tensor<2x?x96xf32>, tensor<3xi64>) -> (tensor<2x?x64xf32>, tensor<2x?x16xf32>, tensor<2x?x16xf32>)
// CHECK: return %[[S]]#0, %[[S]]#1, %[[S]]#2 : tensor<2x?x64xf32>, tensor<2x?x16xf32>, tensor<2x?x16xf32>
func.func @split_constant_sizes(%x: tensor<2x?x96xf32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>) {
  %sizes = onnx.Constant() {value = dense<[64, 16, 16]> : tensor<3xi64>} : () -> tensor<3xi64>
  %q, %k, %v = onnx.Split(%x, %sizes) {axis = -1 : i64}
      : (tensor<2x?x96xf32>, tensor<3xi64>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>)
  return %q, %k, %v : tensor<*xf32>, tensor<*xf32>, tensor<*xf32>
}

// -----

// Split by num_outputs of an uneven dim: the spec makes the last chunk the
// smaller one (10 = 4 + 4 + 2).
// CHECK-LABEL: func.func @split_num_outputs_uneven(
// CHECK: onnx.Split(%{{[a-z0-9]+}}, %{{[a-z0-9]+}}) {num_outputs = 3 : i64} : (tensor<10x8xf32>, none) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<2x8xf32>)
func.func @split_num_outputs_uneven(%x: tensor<10x8xf32>) -> (tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>) {
  %none = onnx.NoValue : none
  %0:3 = onnx.Split(%x, %none) {num_outputs = 3 : i64}
      : (tensor<10x8xf32>, none) -> (tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>)
  return %0#0, %0#1, %0#2 : tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>
}

// -----

// OLMo-2's `view(*input_shape, -1, head_dim)` of a normalised projection:
// the rows of the RMSNorm (a ReduceMean over the last axis, keepdims) keep
// the origin of the input's dims, so the Reshape's -1 is inferred (4 heads)
// although batch and sequence are dynamic. With keepdims = 0 the reduced
// axis is gone and the dims after it shift.
// CHECK-LABEL: func.func @reshape_minus_one_through_reduce(
// CHECK: onnx.Reshape({{.*}}) : (tensor<?x?x32xf32>, tensor<4xi64>) -> tensor<?x?x4x8xf32>
// CHECK: onnx.Reshape({{.*}}) : (tensor<?x32xf32>, tensor<3xi64>) -> tensor<?x4x8xf32>
func.func @reshape_minus_one_through_reduce(%x: tensor<?x?x32xf32>, %w: tensor<32x32xf32>)
    -> (tensor<*xf32>, tensor<*xf32>) {
  %q = onnx.MatMul(%x, %w) : (tensor<?x?x32xf32>, tensor<32x32xf32>) -> tensor<?x?x32xf32>
  %two = onnx.Constant() {value = dense<2.0> : tensor<f32>} : () -> tensor<f32>
  %sq = onnx.Pow(%q, %two) : (tensor<?x?x32xf32>, tensor<f32>) -> tensor<?x?x32xf32>
  %last = onnx.Constant() {value = dense<-1> : tensor<1xi64>} : () -> tensor<1xi64>
  %ms = onnx.ReduceMean(%sq, %last) : (tensor<?x?x32xf32>, tensor<1xi64>) -> tensor<?x?x1xf32>
  %n = onnx.Mul(%q, %ms) : (tensor<?x?x32xf32>, tensor<?x?x1xf32>) -> tensor<?x?x32xf32>
  %s = onnx.Shape(%x) {end = 2 : i64} : (tensor<?x?x32xf32>) -> tensor<2xi64>
  %tail = onnx.Constant() {value = dense<[-1, 8]> : tensor<2xi64>} : () -> tensor<2xi64>
  %shape = onnx.Concat(%s, %tail) {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %r = onnx.Reshape(%n, %shape) : (tensor<?x?x32xf32>, tensor<4xi64>) -> tensor<*xf32>
  %mid = onnx.Constant() {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %m = onnx.ReduceMean(%q, %mid) {keepdims = 0 : i64} : (tensor<?x?x32xf32>, tensor<1xi64>) -> tensor<?x32xf32>
  %zero = onnx.Constant() {value = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %b = onnx.Gather(%s, %zero) {axis = 0 : i64} : (tensor<2xi64>, tensor<1xi64>) -> tensor<1xi64>
  %shape2 = onnx.Concat(%b, %tail) {axis = 0 : i64} : (tensor<1xi64>, tensor<2xi64>) -> tensor<3xi64>
  %r2 = onnx.Reshape(%m, %shape2) : (tensor<?x32xf32>, tensor<3xi64>) -> tensor<*xf32>
  return %r, %r2 : tensor<*xf32>, tensor<*xf32>
}

// -----

// Graph inputs' dims with the same dim_param are one dimension (the ONNX
// IR): a dynamo export without value_info reshapes the embedded input_ids
// with the batch and sequence of attention_mask, and the -1 is inferred.
// Dims that only look alike (no name, or another name) stay apart.
// CHECK-LABEL: func.func @reshape_minus_one_named_dims(
// CHECK: onnx.Reshape({{.*}}) : (tensor<?x?x32xf32>, tensor<4xi64>) -> tensor<?x?x4x8xf32>
// CHECK: onnx.Reshape({{.*}}) : (tensor<?x?x32xf32>, tensor<4xi64>) -> tensor<?x?x?x8xf32>
func.func @reshape_minus_one_named_dims(
    %x: tensor<?x?x32xf32> {onnx.dim_params = ["batch", "sequence", ""]},
    %mask: tensor<?x?xi64> {onnx.dim_params = ["batch", "sequence"]},
    %other: tensor<?x?xi64> {onnx.dim_params = ["batch", "other"]})
    -> (tensor<*xf32>, tensor<*xf32>) {
  %tail = onnx.Constant() {value = dense<[-1, 8]> : tensor<2xi64>} : () -> tensor<2xi64>
  %s = onnx.Shape(%mask) : (tensor<?x?xi64>) -> tensor<2xi64>
  %shape = onnx.Concat(%s, %tail) {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %r = onnx.Reshape(%x, %shape) : (tensor<?x?x32xf32>, tensor<4xi64>) -> tensor<*xf32>
  %o = onnx.Shape(%other) : (tensor<?x?xi64>) -> tensor<2xi64>
  %shape2 = onnx.Concat(%o, %tail) {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %r2 = onnx.Reshape(%x, %shape2) : (tensor<?x?x32xf32>, tensor<4xi64>) -> tensor<*xf32>
  return %r, %r2 : tensor<*xf32>, tensor<*xf32>
}

// -----

// A KV cache's past + new length: the Concat of past and new latents along
// the sequence is matched by the shape arithmetic Shape(past)[2] +
// Shape(new)[1] (DeepSeek-V3's `kv_b_proj(latent).view(B, P + S, -1, 16)`),
// so the -1 is inferred; a sum of other dims is not.
// CHECK-LABEL: func.func @reshape_minus_one_past_plus_new(
// CHECK: onnx.Reshape({{.*}}) : (tensor<1x1x?x64xf32>, tensor<4xi64>) -> tensor<1x?x4x16xf32>
// CHECK: onnx.Reshape({{.*}}) : (tensor<1x1x?x64xf32>, tensor<4xi64>) -> tensor<1x?x?x16xf32>
func.func @reshape_minus_one_past_plus_new(%past: tensor<1x1x?x64xf32>, %new: tensor<1x1x?x64xf32>,
                                           %ids: tensor<1x?xi64>)
    -> (tensor<*xf32>, tensor<*xf32>) {
  %kv = onnx.Concat(%past, %new) {axis = -2 : i64} : (tensor<1x1x?x64xf32>, tensor<1x1x?x64xf32>) -> tensor<?x1x?x64xf32>
  %p = onnx.Shape(%past) {start = 2 : i64, end = 3 : i64} : (tensor<1x1x?x64xf32>) -> tensor<1xi64>
  %n = onnx.Shape(%new) {start = 2 : i64, end = 3 : i64} : (tensor<1x1x?x64xf32>) -> tensor<1xi64>
  %i = onnx.Shape(%ids) {start = 1 : i64, end = 2 : i64} : (tensor<1x?xi64>) -> tensor<1xi64>
  %len = onnx.Add(%p, %n) : (tensor<1xi64>, tensor<1xi64>) -> tensor<1xi64>
  %one = onnx.Constant() {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %tail = onnx.Constant() {value = dense<[-1, 16]> : tensor<2xi64>} : () -> tensor<2xi64>
  %shape = onnx.Concat(%one, %len, %tail) {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>, tensor<2xi64>) -> tensor<4xi64>
  %r = onnx.Reshape(%kv, %shape) : (tensor<?x1x?x64xf32>, tensor<4xi64>) -> tensor<*xf32>
  %len2 = onnx.Add(%p, %i) : (tensor<1xi64>, tensor<1xi64>) -> tensor<1xi64>
  %shape2 = onnx.Concat(%one, %len2, %tail) {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>, tensor<2xi64>) -> tensor<4xi64>
  %r2 = onnx.Reshape(%kv, %shape2) : (tensor<?x1x?x64xf32>, tensor<4xi64>) -> tensor<*xf32>
  return %r, %r2 : tensor<*xf32>, tensor<*xf32>
}

// -----

// Attributes left out take the schema's default, which the generated
// accessors apply: Flatten's axis 1, TopK's and OneHot's axis -1, ArgMax's
// axis 0 and keepdims 1, ReduceSum's keepdims 1 (no axes: every axis), and
// Transpose without perm reverses the dims.
// CHECK-LABEL: func.func @default_attributes(
// CHECK: onnx.Flatten{{.*}} -> tensor<2x12xf32>
// CHECK: onnx.TopK{{.*}} -> (tensor<2x3x2xf32>, tensor<2x3x2xi64>)
// CHECK: onnx.ArgMax{{.*}} -> tensor<1x3x4xi64>
// CHECK: onnx.ReduceSum{{.*}} -> tensor<1x1x1xf32>
// CHECK: onnx.Transpose{{.*}} -> tensor<4x3x2xf32>
// CHECK: onnx.OneHot{{.*}} -> tensor<5x7xf32>
func.func @default_attributes(%x: tensor<2x3x4xf32>, %i: tensor<5xi64>)
    -> (tensor<*xf32>, tensor<*xf32>, tensor<*xi64>, tensor<*xi64>,
        tensor<*xf32>, tensor<*xf32>, tensor<*xf32>) {
  %f = onnx.Flatten(%x) : (tensor<2x3x4xf32>) -> tensor<*xf32>
  %k = onnx.Constant() {value = dense<2> : tensor<1xi64>} : () -> tensor<1xi64>
  %v, %idx = onnx.TopK(%x, %k) : (tensor<2x3x4xf32>, tensor<1xi64>) -> (tensor<*xf32>, tensor<*xi64>)
  %am = onnx.ArgMax(%x) : (tensor<2x3x4xf32>) -> tensor<*xi64>
  %none = onnx.NoValue : none
  %rs = onnx.ReduceSum(%x, %none) : (tensor<2x3x4xf32>, none) -> tensor<*xf32>
  %t = onnx.Transpose(%x) : (tensor<2x3x4xf32>) -> tensor<*xf32>
  %depth = onnx.Constant() {value = dense<7> : tensor<i64>} : () -> tensor<i64>
  %on_off = onnx.Constant() {value = dense<[0.0, 1.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %oh = onnx.OneHot(%i, %depth, %on_off) : (tensor<5xi64>, tensor<i64>, tensor<2xf32>) -> tensor<*xf32>
  return %f, %v, %idx, %am, %rs, %t, %oh
      : tensor<*xf32>, tensor<*xf32>, tensor<*xi64>, tensor<*xi64>,
        tensor<*xf32>, tensor<*xf32>, tensor<*xf32>
}
