use axum::http::{HeaderMap, HeaderName, HeaderValue};
use serde_json::json;

use super::*;

fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        map.insert(
            HeaderName::from_bytes(name.as_bytes()).unwrap(),
            HeaderValue::from_str(value).unwrap(),
        );
    }
    map
}

/// A Claude Code main-conversation request body, shaped like the recorded sessions in
/// `shared/data/sessions/claude-code-log` (CLAUDE.md in a system reminder of the first user
/// message, tools declared, a sonnet/opus model).
fn claude_code_body(user_id: &str) -> Value {
    json!({
        "model": "claude-opus-4-7",
        "max_tokens": 32000,
        "stream": true,
        "system": [{"type": "text", "text": "You are Claude Code, Anthropic's official CLI for Claude."}],
        "messages": [{"role": "user", "content": [
            {"type": "text", "text": "<system-reminder>\nContents of /repo/CLAUDE.md …\n</system-reminder>"},
            {"type": "text", "text": "OK, we're going to make a little experiment here."}
        ]}],
        "tools": [{"name": "Bash", "description": "Run a command", "input_schema": {"type": "object"}}],
        "metadata": {"user_id": user_id}
    })
}

const LEGACY: &str = "user_5f0b2c9d1e_account_9a3c8e21-7b44-4b1e-9d2f-0c6a1d2e3f40_session_ef958aa1-0e93-49f0-bb71-150f63befcd1";

#[test]
fn the_explicit_header_wins_over_everything() {
    let h = headers(&[
        ("x-rampart-session", "mine"),
        ("x-claude-code-session-id", "cc"),
        ("session-id", "codex"),
    ]);
    let id = client_session(&h, &claude_code_body(LEGACY)).unwrap();
    assert_eq!(id, ClientSession::Explicit("mine".into()));
    assert_eq!(id.root_key(), "serve:rampart:mine");
}

#[test]
fn claude_code_header_comes_before_metadata() {
    let h = headers(&[(
        "X-Claude-Code-Session-Id",
        "11111111-2222-3333-4444-555555555555",
    )]);
    let id = client_session(&h, &claude_code_body(LEGACY)).unwrap();
    assert_eq!(
        id,
        ClientSession::ClaudeCode {
            session: "11111111-2222-3333-4444-555555555555".into(),
            source: ClaudeCodeSource::Header
        }
    );
}

#[test]
fn claude_code_legacy_user_id_gives_the_session() {
    let id = client_session(&HeaderMap::new(), &claude_code_body(LEGACY)).unwrap();
    assert_eq!(
        id,
        ClientSession::ClaudeCode {
            session: "ef958aa1-0e93-49f0-bb71-150f63befcd1".into(),
            source: ClaudeCodeSource::LegacyUserId
        }
    );
    assert_eq!(
        id.root_key(),
        "serve:claude-code:ef958aa1-0e93-49f0-bb71-150f63befcd1"
    );
}

#[test]
fn claude_code_json_user_id_gives_the_session() {
    let user_id = json!({
        "device_id": "d41d8cd98f00b204e9800998ecf8427e",
        "account_uuid": "9a3c8e21-7b44-4b1e-9d2f-0c6a1d2e3f40",
        "session_id": "29ccd257-68b1-427f-ae5f-6524b7cb6f20"
    })
    .to_string();
    let id = client_session(&HeaderMap::new(), &claude_code_body(&user_id)).unwrap();
    assert_eq!(
        id,
        ClientSession::ClaudeCode {
            session: "29ccd257-68b1-427f-ae5f-6524b7cb6f20".into(),
            source: ClaudeCodeSource::JsonUserId
        }
    );
}

#[test]
fn a_user_id_without_a_session_names_none() {
    assert_eq!(claude_code_user_id_session("user_abc_account_def"), None);
    assert_eq!(claude_code_user_id_session("{\"device_id\": \"x\"}"), None);
    assert_eq!(claude_code_user_id_session("{not json"), None);
    assert_eq!(
        client_session(&HeaderMap::new(), &claude_code_body("someone")),
        None
    );
}

