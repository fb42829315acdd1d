#!/usr/bin/env python3
"""Load on xfmr-serve over loopback (asyncio, raw HTTP/1.1, no client library).

Starts `xfmr-serve ARTIFACT --port 0` (plus --server-args) and runs:
  load      N concurrent streaming completions (prompt ids of P tokens, M
            generated with ignore_eos): failures, TTFT p50/p99, generated
            tokens/s, the server's peak RSS, and the KV blocks still held
            afterwards (must be 0), from /metrics;
  pools     interactive requests arriving every --interval seconds, first
            alone, then during a flood of batch requests (priority "batch");
            TTFT p50/p99 of the interactive ones both times and their ratio
            (run the server with --pools interactive=0.75,batch=0.25);
  bench     the same N requests as `xfmr-bench --synthetic
            requests=N,prompt=P,output=M` (all at once): server throughput
            against xfmr-bench's, measured in the same run.
Prints one JSON object per mode with --json.

  .venv/bin/python scripts/bench-serve.py ART.xfa --mode load --requests 1000
  .venv/bin/python scripts/bench-serve.py ART.xfa --mode pools \
      --server-args="--pools interactive=0.75,batch=0.25"
"""

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import time

from serve_process import ServeProcess


def percentile(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


async def http(host, port, method, path, body=None, headers=None):
    """One request on its own connection: (status, body bytes)."""
    r, w = await asyncio.open_connection(host, port)
    data = b"" if body is None else json.dumps(body).encode()
    head = "%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: %d\r\n" % (
        method, path, len(data))
    for k, v in (headers or {}).items():
        head += "%s: %s\r\n" % (k, v)
    w.write(head.encode() + b"\r\n" + data)
    await w.drain()
    raw = await r.read()
    w.close()
    status = int(raw.split(b" ", 2)[1])
    header, _, rest = raw.partition(b"\r\n\r\n")
    if b"chunked" in header.lower():
        out, pos = b"", 0
        while True:
            eol = rest.index(b"\r\n", pos)
            n = int(rest[pos:eol], 16)
            if n == 0:
                break
            out += rest[eol + 2:eol + 2 + n]
            pos = eol + 2 + n + 2
        rest = out
    return status, rest


async def stream_completion(host, port, body, headers=None):
    """A streaming completion; returns (ok, ttft, end time, events, error)."""
    t0 = time.perf_counter()
    try:
        r, w = await asyncio.open_connection(host, port, limit=1 << 20)
        data = json.dumps(body).encode()
        head = ("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                "Content-Length: %d\r\n" % len(data))
        for k, v in (headers or {}).items():
            head += "%s: %s\r\n" % (k, v)
        w.write(head.encode() + b"\r\n" + data)
        await w.drain()
        status_line = await r.readline()
        status = int(status_line.split()[1])
        while (await r.readline()) not in (b"\r\n", b""):
            pass
        if status != 200:
            w.close()
            return False, None, None, 0, "status %d" % status
        buf, ttft, events, done = b"", None, 0, False
        while not done:
            size = int((await r.readline()).strip() or b"0", 16)
            if size == 0:
                break
            buf += (await r.readexactly(size + 2))[:-2]  # the chunk's trailing CRLF
            while b"\n\n" in buf:
                event, _, buf = buf.partition(b"\n\n")
                if not event.startswith(b"data: "):
                    continue
                payload = event[6:]
                if payload == b"[DONE]":
                    done = True
                    break
                obj = json.loads(payload)
                if "error" in obj:
                    w.close()
                    return False, ttft, None, events, obj["error"]["message"]
                if ttft is None and obj["choices"] and obj["choices"][0]["text"]:
                    ttft = time.perf_counter() - t0
                events += 1
        w.close()
        return done, ttft, time.perf_counter(), events, None if done else "no [DONE]"
    except Exception as e:  # noqa: BLE001 - a failure is counted, not raised
        return False, None, None, 0, repr(e)


async def metric(s, name, **labels):
    _, text = await http(s.host, s.port, "GET", "/metrics")
    total = 0.0
    for line in text.decode().splitlines():
        if line.startswith(name) and all('%s="%s"' % kv in line for kv in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


def random_prompts(n, length, vocab, seed):
    rng = random.Random(seed)
    return [[rng.randrange(3, vocab) for _ in range(length)] for _ in range(n)]


async def run_load(s, a):
    prompts = random_prompts(a.requests, a.prompt, a.vocab, 1)
    t0 = time.perf_counter()
    results = await asyncio.gather(*[
        stream_completion(s.host, s.port, {"prompt": p, "max_tokens": a.output, "stream": True,
                                           "temperature": 0, "ignore_eos": True})
        for p in prompts])
    wall = time.perf_counter() - t0
    failed = [r[4] for r in results if not r[0]]
    ttfts = [r[1] for r in results if r[1] is not None]
    await asyncio.sleep(0.2)
    used = await metric(s, "xfmr:kv_cache_blocks", state="used")
    running = await metric(s, "xfmr:num_requests_running")
    return {"mode": "load", "requests": a.requests, "failed": len(failed),
            "first_errors": failed[:3], "wall_s": round(wall, 2),
            "generated_tok_s": round(a.requests * a.output / wall, 1),
            "ttft_p50_s": round(percentile(ttfts, 50), 3),
            "ttft_p99_s": round(percentile(ttfts, 99), 3),
            "server_peak_rss_mib": round(s.rss_mib(), 1),
            "kv_blocks_held_after": used, "running_after": running}


async def interactive_ttfts(s, a, prompts):
    tasks = []
    for p in prompts:
        tasks.append(asyncio.create_task(stream_completion(
            s.host, s.port, {"prompt": p, "max_tokens": a.output, "stream": True,
                             "temperature": 0, "ignore_eos": True, "priority": "interactive"})))
        await asyncio.sleep(a.interval)
    results = await asyncio.gather(*tasks)
    return [r[1] for r in results if r[1] is not None], sum(not r[0] for r in results)


async def run_pools(s, a):
    prompts = random_prompts(a.interactive, a.prompt, a.vocab, 2)
    alone, failed_alone = await interactive_ttfts(s, a, prompts)
    flood_prompts = random_prompts(a.requests, a.batch_prompt, a.vocab, 3)
    flood = [asyncio.create_task(stream_completion(
        s.host, s.port, {"prompt": p, "max_tokens": a.batch_output, "stream": True,
                         "temperature": 0, "ignore_eos": True, "priority": "batch"}))
        for p in flood_prompts]
    await asyncio.sleep(1.0)  # the flood is queued and running
    # Tokens generated while the interactive requests ran, theirs included:
    # what protecting them costs the flood.
    t0 = time.perf_counter()
    gen0 = await metric(s, "xfmr:generation_tokens_total")
    loaded, failed_loaded = await interactive_ttfts(s, a, prompts)
    dt = time.perf_counter() - t0
    gen = await metric(s, "xfmr:generation_tokens_total") - gen0
    for t in flood:
        t.cancel()
    await asyncio.gather(*flood, return_exceptions=True)
    p99a, p99l = percentile(alone, 99), percentile(loaded, 99)
    return {"mode": "pools", "interactive": a.interactive, "batch_flood": a.requests,
            "ttft_alone_p50_s": round(percentile(alone, 50), 3), "ttft_alone_p99_s": round(p99a, 3),
            "ttft_flood_p50_s": round(percentile(loaded, 50), 3),
            "ttft_flood_p99_s": round(p99l, 3), "p99_ratio": round(p99l / p99a, 2),
            "flood_phase_generated_tok_s": round(gen / dt, 1),
            "failed": failed_alone + failed_loaded}


async def run_bench(s, a):
    prompts = random_prompts(a.requests, a.prompt, a.vocab, 4)
    t0 = time.perf_counter()
    results = await asyncio.gather(*[
        stream_completion(s.host, s.port, {"prompt": p, "max_tokens": a.output, "stream": True,
                                           "temperature": 0, "ignore_eos": True})
        for p in prompts])
    wall = time.perf_counter() - t0
    server_tps = sum(r[0] for r in results) * a.output / wall
    out = subprocess.run([os.path.join(a.build_dir, "bin", "xfmr-bench"), a.artifact,
                          "--synthetic", "requests=%d,prompt=%d,output=%d" % (
                              a.requests, a.prompt, a.output), "--json"] + a.bench_args.split(),
                         capture_output=True, text=True, check=True)
    bench = json.loads(out.stdout)
    bench_tps = bench.get("output_tokens_per_s") or bench.get("throughput_tok_s") or \
        bench.get("tokens_per_s")
    return {"mode": "bench", "requests": a.requests, "server_tok_s": round(server_tps, 1),
            "xfmr_bench_tok_s": bench_tps,
            "ratio": round(server_tps / bench_tps, 3) if bench_tps else None,
            "xfmr_bench": {k: v for k, v in bench.items() if not isinstance(v, (list, dict))}}


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("artifact")
    ap.add_argument("--build-dir", default="build")
    ap.add_argument("--mode", choices=["load", "pools", "bench"], default="load")
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--prompt", type=int, default=16)
    ap.add_argument("--output", type=int, default=16)
    ap.add_argument("--interactive", type=int, default=40)
    ap.add_argument("--interval", type=float, default=0.1)
    ap.add_argument("--batch-prompt", type=int, default=256)
    ap.add_argument("--batch-output", type=int, default=64)
    ap.add_argument("--vocab", type=int, default=256)
    ap.add_argument("--server-args", default="")
    ap.add_argument("--bench-args", default="")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    s = ServeProcess(a.build_dir, a.artifact, ["--max-connections", "8192"] + a.server_args.split())
    try:
        fn = {"load": run_load, "pools": run_pools, "bench": run_bench}[a.mode]
        result = asyncio.run(fn(s, a))
    finally:
        rc = s.stop()
    result["server_exit"] = rc
    print(json.dumps(result) if a.json else json.dumps(result, indent=1))
    ok = result.get("failed", 0) == 0 and rc == 0 and result.get("kv_blocks_held_after", 0) == 0
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
