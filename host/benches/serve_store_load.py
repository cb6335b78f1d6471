#!/usr/bin/env python3
"""What the store behind `rampart serve` costs per request (issue 28): the sessions directory
against PostgreSQL, with one replica and with three behind a round-robin client, in one run,
against an upstream that answers at once (`host/examples/instant_upstream.rs`).

    python3 host/benches/serve_store_load.py                # from the repository root
    python3 host/benches/serve_store_load.py --quick        # smoke run, not figures
    python3 host/benches/serve_store_load.py --no-build     # use the binaries in target/
    python3 host/benches/serve_store_load.py --target-dir target/bench   # a separate build
    python3 host/benches/serve_store_load.py --store postgres://postgres@127.0.0.1:5432/postgres

It reuses `serve_load.py` (its client, conversations, wrk script and tables); `--store` names
the PostgreSQL server whose maintenance database it may create databases from (default: the
one the tests use, `RAMPART_TEST_POSTGRES_URL` or postgres://postgres@127.0.0.1:5432/postgres).
Each PostgreSQL variant gets a database of its own, created with `psql` and dropped at the end;
each files variant a sessions directory of its own (three replicas share one).

Variants, all measured in the same run, interleaved request by request in a rotating order:
direct (the upstream itself), files × 1, files × 3, postgres × 1, postgres × 3. With three
replicas every request of a conversation goes to the next replica (round robin), so each
request finds its conversation last written by another process: the worst case for a store.

Lines, on the coding-agent conversation of `serve_load.py` (OpenAI chat completions):
- one request continuing the conversation (2k and 50k tokens), p50 / p99 added over direct;
- requests/s of the small (2k) conversation spread over 64 conversations with 6 connections
  in all (one wrk per replica, 6 / replicas connections each, run at once; their sum), the
  median of three rounds, variants interleaved.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_load as sl  # noqa: E402
from bench_conversations import Conversation  # noqa: E402

DEFAULT_ADMIN = os.environ.get("RAMPART_TEST_POSTGRES_URL",
                               "postgres://postgres@127.0.0.1:5432/postgres")
VARIANTS = (("files", 1), ("files", 3), ("postgres", 1), ("postgres", 3))
CONNECTIONS = 6


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="short runs: a smoke run")
    parser.add_argument("--no-build", action="store_true",
                        help="do not run cargo; use the binaries already in target/")
    parser.add_argument("--debug", action="store_true", help="measure the debug build")
    parser.add_argument("--target-dir", metavar="DIR", default=os.path.join(sl.ROOT, "target"),
                        help="cargo's target directory to build into and run from (a release "
                             "build kept apart from the debug one: CARGO_TARGET_DIR)")
    parser.add_argument("--store", metavar="URL", default=DEFAULT_ADMIN,
                        help="a PostgreSQL maintenance database on the server to measure "
                             "(databases are created and dropped there)")
    return parser.parse_args()


def psql(admin, sql):
    run = subprocess.run(["psql", admin, "-v", "ON_ERROR_STOP=1", "-qc", sql],
                         capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"psql on {admin} failed: {run.stderr.strip()}")


def database_url(admin, name):
    head, _, tail = admin.rpartition("/")
    query = tail[tail.index("?"):] if "?" in tail else ""
    return f"{head}/{name}{query}"


class RoundRobin:
    """Several `rampart serve` replicas as one target: each request goes to the next."""

    def __init__(self, name, replicas):
        self.name, self.replicas = name, replicas
        self.next = 0
        self.broken = {}

    @property
    def proc(self):
        return self.replicas[0].proc

    def post(self, path, wire, body, session):
        target = self.replicas[self.next % len(self.replicas)]
        self.next += 1
        return target.post(path, wire, body, session)

    def close(self):
        for r in self.replicas:
            r.close()


def start_variant(rampart, config, work, store, replicas, admin):
    """The replicas of one variant, started; returns (RoundRobin, processes, database)."""
    name = f"{store} × {replicas}"
    extra, database = [], None
    sessions = os.path.join(work, f"sessions-{store}-{replicas}")
    if store == "postgres":
        database = f"rampart_bench_{os.getpid()}_{replicas}"
        psql(admin, f"CREATE DATABASE {database}")
        extra = ["--store", database_url(admin, database)]
    procs, targets = [], []
    for i in range(replicas):
        # Replicas on PostgreSQL get directories of their own: nothing is shared through them.
        own = sessions if store == "files" else f"{sessions}-{i}"
        proc, base = sl.start([rampart, "--config", config, "--sessions-dir", own, "serve",
                               "--listen", "127.0.0.1:0", *extra], "rampart serve listening on")
        procs.append(proc)
        targets.append(sl.Target(f"{name} #{i}", base, proc))
    return RoundRobin(name, targets), procs, database


def wrk_sum(target, path, body_path, script, seconds):
    """Requests/s of one wrk per replica run at once (CONNECTIONS in all), summed."""
    replicas = target.replicas if isinstance(target, RoundRobin) else [target]
    each = CONNECTIONS // len(replicas)
    results, errors = [None] * len(replicas), []

    def run(i, replica):
        try:
            results[i] = sl.wrk_rps(replica.base + path, body_path, script, 64, each, seconds)
        except sl.BenchError as e:
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i, r)) for i, r in enumerate(replicas)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return sum(results)


def main():
    args = parse_args()
    profile = "debug" if args.debug else "release"
    rampart = os.path.join(args.target_dir, profile, "rampart")
    upstream_bin = os.path.join(args.target_dir, profile, "examples", "instant_upstream")
    sl.ensure_wrk()
    if not args.no_build:
        os.environ["CARGO_TARGET_DIR"] = args.target_dir
        sl.build(profile)
    psql(args.store, "SELECT 1")
    sizes = [2_000] if args.quick else [2_000, 50_000]
    counts = {2_000: (30, 3)} if args.quick else {2_000: (150, 5), 50_000: (80, 5)}
    rps_seconds, rps_rounds = (2, 1) if args.quick else (5, 3)
    work = tempfile.mkdtemp(prefix="rampart-store-bench-")
    procs, databases = [], []
    try:
        upstream, up = sl.start([upstream_bin, "127.0.0.1:0"], "instant upstream listening on")
        procs.append(upstream)
        config = sl.rampart_config(work, up)
        targets = [sl.Target("direct", up, upstream)]
        for store, replicas in VARIANTS:
            target, started, database = start_variant(rampart, config, work, store, replicas,
                                                      args.store)
            procs.extend(started)
            if database:
                databases.append(database)
            targets.append(target)
        names = [t.name for t in targets]
        load_before = sl.loadavg()
        print(f"\nmachine: {sl.machine()}; load average before: {load_before}", flush=True)

        latency_rows = []
        for size in sizes:
            conv = Conversation("coding", "openai", size, sl.MODELS["openai"])
            count, warm = counts[size]
            print(f"  continuing: coding, {sl.SIZE_NAMES[size]}", file=sys.stderr, flush=True)
            r = sl.continue_line(targets, conv, count, warm, stream=False)
            for t in targets:
                if t.broken:
                    raise sl.BenchError(f"{t.name}: {t.broken}")
            d = r["direct"]
            latency_rows.append(
                [f"one request continuing it, coding, {sl.SIZE_NAMES[size]} "
                 f"({conv.history_bytes / 1000:.0f} KB)",
                 f"{sl.percentile(d, 0.5):.2f} / {sl.percentile(d, 0.99):.2f} ms"]
                + [sl.added(r[n], d) for n in names[1:]])
        for t in targets:
            t.close()

        small = Conversation("coding", "openai", 2_000, sl.MODELS["openai"])
        body_path = os.path.join(work, "small.json")
        with open(body_path, "wb") as f:
            f.write(small.body(0))
        script = os.path.join(work, "rps.lua")
        with open(script, "w") as f:
            f.write(sl.WRK_SCRIPT)
        print(f"  requests/s at {CONNECTIONS} connections", file=sys.stderr, flush=True)
        runs = {n: [] for n in names}
        for i in range(rps_rounds):
            order = targets[i % len(targets):] + targets[:i % len(targets)]
            for t in order:
                runs[t.name].append(wrk_sum(t, small.path(), body_path, script, rps_seconds))
        rps_row = ([f"requests/s, small coding conversations (2k) over 64 conversations, "
                    f"{CONNECTIONS} connections in all"]
                   + [f"{statistics.median(runs[n]):,.0f}" for n in names])
        rss_row = (["resident memory of one replica at the end"]
                   + ["–"] + [f"{sl.rss_mib(t.proc.pid):.0f} MiB" for t in targets[1:]])

        load_after = sl.loadavg()
        print(f"\n{profile} build of {sl.commit()}; PostgreSQL: "
              f"{subprocess.run(['psql', args.store, '-tAc', 'SHOW server_version'], capture_output=True, text=True).stdout.strip()} "
              f"on the same machine")
        print(f"machine: {sl.machine()}; load average (1/5/15 min) before {load_before}, "
              f"after {load_after}")
        print("latency: Python http.client, one keep-alive connection per replica, variants "
              "interleaved request by request, three replicas round robin; requests/s: one wrk "
              "per replica at once, summed, median of the rounds\n")
        sl.table(["line (each request one turn longer)", "direct p50 / p99"]
                 + [f"{n}, added p50 / p99" for n in names[1:]],
                 [[c if c is not None else "–" for c in row] for row in latency_rows])
        sl.table(["measure"] + names, [rps_row, rss_row])
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
        for database in databases:
            psql(args.store, f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
