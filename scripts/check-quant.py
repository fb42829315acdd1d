#!/usr/bin/env python3
"""Checks `xfmr-compile --quant=MODE` against onnxruntime on the same quantized weights.

For each model (an fp32 ONNX causal LM with input_ids and attention_mask,
e.g. examples/hf/llama_ts.onnx): NumPy quantizes every MatMul whose B is a
constant f32 [K, N] (initializer or Constant) the way xfmr's pass documents it
and writes it as com.microsoft MatMulNBits (accuracy_level 4: int8
activations on both sides):

  int4-gG  K a multiple of G; per column and block of G along K: lo = min(0,
           min x), hi = max(0, max x), scale = (hi - lo) / 15, zero point =
           clip(round(-lo / scale), 0, 15), q = clip(round(x / scale) + zp,
           0, 15); bits 4, block_size G
  int8     any K; per column: scale = max |x| / 127, q = clip(round(x /
           scale), -127, 127) stored as q + 128, no zero points (128); bits
           8, one block of block_size = the smallest power of two >= max(16,
           K) (onnxruntime 1.23 computes garbage for 8-bit block_size > 256:
           models with such a K are skipped)
  bf16     every weight rounded to bfloat16 (to nearest, ties to even);
           the reference keeps the MatMul and stores the rounded weights
           as f32 (exact), so onnxruntime runs its own f32 product
  fp8-e4m3 per column: scale = max |x| / 448, q = x / scale rounded to
           float8 e4m3fn (ml_dtypes; to nearest even, saturated); the
           reference stores q * scale as f32 (exact) in the MatMul

(f32, ties to even). onnxruntime runs that model, xfmr compiles the fp32
model with --quant and runs it, on the same seeded inputs. The logits must
agree within 1e-4 of max|logit| (within 1e-2 with a note: an activation's
int8 rounding can flip on a 1-ulp difference upstream); the distance to the
fp32 logits is printed.

  .venv/bin/python scripts/check-quant.py --build-dir build [--quant int4-g32] MODEL.onnx [...]

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
# The largest 8-bit block_size onnxruntime 1.23's MatMulNBits computes right
# (larger ones read garbage on the CPU, at every accuracy_level).
ORT_MAX_INT8_BLOCK = 256


def int8_block(k):
    """--quant=int8's block_size for K: the smallest power of two >= max(16, K)."""
    return max(16, 1 << (k - 1).bit_length())


def quantize_int4(w, g):
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


def quantize_int8(w):
    """[K, N] f32 -> (packed [N, 1, bs] u8, scales [N] f32, no zero points)."""
    k, n = w.shape
    scale = (np.abs(w).max(axis=0) / np.float32(127)).astype(np.float32)
    scale = np.where((scale > 0) & np.isfinite(scale), scale, np.float32(1)).astype(np.float32)
    q = np.clip(np.rint(w / scale), -127, 127)
    packed = np.full((n, 1, int8_block(k)), 128, np.uint8)  # padding: q = 0
    packed[:, 0, :k] = (q.T + 128).astype(np.uint8)
    return packed, scale, None


def quantize(w, mode):
    """MatMulNBits' (B, scales, zero points or None, bits, block_size) for the
    f32 [K, N] `w` in `mode`; None when xfmr leaves it in f32."""
    if mode == "int8":
        return quantize_int8(w) + (8, int8_block(w.shape[0]))
    g = int(mode[len("int4-g"):])
    if w.shape[0] % g or w.shape[0] < g:
        return None
    return quantize_int4(w, g) + (4, g)


