#!/usr/bin/env bash
# The main job on a bundled example: installs what is missing, builds, then
# imports examples/models/llama_gqa.onnx (a Llama-style model with GQA, RoPE,
# RMSNorm and SwiGLU exported by torch.onnx) and prints what was found.
#   scripts/run-example.sh [MODEL.onnx]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
model=${1:-examples/models/llama_gqa.onnx}
bash scripts/build.sh
echo "== xfmr-translate --import-onnx $model --onnx-simplify-shapes --onnx-summary"
build/bin/xfmr-translate --import-onnx "$model" --onnx-simplify-shapes --onnx-summary
