#!/usr/bin/env python3
"""Writes two small transformer models into test/Importer/Inputs/ for
test/Importer/transformer-ops.test. Deterministic (fixed numpy seed; the
.onnx bytes are the same on every run).

genai_block.onnx -- one decoder layer as onnxruntime-genai's model builder
  emits it for an int4 CPU model (opset 21 + com.microsoft 1), with inputs
  taken directly instead of derived from input_ids/attention_mask:
    inputs_embeds f32 [batch_size, sequence_length, 64]
    position_ids i64 [batch_size, sequence_length]
    seqlens_k i32 [batch_size]            (total length - 1, as the builder's
    total_sequence_length i32 []           attention-mask subgraph computes)
    past_key_values.0.{key,value} f32 [batch_size, 2, past_sequence_length, 16]
  SimplifiedLayerNormalization (default domain; an ORT contrib op)
  -> MatMulNBits q (N=64) / k, v (N=32: kv_num_heads 2 x head_size 16)
     (bits=4, block_size=32, K=64; B uint8 [N, K/32, 16], scales f32 [N*K/32])
  -> com.microsoft RotaryEmbedding on q and k (position_ids, cos/sin cache)
  -> com.microsoft GroupQueryAttention (num_heads=4, kv_num_heads=2; past in,
     present out) -> MatMulNBits o_proj (K=64, N=64)
  -> com.microsoft SkipSimplifiedLayerNormalization (residual via output 3)
  -> MLP: MatMulNBits gate/up (K=64, N=128), SiLU (Sigmoid, Mul), MatMulNBits
     down (K=128, N=64)
  -> SkipSimplifiedLayerNormalization (final norm) -> hidden_states
  outputs: hidden_states f32 [batch_size, sequence_length, 64],
           present.0.{key,value} f32 [batch_size, 2, total_sequence_length, 16]
  Like the builder, every intermediate carries a value_info with symbolic dims.

onnx23_ops.onnx -- the ONNX-standard counterparts, opset 23:
  RMSNormalization -> MatMul q/k/v -> Reshape/Transpose to 4-D
  -> RotaryEmbedding (opset 23, with position_ids) on q [B,4,S,16] and
     k [B,2,S,16] -> Attention (4-D, GQA 4 q heads / 2 kv heads, is_causal=1)
  -> Transpose/Reshape -> MatMul o -> Add residual -> Gelu (approximate=tanh)

Both models are run in onnxruntime (CPUExecutionProvider; onnxruntime 1.23
has CPU kernels for all of the ops above), and onnx23_ops.onnx's result is
compared with onnx.reference's. Op inventories are printed. The int4 packing is checked separately: a lone
MatMulNBits built with the same packing must match numpy's dequantized matmul.
onnx23_ops.onnx also passes onnx.checker (full_check); genai_block.onnx can't
(the checker has no schemas for com.microsoft or SimplifiedLayerNormalization).

Usage: .venv/bin/python scripts/gen_transformer_op_models.py [--out-dir DIR] [--no-run]
"""

import argparse
import collections
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUT = os.path.join(ROOT, "test", "Importer", "Inputs")

HIDDEN = 64
NUM_HEADS = 4
KV_HEADS = 2
HEAD = HIDDEN // NUM_HEADS  # 16
KV_HIDDEN = KV_HEADS * HEAD  # 32
INTER = 128
MAX_POS = 32
BLOCK = 32
EPS = 1e-6
F32 = TensorProto.FLOAT


# ---------------------------------------------------------------- int4 packing

