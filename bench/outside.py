#!/usr/bin/env python3
"""Warm turns of `weft rpc` and `codex app-server` measured from outside:
a separate process (this one, Python, standard library only) drives both
servers the same way over their standard input and output, as any client
of either would.

For each server a turn is timed from writing its start request
(`run/start`, `turn/start`) to reading the notification that ends it
(the `events/event` of the run's `run.completed`, `turn/completed`);
every line the server writes is decoded as JSON, as a client must to know
which line ends the turn. The CPU counted is the server's process tree's
(/proc/PID/stat: the process and its live descendants, user + system,
with the children they waited for), not this client's.

Both servers answer the same zero-latency mock model, served by a child
of this process on a loopback port: Chat Completions for weft, the Responses API
for Codex, the same five words either way (weft-bench's answer). Each
response leaves in one write with TCP_NODELAY: a mock that answers in two
small writes waits for the client's delayed ACK (40 ms a turn).

The shapes are one session (thread) of sequential turns, then ten at once
(each session starts its next turn as soon as its last one ends). The two
servers run in alternating rounds, so a change in the machine's load falls
on both.

    python3 bench/outside.py --weft /tmp/bin/weft --codex codex
    python3 bench/outside.py --weft /tmp/bin/weft --codex none   # weft only

Compare with `weft-bench --only warm-turn`, which measures the same way
from its own process (BENCHMARKS.md, sections 16, 32 and 34).
"""
import argparse
import http.server
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

PROMPT = "Say hello."
WORDS = ["Hello", " from", " the", " mock", " model."]  # weft-bench's mockWords


