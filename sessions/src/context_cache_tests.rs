//! The context a session keeps and extends is the context a build from the root gives, after
//! every kind of change a session sees, in random order.

use rampart_message::{AgentMessage, Content};

use super::{LeafSelector, build_session_context};
use crate::entry::SessionHeader;
use crate::medium::MemoryMedium;
use crate::session::{Session, SessionOptions};

/// A small deterministic generator (xorshift), so a failure names its seed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

fn reply(text: &str, model: &str) -> AgentMessage {
    AgentMessage::assistant_text(text, "openai-completions", "p", model, 2)
}

#[test]
fn the_kept_context_is_the_built_context_after_any_change() {
    for seed in 1..=60u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let medium = MemoryMedium::new(format!("memory:context-{seed}"));
        let mut session = Session::create_on(
            Box::new(medium),
            SessionHeader::new("/w"),
            SessionOptions::default(),
        )
        .unwrap();
        let mut ids: Vec<String> = Vec::new();
        for step in 0..120 {
            let id = match rng.below(20) {
                0..=6 => {
                    Some(session.append_message(AgentMessage::user_text(format!("q{step}"), 1)))
                }
                7..=12 => Some(session.append_message(reply(&format!("a{step}"), "m1"))),
                13 => Some(session.append_model_change("p", format!("m{step}"))),
                14 => Some(session.append_thinking_level_change(["low", "high"][step % 2])),
                15 => Some(session.append_custom_message(
                    "note",
                    Content::Text(format!("note {step}")),
                    true,
                    None,
                )),
                16 if !ids.is_empty() => {
                    let kept = ids[rng.below(ids.len() as u64) as usize].clone();
                    Some(session.append_compaction(
                        format!("summary {step}"),
                        kept,
                        100,
                        None,
                        None,
                    ))
                }
                17 if !ids.is_empty() => {
                    let at = ids[rng.below(ids.len() as u64) as usize].clone();
                    session.branch(&at).unwrap();
                    None
                }
                18 if !ids.is_empty() => {
                    let at = ids[rng.below(ids.len() as u64) as usize].clone();
                    Some(session.branch_with_summary(Some(&at), format!("left {step}"), None, None))
                }
                _ => Some(session.append_custom("state", None)),
            };
            if let Some(id) = id {
                ids.push(id.unwrap());
            }
            let built = build_session_context(session.tree(), LeafSelector::Current);
            assert_eq!(session.context(), built, "seed {seed}, step {step}");
            // Asked again with nothing new: the same.
            assert_eq!(session.context(), built, "seed {seed}, step {step}, again");
        }
    }
}

/// A branch that only grows is extended, not rebuilt: its messages are the tree's own
/// allocations, shared with the previous context's.
#[test]
fn a_growing_branch_extends_the_last_context() {
    let mut session = Session::create_on(
        Box::new(MemoryMedium::new("memory:growing")),
        SessionHeader::new("/w"),
        SessionOptions::default(),
    )
    .unwrap();
    session
        .append_message(AgentMessage::user_text("first", 1))
        .unwrap();
    let before = session.context();
    session.append_message(reply("second", "m1")).unwrap();
    let after = session.context();
    assert_eq!(after.messages.len(), 2);
    assert!(std::sync::Arc::ptr_eq(
        &before.messages[0],
        &after.messages[0]
    ));
    assert_eq!(
        after.model.as_ref().map(|m| m.model_id.as_str()),
        Some("m1")
    );
}
