#!/usr/bin/env python3
"""Generates the onnx dialect's op definitions and the importer's schema table
from ONNX's own operator schemas (PyPI onnx) and onnxruntime's contrib schemas.

Outputs (committed; the C++ build never runs Python):
  dialects/onnx/IR/ONNXOps.gen.td        one ODS op per supported ONNX op
  lib/Importer/ONNX/OpSchemaTable.inc   attribute/arity/version table the
                                        importer validates nodes against
  docs/onnx-ops.md                      the published (op, opset range) table

Run: .venv/bin/python scripts/gen_onnx_dialect.py
"""
import os
import sys

import onnx
import onnx.defs as defs
from onnxruntime.capi import onnxruntime_pybind11_state as ort_c

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_OPSET = 24

# Default-domain ops xfmr imports. Everything a torch.onnx export of GPT-2,
# Llama, Mixtral or nn.TransformerEncoder emits (opsets 13-17), the opset 18-24
# transformer ops, and the dense-tensor ops of ONNX's node test suite.
DEFAULT_OPS = """
Abs Acos Acosh Add And ArgMax ArgMin Asin Asinh Atan Atanh Attention BitShift
Cast CastLike Ceil Celu Clip Concat Constant ConstantOfShape Cos Cosh CumSum
DequantizeLinear Div Dropout DynamicQuantizeLinear Einsum Elu Equal Erf Exp
Expand EyeLike Flatten Floor Gather GatherElements GatherND Gelu Gemm Greater
GreaterOrEqual Hardmax HardSigmoid HardSwish Identity IsInf IsNaN
LayerNormalization LeakyRelu Less LessOrEqual Log LogSoftmax MatMul
MatMulInteger Max Mean Min Mish Mod Mul Neg NonZero Not OneHot Or Pad Pow PRelu
QuantizeLinear Range Reciprocal ReduceL1 ReduceL2 ReduceLogSum ReduceLogSumExp
ReduceMax ReduceMean ReduceMin ReduceProd ReduceSum ReduceSumSquare Relu Reshape
RMSNormalization RotaryEmbedding Round ScatterElements ScatterND Selu Shape Shrink
Sigmoid Sign Sin Sinh Size Slice Softmax Softplus Softsign Split Sqrt Squeeze
Sub Sum Tan Tanh ThresholdedRelu Tile TopK Transpose Trilu Unsqueeze Where Xor
""".split()

# com.microsoft ops emitted by onnxruntime-genai's model builder.
MS_OPS = """GatherBlockQuantized GroupQueryAttention MatMulNBits RotaryEmbedding
SkipSimplifiedLayerNormalization SkipLayerNormalization""".split()
# Default-domain ops that only onnxruntime defines (the model builder emits it).
ORT_DEFAULT_OPS = ["SimplifiedLayerNormalization"]

# Ops whose C++ verifier checks invariants beyond ODS's arity and types.
VERIFIED = set("""ArgMax ArgMin Attention Cast Concat ConstantOfShape CumSum
DequantizeLinear Einsum Expand Flatten Gather GatherElements Gemm Hardmax
LayerNormalization LogSoftmax MatMul QuantizeLinear Reshape RMSNormalization
RotaryEmbedding Softmax Split Squeeze TopK Transpose Trilu Unsqueeze
ms.GatherBlockQuantized ms.GroupQueryAttention ms.MatMulNBits ms.RotaryEmbedding""".split())

