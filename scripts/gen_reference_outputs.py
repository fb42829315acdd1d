#!/usr/bin/env python3
"""Writes onnxruntime reference outputs for the example models.

For each examples/models/NAME.onnx (gpt2, llama_gqa, llama_gqa_past,
mixtral_moe, transformer_encoder and their _static variants) this builds
deterministic inputs (numpy RandomState seeded per model name and --seed):
  input_ids        random in [0, 256)
  attention_mask   all ones (no padding)
  position_ids     arange, offset by the past length
  past_key_values  N(0, 1) * 0.5
  src              N(0, 1)
at the static shape for _static models and at batch 2, sequence 5, past 3 for
the dynamic ones, runs onnxruntime (CPUExecutionProvider, ORT_DISABLE_ALL, one
thread) and writes examples/models/ref/NAME/{inputs,outputs}/*.npy and
ref.json (layout: scripts/xfmr_refs.py). scripts/check-model-refs.py compares
xfmr's compiled models with them.

Usage: .venv/bin/python scripts/gen_reference_outputs.py [--models-dir DIR]
           [--ref-dir DIR] [--seed N] [--only NAME ...]
"""
import argparse
import glob
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import xfmr_refs  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models-dir", default=os.path.join(ROOT, "examples", "models"))
    ap.add_argument("--ref-dir", help="default: MODELS_DIR/ref")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", nargs="*")
    a = ap.parse_args()
    ref_dir = a.ref_dir or os.path.join(a.models_dir, "ref")
    names = a.only or sorted(os.path.basename(p)[:-5]
                             for p in glob.glob(os.path.join(a.models_dir, "*.onnx")))
    for name in names:
        meta = xfmr_refs.write_reference(a.models_dir, name, ref_dir, a.seed)
        print("%-28s %s -> %s" % (name, ", ".join("%s%s" % (t["name"], t["shape"]) for t in meta["inputs"]),
                                  ", ".join("%s%s" % (t["name"], t["shape"]) for t in meta["outputs"])))


if __name__ == "__main__":
    main()
