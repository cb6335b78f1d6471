/*
 * rampart_engine.h — the C ABI of Rampart context engines, version 1.
 *
 * Why this exists: a Rampart engine written in Rust links rampart-engine-api and its abi_stable
 * surface. An engine in C, C++, Zig, or any language that can export a C function, implements
 * this header instead. The host's loader finds out which of the two a library speaks by the
 * symbols it exports, and applies the same checks, deadlines, quarantine and process isolation
 * to both.
 *
 * Everything that crosses is UTF-8 JSON: the same method names and the same JSON as the engine
 * protocol of rampart-engine-api 1.x (`rampart_engine_api::protocol`), so an engine can use any
 * JSON library. This header defines the calls around that JSON, who owns every buffer, which
 * threads may call what, and the status codes.
 *
 * ---------------------------------------------------------------------------------------------
 * The entry point
 * ---------------------------------------------------------------------------------------------
 * A library exports one function, with C linkage and default visibility:
 *
 *     const rampart_engine_table_v1 *rampart_engine_v1(void);
 *
 * It returns a pointer to a table that stays valid and unchanged for as long as the library is
 * loaded (a `static const` table is the usual choice). The host calls it once per load, reads
 * `abi_version` first and refuses the library, without calling anything else in it, unless it
 * is RAMPART_ENGINE_ABI_VERSION. A NULL table, or a NULL function in it, is refused too.
 * The host never unloads a library.
 *
 * ---------------------------------------------------------------------------------------------
 * Buffers: who allocates, who frees
 * ---------------------------------------------------------------------------------------------
 * - Input the host passes (`method`, `json_in`, `init_json`, host answers) is borrowed: valid
 *   until the function it was passed to returns. `json_in[len]` is always a NUL byte, so string
 *   functions may be used on it; `len` does not count that NUL.
 * - Output the engine returns (`*out`, `*error`) is allocated by the engine however it likes.
 *   The host copies it and then calls the table's `free_buffer(buf, len)` exactly once, with the
 *   pointer and length the engine wrote, from the same thread that made the call. The engine's
 *   output needs no trailing NUL. Leave `*out` NULL to answer nothing (a success with no
 *   answer reads as `{}`).
 * - Answers of the host's `call` are allocated by the host. The engine gives each back exactly
 *   once with the host table's `free_buffer(host_data, buf, len)`. The host ignores (and logs)
 *   a pointer it did not hand out, so a double free is harmless; buffers never returned are
 *   released when the engine is destroyed.
 * - Answers are limited to 256 MiB; a larger one is refused as an error.
 *
 * ---------------------------------------------------------------------------------------------
 * Threads
 * ---------------------------------------------------------------------------------------------
 * - Calls on one instance never overlap: the host makes one call at a time per instance, though
 *   successive calls may come from different threads. Different instances (the same library
 *   loaded for two engine ids) may be called at the same time, so state shared between
 *   instances needs a lock.
 * - The host table may be used from any thread, at any time from `create` until `destroy`
 *   returns, including from threads the engine starts. It is not valid after `destroy`.
 * - A call context (`rampart_call_ctx`) is valid only during the call it was passed to, and
 *   only on the thread that received that call.
 * - A call that overruns the host's deadline is abandoned: the host raises the context's cancel
 *   flag, stops waiting, quarantines the engine and makes no new call on the instance. Only if
 *   the abandoned call ever returns may `destroy` follow; it never runs beside a call.
 *
 * ---------------------------------------------------------------------------------------------
 * Crashes
 * ---------------------------------------------------------------------------------------------
 * In the host's process (the default) a crash of the engine (abort, segfault, exit) ends the
 * host. With `isolation = "process"` in the engine's plugins.toml table, the library runs in a
 * child `rampart engine-host`; a crash there quarantines the engine and the host carries on with
 * its built-in engine. C++ exceptions must never cross these functions.
 *
 * ---------------------------------------------------------------------------------------------
 * The JSON
 * ---------------------------------------------------------------------------------------------
 * Keys are camelCase. Unknown keys must be ignored (later 1.x hosts add optional ones).
 *
 * engine_info_json (EngineInfo):
 *   {"id": "keep-last", "name": "Keep last N", "version": "0.1.0",
 *    "ownsCompaction": false,
 *    "protocol": {"protocol": "rampart-engine", "version": "1.0.0", "features": []}}
 *   `id` must be the id plugins.toml loads the engine under. `protocol.version` is the engine
 *   API version the engine was written against; its major must be 1. Without the feature
 *   {"name": "messageRefs"} every message list is a plain JSON array of messages; with it,
 *   lists cross as deltas against the list the engine kept from its last call (docs/
 *   engine-protocol.md, section 4.1: the same JSON an executable reads). Announce it only if
 *   the engine reads that form.
 *
 * init_json, passed to `create` (EngineInit):
 *   {"engineId": "keep-last", "config": { ...the engine's plugins.toml config table... },
 *    "hostProtocol": {"protocol": "rampart-engine", "version": "1.x.y", "features": [...]},
 *    "maxLogLevel": "info"}
 *
 * A message is a pi session message, for example:
 *   {"role": "user", "content": [{"type": "text", "text": "hi"}], "timestamp": 1}
 *   {"role": "assistant", "content": [{"type": "toolCall", "id": "c1", "name": "read",
 *     "arguments": {"path": "a.rs"}}], "api": "...", "provider": "...", "model": "...",
 *     "usage": {...}, "stopReason": "toolUse", "timestamp": 2}
 *   {"role": "toolResult", "toolCallId": "c1", "toolName": "read",
 *    "content": [{"type": "text", "text": "..."}], "isError": false, "timestamp": 3}
 * Return the messages you keep exactly as you received them. Never separate an assistant
 * message that has toolCall blocks from the toolResult messages right after it that answer
 * those calls: a provider refuses a result without its call.
 *
 * Methods (`method` argument of `call`), parameters -> answer:
 *   "assemble"  {"sessionId": "...", "messages": [msg...], "tokenBudget": 2000,
 *                "availableTools": [...], "prompt": "..."}
 *               -> {"messages": [msg...], "estimatedTokens": 0}
 *               (0 tokens means "not counted, the host counts"; "systemPromptAddition" is an
 *               optional string the host appends to the system prompt)
 *   "ingest"    {"sessionId": "...", "message": msg} -> {"ingested": true}
 *   "compact"   {"sessionId": "...", "messages": [msg...], "force": true, "tokenBudget": N}
 *               -> {"ok": true, "compacted": false}
 *   "dispose"   {} -> {}            (called once before `destroy`)
 *   and bootstrap, ingest_batch, maintain, after_turn, prepare_subagent_spawn,
 *   on_subagent_ended, memory.search/get/sync/status, and (API 1.2, with the
 *   "engineTools" feature) tools.list/tools.call as in rampart_engine_api::protocol and ::tools.
 * A method the engine does not implement, including any name it does not know, must answer
 * RAMPART_UNSUPPORTED: the host then does its default. Parameters of the wrong shape answer
 * RAMPART_INVALID_PARAMS.
 *
 * Host services (`method` argument of the host table's `call`), request -> answer:
 *   "llm.complete"  {"purpose": "compaction", "system": "...", "messages": [msg...],
 *                    "maxTokens": 1024}
 *                   -> {"text": "...", "model": "...", "inputTokens": N, "outputTokens": N}
 *   "blobs.put"     {"mediaType": "text/plain", "content": "...", "sessionId": "..."}
 *                   -> {"reference": "sha256:<64 hex>", "bytes": N}
 *   "tokens.count"  {"tokenizer": "" (the chat model's) or "o200k_base", "messages": [msg...]}
 *                   -> {"counts": [N, ...], "exact": true, "tokenizer": "o200k_base"}
 *   "clock.now"     {} -> {"unixMs": N}
 *   "blobs.get"     {"reference": "sha256:<64 hex>"} -> {"content": "...", "bytes": N}
 *                   (API 1.2; a capped tool result names its original in extra.rampartOriginal)
 *   "state.dir"     {} -> {"path": "...", "scratch": false}   (API 1.2: a directory for this
 *                   engine's own state; scratch (a replay) means use it even over your config)
 *   "events.emit", "session.read", "session.rewrite" as in rampart_engine_api::host::service.
 * Logging is the table's `log` function, not a service.
 * A service the host does not know answers RAMPART_UNSUPPORTED.
 */
