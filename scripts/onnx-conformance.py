#!/usr/bin/env python3
"""Numerical conformance of xfmr-compile + xfmr-run on ONNX backend node tests.

Usage:
  onnx-conformance.py [--build-dir build] [--jobs N] [--filter REGEX] [--list]
                      [--keep DIR] [--max-failures-shown N] NODE_DIR [NODE_DIR ...]

NODE_DIR holds ONNX node tests: NAME/model.onnx plus NAME/test_data_set_*/
{input,output}_K.pb (e.g. /usr/share/libonnx-testdata/data/node, or
onnx/backend/test/data/node inside the onnx wheel). Each model is compiled once
(`xfmr-compile model.onnx --target=cpu -o model.xfa`), then every data set is
run (`xfmr-run model.xfa --input NAME=input_K.pb ... --output-dir DIR --quiet`).
input_K.pb goes to the K-th graph input that is not an initializer; output_K.pb
is compared with DIR/<K-th graph output, sanitized>.npy.

Policy, per test (one case = one model with all its data sets):
  PASS  every output of every data set has the expected shape, dtype and values:
        integers and bools exactly; floats (float16/bfloat16 widened to float32)
        with |got - expected| <= atol + rtol * |expected| (--rtol 1e-3,
        --atol 1e-7), NaN matching NaN and an infinity the same infinity;
        float16/bfloat16 also within 2 units in the last place of the type
        at |expected| (xfmr computes a fused graph, e.g. an expanded 16-bit
        attention, in f32 where the reference rounds every intermediate).
  SKIP  the compiler rejects the model as unsupported (exit 1 and "unsupported"
        or "not supported", or one of the importer's unsupported reasons, in
        its stderr; the first error line is the reason), or a graph input or
        output is a sequence, map, optional or string tensor, or the model
        runs Dropout in training mode (the expected outputs hold a mask drawn
        from numpy's random generator; xfmr runs such a Dropout as identity,
        as inference does, with a warning).
  FAIL  anything else: another compile error, a crash, a timeout (compile
        120 s, run 60 s), a run error, a missing output, or a shape, dtype or
        value mismatch.

Prints PASS/FAIL/SKIP per case with --list, then the failures, a histogram of
skip reasons and finally "N passed, N failed, N skipped". Exits 1 on failures.
Needs numpy and onnx (e.g. the project's .venv/bin/python).
"""
import argparse
import collections
import concurrent.futures
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

COMPILE_TIMEOUT, RUN_TIMEOUT = 120, 60
# What the compiler and the importer (test/lit-tools/onnx_node_smoke.py) say
# about a model outside what they support.
UNSUPPORTED = ("unsupported", "not supported", "newer than supported",
               "does not exist in opset", "only tensor values are supported")
# ONNX element types and the runtime's dtype names (docs/artifact.md).
DTYPE_NAMES = {"FLOAT": "float32", "DOUBLE": "float64", "FLOAT16": "float16",
               "BFLOAT16": "bfloat16", "BOOL": "bool"}
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def sanitize(name):
    """The file name xfmr-run gives output NAME (without .npy)."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


def first_error_line(text, fallback):
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    errors = [l for l in lines if "error:" in l]
    return (errors or lines or [fallback])[0][:300]


def classify_compile(rc, stderr):
    """('skip'|'fail', reason) for a failed compile."""
    line = first_error_line(stderr, "no message")
    if rc == 1 and "Sanitizer" not in stderr and any(u in stderr for u in UNSUPPORTED):
        return "skip", line
    return "fail", "compile %s: %s" % (exit_text(rc), line)


def exit_text(rc):
    if rc < 0:
        return "crashed (signal %d)" % -rc
    return "%s (exit %d)" % ("crashed" if rc >= 128 else "failed", rc)


def normalize_reason(reason):
    """A skip reason without file, node and tensor names, for the histogram."""
    reason = reason.split("error: ", 1)[-1]
    reason = re.sub(r"\bnode ('[^']*'|#\d+) \(([^)]*)\)", r"\2", reason).split(" (see ")[0]
    reason = re.sub(r"\b(node|tensor|input|output|attribute) '[^']*'", r"\1", reason)
    return re.sub(r"\s+(?=[:,])|\s+(?=\s)", "", reason.replace("'", "").replace('"', "")).strip()


def unsupported_io(model):
    """Why the test's graph inputs/outputs cannot be run, or None."""
    for vi in list(model.graph.input) + list(model.graph.output):
        kind = vi.type.WhichOneof("value")
        if kind != "tensor_type":
            return "%s graph input/output" % (kind or "untyped").replace("_type", "")
        if vi.type.tensor_type.elem_type == onnx.TensorProto.STRING:
            return "string tensor graph input/output"
    return None


