#!/usr/bin/env python3
"""Exports the serving benchmark model: a randomly initialised Llama with
GQA, big enough that a decode step is bound by reading its weights.

Config: TinyLlama-1.1B's layer shape (hidden 2048, intermediate 5632, 32
heads of 64 with 4 KV heads) with 2 layers, vocab 8192 and 512 positions:
122M parameters, 490 MB of fp32 weights. (The test models in
examples/models are 0.3 MB and compute-bound per token, so batching has
nothing to amortize on them.) Too large to commit; this
script regenerates it bit for bit from a fixed seed (torch 1.13 from Debian,
TorchScript exporter, opset 17, dynamic batch and sequence) and checks it
against torch with onnxruntime.

Usage: .venv/bin/python scripts/export_bench_model.py [-o build/models/llama_bench.onnx]
"""

import argparse
import io
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
import torch
import transformers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = dict(vocab_size=8192, hidden_size=2048, intermediate_size=5632, num_hidden_layers=2,
              num_attention_heads=32, num_key_value_heads=4, max_position_embeddings=512)


class Wrap(torch.nn.Module):
    def __init__(self):
        super().__init__()
        cfg = transformers.LlamaConfig(attn_implementation="eager", use_cache=False,
                                       tie_word_embeddings=False, **CONFIG)
        self.m = transformers.LlamaForCausalLM(cfg)

    def forward(self, input_ids, attention_mask, position_ids):
        return self.m(input_ids=input_ids, attention_mask=attention_mask,
                      position_ids=position_ids, use_cache=False, return_dict=False)[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-o", "--out", default=os.path.join(ROOT, "build", "models", "llama_bench.onnx"))
    a = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(2)
    wrap = Wrap().eval()
    params = sum(p.numel() for p in wrap.parameters())
    print("llama_bench: %.1fM parameters" % (params / 1e6), flush=True)
    ids = torch.randint(0, CONFIG["vocab_size"], (1, 8))
    mask = torch.ones(1, 8, dtype=torch.int64)
    pos = torch.arange(8).unsqueeze(0)
    names = ["input_ids", "attention_mask", "position_ids"]
    axes = {n: {0: "batch", 1: "sequence"} for n in names + ["logits"]}
    buf = io.BytesIO()
    torch.onnx.export(wrap, (ids, mask, pos), buf, opset_version=17, input_names=names,
                      output_names=["logits"], dynamic_axes=axes, do_constant_folding=True)
    m = onnx.load_from_string(buf.getvalue())
    for n in m.graph.node:
        n.ClearField("doc_string")
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    tmp = a.out + ".tmp"
    with open(tmp, "wb") as f:
        f.write(m.SerializeToString())
    sess = ort.InferenceSession(tmp, providers=["CPUExecutionProvider"])
    ids = torch.randint(0, CONFIG["vocab_size"], (1, 12))
    feeds = {"input_ids": ids, "attention_mask": torch.ones(1, 12, dtype=torch.int64),
             "position_ids": torch.arange(12).unsqueeze(0)}
    with torch.no_grad():
        ref = wrap(*feeds.values()).numpy()
    got = sess.run(None, {k: v.numpy() for k, v in feeds.items()})[0]
    diff = float(np.abs(ref - got).max())
    print("max|ort - torch| = %.2e (max|logit| %.2f)" % (diff, float(np.abs(ref).max())))
    if diff > 1e-3 * max(1.0, float(np.abs(ref).max())):
        os.remove(tmp)
        sys.exit("llama_bench: onnxruntime disagrees with torch")
    os.replace(tmp, a.out)
    print("wrote %s (%d bytes)" % (a.out, os.path.getsize(a.out)))


if __name__ == "__main__":
    main()
