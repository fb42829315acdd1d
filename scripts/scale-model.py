#!/usr/bin/env python3
"""Which topology fits: decode speed and memory per rank at 1-64 ranks.

Powers of two and the divisors of the query heads (TP) or layers (PP).

The prediction starts from one measured rank: the batch-B decode step time
(TPOT) of a single-process step-function artifact (xfmr-bench), and the bytes
that step reads (its weights, plus the KV cache at the given context).
Decode reads memory more than it computes, so a rank's compute time is taken
as proportional to the bytes it reads. The collectives are added on a link
of the given bandwidth and latency.

- Tensor parallel (TP, N ranks), as xfmr-compile --tensor-parallel builds it
  (docs/parallelism.md):
  - each rank reads 1/N of the weights;
  - it reads the KV of its own KV heads: Hkv/N, or 1 when N > Hkv;
  - per step: 2 all-reduces per layer (T x H floats each), one for the
    embedding, and one all-gather of the logits (T x V);
  - our all-reduce is an all-gather followed by a sum in rank order, which
    sends (N - 1) x count floats per rank;
  - N must divide Hq, the MLP width and V, and divide Hkv or be a multiple
    of it.
- Pipeline parallel (PP, M stages), as xfmr-compile --pipeline-parallel
  builds it:
  - each stage reads 1/M of the layers;
  - one request's token still passes every stage, so its TPOT is the single
    rank's plus (M - 1) hops of T x H floats and the broadcast of the
    logits (T x V floats, log2 M rounds);
  - the stages take turns (no micro-batching), so tokens/s is batch / TPOT;
    the JSON's tok_s_in_flight is what M batches in flight would give (not
    built).

Memory per rank = weights + the KV of `--requests` x `--context` tokens.
The prediction ignores compute-bound prefill, the speed of the rank's
kernels at 1/N of the width (smaller products run less efficiently), and
contention when ranks share a machine's memory bandwidth. It is a fit
check, not a benchmark.

  .venv/bin/python scripts/scale-model.py build/models/smollm2-none.xfa \\
      --config build/models/smollm2/config.json [--link-gbs 25 --latency-us 10]
"""

import argparse
import json
import math
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KV_BYTES = {"f32": 4, "bf16": 2, "f16": 2, "int8": 1, "fp8-e4m3": 1}


