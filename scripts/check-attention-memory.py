#!/usr/bin/env python3
"""Attention at long sequence lengths runs in memory linear in S.

Builds a one-node ONNX model (opset 23 Attention, is_causal=1, Q/K/V
[1, H, S, D] with a dynamic S), compiles it with xfmr-compile (raised to
xfmr.attention, lowered to FlashAttention tiles), runs it with xfmr-run at
several S, and checks:
  * the output against a plain float64 numpy reference (computed in row
    chunks), max |diff| <= 1e-4 * max|ref|, at every S;
  * peak RSS(S_max) - peak RSS(S_min) stays below 3x the bytes of Q, K, V and
    the output at S_max plus 16 MiB, where one S x S score matrix alone would
    need H * S^2 * 4 bytes (512 MiB at S = 8192, H = 2).
Then the same for a whole model: examples/models/llama_gqa.onnx (the forward
export, whose exporter-built causal mask xfmr-raise turns into `causal`)
at S = 512, 2048 and 4096: the growth of peak RSS from 2048 to 4096 must be
less than twice the growth from 512 to 2048 (linear: 1.33x; with any S x S
tensor: 3.2x).
Prints the measurements and "N passed, N failed".

  .venv/bin/python scripts/check-attention-memory.py [--build-dir build] [--max-seq 8192]
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
H, D = 2, 32


def build_model(path):
    shape = [1, H, "S", D]
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, shape) for n in "QKV"]
    out = helper.make_tensor_value_info("Y", TensorProto.FLOAT, shape)
    node = helper.make_node("Attention", ["Q", "K", "V"], ["Y"], is_causal=1)
    graph = helper.make_graph([node], "causal_attention", inputs, [out])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
    model.ir_version = 10
    onnx.save(model, path)


def reference(q, k, v):
    s = q.shape[2]
    out = np.zeros(q.shape, np.float64)
    scale = 1.0 / np.sqrt(D)
    for h in range(H):
        kh, vh = k[0, h].astype(np.float64), v[0, h].astype(np.float64)
        for r0 in range(0, s, 1024):
            rows = q[0, h, r0:r0 + 1024].astype(np.float64)
            scores = rows @ kh.T * scale
            idx = np.arange(r0, r0 + rows.shape[0])[:, None]
            scores[np.arange(s)[None, :] > idx] = -np.inf
            scores -= scores.max(axis=1, keepdims=True)
            p = np.exp(scores)
            out[0, h, r0:r0 + rows.shape[0]] = (p / p.sum(axis=1, keepdims=True)) @ vh
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--max-seq", type=int, default=8192)
    a = ap.parse_args()
    bindir = os.path.join(a.build_dir, "bin")
    seqs = sorted({512, a.max_seq // 4, a.max_seq})
    passed = failed = 0
    rss = {}
    with tempfile.TemporaryDirectory(prefix="xfmr-attn-") as tmp:
        model = os.path.join(tmp, "attention.onnx")
        build_model(model)
        xfa = os.path.join(tmp, "attention.xfa")
        c = subprocess.run([os.path.join(bindir, "xfmr-compile"), model, "--quiet", "-o", xfa],
                           capture_output=True, text=True)
        if c.returncode:
            print("FAIL compile: " + c.stderr.strip())
            print("0 passed, 1 failed")
            return 1
        rng = np.random.default_rng(0)
        for s in seqs:
            files = []
            data = {}
            for name in "QKV":
                x = rng.standard_normal((1, H, s, D)).astype(np.float32)
                data[name] = x
                f = os.path.join(tmp, f"{name}_{s}.npy")
                np.save(f, x)
                files += ["--input", f"{name}={f}"]
            outdir = os.path.join(tmp, f"out_{s}")
            r = subprocess.run([os.path.join(bindir, "xfmr-run"), xfa, *files, "--output-dir",
                                outdir], capture_output=True, text=True)
            m = re.search(r"peak RSS: ([0-9.]+) MiB", r.stderr)
            t = re.search(r"run: ([0-9.]+) ms", r.stderr)
            if r.returncode or not m:
                print(f"FAIL S={s}: xfmr-run failed: {r.stderr.strip()} {r.stdout.strip()}")
                failed += 1
                continue
            rss[s] = float(m.group(1))
            got = np.load(os.path.join(outdir, "Y.npy"))
            want = reference(data["Q"], data["K"], data["V"])
            err = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
            ok = err <= 1e-4
            print(f"{'PASS' if ok else 'FAIL'} S={s}: max|diff|/max|ref| = {err:.2e}, "
                  f"run {t.group(1) if t else '?'} ms, peak RSS {rss[s]:.1f} MiB")
            passed += ok
            failed += not ok
    if len(rss) == len(seqs):
        lo, hi = seqs[0], seqs[-1]
        io_mib = 4 * H * hi * D * 4 / 2**20
        bound = 3 * io_mib + 16
        growth = rss[hi] - rss[lo]
        square_mib = H * hi * hi * 4 / 2**20
        ok = growth <= bound
        print(f"{'PASS' if ok else 'FAIL'} memory: peak RSS grows {growth:.1f} MiB from S={lo} "
              f"to S={hi} (bound {bound:.1f} MiB = 3 x {io_mib:.1f} MiB of Q/K/V/Y + 16; "
              f"one S x S score matrix: {square_mib:.0f} MiB)")
        passed += ok
        failed += not ok
    ok = model_memory(bindir)
    passed += ok
    failed += not ok
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


def model_memory(bindir):
    model = os.path.join(ROOT, "examples", "models", "llama_gqa.onnx")
    rss = {}
    with tempfile.TemporaryDirectory(prefix="xfmr-model-mem-") as tmp:
        xfa = os.path.join(tmp, "model.xfa")
        subprocess.run([os.path.join(bindir, "xfmr-compile"), model, "--quiet", "-o", xfa],
                       check=True)
        for s in (512, 2048, 4096):
            ids = np.random.default_rng(s).integers(0, 256, (1, s)).astype(np.int64)
            args = []
            for name, v in (("input_ids", ids), ("attention_mask", np.ones_like(ids)),
                            ("position_ids", np.arange(s, dtype=np.int64)[None])):
                f = os.path.join(tmp, name + ".npy")
                np.save(f, v)
                args += ["--input", f"{name}={f}"]
            r = subprocess.run([os.path.join(bindir, "xfmr-run"), xfa, *args],
                               capture_output=True, text=True)
            m = re.search(r"peak RSS: ([0-9.]+) MiB", r.stderr)
            if r.returncode or not m:
                print(f"FAIL llama_gqa S={s}: {r.stderr.strip()}")
                return False
            rss[s] = float(m.group(1))
    first, second = rss[2048] - rss[512], rss[4096] - rss[2048]
    ratio = second / max(first, 0.1)
    ok = ratio < 2.0
    print(f"{'PASS' if ok else 'FAIL'} memory llama_gqa forward: peak RSS {rss[512]:.1f} / "
          f"{rss[2048]:.1f} / {rss[4096]:.1f} MiB at S = 512 / 2048 / 4096; growth ratio "
          f"{ratio:.2f} (linear 1.33, quadratic 3.2; bound 2.0)")
    return ok


if __name__ == "__main__":
    sys.exit(main())
