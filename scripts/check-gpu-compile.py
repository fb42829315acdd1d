#!/usr/bin/env python3
"""Compiles models for GPU targets and checks every kernel with ptxas.

For each model (default: examples/models/*.onnx; --corpus adds the Hugging
Face corpus examples/hf/*.onnx, --genai the onnxruntime-genai builder folders
examples/genai/*/; --model adds a file or model folder) and each
target (default sm_90a and sm_80), `xfmr-compile MODEL --target=T --report`
once as exported and once with --kv-cache=paged (only the latter for the
targets of --paged-only). A compile passes when it
succeeds, every kernel assembles (ptxas -v, run by the compiler) with 0 bytes
of spills, and some product runs on tensor cores. A compile that fails where
the CPU path fails too (the same flags with --target=cpu) is skipped with the
CPU's reason: the GPU target covers what the CPU path compiles. Prints one
line per compile and "N passed, F failed, S skipped"; exits 1 on a failure.
Only the standard library is needed.
"""

import argparse
import concurrent.futures
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUMMARY = re.compile(r"kernels \((\S+)\): (\d+), (\d+) spilling, (\d+) on tensor cores")


def first_error(text):
    lines = [l for l in text.splitlines() if "error" in l] or text.splitlines() or ["no message"]
    return lines[0][:240]


def compile_one(compiler, model, target, paged, work, timeout):
    name = os.path.basename(model.rstrip("/")).replace(".onnx", "")
    mode = "paged" if paged else "forward"
    art = os.path.join(work, "%s-%s-%s.xfa" % (name, target, mode))
    extra = ["--kv-cache=paged"] if paged else []
    cmd = [compiler, model, "--target=" + target, "--report", "--quiet", "-o", art] + extra
    start = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    seconds = time.time() - start
    head = "%s %s %s" % (name, target, mode)
    shutil.rmtree(art, ignore_errors=True)
    if r.returncode != 0:
        cpu = subprocess.run([compiler, model, "--target=cpu", "--quiet", "-o", art + ".cpu"] + extra,
                             capture_output=True, text=True, timeout=timeout)
        shutil.rmtree(art + ".cpu", ignore_errors=True)
        if cpu.returncode != 0:
            return "skip", "SKIP %s: the CPU path fails too: %s" % (head, first_error(cpu.stderr))
        return "fail", "FAIL %s: %s" % (head, first_error(r.stderr))
    m = SUMMARY.search(r.stdout)
    if not m:
        return "fail", "FAIL %s: no kernel report in --report's output" % head
    kernels, spilling, tensor = int(m.group(2)), int(m.group(3)), int(m.group(4))
    line = "%s: %d kernels, %d spilling, %d on tensor cores, %.1f s" % (
        head, kernels, spilling, tensor, seconds)
    if spilling or tensor == 0:
        return "fail", "FAIL " + line
    return "pass", "PASS " + line


def corpus_models(skip, one_exporter):
    """examples/hf/*.onnx, less the architectures in `skip`; with
    `one_exporter`, each architecture's forward model from dynamo and its
    with-past model from TorchScript (falling back to the other exporter)."""
    files = sorted(glob.glob(os.path.join(ROOT, "examples", "hf", "*.onnx")))
    stems = {os.path.basename(f)[:-len(".onnx")] for f in files}

    def arch_of(stem):
        return re.sub(r"(_past)?_(ts|dynamo)$", "", stem)

    def keep(stem):
        if arch_of(stem) in skip:
            return False
        if not one_exporter:
            return True
        m = re.match(r"(.*?)(_past)?_(ts|dynamo)$", stem)
        if not m:
            return True
        want, other = ("ts", "dynamo") if m.group(2) else ("dynamo", "ts")
        if m.group(3) == want:
            return True
        return "%s%s_%s" % (m.group(1), m.group(2) or "", want) not in stems

    return [f for f in files if keep(os.path.basename(f)[:-len(".onnx")])]


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--targets", default="sm_90a,sm_80")
    ap.add_argument("--corpus", action="store_true", help="also examples/hf/*.onnx")
    ap.add_argument("--genai", action="store_true",
                    help="also the onnxruntime-genai builder folders examples/genai/*/")
    ap.add_argument("--model", action="append", default=[], help="another model (file or folder)")
    ap.add_argument("--no-examples", action="store_true", help="skip examples/models")
    ap.add_argument("--only", nargs="+", metavar="NAME", help="only models whose name contains one")
    ap.add_argument("--skip", nargs="+", default=[], metavar="ARCH",
                    help="leave out the corpus models of these architectures (ARCH_*.onnx)")
    ap.add_argument("--one-exporter", action="store_true",
                    help="of the corpus, only ARCH_dynamo.onnx and ARCH_past_ts.onnx (and "
                         "ARCH_ts.onnx where no dynamo export exists): both exporters, each "
                         "variant once (the raised graph a GPU target compiles is the same)")
    ap.add_argument("--forward-only", action="store_true", help="no --kv-cache=paged compiles")
    ap.add_argument("--paged-only", default="", metavar="TARGETS",
                    help="targets (comma-separated) compiled only as paged step functions "
                         "(the corpus test: the graph is the same for every chip; the forward "
                         "kernels of each chip are covered by the example models)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--timeout", type=int, default=600)
    a = ap.parse_args()
    compiler = os.path.join(a.build_dir, "bin", "xfmr-compile")
    if not os.access(compiler, os.X_OK):
        sys.exit("error: %s is missing (build it first)" % compiler)
    models = [] if a.no_examples else sorted(glob.glob(os.path.join(ROOT, "examples", "models", "*.onnx")))
    if a.corpus:
        models += corpus_models(a.skip, a.one_exporter)
    if a.genai:
        models += sorted(d.rstrip("/") for d in glob.glob(os.path.join(ROOT, "examples", "genai", "*/"))
                         if os.path.isfile(os.path.join(d, "genai_config.json")))
    models += a.model
    if a.only:
        models = [m for m in models if any(o in os.path.basename(m.rstrip("/")) for o in a.only)]
    paged_only = set(filter(None, a.paged_only.split(",")))

    def variants(target):
        if a.forward_only:
            return [False]
        return [True] if target in paged_only else [False, True]

    jobs = [(m, t, p) for m in models for t in a.targets.split(",") for p in variants(t)]
    work = tempfile.mkdtemp(prefix="xfmr-gpu-compile-")
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=a.jobs) as pool:
            results = list(pool.map(
                lambda j: compile_one(compiler, j[0], j[1], j[2], work, a.timeout), jobs))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    counts = {"pass": 0, "fail": 0, "skip": 0}
    for status, line in results:
        counts[status] += 1
        print(line)
    print("%d passed, %d failed, %d skipped" % (counts["pass"], counts["fail"], counts["skip"]))
    return 1 if counts["fail"] else 0


if __name__ == "__main__":
    sys.exit(main())