#ifndef RAMPART_ENGINE_H
#define RAMPART_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version of this header's tables. The host refuses any other value. */
#define RAMPART_ENGINE_ABI_VERSION 1u

/* The name of the exported entry point, for hosts and for dlsym. */
#define RAMPART_ENGINE_ENTRY "rampart_engine_v1"

/*
 * Status codes, returned by `create`, `call` and the host's `call`. They are the codes of
 * rampart_engine_api::ErrorKind::code. On any status but RAMPART_OK the engine may put a UTF-8
 * message for people in the output buffer (`*out` or `*error`); the host shows it in the one
 * line that reports the failure. A status outside 0..8 is an error of the engine's and is
 * reported as such ("status 42, which C ABI 1 does not define").
 */
typedef int32_t rampart_status;
#define RAMPART_OK 0             /* success; the output holds the JSON answer */
#define RAMPART_UNSUPPORTED 1    /* the method or service is not implemented: use the default */
#define RAMPART_INVALID_PARAMS 2 /* the JSON does not have the shape the method needs */
#define RAMPART_PANICKED 3       /* the engine hit an internal bug and recovered from it */
#define RAMPART_TIMEOUT 4        /* a deadline passed */
#define RAMPART_CANCELLED 5      /* the call's context was cancelled */
#define RAMPART_ENGINE 6         /* the engine failed for a reason of its own */
#define RAMPART_HOST 7           /* a host service failed (answered by the host table) */
#define RAMPART_INCOMPATIBLE 8   /* the two sides do not speak the same protocol */

