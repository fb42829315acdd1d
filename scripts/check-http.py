#!/usr/bin/env python3
"""Checks the HTTP layer of xfmr-serve (tools/xfmr-serve/HttpServer.cpp).

Starts xfmr-http-echo on a free port and checks keep-alive, pipelining, the
limits (413 without reading the body, 400, 431, 503), the idle timeout,
1,000 concurrent server-sent event streams on 2 I/O threads (all complete,
server memory bounded), clients that leave mid-stream being reported as
cancelled, and a clean exit on SIGTERM. Prints one "<check>: ok" line per
check (test/Serve/http.test); exits 1 at the first failure.

    scripts/check-http.py --build-dir build [--streams 1000]
"""
import argparse
import http.client
import json
import os
import resource
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time


def fail(message):
    print(f"check-http: FAILED: {message}", flush=True)
    sys.exit(1)


def expect(condition, message):
    if not condition:
        fail(message)


class Server:
    """xfmr-http-echo in a child process, its stdout collected."""

    def __init__(self, binary, *args):
        self.proc = subprocess.Popen([binary, "--port", "0", *args], stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        line = self.proc.stdout.readline()
        expect(line.startswith("listening on "), f"xfmr-http-echo printed {line!r}")
        self.port = int(line.rsplit(":", 1)[1])
        self.lines = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def connect(self):
        return socket.create_connection(("127.0.0.1", self.port), timeout=10)

    def stats(self):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        conn.request("GET", "/stats")
        stats = json.loads(conn.getresponse().read())
        conn.close()
        return stats

    def rss_kb(self, field="VmRSS"):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
        return 0

    def terminate(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            fail("xfmr-http-echo did not exit on SIGTERM")
        self.reader.join(timeout=5)
        reports = [line for line in self.lines if "Sanitizer" in line]
        expect(not reports, "sanitizer reports:\n" + "\n".join(self.lines))
        return code


def read_response(sock):
    """One response with Content-Length from a raw socket: (status, body)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    expect(lines and lines[0].startswith("HTTP/1.1 "), f"no status line in {data[:200]!r}")
    status = int(lines[0].split()[1])
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value)
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return status, body[:length], body[length:]


def closed_by_server(sock, leftover=b""):
    """Whether the server closes after its response (EOF, no more bytes)."""
    sock.settimeout(5)
    try:
        return leftover == b"" and sock.recv(1) == b""
    except (ConnectionResetError, socket.timeout):
        return False


def check_openai_error(body, what):
    error = json.loads(body).get("error", {})
    expect(error.get("type") == "invalid_request_error" and "message" in error and
           "param" in error and "code" in error, f"{what}: not an OpenAI error: {body!r}")


def check_keep_alive(server):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    sockets = set()
    for i in range(5):
        body = f"body {i} \u00e9".encode()
        if i % 2:
            conn.request("POST", f"/echo/{i}?k={i}", body=body,
                         headers={"Content-Type": "text/plain", "X-Test": str(i)})
        else:
            conn.request("GET", f"/echo/{i}?k={i}", headers={"X-Test": str(i)})
        response = conn.getresponse()
        echo = json.loads(response.read())
        sockets.add(id(conn.sock))
        expect(response.status == 200, f"echo {i}: status {response.status}")
        expect(echo["method"] == ("POST" if i % 2 else "GET"), f"echo {i}: {echo}")
        expect(echo["target"] == f"/echo/{i}" and echo["query"] == f"k={i}", f"echo {i}: {echo}")
        expect(["X-Test", str(i)] in echo["headers"], f"echo {i}: headers {echo['headers']}")
        expect(echo["body"] == (body.decode() if i % 2 else ""), f"echo {i}: body {echo['body']}")
        expect(echo["remote"].startswith("127.0.0.1:"), f"echo {i}: remote {echo['remote']}")
    expect(len(sockets) == 1 and conn.sock is not None, "keep-alive: the connection was reopened")
    conn.close()
    print("keep-alive: ok")


def check_pipelining(server):
    sock = server.connect()
    sock.sendall(b"GET /first HTTP/1.1\r\nHost: x\r\n\r\n"
                 b"POST /second HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"
                 b"GET /third HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    leftover = b""
    targets = []
    for _ in range(3):
        status, body, leftover = read_response(_Prefixed(sock, leftover))
        expect(status == 200, f"pipelining: status {status}")
        targets.append(json.loads(body)["target"])
    expect(targets == ["/first", "/second", "/third"], f"pipelining: answered {targets}")
    expect(closed_by_server(sock, leftover), "pipelining: not closed after Connection: close")
    sock.close()
    print("pipelining: ok")


class _Prefixed:
    """A socket whose first recv() returns bytes already read."""

    def __init__(self, sock, prefix):
        self.sock, self.prefix = sock, prefix

    def recv(self, n):
        if self.prefix:
            data, self.prefix = self.prefix, b""
            return data
        return self.sock.recv(n)


def check_limits(server, max_body):
    # 413 from the header alone: the body is never sent.
    sock = server.connect()
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                 b"Content-Length: %d\r\n\r\n" % (max_body + 1))
    status, body, leftover = read_response(sock)
    expect(status == 413, f"oversize body: status {status}")
    check_openai_error(body, "413")
    expect(closed_by_server(sock, leftover), "413: connection not closed")
    sock.close()
    # A body at the limit is read.
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.request("POST", "/echo", body=b"x" * max_body)
    response = conn.getresponse()
    expect(response.status == 200 and len(json.loads(response.read())["body"]) == max_body,
           "a body at the limit was refused")
    conn.close()
    print("413: ok")

    for garbage in [b"garbage\r\n\r\n", b"GET / HTTP/1.1\r\nBad Header\r\n\r\n",
                    b"POST / HTTP/1.1\r\nContent-Length: abc\r\n\r\n"]:
        sock = server.connect()
        sock.sendall(garbage)
        status, body, leftover = read_response(sock)
        expect(status == 400, f"garbage {garbage!r}: status {status}")
        check_openai_error(body, "400")
        expect(closed_by_server(sock, leftover), "400: connection not closed")
        sock.close()
    print("400: ok")

    sock = server.connect()
    sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 40000 + b"\r\n\r\n")
    status, body, leftover = read_response(sock)
    expect(status == 431, f"large header: status {status}")
    check_openai_error(body, "431")
    sock.close()
    print("431: ok")


def check_connection_limit(binary):
    server = Server(binary, "--max-connections", "3")
    held = [server.connect() for _ in range(3)]
    time.sleep(0.2)
    extra = server.connect()
    extra.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    status, body, leftover = read_response(extra)
    expect(status == 503, f"connection over the limit: status {status}")
    expect(json.loads(body)["error"]["type"] == "server_error", f"503 body {body!r}")
    expect(closed_by_server(extra, leftover), "503: connection not closed")
    extra.close()
    held[0].close()
    time.sleep(0.2)
    sock = server.connect()
    sock.sendall(b"GET /again HTTP/1.1\r\nHost: x\r\n\r\n")
    status, _, _ = read_response(sock)
    expect(status == 200, f"after a connection closed: status {status}")
    for s in held[1:] + [sock]:
        s.close()
    expect(server.terminate() == 0, "exit status after the connection limit test")
    print("503: ok")


def check_idle_timeout(binary):
    server = Server(binary, "--idle-timeout", "1")
    sock = server.connect()
    start = time.monotonic()
    sock.settimeout(5)
    try:
        data = sock.recv(1)
    except (ConnectionResetError, socket.timeout):
        data = None
    elapsed = time.monotonic() - start
    expect(data == b"" and 0.8 < elapsed < 3, f"idle connection: {data!r} after {elapsed:.1f} s")
    sock.close()
    expect(server.terminate() == 0, "exit status after the idle timeout test")
    print("idle timeout: ok")


def run_streams(server, count, events, interval_ms, stop_after=None):
    """Opens `count` event streams at once with non-blocking sockets; reads
    them to the end (or closes each after `stop_after` events). Returns the
    events received per stream, the seconds taken and the peak server RSS."""
    selector = selectors.DefaultSelector()
    request = (f"GET /stream?n={events}&ms={interval_ms} HTTP/1.1\r\nHost: x\r\n\r\n").encode()
    states = {}
    for _ in range(count):
        sock = socket.socket()
        sock.setblocking(False)
        sock.connect_ex(("127.0.0.1", server.port))
        states[sock] = {"out": request, "in": b"", "done": False}
        selector.register(sock, selectors.EVENT_WRITE)
    start = time.monotonic()
    peak_rss = 0
    open_count = count
    deadline = start + 30
    while open_count and time.monotonic() < deadline:
        for key, mask in selector.select(timeout=0.5):
            sock, state = key.fileobj, states[key.fileobj]
            if mask & selectors.EVENT_WRITE:
                try:
                    sent = sock.send(state["out"])
                except (BlockingIOError, InterruptedError):
                    continue
                state["out"] = state["out"][sent:]
                if not state["out"]:
                    selector.modify(sock, selectors.EVENT_READ)
                continue
            try:
                data = sock.recv(65536)
            except (BlockingIOError, InterruptedError):
                continue
            except ConnectionResetError:
                data = b""
            state["in"] += data
            finished = (not data or state["in"].endswith(b"0\r\n\r\n") or
                        (stop_after is not None and
                         state["in"].count(b"data: ") >= stop_after))
            if finished:
                selector.unregister(sock)
                sock.close()
                state["done"] = True
                open_count -= 1
        peak_rss = max(peak_rss, server.rss_kb())
    elapsed = time.monotonic() - start
    for sock, state in states.items():
        if not state["done"]:
            selector.unregister(sock)
            sock.close()
    received = [state["in"].count(b"data: {") for state in states.values()]
    complete = sum(1 for state in states.values()
                   if state["in"].endswith(b"data: [DONE]\n\n\r\n0\r\n\r\n"))
    return received, complete, elapsed, peak_rss


def check_streams(server, count):
    received, complete, elapsed, peak_rss = run_streams(server, count, 20, 5)
    expect(complete == count and all(n == 20 for n in received),
           f"streams: {complete} of {count} complete, events {min(received)}..{max(received)}")
    hwm = server.rss_kb("VmHWM")
    print(f"check-http: {count} streams x 20 events at 5 ms: {elapsed:.2f} s, "
          f"server RSS peak {max(peak_rss, hwm) / 1024:.1f} MB", file=sys.stderr)
    expect(max(peak_rss, hwm) < 200 * 1024, f"server RSS {max(peak_rss, hwm)} kB")
    print(f"{count} streams: ok")


def check_cancelled(server, count):
    before = server.stats()["cancelled"]
    received, _, _, _ = run_streams(server, count, 1000, 20, stop_after=2)
    expect(all(n >= 2 for n in received), "cancelled: streams did not start")
    start = time.monotonic()
    while time.monotonic() - start < 5:
        stats = server.stats()
        if stats["cancelled"] - before >= count:
            break
        time.sleep(0.05)
    noticed = stats["cancelled"] - before
    expect(noticed == count, f"cancelled: {noticed} of {count} closed streams reported")
    print(f"cancelled streams: ok ({time.monotonic() - start:.2f} s to notice)",
          file=sys.stderr)
    print("cancelled: ok")
    return noticed


def check_slow_reader(binary):
    """A client that does not read: once more than --max-queued-bytes wait
    to be written, the stream is cut and reported as cancelled."""
    server = Server(binary, "--max-queued-bytes", str(1 << 20))
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", server.port))
    sock.sendall(b"GET /stream?n=100000000&ms=0 HTTP/1.1\r\nHost: x\r\n\r\n")
    start = time.monotonic()
    while server.stats()["cancelled"] == 0 and time.monotonic() - start < 20:
        time.sleep(0.05)
    expect(server.stats()["cancelled"] == 1, "slow reader: the stream was not cut")
    rss = server.rss_kb("VmHWM")
    expect(rss < 200 * 1024, f"slow reader: server RSS {rss} kB")
    sock.close()
    expect(server.terminate() == 0, "slow reader: exit status")
    print("slow reader: ok")


def check_stop_cuts_streams(binary, count):
    """SIGTERM with streams open: stopAccepting() lets them run for
    --drain-ms, then stop() closes them, each reported as cancelled."""
    server = Server(binary, "--drain-ms", "300")
    socks = []
    for _ in range(count):
        sock = server.connect()
        sock.sendall(b"GET /stream?n=100000&ms=10 HTTP/1.1\r\nHost: x\r\n\r\n")
        socks.append(sock)
    for sock in socks:
        data = b""
        while data.count(b"data: ") < 2:
            chunk = sock.recv(65536)
            expect(chunk, "stop: a stream ended early")
            data += chunk
    start = time.monotonic()
    server.proc.send_signal(signal.SIGTERM)
    # New connections are refused once the acceptor is closed.
    time.sleep(0.1)
    try:
        late = server.connect()
        late.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        late.settimeout(5)
        refused = late.recv(1) == b""
        late.close()
    except OSError:
        refused = True
    expect(refused, "stop: a connection was answered after SIGTERM")
    for sock in socks:
        sock.settimeout(10)
        try:
            while sock.recv(65536):
                pass
        except ConnectionResetError:
            pass
        sock.close()
    elapsed = time.monotonic() - start
    expect(elapsed < 5, f"stop: streams closed after {elapsed:.1f} s")
    expect(server.terminate() == 0, "stop: exit status")
    expect(f"cancelled streams: {count}" in server.lines, f"stop: printed {server.lines}")
    print("stop cuts streams: ok")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", required=True)
    parser.add_argument("--streams", type=int, default=1000)
    args = parser.parse_args()
    binary = os.path.join(args.build_dir, "bin", "xfmr-http-echo")
    expect(os.access(binary, os.X_OK), f"{binary} not built")
    # 1,000 client sockets here and as many in the server (which inherits).
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = max(8192, 2 * args.streams + 256)
    if hard != resource.RLIM_INFINITY:
        want = min(hard, want)
    if soft != resource.RLIM_INFINITY and soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    expect(want > 2 * args.streams + 64, f"open file limit {hard} too low")

    max_body = 4096
    server = Server(binary, "--io-threads", "2", "--max-body-bytes", str(max_body),
                    "--max-header-bytes", "16384", "--max-connections", str(args.streams + 100))
    check_keep_alive(server)
    check_pipelining(server)
    check_limits(server, max_body)
    check_streams(server, args.streams)
    check_cancelled(server, 50)
    # An idle keep-alive connection does not hold up the shutdown.
    idle = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    idle.request("GET", "/idle")
    idle.getresponse().read()
    # The server's own total: a client of the 1,000 streams that closes as
    # its last chunk is written may count as cancelled too (seen once: 52).
    cancelled = server.stats()["cancelled"]
    code = server.terminate()
    expect(code == 0, f"exit status {code} on SIGTERM")
    expect(f"cancelled streams: {cancelled}" in server.lines,
           f"SIGTERM: printed {server.lines}")
    print("SIGTERM: ok")
    check_connection_limit(binary)
    check_idle_timeout(binary)
    check_stop_cuts_streams(binary, 20)
    check_slow_reader(binary)


if __name__ == "__main__":
    main()
