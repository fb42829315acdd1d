// RUN: xfmr-opt %s --xfmr-gpu-merge-modules | FileCheck %s

// Outlining's one module per kernel, every kernel named alike: one module,
// each kernel named after its old module, launches pointed at it; a global
// both modules cloned from the host is kept once; shared buffers aligned to
// 128 bytes (WMMA rows need 32).
// CHECK: gpu.module @a {
// CHECK:   memref.global "private" constant @table
// CHECK:   gpu.func @a() workgroup(%{{.*}} : memref<32x32xf32, #gpu.address_space<workgroup>> {llvm.align = 128 : i64}) kernel
// CHECK:   gpu.func @b() kernel
// CHECK-NOT: gpu.module @b
// CHECK: gpu.launch_func @a::@a
// CHECK: gpu.launch_func @a::@b
module attributes {gpu.container_module} {
  gpu.module @a {
    memref.global "private" constant @table : memref<2xf32> = dense<[1.0, 2.0]>
    gpu.func @k() workgroup(%tile : memref<32x32xf32, #gpu.address_space<workgroup>>) kernel {
      %t = memref.get_global @table : memref<2xf32>
      gpu.return
    }
  }
  gpu.module @b {
    memref.global "private" constant @table : memref<2xf32> = dense<[1.0, 2.0]>
    gpu.func @k() kernel {
      %t = memref.get_global @table : memref<2xf32>
      gpu.return
    }
  }
  func.func @host() {
    %c1 = arith.constant 1 : index
    gpu.launch_func @a::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1)
    gpu.launch_func @b::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1)
    return
  }
}
