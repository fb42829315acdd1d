#!/usr/bin/env python3
"""Writes the malformed-ONNX corpus under test/Importer/malformed/.

Every model is tiny and valid opset 17 (IR 8) except for exactly one defect,
so an importer that rejects it has to have found that defect. Output:

  test/Importer/malformed/Inputs/*.onnx, *.bin   the models and their data
  test/Importer/malformed/cases.json             one entry per case

Deterministic: uses only onnx and numpy, no randomness or timestamps, so a
rerun writes identical bytes (check with `git diff --stat`).

`ort_rejects` in cases.json is recorded here from a table that was filled
in by running onnxruntime; `--check-ort` re-derives every decision with
onnxruntime.InferenceSession (each in its own process, after running the
case's `setup`) and fails if any differs from the table.

Usage:
  .venv/bin/python scripts/gen_malformed_models.py [--out DIR] [--check-ort]
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUT = os.path.join(ROOT, "test", "Importer", "malformed")

F32 = TensorProto.FLOAT
I64 = TensorProto.INT64

# --------------------------------------------------------------------------
# Building blocks


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def raw_tensor(name, elem, dims, raw):
    t = TensorProto()
    t.name = name
    t.data_type = elem
    t.dims.extend(dims)
    t.raw_data = raw
    return t


def f32(name, values, dims=None):
    a = np.asarray(values, dtype="<f4")
    return raw_tensor(name, F32, list(a.shape) if dims is None else dims, a.tobytes())


def i64(name, values):
    a = np.asarray(values, dtype="<i8")
    return raw_tensor(name, I64, list(a.shape), a.tobytes())


def ext_tensor(name, dims, location, offset=None, length=None, elem=F32):
    t = TensorProto()
    t.name = name
    t.data_type = elem
    t.dims.extend(dims)
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", offset), ("length", length)):
        if v is not None:
            e = t.external_data.add()
            e.key = k
            e.value = str(v)
    return t


def model(nodes, inputs, outputs, inits=(), opset=17, ir=8, extra_opsets=(), name="g"):
    g = helper.make_graph(list(nodes), name, list(inputs), list(outputs), list(inits))
    m = onnx.ModelProto()
    m.ir_version = ir
    m.graph.CopyFrom(g)
    if opset is not None:
        o = m.opset_import.add()
        o.domain = ""
        o.version = opset
    for dom, ver in extra_opsets:
        o = m.opset_import.add()
        o.domain = dom
        o.version = ver
    return m


def add_with(w, x_shape=(2, 2), y_shape=None, node_name="add_w"):
    """y = Add(x, w) with w an initializer: the carrier for tensor-data cases."""
    return model(
        [helper.make_node("Add", ["x", w.name], ["y"], name=node_name)],
        [vi("x", F32, list(x_shape))],
        [vi("y", F32, list(x_shape if y_shape is None else y_shape))],
        [w],
    )


def valid_base():
    w = f32("w", [[1, 2], [3, 4]])
    return model(
        [
            helper.make_node("MatMul", ["x", "w"], ["h"], name="matmul0"),
            helper.make_node("Relu", ["h"], ["y"], name="relu0"),
        ],
        [vi("x", F32, [1, 2])],
        [vi("y", F32, [1, 2])],
        [w],
    )


def softmax_model(attr_value, node_name, attr_type=None):
    node = helper.make_node("Softmax", ["x"], ["y"], name=node_name)
    a = node.attribute.add()
    a.name = "axis"
    if attr_type == "float":
        a.type = onnx.AttributeProto.FLOAT
        a.f = attr_value
    else:
        a.type = onnx.AttributeProto.INT
        a.i = attr_value
    return model([node], [vi("x", F32, [2, 3, 4])], [vi("y", F32, [2, 3, 4])])


def dql_model(scale, zp=None, x_elem=TensorProto.INT8, x_shape=(2, 3), axis=None,
              node_name="dql0", opset=17, ir=8):
    inputs = ["x", scale.name] + ([zp.name] if zp is not None else [])
    kw = {} if axis is None else {"axis": axis}
    node = helper.make_node("DequantizeLinear", inputs, ["y"], name=node_name, **kw)
    inits = [scale] + ([zp] if zp is not None else [])
    return model([node], [vi("x", x_elem, list(x_shape))], [vi("y", F32, list(x_shape))],
                 inits, opset=opset, ir=ir)


def matmulnbits_model(K, N, block_size, b_dims, node_name):
    n_blocks = (K + block_size - 1) // block_size
    b_numel = int(np.prod(b_dims))
    b = raw_tensor("b_packed", TensorProto.UINT8, b_dims, bytes((i * 37) & 0xFF for i in range(b_numel)))
    scales = f32("b_scales", np.full([N * n_blocks], 0.5))
    node = helper.make_node(
        "MatMulNBits", ["a", "b_packed", "b_scales"], ["y"], name=node_name,
        domain="com.microsoft", K=K, N=N, bits=4, block_size=block_size)
    return model([node], [vi("a", F32, [1, K])], [vi("y", F32, [1, N])], [b, scales],
                 extra_opsets=[("com.microsoft", 1)])


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def ld_field(field, payload_len):
    """Tag and length of a length-delimited protobuf field."""
    return varint((field << 3) | 2) + varint(payload_len)


# --------------------------------------------------------------------------
# The corpus. Each case: name, file bytes (or None), what, must_mention,
# optional setup, optional extra files. ORT's decision: see ORT_ACCEPTS.

EXT_DATA = np.arange(16, dtype="<f4").tobytes()  # ext_data.bin: 64 bytes
BIG_NUMEL = (1 << 29) + 1024                     # float32 -> 2 GiB + 4 KiB of raw_data


def too_big_prefix():
    """A valid ModelProto whose last bytes are the header of a raw_data field of
    BIG_NUMEL*4 bytes; appending that many zero bytes (truncate -s) completes it.
    Returns (prefix bytes, full file size)."""
    n = BIG_NUMEL * 4
    m = model(
        [helper.make_node("Add", ["x", "w_big"], ["y"], name="add_big")],
        [vi("x", F32, [BIG_NUMEL])], [vi("y", F32, [BIG_NUMEL])], [])
    t = TensorProto()
    t.name = "w_big"
    t.data_type = F32
    t.dims.append(BIG_NUMEL)
    tensor_head = t.SerializeToString() + ld_field(9, n)          # TensorProto.raw_data = 9
    tensor_len = len(tensor_head) + n
    g = onnx.GraphProto()
    g.CopyFrom(m.graph)
    m.ClearField("graph")
    graph_head = g.SerializeToString() + ld_field(5, tensor_len)  # GraphProto.initializer = 5
    graph_len = len(graph_head) + tensor_len
    # ModelProto.graph = 7; the tensor header follows the graph header.
    prefix = m.SerializeToString() + ld_field(7, graph_len) + graph_head + tensor_head
    return prefix, len(prefix) + n


def cases():
    C = []

    def case(name, data, what, must, setup=None, file=None):
        C.append(dict(name=name, data=data, what=what, must_mention=must, setup=setup,
                      file=file or name + ".onnx"))

    def ser(m):
        return m.SerializeToString()

    base = ser(valid_base())

    # ---- bytes / framing
    case("truncated", base[: len(base) // 2],
         "valid model cut to half its bytes", "truncated.onnx")
    case("garbage", (b"\xff\xfe not a protobuf \x00\x07" * 8),
         "bytes that are not a protobuf", "garbage.onnx")
    case("empty_file", b"", "zero-byte file (parses as an empty ModelProto)", "empty_file.onnx")
    prefix, big_size = too_big_prefix()
    case("too_big_no_external", None,
         "%d-byte (> 2 GiB) model with all weights inline: a well-formed protobuf beyond the "
         "2 GiB limit (sparse file made by setup)" % big_size, "too_big_no_external.onnx",
         setup='mkdir -p "$T" && cp "$IN/too_big_no_external.prefix" "$T/too_big_no_external.onnx" '
               '&& truncate -s %d "$T/too_big_no_external.onnx"' % big_size)
    C[-1]["extra"] = {"too_big_no_external.prefix": prefix}

    # ---- model header
    m = valid_base(); m.ClearField("ir_version")
    case("missing_ir_version", ser(m), "ModelProto.ir_version not set", "ir_version")
    m = valid_base(); m.ir_version = 99
    case("ir_version_99", ser(m), "ir_version 99 (unsupported)", "ir_version")
    m = valid_base(); m.ClearField("graph")
    case("missing_graph", ser(m), "ir_version and opset set but no graph", "graph")
    m = valid_base(); m.opset_import[0].version = 99
    case("opset_99", ser(m), "default-domain opset 99", "99")
    m = model([helper.make_node("Add", ["x", "x"], ["y"], name="add_no_opset")],
              [vi("x", F32, [2])], [vi("y", F32, [2])], opset=None,
              extra_opsets=[("com.microsoft", 1)])
    case("missing_default_opset", ser(m),
         "no opset_import for the default domain, used by node add_no_opset", "add_no_opset")
    m = model([helper.make_node("Frobnicate", ["x"], ["y"], name="unknown_op_node")],
              [vi("x", F32, [2])], [vi("y", F32, [2])])
    case("unknown_op", ser(m), "op type Frobnicate does not exist in the default domain",
         "unknown_op_node")
    m = model([helper.make_node("Relu", ["x"], ["y"], name="unknown_domain_node",
                                domain="com.example.nope")],
              [vi("x", F32, [2])], [vi("y", F32, [2])], extra_opsets=[("com.example.nope", 1)])
    case("unknown_domain", ser(m), "node in domain com.example.nope (imported, but unknown)",
         "unknown_domain_node")

    # ---- type constraints
    m = model([helper.make_node("Add", ["x", "mixed_i"], ["y"], name="add_mixed_types")],
              [vi("x", F32, [2]), vi("mixed_i", TensorProto.INT64, [2])], [vi("y", F32, [2])])
    case("add_mixed_types", ser(m),
         "Add(float, int64): both inputs are bound to type constraint T", "add_mixed_types")
    m = model([helper.make_node("Sqrt", ["si"], ["y"], name="sqrt_of_int")],
              [vi("si", TensorProto.INT64, [2])], [vi("y", TensorProto.INT64, [2])])
    case("sqrt_of_int", ser(m), "Sqrt of int64: T allows only floats", "sqrt_of_int")

    # ---- graph structure
    m = model([helper.make_node("Add", ["x", "cycle_t2"], ["cycle_t1"], name="cycle_n1"),
               helper.make_node("Relu", ["cycle_t1"], ["cycle_t2"], name="cycle_n2")],
              [vi("x", F32, [2])], [vi("cycle_t1", F32, [2])])
    case("cycle", ser(m), "cycle_n1 -> cycle_n2 -> cycle_n1", "cycle_")
    m = model([helper.make_node("Relu", ["ubd_t"], ["y"], name="ubd_user"),
               helper.make_node("Add", ["x", "x"], ["ubd_t"], name="ubd_def")],
              [vi("x", F32, [2])], [vi("y", F32, [2])])
    case("use_before_def", ser(m),
         "node ubd_user reads ubd_t before ubd_def (the next node) defines it; acyclic, "
         "just not topologically sorted", "ubd_t")
    m = model([helper.make_node("Relu", ["x"], ["dup_out"], name="dup_a"),
               helper.make_node("Neg", ["x"], ["dup_out"], name="dup_b")],
              [vi("x", F32, [2])], [vi("dup_out", F32, [2])])
    case("duplicate_output", ser(m), "nodes dup_a and dup_b both produce dup_out", "dup_out")
    m = model([helper.make_node("Add", ["dup_in", "dup_in"], ["y"], name="add0")],
              [vi("dup_in", F32, [2]), vi("dup_in", F32, [2])], [vi("y", F32, [2])])
    case("duplicate_graph_input", ser(m), "graph input dup_in declared twice", "dup_in")
    m = model([helper.make_node("Relu", ["x"], ["y"], name="relu0")],
              [vi("x", F32, [2])], [vi("y", F32, [2]), vi("dangling_out", F32, [2])])
    case("dangling_output", ser(m), "graph output dangling_out is produced by nothing",
         "dangling_out")
    m = model([helper.make_node("Add", ["x", ""], ["y"], name="empty_in_add")],
              [vi("x", F32, [2])], [vi("y", F32, [2])])
    case("empty_input_name", ser(m), "required second input of Add empty_in_add is ''",
         "empty_in_add")
    m = model([helper.make_node("Relu", ["x"], ["y"], name="relu0"),
               helper.make_node("Neg", ["x"], [""], name="empty_out_neg")],
              [vi("x", F32, [2])], [vi("y", F32, [2])])
    case("empty_output_name", ser(m), "the only (required) output of Neg empty_out_neg is ''",
         "empty_out_neg")
    m = model([helper.make_node("Relu", ["x"], ["y"], name="relu0")],
              [vi("x", F32, [2]), vi("", F32, [2])], [vi("y", F32, [2])])
    case("empty_graph_input_name", ser(m), "second graph input has name ''", "input")
    m = model([helper.make_node("Add", ["x", "w_clash"], ["y"], name="add0")],
              [vi("x", F32, [2, 2]), vi("w_clash", F32, [2, 2])], [vi("y", F32, [2, 2])],
              [i64("w_clash", [[1, 2], [3, 4]])])
    case("init_input_type_clash", ser(m),
         "graph input w_clash is float[2,2] but initializer w_clash is int64", "w_clash")

    # ---- shapes
    case("negative_dim", ser(add_with(raw_tensor("w_negdim", F32, [-2, 2], EXT_DATA[:16]))),
         "initializer w_negdim has dims [-2, 2]", "w_negdim")
    case("huge_dim", ser(add_with(raw_tensor("w_huge", F32, [1 << 40], EXT_DATA[:16]), x_shape=[1],
                          y_shape=[1 << 40])),
         "initializer w_huge has dims [2^40] (4 TiB; raw_data necessarily short)", "w_huge")
    m = model([helper.make_node("Relu", ["x_huge"], ["y"], name="relu0")],
              [vi("x_huge", F32, [1, 1 << 40])], [vi("y", F32, [1, 1 << 40])])
    case("huge_input_dim", ser(m), "graph input x_huge is float[1, 2^40] (4 TiB)", "x_huge")
    case("numel_overflow",
         ser(add_with(raw_tensor("w_overflow", F32, [162, 341606371735362067], EXT_DATA[:24]),
                      x_shape=[1], y_shape=[162, 341606371735362067])),
         "initializer w_overflow dims [162, 341606371735362067]: the product wraps to 6 in "
         "int64/uint64, and raw_data is 24 bytes = 6 floats", "w_overflow")
    case("rank_40", ser(add_with(raw_tensor("w_rank40", F32, [1] * 40, EXT_DATA[:4]), x_shape=[1],
                          y_shape=[1] * 40)),
         "initializer w_rank40 has rank 40 (one element)", "w_rank40")

    # ---- tensor data
    case("raw_short", ser(add_with(raw_tensor("w_raw_short", F32, [2, 2], EXT_DATA[:8]))),
         "float[2,2] with 8 bytes of raw_data (needs 16)", "w_raw_short")
    case("raw_long", ser(add_with(raw_tensor("w_raw_long", F32, [2, 2], EXT_DATA[:32]))),
         "float[2,2] with 32 bytes of raw_data (needs 16)", "w_raw_long")
    case("raw_odd", ser(add_with(raw_tensor("w_raw_odd", F32, [2, 2], EXT_DATA[:17]))),
         "float[2,2] with 17 bytes of raw_data (not a multiple of 4)", "w_raw_odd")
    w = helper.make_tensor("w_float_count", F32, [2, 2], [1.0, 2.0, 3.0])
    case("float_data_count", ser(add_with(w)),
         "float[2,2] with 3 values in float_data", "w_float_count")
    w = raw_tensor("w_both", F32, [2, 2], EXT_DATA[:16]); w.float_data.extend([1, 2, 3, 4])
    case("raw_and_float_data", ser(add_with(w)),
         "float[2,2] with both raw_data and float_data set", "w_both")
    w = TensorProto(); w.name = "w_string"; w.data_type = TensorProto.STRING; w.dims.extend([2, 2])
    w.string_data.extend([b"a", b"b", b"c", b"d"])
    m = model([helper.make_node("MatMul", ["x", "w_string"], ["y"], name="matmul_string")],
              [vi("x", F32, [2, 2])], [vi("y", F32, [2, 2])], [w])
    case("string_initializer", ser(m), "STRING initializer w_string feeding MatMul", "w_string")
    w = raw_tensor("w_complex", TensorProto.COMPLEX128, [2, 2], np.arange(8, dtype="<f8").tobytes())
    m = model([helper.make_node("MatMul", ["x", "w_complex"], ["y"], name="matmul_complex")],
              [vi("x", F32, [2, 2])], [vi("y", F32, [2, 2])], [w])
    case("complex128_initializer", ser(m), "COMPLEX128 initializer w_complex feeding MatMul",
         "w_complex")

    # ---- attributes
    case("softmax_axis_float", ser(softmax_model(1.0, "bad_softmax_float", "float")),
         "Softmax bad_softmax_float has axis given as FLOAT", "bad_softmax_float")
    case("softmax_axis_99", ser(softmax_model(99, "bad_softmax_axis")),
         "Softmax bad_softmax_axis has axis=99 on a rank-3 input", "bad_softmax_axis")
    m = model([helper.make_node("Cast", ["x"], ["y"], name="cast_no_to")],
              [vi("x", F32, [2])], [vi("y", F32, [2])])
    case("cast_missing_to", ser(m), "Cast cast_no_to without the required 'to'", "cast_no_to")
    m = model([helper.make_node("Transpose", ["x"], ["y"], name="transpose_bad_perm", perm=[1, 1])],
              [vi("x", F32, [2, 3])], [vi("y", F32, [3, 2])])
    case("transpose_perm_dup", ser(m), "Transpose transpose_bad_perm has perm=[1,1]",
         "transpose_bad_perm")
    m = model([helper.make_node("Split", ["x", "split_sizes3"], ["s0", "s1"], name="split_count", axis=0)],
              [vi("x", F32, [6])], [vi("s0", F32, [2]), vi("s1", F32, [2])], [i64("split_sizes3", [2, 2, 2])])
    case("split_count_mismatch", ser(m), "Split split_count has 3 sizes but 2 outputs", "split_count")
    m = model([helper.make_node("Split", ["x", "split_sizes_sum"], ["s0", "s1"], name="split_sum", axis=0)],
              [vi("x", F32, [6])], [vi("s0", F32, [2]), vi("s1", F32, [2])], [i64("split_sizes_sum", [2, 2])])
    case("split_sum_mismatch", ser(m), "Split split_sum sizes [2,2] sum to 4 but the axis is 6",
         "split_sum")
    m = model([helper.make_node("Reshape", ["x", "shape_two_neg1"], ["y"], name="reshape_two_neg1")],
              [vi("x", F32, [2, 3])], [vi("y", F32, ["r0", "r1"])], [i64("shape_two_neg1", [-1, -1])])
    case("reshape_two_minus_one", ser(m), "Reshape reshape_two_neg1 with shape [-1,-1]",
         "reshape_two_neg1")

    # ---- external data (ext_data.bin is 64 bytes; each tensor is float[2,2] = 16 bytes)
    def ext(name, t, what, must, setup=None, file=None):
        case(name, ser(add_with(t)), what, must, setup=setup, file=file)

    ext("ext_valid_control", ext_tensor("w_ext", [2, 2], "ext_data.bin", 16, 16),
        "CONTROL, not malformed: external data inside the model's directory", None)
    C[-1]["valid"] = True
    ext("ext_dotdot", ext_tensor("w_ext_dotdot", [2, 2], "../Inputs/ext_data.bin", 0, 16),
        "location '../Inputs/ext_data.bin' (resolves to an existing file, but contains ..)",
        "w_ext_dotdot")
    ext("ext_absolute", ext_tensor("w_ext_abs", [2, 2], "/etc/passwd", 0, 16),
        "location is the absolute path /etc/passwd", "w_ext_abs")
    ext("ext_symlink_file", ext_tensor("w_ext_symlink", [2, 2], "ext_link.bin", 0, 16),
        "location ext_link.bin is a symlink (to a file in the same directory)", "w_ext_symlink",
        setup='mkdir -p "$T" && cp -f "$IN/ext_symlink_file.onnx" "$IN/ext_data.bin" "$T/" '
              '&& ln -sfn ext_data.bin "$T/ext_link.bin"',
        file="ext_symlink_file.onnx")
    ext("ext_symlink_dir", ext_tensor("w_ext_symdir", [2, 2], "linkdir/ext_data.bin", 0, 16),
        "location linkdir/ext_data.bin where linkdir is a symlink to a directory", "w_ext_symdir",
        setup='mkdir -p "$T/realdir" && cp -f "$IN/ext_symlink_dir.onnx" "$T/" '
              '&& cp -f "$IN/ext_data.bin" "$T/realdir/" && ln -sfn realdir "$T/linkdir"',
        file="ext_symlink_dir.onnx")
    ext("ext_hardlink", ext_tensor("w_ext_hardlink", [2, 2], "ext_hard.bin", 0, 16),
        "location ext_hard.bin is a hard link (st_nlink == 2)", "w_ext_hardlink",
        setup='mkdir -p "$T" && cp -f "$IN/ext_hardlink.onnx" "$T/" '
              '&& cp -f "$IN/ext_data.bin" "$T/ext_hard_other.bin" '
              '&& ln -f "$T/ext_hard_other.bin" "$T/ext_hard.bin"',
        file="ext_hardlink.onnx")
    ext("ext_missing_file", ext_tensor("w_ext_missing", [2, 2], "ext_missing.bin", 0, 16),
        "location ext_missing.bin does not exist", "w_ext_missing")
    ext("ext_negative_offset", ext_tensor("w_ext_negoff", [2, 2], "ext_data.bin", -4, 16),
        "offset '-4'", "w_ext_negoff")
    ext("ext_negative_length", ext_tensor("w_ext_neglen", [2, 2], "ext_data.bin", 0, -16),
        "length '-16'", "w_ext_neglen")
    ext("ext_nonnumeric_offset", ext_tensor("w_ext_nanoff", [2, 2], "ext_data.bin", "0x10", 16),
        "offset '0x10' (not a decimal integer)", "w_ext_nanoff")
    ext("ext_nonnumeric_length", ext_tensor("w_ext_nanlen", [2, 2], "ext_data.bin", 0, "sixteen"),
        "length 'sixteen'", "w_ext_nanlen")
    ext("ext_beyond_file", ext_tensor("w_ext_beyond", [2, 2], "ext_data.bin", 56, 16),
        "offset 56 + length 16 > 64-byte file", "w_ext_beyond")
    ext("ext_huge_offset", ext_tensor("w_ext_hugeoff", [2, 2], "ext_data.bin", (1 << 63) - 8, 16),
        "offset 2^63-8: offset + length overflows int64", "w_ext_hugeoff")
    ext("ext_length_mismatch", ext_tensor("w_ext_len12", [2, 2], "ext_data.bin", 0, 12),
        "length 12 for float[2,2] (needs 16)", "w_ext_len12")
    ext("ext_no_location", ext_tensor("w_ext_noloc", [2, 2], None, 0, 16),
        "data_location EXTERNAL but no 'location' key", "w_ext_noloc")

    # ---- quantization (DequantizeLinear-13: x int8[2,3] input, constant scale / zero point)
    def scalar_scale(name, v):
        return raw_tensor(name, F32, [], np.asarray(v, dtype="<f4").tobytes())

    def zp_i8(name, v):
        return raw_tensor(name, TensorProto.INT8, [], np.asarray(v, dtype="i1").tobytes())

    for nm, v, what in (("scale_zero", 0.0, "0"), ("scale_negative", -0.5, "-0.5"),
                        ("scale_nan", float("nan"), "NaN"), ("scale_inf", float("inf"), "+Inf")):
        case("dql_" + nm, ser(dql_model(scalar_scale(nm, v), zp_i8("zp0", 0))),
             "DequantizeLinear scale %s = %s" % (nm, what), "dql0")
    zp = TensorProto(); zp.name = "zp_int8_300"; zp.data_type = TensorProto.INT8; zp.int32_data.append(300)
    case("dql_zp_out_of_range", ser(dql_model(scalar_scale("scale_ok", 0.5), zp)),
         "int8 zero point zp_int8_300 stored in int32_data as 300 (> 127)", "zp_int8_300")
    case("dql_zp_int32_nonzero",
         ser(dql_model(scalar_scale("scale_ok", 0.5),
                       raw_tensor("zp_int32_300", TensorProto.INT32, [], np.int32(300).tobytes()),
                       x_elem=TensorProto.INT32)),
         "int32 input with zero point zp_int32_300 = 300 (must be 0 for int32)", "dql0")
    case("dql_zp_type_mismatch",
         ser(dql_model(scalar_scale("scale_ok", 0.5),
                       raw_tensor("zp_uint8", TensorProto.UINT8, [], b"\x80"))),
         "int8 input with a uint8 zero point zp_uint8", "dql0")
    case("dql_axis_out_of_bounds",
         ser(dql_model(f32("scale_axis", [0.5, 0.25, 0.125]),
                       raw_tensor("zp_axis", TensorProto.INT8, [3], b"\x00\x00\x00"),
                       axis=5, node_name="dql_axis5")),
         "per-axis DequantizeLinear dql_axis5 with axis=5 on a rank-2 input", "dql_axis5")
    case("dql_scale_len_mismatch",
         ser(dql_model(f32("scale_len4", [0.5, 0.25, 0.125, 1.0]),
                       raw_tensor("zp_len4", TensorProto.INT8, [4], b"\x00" * 4), axis=1)),
         "per-axis scale scale_len4 has 4 entries for 3 channels (axis=1 of [2,3])", "dql0")
    x4 = raw_tensor("x_int4", TensorProto.INT4, [5], b"\x21\x43")  # needs ceil(5/2) = 3 bytes
    m = model([helper.make_node("DequantizeLinear", ["x_int4", "scale_ok"], ["y"], name="dql_int4")],
              [], [vi("y", F32, [5])], [x4, scalar_scale("scale_ok", 0.5)], opset=21, ir=10)
    case("int4_packed_short", ser(m),
         "(opset 21, IR 10) INT4 initializer x_int4 of 5 elements with 2 bytes of raw_data "
         "(needs ceil(5/2) = 3)", "x_int4")
    # K not a multiple of block_size is valid (the last block is partial, as
    # in onnxruntime): scripts/check-matmulnbits.py runs such models.
    case("matmulnbits_packed_len",
         ser(matmulnbits_model(64, 4, 32, [4, 2, 8], "mnb_short_b")),
         "com.microsoft MatMulNBits mnb_short_b: K=64 N=4 block_size=32 bits=4 needs "
         "b_packed uint8[4,2,16] (128 bytes), has uint8[4,2,8] (64 bytes)", "mnb_short_b")
    return C


# The cases onnxruntime 1.23.2 accepts (InferenceSession on the CPU EP, which
# checks graph and tensor framing but not constant values, paths or kernel
# attributes); it rejects all others. Re-derive with --check-ort.
ORT_ACCEPTS = {
    "missing_default_opset",
    "use_before_def",
    "empty_graph_input_name",
    "huge_input_dim",
    "rank_40",
    "raw_and_float_data",
    "ext_valid_control",
    "ext_dotdot",
    "ext_absolute",
    "ext_symlink_file",
    "ext_symlink_dir",
    "ext_hardlink",
    "dql_scale_zero",
    "dql_scale_negative",
    "dql_scale_nan",
    "dql_scale_inf",
    "dql_zp_out_of_range",
    "dql_zp_int32_nonzero",
    "dql_axis_out_of_bounds",
    "dql_scale_len_mismatch",
    "matmulnbits_packed_len",
}


# --------------------------------------------------------------------------


def write(out):
    inputs = os.path.join(out, "Inputs")
    if os.path.isdir(inputs):
        shutil.rmtree(inputs)
    os.makedirs(inputs)
    with open(os.path.join(inputs, "ext_data.bin"), "wb") as f:
        f.write(EXT_DATA)
    entries = []
    for c in cases():
        if c["data"] is not None:
            with open(os.path.join(inputs, c["file"]), "wb") as f:
                f.write(c["data"])
        for fn, data in c.get("extra", {}).items():
            with open(os.path.join(inputs, fn), "wb") as f:
                f.write(data)
        e = {"name": c["name"], "file": c["file"], "what": c["what"]}
        if c.get("valid"):
            e["valid"] = True
        else:
            e["must_mention"] = c["must_mention"]
        if c["setup"]:
            e["setup"] = c["setup"]
        e["ort_rejects"] = c["name"] not in ORT_ACCEPTS
        entries.append(e)
    with open(os.path.join(out, "cases.json"), "w") as f:
        json.dump(entries, f, indent=1)
        f.write("\n")
    return entries


ORT_PROBE = r"""
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))
import onnxruntime as ort
so = ort.SessionOptions(); so.log_severity_level = 4
try:
    ort.InferenceSession(sys.argv[1], so, providers=["CPUExecutionProvider"])