ONNX_TO_ODS_TYPE = {
    "float": "F32", "double": "F64", "float16": "F16", "bfloat16": "BF16",
    "int8": "I8", "int16": "I16", "int32": "I32", "int64": "I64",
    "uint8": "UI8", "uint16": "UI16", "uint32": "UI32", "uint64": "UI64",
    "bool": "I1", "int4": "I4", "uint4": "UI4",
    "float8e4m3fn": "F8E4M3FN", "float8e4m3fnuz": "F8E4M3FNUZ",
    "float8e5m2": "F8E5M2", "float8e5m2fnuz": "F8E5M2FNUZ",
}
# TensorProto.DataType for the same names, for the importer's table.
ONNX_DTYPE = {
    "float": 1, "uint8": 2, "int8": 3, "uint16": 4, "int16": 5, "int32": 6,
    "int64": 7, "bool": 9, "float16": 10, "double": 11, "uint32": 12,
    "uint64": 13, "bfloat16": 16, "float8e4m3fn": 17, "float8e4m3fnuz": 18,
    "float8e5m2": 19, "float8e5m2fnuz": 20, "uint4": 21, "int4": 22,
}

A = defs.OpSchema.AttrType
ATTR_KIND = {A.INT: "Int", A.FLOAT: "Float", A.STRING: "String",
             A.INTS: "Ints", A.FLOATS: "Floats", A.STRINGS: "Strings",
             A.TENSOR: "Tensor"}


def attr_kind(a):
    # onnx and onnxruntime expose distinct enum classes; compare by name.
    name = str(a.type).split(".")[-1]
    return {str(k).split(".")[-1]: v for k, v in ATTR_KIND.items()}.get(name)


def type_str(p):
    return p.type_str if hasattr(p, "type_str") else p.typeStr


def default_value(a):
    if hasattr(a, "default_value"):
        return a.default_value
    raw = getattr(a, "_default_value", b"")
    proto = onnx.AttributeProto()
    if raw:
        proto.ParseFromString(raw)
    return proto


def ort_schemas(domain, names):
    out = {}
    for s in ort_c.get_all_operator_schema():
        if s.domain == domain and s.name in names:
            if s.name not in out or s.since_version > out[s.name].since_version:
                out[s.name] = s
    return out


def option_name(p):
    return str(p.option).split(".")[-1]


def tensor_elem_types(schema, type_str):
    for tc in schema.type_constraints:
        if tc.type_param_str == type_str:
            strs = tc.allowed_type_strs
            break
    else:
        strs = [type_str]
    out = []
    for s in strs:
        if s.startswith("tensor(") and s.endswith(")"):
            name = s[len("tensor("):-1]
            if name in ONNX_TO_ODS_TYPE:
                out.append(name)
    return out


def ods_ident(name, taken):
    ident = name.replace(".", "_").replace("-", "_")
    if ident[0].isdigit():
        ident = "v" + ident
    base = ident
    while ident.lower() in taken:
        ident = ident + "_"
    taken.add(ident.lower())
    return ident


