#!/usr/bin/env python3
"""Corrupts a good artifact in every way a copy, a disk or a hand can, and
checks that each tool refuses each one: exit status 1 (not a signal), one
line on stderr, naming the problem.

  corrupt_artifacts.py GOOD.xfa WORKDIR -- TOOL [ARGS...]

TOOL is run as `TOOL ARTIFACT ARGS...` (or with ARTIFACT in place of an
argument `{}`) on a corrupted copy of GOOD.xfa for every case. Prints "ok NAME" per refused case and "FAIL NAME: why" otherwise;
exits 1 if any case failed. Standard library only (runs under lit's Python).
"""

import json
import os
import shutil
import subprocess
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def dump(path, manifest):
    with open(path, "w") as f:
        json.dump(manifest, f, indent=2)


def rewrite(path, fn):
    with open(path, "rb") as f:
        data = bytearray(f.read())
    data = fn(data)
    with open(path, "wb") as f:
        f.write(bytes(data))


def flip_middle(data):
    data[len(data) // 2] ^= 0xFF
    return data


def garble_json(data):
    mid = len(data) // 2
    data[mid:mid + 8] = b"\x00{]\xff\"\\x"
    return data


def edit_manifest(fn):
    def apply(d):
        path = os.path.join(d, "manifest.json")
        m = load(path)
        fn(m)
        dump(path, m)
    return apply


def symlink_to_copy(name):
    def apply(d):
        real = os.path.join(d, "real-" + name)
        os.rename(os.path.join(d, name), real)
        os.symlink("real-" + name, os.path.join(d, name))
    return apply


def replace_with_dir(name):
    def apply(d):
        os.remove(os.path.join(d, name))
        os.mkdir(os.path.join(d, name))
    return apply


def replace_with_fifo(name):
    def apply(d):
        os.remove(os.path.join(d, name))
        os.mkfifo(os.path.join(d, name))
    return apply


def truncate(name, keep=0.5):
    def apply(d):
        rewrite(os.path.join(d, name), lambda b: b[: int(len(b) * keep)])
    return apply


def remove(name):
    return lambda d: os.remove(os.path.join(d, name))


def absent_cpu_feature():
    """A feature the runtime knows and this CPU lacks (AMD's XOP/FMA4 are on
    no Intel CPU and on no AMD CPU since Zen)."""
    flags = set()
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
    for llvm_name, cpuinfo_name in [("xop", "xop"), ("fma4", "fma4"),
                                    ("amx-tile", "amx_tile"),
                                    ("avx512fp16", "avx512_fp16")]:
        if cpuinfo_name not in flags:
            return llvm_name
    return None


def cases():
    feature = absent_cpu_feature()
    c = [
        ("manifest-truncated", truncate("manifest.json"), "manifest.json: not valid JSON"),
        ("manifest-garbled", lambda d: rewrite(os.path.join(d, "manifest.json"), garble_json),
         "manifest.json: not valid JSON"),
        ("manifest-empty", truncate("manifest.json", 0), "manifest.json: not valid JSON"),
        ("manifest-missing", remove("manifest.json"), "manifest.json: cannot open"),
        ("manifest-symlink", symlink_to_copy("manifest.json"), "manifest.json: is a symbolic link"),
        ("manifest-directory", replace_with_dir("manifest.json"), "manifest.json: not a regular file"),
        ("library-truncated", truncate("model.so"), "model.so: size is"),
        ("library-garbled", lambda d: rewrite(os.path.join(d, "model.so"), flip_middle),
         "model.so: SHA-256 is"),
        ("library-missing", remove("model.so"), "model.so: cannot open"),
        ("library-symlink", symlink_to_copy("model.so"), "model.so: is a symbolic link"),
        ("library-fifo", replace_with_fifo("model.so"), "model.so: not a regular file"),
        ("weights-truncated", truncate("weights.bin"), "weights.bin: size is"),
        ("weights-garbled", lambda d: rewrite(os.path.join(d, "weights.bin"), flip_middle),
         "weights.bin: SHA-256 is"),
        ("weights-missing", remove("weights.bin"), "weights.bin: cannot open"),
        ("weights-symlink", symlink_to_copy("weights.bin"), "weights.bin: is a symbolic link"),
        ("weights-directory", replace_with_dir("weights.bin"), "weights.bin: not a regular file"),
        ("wrong-library-size",
         edit_manifest(lambda m: m["files"]["model.so"].update(size=m["files"]["model.so"]["size"] + 1)),
         "model.so: size is"),
        ("wrong-weights-hash",
         edit_manifest(lambda m: m["files"]["weights.bin"].update(sha256="0" * 64)),
         "weights.bin: SHA-256 is"),
        ("bad-hash-text", edit_manifest(lambda m: m["files"]["model.so"].update(sha256="xyz")),
         "files.model.so.sha256: expected 64 lowercase hex digits"),
        ("abi-version-1", edit_manifest(lambda m: m.update(abi_version=1)),
         "abi_version: unsupported version 1"),
        ("format-version-1", edit_manifest(lambda m: m.update(format_version=1)),
         "format_version: unsupported version 1"),
        ("library-outside", edit_manifest(lambda m: m.update(library="../model.so")),
         "library: '../model.so' must be a file name inside the artifact directory"),
        ("unknown-cpu-feature",
         edit_manifest(lambda m: m["target"]["requires"].append("quantum-ops")),
         "quantum-ops (unknown to this runtime)"),
        ("weights-size-disagrees", edit_manifest(lambda m: m["weights"].update(size=3)),
         "disagrees with weights.size 3"),
    ]
    if feature:
        c.append(("missing-cpu-feature",
                  edit_manifest(lambda m: m["target"]["requires"].append(feature)),
                  "needs CPU feature(s) this CPU lacks: " + feature))
    return c


def main():
    sep = sys.argv.index("--")
    good, work = sys.argv[1], sys.argv[2]
    tool = sys.argv[sep + 1:]
    failed = 0
    for name, corrupt, expected in cases():
        d = os.path.join(work, name + ".xfa")
        shutil.rmtree(d, ignore_errors=True)
        shutil.copytree(good, d, symlinks=True)
        corrupt(d)
        argv = [d if a == "{}" else a for a in tool] if "{}" in tool else [tool[0], d] + tool[1:]
        p = subprocess.run(argv, capture_output=True, text=True,
                           errors="replace", timeout=120)
        lines = [l for l in p.stderr.splitlines() if l.strip()]
        why = None
        if p.returncode < 0:
            why = "killed by signal %d" % -p.returncode
        elif p.returncode != 1:
            why = "exit status %d, not 1" % p.returncode
        elif len(lines) != 1:
            why = "%d lines on stderr, not 1: %r" % (len(lines), lines)
        elif expected not in lines[0] or d not in lines[0]:
            why = "stderr %r does not name %r in %s" % (lines[0], expected, d)
        if why:
            failed += 1
            print("FAIL %s: %s" % (name, why))
        else:
            print("ok %s" % name)
    print("%d cases, %d failed" % (len(cases()), failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
