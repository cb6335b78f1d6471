#!/usr/bin/env python3
"""A pi v3 transcript of N tiny lines, for the scaling figures in BENCHMARKS.md
("Scaling: replay, config, `sessions show`").

Alternating user and assistant messages of a few words each, one chain (every entry's parent
is the one before), so a replay makes N/2 model calls over a history that grows by two small
messages per call. Deterministic: the same N gives the same bytes.

  gen_tiny_transcript.py N OUT.jsonl
  gen_tiny_transcript.py --engines N OUT.toml   (a plugins.toml with N [plugins.engines.X] tables)
"""
import json
import sys

WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima".split()


def transcript(n, out):
    base_ms = 1_770_000_000_000
    with open(out, "w", encoding="utf-8") as f:
        def line(v):
            f.write(json.dumps(v, separators=(",", ":")) + "\n")

        line({"type": "session", "version": 3, "id": "00000000-0000-4000-8000-000000000001",
              "timestamp": "2026-02-01T00:00:00.000Z", "cwd": "/tmp/tiny"})
        parent = None
        for i in range(n):
            entry_id = f"{i:08x}"
            ms = base_ms + i * 1000
            words = " ".join(WORDS[(i + k) % len(WORDS)] for k in range(3))
            if i % 2 == 0:
                message = {"role": "user", "content": [{"type": "text", "text": f"{words} {i}"}],
                           "timestamp": ms}
            else:
                message = {"role": "assistant",
                           "content": [{"type": "text", "text": f"ok {words}"}],
                           "api": "openai-completions", "provider": "sim", "model": "tiny",
                           "usage": {"input": 0, "output": 4, "cacheRead": 0, "cacheWrite": 0,
                                     "totalTokens": 4,
                                     "cost": {"input": 0, "output": 0, "cacheRead": 0,
                                              "cacheWrite": 0, "total": 0}},
                           "stopReason": "stop", "timestamp": ms}
            secs = i
            stamp = f"2026-02-01T{secs // 3600 % 24:02d}:{secs // 60 % 60:02d}:{secs % 60:02d}.000Z"
            line({"type": "message", "id": entry_id, "parentId": parent, "timestamp": stamp,
                  "message": message})
            parent = entry_id


def engines(n, out):
    with open(out, "w", encoding="utf-8") as f:
        f.write('[plugins.slots]\ncontextEngine = "legacy"\n\n')
        for i in range(n):
            f.write(f'[plugins.engines.e{i}]\npath = "libs/libe{i}.so"\nrequired = false\n\n')


if __name__ == "__main__":
    if sys.argv[1] == "--engines":
        engines(int(sys.argv[2]), sys.argv[3])
    else:
        transcript(int(sys.argv[1]), sys.argv[2])
