#!/usr/bin/env python3
"""compare_npy_dirs.py A B [--rtol R]: every A/*.npy equals B/<same name>.npy
in shape and within R * max|A| (default 1e-4); prints one line per file and
exits 1 on a difference or a missing file."""
import argparse
import os
import sys

import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--rtol", type=float, default=1e-4)
    args = ap.parse_args()
    names = sorted(f for f in os.listdir(args.a) if f.endswith(".npy"))
    bad = 0
    for name in names:
        x = np.load(os.path.join(args.a, name)).astype(np.float64)
        path = os.path.join(args.b, name)
        if not os.path.exists(path):
            print("MISSING %s" % name)
            bad += 1
            continue
        y = np.load(path).astype(np.float64)
        if x.shape != y.shape:
            print("SHAPE %s: %s vs %s" % (name, x.shape, y.shape))
            bad += 1
            continue
        diff = float(np.max(np.abs(x - y))) if np.all(np.isfinite(y)) else float("inf")
        tol = args.rtol * float(np.max(np.abs(x)))
        ok = diff <= tol
        bad += not ok
        print("%s %s: max |diff| %.2e (tol %.2e)" % ("SAME" if ok else "DIFF", name, diff, tol))
    print("%d files, %d differ" % (len(names), bad))
    return 1 if bad or not names else 0


if __name__ == "__main__":
    sys.exit(main())
