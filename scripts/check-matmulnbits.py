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

GPTQ's act-order (a g_idx input): random groupings of block rows each, with
no or float zero points, 4 and 8 bits, at both accuracy levels (xfmr-raise
sorts the rows by group and gathers A's columns alike); packed zero points
with g_idx are refused with the reason (onnxruntime 1.32 ignores them).

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
    # int8 activations, K not a whole number of blocks (the last one padded)
    (4, 128, 576, 40, "packed", False, 3, 4),
    (4, 32, 80, 20, "none", True, 2, 4),
]

# GPTQ act-order (g_idx: row k's group is g_idx[k]; onnxruntime 1.32 reads
# W[n, k] = (q[n, k] - zp[n, g_idx[k]]) * scale[n, g_idx[k]]): the case
# tuple as above plus the g_idx form: "act" (a random grouping, block rows
# each) or "identity" (k / block). xfmr-raise sorts the rows by group.
ACT_CASES = [
    (4, 32, 64, 48, "none", False, 3, 0, "act"),
    (4, 32, 128, 40, "float", True, 2, 0, "act"),
    (4, 64, 256, 37, "none", False, 3, 4, "act"),
    (4, 32, 96, 70, "none", True, 3, 4, "act"),
    (8, 32, 96, 32, "none", False, 3, 0, "act"),
    (4, 32, 64, 16, "none", False, 2, 4, "identity"),
]


def build(bits, block, k, n, zp, bias, rank, level, seed, g_idx=None):
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
    if g_idx:
        rows = np.arange(k) if g_idx == "identity" else np.argsort(rng.permutation(k))
        g = (rows // block).astype(np.int32)
        inits.append(helper.make_tensor("g_idx", TensorProto.INT32, g.shape, g))
        inputs += [""] * (4 - len(inputs)) + ["g_idx"]
    if bias:
        bv = rng.standard_normal(n).astype(np.float32)
        inits.append(helper.make_tensor("bias", TensorProto.FLOAT, bv.shape, bv))
        inputs += [""] * (5 - len(inputs)) + ["bias"]
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


def sorted_equivalent(model, a):
    """The act-order `model` with its rows sorted by group and no g_idx, and
    `a` with its columns gathered alike: the product xfmr computes. At
    accuracy_level 4 onnxruntime 1.32 ignores the level when g_idx is given
    (f32 activations), so the int8-activation product is checked against
    onnxruntime's level-4 kernel on this model instead."""
    from onnx import numpy_helper
    m = onnx.ModelProto()
    m.CopyFrom(model)
    inits = {t.name: t for t in m.graph.initializer}
    node = m.graph.node[0]
    attrs = {x.name: helper.get_attribute_value(x) for x in node.attribute}
    bits, k = attrs["bits"], attrs["K"]
    g = numpy_helper.to_array(inits["g_idx"])
    perm = np.argsort(g, kind="stable")
    b = numpy_helper.to_array(inits["B"])
    n, blocks, blob = b.shape
    flat = b.reshape(n, blocks * blob)
    if bits == 4:
        q = np.stack([flat & 0xF, flat >> 4], axis=-1).reshape(n, -1)[:, perm]
        flat = (q[:, 0::2] | (q[:, 1::2] << 4)).astype(np.uint8)
    else:
        flat = flat[:, perm]
    inits["B"].CopyFrom(numpy_helper.from_array(flat.reshape(n, blocks, blob), "B"))
    node.input[4] = ""
    m.graph.initializer.remove(inits["g_idx"])
    return m, np.ascontiguousarray(a[..., perm])


def check(name, model, feeds, rel_tol, work, tools, ref_model=None, ref_feeds=None):
    """Compiles and runs `model` on `feeds`; compares output Y with onnxruntime's
    (on `ref_model` and `ref_feeds` where given). Returns "pass", "fail" or
    "skip" and prints a line."""
    compile_, run = tools
    path = os.path.join(work, name + ".onnx")
    onnx.save(model, path)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    try:
        ref = ort.InferenceSession((ref_model or model).SerializeToString(), so,
                                   providers=["CPUExecutionProvider"]).run(None, ref_feeds or feeds)[0]
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
    for i, case in enumerate(ACT_CASES):
        bits, block, k, n, zp, bias, rank, level, g_idx = case
        name = "gidx_%s_b%d_bs%d_k%d_n%d_%s%s_r%d_acc%d" % (
            g_idx, bits, block, k, n, zp, "_bias" if bias else "", rank, level)
        model, a = build(*case[:-1], seed=50 + i, g_idx=g_idx)
        ref_model, ref_a = sorted_equivalent(model, a) if level == 4 else (None, None)
        results.append(check(name, model, {"A": a}, 1e-4, work, (compile_, run), ref_model,
                             {"A": ref_a} if level == 4 else None))
    # Packed zero points with g_idx: onnxruntime 1.32 reads 8 instead of
    # them, so xfmr refuses the layout (and says why in --report).
    model, _ = build(4, 32, 64, 16, "packed", False, 2, 0, seed=60, g_idx="act")
    path = os.path.join(work, "gidx_packed_refused.onnx")
    onnx.save(model, path)
    r = subprocess.run([compile_, path, "--report", "-o", os.path.join(work, "refused.xfa")],
                       capture_output=True, text=True)
    why = "g_idx with uint8 zero points"
    ok = r.returncode != 0 and why in r.stdout and "act-order" in r.stderr
    print("%s gidx_packed_refused: %s" % ("PASS" if ok else "FAIL",
                                          "refused: " + why if ok else (r.stdout + r.stderr)[-300:]))
    results.append("pass" if ok else "fail")
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
