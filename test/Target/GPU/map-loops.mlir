// RUN: xfmr-opt %s --split-input-file --xfmr-gpu-map-loops | FileCheck %s
// RUN: xfmr-opt %s --split-input-file --xfmr-gpu-map-loops=emulate=true | FileCheck %s --check-prefix=EMU

// A 2-D nest is one kernel over its linearised space: 256 threads a block,
// each thread the point gid = bid * 256 + tid if gid < 3 * n, the innermost
// dimension varying fastest.
// CHECK-LABEL: func.func @nest
//       CHECK:   %[[SPAN:.*]] = arith.subi %arg1, %c0
//       CHECK:   %[[CNT:.*]] = arith.ceildivsi %[[SPAN]], %c1
//       CHECK:   %[[N:.*]] = arith.maxsi %[[CNT]], %{{.*}}
//       CHECK:   %[[TOTAL:.*]] = arith.muli %{{.*}}, %[[N]]
//       CHECK:   %[[BLOCKS:.*]] = arith.ceildivsi %[[TOTAL]], %c256
//       CHECK:   %[[GRID:.*]] = arith.maxsi %[[BLOCKS]], %c1
//       CHECK:   gpu.launch blocks(%[[BX:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %[[GRID]], %{{.*}} = %c1{{.*}}, %{{.*}} = %c1{{.*}}) threads(%[[TX:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %c256, %{{.*}}) module(@xfmr_kernels) function(@k0) {
//       CHECK:     %[[B0:.*]] = arith.muli %[[BX]], %c256
//       CHECK:     %[[GID:.*]] = arith.addi %[[B0]], %[[TX]]
//       CHECK:     %[[IN:.*]] = arith.cmpi slt, %[[GID]], %[[TOTAL]]
//       CHECK:     scf.if %[[IN]] {
//       CHECK:       %[[J:.*]] = arith.remsi %[[GID]], %[[N]]
//       CHECK:       %[[I:.*]] = arith.divsi %[[GID]], %[[N]]
//       CHECK:       memref.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}]
//       CHECK:     gpu.terminator
//   CHECK-NOT:   scf.parallel

// The emulated grid: host loops over blocks and threads, same guard.
// EMU-LABEL: func.func @nest
//       EMU:   scf.for %[[B:.*]] = %c0{{.*}} to %{{.*}} step %c1
//       EMU:     scf.for %[[T:.*]] = %c0{{.*}} to %c256 step %c1
//       EMU:       arith.cmpi slt
//       EMU:       scf.if
//   EMU-NOT:   gpu.launch
func.func @nest(%out: memref<3x?xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %v = arith.constant 1.0 : f32
  scf.parallel (%i, %j) = (%c0, %c0) to (%c3, %n) step (%c1, %c1) {
    memref.store %v, %out[%i, %j] : memref<3x?xf32>
    scf.reduce
  }
  return
}

// -----

// Copies run on the device; a buffer only kernels touch is device memory
// (an asynchronous allocation on the runtime's stream), freed through the
// runtime; reductions stay sequential inside the thread.
// CHECK-LABEL: func.func private @xfmr_gpu_free(i64)
// CHECK-LABEL: func.func @copy_alloc
//       CHECK:   %[[READY:.*]] = gpu.wait async
//       CHECK:   %[[BUF:.*]], %[[DONE:.*]] = gpu.alloc async [%[[READY]]] (%{{.*}}) : memref<?xf32>
//       CHECK:   gpu.wait [%[[DONE]]]
//       CHECK:   gpu.launch
//       CHECK:     memref.load %{{.*}}[%{{.*}}] : memref<?xf32>
//       CHECK:     memref.store %{{.*}}, %[[BUF]][%{{.*}}] : memref<?xf32>
//       CHECK:   gpu.launch
//       CHECK:     scf.for
//       CHECK:   %[[P:.*]] = memref.extract_aligned_pointer_as_index %[[BUF]]
//       CHECK:   %[[P64:.*]] = arith.index_cast %[[P]] : index to i64
//       CHECK:   call @xfmr_gpu_free(%[[P64]])
//   CHECK-NOT:   memref.copy
//   CHECK-NOT:   memref.dealloc
func.func @copy_alloc(%in: memref<?xf32>, %out: memref<?xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %buf = memref.alloc(%n) : memref<?xf32>
  memref.copy %in, %buf : memref<?xf32> to memref<?xf32>
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    %s = scf.for %k = %c0 to %n step %c1 iter_args(%acc = %c0) -> (index) {
      %x = arith.addi %acc, %k : index
      scf.yield %x : index
    }
    %f = arith.index_cast %s : index to i64
    %g = arith.sitofp %f : i64 to f32
    memref.store %g, %out[%i] : memref<?xf32>
    scf.reduce
  }
  memref.dealloc %buf : memref<?xf32>
  return
}

// -----

// A buffer the host reads (here a scalar, through a view) is unified memory.
// CHECK-LABEL: func.func @host_read
//       CHECK:   %[[BUF:.*]] = gpu.alloc  host_shared (%{{.*}}) : memref<?xf32>
//       CHECK:   gpu.launch
//       CHECK:   memref.load %{{.*}}[%c0] : memref<?xf32, strided<[1]>>
func.func @host_read(%n: index) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %v = arith.constant 2.0 : f32
  %buf = memref.alloc(%n) : memref<?xf32>
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    memref.store %v, %buf[%i] : memref<?xf32>
    scf.reduce
  }
  %view = memref.subview %buf[0] [%n] [1] : memref<?xf32> to memref<?xf32, strided<[1]>>
  %x = memref.load %view[%c0] : memref<?xf32, strided<[1]>>
  memref.dealloc %buf : memref<?xf32>
  return %x : f32
}

// -----

// A check inside a kernel stores its number in the device word the runtime
// reads after the call (no trap); its message becomes xfmr.kernel_checks.
// CHECK: module attributes {gpu.container_module, xfmr.kernel_checks = ["index out of range"]}
// CHECK: memref.global "public" @xfmr_kernel_check : memref<1xi64> = dense<0>
// CHECK-LABEL: func.func @check
//       CHECK:   gpu.launch
//       CHECK:       %[[BAD:.*]] = arith.xori %{{.*}}, %true : i1
//       CHECK:       scf.if %[[BAD]] {
//       CHECK:         %[[W:.*]] = memref.get_global @xfmr_kernel_check
//       CHECK:         memref.store %c1_i64, %[[W]][%{{.*}}] : memref<1xi64>
//   CHECK-NOT:   cf.assert
func.func @check(%ids: memref<?xi64>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : i64
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    %id = memref.load %ids[%i] : memref<?xi64>
    %ok = arith.cmpi ult, %id, %c8 : i64
    cf.assert %ok, "index out of range"
    scf.reduce
  }
  return
}
