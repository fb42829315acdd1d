#!/usr/bin/env python3
"""exp, sigmoid and softmax of a compiled CPU artifact against float64.

xfmr-approximate-exp replaces libm's expf by a polynomial (docs/cpu-backend.md,
"exp"). This compiles a three-node ONNX model (Exp, Sigmoid,
Softmax over the last axis) for the CPU, runs it on a dense sweep of
[-100, 100] plus the special values, and checks against NumPy in float64:

  exp       relative error <= 2^-21 (claimed 2^-22.5 for the polynomial,
            plus the final rounding) where exp(x) >= 2^-126; within 2^-126
            of the true value below that (flushed to 0 from about x < -87.7,
            a subnormal or 0 just above) and exactly 0 for x = -inf; +inf
            for x = +inf and x > 88.8; NaN for NaN
  sigmoid   absolute error <= 2^-22
  softmax   absolute error <= 2^-20 (a few ulps of values up to 1) per row
            of 64, a row with -inf scores among them

The sweep has an odd length so that the vectorized loops also run a scalar
tail, and every value is checked, so a lane computed differently shows.

  .venv/bin/python scripts/check-exp-accuracy.py [--build-dir build] [--work DIR]
"""

import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def model(n, rows):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [n])
    s = helper.make_tensor_value_info("s", TensorProto.FLOAT, [rows, 64])
    outs = [helper.make_tensor_value_info("exp", TensorProto.FLOAT, [n]),
            helper.make_tensor_value_info("sigmoid", TensorProto.FLOAT, [n]),
            helper.make_tensor_value_info("softmax", TensorProto.FLOAT, [rows, 64])]
    nodes = [helper.make_node("Exp", ["x"], ["exp"], name="exp"),
             helper.make_node("Sigmoid", ["x"], ["sigmoid"], name="sigmoid"),
             helper.make_node("Softmax", ["s"], ["softmax"], name="softmax", axis=-1)]
    g = helper.make_graph(nodes, "exp_accuracy", [x, s], outs)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--work", help="keep files here (default: a temporary folder)")
    a = ap.parse_args()
    work = a.work or tempfile.mkdtemp(prefix="xfmr-exp-")
    os.makedirs(work, exist_ok=True)
    special = np.array([0.0, -0.0, 1.0, -1.0, 88.7, 88.72, 88.9, 100.0, -87.3, -87.4, -88.0,
                        -103.0, -104.0, np.inf, -np.inf, np.nan, 1e-30, -1e-30, 0.5, -0.5],
                       dtype=np.float32)
    sweep = np.linspace(-100.0, 100.0, 400001, dtype=np.float32)
    x = np.concatenate([sweep, special]).astype(np.float32)
    rng = np.random.default_rng(0)
    s = (rng.standard_normal((33, 64)) * 8).astype(np.float32)
    s[3, 10:] = -np.inf  # a masked row
    s[4, :] = 0.0
    onnx.save(model(x.size, s.shape[0]), os.path.join(work, "exp.onnx"))
    np.save(os.path.join(work, "x.npy"), x)
    np.save(os.path.join(work, "s.npy"), s)
    bin_dir = os.path.join(a.build_dir, "bin")
    art = os.path.join(work, "exp.xfa")
    subprocess.run([os.path.join(bin_dir, "xfmr-compile"), os.path.join(work, "exp.onnx"),
                    "-o", art, "--quiet"], check=True)
    out = os.path.join(work, "out")
    subprocess.run([os.path.join(bin_dir, "xfmr-run"), art, "--input", "x=" + os.path.join(work, "x.npy"),
                    "--input", "s=" + os.path.join(work, "s.npy"), "--output-dir", out, "--quiet"],
                   check=True)
    got_exp = np.load(os.path.join(out, "exp.npy")).astype(np.float64)
    got_sig = np.load(os.path.join(out, "sigmoid.npy")).astype(np.float64)
    got_soft = np.load(os.path.join(out, "softmax.npy")).astype(np.float64)

    failures = []
    xd = x.astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        ref = np.exp(xd)
    normal = np.isfinite(ref) & (ref >= 2.0 ** -126) & (xd <= 88.72)
    rel = np.abs(got_exp[normal] - ref[normal]) / ref[normal]
    print("exp: %d normal results, max relative error %.3g (2^%.1f)" % (
        normal.sum(), rel.max(), np.log2(max(rel.max(), 1e-300))))
    if rel.max() > 2.0 ** -21:
        failures.append("exp relative error %.3g > 2^-21" % rel.max())
    tiny = (ref < 2.0 ** -126) & ~np.isnan(xd)
    off = np.abs(got_exp[tiny] - ref[tiny]) > 2.0 ** -126
    if np.any(off):
        failures.append("exp below 2^-126 off by more than 2^-126: %s" % got_exp[tiny][off][:4])
    if got_exp[np.isneginf(xd)][0] != 0.0:
        failures.append("exp(-inf) = %r, not 0" % got_exp[np.isneginf(xd)][0])
    big = (xd > 88.8) & ~np.isnan(xd)
    if not np.all(np.isposinf(got_exp[big])):
        failures.append("exp above 88.8 not +inf: %s" % got_exp[big][:4])
    if not np.isnan(got_exp[np.isnan(xd)]).all():
        failures.append("exp(NaN) is not NaN")
    with np.errstate(over="ignore"):
        ref_sig = 1.0 / (1.0 + np.exp(-xd))
    ok = ~np.isnan(xd)
    err_sig = np.abs(got_sig[ok] - ref_sig[ok]).max()
    print("sigmoid: max absolute error %.3g" % err_sig)
    if err_sig > 2.0 ** -22:
        failures.append("sigmoid absolute error %.3g > 2^-22" % err_sig)
    sd = s.astype(np.float64)
    e = np.exp(sd - sd.max(axis=1, keepdims=True))
    ref_soft = e / e.sum(axis=1, keepdims=True)
    err_soft = np.abs(got_soft - ref_soft).max()
    print("softmax: max absolute error %.3g" % err_soft)
    if err_soft > 2.0 ** -20:
        failures.append("softmax absolute error %.3g > 2^-20" % err_soft)
    for f in failures:
        print("FAIL: " + f)
    print("%s" % ("exp accuracy: FAIL" if failures else "exp accuracy: PASS"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
