#!/usr/bin/env python3
"""What `rampart serve` adds per request, with LiteLLM's proxy measured beside it in the same run,
on loopback, against an upstream that answers at once (`host/examples/instant_upstream.rs`).

    python3 host/benches/serve_load.py                 # from the repository root: everything
    python3 host/benches/serve_load.py --quick         # smoke run: short, sizes 2k and 50k only
    python3 host/benches/serve_load.py --stream-only   # only the streamed-answer lines
    python3 host/benches/serve_load.py --skip-litellm  # without LiteLLM's proxy
    python3 host/benches/serve_load.py --debug         # the debug build (for large effects only)
    python3 host/benches/serve_load.py --no-build      # use the binaries already in target/
    python3 host/benches/serve_load.py --rampart PATH --upstream PATH   # other builds

It builds the release binary and the upstream, installs wrk with apt-get when it is missing,
installs LiteLLM's proxy (pinned, `host/benches/litellm-venv.sh`, into target/litellm-venv;
the only step that needs the network: the proxy then runs offline, with the local cost map,
telemetry off and no database), and prints Markdown tables for BENCHMARKS.md. Three targets
take the same requests: the upstream itself ("direct"), `rampart serve` and LiteLLM; "added" is
a proxy's figure less direct's.

Conversations (`bench_conversations.py`, seeded, so every run sends the same bytes): a coding
agent's (tool calls, tool results with source code and command output) in OpenAI chat
completions, in Anthropic messages and in OpenAI Responses (as the Codex CLI sends it, to an
upstream of the same wire), and the text-only one in chat completions; 2k, 50k and
200k tokens (about 4 bytes each). The model's window is 1M, so nothing is compacted.

Lines:

- one request continuing the conversation (the history, the last answer, a new user line;
  each request one turn longer), p50 / p99: a Python client (http.client, one keep-alive
  connection per target, one request at a time), the targets interleaved request by request
  in a rotating order, so load on the machine falls on all three alike;
- end of stream of a streamed answer continuing the conversation, p50 / p99 (a new
  connection per request, the client reading with recv as bytes arrive), and its first byte;
- requests/s with the small (2k) coding conversation spread over 64 conversations, at 1 and
  8 connections: wrk with a Lua script, runs of the three targets interleaved, the median of
  three rounds;
- the first request of a new 200k-token conversation (which a proxy that stores
  conversations must store whole), median of five new conversations;
- the resident memory of each proxy after 1,000 conversations (2k tokens each) were opened,
  last, after everything above, read 3 s after the last answer (an idle proxy; LiteLLM's is the
  sum over its process tree).

Timings are taken on a machine that is usually doing other work too: the script prints the
load average before and after, and the tables are medians of interleaved runs for that reason.
Standard library only. Ports are chosen by the OS.
"""

import argparse
import http.client
import json
import math
import os
import platform
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

# The generator sits beside this script; no __pycache__ left in the source tree.
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_conversations import Conversation  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
LITELLM_VENV = os.path.join(ROOT, "target", "litellm-venv")
# Per client wire, the upstream both proxies send it to: rampart's provider (its name and API),
# the model, and LiteLLM's provider prefix and the upstream path it takes as its base.
UPSTREAMS = {
    "openai": ("up", "openai-completions", "gpt-bench", "openai", "/v1"),
    "anthropic": ("ant", "anthropic-messages", "claude-bench", "anthropic", ""),
    "responses": ("resp", "openai-responses", "codex-bench", "openai", "/v1"),
}
MODELS = {wire: f"{provider}/{model}" for wire, (provider, _, model, _, _) in UPSTREAMS.items()}
WIRE_NAMES = {"openai": "chat completions", "anthropic": "Anthropic messages",
              "responses": "OpenAI Responses"}
SIZE_NAMES = {2_000: "2k", 50_000: "50k", 200_000: "200k"}
IDLE_BEFORE_RSS = 3  # seconds between the last of the 1,000 conversations and the RSS read


