use super::*;

/// Every kind keeps its wire name, and reads back from its envelope as itself.
#[test]
fn every_kind_round_trips_through_its_envelope() {
    let events = [
        (
            "guard_warn",
            Event::GuardWarn(GuardWarn {
                model: "sim/m".into(),
                window: 24_000,
            }),
        ),
        (
            "ingest_cap",
            Event::IngestCap(IngestCap {
                tool_call_id: Some("call_1".into()),
                tool_name: Some("read".into()),
                original_chars: 5_000_000,
                ..Default::default()
            }),
        ),
        (
            "compaction_end",
            Event::CompactionEnd(CompactionEnd {
                reason: "overflow".into(),
                compacted: true,
                tokens_before: Some(30_000),
                tokens_after: Some(9_000),
                ..Default::default()
            }),
        ),
        (
            "give_up",
            Event::GiveUp(GiveUp {
                kind: "context_overflow".into(),
                message: "m".into(),
                ..Default::default()
            }),
        ),
        (
            "retry",
            Event::Retry(Retry {
                attempt: 2,
                after: "compaction".into(),
            }),
        ),
    ];
    for (kind, event) in events {
        let envelope = event.envelope(Some("s1".into()));
        assert_eq!(envelope.kind, kind);
        assert_eq!(envelope.session_id.as_deref(), Some("s1"));
        assert_eq!(event.kind(), kind);
        assert_eq!(
            Event::from_envelope(&envelope.kind, &envelope.data),
            Some(event)
        );
    }
}

/// The data keeps the field names `--events` files and old readers use.
#[test]
fn data_is_camel_case() {
    let envelope = Event::IngestCap(IngestCap {
        tool_call_id: Some("c".into()),
        tool_name: Some("bash".into()),
        original_chars: 10,
        omitted_chars: Some(4),
        ..Default::default()
    })
    .envelope(None);
    assert_eq!(
        envelope.data,
        serde_json::json!({"toolCallId": "c", "toolName": "bash", "originalChars": 10, "omittedChars": 4})
    );
}

/// A kind this version does not know is not an event, and not an error either.
#[test]
fn unknown_kinds_stay_raw() {
    assert_eq!(
        Event::from_envelope("dream_sequence", &serde_json::json!({})),
        None
    );
}

/// Logs can be filtered by what an event is about.
#[test]
fn events_name_their_subject() {
    let request = Event::Request(Request {
        turn: 3,
        attempt: 2,
        model: "sim/m".into(),
        window: 32_000,
        estimated_tokens: 10,
        messages: 4,
    });
    let subject = request.subject();
    assert_eq!((subject.turn, subject.attempt), (Some(3), Some(2)));
    let cap = Event::IngestCap(IngestCap {
        tool_call_id: Some("call_9".into()),
        tool_name: Some("bash".into()),
        ..Default::default()
    });
    assert_eq!(cap.subject().tool_call_id, Some("call_9"));
    assert_eq!(cap.subject().tool_name, Some("bash"));
    assert_eq!(
        Event::GuardBlock(GuardBlock { line: "x".into() }).subject(),
        Subject::default()
    );
}

/// The compaction's entry is named only when the host appended one, so older readers and
/// events files without it read the same.
#[test]
fn a_compaction_names_its_entry_only_when_there_is_one() {
    let with = Event::CompactionEnd(CompactionEnd {
        reason: "overflow".into(),
        compacted: true,
        entry_id: Some("a1b2c3d4".into()),
        first_kept_entry_id: Some("0f0f0f0f".into()),
        ..Default::default()
    })
    .envelope(None);
    assert_eq!(with.data["entryId"], "a1b2c3d4");
    assert_eq!(with.data["firstKeptEntryId"], "0f0f0f0f");
    let without = Event::CompactionEnd(CompactionEnd::default()).envelope(None);
    assert!(without.data.get("entryId").is_none(), "{}", without.data);
    assert!(without.data.get("firstKeptEntryId").is_none());
    // An older host's event (no such fields) still reads.
    let old = serde_json::json!({"reason": "budget", "compacted": true, "durationMs": 3});
    assert!(matches!(
        Event::from_envelope("compaction_end", &old),
        Some(Event::CompactionEnd(CompactionEnd { entry_id: None, .. }))
    ));
}
