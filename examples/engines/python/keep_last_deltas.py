#!/usr/bin/env python3
"""keep-last, receiving message lists as deltas (`messageRefs`, docs/engine-protocol.md 4.1).

The same engine as keep_last.py, for long histories: it announces the `messageRefs` feature, so
a turn sends it only the new messages and it answers with a run of the list it was sent, never
the messages themselves. A call then costs the new messages, not the history (BENCHMARKS.md).
Standard library only; select it with `command = ["python3", "keep_last_deltas.py"]`.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from keep_last import INVALID_PARAMS, UNSUPPORTED, read_frame, write_frame  # noqa: E402

STALE = "unknown base message list"  # the host resends the list in full on this error


class Stale(Exception):
    pass


class Table:
    """The list of the last request, kept under the number the host gave it."""

    def __init__(self):
        self.held = None  # (gen, list)

    def resolve(self, value):
        """A request's list: a plain array, or a delta against the kept list."""
        if isinstance(value, list):
            return value
        if not isinstance(value, dict):
            raise TypeError("a message list must be an array or a delta object")
        gen, base = value.get("gen"), value.get("base")
        keep, items = value.get("keep", 0), value.get("items", [])
        if base is None:
            kept = []
        elif self.held is not None and self.held[0] == base:
            kept = self.held[1]
        else:
            raise Stale(f"{STALE} {base}")
        if keep > len(kept):
            raise Stale(f"{STALE}: keeps {keep} of {len(kept)}")
        if keep == len(kept) and not any(isinstance(p, list) for p in items):
            out = kept  # the history only grew: extend it in place
            out.extend(items)
        else:
            out = kept[:keep]
            for piece in items:
                if isinstance(piece, list):
                    start, length = piece
                    if start < 0 or length < 0 or start + length > len(kept):
                        raise Stale(f"{STALE}: run {start}+{length}")
                    out.extend(kept[start:start + length])
                else:
                    out.append(piece)
        if gen is not None:
            self.held = (gen, out)
        return out


def has_calls(message):
    content = message.get("content") if message.get("role") == "assistant" else None
    return isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") == "toolCall" for b in content)


def first_kept(messages, keep):
    """The start of the newest whole units of at most `keep` messages, walking back from the
    end only as far as that (a tool call stays with the results after it)."""
    start = i = len(messages)
    while i > 0:
        j = i - 1
        if messages[j].get("role") == "toolResult":
            k = j
            while k > 0 and messages[k - 1].get("role") == "toolResult":
                k -= 1
            if k > 0 and has_calls(messages[k - 1]):
                j = k - 1
        if len(messages) - j > keep:
            break
        start = i = j
    return start


def main():
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    pipe = sys.stdin.buffer
    hello = read_frame(pipe)
    if hello is None or hello.get("type") != "hello":
        sys.exit(2)
    keep = int((hello.get("config") or {}).get("keep", 50))
    info = {"id": "keep-last", "name": "Keep last N (deltas)", "version": "0.1.0",
            "protocol": {"protocol": "rampart-engine", "version": "1.1.0",
                         "features": [{"name": "messageRefs"}]}}
    write_frame(out, {"type": "ready", "version": 1, "features": ["shutdown"], "engine": {"Ok": info}})
    table = Table()
    while (frame := read_frame(pipe)) is not None:
        if frame.get("type") == "shutdown":
            write_frame(out, {"type": "reply", "id": frame["id"], "result": {"ok": "{}"}})
            return
        if frame.get("type") != "call":
            continue
        try:
            params = json.loads(frame["payload"])
            # Every method's list is read, answered or not: the host now counts on the engine
            # holding it, and the next delta is relative to it.
            sent = params.get("messages", [])
            messages = table.resolve(sent)
            if frame["method"] != "assemble":
                raise NotImplementedError(f"keep-last does not implement `{frame['method']}`")
            start = first_kept(messages, keep)
            if isinstance(sent, dict):
                # A delta came in, so a delta goes back, against the request's list: one run.
                n = len(messages) - start
                kept = {"keep": 0, "items": [[start, n]] if n else []}
            else:
                kept = messages[start:]  # a plain array came in (a raw call): a plain one back
            result = {"ok": json.dumps({"messages": kept})}
        except NotImplementedError as e:
            result = {"err": {"kind": UNSUPPORTED, "message": str(e), "details": None}}
        except (Stale, TypeError, ValueError, AttributeError) as e:
            result = {"err": {"kind": INVALID_PARAMS, "message": f"{frame.get('method')}: {e}",
                              "details": None}}
        write_frame(out, {"type": "reply", "id": frame["id"], "result": result})


if __name__ == "__main__":
    main()
