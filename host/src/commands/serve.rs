//! `rampart serve [--listen ADDR] [--store URL] [--prices FILE]`: an OpenAI- and Anthropic-compatible proxy that manages each
//! conversation's context with the configured engine (see [`crate::serve`]).
//!
//! Prints `rampart serve listening on http://ADDR` on stdout once bound (the port actually
//! bound when 0 was asked for), then serves until SIGTERM or Ctrl-C, letting requests in flight
//! finish. Exit codes: 0 after a signal; 1 when it cannot start (the message says why).

use std::io::Write;
use std::net::SocketAddr;

use rampart_sessions::store::SessionStore;

use crate::config::Config;
use crate::engine::services::EventSink;
use crate::serve::server::{ServerState, run_blocking};

/// What `rampart serve`'s own flags say.
#[derive(Debug, Clone, Copy, Default)]
pub struct ServeFlags<'a> {
    /// `--store URL`: a PostgreSQL store in place of the sessions directory.
    pub store_url: Option<&'a str>,
    /// `--listen ADDR`, over `serve.listen`.
    pub listen: Option<SocketAddr>,
    /// `--prices FILE`: the live page's spend in dollars.
    pub prices: Option<&'a std::path::Path>,
}

/// Runs the server on the sessions directory `store`, or on the PostgreSQL store that
/// `store_url` (`--store`) or `serve.store.url` names (then `store` keeps only this machine's
/// memory index and workspace).
pub fn serve(
    config: Config,
    store: SessionStore,
    flags: ServeFlags<'_>,
    events: EventSink,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> anyhow::Result<i32> {
    let ServeFlags {
        store_url,
        listen,
        prices,
    } = flags;
    // Before the server's threads start, each of which may take an allocator arena.
    crate::serve::allocator::limit_arenas();
    let addr = match config.serve.bind_addr(listen) {
        Ok(addr) => addr,
        Err(e) => {
            writeln!(err, "error: {e}")?;
            return Ok(1);
        }
    };
    // Read before anything starts, so a bad file is an error naming it, not a page without
    // dollars.
    let prices = match prices.map(crate::replay::prices::Prices::read).transpose() {
        Ok(prices) => prices,
        Err(e) => {
            writeln!(err, "error: {e}")?;
            return Ok(1);
        }
    };
    // Long-term memory: the tools clients opt into and the flush before compactions. The
    // server lives on, so the memory files are watched.
    let memory = crate::memory::resolve(
        &config,
        store.dir(),
        &events,
        &crate::engine::slot::HostResources::default(),
        crate::memory::Watch::Files,
    );
    let workspace = config
        .agent_defaults
        .workspace_dir(config.source_file.as_deref(), store.dir());
    let shared = crate::serve::store::open(&config.serve, store_url, store)?;
    let state = ServerState::new(config, shared, events)?
        .with_memory(memory, workspace)
        .with_prices(prices);
    run_blocking(state, addr, |bound| {
        writeln!(out, "rampart serve listening on http://{bound}")?;
        out.flush()
    })?;
    Ok(0)
}
