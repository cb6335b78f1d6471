use std::sync::Arc;

use rampart_context::tokens::{CountMode, Encoding};
use rampart_message::SharedMessage;
use rampart_prompt::{
    BootstrapLimits, BootstrapSet, PromptInputs, SourceFile, ToolInfo, build_system_prompt,
};
use serde_json::json;

use super::*;
use crate::providers::{ModelRequest, ToolSpec};
use crate::run::request_tokens;

const EXACT: CountMode = CountMode::Exact(Encoding::O200kBase);

fn built(addition: Option<&str>) -> BuiltPrompt {
    let sources = [SourceFile {
        name: "AGENTS.md".into(),
        path: "/ws/AGENTS.md".into(),
        content: Some("Always run the tests before saying done.\n".into()),
    }];
    build_system_prompt(&PromptInputs {
        tools: vec![ToolInfo::named("read"), ToolInfo::named("memory_search")],
        workspace_dir: "/ws".into(),
        bootstrap: Arc::new(BootstrapSet::from_sources(
            "/ws",
            &sources,
            BootstrapLimits::default(),
        )),
        time_zone: Some("Europe/Berlin".into()),
        engine_addition: addition.map(str::to_string),
        ..PromptInputs::default()
    })
}

fn message(value: serde_json::Value) -> SharedMessage {
    Arc::new(serde_json::from_value(value).unwrap())
}

fn assistant_call(id: &str, tool: &str) -> SharedMessage {
    message(json!({
        "role": "assistant",
        "content": [{"type": "toolCall", "id": id, "name": tool, "arguments": {"q": "x"}}],
        "api": "x", "provider": "x", "model": "m",
        "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0,
                  "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
        "stopReason": "toolUse", "timestamp": 0
    }))
}

fn result(id: &str, tool: &str, text: &str) -> SharedMessage {
    Arc::new(AgentMessage::tool_result(id, tool, text, false, 0))
}

/// A session after a compaction, with tool results and a memory search, and a client's tool.
fn preview(system: Option<String>) -> Preview {
    let messages = vec![
        message(json!({
            "role": "compactionSummary", "summary": "Earlier: the migration plan was agreed.",
            "tokensBefore": 9000, "timestamp": 0
        })),
        Arc::new(AgentMessage::user_text(
            "Where did we leave the migration?",
            0,
        )),
        assistant_call("c1", "memory_search"),
        result(
            "c1",
            "memory_search",
            "memory/2025-01.md#3: the migration waits on the DBA.",
        ),
        assistant_call("c2", "read"),
        result(
            "c2",
            "read",
            &"fn main() { println!(\"hello\"); }\n".repeat(40),
        ),
        assistant_call("c3", "read"),
        result("c3", "read", "short file"),
        Arc::new(AgentMessage::assistant_text(
            "It waits on the DBA.",
            "x",
            "x",
            "m",
            0,
        )),
    ];
    let tools = vec![ToolSpec {
        name: "read".into(),
        description: Some("Read a file".into()),
        parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
    }];
    let counter = TokenCounter::new(EXACT);
    let tool_tokens: u64 = tools
        .iter()
        .map(|t| counter.count_text(&t.counted_text()))
        .sum();
    let tokens = request_tokens(
        &counter,
        system.as_deref(),
        &messages.clone().into(),
        tool_tokens,
    );
    Preview {
        model: "sim/small".parse().unwrap(),
        window: 32_000,
        count_mode: EXACT,
        family: rampart_context::hygiene::Provider::Other,
        budget: 20_000,
        reserve: 8_000,
        route: "fits".into(),
        tokens,
        tool_tokens,
        addition: None,
        loop_overflow: None,
        request: ModelRequest {
            model: "small".into(),
            system,
            messages: messages.into(),
            forwarded: crate::providers::Forwarded {
                tools,
                ..Default::default()
            },
            ..Default::default()
        },
    }
}

fn tokens_of(view: &Breakdown, label: &str) -> i64 {
    view.parts
        .iter()
        .find(|p| p.label == label)
        .unwrap_or_else(|| panic!("no part {label}: {:?}", view.parts))
        .tokens
}

/// The parts add up to the request's count exactly, under the exact tokenizer, with the
/// built prompt listed part by part (the engine's addition among them).
#[test]
fn the_parts_add_up_to_the_request_exactly() {
    let prompt = built(Some("Engine notes: 3 facts recalled."));
    let preview = preview(Some(prompt.text.clone()));
    let view = breakdown(&preview, Some(&prompt));
    assert!(view.exact);
    assert_eq!(view.parts_total(), view.request_tokens as i64);
    assert_eq!(view.request_tokens, preview.tokens);
    assert!(tokens_of(&view, "file:AGENTS.md") > 0);
    assert!(tokens_of(&view, "engine-addition") > 0);
    assert!(tokens_of(&view, "section:runtime") > 0);
    assert!(view.parts.iter().all(|p| p.label != "cache-boundary"));
    // Framing is the seams of the system prompt's text only: a few tokens at most.
    assert!(tokens_of(&view, "framing").abs() <= prompt.parts.len() as i64);
    // Issue 24, defect 11: framing was negative (-7 on a real workspace) when the parts were
    // counted apart and the tokenizer merged characters across their seams.
    assert!(tokens_of(&view, "framing") >= 0, "{:?}", view.parts);
    assert!(view.parts.iter().all(|p| p.tokens >= 0), "{:?}", view.parts);

    let counter = TokenCounter::new(EXACT);
    let messages = &preview.request.messages;
    assert_eq!(
        tokens_of(&view, "compaction summary"),
        counter.count_shared(&messages[0]) as i64
    );
    assert_eq!(
        tokens_of(&view, "retrieved memory"),
        counter.count_shared(&messages[3]) as i64
    );
    assert_eq!(
        tokens_of(&view, "tool results"),
        (counter.count_shared(&messages[5]) + counter.count_shared(&messages[7])) as i64
    );
    assert_eq!(tokens_of(&view, "tool schemas"), preview.tool_tokens as i64);
}

