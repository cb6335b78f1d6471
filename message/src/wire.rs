//! Shared message lists, and how they cross the ABI as deltas.
//!
//! Why: `assemble` receives the whole history on every turn. Re-encoding 10,000 messages as
//! JSON on each call would make an engine in a library many times slower than the same engine
//! linked in, and a turn would cost O(bytes of history) instead of O(new messages). Messages are
//! shared (`Arc<AgentMessage>`) and lists are shared ([`MessageList`]), so an unchanged message
//! is the same allocation turn after turn, and a list is passed to a linked engine without
//! touching its messages.
//!
//! Between a host and an engine in a library that both announced
//! `Feature::MessageRefs` of the engine protocol, a list in a request is sent as a delta against
//! the list of the previous request, which the engine kept:
//!
//! ```json
//! {"gen": 8, "base": 7, "keep": 9990, "items": [{"role": "user", …}, [12, 3]]}
//! ```
//!
//! - `gen` names this list; the engine remembers it under that number;
//! - `base` is the list it is relative to; the engine refuses a base it does not hold (the host
//!   then sends the list in full);
//! - `keep` leading messages of the base are kept as they are;
//! - `items` follow: message objects, or `[start, len]` runs of the base.
//!
//! A list in a response is a delta against the request's list, without `gen` and `base`. Without
//! an active table (session files, tests, peers that did not announce the feature) a list is a
//! plain JSON array of messages.
//!
//! When the history only grew, the engine extends its kept list in place: the cost of a call is
//! the pointer comparison on the host side plus the new messages, not the history.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use serde::de::{self, MapAccess, SeqAccess, Visitor, value::MapAccessDeserializer};
use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::AgentMessage;

/// A message shared between the host's pipeline and engines without copying.
pub type SharedMessage = Arc<AgentMessage>;

/// An immutable, cheaply cloned list of shared messages: what `assemble` receives and returns.
/// It dereferences to a slice; build one from a `Vec` with `.into()` or `collect()`.
#[derive(Clone, Default, PartialEq)]
pub struct MessageList(Arc<Vec<SharedMessage>>);

impl MessageList {
    /// An empty list.
    pub fn new() -> Self {
        Self::default()
    }

    /// A copy of the list as a `Vec` (the messages themselves are shared, not copied).
    pub fn to_vec(&self) -> Vec<SharedMessage> {
        self.0.as_ref().clone()
    }

    /// The list as a `Vec`, without copying when this is the only handle to it.
    pub fn into_vec(self) -> Vec<SharedMessage> {
        Arc::try_unwrap(self.0).unwrap_or_else(|shared| shared.as_ref().clone())
    }

    /// True when both handles share one list (not just equal contents).
    pub fn same_list(a: &MessageList, b: &MessageList) -> bool {
        Arc::ptr_eq(&a.0, &b.0)
    }

    /// True when this list starts with every message of `earlier`, the very same allocations
    /// in the same order (then, possibly, more): what a history that only grew since gives.
    ///
    /// Why: a pass that kept its result for `earlier` can resume from it and read only the new
    /// messages. Costs a pointer comparison per message of `earlier`; `earlier` is held, so
    /// its allocations cannot have been reused by other messages.
    pub fn extends(&self, earlier: &MessageList) -> bool {
        Self::same_list(self, earlier)
            || (self.len() >= earlier.len()
                && self
                    .iter()
                    .zip(earlier.iter())
                    .all(|(a, b)| Arc::ptr_eq(a, b)))
    }
}

impl Deref for MessageList {
    type Target = [SharedMessage];
    fn deref(&self) -> &[SharedMessage] {
        self.0.as_slice()
    }
}

impl From<Vec<SharedMessage>> for MessageList {
    fn from(v: Vec<SharedMessage>) -> Self {
        Self(Arc::new(v))
    }
}

impl From<Vec<AgentMessage>> for MessageList {
    fn from(v: Vec<AgentMessage>) -> Self {
        v.into_iter().map(Arc::new).collect()
    }
}

impl FromIterator<SharedMessage> for MessageList {
    fn from_iter<I: IntoIterator<Item = SharedMessage>>(iter: I) -> Self {
        Self(Arc::new(iter.into_iter().collect()))
    }
}

