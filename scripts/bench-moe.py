#!/usr/bin/env python3
"""Batch-1 decode of a mixture-of-experts model: xfmr.moe against the
exported graph's own lowering (issue 14).

Builds a Mixtral-shaped model from transformers' classes with random weights
(hidden 512, 2 layers, 8 heads / 2 KV heads, 8 experts of intermediate 1024,
top 2, vocab 2000: the experts are ~88% of the weights), exports it with the
dynamo exporter (batched experts, as scripts/export_hf_corpus.py does),
compiles two paged step functions

  moe     xfmr-compile --kv-cache=paged          (one xfmr.moe per layer)
  graph   xfmr-compile --kv-cache=paged --raise-skip=moe
          (the block as exported: GatherND of the selected experts' weights
          for every token and slot, batched MatMuls)

and runs `xfmr-run generate` on each, alternating, ROUNDS times: greedy
tokens must be equal; reported are the best ms/token of the decode steps,
their ratio, and from the runtime's counters the expert and total weight
bytes a decode step reads against reading every weight (dense).

With --quant MODE[,MODE...] (bf16, int8, fp8-e4m3) each mode is compiled
too (`moe-MODE`: quantized experts, xfmr-quantize-experts, and the other
products in the same mode) and reported in the same rounds, against the f32
xfmr.moe; its greedy tokens are not required to equal f32's.

  .venv/bin/python scripts/bench-moe.py [--rounds 3] [--tokens 64] [--threads 1]
      [--quant int8,bf16] [--work build/bench-moe] [--skip-build]
"""

import argparse
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def export(path):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    import transformers
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    import export_hf_corpus as corpus

    torch.manual_seed(0)
    cfg = transformers.MixtralConfig(
        vocab_size=2000, hidden_size=512, intermediate_size=1024, num_hidden_layers=2,
        num_attention_heads=8, num_key_value_heads=2, head_dim=64, max_position_embeddings=512,
        num_local_experts=8, num_experts_per_tok=2, attn_implementation="eager", use_cache=True,
        pad_token_id=0, bos_token_id=1, eos_token_id=2)
    model = corpus._batched_experts(transformers.MixtralForCausalLM(cfg)).eval()
    wrap = corpus.Forward(model).eval()
    ids = torch.randint(3, 2000, (1, 8))
    mask = torch.ones_like(ids)
    corpus.export_one(wrap, "forward", "dynamo", path, [ids.numpy(), mask.numpy()], print)


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--work", default=os.path.join(ROOT, "build", "bench-moe"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--skip-build", action="store_true", help="reuse the model and artifacts")
    ap.add_argument("--quant", default="", help="comma-separated --quant modes to compare")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    onnx_path = os.path.join(a.work, "mixtral_bench.onnx")
    bin_dir = os.path.join(a.build_dir, "bin")
    arts = {"moe": os.path.join(a.work, "moe.xfa"), "graph": os.path.join(a.work, "graph.xfa")}
    modes = [m for m in a.quant.split(",") if m]
    for m in modes:
        arts["moe-" + m] = os.path.join(a.work, "moe-%s.xfa" % m)
    if not a.skip_build or not os.path.exists(onnx_path):
        print("exporting %s" % onnx_path, flush=True)
        export(onnx_path)
    for name, art in arts.items():
        if a.skip_build and os.path.exists(art):
            continue
        cmd = [os.path.join(bin_dir, "xfmr-compile"), onnx_path, "--kv-cache=paged", "--quiet",
               "-o", art]
        if name == "graph":
            cmd.append("--raise-skip=moe")
        if name.startswith("moe-"):
            cmd.append("--quant=" + name[len("moe-"):])
        print("compiling %s" % name, flush=True)
        run(cmd)
    os.sync()
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads))
    prompt = ",".join(str(3 + (i * 37) % 1990) for i in range(16))
    best, info, tokens = {}, {}, {}
    for r in range(a.rounds):
        for name, art in arts.items():
            out = run([os.path.join(bin_dir, "xfmr-run"), "generate", art, "--prompt-ids", prompt,
                       "--max-new-tokens", str(a.tokens), "--ignore-eos"], env=env)
            tokens.setdefault(name, out.stdout.strip())
            if out.stdout.strip() != tokens[name]:
                sys.exit("FAIL %s: tokens differ between rounds" % name)
            m = re.search(r"then ([0-9.]+) ms/token", out.stderr)
            ms = float(m.group(1))
            best[name] = min(best.get(name, ms), ms)
            moe = re.search(r"^moe: decode.*$", out.stderr, re.M)
            if moe:
                info[name] = moe.group(0)
            print("round %d %-5s %.2f ms/token" % (r, name, ms), flush=True)
    if tokens["moe"] != tokens["graph"]:
        sys.exit("FAIL: greedy tokens differ between xfmr.moe and the graph's lowering")
    print("greedy tokens equal (%d)" % a.tokens)
    for name in arts:
        if name != "graph":
            print("%-9s %s" % (name + ":", info.get(name, "moe: no counters")[len("moe: "):]))
    print("| lowering | ms/token | tok/s | vs graph | vs f32 xfmr.moe |")
    print("|---|---|---|---|---|")
    for name in arts:
        print("| %s | %.2f | %.1f | %.2fx | %.2fx |" % (
            name, best[name], 1e3 / best[name], best["graph"] / best[name],
            best["moe"] / best[name]))


if __name__ == "__main__":
    main()
