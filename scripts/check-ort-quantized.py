#!/usr/bin/env python3
"""Models quantized by onnxruntime's own tools: xfmr against onnxruntime.

For each fp32 causal LM given (input_ids, attention_mask -> logits, e.g.
examples/hf/llama_ts.onnx), writes with onnxruntime.quantization:

  qdq          quantize_static, QDQ format: QuantizeLinear/DequantizeLinear
               around every MatMul, int8 activations (calibrated on seeded
               random ids) and int8 weights per output channel
  dynamic      quantize_dynamic, int8 weights per tensor: DynamicQuantizeLinear
               + MatMulInteger (and the embedding as uint8 rows behind a
               DequantizeLinear)
  dynamic-pc   the same with per_channel=True (per-column weight zero points)
  nbits        MatMulNBitsQuantizer: com.microsoft MatMulNBits, 4 bits,
               blocks of 32, asymmetric (onnxruntime-genai's int4 format)

Both dynamic modes use reduce_range=True (7-bit weights): onnxruntime's
uint8 x int8 MatMulInteger on AVX2 without VNNI sums byte pairs in
saturating int16 (vpmaddubsw) and gets some products wrong with full-range
weights, while xfmr's are exact; with 7-bit weights both are exact.

xfmr raises MatMul(A, DequantizeLinear(8-bit W, scale, zero point)) to
xfmr.linear on W - zero point as int8 typed !quant.uniform (read as int8 by
the product's micro-kernel, or by the GPU's tensor-core products with
--compile-args "--target=sm_90a --gpu-emulate"). Each quantized model is compiled with xfmr-compile and run with xfmr-run on
seeded inputs (batch 2, sequence 7); the logits must agree with
onnxruntime's (graph unoptimized, one thread) within 1e-3 of max |logit|
(issue 12).

  .venv/bin/python scripts/check-ort-quantized.py --build-dir build [--modes qdq,dynamic] \
      [--keep DIR] [--compile-args "ARGS"] MODEL.onnx [...]

(--keep DIR leaves the quantized models, NAME_MODE.onnx, and their
artifacts in DIR.)

Prints one `PASS|FAIL MODEL MODE: detail` line per model and mode and `N
passed, M failed, K skipped`.
"""

import argparse
import logging
import os
import subprocess
import sys
import tempfile
import warnings

import numpy as np
import onnx

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from xfmr_refs import Tally, reference_session  # noqa: E402

RTOL = 1e-3
MODES = ("qdq", "dynamic", "dynamic-pc", "nbits")


def feeds(seed, count):
    rng = np.random.default_rng(seed)
    return [{"input_ids": rng.integers(0, 100, (2, 7)).astype(np.int64),
             "attention_mask": np.ones((2, 7), np.int64)} for _ in range(count)]


def quantize(src, dst, mode):
    from onnxruntime import quantization as q
    if mode == "qdq":
        class Reader(q.CalibrationDataReader):
            def __init__(self):
                self.it = iter(feeds(1, 4))

            def get_next(self):
                return next(self.it, None)
        q.quantize_static(src, dst, Reader(), quant_format=q.QuantFormat.QDQ,
                          weight_type=q.QuantType.QInt8, activation_type=q.QuantType.QInt8,
                          op_types_to_quantize=["MatMul"], per_channel=True)
    elif mode in ("dynamic", "dynamic-pc"):
        q.quantize_dynamic(src, dst, weight_type=q.QuantType.QInt8, reduce_range=True,
                           per_channel=mode == "dynamic-pc")
    elif mode == "nbits":
        from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer
        quant = MatMulNBitsQuantizer(onnx.load(src), block_size=32, is_symmetric=False)
        quant.process()
        onnx.save(quant.model.model, dst)
    else:
        raise ValueError(mode)


def check(build, path, mode, work, compile_args=()):
    name = os.path.splitext(os.path.basename(path))[0] + "_" + mode
    qpath = os.path.join(work, name + ".onnx")
    quantize(path, qpath, mode)
    m = onnx.load(qpath)
    ops = sorted({n.op_type for n in m.graph.node} &
                 {"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "MatMulInteger",
                  "MatMulNBits"})
    feed = feeds(0, 1)[0]
    ref = reference_session(qpath).run(None, feed)[0]
    for k, v in feed.items():
        np.save(os.path.join(work, k + ".npy"), v)
    art, out = os.path.join(work, name + ".xfa"), os.path.join(work, name + ".out")
    r = subprocess.run([os.path.join(build, "bin", "xfmr-compile"), qpath, "-o", art, "--quiet"] +
                       list(compile_args),
                       capture_output=True, text=True)
    if r.returncode == 0:
        r = subprocess.run([os.path.join(build, "bin", "xfmr-run"), art] +
                           sum([["--input", "%s=%s" % (k, os.path.join(work, k + ".npy"))]
                                for k in feed], []) + ["--output-dir", out, "--quiet"],
                           capture_output=True, text=True)
    if r.returncode != 0:
        return False, (r.stderr.strip().splitlines() or ["exit %d" % r.returncode])[0]
    got = np.load(os.path.join(out, "logits.npy"))
    diff = float(np.max(np.abs(got - ref))) / float(np.max(np.abs(ref)))
    return diff <= RTOL, "%s; max |diff| %.2e of max|logit|" % (", ".join(ops), diff)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--build-dir", default="build")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--keep", help="write the quantized models and artifacts into this directory")
    ap.add_argument("--compile-args", default="", help="extra xfmr-compile arguments")
    a = ap.parse_args()
    logging.disable(logging.WARNING)  # the quantizers' pre-processing advice
    warnings.simplefilter("ignore")
    tally = Tally()
    with tempfile.TemporaryDirectory(prefix="xfmr-ortq-") as tmp:
        work = a.keep or tmp
        os.makedirs(work, exist_ok=True)
        for path in a.models:
            for mode in a.modes.split(","):
                ok, detail = check(a.build_dir, path, mode, work, a.compile_args.split())
                tally.add(os.path.basename(path), [("PASS" if ok else "FAIL", mode, detail)])
    return tally.finish()


if __name__ == "__main__":
    sys.exit(main())
