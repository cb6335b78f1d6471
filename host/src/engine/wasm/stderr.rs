//! A WebAssembly engine's stderr and stdout: WASI output streams that cut what the engine
//! writes into lines and record each as an executable's stderr line is recorded (a JSON line
//! with a `level` is a log line, anything else a warning kept among its last words).

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use rampart_engine_api::HostApi;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError};

use crate::engine::process::record_stderr_line;

/// Longest partial line kept while waiting for its newline; longer is recorded as it stands.
const MAX_LINE: usize = 64 * 1024;

/// One engine's output, shared by every stream WASI opens on it.
#[derive(Clone)]
pub(super) struct LineSink {
    inner: Arc<Inner>,
}

struct Inner {
    id: String,
    services: Arc<dyn HostApi>,
    last_words: Arc<Mutex<VecDeque<String>>>,
    partial: Mutex<Vec<u8>>,
}

impl LineSink {
    pub(super) fn new(
        id: &str,
        services: Arc<dyn HostApi>,
        last_words: Arc<Mutex<VecDeque<String>>>,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                id: id.to_string(),
                services,
                last_words,
                partial: Mutex::new(Vec::new()),
            }),
        }
    }

    /// Appends `bytes` and records every line they complete.
    pub(super) fn take(&self, bytes: &[u8]) {
        let inner = &self.inner;
        let mut lines = Vec::new();
        {
            let mut partial = match inner.partial.lock() {
                Ok(p) => p,
                Err(poisoned) => poisoned.into_inner(),
            };
            partial.extend_from_slice(bytes);
            while let Some(end) = partial.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = partial.drain(..=end).collect();
                lines.push(line);
            }
            if partial.len() > MAX_LINE {
                lines.push(std::mem::take(&mut *partial));
            }
        }
        for line in lines {
            record_stderr_line(
                &String::from_utf8_lossy(&line),
                &inner.id,
                &*inner.services,
                &inner.last_words,
            );
        }
    }
}

impl IsTerminal for LineSink {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for LineSink {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[wasmtime_wasi::async_trait]
impl OutputStream for LineSink {
    fn write(&mut self, bytes: Bytes) -> Result<(), StreamError> {
        self.take(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> Result<(), StreamError> {
        Ok(())
    }

    fn check_write(&mut self) -> Result<usize, StreamError> {
        Ok(MAX_LINE)
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for LineSink {
    async fn ready(&mut self) {}
}

impl tokio::io::AsyncWrite for LineSink {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.take(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}