def dtype_name(array, onnx_type=None):
    """The runtime's name for the dtype of an expected (onnx_type given) or
    produced array; xfmr-run writes bfloat16 as the .npy descr '<V2'."""
    if onnx_type is not None:
        name = onnx.TensorProto.DataType.Name(onnx_type)
        return DTYPE_NAMES.get(name, name.lower())
    if array.dtype.kind == "V" and array.dtype.itemsize == 2:
        return "bfloat16"
    return array.dtype.name


def as_float(array, dtype):
    """float16/bfloat16 (ml_dtypes, uint16 bits or '<V2' bits) as float32."""
    if dtype == "bfloat16" and array.dtype.itemsize == 2 and array.dtype.kind in "uV":
        bits = array.view("<u2").astype(np.uint32) << 16
        return bits.view(np.float32)
    return array.astype(np.float64 if dtype == "float64" else np.float32)


def ulp16(values, dtype):
    """The spacing of float16 (10 mantissa bits) or bfloat16 (7) at |values|
    (float32), normal numbers; the smallest normal's spacing below it."""
    bits, min_exp = (10, -14) if dtype == "float16" else (7, -126)
    with np.errstate(divide="ignore"):
        exp = np.floor(np.log2(np.maximum(np.abs(values), 2.0 ** min_exp)))
    return np.exp2(exp - bits).astype(np.float32)


def compare(expected, expected_type, got, rtol=1e-3, atol=1e-7):
    """None if `got` matches `expected` (an array read from a TensorProto of
    element type `expected_type`), else a one-line reason."""
    want, have = dtype_name(expected, expected_type), dtype_name(got)
    if want != have:
        return "dtype %s, expected %s" % (have, want)
    if got.shape != expected.shape:
        return "shape %s, expected %s" % (list(got.shape), list(expected.shape))
    if want in ("float32", "float64", "float16", "bfloat16"):
        e, g = as_float(expected, want), as_float(got, want)
        with np.errstate(invalid="ignore", over="ignore"):
            diff = np.abs(g - e)
            tol = atol + rtol * np.abs(e)
            if want in ("float16", "bfloat16"):
                tol = np.maximum(tol, 2 * ulp16(e, want))
            ok = np.where(np.isinf(e), g == e, diff <= tol)
            ok |= np.isnan(g) & np.isnan(e)
    else:
        e, g = expected, got
        ok = g == e
        diff = np.abs(g.astype(np.float64) - e.astype(np.float64))
    if ok.all():
        return None
    bad = np.argwhere(~ok)
    idx = tuple(int(i) for i in bad[0])
    worst = diff[~ok]
    worst = worst[~np.isnan(worst)]
    return "%d/%d values differ, max abs diff %s, first at %s: got %s, expected %s" % (
        len(bad), ok.size, "%.3g" % worst.max() if worst.size else "nan", list(idx),
        g[idx], e[idx])


