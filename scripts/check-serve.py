#!/usr/bin/env python3
"""xfmr-serve against the `openai` client and independent references.

Starts `xfmr-serve ARTIFACT --port 0` and checks, printing PASS/FAIL per case
and "N passed, N failed" (exit 1 on a failure):
  * /health, /v1/models, /tokenize and /detokenize against PyPI `tokenizers`
    on the artifact's own tokenizer.json;
  * completions and chat completions with the openai client, streamed and
    not: greedy text equal to `xfmr-run generate --prompt-ids` on the same
    ids decoded by `tokenizers`, chat prompts tokenized as transformers'
    apply_chat_template, `usage` counts, streamed pieces concatenating to
    the whole text, stop strings (the text cut before them, also when
    streamed), stop_token_ids, seeds reproducible;
  * OpenAI-shaped errors: malformed JSON, wrong types, out-of-range values,
    max_tokens 10^12, a prompt longer than the context, unknown model,
    oversize body, n > 1, unknown route, wrong method;
  * a client that vanishes mid-stream: its request is cancelled and every
    KV block is free again (/metrics);
  * concurrent streams; SIGTERM: exit status 0;
  * with --launcher (mpirun for a --tensor-parallel artifact): the same
    cases, the references run by xfmr-run generate under the same mpirun;
  * --pools: requests in the pool their priority names, per-pool metrics,
    the batch pool's prompt tokens per step learned from step times.

  .venv/bin/python scripts/check-serve.py --build-dir build --artifact A.xfa
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request

from serve_process import ServeProcess

RESULTS = []


def check(name, ok, detail=""):
    RESULTS.append(ok)
    print("%s %s%s" % ("PASS" if ok else "FAIL", name, "" if ok else ": " + str(detail)))
    sys.stdout.flush()


class Server(ServeProcess):
    def request(self, method, path, body=None, headers=None, raw=None):
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers=dict({"Content-Type": "application/json"},
                                                  **(headers or {})))
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def metric(self, name, **labels):
        _, text = self.request("GET", "/metrics")
        total = 0.0
        found = False
        for line in text.splitlines():
            if not line.startswith(name + "{") and not line.startswith(name + " "):
                continue
            if all('%s="%s"' % (k, v) in line for k, v in labels.items()):
                total += float(line.rsplit(" ", 1)[1])
                found = True
        return total if found else None


# A command prefix for xfmr-serve and xfmr-run (--launcher: mpirun for a
# tensor-parallel artifact).
LAUNCHER = []


def xfmr_generate(build, artifact, ids, n):
    out = subprocess.run(LAUNCHER + [os.path.join(build, "bin", "xfmr-run"), "generate", artifact,
                          "--prompt-ids", ",".join(map(str, ids)), "--max-new-tokens", str(n),
                          "--quiet"], capture_output=True, text=True, check=True)
    return [int(t) for t in out.stdout.strip().split(",") if t]


def error_of(status, body):
    try:
        e = json.loads(body)["error"]
        return status, e.get("param"), e["message"], e["type"]
    except Exception:
        return status, None, body, None


def check_errors(s, model):
    cases = [
        ("malformed JSON", "/v1/completions", b'{"prompt": "a", ', 400, None),
        ("body not an object", "/v1/completions", b'[1, 2]', 400, None),
        ("invalid UTF-8 in JSON", "/v1/completions", b'{"prompt": "\xff\xfe"}', 400, None),
        ("prompt missing", "/v1/completions", {"model": model}, 400, "prompt"),
        ("max_tokens a string", "/v1/completions", {"prompt": "a", "max_tokens": "x"}, 400,
         "max_tokens"),
        ("max_tokens 0", "/v1/completions", {"prompt": "a", "max_tokens": 0}, 400, "max_tokens"),
        ("max_tokens 10^12", "/v1/completions", {"prompt": "a", "max_tokens": 10 ** 12}, 400,
         "max_tokens"),
        ("temperature 5", "/v1/completions", {"prompt": "a", "temperature": 5}, 400,
         "temperature"),
        ("top_p 0", "/v1/completions", {"prompt": "a", "top_p": 0}, 400, "top_p"),
        ("n 2", "/v1/completions", {"prompt": "a", "n": 2}, 400, "n"),
        ("stop a number", "/v1/completions", {"prompt": "a", "stop": 3}, 400, "stop"),
        ("prompt id out of range", "/v1/completions", {"prompt": [1, 10 ** 9]}, 400, "prompt"),
        ("logprobs unsupported", "/v1/completions", {"prompt": "a", "logprobs": 2}, 400,
         "logprobs"),
        ("messages missing", "/v1/chat/completions", {"model": model}, 400, "messages"),
        ("message without role", "/v1/chat/completions", {"messages": [{"content": "x"}]}, 400,
         "messages[0].role"),
        ("image content", "/v1/chat/completions",
         {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]},
         400, "messages[0].content"),
        ("unknown model", "/v1/completions", {"prompt": "a", "model": "nope"}, 404, "model"),
        ("unknown priority", "/v1/completions", {"prompt": "a", "priority": "vip"}, 400,
         "priority"),
    ]
    for name, path, body, want, param in cases:
        raw = body if isinstance(body, bytes) else None
        status, text = s.request("POST", path, None if raw else body, raw=raw)
        st, p, msg, typ = error_of(status, text)
        check("error: " + name, st == want and (param is None or p == param) and typ,
              "%s %s %s" % (st, p, msg))
    long_prompt = "hello " * 5000
    status, text = s.request("POST", "/v1/completions", {"prompt": long_prompt, "max_tokens": 1})
    check("error: prompt longer than the context", status == 400 and "context length" in text,
          text[:200])
    status, text = s.request("POST", "/v1/completions", raw=b"x" * (5 << 20))
    check("error: oversize body is 413", status == 413, status)
    status, text = s.request("GET", "/v2/nothing")
    check("error: unknown route is 404", status == 404 and "error" in json.loads(text), text)
    status, text = s.request("GET", "/v1/completions")
    check("error: GET on completions is 405", status == 405, status)
    status, _ = s.request("GET", "/health")
    check("still serving after the errors", status == 200, status)


def vanish_mid_stream(s, model):
    """Opens a streaming request on a raw socket, reads two events, closes."""
    body = json.dumps({"model": model, "prompt": "Once upon a time", "max_tokens": 400,
                       "ignore_eos": True, "stream": True}).encode()
    sock = socket.create_connection((s.host, s.port))
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n" % len(body) + body)
    got = b""
    while got.count(b"data: ") < 2:
        chunk = sock.recv(4096)
        if not chunk:
            break
        got += chunk
    sock.close()
    return got.count(b"data: ") >= 2


def check_pools(build, art, model, prompt_ids):
    """--pools: requests go to the pool their priority names, each pool's
    metrics carry its label, the batch pool's prompt tokens per step are
    learned from step times (a long batch prompt is split into chunks no
    larger than the gauge allows) and both pools' greedy text is the same."""
    s = Server(build, art, ["--pools", "interactive=0.75,batch=0.25"])
    try:
        long_prompt = (prompt_ids * 40)[:300]
        texts = {}
        for prio in ("batch", "interactive"):
            status, body = s.request("POST", "/v1/completions", {
                "model": model, "prompt": long_prompt, "max_tokens": 6, "temperature": 0,
                "ignore_eos": True, "priority": prio})
            texts[prio] = json.loads(body)["choices"][0]["text"] if status == 200 else body
            check("pools: %s request answered" % prio, status == 200, body[:200])
        check("pools: same greedy text in both pools", texts["batch"] == texts["interactive"],
              texts)
        for pool in ("interactive", "batch"):
            gen = s.metric("xfmr:generation_tokens_total", pool=pool)
            check("pools: %s pool's tokens counted under its label" % pool, gen == 6, gen)
        budget = s.metric("xfmr:batch_prefill_tokens_per_step")
        # 300 prompt tokens cannot fit the floor of 16 in one step: steps
        # with prompt work were timed, and the budget stays within
        # [16, the batch pool's 512 tokens].
        check("pools: batch prompt tokens per step learned, within [16, 512]",
              budget is not None and 16 <= budget <= 512, budget)
    finally:
        rc = s.stop()
    check("pools: SIGTERM: exit 0", rc == 0, rc)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", default="build")
    ap.add_argument("--artifact", required=True)
    ap.add_argument("--server-args", default="", help="more xfmr-serve flags")
    ap.add_argument("--launcher", default="",
                    help="a command prefix for xfmr-serve and xfmr-run generate, e.g. "
                         "'mpirun -np 2' for a --tensor-parallel=2 artifact")
    ap.add_argument("--skip-pools", action="store_true", help="skip the --pools cases")
    a = ap.parse_args()
    LAUNCHER.extend(a.launcher.split())

    import openai
    import tokenizers
    from transformers import PreTrainedTokenizerFast

    art = a.artifact
    ref = tokenizers.Tokenizer.from_file(os.path.join(art, "tokenizer.json"))
    hf = PreTrainedTokenizerFast(tokenizer_file=os.path.join(art, "tokenizer.json"))
    with open(os.path.join(art, "chat_template.jinja")) as f:
        hf.chat_template = f.read()
    s = Server(a.build_dir, art, a.server_args.split(), LAUNCHER)
    model = os.path.basename(os.path.normpath(art))
    client = openai.OpenAI(base_url=s.base + "/v1", api_key="none", max_retries=0)

    status, _ = s.request("GET", "/health")
    check("/health", status == 200, status)
    models = client.models.list()
    check("/v1/models", [m.id for m in models.data] == [model], models)

    text = "Hello world! Ünïcödé, 日本語 and emoji 😀 -- 12345\n\tdone."
    status, body = s.request("POST", "/tokenize", {"prompt": text})
    want = ref.encode(text).ids
    check("/tokenize = tokenizers", status == 200 and json.loads(body)["tokens"] == want,
          (body[:200], want[:20]))
    status, body = s.request("POST", "/detokenize", {"tokens": want})
    check("/detokenize = tokenizers",
          status == 200 and json.loads(body)["prompt"] == ref.decode(want), body[:200])

    # Greedy completions from prompt ids against xfmr-run generate.
    prompt_ids = ref.encode("The capital of France is").ids
    n = 12
    ids = xfmr_generate(a.build_dir, art, prompt_ids, n)
    want_text = ref.decode([t for t in ids if t != 2], skip_special_tokens=True)
    r = client.completions.create(model=model, prompt=prompt_ids, max_tokens=n, temperature=0)
    check("completion = xfmr-run generate (greedy, decoded by tokenizers)",
          r.choices[0].text == want_text, (r.choices[0].text, want_text))
    check("completion usage", r.usage.prompt_tokens == len(prompt_ids)
          and r.usage.completion_tokens == len(ids)
          and r.usage.total_tokens == len(prompt_ids) + len(ids), (r.usage, len(ids)))
    check("completion finish_reason",
          r.choices[0].finish_reason == ("stop" if ids and ids[-1] == 2 else "length"),
          r.choices[0].finish_reason)

    # Text prompts are tokenized as tokenizers does.
    r = client.completions.create(model=model, prompt="The capital of France is", max_tokens=n,
                                  temperature=0)
    check("text prompt tokenized as tokenizers",
          r.usage.prompt_tokens == len(prompt_ids) and r.choices[0].text == want_text,
          (r.usage, r.choices[0].text))

    # Streaming: the pieces concatenate to the whole text.
    stream = client.completions.create(model=model, prompt=prompt_ids, max_tokens=n,
                                       temperature=0, stream=True,
                                       stream_options={"include_usage": True})
    pieces, reasons, usage = [], [], None
    for chunk in stream:
        if chunk.usage:
            usage = chunk.usage
        for c in chunk.choices:
            pieces.append(c.text)
            reasons.append(c.finish_reason)
    check("streamed completion = whole", "".join(pieces) == want_text,
          ("".join(pieces), want_text))
    check("streamed usage and finish", usage is not None and usage.completion_tokens == len(ids)
          and reasons[-1] in ("stop", "length") and all(x is None for x in reasons[:-1]),
          (usage, reasons))

    # Chat: the prompt is the template rendered as transformers renders it.
    messages = [{"role": "system", "content": "You are terse."},
                {"role": "user", "content": "What is the capital of France?"}]
    chat_ids = hf.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    if isinstance(chat_ids, dict) or hasattr(chat_ids, "keys"):
        chat_ids = chat_ids["input_ids"]
    chat_ids = list(chat_ids)
    ids = xfmr_generate(a.build_dir, art, chat_ids, n)
    want_chat = ref.decode([t for t in ids if t != 2], skip_special_tokens=True)
    r = client.chat.completions.create(model=model, messages=messages, max_tokens=n,
                                       temperature=0)
    check("chat = apply_chat_template + xfmr-run generate",
          r.usage.prompt_tokens == len(chat_ids) and r.choices[0].message.content == want_chat,
          (r.usage, r.choices[0].message.content, want_chat))
    stream = client.chat.completions.create(model=model, messages=messages, max_tokens=n,
                                            temperature=0, stream=True)
    pieces, roles = [], []
    for chunk in stream:
        for c in chunk.choices:
            if c.delta.role:
                roles.append(c.delta.role)
            if c.delta.content:
                pieces.append(c.delta.content)
    check("streamed chat = whole", "".join(pieces) == want_chat and roles == ["assistant"],
          ("".join(pieces), roles))

    # Stop strings: the text ends before the first stop string.
    r = client.completions.create(model=model, prompt=prompt_ids, max_tokens=40, temperature=0,
                                  extra_body={"ignore_eos": True})
    full = r.choices[0].text
    stop = next((full[i:i + 3] for i in range(4, len(full) - 3) if full[i:i + 3].strip()), None)
    if stop:
        cut = full[:full.find(stop)]
        r = client.completions.create(model=model, prompt=prompt_ids, max_tokens=40,
                                      temperature=0, stop=[stop], extra_body={"ignore_eos": True})
        check("stop string", r.choices[0].text == cut and r.choices[0].finish_reason == "stop",
              (r.choices[0].text, cut, stop))
        stream = client.completions.create(model=model, prompt=prompt_ids, max_tokens=40,
                                           temperature=0, stop=stop, stream=True,
                                           extra_body={"ignore_eos": True})
        got = "".join(c.text for ch in stream for c in ch.choices)
        check("stop string, streamed", got == cut, (got, cut))
    else:
        check("stop string (no usable text generated)", False, full)

    # stop_token_ids: stop at the third generated token.
    ids = xfmr_generate(a.build_dir, art, prompt_ids, 40)
    if len(ids) > 3 and ids[2] not in ids[:2]:
        r = client.completions.create(model=model, prompt=prompt_ids, max_tokens=40,
                                      temperature=0, extra_body={"stop_token_ids": [ids[2]]})
        check("stop_token_ids", r.usage.completion_tokens == 3
              and r.choices[0].finish_reason == "stop", r)

    # Sampling with a seed is reproducible.
    kw = dict(model=model, prompt=prompt_ids, max_tokens=16, temperature=1.0, top_p=0.9,
              seed=1234, extra_body={"top_k": 50, "ignore_eos": True})
    t1 = client.completions.create(**kw).choices[0].text
    t2 = client.completions.create(**kw).choices[0].text
    check("seeded sampling reproducible", t1 == t2, (t1, t2))

    check_errors(s, model)

    # A vanished client: cancelled, every block free again.
    check("vanishing client read events", vanish_mid_stream(s, model))
    deadline = time.time() + 20
    while time.time() < deadline:
        running = s.metric("xfmr:num_requests_running")
        used = s.metric("xfmr:kv_cache_blocks", state="used")
        if running == 0 and used == 0:
            break
        time.sleep(0.05)
    check("vanished client's request cancelled, no KV blocks held", running == 0 and used == 0,
          (running, used))
    cancelled = s.metric("xfmr:request_success_total", finished_reason="cancelled")
    check("cancellation counted", cancelled and cancelled >= 1, cancelled)

    # Concurrent streams, all answered.
    errors = []

    def one(i):
        try:
            st = client.completions.create(model=model, prompt=prompt_ids + [i % 100 + 3],
                                           max_tokens=8, temperature=0, stream=True,
                                           extra_body={"ignore_eos": True})
            if len([c for ch in st for c in ch.choices]) < 2:
                errors.append(i)
        except Exception as e:  # noqa: BLE001 - any failure counts
            errors.append((i, repr(e)))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(48)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    check("48 concurrent streams", not errors, errors[:3])
    gen = s.metric("xfmr:generation_tokens_total")
    check("/metrics counts generated tokens", gen and gen > 48 * 8, gen)
    if "--speculative-config" in a.server_args:
        # Every answer above equalled plain decoding's while the engine
        # speculated (this random model's text rarely repeats, so few are kept).
        drafts = s.metric("xfmr:spec_decode_num_draft_tokens_total")
        kept = s.metric("xfmr:spec_decode_num_accepted_tokens_total")
        check("speculative decoding: tokens proposed, counted in /metrics",
              drafts and drafts > 0 and kept is not None and 0 <= kept <= drafts, (drafts, kept))

    rc = s.stop()
    if LAUNCHER:
        # mpirun forwards SIGTERM to every rank and then exits 1 whatever the
        # ranks did: rank 0 drained and stopped, and the job is over.
        for _ in range(20):  # the reader thread takes the last lines
            if "xfmr-serve: stopped\n" in s.stderr_lines:
                break
            time.sleep(0.1)
        stopped = "xfmr-serve: stopped\n" in s.stderr_lines and rc != "timeout"
        check("SIGTERM (through mpirun): drained, stopped, every rank gone", stopped,
              (rc, "".join(s.stderr_lines[-5:])))
    else:
        check("SIGTERM: exit 0", rc == 0, (rc, "".join(s.stderr_lines[-5:])))

    if not a.skip_pools:
        check_pools(a.build_dir, art, model, prompt_ids)

    failed = RESULTS.count(False)
    print("%d passed, %d failed" % (len(RESULTS) - failed, failed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
