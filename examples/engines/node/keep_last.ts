// keep-last: the README's example engine as a node program, in TypeScript with no dependencies.
//
// It speaks the Rampart engine protocol v1 (docs/engine-protocol.md) on stdin and stdout. Compile
// it (`tsc --module nodenext --target es2022 keep_last.ts`) and select it with
// `[plugins.engines.keep-last] command = ["node", "keep_last.js"]`. `assemble` keeps the newest
// whole units (an assistant's tool calls with their results) of at most `keep` messages; every
// other method answers "unsupported" and the host does its default.
import { writeSync } from "node:fs";

type Message = { role?: string; content?: unknown; toolCallId?: string };
type Frame = { type: string; id?: number; method?: string; payload?: string; config?: { keep?: number } };

const UNSUPPORTED = 1, INVALID_PARAMS = 2; // error kinds (docs/engine-protocol.md, "Errors")
let keep = 50;

// Frames are written synchronously to fd 1; console.log goes to stderr, so a stray log line
// lands in the host's log instead of corrupting the pipe.
console.log = console.error;
function send(frame: object): void {
  const body = Buffer.from(JSON.stringify(frame));
  const head = Buffer.alloc(4);
  head.writeUInt32BE(body.length);
  writeSync(1, Buffer.concat([head, body]));
}

function unitStarts(messages: Message[]): number[] {
  const starts: number[] = [];
  for (let i = 0; i < messages.length; ) {
    starts.push(i);
    const content = messages[i].role === "assistant" ? messages[i].content : undefined;
    const blocks = Array.isArray(content) ? (content as { type?: string; id?: string }[]) : [];
    const calls = new Set(blocks.filter((b) => b?.type === "toolCall").map((b) => b.id));
    i += 1;
    while (calls.size > 0 && i < messages.length && calls.has(messages[i].toolCallId)) i += 1;
  }
  return starts;
}

function assemble(params: { messages?: unknown }): { messages: Message[] } {
  const messages = params.messages ?? [];
  if (!Array.isArray(messages) || messages.some((m) => typeof m !== "object" || m === null)) {
    throw new TypeError("`messages` must be an array of messages");
  }
  let start = messages.length;
  for (const s of unitStarts(messages).reverse()) {
    if (messages.length - s > keep) break;
    start = s;
  }
  return { messages: messages.slice(start) };
}

function handle(frame: Frame): void {
  if (frame.type === "hello") {
    keep = Number(frame.config?.keep ?? 50);
    const info = { id: "keep-last", name: "Keep last N", version: "0.1.0",
      protocol: { protocol: "rampart-engine", version: "1.1.0", features: [] } };
    send({ type: "ready", version: 1, features: ["shutdown"], engine: { Ok: info } });
  } else if (frame.type === "shutdown") {
    send({ type: "reply", id: frame.id, result: { ok: "{}" } });
    process.exit(0);
  } else if (frame.type === "call") {
    let result: object;
    if (frame.method !== "assemble") {
      result = { err: { kind: UNSUPPORTED, message: `keep-last does not implement \`${frame.method}\``, details: null } };
    } else {
      try {
        result = { ok: JSON.stringify(assemble(JSON.parse(frame.payload ?? "{}"))) };
      } catch (e) {
        result = { err: { kind: INVALID_PARAMS, message: `assemble: ${(e as Error).message}`, details: null } };
      }
    }
    send({ type: "reply", id: frame.id, result });
  } // any other frame type is a newer host's: ignored
}

// Each frame is a 4-byte big-endian length, then that many bytes of JSON. Chunks are joined
// once a whole frame has arrived (joining on every chunk would copy a large frame many times).
let chunks: Buffer[] = [];
let buffered = 0;
process.stdin.on("data", (chunk: Buffer) => {
  chunks.push(chunk);
  buffered += chunk.length;
  for (;;) {
    if (buffered < 4) return;
    if (chunks[0].length < 4) chunks = [Buffer.concat(chunks)];
    const length = chunks[0].readUInt32BE(0);
    if (buffered < 4 + length) return;
    const all = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks);
    handle(JSON.parse(all.subarray(4, 4 + length).toString("utf8")) as Frame);
    const rest = all.subarray(4 + length);
    chunks = rest.length > 0 ? [rest] : [];
    buffered = rest.length;
  }
});
process.stdin.on("end", () => process.exit(0)); // the host closed the pipe
