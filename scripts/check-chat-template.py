#!/usr/bin/env python3
"""Compares `xfmr-tokenize chat` with transformers' chat template rendering.

For every template (by default each examples/chat_templates/*.jinja), renders
a fixed set of conversations (system or not, single and multi-turn, with and
without the generation prompt, unicode, newlines and surrounding whitespace
in content, empty content, tool definitions, tool calls and results, role
orders that make a template raise) with
transformers.utils.chat_template_utils.render_jinja_template (what
apply_chat_template calls) and with `xfmr-tokenize chat`, and compares the
results byte for byte; a template that raises must raise in both.

    scripts/check-chat-template.py --build-dir build [--template FILE ...]
    scripts/check-chat-template.py --build-dir build --fuzz N [--seed S]

Prints "TEMPLATE: N conversations, N mismatches" per template and exits 1 on
any mismatch. --fuzz instead renders N random templates (text, whitespace
control and comments around if/for blocks) and N random expressions
(operators, filters, tests over a fixed context) with Jinja2 and xfmr; a
construct xfmr refuses as "not supported" is counted apart, not as a
mismatch. Needs transformers 5.25 and jinja2 3.1 (scripts/requirements.txt).
"""

import argparse
import copy
import glob
import json
import os
import subprocess
import sys
import tempfile

from transformers.utils.chat_template_utils import render_jinja_template

BOS = "<s>"
EOS = "</s>"

CONTENTS = [
    "Hello!",
    "héllo wörld, 世界 🤖",
    "line one\nline two\n\nline four",
    "  leading and trailing spaces  ",
    "\n\ttabs and newlines around\n\n",
    "",
    "\u3000ideographic space and nbsp\u00a0",
    "quotes: 'single' \"double\" `back`",
    "backslashes \\n \\ and {{ braces }} {% not a tag %}",
    "<|im_end|> special-looking text </s>",
]

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather — in °C",
        "parameters": {
            "type": "object",
            "properties": {
                "location": {"type": "string", "description": "City, e.g. Zürich"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "days": {"type": "integer", "minimum": 1, "maximum": 7.5},
            },
            "required": ["location"],
        },
    },
}
TIME_TOOL = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "Current time",
        "parameters": {"type": "object", "properties": {}},
    },
}


def msg(role, content):
    return {"role": role, "content": content}


def tool_call(name, arguments):
    return {"type": "function", "function": {"name": name, "arguments": arguments}}


def plain_conversations():
    """Conversations without tools, each with and without the generation prompt."""
    chats = []
    for c in CONTENTS:
        chats.append([msg("user", c)])
    chats.append([msg("system", "You are terse."), msg("user", "Hi")])
    chats.append([msg("system", "  System with spaces \n"), msg("user", CONTENTS[1])])
    chats.append([msg("system", ""), msg("user", "empty system")])
    chats.append([msg("user", "A"), msg("assistant", "B"), msg("user", "C")])
    chats.append([msg("user", "A"), msg("assistant", "  B with spaces  "),
                  msg("user", "C\n"), msg("assistant", "D")])
    chats.append([msg("system", "S"), msg("user", "A"), msg("assistant", "B"),
                  msg("user", CONTENTS[2]), msg("assistant", CONTENTS[4]),
                  msg("user", CONTENTS[8])])
    chats.append([msg("user", "only"), msg("assistant", "")])
    # Role orders some templates reject.
    chats.append([msg("user", "A"), msg("user", "B")])
    chats.append([msg("assistant", "first")])
    chats.append([msg("user", "A"), msg("system", "late system")])
    chats.append([msg("user", "A"), msg("assistant", "B"), msg("assistant", "C")])
    chats.append([msg("narrator", "unknown role")])
    # Content as a list of parts, as multimodal chats pass it.
    chats.append([{"role": "user", "content": [{"type": "text", "text": "parts"}]}])
    chats.append([])
    return chats


