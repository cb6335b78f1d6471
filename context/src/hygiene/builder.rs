//! Copy-on-first-change construction of a pass's output list.
//!
//! Every hygiene pass walks its input once and says, message by message, what goes into the
//! output: an input message kept as it is ([`ListBuilder::keep`]) or a new one
//! ([`ListBuilder::push`]). While the output is still a prefix of the input nothing is
//! allocated, not even the output vector: the builder only counts. At the first deviation (a
//! dropped, moved or replaced message) it copies the prefix's `Arc`s once and appends from then
//! on. So a pass over a clean transcript costs one read of the list and returns the very same
//! list, which is what the ABI's pointer-identity deltas and the per-turn budget need.

use rampart_message::{MessageList, SharedMessage};

/// The output of one pass under construction. See the module docs for why it is lazy.
pub(crate) struct ListBuilder<'a> {
    input: &'a MessageList,
    /// `None` while the output equals `input[..next]`.
    out: Option<Vec<SharedMessage>>,
    /// Length of the output so far while it is still a prefix of the input.
    next: usize,
}

impl<'a> ListBuilder<'a> {
    pub(crate) fn new(input: &'a MessageList) -> Self {
        Self {
            input,
            out: None,
            next: 0,
        }
    }

    /// Appends the input message at `index`, shared (its `Arc` is cloned, never the message).
    #[inline]
    pub(crate) fn keep(&mut self, index: usize) {
        match &mut self.out {
            None if index == self.next => self.next += 1,
            None => {
                let mut out = self.materialise();
                out.push(self.input[index].clone());
                self.out = Some(out);
            }
            Some(out) => out.push(self.input[index].clone()),
        }
    }

    /// Appends a message that is not the input's (a replacement or an insertion).
    pub(crate) fn push(&mut self, message: SharedMessage) {
        match &mut self.out {
            Some(out) => out.push(message),
            None => {
                let mut out = self.materialise();
                out.push(message);
                self.out = Some(out);
            }
        }
    }

    /// True once the output differs from the input's prefix.
    #[cfg(test)]
    pub(crate) fn diverged(&self) -> bool {
        self.out.is_some()
    }

    /// The finished list: the input itself when every message was kept in place.
    pub(crate) fn finish(self) -> MessageList {
        match self.out {
            Some(out) => out.into(),
            None if self.next == self.input.len() => self.input.clone(),
            None => self.input[..self.next].to_vec().into(),
        }
    }

    #[cold]
    fn materialise(&self) -> Vec<SharedMessage> {
        // One spare slot: the common divergence is a single inserted message.
        let mut out = Vec::with_capacity(self.input.len() + 1);
        out.extend_from_slice(&self.input[..self.next]);
        out
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use rampart_message::AgentMessage;

    fn list(n: usize) -> MessageList {
        (0..n)
            .map(|i| Arc::new(AgentMessage::user_text(format!("m{i}"), i as u64)))
            .collect()
    }

    #[test]
    fn keeping_everything_in_place_returns_the_same_list() {
        let input = list(3);
        let mut b = ListBuilder::new(&input);
        (0..3).for_each(|i| b.keep(i));
        assert!(!b.diverged());
        assert!(MessageList::same_list(&b.finish(), &input));
    }

    #[test]
    fn a_dropped_tail_is_a_prefix_and_a_drop_in_the_middle_copies() {
        let input = list(3);
        let mut b = ListBuilder::new(&input);
        b.keep(0);
        b.keep(1);
        let out = b.finish();
        assert_eq!(out.len(), 2);
        assert!(Arc::ptr_eq(&out[1], &input[1]));

        let mut b = ListBuilder::new(&input);
        b.keep(0);
        b.keep(2);
        let out = b.finish();
        assert_eq!(out.len(), 2);
        assert!(Arc::ptr_eq(&out[1], &input[2]));
    }

    #[test]
    fn reordering_and_pushing_share_untouched_messages() {
        let input = list(3);
        let mut b = ListBuilder::new(&input);
        b.keep(0);
        b.keep(2);
        b.push(Arc::new(AgentMessage::user_text("new", 9)));
        b.keep(1);
        let out = b.finish();
        assert_eq!(out.len(), 4);
        assert!(Arc::ptr_eq(&out[0], &input[0]));
        assert!(Arc::ptr_eq(&out[1], &input[2]));
        assert!(Arc::ptr_eq(&out[3], &input[1]));
    }
}
