#!/usr/bin/env python3
"""Greedy tokens of a paged-KV artifact against onnxruntime on the model
folder it was compiled from (an onnxruntime-genai style decoder with
input_ids, attention_mask, optionally position_ids, and
past_key_values.N.key/value, as gen_llama_onnx.py and export_torch_llama.py
write): onnxruntime runs one prefill and one decode step
per token feeding `present` back as `past`; xfmr runs `xfmr-run generate`.
Prints both token lists and exits 1 when they differ.

  .venv/bin/python scripts/check-llama-folder.py MODEL_DIR ARTIFACT [--new N] [--bin build/bin]
"""

import argparse
import os
import subprocess
import sys

import numpy as np
import onnxruntime as ort

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROMPT = [1, 5, 9, 30, 17, 42]


def genai_head_size(model_dir):
    import json
    with open(os.path.join(model_dir, "genai_config.json")) as f:
        return json.load(f)["model"]["decoder"]["head_size"]


def ort_tokens(model_dir, new):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    s = ort.InferenceSession(os.path.join(model_dir, "model.onnx"), so,
                             providers=["CPUExecutionProvider"])
    outs = [o.name for o in s.get_outputs()]
    names = {i.name for i in s.get_inputs()}
    past = {}
    for i in s.get_inputs():
        if i.name.startswith("past_key_values."):
            # [batch, kv heads, past, head dim]: batch 1, no past yet. The
            # builder of onnxruntime-genai >= 0.12 names the head dim
            # (kv_cache_dim): genai_config.json's head_size.
            shape = [1, i.shape[1], 0, i.shape[3]]
            if isinstance(shape[3], str):
                shape[3] = genai_head_size(model_dir)
            past[i.name] = np.zeros(shape, np.float32)
    ids, past_len, toks = list(PROMPT), 0, []
    for _ in range(new):
        feed = {"input_ids": np.array([ids], np.int64),
                "attention_mask": np.ones((1, past_len + len(ids)), np.int64), **past}
        if "position_ids" in names:
            feed["position_ids"] = np.arange(past_len, past_len + len(ids), dtype=np.int64)[None]
        res = dict(zip(outs, s.run(None, feed)))
        tok = int(np.argmax(res["logits"][0, -1]))
        toks.append(tok)
        past = {n.replace("present.", "past_key_values."): v for n, v in res.items()
                if n.startswith("present.")}
        past_len += len(ids)
        ids = [tok]
    return toks


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model_dir")
    ap.add_argument("artifact")
    ap.add_argument("--new", type=int, default=8, help="tokens to generate (default %(default)s)")
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    a = ap.parse_args()
    r = subprocess.run([os.path.join(a.bin, "xfmr-run"), "generate", a.artifact, "--prompt-ids",
                        ",".join(map(str, PROMPT)), "--max-new-tokens", str(a.new), "--quiet",
                        "--ignore-eos"], capture_output=True, text=True)
    if r.returncode != 0:
        print("xfmr-run generate failed: " + r.stderr.strip())
        return 1
    xfmr = [int(t) for t in r.stdout.strip().splitlines()[0].split(",")]
    ref = ort_tokens(a.model_dir, a.new)
    print("onnxruntime:", ",".join(map(str, ref)))
    print("xfmr:       ", ",".join(map(str, xfmr)))
    print("SAME" if ref == xfmr else "DIFFERENT")
    return 0 if ref == xfmr else 1


if __name__ == "__main__":
    sys.exit(main())