def quantize_int4(w):
    """w: float [K, N] (y = x @ w). Returns (B uint8 [N, K/BLOCK, BLOCK/2],
    scales f32 [N * K/BLOCK], dequantized float [K, N]) for MatMulNBits with
    bits=4 and no zero_points (implicit zero point 8): symmetric per-block
    quantization along K. Element 2i of a block is the low nibble of byte i,
    element 2i+1 the high nibble."""
    k, n = w.shape
    assert k % BLOCK == 0
    blocks = k // BLOCK
    wt = w.T.reshape(n, blocks, BLOCK)  # [N, blocks, BLOCK]
    amax = np.abs(wt).max(axis=2, keepdims=True)
    scale = np.where(amax == 0, 1.0, amax / 7.0).astype(np.float32)
    q = np.clip(np.rint(wt / scale), -8, 7).astype(np.int32) + 8  # 0..15
    packed = (q[:, :, 0::2] | (q[:, :, 1::2] << 4)).astype(np.uint8)
    deq = ((q - 8).astype(np.float32) * scale).reshape(n, k).T
    return packed, scale.reshape(n * blocks), np.ascontiguousarray(deq)


def rope_caches():
    inv = 1.0 / (10000.0 ** (np.arange(0, HEAD, 2, dtype=np.float64) / HEAD))
    freqs = np.outer(np.arange(MAX_POS, dtype=np.float64), inv)  # [MAX_POS, HEAD/2]
    return np.cos(freqs).astype(np.float32), np.sin(freqs).astype(np.float32)


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def make_model(graph, opsets, ir_version=10):
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets],
                          producer_name="xfmr gen_transformer_op_models.py")
    m.ir_version = ir_version
    return m


# ------------------------------------------------------------ genai_block.onnx