def tool_conversations():
    """Conversations with tool definitions, calls and results."""
    q = msg("user", "What's the weather in Paris?")
    call = {"role": "assistant", "content": "",
            "tool_calls": [tool_call("get_weather", {"location": "Paris", "unit": "celsius"})]}
    result = {"role": "tool", "name": "get_weather", "content": "22 degrees, sunny"}
    chats = [
        ({"tools": [WEATHER_TOOL]}, [q]),
        ({"tools": [WEATHER_TOOL, TIME_TOOL]}, [msg("system", "Use tools."), q]),
        ({"tools": [WEATHER_TOOL]}, [q, call, result]),
        ({"tools": [WEATHER_TOOL]}, [msg("system", "Sys"), q, call, result,
                                     msg("assistant", "It is 22 degrees.")]),
        ({"tools": [WEATHER_TOOL, TIME_TOOL]},
         [q, {"role": "assistant", "content": "Calling two.",
              "tool_calls": [tool_call("get_weather", {"location": "Paris"}),
                             tool_call("get_time", {})]},
          {"role": "tool", "content": "22"}, {"role": "tool", "content": "12:00"}]),
        ({"tools": [WEATHER_TOOL]},
         [q, call, {"role": "tool", "content": {"temperature": 22, "sky": "clear"}}]),
        ({}, [q, call, result]),
        ({"tools": []}, [q]),
        ({"tools": [WEATHER_TOOL]}, []),
        ({"tools": [WEATHER_TOOL], "tools_in_user_message": False}, [q, call, result]),
        ({"tools": [WEATHER_TOOL]},
         [q, {"role": "assistant", "content": None,
              "tool_calls": [tool_call("get_weather", '{"location": "Paris"}')]},
          result, msg("assistant", "<think>\nhot?\n</think>\n\nIt is 22.")]),
        ({}, [msg("user", "Think."), msg("assistant", "<think>a</think>b"),
              msg("user", "Again")]),
        ({"tools": [WEATHER_TOOL]},
         [q, {"role": "assistant", "content": "",
              "tool_calls": [tool_call("get_weather", {
                  "location": "Zürich \"old town\"", "days": 3, "ratio": 0.5,
                  "flags": [True, False, None], "nested": {"z": 1, "a": [{}]}})]},
          result]),
        # Llama 3.1's built-in tools (ipython mode, python_tag calls).
        ({"builtin_tools": ["brave_search", "code_interpreter", "wolfram_alpha"],
          "tools": [WEATHER_TOOL]},
         [msg("system", "S"), q,
          {"role": "assistant", "content": "",
           "tool_calls": [tool_call("brave_search", {"query": "Paris weather"})]},
          {"role": "ipython", "content": "sunny"}]),
        ({"builtin_tools": ["brave_search"]}, [q, call, result]),
        ({"date_string": "01 Jan 2025"}, [msg("user", "date?")]),
        ({"date_string": "01 Jan 2025", "tools": [TIME_TOOL]},
         [msg("system", "S"), msg("user", "time?")]),
    ]
    return chats


def contexts():
    """Every render context: the variables a template sees, minus bos/eos."""
    out = []
    for chat in plain_conversations():
        for agp in (True, False):
            out.append({"messages": chat, "add_generation_prompt": agp})
    for extra, chat in tool_conversations():
        for agp in (True, False):
            ctx = {"messages": chat, "add_generation_prompt": agp}
            ctx.update(extra)
            out.append(ctx)
    return out


def render_reference(source, ctx):
    kwargs = copy.deepcopy(ctx)
    messages = kwargs.pop("messages")
    tools = kwargs.pop("tools", None)
    agp = kwargs.pop("add_generation_prompt")
    kwargs.setdefault("bos_token", BOS)
    kwargs.setdefault("eos_token", EOS)
    try:
        rendered, _ = render_jinja_template(
            conversations=[messages], tools=tools, chat_template=source,
            add_generation_prompt=agp, **kwargs)
        return {"ok": rendered[0]}
    except Exception as e:  # a raise in the template, or a Jinja error
        return {"error": f"{type(e).__name__}: {e}"}


