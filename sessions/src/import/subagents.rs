//! Claude Code subagents: the transcripts an `Agent`/`Task` call left beside its session.
//!
//! Claude Code writes a session to `<project>/<session-id>.jsonl` and the transcript of each
//! subagent that session spawned to `<project>/<session-id>/subagents/agent-<id>.jsonl`, with
//! `agent-<id>.meta.json` beside it (the agent's type and task description). The parent's
//! transcript names the child in the tool result that ended it: `toolUseResult.agentId` on the
//! line whose `tool_result` answers the spawning call. Reading the main file alone lost the
//! children (one shared sample made six calls; a replay showed none of their work).
//!
//! [`find`] pairs each child file with the parent's tool call, so an import can record the
//! child as spawned by that call (OpenClaw's registry keeps `spawnedBy`) and a replay can run
//! the child at the parent's call.

use std::collections::HashMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// One subagent transcript of a Claude Code session.
#[derive(Debug, Clone, PartialEq)]
pub struct Subagent {
    /// The agent id (`agent-<id>.jsonl`).
    pub agent_id: String,
    /// Its transcript.
    pub path: PathBuf,
    /// The parent's tool call that spawned it, from the tool result naming the agent; `None`
    /// when the parent's transcript does not say (a run cut short).
    pub parent_tool_call_id: Option<String>,
    /// The 1-based line of the parent's transcript holding that tool result.
    pub parent_line: Option<u64>,
    /// `agentType` from the `.meta.json`, when there is one.
    pub agent_type: Option<String>,
    /// `description` from the `.meta.json`: the task the parent gave it.
    pub description: Option<String>,
}

/// The subagent transcripts beside the Claude Code session `path`, sorted by the parent's line
/// that ended each (children the parent never names last, by id). Empty when `path` has none.
/// Reads the parent line by line; a line that is not JSON is skipped (the importer reports it).
pub fn find(path: &Path) -> std::io::Result<Vec<Subagent>> {
    let (Some(stem), Some(dir)) = (path.file_stem(), path.parent()) else {
        return Ok(Vec::new());
    };
    let folder = dir.join(stem).join("subagents");
    let Ok(entries) = std::fs::read_dir(&folder) else {
        return Ok(Vec::new());
    };
    let mut children: Vec<Subagent> = Vec::new();
    for entry in entries.flatten() {
        let file = entry.path();
        let Some(name) = file.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let Some(agent_id) = name
            .strip_prefix("agent-")
            .and_then(|n| n.strip_suffix(".jsonl"))
        else {
            continue;
        };
        let meta: Option<Value> = std::fs::read(folder.join(format!("agent-{agent_id}.meta.json")))
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok());
        let field = |key: &str| {
            meta.as_ref()
                .and_then(|m| m.get(key))
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        children.push(Subagent {
            agent_id: agent_id.to_owned(),
            path: file.clone(),
            parent_tool_call_id: None,
            parent_line: None,
            agent_type: field("agentType"),
            description: field("description"),
        });
    }
    if children.is_empty() {
        return Ok(children);
    }
    let ended = tool_results_naming_agents(path)?;
    for child in &mut children {
        if let Some((line, call)) = ended.get(&child.agent_id) {
            child.parent_line = Some(*line);
            child.parent_tool_call_id = Some(call.clone());
        }
    }
    children.sort_by(|a, b| {
        (a.parent_line.is_none(), a.parent_line, &a.agent_id).cmp(&(
            b.parent_line.is_none(),
            b.parent_line,
            &b.agent_id,
        ))
    });
    Ok(children)
}

/// Agent id → (line, tool call id) of the tool results in `path` whose `toolUseResult` names an
/// agent.
fn tool_results_naming_agents(path: &Path) -> std::io::Result<HashMap<String, (u64, String)>> {
    let mut found = HashMap::new();
    let reader = std::io::BufReader::new(std::fs::File::open(path)?);
    for (index, line) in reader.split(b'\n').enumerate() {
        let line = line?;
        // Most lines name no agent: skip them without parsing.
        if !line.windows(9).any(|w| w == b"\"agentId\"") {
            continue;
        }
        let Ok(value) = serde_json::from_slice::<Value>(&line) else {
            continue;
        };
        let Some(agent) = value
            .get("toolUseResult")
            .and_then(|r| r.get("agentId"))
            .and_then(Value::as_str)
        else {
            continue;
        };
        let call = value
            .pointer("/message/content")
            .and_then(Value::as_array)
            .and_then(|blocks| {
                blocks.iter().find_map(|b| {
                    (b.get("type").and_then(Value::as_str) == Some("tool_result"))
                        .then(|| b.get("tool_use_id").and_then(Value::as_str))
                        .flatten()
                })
            });
        if let Some(call) = call {
            found
                .entry(agent.to_owned())
                .or_insert((index as u64 + 1, call.to_owned()));
        }
    }
    Ok(found)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn sample() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join(
            "../../shared/data/sessions/claude-code-log/-experiments-worktrees/\
             ef958aa1-0e93-49f0-bb71-150f63befcd1.jsonl",
        )
    }

    #[test]
    fn the_sample_names_its_six_subagents_with_the_calls_that_spawned_them() {
        let found = find(&sample()).unwrap();
        assert_eq!(found.len(), 6, "{found:#?}");
        assert!(found.iter().all(|s| s.parent_tool_call_id.is_some()));
        let lines: Vec<u64> = found.iter().map(|s| s.parent_line.unwrap()).collect();
        assert!(
            lines.windows(2).all(|w| w[0] < w[1]),
            "in the parent's order: {lines:?}"
        );
        let alice = found
            .iter()
            .find(|s| s.agent_id == "a4ca7529859c158c2")
            .unwrap();
        assert_eq!(
            alice.parent_tool_call_id.as_deref(),
            Some("toolu_01GmrK6tgdD9D5xD6W5X9UUy")
        );
        assert_eq!(
            alice.description.as_deref(),
            Some("Research Claude Code plan mode")
        );
        assert_eq!(alice.agent_type.as_deref(), Some("general-purpose"));
    }

    #[test]
    fn a_session_without_a_subagents_folder_has_none() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("s.jsonl");
        std::fs::write(&file, "{}\n").unwrap();
        assert!(find(&file).unwrap().is_empty());
    }
}
