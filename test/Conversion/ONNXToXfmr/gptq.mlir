// GPTQ (method=gptq): int4 codes chosen with second-order error feedback
// through the Cholesky factor of H^-1, H = E[x x^T] from the calibration
// file's .gram companion (Inputs/write-gram.py writes it).
// RUN: rm -rf %t && mkdir -p %t
// RUN: xfmr-opt %s "--xfmr-quantize-weights=bits=4 group=32" --mlir-print-debuginfo=false > %t/rtn.mlir

// Uncorrelated inputs (H diagonal): no channel's error can be compensated
// by another, so GPTQ is round to nearest, with and without act-order
// (which reorders by H_kk and fixes the grids first).
// RUN: %python %S/Inputs/write-gram.py %t/identity.json identity
// RUN: xfmr-opt %s "--xfmr-quantize-weights=bits=4 group=32 method=gptq calibration=%t/identity.json" --mlir-print-debuginfo=false > %t/identity.mlir
// RUN: diff %t/rtn.mlir %t/identity.mlir
// RUN: %python %S/Inputs/write-gram.py %t/diagonal.json diagonal
// RUN: xfmr-opt %s "--xfmr-quantize-weights=bits=4 group=32 method=gptq act-order=true calibration=%t/diagonal.json" --mlir-print-debuginfo=false > %t/diagonal.mlir
// RUN: diff %t/rtn.mlir %t/diagonal.mlir

// Correlated inputs (H_ij = 0.9^|i-j|): later channels absorb earlier
// ones' errors, so some codes differ; the storage is the same.
// RUN: %python %S/Inputs/write-gram.py %t/correlated.json correlated
// RUN: xfmr-opt %s "--xfmr-quantize-weights=bits=4 group=32 method=gptq calibration=%t/correlated.json" --mlir-print-debuginfo=false > %t/correlated.mlir
// RUN: not diff %t/rtn.mlir %t/correlated.mlir > /dev/null
// RUN: FileCheck %s --input-file=%t/correlated.mlir
// Shrunk all the way to its diagonal, H is uncorrelated again: round to
// nearest.
// RUN: xfmr-opt %s "--xfmr-quantize-weights=bits=4 group=32 method=gptq shrink=1 calibration=%t/correlated.json" --mlir-print-debuginfo=false > %t/shrunk.mlir
// RUN: diff %t/rtn.mlir %t/shrunk.mlir
// The report: each product's output error on the calibration rows (with
// H = 0.9^|i-j|), GPTQ's below round to nearest's.
// RUN: xfmr-opt %s "--xfmr-quantize-weights=bits=4 group=32 method=gptq report=true calibration=%t/correlated.json" -o /dev/null | FileCheck %s --check-prefix=REPORT
// REPORT: quant-report: product 0 {{.*}}[32 x 2]: output error on the calibration rows [[R0:[0-9.]+]]% round to nearest, {{[0-9.]+}}% gptq
// REPORT: quant-report: product 1 {{.*}}[32 x 2]: output error on the calibration rows {{[0-9.]+}}% round to nearest, {{[0-9.]+}}% gptq
// REPORT: quant-report: 2 products, mean output error {{[0-9.]+}}% round to nearest, {{[0-9.]+}}% gptq
// CHECK-LABEL: func.func @gptq(
// CHECK: onnx.ms.MatMulNBits({{.*}} block_size = 32 : i64
// CHECK: onnx.ms.MatMulNBits(%arg1, {{.*}} block_size = 32 : i64

// Errors name the file and what is wrong with it.
// RUN: not xfmr-opt %s "--xfmr-quantize-weights=bits=8 method=gptq calibration=%t/identity.json" 2>&1 | FileCheck %s --check-prefix=BITS
// BITS: xfmr-quantize-weights: method=gptq needs bits=4
// RUN: not xfmr-opt %s "--xfmr-quantize-weights=bits=4 group=32 method=gptq calibration=%S/Inputs/awq.json" 2>&1 | FileCheck %s --check-prefix=NOGRAM
// NOGRAM: Inputs/awq.json: product 0 has no second moment (E[x x^T]): measure the file with --quant=int4-gptq
// RUN: %python %S/Inputs/write-gram.py %t/offset.json identity --bad-offset
// RUN: not xfmr-opt %s "--xfmr-quantize-weights=bits=4 group=32 method=gptq calibration=%t/offset.json" 2>&1 | FileCheck %s --check-prefix=OFFSET
// OFFSET: offset.json: products[0]: 'gram_offset' 1 is not a K x K f32 block of '{{.*}}offset.json.gram'
// RUN: rm %t/identity.json.gram
// RUN: not xfmr-opt %s "--xfmr-quantize-weights=bits=4 group=32 method=gptq calibration=%t/identity.json" 2>&1 | FileCheck %s --check-prefix=MISSING
// MISSING: identity.json: its second moments '{{.*}}identity.json.gram': No such file or directory
// RUN: not xfmr-opt %s "--xfmr-quantize-weights=bits=4 group=32 method=gptq damp=0 calibration=%t/diagonal.json" 2>&1 | FileCheck %s --check-prefix=DAMP
// DAMP: xfmr-quantize-weights: damp must be in (0, 1]
// RUN: not xfmr-opt %s "--xfmr-quantize-weights=bits=4 group=32 method=gptq shrink=2 calibration=%t/diagonal.json" 2>&1 | FileCheck %s --check-prefix=SHRINK
// SHRINK: xfmr-quantize-weights: shrink must be in [0, 1]

