"""Reference inputs/outputs of the example models, and the check of xfmr's
compiled models against them. Shared by scripts/gen_reference_outputs.py,
scripts/check-model-refs.py and scripts/check-fresh-exports.py.

A reference set is a directory REF/<model>/ with
  inputs/<input name>.npy     deterministic inputs (see make_inputs)
  outputs/<output name>.npy   onnxruntime's outputs (CPU, graph optimizations
                              off: the plain graph is the reference)
  ref.json                    model file and sha256, seed, onnxruntime version,
                              and name/file/dtype/shape of every tensor
Names are sanitized like xfmr-run's output files ([^A-Za-z0-9._-] -> '_').

Only numpy is needed to check; generating also needs onnx and onnxruntime.
"""
import concurrent.futures
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zlib

import numpy as np

VOCAB = 256
# Extents of the dynamic models' symbolic dims: each differs from the static
# export shape (batch 1, sequence 8, past 8). "a+b" dims are sums.
DYNAMIC_DIMS = {"batch": 2, "sequence": 5, "past_sequence": 3}
COMPILE_TIMEOUT, RUN_TIMEOUT = 600, 120
REL_TOL = 1e-4  # |got - ref| <= REL_TOL * max|ref|, per output tensor


def parse_raise_report(text):
    """The counts of `xfmr-compile --report`'s line
    `xfmr-raise @f: formed 2 attention, ...; N candidate(s) left unfused`:
    ({kind: count}, N), or (None, None) without one."""
    m = re.search(r"xfmr-raise @\S+: formed (.*); (\d+) candidate\(s\) left unfused", text)
    if not m:
        return None, None
    counts = {}
    if m.group(1) != "nothing":
        for item in m.group(1).split(", "):
            n, kind = item.split(" ", 1)
            counts[kind] = int(n)
    return counts, int(m.group(2))


def sanitize(name):
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


# --------------------------------------------------------------------------
# Generating references (onnx + onnxruntime)


def _extent(dim):
    if dim.HasField("dim_value"):
        return dim.dim_value
    return sum(DYNAMIC_DIMS[p.strip()] for p in dim.dim_param.split("+"))


def make_inputs(model_name, graph_inputs, seed):
    """Deterministic inputs by name: token ids in [0, VOCAB), an all-ones
    attention mask, position ids continuing after the past, past keys/values
    and the encoder's src ~ N(0, 1) (the past scaled by 0.5)."""
    import onnx
    rng = np.random.RandomState((seed * 1000003 + zlib.crc32(model_name.encode())) % 2**32)
    shapes = {vi.name: [_extent(d) for d in vi.type.tensor_type.shape.dim] for vi in graph_inputs}
    past = next((s[2] for n, s in shapes.items() if n.startswith("past_key_values")), 0)
    inputs = {}
    for vi in graph_inputs:
        name, shape = vi.name, shapes[vi.name]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type)
        if name == "input_ids":
            x = rng.randint(0, VOCAB, size=shape)
        elif name == "attention_mask":
            x = np.ones(shape)
        elif name == "position_ids":
            x = np.broadcast_to(np.arange(past, past + shape[1]), shape)
        elif name.startswith("past_key_values"):
            x = rng.standard_normal(shape) * 0.5
        elif name == "src":
            x = rng.standard_normal(shape)
        else:
            raise ValueError("%s: no rule for input '%s'" % (model_name, name))
        inputs[name] = np.ascontiguousarray(x, dtype=dtype)
    return inputs


def reference_session(model_path):
    """An onnxruntime CPU session for references: graph unoptimized, one
    thread (bitwise reproducible reductions)."""
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    return ort.InferenceSession(model_path, so, providers=["CPUExecutionProvider"])


def run_ort(model_path, inputs):
    """{output name: array} from onnxruntime on the CPU, graph unoptimized."""
    sess = reference_session(model_path)
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, inputs)))


