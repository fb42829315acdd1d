#!/usr/bin/env python3
"""Batch-1 greedy decode of the bench-shape Llama written by onnxruntime-genai's
model builder: xfmr against plain onnxruntime and onnxruntime-genai, same model
file, same run (issue 16: int4 decode tok/s >= 1.0x onnxruntime's).

Model: the 156M-parameter shape of issue 12 (Llama, hidden 1024, 8 layers, 16
query / 4 KV heads of 64, FFN 2816, vocab 32000, untied lm_head, 2048
positions), random fp32 weights (seed 0, every 1-D parameter redrawn as
N(init, 0.1) like scripts/export_genai_corpus.py), a local 32000-word
tokenizer, converted offline by

  python -m onnxruntime_genai.models.builder -i HF -o OUT/llama_bench_PREC -p PREC -e cpu

(skipped when OUT/llama_bench_PREC/bench_stamp.json matches this config and
the installed versions; --skip-build reuses whatever is there). Then

  xfmr-compile OUT/llama_bench_PREC/model.onnx --kv-cache=paged -o OUT/llama_bench_PREC.xfa
  (with --threads > 1 also --parallel -o OUT/llama_bench_PREC_par.xfa, run
  with OMP_NUM_THREADS=threads: onnxruntime gets the same number of threads)

and, for --rounds rounds (engines alternated inside each round, so that
background load hits all of them; best and median round reported):

  xfmr         xfmr-bench ART --synthetic requests=1,prompt=P,output=N --json;
               decode tok/s = 1000 / tpot_p50_ms (with one request TPOT is
               (last token - first token) / (N - 1): the N - 1 decode steps)
  ort          plain onnxruntime (ORT_ENABLE_ALL, intra_op_num_threads =
               threads), the builder's KV loop (input_ids, attention_mask,
               past_key_values.*; present.* bound through IOBinding as the
               next step's past): prefill P tokens, then N - 1 timed decode
               steps (argmax included); tok/s = 1 / median step time.
               int4: the model as written (MatMulNBits accuracy_level 4:
               activations quantized to int8) and with accuracy_level 1
               (float activations, what xfmr computes)
  genai        onnxruntime-genai's Generator on the folder (greedy,
               max_length = min_length = P + N, intra_op_num_threads =
               threads through Config.overlay); the timed steps are
               generate_next_token calls 2..N (call 1 samples the prefill's
               logits, each later call runs one decode step)

Tokens: xfmr-run generate ART --prompt-ids PROMPT --max-new-tokens N --quiet
is compared with each onnxruntime loop's and genai's greedy tokens.

Writes OUT/bench.json (this run) and OUT/bench_PREC_tTHREADS.json and prints a
table (tok/s, engine / xfmr, xfmr being the faster of its two
artifacts).

Usage: .venv/bin/python scripts/bench-genai-int4.py [--precision int4|fp32]
           [--threads 2] [--prompt 16] [--new-tokens 64] [--rounds 3] [--skip-build]
           [--quant MODE[,MODE...]] (int4-g32|int4-g64|int4-g128|int8|bf16|fp8-e4m3)
"""

import argparse
import contextlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_genai_corpus as corpus  # noqa: E402

np = corpus.np
ort = corpus.ort
onnx = corpus.onnx
torch = corpus.torch
transformers = corpus.transformers

ROOT = corpus.ROOT
BIN = os.path.join(ROOT, "build", "bin")
SEED = 0
CONFIG = dict(vocab_size=32000, hidden_size=1024, intermediate_size=2816,
              num_attention_heads=16, num_key_value_heads=4, head_dim=64,
              max_position_embeddings=2048, tie_word_embeddings=False,
              pad_token_id=0, bos_token_id=1, eos_token_id=2, use_cache=True)


# --------------------------------------------------------------------------
# Model


@contextlib.contextmanager
def corpus_vocab(n):
    """corpus.save_tokenizer writes VOCAB words: make it the bench vocab."""
    old = corpus.VOCAB
    corpus.VOCAB = n
    try:
        yield
    finally:
        corpus.VOCAB = old


