#!/usr/bin/env python3
"""Exports the example models afresh with other random weights and checks
xfmr's compiled models against onnxruntime on them.

The committed examples/models/*.onnx and their references (examples/models/ref)
use weights seed 0; this re-runs scripts/export_models.py's export with
--seed (default 1234) into a temporary directory, writes onnxruntime
references there exactly as scripts/gen_reference_outputs.py does (inputs
seeded by --seed too), then runs scripts/check-model-refs.py's check on them.
Different weights change, e.g., which MoE experts the tokens are routed to.

Needs torch and transformers (XFMR_WITH_PYTHON_MODELS=1 setup, see
examples/models/README.md). Without torch it prints "SKIP: torch not
available" and "0 passed, 0 failed, 1 skipped" and exits 0. Otherwise it ends
with check-model-refs.py's "N passed, N failed, N skipped" (an export whose
onnxruntime result differs from torch's by more than 1e-3 counts as a failure)
and exits 1 on failures.

Usage: .venv/bin/python scripts/check-fresh-exports.py [--build-dir build]
           [--seed 1234] [--only NAME ...] [--keep DIR] [--jobs N]
"""
import argparse
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", default=os.path.join(os.path.dirname(HERE), "build"))
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--only", nargs="+", metavar="NAME", help="models of export_models.py (e.g. gpt2)")
    ap.add_argument("--keep", metavar="DIR", help="export, references and artifacts go to DIR")
    ap.add_argument("--jobs", type=int)
    a = ap.parse_args()
    for module in ("torch", "transformers"):
        try:
            __import__(module)
        except ImportError:
            print("SKIP: %s not available" % module)
            print("0 passed, 0 failed, 1 skipped")
            return 0
    import transformers
    if not transformers.__version__.startswith("4."):
        # export_models.py is written for the examples' toolchain (Debian's
        # torch 1.13, transformers 4.46); transformers 5 models are covered
        # by the Hugging Face corpus (scripts/check-hf-corpus.py).
        print("SKIP: export_models.py needs transformers 4.x, found %s" % transformers.__version__)
        print("0 passed, 0 failed, 1 skipped")
        return 0
    sys.path.insert(0, HERE)
    import export_models  # torch, transformers, onnx, onnxruntime
    import xfmr_refs

    for name in a.only or []:
        if name not in export_models.MODELS:
            sys.exit("error: unknown model '%s' (one of %s)" % (name, ", ".join(export_models.MODELS)))
    work = os.path.abspath(a.keep) if a.keep else tempfile.mkdtemp(prefix="xfmr-fresh-")
    models_dir, ref_dir = os.path.join(work, "models"), os.path.join(work, "ref")
    os.makedirs(models_dir, exist_ok=True)
    bad_exports = 0
    try:
        for name in a.only or export_models.MODELS:
            try:
                results = export_models.export(name, models_dir, lambda s: print("export: " + s), a.seed)
            except Exception as e:  # report and go on with the others
                print("FAIL export %s: %s: %s" % (name, type(e).__name__, e))
                bad_exports += 1
                continue
            for fname, (_, diffs, _) in results.items():
                if any(d > 1e-3 for _, d in diffs):
                    print("FAIL export %s: onnxruntime differs from torch" % fname)
                    bad_exports += 1
                xfmr_refs.write_reference(models_dir, fname[:-len(".onnx")], ref_dir, a.seed)
        p, f, s = xfmr_refs.check_refs(models_dir, ref_dir, a.build_dir, jobs=a.jobs,
                                       keep=os.path.join(work, "artifacts") if a.keep else None)
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    print("%d passed, %d failed, %d skipped" % (p, f + bad_exports, s))
    return 1 if f + bad_exports else 0


if __name__ == "__main__":
    sys.exit(main())
