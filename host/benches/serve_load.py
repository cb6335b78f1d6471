#!/usr/bin/env python3
"""What `rampart serve` adds per request, measured with a real load generator (wrk) on
loopback, against an upstream that answers at once (`host/examples/instant_upstream.rs`).

    python3 host/benches/serve_load.py            # from the repository root

It installs wrk with apt-get when it is missing (or says how), builds the release binary and
the upstream, and prints a Markdown table for BENCHMARKS.md:

- latency p50/p99 of one request continuing a 200k-token conversation (no compaction: the
  model's window is 1M), through the proxy and straight to the upstream; the difference is
  what the proxy adds;
- time to first byte of a streamed answer (small conversation), both ways;
- a streamed answer continuing the 200k-token conversation: when its end (`[DONE]`) arrives
  and the gap between the pieces (deltas) as the client reads them, both ways;
- requests/s with small conversations spread over 64 sessions, both ways;
- the server's resident memory after 1,000 conversations were opened.

Standard library only. Ports are chosen by the OS.
"""

import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
RAMPART = os.path.join(ROOT, "target", "release", "rampart")
UPSTREAM = os.path.join(ROOT, "target", "release", "examples", "instant_upstream")


def ensure_wrk():
    if shutil.which("wrk"):
        return
    if shutil.which("apt-get"):
        subprocess.run(["apt-get", "install", "-y", "wrk"], check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if not shutil.which("wrk"):
        sys.exit("wrk is not installed and apt-get could not install it: "
                 "install wrk (Debian/Ubuntu: apt-get install wrk; macOS: brew install wrk)")


def build():
    subprocess.run(["cargo", "build", "--release", "-p", "rampart-host", "--bin", "rampart",
                    "--example", "instant_upstream"], cwd=ROOT, check=True)


def start(args, prefix):
    """Starts a server that prints `<prefix> http://ADDR` first; returns (process, base URL)."""
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline().strip()
    if not line.startswith(prefix):
        proc.kill()
        sys.exit(f"{args[0]} did not start: {line!r}")
    return proc, line[len(prefix):].strip()


def post(base, body, headers=None):
    request = urllib.request.Request(
        base + "/v1/chat/completions", data=json.dumps(body).encode(),
        headers={"content-type": "application/json", **(headers or {})})
    with urllib.request.urlopen(request, timeout=120) as response:
        return response.read()


def conversation(tokens):
    """A chat-completions body whose history is about `tokens` tokens (4 characters each)."""
    messages = [{"role": "system", "content": "You are a coding agent."}]
    turn = 0
    while sum(len(m["content"]) for m in messages) < tokens * 4:
        words = " ".join(f"src/module_{turn}_{i}.rs line {i * 7}" for i in range(40))
        messages.append({"role": "user", "content": f"Turn {turn}: read {words}"})
        messages.append({"role": "assistant", "content": f"Turn {turn} done: {words}"})
        turn += 1
    messages.append({"role": "user", "content": "And now?"})
    return {"model": "up/gpt-bench", "messages": messages}


WRK_SCRIPT = r"""
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local f = assert(io.open(os.getenv("BENCH_BODY"), "rb"))
wrk.body = f:read("*a")
f:close()
local spread = tonumber(os.getenv("BENCH_SESSIONS") or "1")
local n = 0
request = function()
  n = n + 1
  wrk.headers["x-rampart-session"] = "bench-" .. (n % spread)
  return wrk.format(nil, nil, nil, wrk.body)
end
"""


def wrk(url, body_path, sessions, connections, seconds):
    env = {**os.environ, "BENCH_BODY": body_path, "BENCH_SESSIONS": str(sessions)}
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
        f.write(WRK_SCRIPT)
        script = f.name
    out = subprocess.run(["wrk", "-t", "1", "-c", str(connections), "-d", f"{seconds}s",
                          "--latency", "-s", script, url],
                         capture_output=True, text=True, env=env, check=True).stdout
    os.unlink(script)

    def ms(label):
        m = re.search(rf"^\s*{label}%\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
        value, unit = float(m.group(1)), m.group(2)
        return value / 1000 if unit == "us" else value * 1000 if unit == "s" else value

    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if errors:
        sys.exit(f"{url}: {errors.group(1)} failed responses:\n{out}")
    return {"p50": ms("50"), "p99": ms("99"), "rps": rps}


def ttfb(base, body, n):
    """Milliseconds to the first byte of a streamed answer, `n` times."""
    host, port = base.replace("http://", "").split(":")
    payload = json.dumps({**body, "stream": True, "stream_options": {"include_usage": True}})
    times = []
    for i in range(n):
        s = socket.create_connection((host, int(port)))
        request = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\n"
                   f"Content-Type: application/json\r\nx-rampart-session: ttfb-{i}\r\n"
                   f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n{payload}")
        started = time.perf_counter()
        s.sendall(request.encode())
        s.recv(1)
        times.append((time.perf_counter() - started) * 1000)
        while s.recv(65536):
            pass
        s.close()
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.99) - 1]


