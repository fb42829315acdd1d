#!/usr/bin/env bash
# The test command: installs what is missing, builds incrementally and runs
# every test, in two configurations:
#   build/       the release build (g++), the whole lit suite
#   build-asan/  clang with ASan+UBSan and the libFuzzer targets: the importer,
#                pass (Conversion, Target) lit tests, bad-input and runtime
#                unit tests, corrupted artifacts and out-of-range step inputs
#                through the tools again, plus fuzzing smoke runs
# Ends with the runners' summary and a total "N passed, N failed, N skipped".
# XFMR_SKIP_SANITIZERS=1 skips the second configuration.
# lit runs the longest tests first: a fresh build directory has no timings
# of its own, so lit reads test/.lit_test_times.txt (seconds per test,
# refresh it from build/test/.lit_test_times.txt after adding slow tests).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

# Python tooling is optional for the tests: it only adds ONNX's opset 18-24
# node tests (from the onnx wheel). Without PyPI those tests are unsupported.
bash scripts/setup-venv.sh || echo "test.sh: warning: no Python venv; wheel node tests skipped"

bash scripts/build.sh

total_pass=0 total_fail=0 total_skip=0 status=0
run_lit() { # name, build dir, lit args...
  local name=$1 dir=$2; shift 2
  local log
  log=$(mktemp)
  echo "== lit: $name"
  set +e
  /usr/lib/llvm-22/bin/lit -sv "$@" "$dir/test" | tee "$log"
  local rc=${PIPESTATUS[0]}
  set -e
  count() { sed -nE "s/^ *($1) *: *([0-9]+).*/\2/p" "$log" | awk '{n += $1} END {print n + 0}'; }
  local p f s
  p=$(count 'Passed')
  f=$(count 'Failed|Unresolved|Timed Out|Unexpectedly Passed')
  s=$(count 'Unsupported|Expectedly Failed|Excluded|Skipped')
  rm -f "$log"
  echo "$name: $p passed, $f failed, $s skipped"
  total_pass=$((total_pass + p)); total_fail=$((total_fail + f)); total_skip=$((total_skip + s))
  if [[ $rc != 0 ]]; then status=1; fi
}

run_lit release build

if [[ "${XFMR_SKIP_SANITIZERS:-0}" != 1 ]]; then
  bash scripts/build.sh --asan
  run_lit asan+ubsan build-asan --filter 'Importer|Dialect|Conversion|Target|Fuzz|Unit|corrupt-artifacts|step-bad-inputs|bind-input'
fi

echo "$total_pass passed, $total_fail failed, $total_skip skipped"
exit $status