def build_genai_block(rng):
    inits, nodes, infos = [], [], []
    bs, sl = "batch_size", "sequence_length"

    def init(name, arr):
        inits.append(numpy_helper.from_array(arr, name))
        return name

    def node(op, ins, outs, name, domain="", shapes=None, **attrs):
        nodes.append(helper.make_node(op, ins, outs, name=name, domain=domain, **attrs))
        for o, s in zip(outs, shapes or []):
            if o and s is not None:
                infos.append(vi(o, F32, s))
        return outs

    def matmul_nbits(x, path, k, n, accuracy_level=4):
        w = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
        b, s, _ = quantize_int4(w)
        pre = path.strip("/").replace("/", ".")
        bq = init(pre + ".MatMul.weight_Q4", b)
        sc = init(pre + ".MatMul.weight_scales", s)
        out = "/%s/MatMulNBits/output_0" % path.strip("/")
        node("MatMulNBits", [x, bq, sc], [out], "/%s/MatMulNBits" % path.strip("/"),
             domain="com.microsoft", shapes=[[bs, sl, n]],
             K=k, N=n, bits=4, block_size=BLOCK, accuracy_level=accuracy_level)
        return out

    def norm_weight(name, width):
        return init(name, (1.0 + 0.1 * rng.standard_normal(width)).astype(np.float32))

    cos, sin = rope_caches()
    init("cos_cache", cos)
    init("sin_cache", sin)

    # input_layernorm: the first layer's norm has no residual to add yet.
    ln1 = node("SimplifiedLayerNormalization",
               ["inputs_embeds", norm_weight("model.layers.0.input_layernorm.weight", HIDDEN)],
               ["/model/layers.0/input_layernorm/output_0"],
               "/model/layers.0/input_layernorm/SimplifiedLayerNorm",
               shapes=[[bs, sl, HIDDEN]], axis=-1, epsilon=EPS, stash_type=1)[0]

    q = matmul_nbits(ln1, "model/layers.0/attn/q_proj", HIDDEN, HIDDEN)
    k = matmul_nbits(ln1, "model/layers.0/attn/k_proj", HIDDEN, KV_HIDDEN)
    v = matmul_nbits(ln1, "model/layers.0/attn/v_proj", HIDDEN, KV_HIDDEN)

    def rotary(x, which, heads, width):
        return node("RotaryEmbedding", [x, "position_ids", "cos_cache", "sin_cache"],
                    ["/model/layers.0/attn/%s_rotary/output_0" % which],
                    "/model/layers.0/attn/%s_rotary/RotaryEmbedding" % which,
                    domain="com.microsoft", shapes=[[bs, sl, width]],
                    interleaved=0, num_heads=heads)[0]

    q = rotary(q, "q", NUM_HEADS, HIDDEN)
    k = rotary(k, "k", KV_HEADS, KV_HIDDEN)

    attn = node("GroupQueryAttention",
                [q, k, v, "past_key_values.0.key", "past_key_values.0.value",
                 "seqlens_k", "total_sequence_length"],
                ["/model/layers.0/attn/GroupQueryAttention/output_0",
                 "present.0.key", "present.0.value"],
                "/model/layers.0/attn/GroupQueryAttention", domain="com.microsoft",
                shapes=[[bs, sl, HIDDEN], None, None],
                num_heads=NUM_HEADS, kv_num_heads=KV_HEADS, do_rotary=0,
                local_window_size=-1, rotary_interleaved=0, scale=float(1.0 / np.sqrt(HEAD)),
                softcap=0.0)[0]
    o = matmul_nbits(attn, "model/layers.0/attn/o_proj", HIDDEN, HIDDEN)

    # post_attention_layernorm: normed output 0, residual sum output 3.
    ln2, _, _, resid = node(
        "SkipSimplifiedLayerNormalization",
        [o, "inputs_embeds", norm_weight("model.layers.0.post_attention_layernorm.weight", HIDDEN)],
        ["/model/layers.0/post_attention_layernorm/output_0", "", "",
         "/model/layers.0/post_attention_layernorm/output_3"],
        "/model/layers.0/post_attention_layernorm/SkipLayerNorm", domain="com.microsoft",
        shapes=[[bs, sl, HIDDEN], None, None, [bs, sl, HIDDEN]], epsilon=EPS)

    gate = matmul_nbits(ln2, "model/layers.0/mlp/gate_proj", HIDDEN, INTER)
    up = matmul_nbits(ln2, "model/layers.0/mlp/up_proj", HIDDEN, INTER)
    sig = node("Sigmoid", [gate], ["/model/layers.0/mlp/act_fn/Sigmoid/output_0"],
               "/model/layers.0/mlp/act_fn/Sigmoid", shapes=[[bs, sl, INTER]])[0]
    act = node("Mul", [gate, sig], ["/model/layers.0/mlp/act_fn/Mul/output_0"],
               "/model/layers.0/mlp/act_fn/Mul", shapes=[[bs, sl, INTER]])[0]
    prod = node("Mul", [act, up], ["/model/layers.0/mlp/Mul/output_0"],
                "/model/layers.0/mlp/Mul", shapes=[[bs, sl, INTER]])[0]
    down = matmul_nbits(prod, "model/layers.0/mlp/down_proj", INTER, HIDDEN)

    # The last layer's residual add is fused into the final norm.
    node("SkipSimplifiedLayerNormalization",
         [down, resid, norm_weight("model.norm.weight", HIDDEN)],
         ["hidden_states"], "/model/layers.1/final_norm_layernorm/SkipLayerNorm",
         domain="com.microsoft", epsilon=EPS)

    kv_past = [bs, KV_HEADS, "past_sequence_length", HEAD]
    kv_present = [bs, KV_HEADS, "total_sequence_length", HEAD]
    graph = helper.make_graph(
        nodes, "genai_block",
        [vi("inputs_embeds", F32, [bs, sl, HIDDEN]),
         vi("position_ids", TensorProto.INT64, [bs, sl]),
         vi("seqlens_k", TensorProto.INT32, [bs]),
         vi("total_sequence_length", TensorProto.INT32, []),
         vi("past_key_values.0.key", F32, kv_past),
         vi("past_key_values.0.value", F32, kv_past)],
        [vi("hidden_states", F32, [bs, sl, HIDDEN]),
         vi("present.0.key", F32, kv_present),
         vi("present.0.value", F32, kv_present)],
        inits, value_info=infos)
    return make_model(graph, [("", 21), ("com.microsoft", 1)])


# ------------------------------------------------------------ onnx23_ops.onnx

