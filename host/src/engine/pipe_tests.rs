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
