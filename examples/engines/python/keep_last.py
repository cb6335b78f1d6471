#!/usr/bin/env python3
"""keep-last: the README's example engine as a program, in Python's standard library alone.

It speaks the Rampart engine protocol v1 (docs/engine-protocol.md) on stdin and stdout:
select it with `[plugins.engines.keep-last] command = ["python3", "keep_last.py"]`.
`assemble` keeps the newest whole units (an assistant's tool calls with their results) of at
most `keep` messages; every other method answers "unsupported" and the host does its default.
"""
import json
import os
import struct
import sys

UNSUPPORTED, INVALID_PARAMS = 1, 2  # error kinds (docs/engine-protocol.md, "Errors")


def read_frame(pipe):
    head = pipe.read(4)
    if len(head) < 4:
        return None  # the host closed the pipe: time to exit
    (length,) = struct.unpack(">I", head)
    return json.loads(pipe.read(length))


def write_frame(pipe, frame):
    body = json.dumps(frame).encode()
    pipe.write(struct.pack(">I", len(body)) + body)
    pipe.flush()


def unit_starts(messages):
    """Where each unit starts: a tool call is never separated from the results answering it."""
    starts, i = [], 0
    while i < len(messages):
        starts.append(i)
        content = messages[i].get("content") if messages[i].get("role") == "assistant" else None
        calls = {b.get("id") for b in content if isinstance(b, dict) and b.get("type") == "toolCall"
                 } if isinstance(content, list) else set()
        i += 1
        while calls and i < len(messages) and messages[i].get("toolCallId") in calls:
            i += 1
    return starts


def assemble(keep, params):
    messages = params.get("messages", [])
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise TypeError("`messages` must be an array of messages")
    start = len(messages)
    for s in reversed(unit_starts(messages)):
        if len(messages) - s > keep:
            break
        start = s
    return {"messages": messages[start:]}


def main():
    # Frames go to a copy of stdout; fd 1 becomes stderr, so a stray print() lands in the
    # host's log instead of corrupting the pipe.
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    pipe = sys.stdin.buffer
    hello = read_frame(pipe)
    if hello is None or hello.get("type") != "hello":
        sys.exit(2)
    keep = int((hello.get("config") or {}).get("keep", 50))
    info = {"id": "keep-last", "name": "Keep last N", "version": "0.1.0",
            "protocol": {"protocol": "rampart-engine", "version": "1.1.0", "features": []}}
    write_frame(out, {"type": "ready", "version": 1, "features": ["shutdown"], "engine": {"Ok": info}})
    while (frame := read_frame(pipe)) is not None:
        if frame.get("type") == "shutdown":
            write_frame(out, {"type": "reply", "id": frame["id"], "result": {"ok": "{}"}})
            return
        if frame.get("type") != "call":
            continue  # a frame type of a newer host: ignored
        try:
            if frame["method"] != "assemble":
                raise NotImplementedError(f"keep-last does not implement `{frame['method']}`")
            result = {"ok": json.dumps(assemble(keep, json.loads(frame["payload"])))}
        except NotImplementedError as e:
            result = {"err": {"kind": UNSUPPORTED, "message": str(e), "details": None}}
        except (TypeError, ValueError, AttributeError) as e:
            result = {"err": {"kind": INVALID_PARAMS, "message": f"assemble: {e}", "details": None}}
        write_frame(out, {"type": "reply", "id": frame["id"], "result": result})


if __name__ == "__main__":
    main()