def stamp_of(layers, prec):
    import onnxruntime_genai
    return {"config": dict(CONFIG, num_hidden_layers=layers), "seed": SEED, "precision": prec,
            "norms": "1-D parameters + N(0, 0.1)",
            "versions": {"onnxruntime_genai": onnxruntime_genai.__version__,
                         "transformers": transformers.__version__,
                         "torch": torch.__version__.split("+")[0]}}


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def build_model(out_dir, layers, prec):
    """HF folder (tmp) -> builder -> out_dir. Returns (seconds, params, nulls replaced)."""
    cfg = transformers.LlamaConfig(num_hidden_layers=layers, **CONFIG)
    with tempfile.TemporaryDirectory(prefix="bench-genai-") as tmp:
        torch.manual_seed(SEED)
        model = transformers.LlamaForCausalLM(cfg).eval()
        corpus.randomize_vectors(model, SEED)
        params = sum(p.numel() for p in model.parameters())
        hf_dir = os.path.join(tmp, "hf")
        model.save_pretrained(hf_dir)
        del model
        with corpus_vocab(CONFIG["vocab_size"]):
            corpus.save_tokenizer(hf_dir)
        if os.path.isdir(out_dir):
            shutil.rmtree(out_dir)
        cache = os.path.join(tmp, "cache")
        os.makedirs(cache)
        t0 = time.time()
        _, patched = corpus.run_builder(hf_dir, out_dir, prec, cache,
                                        os.path.join(os.path.dirname(out_dir),
                                                     os.path.basename(out_dir) + ".builder.log"))
        secs = time.time() - t0
    return secs, params, patched


def dir_size(path):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


# --------------------------------------------------------------------------
# xfmr


def compile_xfmr(model_path, art, parallel, extra=()):
    cmd = [os.path.join(BIN, "xfmr-compile"), model_path, "--kv-cache=paged", "-o", art] + list(extra)
    if parallel:
        cmd.insert(3, "--parallel")
    if os.path.isdir(art):
        shutil.rmtree(art)
    t0 = time.time()
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    secs = time.time() - t0
    if r.returncode != 0:
        raise RuntimeError("%s failed (%d):\n%s" % (" ".join(cmd), r.returncode, r.stdout[-3000:]))
    return secs, cmd, r.stdout


def xfmr_env(threads):
    return dict(os.environ, OMP_NUM_THREADS=str(threads))


def xfmr_bench(art, prompt_len, new, threads):
    cmd = [os.path.join(BIN, "xfmr-bench"), art, "--synthetic",
           "requests=1,prompt=%d,output=%d" % (prompt_len, new), "--json"]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       env=xfmr_env(threads))
    if r.returncode != 0:
        raise RuntimeError("%s failed (%d): %s" % (" ".join(cmd), r.returncode, r.stderr[-2000:]))
    d = json.loads(r.stdout.strip().splitlines()[-1])
    return {"tok_s": 1000.0 / d["tpot_p50_ms"], "step_ms": d["tpot_p50_ms"],
            "ttft_ms": d["ttft_p50_ms"], "throughput_tok_s": d["throughput_tok_s"]}


def xfmr_generate(art, prompt, new, threads):
    cmd = [os.path.join(BIN, "xfmr-run"), "generate", art, "--prompt-ids",
           ",".join(map(str, prompt)), "--max-new-tokens", str(new), "--quiet"]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       env=xfmr_env(threads))
    if r.returncode != 0:
        raise RuntimeError("%s failed (%d): %s" % (" ".join(cmd[:3]), r.returncode,
                                                   r.stderr[-2000:]))
    return [int(t) for t in r.stdout.strip().splitlines()[0].split(",")]


# --------------------------------------------------------------------------
# onnxruntime


def ort_session(model, threads):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])


def ort_step(sess, ids, past_len, past):
    """One KV-loop step of the builder's model through IOBinding: ids [B, S]
    after `past_len` cached positions, `past` the OrtValues of the previous
    step's present.* (by past_key_values.* name). Returns (the greedy next
    token per row [B, 1], the new past)."""
    outs = [o.name for o in sess.get_outputs()]
    io = sess.io_binding()
    io.bind_cpu_input("input_ids", ids)
    io.bind_cpu_input("attention_mask", np.ones((ids.shape[0], past_len + ids.shape[1]), np.int64))
    for k, v in past.items():
        io.bind_ortvalue_input(k, v)
    for o in outs:
        io.bind_output(o, "cpu")
    sess.run_with_iobinding(io)
    nxt, new_past = None, {}
    for name, v in zip(outs, io.get_outputs()):
        if name == "logits":
            nxt = np.argmax(v.numpy()[:, -1], axis=-1).astype(np.int64)[:, None]
        else:
            new_past[name.replace("present.", "past_key_values.")] = v
    return nxt, new_past