def load_pb(path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return t


def retyped_input(path, elem_type, out_path):
    """Older test data stores bfloat16 tensors as uint16 (same bits, same
    int32_data storage): give xfmr-run a copy with the graph's type."""
    t = load_pb(path)
    if t.data_type == onnx.TensorProto.UINT16 and elem_type == onnx.TensorProto.BFLOAT16:
        t.data_type = elem_type
        with open(out_path, "wb") as f:
            f.write(t.SerializeToString())
        return out_path
    return path


def numbered(dirname, prefix):
    files = glob.glob(os.path.join(dirname, prefix + "_*.pb"))
    return sorted(files, key=lambda p: int(re.sub(r"\D", "", os.path.basename(p)) or 0))


def training_dropout(model, dataset):
    """Whether a Dropout runs in training mode with a non-zero ratio (its
    ratio an initializer or a graph input fed by `dataset`)."""
    from onnx import numpy_helper
    values = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    feeds = [vi.name for vi in model.graph.input if vi.name not in values]
    for i, name in enumerate(feeds):
        path = os.path.join(dataset, "input_%d.pb" % i)
        if os.path.exists(path):
            t = onnx.TensorProto()
            with open(path, "rb") as f:
                t.ParseFromString(f.read())
            values[name] = numpy_helper.to_array(t)
    for n in model.graph.node:
        if n.op_type != "Dropout" or len(n.input) < 3 or not n.input[2]:
            continue
        ratio = values.get(n.input[1]) if len(n.input) > 1 and n.input[1] else 0.5
        if ratio is None or float(ratio) != 0.0:
            return True
    return False


def run_case(model_path, tools, work, opts):
    """('pass'|'fail'|'skip', reason) for one node test."""
    datasets = sorted(glob.glob(os.path.join(os.path.dirname(model_path), "test_data_set_*")))
    if not datasets:
        return "skip", "no test data sets"
    model = onnx.load(model_path)
    if unsupported_io(model):
        return "skip", unsupported_io(model)
    if training_dropout(model, datasets[0]):
        return "skip", "Dropout in training mode (a random mask; xfmr runs it as identity)"
    inits = {t.name for t in model.graph.initializer}
    elem_type = lambda vi: vi.type.tensor_type.elem_type
    inputs = [(vi.name, elem_type(vi)) for vi in model.graph.input if vi.name not in inits]
    declared = {vi.name: [d.dim_value if d.HasField("dim_value") else None
                          for d in vi.type.tensor_type.shape.dim]
                for vi in model.graph.input if vi.type.tensor_type.HasField("shape")}
    outputs = [(vi.name, elem_type(vi)) for vi in model.graph.output]
    os.makedirs(work, exist_ok=True)
    art = os.path.join(work, "model.xfa")
    try:
        r = subprocess.run([tools["xfmr-compile"], model_path, "--target=cpu", "-o", art],
                           capture_output=True, text=True, timeout=COMPILE_TIMEOUT)
    except subprocess.TimeoutExpired:
        return "fail", "compile timeout (%d s)" % COMPILE_TIMEOUT
    if r.returncode != 0:
        return classify_compile(r.returncode, r.stderr)
    for ds in datasets:
        tag = os.path.basename(ds)
        files = numbered(ds, "input")
        if len(files) > len(inputs):
            return "fail", "%s: %d input files for %d graph inputs" % (tag, len(files), len(inputs))
        # A few upstream tests feed data that contradicts the model's own
        # declared input shape (e.g. CastLike's 'like'): the test, not the
        # compiler, is inconsistent.
        for (name, _), f in zip(inputs, files):
            dims = list(load_pb(f).dims)
            want = declared.get(name)
            if want is not None and (len(want) != len(dims) or any(
                    w is not None and w != d for w, d in zip(want, dims))):
                return "skip", "test data for '%s' has shape %s, the model declares %s" % (
                    name, dims, ["?" if w is None else w for w in want])
        out_dir = os.path.join(work, tag)
        os.makedirs(out_dir, exist_ok=True)
        cmd = [tools["xfmr-run"], art, "--output-dir", out_dir, "--quiet"]
        for k, ((name, etype), f) in enumerate(zip(inputs, files)):
            f = retyped_input(f, etype, os.path.join(out_dir, "input_%d.pb" % k))
            cmd += ["--input", "%s=%s" % (name, f)]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT)
        except subprocess.TimeoutExpired:
            return "fail", "%s: run timeout (%d s)" % (tag, RUN_TIMEOUT)
        if r.returncode != 0:
            return "fail", "%s: run %s: %s" % (
                tag, exit_text(r.returncode), first_error_line(r.stderr, "no message"))
        for k, f in enumerate(numbered(ds, "output")):
            if k >= len(outputs):
                return "fail", "%s: %s has no graph output" % (tag, os.path.basename(f))
            name, etype = outputs[k]
            got_path = os.path.join(out_dir, sanitize(name) + ".npy")
            if not os.path.isfile(got_path):
                return "fail", "%s: missing output '%s'" % (tag, name)
            t = load_pb(f)  # the graph's type wins over the .pb's (see retyped_input)
            msg = compare(numpy_helper.to_array(t), etype or t.data_type, np.load(got_path),
                          opts.rtol, opts.atol)
            if msg:
                return "fail", "%s: output '%s': %s" % (tag, name, msg)
    return "pass", ""


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("node_dirs", nargs="+", metavar="NODE_DIR")
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--filter", help="only tests whose name matches this regex")
    ap.add_argument("--list", action="store_true", help="print every case's outcome")
    ap.add_argument("--keep", metavar="DIR", help="keep artifacts and outputs in DIR")
    ap.add_argument("--max-failures-shown", type=int, default=50)
    ap.add_argument("--rtol", type=float, default=1e-3)
    ap.add_argument("--atol", type=float, default=1e-7)
    opts = ap.parse_args(argv)
    tools = {t: os.path.join(opts.build_dir, "bin", t) for t in ("xfmr-compile", "xfmr-run")}
    for path in (p for p in tools.values() if not os.access(p, os.X_OK)):
        sys.exit("onnx-conformance: %s is missing (build it first)" % path)
    # (test name, index of its NODE_DIR, model path), sorted by name
    models = sorted((os.path.basename(os.path.dirname(m)), i, m) for i, d in enumerate(opts.node_dirs)
                    for m in glob.glob(os.path.join(d, "*", "model.onnx")))
    models = [t for t in models if not opts.filter or re.search(opts.filter, t[0])]
    base = os.path.abspath(opts.keep) if opts.keep else tempfile.mkdtemp(prefix="xfmr-conformance-")

    def job(test):
        name, index, model_path = test
        try:
            return run_case(model_path, tools, os.path.join(base, str(index), name), opts)
        except Exception as e:  # a broken test file or a runner bug: report, go on
            return "fail", "runner error: %s: %s" % (type(e).__name__, str(e)[:200])

    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, opts.jobs)) as pool:
            results = list(pool.map(job, models))
    finally:
        if not opts.keep:
            shutil.rmtree(base, ignore_errors=True)
    counts = collections.Counter(status for status, _ in results)
    failures, reasons = [], collections.Counter()
    for (name, _, _), (status, reason) in zip(models, results):
        if opts.list:
            print("%s %s%s" % (status.upper(), name, ": " + reason if reason else ""))
        if status == "fail":
            failures.append("%s: %s" % (name, reason))
        elif status == "skip":
            reasons[normalize_reason(reason)] += 1
    if failures:
        print("Failures (%d):" % len(failures))
        for line in failures[:opts.max_failures_shown]:
            print("  FAIL " + line)
        if failures[opts.max_failures_shown:]:
            print("  ... and %d more" % len(failures[opts.max_failures_shown:]))
    if reasons:
        print("Skip reasons (%d distinct):" % len(reasons))
        for reason, n in reasons.most_common(25):
            print("  %5d  %s" % (n, reason))
    print("%d passed, %d failed, %d skipped" % (counts["pass"], counts["fail"], counts["skip"]))
    return 1 if counts["fail"] else 0


if __name__ == "__main__":
    sys.exit(main())