def measure_tpot(bench, artifact, batch, prompt, output):
    spec = f"requests={batch},prompt={prompt},output={output}"
    out = subprocess.run([bench, artifact, "--synthetic", spec, "--json"], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)["tpot_p50_ms"] / 1000.0


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("artifact", help="a single-process --kv-cache=paged artifact")
    ap.add_argument("--config", required=True,
                    help="the model's config.json (hidden_size, num_attention_heads, ...)")
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--batch", type=int, default=1, help="requests decoded together")
    ap.add_argument("--context", type=int, default=2048, help="tokens of KV per request")
    ap.add_argument("--requests", type=int, default=16, help="requests whose KV is held")
    ap.add_argument("--link-gbs", type=float, default=25.0, help="link bandwidth, GB/s")
    ap.add_argument("--latency-us", type=float, default=10.0, help="per collective")
    ap.add_argument("--tpot-ms", type=float, help="skip the measurement, use this step time")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    with open(os.path.join(args.artifact, "manifest.json")) as f:
        manifest = json.load(f)
    with open(args.config) as f:
        cfg = json.load(f)
    kv = manifest.get("kv_cache")
    if not kv or manifest.get("tensor_parallel") or manifest.get("expert_parallel"):
        sys.exit("scale-model: give a single-process --kv-cache=paged artifact")
    hidden, layers = cfg["hidden_size"], cfg["num_hidden_layers"]
    hq = cfg["num_attention_heads"]
    hkv = cfg.get("num_key_value_heads", hq)
    inter, vocab = cfg.get("intermediate_size", 4 * hidden), cfg["vocab_size"]
    weights = manifest["weights"]["size"]
    dv = kv.get("value_head_dim", kv["head_dim"])
    kv_token = layers * hkv * (kv["head_dim"] + dv) * KV_BYTES.get(kv["dtype"], 4)

    if args.tpot_ms:
        t1 = args.tpot_ms / 1000.0
    else:
        bench = os.path.join(args.build_dir, "bin", "xfmr-bench")
        t1 = measure_tpot(bench, args.artifact, args.batch, 32, 32)
    b = args.batch
    bw = args.link_gbs * 1e9
    lat = args.latency_us * 1e-6
    read1 = weights + b * args.context * kv_token  # bytes one decode step reads

    powers = [1, 2, 4, 8, 16, 32, 64]
    rows = []
    for n in sorted(set(powers + [d for d in range(2, 65) if hq % d == 0])):
        ok = (hq % n == 0 and inter % n == 0 and vocab % n == 0 and
              (hkv % n == 0 or n % hkv == 0))
        if ok:
            kv_heads = max(1, hkv // n)
            kv_rank = kv_token * kv_heads / hkv
            # Weights: KV projections are replicated past Hkv ranks.
            kv_proj = layers * hidden * hkv * (kv["head_dim"] + dv) * 4
            w_rank = (weights - kv_proj) / n + kv_proj * kv_heads / hkv
            read = w_rank + b * args.context * kv_rank
            colls = 2 * layers + 1
            sent = (n - 1) * (colls * b * hidden + b * vocab / n) * 4
            t = t1 * read / read1 + (colls + 1) * lat * (n > 1) + sent / bw
            rows.append({"topology": "TP", "ranks": n, "tpot_ms": t * 1e3,
                         "tok_s": b / t, "weights_gb": w_rank / 1e9,
                         "kv_gb": args.requests * args.context * kv_rank / 1e9,
                         "link_mb_per_token": sent / b / 1e6})
        else:
            rows.append({"topology": "TP", "ranks": n, "fits": False})
    for m in sorted(set(powers[1:] + [d for d in range(2, 65) if layers % d == 0])):
        if layers % m:
            rows.append({"topology": "PP", "ranks": m, "fits": False})
            continue
        hop = lat + b * hidden * 4 / bw
        rounds = math.ceil(math.log2(m))
        bcast = rounds * (lat + b * vocab * 4 / bw)
        t = t1 + (m - 1) * hop + bcast
        rows.append({"topology": "PP", "ranks": m, "tpot_ms": t * 1e3,
                     "tok_s": b / t,
                     "tok_s_in_flight": b * m / (t1 + m * hop + bcast),
                     "weights_gb": weights / m / 1e9,
                     "kv_gb": args.requests * args.context * kv_token / m / 1e9,
                     "link_mb_per_token": (m - 1) * (hidden + vocab) * 4 / 1e6})
    if args.json:
        print(json.dumps({"measured_tpot_ms": t1 * 1e3, "batch": b, "rows": rows}, indent=1))
        return 0
    print(f"measured: one rank, batch {b}: TPOT {t1 * 1e3:.2f} ms; weights "
          f"{weights / 1e9:.3f} GB, KV {kv_token} B/token; link {args.link_gbs:g} GB/s, "
          f"{args.latency_us:g} us")
    print(f"{'':4}{'ranks':>6}{'TPOT ms':>10}{'tok/s':>10}{'weights GB':>12}"
          f"{'KV GB':>9}{'link MB/tok':>12}")
    for r in rows:
        if r.get("fits") is False:
            print(f"{r['topology']:4}{r['ranks']:>6}   does not split "
                  f"({'heads, MLP width or vocabulary' if r['topology'] == 'TP' else 'layers'})")
            continue
        print(f"{r['topology']:4}{r['ranks']:>6}{r['tpot_ms']:>10.2f}{r['tok_s']:>10.1f}"
              f"{r['weights_gb']:>12.3f}{r['kv_gb']:>9.3f}{r['link_mb_per_token']:>12.3f}")
    print("(KV GB: --requests x --context tokens per rank; PP: the stages take turns, the "
          "JSON's tok_s_in_flight has a batch per stage in flight)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
