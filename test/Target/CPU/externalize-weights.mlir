// RUN: xfmr-opt %s --xfmr-externalize-weights="min-bytes=64 weights-file=%t.bin" | FileCheck %s
// RUN: %python -c "import os,sys; print(os.path.getsize(sys.argv[1]))" %t.bin | FileCheck %s --check-prefix=SIZE

// The 32-float constant moves to the file at offset 0 (a view of the new
// leading argument); the 2-float one stays inline; the splat stays.
// CHECK: module attributes {{{.*}}xfmr.weights = {count = 1 : i64, size = 128 : i64}
// CHECK: func.func @main(%[[W:.*]]: memref<?xi8> {xfmr.weights}, %{{.*}}: tensor<32xf32>)
// CHECK: %[[V:.*]] = memref.view %[[W]][%{{.*}}][] : memref<?xi8> to memref<32xf32>
// CHECK: bufferization.to_tensor %[[V]] restrict
// CHECK: arith.constant dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>
// CHECK: arith.constant dense<5.000000e-01> : tensor<32xf32>
// SIZE: 128
func.func @main(%x: tensor<32xf32>) -> (tensor<32xf32>, tensor<2xf32>, tensor<32xf32>) {
  %big = arith.constant dense<[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0, 17.0, 18.0, 19.0, 20.0, 21.0, 22.0, 23.0, 24.0, 25.0, 26.0, 27.0, 28.0, 29.0, 30.0, 31.0]> : tensor<32xf32>
  %small = arith.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %splat = arith.constant dense<0.5> : tensor<32xf32>
  return %big, %small, %splat : tensor<32xf32>, tensor<2xf32>, tensor<32xf32>
}
