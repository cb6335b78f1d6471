//! The engine methods, listed once.
//!
//! Why one list: a method used to be spelled in five places (the name constants, the trait,
//! the dispatch behind `export_engine!`, the host's engine handle and its slot), and a new
//! method meant five edits that could disagree. The table below generates the [`Method`]
//! enum, its wire names, and a [`Call`] impl per method that ties its parameters to its result
//! and to the [`ContextEngine`] method that answers it. The dispatch and the host go through
//! [`Call`] and [`Method::visit`], so the compiler points at every place a new method needs.

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::engine::{CallContext, ContextEngine};
use crate::error::EngineError;
use crate::protocol::*;

/// A method's parameters: which method they are for, what it answers, and how a linked
/// engine answers it. Hosts call any method through this one generic path.
pub trait Call: Serialize + DeserializeOwned + Clone + Send + 'static {
    /// The method these parameters are for.
    const METHOD: Method;
    /// What the method answers.
    type Output: Serialize + DeserializeOwned + Send + 'static;
    /// Calls the method on a linked engine.
    fn invoke(
        self,
        engine: &dyn ContextEngine,
        cx: &CallContext<'_>,
    ) -> Result<Self::Output, EngineError>;
}

/// Something done per method without naming each (see [`Method::visit`]): the dispatch uses it
/// to decode the right parameter type for a method named at run time.
pub trait CallVisitor {
    /// What the visit returns.
    type Out;
    /// Called with the parameter type of the visited method.
    fn visit<C: Call>(self) -> Self::Out;
}

