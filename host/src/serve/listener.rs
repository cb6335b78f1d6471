//! The accept loop under the routes: at most `serve.maxConnections` connections at once, a
//! client that does not finish its headers within `serve.headerTimeoutMs` is closed, and on
//! shutdown every connection is asked to finish its request and is closed at
//! `serve.drainTimeoutMs` at the latest (idle and half-sent ones at once), so SIGTERM always
//! ends the process.
//!
//! `axum::serve` has none of these bounds: a client sending half its headers held its
//! connection for as long as it liked and kept a graceful shutdown from ever finishing.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};

/// The connection bounds, from `[serve]`.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Connections open at once; more wait in the kernel's backlog.
    pub max_connections: usize,
    /// The time a client has to send a request's headers.
    pub header_timeout: Duration,
    /// After shutdown is asked, the time requests in flight have before connections close.
    pub drain_timeout: Duration,
}

/// How long the loop waits after a failed accept (out of file descriptors, say) before trying
/// again: an error there must not end the server, nor spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// Sets up an accepted connection for streaming: TCP_NODELAY on, so each streamed delta and a
/// stream's last bytes leave at once instead of waiting on Nagle's algorithm for the client's
/// delayed ACK (on loopback that held a stream's end back by about 40 ms). A socket that
/// refuses the option still serves, only slower, so the failure is logged, not fatal.
pub fn configure_accepted(stream: &TcpStream, peer: std::net::SocketAddr) {
    if let Err(e) = stream.set_nodelay(true) {
        tracing::warn!(%peer, error = %e, "cannot set TCP_NODELAY on a connection; its streams may end late");
    }
}

/// Serves `router` on `listener` until `shutdown` resolves, then drains (see the module).
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut connections = tokio::task::JoinSet::new();
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    tokio::pin!(shutdown);
    loop {
        // A connection is accepted only with a permit in hand.
        let permit = tokio::select! {
            _ = &mut shutdown => break,
            permit = Arc::clone(&permits).acquire_owned() => match permit {
                Ok(p) => p,
                Err(_) => break,
            },
        };
        let (stream, peer) = tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "accepting a connection failed; retrying shortly");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
        };
        configure_accepted(&stream, peer);
        let service = TowerToHyperService::new(router.clone());
        let connection = builder.serve_connection(TokioIo::new(stream), service);
        let mut stop = stop_rx.clone();
        let drain = limits.drain_timeout;
        connections.spawn(async move {
            let _permit = permit;
            tokio::pin!(connection);
            tokio::select! {
                result = connection.as_mut() => {
                    if let Err(e) = result {
                        tracing::debug!(%peer, error = %e, "connection ended with an error");
                    }
                    return;
                }
                _ = stop.wait_for(|stopping| *stopping) => {}
            }
            // Idle connections close now; one mid-request finishes it, within the deadline.
            connection.as_mut().graceful_shutdown();
            if tokio::time::timeout(drain, connection).await.is_err() {
                tracing::warn!(%peer, "connection still busy at the drain deadline; closed");
            }
        });
        // Finished connections are reaped as the loop goes, so the set stays small.
        while connections.try_join_next().is_some() {}
    }
    drop(listener);
    let _ = stop_tx.send(true);
    let open = connections.len();
    if open > 0 {
        tracing::info!(
            open,
            "draining connections (`serve.drainTimeoutMs`: {} ms)",
            limits.drain_timeout.as_millis()
        );
    }
    // Each connection ends by its own deadline; this one only guards against a task that
    // would not.
    let all = async { while connections.join_next().await.is_some() {} };
    if tokio::time::timeout(limits.drain_timeout + Duration::from_secs(1), all)
        .await
        .is_err()
    {
        connections.abort_all();
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "listener_tests.rs"]
mod tests;