def c_str(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def default_literal(a, kind):
    dv = default_value(a)
    if dv is None or not dv.name:
        return None
    if kind == "Int":
        return str(dv.i)
    if kind == "Float":
        return repr(float(dv.f))
    if kind == "String":
        return dv.s.decode()
    return None


class Op:
    def __init__(self, schema, prefix, versions, history=None):
        self.history = history or versions
        self.s = schema
        self.prefix = prefix  # "" or "ms."
        self.name = schema.name
        self.versions = versions
        self.key = prefix + schema.name

    @property
    def mnemonic(self):
        return self.prefix + self.name

    @property
    def cpp_class(self):
        return ("Ms" if self.prefix else "") + self.name + "Op"

    @property
    def def_name(self):
        return "ONNX_" + ("Ms" if self.prefix else "") + self.name + "Op"


def doc_summary(schema):
    doc = (schema.doc or "").strip().split("\n")
    first = ""
    for line in doc:
        line = line.strip()
        if line:
            first = line
            break
    first = first.replace('"', "'").replace("`", "")
    if len(first) > 110:
        first = first[:107].rsplit(" ", 1)[0] + "..."
    return first or f"ONNX {schema.name}"


def compatible(old, new):
    """Old schema version is imported as-is into the new op form when its
    inputs are a prefix of the new ones and its attributes a subset."""
    oi = [i.name for i in old.inputs]
    ni = [i.name for i in new.inputs]
    if oi != ni[: len(oi)]:
        return False
    for n, a in old.attributes.items():
        if n not in new.attributes or attr_kind(new.attributes[n]) != attr_kind(a):
            return False
    return True


# Versions whose signature matches but whose semantics differ (Softmax < 13
# coerces its input to 2-D): not importable.
SEMANTIC_MIN_VERSION = {"Softmax": 13, "LogSoftmax": 13, "Hardmax": 13}


# Hand-picked traits and hooks for generated ops.
EXTRA_TRAITS = {"Constant": ["ConstantLike"]}
HAS_FOLDER = {"Constant"}


def example(op):
    """A one-line generic-form example built from the signature."""
    s = op.s
    def ty(p):
        elems = tensor_elem_types(s, type_str(p))
        e = "float" if "float" in elems or not elems else elems[0]
        mlir = {"float": "f32", "double": "f64", "float16": "f16", "bfloat16": "bf16",
                "bool": "i1", "uint8": "ui8", "uint16": "ui16", "uint32": "ui32",
                "uint64": "ui64", "int4": "i4", "uint4": "ui4",
                "float8e4m3fn": "f8E4M3FN", "float8e4m3fnuz": "f8E4M3FNUZ",
                "float8e5m2": "f8E5M2", "float8e5m2fnuz": "f8E5M2FNUZ"}.get(e, e.replace("int", "i"))
        return f"tensor<?x?x{mlir}>"
    operands, otypes = [], []
    for p in s.inputs:
        opt = option_name(p)
        if opt == "Optional":
            operands.append("%none")
            otypes.append("none")
        else:
            n = 2 if opt == "Variadic" else 1
            for k in range(n):
                operands.append(f"%{p.name.lower()}{k if n > 1 else ''}")
                otypes.append(ty(p))
    rtypes = [("none" if option_name(p) == "Optional" else ty(p)) for p in s.outputs]
    attrs = []
    for n in sorted(s.attributes):
        a = s.attributes[n]
        if not a.required:
            continue
        k = attr_kind(a)
        attrs.append(f"{n} = " + {"Int": "1 : i64", "Float": "1.0 : f32", "String": '"x"',
                                  "Ints": "[1]", "Floats": "[1.0 : f32]", "Strings": '["x"]',
                                  "Tensor": "dense<1.0> : tensor<f32>"}.get(k, "?"))
    attr = (" {" + ", ".join(attrs) + "}") if attrs else ""
    res = ", ".join(f"%r{i}" for i in range(len(rtypes))) if len(rtypes) > 1 else "%r"
    rt = rtypes[0] if len(rtypes) == 1 else "(" + ", ".join(rtypes) + ")"
    return (f"{res} = onnx.{op.mnemonic}({', '.join(operands)}){attr}\n"
            f"        : ({', '.join(otypes)}) -> {rt}")


def collect():
    ops = []
    for name in DEFAULT_OPS:
        latest = defs.get_schema(name, MAX_OPSET, "")
        history = sorted({s.since_version for s in defs.get_all_schemas_with_history()
                          if s.name == name and s.domain == "" and s.since_version <= MAX_OPSET})
        versions = []
        for v in history:
            s = defs.get_schema(name, v, "")
            if v >= SEMANTIC_MIN_VERSION.get(name, 0) and compatible(s, latest):
                versions.append(v)
        ops.append(Op(latest, "", versions, history))
    for s in ort_schemas("", ORT_DEFAULT_OPS).values():
        ops.append(Op(s, "", [s.since_version]))
    ms = ort_schemas("com.microsoft", MS_OPS)
    for name in MS_OPS:
        s = ms[name]
        ops.append(Op(s, "ms.", [s.since_version]))
    return ops


def type_constraint(schema, p):
    elems = tensor_elem_types(schema, type_str(p))
    if not elems:
        return "AnyTensor"
    return "TensorOf<[" + ", ".join(ONNX_TO_ODS_TYPE[e] for e in elems) + "]>"


def gen_td(ops):
    lines = [
        "//===- ONNXOps.gen.td - generated ONNX op definitions ------*- tablegen -*-===//",
        "//",
        "// GENERATED by scripts/gen_onnx_dialect.py from onnx " + onnx.__version__ + " and",
        "// onnxruntime's contrib schemas. Do not edit; rerun the script.",
        "//",
        "//===----------------------------------------------------------------------===//",
        "",
    ]
    for op in ops:
        s = op.s
        taken = set()
        args = []
        for p in s.inputs:
            ident = ods_ident(p.name, taken)
            tc = type_constraint(s, p)
            opt = option_name(p)
            if opt == "Variadic":
                args.append(f"Variadic<{tc}>:${ident}")
            elif opt == "Optional":
                args.append(f"ONNX_Optional<{tc}>:${ident}")
            else:
                args.append(f"{tc}:${ident}")
        for n in sorted(s.attributes):
            a = s.attributes[n]
            kind = attr_kind(a)
            if kind is None:
                continue
            ident = ods_ident(n, taken)
            base = {"Int": "I64Attr", "Float": "F32Attr", "String": "StrAttr",
                    "Ints": "I64ArrayAttr", "Floats": "F32ArrayAttr",
                    "Strings": "StrArrayAttr", "Tensor": "ElementsAttr"}[kind]
            dl = default_literal(a, kind)
            if a.required:
                args.append(f"{base}:${ident}")
            elif dl is not None and kind == "String":
                args.append(f'DefaultValuedStrAttr<{base}, {c_str(dl)}>:${ident}')
            elif dl is not None:
                args.append(f'DefaultValuedAttr<{base}, {c_str(dl)}>:${ident}')
            else:
                args.append(f"OptionalAttr<{base}>:${ident}")
        results = []
        for p in s.outputs:
            ident = ods_ident(p.name, taken)
            tc = type_constraint(s, p)
            opt = option_name(p)
            if opt == "Variadic":
                results.append(f"Variadic<{tc}>:${ident}")
            elif opt == "Optional":
                results.append(f"ONNX_Optional<{tc}>:${ident}")
            else:
                results.append(f"{tc}:${ident}")
        vr = f"{op.versions[0]}" + (f"-{op.versions[-1]}" if len(op.versions) > 1 else "")
        domain = "com.microsoft" if op.prefix else "ai.onnx"
        traits = EXTRA_TRAITS.get(op.key, [])
        tr = (", [" + ", ".join(traits) + "]") if traits else ""
        lines.append(f"def {op.def_name} : ONNX_Op<{c_str(op.mnemonic)}{tr}> {{")
        lines.append(f"  let summary = {c_str(doc_summary(s))};")
        lines.append("  let description = [{")
        lines.append(f"    Faithful import of {domain} `{s.name}` (schema version"
                     f" {s.since_version}; importable since-versions {', '.join(map(str, op.versions))}).")
        lines.append("    Missing optional inputs and outputs are `none` values.")
        lines.append("")
        lines.append("    ```mlir")
        for ln in example(op).split("\\n"):
            lines.append("    " + ln)
        lines.append("    ```")
        lines.append("  }];")
        lines.append("  let arguments = (ins" + ("\n    " if args else "") + ",\n    ".join(args) + ");")
        lines.append("  let results = (outs" + ("\n    " if results else "") + ",\n    ".join(results) + ");")
        if op.key in VERIFIED:
            lines.append("  let hasVerifier = 1;")
        if op.key in HAS_FOLDER:
            lines.append("  let hasFolder = 1;")
        lines.append("}")
        lines.append("")
    return "\n".join(lines)


def gen_table(ops):
    lines = [
        "//===- OpSchemaTable.inc - generated importer schema table -------*- C++ -*-===//",
        "//",
        "// GENERATED by scripts/gen_onnx_dialect.py. Do not edit; rerun the script.",
        "// One ONNX_OP per op: domain, ONNX name, MLIR op name, supported since-",
        "// versions, inputs, outputs, attributes. Expanded by OpSchemaTable.cpp.",
        "//",
        "//===----------------------------------------------------------------------===//",
        "",
        f"ONNX_MAX_OPSET({MAX_OPSET})",
        "",
    ]
    for op in ops:
        s = op.s
        domain = "com.microsoft" if op.prefix else ""
        ins = []
        for p in s.inputs:
            elems = tensor_elem_types(s, type_str(p))
            mask = sum(1 << ONNX_DTYPE[e] for e in elems)
            ins.append(f"{{{c_str(p.name)}, Param::{option_name(p)}, {c_str(type_str(p))}, 0x{mask:x}u}}")
        outs = []
        for p in s.outputs:
            elems = tensor_elem_types(s, type_str(p))
            mask = sum(1 << ONNX_DTYPE[e] for e in elems)
            outs.append(f"{{{c_str(p.name)}, Param::{option_name(p)}, {c_str(type_str(p))}, 0x{mask:x}u}}")
        attrs = []
        for n in sorted(s.attributes):
            a = s.attributes[n]
            kind = attr_kind(a)
            if kind is None:
                continue
            attrs.append(f"{{{c_str(n)}, AttrKind::{kind}, {'true' if a.required else 'false'}}}")
        lines.append(
            f"ONNX_OP({c_str(domain)}, {c_str(s.name)}, {c_str('onnx.' + op.mnemonic)},\n"
            f"        ONNX_LIST({', '.join(map(str, op.versions))}),\n"
            f"        ONNX_LIST({', '.join(map(str, op.history))}),\n"
            f"        ONNX_LIST({', '.join(ins)}),\n"
            f"        ONNX_LIST({', '.join(outs)}),\n"
            f"        ONNX_LIST({', '.join(attrs)}))")
    return "\n".join(lines) + "\n"


def gen_doc(ops):
    lines = ["# Supported ONNX operators", "",
             "Generated by `scripts/gen_onnx_dialect.py`. The importer accepts a node when its",
             "domain's opset resolves to one of the listed schema versions (ONNX's rule: the",
             "largest since-version not above the model's opset). Older forms marked *upgraded*",
             "are rewritten by the importer into the newest form (attribute → input).", "",
             "| domain | op | MLIR op | importable since-versions |",
             "|---|---|---|---|"]
    from_upgrade = {"ReduceMean": 1, "ReduceMax": 1, "ReduceMin": 1, "ReduceProd": 1,
                    "ReduceL1": 1, "ReduceL2": 1, "ReduceLogSum": 1, "ReduceLogSumExp": 1,
                    "ReduceSumSquare": 1, "ReduceSum": 1, "Squeeze": 1, "Unsqueeze": 1,
                    "Split": 2}
    for op in ops:
        domain = "com.microsoft" if op.prefix else "ai.onnx"
        vs = ", ".join(map(str, op.versions))
        if not op.prefix and op.name in from_upgrade:
            vs += " (older forms upgraded, from " + str(from_upgrade[op.name]) + ")"
        lines.append(f"| {domain} | {op.name} | `onnx.{op.mnemonic}` | {vs} |")
    return "\n".join(lines) + "\n"


def main():
    ops = collect()
    with open(os.path.join(ROOT, "dialects/onnx/IR/ONNXOps.gen.td"), "w") as f:
        f.write(gen_td(ops))
    with open(os.path.join(ROOT, "lib/Importer/ONNX/OpSchemaTable.inc"), "w") as f:
        f.write(gen_table(ops))
    os.makedirs(os.path.join(ROOT, "docs"), exist_ok=True)
    with open(os.path.join(ROOT, "docs/onnx-ops.md"), "w") as f:
        f.write(gen_doc(ops))
    print(f"generated {len(ops)} ops", file=sys.stderr)


if __name__ == "__main__":
    main()
