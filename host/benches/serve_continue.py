#!/usr/bin/env python3
"""One line of `serve_load.py`, alone, for comparing builds and for profiles: a conversation
continued one turn per request against `rampart serve` and the instant upstream ("direct"),
interleaved; prints the p50 each adds, the server's CPU time per request (from /proc, less
noisy than latency on a busy machine) and its RSS.

    python3 host/benches/serve_continue.py --rampart target/profiling/rampart
    python3 host/benches/serve_continue.py --rampart A --rampart B --rounds 2   # A, B, A, B
    python3 host/benches/serve_continue.py --rampart target/profiling/rampart \\
        --perf /tmp/serve.data      # perf record -g on serve after the warm-up
    python3 host/benches/serve_continue.py --rampart target/profiling/rampart --first
        # every request opens a new conversation with the same 200k-token body instead
    python3 host/benches/serve_continue.py --rampart A --rampart B --callgrind --requests 20
        # serve under valgrind's callgrind, counting the instructions of the measured requests
        # only: the same count for the same build and input, whatever else the machine does
        # (a shared VM moves the CPU times by a fifth between rounds; latency is meaningless
        # under valgrind)

Builds nothing: build the binaries first (`cargo build --profile profiling -p rampart-host
--bin rampart --example instant_upstream`, or --release). Linux only (/proc). Standard library.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_load as sl  # noqa: E402
from bench_conversations import Conversation  # noqa: E402

WARM = 5


def cpu_ms(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def callgrind_total(pid, out_prefix):
    """Dumps serve's counters (callgrind_control) and returns the instructions counted since
    they were switched on."""
    subprocess.run(["callgrind_control", "-d", str(pid)], check=True, capture_output=True)
    # The dump goes to `<prefix>.1` (the file named `<prefix>` stays empty until the process
    # exits, which a killed serve never does).
    dump = f"{out_prefix}.1"
    deadline = time.time() + 120
    while time.time() < deadline:
        if os.path.exists(dump):
            with open(dump) as lines:
                for line in lines:
                    if line.startswith(("summary:", "totals:")):
                        return int(line.split()[1])
        time.sleep(0.5)
    sys.exit("callgrind wrote no dump within 120 s")


def run(rampart, upstream_bin, args):
    work = tempfile.mkdtemp(prefix="rampart-serve-continue-")
    upstream, up = sl.start([upstream_bin, "127.0.0.1:0"], "instant upstream listening on")
    cg_out = os.path.join(work, "callgrind.out")
    wrap = (["valgrind", "--tool=callgrind", "--instr-atstart=no",
             f"--callgrind-out-file={cg_out}"] if args.callgrind else [])
    serve, base = sl.start(wrap + [rampart, "--config", sl.rampart_config(work, up), "--sessions-dir",
                            os.path.join(work, "sessions"), "serve", "--listen", "127.0.0.1:0"],
                           "rampart serve listening on")
    try:
        targets = [sl.Target("direct", up, upstream), sl.Target("rampart", base, serve)]
        conv = Conversation(args.shape, args.wire, args.tokens, sl.MODELS[args.wire])
        times = {"direct": [], "rampart": []}
        perf, cpu0 = None, None
        for i in range(WARM + args.requests):
            # A new conversation's bytes are new to the server (as after a restart): its first
            # message differs, so no memo of an earlier request's bytes applies.
            body = (Conversation(args.shape, args.wire, args.tokens, sl.MODELS[args.wire],
                                 first_user_prefix=f"Conversation {i}. ").body(0)
                    if args.first else conv.body(i))
            session = f"first-{i}" if args.first else "continue"
            for target in targets:
                times[target.name].append(target.post(conv.path(), args.wire, body, session))
            if i == WARM - 1:
                cpu0 = cpu_ms(serve.pid)
                if args.callgrind:
                    subprocess.run(["callgrind_control", "-i", "on", str(serve.pid)],
                                   check=True, capture_output=True)
                if args.perf:
                    perf = subprocess.Popen(["perf", "record", "-F", "2000", "-g", "--call-graph",
                                             "dwarf,16384", "-o", args.perf, "-p",
                                             str(serve.pid)], stderr=subprocess.DEVNULL)
                    time.sleep(1)
        cpu = (cpu_ms(serve.pid) - cpu0) / args.requests
        if args.callgrind:
            total = callgrind_total(serve.pid, cg_out)
            print(f"{rampart}: {total / args.requests / 1e6:.2f} M instructions per request "
                  f"(callgrind, {args.requests} requests)", flush=True)
            return
        if perf:
            perf.send_signal(2)
            perf.wait()
        direct = statistics.median(times["direct"][WARM:])
        ours = statistics.median(times["rampart"][WARM:])
        print(f"{rampart}: added p50 {ours - direct:.2f} ms (direct {direct:.2f}), "
              f"server CPU per request {cpu:.2f} ms, first request {times['rampart'][0]:.1f} ms, "
              f"RSS {sl.rss_mib(serve.pid):.0f} MiB", flush=True)
    finally:
        serve.kill()
        upstream.kill()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rampart", action="append", required=True, metavar="PATH",
                        help="a rampart binary (repeat to compare builds, run in turn)")
    parser.add_argument("--upstream", metavar="PATH",
                        help="the instant upstream (default: beside the first rampart)")
    parser.add_argument("--requests", type=int, default=80)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--wire", choices=["openai", "anthropic", "responses"], default="openai")
    parser.add_argument("--shape", choices=["coding", "text"], default="coding")
    parser.add_argument("--tokens", type=int, default=200_000)
    parser.add_argument("--perf", metavar="FILE", help="record a perf profile of serve")
    parser.add_argument("--callgrind", action="store_true",
                        help="count serve's instructions per request under valgrind instead")
    parser.add_argument("--first", action="store_true",
                        help="each request opens a new conversation (same body, new session id)")
    args = parser.parse_args()
    upstream = args.upstream or os.path.join(os.path.dirname(os.path.abspath(args.rampart[0])),
                                             "examples", "instant_upstream")
    for _ in range(args.rounds):
        for rampart in args.rampart:
            run(rampart, upstream, args)


if __name__ == "__main__":
    main()
