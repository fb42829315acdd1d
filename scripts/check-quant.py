#!/usr/bin/env python3
"""Checks `xfmr-compile --quant=int4-gG` against onnxruntime on the same quantized weights.

For each model (an fp32 ONNX causal LM with input_ids and attention_mask,
e.g. examples/hf/llama_ts.onnx): NumPy quantizes every MatMul whose B is a
constant f32 [K, N] (initializer or Constant) with K a multiple of G the way
xfmr's pass documents it (per column and block of G along K: lo = min(0,
min x), hi = max(0, max x), scale = (hi - lo) / 15, zero point =
clip(round(-lo / scale), 0, 15), q = clip(round(x / scale) + zp, 0, 15), f32,
ties to even) and writes it as com.microsoft MatMulNBits (accuracy_level 4);
onnxruntime runs that model, xfmr compiles the fp32 model with --quant and
runs it, on the same seeded inputs. The logits must agree within 1e-4 of
max|logit| (within 1e-2 with a note: an activation's int8 rounding can flip
on a 1-ulp difference upstream); the distance to the fp32 logits is printed.

  .venv/bin/python scripts/check-quant.py --build-dir build [--group 32] MODEL.onnx [...]

Prints one PASS/FAIL line per model and `N passed, M failed, K skipped`.
"""

import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from xfmr_refs import INT8_FLIP_RTOL, Tally, reference_session  # noqa: E402

RTOL = 1e-4


def quantize(w, g):
    """[K, N] f32 -> (packed [N, K/g, g/2] u8, scales [N*K/g] f32, zeros [N*ceil(K/g/2)] u8)."""
    k, n = w.shape
    blocks = k // g
    x = w.reshape(blocks, g, n).astype(np.float32)
    lo = np.minimum(np.float32(0), x.min(axis=1))  # [blocks, n]
    hi = np.maximum(np.float32(0), x.max(axis=1))
    scale = ((hi - lo) / np.float32(15)).astype(np.float32)
    scale = np.where((scale > 0) & np.isfinite(scale), scale, np.float32(1)).astype(np.float32)
    zp = np.clip(np.rint(-lo / scale), 0, 15).astype(np.float32)
    q = np.clip(np.rint(x / scale[:, None, :]) + zp[:, None, :], 0, 15).astype(np.uint8)
    q = q.transpose(2, 0, 1)  # [n, blocks, g]
    packed = (q[:, :, 0::2] | (q[:, :, 1::2] << 4)).astype(np.uint8)
    z = zp.T.astype(np.uint8)  # [n, blocks]
    if blocks % 2:
        z = np.concatenate([z, np.zeros((n, 1), np.uint8)], axis=1)
    zeros = (z[:, 0::2] | (z[:, 1::2] << 4)).astype(np.uint8).reshape(-1)
    return packed, scale.T.reshape(-1).astype(np.float32), zeros


def quantized_model(model, g):
    """A copy of `model` with the MatMuls xfmr quantizes as MatMulNBits; and their count."""
    graph = model.graph
    consts = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant" and node.attribute and node.attribute[0].name == "value":
            consts[node.output[0]] = numpy_helper.to_array(node.attribute[0].t)
    nodes, inits, count = [], [], 0
    for node in graph.node:
        w = consts.get(node.input[1]) if node.op_type == "MatMul" and len(node.input) == 2 else None
        if w is None or w.dtype != np.float32 or w.ndim != 2 or w.shape[0] % g or w.shape[0] < g:
            nodes.append(node)
            continue
        k, n = w.shape
        packed, scales, zeros = quantize(w, g)
        base = "xfmr_q%d_" % count
        inits += [numpy_helper.from_array(packed, base + "B"),
                  numpy_helper.from_array(scales, base + "scales"),
                  numpy_helper.from_array(zeros, base + "zp")]
        nodes.append(helper.make_node(
            "MatMulNBits", [node.input[0], base + "B", base + "scales", base + "zp"],
            list(node.output), name=node.name, domain="com.microsoft", K=k, N=n, bits=4,
            block_size=g, accuracy_level=4))
        count += 1
    out = onnx.ModelProto()
    out.CopyFrom(model)
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    out.graph.initializer.extend(inits)
    if not any(o.domain == "com.microsoft" for o in out.opset_import):
        out.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return out, count


def check(path, build, work, g):
    name = os.path.splitext(os.path.basename(path))[0]
    model = onnx.load(path)
    qmodel, count = quantized_model(model, g)
    qpath = os.path.join(work, name + ".q.onnx")
    onnx.save(qmodel, qpath)
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 100, size=(2, 7), dtype=np.int64)
    mask = np.ones((2, 7), np.int64)
    feed = {"input_ids": ids, "attention_mask": mask}
    ref = reference_session(qpath).run(None, feed)[0]
    fp32 = reference_session(path).run(None, feed)[0]
    art = os.path.join(work, name + ".xfa")
    for f, v in feed.items():
        np.save(os.path.join(work, f + ".npy"), v)
    out = os.path.join(work, name + ".out")
    r = subprocess.run([os.path.join(build, "bin", "xfmr-compile"), path, "--quant=int4-g%d" % g,
                        "-o", art, "--quiet"], capture_output=True, text=True)
    if r.returncode == 0:
        r = subprocess.run([os.path.join(build, "bin", "xfmr-run"), art] +
                           sum([["--input", "%s=%s" % (f, os.path.join(work, f + ".npy"))]
                                for f in feed], []) + ["--output-dir", out, "--quiet"],
                           capture_output=True, text=True)
    if r.returncode != 0:
        return False, (r.stderr.strip().splitlines() or ["exit %d" % r.returncode])[0]
    got = np.load(os.path.join(out, "logits.npy"))
    scale = float(np.max(np.abs(ref)))
    diff = float(np.max(np.abs(got - ref))) / scale
    vs_fp32 = float(np.max(np.abs(got - fp32))) / float(np.max(np.abs(fp32)))
    detail = "%d MatMuls quantized; max |diff| %.2e of max|logit| (fp32: %.2e)" % (count, diff,
                                                                                   vs_fp32)
    if diff <= RTOL:
        return count > 0, detail
    return (count > 0 and diff <= INT8_FLIP_RTOL,
            detail + " (within %g: an int8 rounding flip)" % INT8_FLIP_RTOL)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="+")
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--group", type=int, default=32, choices=[32, 64, 128])
    a = ap.parse_args()
    tally = Tally()
    with tempfile.TemporaryDirectory(prefix="xfmr-quant-") as work:
        for m in a.models:
            ok, detail = check(m, a.build_dir, work, a.group)
            tally.add(os.path.basename(m), [("PASS" if ok else "FAIL", "int4-g%d" % a.group,
                                            detail)])
    return tally.finish()


if __name__ == "__main__":
    sys.exit(main())
