//! `rampart engine-host`: the child side of an engine in its own process (`isolation =
//! "process"`).
//!
//! The child loads the library with the same loader the host uses, then relays: each `Call`
//! frame goes to the engine as the method name and JSON payload the host wrote (message lists
//! stay the host's deltas, decoded by the library against the table it keeps), and each host
//! service the engine calls goes back to the host as a `Service` frame. Log lines go to stderr,
//! which the host reads and records under the engine's id.
//!
//! Why the protocol does not use stdout as it is: a library that prints (a stray `println!`, a
//! C dependency's banner) would write into the frames. The child moves the protocol to a
//! duplicate of stdout and points fd 1 at stderr before any library code runs, so whatever an
//! engine prints reaches the host's log, never the pipe.
//!
//! The child never outlives the host: the host sets `PR_SET_PDEATHSIG` when it starts it, and
//! the end of stdin (the host closed the pipe or died) ends the child.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use rampart_engine_api::{EngineError, ErrorKind, HostApi, LogLevel};

use crate::engine::loader::{LoadRequest, load_engine};
use crate::engine::pipe::{
    FEATURES, Frame, Hello, LogLine, Outcome, PIPE_VERSION, PipeError, Ready, read_frame,
    write_frame,
};

/// The exit code when the host sent something that is not the protocol.
const EXIT_PROTOCOL: i32 = 2;

type Out = Arc<Mutex<BufWriter<File>>>;

/// Serves one engine over stdin and stdout until the host closes stdin or asks it to shut down.
/// Returns the process's exit code.
pub fn serve() -> i32 {
    let out = match crate::platform::protocol_stdout() {
        Ok(file) => Arc::new(Mutex::new(BufWriter::new(file))),
        Err(e) => {
            log_line(
                LogLevel::Error,
                "cannot set up the protocol's stdout",
                &e.to_string(),
            );
            return EXIT_PROTOCOL;
        }
    };
    let mut input = BufReader::new(std::io::stdin());
    let hello = match read_frame(&mut input) {
        Ok(Frame::Hello(hello)) => hello,
        Ok(other) => {
            log_line(
                LogLevel::Error,
                "expected the host's hello",
                &format!("{other:?}"),
            );
            return EXIT_PROTOCOL;
        }
        Err(PipeError::Closed) => return 0,
        Err(e) => {
            log_line(LogLevel::Error, "no hello from the host", &e.to_string());
            return EXIT_PROTOCOL;
        }
    };
    if hello.version != PIPE_VERSION {
        let refused = Ready {
            version: PIPE_VERSION,
            features: Vec::new(),
            engine: Err(format!(
                "this rampart engine-host speaks engine-host protocol {PIPE_VERSION}, the host \
                 {}; run the host's own binary",
                hello.version
            )),
        };
        let _ = send(&out, &Frame::Ready(refused));
        return EXIT_PROTOCOL;
    }
    let proxy = Arc::new(ProxyHost {
        out: out.clone(),
        pending: Mutex::default(),
        next_id: AtomicU64::new(1),
    });
    // The reader starts before the library loads: a constructor may already call services.
    let (calls_tx, calls_rx) = mpsc::channel::<Frame>();
    let reader_proxy = proxy.clone();
    let reader = std::thread::Builder::new()
        .name("engine-host-reader".into())
        .spawn(move || read_loop(input, &reader_proxy, &calls_tx));
    if reader.is_err() {
        return EXIT_PROTOCOL;
    }
    let request = load_request(&hello, proxy.clone());
    let loaded = load_engine(request);
    let ready = Ready {
        version: PIPE_VERSION,
        features: FEATURES.iter().map(|f| (*f).to_string()).collect(),
        engine: match &loaded {
            Ok(handle) => Ok(handle.info().clone()),
            Err(e) => Err(e.to_string()),
        },
    };
    if send(&out, &Frame::Ready(ready)).is_err() {
        return 0;
    }
    let Ok(handle) = loaded else {
        return 0;
    };
    // Calls run one after another, as an engine in the host gets them from its worker thread.
    while let Ok(frame) = calls_rx.recv() {
        match frame {
            Frame::Call {
                id,
                method,
                payload,
                timeout_ms,
            } => {
                let result =
                    handle.call_json_within(&method, &payload, Duration::from_millis(timeout_ms));
                let reply = Frame::Reply {
                    id,
                    result: Outcome::of(result),
                };
                if send(&out, &reply).is_err() {
                    return 0;
                }
            }
            Frame::Shutdown { id } => {
                let result = handle.shutdown().map(|()| "{}".to_string());
                let _ = send(
                    &out,
                    &Frame::Reply {
                        id,
                        result: Outcome::of(result),
                    },
                );
                return 0;
            }
            _ => {}
        }
    }
    0
}

