#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{Value, json};

use super::*;

fn capture(wire: FieldsWire, body: Value) -> ClientFields {
    ClientFields::capture(wire, body.as_object().unwrap())
}

fn merged(fields: &ClientFields, upstream: FieldsWire) -> (Value, Vec<String>) {
    let mut body = json!({"model": "m", "stream": true})
        .as_object()
        .cloned()
        .unwrap();
    let dropped = fields.merge(upstream, &mut body);
    (Value::Object(body), dropped)
}

#[test]
fn capture_keeps_every_unmanaged_key_and_leaves_the_managed_ones() {
    let f = capture(
        FieldsWire::Anthropic,
        json!({"model": "m", "messages": [], "system": "s", "tools": [], "stream": true,
               "max_tokens": 9, "thinking": {"type": "adaptive"}, "metadata": {"user_id": "u"},
               "output_config": {"effort": "high"}, "context_management": {"edits": []}}),
    );
    let mut keys: Vec<&str> = f.fields.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "context_management",
            "metadata",
            "output_config",
            "thinking"
        ]
    );
    assert!(!f.max_completion_tokens);
    let chat = capture(
        FieldsWire::Chat,
        json!({"model": "m", "max_completion_tokens": 5, "store": false}),
    );
    assert!(chat.max_completion_tokens);
}

#[test]
fn the_same_wire_gets_every_field_verbatim_and_the_provider_keys_win() {
    let f = capture(
        FieldsWire::Anthropic,
        json!({"thinking": {"type": "adaptive"}, "output_config": {"effort": "low"},
               "top_k": 3}),
    );
    let mut f = f;
    f.fields.insert("stream".into(), json!(false)); // cannot happen via capture; still managed
    let (body, dropped) = merged(&f, FieldsWire::Anthropic);
    assert!(dropped.is_empty());
    assert_eq!(body["thinking"], json!({"type": "adaptive"}));
    assert_eq!(body["output_config"], json!({"effort": "low"}));
    assert_eq!(body["top_k"], 3);
    assert_eq!(body["stream"], true);
}

#[test]
fn responses_fields_map_to_their_chat_forms() {
    let f = capture(
        FieldsWire::Responses,
        json!({"reasoning": {"effort": "high", "summary": "auto"},
               "text": {"format": {"type": "json_schema", "name": "t", "schema": {"type": "object"},
                                   "strict": true}, "verbosity": "low"},
               "tool_choice": {"type": "function", "name": "shell"},
               "parallel_tool_calls": false, "prompt_cache_key": "k", "store": false,
               "include": ["reasoning.encrypted_content"], "client_metadata": {"a": 1}}),
    );
    let (body, mut dropped) = merged(&f, FieldsWire::Chat);
    assert_eq!(body["reasoning_effort"], "high");
    assert_eq!(
        body["response_format"],
        json!({"type": "json_schema", "json_schema": {"name": "t", "schema": {"type": "object"}, "strict": true}})
    );
    assert_eq!(body["verbosity"], "low");
    assert_eq!(
        body["tool_choice"],
        json!({"type": "function", "function": {"name": "shell"}})
    );
    assert_eq!(body["parallel_tool_calls"], false);
    assert_eq!(body["prompt_cache_key"], "k");
    assert_eq!(body["store"], false);
    assert!(body.get("reasoning").is_none() && body.get("include").is_none());
    dropped.sort();
    assert_eq!(dropped, ["client_metadata", "include", "reasoning.summary"]);
}