class BenchError(Exception):
    """A target answered wrongly or not at all; the message says which and what it sent."""


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="short runs and sizes 2k/50k only: a smoke run, not figures")
    parser.add_argument("--stream-only", action="store_true",
                        help="only the streamed-answer lines")
    parser.add_argument("--skip-litellm", action="store_true", help="leave LiteLLM out")
    parser.add_argument("--debug", action="store_true", help="measure the debug build")
    parser.add_argument("--no-build", action="store_true",
                        help="do not run cargo; use the binaries already in target/")
    parser.add_argument("--upstream", metavar="PATH",
                        help="the instant upstream binary (default: the build's examples/)")
    parser.add_argument("--rampart", metavar="PATH",
                        help="measure this rampart binary (another build kept aside, for a "
                             "before/after pair in one session); implies --no-build")
    return parser.parse_args()


def ensure_wrk():
    if shutil.which("wrk"):
        return
    if shutil.which("apt-get"):
        subprocess.run(["apt-get", "install", "-y", "wrk"], check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if not shutil.which("wrk"):
        sys.exit("wrk is not installed and apt-get could not install it: "
                 "install wrk (Debian/Ubuntu: apt-get install wrk; macOS: brew install wrk)")


def build(profile):
    release = [] if profile == "debug" else ["--release"]
    subprocess.run(["cargo", "build", *release, "-p", "rampart-host", "--bin", "rampart",
                    "--example", "instant_upstream"], cwd=ROOT, check=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(args, prefix):
    """Starts a server that prints `<prefix> http://ADDR` first; returns (process, base URL)."""
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline().strip()
    if not line.startswith(prefix):
        proc.kill()
        sys.exit(f"{args[0]} did not start: {line!r}")
    return proc, line[len(prefix):].strip()


class Target:
    """One server the requests go to, with a keep-alive connection for the latency lines."""

    def __init__(self, name, base, proc):
        self.name, self.base, self.proc = name, base, proc
        hostport = base.replace("http://", "")
        self.host, self.port = hostport.rsplit(":", 1)[0], int(hostport.rsplit(":", 1)[1])
        self.conn = None
        self.broken = {}  # wire -> why this target is left out of that wire's lines

    def _connect(self):
        self.conn = http.client.HTTPConnection(self.host, self.port, timeout=300)
        self.conn.connect()
        self.conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def headers(self, wire, session):
        headers = {"content-type": "application/json", "x-rampart-session": session}
        if wire == "anthropic":
            headers["anthropic-version"] = "2023-06-01"
        return headers

    def post(self, path, wire, body, session):
        """One request on the kept connection; milliseconds from the first byte sent to the
        whole answer read."""
        for attempt in (0, 1):
            if self.conn is None:
                self._connect()
            try:
                started = time.perf_counter()
                self.conn.request("POST", path, body, self.headers(wire, session))
                response = self.conn.getresponse()
                data = response.read()
                elapsed = (time.perf_counter() - started) * 1000
                break
            except (http.client.HTTPException, ConnectionError):
                # The server closed the kept connection between two requests: reconnect once.
                self.conn.close()
                self.conn = None
                if attempt:
                    raise
        if response.status != 200:
            raise BenchError(f"{self.name} answered {response.status} to {path}: "
                             f"{data[:400].decode(errors='replace')}")
        return elapsed

    def stream(self, path, wire, body, session):
        """A streamed request on a new connection: (first byte, end of stream) in ms."""
        head = (f"POST {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
                + "".join(f"{k}: {v}\r\n" for k, v in self.headers(wire, session).items())
                + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
        s = socket.create_connection((self.host, self.port), timeout=300)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        started = time.perf_counter()
        s.sendall(head + body)
        reads, chunks = [], []
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            reads.append(time.perf_counter())
            chunks.append(chunk)
        s.close()
        data = b"".join(chunks)
        status = data.split(b"\r\n", 1)[0]
        end_marker = {"anthropic": b"message_stop",
                      "responses": b"response.completed"}.get(wire, b"[DONE]")
        if b" 200 " not in status or end_marker not in data:
            raise BenchError(f"{self.name}: streamed answer to {path} was not a complete 200 "
                             f"stream: {data[:400].decode(errors='replace')}")
        return (reads[0] - started) * 1000, (reads[-1] - started) * 1000

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def percentile(values, q):
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def interleaved(targets, wire, count, each):
    """Calls `each(target, i)` for i in range(count), every target once per i, in an order
    that rotates with i. Returns {target name: [results]}, leaving out (and marking broken
    for this wire) a target that fails, so one proxy's failure does not end the run."""
    results = {t.name: [] for t in targets}
    live = [t for t in targets if wire not in t.broken]
    for i in range(count):
        order = live[i % len(live):] + live[:i % len(live)] if live else []
        for target in order:
            try:
                results[target.name].append(each(target, i))
            except (BenchError, OSError, http.client.HTTPException) as error:
                if target.name in ("direct", "rampart"):
                    raise
                target.broken[wire] = str(error)[:300]
                print(f"  {target.name} left out of the {WIRE_NAMES[wire]} lines: {error}",
                      file=sys.stderr)
                live.remove(target)
                results[target.name] = []
                break
    return results


def continue_line(targets, conv, count, warm, stream):
    """Requests continuing `conv`, one turn longer each time, sent to every target; the first
    `warm` are left out (the first of them stores the conversation)."""
    session = f"{'eos' if stream else 'cont'}-{conv.shape}-{conv.wire}-{conv.tokens}"
    bodies = {}

    def each(target, i):
        if i not in bodies:
            bodies.clear()
            bodies[i] = conv.body(i, stream=stream)
        if stream:
            return target.stream(conv.path(), conv.wire, bodies[i], session)
        return target.post(conv.path(), conv.wire, bodies[i], session)

    results = interleaved(targets, conv.wire, warm + count, each)
    return {name: values[warm:] for name, values in results.items()}


def added(proxy, direct):
    """'p50 / p99' of what a proxy adds over direct, or why there is no figure."""
    if not proxy:
        return None
    return (f"{percentile(proxy, 0.5) - percentile(direct, 0.5):.2f} / "
            f"{percentile(proxy, 0.99) - percentile(direct, 0.99):.2f} ms")


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
  wrk.headers["x-rampart-session"] = "rps-" .. (n % spread)
  return wrk.format(nil, nil, nil, wrk.body)
end
"""


def wrk_rps(url, body_path, script, sessions, connections, seconds):
    """Requests/s from one wrk run, or a BenchError naming the failed responses."""
    env = {**os.environ, "BENCH_BODY": body_path, "BENCH_SESSIONS": str(sessions)}
    run = subprocess.run(["wrk", "-t", "1", "-c", str(connections), "-d", f"{seconds}s",
                          "--timeout", "30s", "-s", script, url],
                         capture_output=True, text=True, env=env)
    out = run.stdout
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
    if run.returncode != 0 or errors or not rps:
        raise BenchError(f"wrk on {url}: {errors.group(1) + ' failed responses' if errors else ''}"
                         f"\n{out}{run.stderr}")
    return float(rps.group(1))


def rss_mib(pid):
    """Resident memory of a process and all its descendants, MiB."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(entry))
            except (OSError, ValueError, IndexError):
                pass
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        todo.extend(children.get(p, []))
        try:
            with open(f"/proc/{p}/status") as f:
                total += int(re.search(r"VmRSS:\s+(\d+) kB", f.read()).group(1))
        except (OSError, AttributeError):
            pass
    return total / 1024


def open_conversations(target, path, bodies, failures):
    """Opens one conversation per body on `target`, one after the other; a failure is put in
    `failures` under the target's name (this runs on its own thread)."""
    try:
        for i, body in enumerate(bodies):
            target.post(path, "openai", body, f"open-{i}")
    except (BenchError, OSError, http.client.HTTPException) as error:
        failures[target.name] = error


def start_litellm(work, upstream):
    """Installs (if needed) and starts LiteLLM's proxy routing every bench model to the
    upstream. Returns (Target, version) or (None, why not)."""
    installer = os.path.join(ROOT, "host", "benches", "litellm-venv.sh")
    run = subprocess.run([installer], capture_output=True, text=True)
    if run.returncode != 0:
        return None, f"litellm-venv.sh failed: {(run.stderr or run.stdout).strip()[-400:]}"
    python = os.path.join(LITELLM_VENV, "bin", "python")
    version = subprocess.run([python, "-c", "import importlib.metadata as m; "
                              "print(m.version('litellm'))"],
                             capture_output=True, text=True).stdout.strip()
    config = os.path.join(work, "litellm.yaml")
    with open(config, "w") as f:
        f.write("model_list:\n")
        for wire, (_, _, model, prefix, base) in UPSTREAMS.items():
            f.write(f"""  - model_name: {MODELS[wire]}
    litellm_params:
      model: {prefix}/{model}
      api_base: {upstream}{base}
      api_key: sk-bench-not-checked
""")
        f.write("litellm_settings:\n  telemetry: false\n")
    port = free_port()
    env = {k: v for k, v in os.environ.items()
           if k not in ("DATABASE_URL", "LITELLM_MASTER_KEY", "OPENAI_API_KEY",
                        "ANTHROPIC_API_KEY")}
    # No master key, like `rampart serve` here without a token: neither checks a key per
    # request. LiteLLM refuses to start keyless unless told this is local.
    env.update({"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_TELEMETRY": "False",
                "LITELLM_LOG": "ERROR", "NO_DOCS": "True", "DISABLE_ADMIN_UI": "True",
                "LITELLM_DANGEROUSLY_PERMIT_WEAK_OR_UNSET_MASTER_KEY": "true"})
    log = open(os.path.join(work, "litellm.log"), "w")
    proc = subprocess.Popen([os.path.join(LITELLM_VENV, "bin", "litellm"), "--config", config,
                             "--host", "127.0.0.1", "--port", str(port), "--num_workers", "1",
                             "--telemetry", "False"],
                            stdout=log, stderr=subprocess.STDOUT, env=env)
    base = f"http://127.0.0.1:{port}"
    # Importing the proxy takes tens of seconds on a busy machine.
    limit = 300
    deadline = time.time() + limit
    while time.time() < deadline:
        if proc.poll() is not None:
            break
        try:
            with urllib.request.urlopen(base + "/health/liveliness", timeout=2) as r:
                if r.status == 200:
                    return Target("litellm", base, proc), version
        except OSError:
            time.sleep(0.5)
    exited = proc.poll()
    proc.kill()
    log.close()
    with open(os.path.join(work, "litellm.log")) as f:
        tail = " ".join(f.read()[-600:].split())
    why = f"exited with {exited}" if exited is not None else f"did not answer within {limit} s"
    return None, f"LiteLLM {version} {why}: {tail}"


def machine():
    try:
        with open("/proc/cpuinfo") as f:
            cpu = re.search(r"model name\s*:\s*(.+)", f.read()).group(1)
    except (OSError, AttributeError):
        cpu = platform.processor()
    return f"{os.cpu_count()} cores, {cpu}, {platform.system()} {platform.release()}"


def loadavg():
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def commit():
    out = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                         capture_output=True, text=True).stdout.strip()
    # The sources serve is built from: the host and the providers (its own crate since
    # issue 25), and the crates below them.
    sources = ["host/src", "providers/src", "sessions/src", "context/src", "message/src"]
    dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--", *sources],
                           capture_output=True, text=True).stdout.strip()
    return out + (" with uncommitted changes in its sources" if dirty else "")


def rampart_config(work, up):
    config = os.path.join(work, "plugins.toml")
    with open(config, "w") as f:
        f.write(f'\n[agents.defaults.model]\nprimary = "{MODELS["openai"]}"\n')
        for provider, api, model, _, _ in UPSTREAMS.values():
            f.write(f"""
[models.providers.{provider}]
api = "{api}"
baseUrl = "{up}/v1"
maxRetries = 0

[[models.providers.{provider}.models]]
id = "{model}"
contextWindow = 1000000
""")
    return config


def table(header, rows):
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print()


def main():
    args = parse_args()
    profile = "debug" if args.debug else "release"
    rampart_bin = args.rampart or os.path.join(ROOT, "target", profile, "rampart")
    if args.rampart:
        args.no_build = True
    upstream_bin = args.upstream or os.path.join(ROOT, "target", profile, "examples",
                                                 "instant_upstream")
    ensure_wrk()
    if not args.no_build:
        build(profile)
    sizes = [2_000, 50_000] if args.quick else [2_000, 50_000, 200_000]
    # (count, warm-up) per size for the latency and stream lines.
    counts = ({2_000: (40, 3), 50_000: (30, 3)} if args.quick
              else {2_000: (200, 5), 50_000: (120, 5), 200_000: (80, 5)})
    rps_seconds, rps_rounds = (2, 1) if args.quick else (5, 3)
    work = tempfile.mkdtemp(prefix="rampart-serve-bench-")
    procs = []
    try:
        upstream, up = start([upstream_bin, "127.0.0.1:0"], "instant upstream listening on")
        procs.append(upstream)
        serve, base = start([rampart_bin, "--config", rampart_config(work, up),
                             "--sessions-dir", os.path.join(work, "sessions"), "serve",
                             "--listen", "127.0.0.1:0"], "rampart serve listening on")
        procs.append(serve)
        targets = [Target("direct", up, upstream), Target("rampart", base, serve)]
        litellm_note = "LiteLLM: left out (--skip-litellm)"
        if not args.skip_litellm:
            litellm, version = start_litellm(work, up)
            if litellm is None:
                litellm_note = f"LiteLLM: not measured: {version}"
            else:
                procs.append(litellm.proc)
                targets.append(litellm)
                litellm_note = f"LiteLLM {version} (`litellm[proxy]`, one worker, offline)"
        names = [t.name for t in targets]
        load_before = loadavg()
        print(f"\nmachine: {machine()}; load average before: {load_before}", flush=True)

        conversations = {}
        for size in sizes:
            for shape, wire in (("coding", "openai"), ("coding", "anthropic"),
                                ("coding", "responses"), ("text", "openai")):
                conversations[(shape, wire, size)] = Conversation(shape, wire, size,
                                                                  MODELS[wire])

        def row_name(what, conv):
            return (f"{what}, {conv.shape}, {WIRE_NAMES[conv.wire]}, "
                    f"{SIZE_NAMES[conv.tokens]} ({conv.history_bytes / 1000:.0f} KB)")

        def litellm_cell(results, direct, wire, fmt):
            if "litellm" not in names:
                return "–"
            if wire in targets[-1].broken:
                return f"failed: {targets[-1].broken[wire][:120]}"
            return fmt(results.get("litellm"), direct)

        latency_rows, stream_rows = [], []
        for size in sizes:
            count, warm = counts[size]
            if not args.stream_only:
                for key in (("coding", "openai", size), ("coding", "anthropic", size),
                            ("coding", "responses", size), ("text", "openai", size)):
                    conv = conversations[key]
                    print(f"  continuing: {row_name('', conv)[2:]}", file=sys.stderr, flush=True)
                    r = continue_line(targets, conv, count, warm, stream=False)
                    d = r["direct"]
                    latency_rows.append((
                        row_name("one request continuing it", conv),
                        f"{percentile(d, 0.5):.2f} / {percentile(d, 0.99):.2f} ms",
                        added(r["rampart"], d),
                        litellm_cell(r, d, conv.wire, added)))
            for key in (("coding", "openai", size), ("coding", "anthropic", size)):
                conv = conversations[key]
                print(f"  streamed: {row_name('', conv)[2:]}", file=sys.stderr, flush=True)
                r = continue_line(targets, conv, count // 2, warm, stream=True)
                ends = {n: [e for _, e in v] for n, v in r.items()}
                firsts = {n: [f for f, _ in v] for n, v in r.items()}
                d = ends["direct"]

                def stream_added(proxy_ends, direct_ends, name=None):
                    if not proxy_ends:
                        return None
                    first = (percentile(firsts[name], 0.5)
                             - percentile(firsts["direct"], 0.5))
                    return f"{added(proxy_ends, direct_ends)} (first byte +{first:.2f})"

                stream_rows.append((
                    row_name("streamed answer, end of stream", conv),
                    f"{percentile(d, 0.5):.2f} / {percentile(d, 0.99):.2f} ms",
                    stream_added(ends["rampart"], d, "rampart"),
                    litellm_cell(ends, d, conv.wire,
                                 lambda p, dd: stream_added(p, dd, "litellm"))))
        for t in targets:
            t.close()

        other_rows = []
        if not args.stream_only:
            small = conversations[("coding", "openai", 2_000)]
            body_path = os.path.join(work, "small.json")
            with open(body_path, "wb") as f:
                f.write(small.body(0))
            script = os.path.join(work, "rps.lua")
            with open(script, "w") as f:
                f.write(WRK_SCRIPT)
            for connections in (1, 8):
                print(f"  requests/s at {connections} connections", file=sys.stderr, flush=True)
                runs = {t.name: [] for t in targets}
                for _ in range(rps_rounds):
                    for t in targets:
                        if "openai" in t.broken:
                            continue
                        try:
                            runs[t.name].append(wrk_rps(t.base + small.path(), body_path, script,
                                                        64, connections, rps_seconds))
                        except BenchError as error:
                            if t.name != "litellm":
                                raise
                            t.broken["openai"] = str(error)[:300]
                other_rows.append(
                    [f"requests/s, small coding conversations (2k) over 64 conversations, "
                     f"{connections} connection{'s' if connections > 1 else ''}"]
                    + [f"{statistics.median(runs[n]):,.0f}" if runs[n]
                       else f"failed: {targets[-1].broken.get('openai', '')[:120]}"
                       for n in names])

            first_size = sizes[-1]
            # Each new conversation's first message differs, so its bytes are new to a proxy (as
            # after a restart): no memo of the latency lines' requests applies.
            bigs = [Conversation("coding", "openai", first_size, MODELS["openai"],
                                 first_user_prefix=f"First {i}. ") for i in range(5)]
            bodies = [big.body(0) for big in bigs]
            print(f"  first requests at {SIZE_NAMES[first_size]}", file=sys.stderr, flush=True)
            firsts = interleaved(targets, "openai", 5, lambda t, i: t.post(
                bigs[i].path(), "openai", bodies[i], f"first-{i}"))
            d = statistics.median(firsts["direct"])
            other_rows.append(
                [f"first request of a new {SIZE_NAMES[first_size]}-token coding conversation, "
                 "p50 (added)"]
                + [f"{statistics.median(firsts[n]):.1f} ms"
                   + (f" (+{statistics.median(firsts[n]) - d:.1f})" if n != "direct" else "")
                   if firsts[n] else "failed" for n in names])

            print("  opening 1,000 conversations", file=sys.stderr, flush=True)
            bodies = [Conversation("coding", "openai", 2_000, MODELS["openai"],
                                   first_user_prefix=f"Conversation {i}. ").body(0)
                      for i in range(1_000)]
            proxies = [t for t in targets if t.name != "direct" and "openai" not in t.broken]
            failures = {}
            # One thread per proxy, so the two fill at once; each sends its 1,000 in turn.
            threads = [threading.Thread(target=open_conversations,
                                        args=(t, small.path(), bodies, failures))
                       for t in proxies]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            if "rampart" in failures:
                raise failures["rampart"]
            if "litellm" in failures:
                targets[-1].broken["openai"] = str(failures["litellm"])[:300]
            # Read once the proxies are idle, as a user's `ps` would see them between bursts:
            # rampart serve hands freed memory back when no request is in flight
            # (serve::allocator); every proxy gets the same pause.
            time.sleep(IDLE_BEFORE_RSS)
            other_rows.append(
                ["resident memory after 1,000 conversations (2k tokens each) were opened"]
                + ["–" if t.name == "direct"
                   else f"failed: {t.broken['openai'][:120]}" if "openai" in t.broken
                   else f"{rss_mib(t.proc.pid):.0f} MiB" for t in targets])
            for t in targets:
                t.close()

        load_after = loadavg()
        built = f"{rampart_bin}" if args.rampart else f"{profile} build of {commit()}"
        print(f"\n{built}; {litellm_note}")
        print(f"machine: {machine()}; load average (1/5/15 min) before {load_before}, "
              f"after {load_after}")
        print("latency lines: Python http.client, one keep-alive connection per target, "
              "targets interleaved request by request; requests/s: wrk with a Lua script\n")
        if latency_rows:
            table(["line (each request one turn longer)", "direct p50 / p99",
                   "rampart serve, added p50 / p99", "LiteLLM, added p50 / p99"],
                  [[c if c is not None else "–" for c in row] for row in latency_rows])
        table(["line", "direct end p50 / p99", "rampart serve, added p50 / p99",
               "LiteLLM, added p50 / p99"],
              [[c if c is not None else "–" for c in row] for row in stream_rows])
        if other_rows:
            table(["measure", "direct", "rampart serve", "LiteLLM"],
                  [row + ["–"] * (4 - len(row)) for row in other_rows])
        for t in targets:
            for wire, why in t.broken.items():
                print(f"{t.name} left out of the {WIRE_NAMES[wire]} lines: {why}")
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
