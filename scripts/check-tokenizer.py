#!/usr/bin/env python3
"""Compares xfmr-tokenize with the Python `tokenizers` on a corpus.

    scripts/check-tokenizer.py --build-dir build --tokenizer PATH
    scripts/check-tokenizer.py --build-dir build --train KIND

PATH is a tokenizer.json or a folder with one. --train KIND trains a small
tokenizer of that family on the corpus with `tokenizers`' trainers and
checks it: spm-bytefallback (Llama-2/TinyLlama), metaspace (Mistral),
llama3 (byte-level BPE with Llama-3's regex), gpt2 (ByteLevel), mixed (Nmt,
NFKC, Replace, Lowercase, Strip, Split, Punctuation, Digits, Whitespace,
Metaspace "first" after a left Strip, subword prefix and suffix, BPEDecoder,
Strip, RobertaProcessing).

For every record of the corpus (scripts/gen_tokenizer_corpus.py; --corpus
to give one) it compares the ids of encode with and without special tokens,
decode with skip_special_tokens true and false of the reference ids and of
random id sequences (byte tokens, partial UTF-8, special tokens), and the
concatenated DecodeStream pieces. Prints the first mismatches and
"N records, N mismatches"; exits 1 on any mismatch.

The reference runs without the truncation and padding a tokenizer.json may
set (xfmr's Tokenizer leaves both to its callers).
"""

import argparse
import json
import os
import pathlib
import random
import subprocess
import sys
import tempfile

# One thread for the reference's batch calls: lit runs two tests at once on
# a 2-core machine, and rayon's workers spinning against another process's
# make a run of seconds take minutes.
os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = pathlib.Path(__file__).resolve().parent.parent

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                  r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def read_lines(path):
    # Not splitlines(): U+0085 and U+2028 inside a record are not line ends.
    text = pathlib.Path(path).read_text(encoding="utf-8")
    return [l for l in text.split("\n") if l]


def record_text(rec):
    if isinstance(rec, str):
        return rec
    return bytes.fromhex(rec["hex"]).decode("utf-8", errors="replace")


