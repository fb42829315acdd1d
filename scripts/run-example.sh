#!/usr/bin/env bash
# Installs what is missing, builds, then compiles an example model
# (default: the Llama-style GQA model, dynamic batch and sequence) into an
# artifact, runs it on the committed reference inputs and compares the logits
# with onnxruntime's (examples/models/ref).
#   bash scripts/run-example.sh [NAME]      NAME: gpt2, llama_gqa, mixtral_moe, ...
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
name=${1:-llama_gqa}
model=examples/models/$name.onnx
ref=examples/models/ref/$name
bash scripts/build.sh
mkdir -p build/examples
echo "== xfmr-compile $model --target=cpu -o build/examples/$name.xfa"
build/bin/xfmr-compile "$model" --target=cpu -o "build/examples/$name.xfa"
args=()
for f in "$ref"/inputs/*.npy; do
  args+=(--input "$(basename "$f" .npy)=$f")
done
echo "== xfmr-run build/examples/$name.xfa ${args[*]} --output-dir build/examples/$name.out"
build/bin/xfmr-run "build/examples/$name.xfa" "${args[@]}" --output-dir "build/examples/$name.out"
if [[ -x .venv/bin/python ]]; then
  echo "== compare with onnxruntime's outputs in $ref"
  .venv/bin/python scripts/check-model-refs.py --build-dir build --only "$name"
fi
