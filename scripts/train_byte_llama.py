#!/usr/bin/env python3
"""Trains a small byte-level Llama for quantization accuracy tests (issue 12).

Random weights hide quantization error: every logit is noise, so int4 and
fp32 score the same. This model has learnt something: a Llama (transformers'
LlamaForCausalLM: RMSNorm, RoPE, GQA, SwiGLU) over bytes (vocabulary 256),
trained for a few minutes on 2 cores on the licence texts every Debian
system ships in /usr/share/common-licenses (base-files), with one licence
held out for evaluation.

Writes to --out (default examples/trained):
  byte_llama.onnx       input_ids, attention_mask -> logits (TorchScript
                        exporter, opset 17, like examples/hf/*_ts.onnx)
  heldout.npy           int64 byte ids of the held-out text (Apache-2.0)
  train.json            configuration, steps, final training loss, held-out
                        perplexity in torch (float64 log-softmax)

Needs the model stack (XFMR_WITH_PYTHON_MODELS=1 bash scripts/setup-venv.sh).
Deterministic for a given torch build and thread count (seeded, 2 threads).

  .venv/bin/python scripts/train_byte_llama.py [--steps 600] [--out DIR]
"""

import argparse
import json
import math
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export_hf_corpus import Forward, clean, export_ts  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LICENSES = "/usr/share/common-licenses"
HELDOUT = "Apache-2.0"
# Symbolic links and near-copies (GPL -> GPL-3, GFDL-1.2 ~ GFDL-1.3 ...)
# are read once: the real files, sorted, without the held-out one.
SEQ, BATCH = 128, 32


def corpus():
    train = []
    for name in sorted(os.listdir(LICENSES)):
        path = os.path.join(LICENSES, name)
        if name == HELDOUT or os.path.islink(path) or not os.path.isfile(path):
            continue
        with open(path, "rb") as f:
            train.append(f.read())
    with open(os.path.join(LICENSES, HELDOUT), "rb") as f:
        heldout = f.read()
    return b"\n".join(train), heldout


def config():
    return transformers.LlamaConfig(
        vocab_size=256, hidden_size=128, intermediate_size=352, num_hidden_layers=4,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=SEQ * 2,
        rope_theta=10000.0, tie_word_embeddings=False, pad_token_id=0, bos_token_id=1,
        eos_token_id=2, attn_implementation="eager")


def train(model, data, steps, log):
    gen = torch.Generator().manual_seed(0)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95), weight_decay=0.05)
    ids = torch.tensor(list(data), dtype=torch.long)
    loss = None
    start = time.time()
    for step in range(steps):
        lr = 3e-3 * min(1.0, (step + 1) / 50) * 0.5 * (1 + math.cos(math.pi * step / steps))
        for g in opt.param_groups:
            g["lr"] = lr
        at = torch.randint(0, len(ids) - SEQ - 1, (BATCH,), generator=gen)
        x = torch.stack([ids[i:i + SEQ] for i in at.tolist()])
        y = torch.stack([ids[i + 1:i + SEQ + 1] for i in at.tolist()])
        logits = model(input_ids=x, use_cache=False).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 256), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 50 == 0 or step == steps - 1:
            log("step %4d  loss %.3f  lr %.2e  %.0f s" % (step, loss.item(), lr,
                                                          time.time() - start))
    return loss.item()


def perplexity(model, tokens, context):
    """Consecutive windows of `context` tokens, each scoring its own next
    tokens (context - 1 per window), as xfmr-run perplexity does."""
    nll, count = 0.0, 0
    with torch.no_grad():
        for s in range(0, len(tokens), context):
            x = torch.tensor(tokens[s:s + context], dtype=torch.long)
            if len(x) < 2:
                break
            logits = model(input_ids=x[None, :-1], use_cache=False).logits[0].double()
            lp = torch.log_softmax(logits, dim=-1)
            nll -= lp.gather(1, x[1:, None]).sum().item()
            count += len(x) - 1
    return math.exp(nll / count)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--out", default=os.path.join(ROOT, "examples", "trained"))
    a = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(2)
    text, heldout = corpus()
    log = lambda s: (print(s), sys.stdout.flush())  # noqa: E731
    log("training on %d bytes (%s), held out: %s (%d bytes)" % (len(text), LICENSES, HELDOUT,
                                                                  len(heldout)))
    model = transformers.LlamaForCausalLM(config())
    log("%d parameters" % sum(p.numel() for p in model.parameters()))
    final = train(model, text, a.steps, log)
    model.eval()
    tokens = np.frombuffer(heldout, dtype=np.uint8).astype(np.int64)
    ppl = perplexity(model, tokens.tolist(), SEQ)
    log("held-out perplexity (torch, windows of %d): %.4f" % (SEQ, ppl))

    os.makedirs(a.out, exist_ok=True)
    sample = [np.frombuffer(heldout[:16], np.uint8).astype(np.int64)[None, :],
              np.ones((1, 16), np.int64)]
    m = clean(export_ts(Forward(model), [torch.from_numpy(t) for t in sample], None, "forward"))
    onnx.save(m, os.path.join(a.out, "byte_llama.onnx"))
    np.save(os.path.join(a.out, "heldout.npy"), tokens)
    with open(os.path.join(a.out, "train.json"), "w") as f:
        json.dump({"steps": a.steps, "seq": SEQ, "batch": BATCH, "final_loss": round(final, 4),
                   "heldout": HELDOUT, "heldout_perplexity_torch": round(ppl, 4),
                   "context": SEQ, "torch": torch.__version__,
                   "transformers": transformers.__version__,
                   "config": config().to_diff_dict()}, f, indent=1, sort_keys=True)
        f.write("\n")
    log("wrote %s" % a.out)


if __name__ == "__main__":
    main()