#[test]
fn codex_session_and_thread_headers() {
    let body = json!({"model": "gpt-5-codex", "messages": [], "prompt_cache_key": "ignored"});
    let h = headers(&[("session-id", "0199a1b2-c3d4"), ("thread-id", "sub-1")]);
    let id = client_session(&h, &body).unwrap();
    assert_eq!(
        id,
        ClientSession::Codex {
            session: "0199a1b2-c3d4".into(),
            thread: Some("sub-1".into())
        }
    );
    assert_eq!(id.thread(), Some("sub-1"));
    assert_eq!(id.root_key(), "serve:codex:0199a1b2-c3d4");
    // Older versions: `session_id`.
    let old = client_session(&headers(&[("session_id", "old")]), &body).unwrap();
    assert_eq!(
        old,
        ClientSession::Codex {
            session: "old".into(),
            thread: None
        }
    );
}

#[test]
fn openai_body_fields_in_order() {
    let both = json!({"model": "gpt-4o", "messages": [], "prompt_cache_key": "pck", "user": "u"});
    assert_eq!(
        client_session(&HeaderMap::new(), &both).unwrap().root_key(),
        "serve:openai:pck"
    );
    let user = json!({"model": "gpt-4o", "messages": [], "user": "alice@example.com"});
    let id = client_session(&HeaderMap::new(), &user).unwrap();
    assert_eq!(
        id,
        ClientSession::OpenAi {
            key: "alice@example.com".into(),
            field: OpenAiField::User
        }
    );
    // Not a plain id: hashed, bounded, stable.
    let key = id.root_key();
    assert!(key.starts_with("serve:openai-user:h-"), "{key}");
    assert_eq!(key, id.root_key());
    let none = json!({"model": "gpt-4o", "messages": [], "user": "  "});
    assert_eq!(client_session(&HeaderMap::new(), &none), None);
}

#[test]
fn count_tokens_is_always_a_side_request() {
    let rule = SideRequestRule {
        enabled: false,
        ..Default::default()
    };
    assert_eq!(
        identify(
            Endpoint::CountTokens,
            &HeaderMap::new(),
            &claude_code_body(LEGACY),
            &rule
        ),
        Identity::Side(SideReason::CountTokens)
    );
}

#[test]
fn claude_code_quota_probe_is_a_side_request() {
    // Claude Code's quota check: `max_tokens: 1`, one "quota" message, same session metadata.
    let body = json!({
        "model": "claude-haiku-4-5-20251001",
        "max_tokens": 1,
        "messages": [{"role": "user", "content": "quota"}],
        "metadata": {"user_id": LEGACY}
    });
    let got = identify(
        Endpoint::Messages,
        &HeaderMap::new(),
        &body,
        &SideRequestRule::default(),
    );
    assert_eq!(
        got,
        Identity::Side(SideReason::QuotaProbe { max_tokens: 1 })
    );
}

