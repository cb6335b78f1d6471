use super::*;

fn elements(body: &str) -> Option<Vec<&str>> {
    let slices = index(body.as_bytes(), "messages")?;
    Some(slices.elements.iter().map(|r| &body[r.clone()]).collect())
}

#[test]
fn each_message_is_found_by_its_bytes() {
    let body = r#" { "model" : "m", "tools": [{"a": "]}"}], "messages" : [
        {"role": "user", "content": "a \"quoted\" ] } [ { text\\"},
        {"role":"assistant","content":null,"tool_calls":[{"id":"c","function":{"arguments":"{\"x\": [1]}"}}]} ,
        "odd", 42 , true
    ], "stream": false }"#;
    let found = elements(body).unwrap();
    assert_eq!(found.len(), 5);
    for element in &found[..2] {
        // Every element is the whole JSON value, as serde_json reads it.
        serde_json::from_str::<serde_json::Value>(element).unwrap();
    }
    assert_eq!(found[2], "\"odd\"");
    assert_eq!(found[3], "42");
    assert_eq!(found[4], "true");
    let slices = index(body.as_bytes(), "messages").unwrap();
    assert!(body[slices.array.clone()].starts_with('[') && body[slices.array].ends_with(']'));
}

#[test]
fn an_empty_array_has_no_elements() {
    assert_eq!(elements(r#"{"messages": []}"#), Some(vec![]));
}

/// Whatever the scanner is not sure of is left to the parser whole.
#[test]
fn unusual_bodies_are_not_indexed() {
    for body in [
        r#"[{"messages": []}]"#,
        r#"{"messages": {"0": 1}}"#,
        r#"{"messages": [1], "messages": [2]}"#,
        r#"{"mess\u0061ges": [1]}"#,
        r#"{"model": "m"}"#,
        r#"{"messages": [1, 2"#,
        r#"{"messages": [1] } trailing"#,
        r#"{"messages": ["unterminated]}"#,
        "",
        "{}",
    ] {
        assert_eq!(index(body.as_bytes(), "messages"), None, "{body}");
    }
}

/// Leading elements recognised by their bytes are not scanned; the rest are, and the slices
/// cover the same bytes as a whole scan. Recognised bytes not followed by a comma (nothing new
/// after them) are not taken.
#[test]
fn recognised_elements_are_taken_as_known() {
    let body = r#"{"model": "m", "messages": [ {"a": 1} , {"b": "]"}, {"c": 3} ], "n": 1}"#;
    let whole = index(body.as_bytes(), "messages").unwrap();
    let first_two = r#"{"a": 1} , {"b": "]"}"#;
    let known = index_known(body.as_bytes(), "messages", |from_first| {
        from_first
            .starts_with(first_two.as_bytes())
            .then_some((first_two.len(), 2))
    })
    .unwrap();
    assert_eq!((known.known, known.len()), (2, 3));
    assert_eq!(known.elements, whole.elements[2..].to_vec());
    assert_eq!(known.all(), whole.all());
    assert_eq!(&body[known.start..known.known_end], first_two);
    // All three known: nothing would be left to scan, so none are taken.
    let all = &body[whole.all()];
    let none = index_known(body.as_bytes(), "messages", |_| Some((all.len(), 3))).unwrap();
    assert_eq!((none.known, none.elements.len()), (0, 3));
}

/// A Responses body's conversation is its `input` array; a `messages` key beside it (or an
/// `input` given as a string) is not what is indexed.
#[test]
fn the_array_is_found_by_the_key_asked_for() {
    let body = r#"{"instructions": "x", "messages": [1], "input": [{"type": "message"}, 2]}"#;
    let input = index(body.as_bytes(), "input").unwrap();
    assert_eq!(input.elements.len(), 2);
    assert_eq!(&body[input.elements[1].clone()], "2");
    assert_eq!(
        index(body.as_bytes(), "messages").unwrap().elements.len(),
        1
    );
    assert_eq!(index(br#"{"input": "hello"}"#, "input"), None);
}
