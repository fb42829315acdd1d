#!/usr/bin/env python3
"""Checks `xfmr-compile --quant=MODE` against onnxruntime on the same quantized weights.

For each model (an fp32 ONNX causal LM with input_ids and attention_mask,
e.g. examples/hf/llama_ts.onnx): NumPy quantizes every MatMul whose B is a
constant f32 [K, N] (initializer or Constant) the way xfmr's pass documents it
and writes it as com.microsoft MatMulNBits (accuracy_level 4: int8
activations on both sides):

  int4-gG  K a multiple of G; per column and block of G along K, the grid
           q * scale + lo (q in [0, 15], f32 zero point -lo / scale) of
           the block's extremes (lo = min x, scale = (max x - min x) / 15)
           where its squared error is at most a quarter of the grid's
           through 0 (lo' = min(0, min x), hi' = max(0, max x), scale =
           (hi' - lo') / 15, lo = -clip(round(-lo' / scale), 0, 15) *
           scale), else that one; bits 4, block_size G. The output
           product (a MatMul whose result is a graph output: lm_head) as
           int8-weights below
  int8     as int8-weights below (--quant=int8 is weight-only)
  bf16     every weight rounded to bfloat16 (to nearest, ties to even);
           the reference keeps the MatMul and stores the rounded weights
           as f32 (exact), so onnxruntime runs its own f32 product
  fp8-e4m3 per column: scale = max |x| / 448, q = x / scale rounded to
           float8 e4m3fn (ml_dtypes; to nearest even, saturated; the
           output product int8 as below); the
           reference stores q * scale as f32 (exact) in the MatMul

  int8-weights
           per column: scale = max |x| / 127, q = clip(round(x / scale),
           -127, 127); the reference stores q * scale as f32 in the MatMul
           (weights only, f32 activations), what --quant=int8 computes on
           the CPU and the GPU targets' tensor-core products (e.g.
           --compile-args "--target=sm_90a --gpu-emulate"; xfmr compiles
           with --quant=int8)

  w8a8     SmoothQuant, then int8 weights x int8 activations: per column
           scale = max |x| / 127, q = clip(round(x / scale), -127, 127)
           stored as q + 128, no zero points (128); bits 8, one block of
           block_size = the smallest power of two >= max(16, K)
           (onnxruntime 1.23 computes garbage for 8-bit block_size > 256:
           models with such a K are skipped). xfmr-compile --calibration
           runs the model on seeded token ids (2 windows of 32) and
           --save-calibration writes what it measured; onnxruntime measures
           the same statistics on the same windows (every quantized
           MatMul's input as an extra graph output), which must agree
           within 1e-4; from onnxruntime's statistics NumPy computes, per
           input shared by MatMuls, s = max|x|^0.5 / max|w|^0.5 (>= 1e-5),
           multiplies each weight's rows by s and puts Mul(x, 1/s) in
           front (xfmr folds 1/s into the norm weight instead)

Token embedding tables (constant f32 [V, H] read only by Gathers of
input_ids) are replaced by what xfmr reads: bf16-rounded values in bf16
mode, int8 rows (scale max |row| / 127) times their scale in every other.

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
    """[K, N] f32 -> (packed [N, K/g, g/2] u8, scales [N*K/g] f32, zeros [N, K/g] f32)."""
    k, n = w.shape
    blocks = k // g
    x = w.reshape(blocks, g, n).astype(np.float32)
    f15 = np.float32(15)

    def usable(scale):
        return np.where((scale > 0) & np.isfinite(scale), scale, np.float32(1)).astype(np.float32)

    def grid(lo, scale):  # codes and squared error of q * scale + lo
        q = np.clip(np.rint((x - lo[:, None, :]) / scale[:, None, :]), 0, 15).astype(np.float32)
        d = x.astype(np.float64) - (q * scale[:, None, :] + lo[:, None, :])
        return q, (d * d).sum(axis=1)

    mn, mx = x.min(axis=1), x.max(axis=1)  # [blocks, n]
    # "ends": levels on the block's extremes (GGUF Q4_1's grid)
    s_ends = usable(((mx - mn) / f15).astype(np.float32))
    lo_ends = mn.astype(np.float32)
    # "zero": through 0, a whole zero point
    lo0, hi0 = np.minimum(np.float32(0), mn), np.maximum(np.float32(0), mx)
    s_zero = usable(((hi0 - lo0) / f15).astype(np.float32))
    zp = np.clip(np.rint(-lo0 / s_zero), 0, 15).astype(np.float32)
    lo_zero = (-zp * s_zero).astype(np.float32)
    q_e, e_ends = grid(lo_ends, s_ends)
    q_z, e_zero = grid(lo_zero, s_zero)
    ends = 4.0 * e_ends <= e_zero  # [blocks, n]
    q = np.where(ends[:, None, :], q_e, q_z).astype(np.uint8)
    scale = np.where(ends, s_ends, s_zero).astype(np.float32)
    lo = np.where(ends, lo_ends, lo_zero).astype(np.float32)
    zeros = (-lo / scale).astype(np.float32)
    q = q.transpose(2, 0, 1)  # [n, blocks, g]
    packed = (q[:, :, 0::2] | (q[:, :, 1::2] << 4)).astype(np.uint8)
    return packed, scale.T.reshape(-1).astype(np.float32), zeros.T.copy()


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


def int8_rows(t):
    """An embedding table through int8 rows (scale max |row| / 127) and back, as f32."""
    t = t.astype(np.float32)
    scale = (np.abs(t).max(axis=1) / np.float32(127)).astype(np.float32)
    scale = np.where((scale > 0) & np.isfinite(scale), scale, np.float32(1)).astype(np.float32)
    q = np.clip(np.rint(t / scale[:, None]), -127, 127).astype(np.float32)
    return (q * scale[:, None]).astype(np.float32)


def quantize_embeddings(model, mode):
    """In place: the token embedding tables xfmr quantizes (constant f32 [V,
    H] read only by Gathers of input_ids) replaced by what xfmr reads from
    them: bf16-rounded values (bf16), int8 rows times their scale (every
    other mode). Returns how many."""
    ids = {"input_ids"} | {n.output[0] for n in model.graph.node
                           if n.op_type == "Cast" and n.input[0] == "input_ids"}
    readers = {}
    for n in model.graph.node:
        for i, x in enumerate(n.input):
            readers.setdefault(x, []).append((n, i))
    tables = set()
    for n in model.graph.node:
        if n.op_type == "Gather" and n.input[1] in ids and all(
                r.op_type == "Gather" and i == 0 and
                all(a.i == 0 for a in r.attribute if a.name == "axis")
                for r, i in readers[n.input[0]]):
            tables.add(n.input[0])
    fn = bf16_rounded if mode == "bf16" else int8_rows
    count = 0
    for t in model.graph.initializer:
        if t.name in tables and t.data_type == onnx.TensorProto.FLOAT and len(t.dims) == 2:
            t.CopyFrom(numpy_helper.from_array(fn(numpy_helper.to_array(t)), t.name))
            count += 1
    return count


def rounded_model(model, fn, output_fn=None):
    """A copy of `model` with every MatMul's constant f32 [K, N] B replaced by
    fn(B) (f32 values), or by output_fn(B) for a MatMul whose result is a
    graph output (lm_head) when given; the count."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    outputs = {o.name for o in out.graph.output}
    matmuls = [n for n in out.graph.node if n.op_type == "MatMul" and len(n.input) == 2]
    weights = {n.input[1] for n in matmuls}
    heads = {n.input[1] for n in matmuls if n.output[0] in outputs} if output_fn else set()
    count = 0

    def round_(name, t):
        return (output_fn if name in heads else fn)(numpy_helper.to_array(t))

    for t in out.graph.initializer:
        if t.name in weights and t.data_type == onnx.TensorProto.FLOAT and len(t.dims) == 2:
            t.CopyFrom(numpy_helper.from_array(round_(t.name, t), t.name))
            count += 1
    for n in out.graph.node:
        if n.op_type == "Constant" and n.output[0] in weights and n.attribute[0].name == "value":
            t = n.attribute[0].t
            if t.data_type == onnx.TensorProto.FLOAT and len(t.dims) == 2:
                t.CopyFrom(numpy_helper.from_array(round_(n.output[0], t), t.name))
                count += 1
    return out, count, 0