except Exception as e:
    print(str(e).replace("\n", " ")[:300]); sys.exit(3)
print("accepted")
"""


def check_ort(out, entries):
    inputs = os.path.join(out, "Inputs")
    bad = 0
    decided = {}
    for e in entries:
        with tempfile.TemporaryDirectory() as t:
            env = dict(os.environ, IN=inputs, T=os.path.join(t, "s"))
            path = os.path.join(inputs, e["file"])
            if "setup" in e:
                subprocess.run(["bash", "-ec", e["setup"]], env=env, check=True)
                path = os.path.join(env["T"], e["file"])
            try:
                p = subprocess.run([sys.executable, "-c", ORT_PROBE, path], capture_output=True,
                                   text=True, timeout=300)
                rc, msg = p.returncode, (p.stdout.strip() or p.stderr.strip()[-300:])
            except subprocess.TimeoutExpired:
                rc, msg = -1, "timeout"
        rejects = rc != 0
        decided[e["name"]] = rejects
        how = "accepts" if not rejects else ("rejects" if rc == 3 else "CRASH/rc=%d" % rc)
        flag = "" if e["ort_rejects"] == rejects else "   <-- table says %s" % e["ort_rejects"]
        if flag:
            bad += 1
        print("%-34s %-8s %s%s" % (e["name"], how, msg[:150], flag))
    n_rej = sum(decided.values())
    print("onnxruntime: %d rejected, %d accepted of %d" % (n_rej, len(decided) - n_rej, len(decided)))
    if bad:
        print("ORT_ACCEPTS should be: %r" % sorted(k for k, v in decided.items() if not v))
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=DEFAULT_OUT)
    ap.add_argument("--check-ort", action="store_true")
    a = ap.parse_args()
    entries = write(a.out)
    print("wrote %d cases to %s" % (len(entries), a.out))
    if a.check_ort:
        sys.exit(1 if check_ort(a.out, entries) else 0)


if __name__ == "__main__":
    main()
