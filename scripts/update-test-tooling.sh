#!/usr/bin/env bash
# Moves the Python test tooling forward and regenerates what it writes.
#
#   bash scripts/update-test-tooling.sh [--bump] [--skip-hf]
#
# --bump   rewrites every `name==version` pin of scripts/requirements.txt and
#          scripts/requirements-models.txt to the newest release on PyPI
#          (`pip index versions`), except lines marked `# hold` (say why next
#          to the mark). Without it the current pins are used as they are.
# Then, with the pinned versions (XFMR_WITH_PYTHON_MODELS=1 setup-venv.sh):
#   - the ONNX dialect and importer tables (scripts/gen_onnx_dialect.py, from
#     onnx's and onnxruntime's schemas),
#   - examples/genai (scripts/export_genai_corpus.py --examples: the current
#     onnxruntime-genai model builder; examples/genai-0.11 is a fixed
#     regression corpus from builder 0.11.4 and is not rewritten),
#   - examples/hf (scripts/export_hf_corpus.py; --skip-hf leaves it),
# and prints `git status --short` of what changed. Rebuild and run
# `bash scripts/test.sh` before committing: new exporter output can need
# new raising patterns.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bump=0 skip_hf=0
for a in "$@"; do
  case "$a" in
    --bump) bump=1 ;;
    --skip-hf) skip_hf=1 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "update-test-tooling.sh: unknown argument $a (see --help)" >&2; exit 2 ;;
  esac
done

bash scripts/setup-venv.sh >/dev/null
py=.venv/bin/python

if [[ $bump == 1 ]]; then
  for req in scripts/requirements.txt scripts/requirements-models.txt; do
    "$py" - "$req" <<'EOF'
import re, subprocess, sys
path = sys.argv[1]
out = []
for line in open(path):
    m = re.match(r"^([A-Za-z0-9_.\-\[\]]+)==([^\s#]+)(.*)$", line.rstrip("\n"))
    if not m or "# hold" in m.group(3):
        out.append(line)
        continue
    name, old, rest = m.groups()
    r = subprocess.run([sys.executable, "-m", "pip", "index", "versions", name.split("[")[0]],
                       capture_output=True, text=True)
    new = re.search(r"\(([^)]+)\)", r.stdout.splitlines()[0]) if r.returncode == 0 and r.stdout else None
    if not new:
        print("%s: %s stays (no answer from PyPI)" % (path, name))
        out.append(line)
        continue
    if new.group(1) != old:
        print("%s: %s %s -> %s" % (path, name, old, new.group(1)))
    out.append("%s==%s%s\n" % (name, new.group(1), rest))
open(path, "w").writelines(out)
EOF
  done
fi

XFMR_WITH_PYTHON_MODELS=1 bash scripts/setup-venv.sh
"$py" -m pip check || echo "update-test-tooling.sh: warning: pip check reports conflicts (above)"

echo "== ONNX dialect tables"
"$py" scripts/gen_onnx_dialect.py
echo "== examples/genai (onnxruntime-genai model builder)"
"$py" scripts/export_genai_corpus.py --examples
if [[ $skip_hf == 0 ]]; then
  echo "== examples/hf (torch exporters)"
  "$py" scripts/export_hf_corpus.py --no-minilm
fi
git status --short -- scripts dialects lib/Importer docs/onnx-ops.md examples
