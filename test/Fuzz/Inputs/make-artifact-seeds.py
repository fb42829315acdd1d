#!/usr/bin/env python3
"""Writes the seed corpus of xfmr-artifact-fuzzer (artifact/*.seed).

Each seed is the fuzzer's container (tools/xfmr-artifact-fuzzer): an 8-byte
header (model.so kind, weights.bin kind, manifest.json kind, run extent, a
4-byte parameter), the manifest, "\\n--8<--\\n", weights.bin, "\\n--8<--\\n" and
raw library bytes. Manifests use the fuzzer's placeholders (@FORMAT_VERSION@,
@ABI_VERSION@, @LIBRARY_SHA256@, ...) so that the seeds stay valid whatever the test
libraries of a build hash to. Run it from anywhere; it rewrites the folder.
"""
import json
import os
import struct

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "artifact")
SEP = b"\n--8<--\n"


def manifest(inputs, outputs, weights_size="@WEIGHTS_SIZE@", count=2, extra=None,
             target=None):
    m = {
        "format": "xfmr-artifact", "format_version": "@FORMAT_VERSION@",
        "abi_version": "@ABI_VERSION@",
        "compiler": "hand-written", "source": "fake_model.c",
        "target": target or {"kind": "cpu", "triple": "x86_64-pc-linux-gnu",
                             "requires": ["sse2"]},
        "checks": ["fake: negative input"],
        "library": "model.so", "entry": "xfmr_entry",
        "weights": {"file": "weights.bin", "size": weights_size, "alignment": 64,
                    "count": count},
        "files": {"model.so": {"size": "@LIBRARY_SIZE@", "sha256": "@LIBRARY_SHA256@"},
                  "weights.bin": {"size": "@WEIGHTS_SIZE@", "sha256": "@WEIGHTS_SHA256@"}},
        "inputs": inputs, "outputs": outputs,
    }
    m.update(extra or {})
    text = json.dumps(m)
    # Placeholders stand for numbers: drop their quotes.
    for word in ["@FORMAT_VERSION@", "@ABI_VERSION@", "@WEIGHTS_SIZE@", "@LIBRARY_SIZE@"]:
        text = text.replace('"%s"' % word, word)
    return text.encode()


def seed(name, header, manifest_text, weights=b"", library=b""):
    with open(os.path.join(HERE, name + ".seed"), "wb") as f:
        f.write(header + manifest_text + SEP + weights + SEP + library)


X = [{"name": "x", "dtype": "float32", "shape": ["n"]}]
Y = [{"name": "y", "dtype": "float32", "shape": ["n"]}]


def floats(*values):
    return struct.pack("<%df" % len(values), *values)