def bf16_rounded(w):
    """f32 `w` rounded to bfloat16 (to nearest, ties to even), as f32."""
    bits = w.astype(np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.astype(np.uint32).view(np.float32)


def fp8_rounded(w):
    """f32 [K, N] `w` through per-column float8 e4m3fn and back, as f32."""
    import ml_dtypes
    w = w.astype(np.float32)
    amax = np.max(np.abs(w), axis=0)
    scale = (amax / np.float32(448)).astype(np.float32)
    scale = np.where((scale > 0) & np.isfinite(scale), scale, np.float32(1))
    q = np.clip(w / scale, -448, 448).astype(ml_dtypes.float8_e4m3fn)
    return (q.astype(np.float32) * scale).astype(np.float32)


def rounded_model(model, fn):
    """A copy of `model` with every MatMul's constant f32 [K, N] B replaced by
    fn(B) (f32 values); the count."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    weights = {n.input[1] for n in out.graph.node if n.op_type == "MatMul" and len(n.input) == 2}
    count = 0
    for t in out.graph.initializer:
        if t.name in weights and t.data_type == onnx.TensorProto.FLOAT and len(t.dims) == 2:
            t.CopyFrom(numpy_helper.from_array(fn(numpy_helper.to_array(t)), t.name))
            count += 1
    for n in out.graph.node:
        if n.op_type == "Constant" and n.output[0] in weights and n.attribute[0].name == "value":
            t = n.attribute[0].t
            if t.data_type == onnx.TensorProto.FLOAT and len(t.dims) == 2:
                t.CopyFrom(numpy_helper.from_array(fn(numpy_helper.to_array(t)), t.name))
                count += 1
    return out, count, 0


def quantized_model(model, mode):
    """A copy of `model` with the MatMuls xfmr quantizes as MatMulNBits; their
    count and largest block_size."""
    if mode == "bf16":
        return rounded_model(model, bf16_rounded)
    if mode == "fp8-e4m3":
        return rounded_model(model, fp8_rounded)
    graph = model.graph
    consts = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant" and node.attribute and node.attribute[0].name == "value":
            consts[node.output[0]] = numpy_helper.to_array(node.attribute[0].t)
    nodes, inits, count, largest = [], [], 0, 0
    for node in graph.node:
        w = consts.get(node.input[1]) if node.op_type == "MatMul" and len(node.input) == 2 else None
        q = quantize(w, mode) if w is not None and w.dtype == np.float32 and w.ndim == 2 else None
        if q is None:
            nodes.append(node)
            continue
        k, n = w.shape
        packed, scales, zeros, bits, block = q
        base = "xfmr_q%d_" % count
        inputs = [node.input[0], base + "B", base + "scales"]
        inits += [numpy_helper.from_array(packed, base + "B"),
                  numpy_helper.from_array(scales, base + "scales")]
        if zeros is not None:
            inputs.append(base + "zp")
            inits.append(numpy_helper.from_array(zeros, base + "zp"))
        nodes.append(helper.make_node(
            "MatMulNBits", inputs, list(node.output), name=node.name, domain="com.microsoft",
            K=k, N=n, bits=bits, block_size=block, accuracy_level=4))
        count += 1
        largest = max(largest, block)
    out = onnx.ModelProto()
    out.CopyFrom(model)
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    out.graph.initializer.extend(inits)
    if not any(o.domain == "com.microsoft" for o in out.opset_import):
        out.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return out, count, largest


def check(path, build, work, mode):
    """(status, detail) of one model."""
    name = os.path.splitext(os.path.basename(path))[0]
    model = onnx.load(path)
    qmodel, count, largest = quantized_model(model, mode)
    if mode == "int8" and largest > ORT_MAX_INT8_BLOCK:
        return "SKIP", "block_size %d: onnxruntime computes 8-bit blocks of at most %d" % (
            largest, ORT_MAX_INT8_BLOCK)
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
    r = subprocess.run([os.path.join(build, "bin", "xfmr-compile"), path, "--quant=" + mode,
                        "-o", art, "--quiet"], capture_output=True, text=True)
    if r.returncode == 0:
        r = subprocess.run([os.path.join(build, "bin", "xfmr-run"), art] +
                           sum([["--input", "%s=%s" % (f, os.path.join(work, f + ".npy"))]
                                for f in feed], []) + ["--output-dir", out, "--quiet"],
                           capture_output=True, text=True)
    if r.returncode != 0:
        return "FAIL", (r.stderr.strip().splitlines() or ["exit %d" % r.returncode])[0]
    got = np.load(os.path.join(out, "logits.npy"))
    scale = float(np.max(np.abs(ref)))
    diff = float(np.max(np.abs(got - ref))) / scale
    vs_fp32 = float(np.max(np.abs(got - fp32))) / float(np.max(np.abs(fp32)))
    detail = "%d MatMuls quantized; max |diff| %.2e of max|logit| (fp32: %.2e)" % (count, diff,
                                                                                   vs_fp32)
    if diff > RTOL:
        detail += " (within %g: an int8 rounding flip)" % INT8_FLIP_RTOL
    return "PASS" if count > 0 and diff <= INT8_FLIP_RTOL else "FAIL", detail


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="+")
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--quant", default="int4-g32",
                    choices=["int4-g32", "int4-g64", "int4-g128", "int8", "bf16", "fp8-e4m3"])
    a = ap.parse_args()
    tally = Tally()
    with tempfile.TemporaryDirectory(prefix="xfmr-quant-") as work:
        for m in a.models:
            status, detail = check(m, a.build_dir, work, a.quant)
            tally.add(os.path.basename(m), [(status, a.quant, detail)])
    return tally.finish()


if __name__ == "__main__":
    sys.exit(main())
