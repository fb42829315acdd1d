#!/usr/bin/env python3
"""A request's greedy tokens alone and batched with 63 others, per --quant mode.

Compiles MODEL paged (--kv-cache=paged) once per mode, runs `xfmr-run
generate` on one prompt alone and on the same prompt among 63 other prompts
of different lengths (continuous batching: their prefills are chunked with
its decode steps, so its rows go through the kernels in tiles of every
size), and checks that the prompt's tokens are identical and that the
logits they were chosen from are bit for bit the same (--dump-logits). Issue 12 asks it
of every quantization mode: every kernel computes each element in an order
that does not depend on the batch.

  .venv/bin/python scripts/check-batch-invariance.py --build-dir build \\
      [--modes none,bf16,fp8-e4m3,int8,int4-g32,kv-int8,kv-fp8-e4m3] MODEL.onnx

A mode kv-DTYPE compiles with --kv-dtype=DTYPE (f32 weights) instead of --quant.
The calibrated modes (int4-awq, w8a8) take --calibration TOKENS.npy.

Prints one `PASS|FAIL MODEL MODE: detail` line per mode and `N passed, M
failed, K skipped`.
"""

import argparse
import os
import random
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from xfmr_refs import Tally  # noqa: E402

OTHERS = 63
NEW_TOKENS = 12


def generate(build, art, prompts, dump):
    """Each prompt's tokens; the first prompt's logits per step into `dump`."""
    cmd = [os.path.join(build, "bin", "xfmr-run"), "generate", art, "--max-new-tokens",
           str(NEW_TOKENS), "--ignore-eos", "--quiet", "--dump-logits", dump]
    for p in prompts:
        cmd += ["--prompt-ids", ",".join(map(str, p))]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("xfmr-run generate failed: " + r.stderr.strip())
    return r.stdout.strip().splitlines()


def check(build, model, mode, work, vocab, calibration=None):
    art = os.path.join(work, mode + ".xfa")
    cmd = [os.path.join(build, "bin", "xfmr-compile"), model, "--kv-cache=paged", "--quiet",
           "-o", art]
    if mode.startswith("kv-"):  # a quantized KV cache, f32 weights
        cmd.append("--kv-dtype=" + mode[len("kv-"):])
    elif mode != "none":
        cmd.append("--quant=" + mode)
    if mode in ("int4-awq", "w8a8"):
        if not calibration:
            return False, "--quant=%s needs --calibration" % mode
        cmd += ["--calibration", calibration, "--calibration-context", "128"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        return False, "compile failed: " + (r.stderr.strip().splitlines() or ["?"])[0]
    rng = random.Random(1)
    target = [rng.randrange(3, vocab) for _ in range(9)]
    others = [[rng.randrange(3, vocab) for _ in range(rng.randrange(1, 24))]
              for _ in range(OTHERS)]
    d1, d2 = os.path.join(work, mode + ".alone"), os.path.join(work, mode + ".batched")
    alone = generate(build, art, [target], d1)[0]
    batched = generate(build, art, [target] + others, d2)
    if len(batched) != OTHERS + 1:
        return False, "%d lines for %d prompts" % (len(batched), OTHERS + 1)
    if batched[0] != alone:
        return False, "alone %s, batched with %d others %s" % (alone, OTHERS, batched[0])
    steps = sorted(os.listdir(d1))
    if len(steps) != NEW_TOKENS or sorted(os.listdir(d2)) != steps:
        return False, "logit dumps differ in number: %d and %d" % (
            len(steps), len(os.listdir(d2)))
    for f in steps:
        x, y = np.load(os.path.join(d1, f)), np.load(os.path.join(d2, f))
        if x.shape != y.shape or x.tobytes() != y.tobytes():
            return False, "tokens equal, but %s's logits differ by up to %.3g" % (
                f, float(np.max(np.abs(x - y))) if x.shape == y.shape else float("nan"))
    return True, "alone and batched with %d others: tokens %s, %d steps of logits bit-identical" % (
        OTHERS, alone, len(steps))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--build-dir", default="build")
    ap.add_argument("--modes", default="none,bf16,fp8-e4m3,int8,int4-g32")
    ap.add_argument("--vocab", type=int, default=128, help="prompt ids are drawn below this")
    ap.add_argument("--calibration", help="token ids for the calibrated modes (int4-awq, w8a8)")
    a = ap.parse_args()
    tally = Tally()
    with tempfile.TemporaryDirectory(prefix="xfmr-invariance-") as work:
        for mode in a.modes.split(","):
            ok, detail = check(a.build_dir, a.model, mode, work, a.vocab, a.calibration)
            tally.add(os.path.basename(a.model), [("PASS" if ok else "FAIL", mode, detail)])
    return tally.finish()


if __name__ == "__main__":
    sys.exit(main())
