#!/usr/bin/env python3
"""Writes test/Importer/Inputs/big_external.onnx: a valid model whose 1 GiB of
weights live in the external data file big_external.weights (not committed).

  x: float[1, 8192] -> MatMul w0 -> MatMul w1 -> MatMul w2 -> MatMul w3 -> y: float[1, 8192]
  w0..w3: float[8192, 8192] (256 MiB each) at offsets 0, 256 MiB, 512 MiB, 768 MiB

The test creates the weights file itself (all zeros, sparse):
  truncate -s 1G <dir>/big_external.weights
The .onnx holds no tensor data, so it is a few hundred bytes. Deterministic.

Usage: .venv/bin/python scripts/gen_big_external_model.py [--out PATH] [--check]
  --check: truncate a 1 GiB weights file in a temp dir, run onnx.checker on
           the model there, and delete it again.
"""

import argparse
import os
import shutil
import tempfile

import onnx
from onnx import TensorProto, helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUT = os.path.join(ROOT, "test", "Importer", "Inputs", "big_external.onnx")
WEIGHTS = "big_external.weights"
D = 8192
NBYTES = D * D * 4  # 256 MiB
N_LAYERS = 4


def build():
    inits, nodes = [], []
    prev = "x"
    for i in range(N_LAYERS):
        t = TensorProto()
        t.name = "w%d" % i
        t.data_type = TensorProto.FLOAT
        t.dims.extend([D, D])
        t.data_location = TensorProto.EXTERNAL
        for k, v in (("location", WEIGHTS), ("offset", i * NBYTES), ("length", NBYTES)):
            e = t.external_data.add()
            e.key, e.value = k, str(v)
        inits.append(t)
        out = "y" if i == N_LAYERS - 1 else "h%d" % i
        nodes.append(helper.make_node("MatMul", [prev, t.name], [out], name="matmul%d" % i))
        prev = out
    g = helper.make_graph(
        nodes, "big_external",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, D])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, D])], inits)
    m = onnx.ModelProto()
    m.ir_version = 8
    m.graph.CopyFrom(g)
    o = m.opset_import.add()
    o.domain, o.version = "", 17
    return m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=DEFAULT_OUT)
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    m = build()
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "wb") as f:
        f.write(m.SerializeToString())
    print("wrote %s (%d bytes); weights file %s must be %d bytes"
          % (a.out, os.path.getsize(a.out), WEIGHTS, N_LAYERS * NBYTES))
    if a.check:
        d = tempfile.mkdtemp()
        try:
            p = os.path.join(d, "big_external.onnx")
            shutil.copy(a.out, p)
            with open(os.path.join(d, WEIGHTS), "wb") as f:
                f.truncate(N_LAYERS * NBYTES)
            # Path form: the checker validates the external-data references
            # (relative, inside the dir, file exists) without loading them.
            onnx.checker.check_model(p, full_check=True)
            print("onnx.checker: ok (with a %d-byte %s)" % (os.path.getsize(os.path.join(d, WEIGHTS)), WEIGHTS))
        finally:
            shutil.rmtree(d)


if __name__ == "__main__":
    main()
