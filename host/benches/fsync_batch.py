#!/usr/bin/env python3
"""Whether concurrent turns' syncs need a group commit of our own: N threads each append a
session-sized line to a file of their own and make it durable, as `rampart serve`'s turns do
(one session file per conversation, `fdatasync` before each answer), three ways:

- `fdatasync`: each thread syncs its own file (what serve does);
- `group-syncfs`: an application group commit: a thread that finds no sync running leads,
  issues one `syncfs` (the only call that makes several files durable at once) and releases
  every thread that had appended before it started; the others wait for it;
- `none`: no sync (the ceiling).

Prints syncs per second and the p50 / p99 of one append-and-sync. Run it on the filesystem
that holds the sessions directory:

    python3 host/benches/fsync_batch.py [--dir DIR] [--rounds 400]

Linux only (`syncfs`). Standard library.
"""

import argparse
import ctypes
import os
import statistics
import tempfile
import threading
import time

LINE = b'{"type":"message","message":{"role":"user","content":"' + b"x" * 1500 + b'"}}\n'


class Group:
    """Leader/follower group commit over `syncfs`."""

    def __init__(self, fd):
        self.fd = fd
        self.cond = threading.Condition()
        self.appended = 0  # appends registered so far
        self.durable = 0  # appends known durable
        self.running = False
        self.libc = ctypes.CDLL(None, use_errno=True)

    def sync(self):
        with self.cond:
            self.appended += 1
            mine = self.appended
            while self.durable < mine:
                if not self.running:
                    self.running = True
                    covers = self.appended
                    self.cond.release()
                    try:
                        if self.libc.syncfs(self.fd) != 0:
                            raise OSError(ctypes.get_errno(), "syncfs")
                    finally:
                        self.cond.acquire()
                    self.running = False
                    self.durable = max(self.durable, covers)
                    self.cond.notify_all()
                else:
                    self.cond.wait()


def run(directory, threads, mode, rounds):
    fds = [os.open(os.path.join(directory, f"s{i}.jsonl"),
                   os.O_CREAT | os.O_WRONLY | os.O_APPEND | os.O_TRUNC, 0o600)
           for i in range(threads)]
    group = Group(fds[0])
    times = [[] for _ in range(threads)]

    def work(i):
        for _ in range(rounds):
            started = time.perf_counter()
            os.write(fds[i], LINE)
            if mode == "fdatasync":
                os.fdatasync(fds[i])
            elif mode == "group-syncfs":
                group.sync()
            times[i].append((time.perf_counter() - started) * 1000)

    started = time.perf_counter()
    workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    elapsed = time.perf_counter() - started
    for fd in fds:
        os.close(fd)
    every = sorted(t for ts in times for t in ts)
    p99 = every[min(len(every) - 1, int(len(every) * 0.99))]
    return threads * rounds / elapsed, statistics.median(every), p99


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", help="where to write (default: a temporary directory in .)")
    parser.add_argument("--rounds", type=int, default=400)
    args = parser.parse_args()
    directory = args.dir or tempfile.mkdtemp(prefix="rampart-fsync-", dir=".")
    print("| writers | way | syncs/s | p50 / p99 per append and sync |")
    print("|---:|---|---:|---|")
    for threads in (1, 2, 4, 8):
        for mode in ("fdatasync", "group-syncfs", "none"):
            rate, p50, p99 = run(directory, threads, mode, args.rounds)
            print(f"| {threads} | {mode} | {rate:,.0f} | {p50:.3f} / {p99:.3f} ms |", flush=True)
    if not args.dir:
        for name in os.listdir(directory):
            os.remove(os.path.join(directory, name))
        os.rmdir(directory)


if __name__ == "__main__":
    main()