/// The order of the parts is the order of the request: the system prompt's parts, the tool
/// schemas, the summary, the history, memory, framing.
#[test]
fn the_parts_are_in_the_order_of_the_request() {
    let prompt = built(None);
    let view = breakdown(&preview(Some(prompt.text.clone())), Some(&prompt));
    let groups: Vec<Group> = view.parts.iter().map(|p| p.group).collect();
    let mut sorted = groups.clone();
    sorted.dedup();
    assert_eq!(
        sorted,
        [
            Group::System,
            Group::Tools,
            Group::Summary,
            Group::History,
            Group::Memory,
            Group::Framing
        ]
    );
    let labels: Vec<&str> = view
        .parts
        .iter()
        .filter(|p| p.group == Group::History)
        .map(|p| p.label.as_str())
        .collect();
    assert_eq!(labels, ["user", "assistant", "tool results"]);
}

/// The largest tool results are listed, largest first, beside the parts (memory included).
#[test]
fn the_largest_tool_results_are_listed_largest_first() {
    let view = breakdown(&preview(None), None);
    let listed: Vec<&str> = view
        .largest_tool_results
        .iter()
        .map(|r| r.tool_call_id.as_str())
        .collect();
    assert_eq!(listed, ["c2", "c1", "c3"]);
    assert!(view.largest_tool_results[0].window_percent > 0.0);
    assert_eq!(view.parts_total(), view.request_tokens as i64);
}

/// A system prompt that is not Rampart's (a client's, a recorded one) is one part, and the
/// sum still holds.
#[test]
fn a_foreign_system_prompt_is_one_part() {
    let prompt = built(None);
    let view = breakdown(
        &preview(Some("You are a careful coding assistant.".into())),
        Some(&prompt),
    );
    let system: Vec<&Part> = view
        .parts
        .iter()
        .filter(|p| p.group == Group::System)
        .collect();
    assert_eq!(system.len(), 1);
    assert_eq!(system[0].label, "system prompt");
    assert_eq!(tokens_of(&view, "framing"), 0);
    assert_eq!(view.parts_total(), view.request_tokens as i64);
}

#[test]
fn shares_are_of_the_window_and_of_the_budget() {
    let view = breakdown(&preview(None), None);
    let user = view.parts.iter().find(|p| p.label == "user").unwrap();
    let expected = |of: f64| (user.tokens as f64 * 10_000.0 / of).round() / 100.0;
    assert_eq!(user.window_percent, expected(32_000.0));
    assert_eq!(user.budget_percent, expected(20_000.0));
}

/// The run loop places the engine's addition in the prompt's text; the builder places it in
/// the parts. Both give the same text, so a prompt with an addition is still listed part by
/// part.
#[test]
fn the_run_loops_addition_and_the_builders_agree() {
    let addition = "Engine notes:\r\n- 3 facts recalled  \n";
    let placed = crate::run::with_addition(Some(&built(None).text), Some(addition)).unwrap();
    let rebuilt = built(Some(addition));
    assert_eq!(placed, rebuilt.text);
    let view = breakdown(&preview(Some(placed)), Some(&rebuilt));
    assert!(tokens_of(&view, "engine-addition") > 0);
}

/// Issue 24, defect 11: with a workspace of several files, `context show` printed a negative
/// framing row (−7): each part counted apart paid again for the characters the tokenizer
/// merges across the seam with the next part. Counted as what each part adds, the system
/// prompt's parts add up to its own count and framing is never negative.
#[test]
fn a_workspace_of_many_files_leaves_no_negative_framing() {
    let names = [
        "AGENTS.md",
        "SOUL.md",
        "TOOLS.md",
        "IDENTITY.md",
        "USER.md",
        "HEARTBEAT.md",
        "BOOTSTRAP.md",
        "MEMORY.md",
    ];
    let sources: Vec<SourceFile> = names
        .iter()
        .map(|name| SourceFile {
            name: (*name).into(),
            path: format!("/ws/{name}").into(),
            content: Some(format!(
                "# {name}\n\n- Keep answers short.\n- Run the tests before saying done.\n\n"
            )),
        })
        .collect();
    let prompt = build_system_prompt(&PromptInputs {
        tools: vec![ToolInfo::named("read"), ToolInfo::named("exec")],
        workspace_dir: "/ws".into(),
        bootstrap: Arc::new(BootstrapSet::from_sources(
            "/ws",
            &sources,
            BootstrapLimits::default(),
        )),
        time_zone: Some("Europe/Berlin".into()),
        ..PromptInputs::default()
    });
    // Under the estimate (each text rounded up to whole tokens) and the exact tokenizer.
    for mode in [CountMode::Estimate, EXACT] {
        let mut p = preview(Some(prompt.text.clone()));
        let counter = TokenCounter::new(mode);
        p.count_mode = mode;
        p.tokens = request_tokens(
            &counter,
            p.request.system.as_deref(),
            &p.request.messages,
            p.tool_tokens,
        );
        let view = breakdown(&p, Some(&prompt));
        assert_eq!(view.parts_total(), view.request_tokens as i64);
        assert!(
            tokens_of(&view, "framing") >= 0,
            "{mode:?}: {:?}",
            view.parts
        );
        assert!(view.parts.iter().all(|p| p.tokens >= 0), "{:?}", view.parts);
    }
}
