use rampart_engine_api::AgentMessage;
use rampart_engine_api::tokens::estimate_message_tokens;

use super::*;

fn count(services: &HostServices, tokenizer: &str, text: &str) -> TokenCount {
    let request = TokenCountRequest {
        tokenizer: tokenizer.into(),
        messages: vec![AgentMessage::user_text(text, 0)],
    };
    let answer = services
        .call(
            service::TOKENS_COUNT,
            &serde_json::to_string(&request).unwrap(),
        )
        .unwrap();
    serde_json::from_str(&answer).unwrap()
}

/// An engine without vocabularies gets exact counts from the host, and the estimate when it
/// asks for one.
#[test]
fn tokens_count_answers_with_the_named_tokenizer() {
    let services = HostServices::new("window", EventSink::tracing_only());
    let text = "上下文窗口是有限资源".repeat(4);
    let estimate = estimate_message_tokens(&AgentMessage::user_text(text.as_str(), 0));
    let answer = count(&services, "estimate", &text);
    assert_eq!(
        (answer.counts.clone(), answer.exact),
        (vec![estimate], false)
    );

    let exact = count(&services, "o200k_base", &text);
    assert_eq!(exact.exact, rampart_context::tokens::EXACT_TOKENS_AVAILABLE);
    if exact.exact {
        assert_eq!(exact.tokenizer, "o200k_base");
        assert!(exact.counts[0] < estimate, "{exact:?} against {estimate}");
    }
    // A model name picks that model's tokenizer; no name picks the chat model's.
    assert_eq!(
        count(&services, "openai/gpt-4o", &text).counts,
        exact.counts
    );
    let chat = services.with_count_mode(CountMode::for_model("gpt-4o"));
    assert_eq!(count(&chat, "", &text).counts, exact.counts);
}

/// `state.dir` gives each engine its own directory under the root, created owner-only, says
/// whether it is scratch, and is `unsupported` where the host gives none.
#[test]
fn state_dir_gives_each_engine_its_own_directory() {
    use rampart_engine_api::host::StateDir;
    let root = tempfile::tempdir().unwrap();
    let ask = |services: &HostServices| services.call("state.dir", "null");
    let services = HostServices::new("lossless", EventSink::tracing_only())
        .with_state_root(root.path().join("engines"), false);
    let answer: StateDir = serde_json::from_str(&ask(&services).unwrap()).unwrap();
    let dir = root.path().join("engines").join("lossless");
    assert_eq!(answer.path, dir.display().to_string());
    assert!(!answer.scratch);
    assert!(dir.is_dir());
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(
            mode, 0o700,
            "owner-only, as the sessions whose content it derives from"
        );
    }
    let scratch = HostServices::new("lossless", EventSink::tracing_only())
        .with_state_root(root.path().join("replay-state"), true);
    let answer: StateDir = serde_json::from_str(&ask(&scratch).unwrap()).unwrap();
    assert!(answer.scratch);
    let none = HostServices::new("lossless", EventSink::tracing_only());
    assert_eq!(ask(&none).unwrap_err().kind, ErrorKind::Unsupported);
}

/// `blobs.get` reads back what `blobs.put` (or the host's cap) stored; a missing or malformed
/// reference is the engine's mistake (`invalid_params`), not a host failure.
#[test]
fn blobs_get_reads_back_a_blob_and_names_a_bad_reference() {
    use rampart_engine_api::host::BlobContent;
    let dir = tempfile::tempdir().unwrap();
    let blobs = crate::blobs::BlobStore::in_sessions_dir(dir.path());
    let reference = blobs.put("the whole original\n".as_bytes()).unwrap();
    let services = HostServices::new("lossless", EventSink::tracing_only()).with_blobs(blobs);
    let ask = |r: &str| {
        services.call(
            "blobs.get",
            &serde_json::json!({"reference": r}).to_string(),
        )
    };
    let got: BlobContent = serde_json::from_str(&ask(&reference).unwrap()).unwrap();
    assert_eq!(got.content, "the whole original\n");
    assert_eq!(got.bytes, 19);
    let missing = format!("sha256:{}", "0".repeat(64));
    assert_eq!(ask(&missing).unwrap_err().kind, ErrorKind::InvalidParams);
    assert_eq!(
        ask("../../etc/passwd").unwrap_err().kind,
        ErrorKind::InvalidParams
    );
    let none = HostServices::new("lossless", EventSink::tracing_only());
    assert_eq!(
        none.call(
            "blobs.get",
            &serde_json::json!({"reference": reference}).to_string()
        )
        .unwrap_err()
        .kind,
        ErrorKind::Unsupported
    );
}

/// A `Write` into a buffer the test reads afterwards, for a scoped `tracing` subscriber.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn logged_with(filter: &str, sink: &EventSink, event: &EngineEvent) -> String {
    let out = Captured::default();
    let writer = out.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    tracing::subscriber::with_default(subscriber, || sink.emit("legacy", event));
    String::from_utf8(out.0.lock().unwrap().clone()).unwrap()
}

/// `RUST_LOG=rampart::event=info` logs every event with its subject as fields of their own
/// (the subject is read back from the envelope only when the line is logged).
#[test]
fn an_events_log_line_names_its_subject_when_events_are_logged() {
    let sink = EventSink::tracing_only();
    let event = rampart_context::events::Event::IngestCap(rampart_context::events::IngestCap {
        tool_call_id: Some("call_7".into()),
        tool_name: Some("bash".into()),
        original_chars: 90_000,
        ..Default::default()
    })
    .envelope(Some("s1".into()));
    let line = logged_with("warn,rampart::event=info", &sink, &event);
    assert!(line.contains("tool_call_id=\"call_7\""), "{line}");
    assert!(line.contains("tool_name=\"bash\""), "{line}");
    assert!(line.contains("kind=ingest_cap"), "{line}");
    assert_eq!(logged_with("warn", &sink, &event), "");
}
