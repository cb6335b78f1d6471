//! Where a provider reports the opaque messages ([`rampart_message::opaque`]) it left out.
//!
//! An opaque message is a client's item pi has no type for, kept whole. The provider speaking
//! the wire it came from writes it back as it was; every other provider leaves it out, since
//! its wire has no form for it (sent as text it would put words in the model's mouth the client
//! never meant for it), and says so through the request's [`UnsentSink`]: `rampart serve`
//! counts it in `/metrics` and warns once per conversation. Which wire sends which message is
//! [`super::sent_on`].

use std::sync::Arc;

/// Where a provider reports the opaque messages it left out of one upstream request, with the
/// upstream's wire (pi's `api` name). Why a sink on the request and not a global counter:
/// `rampart serve` warns once per conversation, and only it knows the conversation.
#[derive(Clone)]
pub struct UnsentSink(Arc<UnsentFn>);

/// What an [`UnsentSink`] calls: the upstream's wire and how many messages were left out.
type UnsentFn = dyn Fn(&str, u64) + Send + Sync;

impl UnsentSink {
    /// A sink calling `f` with the upstream's wire and the number of messages left out.
    pub fn new(f: impl Fn(&str, u64) + Send + Sync + 'static) -> Self {
        Self(Arc::new(f))
    }

    /// Reports `count` opaque messages left out of a request to a `wire` upstream; nothing
    /// when none was.
    pub fn left_out(&self, wire: &str, count: u64) {
        if count > 0 {
            (self.0)(wire, count);
        }
    }
}

impl std::fmt::Debug for UnsentSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("UnsentSink")
    }
}

impl PartialEq for UnsentSink {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}