def int8_rounded(w):
    """f32 [K, N] `w` through per-column symmetric int8 and back, as f32."""
    w = w.astype(np.float32)
    scale = (np.abs(w).max(axis=0) / np.float32(127)).astype(np.float32)
    scale = np.where((scale > 0) & np.isfinite(scale), scale, np.float32(1)).astype(np.float32)
    q = np.clip(np.rint(w / scale), -127, 127).astype(np.float32)
    return (q * scale).astype(np.float32)


def quantized_model(model, mode):
    """A copy of `model` with the MatMuls xfmr quantizes as MatMulNBits; their
    count and largest block_size."""
    if mode in ("int8", "int8-weights"):
        return rounded_model(model, int8_rounded)
    if mode == "bf16":
        return rounded_model(model, bf16_rounded)
    if mode == "fp8-e4m3":  # lm_head int8, as in the 4-bit modes
        return rounded_model(model, fp8_rounded, int8_rounded)
    consts = constants_of(model.graph)
    outputs = {o.name for o in model.graph.output}
    nodes, inits, count, largest = [], [], 0, 0
    for node in model.graph.node:
        w = consts.get(node.input[1]) if node.op_type == "MatMul" and len(node.input) == 2 else None
        if w is not None and w.dtype == np.float32 and w.ndim == 2 and node.output[0] in outputs:
            # lm_head: int8 weights, f32 activations
            name = "xfmr_lm_head_%d" % count
            inits.append(numpy_helper.from_array(int8_rounded(w), name))
            nodes.append(helper.make_node("MatMul", [node.input[0], name], list(node.output),
                                          name=node.name))
            count += 1
            continue
        q = quantize(w, mode) if w is not None and w.dtype == np.float32 and w.ndim == 2 else None
        if q is None:
            nodes.append(node)
            continue
        nodes.append(nbits_node(node, node.input[0], w.shape, q, "xfmr_q%d_" % count, inits))
        count += 1
        largest = max(largest, q[4])
    return with_nodes(model, nodes, inits), count, largest


