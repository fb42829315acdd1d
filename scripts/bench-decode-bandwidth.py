#!/usr/bin/env python3
"""Batch-1 decode of paged-KV artifacts against the machine's memory
bandwidth, measured in the same run: a STREAM triad (xfmr-kernel-bench,
one thread) before and after each artifact's decode (xfmr-bench, one
request, --threads threads). A decode step reads every weight once, so
bytes per token ~ the size of the weights buffer (manifest weights.size:
weights.bin, plus what an artifact built with --weights=reference reads
from the model's files); the ratio is (weight bytes x tok/s) / triad
bytes/s.

  .venv/bin/python scripts/bench-decode-bandwidth.py ART.xfa [ART.xfa ...] [--threads 1] [--new 32]
"""

import argparse
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def triad(bin_dir):
    out = subprocess.run([os.path.join(bin_dir, "xfmr-kernel-bench")], capture_output=True,
                         text=True, check=True).stdout
    m = re.search(r"stream triad \(fp32\)\s+-\s+([0-9.]+)", out)
    if not m:
        raise RuntimeError("no triad line in: " + out)
    return float(m.group(1))


def decode(bin_dir, art, threads, new):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    r = subprocess.run([os.path.join(bin_dir, "xfmr-bench"), art, "--synthetic",
                        "requests=1,prompt=16,output=%d" % new, "--json"],
                       capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise RuntimeError("xfmr-bench %s failed: %s" % (art, r.stderr[-1000:]))
    d = json.loads(r.stdout.strip().splitlines()[-1])
    return 1000.0 / d["tpot_p50_ms"]


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("artifacts", nargs="+")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--new", type=int, default=32, help="tokens per decode run")
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    a = ap.parse_args()
    print("%-40s %8s %10s %10s %10s %8s" % ("artifact", "tok/s", "GB/token", "GB/s",
                                             "triad GB/s", "ratio"))
    for art in a.artifacts:
        before = triad(a.bin)
        tps = decode(a.bin, art, a.threads, a.new)
        after = triad(a.bin)
        with open(os.path.join(art, "manifest.json")) as f:
            gb = json.load(f)["weights"]["size"] / 1e9
        t = (before + after) / 2
        print("%-40s %8.2f %10.3f %10.2f %10.2f %8.2f" % (os.path.basename(art.rstrip("/")), tps,
                                                          gb, gb * tps, t, gb * tps / t))
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
