#!/usr/bin/env python3
"""Tensor parallelism against the single process (issue 40; docs/parallelism.md).

For each Hugging Face corpus model, compiles it once as one process and once
per rank count with `xfmr-compile --tensor-parallel=N`, runs both (`mpirun -np
N xfmr-run` for the parallel one) on the corpus' reference inputs and
compares the logits (max |diff| / max |logits| <= 1e-5); then the same with
`--kv-cache=paged` through `xfmr-run generate` (greedy tokens identical, two
prompts batched) and `xfmr-run perplexity` (within 1e-5 relative). Prints each rank's weight bytes against the single
artifact's, split into the sharded and the replicated part:
  single S = X + Y, per rank R = X / N + Y  =>  X = (S - R) N / (N - 1).
One PASS/FAIL line per case and "N passed, N failed".

  .venv/bin/python scripts/check-tensor-parallel.py --build-dir build \
      [--models llama_dynamo:2,4 qwen2_ts:2]
"""

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HF = os.path.join(ROOT, "examples", "hf")

# model: rank counts. llama: 4 query heads, 2 KV heads (split at 2 ranks,
# replicated at 4); qwen2 (TorchScript export): biases on q, k, v; 4 query
# heads, 2 KV heads; starcoder2 (TorchScript): an ungated MLP with biases
# (c_fc, GELU, c_proj) split by columns.
DEFAULT = ["llama_dynamo:2,4", "qwen2_ts:2", "starcoder2_ts:2"]
PROMPTS = ["5,9,33,2,17", "7,8,9"]
MPIRUN = ["env", "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1",
          "OMPI_MCA_rmaps_base_oversubscribe=1", "mpirun", "--oversubscribe"]


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(" ".join(shlex.quote(c) for c in cmd) + "\n" + r.stderr[-2000:])
    return r.stdout


def compile_model(bin_dir, model, out, extra):
    run([os.path.join(bin_dir, "xfmr-compile"), os.path.join(HF, model + ".onnx"), "-O0",
         "--quiet", "-o", out] + extra)
    with open(os.path.join(out, "manifest.json")) as f:
        return json.load(f)


def logits_case(bin_dir, tmp, model, ranks):
    inputs = []
    for name in ("input_ids", "attention_mask"):
        inputs += ["--input", f"{name}={HF}/ref/{model}/inputs/{name}.npy"]
    one = os.path.join(tmp, f"{model}-one.xfa")
    if not os.path.exists(one):
        compile_model(bin_dir, model, one, [])
        run([os.path.join(bin_dir, "xfmr-run"), one, "--output-dir", one + ".out", "--quiet"]
            + inputs)
    tp = os.path.join(tmp, f"{model}-tp{ranks}.xfa")
    m = compile_model(bin_dir, model, tp, [f"--tensor-parallel={ranks}"])
    run(MPIRUN + ["-np", str(ranks), os.path.join(bin_dir, "xfmr-run"), tp, "--output-dir",
                  tp + ".out", "--quiet"] + inputs)
    a = np.load(os.path.join(one + ".out", "logits.npy"))
    b = np.load(os.path.join(tp + ".out", "logits.npy"))
    rel = float(np.abs(a - b).max() / np.abs(a).max())
    with open(os.path.join(one, "manifest.json")) as f:
        single = json.load(f)["weights"]["size"]
    per_rank = m["weights"]["size"]
    sharded = (single - per_rank) * ranks / (ranks - 1)
    replicated = single - sharded
    files = m["tensor_parallel"]["weights"]
    ok = rel <= 1e-5 and len(files) == ranks and sharded > 0
    print(f"{'PASS' if ok else 'FAIL'} {model} tp={ranks} logits: max|diff|/max|logits| "
          f"{rel:.2e}; weight bytes per rank {per_rank} of {single} "
          f"({per_rank / single:.3f}; sharded {sharded:.0f} / {ranks}, replicated "
          f"{replicated:.0f})")
    return ok


def generate_case(bin_dir, tmp, model, ranks):
    args = ["--max-new-tokens", "12", "--ignore-eos", "--quiet"]
    for p in PROMPTS:
        args += ["--prompt-ids", p]
    one = os.path.join(tmp, f"{model}-paged.xfa")
    if not os.path.exists(one):
        compile_model(bin_dir, model, one, ["--kv-cache=paged"])
    want = run([os.path.join(bin_dir, "xfmr-run"), "generate", one] + args)
    tp = os.path.join(tmp, f"{model}-paged-tp{ranks}.xfa")
    m = compile_model(bin_dir, model, tp, ["--kv-cache=paged", f"--tensor-parallel={ranks}"])
    got = run(MPIRUN + ["-np", str(ranks), os.path.join(bin_dir, "xfmr-run"), "generate", tp]
              + args)
    with open(os.path.join(one, "manifest.json")) as f:
        heads = json.load(f)["kv_cache"]["num_kv_heads"]
    local = m["kv_cache"]["num_kv_heads"]
    # Perplexity over windows of 16 with prefill chunks of 5 (rank 0 prints).
    tokens = os.path.join(tmp, "tokens.npy")
    np.save(tokens, np.random.default_rng(7).integers(0, 100, 80, dtype=np.int64))
    ppl = ["perplexity", "--tokens", tokens, "--context", "16", "--chunk", "5", "--json",
           "--quiet"]
    p1 = json.loads(run([os.path.join(bin_dir, "xfmr-run"), ppl[0], one] + ppl[1:]))
    pn = json.loads(run(MPIRUN + ["-np", str(ranks), os.path.join(bin_dir, "xfmr-run"), ppl[0],
                                  tp] + ppl[1:]))
    rel = abs(pn["perplexity"] - p1["perplexity"]) / p1["perplexity"]
    ok = got == want and local == max(1, heads // ranks) and rel <= 1e-5
    print(f"{'PASS' if ok else 'FAIL'} {model} tp={ranks} paged generate: "
          f"{'identical' if got == want else 'DIFFERENT'} greedy tokens "
          f"({len(want.split())} prompts x 12); perplexity {pn['perplexity']:.6f} vs "
          f"{p1['perplexity']:.6f} (relative {rel:.1e}); KV heads per rank {local} of {heads}")
    if got != want:
        print("  single:", want.strip().replace("\n", " | "))
        print("  tensor-parallel:", got.strip().replace("\n", " | "))
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", required=True)
    ap.add_argument("--models", nargs="*", default=DEFAULT,
                    help="model:ranks,... from examples/hf")
    args = ap.parse_args()
    bin_dir = os.path.join(os.path.abspath(args.build_dir), "bin")
    passed = failed = 0
    with tempfile.TemporaryDirectory(prefix="xfmr-tp-") as tmp:
        for spec in args.models:
            model, ranks = spec.split(":")
            for n in (int(r) for r in ranks.split(",")):
                for case in (logits_case, generate_case):
                    try:
                        ok = case(bin_dir, tmp, model, n)
                    except RuntimeError as e:
                        print(f"FAIL {model} tp={n} {case.__name__}: {e}")
                        ok = False
                    passed += ok
                    failed += not ok
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
