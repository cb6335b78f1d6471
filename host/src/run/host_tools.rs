//! Tools the host answers itself: the memory slot's (`memory_search`, `memory_get`) and the
//! context engine's own (engine API 1.2, `tools.list` / `tools.call`).
//!
//! Why one home: `rampart run` and `rampart serve` both offer such tools to the model, and when
//! the model calls only them, answer the calls and call the model again, up to a bound. Before
//! engine tools this loop existed for the memory tools alone; with a second source of tools the
//! loop, the name clash rules and the bound live here once, and each source keeps only how it
//! answers a call.
//!
//! Name clashes, in order of precedence: a tool the client declares is the client's (the host
//! offers none of that name, and never answers a call of it); then the memory tools; then the
//! engine's. A dropped engine tool is logged with its name.

use rampart_engine_api::protocol::SessionRef;
use rampart_engine_api::tools::{EngineTool, ToolCallParams};
use rampart_message::{AgentMessage, ToolCall};
use serde_json::Value;

use crate::engine::slot::{EngineSlot, SlotCallError};
use crate::memory::slot::MemorySlot;
use crate::memory::tools::{is_memory_tool, tool_specs as memory_tool_specs};
use crate::providers::ToolSpec;

/// Model calls one turn makes at most while the model keeps calling host tools: enough to
/// search, read and answer a few times over, and a bound on a model that loops.
pub const MAX_TOOL_STEPS: usize = 8;

/// The tools the host answers in one turn, and who answers each.
pub struct HostTools<'a> {
    memory: Option<&'a MemorySlot>,
    engine: Option<(&'a EngineSlot, SessionRef)>,
    engine_tools: Vec<EngineTool>,
}

impl<'a> HostTools<'a> {
    /// No tools: the loop returns the first answer as it is.
    pub fn none() -> Self {
        Self {
            memory: None,
            engine: None,
            engine_tools: Vec::new(),
        }
    }

    /// Offers the memory tools, when the memory slot is on.
    pub fn with_memory(mut self, slot: &'a MemorySlot) -> Self {
        if slot.is_on() {
            self.memory = Some(slot);
            // The memory tools win a name both offer, whichever was added first.
            self.engine_tools.retain(|t| !is_memory_tool(&t.name));
        }
        self
    }

    /// Offers the tools the context engine lists for `session` (none from an engine without
    /// them). A listing that fails quarantines the engine like any call and offers nothing.
    pub fn with_engine(mut self, slot: &'a EngineSlot, session: SessionRef) -> Self {
        match slot.tools_list(session.clone()) {
            Ok(tools) => {
                self.engine_tools = tools
                    .into_iter()
                    .filter(|t| {
                        let clash = self.memory.is_some() && is_memory_tool(&t.name);
                        if clash {
                            tracing::warn!(tool = %t.name,
                                "engine tool not offered: the memory tool of that name is");
                        }
                        !clash
                    })
                    .collect();
                self.engine = Some((slot, session));
            }
            Err(e) => {
                tracing::warn!(error = %e, "the engine's tools could not be listed; none offered");
            }
        }
        self
    }

    /// Leaves out every tool whose name the client declares: those calls are the client's.
    pub fn without_client_tools(mut self, client: &[ToolSpec]) -> Self {
        let declared = |name: &str| client.iter().any(|t| t.name == name);
        if self.memory.is_some()
            && (declared(rampart_memory::tools::MEMORY_SEARCH)
                || declared(rampart_memory::tools::MEMORY_GET))
        {
            // The memory tools travel as a pair: a client that has one of them has its own.
            self.memory = None;
        }
        self.engine_tools.retain(|t| {
            let mine = !declared(&t.name);
            if !mine {
                tracing::debug!(tool = %t.name, "engine tool not offered: the client declares one of that name");
            }
            mine
        });
        self
    }

    /// True when no tool is offered.
    pub fn is_empty(&self) -> bool {
        self.memory.is_none() && self.engine_tools.is_empty()
    }

