#!/usr/bin/env python3
"""Large import inputs made from real transcripts, for `import-peak.sh`.

Each repeats a transcript's records with fresh ids until the file reaches TARGET_MB, so the
importers see realistic records at any size:

  gen_import_inputs.py claude   SRC.jsonl TARGET_MB OUT  (Claude Code: one chain, fresh uuids)
  gen_import_inputs.py codex    SRC.jsonl TARGET_MB OUT  (Codex rollout: meta once, the rest repeated)
  gen_import_inputs.py chat     SRC.json  TARGET_MB OUT  (OpenAI chat array: messages repeated)
  gen_import_inputs.py traj     SRC.traj  TARGET_MB OUT  (SWE-agent: history and trajectory repeated)
  gen_import_inputs.py ohevents SRC.json  TARGET_MB OUT  (OpenHands event array: events repeated)
  gen_import_inputs.py ohlines  SRC.jsonl TARGET_MB OUT  (OpenHands eval output: instance lines repeated)
"""
import json
import os
import re
import sys
import uuid

kind, src, target_mb, out = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
target = int(target_mb * 1e6)
TOOL_ID = re.compile(r"^(call_|toolu_|fc_|rs_|msg_)[A-Za-z0-9_]+$")
UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def remap(v, k, keep=None):
    """`v` with tool-call ids (and uuids other than `keep`) made unique to copy `k`."""
    if isinstance(v, str):
        if TOOL_ID.match(v):
            return f"{v}_{k}"
        if keep is not None and UUID.match(v) and v != keep:
            return str(uuid.uuid5(uuid.NAMESPACE_OID, f"{k}:{v}"))
        return v
    if isinstance(v, list):
        return [remap(x, k, keep) for x in v]
    if isinstance(v, dict):
        return {a: remap(b, k, keep) for a, b in v.items()}
    return v


def size(v):
    return len(json.dumps(v, ensure_ascii=False).encode())


def repeat(items):
    per = max(1, sum(size(i) for i in items))
    copies = max(1, target // per + 1)
    return [remap(i, k) for k in range(copies) for i in items]


def write_lines(lines):
    with open(out, "w", encoding="utf-8") as f:
        for line in lines:
            f.write(json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n")


if kind == "claude":
    lines = [json.loads(l) for l in open(src, encoding="utf-8") if l.strip()]
    session = next((l.get("sessionId") for l in lines if l.get("sessionId")), None)
    written, k, last = 0, 0, None
    with open(out, "w", encoding="utf-8") as f:
        while written < target:
            first_root = True
            for line in lines:
                line = remap(line, k, keep=session)
                # Copy k continues where copy k-1 ended: one valid chain.
                if line.get("parentUuid", 0) is None and last is not None and first_root:
                    line["parentUuid"] = last
                    first_root = False
                last = line.get("uuid") or last
                text = json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n"
                f.write(text)
                written += len(text.encode())
            k += 1
elif kind == "codex":
    lines = [json.loads(l) for l in open(src, encoding="utf-8") if l.strip()]
    write_lines(lines[:1] + repeat(lines[1:]))
elif kind in ("chat", "ohevents"):
    doc = json.load(open(src, encoding="utf-8"))
    json.dump(repeat(doc), open(out, "w", encoding="utf-8"), ensure_ascii=False, indent=2)
elif kind == "traj":
    doc = json.load(open(src, encoding="utf-8"))
    # Each list grows to the target on its own: keep half of each.
    for key in ("history", "trajectory"):
        grown = repeat(doc.get(key, []))
        doc[key] = grown[: len(grown) // 2 or 1]
    json.dump(doc, open(out, "w", encoding="utf-8"), ensure_ascii=False, indent=2)
elif kind == "ohlines":
    lines = [json.loads(l) for l in open(src, encoding="utf-8") if l.strip()]
    grown = repeat(lines)
    for k, line in enumerate(grown):
        line["instance_id"] = f"{line.get('instance_id')}-{k}"
    write_lines(grown)
else:
    sys.exit(f"unknown kind {kind!r}; see the docstring")
print(f"{out}: {os.path.getsize(out)} bytes")
