#!/usr/bin/env python3
"""Tensor and pipeline parallelism against the single process (issue 40;
docs/parallelism.md).

For each Hugging Face corpus model and layout, compiles it once as one
process and once split: `--tensor-parallel=N` ("N"), `--pipeline-parallel=M`
("ppM") or both ("ppMxN", M stages of N ranks). Tensor-parallel layouts run
both on the corpus' reference inputs (`mpirun -np N xfmr-run`) and compare
the logits (max |diff| / max |logits| <= 1e-5). Every layout then goes through
`--kv-cache=paged` step functions: `xfmr-run generate` (greedy tokens
identical, two prompts batched; every logits row of the first prompt within
1e-5 relative, from --dump-logits) and `xfmr-run perplexity` (within 1e-5
relative). Prints each rank's weight bytes against the single artifact's; for
tensor parallelism split into the sharded and the replicated part:
  single S = X + Y, per rank R = X / N + Y  =>  X = (S - R) N / (N - 1).
One PASS/FAIL line per case and "N passed, N failed".

  .venv/bin/python scripts/check-tensor-parallel.py --build-dir build \
      [--models llama_dynamo:2,4,pp2,pp2x2 qwen2_ts:2]
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
# Pipeline stages: llama and qwen2 have 2 layers (one per stage), and 2
# stages of 2 tensor-parallel ranks run as 4 processes.
DEFAULT = ["llama_dynamo:2,4,pp2,pp2x2", "qwen2_ts:2,pp2,pp2x2", "starcoder2_ts:2"]
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


def layout_flags(tp, pp):
    return ([f"--tensor-parallel={tp}"] if tp > 1 else []) + \
        ([f"--pipeline-parallel={pp}"] if pp > 1 else [])


def weights_per_rank(artifact, manifest):
    """Each rank's weight bytes (every stage's directory, every rank's file)."""
    sizes = []
    stages = manifest.get("pipeline_parallel", {}).get("stages", 1)
    for s in range(stages):
        d = artifact if s == 0 else os.path.join(artifact, f"stage{s}")
        with open(os.path.join(d, "manifest.json")) as f:
            m = json.load(f)
        ranks = m.get("tensor_parallel", {}).get("ranks", 1)
        sizes += [m["weights"]["size"]] * ranks
    return sizes


def max_relative(dir_a, dir_b):
    """Max over the dumped logits rows of max|a - b| / max|a|."""
    names = sorted(os.listdir(dir_a))
    if not names or names != sorted(os.listdir(dir_b)):
        raise RuntimeError(f"--dump-logits wrote {len(names)} rows to {dir_a} but "
                           f"{len(os.listdir(dir_b))} to {dir_b}")
    worst = 0.0
    for n in names:
        a = np.load(os.path.join(dir_a, n))
        b = np.load(os.path.join(dir_b, n))
        worst = max(worst, float(np.abs(a - b).max() / np.abs(a).max()))
    return worst


def generate_case(bin_dir, tmp, model, tp, pp=1):
    ranks = tp * pp
    name = f"tp={tp}" if pp == 1 else f"pp={pp}" if tp == 1 else f"pp={pp} x tp={tp}"
    args = ["--max-new-tokens", "12", "--ignore-eos", "--quiet"]
    for p in PROMPTS:
        args += ["--prompt-ids", p]
    one = os.path.join(tmp, f"{model}-paged.xfa")
    if not os.path.exists(one):
        compile_model(bin_dir, model, one, ["--kv-cache=paged"])
    want = run([os.path.join(bin_dir, "xfmr-run"), "generate", one, "--dump-logits",
                one + ".logits"] + args)
    par = os.path.join(tmp, f"{model}-paged-tp{tp}-pp{pp}.xfa")
    m = compile_model(bin_dir, model, par, ["--kv-cache=paged"] + layout_flags(tp, pp))
    got = run(MPIRUN + ["-np", str(ranks), os.path.join(bin_dir, "xfmr-run"), "generate", par,
                        "--dump-logits", par + ".logits"] + args)
    logits = max_relative(one + ".logits", par + ".logits")
    with open(os.path.join(one, "manifest.json")) as f:
        single = json.load(f)
    heads = single["kv_cache"]["num_kv_heads"]
    local = m["kv_cache"]["num_kv_heads"]
    layers = single["kv_cache"]["num_layers"]
    sizes = weights_per_rank(par, m)
    # Perplexity over windows of 16 with prefill chunks of 5 (rank 0 prints).
    tokens = os.path.join(tmp, "tokens.npy")
    np.save(tokens, np.random.default_rng(7).integers(0, 100, 80, dtype=np.int64))
    ppl = ["perplexity", "--tokens", tokens, "--context", "16", "--chunk", "5", "--json",
           "--quiet"]
    p1 = json.loads(run([os.path.join(bin_dir, "xfmr-run"), ppl[0], one] + ppl[1:]))
    pn = json.loads(run(MPIRUN + ["-np", str(ranks), os.path.join(bin_dir, "xfmr-run"), ppl[0],
                                  par] + ppl[1:]))
    rel = abs(pn["perplexity"] - p1["perplexity"]) / p1["perplexity"]
    ok = (got == want and local == max(1, heads // tp) and rel <= 1e-5 and logits <= 1e-5 and
          m["kv_cache"]["num_layers"] == layers // pp and len(sizes) == ranks and
          max(sizes) < single["weights"]["size"])
    print(f"{'PASS' if ok else 'FAIL'} {model} {name} paged generate: "
          f"{'identical' if got == want else 'DIFFERENT'} greedy tokens "
          f"({len(want.split())} prompts x 12), logits {logits:.1e}; perplexity "
          f"{pn['perplexity']:.6f} vs {p1['perplexity']:.6f} (relative {rel:.1e}); "
          f"KV heads per rank {local} of {heads}, layers per stage "
          f"{m['kv_cache']['num_layers']} of {layers}; weight bytes per rank "
          f"{' '.join(str(x) for x in sizes)} of {single['weights']['size']} "
          f"(max {max(sizes) / single['weights']['size']:.3f})")
    if got != want:
        print("  single:", want.strip().replace("\n", " | "))
        print("  parallel:", got.strip().replace("\n", " | "))
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
            model, layouts = spec.split(":")
            for layout in layouts.split(","):
                # "N": tensor parallel; "ppM": pipeline; "ppMxN": both.
                if layout.startswith("pp"):
                    pp, _, tp = layout[2:].partition("x")
                    pp, tp = int(pp), int(tp or 1)
                else:
                    pp, tp = 1, int(layout)
                cases = [generate_case] if pp > 1 else [logits_case, generate_case]
                for case in cases:
                    try:
                        ok = case(bin_dir, tmp, model, tp, pp) if pp > 1 else \
                            case(bin_dir, tmp, model, tp)
                    except RuntimeError as e:
                        print(f"FAIL {model} {layout} {case.__name__}: {e}")
                        ok = False
                    passed += ok
                    failed += not ok
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
