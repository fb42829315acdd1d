#!/usr/bin/env python3
"""Checks xfmr's lowering of com.microsoft MatMulNBits and GatherBlockQuantized
against onnxruntime.

Builds single-node models (onnx helper, fixed seeds) over the layouts the
quantizers write: 4 and 8 bits; block sizes 16, 32, 64, 128; K a multiple of
the block or not (a partial last block); no zero points (2^(bits-1)), packed
uint8 zero points, or float zero points; with and without bias; A of rank 2
and 3. Each is compiled with xfmr-compile, run with xfmr-run, and compared
with onnxruntime at the same accuracy_level within 1e-4 of the largest
|output|: level 0 (f32 activations) and level 4 (activations quantized to
int8 per block; xfmr's micro-kernel for 4 bits with blocks of a multiple of
32 dividing K, the same rounding as onnxruntime's, so the block sums are
exact integers on both sides).

GatherBlockQuantized (onnxruntime-genai's 4-bit embedding table, shared with
the lm_head's MatMulNBits): uint8 data of 2, 4 and 8 bits, block sizes 16 to
128 (a partial last block too), no or packed zero points, data of rank 2 and
3, int64 and int32 indices of rank 1 and 2, negative indices; compared exactly
up to 1e-6 of the largest |output|.

Usage: check-matmulnbits.py [--build-dir build] [--keep DIR]
Prints one PASS/FAIL/SKIP line per case (SKIP: onnxruntime's CPU kernel
does not run that layout) and `N passed, M failed, K skipped`.
"""

import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# (bits, block, K, N, zero points: none | packed | float, bias, A rank,
#  accuracy_level)
CASES = [
    (4, 32, 64, 48, "none", False, 3, 0),
    (4, 32, 80, 40, "packed", True, 3, 0),
    (4, 16, 48, 24, "float", False, 2, 0),
    (4, 64, 200, 16, "packed", False, 2, 0),
    (4, 128, 256, 8, "none", True, 3, 0),
    (8, 32, 96, 32, "none", False, 3, 0),
    (8, 16, 40, 16, "packed", True, 2, 0),
    (8, 64, 64, 24, "float", False, 3, 0),
    # int8 activations (N not a multiple of the kernel's 4-column groups too)
    (4, 32, 64, 48, "none", False, 3, 4),
    (4, 32, 96, 70, "packed", True, 3, 4),
    (4, 64, 256, 37, "packed", False, 2, 4),
    (4, 128, 384, 9, "none", True, 3, 4),
]


def build(bits, block, k, n, zp, bias, rank, level, seed):
    rng = np.random.default_rng(seed)
    blocks = (k + block - 1) // block
    blob = block * bits // 8
    b = rng.integers(0, 256, size=(n, blocks, blob), dtype=np.uint8)
    scales = rng.uniform(0.01, 0.1, size=(n * blocks,)).astype(np.float32)
    inits = [helper.make_tensor("B", TensorProto.UINT8, b.shape, b.tobytes(), raw=True),
             helper.make_tensor("scales", TensorProto.FLOAT, scales.shape, scales)]
    inputs = ["A", "B", "scales"]
    if zp == "packed":
        cols = (blocks * bits + 7) // 8
        z = rng.integers(0, 256, size=(n * cols,), dtype=np.uint8)
        inits.append(helper.make_tensor("zp", TensorProto.UINT8, z.shape, z.tobytes(), raw=True))
        inputs.append("zp")
    elif zp == "float":
        z = rng.uniform(0, 2 ** bits - 1, size=(n * blocks,)).astype(np.float32)
        inits.append(helper.make_tensor("zp", TensorProto.FLOAT, z.shape, z))
        inputs.append("zp")
    if bias:
        bv = rng.standard_normal(n).astype(np.float32)
        inits.append(helper.make_tensor("bias", TensorProto.FLOAT, bv.shape, bv))
        inputs += [""] * (4 - len(inputs)) + ["", "bias"]
    node = helper.make_node("MatMulNBits", inputs, ["Y"], domain="com.microsoft", K=k, N=n,
                            bits=bits, block_size=block, accuracy_level=level)
    a_shape = ["batch", "seq", k] if rank == 3 else ["rows", k]
    y_shape = a_shape[:-1] + [n]
    graph = helper.make_graph([node], "matmulnbits",
                              [helper.make_tensor_value_info("A", TensorProto.FLOAT, a_shape)],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, y_shape)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21),
                                                    helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 10
    a = rng.standard_normal((2, 3, k) if rank == 3 else (5, k)).astype(np.float32)
    return model, a


# GatherBlockQuantized: (bits, block, data shape [V, .., C] in elements,
#  zero points: none | packed, indices shape, index type)
GBQ_CASES = [
    (4, 32, (16, 64), "none", (2, 3), TensorProto.INT64),
    (4, 16, (10, 48), "packed", (5,), TensorProto.INT32),
    (4, 128, (8, 160), "packed", (1, 4), TensorProto.INT64),
    (8, 32, (12, 96), "none", (3,), TensorProto.INT64),
    (8, 64, (6, 4, 64), "packed", (2, 2), TensorProto.INT64),
    (2, 16, (9, 64), "packed", (4,), TensorProto.INT64),
    (2, 32, (7, 32), "none", (2, 1), TensorProto.INT32),
]


