"""Conversations for `serve_load.py`: the bodies a client re-sends turn after turn.

Two shapes, because the cost of a proxy per byte depends on what the bytes are:

- `text`: user and assistant prose only (the shape BENCHMARKS.md measured first);
- `coding`: what a coding agent sends: each turn a user request, assistant messages with tool
  calls (a function name and JSON arguments), tool results holding source code and command
  output full of quotes, backslashes, newlines, tabs, escape sequences and non-ASCII text, and
  the assistant's closing words. JSON escaping and nested objects are where parsers and
  serialisers spend their time, so this is the shape that shows it.

The coding shape is rendered in the three wires `rampart serve` accepts as a client: OpenAI
chat completions (`openai`), Anthropic messages (`anthropic`) and OpenAI Responses
(`responses`, the Codex CLI's: input items, the system prompt as `instructions`), from one list
of abstract turns, so the wires carry the same content.

Everything is generated from a seed: the same size gives the same bytes on every machine and
every run, so two runs (before and after a change) send identical requests. Sizes are in
tokens at about 4 bytes of JSON per token, counted on the serialised messages.

A `Conversation` is a prefix (the history) plus a tail that grows with each request: the
answer the upstream gave (`ANSWER`, what `host/examples/instant_upstream.rs` always says) and
a new user line, which is what a client continuing the conversation sends.
"""

import json
import random

# What the instant upstream answers, re-sent by the client as the assistant's turn.
ANSWER = "Done."
SEED = 26
BYTES_PER_TOKEN = 4

SYSTEM = ("You are a coding agent working in a Rust and Python repository. Use the tools to "
          "read files, run commands and edit code; explain briefly what you changed.")

TOOLS = [
    ("read_file", "Read a file of the repository, with line numbers.",
     {"path": {"type": "string"}, "offset": {"type": "integer"}, "limit": {"type": "integer"}},
     ["path"]),
    ("run_command", "Run a shell command in the repository and return its output.",
     {"command": {"type": "string"}, "timeout_ms": {"type": "integer"}}, ["command"]),
    ("edit_file", "Replace one exact occurrence of old_text with new_text in a file.",
     {"path": {"type": "string"}, "old_text": {"type": "string"},
      "new_text": {"type": "string"}}, ["path", "old_text", "new_text"]),
    ("grep", "Search the repository with a regular expression.",
     {"pattern": {"type": "string"}, "glob": {"type": "string"}}, ["pattern"]),
]

WORDS = ["parse", "session", "config", "token", "window", "entry", "branch", "buffer", "frame",
         "header", "store", "cache", "prompt", "engine", "reader", "writer", "guard", "batch"]
TYPES = ["SessionTree", "Config", "TokenCount", "Frame", "Header", "EntryId", "Window", "Blob"]
MODULES = ["serve", "sessions", "context", "message", "config", "providers", "memory", "replay"]
# Non-ASCII the way real code and logs carry it: accents, dashes, quotes, CJK, emoji.
UNICODE = ["naïve", "café", "— see above", "“quoted”", "日本語のキー", "Ünïcödé", "✅", "🦀",
           "→", "±0.5 µs", "Привет"]


class Rng(random.Random):
    """`random.Random` with the few picks the generators need."""

    def ident(self):
        return f"{self.choice(WORDS)}_{self.choice(WORDS)}"

    def path(self):
        if self.random() < 0.7:
            return f"crates/{self.choice(MODULES)}/src/{self.choice(WORDS)}.rs"
        return f"tools/{self.choice(WORDS)}_{self.choice(WORDS)}.py"


