#!/usr/bin/env python3
"""How the cost of a new conversation grows with the conversations `rampart serve` already
holds, for clients that send no session id (placed by their history among the conversations
whose first message reads the same: an application that starts every conversation with one
instruction puts them all in one family).

    python3 host/benches/serve_many_conversations.py [--count 4000] [--every 500] [--debug]

Sends `--count` chat-completions requests, one at a time, each a new conversation: the same
first user message, then an assistant line and a user line of its own. Prints, per `--every`
requests, the median and p90 time of a request, the registry's size, and the server's CPU
seconds over that window. Uses the binaries in target/ (build them first:
`cargo build [--release] --bin rampart --example instant_upstream`). Standard library only.
"""

import argparse
import http.client
import json
import os
import statistics
import sys
import tempfile
import time

# serve_load.py sits beside this script; no __pycache__ left in the source tree.
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_load import MODELS, ROOT, rampart_config, start  # noqa: E402


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=4000)
    parser.add_argument("--every", type=int, default=500)
    parser.add_argument("--debug", action="store_true", help="the debug build")
    parser.add_argument("--rampart", metavar="PATH", help="this rampart binary instead")
    args = parser.parse_args()
    profile = "debug" if args.debug else "release"
    work = tempfile.mkdtemp(prefix="rampart-many-")
    up_proc, up = start([os.path.join(ROOT, "target", profile, "examples", "instant_upstream"),
                         "127.0.0.1:0"], "instant upstream listening on")
    config = rampart_config(work, up)
    sessions = os.path.join(work, "sessions")
    rampart = args.rampart or os.path.join(ROOT, "target", profile, "rampart")
    serve, base = start([rampart, "--config", config,
                         "--sessions-dir", sessions, "serve", "--listen", "127.0.0.1:0"],
                        "rampart serve listening on")
    host, port = base.replace("http://", "").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=600)
    print(f"| requests | conversations | p50 ms | p90 ms | serve CPU s | sessions.json KB |")
    print("|---:|---:|---:|---:|---:|---:|")
    try:
        times = []
        cpu_before = cpu_seconds(serve.pid)
        for n in range(1, args.count + 1):
            body = json.dumps({"model": MODELS["openai"], "messages": [
                {"role": "user", "content": "Follow the house rules and answer briefly."},
                {"role": "assistant", "content": f"Understood ({n})."},
                {"role": "user", "content": f"Question number {n}?"},
            ]})
            started = time.perf_counter()
            conn.request("POST", "/v1/chat/completions", body,
                         {"Content-Type": "application/json"})
            response = conn.getresponse()
            response.read()
            times.append((time.perf_counter() - started) * 1000)
            if response.status != 200:
                sys.exit(f"request {n}: {response.status}")
            if n % args.every == 0:
                times.sort()
                cpu = cpu_seconds(serve.pid)
                size = os.path.getsize(os.path.join(sessions, "sessions.json")) // 1024
                print(f"| {n} | {n} | {statistics.median(times):.2f} | "
                      f"{times[int(len(times) * 0.9)]:.2f} | {cpu - cpu_before:.2f} | {size} |",
                      flush=True)
                times, cpu_before = [], cpu
    finally:
        serve.terminate()
        up_proc.terminate()
        serve.wait()
        up_proc.wait()


if __name__ == "__main__":
    main()
