use std::collections::BTreeMap;

use proptest::prelude::*;
use serde::Serialize;
use serde_json::Value;

use super::depth;
use crate::session::json_depth;

/// The depth read from the value is the depth of the text the writer makes of it.
fn same_depth<T: Serialize + ?Sized + std::fmt::Debug>(value: &T) -> usize {
    let line = crate::compact_json::to_vec(value).unwrap();
    let from_text = json_depth(&line);
    assert_eq!(
        depth(value),
        from_text,
        "{value:?} written as {}",
        String::from_utf8_lossy(&line)
    );
    from_text
}

/// Strings full of what a text scan must step over: brackets, quotes and backslashes.
fn bracket_string() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        prop::collection::vec(
            prop::sample::select(&['[', ']', '{', '}', '"', '\\', 'a', ',', ':'][..]),
            0..40
        )
        .prop_map(|chars| chars.into_iter().collect()),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        (-1e6f64..1e6).prop_map(Value::from),
        bracket_string().prop_map(Value::from),
    ];
    leaf.prop_recursive(8, 128, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((bracket_string(), inner), 0..5)
                .prop_map(|pairs| Value::Object(pairs.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn any_value_nests_as_deep_as_its_text(value in json_value()) {
        same_depth(&value);
    }
}

#[derive(Debug, Serialize)]
enum Shape {
    Unit,
    Newtype(Vec<u8>),
    Tuple(u8, Vec<Value>),
    Struct { inner: Option<Box<Shape>> },
}

#[derive(Debug, Serialize)]
struct Wrapper<'a> {
    shapes: Vec<Shape>,
    #[serde(with = "serde_bytes_as_bytes")]
    raw: &'a [u8],
    pair: (u8, (u8, Vec<u8>)),
    unit: (),
    #[serde(flatten)]
    rest: BTreeMap<String, Value>,
}

/// Writes a byte slice with `serialize_bytes` (serde_json: an array of numbers).
mod serde_bytes_as_bytes {
    pub fn serialize<S: serde::Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(bytes)
    }
}

/// Every shape serde gives a Rust type: enum variants of each kind (an object around the
/// value, or around an array or object), byte strings, tuples, unit, options, flattened maps.
#[test]
fn every_serde_shape_nests_as_its_text() {
    for shape in [
        Shape::Unit,
        Shape::Newtype(vec![]),
        Shape::Newtype(vec![1, 2]),
        Shape::Tuple(1, vec![]),
        Shape::Tuple(1, vec![Value::Array(vec![Value::Array(vec![])])]),
        Shape::Struct { inner: None },
        Shape::Struct {
            inner: Some(Box::new(Shape::Struct {
                inner: Some(Box::new(Shape::Tuple(
                    0,
                    vec![serde_json::json!({"a": [[]]})],
                ))),
            })),
        },
    ] {
        same_depth(&shape);
    }
    let mut rest = BTreeMap::new();
    rest.insert("deep".to_owned(), serde_json::json!([[[["]]]]"]]]]));
    let wrapper = Wrapper {
        shapes: vec![Shape::Unit, Shape::Newtype(vec![7])],
        raw: b"{[",
        pair: (1, (2, vec![3])),
        unit: (),
        rest,
    };
    assert_eq!(same_depth(&wrapper), 5);
    assert_eq!(same_depth(&"[[[{{{"), 0);
    assert_eq!(same_depth(&Value::Null), 0);
}

/// Every entry of the example sessions: the depth of its line, as the check before each append
/// now reads it.
#[test]
fn every_entry_of_the_example_sessions_nests_as_its_line() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/sessions");
    let mut deepest = 0;
    for name in [
        "openclaw-coding-b1809e0c.jsonl",
        "openclaw-main-3479d118.jsonl",
    ] {
        let loaded = crate::load_file(&root.join(name), &crate::LoadOptions::default()).unwrap();
        same_depth(&loaded.header);
        for entry in loaded.tree.entries() {
            deepest = deepest.max(same_depth(entry));
        }
    }
    assert!(deepest >= 4, "the example entries nest {deepest} deep");
}

/// Past the parser's limit, by the value alone: 200 arrays, and a string that only looks deep.
#[test]
fn a_deep_value_is_measured_without_its_text() {
    let mut deep = Value::Null;
    for _ in 0..200 {
        deep = Value::Array(vec![deep]);
    }
    assert_eq!(depth(&deep), 200);
    assert_eq!(depth(&Value::String("[".repeat(10_000))), 0);
}
