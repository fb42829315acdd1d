#!/usr/bin/env python3
"""com.microsoft.GroupQueryAttention's softcap, smooth_softmax and head_sink
in xfmr against onnxruntime.

For each case a one-node model (GroupQueryAttention, 4 query heads, 2 KV
heads, head size 8, past/present KV cache) is written, compiled with
`xfmr-compile`, run with `xfmr-run` and compared with onnxruntime on a
prefill (batch 1, 5 tokens, no past) and a decode step (batch 2, 1 token on
top of 4 cached). xfmr raises softcap (applied when > 0, before the causal
mask) to xfmr.attention's `softcap`, head_sink (one logit per query head) and
smooth_softmax (every sink 0) to its `sinks`; the report must show the
attention formed. Prints `PASS case step: max |diff| ...` or `FAIL ...` and a
summary; exits 1 on a failure.

  .venv/bin/python scripts/check-gqa-features.py --build-dir build
"""

import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from xfmr_refs import reference_session  # noqa: E402

H, KV, D = 4, 2, 8
RTOL = 1e-5
CASES = {
    "plain": ({}, None),
    "softcap": ({"softcap": 0.3}, None),
    "smooth_softmax": ({"smooth_softmax": 1}, None),
    "head_sink": ({}, [0.5, -1.0, 2.0, 0.0]),
    "head_sink_softcap": ({"softcap": 0.5}, [1.5, -0.5, 0.25, -2.0]),
}


def build(attrs, sink):
    ins = ["q", "k", "v", "past_key", "past_value", "seqlens_k", "total_sequence_length"]
    inits = []
    if sink is not None:
        ins += ["", "", "", "", "head_sink"]
        inits.append(helper.make_tensor("head_sink", TensorProto.FLOAT, [H], sink))
    node = helper.make_node("GroupQueryAttention", ins, ["y", "present_key", "present_value"],
                            domain="com.microsoft", name="gqa", num_heads=H, kv_num_heads=KV,
                            scale=float(1 / np.sqrt(D)), **attrs)
    f = TensorProto.FLOAT
    graph = helper.make_graph(
        [node], "gqa",
        [helper.make_tensor_value_info("q", f, ["batch", "seq", H * D]),
         helper.make_tensor_value_info("k", f, ["batch", "seq", KV * D]),
         helper.make_tensor_value_info("v", f, ["batch", "seq", KV * D]),
         helper.make_tensor_value_info("past_key", f, ["batch", KV, "past", D]),
         helper.make_tensor_value_info("past_value", f, ["batch", KV, "past", D]),
         helper.make_tensor_value_info("seqlens_k", TensorProto.INT32, ["batch"]),
         helper.make_tensor_value_info("total_sequence_length", TensorProto.INT32, [])],
        [helper.make_tensor_value_info("y", f, ["batch", "seq", H * D]),
         helper.make_tensor_value_info("present_key", f, ["batch", KV, "total", D]),
         helper.make_tensor_value_info("present_value", f, ["batch", KV, "total", D])],
        inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                   helper.make_opsetid("com.microsoft", 1)])


def feeds(rng, batch, seq, past):
    total = past + seq
    return {
        "q": (rng.standard_normal((batch, seq, H * D)) * 2).astype(np.float32),
        "k": (rng.standard_normal((batch, seq, KV * D)) * 2).astype(np.float32),
        "v": rng.standard_normal((batch, seq, KV * D)).astype(np.float32),
        "past_key": (rng.standard_normal((batch, KV, past, D)) * 2).astype(np.float32),
        "past_value": rng.standard_normal((batch, KV, past, D)).astype(np.float32),
        "seqlens_k": np.full((batch,), total - 1, np.int32),
        "total_sequence_length": np.array(total, np.int32),
    }


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        lines = [l for l in r.stderr.splitlines() if "error" in l] or r.stderr.splitlines() or [
            "exit %d" % r.returncode]
        raise RuntimeError(lines[0][:240])
    return r


def check(build_dir, name, work):
    attrs, sink = CASES[name]
    path = os.path.join(work, name + ".onnx")
    onnx.save(build(attrs, sink), path)
    art = os.path.join(work, name + ".xfa")
    r = run([os.path.join(build_dir, "bin", "xfmr-compile"), path, "-o", art, "--report", "-O0"])
    if "1 attention" not in r.stdout + r.stderr:
        return [("FAIL", name, "compile", "GroupQueryAttention not raised: " +
                 next((l for l in (r.stdout + r.stderr).splitlines() if "xfmr-raise" in l), "?"))]
    sess = reference_session(path)
    out = []
    rng = np.random.default_rng(sorted(CASES).index(name))
    for step, (batch, seq, past) in (("prefill", (1, 5, 0)), ("decode", (2, 1, 4))):
        f = feeds(rng, batch, seq, past)
        ref = sess.run(None, f)
        args = []
        for k, v in f.items():
            np.save(os.path.join(work, "%s-%s-%s.npy" % (name, step, k)), v)
            args += ["--input", "%s=%s" % (k, os.path.join(work, "%s-%s-%s.npy" % (name, step, k)))]
        odir = os.path.join(work, "%s-%s-out" % (name, step))
        run([os.path.join(build_dir, "bin", "xfmr-run"), art, "--output-dir", odir, "--quiet"] + args)
        worst = 0.0
        for o, want in zip(("y", "present_key", "present_value"), ref):
            got = np.load(os.path.join(odir, o + ".npy"))
            if got.shape != want.shape:
                worst = np.inf
                break
            worst = max(worst, float(np.max(np.abs(got - want))) / max(float(np.max(np.abs(want))), 1e-30))
        out.append(("PASS" if worst <= RTOL else "FAIL", name, step,
                    "max |diff| %.2e of max|ref| (tol %.0e)" % (worst, RTOL)))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", default="build")
    ap.add_argument("--only", nargs="*", choices=sorted(CASES))
    a = ap.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="xfmr-gqa-") as work:
        for name in a.only or CASES:
            try:
                results += check(a.build_dir, name, work)
            except RuntimeError as e:
                results.append(("FAIL", name, "run", str(e)))
    for status, name, step, detail in results:
        print("%s %s %s: %s" % (status, name, step, detail))
    failed = sum(r[0] == "FAIL" for r in results)
    print("%d passed, %d failed" % (len(results) - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
