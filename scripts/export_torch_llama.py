#!/usr/bin/env python3
"""Exports a large Llama built from transformers' own modeling code with
torch's TorchScript exporter, the way Optimum and transformers.js users do:
one decode step with a KV cache (input_ids, attention_mask, position_ids,
past_key_values.N.{key,value} -> logits, present.N.{key,value}), weights in
one external-data file beside model.onnx.

This is the model form issue 17's baseline was measured on (a TinyLlama-1.1B
shaped torch export); scripts/gen_llama_onnx.py writes the onnxruntime-genai
form without torch. Weights are transformers' random initialisation (fixed
seed), norm weights drawn around 1 so that no two layers are identical.

  .venv/bin/python scripts/export_torch_llama.py --shape tinyllama [--layers N] -o DIR

Needs the venv with scripts/requirements-models.txt (torch, transformers);
the 1.1B shape takes a few minutes and about 10 GiB of memory.
"""

import argparse
import os
import sys
import time
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import onnx  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

SHAPES = {
    # hidden, layers, heads, kv heads, ffn, vocab
    "tinyllama": (2048, 22, 32, 4, 5632, 32000),
    "bench": (1024, 8, 16, 4, 2816, 32000),
}


def build(shape, layers, seed):
    hidden, n, heads, kv, ffn, vocab = SHAPES[shape]
    cfg = transformers.LlamaConfig(
        vocab_size=vocab, hidden_size=hidden, intermediate_size=ffn,
        num_hidden_layers=layers or n, num_attention_heads=heads, num_key_value_heads=kv,
        max_position_embeddings=2048, rms_norm_eps=1e-5, rope_theta=10000.0,
        attn_implementation="eager", use_cache=True, tie_word_embeddings=False,
        pad_token_id=0, bos_token_id=1, eos_token_id=2)
    torch.manual_seed(seed)
    model = transformers.LlamaForCausalLM(cfg).eval()
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:  # norm weights
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
    return model


class Past(torch.nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m
        self.layers = m.config.num_hidden_layers

    def forward(self, input_ids, attention_mask, position_ids, *past):
        cache = transformers.DynamicCache(
            ddp_cache_data=[(past[2 * i], past[2 * i + 1]) for i in range(self.layers)])
        out = self.m(input_ids=input_ids, attention_mask=attention_mask,
                     position_ids=position_ids, past_key_values=cache, use_cache=True,
                     return_dict=True)
        res = [out.logits]
        for layer in out.past_key_values.layers:
            res += [layer.keys, layer.values]
        return tuple(res)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", choices=sorted(SHAPES), default="tinyllama")
    ap.add_argument("--layers", type=int, default=0, help="override the shape's layer count")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("-o", "--out", required=True, help="output folder (model.onnx, model.onnx.data)")
    a = ap.parse_args()

    t0 = time.time()
    model = build(a.shape, a.layers, a.seed)
    c = model.config
    n, kv, hd = c.num_hidden_layers, c.num_key_value_heads, c.hidden_size // c.num_attention_heads
    wrap = Past(model).eval()
    past_names = ["past_key_values.%d.%s" % (i, x) for i in range(n) for x in ("key", "value")]
    present_names = ["present.%d.%s" % (i, x) for i in range(n) for x in ("key", "value")]
    inputs = ["input_ids", "attention_mask", "position_ids"] + past_names
    outputs = ["logits"] + present_names
    B, S, P = 1, 3, 2
    args = [torch.randint(3, c.vocab_size, (B, S)), torch.ones(B, P + S, dtype=torch.int64),
            torch.arange(P, P + S).unsqueeze(0)]
    args += [torch.zeros(B, kv, P, hd) for _ in past_names]
    axes = {"input_ids": {0: "batch", 1: "sequence"},
            "attention_mask": {0: "batch", 1: "past_sequence+sequence"},
            "position_ids": {0: "batch", 1: "sequence"},
            "logits": {0: "batch", 1: "sequence"}}
    axes.update({p: {0: "batch", 2: "past_sequence"} for p in past_names})
    axes.update({p: {0: "batch", 2: "past_sequence+sequence"} for p in present_names})
    print("built %s (%d layers, %.2fB parameters) in %.0f s" % (
        a.shape, n, sum(p.numel() for p in model.parameters()) / 1e9, time.time() - t0), flush=True)

    os.makedirs(a.out, exist_ok=True)
    tmp = os.path.join(a.out, "export")
    os.makedirs(tmp, exist_ok=True)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(wrap, tuple(args), os.path.join(tmp, "model.onnx"), dynamo=False,
                          opset_version=17, input_names=inputs, output_names=outputs,
                          dynamic_axes=axes, do_constant_folding=True)
    print("exported in %.0f s" % (time.time() - t0), flush=True)
    del model, wrap
    # One external-data file (the exporter writes one file per tensor).
    m = onnx.load(os.path.join(tmp, "model.onnx"), load_external_data=True)
    for name in ("model.onnx", "model.onnx.data"):
        if os.path.exists(os.path.join(a.out, name)):
            os.remove(os.path.join(a.out, name))
    onnx.save(m, os.path.join(a.out, "model.onnx"), save_as_external_data=True,
              all_tensors_to_one_file=True, location="model.onnx.data", size_threshold=1024)
    for f in os.listdir(tmp):
        os.remove(os.path.join(tmp, f))
    os.rmdir(tmp)
    print("wrote %s (%.2f GB of external data) in %.0f s" % (
        a.out, os.path.getsize(os.path.join(a.out, "model.onnx.data")) / 1e9, time.time() - t0))


if __name__ == "__main__":
    sys.exit(main())
