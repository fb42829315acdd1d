#!/usr/bin/env python3
"""Checks xfmr on the onnxruntime-genai model-builder corpus (examples/genai, issue 16).

For every model folder CORPUS/NAME/ (NAME = ARCH_PREC; written by
scripts/export_genai_corpus.py: model.onnx + model.onnx.data,
genai_config.json, greedy.json, ref/CASE/):

  report    `xfmr-compile model.onnx --report` (forward artifact): one
            xfmr.attention per layer (genai_config's num_hidden_layers) and
            no candidate left unfused;
  run:CASE  run that artifact with `xfmr-run` on ref/CASE/'s inputs and
            compare every output (logits, present.*) with onnxruntime's
            within 1e-4 * max|ref| at the positions attention_mask keeps
            (logits: the query rows whose mask is 1; present.*: the past +
            new positions whose mask is 1), as scripts/check-hf-corpus.py
            does. Cases: past (batch 1, past + 4 new tokens), decode (batch
            2, past + 1), prompt (batch 2, no past, row 1 right-padded by 2).
            int4 references are onnxruntime's on the model as written
            (MatMulNBits accuracy_level 4: int8 activations, computed by
            xfmr the same way; one that misses the tolerance but is within
            1e-2 passes with a note: an upstream 1-ulp difference flipped
            an activation's int8 rounding);
  generate  compile with --kv-cache=paged and compare `xfmr-run generate`'s
            tokens on greedy.json's prompt with onnxruntime's greedy tokens
            (int4: its accuracy_level 1 tokens are accepted too).

A failing compile is a FAIL (an int4 model whose MatMulNBits has no lowering
included), never a SKIP. Prints one line per check, `PASS name check[:
detail]`, `FAIL name check: reason` (the first error line of the tool) or
`SKIP name check: reason`, and finally `N passed, N failed, N skipped`;
failures are repeated on stderr. Needs numpy only.

  .venv/bin/python scripts/check-genai-corpus.py --build-dir build [--only fp32 llama_int4 qwen2] [-j N]
"""

import argparse
import concurrent.futures
import importlib.util
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)


