#!/usr/bin/env python3
"""Writes a deterministic test corpus for the tokenizer (JSON lines).

Each line is a JSON string, or {"hex": "..."} for raw bytes that may be
invalid UTF-8 (scripts/check-tokenizer.py decodes those with
errors="replace", as xfmr's Tokenizer does). The records mix lines of the
repository's own C++ and Python sources, prose in many scripts, emoji
(ZWJ sequences, skin tones, flags), numbers, whitespace runs, multi-line
text, contractions and special-token strings embedded in text.

    scripts/gen_tokenizer_corpus.py OUT.jsonl [--records N] [--text-out OUT.txt]

--text-out also writes the valid-UTF-8 records as plain text, one per line
(newlines inside a record become spaces), for `xfmr-tokenize --bench`.
"""

import argparse
import json
import pathlib
import random

ROOT = pathlib.Path(__file__).resolve().parent.parent

PROSE = {
    "latin": [
        "The quick brown fox jumps over the lazy dog.",
        "Ça va très bien, merci ! Où est la bibliothèque ?",
        "Größenwahn und Übermut: Straße, Maß, Fußgänger.",
        "El niño comió piñas en la mañana; ¿qué más?",
        "Zażółć gęślą jaźń. Příliš žluťoučký kůň úpěl ďábelské ódy.",
        "Ångström, naïve café, coöperate, façade, jalapeño, résumé.",
        "Đây là tiếng Việt có dấu: Hà Nội, Sài Gòn, phở bò.",
        "İstanbul'da ılık bir gün; ĞÜŞİÖÇ ğüşıöç.",
    ],
    "greek": ["Η γρήγορη καφέ αλεπού πηδά πάνω από τον τεμπέλη σκύλο.",
              "ΣΊΣΥΦΟΣ και ΟΔΥΣΣΕΎΣ· ἀρχὴ ἥμισυ παντός."],
    "cyrillic": ["Съешь же ещё этих мягких французских булок, да выпей чаю.",
                 "Україна, Київ, їжак, ґанок. Беларусь: ўзор."],
    "arabic": ["مرحبا بالعالم! كيف حالك اليوم؟",
               "اللُّغَةُ العَرَبِيَّةُ جَمِيلَةٌ ١٢٣ ٤٥٦"],
    "hebrew": ["שלום עולם, מה שלומך היום?", "עִבְרִית עִם נִקּוּד"],
    "devanagari": ["नमस्ते दुनिया, आप कैसे हैं?", "संस्कृतम् भाषा। क्षत्रिय ज्ञान ०१२३"],
    "thai": ["สวัสดีชาวโลก วันนี้อากาศดีมาก", "ภาษาไทยไม่มีการเว้นวรรคระหว่างคำ"],
    "cjk": ["你好，世界！今天天气很好。", "東京都は日本の首都です。漢字と𠮷野家。",
            "中华人民共和国成立于一九四九年。"],
    "hangul": ["안녕하세요 세계! 오늘 날씨가 좋네요.", "한국어 자모: ㄱㄴㄷ ㅏㅑㅓ"],
    "kana": ["こんにちは世界、カタカナとひらがな。", "ｶﾀｶﾅ半角とﾃｽﾄ、ヴァイオリン。"],
    "misc": ["Ⅻ² ½ ⓐⓑⓒ ﬁﬂ ㎞ ℌ ﹏ …", "x\u0301y\u0308z a\u200db \u00ad soft",
             "Ω ≈ ç √ ∫ ˜ µ ≤ ≥ ÷ ∑ ∞ € £ ¥ ₹ ₿", "ǅungla ǈ ǋ ß ẞ ſ K"],
}

EMOJI = ["😀", "🙂", "🎉", "🚀", "❤️", "👍🏽", "👋🏿", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇫🇷",
         "🇯🇵", "🇺🇸", "1️⃣", "🧑🏻‍💻", "🥰", "🫠", "☃", "✔︎", "🤷‍♀️", "🏴‍☠️"]

SPECIALS = ["<s>", "</s>", "<unk>", "[CLS]", "[SEP]", "[MASK]", "[PAD]", "[UNK]",
            "<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>", "<|endoftext|>",
            "<|im_start|>", "<|im_end|>", "<mask>", "<pad>", "<|tool|>"]

CONTRACTIONS = ["don't", "I'LL", "we've", "She'S", "they're", "I'm", "you'd",
                "it'll", "DON'T", "can't", "y'all", "'tis", "rock'n'roll", "O'Neil"]

SPACES = [" ", "  ", "   ", "\t", "\t\t", "\n", "\r\n", "\n\n", "\u00a0", "\u3000",
          "\u2028", "\u0085", "\u200b", " \n ", "    ", "\u2009", "\ufeff"]


def source_lines():
    files = sorted(list((ROOT / "runtime").rglob("*.cpp")) +
                   list((ROOT / "runtime").rglob("*.h")) +
                   sorted((ROOT / "scripts").glob("*.py")))
    lines = []
    for f in files:
        try:
            lines += [l for l in f.read_text(encoding="utf-8").splitlines() if l.strip()]
        except (OSError, UnicodeDecodeError):
            pass
    return lines


