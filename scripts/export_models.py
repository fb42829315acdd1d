#!/usr/bin/env python3
"""Exports the tiny example transformer models into examples/models/.

TorchScript-based torch.onnx.export (torch 1.13 from Debian, opset 17) of
randomly initialised (fixed seed) Hugging Face / torch.nn models with tiny
configs: hidden 64, 2 layers, 4 heads, vocab 256, intermediate 128, max
positions 128. Weights stay inside each .onnx (no external data).

Each model is exported twice:
  NAME_static.onnx   batch 1, sequence 8 (past models: 8 past + 8 new tokens)
  NAME.onnx          dynamic batch / sequence / past_sequence axes

Every file is loaded and run with onnxruntime and compared against torch
(dynamic files also at a second shape). The op inventory goes to
examples/models/OPS.txt.

Usage (needs XFMR_WITH_PYTHON_MODELS=1 bash scripts/setup-venv.sh):
  .venv/bin/python scripts/export_models.py [--out DIR] [--only NAME ...] [--seed N]
"""

import argparse
import collections
import io
import os
import sys
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import torch
import transformers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUT = os.path.join(ROOT, "examples", "models")
OPSET = 17

HIDDEN, LAYERS, HEADS, KV_HEADS, VOCAB, INTER, MAXPOS = 64, 2, 4, 2, 256, 128, 128
STATIC_BATCH, STATIC_SEQ = 1, 8
STATIC_PAST = 8
# Further shapes the dynamic exports are checked at: (batch, seq, past); the
# first differs from the export shape in every axis, the second is a decode
# step (and leaves most MoE experts without tokens), the third has no past.
DYN_SHAPES = [(2, 5, 3), (1, 1, 7), (2, 4, 0)]


# --------------------------------------------------------------------------
# Models. Each wrapper takes and returns plain tensors only.


class GPT2Wrap(torch.nn.Module):
    inputs = ["input_ids", "attention_mask"]
    outputs = ["logits"]

    def __init__(self):
        super().__init__()
        cfg = transformers.GPT2Config(
            vocab_size=VOCAB, n_positions=MAXPOS, n_embd=HIDDEN, n_layer=LAYERS, n_head=HEADS,
            n_inner=INTER, use_cache=False, attn_implementation="eager")
        self.m = transformers.GPT2LMHeadModel(cfg)

    def forward(self, input_ids, attention_mask):
        return self.m(input_ids=input_ids, attention_mask=attention_mask,
                      use_cache=False, return_dict=False)[0]


def llama_config(cls, **kw):
    return cls(
        vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=INTER, num_hidden_layers=LAYERS,
        num_attention_heads=HEADS, num_key_value_heads=KV_HEADS, max_position_embeddings=MAXPOS,
        attn_implementation="eager", use_cache=False, tie_word_embeddings=False, **kw)


class LlamaWrap(torch.nn.Module):
    inputs = ["input_ids", "attention_mask", "position_ids"]
    outputs = ["logits"]

    def __init__(self):
        super().__init__()
        self.m = transformers.LlamaForCausalLM(llama_config(transformers.LlamaConfig))

    def forward(self, input_ids, attention_mask, position_ids):
        return self.m(input_ids=input_ids, attention_mask=attention_mask,
                      position_ids=position_ids, use_cache=False, return_dict=False)[0]


class LlamaPastWrap(torch.nn.Module):
    """One step with a KV cache: attention_mask spans past + new tokens."""
    past = ["past_key_values.%d.%s" % (i, kv) for i in range(LAYERS) for kv in ("key", "value")]
    inputs = ["input_ids", "attention_mask", "position_ids"] + past
    outputs = ["logits"] + ["present.%d.%s" % (i, kv) for i in range(LAYERS) for kv in ("key", "value")]

    def __init__(self):
        super().__init__()
        self.m = transformers.LlamaForCausalLM(llama_config(transformers.LlamaConfig))

    def forward(self, input_ids, attention_mask, position_ids, *past):
        cache = transformers.DynamicCache.from_legacy_cache(
            tuple((past[2 * i], past[2 * i + 1]) for i in range(LAYERS)))
        past_len = past[0].shape[2]
        cache_position = torch.arange(past_len, past_len + input_ids.shape[1])
        logits, present = self.m(
            input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
            past_key_values=cache, cache_position=cache_position, use_cache=True,
            return_dict=False)[:2]
        if not isinstance(present, tuple):
            present = present.to_legacy_cache()
        return (logits,) + tuple(t for kv in present for t in kv)