/* Log levels of the host table's `log`. */
#define RAMPART_LOG_TRACE 0u
#define RAMPART_LOG_DEBUG 1u
#define RAMPART_LOG_INFO 2u
#define RAMPART_LOG_WARN 3u
#define RAMPART_LOG_ERROR 4u

/*
 * The host's services, handed to `create`. Valid until `destroy` returns; pass `host_data` back
 * as the first argument of each function.
 */
typedef struct rampart_host {
    /* RAMPART_ENGINE_ABI_VERSION. */
    uint32_t abi_version;
    /* Opaque to the engine. */
    void *host_data;
    /* Records a log line under the engine's id. `fields_json` is a JSON object of structured
     * fields, or empty (len 0). Strings need not be NUL-terminated. Never fails. */
    void (*log)(void *host_data, uint32_t level, const char *target, size_t target_len,
                const char *message, size_t message_len, const char *fields_json,
                size_t fields_len);
    /* Calls a host service by name (NUL-terminated) with a JSON request. On RAMPART_OK
     * `*out`/`*out_len` hold the JSON answer (NUL-terminated, `*out_len` excludes the NUL);
     * otherwise they hold the error's message, or NULL. A non-NULL `*out` must be given back
     * with `free_buffer`. */
    rampart_status (*call)(void *host_data, const char *method, const char *json_in,
                           size_t len, char **out, size_t *out_len);
    /* Gives back a buffer the host's `call` returned. */
    void (*free_buffer)(void *host_data, char *buf, size_t len);
} rampart_host;

/*
 * The context of one call: its deadline and whether the host stopped waiting. Borrowed: valid
 * during the call, on the calling thread only.
 */
typedef struct rampart_call_ctx {
    /* Opaque to the engine. */
    const void *ctx_data;
    /* The call's deadline in Unix milliseconds, 0 for none. */
    uint64_t deadline_unix_ms;
    /* Non-zero once the host wants the call to stop; long work should check it and answer
     * RAMPART_CANCELLED. Pass the context itself. */
    int32_t (*is_cancelled)(const struct rampart_call_ctx *ctx);
} rampart_call_ctx;

/* An engine library's table. Every function must be non-NULL. */
typedef struct rampart_engine_table_v1 {
    /* RAMPART_ENGINE_ABI_VERSION; read before anything else. */
    uint32_t abi_version;
    /* The engine's EngineInfo as NUL-terminated JSON (see above), valid while the library is
     * loaded. */
    const char *engine_info_json;
    /* Builds an instance from `init_json` (EngineInit above; `init_json[init_len]` is NUL).
     * On RAMPART_OK `*instance` is the engine's state, passed back to `call` and `destroy`
     * (it may be NULL if the engine needs no state). On failure `*error`/`*error_len` may hold
     * a message, freed with `free_buffer`. `host` stays valid until `destroy` returns. */
    rampart_status (*create)(const char *init_json, size_t init_len, const rampart_host *host,
                             void **instance, char **error, size_t *error_len);
    /* Calls method `method` (NUL-terminated) with parameters `json_in` (`json_in[len]` is NUL).
     * On RAMPART_OK `*out`/`*out_len` hold the JSON answer (or NULL for `{}`); otherwise an
     * error message or NULL. The host sets `*out` to NULL and `*out_len` to 0 before calling. */
    rampart_status (*call)(void *instance, const char *method, const char *json_in, size_t len,
                           const rampart_call_ctx *ctx, char **out, size_t *out_len);
    /* Frees a buffer the engine returned through `*out` or `*error`. */
    void (*free_buffer)(char *buf, size_t len);
    /* Releases the instance. Called once and last, with no call running: normally after the
     * "dispose" call, or straight after `create` when the handshake refuses the engine (an
     * `id` other than the configured one). */
    void (*destroy)(void *instance);
} rampart_engine_table_v1;

/* The entry point an engine library exports. */
const rampart_engine_table_v1 *rampart_engine_v1(void);

#ifdef __cplusplus
}
#endif

#endif /* RAMPART_ENGINE_H */