    /// The offered tools, as the model is offered them: the memory tools, then the engine's.
    pub fn specs(&self) -> Vec<ToolSpec> {
        let mut specs = if self.memory.is_some() {
            memory_tool_specs()
        } else {
            Vec::new()
        };
        specs.extend(self.engine_tools.iter().map(|t| ToolSpec {
            name: t.name.clone(),
            description: Some(t.description.clone()),
            parameters: t.parameters.clone(),
        }));
        specs
    }

    /// The names of the offered tools.
    pub fn names(&self) -> Vec<String> {
        self.specs().into_iter().map(|s| s.name).collect()
    }

    /// Whether the host answers a call of `name`.
    pub fn answers(&self, name: &str) -> bool {
        (self.memory.is_some() && is_memory_tool(name))
            || self.engine_tools.iter().any(|t| t.name == name)
    }

    /// The answer to one call, as the tool result's text and whether it is an error. `None`
    /// for a tool the host does not answer.
    pub fn answer(&self, call: &ToolCall, session_key: Option<&str>) -> Option<(String, bool)> {
        if let Some(memory) = self.memory
            && is_memory_tool(&call.name)
        {
            let text =
                crate::memory::tools::call_tool(memory, &call.name, &call.arguments, session_key)
                    .unwrap_or_default();
            return Some((text, false));
        }
        let (slot, session) = self.engine.as_ref()?;
        if !self.engine_tools.iter().any(|t| t.name == call.name) {
            return None;
        }
        let params = ToolCallParams {
            session: session.clone(),
            name: call.name.clone(),
            arguments: call.arguments.clone(),
            call_id: call.id.clone(),
        };
        Some(match slot.tools_call(params) {
            Ok(result) => (result.content, result.is_error),
            Err(SlotCallError::Cancelled(e)) => (format!("{}: cancelled ({e})", call.name), true),
            Err(e) => (
                format!("{}: the engine failed to answer ({e})", call.name),
                true,
            ),
        })
    }
}

/// The turn's answer `first`, then, while the model calls only host tools (at most
/// [`MAX_TOOL_STEPS`] model calls in all), their answers appended as tool results and the
/// model called again. A call of any other tool ends the loop: the caller's client (or, for
/// `rampart run`, the turn's end) deals with it. `before_answering` runs before each step is
/// answered (serve drops the step's held stream); `mark`, when given, is set to `true` on
/// each result (serve's [`crate::serve::history::SERVER_TOOL_MARK`]).
pub fn answer_host_tool_calls(
    runner: &mut crate::run::Runner<'_>,
    session: &mut rampart_sessions::Session,
    tools: &HostTools<'_>,
    session_key: Option<&str>,
    first: Result<crate::run::TurnReport, crate::run::TurnError>,
    mut before_answering: impl FnMut(),
    mark: Option<&str>,
) -> Result<crate::run::TurnReport, crate::run::TurnError> {
    let mut result = first;
    if tools.is_empty() {
        return result;
    }
    for _ in 1..MAX_TOOL_STEPS {
        let Ok(report) = &result else { break };
        let calls = crate::memory::flush::tool_calls(&report.reply);
        if calls.is_empty() || !calls.iter().all(|c| tools.answers(&c.name)) {
            break;
        }
        before_answering();
        for call in calls {
            let Some((text, is_error)) = tools.answer(&call, session_key) else {
                break;
            };
            tracing::info!(tool = %call.name, call = %call.id, bytes = text.len(), is_error,
                "host tool answered");
            let now = rampart_sessions::store::now_unix_ms();
            let mut answer = AgentMessage::tool_result(&call.id, &call.name, text, is_error, now);
            if let (Some(mark), AgentMessage::ToolResult(r)) = (mark, &mut answer) {
                r.extra.insert(mark.to_owned(), Value::Bool(true));
            }
            runner.append(session, answer)?;
        }
        result = runner.run_turn(session, None);
    }
    result
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "host_tools_tests.rs"]
mod tests;
