#!/usr/bin/env bash
# The GPU backend's check (docs/gpu-backend.md), in two halves.
#
#   scripts/gpu-check.sh           On the build machine: builds xfmr, compiles
#                                  the example models and a GEMM model for
#                                  sm_90a, and packs .gpu-check/ (artifacts,
#                                  onnxruntime's reference inputs and outputs,
#                                  xfmr-run and the libraries it needs, the
#                                  baseline benchmark's source). With a CUDA
#                                  device here, runs the device half at once;
#                                  else says so and how to run it.
#   scripts/gpu-check.sh --device  On the GPU machine, over a copy of the tree
#                                  with .gpu-check/ (it needs no LLVM, MLIR or
#                                  build there: nvcc, python3 with numpy and a
#                                  driver): every artifact against onnxruntime's
#                                  outputs, then a table of xfmr's products
#                                  beside cuBLAS and the copy bandwidth, all
#                                  measured in this run. At most a few minutes
#                                  on an H200; writes $OUT/gpu-check.txt when
#                                  OUT is set.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
pack=.gpu-check
peak=4.8e12 # H200 HBM3e bytes/s

have_gpu() { command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q GPU; }

prepare() {
  bash scripts/build.sh
  rm -rf "$pack" && mkdir -p "$pack/models" "$pack/lib" "$pack/bin"
  echo "== compiling the example models for sm_90a"
  for ref in examples/models/ref/*/; do
    name=$(basename "$ref")
    model=$(.venv/bin/python -c "import json,sys; print(json.load(open(sys.argv[1]))['model'])" "$ref/ref.json")
    build/bin/xfmr-compile "examples/models/$model" --target=sm_90a --quiet \
      -o "$pack/models/$name/model.xfa"
    cp -r "$ref"/. "$pack/models/$name/"
  done
  echo "== the GEMM model: X[M, 2048] x W[2048, 8192] (64 MiB of f32 weights, past the 60 MB L2)"
  .venv/bin/python scripts/gpu-check-gemm.py model "$pack/gemm.onnx"
  build/bin/xfmr-compile "$pack/gemm.onnx" --target=sm_90a --report --quiet -o "$pack/gemm.xfa" |
    grep -A3 'kernels ('
  rm "$pack/gemm.onnx"
  # 64 MiB would not travel (64 MiB in all): the device half writes the
  # weights again from the same formula (the loader checks their SHA-256).
  .venv/bin/python scripts/gpu-check-gemm.py weights "$pack/gemm.xfa/weights.bin.again"
  cmp "$pack/gemm.xfa/weights.bin" "$pack/gemm.xfa/weights.bin.again"
  rm "$pack/gemm.xfa/weights.bin" "$pack/gemm.xfa/weights.bin.again"
  echo "== prefill attention: causal, 32 query heads over 8 KV heads, S = 2048, head dim 128"
  .venv/bin/python scripts/check-gpu-attention.py --write-model "$pack/attention.onnx" \
    --shape 1,32,8,2048,2048,128,128,causal
  build/bin/xfmr-compile "$pack/attention.onnx" --target=sm_90a --report --quiet \
    -o "$pack/attention.xfa" | grep -E '^ +attn'
  rm "$pack/attention.onnx"
  # Only what xfmr-run loads travels.
  rm -f "$pack"/models/*/model.xfa/kernels.* "$pack"/gemm.xfa/kernels.* "$pack"/attention.xfa/kernels.*
  cp build/bin/xfmr-run "$pack/bin/"
  # Libraries of this build machine the device image may not have (glibc,
  # libstdc++ and libgcc are newer there).
  ldd build/bin/xfmr-run | awk '$3 ~ /^\// {print $3}' |
    grep -v -E '/(libc|libm|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so' |
    xargs -r -I{} cp -L {} "$pack/lib/"
  cp scripts/gpu-bench.cu "$pack/"
  echo "== packed $pack/ ($(du -sh "$pack" | cut -f1))"
  if have_gpu; then
    device
  else
    echo "gpu-check: no CUDA device here: the device half is skipped."
    echo "gpu-check: on a GPU machine, with $pack/ beside the tree: bash scripts/gpu-check.sh --device"
  fi
}

# the least kernel time of xfmr-run's "run: X ms (kernels Y ms)" lines
best_ms() { awk '/^run: .*kernels/ {v = $5 + 0; if (best == "" || v < best) best = v} END {print best}'; }