def rust_line(rng, depth):
    pad = "    " * depth
    kind = rng.randrange(9)
    name, ty = rng.ident(), rng.choice(TYPES)
    if kind == 0:
        return f'{pad}let re = Regex::new(r"^\\s*(\\w+)\\s*=\\s*\\"([^\\"]*)\\"$")?;'
    if kind == 1:
        return f'{pad}let path = "C:\\\\Users\\\\dev\\\\{name}.toml"; // {rng.choice(UNICODE)}'
    if kind == 2:
        return f'{pad}println!("{{}} → {{:?}}", {name}, "{rng.choice(UNICODE)}");'
    if kind == 3:
        return f"{pad}fn {name}(input: &str) -> Result<{ty}, Error> {{"
    if kind == 4:
        return f"{pad}let {name}: Vec<{ty}> = items.iter().filter(|x| x.len() > {rng.randrange(99)}).collect();"
    if kind == 5:
        return f'{pad}return Err(Error::new(format!("bad key \\"{{}}\\" at line {{}}", key, {rng.randrange(999)})));'
    if kind == 6:
        return f"{pad}// {rng.choice(UNICODE)}: the {name} keeps its order\t(tab-aligned)"
    if kind == 7:
        return f"{pad}assert_eq!({name}.len(), {rng.randrange(64)}, \"{rng.choice(UNICODE)}\");"
    return f"{pad}}}"


def python_line(rng, depth):
    pad = "    " * depth
    kind = rng.randrange(6)
    name = rng.ident()
    if kind == 0:
        return f'{pad}pattern = re.compile(r"\\b{name}\\s*\\(\\"(.*?)\\"\\)")'
    if kind == 1:
        return f"{pad}def {name}(self, data: dict[str, str]) -> str:"
    if kind == 2:
        return f"{pad}return f\"{{self.{name}!r}} — {rng.choice(UNICODE)}\\n\""
    if kind == 3:
        return f"{pad}text = text.replace('\\\\', '/').replace('\"', \"'\")"
    if kind == 4:
        return f"{pad}# {rng.choice(UNICODE)} {name}: see issue #{rng.randrange(999)}"
    return f"{pad}raise ValueError(f\"{name}: expected {{expected!r}}, got {{got!r}}\")"


def source(rng, path, lines):
    """A numbered file listing as a read tool returns it."""
    make = python_line if path.endswith(".py") else rust_line
    out = []
    start = rng.randrange(1, 400)
    for i in range(lines):
        out.append(f"{start + i:>5}\t{make(rng, rng.randrange(3))}")
    return "\n".join(out)


def command_output(rng, command, lines):
    """Test runner or build output, with colour escapes, quotes and a panic message."""
    out = [f"$ {command}", "\x1b[1m\x1b[32m   Compiling\x1b[0m rampart-host v0.1.0"]
    for _ in range(lines):
        module, name = rng.choice(MODULES), rng.ident()
        roll = rng.random()
        if roll < 0.75:
            out.append(f"test {module}::tests::{name} ... \x1b[32mok\x1b[0m")
        elif roll < 0.9:
            out.append(f"test {module}::tests::{name} ... \x1b[31mFAILED\x1b[0m")
            out.append(f"thread '{module}::tests::{name}' panicked at crates/{module}/src/lib.rs:"
                       f"{rng.randrange(999)}:{rng.randrange(80)}:")
            out.append("assertion `left == right` failed\n  left: \"a\\\"b\"\n right: \"a\\\\b\"")
        else:
            out.append(f"warning: unused variable: `{name}` {rng.choice(UNICODE)}")
    out.append(f"test result: FAILED. {rng.randrange(200)} passed; {rng.randrange(5)} failed; "
               f"finished in {rng.random() * 9:.2f}s")
    return "\n".join(out)


def tool_call(rng):
    """One call and its result: (name, arguments, result text)."""
    kind = rng.randrange(10)
    path = rng.path()
    if kind < 4:
        lines = rng.randrange(30, 140)
        return "read_file", {"path": path, "offset": 1, "limit": lines}, source(rng, path, lines)
    if kind < 7:
        command = rng.choice([f"cargo test -p rampart-{rng.choice(MODULES)} -- \"{rng.ident()}\"",
                              f"cargo clippy --all-targets 2>&1 | grep -n '{rng.ident()}'",
                              f"python3 -m pytest tools/ -k \"{rng.ident()} and not slow\""])
        return "run_command", {"command": command, "timeout_ms": 120000}, \
            command_output(rng, command, rng.randrange(10, 70))
    if kind < 9:
        old = "\n".join(rust_line(rng, 1) for _ in range(rng.randrange(2, 8)))
        new = "\n".join(rust_line(rng, 1) for _ in range(rng.randrange(2, 8)))
        return "edit_file", {"path": path, "old_text": old, "new_text": new}, \
            f"Edited {path}: replaced {old.count(chr(10)) + 1} lines with {new.count(chr(10)) + 1}."
    pattern = f"fn {rng.ident()}\\(.*\\\"|{rng.choice(UNICODE)}"
    hits = "\n".join(f"{rng.path()}:{rng.randrange(999)}:{rust_line(rng, 1)}"
                     for _ in range(rng.randrange(3, 25)))
    return "grep", {"pattern": pattern, "glob": "**/*.rs"}, hits


