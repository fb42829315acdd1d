#!/usr/bin/env python3
"""Greedy generation through a paged-KV step function against onnxruntime.

For each model, compiles it with `xfmr-compile --kv-cache=paged` and runs
`xfmr-run generate`, then replays the same greedy generation in onnxruntime:
  * forward exports (input_ids, attention_mask, position_ids -> logits): the
    unmodified model on the growing sequence, one full forward per token;
  * exports with past_key_values/present: one prefill with an empty past, then
    one decode step per token feeding `present` back as `past`.
Passes when the generated tokens are identical and every step's last-token
logits agree within 1e-4 * max|ORT logits|. Prints one PASS/FAIL line per case
and "N passed, N failed".

  .venv/bin/python scripts/check-generate.py --build-dir build [--models a,b]
"""

import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# (model, block size, prompt length, new tokens)
CASES = [
    ("llama_gqa", 16, 7, 12),
    ("llama_gqa", 4, 9, 10),        # several blocks, prompt not block-aligned
    ("llama_gqa_past", 16, 6, 10),
    ("mixtral_moe", 8, 5, 8),
]


def ort_forward_greedy(path, prompt, steps):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    ids = list(prompt)
    tokens, logits = [], []
    for _ in range(steps):
        n = len(ids)
        feed = {"input_ids": np.array([ids], np.int64)}
        if "attention_mask" in names:
            feed["attention_mask"] = np.ones((1, n), np.int64)
        if "position_ids" in names:
            feed["position_ids"] = np.arange(n, dtype=np.int64)[None]
        out = sess.run(None, feed)[0][0, -1]
        logits.append(out)
        tokens.append(int(np.argmax(out)))
        ids.append(tokens[-1])
    return tokens, logits


def ort_past_greedy(path, prompt, steps):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    inputs = sess.get_inputs()
    outputs = [o.name for o in sess.get_outputs()]
    past = {}
    for i in inputs:
        if i.name.startswith("past_key_values"):
            heads, dim = i.shape[1], i.shape[3]
            past[i.name] = np.zeros((1, heads, 0, dim), np.float32)
    new = list(prompt)
    total = 0
    tokens, logits = [], []
    for _ in range(steps):
        n = len(new)
        feed = {"input_ids": np.array([new], np.int64),
                "attention_mask": np.ones((1, total + n), np.int64),
                "position_ids": np.arange(total, total + n, dtype=np.int64)[None]}
        feed.update(past)
        res = dict(zip(outputs, sess.run(None, feed)))
        out = res["logits"][0, -1]
        logits.append(out)
        tokens.append(int(np.argmax(out)))
        for name in past:
            past[name] = res[name.replace("past_key_values", "present")]
        total += n
        new = [tokens[-1]]
    return tokens, logits


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--models", default="", help="comma-separated subset")
    args = ap.parse_args()
    bindir = os.path.join(args.build_dir, "bin")
    only = set(filter(None, args.models.split(",")))
    rng = np.random.default_rng(1234)
    passed = failed = 0
    with tempfile.TemporaryDirectory(prefix="xfmr-generate-") as tmp:
        for model, block, plen, steps in CASES:
            if only and model not in only:
                continue
            case = f"{model} block={block} prompt={plen} new={steps}"
            path = os.path.join(ROOT, "examples", "models", model + ".onnx")
            xfa = os.path.join(tmp, f"{model}-{block}.xfa")
            prompt = [int(x) for x in rng.integers(0, 256, plen)]
            c = subprocess.run([os.path.join(bindir, "xfmr-compile"), path, "--kv-cache=paged",
                                f"--block-size={block}", "-O1", "--quiet", "-o", xfa],
                               capture_output=True, text=True)
            if c.returncode:
                print(f"FAIL {case}: compile: {c.stderr.strip()}")
                failed += 1
                continue
            dump = os.path.join(tmp, f"{model}-{block}-logits")
            r = subprocess.run([os.path.join(bindir, "xfmr-run"), "generate", xfa,
                                "--prompt-ids", ",".join(map(str, prompt)),
                                "--max-new-tokens", str(steps), "--dump-logits", dump,
                                "--quiet"], capture_output=True, text=True)
            if r.returncode:
                print(f"FAIL {case}: generate: {r.stderr.strip()}")
                failed += 1
                continue
            ours = [int(t) for t in r.stdout.strip().split(",")]
            ref = ort_past_greedy if "past" in model else ort_forward_greedy
            tokens, logits = ref(path, prompt, steps)
            worst = 0.0
            for k, want in enumerate(logits):
                got = np.load(os.path.join(dump, f"step_{k}.npy"))
                worst = max(worst, float(np.max(np.abs(got - want)) / np.max(np.abs(want))))
            ok = ours == tokens and worst <= 1e-4
            print(f"{'PASS' if ok else 'FAIL'} {case}: tokens {'equal' if ours == tokens else 'differ'}"
                  f" ({ours} vs onnxruntime {tokens}), max |logit diff| / max|logit| = {worst:.2e}")
            passed += ok
            failed += not ok
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