impl<'a> IntoIterator for &'a MessageList {
    type Item = &'a SharedMessage;
    type IntoIter = std::slice::Iter<'a, SharedMessage>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl fmt::Debug for MessageList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.0.iter()).finish()
    }
}

/// Marker text of the error for a base list the engine does not hold; the host then resends
/// the list in full.
pub const STALE_REF: &str = "unknown base message list";

/// The host's side: which list the engine holds.
#[derive(Debug, Default)]
pub struct HostTable {
    next_gen: u64,
    /// The list the engine kept after the last successful call, and its number.
    held: Option<(u64, MessageList)>,
    /// The list of the request being made, and its number.
    pending: Option<(u64, MessageList)>,
}

impl HostTable {
    /// A table that knows nothing: the next list goes in full.
    pub fn new() -> Self {
        Self::default()
    }

    /// Call before encoding a request.
    pub fn begin(&mut self) {
        self.pending = None;
    }

    /// Call after a successful call: the engine now holds the request's list.
    pub fn commit(&mut self) {
        if let Some(p) = self.pending.take() {
            self.held = Some(p);
        }
    }

    /// Call after a failed call: what the engine holds is unknown, so send in full next time.
    pub fn forget(&mut self) {
        self.held = None;
        self.pending = None;
    }

    /// How many messages the engine is believed to hold.
    pub fn len(&self) -> usize {
        self.held.as_ref().map_or(0, |(_, l)| l.len())
    }

    /// True when the engine is believed to hold nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The engine's side: the list it kept from the last request.
#[derive(Debug, Default)]
pub struct EngineTable {
    held: Option<(u64, MessageList)>,
    /// The list of the request being answered; responses are deltas against it.
    request: Option<MessageList>,
}

impl EngineTable {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Call before decoding a request.
    pub fn begin(&mut self) {
        // Dropping our handle to the previous request's list lets the next delta extend the
        // held list in place.
        self.request = None;
    }

    /// How many messages the engine holds.
    pub fn len(&self) -> usize {
        self.held.as_ref().map_or(0, |(_, l)| l.len())
    }

    /// True when the engine holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

enum Active {
    Host(*mut HostTable),
    Engine(*mut EngineTable),
}

thread_local! {
    static ACTIVE: RefCell<Option<Active>> = const { RefCell::new(None) };
}

/// Runs `f` with `table` as this thread's host-side table.
pub fn with_host_table<R>(table: &mut HostTable, f: impl FnOnce() -> R) -> R {
    with_active(Active::Host(table as *mut HostTable), f)
}

/// Runs `f` with `table` as this thread's engine-side table.
pub fn with_engine_table<R>(table: &mut EngineTable, f: impl FnOnce() -> R) -> R {
    with_active(Active::Engine(table as *mut EngineTable), f)
}

fn with_active<R>(active: Active, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<Active>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let previous = self.0.take();
            ACTIVE.with(|slot| *slot.borrow_mut() = previous);
        }
    }
    let previous = ACTIVE.with(|slot| slot.borrow_mut().replace(active));
    let _restore = Restore(previous);
    f()
}

/// Takes the active table out for the duration of `f` (so nested lists in `f` see none).
fn take_active<R>(f: impl FnOnce(Option<&mut Active>) -> R) -> R {
    let taken = ACTIVE.with(|slot| slot.borrow_mut().take());
    let mut taken = taken;
    let out = f(taken.as_mut());
    ACTIVE.with(|slot| *slot.borrow_mut() = taken);
    out
}

/// One element of a delta: a run of the base list, or a message.
enum Piece<'a> {
    Run(usize, usize),
    Message(&'a SharedMessage),
}

