#!/usr/bin/env python3
"""Checks what xfmr-raise recovers from real exports.

For every model (the committed examples/models/*.onnx, or with --fresh a new
export of each architecture by scripts/export_models.py with other random
weights), runs `xfmr-compile --emit=xfmr --report` and compares the report's
counts with what the architecture has: one xfmr.attention per layer, its
norms, rotary embeddings, gated MLPs (one per expert for MoE) and embeddings,
and no candidate left unfused. Then checks that `--kv-cache=paged` turns the
decoders into step functions (and that GPT-2, which computes positions from
the sequence length, is refused with the message that says so).

Prints one PASS/FAIL line per model and "N passed, N failed, N skipped".

  .venv/bin/python scripts/check-raising.py [--build-dir build] [--fresh [--seed N]]
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

LAYERS = 2
# Per architecture (examples/models/README.md: 2 layers, MoE with 4 experts).
EXPECTED = {
    "gpt2": {"attention": LAYERS, "layer_norm": 2 * LAYERS + 1, "embedding": 2},
    "llama_gqa": {"attention": LAYERS, "rms_norm": 2 * LAYERS + 1, "rope": 2 * LAYERS,
                  "gated_mlp": LAYERS, "embedding": 1},
    "mixtral_moe": {"attention": LAYERS, "rms_norm": 2 * LAYERS + 1, "rope": 2 * LAYERS,
                    "gated_mlp": 4 * LAYERS, "embedding": 1},
    "transformer_encoder": {"attention": LAYERS, "layer_norm": 2 * LAYERS},
}
EXPECTED["llama_gqa_past"] = EXPECTED["llama_gqa"]
PAGED = {"llama_gqa": True, "llama_gqa_past": True, "mixtral_moe": True,
         "gpt2": "no 'position_ids' input"}


def report(compile_bin, path, extra=(), out=os.devnull):
    r = subprocess.run([compile_bin, path, "--emit=xfmr", "--report", "--quiet", "-o", out,
                        *extra], capture_output=True, text=True)
    return r


def parse(text):
    m = re.search(r"xfmr-raise @\S+: formed (.*); (\d+) candidate\(s\) left unfused", text)
    if not m:
        return None, None
    counts = {}
    if m.group(1) != "nothing":
        for item in m.group(1).split(", "):
            n, kind = item.split(" ", 1)
            counts[kind] = int(n)
    return counts, int(m.group(2))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--fresh", action="store_true", help="export the models afresh (needs torch)")
    ap.add_argument("--seed", type=int, default=1234)
    a = ap.parse_args()
    compile_bin = os.path.join(a.build_dir, "bin", "xfmr-compile")
    models_dir = os.path.join(ROOT, "examples", "models")
    tmp = None
    if a.fresh:
        try:
            import torch  # noqa: F401
            import transformers  # noqa: F401
        except ImportError:
            print("SKIP: torch/transformers not available")
            print("0 passed, 0 failed, 1 skipped")
            return 0
        sys.path.insert(0, HERE)
        import export_models
        tmp = tempfile.TemporaryDirectory(prefix="xfmr-raise-")
        models_dir = tmp.name
        for name in export_models.MODELS:
            export_models.export(name, models_dir, lambda s: None, a.seed)
    passed = failed = 0
    for name in sorted(EXPECTED):
        for variant in (name, name + "_static"):
            path = os.path.join(models_dir, variant + ".onnx")
            r = report(compile_bin, path)
            counts, unfused = parse(r.stdout)
            problems = []
            if counts is None:
                problems.append("no report (exit %d): %s" % (r.returncode, r.stderr.strip()))
            else:
                want = EXPECTED[name]
                for kind in sorted(set(want) | set(counts)):
                    if counts.get(kind, 0) != want.get(kind, 0):
                        problems.append("%s: %d formed, expected %d" % (kind, counts.get(kind, 0),
                                                                       want.get(kind, 0)))
                if unfused:
                    problems.append("%d candidate(s) left unfused:\n%s" % (
                        unfused, "\n".join(l for l in r.stdout.splitlines() if "unfused " in l)))
            paged = PAGED.get(name)
            if paged and variant == name:  # step functions need dynamic shapes
                p = report(compile_bin, path, ["--kv-cache=paged"], out="-")
                if paged is True and (p.returncode or
                                      p.stdout.count("xfmr.paged_attention") != LAYERS):
                    problems.append("--kv-cache=paged failed: " + p.stderr.strip())
                if paged is not True and (p.returncode == 0 or paged not in p.stderr):
                    problems.append("--kv-cache=paged should be refused with \"%s\"" % paged)
            summary = ", ".join("%d %s" % (n, k) for k, n in sorted((counts or {}).items()))
            if problems:
                print("FAIL %s: %s" % (variant, "; ".join(problems)))
                failed += 1
            else:
                print("PASS %s: %s" % (variant, summary))
                passed += 1
    print("%d passed, %d failed, 0 skipped" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
