#!/usr/bin/env python3
"""Builds the onnxruntime-genai model-builder corpus (issue 16) into build/genai-corpus/.

Most ready-made ONNX LLMs are written by onnxruntime-genai's model builder.
This script makes tiny randomly initialised (seed 0) models from transformers'
own config and model classes, saves each as a Hugging Face folder (weights,
config and a tiny local word-level tokenizer: the builder copies a tokenizer
and there is no hub access) and converts it with

  python -m onnxruntime_genai.models.builder -i HF_DIR -o OUT/ARCH_PREC -p PREC -e cpu

Config: hidden 64, 2 layers, 4 query heads, 2 KV heads (Gemma: 1, MQA), head
dim 16, intermediate 128, vocab 256, max positions 256; every 1-D parameter
(norm weights, biases) is drawn as N(init, 0.1) so that no norm is all ones
(Gemma's all zeros) and no bias is zero. Phi-3 has intermediate 96 and Gemma
initializer_range 0.4 (see build_phi3, build_gemma); mistral_swa (sliding
window 8, only with --arch) exercises GroupQueryAttention's local_window_size.

OUT/ARCH_PREC/ holds what the builder writes (model.onnx, model.onnx.data,
genai_config.json, tokenizer.json, tokenizer_config.json) and greedy.json:

  prompt_ids, max_new_tokens, tokens   plain onnxruntime (CPU, ORT_DISABLE_ALL,
                                       1 thread), greedy with the past/present
                                       KV loop: prefill the 5-token prompt with
                                       0-length past, then one token per step;
                                       attention_mask all ones over past + new
  full_recompute_equal                 the same tokens by full recompute
  min_margin                           smallest (top1 - top2) / max|logit|
  torch_tokens                         transformers' greedy on the source model
  genai_tokens                         onnxruntime-genai's own Generator
  tokens_accuracy_level_1              (int4*) onnxruntime's tokens with every
                                       MatMulNBits at accuracy_level 1 (float
                                       activations; the builder writes 4 for
                                       the CPU EP: activations quantized to int8)

The builder of onnxruntime-genai 0.11.4 (the newest that takes onnxruntime
1.23) writes null search options (do_sample, temperature, top_k, top_p) into
genai_config.json with transformers 5, which onnxruntime-genai itself refuses
to load: they are replaced by the builder's documented defaults.

and ref/CASE/ (inputs/*.npy, outputs/*.npy, ref.json: examples/hf/ref's
format) with onnxruntime's outputs on the model as written (int4*: the
builder's MatMulNBits accuracy_level 4, int8 activations, which xfmr
computes the same way; ref.json gives the distance to accuracy_level 1) for
the forward numerics check of
scripts/check-genai-corpus.py:

  past     batch 1, past 3 (a sliding window W: W) + 4 new tokens, mask all
           ones (onnxruntime's GroupQueryAttention refuses batch > 1 with a
           past and more than one new token)
  decode   batch 2, past 6 (a window W: W + 3) + 1 new token, mask all ones
  prompt   batch 2, 5 tokens, 0-length past, row 1 right-padded by 2

The pasts are the model's own presents after prefilling their tokens.

OUT/LAYER.txt lists, for llama_fp32, llama_int4 (and llama_int4zp), the nodes that compute
seqlens_k / total_sequence_length from attention_mask and every node of
decoder layer 0 (op type, name, inputs, outputs, attributes).

Usage (needs the venv with scripts/requirements-models.txt):
  .venv/bin/python scripts/export_genai_corpus.py [--out DIR]
      [--arch llama,qwen2,phi3,mistral,gemma] [--precision fp32,int4]
--arch also takes mistral_swa, --precision also int4zp (uint4 with zero points).
  .venv/bin/python scripts/export_genai_corpus.py --examples
writes the committed corpus examples/genai/ (every architecture, mistral_swa
too, fp32 and int4, README.md; no LAYER.txt): a rerun writes identical bytes.
"""

