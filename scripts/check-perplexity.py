#!/usr/bin/env python3
"""Checks `xfmr-run perplexity` against onnxruntime on the same model and tokens.

For each causal LM given (an ONNX file with input_ids [and attention_mask,
position_ids] in and logits first out, e.g. examples/hf/llama_ts.onnx):
writes seeded random token ids, compiles the model with xfmr-compile, runs
`xfmr-run perplexity --json` and computes the same quantity with
onnxruntime (the same consecutive windows, every token but a window's first
scored from the logits before it, log-softmax in float64). PASS when the two
perplexities agree within 1e-4 relative.

  .venv/bin/python scripts/check-perplexity.py --build-dir build examples/hf/llama_ts.onnx [...]

Prints one PASS/FAIL line per model and `N passed, M failed, K skipped`.
"""

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from xfmr_refs import Tally, reference_session  # noqa: E402

RTOL = 1e-4


def ort_perplexity(model_path, ids, context):
    sess = reference_session(model_path)
    names = [i.name for i in sess.get_inputs()]
    nll, scored = 0.0, 0
    for begin in range(0, len(ids) - 1, context):
        w = ids[begin:begin + context]
        feed = {}
        for n in names:
            if n == "input_ids":
                feed[n] = w[None, :].astype(np.int64)
            elif n == "attention_mask":
                feed[n] = np.ones((1, len(w)), np.int64)
            elif n == "position_ids":
                feed[n] = np.arange(len(w), dtype=np.int64)[None, :]
            else:
                raise SystemExit("%s: input %s is not fed" % (model_path, n))
        logits = sess.run(None, feed)[0][0].astype(np.float64)
        m = logits.max(axis=-1, keepdims=True)
        logp = logits - m - np.log(np.exp(logits - m).sum(axis=-1, keepdims=True))
        for i in range(1, len(w)):
            nll -= logp[i - 1, w[i]]
            scored += 1
    return math.exp(nll / scored), scored


def check(model, build, work, tokens, context, vocab_hint):
    name = os.path.splitext(os.path.basename(model))[0]
    sess = reference_session(model)
    vocab = sess.get_outputs()[0].shape[-1]
    vocab = vocab if isinstance(vocab, int) else vocab_hint
    ids = np.random.default_rng(0).integers(0, vocab, size=tokens, dtype=np.int64)
    tok_path = os.path.join(work, name + ".tokens.npy")
    np.save(tok_path, ids)
    art = os.path.join(work, name + ".xfa")
    r = subprocess.run([os.path.join(build, "bin", "xfmr-compile"), model, "-o", art, "--quiet"],
                       capture_output=True, text=True)
    if r.returncode == 0:
        r = subprocess.run([os.path.join(build, "bin", "xfmr-run"), "perplexity", art, "--tokens",
                            tok_path, "--context", str(context), "--json", "--quiet"],
                           capture_output=True, text=True)
    if r.returncode != 0:
        return False, (r.stderr.strip().splitlines() or ["exit %d" % r.returncode])[0]
    ours = json.loads(r.stdout)
    ref, scored = ort_perplexity(model, ids, context)
    rel = abs(ours["perplexity"] - ref) / ref
    ok = rel <= RTOL and ours["tokens"] == scored
    return ok, "perplexity %.6f vs onnxruntime %.6f (rel %.2e), %d tokens" % (
        ours["perplexity"], ref, rel, ours["tokens"])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="+")
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--tokens", type=int, default=70, help="token count (default %(default)s)")
    ap.add_argument("--context", type=int, default=32, help="window (default %(default)s)")
    ap.add_argument("--vocab", type=int, default=256,
                    help="vocabulary when the logits' last dim is symbolic (default %(default)s)")
    a = ap.parse_args()
    tally = Tally()
    with tempfile.TemporaryDirectory(prefix="xfmr-ppl-") as work:
        for model in a.models:
            ok, detail = check(model, a.build_dir, work, a.tokens, a.context, a.vocab)
            tally.add(os.path.basename(model), [("PASS" if ok else "FAIL", "perplexity", detail)])
    return tally.finish()


if __name__ == "__main__":
    sys.exit(main())