def main():
    os.makedirs(HERE, exist_ok=True)
    for f in os.listdir(HERE):
        os.remove(os.path.join(HERE, f))
    # fake_model.c in each of its result modes (weights = [bias, mode]).
    for mode in range(9):
        outputs = Y
        if mode == 2:
            outputs = Y + [{"name": "y2", "dtype": "float32", "shape": ["n"]}]
        if mode == 7:
            outputs = [{"name": "y", "dtype": "float32", "shape": [2, "n"]}]
        seed("fake-mode%d" % mode, b"0003\0\0\0\0", manifest(X, outputs), floats(1.0, mode))
    seed("fake-mode8-negative", b"0003\1\0\0\0", manifest(X, Y), floats(1.0, 8))
    # Static extents, no weights, an empty input.
    seed("fake-static", b"0005\0\0\0\0",
         manifest([{"name": "x", "dtype": "float32", "shape": [4]}],
                  [{"name": "y", "dtype": "float32", "shape": [4]}], count=0))
    seed("fake-empty-input", b"0000\0\0\0\0", manifest(X, Y), floats(0.5))
    # The step function of PagedKVTest.
    step_inputs = [
        {"name": "input_ids", "dtype": "int64", "shape": ["tokens"]},
        {"name": "positions", "dtype": "int64", "shape": ["tokens"]},
        {"name": "slot_mapping", "dtype": "int64", "shape": ["tokens"]},
        {"name": "block_tables", "dtype": "int32", "shape": ["seqs", "max_blocks"]},
        {"name": "context_lens", "dtype": "int32", "shape": ["seqs"]},
        {"name": "query_start_loc", "dtype": "int32", "shape": ["seqs_plus_one"]},
        {"name": "logits_indices", "dtype": "int64", "shape": ["outputs"]},
        {"name": "key_cache.0", "dtype": "float32", "shape": ["num_blocks", 4, 1, 1],
         "role": "kv_pool"},
        {"name": "value_cache.0", "dtype": "float32", "shape": ["num_blocks", 4, 1, 1],
         "role": "kv_pool"}]
    step_outputs = [{"name": "logits", "dtype": "float32", "shape": ["outputs", 4]}]
    kv = {"kv_cache": {"block_size": 4, "num_layers": 1, "num_kv_heads": 1, "head_dim": 1}}
    seed("step", b"1000\x03\x02\0\0", manifest(step_inputs, step_outputs, count=0, extra=kv))
    # KV pools without elements (head_dim extent 0): rejected before the
    # step function would write into them.
    for pool in step_inputs[7:]:
        pool["shape"] = ["num_blocks", 4, 1, 0]
    seed("step-empty-pool", b"1000\x03\x02\0\0",
         manifest(step_inputs, step_outputs, count=0, extra=kv))
    # Corrupted libraries: truncated, one byte flipped, raw bytes.
    good = manifest(X, Y)
    w = floats(1.0, 0)
    seed("lib-truncated", b"2000\x00\x10\0\0", good, w)
    seed("lib-truncated-header", b"2000\x20\0\0\0", good, w)
    seed("lib-flipped", b"3000\x00\x01\0\x40", good, w)
    seed("lib-raw-elf", b"4000\0\0\0\0", good, w, b"\x7fELF\x02\x01\x01" + b"\0" * 57)
    seed("lib-raw-empty", b"4000\0\0\0\0", good, w)
    # Missing, symlinked and non-regular entries.
    seed("lib-absent", b"5000\0\0\0\0", good, w)
    seed("lib-symlink", b"6003\0\0\0\0", good, w)
    seed("lib-directory", b"7000\0\0\0\0", good, w)
    seed("lib-fifo", b"8000\0\0\0\0", good, w)
    seed("weights-absent", b"0400\0\0\0\0", good, w)
    seed("weights-symlink", b"0503\0\0\0\0", good, w)
    seed("weights-directory", b"0600\0\0\0\0", good, w)
    seed("weights-fifo", b"0700\0\0\0\0", good, w)
    seed("manifest-absent", b"0050\0\0\0\0", good, w)
    seed("manifest-directory", b"0060\0\0\0\0", good, w)
    seed("manifest-symlink", b"0073\0\0\0\0", good, w)
    # Sizes that disagree with the files.
    seed("weights-size-wrong", b"0000\0\0\0\0", manifest(X, Y, weights_size=12), w)
    seed("weights-size-huge", b"0000\0\0\0\0", manifest(X, Y, weights_size=2**62), w)
    # Digests that are not the files'.
    bad = manifest(X, Y).replace(b"@WEIGHTS_SHA256@", b"0" * 64)
    seed("weights-sha-wrong", b"0003\0\0\0\0", bad, w)
    bad = manifest(X, Y).replace(b'"@LIBRARY_SHA256@"', b'"' + b"a" * 64 + b'"')
    seed("lib-sha-wrong", b"0003\0\0\0\0", bad, w)
    bad = manifest(X, Y).replace(b"@LIBRARY_SIZE@", b"4096")
    seed("lib-size-wrong", b"0003\0\0\0\0", bad, w)
    # Features the host lacks, another target.
    seed("target-features", b"0003\0\0\0\0",
         manifest(X, Y, target={"kind": "cpu", "triple": "x86_64-pc-linux-gnu",
                                "cpu": "sapphirerapids",
                                "features": "+avx512f,+avx512bw,+amx-tile",
                                "requires": ["avx512f", "avx512bw", "amx-tile"]}), w)
    seed("target-unknown-feature", b"0003\0\0\0\0",
         manifest(X, Y, target={"kind": "cpu", "requires": ["no-such-feature"]}), w)
    seed("target-cuda", b"0000\0\0\0\0",
         manifest(X, Y, target={"kind": "cuda", "requires": []}), w)
    # Garbled manifests.
    seed("manifest-truncated", b"0000\0\0\0\0", good[: len(good) // 2], w)
    seed("manifest-not-object", b"0000\0\0\0\0", b"[1, 2, 3]", w)


main()
