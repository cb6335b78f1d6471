//! The compact writer against serde_json's, byte for byte: generated values, every character
//! that needs (or might be thought to need) escaping at every offset a vector loop can meet,
//! floats at the formatter's edges, and every line of the example sessions.

use std::collections::BTreeMap;

use proptest::prelude::*;
use serde::Serialize;
use serde_json::{Value, json};

use super::*;

/// Both writers' bytes for `value`, asserted equal; returns them.
fn same_bytes<T: Serialize + ?Sized + std::fmt::Debug>(value: &T) -> Vec<u8> {
    let theirs = serde_json::to_vec(value).unwrap();
    let ours = to_vec(value).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&ours),
        String::from_utf8_lossy(&theirs),
        "the compact writer and serde_json differ on {value:?}"
    );
    ours
}

/// Characters a JSON writer treats specially, or that a careless one might.
const SPECIAL: &[char] = &[
    '"',
    '\\',
    '/',
    '\u{0}',
    '\u{1}',
    '\u{8}',
    '\t',
    '\n',
    '\u{b}',
    '\u{c}',
    '\r',
    '\u{1b}',
    '\u{1f}',
    ' ',
    '\u{7f}',
    '\u{80}',
    '\u{a0}',
    'é',
    '\u{2028}',
    '\u{2029}',
    '\u{fffd}',
    '\u{feff}',
    '😀',
    '\u{10ffff}',
    'a',
    '{',
    '}',
    '[',
    ']',
    ',',
    ':',
];

fn tricky_string() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        prop::collection::vec(prop::sample::select(SPECIAL), 0..130)
            .prop_map(|chars| chars.into_iter().collect()),
    ]
}

fn number() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        // Every finite f64 bit pattern: subnormals, both zeros, the extremes.
        any::<u64>()
            .prop_map(f64::from_bits)
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        (-1e6f64..1e6).prop_map(Value::from),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        number(),
        tricky_string().prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            // Keys in generated (not sorted) order: a map is written in its own order.
            prop::collection::vec((tricky_string(), inner), 0..6)
                .prop_map(|pairs| Value::Object(pairs.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn any_value_is_written_as_serde_json_writes_it(value in json_value()) {
        same_bytes(&value);
    }

    #[test]
    fn any_string_is_escaped_as_serde_json_escapes_it(text in tricky_string()) {
        same_bytes(&text);
        same_bytes(&json!({ text.clone(): text }));
    }
}

#[test]
fn each_special_character_at_every_offset_of_a_long_string_is_escaped_alike() {
    // Vector loops take 16, 32 or 64 bytes at a time: a character before, on and after each
    // boundary, in a string long enough to need more than one step.
    for &c in SPECIAL {
        for offset in 0..140 {
            let mut text: String = "x".repeat(offset);
            text.push(c);
            text.push_str(&"y".repeat(140 - offset));
            same_bytes(&text);
        }
    }
    for byte in 0u8..=0x7f {
        same_bytes(&char::from(byte).to_string());
    }
}

#[test]
fn floats_at_the_formatters_edges_are_written_alike() {
    let edges = [
        0.0,
        -0.0,
        1.0,
        -1.0,
        0.1,
        0.3,
        1.5e-7,
        1e-7,
        1e-6,
        123456.789,
        1e15,
        1e16,
        1e17,
        9007199254740993.0,
        18014398509481988.0,
        1.7976931348623157e308,
        -1.7976931348623157e308,
        f64::MIN_POSITIVE,
        5e-324,
        f64::from_bits(0x000f_ffff_ffff_ffff), // the largest subnormal
        4.35,
        f64::EPSILON,
        std::f64::consts::PI,
        1e21,
        1e22,
        123e-20,
    ];
    for float in edges {
        let bytes = same_bytes(&float);
        let read: f64 = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(read.to_bits(), float.to_bits(), "{float:e} reads back");
        same_bytes(&json!([float]));
    }
    // Not a JSON number: `null`, as serde_json writes it.
    assert_eq!(same_bytes(&[f64::NAN, f64::INFINITY]), b"[null,null]");
}

#[test]
fn every_line_of_the_example_sessions_is_written_alike() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/sessions");
    let mut lines = 0;
    for name in [
        "openclaw-coding-b1809e0c.jsonl",
        "openclaw-main-3479d118.jsonl",
    ] {
        let loaded = crate::load_file(&root.join(name), &crate::LoadOptions::default()).unwrap();
        same_bytes(&loaded.header);
        for entry in loaded.tree.entries() {
            same_bytes(entry);
            lines += 1;
        }
    }
    assert!(lines > 500, "the example sessions hold {lines} entries");
}

#[test]
fn a_value_json_cannot_hold_is_an_error_as_in_serde_json() {
    let mut map = BTreeMap::new();
    map.insert(vec![1u8], 1);
    assert!(serde_json::to_vec(&map).is_err());
    let error = to_vec(&map).unwrap_err();
    assert!(error.to_string().contains("key"), "{error}");
    let mut out = Vec::new();
    assert!(write(&mut out, &map).is_err());
}

#[test]
fn to_string_and_write_append_the_same_text() {
    let value = json!({"role": "user", "content": "tab\there \u{1} é", "n": [1, -2, 0.5]});
    let mut out = b"prefix:".to_vec();
    write(&mut out, &value).unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        format!("prefix:{}", to_string(&value).unwrap())
    );
}