macro_rules! methods {
    ($(
        $(#[$doc:meta])*
        $variant:ident = $name:ident: $params:ty => $output:ty, |$e:ident, $cx:ident, $p:ident| $body:expr;
    )*) => {
        /// An engine method. `#[non_exhaustive]`: later 1.x versions add methods, which older
        /// peers answer `unsupported`.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum Method {
            $( $(#[$doc])* $variant, )*
        }

        impl Method {
            /// Every method of this version, in the order of OpenClaw's interface.
            pub const ALL: &'static [Method] = &[$(Method::$variant),*];

            /// The name it travels under in `call(method, json)`.
            pub const fn name(self) -> &'static str {
                match self {
                    $(Method::$variant => method::$name,)*
                }
            }

            /// The method of a wire name; `None` for a name this version does not know (a
            /// method from a later version, which the callee answers `unsupported`).
            pub fn from_name(name: &str) -> Option<Self> {
                match name {
                    $(method::$name => Some(Method::$variant),)*
                    _ => None,
                }
            }

            /// Calls `visitor` with this method's parameter type.
            pub fn visit<V: CallVisitor>(self, visitor: V) -> V::Out {
                match self {
                    $(Method::$variant => visitor.visit::<$params>(),)*
                }
            }
        }

        $(
            impl Call for $params {
                const METHOD: Method = Method::$variant;
                type Output = $output;
                fn invoke(
                    self,
                    $e: &dyn ContextEngine,
                    $cx: &CallContext<'_>,
                ) -> Result<$output, EngineError> {
                    let $p = self;
                    $body
                }
            }
        )*
    };
}

methods! {
    /// One-time set-up for a session whose file already existed.
    Bootstrap = BOOTSTRAP: BootstrapParams => BootstrapResult, |e, cx, p| e.bootstrap(cx, p);
    /// One message arrives; the engine may replace it (the tool-result cap lives here).
    Ingest = INGEST: IngestParams => IngestResult, |e, cx, p| e.ingest(cx, p);
    /// Several messages arrive at once (after a turn).
    IngestBatch = INGEST_BATCH: IngestBatchParams => IngestBatchResult,
        |e, cx, p| e.ingest_batch(cx, p);
    /// Build the messages of the next model request within a token budget.
    Assemble = ASSEMBLE: AssembleParams => AssembleResult, |e, cx, p| e.assemble(cx, p);
    /// Reduce the session (summarise) because it overflowed or was asked to.
    Compact = COMPACT: CompactParams => CompactResult, |e, cx, p| e.compact(cx, p);
    /// Housekeeping after a turn, a bootstrap or a compaction.
    Maintain = MAINTAIN: MaintainParams => TranscriptRewriteResult, |e, cx, p| e.maintain(cx, p);
    /// The turn finished; the engine sees everything that happened in it.
    AfterTurn = AFTER_TURN: AfterTurnParams => AfterTurnResult, |e, cx, p| e.after_turn(cx, p);
    /// A child agent is about to be spawned from this session.
    PrepareSubagentSpawn = PREPARE_SUBAGENT_SPAWN: PrepareSubagentSpawnParams
        => PrepareSubagentSpawnResult, |e, cx, p| e.prepare_subagent_spawn(cx, p);
    /// A child agent ended.
    OnSubagentEnded = ON_SUBAGENT_ENDED: SubagentEndedParams => Empty,
        |e, cx, p| e.on_subagent_ended(cx, p).map(|()| Empty {});
    /// The engine is being retired; release resources. Its parameters are [`Empty`].
    Dispose = DISPOSE: Empty => Empty, |e, _cx, _p| e.dispose().map(|()| Empty {});
    /// A memory engine finds passages (the `memory_search` tool).
    MemorySearch = MEMORY_SEARCH: crate::memory::MemorySearchParams
        => crate::memory::MemorySearchResult, |e, cx, p| e.memory_search(cx, p);
    /// A memory engine reads lines of a memory file (the `memory_get` tool).
    MemoryGet = MEMORY_GET: crate::memory::MemoryGetParams
        => crate::memory::MemoryGetResult, |e, cx, p| e.memory_get(cx, p);
    /// A memory engine brings its index up to date.
    MemorySync = MEMORY_SYNC: crate::memory::MemorySyncParams
        => crate::memory::MemorySyncResult, |e, cx, p| e.memory_sync(cx, p);
    /// A memory engine says what it holds. Its parameters are [`MemoryStatusParams`].
    MemoryStatus = MEMORY_STATUS: MemoryStatusParams
        => crate::memory::MemoryStatus, |e, cx, _p| e.memory_status(cx);
    /// The tools an engine offers the model (API 1.2).
    ToolsList = TOOLS_LIST: crate::tools::ToolsListParams
        => crate::tools::ToolsListResult, |e, cx, p| e.tools_list(cx, p);
    /// One call the model made of an engine tool (API 1.2).
    ToolsCall = TOOLS_CALL: crate::tools::ToolCallParams
        => crate::tools::ToolCallResult, |e, cx, p| e.tools_call(cx, p);
}

/// Parameters of `memory.status` (none; a type of its own so the method table can name it).
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct MemoryStatusParams {}

impl std::fmt::Display for Method {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Parses a wire name, so a method name read from anywhere (a config, a log, a `call`) becomes
/// a [`Method`] with `?`. The error is the answer a callee gives for that name: a method this
/// version does not know (one from a later 1.x) is [`crate::ErrorKind::Unsupported`], never a
/// failure of another kind. Same as [`Method::from_name`].
impl std::str::FromStr for Method {
    type Err = EngineError;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Method::from_name(name).ok_or_else(|| EngineError::unsupported(name))
    }
}

/// A method serialises as its wire name, so a method in a JSON record (a quarantine, an event,
/// a recording) reads the same as the name `call` carries.
impl Serialize for Method {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

/// Reads a wire name back. A name this version does not know is an error that lists the known
/// ones, since [`Method`] has no variant for it; code that must tolerate methods from later
/// versions keeps the name as a string and uses [`Method::from_name`].
impl<'de> serde::Deserialize<'de> for Method {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = <std::borrow::Cow<'de, str> as serde::Deserialize>::deserialize(deserializer)?;
        Method::from_name(&name)
            .ok_or_else(|| serde::de::Error::unknown_variant(&name, method::ALL))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "method_tests.rs"]
mod tests;
