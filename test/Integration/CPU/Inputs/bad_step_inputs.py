#!/usr/bin/env python3
"""Runs a paged step function (xfmr-compile --kv-cache=paged, block size 4,
2 KV heads of 16) through xfmr-run with one well-formed step and with inputs
that point outside what the model holds: token ids outside the vocabulary,
slots outside the KV pool, block ids outside the pool, context lengths past
the block table, query_start_loc past the tokens, logits rows past the
tokens. Each bad step must fail with exit status 1, one line on stderr that
names the failed check, and no signal.

  bad_step_inputs.py XFMR_RUN STEP.xfa WORKDIR [-- WRAPPER...]

WRAPPER (e.g. valgrind --error-exitcode=9) prefixes every xfmr-run call.
Standard library only: the .npy files are written by hand.
"""

import os
import struct
import subprocess
import sys

FORMATS = {"int64": ("<i8", "q"), "int32": ("<i4", "i"), "float32": ("<f4", "f")}


def save_npy(path, dtype, shape, values):
    descr, code = FORMATS[dtype]
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (
        descr, "".join("%d, " % d for d in shape) if len(shape) != 1 else "%d," % shape[0])
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
        f.write(struct.pack("<%d%s" % (len(values), code), *values))


def good_step():
    """One sequence of 3 prompt tokens in block 0 of a 2-block pool."""
    return {
        "input_ids": ("int64", [3], [1, 2, 3]),
        "positions": ("int64", [3], [0, 1, 2]),
        "slot_mapping": ("int64", [3], [0, 1, 2]),
        "block_tables": ("int32", [1, 1], [0]),
        "context_lens": ("int32", [1], [3]),
        "query_start_loc": ("int32", [2], [0, 3]),
        "logits_indices": ("int64", [1], [2]),
    }


def with_(name, dtype, shape, values):
    def edit(step):
        step[name] = (dtype, shape, values)
    return edit


CASES = [
    ("good", None, None),
    ("token-huge", with_("input_ids", "int64", [3], [1, 2, 10**9]), "xfmr.embedding: token id"),
    ("token-negative", with_("input_ids", "int64", [3], [1, -1000, 3]), "xfmr.embedding: token id"),
    ("slot-past-pool", with_("slot_mapping", "int64", [3], [0, 1, 10**6]),
     "xfmr.kv_write: slot past the end of the KV pool"),
    ("block-past-pool", with_("block_tables", "int32", [1, 1], [7]),
     "xfmr.paged_attention: block id outside the KV pool"),
    ("block-negative", with_("block_tables", "int32", [1, 1], [-5]),
     "xfmr.paged_attention: block id outside the KV pool"),
    ("context-past-table", with_("context_lens", "int32", [1], [100]),
     "xfmr.paged_attention: context longer than the block table"),
    ("context-short", with_("context_lens", "int32", [1], [1]),
     "xfmr.paged_attention: context_lens shorter than the new tokens"),
    ("starts-past-tokens", with_("query_start_loc", "int32", [2], [0, 9]),
     "xfmr.paged_attention: query_start_loc past the packed tokens"),
    ("starts-negative", with_("query_start_loc", "int32", [2], [-4, 3]),
     "xfmr.paged_attention: negative query_start_loc"),
    ("starts-descending", with_("query_start_loc", "int32", [2], [3, 0]),
     "xfmr.paged_attention: query_start_loc is not ascending"),
    ("starts-extra-sequence", with_("query_start_loc", "int32", [3], [0, 3, 3]),
     "disagree on the number of sequences"),
    ("logits-row-past-tokens", with_("logits_indices", "int64", [1], [5]),
     "index out of range"),
]


def main():
    args = sys.argv[1:]
    wrapper = []
    if "--" in args:
        i = args.index("--")
        args, wrapper = args[:i], args[i + 1:]
    xfmr_run, step, work = args
    os.makedirs(work, exist_ok=True)
    failed = 0
    for name, edit, expected in CASES:
        inputs = good_step()
        if edit:
            edit(inputs)
        for pool in ("key_cache.0", "value_cache.0", "key_cache.1", "value_cache.1"):
            inputs[pool] = ("float32", [2, 4, 2, 16], [0.0] * (2 * 4 * 2 * 16))
        argv = wrapper + [xfmr_run, step, "--quiet"]
        for tensor, (dtype, shape, values) in inputs.items():
            path = os.path.join(work, "%s.%s.npy" % (name, tensor))
            save_npy(path, dtype, shape, values)
            argv += ["--input", "%s=%s" % (tensor, path)]
        p = subprocess.run(argv, capture_output=True, text=True, errors="replace", timeout=300)
        lines = [l for l in p.stderr.splitlines() if l.strip() and not l.startswith("==")]
        why = None
        if p.returncode < 0:
            why = "killed by signal %d" % -p.returncode
        elif expected is None and p.returncode != 0:
            why = "exit status %d: %s" % (p.returncode, p.stderr.strip())
        elif expected is not None and p.returncode != 1:
            why = "exit status %d, not 1: %s" % (p.returncode, p.stderr.strip())
        elif expected is not None and (len(lines) != 1 or expected not in lines[0]):
            why = "stderr does not say %r in one line: %r" % (expected, lines)
        print(("FAIL %s: %s" % (name, why)) if why else ("ok %s" % name))
        failed += bool(why)
    print("%d cases, %d failed" % (len(CASES), failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
