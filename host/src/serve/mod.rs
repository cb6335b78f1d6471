//! `rampart serve`: managed context for any agent, as an OpenAI- and Anthropic-compatible
//! proxy.
//!
//! - [`identity`]: which conversation a request belongs to, from its headers and body;
//! - [`history`]: where the history a client re-sends continues the stored tree;
//! - [`inbound`]: a client request decoded once into types;
//! - [`raw_messages`] and [`inbound_memo`]: the messages array by its bytes, and the decoded
//!   messages of recent requests, so a request re-sending them parses only what is new;
//! - [`request_checks`]: the types a request's fields must have, checked before conversion;
//! - [`conversations`]: which stored conversation a request continues, opened and held;
//! - [`outbound`]: the answer and errors in the client's wire, JSON or stream;
//! - [`metrics`]: `GET /metrics`;
//! - [`dashboard`]: `GET /ui`, the live page, and [`compaction_page`], one compaction in detail;
//! - [`not_forwarded`]: content a client sent that is not forwarded, counted and warned about;
//! - [`response_log`]: the Responses answers given, by id, for `previous_response_id`;
//! - [`guard`]: Host, Origin, token and body checks before any handler;
//! - [`listener`]: the accept loop: bounded connections, header timeouts, a drain deadline;
//! - [`store`]: the store conversations live in (a directory, or PostgreSQL for replicas);
//! - [`server`]: the routes, admission, and a request's way through the run loop;
//! - [`allocator`]: fewer allocator arenas, and freed memory returned when idle.
//!
//! The README's `rampart serve` section describes the conversation rule, client set-up, and
//! what a replica keeps in memory.

pub mod allocator;
pub mod compaction_page;
pub mod conversations;
pub mod dashboard;
pub mod guard;
pub mod history;
pub mod identity;
pub mod inbound;
pub mod inbound_memo;
pub mod listener;
pub mod metrics;
pub mod not_forwarded;
pub mod outbound;
pub mod raw_messages;
pub mod registry_writes;
pub mod request_checks;
pub mod response_log;
pub mod server;
pub mod store;
