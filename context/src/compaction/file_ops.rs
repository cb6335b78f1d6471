//! Facts a summary keeps mechanically, whatever the model wrote: which files were read or
//! modified, and which tool calls failed.

use std::collections::{BTreeSet, HashSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::transcript::message_text;
use rampart_message::SharedMessage;
use rampart_message::{AgentMessage, ContentBlock};

/// Failures listed at most (`MAX_TOOL_FAILURES`).
pub const MAX_TOOL_FAILURES: usize = 8;
/// Characters of one failure's text at most (`MAX_TOOL_FAILURE_CHARS`).
pub const MAX_TOOL_FAILURE_CHARS: usize = 240;

/// The file lists stored with a compaction (the entry's `details`), carried into the next one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct CompactionDetails {
    /// Files only read, sorted.
    pub read_files: Vec<String>,
    /// Files written or edited, sorted.
    pub modified_files: Vec<String>,
}

impl CompactionDetails {
    /// The details an earlier compaction stored, from its `details` JSON (absent or malformed
    /// fields are empty lists).
    pub fn from_value(value: &Value) -> Self {
        let list = |key: &str| -> Vec<String> {
            value
                .get(key)
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default()
        };
        Self {
            read_files: list("readFiles"),
            modified_files: list("modifiedFiles"),
        }
    }
}

/// Files touched by `read`, `write` and `edit` tool calls.
#[derive(Debug, Clone, Default)]
pub struct FileOps {
    read: BTreeSet<String>,
    modified: BTreeSet<String>,
}

impl FileOps {
    /// Empty lists.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds the lists of an earlier compaction (its modified files count as modified).
    pub fn add_details(&mut self, details: &CompactionDetails) {
        self.read.extend(details.read_files.iter().cloned());
        self.modified.extend(details.modified_files.iter().cloned());
    }

    /// Adds the file calls of an assistant message: the `path` argument (or `file_path`, the
    /// spelling of other agents) of calls named `read`, `write` or `edit`.
    pub fn add_message(&mut self, message: &AgentMessage) {
        let AgentMessage::Assistant(a) = message else {
            return;
        };
        for block in &a.content {
            let (name, args) = match block {
                ContentBlock::ToolCall(c) => (c.name.as_str(), &c.arguments),
                ContentBlock::Other(raw) => match (raw.get("name"), raw.get("input")) {
                    (Some(Value::String(n)), Some(args)) => (n.as_str(), args),
                    _ => continue,
                },
                _ => continue,
            };
            let Some(path) = ["path", "file_path"]
                .iter()
                .find_map(|k| args.get(*k).and_then(Value::as_str))
                .filter(|p| !p.is_empty())
            else {
                continue;
            };
            match name {
                "read" => {
                    self.read.insert(path.to_owned());
                }
                "write" | "edit" => {
                    self.modified.insert(path.to_owned());
                }
                _ => {}
            }
        }
    }

    /// The sorted lists: read-only files (read and never modified) and modified files.
    pub fn details(&self) -> CompactionDetails {
        CompactionDetails {
            read_files: self
                .read
                .iter()
                .filter(|f| !self.modified.contains(*f))
                .cloned()
                .collect(),
            modified_files: self.modified.iter().cloned().collect(),
        }
    }
}

/// One failed tool call, as the `## Tool Failures` section lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolFailure {
    /// The call id (failures are listed once per call).
    pub tool_call_id: String,
    /// The tool, or `tool` when the result names none.
    pub tool_name: String,
    /// The output, whitespace collapsed, at most 240 characters.
    pub summary: String,
    /// `status=… exitCode=…` from the result's details, when present.
    pub meta: Option<String>,
}

/// The failed tool results of `messages`, once per call id, in order.
pub fn collect_tool_failures<'a>(
    messages: impl IntoIterator<Item = &'a SharedMessage>,
) -> Vec<ToolFailure> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for message in messages {
        let AgentMessage::ToolResult(r) = message.as_ref() else {
            continue;
        };
        if !r.is_error || r.tool_call_id.is_empty() || !seen.insert(r.tool_call_id.clone()) {
            continue;
        }
        let tool_name = if r.tool_name.trim().is_empty() {
            "tool".to_owned()
        } else {
            r.tool_name.clone()
        };
        let meta = r.details.as_ref().and_then(failure_meta);
        let text = message_text(message);
        let normalized = text.split_whitespace().collect::<Vec<_>>().join(" ");
        let summary = if normalized.is_empty() {
            if meta.is_some() {
                "failed"
            } else {
                "failed (no output)"
            }
            .to_owned()
        } else {
            normalized
        };
        out.push(ToolFailure {
            tool_call_id: r.tool_call_id.clone(),
            tool_name,
            summary: truncate_with_dots(&summary, MAX_TOOL_FAILURE_CHARS),
            meta,
        });
    }
    out
}