def ort_empty_past(sess, batch):
    """past_key_values.* with no positions, for `batch` rows."""
    return {k: ort.OrtValue.ortvalue_from_numpy(np.zeros((batch,) + v.shape[1:], v.dtype))
            for k, v in corpus.empty_past(sess).items()}


def ort_decode(sess, prompt, new):
    """Prefill, then new - 1 decode steps through IOBinding. Returns (step seconds, tokens)."""
    past = ort_empty_past(sess, 1)
    ids, past_len, toks, times = np.array([prompt], np.int64), 0, [], []
    for step in range(new):
        t0 = time.perf_counter()
        nxt, past = ort_step(sess, ids, past_len, past)
        t1 = time.perf_counter()
        if step > 0:
            times.append(t1 - t0)
        toks.append(int(nxt[0, 0]))
        past_len += ids.shape[1]
        ids = nxt
    return times, toks


# --------------------------------------------------------------------------
# onnxruntime-genai


def genai_model(model_dir, threads):
    import onnxruntime_genai as og
    cfg = og.Config(model_dir)
    cfg.overlay(json.dumps({"model": {"decoder": {"session_options": {
        "intra_op_num_threads": threads, "inter_op_num_threads": 1}}}}))
    return og.Model(cfg)


def genai_decode(model, prompt, new):
    import onnxruntime_genai as og
    p = og.GeneratorParams(model)
    p.set_search_options(max_length=len(prompt) + new, min_length=len(prompt) + new,
                         do_sample=False)
    g = og.Generator(model, p)
    g.append_tokens(np.array([prompt], np.int32))
    times, calls = [], 0
    while not g.is_done():
        t0 = time.perf_counter()
        g.generate_next_token()
        t1 = time.perf_counter()
        if calls > 0:
            times.append(t1 - t0)
        calls += 1
    toks = [int(t) for t in g.get_sequence(0)[len(prompt):]]
    del g
    return times, toks


# --------------------------------------------------------------------------


def loadavg():
    return [round(x, 2) for x in os.getloadavg()]


QUANT_MODES = ("int4-g32", "int4-g64", "int4-g128", "int8", "bf16", "fp8-e4m3")