class MixtralWrap(LlamaWrap):
    def __init__(self):
        torch.nn.Module.__init__(self)
        self.m = transformers.MixtralForCausalLM(llama_config(
            transformers.MixtralConfig, num_local_experts=4, num_experts_per_tok=2,
            output_router_logits=False))

    def forward(self, input_ids, attention_mask, position_ids):
        return self.m(input_ids=input_ids, attention_mask=attention_mask,
                      position_ids=position_ids, use_cache=False, output_router_logits=False,
                      return_dict=False)[0]


class EncoderWrap(torch.nn.Module):
    inputs = ["src"]
    outputs = ["out"]

    def __init__(self):
        super().__init__()
        layer = torch.nn.TransformerEncoderLayer(
            d_model=HIDDEN, nhead=HEADS, dim_feedforward=INTER, dropout=0.0, batch_first=True)
        self.m = torch.nn.TransformerEncoder(layer, num_layers=LAYERS, enable_nested_tensor=False)

    def forward(self, src):
        return self.m(src)


MODELS = collections.OrderedDict([
    ("gpt2", GPT2Wrap),
    ("llama_gqa", LlamaWrap),
    ("llama_gqa_past", LlamaPastWrap),
    ("mixtral_moe", MixtralWrap),
    ("transformer_encoder", EncoderWrap),
])


# --------------------------------------------------------------------------
# Example inputs and dynamic axes


def make_inputs(name, batch, seq, past, seed):
    g = torch.Generator().manual_seed(seed)
    if name == "transformer_encoder":
        return (torch.randn(batch, seq, HIDDEN, generator=g),)
    ids = torch.randint(0, VOCAB, (batch, seq), generator=g)
    total = seq + (past if name.endswith("_past") else 0)
    mask = torch.ones(batch, total, dtype=torch.int64)
    if batch > 1:
        mask[1, :2] = 0  # left padding in the second row
    if name == "gpt2":
        return (ids, mask)
    start = total - seq
    pos = (mask.cumsum(-1) - 1).clamp(min=0)[:, start:]
    args = [ids, mask, pos]
    if name.endswith("_past"):
        hd = HIDDEN // HEADS
        args += [torch.randn(batch, KV_HEADS, past, hd, generator=g) for _ in range(2 * LAYERS)]
    return tuple(args)


def dynamic_axes(name, wrap):
    if name == "transformer_encoder":
        return {"src": {0: "batch", 1: "sequence"}, "out": {0: "batch", 1: "sequence"}}
    past = name.endswith("_past")
    ax = {"input_ids": {0: "batch", 1: "sequence"},
          "attention_mask": {0: "batch", 1: "past_sequence+sequence" if past else "sequence"},
          "logits": {0: "batch", 1: "sequence"}}
    if "position_ids" in wrap.inputs:
        ax["position_ids"] = {0: "batch", 1: "sequence"}
    for n in wrap.inputs:
        if n.startswith("past_key_values"):
            ax[n] = {0: "batch", 2: "past_sequence"}
    for n in wrap.outputs:
        if n.startswith("present"):
            ax[n] = {0: "batch", 2: "past_sequence+sequence"}
    return ax


# --------------------------------------------------------------------------