def chat_stream():
    out = []

    def chunk(delta, finish):
        out.append("data: " + json.dumps({
            "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "mock-model",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}, separators=(",", ":")) + "\n\n")
    chunk({"role": "assistant", "content": ""}, None)
    for w in WORDS:
        chunk({"content": w}, None)
    chunk({}, "stop")
    out.append("data: " + json.dumps({
        "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "mock-model", "choices": [],
        "usage": {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25}}, separators=(",", ":")) + "\n\n")
    out.append("data: [DONE]\n\n")
    return "".join(out).encode()


def responses_stream(n):
    """The same answer as a Responses API stream (weft-bench's responsesStream)."""
    resp, msg, text = f"resp_bench{n}", f"msg_bench{n}", "".join(WORDS)
    out = []

    def ev(typ, fields):
        d = {"type": typ, "sequence_number": len(out)}
        d.update(fields)
        out.append(f"event: {typ}\ndata: {json.dumps(d, separators=(',', ':'))}\n\n")

    def response(status, output, usage):
        return {"id": resp, "object": "response", "created_at": 1, "status": status, "error": None,
                "incomplete_details": None, "model": "mock-model", "output": output, "parallel_tool_calls": True,
                "store": False, "tool_choice": "auto", "tools": [], "usage": usage}

    def part(t):
        return {"type": "output_text", "annotations": [], "logprobs": [], "text": t}

    def item(status, content):
        return {"id": msg, "type": "message", "status": status, "role": "assistant", "content": content}

    where = {"item_id": msg, "output_index": 0, "content_index": 0}
    ev("response.created", {"response": response("in_progress", [], None)})
    ev("response.in_progress", {"response": response("in_progress", [], None)})
    ev("response.output_item.added", {"output_index": 0, "item": item("in_progress", [])})
    ev("response.content_part.added", dict(where, part=part("")))
    for w in WORDS:
        ev("response.output_text.delta", dict(where, delta=w, logprobs=[]))
    ev("response.output_text.done", dict(where, text=text, logprobs=[]))
    ev("response.content_part.done", dict(where, part=part(text)))
    done = item("completed", [part(text)])
    ev("response.output_item.done", {"output_index": 0, "item": done})
    ev("response.completed", {"response": response("completed", [done], {
        "input_tokens": 20, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 5,
        "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 25})})
    return "".join(out).encode()


CHAT = chat_stream()


class Mock(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    requests = 0
    lock = threading.Lock()  # the mock's process serves on threads

    def setup(self):
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(n)
        if self.path.endswith("/chat/completions"):
            body = CHAT
        elif self.path.endswith("/responses"):
            with Mock.lock:
                Mock.requests += 1
                body = responses_stream(Mock.requests)
        else:
            self.wfile.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
            return
        # Headers and body in one write.
        self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
                         b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def log_message(self, *args):
        pass


def tree_cpu(pid):
    """CPU seconds of pid and its live descendants (utime+stime+cutime+cstime)."""
    stats = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        stats[int(name)] = (int(fields[1]), sum(int(x) for x in fields[11:15]))
    if pid not in stats:
        raise SystemExit(f"process {pid} is gone")
    total = 0
    for p, (_, ticks) in stats.items():
        q = p
        while True:
            if q == pid:
                total += ticks
                break
            up = stats.get(q)
            if up is None or up[0] in (0, q):
                break
            q = up[0]
    return total / os.sysconf("SC_CLK_TCK")


class Server:
    """A JSON-RPC server child over stdio, newline-delimited JSON, driven by
    one thread: write a line, read lines until one answers."""

    name = ""

    def __init__(self, argv, env, cwd, log):
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                  env=env, cwd=cwd, start_new_session=True)
        self.next_id = 0
        self.waiting = {}  # request id -> the session that sent it (None: call)

    def send(self, method, params, notify=False):
        m = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            m["params"] = params
        if not notify:
            self.next_id += 1
            m["id"] = self.next_id
        self.p.stdin.write(json.dumps(m, separators=(",", ":")).encode() + b"\n")
        self.p.stdin.flush()
        return m.get("id")

    def read(self):
        line = self.p.stdout.readline()
        if not line:
            raise SystemExit(f"{self.name} closed its stdout")
        return json.loads(line)

    def call(self, method, params):
        i = self.send(method, params)
        while True:
            m = self.read()
            if m.get("id") == i and "method" not in m:
                if "error" in m:
                    raise SystemExit(f"{self.name}: {method}: {m['error']}")
                return m["result"]
            self.other(m)

    def other(self, m):
        """A message that is not the reply awaited: a request from the
        server is refused; notifications are left to turn handling."""
        if "method" in m and "id" in m:
            self.p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": m["id"], "error": {
                "code": -32601, "message": "outside.py answers no requests"}}).encode() + b"\n")
            self.p.stdin.flush()

    def close(self):
        try:
            self.p.stdin.close()
            self.p.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            os.killpg(self.p.pid, 9)
            self.p.wait()

    def rounds(self, sessions, turns):
        """Runs turns turns on each session, each session starting its next
        turn as soon as its last one ends; returns the latencies, the wall
        time and the server's CPU."""
        left = {s: turns for s in sessions}
        lat = []
        c0 = tree_cpu(self.p.pid)
        t0 = time.perf_counter()
        for s in sessions:
            self.start(s)
        while left:
            m = self.read()
            s = self.ended(m)
            if s is None:
                continue
            lat.append(time.perf_counter() - s.t0)
            left[s] -= 1
            if left[s] == 0:
                del left[s]
            else:
                self.start(s)
        wall = time.perf_counter() - t0
        return lat, wall, tree_cpu(self.p.pid) - c0


class Session:
    def __init__(self, ident):
        self.id = ident
        self.t0 = 0.0
        self.req = None   # the start request in flight
        self.run = None   # weft: the run its reply named
        self.ended = set()  # weft: runs ended before their reply came


class Weft(Server):
    name = "weft rpc"
    TERMINAL = ("run.completed", "run.failed", "run.cancelled", "run.interrupted")

    def __init__(self, binary, d, mock_url, log):
        home = os.path.join(d, "home")
        os.makedirs(os.path.join(d, "work"))
        env = {"PATH": os.environ.get("PATH", ""), "HOME": home, "TMPDIR": d,
               "XDG_CONFIG_HOME": os.path.join(home, ".config"), "XDG_DATA_HOME": os.path.join(home, ".local/share"),
               "XDG_STATE_HOME": os.path.join(home, ".local/state"), "XDG_CACHE_HOME": os.path.join(home, ".cache"),
               "WEFT_STORE": os.path.join(d, "weft.db"), "OPENAI_API_KEY": "bench", "OPENAI_BASE_URL": mock_url}
        super().__init__([binary, "rpc"], env, os.path.join(d, "work"), log)
        self.call("initialize", {"clientInfo": {"name": "outside"}, "protocolVersion": "2026-01-01"})
        self.by_id = {}

    def session(self):
        s = self.call("session/create", {"title": "outside", "model": "openai-chat:mock-model"})
        self.call("events/subscribe", {"sessionId": s["id"], "after": s["lastSeq"]})
        sess = Session(s["id"])
        self.by_id[sess.id] = sess
        return sess

    def start(self, s):
        s.run, s.ended = None, set()
        s.t0 = time.perf_counter()
        s.req = self.send("run/start", {"sessionId": s.id, "input": [{"type": "text", "text": PROMPT}], "busy": "queue"})
        self.waiting[s.req] = s

    def ended(self, m):
        if "method" not in m:
            s = self.waiting.pop(m.get("id"), None)
            if s is None:
                return None
            if "error" in m:
                raise SystemExit(f"run/start: {m['error']}")
            s.run = m["result"]["id"]
            return s if s.run in s.ended else None
        if m["method"] != "events/event":
            self.other(m)
            return None
        e = m["params"]["event"]
        if e["type"] not in self.TERMINAL:
            return None
        s = self.by_id.get(e.get("sessionId"))
        if s is None:
            return None
        if e["type"] != "run.completed":
            raise SystemExit(f"weft run ended {e['type']}: {e.get('data')}")
        if s.run is None:
            s.ended.add(e.get("runId"))
            return None
        return s if e.get("runId") == s.run else None


class Codex(Server):
    name = "codex app-server"

    def __init__(self, binary, d, mock_url, log):
        home = os.path.join(d, "codex-home")
        for sub in (home, os.path.join(d, "tmp"), os.path.join(d, "work")):
            os.makedirs(sub)
        with open(os.path.join(home, "config.toml"), "w") as f:
            f.write(f"""# Written by outside.py: Codex against the mock model, offline.
model = "mock-model"
model_provider = "mock"
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false

[model_providers.mock]
name = "mock"
base_url = {json.dumps(mock_url)}
wire_api = "responses"
env_key = "WEFT_BENCH_KEY"

[features]
plugins = false

[analytics]
enabled = false

[otel]
metrics_exporter = "none"
""")
        env = {"PATH": os.environ.get("PATH", ""), "HOME": d, "CODEX_HOME": home,
               "TMPDIR": os.path.join(d, "tmp"), "WEFT_BENCH_KEY": "bench"}
        self.cwd = os.path.join(d, "work")
        super().__init__([binary, "app-server"], env, self.cwd, log)
        self.call("initialize", {"clientInfo": {"name": "outside", "version": "1"}})
        self.send("initialized", None, notify=True)
        self.by_id = {}

    def session(self):
        r = self.call("thread/start", {"cwd": self.cwd})
        s = Session(r["thread"]["id"])
        self.by_id[s.id] = s
        return s

    def start(self, s):
        s.t0 = time.perf_counter()
        s.req = self.send("turn/start", {"threadId": s.id, "input": [{"type": "text", "text": PROMPT}]})
        self.waiting[s.req] = s

    def ended(self, m):
        if "method" not in m:
            self.waiting.pop(m.get("id"), None)
            if "error" in m:
                raise SystemExit(f"turn/start: {m['error']}")
            return None
        if m["method"] != "turn/completed":
            self.other(m)
            return None
        p = m["params"]
        s = self.by_id.get(p.get("threadId"))
        if s is None:
            return None
        if p["turn"]["status"] != "completed":
            raise SystemExit(f"codex turn ended {p['turn']['status']}: {p['turn'].get('error')}")
        return s


class Side:
    def __init__(self, server):
        self.srv = server
        self.lat, self.wall, self.cpu = [], 0.0, 0.0

    def add(self, r):
        self.lat += r[0]
        self.wall += r[1]
        self.cpu += r[2]

    def q(self, f):
        s = sorted(self.lat)
        return s[min(len(s) - 1, max(0, -(-int(f * len(s) * 1000) // 1000) - 1))] * 1e3

    def summary(self):
        n = len(self.lat)
        return {"turns": n, "p50_ms": self.q(0.5), "p99_ms": self.q(0.99),
                "cpu_ms_per_turn": self.cpu / n * 1e3, "turns_per_s": n / self.wall}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--weft", default="weft")
    ap.add_argument("--codex", default=shutil.which("codex") or "none", help="'none' leaves Codex out")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--turns", type=int, default=200, help="weft's turns, 1 session, over all rounds")
    ap.add_argument("--turns10", type=int, default=20, help="weft's turns per session of 10, over all rounds")
    ap.add_argument("--codex-turns", type=int, default=30)
    ap.add_argument("--codex-turns10", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5, help="untimed turns per session before the rounds")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()

    # The mock serves from a process of its own, so that its work and this
    # client's do not wait for each other (Python runs one thread at a
    # time): a turn's latency is the server's and the client's reading of
    # it, not the mock's wait for the client.
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Mock)
    url = f"http://127.0.0.1:{srv.server_address[1]}/v1"
    mock = os.fork()
    if mock == 0:
        try:
            srv.serve_forever()
        finally:
            os._exit(0)
    srv.socket.close()
    d = tempfile.mkdtemp(prefix="weft-outside-")
    load0 = os.getloadavg()
    servers = []
    try:
        log = open(os.path.join(d, "stderr.log"), "wb")
        servers.append(Weft(a.weft, os.path.join(d, "weft"), url, log))
        if a.codex != "none":
            servers.append(Codex(a.codex, os.path.join(d, "codex"), url, log))
        res = {}
        for shape, n in (("1", 1), ("10", 10)):
            sides = []
            for s in servers:
                sess = [s.session() for _ in range(n)]
                s.rounds(sess, a.warmup)
                if isinstance(s, Weft):
                    per = (a.turns if n == 1 else a.turns10) // a.rounds
                else:
                    per = (a.codex_turns if n == 1 else a.codex_turns10) // a.rounds
                sides.append((Side(s), sess, max(per, 1)))
            for _ in range(a.rounds):
                for side, sess, per in sides:
                    side.add(side.srv.rounds(sess, per))
            res[shape] = {side.srv.name: side.summary() for side, _, _ in sides}
    finally:
        for s in servers:
            s.close()
        os.kill(mock, 9)
        os.waitpid(mock, 0)
        shutil.rmtree(d, ignore_errors=True)
    load1 = os.getloadavg()
    if a.json:
        json.dump({"load_start": load0, "load_end": load1, "shapes": res}, sys.stdout, indent=1)
        print()
        return
    print(f"warm turns from outside (load {load0[0]:.2f} → {load1[0]:.2f})")
    for shape, sides in res.items():
        for name, v in sides.items():
            print(f"  {shape:>2} session(s)  {name:17} {v['turns']:4} turns  p50 {v['p50_ms']:7.2f} ms  "
                  f"p99 {v['p99_ms']:7.2f} ms  CPU {v['cpu_ms_per_turn']:6.2f} ms/turn  {v['turns_per_s']:7.1f} turns/s")
        if len(sides) == 2:
            w, c = sides["weft rpc"], sides["codex app-server"]
            print(f"     ratio: p50 1/{c['p50_ms'] / w['p50_ms']:.1f}, CPU 1/{c['cpu_ms_per_turn'] / w['cpu_ms_per_turn']:.1f}, "
                  f"turns/s {w['turns_per_s'] / c['turns_per_s']:.1f}×")


if __name__ == "__main__":
    main()
