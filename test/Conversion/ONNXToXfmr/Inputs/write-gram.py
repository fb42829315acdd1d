"""Writes a calibration file (JSON + .gram companion) for gptq.mlir: two
products (0 and 1) of 32 input channels, both with second moment H of the
given kind: identity, diagonal (H_kk = k + 1) or correlated (0.9^|i-j|).
Usage: write-gram.py OUT.json KIND [--bad-offset]
"""
import json
import os
import struct
import sys

K = 32
path, kind = sys.argv[1], sys.argv[2]
if kind == "identity":
    h = [[1.0 if i == j else 0.0 for j in range(K)] for i in range(K)]
elif kind == "diagonal":
    h = [[float(i + 1) if i == j else 0.0 for j in range(K)] for i in range(K)]
else:
    h = [[0.9 ** abs(i - j) for j in range(K)] for i in range(K)]
flat = [v for row in h for v in row]
with open(path + ".gram", "wb") as f:
    f.write(struct.pack("<%df" % len(flat), *flat))
offset = 1 if "--bad-offset" in sys.argv else 0
products = []
for p in (0, 1):
    diag = [h[k][k] for k in range(K)]
    products.append({"product": p, "rows": 64, "max": [2.0] * K, "mean_abs": [1.0] * K,
                     "mean_square": diag, "gram_offset": offset})
json.dump({"format": "xfmr-calibration", "version": 1, "source": "write-gram.py",
           "tokens": 64, "gram_file": os.path.basename(path) + ".gram",
           "products": products}, open(path, "w"))