def nbits_node(node, a, shape, q, base, inits):
    """MatMulNBits computing `node`'s output from input `a` and the quantized
    weight q = (packed, scales, zero points or None, bits, block_size) of a
    [K, N] `shape`; its constants go to `inits` named after `base`."""
    packed, scales, zeros, bits, block = q
    inputs = [a, base + "B", base + "scales"]
    inits += [numpy_helper.from_array(packed, base + "B"),
              numpy_helper.from_array(scales, base + "scales")]
    if zeros is not None:
        inputs.append(base + "zp")
        inits.append(numpy_helper.from_array(zeros, base + "zp"))
    return helper.make_node("MatMulNBits", inputs, list(node.output), name=node.name,
                            domain="com.microsoft", K=shape[0], N=shape[1], bits=bits,
                            block_size=block, accuracy_level=4)


def with_nodes(model, nodes, inits):
    """A copy of `model` with `nodes` for its nodes and `inits` added."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    out.graph.initializer.extend(inits)
    if not any(o.domain == "com.microsoft" for o in out.opset_import):
        out.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return out


CALIBRATION_WINDOW = 32


def constants_of(graph):
    consts = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant" and node.attribute and node.attribute[0].name == "value":
            consts[node.output[0]] = numpy_helper.to_array(node.attribute[0].t)
    return consts


def quantized_products(graph, consts):
    """The MatMul nodes xfmr quantizes (constant f32 [K, N] B), in order."""
    out = []
    for node in graph.node:
        w = consts.get(node.input[1]) if node.op_type == "MatMul" and len(node.input) == 2 else None
        if w is not None and w.dtype == np.float32 and w.ndim == 2:
            out.append(node)
    return out


def ort_channel_stats(model, ids, work):
    """onnxruntime's per-channel max|x|, mean|x|, mean x^2 of every quantized
    MatMul's input over windows of CALIBRATION_WINDOW tokens of `ids`."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    products = quantized_products(m.graph, constants_of(m.graph))
    names = []
    for node in products:
        if node.input[0] not in names:
            names.append(node.input[0])
    for name in names:
        m.graph.output.append(helper.make_empty_tensor_value_info(name))
    path = os.path.join(work, "calibration-probe.onnx")
    onnx.save(m, path)
    sess = reference_session(path)
    rows = {n: [] for n in names}
    for begin in range(0, len(ids), CALIBRATION_WINDOW):
        w = ids[begin:begin + CALIBRATION_WINDOW][None, :]
        outs = sess.run(names, {"input_ids": w, "attention_mask": np.ones_like(w)})
        for n, v in zip(names, outs):
            rows[n].append(v.reshape(-1, v.shape[-1]).astype(np.float64))
    stats = {}
    for n in names:
        x = np.concatenate(rows[n])
        stats[n] = (np.abs(x).max(axis=0), np.abs(x).mean(axis=0), (x * x).mean(axis=0))
    return [(node, stats[node.input[0]]) for node in products]


def compare_stats(ort_stats, xfmr_json):
    """'' when xfmr's statistics file agrees with onnxruntime's within 1e-4,
    else why not."""
    import json
    mine = sorted(json.load(open(xfmr_json))["products"], key=lambda p: p["product"])
    if len(mine) != len(ort_stats):
        return "xfmr measured %d products, onnxruntime %d" % (len(mine), len(ort_stats))
    for p, (node, ref) in zip(mine, ort_stats):
        for key, r in zip(("max", "mean_abs", "mean_square"), ref):
            got = np.array(p[key])
            if got.shape != r.shape or np.max(np.abs(got - r)) > 1e-4 * max(np.max(np.abs(r)), 1e-30):
                return "product %d (%s) %s differs from onnxruntime's" % (p["product"], node.name, key)
    return ""


