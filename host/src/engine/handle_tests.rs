//! Which calls of a linked engine run on the caller's thread, and which keep the worker and
//! its deadline.

use std::sync::Arc;
use std::thread::ThreadId;
use std::time::Duration;

use rampart_engine_api::protocol::{
    AfterTurnParams, AfterTurnResult, AssembleParams, AssembleResult, CompactParams, CompactResult,
    IngestParams, IngestResult,
};
use rampart_engine_api::{CallContext, ContextEngine, EngineError, EngineInfo, ErrorKind, Host};

use super::EngineHandle;
use crate::engine::services::{EventSink, HostServices};

/// Records the thread each call ran on; `compact` takes longer than the tests' deadline.
#[derive(Default)]
struct Recorder {
    threads: std::sync::Mutex<Vec<(&'static str, ThreadId)>>,
    compacted: std::sync::atomic::AtomicBool,
}

impl Recorder {
    fn saw(&self, method: &'static str) {
        self.threads
            .lock()
            .unwrap()
            .push((method, std::thread::current().id()));
    }
}

impl ContextEngine for Recorder {
    fn info(&self) -> EngineInfo {
        EngineInfo {
            id: "recorder".into(),
            ..EngineInfo::default()
        }
    }
    fn ingest(&self, _: &CallContext<'_>, _: IngestParams) -> Result<IngestResult, EngineError> {
        self.saw("ingest");
        Ok(IngestResult::default())
    }
    fn assemble(
        &self,
        _: &CallContext<'_>,
        p: AssembleParams,
    ) -> Result<AssembleResult, EngineError> {
        self.saw("assemble");
        Ok(AssembleResult {
            messages: p.messages,
            ..Default::default()
        })
    }
    fn after_turn(
        &self,
        _: &CallContext<'_>,
        _: AfterTurnParams,
    ) -> Result<AfterTurnResult, EngineError> {
        self.saw("after_turn");
        Ok(AfterTurnResult::default())
    }
    fn compact(&self, _: &CallContext<'_>, _: CompactParams) -> Result<CompactResult, EngineError> {
        self.saw("compact");
        std::thread::sleep(Duration::from_millis(1_500));
        self.compacted
            .store(true, std::sync::atomic::Ordering::SeqCst);
        Ok(CompactResult::default())
    }
}

fn handle(engine: Arc<Recorder>, deadline: Duration) -> EngineHandle {
    let services = HostServices::new("recorder", EventSink::tracing_only());
    EngineHandle::linked(engine, Host::new(Arc::new(services)), deadline)
}

/// A built-in engine's bookkeeping runs where the turn runs: no hand-off to another thread and
/// back for a call that answers in microseconds.
#[test]
fn a_linked_engines_bookkeeping_runs_on_the_callers_thread() {
    let engine = Arc::new(Recorder::default());
    let handle = handle(engine.clone(), Duration::from_secs(10));
    handle.call(IngestParams::default()).unwrap();
    handle.call(AssembleParams::default()).unwrap();
    handle.call(AfterTurnParams::default()).unwrap();
    let here = std::thread::current().id();
    let threads = engine.threads.lock().unwrap().clone();
    assert_eq!(
        threads,
        vec![("ingest", here), ("assemble", here), ("after_turn", here)]
    );
}

/// A compaction may wait on a model: it keeps the worker, so the caller stops waiting at the
/// deadline and gets a timeout, rather than hang with the engine.
#[test]
fn a_linked_engines_compaction_keeps_its_deadline() {
    let engine = Arc::new(Recorder::default());
    let handle = handle(engine.clone(), Duration::from_millis(100));
    let err = handle.call(CompactParams::default()).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Timeout, "{err}");
    assert!(
        !engine.compacted.load(std::sync::atomic::Ordering::SeqCst),
        "the caller waited for the engine to finish"
    );
    let threads = engine.threads.lock().unwrap().clone();
    assert_eq!(threads.len(), 1);
    assert_ne!(threads[0].1, std::thread::current().id());
}
