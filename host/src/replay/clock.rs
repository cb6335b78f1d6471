//! A replay's time and names, taken from the transcript instead of the machine.
//!
//! Why: a replay is a measurement, and the same transcript, config and engine must give the
//! same `--requests-out`, `--json` and `--events`, byte for byte, so two runs (or two engine
//! versions) can be compared with `cmp` and `diff`. Everything a replay writes that would
//! otherwise come from the wall clock or a random source comes from here:
//!
//! - **the clock** ([`ScriptedStamps`]) starts at the first recorded time and moves to each
//!   recorded message's time as the replay reaches it; the run loop's decisions (the pruning
//!   TTL gate, the memory note's day) and the session's entry times follow it;
//! - **entry ids** are counted (`00000001`, …) instead of drawn;
//! - **the session id** is a digest of the replayed history and its registry key.
//!
//! Wall-clock durations are not derived from anything: they are measurements, and they leave
//! the JSON and the events unless `--timings` asks for them (see [`super::json`]).

use std::sync::Arc;

use rampart_sessions::stamps::{ScriptedStamps, Stamps};
use sha2::{Digest, Sha256};

use super::source::Recorded;

/// The clock of a replay of `recorded`: standing at its first recorded time (the Unix epoch
/// when no message has one, as imported formats without times leave them).
pub fn start(recorded: &Recorded) -> Arc<ScriptedStamps> {
    let first = recorded
        .messages
        .iter()
        .filter_map(|m| m.timestamp())
        .find(|t| *t > 0)
        .unwrap_or(0);
    Arc::new(ScriptedStamps::new(first))
}

/// The stamps a replay's session is written with.
pub fn stamps(clock: &Arc<ScriptedStamps>) -> Stamps {
    Stamps::Scripted(Arc::clone(clock))
}

/// The id of the replay's session of `recorded` registered as `key`: a uuid-shaped digest of
/// the history, the system prompt and the key. `attempt` (from 0) gives another id for the
/// same replay when a file of the first one's name is already there (a `--sessions-dir`
/// whose registry forgot a session it kept).
pub fn session_id(recorded: &Recorded, key: &str, attempt: u32) -> String {
    let mut hash = Sha256::new();
    hash.update(key.as_bytes());
    hash.update([0]);
    hash.update(recorded.system_prompt.as_deref().unwrap_or("").as_bytes());
    hash.update([0]);
    for message in &recorded.messages {
        // Messages serialise infallibly; an empty line would only weaken the digest.
        hash.update(serde_json::to_vec(&**message).unwrap_or_default());
        hash.update([b'\n']);
    }
    hash.update(attempt.to_le_bytes());
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&hash.finalize()[..16]);
    // Shaped as a version 4 uuid, as pi's session ids are (pi only checks the shape).
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

#[cfg(test)]
#[path = "clock_tests.rs"]
mod tests;
