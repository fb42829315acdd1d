#!/usr/bin/env python3
"""Writes the fixtures of the runtime's unit tests to test/Unit/Inputs/.

  *.npy      arrays saved by numpy itself (np.save / format.write_array), so
             the reader is checked against the real producer, not against
             our own writer; bad_*.npy are ones the reader must reject
  *.pb       ONNX TensorProtos written with the onnx package; bad_*.pb carry
             exactly one defect each

Every file is a few hundred bytes. Deterministic: no randomness or
timestamps, so a rerun writes identical bytes (check with `git diff --stat`).

Usage: .venv/bin/python scripts/gen_runtime_test_inputs.py [--out DIR]
"""

import argparse
import os

import ml_dtypes
import numpy as np
from numpy.lib import format as npy_format
from onnx import TensorProto, helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUT = os.path.join(ROOT, "test", "Unit", "Inputs")


def npy_fixtures(out):
    def save(name, array, **kw):
        np.save(os.path.join(out, name), array, **kw)

    save("f32_2x3.npy", (np.arange(6, dtype="<f4") * 0.5 - 1).reshape(2, 3))
    save("i64_scalar.npy", np.array(-1234567890123, dtype="<i8"))
    save("bool_5.npy", np.array([True, False, True, True, False]))
    # 65504 is float16's largest finite value, 6e-08 rounds to its smallest
    # subnormal (2^-24).
    save("f16_4.npy", np.array([1.0, -2.5, 65504.0, 6e-08], dtype="<f2"))
    # numpy has no bfloat16: ml_dtypes' arrays save as the opaque '<V2'.
    save("bf16_3.npy", np.array([1.5, -2.0, 3.140625], dtype=ml_dtypes.bfloat16))
    # Format 2.0 (4-byte header length), which np.save only picks for huge
    # headers, forced here.
    with open(os.path.join(out, "f32_v2.npy"), "wb") as f:
        npy_format.write_array(f, np.array([[1, 2], [3, 4]], dtype="<f4"),
                               version=(2, 0))
    # Rejected: a Fortran-order 2-D array, big-endian data, an object array.
    save("bad_fortran.npy", np.asfortranarray(np.arange(6, dtype="<f4").reshape(2, 3)))
    save("bad_bigendian.npy", np.array([1, 2, 3], dtype=">f4"))
    save("bad_object.npy", np.array([1, "a", None], dtype=object), allow_pickle=True)


def pb_fixtures(out):
    def save(name, t):
        with open(os.path.join(out, name), "wb") as f:
            f.write(t.SerializeToString())

    def raw(name, dtype, dims, data):
        t = TensorProto()
        t.name = name
        t.data_type = dtype
        t.dims.extend(dims)
        t.raw_data = data
        return t

    # Accepted: typed fields (the form helper.make_tensor writes).
    save("typed_f32.pb", helper.make_tensor("x", TensorProto.FLOAT, [2, 2],
                                            [1.0, 2.0, 3.0, 4.0]))
    save("typed_i8.pb", helper.make_tensor("q", TensorProto.INT8, [3], [-128, 0, 127]))
    save("typed_f16.pb", helper.make_tensor(
        "h", TensorProto.FLOAT16, [2], np.array([1.0, -2.5], dtype=np.float16)))
    save("raw_i64.pb", raw("idx", TensorProto.INT64, [2],
                           np.array([7, -9], dtype="<i8").tobytes()))

    six = np.arange(6, dtype="<f4").tobytes()
    # raw_data 4 bytes short of 6 floats.
    save("bad_raw_short.pb", raw("w", TensorProto.FLOAT, [2, 3], six[:-4]))
    # Both raw_data and float_data.
    t = raw("w", TensorProto.FLOAT, [2], six[:8])
    t.float_data.extend([1.0, 2.0])
    save("bad_raw_and_float.pb", t)
    save("bad_negative_dim.pb", raw("w", TensorProto.FLOAT, [-1, 6], six))
    # 162 * 341606371735362067 wraps to 6 in int64.
    save("bad_overflow_dims.pb", raw("w", TensorProto.FLOAT,
                                     [162, 341606371735362067], six))
    save("bad_typed_count.pb", helper.make_tensor("w", TensorProto.FLOAT, [2, 2],
                                                  [1.0, 2.0, 3.0]))
    t = TensorProto()
    t.name = "w"
    t.data_type = TensorProto.FLOAT
    t.dims.extend([2])
    t.int64_data.extend([1, 2])
    save("bad_wrong_field.pb", t)
    t = helper.make_tensor("q", TensorProto.INT8, [1], [0])
    t.int32_data[0] = 300
    save("bad_int8_range.pb", t)
    t = TensorProto()
    t.name = "w"
    t.data_type = TensorProto.FLOAT
    t.dims.extend([2])
    t.data_location = TensorProto.EXTERNAL
    entry = t.external_data.add()
    entry.key, entry.value = "location", "weights.bin"
    save("bad_external.pb", t)
    save("bad_string.pb", helper.make_tensor("s", TensorProto.STRING, [1], [b"a"]))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=DEFAULT_OUT)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    npy_fixtures(args.out)
    pb_fixtures(args.out)


if __name__ == "__main__":
    main()