/// Describes `new` relative to `base`: the length of the common prefix, then runs and messages.
fn diff<'a>(base: &[SharedMessage], new: &'a [SharedMessage]) -> (usize, Vec<Piece<'a>>) {
    let keep = base
        .iter()
        .zip(new)
        .take_while(|(a, b)| Arc::ptr_eq(a, b))
        .count();
    let mut pieces = Vec::new();
    let mut index: Option<HashMap<usize, usize>> = None;
    let mut run: Option<(usize, usize)> = None;
    let mut cursor = keep;
    for (i, message) in new.iter().enumerate().skip(keep) {
        let position = if cursor < base.len() && Arc::ptr_eq(&base[cursor], message) {
            Some(cursor)
        } else {
            // A list that kept the tail of its base (a sliding window) lines up at the end.
            let aligned = (base.len() + i).checked_sub(new.len());
            match aligned {
                Some(j) if j < base.len() && Arc::ptr_eq(&base[j], message) => Some(j),
                // A few unconsumed messages (say a replaced last message): scanning them is
                // cheaper than indexing the whole base.
                _ if base.len() - cursor.min(base.len()) <= 64 => base[cursor.min(base.len())..]
                    .iter()
                    .position(|b| Arc::ptr_eq(b, message))
                    .map(|k| cursor + k),
                _ if cursor < base.len() => index
                    .get_or_insert_with(|| {
                        base.iter()
                            .enumerate()
                            .map(|(j, m)| (Arc::as_ptr(m) as usize, j))
                            .collect()
                    })
                    .get(&(Arc::as_ptr(message) as usize))
                    .copied(),
                _ => None,
            }
        };
        match (position, &mut run) {
            (Some(j), Some((start, len))) if *start + *len == j => *len += 1,
            (Some(j), _) => {
                if let Some((s, l)) = run.take() {
                    pieces.push(Piece::Run(s, l));
                }
                run = Some((j, 1));
            }
            (None, _) => {
                if let Some((s, l)) = run.take() {
                    pieces.push(Piece::Run(s, l));
                }
                pieces.push(Piece::Message(message));
            }
        }
        if let Some(j) = position {
            cursor = j + 1;
        }
    }
    if let Some((s, l)) = run {
        pieces.push(Piece::Run(s, l));
    }
    (keep, pieces)
}

struct Pieces<'a>(&'a [Piece<'a>]);

impl Serialize for Pieces<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.0.len()))?;
        for piece in self.0 {
            match piece {
                Piece::Run(start, len) => seq.serialize_element(&[start, len])?,
                Piece::Message(m) => seq.serialize_element(m.as_ref())?,
            }
        }
        seq.end()
    }
}