#[test]
fn chat_fields_map_to_their_anthropic_forms_and_back() {
    let chat = capture(
        FieldsWire::Chat,
        json!({"temperature": 0.2, "top_p": 0.9, "stop": "END", "user": "u1",
               "tool_choice": "required", "seed": 7}),
    );
    let (body, dropped) = merged(&chat, FieldsWire::Anthropic);
    assert_eq!(body["temperature"], 0.2);
    assert_eq!(body["top_p"], 0.9);
    assert_eq!(body["stop_sequences"], json!(["END"]));
    assert_eq!(body["metadata"], json!({"user_id": "u1"}));
    assert_eq!(body["tool_choice"], json!({"type": "any"}));
    assert_eq!(dropped, ["seed"]);

    let anthropic = capture(
        FieldsWire::Anthropic,
        json!({"stop_sequences": ["a"], "metadata": {"user_id": "u2"},
               "tool_choice": {"type": "tool", "name": "Read", "disable_parallel_tool_use": true},
               "thinking": {"type": "adaptive"}}),
    );
    let (body, dropped) = merged(&anthropic, FieldsWire::Chat);
    assert_eq!(body["stop"], json!(["a"]));
    assert_eq!(body["user"], "u2");
    assert_eq!(
        body["tool_choice"],
        json!({"type": "function", "function": {"name": "Read"}})
    );
    assert_eq!(body["parallel_tool_calls"], false);
    assert_eq!(dropped, ["thinking"]);
}

#[test]
fn responses_to_anthropic_maps_what_it_can_and_names_the_rest() {
    let f = capture(
        FieldsWire::Responses,
        json!({"tool_choice": "auto", "temperature": 1, "reasoning": {"effort": "low"}}),
    );
    let (body, dropped) = merged(&f, FieldsWire::Anthropic);
    assert_eq!(body["tool_choice"], json!({"type": "auto"}));
    assert_eq!(body["temperature"], 1);
    assert_eq!(dropped, ["reasoning"]);
}

fn request_with(fields: ClientFields) -> crate::ModelRequest {
    crate::ModelRequest {
        model: "m".into(),
        messages: vec![std::sync::Arc::new(
            rampart_engine_api::AgentMessage::user_text("hi", 0),
        )]
        .into(),
        max_tokens: Some(64),
        forwarded: crate::Forwarded {
            client_fields: Some(fields),
            ..Default::default()
        },
        ..Default::default()
    }
}

#[test]
fn the_anthropic_provider_sends_claude_codes_fields() {
    let f = capture(
        FieldsWire::Anthropic,
        json!({"thinking": {"type": "adaptive"}, "output_config": {"effort": "high"},
               "context_management": {"edits": [{"type": "clear_thinking_20251015"}]},
               "metadata": {"user_id": "dev"}, "max_tokens": 32000, "stream": false}),
    );
    let body = crate::anthropic::request_body(&request_with(f));
    assert_eq!(body["thinking"], json!({"type": "adaptive"}));
    assert_eq!(body["output_config"], json!({"effort": "high"}));
    assert_eq!(body["metadata"], json!({"user_id": "dev"}));
    assert!(body["context_management"]["edits"].is_array());
    assert_eq!(body["max_tokens"], 64, "the engine's bound stays");
    assert_eq!(body["stream"], true, "serve streams upstream");
    let none = crate::anthropic::request_body(&crate::ModelRequest::default());
    assert!(none.get("thinking").is_none());
}

#[test]
fn the_openai_provider_sends_a_chat_clients_fields_and_its_name_for_the_bound() {
    let f = capture(
        FieldsWire::Chat,
        json!({"max_completion_tokens": 10, "store": false, "reasoning_effort": "low",
               "seed": 3, "response_format": {"type": "json_object"}}),
    );
    let body = crate::openai::request_body(&request_with(f));
    assert_eq!(body["store"], false);
    assert_eq!(body["reasoning_effort"], "low");
    assert_eq!(body["seed"], 3);
    assert_eq!(body["response_format"], json!({"type": "json_object"}));
    assert_eq!(body["max_completion_tokens"], 64);
    assert!(body.get("max_tokens").is_none());
    let codex = capture(
        FieldsWire::Responses,
        json!({"reasoning": {"effort": "medium"}, "tool_choice": "auto"}),
    );
    let body = crate::openai::request_body(&request_with(codex));
    assert_eq!(body["reasoning_effort"], "medium");
    assert_eq!(body["tool_choice"], "auto");
    assert_eq!(body["max_tokens"], 64);
}

