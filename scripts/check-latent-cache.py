#!/usr/bin/env python3
"""Checks the paged KV cache of latent attention (DeepSeek's MLA) by perplexity.

For each model (a DeepSeek-V3 export): the forward artifact (no KV cache,
the exported graph's own expansion of the latent; numerics against
onnxruntime are check-hf-corpus.py's) and step functions with the latent
cache in f32, bf16, int8 and fp8-e4m3 run `xfmr-run perplexity` over the
same random tokens, the step functions in chunks of --chunk tokens, so every
window reads its earlier tokens back from the pools across chunk and block
boundaries. Checks:

  - the f32 latent cache gives the forward artifact's perplexity within
    1e-6 relative (the absorbed form computes the same function);
  - each narrower cache stays within --tolerance (relative, default 1e-4) of
    the f32 cache: the latent and the RoPE key are rounded per token, so the
    change is small; a dequantization that drops the scales moved it by
    3e-3 on the corpus model, 700x the int8 change.

  .venv/bin/python scripts/check-latent-cache.py --build-dir build [--opt=-O0] \\
      [--modes bf16,int8,fp8-e4m3] MODEL.onnx [...]

Prints one line per model and cache and `N passed, M failed, 0 skipped`.
"""

import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("%s failed:\n%s" % (" ".join(cmd[:2]), r.stderr.strip()[-2000:]))
    return r.stdout


def perplexity(bin_dir, model, work, tokens, context, chunk, opt, kv_dtype=None):
    tag = kv_dtype or "forward"
    art = os.path.join(work, "%s-%s.xfa" % (os.path.basename(model), tag))
    cmd = [os.path.join(bin_dir, "xfmr-compile"), model, "--quiet", "-o", art] + ([opt] if opt else [])
    if kv_dtype:
        cmd += ["--kv-cache=paged", "--kv-dtype=" + kv_dtype]
    run(cmd)
    cmd = [os.path.join(bin_dir, "xfmr-run"), "perplexity", art, "--tokens", tokens,
           "--context", str(context), "--quiet"]
    if kv_dtype:
        cmd += ["--chunk", str(chunk)]
    out = run(cmd)
    return float(out.split("perplexity:")[1].split()[0])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--modes", default="bf16,int8,fp8-e4m3")
    ap.add_argument("--vocab", type=int, default=128, help="random tokens below this id")
    ap.add_argument("--tokens", type=int, default=600)
    ap.add_argument("--context", type=int, default=128)
    ap.add_argument("--chunk", type=int, default=40)
    ap.add_argument("--tolerance", type=float, default=1e-4)
    ap.add_argument("--opt", default="", help="passed to xfmr-compile, e.g. --opt=-O0")
    args = ap.parse_args()
    bin_dir = os.path.join(args.build_dir, "bin")
    passed = failed = 0
    with tempfile.TemporaryDirectory() as work:
        tokens = os.path.join(work, "tokens.npy")
        rng = np.random.default_rng(0)
        np.save(tokens, rng.integers(0, args.vocab, size=args.tokens, dtype=np.int64))
        for model in args.models:
            name = os.path.basename(model).replace(".onnx", "")
            try:
                ref = perplexity(bin_dir, model, work, tokens, args.context, args.chunk, args.opt)
                f32 = perplexity(bin_dir, model, work, tokens, args.context, args.chunk, args.opt,
                                 "f32")
            except RuntimeError as e:
                print("FAIL %s f32: %s" % (name, e))
                failed += 1
                continue
            rel = abs(f32 - ref) / ref
            ok = rel <= 1e-6
            print("%s %s f32: perplexity %.6f, forward %.6f (rel %.1e)"
                  % ("PASS" if ok else "FAIL", name, f32, ref, rel))
            passed += ok
            failed += not ok
            for mode in [m for m in args.modes.split(",") if m]:
                try:
                    ppl = perplexity(bin_dir, model, work, tokens, args.context, args.chunk,
                                     args.opt, mode)
                except RuntimeError as e:
                    print("FAIL %s %s: %s" % (name, mode, e))
                    failed += 1
                    continue
                rel = abs(ppl - f32) / f32
                ok = rel <= args.tolerance
                print("%s %s %s: perplexity %.6f, f32 cache %.6f (rel %.1e, tolerance %.0e)"
                      % ("PASS" if ok else "FAIL", name, mode, ppl, f32, rel, args.tolerance))
                passed += ok
                failed += not ok
    print("%d passed, %d failed, 0 skipped" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
