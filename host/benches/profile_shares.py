#!/usr/bin/env python3
"""Where a `rampart serve` request's time goes: a `perf record -g` profile of serve (as
`serve_continue.py --perf FILE` records it) split into the stages of a request, as a table of
shares of the samples. Each sample goes to the first stage, in the order below, that any frame
of its stack belongs to (so the sync inside storing counts as the sync, and the upstream's
socket writes inside the run loop as the exchange).

    python3 host/benches/profile_shares.py /tmp/serve.data

Needs `perf`. Standard library.
"""

import collections
import re
import subprocess
import sys

STAGES = [
    ("the session file's sync (fdatasync)", [r"Session::sync\b", r"sync_data"]),
    ("the session lock (flock sidecar)", [r"SessionLock::acquire", r"LockGuard", r"Session::hold", r"Session::release"]),
    ("storing the new messages (session lines, ingest, guard copies)", [r"SessionWriter::", r"Session::append", r"Runner::append_all"]),
    ("the upstream body (wire form, splice)", [r"::request_bytes", r"write_spliced", r"splice::pieces"]),
    ("the upstream exchange (reqwest, its thread, reading the answer)", [r"reqwest::", r"HttpClient::post", r"openai::read\b", r"anthropic::read\b", r"reqwest-interna"]),
    ("reading the client's body (parse, memo, convert)", [r"inbound::decode", r"inbound_memo::", r"raw_messages::", r"import::api_request", r"import::openai_chat", r"import::anthropic", r"serde_json::de::"]),
    ("placing it in the conversation (choose, match history, registry)", [r"conversations::", r"history::", r"registry"]),
    ("the run loop (counts, assembly, hygiene, guards, events)", [r"rampart_host::run::"]),
    ("answering the client", [r"Answer::into_response", r"outbound::"]),
    ("the HTTP server (hyper: request head, body, response)", [r"hyper::", r"axum", r"listener::"]),
    ("thread hand-offs (wake-ups, scheduler, epoll, futex)", [r"futex", r"finish_task_switch", r"schedule", r"epoll", r"park", r"try_to_wake_up", r"eventfd"]),
]
OTHER = "other (allocator, memcpy, kernel elsewhere)"


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: profile_shares.py PERF_DATA")
    stages = [(name, [re.compile(p) for p in patterns]) for name, patterns in STAGES]
    script = subprocess.run(["perf", "script", "-i", sys.argv[1], "-F", "comm,ip,sym"],
                            capture_output=True, text=True, check=True).stdout
    counts, total = collections.Counter(), 0
    for sample in script.split("\n\n"):
        stack = sample.strip()
        if not stack:
            continue
        total += 1
        stage = next((name for name, patterns in stages
                      if any(p.search(stack) for p in patterns)), OTHER)
        counts[stage] += 1
    if not total:
        sys.exit(f"{sys.argv[1]} holds no samples")
    print("| stage of a request | share of serve's samples |")
    print("|---|---:|")
    for name in [name for name, _ in STAGES] + [OTHER]:
        print(f"| {name} | {100 * counts[name] / total:.1f} % |")
    print(f"({total:,} samples)")


if __name__ == "__main__":
    main()
