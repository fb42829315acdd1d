#!/usr/bin/env python3
"""The fused GPU attention kernel (xfmr-gpu-attention) on shapes that cut its tiles.

For each case below, a one-node ONNX model (opset 23 Attention, raised to
xfmr.attention) is compiled
  * with `--target=sm_90a --gpu-emulate`: the kernel's program (tiles of 16
    query rows and 32 keys, head-dim chunks of 32, staging, guards, online
    softmax, the warps' products as scalar loops) runs on the CPU; its output
    must match a float64 numpy reference within 1e-4 * max|ref|;
  * for sm_90a and sm_80 (where ptxas exists): the model's attention is one
    `attn` kernel that uses mma.sync, with 0 bytes of spills.
The cases cover partial query and key tiles, head dims that are not a
multiple of 32 (and a value head dim unlike the query's), grouped-query and
multi-query heads, causal, bool and additive masks with broadcast dims, a
single query row, and head dim 256 (the largest the kernel takes).
Prints "PASS|FAIL case check: ..." lines and "N passed, N failed, N skipped".

  .venv/bin/python scripts/check-gpu-attention.py [--build-dir build] [--only NAME ...]
  .venv/bin/python scripts/check-gpu-attention.py --write-model PATH --shape B,Hq,Hkv,Sq,Skv,D,Dv[,causal]
      (only writes the model; scripts/gpu-check.sh times such a one)
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
RTOL = 1e-4

# name: (B, Hq, Hkv, Sq, Skv, D, Dv, causal, mask) with mask None, "bool"
# ([Sq, Skv]) or "float" ([B, 1, Sq, Skv], -inf and finite biases).
CASES = {
    "gqa_causal_partial_tiles": (1, 4, 2, 45, 45, 24, 24, True, None),
    "mha_causal_two_batches": (2, 2, 2, 33, 33, 64, 64, True, None),
    "mqa_bool_mask_cross": (1, 4, 1, 20, 70, 40, 72, False, "bool"),
    "float_mask_broadcast": (2, 2, 2, 17, 50, 16, 16, False, "float"),
    "single_query_row": (1, 2, 1, 1, 37, 32, 32, False, None),
    "head_dim_128": (1, 2, 2, 18, 18, 128, 128, True, None),
    "head_dim_256": (1, 1, 1, 9, 40, 256, 256, False, "bool"),
}


def build_model(path, case):
    b, hq, hkv, sq, skv, d, dv, causal, mask = case
    inputs = [helper.make_tensor_value_info("Q", TensorProto.FLOAT, [b, hq, sq, d]),
              helper.make_tensor_value_info("K", TensorProto.FLOAT, [b, hkv, skv, d]),
              helper.make_tensor_value_info("V", TensorProto.FLOAT, [b, hkv, skv, dv])]
    names = ["Q", "K", "V"]
    if mask == "bool":
        inputs.append(helper.make_tensor_value_info("M", TensorProto.BOOL, [sq, skv]))
        names.append("M")
    elif mask == "float":
        inputs.append(helper.make_tensor_value_info("M", TensorProto.FLOAT, [b, 1, sq, skv]))
        names.append("M")
    out = helper.make_tensor_value_info("Y", TensorProto.FLOAT, [b, hq, sq, dv])
    node = helper.make_node("Attention", names, ["Y"], is_causal=int(causal))
    graph = helper.make_graph([node], "attention", inputs, [out])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
    model.ir_version = 10
    onnx.save(model, path)


def make_inputs(case, rng):
    b, hq, hkv, sq, skv, d, dv, causal, mask = case
    data = {"Q": rng.standard_normal((b, hq, sq, d)).astype(np.float32),
            "K": rng.standard_normal((b, hkv, skv, d)).astype(np.float32),
            "V": rng.standard_normal((b, hkv, skv, dv)).astype(np.float32)}
    if mask == "bool":
        m = rng.random((sq, skv)) < 0.7
        m[:, 0] = True  # every row sees a key
        data["M"] = m
    elif mask == "float":
        m = rng.standard_normal((b, 1, sq, skv)).astype(np.float32)
        m[rng.random(m.shape) < 0.3] = -np.inf
        m[..., 0] = 0.0
        data["M"] = m
    return data


def reference(case, data):
    b, hq, hkv, sq, skv, d, dv, causal, mask = case
    q, k, v = (data[n].astype(np.float64) for n in "QKV")
    rep = hq // hkv
    k = np.repeat(k, rep, axis=1)
    v = np.repeat(v, rep, axis=1)
    s = q @ np.swapaxes(k, 2, 3) / np.sqrt(d)
    if mask == "bool":
        s = np.where(data["M"], s, -np.inf)
    elif mask == "float":
        s = s + data["M"].astype(np.float64)
    if causal:
        s = np.where(np.arange(skv)[None, :] > np.arange(sq)[:, None], -np.inf, s)
    s = s - s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    return (p / p.sum(axis=-1, keepdims=True)) @ v


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    return r.returncode, r.stdout, r.stderr.strip().splitlines()[-1:] if r.stderr.strip() else []


def check_case(name, case, bindir, tmp, have_ptxas):
    results = []
    model = os.path.join(tmp, name + ".onnx")
    build_model(model, case)
    data = make_inputs(case, np.random.default_rng(len(name)))
    args = []
    for n, x in data.items():
        f = os.path.join(tmp, "%s_%s.npy" % (name, n))
        np.save(f, x)
        args += ["--input", "%s=%s" % (n, f)]
    xfa = os.path.join(tmp, name + ".xfa")
    rc, _, err = run([os.path.join(bindir, "xfmr-compile"), model, "--target=sm_90a",
                      "--gpu-emulate", "--quiet", "-o", xfa])
    if rc:
        results.append(("FAIL", "emulated", "compile: %s" % " ".join(err)))
    else:
        out = os.path.join(tmp, name + ".out")
        rc, _, err = run([os.path.join(bindir, "xfmr-run"), xfa, *args, "--output-dir", out,
                          "--quiet"])
        if rc:
            results.append(("FAIL", "emulated", "run: %s" % " ".join(err)))
        else:
            got = np.load(os.path.join(out, "Y.npy")).astype(np.float64)
            want = reference(case, data)
            diff = float(np.max(np.abs(got - want))) if np.all(np.isfinite(got)) else float("inf")
            tol = RTOL * float(np.max(np.abs(want)))
            results.append(("PASS" if diff <= tol else "FAIL", "emulated",
                            "max |diff| %.2e (tol %.2e)" % (diff, tol)))
    for chip in ("sm_90a", "sm_80"):
        if not have_ptxas:
            results.append(("SKIP", chip, "no ptxas"))
            continue
        rc, out, err = run([os.path.join(bindir, "xfmr-compile"), model, "--target=" + chip,
                            "--report", "--quiet", "-o", os.path.join(tmp, name + chip + ".xfa")])
        if rc:
            results.append(("FAIL", chip, "compile: %s" % " ".join(err)))
            continue
        rows = [l.split() for l in out.splitlines() if re.match(r"\s+attn\d+_", l)]
        if len(rows) != 1:
            results.append(("FAIL", chip, "%d attn kernels, expected 1" % len(rows)))
            continue
        line = " ".join(rows[0])
        spill = re.search(r"spill\s+(\d+) B", line)
        smem = re.search(r"smem\s+(\d+) B", line)
        ok = "mma.sync" in line and spill and spill.group(1) == "0"
        results.append(("PASS" if ok else "FAIL", chip,
                        "%s: %s B spills, %s B shared memory, %s" % (
                            rows[0][0], spill.group(1) if spill else "?",
                            smem.group(1) if smem else "?",
                            "mma.sync" if "mma.sync" in line else "no tensor cores")))
    return results


def find_ptxas():
    for home in (os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if home and os.access(os.path.join(home, "bin", "ptxas"), os.X_OK):
            return True
    return any(os.access(os.path.join(p, "ptxas"), os.X_OK)
               for p in os.environ.get("PATH", "").split(os.pathsep) if p)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--only", nargs="+", metavar="NAME", choices=sorted(CASES))
    ap.add_argument("--write-model", metavar="PATH", help="write one model (--shape) and exit")
    ap.add_argument("--shape", help="B,Hq,Hkv,Sq,Skv,D,Dv[,causal] for --write-model")
    a = ap.parse_args()
    if a.write_model:
        if not a.shape:
            ap.error("--write-model needs --shape")
        f = a.shape.split(",")
        if len(f) not in (7, 8) or (len(f) == 8 and f[7] != "causal"):
            ap.error("--shape: B,Hq,Hkv,Sq,Skv,D,Dv[,causal]")
        build_model(a.write_model, (*map(int, f[:7]), len(f) == 8, None))
        return 0
    bindir = os.path.join(a.build_dir, "bin")
    have_ptxas = find_ptxas()
    counts = {"PASS": 0, "FAIL": 0, "SKIP": 0}
    with tempfile.TemporaryDirectory(prefix="xfmr-gpu-attn-") as tmp:
        for name, case in CASES.items():
            if a.only and name not in a.only:
                continue
            for status, check, detail in check_case(name, case, bindir, tmp, have_ptxas):
                counts[status] += 1
                print("%s %s %s: %s" % (status, name, check, detail), flush=True)
    print("%d passed, %d failed, %d skipped" % (counts["PASS"], counts["FAIL"], counts["SKIP"]))
    return 1 if counts["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())