def render_xfmr(binary, template, ctxs):
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False,
                                     encoding="utf-8") as f:
        for ctx in ctxs:
            f.write(json.dumps(ctx, ensure_ascii=False) + "\n")
        path = f.name
    try:
        proc = subprocess.run(
            [binary, "chat", "--template", template, "--render-jsonl", path,
             "--bos-token", BOS, "--eos-token", EOS],
            capture_output=True, check=False)
    finally:
        os.unlink(path)
    if proc.returncode != 0:
        sys.exit(f"{template}: xfmr-tokenize failed ({proc.returncode}): "
                 f"{proc.stderr.decode(errors='replace')}")
    results = []
    for line in proc.stdout.decode("utf-8").splitlines():
        value = json.loads(line)
        results.append({"ok": value} if isinstance(value, str) else value)
    return results


def check(binary, template, verbose):
    with open(template, encoding="utf-8") as f:
        source = f.read()
    ctxs = contexts()
    ours = render_xfmr(binary, template, ctxs)
    if len(ours) != len(ctxs):
        sys.exit(f"{template}: {len(ours)} results for {len(ctxs)} conversations")
    mismatches = raised = 0
    for i, (ctx, got) in enumerate(zip(ctxs, ours)):
        want = render_reference(source, ctx)
        raised += "error" in want
        same = ("ok" in want) == ("ok" in got) and want.get("ok") == got.get("ok")
        if same:
            continue
        mismatches += 1
        if verbose or mismatches <= 3:
            print(f"  mismatch #{i}: {json.dumps(ctx, ensure_ascii=False)[:300]}")
            print(f"    transformers: {json.dumps(want, ensure_ascii=False)[:600]}")
            print(f"    xfmr:         {json.dumps(got, ensure_ascii=False)[:600]}")
    print(f"{os.path.basename(template)}: {len(ctxs)} conversations, "
          f"{mismatches} mismatches ({raised} raise in transformers)")
    return mismatches


FUZZ_CONTEXT = {
    "xs": [3, 1, 2], "s": " Ab c ", "n": 7, "f": 2.5, "z": 0, "b": True,
    "none_": None, "d": {"k": "v", "n": 2}, "t": True, "words": ["a", "b"],
    "ms": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": " yo "}],
}
FUZZ_ATOMS = ["xs", "s", "n", "f", "z", "b", "none_", "d", "ms", "nope", "1", "-2",
              "0.5", "'a'", "''", "'x y'", "[]", "[1, 'a']", "{}", "{'a': 1}", "true",
              "none", "ms[0]", "d.k", "d['n']", "xs[-1]", "s[1:]", "ms[0].content",
              "(1, 2)", "'ÉTÉ ß'"]
FUZZ_BINARY = ["+", "-", "*", "/", "//", "%", "~", "==", "!=", "<", ">=", "and", "or",
               "in", "not in"]
FUZZ_FILTERS = ["length", "trim", "upper", "lower", "first", "last", "string", "int",
                "float", "list", "tojson", "default('D')", "join(',')", "abs", "round",
                "unique|list", "reverse|list", "capitalize", "title", "map('string')|list",
                "select|list", "reject|list", "dictsort", "items|list", "sum",
                "selectattr('role')|list", "map(attribute='role')|join", "indent(2)",
                "replace('a','b')", "tojson(indent=1)"]
FUZZ_TESTS = ["defined", "none", "string", "number", "integer", "mapping", "iterable",
              "sequence", "true", "false", "even", "odd", "boolean", "float",
              "divisibleby 2", "in [1, 'a']", "eq 1", "lower", "upper"]
FUZZ_TEXT = ["", " ", "  ", "\n", "\n\n", " \n ", "\t", "x", " y ", "\n  ", "  \n",
             "z\n", "\r\n", " \t\n"]


def fuzz_expression(rng, depth=0):
    r = rng.random()
    sub = lambda: fuzz_expression(rng, depth + 1)
    if depth > 2 or r < 0.3:
        return rng.choice(FUZZ_ATOMS)
    if r < 0.55:
        return f"({sub()} {rng.choice(FUZZ_BINARY)} {sub()})"
    if r < 0.75:
        return f"({sub()} | {rng.choice(FUZZ_FILTERS)})"
    if r < 0.85:
        return f"({sub()} is {rng.choice(['', 'not '])}{rng.choice(FUZZ_TESTS)})"
    if r < 0.92:
        return f"(not {sub()})"
    return f"({sub()} if {sub()} else {sub()})"