def train(kind, texts, out_dir):
    """Trains a tokenizer of family `kind` on `texts`; returns its path."""
    from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models,
                            normalizers, pre_tokenizers, processors, trainers)
    if kind in ("spm-bytefallback", "metaspace"):
        # Train on Metaspace-split words (fast), then set the family's
        # pipeline and put the 256 byte tokens in the vocabulary.
        tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
        trainer = trainers.BpeTrainer(vocab_size=1500, limit_alphabet=120, show_progress=False,
                                      special_tokens=["<unk>", "<s>", "</s>"])
        tok.train_from_iterator(texts, trainer)
        spec = json.loads(tok.to_str())
        vocab = spec["model"]["vocab"]
        specials = {"<unk>": 0, "<s>": 1, "</s>": 2}
        new_vocab = dict(specials)
        for b in range(256):
            new_vocab[f"<0x{b:02X}>"] = 3 + b
        for t, i in sorted(vocab.items(), key=lambda kv: kv[1]):
            if t not in new_vocab:
                new_vocab[t] = len(new_vocab)
        spec["model"]["vocab"] = new_vocab
        for a in spec["added_tokens"]:
            a["id"] = new_vocab[a["content"]]
        if kind == "spm-bytefallback":
            spec["normalizer"] = {"type": "Sequence", "normalizers": [
                {"type": "Prepend", "prepend": "\u2581"},
                {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]}
            spec["pre_tokenizer"] = None
            spec["decoder"] = {"type": "Sequence", "decoders": [
                {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
                {"type": "ByteFallback"}, {"type": "Fuse"},
                {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
        else:
            spec["normalizer"] = None
            spec["pre_tokenizer"] = {"type": "Metaspace", "replacement": "\u2581",
                                     "prepend_scheme": "first", "split": False}
            spec["decoder"] = {"type": "Sequence", "decoders": [
                {"type": "ByteFallback"},
                {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first",
                 "split": False}]}
        spec["post_processor"] = {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                     {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": "<s>", "type_id": 1}},
                     {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}}
        path = os.path.join(out_dir, "tokenizer.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(spec, f, ensure_ascii=False)
        return path

    if kind == "mixed":
        # Many components at once, none of them in the families above.
        tok = Tokenizer(models.BPE(unk_token="[UNK]", continuing_subword_prefix="##",
                                   end_of_word_suffix="</w>"))
        tok.normalizer = normalizers.Sequence([
            normalizers.Nmt(), normalizers.NFKC(), normalizers.Replace(Regex(r"\d{4,}"), "#"),
            normalizers.Lowercase(), normalizers.Strip(left=True, right=False)])
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(r"\s+"), behavior="merged_with_next"),
            pre_tokenizers.Punctuation(behavior="contiguous"),
            pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.Whitespace(),
            pre_tokenizers.Metaspace(prepend_scheme="first")])
        tok.decoder = decoders.Sequence([decoders.BPEDecoder(suffix="</w>"),
                                         decoders.Strip(" ", 1, 1)])
        trainer = trainers.BpeTrainer(vocab_size=2000, limit_alphabet=300, show_progress=False,
                                      special_tokens=["[UNK]", "[CLS]", "[SEP]"],
                                      continuing_subword_prefix="##", end_of_word_suffix="</w>")
        tok.train_from_iterator(texts, trainer)
        tok.add_tokens([AddedToken("hello world", normalized=True),
                        AddedToken("<tag>", normalized=False, lstrip=True, rstrip=True)])
        tok.post_processor = processors.RobertaProcessing(("[SEP]", 2), ("[CLS]", 1))
        path = os.path.join(out_dir, "tokenizer.json")
        tok.save(path)
        return path

    tok = Tokenizer(models.BPE())
    if kind == "llama3":
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
                    "<|end_header_id|>", "<|eot_id|>"]
    elif kind == "gpt2":
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        specials = ["<|endoftext|>"]
    else:
        sys.exit(f"check-tokenizer: unknown --train kind {kind}")
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=3000, show_progress=False, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer)
    # Added tokens with the options real files use.
    tok.add_special_tokens([AddedToken("<mask>", lstrip=True, special=True, normalized=False),
                            AddedToken("<|im_start|>", special=True, normalized=False)])
    tok.add_tokens([AddedToken("<|tool|>", special=False, normalized=False),
                    AddedToken("[MASK]", single_word=True, rstrip=True, normalized=False),
                    AddedToken(" wonderful", normalized=True)])
    if kind == "llama3":
        tok.post_processor = processors.TemplateProcessing(
            single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A $B:1",
            special_tokens=[("<|begin_of_text|>", tok.token_to_id("<|begin_of_text|>"))])
    else:
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    path = os.path.join(out_dir, "tokenizer.json")
    tok.save(path)
    return path


def run_tool(tool, tokenizer, args, lines, tmp, name):
    inp = os.path.join(tmp, name + ".in.jsonl")
    with open(inp, "w", encoding="utf-8") as f:
        for l in lines:
            f.write(l + "\n")
    proc = subprocess.run([tool, tokenizer] + args[:1] + [inp] + args[1:],
                          capture_output=True, text=True, encoding="utf-8")
    if proc.returncode != 0:
        sys.exit(f"check-tokenizer: {tool} {' '.join(args)} failed:\n{proc.stderr}")
    return [json.loads(l) for l in proc.stdout.split("\n") if l]


def random_sequences(tok, n, rng):
    """Id sequences that decode to partial UTF-8, byte tokens and specials."""
    size = tok.get_vocab_size(with_added_tokens=True)
    vocab = tok.get_vocab(with_added_tokens=True)
    byte_ids = [i for t, i in vocab.items() if len(t) == 6 and t.startswith("<0x")]
    special_ids = [i for i, t in tok.get_added_tokens_decoder().items()]
    # Byte-level tokens of non-ASCII bytes (partial characters).
    partial = [i for t, i in vocab.items() if t and all(0x80 <= ord(c) <= 0x143 for c in t)]
    seqs = []
    for _ in range(n):
        seq = []
        for _ in range(rng.randrange(1, 16)):
            k = rng.randrange(10)
            if k < 3 and byte_ids:
                seq.append(rng.choice(byte_ids))
            elif k < 5 and partial:
                seq.append(rng.choice(partial))
            elif k == 5 and special_ids:
                seq.append(rng.choice(special_ids))
            else:
                seq.append(rng.randrange(size))
        seqs.append(seq)
    # A 4-byte character as 4 byte tokens, and its bytes in a broken order.
    if byte_ids:
        by = {t: i for t, i in vocab.items() if len(t) == 6 and t.startswith("<0x")}
        emoji = [by[f"<0x{b:02X}>"] for b in "😀".encode()]
        seqs += [emoji, emoji + emoji[:2], emoji[1:] + emoji, [emoji[0]] + emoji]
    return seqs


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", default=str(ROOT / "build"))
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--tokenizer")
    src.add_argument("--train",
                     choices=["spm-bytefallback", "metaspace", "llama3", "gpt2", "mixed"])
    ap.add_argument("--corpus", help="JSON lines (default: scripts/gen_tokenizer_corpus.py)")
    ap.add_argument("--random", type=int, default=2000, help="random id sequences to decode")
    ap.add_argument("--show", type=int, default=5, help="mismatches to print per check")
    args = ap.parse_args()

    from tokenizers import Tokenizer

    tool = os.path.join(args.build_dir, "bin", "xfmr-tokenize")
    if not os.access(tool, os.X_OK):
        sys.exit(f"check-tokenizer: {tool} not found (build it first)")
    with tempfile.TemporaryDirectory(prefix="xfmr-tok-") as tmp:
        corpus = args.corpus
        if not corpus:
            corpus = os.path.join(tmp, "corpus.jsonl")
            subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_tokenizer_corpus.py"),
                            corpus], check=True, stdout=subprocess.DEVNULL)
        lines = read_lines(corpus)
        records = [json.loads(l) for l in lines]
        texts = [record_text(r) for r in records]
        if args.train:
            path = train(args.train, [t for t in texts if t], tmp)
        else:
            path = args.tokenizer
            if os.path.isdir(path):
                path = os.path.join(path, "tokenizer.json")
        ref = Tokenizer.from_file(path)
        ref.no_truncation()
        ref.no_padding()

        mismatches = 0

        def compare(what, got, want, inputs):
            nonlocal mismatches
            bad = [i for i in range(len(want)) if i >= len(got) or got[i] != want[i]]
            if len(got) != len(want):
                print(f"{what}: {len(got)} results for {len(want)} inputs")
            for i in bad[: args.show]:
                print(f"MISMATCH {what} #{i}: input {inputs[i]!r}\n"
                      f"  xfmr:       {got[i] if i < len(got) else None!r}\n"
                      f"  tokenizers: {want[i]!r}")
            mismatches += len(bad)
            print(f"{what}: {len(want)} checked, {len(bad)} mismatches")

        for special in (True, False):
            want = [e.ids for e in ref.encode_batch(texts, add_special_tokens=special)]
            got = run_tool(tool, path, ["--encode-jsonl"] + ([] if special else ["--no-special"]),
                           lines, tmp, "encode")
            compare(f"encode(add_special_tokens={special})", got, want, texts)
            if special:
                ref_ids = want

        seqs = ref_ids + random_sequences(ref, args.random, random.Random(36))
        id_lines = [json.dumps(s) for s in seqs]
        for skip in (True, False):
            want = ref.decode_batch(seqs, skip_special_tokens=skip)
            flags = [] if skip else ["--keep-special"]
            got = run_tool(tool, path, ["--decode-jsonl"] + flags, id_lines, tmp, "decode")
            compare(f"decode(skip_special_tokens={skip})", got, want, seqs)
            got = run_tool(tool, path, ["--decode-jsonl"] + flags + ["--stream"], id_lines, tmp,
                           "stream")
            compare(f"DecodeStream(skip_special_tokens={skip})", got, want, seqs)

        print(f"{len(records)} records, {mismatches} mismatches")
        sys.exit(1 if mismatches else 0)


if __name__ == "__main__":
    main()
