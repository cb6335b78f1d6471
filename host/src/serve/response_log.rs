//! The Responses answers serve gave, by id, so a request's `previous_response_id` continues the
//! conversation it names.
//!
//! Why here and not upstream: the id a Responses client holds is serve's (`resp_rampart_…`);
//! the upstream never saw it, and a chat or Anthropic upstream has no such thing. serve keeps,
//! for each answer a client asked to be stored (`store` not `false`, OpenAI's default), the
//! conversation it belongs to and the messages it answered plus the answer. A request naming
//! one is read as that history followed by its `input`; one naming an id serve does not hold,
//! or one of another conversation, is refused with a 400 that says why, never answered as if it
//! started afresh. The log is in memory and bounded ([`CAPACITY`] answers, the oldest
//! forgotten first; also past [`MAX_MESSAGES`] messages held together): an id from before a
//! restart is unknown, and the refusal says so.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use rampart_message::SharedMessage;

/// How many answers are remembered.
pub const CAPACITY: usize = 256;

/// How many messages the remembered answers may hold together: each holds its whole history,
/// so a client that re-sends long histories with `store` left on would otherwise keep
/// [`CAPACITY`] copies of them. Past it the oldest answers are forgotten, the newest kept.
pub const MAX_MESSAGES: usize = 20_000;

/// One remembered answer.
#[derive(Debug, Clone)]
pub struct StoredResponse {
    /// The conversation label it was given in (a client's root key, or `unnamed`).
    pub conversation: String,
    /// The messages it answered, then the answer.
    pub messages: Arc<Vec<SharedMessage>>,
}

/// Why a `previous_response_id` cannot be used; the text is the client's 400.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PreviousResponseError {
    /// Not a string.
    #[error("`previous_response_id` must be a string, the `id` of an earlier response")]
    NotAString,
    /// Never given, forgotten, or not stored.
    #[error(
        "`previous_response_id` {0:?} is not a response this server holds: rampart serve keeps \
         the last {CAPACITY} answers in memory, not those asked with `store: false`, and none \
         from before a restart or from another server; send the whole conversation in `input` \
         instead"
    )]
    Unknown(String),
    /// Given in another conversation than the request's.
    #[error(
        "`previous_response_id` {id:?} belongs to another conversation than this request's \
         ({theirs:?}, not {ours:?}); continue a conversation with an id it gave, or send the \
         whole conversation in `input`"
    )]
    OtherConversation {
        /// The id.
        id: String,
        /// The conversation it was given in.
        theirs: String,
        /// The request's.
        ours: String,
    },
}

/// The answers remembered, oldest first for eviction.
#[derive(Debug, Default)]
pub struct ResponseLog {
    inner: Mutex<Entries>,
}

#[derive(Debug, Default)]
struct Entries {
    by_id: HashMap<String, StoredResponse>,
    /// Ids, oldest first.
    order: VecDeque<String>,
    /// The messages the answers hold together.
    messages: usize,
}

impl ResponseLog {
    /// Remembers the answer `id`, forgetting the oldest past [`CAPACITY`] answers or
    /// [`MAX_MESSAGES`] messages (the newest answer is always kept).
    pub fn remember(&self, id: &str, stored: StoredResponse) {
        let mut entries = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        entries.messages += stored.messages.len();
        match entries.by_id.insert(id.to_owned(), stored) {
            Some(old) => entries.messages -= old.messages.len(),
            None => entries.order.push_back(id.to_owned()),
        }
        while entries.order.len() > 1
            && (entries.order.len() > CAPACITY || entries.messages > MAX_MESSAGES)
        {
            let Some(oldest) = entries.order.pop_front() else {
                break;
            };
            if let Some(old) = entries.by_id.remove(&oldest) {
                entries.messages -= old.messages.len();
            }
        }
    }

    /// The answer `previous_response_id` names, for a request of `conversation` (`None` when
    /// the request names none, which any remembered answer fits).
    pub fn resolve(
        &self,
        previous: &serde_json::Value,
        conversation: Option<&str>,
    ) -> Result<StoredResponse, PreviousResponseError> {
        let id = previous.as_str().ok_or(PreviousResponseError::NotAString)?;
        let entries = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let stored = entries
            .by_id
            .get(id)
            .cloned()
            .ok_or_else(|| PreviousResponseError::Unknown(id.to_owned()))?;
        match conversation {
            Some(ours) if ours != stored.conversation => {
                Err(PreviousResponseError::OtherConversation {
                    id: id.to_owned(),
                    theirs: stored.conversation,
                    ours: ours.to_owned(),
                })
            }
            _ => Ok(stored),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "response_log_tests.rs"]
mod tests;
