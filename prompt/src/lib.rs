//! `rampart-prompt`: the system prompt of an agent, assembled from its workspace files,
//! skills, tools and runtime, the way OpenClaw assembles it, with a breakdown of what each
//! part costs.
//!
//! # Per turn
//!
//! ```no_run
//! use std::sync::Arc;
//! use rampart_prompt::*;
//!
//! # fn turn(cache: &BootstrapCache, key: &str, workspace: &std::path::Path) -> Result<(), BootstrapError> {
//! let mode = mode_for_session(key, false);
//! let bootstrap = cache.get_or_load(&BootstrapRequest::new(workspace, key))?;
//! let skills = Arc::new(discover_skills(&SkillsRequest::new(workspace)));
//! let built = build_system_prompt(&PromptInputs {
//!     mode,
//!     tools: vec![ToolInfo::named("read"), ToolInfo::named("exec")],
//!     skills: Some(skills),
//!     workspace_dir: workspace.to_path_buf(),
//!     bootstrap,
//!     time_zone: Some("Europe/Berlin".into()),
//!     ..PromptInputs::default()
//! });
//! for (kind, text) in built.iter_parts() {
//!     println!("{:>24} {:>7} bytes", kind.label(), text.len());
//! }
//! // The user's message gets the truncation warning, if a file was cut.
//! let lines = cache.warning_lines(key, TruncationWarningMode::Always);
//! let user = append_truncation_warning("hello", &lines, Some(DEFAULT_HEARTBEAT_PROMPT));
//! # let _ = user; Ok(()) }
//! ```
//!
//! # Modules
//! - [`mode`]: full, minimal or none, from the session key;
//! - [`bootstrap`], [`budget`], [`cache`], [`warning`]: the workspace files, their fair budget,
//!   the per-session snapshot, and the truncation warning of the user turn;
//! - [`skills`], [`skills_block`], [`frontmatter`]: the skills catalog;
//! - [`tools`], [`memory`], [`runtime`], [`sections`]: the sections' content;
//! - [`builder`], [`parts`], [`marker`]: assembly, the breakdown, the cache marker and the
//!   engine's addition;
//! - [`silent`]: `NO_REPLY` and `HEARTBEAT_OK`;
//! - [`text`]: lengths in UTF-16 units (as OpenClaw counts), clean-ups.

#![warn(missing_docs)]

pub mod bootstrap;
pub mod budget;
pub mod builder;
pub mod cache;
pub mod error;
pub mod frontmatter;
pub mod inputs;
pub mod marker;
pub mod memory;
pub mod mode;
pub mod parts;
pub mod runtime;
pub mod sections;
pub mod silent;
pub mod skills;
pub mod skills_block;
pub mod text;
pub mod tools;
pub mod warning;

pub use bootstrap::{BootstrapRequest, BootstrapSet, load_bootstrap};
pub use budget::{BootstrapLimits, BootstrapWarning, ContextFile, FileStat, SourceFile};
pub use builder::build_system_prompt;
pub use cache::BootstrapCache;
pub use error::{BootstrapError, ReadProblem, SkillIssue};
pub use inputs::PromptInputs;
pub use marker::{CACHE_BOUNDARY, insert_addition, split_at_cache_boundary, strip_cache_boundary};
pub use memory::{CitationsMode, MemorySection};
pub use mode::{PromptMode, SessionKind, mode_for_session};
pub use parts::{BuiltPrompt, PartKind, PromptPart, Section};
pub use runtime::{ReasoningLevel, RuntimeInfo, find_git_root, runtime_line};
pub use sections::DEFAULT_HEARTBEAT_PROMPT;
pub use silent::{HEARTBEAT_TOKEN, SILENT_REPLY_TOKEN, is_silent_reply, strip_silent_token};
pub use skills::{Skill, SkillCatalog, SkillLimits, SkillSource, SkillsRequest, discover_skills};
pub use skills_block::SkillsBlock;
pub use tools::ToolInfo;
pub use warning::{TruncationWarningMode, WarningLog, append_truncation_warning, truncation_lines};