def coding_turns(rng, turn):
    """One turn of a coding agent as abstract steps: the user's words, then steps of (text,
    [(id suffix, name, arguments, result)]), then the assistant's closing words."""
    user = (f"Turn {turn}: the test `{rng.ident()}` fails on {rng.path()} with "
            f"“{rng.choice(UNICODE)}” in the key; fix it and run the tests.")
    steps = []
    for step in range(rng.randrange(1, 4)):
        calls = [(f"{turn:04d}_{step}_{k}",) + tool_call(rng) for k in range(rng.randrange(1, 4))]
        steps.append((f"Step {step + 1}: checking {calls[0][1]} on {rng.path()}.", calls))
    closing = (f"Fixed: `{rng.ident()}` now escapes \"quotes\" and backslashes (\\) "
               f"before matching; {rng.randrange(300)} tests pass {rng.choice(UNICODE)}.")
    return user, steps, closing


def openai_turn(user, steps, closing):
    messages = [{"role": "user", "content": user}]
    for text, calls in steps:
        messages.append({"role": "assistant", "content": text, "tool_calls": [
            {"id": f"call_{cid}", "type": "function",
             "function": {"name": name, "arguments": json.dumps(args)}}
            for cid, name, args, _ in calls]})
        for cid, _, _, result in calls:
            messages.append({"role": "tool", "tool_call_id": f"call_{cid}", "content": result})
    messages.append({"role": "assistant", "content": closing})
    return messages


def responses_turn(user, steps, closing):
    items = [{"type": "message", "role": "user",
              "content": [{"type": "input_text", "text": user}]}]
    for text, calls in steps:
        items.append({"type": "message", "role": "assistant",
                      "content": [{"type": "output_text", "text": text}]})
        for cid, name, args, _ in calls:
            items.append({"type": "function_call", "call_id": f"call_{cid}", "name": name,
                          "arguments": json.dumps(args)})
        for cid, _, _, result in calls:
            items.append({"type": "function_call_output", "call_id": f"call_{cid}",
                          "output": result})
    items.append({"type": "message", "role": "assistant",
                  "content": [{"type": "output_text", "text": closing}]})
    return items


def anthropic_turn(user, steps, closing):
    messages = [{"role": "user", "content": [{"type": "text", "text": user}]}]
    for text, calls in steps:
        messages.append({"role": "assistant", "content": [{"type": "text", "text": text}] + [
            {"type": "tool_use", "id": f"toolu_{cid}", "name": name, "input": args}
            for cid, name, args, _ in calls]})
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"toolu_{cid}", "content": result}
            for cid, _, _, result in calls]})
    messages.append({"role": "assistant", "content": [{"type": "text", "text": closing}]})
    return messages


def text_turn(turn):
    """The text-only shape, as `serve_load.py` generated it before the coding shape existed."""
    words = " ".join(f"src/module_{turn}_{i}.rs line {i * 7}" for i in range(40))
    return [{"role": "user", "content": f"Turn {turn}: read {words}"},
            {"role": "assistant", "content": f"Turn {turn} done: {words}"}]


