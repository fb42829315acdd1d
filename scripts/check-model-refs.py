#!/usr/bin/env python3
"""Compiles the example models with xfmr and compares them with references.

For each REF_DIR/<model>/ (written by scripts/gen_reference_outputs.py; layout
in scripts/xfmr_refs.py): `xfmr-compile MODELS_DIR/<model>.onnx --target=cpu`,
`xfmr-run` on the reference inputs, and every output compared with the
onnxruntime reference: same dtype and shape, and
|got - ref| <= 1e-4 * max|ref| elementwise (per output tensor).

Prints "PASS|FAIL <model> <output>: max_abs_diff=..., tol=..." per output and
ends with "N passed, N failed, N skipped", counted per model. A model the
compiler reports as unsupported is skipped; a compile or run error, a missing
output or a mismatch fails it, as does a model file whose sha256 differs from
the one its reference was made from. Exits 1 on failures. Needs only numpy.

Usage: check-model-refs.py [--build-dir build] [--only NAME ...]
           [--models-dir examples/models] [--ref-dir MODELS_DIR/ref] [--jobs N] [--keep DIR]
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import xfmr_refs  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--only", nargs="+", metavar="NAME", help="only these models (e.g. gpt2_static)")
    ap.add_argument("--models-dir", default=os.path.join(ROOT, "examples", "models"))
    ap.add_argument("--ref-dir", help="default: MODELS_DIR/ref")
    ap.add_argument("--jobs", type=int, help="parallel models (default: CPU count)")
    ap.add_argument("--keep", metavar="DIR", help="keep artifacts and outputs in DIR")
    ap.add_argument("--compile-args", default="--target=cpu",
                    help="xfmr-compile's arguments (default: --target=cpu; e.g. "
                         "'--target=sm_90a --gpu-emulate' runs the GPU program's grid on the CPU)")
    a = ap.parse_args()
    p, f, s = xfmr_refs.check_refs(a.models_dir, a.ref_dir or os.path.join(a.models_dir, "ref"),
                                   a.build_dir, a.only, a.jobs, a.keep,
                                   compile_args=a.compile_args.split())
    print("%d passed, %d failed, %d skipped" % (p, f, s))
    return 1 if f else 0


if __name__ == "__main__":
    sys.exit(main())