def fuzz_statements(rng, depth=0):
    text = lambda: "".join(rng.choice(FUZZ_TEXT) for _ in range(rng.randint(0, 3)))
    sign = lambda: rng.choice(["", "-", "+"])
    trim = lambda: rng.choice(["", "-"])
    body = lambda: "".join(fuzz_statements(rng, depth + 1) for _ in range(rng.randint(0, 2)))
    r = rng.random()
    if depth > 2 or r < 0.35:
        return text() + "{{" + trim() + " 'v' " + trim() + "}}" + text()
    if r < 0.5:
        return text() + "{#" + trim() + " c " + trim() + "#}" + text()
    if r < 0.75:
        return (text() + "{%" + sign() + " if t " + sign() + "%}" + body() + "{%" + sign()
                + " else " + sign() + "%}" + body() + "{%" + sign() + " endif " + sign()
                + "%}" + text())
    return (text() + "{%" + sign() + " for x in words " + sign() + "%}" + body() + "{{ x }}"
            + "{%" + sign() + " endfor " + sign() + "%}" + text())


def fuzz(binary, count, seed):
    import random
    from transformers.utils.chat_template_utils import _compile_jinja_template
    rng = random.Random(seed)
    sources = [fuzz_statements(rng) + rng.choice(["", "\n", "\n\n"]) for _ in range(count)]
    sources += ["{{ " + fuzz_expression(rng) + " }}" for _ in range(count)]
    mismatches = unsupported = 0
    with tempfile.TemporaryDirectory() as tmp:
        ctx_path = os.path.join(tmp, "context.jsonl")
        with open(ctx_path, "w", encoding="utf-8") as f:
            f.write(json.dumps(FUZZ_CONTEXT) + "\n")
        template = os.path.join(tmp, "fuzz.jinja")
        for source in sources:
            try:
                want = {"ok": _compile_jinja_template(source).render(
                    **copy.deepcopy(FUZZ_CONTEXT))}
            except Exception as e:
                want = {"error": f"{type(e).__name__}: {e}"}
            with open(template, "w", encoding="utf-8", newline="") as f:
                f.write(source)
            proc = subprocess.run([binary, "chat", "--template", template,
                                   "--render-jsonl", ctx_path], capture_output=True)
            if proc.returncode:
                got = {"error": proc.stderr.decode(errors="replace")}
            else:
                value = json.loads(proc.stdout.decode("utf-8").split("\n")[0])
                got = {"ok": value} if isinstance(value, str) else value
            if ("ok" in want) == ("ok" in got) and want.get("ok") == got.get("ok"):
                continue
            if "ok" in want and "not supported" in got.get("error", ""):
                unsupported += 1
                continue
            mismatches += 1
            if mismatches <= 5:
                print(f"  mismatch: {source!r}\n    jinja2: {want!r}\n    xfmr:   {got!r}")
    print(f"fuzz (seed {seed}): {len(sources)} templates, {mismatches} mismatches, "
          f"{unsupported} not supported")
    return mismatches


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", default=os.path.join(root, "build"))
    parser.add_argument("--binary", help="xfmr-tokenize (default: BUILD/bin/xfmr-tokenize)")
    parser.add_argument("--template", nargs="*",
                        help="templates (default: examples/chat_templates/*.jinja)")
    parser.add_argument("-v", "--verbose", action="store_true")
    parser.add_argument("--fuzz", type=int, metavar="N",
                        help="compare N random templates and N random expressions")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    binary = args.binary or os.path.join(args.build_dir, "bin", "xfmr-tokenize")
    if args.fuzz:
        return 1 if fuzz(binary, args.fuzz, args.seed) else 0
    templates = args.template or sorted(
        glob.glob(os.path.join(root, "examples", "chat_templates", "*.jinja")))
    total = sum(check(binary, t, args.verbose) for t in templates)
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
