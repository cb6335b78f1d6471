//! The tools as a model calls them: JSON in, JSON out.

use rampart_memory::tools::{call_tool, call_tool_with};
use rampart_memory::{CitationsMode, MemorySettings, SyncReason, ToolContext};
use serde_json::{Value, json};

use crate::common::Agent;

fn agent_with_notes() -> Agent {
    let agent = Agent::new();
    agent.write(
        "memory/x.md",
        "# Decisions\n\nWe picked Postgres over MySQL\nfor the billing service.\n",
    );
    agent
}

#[test]
fn memory_search_returns_openclaws_fields() {
    let agent = agent_with_notes();
    let index = agent.open_keyword();
    let result = call_tool(
        &index,
        "memory_search",
        &json!({"query": "postgres billing"}),
    );
    assert_eq!(result["mode"], "fts-only");
    assert_eq!(result["provider"], Value::Null);
    assert_eq!(result["model"], Value::Null);
    assert_eq!(result["fallback"], Value::Null);
    assert_eq!(result["citations"], "auto");
    let hits = result["results"].as_array().unwrap();
    assert_eq!(hits.len(), 1);
    let hit = &hits[0];
    assert_eq!(hit["path"], "memory/x.md");
    assert_eq!(hit["startLine"], 1);
    assert_eq!(hit["endLine"], 5);
    assert_eq!(hit["source"], "memory");
    assert_eq!(hit["corpus"], "memory");
    assert!(hit["score"].as_f64().unwrap() > 0.0);
    // auto + no session key = a direct chat: cited.
    assert_eq!(hit["citation"], "memory/x.md#L1-L5");
    assert!(
        hit["snippet"]
            .as_str()
            .unwrap()
            .ends_with("billing service.\n\nSource: memory/x.md#L1-L5")
    );
}

#[test]
fn citations_follow_the_mode_and_the_chat() {
    let agent = agent_with_notes();
    let group = ToolContext {
        session_key: Some("agent:main:telegram:group:99".to_string()),
    };
    let args = json!({"query": "postgres"});
    let index = agent.open_keyword();
    let hit = call_tool_with(&index, &group, "memory_search", &args)["results"][0].clone();
    assert_eq!(hit.get("citation"), None, "auto: no citations in a group");
    assert!(!hit["snippet"].as_str().unwrap().contains("Source:"));
    drop(index);
    for (mode, cited) in [(CitationsMode::On, true), (CitationsMode::Off, false)] {
        let settings = MemorySettings {
            citations: mode,
            ..Default::default()
        };
        let index = agent.open(settings, None).0;
        let result = call_tool_with(&index, &group, "memory_search", &args);
        assert_eq!(result["citations"], mode.as_str());
        assert_eq!(
            result["results"][0].get("citation").is_some(),
            cited,
            "{mode:?}"
        );
    }
}

#[test]
fn memory_search_arguments() {
    let agent = Agent::new();
    for i in 0..5 {
        agent.write(&format!("memory/n{i}.md"), &format!("walrus note {i}\n"));
    }
    let index = agent.open_keyword();
    index.sync(SyncReason::Manual).unwrap();
    let r = call_tool(
        &index,
        "memory_search",
        &json!({"query": "walrus", "maxResults": "2", "minScore": 0}),
    );
    assert_eq!(r["results"].as_array().unwrap().len(), 2);
    let r = call_tool(&index, "memory_search", &json!({"query": "walrus"}));
    assert_eq!(r["results"].as_array().unwrap().len(), 5);
    let r = call_tool(
        &index,
        "memory_search",
        &json!({"query": "walrus", "corpus": "wiki"}),
    );
    assert_eq!(r["results"], json!([]));
    let r = call_tool(&index, "memory_search", &json!({"maxResults": 2}));
    assert_eq!(r["error"], "query required");
    let r = call_tool(&index, "memory_search", &json!({"query": ""}));
    assert_eq!(r["results"], json!([]));
    let r = call_tool(&index, "memory_fetch", &json!({}));
    assert!(r["error"].as_str().unwrap().contains("unknown memory tool"));
}

#[test]
fn case_19_memory_get_through_the_tool() {
    let agent = Agent::new();
    agent.write("memory/three.md", "line 1\nline 2\nline 3");
    let index = agent.open_keyword();
    let r = call_tool(
        &index,
        "memory_get",
        &json!({"path": "memory/three.md", "from": 2, "lines": 1}),
    );
    assert_eq!(r, json!({"path": "memory/three.md", "text": "line 2"}));
    let r = call_tool(
        &index,
        "memory_get",
        &json!({"path": "memory/2099-01-01.md"}),
    );
    assert_eq!(
        r,
        json!({"path": "memory/2099-01-01.md", "text": "", "missing": true})
    );
    // A refused path: memory is on, so not `disabled`; the error says what is wrong.
    let r = call_tool(&index, "memory_get", &json!({"path": "notes.md"}));
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .starts_with("notes.md is not a memory file"),
        "{r}"
    );
    assert_eq!(r.get("disabled"), None, "{r}");
    assert_eq!(r["text"], "");
    let r = call_tool(&index, "memory_get", &json!({}));
    assert!(
        r["error"].as_str().unwrap().starts_with("no path given"),
        "{r}"
    );
    assert_eq!(r.get("disabled"), None, "{r}");
    let r = call_tool(&index, "memory_get", &json!({"path": "memory/three.md"}));
    assert_eq!(r["text"], "line 1\nline 2\nline 3");
}

#[test]
fn disabled_memory_says_so() {
    let agent = agent_with_notes();
    let settings = MemorySettings {
        enabled: false,
        ..Default::default()
    };
    let index = agent.open(settings, None).0;
    let r = call_tool(&index, "memory_search", &json!({"query": "postgres"}));
    assert_eq!(r["disabled"], true);
    assert_eq!(r["results"], json!([]));
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .starts_with("memory search disabled")
    );
    let r = call_tool(&index, "memory_get", &json!({"path": "memory/x.md"}));
    assert_eq!(r["error"], "memory search disabled");
    assert_eq!(r["disabled"], true, "memory off is the one `disabled`");
}