fn load_request(hello: &Hello, services: Arc<ProxyHost>) -> LoadRequest {
    LoadRequest {
        id: hello.engine_id.clone(),
        verify_id: hello.verify_id,
        path: hello.path.clone(),
        config: hello.config.clone(),
        services,
        load_timeout: Duration::from_millis(hello.load_timeout_ms),
        call_timeout: Duration::from_millis(hello.call_timeout_ms),
        max_log_level: hello.max_log_level,
    }
}

fn send(out: &Out, frame: &Frame) -> Result<(), PipeError> {
    let mut out = match out.lock() {
        Ok(o) => o,
        Err(poisoned) => poisoned.into_inner(),
    };
    write_frame(&mut *out, frame)
}

/// Routes the host's frames: answers to service calls to the thread waiting on them, calls and
/// shutdown to the engine. The end of stdin ends the process: the host is gone or done.
fn read_loop(mut input: impl std::io::Read, proxy: &ProxyHost, calls: &mpsc::Sender<Frame>) {
    loop {
        match read_frame(&mut input) {
            Ok(Frame::Reply { id, result }) => {
                let waiting = proxy.pending.lock().ok().and_then(|mut p| p.remove(&id));
                if let Some(tx) = waiting {
                    let _ = tx.send(result);
                }
            }
            Ok(frame @ (Frame::Call { .. } | Frame::Shutdown { .. })) => {
                if calls.send(frame).is_err() {
                    std::process::exit(0);
                }
            }
            Ok(_) => {}
            Err(PipeError::Closed) => std::process::exit(0),
            Err(e) => {
                log_line(LogLevel::Error, "the host's pipe failed", &e.to_string());
                std::process::exit(EXIT_PROTOCOL);
            }
        }
    }
}

/// The host's services as the engine in the child sees them: each call is a `Service` frame
/// answered by the host; each log line goes to stderr.
struct ProxyHost {
    out: Out,
    pending: Mutex<HashMap<u64, mpsc::SyncSender<Outcome>>>,
    next_id: AtomicU64,
}

impl HostApi for ProxyHost {
    fn log(&self, level: LogLevel, target: &str, message: &str, fields_json: &str) {
        let fields = serde_json::from_str(fields_json).unwrap_or(serde_json::Value::Null);
        write_log(&LogLine {
            level: format!("{level:?}").to_ascii_lowercase(),
            target: target.to_string(),
            message: Some(message.to_string()),
            fields,
        });
    }

    fn call(&self, method: &str, payload_json: &str) -> Result<String, EngineError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::sync_channel(1);
        if let Ok(mut pending) = self.pending.lock() {
            pending.insert(id, tx);
        }
        let frame = Frame::Service {
            id,
            method: method.to_string(),
            payload: payload_json.to_string(),
        };
        send(&self.out, &frame).map_err(|e| {
            EngineError::new(
                ErrorKind::Host,
                format!("cannot reach the host for `{method}`: {e}"),
            )
        })?;
        // No deadline of its own: the host bounds the service (an `llm.complete` names its
        // timeout), and if the host goes away stdin ends and so does this process.
        match rx.recv() {
            Ok(outcome) => outcome.into_result(),
            Err(_) => Err(EngineError::new(
                ErrorKind::Host,
                format!("the host did not answer `{method}`"),
            )),
        }
    }
}

fn log_line(level: LogLevel, message: &str, detail: &str) {
    write_log(&LogLine {
        level: format!("{level:?}").to_ascii_lowercase(),
        target: "rampart::engine_host".to_string(),
        message: Some(format!("{message}: {detail}")),
        fields: serde_json::Value::Null,
    });
}

fn write_log(line: &LogLine) {
    if let Ok(text) = serde_json::to_string(line) {
        let mut err = std::io::stderr().lock();
        let _ = writeln!(err, "{text}");
    }
}
