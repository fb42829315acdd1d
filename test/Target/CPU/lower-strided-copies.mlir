// RUN: xfmr-opt %s --split-input-file -xfmr-lower-strided-copies | FileCheck %s

// A copy out of a strided view would call MLIR's memrefCopy runtime helper,
// which artifacts do not link: it becomes a linalg.copy (loops later).
// CHECK-LABEL: func.func @strided_source
// CHECK-SAME: (%[[SRC:[a-z0-9]+]]: memref<4x8xf32>, %[[DST:[a-z0-9]+]]: memref<4x4xf32>)
// CHECK: %[[VIEW:.*]] = memref.subview %[[SRC]]
// CHECK-NOT: memref.copy
// CHECK: linalg.copy ins(%[[VIEW]] : memref<4x4xf32, strided<[8, 1]>>) outs(%[[DST]] : memref<4x4xf32>)
func.func @strided_source(%src: memref<4x8xf32>, %dst: memref<4x4xf32>) {
  %view = memref.subview %src[0, 0] [4, 4] [1, 1] : memref<4x8xf32> to memref<4x4xf32, strided<[8, 1]>>
  memref.copy %view, %dst : memref<4x4xf32, strided<[8, 1]>> to memref<4x4xf32>
  return
}

// -----

// The same for a strided target.
// CHECK-LABEL: func.func @strided_target
// CHECK-NOT: memref.copy
// CHECK: linalg.copy
func.func @strided_target(%src: memref<4x4xf32>, %dst: memref<4x8xf32>) {
  %view = memref.subview %dst[0, 4] [4, 4] [1, 1] : memref<4x8xf32> to memref<4x4xf32, strided<[8, 1], offset: 4>>
  memref.copy %src, %view : memref<4x4xf32> to memref<4x4xf32, strided<[8, 1], offset: 4>>
  return
}

// -----

// negative_contiguous: a copy between identity layouts stays memref.copy
// (it lowers to memcpy).
// CHECK-LABEL: func.func @negative_contiguous
// CHECK: memref.copy %{{.*}}, %{{.*}} : memref<4x4xf32> to memref<4x4xf32>
// CHECK-NOT: linalg.copy
func.func @negative_contiguous(%src: memref<4x4xf32>, %dst: memref<4x4xf32>) {
  memref.copy %src, %dst : memref<4x4xf32> to memref<4x4xf32>
  return
}
