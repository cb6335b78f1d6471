//! `rampart compact SESSION [--instructions TEXT]`: one compaction on demand, through the
//! session's lane, so it never runs beside a turn of its own session.
//!
//! Exit codes: 0 when something was compacted; 1 when nothing was (the engine's reason is on
//! stderr).

use std::io::Write;

use anyhow::Context;
use rampart_sessions::lanes::Lanes;
use rampart_sessions::store::SessionStore;
use rampart_sessions::{Session, SessionOptions};

use super::session_host::{hint, host};
use super::sessions::{find_session, no_such_session};
use crate::config::Config;
use crate::engine::services::EventSink;
use crate::run::TurnError;
use crate::run::events::{CompactionEnd, Event};

/// `rampart compact SESSION [--instructions TEXT]`: compacts now, through the session's lane.
pub fn compact(
    config: &Config,
    store: &SessionStore,
    events: EventSink,
    id: &str,
    instructions: Option<&str>,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> anyhow::Result<i32> {
    let Some(found) = find_session(store, id)? else {
        writeln!(err, "error: {}", no_such_session(store, id)?)?;
        return Ok(1);
    };
    let lane_key = found
        .key
        .clone()
        .unwrap_or_else(|| found.file.display().to_string());
    let lanes = Lanes::new(1);
    lanes.run(&lane_key, || {
        let mut session = Session::open(&found.file, SessionOptions::default())
            .with_context(|| format!("cannot open session `{id}`"))?;
        let host = host(config, store, &events)?;
        // Held for the whole compaction, as a turn holds it: a turn of another process must
        // not land between reading the branch and writing its summary.
        if let Err(e) = session.hold(config.session.write_lock_timeout) {
            host.slot.shutdown();
            writeln!(err, "error: session `{id}`: {e}")?;
            return Ok(1);
        }
        let mut runner = host.runner(config, store, &events, &session, found.key.as_deref())?;
        let result = runner.compact_now(&mut session, instructions.map(str::to_string));
        runner.flush_registry();
        let end: CompactionEnd = runner
            .events()
            .drain()
            .iter()
            .rev()
            .find_map(|e| match e.event() {
                Some(Event::CompactionEnd(end)) => Some(end),
                _ => None,
            })
            .unwrap_or_default();
        let engine = host.slot.active().id().to_string();
        host.slot.shutdown();
        match result {
            Ok(true) => {
                let figure = |n: Option<u64>| n.map_or("?".to_string(), |n| n.to_string());
                writeln!(
                    out,
                    "compacted session `{id}` with engine {engine}: {} → {} tokens{}",
                    figure(end.tokens_before),
                    figure(end.tokens_after),
                    end.summary_chars
                        .map(|c| format!(", summary of {c} characters"))
                        .unwrap_or_default()
                )?;
                Ok(0)
            }
            Ok(false) => {
                let why = end
                    .why
                    .unwrap_or_else(|| "the engine gave no reason".to_string());
                writeln!(
                    err,
                    "nothing compacted in session `{id}`: engine {engine} says: {why}"
                )?;
                Ok(1)
            }
            Err(TurnError::CompactionFailed { reason }) => {
                writeln!(
                    err,
                    "error: engine {engine} could not compact session `{id}`: {reason}; the \
                     session is unchanged"
                )?;
                Ok(1)
            }
            Err(e) => {
                writeln!(err, "error: {e}")?;
                if let Some(h) = hint(&e, config) {
                    writeln!(err, "{h}")?;
                }
                Ok(1)
            }
        }
    })
}