import argparse
import collections
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from onnx import helper, numpy_helper  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from xfmr_refs import reference_session, sanitize, to_json  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUT = os.path.join(ROOT, "build", "genai-corpus")
EXAMPLES_OUT = os.path.join(ROOT, "examples", "genai")

HIDDEN, LAYERS, HEADS, KV_HEADS, HEAD_DIM, INTER, VOCAB, MAXPOS = 64, 2, 4, 2, 16, 128, 256, 256
PROMPT_IDS = [1, 17, 42, 99, 200]
NEW_TOKENS = 16
SEED = 0
PRECISIONS = ("fp32", "int4")
# Extra precision, only with --precision: int4 with zero points (uint4).
BUILDER_PRECISION = {"fp32": ["-p", "fp32"], "int4": ["-p", "int4"],
                     "int4zp": ["-p", "int4", "--extra_options", "int4_is_symmetric=false"]}


# --------------------------------------------------------------------------
# Architectures


def _common(**kw):
    d = dict(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=INTER,
             num_hidden_layers=LAYERS, num_attention_heads=HEADS, num_key_value_heads=KV_HEADS,
             head_dim=HEAD_DIM, max_position_embeddings=MAXPOS, pad_token_id=0, bos_token_id=1,
             eos_token_id=2, use_cache=True)
    d.update(kw)
    return d


def build_llama():
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(**_common()))


def build_qwen2():  # q/k/v projections with bias
    return transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**_common()))


def build_phi3():  # fused qkv_proj and gate_up_proj
    # intermediate 96: with 128, gate_up_proj has 256 = vocab outputs and the
    # builder (which takes any Linear with vocab outputs for the LM head) wires
    # the LM head to layer 0's MLP input.
    d = _common(intermediate_size=96)
    d.pop("head_dim")  # hidden / heads = 16
    # original == max positions: the builder's Phi3MiniModel (no LongRoPE)
    return transformers.Phi3ForCausalLM(transformers.Phi3Config(
        original_max_position_embeddings=MAXPOS, **d))


def build_mistral():  # MistralConfig's default sliding_window (4096 > context)
    return transformers.MistralForCausalLM(transformers.MistralConfig(**_common()))


def build_mistral_swa():  # sliding window shorter than prompt + new tokens
    return transformers.MistralForCausalLM(transformers.MistralConfig(**_common(sliding_window=8)))


def build_gemma():  # MQA, sqrt(hidden)-scaled embeddings, (1 + w) RMSNorm, GeLU-tanh, tied
    # initializer_range 0.4: with the default 0.02 the sqrt(hidden)-scaled tied
    # embedding dominates and greedy repeats the last prompt token forever.
    return transformers.GemmaForCausalLM(transformers.GemmaConfig(
        **_common(num_key_value_heads=1, initializer_range=0.4)))


ARCHS = collections.OrderedDict([
    ("llama", build_llama),
    ("qwen2", build_qwen2),
    ("phi3", build_phi3),
    ("mistral", build_mistral),
    ("gemma", build_gemma),
    ("mistral_swa", build_mistral_swa),  # extra, only with --arch
])
DEFAULT_ARCHS = ("llama", "qwen2", "phi3", "mistral", "gemma")


def randomize_vectors(model, seed):
    """Draws every 1-D parameter (norm weights, biases) around its initial value."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 1:
                p.add_(torch.randn(p.shape, generator=g) * 0.1)


def save_tokenizer(hf_dir):
    """A 256-entry word-level tokenizer ("<pad>" 0, "<s>" 1, "</s>" 2, "<unk>" 3,
    "t4".."t255"), built locally: the builder copies the model's tokenizer."""
    import tokenizers
    vocab = {"<pad>": 0, "<s>": 1, "</s>": 2, "<unk>": 3}
    vocab.update({"t%d" % i: i for i in range(4, VOCAB)})
    tk = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="<unk>"))
    tk.pre_tokenizer = tokenizers.pre_tokenizers.WhitespaceSplit()
    transformers.PreTrainedTokenizerFast(
        tokenizer_object=tk, bos_token="<s>", eos_token="</s>", pad_token="<pad>",
        unk_token="<unk>").save_pretrained(hf_dir)


