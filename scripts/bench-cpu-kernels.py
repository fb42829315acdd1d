#!/usr/bin/env python3
"""Benchmarks xfmr's CPU matrix-vector/matrix kernels at LLM shapes.

Builds one-op ONNX models, y = x @ W with x float32 [M, K] and W [K, N]
(float32, or float16/bfloat16 weights cast to float32 inside the graph: the
dequantize-on-load pattern), compiles each with xfmr-compile and runs
xfmr-kernel-bench, which measures them beside a STREAM triad and a naive C++
GEMV loop in the same process and prints one table.

Usage: .venv/bin/python scripts/bench-cpu-kernels.py [--build-dir build]
           [--work DIR] [--quick] [--min-time S]
--quick runs only 4096x4096 (fp32 and fp16, batch 1 and 16).
This is a benchmark, not a test: numbers depend on the machine and its load.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def model(k, n, dtype, path):
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((k, n), dtype=np.float32) * 0.02)
    nodes = []
    if dtype == "fp32":
        init = numpy_helper.from_array(w, "W")
        wname = "W"
    elif dtype == "fp16":
        init = numpy_helper.from_array(w.astype(np.float16), "W")
        nodes.append(helper.make_node("Cast", ["W"], ["W32"], to=TensorProto.FLOAT))
        wname = "W32"
    else:  # bf16: raw upper halves of the float32 bits
        bits = (w.view(np.uint32) >> 16).astype(np.uint16)
        init = helper.make_tensor("W", TensorProto.BFLOAT16, (k, n), bits.tobytes(), raw=True)
        nodes.append(helper.make_node("Cast", ["W"], ["W32"], to=TensorProto.FLOAT))
        wname = "W32"
    nodes.append(helper.make_node("MatMul", ["x", wname], ["y"]))
    g = helper.make_graph(
        nodes, "gemv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["m", k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["m", n])],
        [init])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--work", default=None)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--min-time", default="0.5")
    a = ap.parse_args()
    bindir = os.path.join(a.build_dir, "bin")
    work = a.work or tempfile.mkdtemp(prefix="xfmr-bench-")
    os.makedirs(work, exist_ok=True)
    shapes = [(4096, 4096)] if a.quick else [(4096, 4096), (4096, 11008)]
    dtypes = ["fp32", "fp16"] if a.quick else ["fp32", "fp16", "bf16"]
    cases = []
    for k, n in shapes:
        for dt in dtypes:
            onnx_path = os.path.join(work, f"matmul_{dt}_{k}x{n}.onnx")
            art = onnx_path[:-5] + ".xfa"
            if not os.path.exists(os.path.join(art, "manifest.json")):
                print(f"building {os.path.basename(art)}", file=sys.stderr)
                model(k, n, dt, onnx_path)
                subprocess.run([os.path.join(bindir, "xfmr-compile"), onnx_path,
                                "--quiet", "-o", art], check=True)
            for m in (1, 16):
                cases.append(f"{dt} batch{m} {k}x{n}={art}:{m}:{k}:{n}")
    sys.stdout.flush()
    return subprocess.run([os.path.join(bindir, "xfmr-kernel-bench"), "--min-time",
                           a.min_time] + cases).returncode


if __name__ == "__main__":
    sys.exit(main())
