// xfmr-opt's named pipelines build the same typed pipelines as xfmr-compile
// (lib/Pipelines): options arrive in their structs, so a weights path with
// a space and braces reaches xfmr-externalize-weights unchanged.

// RUN: rm -rf %t && mkdir -p "%t/dir with space"
// RUN: xfmr-opt %s --xfmr-cpu-to-llvm="weights-file='%t/dir with space/w {1}.bin' min-bytes=64 threads=false" | FileCheck %s
// RUN: test -s "%t/dir with space/w {1}.bin"
// CHECK: module attributes {{.*}}xfmr.weights = {count = 1 : i64, size = 64 : i64}
// CHECK: llvm.func @main(

// The stages and options each pipeline runs.
// RUN: xfmr-opt %s --xfmr-cpu-to-llvm="weights-file='%t/dir with space/w {1}.bin' min-bytes=64 threads=false" --dump-pass-pipeline -o /dev/null 2>&1 | FileCheck %s --check-prefix=CPU
// CPU: xfmr-pack-weights{lazy-min-bytes=1048576},
// CPU-NEXT: xfmr-outline-layers,
// CPU-NEXT: xfmr-externalize-weights{{{.*}} min-bytes=64 {{.*}}weights-file={{{.*}}/dir with space/w {1}.bin}},
// CPU-NEXT: xfmr-prepare-entry,
// CPU-NEXT: one-shot-bufferize{allow-return-allocs-from-loops=true {{.*}}bufferize-function-boundaries=true {{.*}}function-boundary-type-conversion=identity-layout-map
// CPU: xfmr-tile-contractions{lanes=8},
// CPU-NOT: xfmr-split-rows
// CPU-NOT: convert-scf-to-openmp
// CPU: finalize-memref-to-llvm{{{.*}}use-generic-functions=true}
// CPU: reconcile-unrealized-casts

// RUN: xfmr-opt %s --xfmr-onnx-to-linalg="fused-attention=256 micro-kernels=false" --dump-pass-pipeline -o /dev/null 2>&1 | FileCheck %s --check-prefix=LINALG
// LINALG: onnx-simplify-shapes
// LINALG-NEXT: convert-onnx-to-linalg,
// LINALG-NEXT: convert-xfmr-to-linalg{fused-attention=256 {{.*}}micro-kernels=false
// LINALG: xfmr-fuse-elementwise,

// The toolkit path (a folder that does not exist) arrives whole.
// RUN: xfmr-opt %s --xfmr-gpu-kernels="chip=sm_80 toolkit='/opt/cuda {x}'" --dump-pass-pipeline -o /dev/null 2>&1 | FileCheck %s --check-prefix=GPU
// GPU: xfmr-gpu-map-loops{block-size=256 emulate=false},
// GPU: gpu-kernel-outlining
// GPU: nvvm-attach-target{O=3 chip=sm_80 {{.*}}features=+ptx80
// GPU: gpu.module(
// GPU: convert-gpu-to-nvvm{{{.*}}index-bitwidth=64
// GPU: gpu-module-to-binary{format=isa {{.*}}toolkit={/opt/cuda {x}}}
func.func @main(%x: tensor<1x16xf32>) -> tensor<1x16xf32> {
  %w = arith.constant dense<[[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0]]> : tensor<1x16xf32>
  %init = tensor.empty() : tensor<1x16xf32>
  %r = linalg.add ins(%x, %w : tensor<1x16xf32>, tensor<1x16xf32>) outs(%init : tensor<1x16xf32>) -> tensor<1x16xf32>
  return %r : tensor<1x16xf32>
}
