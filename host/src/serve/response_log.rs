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
//! forgotten first): an id from before a restart is unknown, and the refusal says so.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use rampart_message::AgentMessage;

/// How many answers are remembered.
pub const CAPACITY: usize = 256;

/// One remembered answer.
#[derive(Debug, Clone)]
pub struct StoredResponse {
    /// The conversation label it was given in (a client's root key, or `unnamed`).
    pub conversation: String,
    /// The messages it answered, then the answer.
    pub messages: Arc<Vec<AgentMessage>>,
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
    inner: Mutex<(HashMap<String, StoredResponse>, VecDeque<String>)>,
}

impl ResponseLog {
    /// Remembers the answer `id`, forgetting the oldest past [`CAPACITY`].
    pub fn remember(&self, id: &str, stored: StoredResponse) {
        let mut guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let (map, order) = &mut *guard;
        if map.insert(id.to_owned(), stored).is_none() {
            order.push_back(id.to_owned());
        }
        while order.len() > CAPACITY {
            if let Some(old) = order.pop_front() {
                map.remove(&old);
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
        let guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let stored = guard
            .0
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
