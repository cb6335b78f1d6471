#!/usr/bin/env python3
"""Resident memory of `rampart serve` as new conversations arrive: each conversation's first
request (a coding conversation of --tokens tokens), then RSS read once the server has been idle
long enough to hand freed memory back (its idle trim runs every 2 s). Shows what the server
keeps per conversation, and where its session cache's budget stops the growth.

    python3 host/benches/serve_memory.py --rampart target/profiling/rampart --at 10,40,80
    python3 host/benches/serve_memory.py --rampart A --rampart B       # builds in turn

Builds nothing: build the binaries first (`cargo build --profile profiling -p rampart-host
--bin rampart --example instant_upstream`). Linux only (/proc). Standard library.
"""

import argparse
import os
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_load as sl  # noqa: E402
from bench_conversations import Conversation  # noqa: E402

IDLE = 3.5


def run(rampart, upstream_bin, args):
    work = tempfile.mkdtemp(prefix="rampart-serve-memory-")
    upstream, up = sl.start([upstream_bin, "127.0.0.1:0"], "instant upstream listening on")
    serve, base = sl.start([rampart, "--config", sl.rampart_config(work, up), "--sessions-dir",
                            os.path.join(work, "sessions"), "serve", "--listen", "127.0.0.1:0"],
                           "rampart serve listening on")
    try:
        target = sl.Target("rampart", base, serve)
        time.sleep(IDLE)
        readings = [f"idle {sl.rss_mib(serve.pid):.1f}"]
        done = 0
        for want in args.at:
            while done < want:
                conv = Conversation("coding", args.wire, args.tokens, sl.MODELS[args.wire],
                                    first_user_prefix=f"Conversation {done}. ")
                target.post(conv.path(), args.wire, conv.body(0), f"memory-{done}")
                done += 1
            time.sleep(IDLE)
            readings.append(f"{done}: {sl.rss_mib(serve.pid):.1f}")
        print(f"{rampart}: RSS MiB after N conversations of {args.tokens} tokens: "
              + ", ".join(readings), flush=True)
    finally:
        serve.kill()
        upstream.kill()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rampart", action="append", required=True, metavar="PATH")
    parser.add_argument("--upstream", metavar="PATH",
                        help="the instant upstream (default: beside the first rampart)")
    parser.add_argument("--at", default="10,40,80",
                        help="read RSS after this many conversations (comma-separated, rising)")
    parser.add_argument("--tokens", type=int, default=200_000)
    parser.add_argument("--wire", choices=["openai", "anthropic"], default="openai")
    args = parser.parse_args()
    args.at = sorted(int(n) for n in args.at.split(","))
    upstream = args.upstream or os.path.join(os.path.dirname(os.path.abspath(args.rampart[0])),
                                             "examples", "instant_upstream")
    for rampart in args.rampart:
        run(rampart, upstream, args)


if __name__ == "__main__":
    main()