class Conversation:
    """A history of about `tokens` tokens in one shape and wire, as bytes ready to send.

    `body(i)` is the i-th request continuing it: the history, a user line, then i times the
    upstream's answer and a new user line, as a client that got those answers re-sends it.
    Only the tail is serialised per request; the history's bytes are joined once.
    """

    def __init__(self, shape, wire, tokens, model, first_user_prefix=""):
        if shape == "text" and wire != "openai":
            raise ValueError("the text shape is generated for the openai wire only")
        self.shape, self.wire, self.tokens, self.model = shape, wire, tokens, model
        rng = Rng(SEED)
        system = [] if wire != "openai" else [{"role": "system", "content": SYSTEM}]
        history, size, turn = [], 0, 0
        while size < tokens * BYTES_PER_TOKEN:
            if shape == "text":
                messages = text_turn(turn)
            else:
                render = {"anthropic": anthropic_turn, "responses": responses_turn,
                          "openai": openai_turn}[wire]
                messages = render(*coding_turns(rng, turn))
            if turn == 0 and first_user_prefix:
                messages[0] = self._prefixed(messages[0], first_user_prefix)
            encoded = [json.dumps(m, ensure_ascii=False) for m in messages]
            history.extend(encoded)
            size += sum(len(e.encode()) for e in encoded)
            turn += 1
        self.history_bytes = size
        self._history = ",".join([json.dumps(m, ensure_ascii=False) for m in system]
                                 + history).encode()

    @staticmethod
    def _prefixed(message, prefix):
        message = json.loads(json.dumps(message))
        if message.get("type") == "message":
            message["content"][0]["text"] = prefix + message["content"][0]["text"]
        elif isinstance(message["content"], str):
            message["content"] = prefix + message["content"]
        else:
            message["content"][0]["text"] = prefix + message["content"][0]["text"]
        return message

    def path(self):
        return {"anthropic": "/v1/messages", "responses": "/v1/responses",
                "openai": "/v1/chat/completions"}[self.wire]

    def _tools(self):
        if self.shape == "text":
            return None
        if self.wire == "anthropic":
            return [{"name": n, "description": d, "input_schema": {
                "type": "object", "properties": p, "required": r}} for n, d, p, r in TOOLS]
        if self.wire == "responses":
            return [{"type": "function", "name": n, "description": d, "parameters": {
                "type": "object", "properties": p, "required": r}} for n, d, p, r in TOOLS]
        return [{"type": "function", "function": {"name": n, "description": d, "parameters": {
            "type": "object", "properties": p, "required": r}}} for n, d, p, r in TOOLS]

    def _user(self, text):
        if self.wire == "responses":
            return {"type": "message", "role": "user",
                    "content": [{"type": "input_text", "text": text}]}
        if self.wire == "anthropic":
            return {"role": "user", "content": [{"type": "text", "text": text}]}
        return {"role": "user", "content": text}

    def _answer(self):
        if self.wire == "responses":
            return {"type": "message", "role": "assistant",
                    "content": [{"type": "output_text", "text": ANSWER}]}
        if self.wire == "anthropic":
            return {"role": "assistant", "content": [{"type": "text", "text": ANSWER}]}
        return {"role": "assistant", "content": ANSWER}

    def body(self, i, stream=False):
        """The i-th request continuing the conversation (0: the history and one question)."""
        tail = [self._user("And now? Run the whole suite.")]
        for k in range(1, i + 1):
            tail.append(self._answer())
            tail.append(self._user(f"Next step {k}: run the tests again."))
        head = {"model": self.model}
        if self.wire == "anthropic":
            head["max_tokens"] = 1024
            head["system"] = SYSTEM
        if self.wire == "responses":
            # As the Codex CLI sends it: the whole conversation every time, nothing stored.
            head["instructions"] = SYSTEM
            head["store"] = False
        if self._tools():
            head["tools"] = self._tools()
        if stream:
            head["stream"] = True
            if self.wire == "openai":
                head["stream_options"] = {"include_usage": True}
        key = "input" if self.wire == "responses" else "messages"
        prefix = json.dumps(head, ensure_ascii=False)[:-1] + f', "{key}": ['
        rest = ",".join(json.dumps(m, ensure_ascii=False) for m in tail)
        return prefix.encode() + self._history + ("," + rest + "]}").encode()