device() {
  [[ -d "$pack" ]] || { echo "gpu-check: no $pack/ (run scripts/gpu-check.sh on the build machine first)" >&2; exit 1; }
  have_gpu || { echo "gpu-check: no CUDA device (nvidia-smi -L lists none)" >&2; exit 1; }
  nvidia-smi -L
  export LD_LIBRARY_PATH="$root/$pack/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  run="$root/$pack/bin/xfmr-run"
  report=$(mktemp)
  fails=0
  echo "== example models on the GPU against onnxruntime (1e-4 x max|reference|)" | tee -a "$report"
  for dir in "$pack"/models/*/; do
    name=$(basename "$dir")
    args=()
    for f in "$dir"inputs/*.npy; do args+=(--input "$(basename "$f" .npy)=$f"); done
    rm -rf "$dir/out"
    if ! timeout 120 "$run" "$dir/model.xfa" "${args[@]}" --output-dir "$dir/out" --quiet 2>"$dir/err"; then
      echo "FAIL $name: $(head -c 300 "$dir/err")" | tee -a "$report"
      fails=$((fails + 1))
      continue
    fi
    python3 - "$dir" "$name" <<'EOF' | tee -a "$report" || fails=$((fails + 1))
import json, os, sys
import numpy as np
d, name = sys.argv[1], sys.argv[2]
meta = json.load(open(os.path.join(d, "ref.json")))
bad = 0
for t in meta["outputs"]:
    ref = np.load(os.path.join(d, t["file"])).astype(np.float64)
    got = np.load(os.path.join(d, "out", "".join(c if c.isalnum() or c in "._-" else "_" for c in t["name"]) + ".npy")).astype(np.float64)
    tol = 1e-4 * float(np.abs(ref).max())
    diff = float(np.abs(got - ref).max()) if got.shape == ref.shape else float("inf")
    ok = diff <= tol
    bad += not ok
    print("%s %s %s: max_abs_diff=%.3g tol=%.3g" % ("PASS" if ok else "FAIL", name, t["name"], diff, tol))
sys.exit(1 if bad else 0)
EOF
  done

  echo "== products and baselines, this run" | tee -a "$report"
  python3 scripts/gpu-check-gemm.py weights "$pack/gemm.xfa/weights.bin"
  python3 -c "
import numpy as np
np.save('$pack/x_prefill.npy', np.random.default_rng(1).standard_normal((1024, 2048), dtype=np.float32))
np.save('$pack/x_decode.npy', np.random.default_rng(2).standard_normal((1, 2048), dtype=np.float32))"
  pre=$(timeout 120 "$run" "$pack/gemm.xfa" --input "x=$pack/x_prefill.npy" --repeat 20 | best_ms)
  dec=$(timeout 120 "$run" "$pack/gemm.xfa" --input "x=$pack/x_decode.npy" --repeat 200 | best_ms)
  # Prefill attention: kernel time, and the first two heads against a
  # float64 reference.
  python3 - "$pack" <<'EOF'
import sys
import numpy as np
d = sys.argv[1]
rng = np.random.default_rng(3)
for name, heads in (("q", 32), ("k", 8), ("v", 8)):
    np.save("%s/attn_%s.npy" % (d, name), rng.standard_normal((1, heads, 2048, 128), dtype=np.float32))
EOF
  rm -rf "$pack/attn_out"
  att=$(timeout 120 "$run" "$pack/attention.xfa" --input "Q=$pack/attn_q.npy" --input "K=$pack/attn_k.npy" \
    --input "V=$pack/attn_v.npy" --output-dir "$pack/attn_out" --repeat 20 | best_ms)
  python3 - "$pack" <<'EOF' | tee -a "$report" || fails=$((fails + 1))
import sys
import numpy as np
d = sys.argv[1]
q, k, v = (np.load("%s/attn_%s.npy" % (d, n)).astype(np.float64) for n in "qkv")
got = np.load("%s/attn_out/Y.npy" % d)
worst = 0.0
for h in (0, 1):
    s = q[0, h] @ k[0, h // 4].T / np.sqrt(128.0)
    s[np.triu_indices(2048, 1)] = -np.inf
    p = np.exp(s - s.max(axis=1, keepdims=True))
    ref = (p / p.sum(axis=1, keepdims=True)) @ v[0, h // 4]
    worst = max(worst, float(np.abs(got[0, h] - ref).max() / np.abs(ref).max()))
ok = worst <= 1e-4
print("%s prefill attention (heads 0 and 1 vs float64): max|diff|/max|ref| = %.2e" % ("PASS" if ok else "FAIL", worst))
sys.exit(0 if ok else 1)
EOF
  nvcc -O2 -std=c++17 -o "$pack/gpu-bench" "$pack/gpu-bench.cu" -lcublas
  base=$("$pack/gpu-bench")
  python3 - "$pre" "$dec" "$peak" "$base" "$att" <<'EOF' | tee -a "$report"
import sys
pre, dec, peak, att = float(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[5])
base = {l.split()[0]: float(l.split()[1]) for l in sys.argv[4].splitlines() if l.strip()}
flop = 2.0 * 1024 * 2048 * 8192
weights = 2048 * 8192 * 4
rows = [
    ("GEMM 1024x2048x8192 (xfmr, 3xTF32, kernel time)", "%.1f TFLOP/s" % (flop / (pre * 1e-3) / 1e12)),
    ("GEMM 4096^3 cuBLAS f32", "%.1f TFLOP/s" % base["cublas_sgemm_f32"]),
    ("GEMM 4096^3 cuBLAS TF32", "%.1f TFLOP/s" % base["cublas_sgemm_tf32"]),
    ("decode product, 64 MiB of weights (xfmr, kernel time)", "%.3g B/s = %.3f of HBM peak" % (weights / (dec * 1e-3), weights / (dec * 1e-3) / peak)),
    ("device copy (cudaMemcpy, read + write)", "%.3g B/s = %.3f of HBM peak" % (base["copy_bytes_per_s"], base["copy_bytes_per_s"] / peak)),
    ("prefill attention, causal, 32/8 heads, S 2048, D 128 (xfmr)", "%.1f TFLOP/s" % (2.0 * 32 * 2048 * 2048 * 128 / (att * 1e-3) / 1e12)),
    ("paged decode attention", "not measured: the runtime times whole calls, not one kernel of a step"),
]
for k, v in rows:
    print("%-52s %s" % (k, v))
print("(xfmr: the least, over 20 / 200 calls, of the device time in the call's kernels: CUDA events around each launch;")
print(" causal attention counts 2 * H * S^2 * D flops, the half of the score matrix it computes)")
EOF
  if [[ -n "${OUT:-}" ]]; then cp "$report" "$OUT/gpu-check.txt"; fi
  if ((fails)); then echo "gpu-check: $fails model(s) failed" >&2; exit 1; fi
  echo "gpu-check: all models passed"
}

case "${1:-}" in
  --device) device ;;
  "") prepare ;;
  -h|--help) sed -n '2,20p' "$0" ;;
  *) echo "usage: scripts/gpu-check.sh [--device]" >&2; exit 2 ;;
esac