def stream_end(base, body, n, session):
    """A streamed answer `n` times, on a fresh connection each (all continuing conversation
    `session`): milliseconds from sending the request to the stream's end (`[DONE]` read),
    and the gaps between successive reads of the answer. Returns (end p50, end p99, gap p50,
    gap max)."""
    host, port = base.replace("http://", "").split(":")
    payload = json.dumps({**body, "stream": True})
    ends, gaps = [], []
    for _ in range(n):
        s = socket.create_connection((host, int(port)))
        request = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\n"
                   f"Content-Type: application/json\r\nx-rampart-session: {session}\r\n"
                   f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n{payload}")
        started = time.perf_counter()
        s.sendall(request.encode())
        seen, last = b"", None
        while b"[DONE]" not in seen:
            chunk = s.recv(65536)
            if not chunk:
                sys.exit(f"{base}: the stream closed before [DONE]: {seen[-300:]!r}")
            now = time.perf_counter()
            if last is not None:
                gaps.append((now - last) * 1000)
            last = now
            seen += chunk
        ends.append((last - started) * 1000)
        s.close()
    ends.sort()
    gaps.sort()
    return (statistics.median(ends), ends[int(len(ends) * 0.99) - 1],
            statistics.median(gaps) if gaps else 0.0, gaps[-1] if gaps else 0.0)


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        kb = int(re.search(r"VmRSS:\s+(\d+) kB", f.read()).group(1))
    return kb / 1024


def main():
    ensure_wrk()
    build()
    work = tempfile.mkdtemp(prefix="rampart-serve-bench-")
    upstream, up = start([UPSTREAM, "127.0.0.1:0"], "instant upstream listening on")
    config = os.path.join(work, "plugins.toml")
    with open(config, "w") as f:
        f.write(f"""
[agents.defaults.model]
primary = "up/gpt-bench"

[models.providers.up]
api = "openai-completions"
baseUrl = "{up}/v1"
maxRetries = 0

[[models.providers.up.models]]
id = "gpt-bench"
contextWindow = 1000000
""")
    serve, base = start([RAMPART, "--config", config, "--sessions-dir",
                         os.path.join(work, "sessions"), "serve", "--listen", "127.0.0.1:0"],
                        "rampart serve listening on")
    try:
        big = conversation(200_000)
        small = conversation(300)
        paths = {}
        for name, body in (("big", big), ("small", small)):
            paths[name] = os.path.join(work, f"{name}.json")
            with open(paths[name], "w") as f:
                json.dump(body, f)
        # The 200k-token conversation is stored once; every request after continues it.
        started = time.perf_counter()
        post(base, big, {"x-rampart-session": "bench-0"})
        first = (time.perf_counter() - started) * 1000
        rows = []
        proxy = wrk(base + "/v1/chat/completions", paths["big"], 1, 1, 15)
        direct = wrk(up + "/v1/chat/completions", paths["big"], 1, 1, 15)
        rows.append(("200k-token conversation, 1 connection: latency p50 / p99",
                     f"{proxy['p50']:.2f} / {proxy['p99']:.2f} ms",
                     f"{direct['p50']:.2f} / {direct['p99']:.2f} ms",
                     f"{proxy['p50'] - direct['p50']:.2f} / {proxy['p99'] - direct['p99']:.2f} ms"))
        p_ttfb = ttfb(base, small, 200)
        d_ttfb = ttfb(up, small, 200)
        rows.append(("stream, small conversation: time to first byte p50 / p99",
                     f"{p_ttfb[0]:.2f} / {p_ttfb[1]:.2f} ms",
                     f"{d_ttfb[0]:.2f} / {d_ttfb[1]:.2f} ms",
                     f"{p_ttfb[0] - d_ttfb[0]:.2f} / {p_ttfb[1] - d_ttfb[1]:.2f} ms"))
        p_end = stream_end(base, big, 50, "bench-0")
        d_end = stream_end(up, big, 50, "bench-0")
        rows.append(("stream continuing the 200k-token conversation: end of stream p50 / p99",
                     f"{p_end[0]:.2f} / {p_end[1]:.2f} ms",
                     f"{d_end[0]:.2f} / {d_end[1]:.2f} ms",
                     f"{p_end[0] - d_end[0]:.2f} / {p_end[1] - d_end[1]:.2f} ms"))
        rows.append(("same stream: gap between the client's reads p50 / max",
                     f"{p_end[2]:.2f} / {p_end[3]:.2f} ms",
                     f"{d_end[2]:.2f} / {d_end[3]:.2f} ms", ""))
        proxy = wrk(base + "/v1/chat/completions", paths["small"], 64, 16, 15)
        direct = wrk(up + "/v1/chat/completions", paths["small"], 64, 16, 15)
        rows.append(("small conversations over 64 sessions, 16 connections: requests/s",
                     f"{proxy['rps']:.0f}", f"{direct['rps']:.0f}", ""))
        for i in range(1_000):
            post(base, {**small, "messages": small["messages"][:1] + [
                {"role": "user", "content": f"conversation {i}: hello"}]},
                 {"x-rampart-session": f"open-{i}"})
        rows.append(("resident memory after 1,000 conversations were opened",
                     f"{rss_mb(serve.pid):.1f} MiB", "", ""))
        print(f"first request of the 200k-token conversation (stores it): {first:.0f} ms")
        print("| measure | through rampart serve | straight to the upstream | added |")
        print("|---|---|---|---|")
        for row in rows:
            print("| " + " | ".join(row) + " |")
    finally:
        serve.terminate()
        upstream.terminate()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