def quant_modes(text):
    """--quant: one mode or several, comma-separated."""
    for mode in text.split(","):
        if mode not in QUANT_MODES:
            raise argparse.ArgumentTypeError("%r is not one of %s" % (mode, ", ".join(QUANT_MODES)))
    return text


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "bench-genai"),
                    help="output folder (default %(default)s)")
    ap.add_argument("--layers", type=int, default=8, help="decoder layers (default %(default)s)")
    ap.add_argument("--new-tokens", type=int, default=64,
                    help="tokens generated per run, N (default %(default)s)")
    ap.add_argument("--prompt", type=int, default=16, help="prompt tokens, P (default %(default)s)")
    ap.add_argument("--precision", default="int4", choices=["int4", "fp32"],
                    help="builder precision (default %(default)s)")
    ap.add_argument("--threads", type=int, default=2,
                    help="onnxruntime intra-op threads and OMP_NUM_THREADS of the --parallel "
                    "xfmr artifact (default %(default)s)")
    ap.add_argument("--rounds", type=int, default=3,
                    help="measurement rounds, engines alternated in each (default %(default)s)")
    ap.add_argument("--skip-build", action="store_true",
                    help="reuse OUT/llama_bench_PREC as it is (no stamp check)")
    ap.add_argument("--skip-compile", action="store_true",
                    help="reuse the compiled artifacts when present")
    ap.add_argument("--no-genai", action="store_true", help="leave onnxruntime-genai out")
    ap.add_argument("--quant", type=quant_modes,
                    help="also compile the model with xfmr-compile --quant=MODE, for each of "
                         "the comma-separated modes (with --precision fp32: xfmr quantized "
                         "against its own fp32, same run)")
    a = ap.parse_args()
    if a.new_tokens < 3 or a.prompt < 1 or a.threads < 1 or a.rounds < 1:
        ap.error("need --new-tokens >= 3, --prompt >= 1, --threads >= 1, --rounds >= 1")

    import onnxruntime_genai
    out_root = os.path.abspath(a.out)
    os.makedirs(out_root, exist_ok=True)
    prec = a.precision
    name = "llama_bench_%s" % prec
    model_dir = os.path.join(out_root, name)
    model_path = os.path.join(model_dir, "model.onnx")
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    report = {"precision": prec, "layers": a.layers, "prompt": a.prompt,
              "new_tokens": a.new_tokens, "threads": a.threads, "rounds": a.rounds,
              "cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
              "versions": {"onnxruntime": ort.__version__,
                           "onnxruntime_genai": onnxruntime_genai.__version__},
              "load_before": loadavg()}
    print("load average before: %s" % report["load_before"], flush=True)

    # 1. Model
    stamp_path = os.path.join(model_dir, "bench_stamp.json")
    stamp = stamp_of(a.layers, prec)
    if a.skip_build:
        if not os.path.exists(model_path):
            sys.exit("--skip-build: %s does not exist" % model_path)
        print("model: reusing %s (--skip-build)" % model_dir, flush=True)
    elif (os.path.exists(model_path)
          and {k: (read_json(stamp_path) or {}).get(k) for k in stamp} == stamp):
        print("model: %s is up to date (bench_stamp.json)" % model_dir, flush=True)
    else:
        print("model: building %s ..." % name, flush=True)
        secs, params, patched = build_model(model_dir, a.layers, prec)
        with open(stamp_path, "w") as f:
            json.dump(dict(stamp, parameters=params, builder_seconds=round(secs, 1),
                           genai_config_nulls_replaced=patched), f, indent=1)
            f.write("\n")
        print("model: %.1fM parameters, builder %.1f s" % (params / 1e6, secs), flush=True)
    st = read_json(stamp_path) or {}
    report["parameters"] = st.get("parameters")
    report["model_bytes"] = {f: os.path.getsize(os.path.join(model_dir, f))
                             for f in sorted(os.listdir(model_dir))
                             if f.startswith("model.onnx")}
    report["model_sha256"] = corpus.sha256(model_path)

    # 2. Compile
    variants = [("xfmr", False, 1)]
    if a.threads > 1:
        variants.append(("xfmr --parallel", True, a.threads))
    modes = a.quant.split(",") if a.quant else []
    for mode in modes:
        variants.append(("xfmr --quant=" + mode, a.threads > 1, a.threads))
    flags = {label: (["--quant=" + label.split("--quant=")[1]] if "--quant" in label else [])
             for label, _, _ in variants}
    arts, report["compile"] = {}, {}
    for label, par, _ in variants:
        art = os.path.join(out_root, name + ("_par" if par else "") +
                           ("_" + flags[label][0][len("--quant="):] if flags[label] else "") +
                           ".xfa")
        arts[label] = art
        record = art + ".compile.json"
        if a.skip_compile and os.path.exists(os.path.join(art, "manifest.json")):
            report["compile"][label] = dict(read_json(record) or {}, reused=True)
            print("%s: reusing %s" % (label, art), flush=True)
            continue
        secs, cmd, log = compile_xfmr(model_path, art, par, flags[label])
        report["compile"][label] = {"seconds": round(secs, 2), "command": " ".join(cmd),
                                    "artifact_bytes": dir_size(art),
                                    "log": log.strip().splitlines()[-6:],
                                    "load_average": loadavg()}
        with open(record, "w") as f:
            json.dump(report["compile"][label], f, indent=1)
            f.write("\n")
        print("%s: compiled in %.1f s, %.1f MB (%s)" % (label, secs, dir_size(art) / 1e6,
                                                       " ".join(cmd)), flush=True)

    # 3. Sessions
    rng = np.random.RandomState(SEED)
    prompt = [1] + [int(x) for x in rng.randint(4, CONFIG["vocab_size"], a.prompt - 1)]
    report["prompt_ids"] = prompt
    sessions = [("onnxruntime", ort_session(model_path, a.threads))]
    if prec != "fp32":
        sessions[0] = ("onnxruntime (accuracy_level 4, as written)", sessions[0][1])
        sessions.append(("onnxruntime (accuracy_level 1)",
                         ort_session(corpus.with_accuracy_level(model_path, 1), a.threads)))
    gmodel = None if a.no_genai else genai_model(model_dir, a.threads)

    samples = {}   # engine -> [tok/s per round]
    tokens = {}    # engine -> greedy tokens (first round)
    for r in range(a.rounds):
        for label, _, thr in variants:
            res = xfmr_bench(arts[label], a.prompt, a.new_tokens, thr)
            samples.setdefault(label, []).append(res["tok_s"])
        for label, sess in sessions:
            times, toks = ort_decode(sess, prompt, a.new_tokens)
            samples.setdefault(label, []).append(1.0 / statistics.median(times))
            tokens.setdefault(label, toks)
        if gmodel is not None:
            times, toks = genai_decode(gmodel, prompt, a.new_tokens)
            samples.setdefault("onnxruntime-genai", []).append(1.0 / statistics.median(times))
            tokens.setdefault("onnxruntime-genai", toks)
        print("round %d: %s" % (r + 1, ", ".join("%s %.2f" % (k, v[-1])
                                                for k, v in samples.items())), flush=True)

    # Tokens
    for label, _, thr in variants:
        tokens[label] = xfmr_generate(arts[label], prompt, a.new_tokens, thr)
    report["tokens"] = tokens
    ref_labels = [k for k in tokens if not k.startswith("xfmr")]
    eq = {}
    for x in [v[0] for v in variants]:
        for k in ref_labels:
            same = tokens[x] == tokens[k]
            first = next((i for i, (p, q) in enumerate(zip(tokens[x], tokens[k])) if p != q), None)
            eq["%s == %s" % (x, k)] = same if same else "differ from token %d" % first
    report["token_equality"] = eq

    # 4. Table
    report["load_after"] = loadavg()
    best = {k: max(v) for k, v in samples.items()}
    med = {k: statistics.median(v) for k, v in samples.items()}
    main_x = max((v[0] for v in variants), key=lambda k: best[k])  # the faster xfmr
    report["results"] = {k: {"tok_s_best": round(best[k], 3), "tok_s_median": round(med[k], 3),
                             "tok_s_rounds": [round(x, 3) for x in samples[k]],
                             "vs_xfmr": round(best[k] / best[main_x], 3)} for k in samples}
    report["xfmr_reference"] = main_x
    report["xfmr_field"] = "xfmr-bench --json: 1000 / tpot_p50_ms"
    others = [k for k in samples if not k.startswith("xfmr")]
    if others:
        top = max(others, key=lambda k: best[k])
        report["xfmr_over_best_onnxruntime"] = {"engine": top,
                                                "ratio": round(best[main_x] / best[top], 3)}
    print()
    print("batch-1 greedy decode, %s, %d layers, prompt %d, %d new tokens, %d threads, "
          "%d rounds" % (prec, a.layers, a.prompt, a.new_tokens, a.threads, a.rounds))
    print("%-46s %10s %10s %9s" % ("engine", "best tok/s", "median", "vs xfmr"))
    for k in samples:
        print("%-46s %10.2f %10.2f %8.2fx" % (k, best[k], med[k], best[k] / best[main_x]))
    if others:
        print("xfmr (%s) / best onnxruntime (%s): %.2fx" % (main_x, top, best[main_x] / best[top]))
    print("tokens: " + "; ".join("%s: %s" % (k, "equal" if v is True else v)
                                 for k, v in eq.items()))
    print("model files: %s; compile: %s" % (
        ", ".join("%s %.1f MB" % (f, b / 1e6) for f, b in report["model_bytes"].items()),
        ", ".join("%s %s s%s" % (k, v.get("seconds", "?"), " (earlier run)" if v.get("reused")
                                  else "") for k, v in report["compile"].items())))
    print("load average before %s, after %s" % (report["load_before"], report["load_after"]))
    for fname in ("bench.json", "bench_%s_t%d.json" % (prec, a.threads)):
        with open(os.path.join(out_root, fname), "w") as f:
            json.dump(report, f, indent=1)
            f.write("\n")
    print("wrote %s (and bench_%s_t%d.json)" % (os.path.join(out_root, "bench.json"), prec,
                                              a.threads))
    return 0


if __name__ == "__main__":
    sys.exit(main())
