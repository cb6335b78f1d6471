use super::*;

fn roundtrip(frame: &Frame) -> Frame {
    let mut bytes = Vec::new();
    write_frame(&mut bytes, frame).unwrap();
    read_frame(&mut bytes.as_slice()).unwrap()
}

#[test]
fn frames_round_trip() {
    let call = Frame::Call {
        id: 7,
        method: "assemble".into(),
        payload: "{\"messages\":{\"gen\":1}}".into(),
        timeout_ms: 30_000,
    };
    assert_eq!(roundtrip(&call), call);
    let reply = Frame::Reply {
        id: 7,
        result: Outcome::of(Err(EngineError::new(ErrorKind::Timeout, "late"))),
    };
    assert_eq!(roundtrip(&reply), reply);
    let Frame::Reply { result, .. } = reply else {
        panic!("reply")
    };
    assert_eq!(result.into_result().unwrap_err().kind, ErrorKind::Timeout);
}

#[test]
fn unknown_frames_fields_and_features_are_tolerated() {
    let newer = br#"{"type":"progress","id":3,"percent":50}"#;
    let mut bytes = (newer.len() as u32).to_be_bytes().to_vec();
    bytes.extend_from_slice(newer);
    assert_eq!(read_frame(&mut bytes.as_slice()).unwrap(), Frame::Unknown);

    let hello = br#"{"type":"hello","version":1,"features":["shutdown","telepathy"],
        "engineId":"w","path":"/x.so","loadTimeoutMs":5,"callTimeoutMs":6,"colour":"blue"}"#;
    let mut bytes = (hello.len() as u32).to_be_bytes().to_vec();
    bytes.extend_from_slice(hello);
    let Frame::Hello(hello) = read_frame(&mut bytes.as_slice()).unwrap() else {
        panic!("hello")
    };
    assert!(hello.verify_id, "absent means verify");
    assert_eq!(shared_features(FEATURES, &hello.features), vec!["shutdown"]);
}

/// What a library printing to the protocol's stream would look like: the reader refuses it
/// instead of allocating a length read from text or waiting forever.
#[test]
fn garbage_is_malformed_not_a_huge_allocation() {
    let garbage = b"hello from the engine\n{\"not\": \"a frame\"}";
    let err = read_frame(&mut garbage.as_slice()).unwrap_err();
    assert!(
        matches!(&err, PipeError::Malformed(m) if m.contains("over the")),
        "{err}"
    );
    // A plausible length followed by text that is not a frame.
    let mut bytes = 8u32.to_be_bytes().to_vec();
    bytes.extend_from_slice(b"garbage!");
    let err = read_frame(&mut bytes.as_slice()).unwrap_err();
    assert!(
        matches!(&err, PipeError::Malformed(m) if m.contains("not a frame")),
        "{err}"
    );
    let mut cut = 100u32.to_be_bytes().to_vec();
    cut.extend_from_slice(b"{\"type\"");
    assert!(matches!(
        read_frame(&mut cut.as_slice()),
        Err(PipeError::Malformed(_))
    ));
    assert!(matches!(
        read_frame(&mut [].as_slice()),
        Err(PipeError::Closed)
    ));
}

#[test]
fn log_lines_read_in_both_spellings() {
    let ours: LogLine = serde_json::from_str(
        r#"{"level":"info","target":"fx","message":"assembled","fields":{"kept":1}}"#,
    )
    .unwrap();
    assert_eq!(ours.level(), Some(LogLevel::Info));
    assert_eq!(ours.text(), "assembled");
    let subscriber: LogLine = serde_json::from_str(
        r#"{"timestamp":"t","level":"WARN","fields":{"message":"loaded"},"target":"rampart"}"#,
    )
    .unwrap();
    assert_eq!(subscriber.level(), Some(LogLevel::Warn));
    assert_eq!(subscriber.text(), "loaded");
}

