#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;

fn document(measured: bool) -> Value {
    let summary = Summary {
        calls: 1,
        compaction_ms_on_path: 12,
        preparation_ms: 3,
        peak_rss_bytes: Some(1 << 20),
        ..Summary::default()
    };
    let rows = [Row {
        turn: 1,
        compaction_ms: 12,
        ..Row::default()
    }];
    let mut out = Vec::new();
    write(&mut out, &summary, &rows, measured).unwrap();
    serde_json::from_slice(&out).unwrap()
}

#[test]
fn measurements_are_null_unless_asked_for_and_nothing_else_changes() {
    let plain = document(false);
    let timed = document(true);
    for field in MEASURED_SUMMARY_FIELDS {
        assert_eq!(plain["summary"][field], Value::Null, "{field}");
        assert!(timed["summary"].get(field).is_some(), "{field}");
    }
    assert_eq!(timed["summary"]["compactionMsOnPath"], 12);
    assert_eq!(timed["summary"]["peakRssBytes"], 1 << 20);
    assert_eq!(timed["rows"][0]["compactionMs"], 12);
    assert_eq!(plain["rows"][0]["compactionMs"], Value::Null);
    // Nothing else differs.
    let mut masked = timed.clone();
    unmeasured(&mut masked);
    assert_eq!(masked, plain);
    assert_eq!(plain["summary"]["calls"], 1);
    assert_eq!(plain["rows"][0]["turn"], 1);
}
