#!/usr/bin/env python3
"""Writes ONNX's backend node tests from the installed onnx package.

onnx wheels up to 1.19 shipped the generated node tests
(onnx/backend/test/data/node/NAME/{model.onnx,test_data_set_0/*.pb}); 1.23
ships only their generators (onnx.backend.test.case.node). This runs the
generators (`collect_testcases`, ~8 s) and writes the same layout into OUT,
which scripts/onnx-conformance.py reads (lit:
Integration/CPU/onnx-wheel-conformance.test).

OUT/.onnx-version records the onnx version written; a second run with the same
version does nothing (pass --force to rewrite); concurrent runs serialize on
OUT.lock. The directory is written under a temporary name and renamed, so an
interrupted run leaves nothing half written.

  .venv/bin/python scripts/gen-onnx-node-tests.py build/onnx-node-tests
"""

import argparse
import fcntl
import os
import shutil
import sys
import tempfile
import warnings


def write_value(path, value, type_proto, name):
    from onnx import numpy_helper
    if type_proto.HasField("map_type"):
        proto = numpy_helper.from_dict(value, name)
    elif type_proto.HasField("sequence_type"):
        proto = numpy_helper.from_list(value, name)
    elif type_proto.HasField("optional_type"):
        proto = numpy_helper.from_optional(value, name)
    elif hasattr(value, "SerializeToString"):  # a TensorProto already
        proto = value
    else:
        proto = numpy_helper.from_array(value, name)
    with open(path, "wb") as f:
        f.write(proto.SerializeToString())


def write_case(root, case):
    d = os.path.join(root, case.name)
    os.makedirs(d)
    with open(os.path.join(d, "model.onnx"), "wb") as f:
        f.write(case.model.SerializeToString())
    graph = case.model.graph
    for i, (inputs, outputs) in enumerate(case.data_sets):
        ds = os.path.join(d, "test_data_set_%d" % i)
        os.makedirs(ds)
        for j, value in enumerate(inputs):
            write_value(os.path.join(ds, "input_%d.pb" % j), value, graph.input[j].type,
                        graph.input[j].name)
        for j, value in enumerate(outputs):
            write_value(os.path.join(ds, "output_%d.pb" % j), value, graph.output[j].type,
                        graph.output[j].name)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--force", action="store_true")
    a = ap.parse_args()
    import onnx
    parent = os.path.dirname(os.path.abspath(a.out))
    os.makedirs(parent, exist_ok=True)
    # Two tests may ask at once (lit's workers): one writes, the other waits.
    lock = open(os.path.abspath(a.out) + ".lock", "w")
    fcntl.flock(lock, fcntl.LOCK_EX)
    stamp = os.path.join(a.out, ".onnx-version")
    if not a.force and os.path.isfile(stamp) and open(stamp).read().strip() == onnx.__version__:
        print("onnx %s node tests already in %s" % (onnx.__version__, a.out))
        return 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the generators' own numpy warnings
        from onnx.backend.test.case import node as node_test
        cases = [c for c in node_test.collect_testcases() if c.kind == "node"]
    tmp = tempfile.mkdtemp(prefix=".onnx-node-tests-", dir=parent)
    try:
        for case in cases:
            write_case(tmp, case)
        with open(os.path.join(tmp, ".onnx-version"), "w") as f:
            f.write(onnx.__version__ + "\n")
        shutil.rmtree(a.out, ignore_errors=True)
        os.rename(tmp, a.out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    print("wrote %d onnx %s node tests to %s" % (len(cases), onnx.__version__, a.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