fn forwarded(wire: FieldsWire) -> crate::Forwarded {
    crate::Forwarded {
        headers: [
            ("user-agent", "claude-cli/2"),
            ("x-app", "cli"),
            ("anthropic-beta", "oauth-2025-04-20"),
            ("openai-organization", "org-1"),
        ]
        .iter()
        .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
        .collect(),
        client_fields: Some(capture(wire, json!({}))),
        ..Default::default()
    }
}

#[test]
fn a_same_family_upstream_gets_the_clients_headers_another_only_its_own_betas() {
    let f = forwarded(FieldsWire::Anthropic);
    let to_anthropic: Vec<_> = f.passthrough(FieldsWire::Anthropic).collect();
    assert_eq!(to_anthropic.len(), 4, "{to_anthropic:?}");
    assert!(to_anthropic.contains(&("user-agent", "claude-cli/2")));
    let to_openai: Vec<_> = f.passthrough(FieldsWire::Chat).collect();
    assert_eq!(to_openai, [("openai-organization", "org-1")]);
    // Codex speaks Responses: an OpenAI chat upstream is its family.
    let codex = forwarded(FieldsWire::Responses);
    assert_eq!(codex.passthrough(FieldsWire::Chat).count(), 4);
    assert_eq!(
        codex.passthrough(FieldsWire::Anthropic).collect::<Vec<_>>(),
        [("anthropic-beta", "oauth-2025-04-20")]
    );
}

#[test]
fn credentials_transport_and_proxy_headers_are_never_forwarded() {
    for name in [
        "authorization",
        "x-api-key",
        "host",
        "content-length",
        "connection",
        "transfer-encoding",
        "proxy-authorization",
        "x-rampart-token",
        "x-forwarded-for",
        "cookie",
        "anthropic-version",
    ] {
        assert!(crate::never_forwarded(name), "{name}");
    }
    for name in [
        "user-agent",
        "accept",
        "x-stainless-os",
        "originator",
        "anthropic-beta",
    ] {
        assert!(!crate::never_forwarded(name), "{name}");
    }
}

#[test]
fn the_clients_query_goes_to_an_upstream_of_its_family_only() {
    let mut f = forwarded(FieldsWire::Anthropic);
    f.query = Some("beta=true".into());
    let url = "https://api.anthropic.com/v1/messages";
    assert_eq!(
        f.upstream_url(url, FieldsWire::Anthropic),
        "https://api.anthropic.com/v1/messages?beta=true"
    );
    assert_eq!(
        f.upstream_url("http://h/v1/messages?x=1", FieldsWire::Anthropic),
        "http://h/v1/messages?x=1&beta=true"
    );
    assert_eq!(
        f.upstream_url("http://h/v1/chat/completions", FieldsWire::Chat),
        "http://h/v1/chat/completions"
    );
    assert_eq!(
        crate::Forwarded::default().upstream_url(url, FieldsWire::Anthropic),
        url
    );
}

/// The borrowed comparison a provider makes for every tool of every request agrees with
/// reading the tool: a declared tool matches exactly the spec it reads as.
#[test]
fn a_declared_tool_matches_the_spec_it_reads_as_and_no_other() {
    use crate::ToolSpec;
    let functions = [
        json!({"name": "read", "description": "Read a file", "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}),
        json!({"name": "read"}),
        json!({"name": "read", "description": 7, "parameters": null}),
        json!({"name": "write", "description": "Read a file"}),
    ];
    let specs: Vec<ToolSpec> = functions
        .iter()
        .filter_map(ToolSpec::from_responses_tool)
        .collect();
    assert_eq!(specs.len(), functions.len());
    for function in &functions {
        let chat = json!({"type": "function", "function": function});
        for spec in &specs {
            let reads_as = ToolSpec::from_responses_tool(function).as_ref() == Some(spec);
            assert_eq!(
                spec.matches_responses_tool(function),
                reads_as,
                "{function} {spec:?}"
            );
            assert_eq!(spec.matches_chat_tool(&chat), reads_as, "{chat} {spec:?}");
            assert_eq!(
                ToolSpec::from_chat_tool(&chat).as_ref() == Some(spec),
                reads_as
            );
        }
    }
    assert!(!specs[0].matches_chat_tool(&json!({"type": "function"})));
}