def export(name, out_dir, log, seed=0):
    """Exports MODELS[name] with weights from torch.manual_seed(seed) as
    OUT_DIR/NAME_static.onnx and OUT_DIR/NAME.onnx."""
    torch.manual_seed(seed)
    wrap = MODELS[name]()
    wrap.eval()
    results = {}
    for static in (True, False):
        fname = name + ("_static" if static else "") + ".onnx"
        path = os.path.join(out_dir, fname)
        args = make_inputs(name, STATIC_BATCH, STATIC_SEQ, STATIC_PAST, seed=1)
        buf = io.BytesIO()
        # Grad stays enabled while tracing: torch.nn.TransformerEncoderLayer's
        # inference fast path (aten::_transformer_encoder_layer_fwd, which has
        # no ONNX symbolic) is only taken under no_grad.
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.onnx.export(
                wrap, args, buf, opset_version=OPSET, input_names=wrap.inputs,
                output_names=wrap.outputs, dynamic_axes=None if static else dynamic_axes(name, wrap),
                do_constant_folding=True)
        tracer = sorted({str(w.message).split("\n")[0][:160] for w in caught
                         if "TracerWarning" in type(w.message).__name__ or "Tracer" in str(w.category)})
        m = onnx.load_from_string(buf.getvalue())
        for n in m.graph.node:  # drop source-location doc strings: smaller, reproducible files
            n.ClearField("doc_string")
        onnx.checker.check_model(m, full_check=True)
        with open(path, "wb") as f:
            f.write(m.SerializeToString())
        # onnxruntime vs torch, at the export shape and (dynamic) at another one
        sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        shapes = [(STATIC_BATCH, STATIC_SEQ, STATIC_PAST, 1)]
        if not static:
            shapes += [(b, s, p, 2 + i) for i, (b, s, p) in enumerate(DYN_SHAPES)]
        diffs = []
        for b, s, p, seed in shapes:
            a = make_inputs(name, b, s, p, seed)
            with torch.no_grad():
                ref = wrap(*a)
            ref = ref if isinstance(ref, tuple) else (ref,)
            got = sess.run(None, {k: v.numpy() for k, v in zip(wrap.inputs, a)})
            d = max(float(np.abs(r.numpy() - g).max()) for r, g in zip(ref, got))
            diffs.append(("b%d s%d%s" % (b, s, " p%d" % p if name.endswith("_past") else ""), d))
        results[fname] = (m, diffs, tracer)
        log("%-32s %8d bytes  max|ort-torch| %s" % (
            fname, os.path.getsize(path), ", ".join("%s: %.2e" % x for x in diffs)))
        for t in tracer:
            log("    tracer warning: " + t)
    return results


def op_inventory(m):
    c = collections.Counter()
    for n in m.graph.node:
        c[(n.domain or "ai.onnx") + "::" + n.op_type] += 1
    return c


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=DEFAULT_OUT)
    ap.add_argument("--only", nargs="*", choices=list(MODELS))
    ap.add_argument("--seed", type=int, default=0, help="weights seed (the committed files: 0)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    torch.set_num_threads(2)
    print("torch %s, transformers %s, onnx %s, onnxruntime %s, opset %d" % (
        torch.__version__, transformers.__version__, onnx.__version__, ort.__version__, OPSET))
    bad = 0
    inventory = collections.OrderedDict()
    for name in a.only or MODELS:
        try:
            for fname, (m, diffs, _) in export(name, a.out, print, a.seed).items():
                inventory[fname] = op_inventory(m)
                if any(d > 1e-3 for _, d in diffs):
                    print("MISMATCH: %s" % fname)
                    bad += 1
        except Exception as e:  # report and continue with the others
            import traceback
            traceback.print_exc()
            print("FAILED: %s: %s" % (name, e))
            bad += 1
    if not a.only:
        union = collections.Counter()
        lines = ["# Op types per model (domain::op_type count), written by scripts/export_models.py", ""]
        for fname, c in inventory.items():
            union.update(c)
            lines.append("%s (%d nodes)" % (fname, sum(c.values())))
            lines += ["  %-36s %d" % (k, v) for k, v in sorted(c.items())]
            lines.append("")
        lines.append("union over all models (%d op types)" % len(union))
        lines += ["  %s" % k for k in sorted(union)]
        with open(os.path.join(a.out, "OPS.txt"), "w") as f:
            f.write("\n".join(lines) + "\n")
        print("\n".join(lines[-len(union) - 1:]))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