def words(rng):
    text = rng.choice([s for v in PROSE.values() for s in v])
    return text.split()


def number(rng):
    kind = rng.randrange(6)
    if kind == 0:
        return str(rng.randrange(10 ** rng.randrange(1, 12)))
    if kind == 1:
        return f"{rng.uniform(-1e6, 1e6):.{rng.randrange(0, 6)}f}"
    if kind == 2:
        return f"{rng.randrange(1, 1000):,}{rng.randrange(1000):03d}"
    if kind == 3:
        return f"+1 ({rng.randrange(100, 999)}) {rng.randrange(100, 999)}-{rng.randrange(1000, 9999)}"
    if kind == 4:
        return f"{rng.randrange(1900, 2100)}-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d}"
    return f"{rng.random():.3e}"


def mixed(rng, lines):
    parts = []
    for _ in range(rng.randrange(1, 8)):
        k = rng.randrange(9)
        if k == 0:
            parts.append(rng.choice(lines).strip())
        elif k == 1:
            parts.append(" ".join(words(rng)[: rng.randrange(1, 8)]))
        elif k == 2:
            parts.append("".join(rng.choice(EMOJI) for _ in range(rng.randrange(1, 4))))
        elif k == 3:
            parts.append(number(rng))
        elif k == 4:
            parts.append(rng.choice(CONTRACTIONS))
        elif k == 5:
            parts.append(rng.choice(SPECIALS))
        elif k == 6:
            parts.append(rng.choice(SPACES) * rng.randrange(1, 3))
        elif k == 7:
            parts.append(rng.choice(["(", ")", "...", "?!", "--", "\"", "'", "#", "$", "%"]))
        else:
            parts.append(rng.choice(PROSE[rng.choice(sorted(PROSE))]))
    sep = rng.choice(["", " ", " ", " ", "\n", "  "])
    return sep.join(parts)


def raw_bytes(rng):
    good = rng.choice([s for v in PROSE.values() for s in v] + EMOJI).encode()
    k = rng.randrange(6)
    if k == 0:  # a character cut short
        cut = rng.randrange(1, len(good) + 1)
        return good[:cut]
    if k == 1:  # random bytes
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 24)))
    if k == 2:  # stray continuation bytes and bad leads
        return good + bytes([rng.choice([0x80, 0xBF, 0xC0, 0xC1, 0xF5, 0xFF])]) + b"ok"
    if k == 3:  # overlong and surrogate encodings
        return b"a" + rng.choice([b"\xc0\xaf", b"\xe0\x80\xaf", b"\xed\xa0\x80", b"\xf0\x80\x80\xaf",
                                  b"\xf4\x90\x80\x80"]) + b"b"
    if k == 4:  # a truncated character in the middle
        e = "é€😀".encode()
        return b"x" + e[: rng.randrange(1, len(e))] + b" y"
    return good[: len(good) // 2] + bytes([0xE2, 0x82]) + good[len(good) // 2:]


def records(n, rng):
    lines = source_lines()
    out = []
    for i in range(n):
        k = i % 20
        if k < 6:
            out.append(rng.choice(lines))
        elif k < 8:
            lang = sorted(PROSE)[rng.randrange(len(PROSE))]
            out.append(" ".join(rng.sample(PROSE[lang], min(len(PROSE[lang]), rng.randrange(1, 3)))))
        elif k < 15:
            out.append(mixed(rng, lines))
        elif k == 15:  # multi-line record
            start = rng.randrange(max(1, len(lines) - 8))
            out.append("\n".join(lines[start:start + rng.randrange(2, 8)]))
        elif k == 16:
            out.append(rng.choice(SPACES) * rng.randrange(1, 5) + mixed(rng, lines) +
                       rng.choice(SPACES) * rng.randrange(1, 5))
        elif k == 17:
            out.append({"hex": raw_bytes(rng).hex()})
        elif k == 18:
            out.append(f"{rng.choice(SPECIALS)}{mixed(rng, lines)}{rng.choice(SPECIALS)} "
                       f"{rng.choice(CONTRACTIONS)}")
        else:
            out.append(" ".join(number(rng) for _ in range(rng.randrange(1, 5))))
    # A few edge cases at fixed places.
    out[:0] = ["", " ", "\n", "a", "  leading", "trailing  ", "<s>", "<s><s>", " <s> ",
               "[CLS][SEP]", "<|begin_of_text|>Hi", "don't DON'T", "\u00a0\u3000",
               "𠮷", "👨‍👩‍👧‍👦", "\r\n\r\n", "a\u0085b", "x" * 300, "🙂" * 40]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--records", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=36)
    ap.add_argument("--text-out")
    args = ap.parse_args()
    recs = records(args.records, random.Random(args.seed))
    with open(args.out, "w", encoding="utf-8") as f:
        for r in recs:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    if args.text_out:
        with open(args.text_out, "w", encoding="utf-8") as f:
            for r in recs:
                if isinstance(r, str):
                    f.write(r.replace("\r", " ").replace("\n", " ") + "\n")
    print(f"{len(recs)} records -> {args.out}")


if __name__ == "__main__":
    main()
