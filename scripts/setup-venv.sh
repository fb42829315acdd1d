#!/usr/bin/env bash
# Creates .venv (Python tooling for test-data generation: onnx, onnxruntime,
# and with XFMR_WITH_PYTHON_MODELS=1 also transformers over Debian's torch).
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
  "$venv/bin/python" -c 'import transformers' 2>/dev/null ||
    "$venv/bin/pip" install -q -r "$root/scripts/requirements-models.txt"
fi
echo "venv ready: $venv"
