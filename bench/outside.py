#!/usr/bin/env python3
"""Warm turns of `weft rpc` measured from outside, as a client of codex
app-server measures them: a separate process (this one, Python, standard
library only) writes JSON-RPC lines to the host's stdin and reads its
stdout; a turn is timed from writing `run/start` to reading the
`events/event` notification of its `run.completed`, and the CPU counted
is the host process's own (/proc/PID/stat), not the client's.

It serves its own zero-latency Chat Completions mock (the same answer as
weft-bench's: a role chunk, one chunk a word, a finish chunk, usage),
so it needs nothing but the weft binary:

    python3 bench/outside.py --weft /tmp/bin/weft --turns 300

Compare with `weft-bench --only warm-turn`, which drives `weft rpc` through
weft's Go client (BENCHMARKS.md).
"""
import argparse
import http.server
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

WORDS = ["Hello", "!", " How", " can", " I", " help", " you", " today", "?"]


def chat_stream():
    out = []

    def chunk(delta, finish):
        out.append("data: " + json.dumps({
            "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "mock-model",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}) + "\n\n")
    chunk({"role": "assistant", "content": ""}, None)
    for w in WORDS:
        chunk({"content": w}, None)
    chunk({}, "stop")
    out.append("data: " + json.dumps({
        "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "mock-model", "choices": [],
        "usage": {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25}}) + "\n\n")
    out.append("data: [DONE]\n\n")
    return "".join(out).encode()


BODY = chat_stream()


class Mock(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self):
        super().setup()
        # Headers and body leave in one write, without Nagle's delay: a
        # mock that answers in two small writes waits for the client's
        # delayed ACK (40 ms) and measures the kernel, not weft.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(n)
        self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n" % len(BODY) + BODY)

    def log_message(self, *args):
        pass


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class RPC:
    def __init__(self, proc):
        self.p = proc
        self.next_id = 0

    def send(self, method, params):
        self.next_id += 1
        line = json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        self.p.stdin.write(line.encode() + b"\n")
        self.p.stdin.flush()
        return self.next_id

    def read(self):
        line = self.p.stdout.readline()
        if not line:
            raise SystemExit("weft rpc closed its stdout")
        return json.loads(line)

    def call(self, method, params):
        i = self.send(method, params)
        while True:
            m = self.read()
            if m.get("id") == i:
                if "error" in m:
                    raise SystemExit(f"{method}: {m['error']}")
                return m["result"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--weft", default="weft")
    ap.add_argument("--turns", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=20)
    a = ap.parse_args()

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Mock)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    d = tempfile.mkdtemp(prefix="weft-outside-")
    home = os.path.join(d, "home")
    os.makedirs(home)
    env = {"PATH": os.environ.get("PATH", ""), "HOME": home, "TMPDIR": d,
           "XDG_CONFIG_HOME": os.path.join(home, ".config"), "XDG_STATE_HOME": os.path.join(home, ".state"),
           "WEFT_STORE": os.path.join(d, "weft.db"), "OPENAI_API_KEY": "bench",
           "OPENAI_BASE_URL": f"http://127.0.0.1:{srv.server_address[1]}/v1"}
    p = subprocess.Popen([a.weft, "rpc"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, cwd=d)
    rpc = RPC(p)
    rpc.call("initialize", {"clientInfo": {"name": "outside"}, "protocolVersion": "2026-01-01"})
    s = rpc.call("session/create", {"title": "outside", "model": "openai-chat:mock-model"})
    rpc.call("events/subscribe", {"sessionId": s["id"], "after": s["lastSeq"]})

    def turn():
        t0 = time.perf_counter()
        rid = rpc.send("run/start", {"sessionId": s["id"], "input": [{"type": "text", "text": "Say hello."}], "busy": "queue"})
        run = None
        while True:
            m = rpc.read()
            if m.get("id") == rid:
                if "error" in m:
                    raise SystemExit(f"run/start: {m['error']}")
                run = m["result"]["id"]
                continue
            if m.get("method") != "events/event":
                continue
            e = m["params"]["event"]
            if e["type"] in ("run.completed", "run.failed", "run.cancelled", "run.interrupted") and (run is None or e.get("runId") == run):
                if e["type"] != "run.completed":
                    raise SystemExit(f"run ended {e['type']}: {e.get('data')}")
                return time.perf_counter() - t0

    for _ in range(a.warmup):
        turn()
    c0 = cpu_seconds(p.pid)
    lat = [turn() for _ in range(a.turns)]
    c1 = cpu_seconds(p.pid)
    p.stdin.close()
    p.wait(timeout=30)
    srv.shutdown()
    lat.sort()
    q = lambda f: lat[min(len(lat) - 1, int(f * len(lat)))] * 1e3
    load = os.getloadavg()
    print(f"weft rpc warm turn from outside ({a.turns} turns, load {load[0]:.2f}): "
          f"p50 {q(0.5):.2f} ms, p90 {q(0.9):.2f} ms, p99 {q(0.99):.2f} ms, "
          f"host CPU {(c1 - c0) / a.turns * 1e3:.2f} ms a turn")


if __name__ == "__main__":
    main()
