//! End to end: `rampart serve` as a real process on a free loopback port, in front of a
//! loopback upstream speaking OpenAI or Anthropic. Clients are plain HTTP requests shaped like
//! the real ones (Claude Code's from the shared transcripts); the sessions on disk are read
//! back with `rampart-sessions`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::loopback::{
    Loopback, Reply, anthropic_text_stream, anthropic_tool_use_stream, openai_overflow_error,
    openai_text_stream, openai_tool_call_stream,
};
use rampart_host::engine::services::EventSink;
use rampart_host::serve::server::{ServerState, router};
use rampart_message::{AgentMessage, ContentBlock};
use rampart_sessions::store::SessionStore;
use rampart_sessions::store::shared::{MemoryStore, SharedStore};
use rampart_sessions::{Session, SessionOptions};
use serde_json::{Value, json};

/// A `rampart serve` process; killed when dropped.
struct Serve {
    child: Child,
    base: String,
    sessions: PathBuf,
    _dir: Option<tempfile::TempDir>,
}

impl Serve {
    /// Starts `rampart serve --listen 127.0.0.1:0` with `config` and waits for its address.
    fn start(config: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut serve = Self::start_in(config, dir.path());
        serve._dir = Some(dir);
        serve
    }

    /// [`Serve::start`] with its config and sessions directory in `dir` (which the caller
    /// keeps), so several servers can share one store.
    fn start_in(config: &str, dir: &std::path::Path) -> Self {
        let config_path = common::write_config(dir, config);
        let sessions = dir.join("sessions");
        let mut child = Command::new(env!("CARGO_BIN_EXE_rampart"))
            .args([
                "--config",
                config_path.to_str().unwrap(),
                "--sessions-dir",
                sessions.to_str().unwrap(),
                "serve",
                "--listen",
                "127.0.0.1:0",
            ])
            .env_remove("RAMPART_CONFIG")
            .env("RUST_LOG", "warn")
            .current_dir(dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let base = line
            .trim()
            .strip_prefix("rampart serve listening on ")
            .unwrap_or_else(|| panic!("unexpected first line: {line:?}"))
            .to_owned();
        Serve {
            child,
            base,
            sessions,
            _dir: None,
        }
    }

    fn client() -> reqwest::blocking::Client {
        reqwest::blocking::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()
            .unwrap()
    }

    /// POSTs `body` to `path` with `headers`; the status and the body (JSON, or the raw text
    /// of a stream as a JSON string).
    fn post(&self, path: &str, headers: &[(&str, &str)], body: &Value) -> (u16, Value) {
        let mut request = Self::client()
            .post(format!("{}{path}", self.base))
            .json(body);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = request.send().unwrap();
        let status = response.status().as_u16();
        let text = response.text().unwrap();
        let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        (status, value)
    }

    fn get(&self, path: &str) -> (u16, String) {
        let response = Self::client()
            .get(format!("{}{path}", self.base))
            .send()
            .unwrap();
        (response.status().as_u16(), response.text().unwrap())
    }

    fn store(&self) -> SessionStore {
        SessionStore::open(&self.sessions).unwrap()
    }

    /// The registry keys, sorted.
    fn keys(&self) -> Vec<String> {
        let mut keys: Vec<String> = self
            .store()
            .list()
            .unwrap()
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        keys.sort();
        keys
    }

    /// The conversation `key`'s session as stored.
    fn session(&self, key: &str) -> Session {
        let store = self.store();
        let entry = store
            .get(key)
            .unwrap()
            .unwrap_or_else(|| panic!("no `{key}` in {:?}", self.keys()));
        Session::open(
            &store.session_file_path(key, &entry).unwrap(),
            SessionOptions::default(),
        )
        .unwrap()
    }

    fn file_bytes(&self, key: &str) -> Vec<u8> {
        std::fs::read(self.session(key).path()).unwrap()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The messages of the active branch, as (role, text) with tool calls and results spelled out.
fn branch(session: &Session) -> Vec<(String, String)> {
    session
        .tree()
        .active_branch()
        .into_iter()
        .filter_map(|e| e.body.message())
        .map(describe)
        .collect()
}

fn describe(m: &AgentMessage) -> (String, String) {
    match m {
        AgentMessage::User(u) => ("user".into(), u.content.joined_text()),
        AgentMessage::Assistant(a) => (
            "assistant".into(),
            a.content
                .iter()
                .filter_map(|b| match b {
                    ContentBlock::Text(t) => Some(t.text.clone()),
                    ContentBlock::ToolCall(c) => {
                        Some(format!("call {} {} {}", c.id, c.name, c.arguments))
                    }
                    _ => None,
                })
                .collect::<Vec<_>>()
                .join("|"),
        ),
        AgentMessage::ToolResult(r) => (
            "toolResult".into(),
            format!("{} {}", r.tool_call_id, r.content.joined_text()),
        ),
        other => (other.role().to_owned(), String::new()),
    }
}

fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
    items
        .iter()
        .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
        .collect()
}

/// The text an OpenAI stream spells.
fn openai_sse_text(stream: &str) -> String {
    stream
        .split("\n\n")
        .filter_map(|f| f.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter_map(|c| {
            c["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_owned)
        })
        .collect()
}

fn openai_config(url: &str, extra: &str) -> String {
    format!(
        r#"
[agents.defaults.model]
primary = "up/gpt-up"

[agents.defaults.compaction]
model = "sim/default"

[models.providers.up]
api = "openai-completions"
baseUrl = "{url}"
maxRetries = 0
timeoutSeconds = 20

[[models.providers.up.models]]
id = "gpt-up"
contextWindow = 128000
{extra}
"#
    )
}

fn anthropic_config(url: &str) -> String {
    format!(
        r#"
[agents.defaults.model]
primary = "up/claude-up"

[models.providers.up]
api = "anthropic-messages"
baseUrl = "{url}"
maxRetries = 0
timeoutSeconds = 20

[[models.providers.up.models]]
id = "claude-up"
contextWindow = 200000
"#
    )
}

const READ_TOOL_OPENAI: &str = r#"[{"type": "function", "function": {"name": "read", "description": "Read a file", "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}]"#;

#[test]
fn openai_tool_calls_over_three_turns_are_stored_as_the_client_sent_them() {
    let up = Loopback::start();
    up.push(openai_tool_call_stream(
        "call_1",
        "read",
        r#"{"path":"a.txt"}"#,
    ));
    up.push(openai_text_stream("The file says hi.", 40, 6));
    up.push(openai_text_stream("You are welcome.", 60, 4));
    let serve = Serve::start(&openai_config(&up.url(), ""));
    let tools: Value = serde_json::from_str(READ_TOOL_OPENAI).unwrap();
    let auth = [("authorization", "Bearer sk-client-secret-123")];

    let mut messages = vec![
        json!({"role": "system", "content": "You are a careful assistant."}),
        json!({"role": "user", "content": "What does a.txt say?"}),
    ];
    let (status, first) = serve.post(
        "/v1/chat/completions",
        &auth,
        &json!({"model": "gpt-up", "messages": messages, "tools": tools}),
    );
    assert_eq!(status, 200, "{first}");
    let call = first["choices"][0]["message"].clone();
    assert_eq!(first["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(call["tool_calls"][0]["id"], "call_1");
    messages.push(call);
    messages.push(json!({"role": "tool", "tool_call_id": "call_1", "content": "hi"}));

    let (status, second) = serve.post(
        "/v1/chat/completions",
        &auth,
        &json!({"model": "gpt-up", "messages": messages, "tools": tools}),
    );
    assert_eq!(status, 200, "{second}");
    assert_eq!(
        second["choices"][0]["message"]["content"],
        "The file says hi."
    );
    messages.push(second["choices"][0]["message"].clone());
    messages.push(json!({"role": "user", "content": "Thanks!"}));

    // The third turn streams, with usage asked for.
    let (status, third) = serve.post(
        "/v1/chat/completions",
        &auth,
        &json!({"model": "gpt-up", "messages": messages, "tools": tools, "stream": true,
                "stream_options": {"include_usage": true}}),
    );
    assert_eq!(status, 200);
    let text = third.as_str().unwrap();
    assert_eq!(openai_sse_text(text), "You are welcome.", "{text}");
    assert!(text.contains("\"completion_tokens\":4"), "{text}");
    assert!(text.trim_end().ends_with("data: [DONE]"), "{text}");

    // Upstream saw the tools, the system prompt, the whole history and the client's key.
    let sent = up.requests();
    assert_eq!(sent.len(), 3);
    assert_eq!(sent[1].body["tools"][0]["function"]["name"], "read");
    assert_eq!(
        sent[1].body["messages"][0]["content"],
        "You are a careful assistant."
    );
    let roles: Vec<&str> = sent[2].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "tool", "assistant", "user"]
    );
    assert_eq!(
        sent[0].header("authorization"),
        Some("Bearer sk-client-secret-123")
    );

    // One conversation, holding what the client sent with the model's answers, once each.
    let keys = serve.keys();
    assert_eq!(keys.len(), 1, "{keys:?}");
    assert!(keys[0].starts_with("serve:anon:"), "{keys:?}");
    let session = serve.session(&keys[0]);
    assert_eq!(
        branch(&session),
        pairs(&[
            ("user", "What does a.txt say?"),
            ("assistant", r#"call call_1 read {"path":"a.txt"}"#),
            ("toolResult", "call_1 hi"),
            ("assistant", "The file says hi."),
            ("user", "Thanks!"),
            ("assistant", "You are welcome."),
        ])
    );
    // The key never reaches the disk.
    let on_disk = String::from_utf8(serve.file_bytes(&keys[0])).unwrap();
    assert!(!on_disk.contains("sk-client-secret"));
    let registry = std::fs::read_to_string(serve.sessions.join("sessions.json")).unwrap();
    assert!(!registry.contains("sk-client-secret"));
}

/// A Claude Code request body: the shape of the recorded sessions in
/// `shared/data/sessions/claude-code-log` (CLAUDE.md in a system reminder of the first user
/// message, a system prompt in blocks with `cache_control`, tools, `metadata.user_id`).
fn claude_code_body(session: &str, messages: Vec<Value>) -> Value {
    json!({
        "model": "claude-opus-4-7",
        "max_tokens": 32000,
        "stream": true,
        "system": [
            {"type": "text", "text": "You are Claude Code, Anthropic's official CLI for Claude.", "cache_control": {"type": "ephemeral"}}
        ],
        "messages": messages,
        "tools": [{"name": "Bash", "description": "Executes a bash command",
                   "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}],
        "metadata": {"user_id": format!("user_5f0b2c9d1e_account_9a3c8e21-7b44-4b1e-9d2f-0c6a1d2e3f40_session_{session}")}
    })
}

fn claude_first_message(prompt: &str) -> Value {
    json!({"role": "user", "content": [
        {"type": "text", "text": "<system-reminder>\nAs you answer the user's questions, you can use the following context:\n# claudeMd\nContents of /repo/CLAUDE.md (project instructions):\n\nAlways run the tests.\n</system-reminder>"},
        {"type": "text", "text": prompt, "cache_control": {"type": "ephemeral"}}
    ]})
}

/// The assistant message a streamed Anthropic answer spells, as Claude Code re-sends it.
fn assistant_from_sse(text: &str) -> Value {
    let mut blocks: Vec<Value> = Vec::new();
    let mut json_parts: Vec<String> = Vec::new();
    for frame in text.split("\n\n") {
        let Some(data) = frame.lines().find_map(|l| l.strip_prefix("data: ")) else {
            continue;
        };
        let event: Value = serde_json::from_str(data).unwrap();
        match event["type"].as_str().unwrap() {
            "content_block_start" => {
                blocks.push(event["content_block"].clone());
                json_parts.push(String::new());
            }
            "content_block_delta" => {
                let i = event["index"].as_u64().unwrap() as usize;
                let d = &event["delta"];
                match d["type"].as_str().unwrap() {
                    "text_delta" => {
                        let t = format!(
                            "{}{}",
                            blocks[i]["text"].as_str().unwrap(),
                            d["text"].as_str().unwrap()
                        );
                        blocks[i]["text"] = json!(t);
                    }
                    "input_json_delta" => {
                        json_parts[i].push_str(d["partial_json"].as_str().unwrap())
                    }
                    _ => {}
                }
            }
            "content_block_stop" => {
                let i = event["index"].as_u64().unwrap() as usize;
                if blocks[i]["type"] == "tool_use" {
                    blocks[i]["input"] = serde_json::from_str(&json_parts[i]).unwrap();
                }
            }
            _ => {}
        }
    }
    json!({"role": "assistant", "content": blocks})
}

#[test]
fn claude_code_turns_with_tools_and_an_edit_that_makes_a_branch() {
    let up = Loopback::start();
    up.push(anthropic_tool_use_stream(
        "toolu_01A",
        "Bash",
        r#"{"command":"ls"}"#,
    ));
    up.push(anthropic_text_stream("Two files.", 50, 3));
    up.push(anthropic_text_stream("Done, tests pass.", 70, 5));
    up.push(anthropic_text_stream("Edited answer.", 70, 3));
    let serve = Serve::start(&anthropic_config(&up.url()));
    let sid = "ef958aa1-0e93-49f0-bb71-150f63befcd1";
    let headers = [
        ("x-api-key", "sk-ant-client"),
        ("anthropic-version", "2023-06-01"),
    ];

    let mut messages = vec![claude_first_message("List the files.")];
    let (status, first) = serve.post(
        "/v1/messages",
        &headers,
        &claude_code_body(sid, messages.clone()),
    );
    assert_eq!(status, 200, "{first}");
    messages.push(assistant_from_sse(first.as_str().unwrap()));
    messages.push(json!({"role": "user", "content": [
        {"tool_use_id": "toolu_01A", "type": "tool_result", "content": "a.rs\nb.rs", "is_error": false}
    ]}));
    let (status, second) = serve.post(
        "/v1/messages",
        &headers,
        &claude_code_body(sid, messages.clone()),
    );
    assert_eq!(status, 200, "{second}");
    messages.push(assistant_from_sse(second.as_str().unwrap()));
    let before_edit = messages.clone();
    messages.push(json!({"role": "user", "content": "Now run the tests."}));
    let (status, _) = serve.post(
        "/v1/messages",
        &headers,
        &claude_code_body(sid, messages.clone()),
    );
    assert_eq!(status, 200);

    // Upstream got the client's key and the tools in Anthropic's shape.
    let sent = up.requests();
    assert_eq!(sent[0].header("x-api-key"), Some("sk-ant-client"));
    assert_eq!(sent[0].body["tools"][0]["name"], "Bash");
    // The client's prompt-cache breakpoints are kept where it put them: its system prompt and
    // the first message's prompt (and nowhere else: the stored copies of older requests'
    // marks are not sent).
    let last = &sent[2].body;
    assert_eq!(
        last["system"][0]["cache_control"]["type"], "ephemeral",
        "{last}"
    );
    let messages = last["messages"].as_array().unwrap();
    let first = messages[0]["content"].as_array().unwrap();
    assert_eq!(first.last().unwrap()["cache_control"]["type"], "ephemeral");
    let marks = last.to_string().matches("cache_control").count();
    assert_eq!(marks, 2, "{last}");

    let key = format!("serve:claude-code:{sid}");
    assert_eq!(serve.keys(), std::slice::from_ref(&key));
    let session = serve.session(&key);
    let prompt = "<system-reminder>\nAs you answer the user's questions, you can use the following context:\n# claudeMd\nContents of /repo/CLAUDE.md (project instructions):\n\nAlways run the tests.\n</system-reminder>\nList the files.";
    assert_eq!(
        branch(&session),
        pairs(&[
            ("user", prompt),
            ("assistant", r#"call toolu_01A Bash {"command":"ls"}"#),
            ("toolResult", "toolu_01A a.rs\nb.rs"),
            ("assistant", "Two files."),
            ("user", "Now run the tests."),
            ("assistant", "Done, tests pass."),
        ])
    );
    let messages_before = session
        .entries()
        .iter()
        .filter(|e| e.body.message().is_some())
        .count();

    // The user edits the last prompt: a branch from the answer before it, nothing overwritten.
    let mut edited = before_edit;
    edited.push(json!({"role": "user", "content": "Run only the fast tests."}));
    let (status, _) = serve.post("/v1/messages", &headers, &claude_code_body(sid, edited));
    assert_eq!(status, 200);
    let session = serve.session(&key);
    let all = session.entries();
    assert_eq!(
        all.iter().filter(|e| e.body.message().is_some()).count(),
        messages_before + 2,
        "only the edited prompt and its answer are new"
    );
    let find = |text: &str| {
        all.iter()
            .find(|e| e.body.message().is_some_and(|m| describe(m).1 == text))
            .unwrap()
    };
    let original = find("Now run the tests.");
    let edit = find("Run only the fast tests.");
    assert_ne!(original.id, edit.id);
    assert_eq!(
        original.parent_id, edit.parent_id,
        "both prompts hang from the same answer"
    );
    assert_eq!(
        describe(find("Two files.").body.message().unwrap()).1,
        "Two files."
    );
    assert_eq!(
        branch(&session).last().unwrap(),
        &("assistant".to_owned(), "Edited answer.".to_owned())
    );
    // The old branch is still there, whole.
    assert!(all.iter().any(|e| {
        e.body
            .message()
            .is_some_and(|m| describe(m).1 == "Done, tests pass.")
    }));
}

#[test]
fn two_claude_code_sessions_with_the_same_claude_md_stay_two_conversations() {
    let up = Loopback::start();
    up.push(anthropic_text_stream("Answer one.", 10, 2));
    up.push(anthropic_text_stream("Answer two.", 10, 2));
    up.push(anthropic_text_stream("One again.", 10, 2));
    let serve = Serve::start(&anthropic_config(&up.url()));
    let first = vec![claude_first_message("Fix the bug.")];
    let a = "11111111-1111-4111-8111-111111111111";
    let b = "22222222-2222-4222-8222-222222222222";
    assert_eq!(
        serve
            .post("/v1/messages", &[], &claude_code_body(a, first.clone()))
            .0,
        200
    );
    // The newer shape: the id in the header, and a JSON-encoded user_id.
    let mut body_b = claude_code_body(b, first.clone());
    body_b["metadata"]["user_id"] =
        json!(json!({"device_id": "d", "account_uuid": "", "session_id": b}).to_string());
    assert_eq!(
        serve
            .post("/v1/messages", &[("X-Claude-Code-Session-Id", b)], &body_b)
            .0,
        200
    );
    let mut more = first.clone();
    more.push(json!({"role": "assistant", "content": [{"type": "text", "text": "Answer one."}]}));
    more.push(json!({"role": "user", "content": "And the other one?"}));
    assert_eq!(
        serve
            .post("/v1/messages", &[], &claude_code_body(a, more))
            .0,
        200
    );

    let key_a = format!("serve:claude-code:{a}");
    let key_b = format!("serve:claude-code:{b}");
    assert_eq!(serve.keys(), [key_a.clone(), key_b.clone()]);
    assert_eq!(branch(&serve.session(&key_a)).len(), 4);
    assert_eq!(
        branch(&serve.session(&key_b))
            .into_iter()
            .map(|(_, t)| t)
            .collect::<Vec<_>>()[1],
        "Answer two."
    );
}

#[test]
fn two_clients_without_ids_stay_apart_once_they_diverge() {
    let up = Loopback::start();
    for text in ["Hello A.", "Hello B.", "A again.", "B again."] {
        up.push(openai_text_stream(text, 5, 2));
    }
    let serve = Serve::start(&openai_config(&up.url(), ""));
    let start = json!({"role": "user", "content": "Hello!"});
    let ask = |history: Vec<Value>| {
        let (status, v) = serve.post(
            "/v1/chat/completions",
            &[],
            &json!({"model": "gpt-up", "messages": history}),
        );
        assert_eq!(status, 200, "{v}");
        v["choices"][0]["message"].clone()
    };
    let a1 = ask(vec![start.clone()]);
    let b1 = ask(vec![start.clone()]);
    ask(vec![
        start.clone(),
        a1.clone(),
        json!({"role": "user", "content": "A's question"}),
    ]);
    ask(vec![
        start.clone(),
        b1.clone(),
        json!({"role": "user", "content": "B's question"}),
    ]);

    let keys = serve.keys();
    assert_eq!(keys.len(), 2, "{keys:?}");
    let views: Vec<Vec<(String, String)>> =
        keys.iter().map(|k| branch(&serve.session(k))).collect();
    let a = views.iter().find(|v| v[1].1 == "Hello A.").unwrap();
    let b = views.iter().find(|v| v[1].1 == "Hello B.").unwrap();
    assert_eq!(
        a,
        &pairs(&[
            ("user", "Hello!"),
            ("assistant", "Hello A."),
            ("user", "A's question"),
            ("assistant", "A again.")
        ])
    );
    assert_eq!(
        b,
        &pairs(&[
            ("user", "Hello!"),
            ("assistant", "Hello B."),
            ("user", "B's question"),
            ("assistant", "B again.")
        ])
    );
}

#[test]
fn a_codex_root_and_its_subagent_become_parent_and_child() {
    let up = Loopback::start();
    for text in ["Root answer.", "Sub answer.", "Root again."] {
        up.push(openai_text_stream(text, 5, 2));
    }
    let serve = Serve::start(&openai_config(&up.url(), ""));
    let session = "0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b";
    let post = |thread: &str, history: Vec<Value>| {
        let (status, v) = serve.post(
            "/v1/chat/completions",
            &[("session-id", session), ("thread-id", thread)],
            &json!({"model": "gpt-up", "messages": history, "prompt_cache_key": session}),
        );
        assert_eq!(status, 200, "{v}");
        v["choices"][0]["message"].clone()
    };
    let task = json!({"role": "user", "content": "Refactor the parser."});
    let root_answer = post(session, vec![task.clone()]);
    post(
        "thread-sub-1",
        vec![json!({"role": "user", "content": "Find every caller of parse()."})],
    );
    post(
        session,
        vec![
            task.clone(),
            root_answer,
            json!({"role": "user", "content": "Go on."}),
        ],
    );

    let root = format!("serve:codex:{session}");
    let child = format!("{root}:thread:thread-sub-1");
    assert_eq!(serve.keys(), [root.clone(), child.clone()]);
    let entry = serve.store().get(&child).unwrap().unwrap();
    assert_eq!(entry.extra["spawnedBy"], root.as_str());
    assert_eq!(branch(&serve.session(&root)).len(), 4);
    assert_eq!(branch(&serve.session(&child)).len(), 2);
    // Each message once: the root's second request continued its branch.
    let stored = |key: &str| {
        serve
            .session(key)
            .entries()
            .iter()
            .filter(|e| e.body.message().is_some())
            .count()
    };
    assert_eq!((stored(&root), stored(&child)), (4, 2));
}

#[test]
fn a_title_request_and_count_tokens_do_not_touch_the_conversation() {
    let up = Loopback::start();
    up.push(anthropic_text_stream("Main answer.", 10, 2));
    up.push(anthropic_text_stream(
        "{\"isNewTopic\": true, \"title\": \"Bug fix\"}",
        10,
        9,
    ));
    let serve = Serve::start(&anthropic_config(&up.url()));
    let sid = "33333333-3333-4333-8333-333333333333";
    assert_eq!(
        serve
            .post(
                "/v1/messages",
                &[],
                &claude_code_body(sid, vec![claude_first_message("Fix it.")])
            )
            .0,
        200
    );
    let key = format!("serve:claude-code:{sid}");
    let file_before = serve.file_bytes(&key);
    let registry_before = std::fs::read(serve.sessions.join("sessions.json")).unwrap();

    // Claude Code's topic/title call: haiku, no tools, one user message, same session.
    let title = json!({
        "model": "claude-haiku-4-5-20251001",
        "max_tokens": 512,
        "system": [{"type": "text", "text": "Analyze if this message indicates a new conversation topic. Format your response as a JSON object with two fields: 'isNewTopic' (boolean) and 'title' (string, or null if isNewTopic is false)."}],
        "messages": [{"role": "user", "content": "Fix it."}],
        "metadata": {"user_id": format!("user_5f0b2c9d1e_account_9a3c8e21-7b44-4b1e-9d2f-0c6a1d2e3f40_session_{sid}")}
    });
    let (status, answer) = serve.post("/v1/messages", &[], &title);
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer["content"][0]["text"],
        "{\"isNewTopic\": true, \"title\": \"Bug fix\"}"
    );
    let (status, count) = serve.post(
        "/v1/messages/count_tokens",
        &[],
        &json!({"model": "claude-opus-4-7", "messages": [{"role": "user", "content": "Fix it, and say how many tokens this is."}]}),
    );
    assert_eq!(status, 200);
    assert!(count["input_tokens"].as_u64().unwrap() > 0, "{count}");

    assert_eq!(
        serve.file_bytes(&key),
        file_before,
        "the conversation is untouched"
    );
    assert_eq!(
        std::fs::read(serve.sessions.join("sessions.json")).unwrap(),
        registry_before
    );
    assert_eq!(serve.keys(), [key]);
    assert_eq!(
        up.request_count(),
        2,
        "count_tokens never reaches the model"
    );
    let (_, metrics) = serve.get("/metrics");
    assert!(
        metrics.contains("rampart_serve_side_requests_total 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("endpoint=\"count_tokens\",status=\"200\"} 1"),
        "{metrics}"
    );
}

/// Claude Code's `role: "system"` message inside `messages` reaches an Anthropic upstream at its
/// place, as sent, every turn, and the conversation stays one branch; an Anthropic server tool
/// has no place upstream yet, and each request's is counted in `/metrics` instead of vanishing.
#[test]
fn a_system_message_reaches_an_anthropic_upstream_and_server_tools_are_counted() {
    let up = Loopback::start();
    up.push(anthropic_text_stream("First.", 10, 2));
    up.push(anthropic_text_stream("Second.", 10, 2));
    let serve = Serve::start(&anthropic_config(&up.url()));
    let sid = "44444444-4444-4444-8444-444444444444";
    let agents = json!({"role": "system", "content": "Available agent types for the Agent tool: general-purpose"});
    let mut history = vec![claude_first_message("Fix it."), agents.clone()];
    for _ in 0..2 {
        let mut body = claude_code_body(sid, history.clone());
        body["tools"]
            .as_array_mut()
            .unwrap()
            .push(json!({"type": "web_search_20250305", "name": "web_search"}));
        let (status, answer) = serve.post("/v1/messages", &[], &body);
        assert_eq!(status, 200, "{answer}");
        history.push(assistant_from_sse(answer.as_str().unwrap()));
        history.push(json!({"role": "user", "content": "Go on."}));
    }
    let requests = up.requests();
    assert_eq!(requests.len(), 2);
    for request in &requests {
        assert_eq!(request.body["messages"][1], agents, "{}", request.body);
    }
    assert_one_branch_with_the_system_message(&serve);
    let (_, metrics) = serve.get("/metrics");
    assert!(!metrics.contains("kind=\"system_message\""), "{metrics}");
    assert!(
        metrics.contains("rampart_serve_content_not_forwarded_total{kind=\"server_tool\"} 2"),
        "{metrics}"
    );
}

/// The one conversation holds, on one branch, the first prompt, the system message kept whole,
/// and the two answers with the prompt between them: the re-sent system message matched the
/// stored one.
fn assert_one_branch_with_the_system_message(serve: &Serve) {
    let keys = serve.keys();
    assert_eq!(keys.len(), 1, "{keys:?}");
    let session = serve.session(&keys[0]);
    let roles: Vec<String> = branch(&session).into_iter().map(|(role, _)| role).collect();
    assert_eq!(
        roles,
        ["user", "rampart.opaque", "assistant", "user", "assistant"]
    );
    let stored = session
        .tree()
        .entries()
        .iter()
        .filter(|e| e.body.message().is_some())
        .count();
    assert_eq!(stored, roles.len(), "no second branch");
}

/// An OpenAI upstream has no form for Claude Code's `role: "system"` message: it is left out of
/// each request, kept in the conversation, and counted in `/metrics` per request that left it
/// out.
#[test]
fn a_system_message_an_openai_upstream_cannot_take_is_counted() {
    let up = Loopback::start();
    up.push(openai_text_stream("First.", 10, 2));
    up.push(openai_text_stream("Second.", 10, 2));
    let serve = Serve::start(&openai_config(&up.url(), ""));
    let sid = "55555555-5555-4555-8555-555555555555";
    let agents = json!({"role": "system", "content": "Available agent types for the Agent tool: general-purpose"});
    let mut history = vec![claude_first_message("Fix it."), agents.clone()];
    for _ in 0..2 {
        let mut body = claude_code_body(sid, history.clone());
        body["stream"] = json!(false);
        let (status, answer) = serve.post("/v1/messages", &[], &body);
        assert_eq!(status, 200, "{answer}");
        history.push(json!({"role": "assistant", "content": answer["content"].clone()}));
        history.push(json!({"role": "user", "content": "Go on."}));
    }
    let requests = up.requests();
    assert_eq!(requests.len(), 2);
    for request in &requests {
        let text = request.body.to_string();
        assert!(!text.contains("Available agent types"), "{text}");
        assert!(!text.contains("rampart.opaque"), "{text}");
    }
    assert_one_branch_with_the_system_message(&serve);
    let (_, metrics) = serve.get("/metrics");
    assert!(
        metrics.contains("rampart_serve_content_not_forwarded_total{kind=\"system_message\"} 2"),
        "{metrics}"
    );
}

/// A chat client's message-level fields (a user's `name`) have no place in an Anthropic
/// upstream's messages: the request goes without them, and each message that carried them is
/// counted in `/metrics` instead of vanishing unseen; the session keeps them.
#[test]
fn chat_message_fields_an_anthropic_upstream_cannot_take_are_counted() {
    let up = Loopback::start();
    up.push(anthropic_text_stream("Hello, Alice.", 10, 2));
    let serve = Serve::start(&anthropic_config(&up.url()));
    let body = json!({"model": "claude-up", "messages": [
        {"role": "user", "content": "Hi, I am Alice.", "name": "alice"},
    ]});
    let (status, answer) = serve.post("/v1/chat/completions", &[], &body);
    assert_eq!(status, 200, "{answer}");
    let sent = up.requests()[0].body.to_string();
    assert!(!sent.contains("alice"), "{sent}");
    let (_, metrics) = serve.get("/metrics");
    assert!(
        metrics
            .contains("rampart_serve_content_not_forwarded_total{kind=\"chat_message_field\"} 1"),
        "{metrics}"
    );
    let keys = serve.keys();
    let raw = String::from_utf8(serve.file_bytes(&keys[0])).unwrap();
    assert!(raw.contains("\"name\":\"alice\""), "{raw}");
}

/// Claude Code 2.1 asks for a new session's title first, on the main model with the main
/// `max_tokens`: no tools, one user message, a JSON-schema answer (`output_config.format`). It
/// is a side request, so the real session that follows is the root conversation, not a child
/// `spawnedBy` the title call.
#[test]
fn claude_code_2_1_title_call_does_not_become_the_sessions_root() {
    let up = Loopback::start();
    up.push(anthropic_text_stream("{\"title\": \"Fix the bug\"}", 10, 6));
    up.push(anthropic_text_stream("Main answer.", 10, 2));
    let serve = Serve::start(&anthropic_config(&up.url()));
    let sid = "44444444-4444-4444-8444-444444444444";
    let mut title = claude_code_body(
        sid,
        vec![json!({"role": "user", "content": "<session>\nFix it.\n</session>"})],
    );
    title["max_tokens"] = json!(64000);
    title["tools"] = json!([]);
    title["thinking"] = json!({"type": "disabled"});
    title["output_config"] = json!({"format": {"type": "json_schema", "schema": {
        "type": "object", "properties": {"title": {"type": "string"}},
        "required": ["title"], "additionalProperties": false}}});
    let (status, answer) = serve.post("/v1/messages", &[], &title);
    assert_eq!(status, 200, "{answer}");
    let real = claude_code_body(sid, vec![claude_first_message("Fix it.")]);
    let (status, answer) = serve.post("/v1/messages", &[], &real);
    assert_eq!(status, 200, "{answer}");

    let key = format!("serve:claude-code:{sid}");
    assert_eq!(
        serve.keys(),
        std::slice::from_ref(&key),
        "one conversation, the real one"
    );
    let entry = serve.store().get(&key).unwrap().unwrap();
    assert!(entry.extra.get("spawnedBy").is_none(), "{:?}", entry.extra);
    let stored = branch(&serve.session(&key));
    assert!(
        !stored.iter().any(|(_, text)| text.contains("<session>")),
        "{stored:?}"
    );
    assert_eq!(stored[0].0, "user", "{stored:?}");
    assert!(stored[0].1.contains("Fix it."), "{stored:?}");
    let (_, metrics) = serve.get("/metrics");
    assert!(
        metrics.contains("rampart_serve_side_requests_total 1"),
        "{metrics}"
    );
}

#[test]
fn an_upstream_overflow_is_recovered_without_the_client_seeing_it() {
    let up = Loopback::start();
    let serve = Serve::start(
        &openai_config(&up.url(), "").replace("contextWindow = 128000", "contextWindow = 32000"),
    );
    let mut history = vec![json!({"role": "system", "content": "Be brief."})];
    // Five turns of about 1,500 tokens each: enough that a compaction has something to cut.
    for turn in 0..5 {
        up.push(openai_text_stream(&format!("Noted part {turn}."), 2000, 4));
        history.push(json!({"role": "user", "content": format!("Part {turn}: {}", "lorem ipsum dolor sit amet ".repeat(220))}));
        let (status, v) = serve.post(
            "/v1/chat/completions",
            &[],
            &json!({"model": "gpt-up", "messages": history}),
        );
        assert_eq!(status, 200, "{v}");
        history.push(v["choices"][0]["message"].clone());
    }
    // The model refuses the next prompt as too long, then answers the compacted one.
    up.push(openai_overflow_error(32_000, 40_000));
    up.push(openai_text_stream("All parts summarised.", 3000, 5));
    history.push(json!({"role": "user", "content": "Summarise all parts."}));
    let (status, v) = serve.post(
        "/v1/chat/completions",
        &[],
        &json!({"model": "gpt-up", "messages": history}),
    );
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        v["choices"][0]["message"]["content"],
        "All parts summarised."
    );
    assert_eq!(up.pending(), 0);
    let sent = up.requests();
    let retried = &sent[sent.len() - 1].body["messages"];
    let overflowed = &sent[sent.len() - 2].body["messages"];
    assert!(
        retried.to_string().len() < overflowed.to_string().len(),
        "the retry carried the compacted context"
    );
    let keys = serve.keys();
    assert_eq!(keys.len(), 1, "{keys:?}");
    let session = serve.session(&keys[0]);
    assert!(
        session
            .entries()
            .iter()
            .any(|e| e.body.entry_type() == "compaction"),
        "the compaction is recorded in the session"
    );
    let (_, metrics) = serve.get("/metrics");
    assert!(
        metrics.contains("rampart_serve_compactions_total 1"),
        "{metrics}"
    );
    // The next turn continues the same conversation.
    history.push(v["choices"][0]["message"].clone());
    history.push(json!({"role": "user", "content": "Thanks."}));
    up.push(openai_text_stream("Welcome.", 3000, 2));
    let (status, _) = serve.post(
        "/v1/chat/completions",
        &[],
        &json!({"model": "gpt-up", "messages": history}),
    );
    assert_eq!(status, 200);
    assert_eq!(serve.keys(), keys);
}

#[test]
fn errors_come_back_in_the_clients_own_wire_with_the_status_kept() {
    let up = Loopback::start();
    up.push(Reply::json(
        500,
        json!({"error": {"message": "upstream exploded", "type": "server_error"}}),
    ));
    let serve = Serve::start(&openai_config(&up.url(), ""));
    let (status, v) = serve.post(
        "/v1/chat/completions",
        &[("authorization", "Bearer sk-never-echoed")],
        &json!({"model": "gpt-up", "messages": [{"role": "user", "content": "hi"}]}),
    );
    assert_eq!(status, 500, "{v}");
    assert_eq!(v["error"]["type"], "api_error");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("upstream exploded"),
        "{v}"
    );
    assert!(!v.to_string().contains("sk-never-echoed"));
    // Bad JSON, in Anthropic's shape on the Anthropic endpoint.
    let response = Serve::client()
        .post(format!("{}/v1/messages", serve.base))
        .body("{not json")
        .send()
        .unwrap();
    assert_eq!(response.status().as_u16(), 400);
    let v: Value = response.json().unwrap();
    assert_eq!(v["type"], "error");
    assert_eq!(v["error"]["type"], "invalid_request_error");
    // The server is still up.
    assert_eq!(serve.get("/healthz").0, 200);
    let (status, models) = serve.get("/v1/models");
    assert_eq!(status, 200);
    assert!(models.contains("up/gpt-up"), "{models}");
}

/// A body nested far past what the parser reads (100,000 arrays deep; any client can send one
/// before any token is checked) is refused in the client's wire on every endpoint, also as the
/// new message of a conversation the server knows (the memo's path parses only that part),
/// and the server keeps serving: a parser without a depth limit would overflow the stack and
/// take every conversation down with it.
#[test]
fn a_body_nested_past_the_parsers_depth_is_refused_and_the_server_keeps_serving() {
    let up = Loopback::start();
    up.push(openai_text_stream("Hello.", 10, 2));
    up.push(openai_text_stream("Still here.", 12, 2));
    let serve = Serve::start(&openai_config(&up.url(), ""));
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let mut history = vec![json!({"role": "user", "content": "Hi there."})];
    let (status, first) = serve.post(
        "/v1/chat/completions",
        &[],
        &json!({"model": "gpt-up", "messages": history}),
    );
    assert_eq!(status, 200, "{first}");
    history.push(first["choices"][0]["message"].clone());
    let known = serde_json::to_string(&history).unwrap();
    let known = &known[1..known.len() - 1];
    let bodies = [
        (
            "/v1/chat/completions",
            format!(
                r#"{{"model":"gpt-up","messages":[{known},{{"role":"user","content":{deep}}}]}}"#
            ),
        ),
        (
            "/v1/chat/completions",
            format!(
                r#"{{"model":"gpt-up","messages":[{{"role":"user","content":"x","extra":{deep}}}]}}"#
            ),
        ),
        (
            "/v1/messages",
            format!(
                r#"{{"model":"gpt-up","max_tokens":10,"messages":[{{"role":"user","content":{deep}}}]}}"#
            ),
        ),
        (
            "/v1/responses",
            format!(r#"{{"model":"gpt-up","input":[{{"role":"user","content":{deep}}}]}}"#),
        ),
    ];
    for (path, body) in bodies {
        let response = Serve::client()
            .post(format!("{}{path}", serve.base))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .unwrap();
        assert_eq!(response.status().as_u16(), 400, "{path}");
        let v: Value = response.json().unwrap();
        let message = v["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("not JSON") && message.contains("recursion limit"),
            "{path}: {v}"
        );
        assert_eq!(serve.get("/healthz").0, 200, "after {path}");
    }
    // The conversation goes on where it was.
    history.push(json!({"role": "user", "content": "Are you there?"}));
    let (status, next) = serve.post(
        "/v1/chat/completions",
        &[],
        &json!({"model": "gpt-up", "messages": history}),
    );
    assert_eq!(status, 200, "{next}");
    assert_eq!(next["choices"][0]["message"]["content"], "Still here.");
    assert_eq!(
        up.request_count(),
        2,
        "no refused body reached the upstream"
    );
}

#[test]
fn an_auth_token_is_required_when_set_and_not_forwarded() {
    let up = Loopback::start();
    up.push(openai_text_stream("ok", 5, 1));
    let serve = Serve::start(&openai_config(
        &up.url(),
        "\n[serve]\nauthToken = \"let-me-in\"\n",
    ));
    let body = json!({"model": "gpt-up", "messages": [{"role": "user", "content": "hi"}]});
    let (status, v) = serve.post("/v1/chat/completions", &[], &body);
    assert_eq!(status, 401, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("serve.authToken")
    );
    let (status, _) = serve.post(
        "/v1/chat/completions",
        &[
            ("x-rampart-token", "let-me-in"),
            ("authorization", "Bearer sk-upstream"),
        ],
        &body,
    );
    assert_eq!(status, 200);
    assert_eq!(
        up.requests()[0].header("authorization"),
        Some("Bearer sk-upstream")
    );
    assert!(!up.requests()[0].raw_body.contains("let-me-in"));
}

/// Claude Code logged in with a Claude subscription sends an OAuth token as a bearer token and
/// the betas it needs in `anthropic-beta`; an API-key login sends `x-api-key`. Each reaches
/// Anthropic as it was sent, and neither is written to the session.
#[test]
fn claude_code_oauth_and_api_key_logins_reach_anthropic_as_they_were_sent() {
    let up = Loopback::start();
    up.push(anthropic_text_stream("first", 10, 2));
    up.push(anthropic_text_stream("second", 10, 2));
    let serve = Serve::start(&anthropic_config(&up.url()));
    let body = |text: &str| {
        json!({"model": "claude-up", "max_tokens": 64, "stream": true,
               "messages": [{"role": "user", "content": text}]})
    };
    let betas = "oauth-2025-04-20,interleaved-thinking-2025-05-14";
    let (status, _) = serve.post(
        "/v1/messages",
        &[
            ("authorization", "Bearer sk-ant-oat01-subscription-token"),
            ("anthropic-beta", betas),
            ("x-rampart-session", "oauth-login"),
            ("user-agent", "claude-cli/2.1.90 (external, cli)"),
        ],
        &body("with a subscription"),
    );
    assert_eq!(status, 200);
    let (status, _) = serve.post(
        "/v1/messages",
        &[
            ("x-api-key", "sk-ant-api03-key"),
            ("x-rampart-session", "key-login"),
        ],
        &body("with a key"),
    );
    assert_eq!(status, 200);
    let requests = up.requests();
    assert_eq!(
        requests[0].header("authorization"),
        Some("Bearer sk-ant-oat01-subscription-token")
    );
    assert_eq!(requests[0].header("x-api-key"), None);
    assert_eq!(requests[0].header("anthropic-beta"), Some(betas));
    // An Anthropic client's own headers reach an Anthropic upstream as they came; serve's
    // own (`x-rampart-*`) stay with serve.
    assert_eq!(
        requests[0].header("user-agent"),
        Some("claude-cli/2.1.90 (external, cli)")
    );
    assert_eq!(requests[0].header("x-rampart-session"), None);
    assert_eq!(requests[1].header("x-api-key"), Some("sk-ant-api03-key"));
    assert_eq!(requests[1].header("authorization"), None);
    assert_eq!(requests[1].header("anthropic-beta"), None);
    for entry in std::fs::read_dir(&serve.sessions).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            assert!(
                !text.contains("sk-ant-"),
                "a key was written to {}",
                path.display()
            );
        }
    }
}

#[test]
fn a_public_address_without_a_token_is_refused_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let config = common::write_config(dir.path(), "[serve]\nlisten = \"0.0.0.0:0\"\n");
    let out = Command::new(env!("CARGO_BIN_EXE_rampart"))
        .args(["--config", config.to_str().unwrap(), "--sessions-dir"])
        .arg(dir.path().join("s"))
        .arg("serve")
        .env_remove("RAMPART_CONFIG")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("not a loopback address") && err.contains("serve.authToken"),
        "{err}"
    );
}

#[test]
fn an_oversized_tool_result_is_capped_upstream_kept_whole_on_disk_and_still_matches() {
    use sha2::Digest;
    let up = Loopback::start();
    up.push(openai_tool_call_stream(
        "call_big",
        "read",
        r#"{"path":"big.log"}"#,
    ));
    up.push(openai_text_stream("The log is long.", 9000, 5));
    up.push(openai_text_stream("Nothing else.", 9000, 3));
    let config =
        openai_config(&up.url(), "").replace("contextWindow = 128000", "contextWindow = 32000");
    let serve = Serve::start(&config);
    let tools: Value = serde_json::from_str(READ_TOOL_OPENAI).unwrap();
    let big: String = (0..12_000).map(|i| format!("log line {i}\n")).collect();
    let mut history = vec![json!({"role": "user", "content": "Read big.log"})];
    let ask = |history: &Vec<Value>| {
        let (status, v) = serve.post(
            "/v1/chat/completions",
            &[],
            &json!({"model": "gpt-up", "messages": history, "tools": tools}),
        );
        assert_eq!(status, 200, "{v}");
        v["choices"][0]["message"].clone()
    };
    history.push(ask(&history));
    history.push(json!({"role": "tool", "tool_call_id": "call_big", "content": big}));
    history.push(ask(&history));
    history.push(json!({"role": "user", "content": "Anything else?"}));
    history.push(ask(&history));

    // Upstream never saw the whole result.
    for request in &up.requests()[1..] {
        let tool = request.body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["role"] == "tool")
            .unwrap();
        let sent = tool["content"].as_str().unwrap();
        assert!(
            sent.len() < big.len() / 2,
            "{} of {} chars went upstream",
            sent.len(),
            big.len()
        );
    }
    // The session holds the capped result once, and the original is in the blob store.
    let keys = serve.keys();
    assert_eq!(keys.len(), 1, "{keys:?}");
    let session = serve.session(&keys[0]);
    let results: Vec<String> = session
        .entries()
        .iter()
        .filter_map(|e| match e.body.message() {
            Some(AgentMessage::ToolResult(r)) => Some(r.content.joined_text()),
            _ => None,
        })
        .collect();
    assert_eq!(
        results.len(),
        1,
        "the re-sent full result matched the capped one"
    );
    assert!(results[0].len() < big.len());
    let hex: String = sha2::Sha256::digest(big.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let blob = serve.sessions.join("blobs").join(&hex[..2]).join(&hex);
    assert_eq!(std::fs::read_to_string(&blob).unwrap(), big);
    assert_eq!(
        session
            .entries()
            .iter()
            .filter(|e| e.body.message().is_some())
            .count(),
        6,
        "each message once, no branch"
    );
}

#[test]
fn a_full_queue_answers_429_with_retry_after() {
    let up = Loopback::start();
    up.push(openai_text_stream("slow", 5, 1).delayed(Duration::from_millis(1500)));
    up.push(openai_text_stream("later", 5, 1));
    let serve = Serve::start(&openai_config(
        &up.url(),
        "\n[serve]\nmaxConcurrent = 1\nmaxQueue = 0\n",
    ));
    let base = serve.base.clone();
    let slow = std::thread::spawn(move || {
        Serve::client()
            .post(format!("{base}/v1/chat/completions"))
            .json(&json!({"model": "gpt-up", "messages": [{"role": "user", "content": "first"}]}))
            .send()
            .unwrap()
            .status()
            .as_u16()
    });
    // Wait until the slow request reached the upstream.
    let started = std::time::Instant::now();
    while up.request_count() == 0 && started.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let response = Serve::client()
        .post(format!("{}/v1/messages", serve.base))
        .json(&json!({"model": "m", "max_tokens": 100, "messages": [{"role": "user", "content": "second"}]}))
        .send()
        .unwrap();
    assert_eq!(response.status().as_u16(), 429);
    assert_eq!(response.headers()["retry-after"], "1");
    let v: Value = response.json().unwrap();
    assert_eq!(v["error"]["type"], "overloaded_error");
    assert_eq!(slow.join().unwrap(), 200);
    // Once the first is answered there is room again.
    let (status, _) = serve.post(
        "/v1/chat/completions",
        &[],
        &json!({"model": "gpt-up", "messages": [{"role": "user", "content": "third"}]}),
    );
    assert_eq!(status, 200);
}

#[test]
fn sigterm_lets_the_request_in_flight_finish() {
    let up = Loopback::start();
    up.push(openai_text_stream("finished anyway", 5, 2).delayed(Duration::from_millis(1200)));
    let mut serve = Serve::start(&openai_config(&up.url(), ""));
    let base = serve.base.clone();
    let in_flight = std::thread::spawn(move || {
        let response = Serve::client()
            .post(format!("{base}/v1/chat/completions"))
            .json(&json!({"model": "gpt-up", "messages": [{"role": "user", "content": "hi"}]}))
            .send()
            .unwrap();
        (response.status().as_u16(), response.text().unwrap())
    });
    let started = std::time::Instant::now();
    while up.request_count() == 0 && started.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let term = Command::new("kill")
        .args(["-TERM", &serve.child.id().to_string()])
        .status()
        .unwrap();
    assert!(term.success());
    let (status, body) = in_flight.join().unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("finished anyway"), "{body}");
    let exit = serve.child.wait().unwrap();
    assert!(exit.success(), "{exit:?}");
    let keys = serve.keys();
    assert_eq!(branch(&serve.session(&keys[0])).len(), 2);
    // The turn's counters, batched, were written before the server exited.
    let entry = serve.store().get(&keys[0]).unwrap().unwrap();
    assert!(entry.total_tokens.is_some_and(|t| t > 0), "{entry:?}");
}

#[test]
fn concurrent_conversations_keep_their_own_messages() {
    concurrent_conversations(24, 6, 4);
}

/// The issue's load test: 100 conversations x 30 turns at once, loopback only. Ignored in the
/// main run (3,000 turns on a debug build); run it with
/// `cargo test -p rampart-host --test all serve_e2e::load -- --ignored`.
#[test]
#[ignore]
fn load_100_conversations_by_30_turns() {
    let started = std::time::Instant::now();
    concurrent_conversations(100, 30, 16);
    eprintln!("100 x 30 turns in {:?}", started.elapsed());
}

/// `clients` conversations of `turns` turns each, all at once through a server running
/// `concurrent` turns at a time: every conversation holds exactly its client's view.
fn concurrent_conversations(clients: usize, turns: usize, concurrent: usize) {
    let up = Loopback::start();
    for k in 0..clients * turns {
        up.push(openai_text_stream(&format!("reply number {k}"), 20, 3));
    }
    let serve = Serve::start(&openai_config(
        &up.url(),
        &format!("\n[serve]\nmaxConcurrent = {concurrent}\n"),
    ));
    let base = serve.base.clone();
    let views: Vec<(Option<String>, Vec<Value>)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..clients)
            .map(|c| {
                let base = base.clone();
                scope.spawn(move || {
                    // Half name a session, half are told apart by history alone, and every
                    // third client starts with the same first message as the others.
                    let id = (c % 2 == 0).then(|| format!("client-{c}"));
                    let first = if c % 3 == 0 {
                        "Shared opening line.".to_owned()
                    } else {
                        format!("Opening of client {c}.")
                    };
                    let mut history = vec![json!({"role": "user", "content": first})];
                    let client = Serve::client();
                    for turn in 0..turns {
                        let mut request = client
                            .post(format!("{base}/v1/chat/completions"))
                            .json(&json!({"model": "gpt-up", "messages": history}));
                        if let Some(id) = &id {
                            request = request.header("x-rampart-session", id);
                        }
                        let response = request.send().unwrap();
                        assert_eq!(response.status().as_u16(), 200);
                        let v: Value = response.json().unwrap();
                        history.push(v["choices"][0]["message"].clone());
                        history.push(
                            json!({"role": "user", "content": format!("client {c} turn {turn}")}),
                        );
                    }
                    history.pop();
                    (id, history)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(up.request_count(), clients * turns);
    let keys = serve.keys();
    assert_eq!(keys.len(), clients, "{keys:?}");
    let mut answers_seen = std::collections::BTreeSet::new();
    for (id, history) in &views {
        let expected: Vec<(String, String)> = history
            .iter()
            .map(|m| {
                let role = if m["role"] == "assistant" {
                    "assistant"
                } else {
                    "user"
                };
                (role.to_owned(), m["content"].as_str().unwrap().to_owned())
            })
            .collect();
        let stored = match id {
            Some(id) => branch(&serve.session(&format!("serve:rampart:{id}"))),
            None => keys
                .iter()
                .map(|k| branch(&serve.session(k)))
                .find(|b| *b == expected)
                .unwrap_or_else(|| panic!("no conversation holds {expected:?}")),
        };
        assert_eq!(stored, expected);
        for (role, text) in &expected {
            if role == "assistant" {
                assert!(answers_seen.insert(text.clone()), "{text} answered twice");
            }
        }
    }
    assert_eq!(answers_seen.len(), clients * turns);
    // No conversation holds a message twice or another's message.
    for key in &keys {
        let session = serve.session(key);
        let count = session
            .entries()
            .iter()
            .filter(|e| e.body.message().is_some())
            .count();
        assert_eq!(count, turns * 2, "{key}");
    }
}

#[test]
fn a_stream_is_passed_on_as_it_arrives() {
    use std::io::Read;
    let up = Loopback::start();
    // The model sends its first words, then thinks for a while before the rest.
    let gap = Duration::from_millis(400);
    up.push(openai_text_stream("First words, then the rest.", 10, 6).paced(gap));
    up.push(anthropic_like_openai_tool_stream());
    let serve = Serve::start(&openai_config(&up.url(), ""));
    let started = std::time::Instant::now();
    let mut response = Serve::client()
        .post(format!("{}/v1/chat/completions", serve.base))
        .json(&json!({"model": "gpt-up", "stream": true,
                      "messages": [{"role": "user", "content": "Say something."}]}))
        .send()
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let mut buf = [0u8; 4096];
    let n = response.read(&mut buf).unwrap();
    let first_byte = started.elapsed();
    let mut text = String::from_utf8_lossy(&buf[..n]).into_owned();
    response.read_to_string(&mut text).unwrap();
    let total = started.elapsed();
    // The upstream stream has 10 events, 9 gaps. The first bytes came long before its end.
    assert!(total >= gap * 6, "total {total:?}");
    assert!(
        first_byte < gap * 3,
        "first byte after {first_byte:?} of {total:?}"
    );
    let content = openai_sse_text(&text);
    assert_eq!(content, "First words, then the rest.");
    assert!(text.trim_end().ends_with("data: [DONE]"), "{text}");
    // What was streamed is what is stored, so the next request continues the conversation.
    let keys = serve.keys();
    assert_eq!(
        branch(&serve.session(&keys[0])),
        pairs(&[
            ("user", "Say something."),
            ("assistant", "First words, then the rest.")
        ])
    );
    let (status, v) = serve.post(
        "/v1/chat/completions",
        &[],
        &json!({"model": "gpt-up", "stream": true, "messages": [
            {"role": "user", "content": "Say something."},
            {"role": "assistant", "content": content},
            {"role": "user", "content": "Now call a tool."}
        ]}),
    );
    assert_eq!(status, 200);
    let frames = v.as_str().unwrap();
    assert!(frames.contains("\"id\":\"call_s1\""), "{frames}");
    assert_eq!(serve.keys(), keys);
    assert_eq!(branch(&serve.session(&keys[0])).len(), 4);
}

fn anthropic_like_openai_tool_stream() -> Reply {
    openai_tool_call_stream("call_s1", "read", r#"{"path":"x"}"#)
}

#[test]
fn an_anthropic_stream_with_a_tool_call_round_trips_through_claude_code_shapes() {
    let up = Loopback::start();
    up.push(
        anthropic_tool_use_stream("toolu_s", "Bash", r#"{"command":"pwd"}"#)
            .paced(Duration::from_millis(20)),
    );
    up.push(anthropic_text_stream("In /repo.", 20, 3));
    let serve = Serve::start(&anthropic_config(&up.url()));
    let sid = "44444444-4444-4444-8444-444444444444";
    let mut messages = vec![claude_first_message("Where am I?")];
    let (status, first) = serve.post(
        "/v1/messages",
        &[],
        &claude_code_body(sid, messages.clone()),
    );
    assert_eq!(status, 200);
    let call = assistant_from_sse(first.as_str().unwrap());
    assert_eq!(call["content"][0]["input"], json!({"command": "pwd"}));
    messages.push(call);
    messages.push(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_s", "content": "/repo"}]}));
    let (status, second) = serve.post("/v1/messages", &[], &claude_code_body(sid, messages));
    assert_eq!(status, 200);
    assert_eq!(
        assistant_from_sse(second.as_str().unwrap())["content"][0]["text"],
        "In /repo."
    );
    let key = format!("serve:claude-code:{sid}");
    let session = serve.session(&key);
    assert_eq!(branch(&session).len(), 4, "{:?}", branch(&session));
    assert_eq!(
        session
            .entries()
            .iter()
            .filter(|e| e.body.message().is_some())
            .count(),
        4
    );
}

#[test]
fn a_cut_upstream_stream_fails_cleanly_and_the_retry_continues_the_same_conversation() {
    let up = Loopback::start();
    up.push(Reply::truncated_sse(vec![
        r#"data: {"choices":[{"index":0,"delta":{"role":"assistant","content":"Half an ans"}}]}"#
            .to_owned(),
    ]));
    up.push(openai_text_stream("A whole answer.", 5, 3));
    let serve = Serve::start(&openai_config(&up.url(), ""));
    let body = json!({"model": "gpt-up", "messages": [{"role": "user", "content": "Tell me."}]});
    let (status, v) = serve.post("/v1/chat/completions", &[], &body);
    assert_eq!(status, 502, "{v}");
    assert_eq!(v["error"]["type"], "api_error");
    // The prompt is kept; the retry answers it, once.
    let (status, v) = serve.post("/v1/chat/completions", &[], &body);
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["choices"][0]["message"]["content"], "A whole answer.");
    let keys = serve.keys();
    assert_eq!(keys.len(), 1, "{keys:?}");
    let session = serve.session(&keys[0]);
    assert_eq!(
        branch(&session),
        pairs(&[("user", "Tell me."), ("assistant", "A whole answer.")])
    );
    assert_eq!(
        session
            .entries()
            .iter()
            .filter(|e| e.body.message().is_some())
            .count(),
        2
    );
}

#[test]
fn an_engine_that_panics_is_quarantined_and_the_server_keeps_answering() {
    let up = Loopback::start();
    up.push(openai_text_stream("Answered by the fallback.", 5, 3));
    up.push(openai_text_stream("Still answering.", 5, 3));
    let engine = common::fixture("fx-panic-assemble");
    let config = format!(
        "[plugins]\ncallTimeoutMs = 3000\n[plugins.slots]\ncontextEngine = \"fx-panic-assemble\"\n\
         [plugins.engines.fx-panic-assemble]\npath = \"{}\"\n{}",
        engine.display(),
        openai_config(&up.url(), "")
    );
    let serve = Serve::start(&config);
    let mut history = vec![json!({"role": "user", "content": "First."})];
    let (status, v) = serve.post(
        "/v1/chat/completions",
        &[],
        &json!({"model": "gpt-up", "messages": history}),
    );
    assert_eq!(status, 200, "{v}");
    history.push(v["choices"][0]["message"].clone());
    history.push(json!({"role": "user", "content": "Second."}));
    let (status, v) = serve.post(
        "/v1/chat/completions",
        &[],
        &json!({"model": "gpt-up", "messages": history}),
    );
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["choices"][0]["message"]["content"], "Still answering.");
    let keys = serve.keys();
    assert_eq!(branch(&serve.session(&keys[0])).len(), 4);
}

/// The Python with the official SDKs: `$RAMPART_SDK_PYTHON`, else the virtualenv `.ci/sdk-venv`
/// makes beside the build. `None` (with the reason printed) when there is none; with
/// `RAMPART_REQUIRE_SDK=1` that is a failure instead.
fn sdk_python() -> Option<PathBuf> {
    let python = std::env::var_os("RAMPART_SDK_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
                .parent()
                .unwrap()
                .join("sdk-venv/bin/python")
        });
    let ok = Command::new(&python)
        .args(["-c", "import openai, anthropic"])
        .output()
        .is_ok_and(|o| o.status.success());
    if ok {
        return Some(python);
    }
    let why = format!(
        "SKIPPED: the official openai/anthropic Python SDKs are not installed at {} \
         (run .ci/sdk-venv, or set RAMPART_SDK_PYTHON)",
        python.display()
    );
    if std::env::var("RAMPART_REQUIRE_SDK").is_ok_and(|v| v == "1") {
        panic!("{why}");
    }
    eprintln!("{why}");
    None
}

fn run_sdk(python: &PathBuf, mode: &str, base: &str) -> Value {
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sdk/serve_clients.py");
    let out = Command::new(python)
        .arg(script)
        .args([mode, base])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn the_official_openai_python_sdk_streaming_and_not() {
    let Some(python) = sdk_python() else { return };
    let up = Loopback::start();
    up.push(openai_text_stream("Hello from upstream.", 8, 4));
    up.push(openai_text_stream("Streaming works.", 20, 3));
    up.push(openai_tool_call_stream(
        "call_sdk",
        "read",
        r#"{"path":"a.txt"}"#,
    ));
    let serve = Serve::start(&openai_config(&up.url(), ""));
    let got = run_sdk(&python, "openai", &serve.base);
    assert_eq!(got["plain"], "Hello from upstream.");
    assert_eq!(got["plain_usage"], 4);
    assert_eq!(got["streamed"], "Streaming works.");
    assert_eq!(got["streamed_usage"], 3);
    assert_eq!(
        got["tool_calls"],
        json!([{"id": "call_sdk", "name": "read", "arguments": "{\"path\":\"a.txt\"}"}])
    );
    assert_eq!(
        up.requests()[0].header("authorization"),
        Some("Bearer sk-sdk-test")
    );
    let keys = serve.keys();
    assert_eq!(keys.len(), 2, "{keys:?}");
    let anon = keys.iter().find(|k| k.starts_with("serve:anon:")).unwrap();
    assert_eq!(branch(&serve.session(anon)).len(), 4);
}

/// The Codex CLI's wire (`/v1/responses`) through the official SDK's Responses client, against
/// a chat-completions upstream: a plain answer, a streamed tool call, its output sent back.
#[test]
fn the_official_openai_python_sdk_over_the_responses_api() {
    let Some(python) = sdk_python() else { return };
    let up = Loopback::start();
    up.push(openai_text_stream("Hello from upstream.", 8, 4));
    up.push(openai_tool_call_stream(
        "call_ls",
        "shell",
        r#"{"command":"ls"}"#,
    ));
    up.push(openai_text_stream("Two files.", 30, 2));
    let serve = Serve::start(&openai_config(&up.url(), ""));
    let got = run_sdk(&python, "responses", &serve.base);
    assert_eq!(got["plain"], "Hello from upstream.");
    assert_eq!(got["plain_usage"], 4);
    assert_eq!(got["plain_status"], "completed");
    assert_eq!(
        got["items"],
        json!([{"type": "function_call", "call_id": "call_ls", "name": "shell",
                "arguments": "{\"command\":\"ls\"}"}])
    );
    let events: Vec<&str> = got["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap())
        .collect();
    assert_eq!(events.first(), Some(&"response.created"));
    assert_eq!(events.last(), Some(&"response.completed"));
    assert!(
        events.contains(&"response.function_call_arguments.delta"),
        "{events:?}"
    );
    assert_eq!(got["after_tool"], "Two files.");
    // Upstream got chat completions: the instructions as the system message, the call and
    // its output as a tool call and a tool message.
    let last: Value = serde_json::from_str(&up.requests()[2].raw_body).unwrap();
    let roles: Vec<&str> = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "user", "assistant", "tool"]
    );
    assert_eq!(last["messages"][0]["content"], "Be brief.");
    assert_eq!(last["tools"][0]["function"]["name"], "shell");
    // One conversation (Codex's session id), holding what the client sent and was answered.
    assert_eq!(serve.keys(), ["serve:codex:codex-sdk"]);
    let stored = branch(&serve.session("serve:codex:codex-sdk"));
    assert_eq!(stored.len(), 6, "{stored:?}");
    assert_eq!(stored[5], ("assistant".to_owned(), "Two files.".to_owned()));
}

#[test]
fn the_official_anthropic_python_sdk_streaming_and_not() {
    let Some(python) = sdk_python() else { return };
    let up = Loopback::start();
    up.push(anthropic_text_stream("Hi from Claude upstream.", 8, 5));
    up.push(anthropic_text_stream("Streamed claude.", 20, 3));
    up.push(anthropic_tool_use_stream(
        "toolu_sdk",
        "Bash",
        r#"{"command":"pwd"}"#,
    ));
    let serve = Serve::start(&anthropic_config(&up.url()));
    let got = run_sdk(&python, "anthropic", &serve.base);
    assert_eq!(got["plain"], "Hi from Claude upstream.");
    assert_eq!(got["plain_stop"], "end_turn");
    assert_eq!(got["streamed"], "Streamed claude.");
    assert_eq!(got["streamed_stop"], "end_turn");
    assert_eq!(got["streamed_usage"], 3);
    assert_eq!(
        got["tool_use"],
        json!([{"id": "toolu_sdk", "name": "Bash", "input": {"command": "pwd"}}])
    );
    assert_eq!(got["tool_stop"], "tool_use");
    // This SDK sends its key as a bearer token; it reaches Anthropic the same way.
    assert_eq!(
        up.requests()[0].header("authorization"),
        Some("Bearer sk-ant-sdk-test")
    );
    let keys = serve.keys();
    assert_eq!(keys.len(), 2, "{keys:?}");
    assert!(
        keys.contains(&"serve:rampart:sdk-tools".to_owned()),
        "{keys:?}"
    );
}

#[test]
fn a_client_that_disconnects_mid_stream_leaves_the_partial_answer_marked_aborted() {
    use std::io::Read;
    let up = Loopback::start();
    let full = "This answer is long and arrives slowly, piece by piece, so the client can leave.";
    up.push(openai_text_stream(full, 10, 20).paced(Duration::from_millis(150)));
    up.push(openai_text_stream("A fresh answer.", 10, 3));
    let serve = Serve::start(&openai_config(&up.url(), ""));
    let body = json!({"model": "gpt-up", "stream": true,
                      "messages": [{"role": "user", "content": "Tell me slowly."}]});
    {
        let mut response = Serve::client()
            .post(format!("{}/v1/chat/completions", serve.base))
            .json(&body)
            .send()
            .unwrap();
        let mut seen = String::new();
        let mut buf = [0u8; 1024];
        while !seen.contains("\"content\":\"This ") {
            let n = response.read(&mut buf).unwrap();
            assert!(n > 0, "the stream ended early: {seen}");
            seen.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
        // The client goes away here.
    }
    let keys = {
        let started = std::time::Instant::now();
        loop {
            let keys = serve.keys();
            let done = keys.first().is_some_and(|k| {
                serve
                    .session(k)
                    .entries()
                    .iter()
                    .any(|e| matches!(e.body.message(), Some(AgentMessage::Assistant(_))))
            });
            if done {
                break keys;
            }
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "no partial answer was kept"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let session = serve.session(&keys[0]);
    let assistant = session
        .entries()
        .iter()
        .find_map(|e| match e.body.message() {
            Some(AgentMessage::Assistant(a)) => Some(a.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(assistant.stop_reason, rampart_message::StopReason::Aborted);
    let partial = describe(&AgentMessage::Assistant(assistant)).1;
    assert!(
        full.starts_with(&partial) && partial.len() < full.len() && !partial.is_empty(),
        "{partial:?}"
    );
    // The client asks again: the aborted answer is passed over, the new one follows it.
    let (status, again) = serve.post(
        "/v1/chat/completions",
        &[],
        &json!({"model": "gpt-up", "messages": [{"role": "user", "content": "Tell me slowly."}]}),
    );
    assert_eq!(status, 200, "{again}");
    assert_eq!(again["choices"][0]["message"]["content"], "A fresh answer.");
    assert_eq!(serve.keys(), keys);
    let session = serve.session(&keys[0]);
    let now = branch(&session);
    assert_eq!(now.len(), 3, "{now:?}");
    assert_eq!(now[1].1, partial);
    assert_eq!(
        now[2],
        ("assistant".to_owned(), "A fresh answer.".to_owned())
    );
    // The retry did not send the aborted answer upstream.
    let last = &up.requests()[1].body["messages"];
    assert_eq!(last.as_array().unwrap().len(), 1, "{last}");
}

#[test]
fn an_upstream_that_hangs_times_out_as_504_in_the_clients_wire() {
    let up = Loopback::start();
    up.push(Reply::hang(Duration::from_secs(5)));
    up.push(anthropic_text_stream("Back again.", 5, 2));
    let config = anthropic_config(&up.url()).replace("timeoutSeconds = 20", "timeoutSeconds = 1");
    let serve = Serve::start(&config);
    let body = json!({"model": "claude-up", "max_tokens": 100,
                      "messages": [{"role": "user", "content": "Are you there?"}]});
    let (status, v) = serve.post("/v1/messages", &[], &body);
    assert_eq!(status, 504, "{v}");
    assert_eq!(v["type"], "error");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("timeoutSeconds"),
        "{v}"
    );
    let (status, v) = serve.post("/v1/messages", &[], &body);
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["content"][0]["text"], "Back again.");
    let keys = serve.keys();
    assert_eq!(
        branch(&serve.session(&keys[0])),
        pairs(&[("user", "Are you there?"), ("assistant", "Back again.")])
    );
}

#[test]
fn a_subagent_runs_while_its_root_waits_for_the_model() {
    let up = Loopback::start();
    up.push(anthropic_text_stream("Root first.", 5, 2));
    let serve = Serve::start(&format!(
        "[session]\nwriteLockTimeoutMs = 500\n{}",
        anthropic_config(&up.url())
    ));
    let sid = "55555555-5555-4555-8555-555555555555";
    let root = vec![claude_first_message("Plan the work.")];
    assert_eq!(
        serve
            .post("/v1/messages", &[], &claude_code_body(sid, root.clone()))
            .0,
        200
    );
    // The root's next turn is slow; a subagent of the same session starts meanwhile.
    // Long enough that a loaded machine still answers the subagent first.
    up.push(anthropic_text_stream("Root second.", 5, 2).delayed(Duration::from_millis(8000)));
    up.push(anthropic_text_stream("Subagent done.", 5, 2));
    let base = serve.base.clone();
    let mut root_next = root.clone();
    root_next
        .push(json!({"role": "assistant", "content": [{"type": "text", "text": "Root first."}]}));
    root_next.push(json!({"role": "user", "content": "Go."}));
    let root_body = claude_code_body(sid, root_next);
    // The answer is read to its end, as a client does: the turn is stored when the stream
    // ends, not when its status line arrives.
    let slow = std::thread::spawn(move || {
        let response = Serve::client()
            .post(format!("{base}/v1/messages"))
            .json(&root_body)
            .send()
            .unwrap();
        let status = response.status().as_u16();
        let _ = response.text();
        status
    });
    let started = std::time::Instant::now();
    while up.request_count() < 2 && started.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let sub = serve.post(
        "/v1/messages",
        &[],
        &claude_code_body(
            sid,
            vec![json!({"role": "user", "content": "Subagent: list the modules."})],
        ),
    );
    assert_eq!(sub.0, 200, "{}", sub.1);
    assert!(
        !slow.is_finished(),
        "the subagent was answered while the root still waited"
    );
    assert_eq!(slow.join().unwrap(), 200);
    let root_key = format!("serve:claude-code:{sid}");
    assert_eq!(
        serve.keys(),
        [root_key.clone(), format!("{root_key}:child:1")]
    );
    assert_eq!(branch(&serve.session(&root_key)).len(), 4);
}

/// A `ServerState` served in this process on a free loopback port, stopped when dropped: a
/// replica of the proxy, for the scale-out tests.
struct Replica {
    base: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Replica {
    fn start(config: &str, store: std::sync::Arc<dyn SharedStore>) -> Self {
        Self::start_with(config, store, EventSink::tracing_only())
    }

    /// [`Replica::start`] publishing its events to `events` (the test keeps a clone).
    fn start_with(config: &str, store: std::sync::Arc<dyn SharedStore>, events: EventSink) -> Self {
        let config =
            rampart_host::config::parse(config, std::path::Path::new("plugins.toml")).unwrap();
        let state = std::sync::Arc::new(ServerState::new(config, store, events).unwrap());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (bound, address) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                bound.send(listener.local_addr().unwrap()).unwrap();
                axum::serve(listener, router(std::sync::Arc::clone(&state)))
                    .with_graceful_shutdown(async {
                        let _ = stopped.await;
                    })
                    .await
                    .unwrap();
                state.shutdown();
            });
        });
        let addr = address.recv().unwrap();
        Replica {
            base: format!("http://{addr}"),
            stop: Some(stop),
            thread: Some(thread),
        }
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// `clients` conversations of `turns` turns at once, each turn sent to the next of `bases` in
/// turn (a round-robin load balancer); what each client holds at the end.
fn round_robin(
    bases: &[String],
    clients: usize,
    turns: usize,
) -> Vec<(Option<String>, Vec<Value>)> {
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..clients)
            .map(|c| {
                scope.spawn(move || {
                    let id = (c % 2 == 0).then(|| format!("replicated-{c}"));
                    let mut history =
                        vec![json!({"role": "user", "content": format!("Start of {c}.")})];
                    for turn in 0..turns {
                        let base = &bases[(turn + c) % bases.len()];
                        let mut request = Serve::client()
                            .post(format!("{base}/v1/chat/completions"))
                            .json(&json!({"model": "gpt-up", "messages": history}));
                        if let Some(id) = &id {
                            request = request.header("x-rampart-session", id);
                        }
                        let response = request.send().unwrap();
                        assert_eq!(response.status().as_u16(), 200);
                        let v: Value = response.json().unwrap();
                        history.push(v["choices"][0]["message"].clone());
                        history
                            .push(json!({"role": "user", "content": format!("{c}: turn {turn}")}));
                    }
                    history.pop();
                    (id, history)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// Every client's view is one stored conversation's branch, with each message stored once.
fn assert_views_stored(
    views: &[(Option<String>, Vec<Value>)],
    keys: &[String],
    turns: usize,
    stored: impl Fn(&str) -> (usize, Vec<(String, String)>),
) {
    assert_eq!(
        keys.len(),
        views.len(),
        "one conversation per client: {keys:?}"
    );
    for key in keys {
        assert_eq!(
            stored(key).0,
            turns * 2,
            "{key} holds every message exactly once"
        );
    }
    for (id, history) in views {
        let expected: Vec<(String, String)> = history
            .iter()
            .map(|m| {
                let role = if m["role"] == "assistant" {
                    "assistant"
                } else {
                    "user"
                };
                (role.to_owned(), m["content"].as_str().unwrap().to_owned())
            })
            .collect();
        let found = match id {
            Some(id) => stored(&format!("serve:rampart:{id}")).1,
            None => keys
                .iter()
                .map(|k| stored(k).1)
                .find(|b| *b == expected)
                .unwrap_or_else(|| panic!("no conversation holds {expected:?}")),
        };
        assert_eq!(found, expected);
    }
}

/// A server keeps no copy of the events it publishes: nothing in serve reads them back, and
/// each turn's events kept forever made its memory grow by about 2 KB a request (250 MB after
/// the benchmark's few tens of thousands of requests). Events still reach the sink's tap (the
/// live page) and tracing.
#[test]
fn serve_keeps_no_copy_of_the_events_it_publishes() {
    let turns = 5;
    let up = Loopback::start();
    for k in 0..turns {
        up.push(openai_text_stream(&format!("answer {k}"), 20, 3));
    }
    let config = openai_config(&up.url(), "");
    let shared: std::sync::Arc<dyn SharedStore> = std::sync::Arc::new(MemoryStore::new(None));
    let sink = EventSink::tracing_only();
    let tapped = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = std::sync::Arc::clone(&tapped);
    assert!(sink.set_tap(std::sync::Arc::new(
        move |_: &str, _: &rampart_engine_api::host::EngineEvent| {
            seen.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    )));
    let replica = Replica::start_with(&config, shared, sink.clone());
    let views = round_robin(std::slice::from_ref(&replica.base), 1, turns);
    assert_eq!(views.len(), 1);
    assert_eq!(up.request_count(), turns);
    assert!(
        tapped.load(std::sync::atomic::Ordering::Relaxed) >= 3 * turns,
        "the events were published"
    );
    let kept = sink.drain();
    assert!(kept.is_empty(), "serve kept {} events", kept.len());
}

/// Two replicas behind a (pretend) load balancer share one store and nothing else: a
/// conversation whose turns land on either keeps one history, written once, whoever served
/// each turn. The store here keeps everything in memory, so nothing can pass between the
/// replicas through files behind the trait's back.
#[test]
fn two_replicas_sharing_one_store_serve_the_same_conversations() {
    let (clients, turns) = (4, 6);
    let up = Loopback::start();
    for k in 0..turns * clients {
        up.push(openai_text_stream(&format!("answer {k}"), 20, 3));
    }
    let config = openai_config(&up.url(), "");
    let store = MemoryStore::new(None);
    let shared: std::sync::Arc<dyn SharedStore> = std::sync::Arc::new(store.clone());
    let replicas = [
        Replica::start(&config, std::sync::Arc::clone(&shared)),
        Replica::start(&config, std::sync::Arc::clone(&shared)),
    ];
    let bases: Vec<String> = replicas.iter().map(|r| r.base.clone()).collect();
    let views = round_robin(&bases, clients, turns);
    assert_eq!(up.request_count(), turns * clients);
    let keys: Vec<String> = shared
        .family("serve:", None)
        .unwrap()
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert_views_stored(&views, &keys, turns, |key| {
        let bytes = store.session_bytes(key).unwrap();
        let loaded = rampart_sessions::parse_bytes(&bytes, &Default::default()).unwrap();
        assert!(loaded.report.is_clean(), "{key}: {:?}", loaded.report);
        let messages = loaded
            .tree
            .entries()
            .iter()
            .filter(|e| e.body.message().is_some())
            .count();
        let context = rampart_sessions::build_session_context(
            &loaded.tree,
            rampart_sessions::LeafSelector::Current,
        );
        (
            messages,
            context.messages.iter().map(|m| describe(m)).collect(),
        )
    });
}

/// The same with two `rampart serve` processes on one sessions directory: the file store's
/// registry lock and session locks keep them apart across processes.
#[test]
fn two_serve_processes_on_one_sessions_directory_serve_the_same_conversations() {
    let (clients, turns) = (4, 6);
    let up = Loopback::start();
    for k in 0..turns * clients {
        up.push(openai_text_stream(&format!("answer {k}"), 20, 3));
    }
    let config = openai_config(&up.url(), "");
    let dir = tempfile::tempdir().unwrap();
    let servers = [
        Serve::start_in(&config, dir.path()),
        Serve::start_in(&config, dir.path()),
    ];
    let bases: Vec<String> = servers.iter().map(|s| s.base.clone()).collect();
    let views = round_robin(&bases, clients, turns);
    assert_eq!(up.request_count(), turns * clients);
    let keys = servers[0].keys();
    assert_views_stored(&views, &keys, turns, |key| {
        let session = servers[1].session(key);
        let messages = session
            .entries()
            .iter()
            .filter(|e| e.body.message().is_some())
            .count();
        (messages, branch(&session))
    });
}

/// A client that opts in (`x-rampart-memory: on`) gets the memory tools answered by the
/// server: the model searches memory, the client sees only the answer (streamed), and its next
/// request, which never saw the search, still continues the same conversation, with the
/// retrieved passage kept in the model's context. A client that does not opt in is offered no
/// memory tools.
#[test]
fn memory_tools_are_answered_by_the_server_for_a_client_that_opts_in() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("workspace");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(
        ws.join("MEMORY.md"),
        "# Memory\n\n- The staging database is called harbor-stage-db.\n",
    )
    .unwrap();
    let up = Loopback::start();
    up.push(openai_text_stream("No memory here.", 10, 3));
    up.push(openai_tool_call_stream(
        "call_m1",
        "memory_search",
        r#"{"query":"staging database"}"#,
    ));
    up.push(openai_text_stream("It is harbor-stage-db.", 30, 5));
    up.push(openai_text_stream("You are welcome.", 40, 4));
    let serve = Serve::start_in(&openai_config(&up.url(), ""), dir.path());

    // Not opted in: no memory tools upstream.
    let (status, _) = serve.post(
        "/v1/chat/completions",
        &[("x-rampart-session", "plain")],
        &json!({"model": "gpt-up", "messages": [{"role": "user", "content": "hi"}]}),
    );
    assert_eq!(status, 200);
    let first: Value = serde_json::from_str(&up.requests()[0].raw_body).unwrap();
    assert!(first.get("tools").is_none(), "{first}");

    let headers = [("x-rampart-session", "mem"), ("x-rampart-memory", "on")];
    let question = json!({"role": "user", "content": "What is the staging database called?"});
    let (status, body) = serve.post(
        "/v1/chat/completions",
        &headers,
        &json!({"model": "gpt-up", "stream": true, "messages": [question]}),
    );
    assert_eq!(status, 200);
    let stream = body.as_str().unwrap();
    assert_eq!(openai_sse_text(stream), "It is harbor-stage-db.");
    assert!(
        !stream.contains("memory_search"),
        "the search stays in the server: {stream}"
    );
    let second: Value = serde_json::from_str(&up.requests()[2].raw_body).unwrap();
    let result = second["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(result["role"], "tool");
    assert!(
        result["content"]
            .as_str()
            .unwrap()
            .contains("harbor-stage-db"),
        "{result}"
    );

    // The client's next request carries only what it saw.
    let (status, _) = serve.post(
        "/v1/chat/completions",
        &headers,
        &json!({"model": "gpt-up", "messages": [
            question,
            {"role": "assistant", "content": "It is harbor-stage-db."},
            {"role": "user", "content": "Thanks."}
        ]}),
    );
    assert_eq!(status, 200);
    assert_eq!(
        serve.keys().iter().filter(|k| k.contains(":mem")).count(),
        1
    );
    let third: Value = serde_json::from_str(&up.requests()[3].raw_body).unwrap();
    let roles: Vec<&str> = third["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        ["user", "assistant", "tool", "assistant", "user"],
        "one branch, the retrieved passage still in context"
    );
}

/// `anthropic_config` with a 40,000-token window: Claude Code's `max_tokens` of 32,000 takes
/// more than half of it.
fn small_window_config(url: &str) -> String {
    anthropic_config(url).replace("contextWindow = 200000", "contextWindow = 40000")
}

/// A Claude Code request whose system prompt is about `words` tokens.
fn claude_code_body_with_system(words: usize) -> Value {
    let mut body = claude_code_body(
        "0b1c2d3e-4f50-4617-8829-3a4b5c6d7e8f",
        vec![claude_first_message("Fix the bug.")],
    );
    body["system"][0]["text"] = json!("alpha beta gamma delta ".repeat(words / 4));
    body
}

fn post_with_headers(serve: &Serve, body: &Value) -> (u16, reqwest::header::HeaderMap, String) {
    let response = Serve::client()
        .post(format!("{}/v1/messages", serve.base))
        .header("x-api-key", "sk-ant-client")
        .header("anthropic-version", "2023-06-01")
        .json(body)
        .send()
        .unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    (status, headers, response.text().unwrap())
}

#[test]
fn claude_codes_max_tokens_is_fitted_to_a_40k_window_and_the_client_told() {
    let up = Loopback::start();
    up.push(anthropic_text_stream("Fixed.", 10_000, 3));
    let serve = Serve::start(&small_window_config(&up.url()));
    // A first request of some 10,000 tokens: with 32,000 reserved for the answer it was
    // refused with OpenClaw's "/reset" advice before anything was sent.
    // With thinking on, as Claude Code sends it: a budget one below its bound.
    let mut body = claude_code_body_with_system(10_000);
    body["thinking"] = json!({"type": "enabled", "budget_tokens": 31_999});
    let (status, headers, text) = post_with_headers(&serve, &body);
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("\"text\":\"Fixed\""), "{text}");
    let sent = up.requests();
    assert_eq!(sent.len(), 1);
    let granted = sent[0].body["max_tokens"].as_u64().unwrap();
    assert!(
        (4_096..32_000).contains(&granted),
        "upstream was asked for {granted} answer tokens"
    );
    // Anthropic refuses a thinking budget not below max_tokens: it is lowered with the bound.
    assert_eq!(
        sent[0].body["thinking"],
        json!({"type": "enabled", "budget_tokens": granted - 1})
    );
    let header = headers
        .get("x-rampart-max-tokens")
        .expect("the lowered bound is announced")
        .to_str()
        .unwrap();
    assert_eq!(header, format!("{granted}; requested=32000"));
}

/// An Anthropic client in front of an OpenAI upstream: its fields with no chat form are
/// counted per field in `/metrics`, under their names when a wire defines them and as `other`
/// otherwise, so a client sending hundreds of made-up fields cannot grow the label set.
#[test]
fn fields_with_no_upstream_form_are_counted_by_field_with_bounded_labels() {
    let up = Loopback::start();
    up.push(openai_text_stream("Hi.", 5, 1));
    let serve = Serve::start(&openai_config(&up.url(), ""));
    let mut body = json!({"model": "gpt-up", "max_tokens": 100,
        "context_management": {"edits": []},
        "messages": [{"role": "user", "content": "hello"}]});
    for i in 0..300 {
        body[format!("made_up_field_{i}")] = json!(i);
    }
    let (status, answer) = serve.post("/v1/messages", &[], &body);
    assert_eq!(status, 200, "{answer}");
    let sent = &up.requests()[0].body;
    assert!(sent.get("context_management").is_none() && sent.get("made_up_field_1").is_none());
    let (_, metrics) = serve.get("/metrics");
    let line = |field: &str| {
        format!(
            "rampart_serve_fields_not_forwarded_total{{field=\"{field}\",client_wire=\"anthropic\",upstream_wire=\"chat\"}}"
        )
    };
    assert!(
        metrics.contains(&format!("{} 1\n", line("context_management"))),
        "{metrics}"
    );
    assert!(
        metrics.contains(&format!("{} 300\n", line("other"))),
        "{metrics}"
    );
    assert!(!metrics.contains("made_up_field"), "{metrics}");
}

/// Claude Code's title call (a side request) asks 64,000 answer tokens of a 40,000-token model:
/// it is fitted like a turn (the bound lowered to what fits beside its small prompt, the
/// thinking budget below it) and the client is told; before, the upstream got 64,000 and
/// would refuse it.
#[test]
fn a_side_requests_max_tokens_is_fitted_to_the_window_too() {
    let up = Loopback::start();
    up.push(anthropic_text_stream("{\"title\": \"Fix\"}", 10, 4));
    let serve = Serve::start(&small_window_config(&up.url()));
    let mut title = claude_code_body(
        "55555555-5555-4555-8555-555555555555",
        vec![json!({"role": "user", "content": "<session>\nFix it.\n</session>"})],
    );
    title["max_tokens"] = json!(64000);
    title["tools"] = json!([]);
    title["thinking"] = json!({"type": "enabled", "budget_tokens": 63_999});
    title["output_config"] = json!({"format": {"type": "json_schema", "schema": {
        "type": "object", "properties": {"title": {"type": "string"}}}}});
    let (status, headers, text) = post_with_headers(&serve, &title);
    assert_eq!(status, 200, "{text}");
    let sent = up.requests();
    assert_eq!(sent.len(), 1);
    let granted = sent[0].body["max_tokens"].as_u64().unwrap();
    assert!(
        (4_096..40_000).contains(&granted),
        "upstream was asked for {granted} answer tokens"
    );
    assert_eq!(
        sent[0].body["thinking"],
        json!({"type": "enabled", "budget_tokens": granted - 1})
    );
    assert_eq!(
        headers
            .get("x-rampart-max-tokens")
            .unwrap()
            .to_str()
            .unwrap(),
        format!("{granted}; requested=64000")
    );
    assert!(
        serve.keys().is_empty(),
        "a side request touches no conversation"
    );
}

#[test]
fn a_prompt_that_leaves_no_room_for_the_floor_is_refused_in_the_clients_wire_with_proxy_words() {
    let up = Loopback::start();
    let serve = Serve::start(&small_window_config(&up.url()));
    // A system prompt of about 38,000 tokens: not even the 4,096-token floor fits beside it,
    // and compaction cannot shorten a system prompt.
    let (status, headers, text) = post_with_headers(&serve, &claude_code_body_with_system(38_000));
    assert_eq!(status, 400, "{text}");
    assert!(headers.get("x-rampart-max-tokens").is_none());
    let body: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(body["type"], "error", "{body}");
    assert_eq!(body["error"]["type"], "invalid_request_error", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    for needle in [
        "window is 40000 tokens",
        "asked for 32000 answer tokens",
        "Lower max_tokens",
        "larger window",
        "serve.minAnswerTokens",
    ] {
        assert!(
            message.contains(needle),
            "{needle:?} missing from {message}"
        );
    }
    assert!(!message.contains("/reset"), "{message}");
    assert!(up.requests().is_empty(), "nothing is sent upstream");
}

#[test]
fn an_openai_client_gets_the_fitted_bound_in_a_json_answer_and_the_refusal_as_an_error_object() {
    let up = Loopback::start();
    up.push(openai_text_stream("Fixed.", 10_000, 3));
    let config =
        openai_config(&up.url(), "").replace("contextWindow = 128000", "contextWindow = 40000");
    let serve = Serve::start(&config);
    let body = |words: usize, user: &str| {
        json!({"model": "gpt-up", "max_tokens": 32000, "messages": [
            {"role": "system", "content": "alpha beta gamma delta ".repeat(words / 4)},
            {"role": "user", "content": user}
        ]})
    };
    let post = |body: &Value| {
        let response = Serve::client()
            .post(format!("{}/v1/chat/completions", serve.base))
            .json(body)
            .send()
            .unwrap();
        let status = response.status().as_u16();
        let header = response
            .headers()
            .get("x-rampart-max-tokens")
            .map(|v| v.to_str().unwrap().to_owned());
        (status, header, response.json::<Value>().unwrap())
    };
    let (status, header, answer) = post(&body(10_000, "Fix the bug."));
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["choices"][0]["message"]["content"], "Fixed.");
    let granted = up.requests()[0].body["max_tokens"].as_u64().unwrap();
    assert!((4_096..32_000).contains(&granted), "{granted}");
    assert_eq!(header, Some(format!("{granted}; requested=32000")));

    let (status, header, error) = post(&body(38_000, "Another task."));
    assert_eq!(status, 400, "{error}");
    assert_eq!(header, None);
    assert_eq!(error["error"]["type"], "invalid_request_error", "{error}");
    let message = error["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("window is 40000 tokens")
            && message.contains("asked for 32000 answer tokens")
            && !message.contains("/reset"),
        "{message}"
    );
    assert_eq!(up.requests().len(), 1, "the refused request was not sent");
}

#[test]
fn a_model_whose_window_is_too_small_is_refused_with_advice_for_a_proxys_client() {
    let up = Loopback::start();
    let config =
        anthropic_config(&up.url()).replace("contextWindow = 200000", "contextWindow = 8000");
    let serve = Serve::start(&config);
    let (status, _, text) = post_with_headers(&serve, &claude_code_body_with_system(100));
    assert_eq!(status, 400, "{text}");
    let body: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(body["error"]["type"], "invalid_request_error", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("rampart serve: Model context window too small (8000 tokens).")
            && message.contains("up/claude-up")
            && message.contains("`contextWindow`"),
        "{message}"
    );
    assert!(up.requests().is_empty());
}

/// The engine's compaction summaries for a conversation go upstream with the key that
/// conversation's client presented (`serve.engineCredentials = "client"`, the default), not
/// keyless (which the provider refused with 401, and the compaction fell back to an extract);
/// with `"provider"` they go with the provider's own key only, never the client's.
#[test]
fn the_engines_summaries_go_with_the_clients_key_unless_configured_otherwise() {
    for mode in ["client", "provider"] {
        let up = Loopback::start();
        let serve = Serve::start(&format!(
            "[serve]\nengineCredentials = \"{mode}\"\n{}",
            openai_config(&up.url(), "")
                .replace("contextWindow = 128000", "contextWindow = 32000")
                .replace("model = \"sim/default\"", "model = \"up/gpt-up\"")
        ));
        let key = [("authorization", "Bearer sk-client-7")];
        let mut history = vec![json!({"role": "system", "content": "Be brief."})];
        for turn in 0..5 {
            up.push(openai_text_stream(&format!("Noted part {turn}."), 2000, 4));
            history.push(json!({"role": "user", "content": format!("Part {turn}: {}", "lorem ipsum dolor sit amet ".repeat(220))}));
            let (status, v) = serve.post(
                "/v1/chat/completions",
                &key,
                &json!({"model": "gpt-up", "messages": history}),
            );
            assert_eq!(status, 200, "{v}");
            history.push(v["choices"][0]["message"].clone());
        }
        let before = up.requests().len();
        up.push(openai_overflow_error(32_000, 40_000));
        for _ in 0..4 {
            up.push(openai_text_stream(
                "SUMMARY-FROM-UPSTREAM: five parts noted.",
                3000,
                9,
            ));
        }
        history.push(json!({"role": "user", "content": "Summarise all parts."}));
        let (status, v) = serve.post(
            "/v1/chat/completions",
            &key,
            &json!({"model": "gpt-up", "messages": history}),
        );
        assert_eq!(status, 200, "{mode}: {v}");
        let sent = up.requests();
        let summaries: Vec<_> = sent[before..]
            .iter()
            .filter(|r| r.body.to_string().contains("Part 0: lorem"))
            .filter(|r| !r.body.to_string().contains("Summarise all parts."))
            .collect();
        assert!(!summaries.is_empty(), "{mode}: no summary request upstream");
        let authorization = |r: &crate::common::loopback::Recorded| {
            r.headers
                .iter()
                .find(|(n, _)| n == "authorization")
                .map(|(_, v)| v.clone())
        };
        for summary in &summaries {
            match mode {
                "client" => assert_eq!(
                    authorization(summary).as_deref(),
                    Some("Bearer sk-client-7"),
                    "the summary went with the client's key"
                ),
                _ => assert_eq!(authorization(summary), None, "never the client's key"),
            }
        }
        let keys = serve.keys();
        let session = serve.session(&keys[0]);
        let compaction = session
            .entries()
            .iter()
            .find_map(|e| match &e.body {
                rampart_sessions::entry::EntryBody::Compaction(c) => Some(c.summary.clone()),
                _ => None,
            })
            .expect("a compaction");
        assert!(
            compaction.contains("SUMMARY-FROM-UPSTREAM"),
            "{mode}: the model's summary, not an extract: {compaction}"
        );
    }
}
