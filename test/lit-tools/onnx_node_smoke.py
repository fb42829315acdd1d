#!/usr/bin/env python3
"""Imports every ONNX backend node test model and reports the outcome.

Usage: onnx_node_smoke.py XFMR_TRANSLATE NODE_DIR [NODE_DIR...] [--simplify]
                          [--roundtrip XFMR_OPT]

With --roundtrip, each imported module is printed, parsed back by xfmr-opt and
verified, so every op's assembly format is exercised on real models.

A model whose import fails because an op, version or type is outside the
supported table (docs/onnx-ops.md) is skipped with its reason; any other
failure (a verifier error, a crash, a rejected valid model) counts as failed.
Ends with "N passed, N failed, N skipped" and exits non-zero on failures.
"""
import concurrent.futures
import glob
import os
import subprocess
import sys

UNSUPPORTED = ("unsupported op", "is not supported", "unsupported data type",
               "unsupported element type", "only tensor values are supported",
               "unsupported domain", "are not supported", "newer than supported",
               "does not exist in opset")


def main():
    argv = sys.argv[1:]
    opt = None
    if "--roundtrip" in argv:
        i = argv.index("--roundtrip")
        opt = argv[i + 1]
        del argv[i:i + 2]
    args = [a for a in argv if not a.startswith("--")]
    extra = ["--onnx-simplify-shapes"] if "--simplify" in argv else []
    tool, dirs = args[0], args[1:]
    models = sorted(m for d in dirs for m in glob.glob(os.path.join(d, "*", "model.onnx")))
    passed = failed = skipped = 0
    reasons = {}

    def run(m):
        try:
            r = subprocess.run([tool, "--import-onnx", m] + extra,
                               capture_output=True, text=True, timeout=60)
            if r.returncode != 0 or not opt:
                return r
            back = subprocess.run([opt, "-verify-each", "-o", os.devnull], input=r.stdout,
                                  capture_output=True, text=True, timeout=60)
            if back.returncode != 0:
                back.stderr = "round trip failed: " + back.stderr.strip().replace("\n", " | ")
                back.returncode = 2
            return back
        except subprocess.TimeoutExpired:
            return None

    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        results = list(pool.map(run, models))
    for m, r in zip(models, results):
        name = os.path.basename(os.path.dirname(m))
        if r is None:
            failed += 1
            print(f"FAIL {name}: timeout")
            continue
        if r.returncode == 0:
            passed += 1
            continue
        msg = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else f"exit {r.returncode}"
        if r.returncode == 1 and any(u in msg for u in UNSUPPORTED):
            skipped += 1
            key = msg.split("): ", 1)[-1].split(" (see")[0]
            reasons[key] = reasons.get(key, 0) + 1
            continue
        failed += 1
        print(f"FAIL {name}: {msg}")
    for key, n in sorted(reasons.items(), key=lambda kv: -kv[1])[:15]:
        print(f"skip x{n}: {key}")
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