def build_onnx23(rng):
    inits, nodes = [], []
    bs, sl = "batch_size", "sequence_length"

    def init(name, arr):
        inits.append(numpy_helper.from_array(arr, name))
        return name

    def node(op, ins, outs, name, **attrs):
        nodes.append(helper.make_node(op, ins, outs, name=name, **attrs))
        return outs[0]

    def weight(name, k, n):
        return init(name, (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32))

    cos, sin = rope_caches()
    init("cos_cache", cos)
    init("sin_cache", sin)
    init("q_shape", np.array([0, 0, NUM_HEADS, HEAD], np.int64))
    init("kv_shape", np.array([0, 0, KV_HEADS, HEAD], np.int64))
    init("out_shape", np.array([0, 0, HIDDEN], np.int64))
    init("norm.weight", (1.0 + 0.1 * rng.standard_normal(HIDDEN)).astype(np.float32))

    x = node("RMSNormalization", ["hidden_states", "norm.weight"], ["norm"], "norm",
             axis=-1, epsilon=EPS, stash_type=1)
    heads = {}
    for p, width, shp in (("q", HIDDEN, "q_shape"), ("k", KV_HIDDEN, "kv_shape"),
                          ("v", KV_HIDDEN, "kv_shape")):
        mm = node("MatMul", [x, weight(p + "_proj.weight", HIDDEN, width)], [p + "_proj"],
                  p + "_proj")
        r = node("Reshape", [mm, shp], [p + "_bshd"], p + "_reshape")
        heads[p] = node("Transpose", [r], [p + "_bhsd"], p + "_transpose", perm=[0, 2, 1, 3])
    # 4-D [batch, heads, seq, head_size] input: num_heads comes from the shape.
    for p in ("q", "k"):
        heads[p] = node("RotaryEmbedding",
                        [heads[p], "cos_cache", "sin_cache", "position_ids"],
                        [p + "_rope"], p + "_rotary", interleaved=0)
    # 4-D Q/K/V: head counts come from dims 1 (4 query heads share 2 kv heads).
    y = node("Attention", [heads["q"], heads["k"], heads["v"]], ["attn"], "attention",
             is_causal=1)
    t = node("Transpose", [y], ["attn_bshd"], "attn_transpose", perm=[0, 2, 1, 3])
    r = node("Reshape", [t, "out_shape"], ["attn_flat"], "attn_reshape")
    o = node("MatMul", [r, weight("o_proj.weight", HIDDEN, HIDDEN)], ["o_proj"], "o_proj")
    s = node("Add", [o, "hidden_states"], ["residual"], "residual")
    node("Gelu", [s], ["output"], "gelu", approximate="tanh")

    graph = helper.make_graph(
        nodes, "onnx23_ops",
        [vi("hidden_states", F32, [bs, sl, HIDDEN]),
         vi("position_ids", TensorProto.INT64, [bs, sl])],
        [vi("output", F32, [bs, sl, HIDDEN])], inits)
    return make_model(graph, [("", 23)], ir_version=11)


# ------------------------------------------------------------------- checking

def inventory(model):
    c = collections.Counter((n.domain or "ai.onnx", n.op_type) for n in model.graph.node)
    return ["%s::%s x%d" % (d, op, k) for (d, op), k in sorted(c.items())]


def check_matmul_nbits_packing(rng):
    """A lone MatMulNBits (accuracy_level 0: float compute) with the packing
    above matches numpy's matmul with the dequantized weight."""
    import onnxruntime as ort
    k, n = 64, 48
    w = rng.standard_normal((k, n)).astype(np.float32)
    b, s, deq = quantize_int4(w)
    g = helper.make_graph(
        [helper.make_node("MatMulNBits", ["a", "b", "s"], ["y"], domain="com.microsoft",
                          K=k, N=n, bits=4, block_size=BLOCK)],
        "nbits", [vi("a", F32, [3, k])], [vi("y", F32, [3, n])],
        [numpy_helper.from_array(b, "b"), numpy_helper.from_array(s, "s")])
    m = make_model(g, [("", 21), ("com.microsoft", 1)])
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    a = rng.standard_normal((3, k)).astype(np.float32)
    got = sess.run(None, {"a": a})[0]
    err = np.abs(got - a @ deq).max()
    assert err < 1e-4, "MatMulNBits packing mismatch: max error %g" % err
    assert np.abs(deq - w).max() <= np.abs(w).max() / 7.0  # quantization is sane
    print("MatMulNBits int4 packing: ORT matches numpy dequant matmul (max err %.2e)" % err)


