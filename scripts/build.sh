#!/usr/bin/env bash
# Installs what is missing and builds xfmr incrementally.
#   scripts/build.sh            release build in build/ (g++; C micro-kernels clang-22)
#   scripts/build.sh --asan     ASan+UBSan build with the libFuzzer targets
#                               in build-asan/ (clang-22)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
jobs=${XFMR_JOBS:-$(nproc)}
bash scripts/install-deps.sh

if [[ "${1:-}" == --asan ]]; then
  dir=build-asan
  args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang-22
        -DCMAKE_CXX_COMPILER=clang++-22 -DXFMR_ENABLE_SANITIZERS=ON
        -DXFMR_ENABLE_FUZZER=ON)
  targets=(xfmr-opt xfmr-translate xfmr-compile xfmr-run xfmr-bench xfmr-tokenize
           xfmr-import-fuzzer xfmr-artifact-fuzzer xfmr-engine-fuzzer xfmr-serve-fuzzer
           XfmrRuntimeTests
           XfmrUkernelTests)
else
  dir=build
  # The C micro-kernels (runtime/ukernels) with clang: GCC 12 keeps the
  # VNNI tiles' accumulators moving between registers (QuantizedMatmul8.c).
  args=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=g++)
  # Every tool and unit-test binary the lit suite runs (test/CMakeLists.txt's
  # XFMR_TEST_DEPENDS): a binary left out here makes its tests missing or
  # failing in a fresh checkout.
  targets=(xfmr-opt xfmr-translate xfmr-compile xfmr-run xfmr-bench xfmr-sched-bench
           xfmr-kernel-bench xfmr-http-echo xfmr-tokenize xfmr-serve XfmrRuntimeTests
           XfmrUkernelTests)
fi
if [[ ! -f "$dir/build.ninja" ]]; then
  cmake -G Ninja -S . -B "$dir" -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit "${args[@]}"
fi
echo "== building $dir/ (${targets[*]})"
ninja -C "$dir" -j"$jobs" "${targets[@]}"