def make_hf_dir(arch, hf_dir):
    torch.manual_seed(SEED)
    model = ARCHS[arch]().eval()
    randomize_vectors(model, SEED)
    model.save_pretrained(hf_dir)
    save_tokenizer(hf_dir)
    return model


# --------------------------------------------------------------------------
# Builder


GENAI_SEARCH_DEFAULTS = {"do_sample": False, "temperature": 1.0, "top_k": 50, "top_p": 1.0}


def run_builder(hf_dir, out_dir, prec, cache_dir, log_path):
    cmd = ([sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", hf_dir, "-o", out_dir]
           + BUILDER_PRECISION[prec] + ["-e", "cpu", "-c", cache_dir])
    with open(log_path, "w") as logf:
        r = subprocess.run(cmd, stdout=logf, stderr=subprocess.STDOUT, cwd=cache_dir,
                           env=dict(os.environ, PYTHONHASHSEED="0"))
    if r.returncode != 0:
        with open(log_path) as f:
            tail = f.read().strip().splitlines()[-5:]
        raise RuntimeError("builder exited %d: %s" % (r.returncode, " | ".join(tail)))
    cfg_path = os.path.join(out_dir, "genai_config.json")
    with open(cfg_path) as f:
        cfg = json.load(f)
    patched = [k for k, v in GENAI_SEARCH_DEFAULTS.items() if cfg["search"].get(k, v) is None]
    for k in patched:
        cfg["search"][k] = GENAI_SEARCH_DEFAULTS[k]
    if patched:
        with open(cfg_path, "w") as f:
            json.dump(cfg, f, indent=4)
    return cmd, patched


# --------------------------------------------------------------------------
# References


def empty_past(sess):
    """past_key_values.* inputs with a 0-length past, shaped from the graph.

    The builder of onnxruntime-genai >= 0.12 writes the head size as the
    symbolic dimension kv_cache_dim; every architecture here has HEAD_DIM."""
    past = {}
    for i in sess.get_inputs():
        if i.name.startswith("past_key_values."):
            _, h, _, d = i.shape
            d = d if isinstance(d, int) else HEAD_DIM
            past[i.name] = np.zeros((1, h, 0, d), np.float32)
    return past


def feed_extra(sess, feed, past_len, n):
    names = {i.name for i in sess.get_inputs()}
    if "position_ids" in names:
        feed["position_ids"] = np.arange(past_len, past_len + n, dtype=np.int64)[None]
    return feed


def greedy_kv(sess, prompt, steps):
    """Prefill then one token per step, past <- present. Returns (tokens, margin)."""
    out_names = [o.name for o in sess.get_outputs()]
    past = empty_past(sess)
    toks, margin, past_len = [], float("inf"), 0
    new = list(prompt)
    for _ in range(steps):
        feed = {"input_ids": np.array([new], np.int64),
                "attention_mask": np.ones((1, past_len + len(new)), np.int64)}
        feed.update(past)
        feed = feed_extra(sess, feed, past_len, len(new))
        res = dict(zip(out_names, sess.run(None, feed)))
        logits = res["logits"][0, -1]
        top = np.sort(logits)[-2:]
        margin = min(margin, float((top[1] - top[0]) / np.max(np.abs(logits))))
        toks.append(int(np.argmax(logits)))
        past_len += len(new)
        past = {k.replace("present.", "past_key_values."): v for k, v in res.items()
                if k.startswith("present.")}
        new = [toks[-1]]
    return toks, margin


def greedy_full(sess, prompt, steps):
    out_names = [o.name for o in sess.get_outputs()]
    ids, toks = list(prompt), []
    for _ in range(steps):
        feed = {"input_ids": np.array([ids], np.int64),
                "attention_mask": np.ones((1, len(ids)), np.int64)}
        feed.update(empty_past(sess))
        feed = feed_extra(sess, feed, 0, len(ids))
        logits = dict(zip(out_names, sess.run(None, feed)))["logits"][0, -1]
        toks.append(int(np.argmax(logits)))
        ids.append(toks[-1])
    return toks


def greedy_torch(model, prompt, steps):
    with torch.no_grad():
        out = model.generate(torch.tensor([prompt]), attention_mask=torch.ones(1, len(prompt),
                             dtype=torch.long), max_new_tokens=steps, min_new_tokens=steps,
                             do_sample=False, eos_token_id=None, pad_token_id=0)
    return [int(t) for t in out[0, len(prompt):]]


def greedy_genai(model_dir, prompt, steps):
    import onnxruntime_genai as og
    m = og.Model(model_dir)
    p = og.GeneratorParams(m)
    p.set_search_options(max_length=len(prompt) + steps, min_length=len(prompt) + steps,
                         do_sample=False)
    g = og.Generator(m, p)
    g.append_tokens(np.array([prompt], np.int32))
    while not g.is_done():
        g.generate_next_token()
    return [int(t) for t in g.get_sequence(0)[len(prompt):]]


def with_accuracy_level(model_path, level):
    m = onnx.load(model_path)  # external data loaded into the proto
    for n in m.graph.node:
        if n.op_type == "MatMulNBits":
            for a in n.attribute:
                if a.name == "accuracy_level":
                    a.i = level
    return m.SerializeToString()


# --------------------------------------------------------------------------
# Forward references (OUT/ARCH_PREC/ref/CASE/, the format of examples/hf/ref)

REF_NEW = 4                      # "past": new tokens after the past
REF_PAST = 3                     # past length (a sliding window W < context: W)
REF_PROMPT, REF_PAD = 5, 2       # "prompt": 5 tokens, row 1 right-padded by 2
REF_PAD_ID = 0


def local_window(model_path):
    m = onnx.load(model_path, load_external_data=False)
    for n in m.graph.node:
        if n.op_type == "GroupQueryAttention":
            for a in n.attribute:
                if a.name == "local_window_size" and a.i > 0:
                    return a.i
    return 0


def ref_cases(sess, window):
    """{case: (feed, description)}: the inputs of the reference cases.

    past    batch 1, past REF_PAST (W with a sliding window W, so that the
            last new tokens lose keys) + REF_NEW new tokens, attention_mask
            all ones (onnxruntime's GroupQueryAttention refuses batch > 1
            with a past and more than one new token)
    decode  batch 2, past P + REF_NEW - 1 (P: past's past length) + 1 new
            token, attention_mask all ones (rows differ): past's total length
    prompt  batch 2, REF_PROMPT tokens, 0-length past, row 1 right-padded by
            REF_PAD (pad id 0, attention_mask 0): the first prompt of a batch
    The pasts are the model's own presents after prefilling their tokens.
    """
    rng = np.random.RandomState(SEED)
    # A window shorter than the context (mistral's default 4096 is not).
    past_len = window if REF_PAST < window < MAXPOS - REF_NEW else REF_PAST
    names = [o.name for o in sess.get_outputs()]

    def with_past(ids, p, new):  # prefill ids[:, :p], then ids[:, p:p + new]
        b = ids.shape[0]
        feed = {"input_ids": ids[:, :p], "attention_mask": np.ones((b, p), np.int64)}
        feed.update({k: np.repeat(v, b, axis=0) for k, v in empty_past(sess).items()})
        res = dict(zip(names, sess.run(None, feed)))
        out = {"input_ids": np.ascontiguousarray(ids[:, p:p + new]),
               "attention_mask": np.ones((b, p + new), np.int64)}
        out.update({k.replace("present.", "past_key_values."): v for k, v in res.items()
                    if k.startswith("present.")})
        return out

    ids = rng.randint(4, VOCAB, size=(2, past_len + REF_NEW)).astype(np.int64)
    ids[:, 0] = 1  # <s>
    pids = rng.randint(4, VOCAB, size=(2, REF_PROMPT)).astype(np.int64)
    pids[:, 0] = 1
    mask = np.ones((2, REF_PROMPT), np.int64)
    pids[1, REF_PROMPT - REF_PAD:] = REF_PAD_ID
    mask[1, REF_PROMPT - REF_PAD:] = 0
    prompt = {"input_ids": pids, "attention_mask": mask}
    prompt.update({k: np.repeat(v, 2, axis=0) for k, v in empty_past(sess).items()})
    return collections.OrderedDict([
        ("past", (with_past(ids[:1], past_len, REF_NEW),
                  "batch 1, past %d (the model's own present) + %d new tokens, "
                  "attention_mask all ones" % (past_len, REF_NEW))),
        ("decode", (with_past(ids, past_len + REF_NEW - 1, 1),
                    "batch 2, past %d (the model's own present) + 1 new token, attention_mask "
                    "all ones" % (past_len + REF_NEW - 1))),
        ("prompt", (prompt, "batch 2, %d tokens, 0-length past, row 1 right-padded by %d "
                    "(input id %d, attention_mask 0)" % (REF_PROMPT, REF_PAD, REF_PAD_ID)))])


def kept(name, x, mask):
    """The positions of output `x` that attention_mask keeps (the checker's
    comparison): logits rows, present.* past + new positions."""
    m = mask.astype(bool)
    if name.startswith("present."):
        return np.broadcast_to(m[:, None, :, None], x.shape)
    return np.broadcast_to(m[:, -x.shape[1]:, None], x.shape)


def write_refs(out_dir, model_path, prec):
    """Writes out_dir/ref/CASE/{inputs,outputs}/*.npy and ref.json (tensors
    with their role, like examples/hf/ref; scripts/check-genai-corpus.py).
    int4 models: the reference is the model as written (the builder's
    MatMulNBits accuracy_level 4: activations quantized to int8 per block,
    which xfmr computes the same way); ref.json gives how far accuracy_level
    1 (float activations) is from it at the kept positions."""
    window = local_window(model_path)
    quant = prec != "fp32"
    sess = reference_session(model_path)
    names = [o.name for o in sess.get_outputs()]
    for case, (feed, desc) in ref_cases(sess, window).items():
        ref_dir = os.path.join(out_dir, "ref", case)
        for kind in ("inputs", "outputs"):
            os.makedirs(os.path.join(ref_dir, kind))
        # Positions the mask drops are stored as 0: onnxruntime leaves padded
        # query rows unspecified (they vary from run to run).
        got = [np.where(kept(n, v, feed["attention_mask"]), v, np.float32(0)).astype(v.dtype)
               for n, v in zip(names, sess.run(None, feed))]
        tensors = []
        for role, items in (("input", list(feed.items())), ("output", list(zip(names, got)))):
            for n, v in items:
                f = "%ss/%s.npy" % (role, sanitize(n))
                np.save(os.path.join(ref_dir, f), v)
                tensors.append({"name": n, "file": f, "dtype": str(v.dtype),
                                "shape": list(v.shape), "role": role})
        meta = {"model": "model.onnx", "sha256": sha256(model_path), "case": case,
                "description": desc, "onnxruntime": ort.__version__,
                "reference": "onnxruntime CPU, ORT_DISABLE_ALL, 1 thread"}
        if quant:
            meta["reference"] += ", MatMulNBits at the file's accuracy_level (4)"
            level1 = reference_session(with_accuracy_level(model_path, 1)).run(None, feed)
            meta["max_rel_diff_accuracy_level_1"] = {
                n: round(float(np.max(np.abs(a - b)[k]) / np.max(np.abs(b)[k])), 6)
                for n, a, b in zip(names, level1, got)
                for k in [kept(n, b, feed["attention_mask"])]}
        meta["tensors"] = tensors
        with open(os.path.join(ref_dir, "ref.json"), "w") as f:
            f.write(to_json(meta))


# --------------------------------------------------------------------------
# Summaries


def op_types(m):
    return sorted({"%s:%s" % (n.domain or "ai.onnx", n.op_type) for n in m.graph.node})


def io_desc(vi):
    t = vi.type.tensor_type
    dims = ",".join(d.dim_param or str(d.dim_value) for d in t.shape.dim)
    return "%s:%s[%s]" % (vi.name, helper.tensor_dtype_to_np_dtype(t.elem_type).name, dims)


def fmt_attr(a):
    v = helper.get_attribute_value(a)
    if isinstance(v, onnx.TensorProto):
        arr = numpy_helper.to_array(v)
        return "%s=tensor(%s%s)" % (a.name, arr.dtype, list(arr.shape)) + (
            " %s" % arr.tolist() if arr.size <= 8 else "")
    if isinstance(v, bytes):
        v = v.decode()
    return "%s=%r" % (a.name, v)


def node_line(n, inits):
    def name(x):
        if x in inits:
            t = inits[x]
            return "%s<init %s%s>" % (x, helper.tensor_dtype_to_np_dtype(t.data_type).name,
                                      list(t.dims))
        return x or "''"
    return "%s:%s  %s\n    inputs:  %s\n    outputs: %s\n    attrs:   %s" % (
        n.domain or "ai.onnx", n.op_type, n.name, ", ".join(name(x) for x in n.input),
        ", ".join(o or "''" for o in n.output), ", ".join(fmt_attr(a) for a in n.attribute) or "-")


def layer_listing(model_path, title):
    m = onnx.load(model_path, load_external_data=False)
    inits = {t.name: t for t in m.graph.initializer}
    producers = {o: n for n in m.graph.node for o in n.output}
    gqa = [n for n in m.graph.node if n.op_type == "GroupQueryAttention"][0]
    # Everything seqlens_k (input 5) and total_sequence_length (input 6) depend on.
    mask_nodes, stack, seen = [], [gqa.input[5], gqa.input[6]], set()
    while stack:
        x = stack.pop()
        n = producers.get(x)
        if n is None or n.name in seen:
            continue
        seen.add(n.name)
        mask_nodes.append(n)
        stack.extend(n.input)
    order = {n.name: i for i, n in enumerate(m.graph.node)}
    mask_nodes.sort(key=lambda n: order[n.name])
    layer0 = [n for n in m.graph.node if n.name.startswith("/model/layers.0/")]
    lines = ["==== %s (%s)" % (title, os.path.relpath(model_path, ROOT)),
             "inputs:  " + ", ".join(io_desc(i) for i in m.graph.input),
             "outputs: " + ", ".join(io_desc(o) for o in m.graph.output),
             "opsets:  " + ", ".join("%s:%d" % (o.domain or "ai.onnx", o.version)
                                      for o in m.opset_import), "",
             "-- seqlens_k / total_sequence_length from attention_mask"]
    lines += [node_line(n, inits) for n in mask_nodes]
    vis = {v.name: v for v in m.graph.value_info}
    for n in m.graph.node:  # the builder declares some Constants with another shape
        if n.op_type == "Constant" and n.output[0] in vis:
            dims = [d.dim_param or d.dim_value for d in vis[n.output[0]].type.tensor_type.shape.dim]
            if dims != list(n.attribute[0].t.dims):
                lines.append("value_info %s: shape %s, but the Constant's value has shape %s" % (
                    n.output[0], dims, list(n.attribute[0].t.dims)))
    for x in (gqa.input[7], gqa.input[8]):
        if x in inits:
            arr = numpy_helper.to_array(inits[x], base_dir=os.path.dirname(model_path))
            lines.append("initializer %s %s %s, row 1 first values %s" % (
                x, arr.dtype, list(arr.shape), np.round(arr[1, :4], 6).tolist()))
    lines += ["", "-- decoder layer 0 (every node)"]
    lines += [node_line(n, inits) for n in layer0]
    lines += ["", "-- after the last layer"]
    lines += [node_line(n, inits) for n in m.graph.node
              if n.name.startswith("/model/layers.%d/" % LAYERS) or n.name.startswith("/lm_head")]
    return "\n".join(lines) + "\n"


def tree_size(path):
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


# --------------------------------------------------------------------------


def run_one(arch, prec, out_root, tmp_root, torch_model, hf_dir):
    name = "%s_%s" % (arch, prec)
    out_dir = os.path.join(out_root, name)
    if os.path.isdir(out_dir):
        shutil.rmtree(out_dir)
    cache_dir = os.path.join(tmp_root, "cache_" + name)
    os.makedirs(cache_dir)
    t0 = time.time()
    cmd, patched = run_builder(hf_dir, out_dir, prec, cache_dir,
                               os.path.join(tmp_root, name + ".log"))
    t_build = time.time() - t0
    model_path = os.path.join(out_dir, "model.onnx")
    sess = reference_session(model_path)
    toks, margin = greedy_kv(sess, PROMPT_IDS, NEW_TOKENS)
    full = greedy_full(sess, PROMPT_IDS, NEW_TOKENS)
    ref = {"prompt_ids": PROMPT_IDS, "max_new_tokens": NEW_TOKENS, "tokens": toks,
           "full_recompute_equal": full == toks, "min_margin": margin}
    if full != toks:
        ref["full_recompute_tokens"] = full
    ref["torch_tokens"] = greedy_torch(torch_model, PROMPT_IDS, NEW_TOKENS)
    try:
        ref["genai_tokens"] = greedy_genai(out_dir, PROMPT_IDS, NEW_TOKENS)
    except Exception as e:  # noqa: BLE001
        ref["genai_tokens"] = "error: %s" % e
    if prec != "fp32":
        ref["tokens_accuracy_level_1"] = greedy_kv(
            reference_session(with_accuracy_level(model_path, 1)), PROMPT_IDS, NEW_TOKENS)[0]
    import onnxruntime_genai
    ref["versions"] = {"onnxruntime_genai": onnxruntime_genai.__version__,
                       "onnxruntime": ort.__version__, "transformers": transformers.__version__,
                       "torch": torch.__version__.split("+")[0]}
    ref["builder"] = "python -m onnxruntime_genai.models.builder -i HF_DIR -o %s %s -e cpu" % (
        name, " ".join(BUILDER_PRECISION[prec]))
    ref["genai_config_nulls_replaced"] = patched
    ref["model_sha256"] = sha256(model_path)
    t_total = time.time() - t0
    with open(os.path.join(out_dir, "greedy.json"), "w") as f:
        json.dump(ref, f, indent=1)
        f.write("\n")
    write_refs(out_dir, model_path, prec)

    m = onnx.load(model_path, load_external_data=False)
    files = sorted(x for x in os.listdir(out_dir) if os.path.isfile(os.path.join(out_dir, x)))
    size = sum(os.path.getsize(os.path.join(out_dir, x)) for x in files)
    files.append("ref/")
    eq = lambda k: ("==" if ref.get(k) == toks else "!=")  # noqa: E731
    line = ("%s: build %.1fs total %.1fs | %d bytes (%s) | ops %s | in %s | out %s | "
            "greedy kv%sfull torch%s genai%s%s margin %.1e" % (
                name, t_build, t_total, size,
                ", ".join("%s %d" % (x, tree_size(os.path.join(out_dir, x))) for x in files),
                " ".join(op_types(m)), " ".join(io_desc(i) for i in m.graph.input),
                " ".join(io_desc(o) for o in m.graph.output),
                "==" if ref["full_recompute_equal"] else "!=", eq("torch_tokens"),
                eq("genai_tokens"),
                (" acc1" + eq("tokens_accuracy_level_1")) if prec != "fp32" else "", margin))
    return line


def write_readme(out_root, names):
    rows, total = [], 0
    for n in names:
        d = os.path.join(out_root, n)
        if not os.path.isdir(d):
            continue
        sizes = {f: tree_size(os.path.join(d, f)) for f in sorted(os.listdir(d))}
        total += sum(sizes.values())
        rows.append("| `%s` | %d | %d | %d | %d |" % (
            n, sizes.get("model.onnx", 0), sizes.get("model.onnx.data", 0), sizes.get("ref", 0),
            sum(sizes.values())))
    text = """# onnxruntime-genai model-builder corpus (issue 16)

Written by `scripts/export_genai_corpus.py --examples` (byte-identical on
rerun with the pinned versions); checked by `scripts/check-genai-corpus.py`
(lit: `test/Integration/CPU/genai-corpus.test`). See docs/onnxruntime-genai.md.

Each `ARCH_PREC/` is what `python -m onnxruntime_genai.models.builder -i HF_DIR
-o ARCH_PREC -p PREC -e cpu` writes for a tiny random model (model.onnx,
model.onnx.data, genai_config.json, tokenizer.json, tokenizer_config.json),
plus `greedy.json` (onnxruntime's 16 greedy tokens with the KV cache) and
`ref/{past,decode,prompt}/` (inputs, onnxruntime's outputs, ref.json).

| model | model.onnx | model.onnx.data | ref/ | all bytes |
|---|---|---|---|---|
%s

Total: %d bytes.
""" % ("\n".join(rows), total)
    with open(os.path.join(out_root, "README.md"), "w") as f:
        f.write(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=DEFAULT_OUT, help="output folder (default %(default)s)")
    ap.add_argument("--arch", default=",".join(DEFAULT_ARCHS),
                    help="comma-separated subset of %s (default %%(default)s)" % ",".join(ARCHS))
    ap.add_argument("--precision", default=",".join(PRECISIONS),
                    help="comma-separated subset of fp32,int4,int4zp (int4zp: int4 with zero "
                    "points, builder option int4_is_symmetric=false) (default %(default)s)")
    ap.add_argument("--keep-hf", action="store_true", help="keep the HF folders in OUT/hf/ARCH")
    ap.add_argument("--examples", action="store_true",
                    help="the committed corpus: --out %s, every architecture (mistral_swa "
                    "too), fp32 and int4, README.md, no LAYER.txt" % os.path.relpath(EXAMPLES_OUT, ROOT))
    a = ap.parse_args()
    if a.examples:
        a.out, a.arch, a.precision = EXAMPLES_OUT, ",".join(ARCHS), ",".join(PRECISIONS)
    archs = [x for x in a.arch.split(",") if x]
    precs = [x for x in a.precision.split(",") if x]
    bad = [x for x in archs if x not in ARCHS] + [x for x in precs if x not in BUILDER_PRECISION]
    if bad:
        ap.error("unknown: %s" % ", ".join(bad))
    out_root = os.path.abspath(a.out)
    os.makedirs(out_root, exist_ok=True)
    torch.set_num_threads(4)
    import onnxruntime_genai
    print("onnxruntime-genai %s, onnxruntime %s, transformers %s, torch %s, onnx %s" % (
        onnxruntime_genai.__version__, ort.__version__, transformers.__version__,
        torch.__version__, onnx.__version__), flush=True)

    failed = []
    with tempfile.TemporaryDirectory(prefix="genai-corpus-") as tmp:
        for arch in archs:
            hf_dir = (os.path.join(out_root, "hf", arch) if a.keep_hf
                      else os.path.join(tmp, "hf_" + arch))
            if os.path.isdir(hf_dir):
                shutil.rmtree(hf_dir)
            try:
                model = make_hf_dir(arch, hf_dir)
            except Exception as e:  # noqa: BLE001
                failed.append((arch, "%s: %s" % (type(e).__name__, e)))
                continue
            for prec in precs:
                try:
                    print(run_one(arch, prec, out_root, tmp, model, hf_dir), flush=True)
                except Exception as e:  # noqa: BLE001
                    failed.append(("%s_%s" % (arch, prec), "%s: %s" % (type(e).__name__, e)))
                    print("FAILED %s_%s: %s" % (arch, prec, e), flush=True)
    if a.examples:
        write_readme(out_root, ["%s_%s" % (x, p) for x in archs for p in precs])
    elif "llama" in archs:  # every llama_* in OUT, not only this run's precisions
        text = []
        for prec in BUILDER_PRECISION:
            p = os.path.join(out_root, "llama_" + prec, "model.onnx")
            if os.path.exists(p):
                text.append(layer_listing(p, "llama_" + prec))
        if text:
            with open(os.path.join(out_root, "LAYER.txt"), "w") as f:
                f.write("\n\n".join(text))
    print("%d failed" % len(failed))
    for s, r in failed:
        print("  FAILED %s: %s" % (s, r))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