def _load_hf_checker():
    spec = importlib.util.spec_from_file_location("check_hf_corpus",
                                                  os.path.join(HERE, "check-hf-corpus.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


hf = _load_hf_checker()
from xfmr_refs import INT8_FLIP_RTOL, Tally, sha256  # noqa: E402

CASES = ("past", "decode", "prompt")


def split_name(name):
    """llama_fp32 -> (llama, fp32); mistral_swa_int4zp -> (mistral_swa, int4zp)."""
    arch, _, prec = name.rpartition("_")
    return arch, prec


def check_generate(ck, name, path, greedy):
    xfa, err, _ = ck.build(path, name + "-paged", ["--kv-cache=paged"])
    if err:
        return "FAIL", err
    r, err, _ = hf.run([ck.xrun, "generate", xfa, "--prompt-ids", ",".join(map(str, greedy["prompt_ids"])),
                        "--max-new-tokens", str(greedy["max_new_tokens"]), "--quiet"])
    if err or r.returncode:
        return "FAIL", "generate: " + (err or hf.first_error(r.stderr))
    try:
        ours = [int(t) for t in r.stdout.strip().splitlines()[0].split(",")]
    except (ValueError, IndexError):
        return "FAIL", "unparsable output %r" % r.stdout[:200]
    want = greedy["tokens"]
    if ours == want:
        return "PASS", "%d tokens equal" % len(ours)
    if ours == greedy.get("tokens_accuracy_level_1"):
        return "PASS", ("%d tokens equal onnxruntime's with MatMulNBits accuracy_level 1 "
                        "(level 4 differs)" % len(ours))
    k = next((i for i, (a, b) in enumerate(zip(ours, want)) if a != b), min(len(ours), len(want)))
    return "FAIL", "tokens differ from step %d: %s vs onnxruntime %s" % (k, ours, want)


def check_model(ck, name, model_dir):
    """[(status, check, detail)] for one model folder."""
    path = os.path.join(model_dir, "model.onnx")
    if not os.path.exists(path):
        return [("FAIL", "report", "no %s" % os.path.relpath(path, ROOT))]
    cfg = json.load(open(os.path.join(model_dir, "genai_config.json")))
    layers = cfg["model"]["decoder"]["num_hidden_layers"]
    out = []
    # One compile gives the raising report and the forward artifact.
    r, err = ck.build(path, name, ["--report"], with_report=True)
    ok, detail = ck.report(r, err, layers)
    out.append(("PASS" if ok else "FAIL", "report", detail))
    compile_err = ("compile: " + (err or hf.first_error(r.stderr))) if err or r.returncode else None
    xfa = os.path.join(ck.tmp, name + ".xfa")
    model_sha = sha256(path)
    for case in CASES:
        check = "run:" + case
        ref_dir = os.path.join(model_dir, "ref", case)
        if not os.path.isfile(os.path.join(ref_dir, "ref.json")):
            out.append(("SKIP", check, "no %s" % os.path.relpath(ref_dir, ROOT)))
            continue
        if compile_err:
            out.append(("FAIL", check, compile_err))
            continue
        meta = json.load(open(os.path.join(ref_dir, "ref.json")))
        if meta.get("sha256") != model_sha:
            out.append(("FAIL", check, "model.onnx changed since the reference was made "
                        "(rerun scripts/export_genai_corpus.py)"))
            continue
        out_dir, meta, err = ck.run_ref(xfa, ref_dir, name + "-" + case)
        if err:
            out.append(("FAIL", check, err))
            continue
        ok, detail = hf.compare_outputs(out_dir, ref_dir, meta)
        if not ok and split_name(name)[1].startswith("int4"):
            ok, flipped = hf.compare_outputs(out_dir, ref_dir, meta, INT8_FLIP_RTOL)
            if ok:
                detail = "within %g (not %g; an int8 rounding flip): %s" % (
                    INT8_FLIP_RTOL, hf.RUN_RTOL, flipped)
        out.append(("PASS" if ok else "FAIL", check, detail))
    gpath = os.path.join(model_dir, "greedy.json")
    if not os.path.exists(gpath):
        out.append(("SKIP", "generate", "no greedy.json"))
    else:
        status, detail = check_generate(ck, name, path, json.load(open(gpath)))
        out.append((status, "generate", detail))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--corpus", default=os.path.join(ROOT, "examples", "genai"),
                    help="folder of ARCH_PREC/ model folders (default %(default)s; "
                         "build/genai-corpus has int4zp too)")
    ap.add_argument("--only", nargs="*", metavar="SEL",
                    help="model names (llama_int4), architectures (llama, mistral_swa) or "
                         "precisions (fp32, int4, int4zp)")
    ap.add_argument("-j", "--jobs", type=int, default=min(4, os.cpu_count() or 1))
    ap.add_argument("--opt", default="", help="an optimization flag for xfmr-compile (-O1...; default: its own)")
    a = ap.parse_args()
    only = set(a.only or [])

    def wanted(name):
        arch, prec = split_name(name)
        return not only or bool({name, arch, prec} & only)

    for tool in ("xfmr-compile", "xfmr-run"):
        if not os.access(os.path.join(a.build_dir, "bin", tool), os.X_OK):
            print("error: %s is missing (build it first)" % os.path.join(a.build_dir, "bin", tool),
                  file=sys.stderr)
            return 2
    names = sorted(d for d in os.listdir(a.corpus)
                   if os.path.isfile(os.path.join(a.corpus, d, "genai_config.json")) and wanted(d))
    if not names:
        print("error: no model folder in %s matches %s" % (a.corpus, " ".join(sorted(only)) or "*"),
              file=sys.stderr)
        return 2
    tally = Tally()
    with tempfile.TemporaryDirectory(prefix="xfmr-genai-") as tmp:
        ck = hf.Checker(a.build_dir, tmp, a.opt)
        with concurrent.futures.ThreadPoolExecutor(max(1, a.jobs)) as pool:
            jobs = [(n, pool.submit(check_model, ck, n, os.path.join(a.corpus, n))) for n in names]
            for n, fut in jobs:
                tally.add_job(n, fut)
    return tally.finish()


if __name__ == "__main__":
    sys.exit(main())