fn failure_meta(details: &Value) -> Option<String> {
    let mut parts = Vec::new();
    if let Some(status) = details.get("status").and_then(Value::as_str)
        && !status.is_empty()
    {
        parts.push(format!("status={status}"));
    }
    if let Some(code) = details.get("exitCode").filter(|v| v.is_number()) {
        parts.push(format!("exitCode={code}"));
    }
    (!parts.is_empty()).then(|| parts.join(" "))
}

/// `text` cut to `max` characters, the last three replaced by `...` when cut.
pub(crate) fn truncate_with_dots(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let keep: String = text.chars().take(max.saturating_sub(3)).collect();
    format!("{keep}...")
}

/// The `## Tool Failures` section (with its leading blank line), or `""` when none failed.
pub fn format_tool_failures_section(failures: &[ToolFailure]) -> String {
    if failures.is_empty() {
        return String::new();
    }
    let mut lines: Vec<String> = failures
        .iter()
        .take(MAX_TOOL_FAILURES)
        .map(|f| {
            let meta = f
                .meta
                .as_ref()
                .map(|m| format!(" ({m})"))
                .unwrap_or_default();
            format!("- {}{meta}: {}", f.tool_name, f.summary)
        })
        .collect();
    if failures.len() > MAX_TOOL_FAILURES {
        lines.push(format!(
            "- ...and {} more",
            failures.len() - MAX_TOOL_FAILURES
        ));
    }
    format!("\n\n## Tool Failures\n{}", lines.join("\n"))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::compaction::test_support::*;
    use serde_json::json;

    #[test]
    fn file_ops_split_read_only_from_modified() {
        let mut ops = FileOps::new();
        for m in [
            call_with_args("1", "read", json!({"path": "/b.rs"})),
            call_with_args("2", "read", json!({"path": "/a.rs"})),
            call_with_args("3", "edit", json!({"path": "/b.rs"})),
            call_with_args("4", "write", json!({"file_path": "/c.rs"})),
            call_with_args("5", "exec", json!({"path": "/ignored"})),
        ] {
            ops.add_message(&m);
        }
        ops.add_details(&CompactionDetails {
            read_files: vec!["/0.rs".into()],
            modified_files: vec!["/z.rs".into()],
        });
        let d = ops.details();
        assert_eq!(d.read_files, ["/0.rs", "/a.rs"]);
        assert_eq!(d.modified_files, ["/b.rs", "/c.rs", "/z.rs"]);
        let back = CompactionDetails::from_value(&serde_json::to_value(&d).unwrap());
        assert_eq!(back, d);
    }

    #[test]
    fn nine_failures_list_eight_and_one_more() {
        // §13 group 9.
        let msgs = shared(
            (0..9)
                .map(|i| {
                    tool_error(
                        &format!("c{i}"),
                        "exec",
                        "boom   \n failed",
                        Some(json!({"status": "error", "exitCode": 1})),
                    )
                })
                .collect(),
        );
        let section = format_tool_failures_section(&collect_tool_failures(&msgs));
        assert!(section.starts_with("\n\n## Tool Failures\n"));
        assert!(section.contains("- exec (status=error exitCode=1): boom failed"));
        assert!(section.contains("...and 1 more"));
        assert_eq!(
            section.lines().filter(|l| l.starts_with("- exec")).count(),
            8
        );
    }

    #[test]
    fn failure_text_is_capped_and_deduplicated() {
        let msgs = shared(vec![
            tool_error("c1", "", &"x".repeat(500), None),
            tool_error("c1", "read", "again", None),
            tool_error("c2", "read", "", None),
            tool_result("c3", "read", "fine"),
        ]);
        let failures = collect_tool_failures(&msgs);
        assert_eq!(failures.len(), 2);
        assert_eq!(failures[0].tool_name, "tool");
        assert_eq!(failures[0].summary.chars().count(), 240);
        assert!(failures[0].summary.ends_with("..."));
        assert_eq!(failures[1].summary, "failed (no output)");
        assert!(format_tool_failures_section(&[]).is_empty());
    }
}