def smoothed_model(model, ort_stats, alpha=0.5):
    """SmoothQuant on `model` from onnxruntime's statistics, then int8
    MatMulNBits (see the module doc); the count and largest block_size."""
    f32 = np.float32
    consts = constants_of(model.graph)
    groups, xmax = {}, {}
    for node, st in ort_stats:
        groups.setdefault(node.input[0], []).append(node)
        xmax[node.input[0]] = st[0].astype(f32)
    scales = {}
    for name, nodes in groups.items():
        wmax = np.max(np.stack([np.abs(consts[n.input[1]]).max(axis=1) for n in nodes]), axis=0)
        s = np.power(xmax[name], f32(alpha)) / np.power(np.maximum(wmax, f32(1e-5)), f32(1 - alpha))
        scales[name] = np.where(np.isfinite(s), np.maximum(s, f32(1e-5)), f32(1)).astype(f32)
    nodes, inits, count, largest = [], [], 0, 0
    divided = set()
    smoothed = {n.output[0] for n, _ in ort_stats}
    for node in model.graph.node:
        if node.op_type != "MatMul" or node.output[0] not in smoothed:
            nodes.append(node)
            continue
        x, s = node.input[0], scales[node.input[0]]
        if x not in divided:
            divided.add(x)
            inits.append(numpy_helper.from_array((f32(1) / s).astype(f32), x + ".xfmr_inv_s"))
            nodes.append(helper.make_node("Mul", [x, x + ".xfmr_inv_s"], [x + ".xfmr_smoothed"]))
        w = (consts[node.input[1]] * s[:, None]).astype(f32)
        q = quantize_int8(w) + (8, int8_block(w.shape[0]))
        nodes.append(nbits_node(node, x + ".xfmr_smoothed", w.shape, q, "xfmr_q%d_" % count, inits))
        count += 1
        largest = max(largest, q[4])
    return with_nodes(model, nodes, inits), count, largest


def check(path, build, work, mode, compile_args=()):
    """(status, detail) of one model."""
    name = os.path.splitext(os.path.basename(path))[0]
    model = onnx.load(path)
    compile_flags = []
    if mode == "w8a8":
        cal = np.random.default_rng(1).integers(0, 100, size=2 * CALIBRATION_WINDOW, dtype=np.int64)
        cal_path, stats_path = (os.path.join(work, name + x) for x in (".cal.npy", ".stats.json"))
        np.save(cal_path, cal)
        compile_flags = ["--calibration", cal_path, "--calibration-context",
                         str(CALIBRATION_WINDOW), "--save-calibration", stats_path]
        ort_stats = ort_channel_stats(model, cal, work)
        qmodel, count, largest = smoothed_model(model, ort_stats)
    else:
        qmodel, count, largest = quantized_model(model, mode)
    if mode == "w8a8" and largest > ORT_MAX_INT8_BLOCK:
        return "SKIP", "block_size %d: onnxruntime computes 8-bit blocks of at most %d" % (
            largest, ORT_MAX_INT8_BLOCK)
    quantize_embeddings(qmodel, mode)
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
    xfmr_mode = "int8" if mode == "int8-weights" else mode
    r = subprocess.run([os.path.join(build, "bin", "xfmr-compile"), path, "--quant=" + xfmr_mode,
                        "-o", art, "--quiet"] + compile_flags + list(compile_args),
                       capture_output=True, text=True)
    if r.returncode == 0:
        r = subprocess.run([os.path.join(build, "bin", "xfmr-run"), art] +
                           sum([["--input", "%s=%s" % (f, os.path.join(work, f + ".npy"))]
                                for f in feed], []) + ["--output-dir", out, "--quiet"],
                           capture_output=True, text=True)
    if r.returncode != 0:
        return "FAIL", (r.stderr.strip().splitlines() or ["exit %d" % r.returncode])[0]
    if mode == "w8a8":
        why = compare_stats(ort_stats, stats_path)
        if why:
            return "FAIL", "calibration statistics: " + why
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
                    choices=["int4-g32", "int4-g64", "int4-g128", "int8", "int8-weights", "bf16",
                             "fp8-e4m3", "w8a8"])
    ap.add_argument("--compile-args", default="", help="extra xfmr-compile arguments")
    a = ap.parse_args()
    tally = Tally()
    with tempfile.TemporaryDirectory(prefix="xfmr-quant-") as work:
        for m in a.models:
            status, detail = check(m, a.build_dir, work, a.quant, a.compile_args.split())
            tally.add(os.path.basename(m), [(status, a.quant, detail)])
    return tally.finish()


if __name__ == "__main__":
    sys.exit(main())