def write_reference(models_dir, model_name, ref_root, seed):
    """Writes REF/<model_name>/ for MODELS_DIR/<model_name>.onnx."""
    import onnx
    import onnxruntime as ort
    model_path = os.path.join(models_dir, model_name + ".onnx")
    graph = onnx.load(model_path).graph
    inits = {t.name for t in graph.initializer}
    inputs = make_inputs(model_name, [vi for vi in graph.input if vi.name not in inits], seed)
    outputs = run_ort(model_path, inputs)
    out_dir = os.path.join(ref_root, model_name)
    shutil.rmtree(out_dir, ignore_errors=True)
    meta = {"model": model_name + ".onnx", "model_sha256": sha256(model_path), "seed": seed,
            "reference": "onnxruntime %s, CPUExecutionProvider, ORT_DISABLE_ALL" % ort.__version__,
            "inputs": [], "outputs": []}
    for kind, tensors in (("inputs", inputs), ("outputs", outputs)):
        os.makedirs(os.path.join(out_dir, kind))
        for name, x in tensors.items():
            rel = "%s/%s.npy" % (kind, sanitize(name))
            np.save(os.path.join(out_dir, rel), x)
            meta[kind].append({"name": name, "file": rel, "dtype": x.dtype.name,
                               "shape": list(x.shape)})
    with open(os.path.join(out_dir, "ref.json"), "w") as f:
        f.write(to_json(meta))
    return meta


def to_json(meta):
    """JSON with one line per key and per tensor."""
    lines = []
    for k, v in meta.items():
        if isinstance(v, list):
            v = "[\n" + ",\n".join("  " + json.dumps(t) for t in v) + "\n ]"
        else:
            v = json.dumps(v)
        lines.append(" %s: %s" % (json.dumps(k), v))
    return "{\n" + ",\n".join(lines) + "\n}\n"


# --------------------------------------------------------------------------
# Checking compiled models against references (numpy only)


def _first_error(text):
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    return ([l for l in lines if "error:" in l] or lines or ["no message"])[0][:300]


def check_one(model_name, models_dir, ref_root, tools, work, compile_args=("--target=cpu",)):
    """(status, [lines]) for one reference set; status 'pass'|'fail'|'skip'."""
    ref_dir = os.path.join(ref_root, model_name)
    with open(os.path.join(ref_dir, "ref.json")) as f:
        meta = json.load(f)
    model_path = os.path.join(models_dir, meta["model"])
    if not os.path.isfile(model_path):
        return "fail", ["FAIL %s: %s not found" % (model_name, model_path)]
    if sha256(model_path) != meta["model_sha256"]:
        return "fail", ["FAIL %s: %s changed since its reference was made "
                        "(rerun scripts/gen_reference_outputs.py)" % (model_name, meta["model"])]
    art, out_dir = os.path.join(work, "model.xfa"), os.path.join(work, "out")
    os.makedirs(out_dir, exist_ok=True)
    steps = [("compile", [tools["xfmr-compile"], model_path] + list(compile_args) + ["-o", art],
              COMPILE_TIMEOUT),
             ("run", [tools["xfmr-run"], art, "--output-dir", out_dir, "--quiet"] +
              [a for t in meta["inputs"]
               for a in ("--input", "%s=%s" % (t["name"], os.path.join(ref_dir, t["file"])))],
              RUN_TIMEOUT)]
    for step, cmd, timeout in steps:
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return "fail", ["FAIL %s: %s timed out (%d s)" % (model_name, step, timeout)]
        if r.returncode == 0:
            continue
        msg = _first_error(r.stderr)
        if (step == "compile" and r.returncode == 1 and "Sanitizer" not in r.stderr
                and ("unsupported" in r.stderr or "not supported" in r.stderr)):
            return "skip", ["SKIP %s: %s" % (model_name, msg)]
        how = "signal %d" % -r.returncode if r.returncode < 0 else "exit %d" % r.returncode
        return "fail", ["FAIL %s: %s failed (%s): %s" % (model_name, step, how, msg)]
    status, lines = "pass", []
    for t in meta["outputs"]:
        ref = np.load(os.path.join(ref_dir, t["file"]))
        got_path = os.path.join(out_dir, sanitize(t["name"]) + ".npy")
        head = "%s %s" % (model_name, t["name"])
        if not os.path.isfile(got_path):
            status, line = "fail", "FAIL %s: missing output" % head
        else:
            got = np.load(got_path)
            line = compare_output(head, ref, got)
            if line.startswith("FAIL"):
                status = "fail"
        lines.append(line)
    return status, lines


