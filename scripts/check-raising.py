#!/usr/bin/env python3
"""Checks what xfmr-raise recovers from real exports.

Also compiles each dynamic decoder and compares it with onnxruntime on a
padded batch (left and right padding in attention_mask): the recognised causal
mask and its padding bias must give onnxruntime's logits at every position
that is not padding.

For every model (the committed examples/models/*.onnx, or with --fresh a new
export of each architecture by scripts/export_models.py with other random
weights), runs `xfmr-compile --emit=xfmr --report` and compares the report's
counts with what the architecture has: one xfmr.attention per layer, its
norms, rotary embeddings, gated MLPs (one per expert for MoE) and embeddings,
and no candidate left unfused. Then checks that `--kv-cache=paged` turns the
decoders into step functions (GPT-2 too: its positions, Range(0, S), are
replaced by the step's).

Prints one PASS/FAIL line per model and "N passed, N failed, N skipped".

  .venv/bin/python scripts/check-raising.py [--build-dir build] [--fresh [--seed N]]
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

from xfmr_refs import parse_raise_report

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

LAYERS = 2
# Per architecture (examples/models/README.md: 2 layers, MoE with 4 experts,
# its loop over the experts one xfmr.moe per layer).
EXPECTED = {
    "gpt2": {"attention": LAYERS, "layer_norm": 2 * LAYERS + 1, "embedding": 2},
    "llama_gqa": {"attention": LAYERS, "rms_norm": 2 * LAYERS + 1, "rope": 2 * LAYERS,
                  "gated_mlp": LAYERS, "embedding": 1},
    "mixtral_moe": {"attention": LAYERS, "rms_norm": 2 * LAYERS + 1, "rope": 2 * LAYERS,
                    "moe": LAYERS, "embedding": 1},
    "transformer_encoder": {"attention": LAYERS, "layer_norm": 2 * LAYERS},
}
EXPECTED["llama_gqa_past"] = EXPECTED["llama_gqa"]
# The exporter-built causal masks become `causal` (+ a padding bias).
for name in ("gpt2", "llama_gqa", "llama_gqa_past", "mixtral_moe"):
    EXPECTED[name]["causal_mask"] = LAYERS
PAGED = {"llama_gqa": True, "llama_gqa_past": True, "mixtral_moe": True,
         "gpt2": True}


def report(compile_bin, path, extra=(), out=os.devnull):
    r = subprocess.run([compile_bin, path, "--emit=xfmr", "--report", "--quiet", "-o", out,
                        *extra], capture_output=True, text=True)
    return r


def padded_batches(build_dir, models_dir):
    """Forward decoders on a left- and a right-padded batch against ORT."""
    import numpy as np
    try:
        import onnxruntime as ort
    except ImportError:
        print("SKIP padded batches: onnxruntime not available")
        return 0, 0
    bindir = os.path.join(build_dir, "bin")
    passed = failed = 0
    mask = np.array([[0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]], np.int64)
    ids = np.random.default_rng(7).integers(0, 256, mask.shape).astype(np.int64)
    with tempfile.TemporaryDirectory(prefix="xfmr-pad-") as tmp:
        for name in ("gpt2", "llama_gqa", "mixtral_moe"):
            path = os.path.join(models_dir, name + ".onnx")
            so = ort.SessionOptions()
            so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
            sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
            feed = {"input_ids": ids, "attention_mask": mask}
            if "position_ids" in [i.name for i in sess.get_inputs()]:
                feed["position_ids"] = np.tile(np.arange(6, dtype=np.int64), (2, 1))
            want = sess.run(None, feed)[0]
            xfa = os.path.join(tmp, name + ".xfa")
            args = []
            for k, v in feed.items():
                np.save(os.path.join(tmp, k + ".npy"), v)
                args += ["--input", "%s=%s" % (k, os.path.join(tmp, k + ".npy"))]
            c = subprocess.run([os.path.join(bindir, "xfmr-compile"), path, "-O1", "--quiet", "-o",
                                xfa], capture_output=True, text=True)
            r = c.returncode or subprocess.run(
                [os.path.join(bindir, "xfmr-run"), xfa, *args, "--output-dir", tmp, "--quiet"],
                capture_output=True, text=True).returncode
            if r:
                print("FAIL %s padded batch: compile or run failed %s" % (name, c.stderr.strip()))
                failed += 1
                continue
            got = np.load(os.path.join(tmp, "logits.npy"))
            keep = mask.astype(bool)
            diff = float(np.max(np.abs(got[keep] - want[keep])))
            tol = 1e-4 * float(np.max(np.abs(want[keep])))
            ok = diff <= tol
            print("%s %s padded batch: max |diff| at non-padded positions %.2e (tol %.2e)"
                  % ("PASS" if ok else "FAIL", name, diff, tol))
            passed += ok
            failed += not ok
    return passed, failed


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
        if not transformers.__version__.startswith("4."):
            # export_models.py targets the examples' toolchain (torch 1.13,
            # transformers 4.46); transformers 5: scripts/check-hf-corpus.py.
            print("SKIP: export_models.py needs transformers 4.x, found %s" % transformers.__version__)
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
            counts, unfused = parse_raise_report(r.stdout)
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
    ok, bad = padded_batches(a.build_dir, models_dir)
    passed += ok
    failed += bad
    print("%d passed, %d failed, 0 skipped" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
