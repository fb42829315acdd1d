#!/usr/bin/env python3
"""The GEMM model of scripts/gpu-check.sh: y = x[m, 2048] @ W[2048, 8192].

  gpu-check-gemm.py model FILE.onnx     writes the model (W a constant)
  gpu-check-gemm.py weights FILE        writes W's bytes as xfmr-compile lays
                                        them out in weights.bin (f32, row-major)

W is a formula of its indices, exact in f32 on any machine and numpy, so its
64 MiB need not travel to the GPU machine: the device half writes them again,
and the loader's SHA-256 check proves them the same.
"""
import sys

import numpy as np

K, N = 2048, 8192


def weights():
    i = np.arange(K * N, dtype=np.int64)
    return (((i % 251) - 125).astype(np.float32) / np.float32(512)).reshape(K, N)


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("model", "weights"):
        print(__doc__, file=sys.stderr if len(sys.argv) != 2 else sys.stdout)
        return 0 if sys.argv[1:] in (["-h"], ["--help"]) else 2
    what, path = sys.argv[1], sys.argv[2]
    if what == "weights":
        weights().tofile(path)
        return 0
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="gemm")], "gemm",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["m", K])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["m", N])],
                          [numpy_helper.from_array(weights(), "w")])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