fn serialize_delta<S: Serializer>(
    serializer: S,
    header: &[(&'static str, u64)],
    base: &[SharedMessage],
    new: &[SharedMessage],
) -> Result<S::Ok, S::Error> {
    let (keep, pieces) = diff(base, new);
    let mut map = serializer.serialize_map(Some(header.len() + 2))?;
    for (k, v) in header {
        map.serialize_entry(k, v)?;
    }
    map.serialize_entry("keep", &keep)?;
    map.serialize_entry("items", &Pieces(&pieces))?;
    map.end()
}

impl Serialize for MessageList {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        take_active(|active| match active {
            Some(Active::Host(table)) => {
                // SAFETY: the pointer comes from a `&mut` that outlives `with_host_table`, and
                // only this thread can see it.
                let table = unsafe { &mut **table };
                table.next_gen += 1;
                let generation = table.next_gen;
                table.pending = Some((generation, self.clone()));
                match &table.held {
                    Some((base_gen, base)) => serialize_delta(
                        serializer,
                        &[("gen", generation), ("base", *base_gen)],
                        base,
                        self,
                    ),
                    None => serialize_delta(serializer, &[("gen", generation)], &[], self),
                }
            }
            Some(Active::Engine(table)) => {
                // SAFETY: as above.
                let table = unsafe { &mut **table };
                match &table.request {
                    Some(request) => serialize_delta(serializer, &[], request, self),
                    None => serialize_plain(serializer, self),
                }
            }
            None => serialize_plain(serializer, self),
        })
    }
}

fn serialize_plain<S: Serializer>(
    serializer: S,
    list: &[SharedMessage],
) -> Result<S::Ok, S::Error> {
    let mut seq = serializer.serialize_seq(Some(list.len()))?;
    for m in list {
        seq.serialize_element(m.as_ref())?;
    }
    seq.end()
}

/// An element of `items` before it is resolved against the base.
enum RawPiece {
    Run(usize, usize),
    Message(SharedMessage),
}

impl<'de> Deserialize<'de> for RawPiece {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawPiece;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a message or a [start, len] run")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<RawPiece, A::Error> {
                AgentMessage::deserialize(MapAccessDeserializer::new(map))
                    .map(|m| RawPiece::Message(Arc::new(m)))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<RawPiece, A::Error> {
                let start: usize = seq
                    .next_element()?
                    .ok_or_else(|| de::Error::custom("run without start"))?;
                let len: usize = seq
                    .next_element()?
                    .ok_or_else(|| de::Error::custom("run without length"))?;
                Ok(RawPiece::Run(start, len))
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Deserialize)]
struct Delta {
    #[serde(default, rename = "gen")]
    generation: Option<u64>,
    #[serde(default)]
    base: Option<u64>,
    #[serde(default)]
    keep: usize,
    #[serde(default)]
    items: Vec<RawPiece>,
}

/// Builds a list that keeps a prefix of `base` and appends messages (no runs). When `base` is
/// the only handle to its list, the list is extended in place: no message is touched.
fn apply<E: de::Error>(base: Option<MessageList>, delta: Delta) -> Result<MessageList, E> {
    let base = base.unwrap_or_default();
    if delta.keep > base.len() {
        return Err(E::custom(format!(
            "{STALE_REF}: keeps {} of {}",
            delta.keep,
            base.len()
        )));
    }
    if delta.keep == base.len() && delta.items.is_empty() {
        return Ok(base);
    }
    let mut out = base.into_vec();
    out.truncate(delta.keep);
    for piece in delta.items {
        match piece {
            RawPiece::Message(m) => out.push(m),
            RawPiece::Run(start, len) => {
                return Err(E::custom(format!(
                    "{STALE_REF}: run {start}+{len} without a base"
                )));
            }
        }
    }
    Ok(out.into())
}

/// The general case: runs refer to `base`, which stays intact.
fn apply_general<E: de::Error>(base: &[SharedMessage], delta: Delta) -> Result<MessageList, E> {
    if delta.keep > base.len() {
        return Err(E::custom(format!(
            "{STALE_REF}: keeps {} of {}",
            delta.keep,
            base.len()
        )));
    }
    let mut out = base[..delta.keep].to_vec();
    for piece in delta.items {
        match piece {
            RawPiece::Message(m) => out.push(m),
            RawPiece::Run(start, len) => {
                let run = start
                    .checked_add(len)
                    .and_then(|end| base.get(start..end))
                    .ok_or_else(|| E::custom(format!("{STALE_REF}: run {start}+{len}")))?;
                out.extend_from_slice(run);
            }
        }
    }
    Ok(out.into())
}

impl<'de> Deserialize<'de> for MessageList {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = MessageList;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an array of messages, or a message-list delta")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<MessageList, A::Error> {
                let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 16));
                while let Some(m) = seq.next_element::<AgentMessage>()? {
                    out.push(Arc::new(m));
                }
                Ok(out.into())
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<MessageList, A::Error> {
                let delta = Delta::deserialize(MapAccessDeserializer::new(map))?;
                resolve_delta(delta)
            }
        }
        d.deserialize_any(V)
    }
}

