#!/usr/bin/env python3
"""Benchmarks of the transformer passes, as ratios measured in one run.

1. Forward pass of examples/models/llama_gqa.onnx (batch 1) at several
   sequence lengths: raised (xfmr.attention -> FlashAttention tiles) against
   the plain ONNX lowering (--raise=false: Q.K^T, mask and softmax
   materialized as [B, H, S, S]).
2. Generation: one paged decode step (xfmr-run generate, KV cache) against
   re-running the forward model over the whole grown sequence, which is what
   a model without a cache costs per token.
Times are medians of --repeat runs; absolute numbers only beside their
baseline. Single thread, this machine's CPU.

  .venv/bin/python scripts/bench-attention.py [--build-dir build] [--seqs 64,256,1024]
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def compile_model(bindir, model, out, extra):
    subprocess.run([os.path.join(bindir, "xfmr-compile"), model, "--quiet", "-o", out, *extra],
                   check=True)


def run_forward(bindir, xfa, tmp, seq, repeat):
    ids = np.random.default_rng(seq).integers(0, 256, (1, seq)).astype(np.int64)
    files = {"input_ids": ids, "attention_mask": np.ones_like(ids),
             "position_ids": np.arange(seq, dtype=np.int64)[None]}
    args = []
    for name, value in files.items():
        path = os.path.join(tmp, f"{name}_{seq}.npy")
        np.save(path, value)
        args += ["--input", f"{name}={path}"]
    r = subprocess.run([os.path.join(bindir, "xfmr-run"), xfa, *args, "--repeat", str(repeat)],
                       capture_output=True, text=True, check=True)
    times = [float(t) for t in re.findall(r"run: ([0-9.]+) ms", r.stderr)]
    return statistics.median(times[1:] if len(times) > 1 else times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--seqs", default="64,256,1024")
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    bindir = os.path.join(a.build_dir, "bin")
    model = os.path.join(ROOT, "examples", "models", "llama_gqa.onnx")
    seqs = [int(s) for s in a.seqs.split(",")]
    with tempfile.TemporaryDirectory(prefix="xfmr-bench-") as tmp:
        flash, plain, paged = (os.path.join(tmp, n + ".xfa") for n in ("flash", "plain", "paged"))
        compile_model(bindir, model, flash, [])
        compile_model(bindir, model, plain, ["--raise=false"])
        compile_model(bindir, model, paged, ["--kv-cache=paged"])
        print("forward pass, llama_gqa (2 layers, 4 query / 2 KV heads, head dim 16), batch 1")
        print(f"{'seq':>6} {'raised ms':>10} {'plain ms':>10} {'plain/raised':>13}")
        for s in seqs:
            f = run_forward(bindir, flash, tmp, s, a.repeat)
            p = run_forward(bindir, plain, tmp, s, a.repeat)
            print(f"{s:>6} {f:>10.2f} {p:>10.2f} {p / f:>12.2f}x")
        print("generation: one decode step with the paged KV cache vs a forward pass over the "
              "grown sequence")
        print(f"{'context':>8} {'decode ms':>10} {'forward ms':>11} {'forward/decode':>15}")
        for s in seqs:
            prompt = ",".join(str(i % 256) for i in range(s))
            r = subprocess.run([os.path.join(bindir, "xfmr-run"), "generate", paged, "--prompt-ids",
                                prompt, "--max-new-tokens", "9"], capture_output=True, text=True,
                               check=True)
            decode = float(re.search(r"decode ([0-9.]+) ms/token", r.stderr).group(1))
            f = run_forward(bindir, flash, tmp, s + 8, a.repeat)
            print(f"{s:>8} {decode:>10.3f} {f:>11.2f} {f / decode:>14.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