def run_ort(path, feeds):
    import onnxruntime as ort
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    outs = sess.run(None, feeds)
    for o, v in zip(sess.get_outputs(), outs):
        assert np.isfinite(v).all(), o.name
        print("  ORT %s: %s %s" % (o.name, v.dtype, list(v.shape)))
    return outs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out-dir", default=DEFAULT_OUT)
    ap.add_argument("--no-run", action="store_true", help="skip the onnxruntime runs")
    a = ap.parse_args()
    rng = np.random.default_rng(20250101)
    models = {"genai_block.onnx": build_genai_block(rng), "onnx23_ops.onnx": build_onnx23(rng)}
    os.makedirs(a.out_dir, exist_ok=True)
    paths = {}
    for name, m in models.items():
        paths[name] = os.path.join(a.out_dir, name)
        with open(paths[name], "wb") as f:
            f.write(m.SerializeToString())
        print("wrote %s (%d bytes)" % (paths[name], os.path.getsize(paths[name])))
        for line in inventory(m):
            print("  " + line)

    onnx.checker.check_model(models["onnx23_ops.onnx"], full_check=True)
    print("onnx.checker (full_check): onnx23_ops.onnx ok")
    if a.no_run:
        return

    run_rng = np.random.default_rng(7)  # separate stream: the models don't depend on it
    check_matmul_nbits_packing(run_rng)
    # ORT's CPU GroupQueryAttention takes a multi-token chunk on top of a
    # past cache only for batch 1, so run a chunked prefill (batch 1, 3 new
    # tokens) and a decode step (batch 2, 1 new token), both after 5 cached.
    for batch, seq, past in ((1, 3, 5), (2, 1, 5)):
        total = past + seq
        print("genai_block.onnx in onnxruntime (batch %d, seq %d, past %d):" % (batch, seq, past))
        kv = (batch, KV_HEADS, past, HEAD)
        outs = run_ort(paths["genai_block.onnx"], {
            "inputs_embeds": run_rng.standard_normal((batch, seq, HIDDEN)).astype(np.float32),
            "position_ids": np.tile(np.arange(past, total, dtype=np.int64), (batch, 1)),
            "seqlens_k": np.full((batch,), total - 1, np.int32),
            "total_sequence_length": np.array(total, np.int32),
            "past_key_values.0.key": run_rng.standard_normal(kv).astype(np.float32),
            "past_key_values.0.value": run_rng.standard_normal(kv).astype(np.float32),
        })
        assert outs[0].shape == (batch, seq, HIDDEN)
        assert outs[1].shape == outs[2].shape == (batch, KV_HEADS, total, HEAD)

    batch, seq = 2, 5
    print("onnx23_ops.onnx in onnxruntime (batch %d, seq %d):" % (batch, seq))
    feeds = {
        "hidden_states": run_rng.standard_normal((batch, seq, HIDDEN)).astype(np.float32),
        "position_ids": np.tile(np.arange(seq, dtype=np.int64), (batch, 1)),
    }
    outs = run_ort(paths["onnx23_ops.onnx"], feeds)
    assert outs[0].shape == (batch, seq, HIDDEN)
    from onnx.reference import ReferenceEvaluator
    ref = ReferenceEvaluator(models["onnx23_ops.onnx"]).run(None, feeds)[0]
    err = np.abs(ref - outs[0]).max()
    assert err < 1e-4, "onnx23_ops.onnx: ORT and onnx.reference differ by %g" % err
    print("  matches onnx.reference (max err %.2e)" % err)


if __name__ == "__main__":
    main()
