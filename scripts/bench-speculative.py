#!/usr/bin/env python3
"""Batch-1 decode speed with and without speculative decoding.

Runs `xfmr-run generate ARTIFACT --chat PROMPT` for each prompt, plain and
with `--speculative PROPOSER --num-speculative K` (PROPOSER: `ngram`, prompt
lookup, or `draft:DIR`, a draft model), alternating, --runs times,
and reports per prompt the decode time per token (the engine's "then X
ms/token": every token after the first), the speed ratio (plain ms/token /
speculative ms/token, best of the runs for each), the acceptance rate, and
whether the generated text is identical (it must be: greedy decoding).

Prompt sets (--set):
  repeat   answers that repeat spans of the prompt: code editing, quoting
           and reformatting a given text (what prompt lookup is for);
  chat     natural chat questions (little to look up: speculation must not
           make them slower).

  .venv/bin/python scripts/bench-speculative.py build/models/smollm2.xfa --set repeat
  .venv/bin/python scripts/bench-speculative.py build/models/smollm2.xfa --set chat \
      --proposer draft:build/models/smollm2-int8.xfa
"""

import argparse
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CODE = '''def fibonacci(n):
    if n < 2:
        return n
    a, b = 0, 1
    for i in range(n - 1):
        a, b = b, a + b
    return b


def factorial(n):
    result = 1
    for i in range(2, n + 1):
        result = result * i
    return result'''

TEXT = ('The Apache License, Version 2.0 allows users to use the software for any purpose, '
        'to distribute it, to modify it, and to distribute modified versions of the software, '
        'under the terms of the license, without concern for royalties. The license requires '
        'preservation of the copyright notice and disclaimer.')

PROMPTS = {
    "repeat": [
        "Rename the function fibonacci to fib in this Python code and output the whole code:\n\n"
        + CODE,
        "Add a docstring to each function of this Python code and output the whole code:\n\n"
        + CODE,
        "Repeat the following text exactly, word for word:\n\n" + TEXT,
        "Rewrite the following text as a bulleted list, one sentence per bullet, keeping "
        "the wording:\n\n" + TEXT,
    ],
    "chat": [
        "What is the capital of France?",
        "Give me three tips for staying healthy.",
        "Explain what a neural network is in two sentences.",
        "Write a short poem about the sea.",
        "How do I make a cup of tea?",
    ],
}


def generate(build, artifact, prompt, max_new, spec, k, proposer="ngram"):
    cmd = [os.path.join(build, "bin", "xfmr-run"), "generate", artifact, "--chat", prompt,
           "--max-new-tokens", str(max_new)]
    if spec:
        cmd += ["--speculative", proposer, "--num-speculative", str(k)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(r.stderr.strip()[-1000:])
    m = re.search(r"generated (\d+) .*then ([0-9.]+) ms/token", r.stderr)
    acc = re.search(r"speculative: (\d+) proposed, (\d+) kept", r.stderr)
    return (r.stdout, int(m.group(1)), float(m.group(2)),
            (int(acc.group(1)), int(acc.group(2))) if acc else (0, 0))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("artifact")
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--set", choices=sorted(PROMPTS), default="repeat")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--max-new-tokens", type=int, default=160)
    ap.add_argument("--num-speculative", type=int, default=4)
    ap.add_argument("--proposer", default="ngram",
                    help="ngram (prompt lookup) or draft:DIR (a draft model)")
    args = ap.parse_args()
    ratios = []
    identical = True
    for i, prompt in enumerate(PROMPTS[args.set]):
        plain, spec = [], []
        texts = set()
        for _ in range(args.runs):
            text, n, ms, _ = generate(args.build_dir, args.artifact, prompt,
                                      args.max_new_tokens, False, args.num_speculative)
            plain.append(ms)
            texts.add(text)
            text, n, ms, (proposed, kept) = generate(args.build_dir, args.artifact, prompt,
                                                     args.max_new_tokens, True,
                                                     args.num_speculative, args.proposer)
            spec.append(ms)
            texts.add(text)
        ratio = min(plain) / min(spec)
        ratios.append(ratio)
        identical &= len(texts) == 1
        print("%s %d: %d tokens, plain %.2f ms/token, speculative %.2f ms/token: %.2fx; "
              "%d proposed, %d kept (%.0f%%); text %s"
              % (args.set, i, n, min(plain), min(spec), ratio, proposed, kept,
                 100.0 * kept / max(proposed, 1), "identical" if len(texts) == 1 else "DIFFERS"))
        sys.stdout.flush()
    geo = 1.0
    for r in ratios:
        geo *= r
    geo **= 1.0 / len(ratios)
    print("%s, %s: geometric mean %.2fx over %d prompts, outputs %s"
          % (args.set, args.proposer, geo, len(ratios),
             "identical" if identical else "DIFFER"))
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