/// The frames exactly as docs/engine-protocol.md shows them: a program in another language is
/// written from that document, so its examples must be what this code writes and reads.
#[test]
fn frames_are_spelled_as_the_protocol_document_says() {
    let json = |frame: &Frame| serde_json::to_string(frame).unwrap();
    let hello = Frame::Hello(Hello {
        version: 1,
        features: vec!["shutdown".into()],
        engine_id: "keep-last".into(),
        verify_id: true,
        path: "/usr/bin/python3".into(),
        config: serde_json::json!({"keep": 50}),
        load_timeout_ms: 5000,
        call_timeout_ms: 3000,
        max_log_level: Some(LogLevel::Info),
    });
    assert_eq!(
        json(&hello),
        r#"{"type":"hello","version":1,"features":["shutdown"],"engineId":"keep-last","verifyId":true,"path":"/usr/bin/python3","config":{"keep":50},"loadTimeoutMs":5000,"callTimeoutMs":3000,"maxLogLevel":"info"}"#
    );
    let info = EngineInfo {
        id: "keep-last".into(),
        name: "Keep last N".into(),
        version: "0.1.0".into(),
        owns_compaction: false,
        protocol: rampart_engine_api::protocol::ProtocolInfo {
            protocol: "rampart-engine".into(),
            version: "1.1.0".into(),
            features: vec![],
        },
    };
    let ready = Frame::Ready(Ready {
        version: 1,
        features: vec!["shutdown".into()],
        engine: Ok(info),
    });
    assert_eq!(
        json(&ready),
        r#"{"type":"ready","version":1,"features":["shutdown"],"engine":{"Ok":{"id":"keep-last","name":"Keep last N","version":"0.1.0","ownsCompaction":false,"protocol":{"protocol":"rampart-engine","version":"1.1.0","features":[]}}}}"#
    );
    let refused = Frame::Ready(Ready {
        version: 1,
        features: vec![],
        engine: Err("no model file".into()),
    });
    assert_eq!(
        json(&refused),
        r#"{"type":"ready","version":1,"features":[],"engine":{"Err":"no model file"}}"#
    );
    let call = Frame::Call {
        id: 1,
        method: "assemble".into(),
        payload: r#"{"messages":[]}"#.into(),
        timeout_ms: 3000,
    };
    assert_eq!(
        json(&call),
        r#"{"type":"call","id":1,"method":"assemble","payload":"{\"messages\":[]}","timeout_ms":3000}"#
    );
    let ok = Frame::Reply {
        id: 1,
        result: Outcome::Ok(r#"{"messages":[]}"#.into()),
    };
    assert_eq!(
        json(&ok),
        r#"{"type":"reply","id":1,"result":{"ok":"{\"messages\":[]}"}}"#
    );
    let err = Frame::Reply {
        id: 2,
        result: Outcome::of(Err(EngineError::new(ErrorKind::Unsupported, "no"))),
    };
    assert_eq!(
        json(&err),
        r#"{"type":"reply","id":2,"result":{"err":{"kind":1,"message":"no","details":null}}}"#
    );
    let service = Frame::Service {
        id: 1,
        method: "tokens.count".into(),
        payload: r#"{"tokenizer":"","messages":[]}"#.into(),
    };
    assert_eq!(
        json(&service),
        r#"{"type":"service","id":1,"method":"tokens.count","payload":"{\"tokenizer\":\"\",\"messages\":[]}"}"#
    );
    assert_eq!(
        json(&Frame::Shutdown { id: 9 }),
        r#"{"type":"shutdown","id":9}"#
    );
    // What a program may leave out: an error's details, and every field of an unknown frame.
    let minimal = br#"{"type":"reply","id":3,"result":{"err":{"kind":4,"message":"late"}}}"#;
    let mut bytes = (minimal.len() as u32).to_be_bytes().to_vec();
    bytes.extend_from_slice(minimal);
    let Frame::Reply { result, .. } = read_frame(&mut bytes.as_slice()).unwrap() else {
        panic!("reply")
    };
    assert_eq!(result.into_result().unwrap_err().kind, ErrorKind::Timeout);
}