func.func @gptq(%x: tensor<?x32xf32>, %h: tensor<?x32xf32>) -> (tensor<?x2xf32>, tensor<?x2xf32>) {
  %g = onnx.Constant() {value = dense<[1.0000, 1.1000, 1.2000, 1.3000, 1.4000, 1.5000, 1.6000, 1.7000, 1.8000, 1.9000, 2.0000, 2.1000, 2.2000, 2.3000, 2.4000, 2.5000, 2.6000, 2.7000, 2.8000, 2.9000, 3.0000, 3.1000, 3.2000, 3.3000, 3.4000, 3.5000, 3.6000, 3.7000, 3.8000, 3.9000, 4.0000, 4.1000]> : tensor<32xf32>} : () -> tensor<32xf32>
  %n = onnx.Mul(%x, %g) : (tensor<?x32xf32>, tensor<32xf32>) -> tensor<?x32xf32>
  %w0 = onnx.Constant() {value = dense<[[-0.3523, -0.6983], [0.3019, -0.8551], [0.0718, -0.2686], [-0.8840, 0.0149], [-0.9250, -0.1327], [-0.8603, -0.8186], [-0.1510, 0.6537], [-0.7524, -0.5535], [0.2549, 0.8954], [0.1542, -0.2066], [0.9525, -0.9068], [0.7169, -0.4208], [-0.7115, -0.7644], [-0.3830, 0.6323], [-0.6385, 0.1632], [0.2778, -0.2552], [0.0955, -0.8744], [-0.8808, -0.5881], [0.3608, -0.1448], [-0.3717, 0.1711], [-0.0936, -0.4005], [0.5888, 0.3980], [-0.5118, 0.1488], [0.0504, 0.7503], [0.4589, -0.4241], [0.9603, -0.7639], [-0.1638, 0.5143], [-0.6960, -0.0221], [-0.9216, 0.3364], [0.5291, 0.1461], [0.7510, -0.3725], [0.3906, 0.1887]]> : tensor<32x2xf32>} : () -> tensor<32x2xf32>
  %w1 = onnx.Constant() {value = dense<[[0.1598, -0.0876], [0.6799, 0.8894], [-0.0518, 0.3283], [-0.8787, 0.4030], [0.2943, 0.9862], [0.6438, -0.4308], [-0.2284, 0.3373], [-0.9549, -0.0766], [-0.6639, -0.7658], [-0.8821, 0.5365], [-0.7413, -0.5048], [-0.2181, 0.7428], [-0.8388, -0.1016], [0.0989, 0.7668], [0.6386, 0.7280], [-0.4432, -0.1694], [-0.2825, 0.7684], [0.9155, -0.6982], [-0.6476, -0.5361], [-0.5333, -0.0301], [0.1782, -0.4745], [-0.9918, -0.1621], [-0.2615, 0.1327], [0.9062, 0.3810], [0.0310, 0.2352], [0.3524, -0.8920], [0.7991, 0.5599], [0.7490, 0.5957], [-0.2152, -0.2020], [-0.7929, 0.2686], [-0.8755, -0.8653], [-0.5825, -0.6754]]> : tensor<32x2xf32>} : () -> tensor<32x2xf32>
  %a = onnx.MatMul(%n, %w0) : (tensor<?x32xf32>, tensor<32x2xf32>) -> tensor<?x2xf32>
  %b = onnx.MatMul(%h, %w1) : (tensor<?x32xf32>, tensor<32x2xf32>) -> tensor<?x2xf32>
  return %a, %b : tensor<?x2xf32>, tensor<?x2xf32>
}