fn resolve_delta<E: de::Error>(delta: Delta) -> Result<MessageList, E> {
    take_active(|active| match active {
        Some(Active::Engine(table)) => {
            // SAFETY: see `Serialize for MessageList`.
            let table = unsafe { &mut **table };
            let generation = delta.generation;
            let base = match delta.base {
                None => None,
                Some(b) => match table.held.take() {
                    Some((g, list)) if g == b => Some(list),
                    other => {
                        table.held = other;
                        return Err(E::custom(format!("{STALE_REF} {b}")));
                    }
                },
            };
            let has_runs = delta.items.iter().any(|p| matches!(p, RawPiece::Run(..)));
            let list = match base {
                Some(base) if has_runs => apply_general(&base, delta)?,
                base => apply(base, delta)?,
            };
            if let Some(g) = generation {
                table.held = Some((g, list.clone()));
            }
            table.request = Some(list.clone());
            Ok(list)
        }
        Some(Active::Host(table)) => {
            // SAFETY: see `Serialize for MessageList`.
            let table = unsafe { &mut **table };
            let request = table
                .pending
                .as_ref()
                .map(|(_, l)| l.clone())
                .unwrap_or_default();
            if delta.keep == request.len() && delta.items.is_empty() {
                return Ok(request);
            }
            apply_general(&request, delta)
        }
        None => apply_general(&[], delta),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct Req {
        messages: MessageList,
    }

    fn msgs(n: usize) -> Vec<SharedMessage> {
        (0..n)
            .map(|i| Arc::new(AgentMessage::user_text(format!("m{i}"), i as u64)))
            .collect()
    }

    fn send(host: &mut HostTable, engine: &mut EngineTable, list: &MessageList) -> (String, Req) {
        host.begin();
        let json = with_host_table(host, || {
            serde_json::to_string(&Req {
                messages: list.clone(),
            })
        })
        .unwrap();
        engine.begin();
        let got: Req = with_engine_table(engine, || serde_json::from_str(&json)).unwrap();
        (json, got)
    }

    #[test]
    fn without_a_table_lists_are_plain_json() {
        let req = Req {
            messages: msgs(2).into(),
        };
        let json = serde_json::to_string(&req).unwrap();
        assert!(json.starts_with(r#"{"messages":[{"role":"user""#), "{json}");
        assert_eq!(serde_json::from_str::<Req>(&json).unwrap(), req);
    }

    #[test]
    fn a_grown_history_sends_only_the_new_messages() {
        let mut host = HostTable::new();
        let mut engine = EngineTable::new();
        let history: MessageList = msgs(3).into();
        let (json1, got1) = send(&mut host, &mut engine, &history);
        assert_eq!(json1.matches("\"role\"").count(), 3);
        assert_eq!(got1.messages, history);
        host.commit();
        drop(got1);

        let mut longer = history.to_vec();
        longer.push(Arc::new(AgentMessage::user_text("new", 9)));
        let longer: MessageList = longer.into();
        let (json2, got2) = send(&mut host, &mut engine, &longer);
        assert!(json2.contains(r#""keep":3"#), "{json2}");
        assert_eq!(json2.matches("\"role\"").count(), 1, "{json2}");
        assert_eq!(got2.messages, longer);

        // The engine answers with the tail: a run of the request, resolved to the host's own
        // allocations.
        let tail: MessageList = got2.messages[2..].to_vec().into();
        let answer = with_engine_table(&mut engine, || {
            serde_json::to_string(&Req { messages: tail })
        })
        .unwrap();
        assert_eq!(answer, r#"{"messages":{"keep":0,"items":[[2,2]]}}"#);
        let back: Req = with_host_table(&mut host, || serde_json::from_str(&answer)).unwrap();
        assert!(Arc::ptr_eq(&back.messages[0], &longer[2]));
        assert!(Arc::ptr_eq(&back.messages[1], &longer[3]));
        host.commit();
        assert_eq!(host.len(), 4);
        assert_eq!(engine.len(), 4);
    }

    #[test]
    fn a_dropped_message_in_the_middle_becomes_runs() {
        let mut host = HostTable::new();
        let mut engine = EngineTable::new();
        let history: MessageList = msgs(6).into();
        send(&mut host, &mut engine, &history);
        host.commit();
        let mut edited = history.to_vec();
        edited.remove(2);
        edited.push(Arc::new(AgentMessage::user_text("new", 9)));
        let edited: MessageList = edited.into();
        let (json, got) = send(&mut host, &mut engine, &edited);
        assert!(
            json.contains(r#""keep":2"#) && json.contains("[3,3]"),
            "{json}"
        );
        assert_eq!(got.messages, edited);
    }

    #[test]
    fn an_unknown_base_is_a_clear_error_and_forget_recovers() {
        let mut host = HostTable::new();
        let mut engine = EngineTable::new();
        let history: MessageList = msgs(2).into();
        send(&mut host, &mut engine, &history);
        host.commit();
        // The engine lost its list (for example it was rebuilt).
        let mut fresh_engine = EngineTable::new();
        host.begin();
        let json = with_host_table(&mut host, || {
            serde_json::to_string(&Req {
                messages: history.clone(),
            })
        })
        .unwrap();
        let err = with_engine_table(&mut fresh_engine, || serde_json::from_str::<Req>(&json))
            .unwrap_err();
        assert!(err.to_string().contains(STALE_REF), "{err}");
        host.forget();
        let (json, got) = send(&mut host, &mut fresh_engine, &history);
        assert_eq!(json.matches("\"role\"").count(), 2);
        assert_eq!(got.messages, history);
    }
}