def build_gbq(bits, block, shape, zp, ishape, itype, seed):
    rng = np.random.default_rng(seed)
    per = 8 // bits
    rows, c = shape[:-1], shape[-1]
    blocks = (c + block - 1) // block
    data = rng.integers(0, 256, size=rows + (c // per,), dtype=np.uint8)
    scales = rng.uniform(0.01, 0.1, size=rows + (blocks,)).astype(np.float32)
    inits = [helper.make_tensor("data", TensorProto.UINT8, data.shape, data.tobytes(), raw=True),
             helper.make_tensor("scales", TensorProto.FLOAT, scales.shape, scales)]
    inputs = ["data", "ids", "scales"]
    if zp == "packed":
        z = rng.integers(0, 256, size=rows + ((blocks + per - 1) // per,), dtype=np.uint8)
        inits.append(helper.make_tensor("zp", TensorProto.UINT8, z.shape, z.tobytes(), raw=True))
        inputs.append("zp")
    node = helper.make_node("GatherBlockQuantized", inputs, ["Y"], domain="com.microsoft",
                            bits=bits, block_size=block, gather_axis=0, quantize_axis=len(shape) - 1)
    y_shape = list(ishape) + list(shape[1:])
    graph = helper.make_graph([node], "gbq",
                              [helper.make_tensor_value_info("ids", itype, list(ishape))],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, y_shape)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21),
                                                    helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 10
    ids = rng.integers(-shape[0], shape[0], size=ishape)
    return model, ids.astype(np.int64 if itype == TensorProto.INT64 else np.int32)


def check(name, model, feeds, rel_tol, work, tools):
    """Compiles and runs `model` on `feeds`; compares output Y with onnxruntime's.
    Returns "pass", "fail" or "skip" and prints a line."""
    compile_, run = tools
    path = os.path.join(work, name + ".onnx")
    onnx.save(model, path)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    try:
        ref = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    except Exception as e:  # a layout onnxruntime's CPU kernel does not run
        print("SKIP %s: onnxruntime: %s" % (name, str(e).splitlines()[0][-160:]))
        return "skip"
    args = []
    for k, v in feeds.items():
        np.save(os.path.join(work, "%s.%s.npy" % (name, k)), v)
        args += ["--input", "%s=%s" % (k, os.path.join(work, "%s.%s.npy" % (name, k)))]
    art = os.path.join(work, name + ".xfa")
    out_dir = os.path.join(work, name + ".out")
    r = subprocess.run([compile_, path, "-o", art], capture_output=True, text=True)
    if r.returncode == 0:
        r = subprocess.run([run, art] + args + ["--output-dir", out_dir, "--quiet"],
                           capture_output=True, text=True)
    if r.returncode != 0:
        err = (r.stderr.strip().splitlines() or ["exit %d" % r.returncode])[0]
        print("FAIL %s: %s" % (name, err))
        return "fail"
    got = np.load(os.path.join(out_dir, "Y.npy"))
    diff = float(np.max(np.abs(got - ref))) if got.shape == ref.shape else float("inf")
    tol = rel_tol * float(np.max(np.abs(ref)))
    ok = diff <= tol
    print("%s %s: max |diff| %.3g (tol %.3g)" % ("PASS" if ok else "FAIL", name, diff, tol))
    return "pass" if ok else "fail"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    p.add_argument("--keep", help="keep the models and artifacts in this directory")
    args = p.parse_args()
    compile_ = os.path.join(args.build_dir, "bin", "xfmr-compile")
    run = os.path.join(args.build_dir, "bin", "xfmr-run")
    work = args.keep or tempfile.mkdtemp(prefix="xfmr-mnb-")
    os.makedirs(work, exist_ok=True)
    results = []
    for i, case in enumerate(CASES):
        bits, block, k, n, zp, bias, rank, level = case
        name = "b%d_bs%d_k%d_n%d_%s%s_r%d_acc%d" % (bits, block, k, n, zp, "_bias" if bias else "",
                                                   rank, level)
        model, a = build(*case, seed=i)
        results.append(check(name, model, {"A": a}, 1e-4, work, (compile_, run)))
    for i, case in enumerate(GBQ_CASES):
        bits, block, shape, zp, ishape, itype = case
        name = "gbq_b%d_bs%d_%s_%s_idx%s_%s" % (
            bits, block, "x".join(map(str, shape)), zp, "x".join(map(str, ishape)),
            "i64" if itype == TensorProto.INT64 else "i32")
        model, ids = build_gbq(*case, seed=100 + i)
        results.append(check(name, model, {"ids": ids}, 1e-6, work, (compile_, run)))
    passed, failed, skipped = (results.count(x) for x in ("pass", "fail", "skip"))
    print("%d passed, %d failed, %d skipped" % (passed, failed, skipped))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