#[test]
fn claude_code_title_call_is_a_side_request_and_configurable() {
    // The title/topic call: a haiku model, a system prompt, no tools, one user message.
    let body = json!({
        "model": "claude-3-5-haiku-20241022",
        "max_tokens": 512,
        "system": [{"type": "text", "text": "Analyze if this message indicates a new conversation topic."}],
        "messages": [{"role": "user", "content": "OK, we're going to make a little experiment here."}],
        "metadata": {"user_id": LEGACY}
    });
    let rule = SideRequestRule::default();
    assert!(matches!(
        identify(Endpoint::Messages, &HeaderMap::new(), &body, &rule),
        Identity::Side(SideReason::SmallModelOneShot { .. })
    ));
    // The main conversation on the same session is not one.
    assert!(matches!(
        identify(
            Endpoint::Messages,
            &HeaderMap::new(),
            &claude_code_body(LEGACY),
            &rule
        ),
        Identity::Conversation(Some(ClientSession::ClaudeCode { .. }))
    ));
    // A haiku conversation with tools is a conversation.
    let mut with_tools = body.clone();
    with_tools["tools"] = json!([{"name": "Bash", "input_schema": {}}]);
    assert!(matches!(
        identify(Endpoint::Messages, &HeaderMap::new(), &with_tools, &rule),
        Identity::Conversation(_)
    ));
    // Two turns on haiku without tools: a conversation too.
    let mut longer = body.clone();
    longer["messages"] = json!([
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "b"},
        {"role": "user", "content": "c"}
    ]);
    assert!(matches!(
        identify(Endpoint::Messages, &HeaderMap::new(), &longer, &rule),
        Identity::Conversation(_)
    ));
    // Configured off, or with other small models.
    let off = SideRequestRule {
        enabled: false,
        ..Default::default()
    };
    assert!(matches!(
        identify(Endpoint::Messages, &HeaderMap::new(), &body, &off),
        Identity::Conversation(_)
    ));
    let mini = SideRequestRule {
        small_models: vec!["gpt-4o-mini".into()],
        ..Default::default()
    };
    assert!(matches!(
        identify(Endpoint::Messages, &HeaderMap::new(), &body, &mini),
        Identity::Conversation(_)
    ));
}

/// Claude Code 2.1's title call, as it sends it: the main model, the main `max_tokens`, no
/// tools, one user message and a JSON-schema answer. It is a side request whatever the model;
/// the session's first real request, the same but with tools and `output_config.effort`, is the
/// conversation.
#[test]
fn claude_code_2_1_title_call_on_the_main_model_is_a_side_request() {
    let title = json!({
        "model": "claude-sonnet-4-5",
        "max_tokens": 64000,
        "system": [{"type": "text", "text": "Generate a concise, sentence-case title (3-7 words)"}],
        "messages": [{"role": "user", "content": "<session>\nRead /tmp/x/secret.txt\n</session>"}],
        "tools": [],
        "thinking": {"type": "disabled"},
        "output_config": {"format": {"type": "json_schema", "schema": {
            "type": "object", "properties": {"title": {"type": "string"}},
            "required": ["title"], "additionalProperties": false}}},
        "metadata": {"user_id": LEGACY},
        "stream": true
    });
    let rule = SideRequestRule::default();
    assert_eq!(
        identify(Endpoint::Messages, &HeaderMap::new(), &title, &rule),
        Identity::Side(SideReason::SchemaOneShot {
            model: "claude-sonnet-4-5".into()
        })
    );
    // The real first request: tools, and `output_config` for effort only.
    let mut real = title.clone();
    real["tools"] = json!([{"name": "Read", "input_schema": {"type": "object"}}]);
    real["output_config"] = json!({"effort": "high"});
    assert!(matches!(
        identify(Endpoint::Messages, &HeaderMap::new(), &real, &rule),
        Identity::Conversation(Some(ClientSession::ClaudeCode { .. }))
    ));
    // A schema answer without tools but with history is a conversation.
    let mut longer = title.clone();
    longer["messages"] = json!([
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "b"},
        {"role": "user", "content": "c"}
    ]);
    assert!(matches!(
        identify(Endpoint::Messages, &HeaderMap::new(), &longer, &rule),
        Identity::Conversation(_)
    ));
    // `effort` alone on a tool-less one-shot is not a schema answer.
    let mut effort = title.clone();
    effort["output_config"] = json!({"effort": "high"});
    assert!(matches!(
        identify(Endpoint::Messages, &HeaderMap::new(), &effort, &rule),
        Identity::Conversation(_)
    ));
    // Off means off.
    let off = SideRequestRule {
        enabled: false,
        ..Default::default()
    };
    assert!(matches!(
        identify(Endpoint::Messages, &HeaderMap::new(), &title, &off),
        Identity::Conversation(_)
    ));
}

#[test]
fn no_id_at_all_is_an_anonymous_conversation() {
    let body = json!({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]});
    assert_eq!(
        identify(
            Endpoint::ChatCompletions,
            &HeaderMap::new(),
            &body,
            &SideRequestRule::default()
        ),
        Identity::Conversation(None)
    );
}