def compare_output(head, ref, got):
    """'PASS|FAIL <head>: ...' for one output tensor."""
    if got.dtype != ref.dtype or got.shape != ref.shape:
        return "FAIL %s: got %s%s, expected %s%s" % (head, got.dtype, list(got.shape),
                                                   ref.dtype, list(ref.shape))
    r64, g64 = ref.astype(np.float64), got.astype(np.float64)
    tol = REL_TOL * (float(np.abs(r64).max()) if r64.size else 0.0)
    diff = float(np.abs(g64 - r64).max()) if r64.size else 0.0
    ok = diff <= tol  # False for NaN
    return "%s %s: max_abs_diff=%.3g, tol=%.3g" % ("PASS" if ok else "FAIL", head, diff, tol)


def check_refs(models_dir, ref_root, build_dir, only=None, jobs=None, keep=None, log=print,
               compile_args=("--target=cpu",)):
    """Checks every REF/<model>/ (or those named in `only`); returns the
    counts (passed, failed, skipped), one per model."""
    tools = {t: os.path.join(build_dir, "bin", t) for t in ("xfmr-compile", "xfmr-run")}
    missing = [p for p in tools.values() if not os.access(p, os.X_OK)]
    if missing:
        raise SystemExit("error: %s is missing (build it first)" % missing[0])
    names = sorted(d for d in os.listdir(ref_root)
                   if os.path.isfile(os.path.join(ref_root, d, "ref.json")))
    if only:
        unknown = set(only) - set(names)
        if unknown:
            raise SystemExit("error: no reference for %s in %s" % (", ".join(sorted(unknown)), ref_root))
        names = [n for n in names if n in only]
    base = os.path.abspath(keep) if keep else tempfile.mkdtemp(prefix="xfmr-refs-")
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=jobs or os.cpu_count() or 2) as pool:
            results = list(pool.map(
                lambda n: check_one(n, models_dir, ref_root, tools, os.path.join(base, n),
                                    compile_args), names))
    finally:
        if not keep:
            shutil.rmtree(base, ignore_errors=True)
    counts = {"pass": 0, "fail": 0, "skip": 0}
    for status, lines in results:
        counts[status] += 1
        for line in lines:
            log(line)
    return counts["pass"], counts["fail"], counts["skip"]


# --------------------------------------------------------------------------
# Checker output


# int8-activation outputs (MatMulNBits accuracy_level 4) that miss a
# checker's tolerance must still be this close to the reference: a 1-ulp float
# difference upstream can flip one activation's int8 rounding, which moves its
# block sum by a whole quantization step and every later layer with it.
INT8_FLIP_RTOL = 1e-2


class Tally:
    """Counts checker results and prints them as `STATUS NAME CHECK: detail`
    lines, then (finish) the failures again on stderr, where lit shows them
    when FileCheck fails, and `N passed, M failed, K skipped`."""

    def __init__(self):
        self.counts = {"PASS": 0, "FAIL": 0, "SKIP": 0}
        self.failures = []

    def add(self, name, results):
        for status, check, detail in results:
            print("%s %s %s%s" % (status, name, check, (": " + detail) if detail else ""),
                  flush=True)
            if status == "FAIL":
                self.failures.append("FAIL %s %s: %s" % (name, check, detail))
            self.counts[status] += 1

    def add_job(self, name, future):
        """The results of a future running one model's checks; a checker
        bug (an exception) is one failure, not a crash."""
        try:
            results = future.result()
        except Exception as e:
            results = [("FAIL", "check", "%s: %s" % (type(e).__name__, e))]
        self.add(name, results)

    def finish(self):
        """Prints the summary; returns the exit status."""
        for line in self.failures:
            print(line, file=sys.stderr)
        print("%d passed, %d failed, %d skipped"
              % (self.counts["PASS"], self.counts["FAIL"], self.counts["SKIP"]))
        return 1 if self.counts["FAIL"] else 0
