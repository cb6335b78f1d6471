use super::json_depth;

/// The byte-by-byte reading `json_depth` replaced, kept as the reference.
fn reference(line: &[u8]) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let (mut in_string, mut escaped) = (false, false);
    for &byte in line {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// Brackets inside strings never count, however the quotes around them are escaped; the
/// result is the byte-by-byte reading's on every line, well formed or cut short.
#[test]
fn depth_skips_strings_as_the_bytewise_reading_did() {
    let lines: [&[u8]; 10] = [
        br#"{"a": [1, {"b": "]]]"}]}"#,
        br#"{"a": "x\"[[[", "b": [[[]]]}"#,
        br#"{"a": "x\\", "b": [[["\\\"{"]]]}"#,
        br#"{"a": "\\\\\\\"}}}{{{", "b": {}}"#,
        br#"[[[[[[[[[["#,
        br#"{"a": "unterminated [[["#,
        br#"{"a": "ends in a backslash \"#,
        br#""""""""#,
        b"",
        "{\"é\": [\"日本語 [\", {\"k\": [\"\\\\\"]}]}".as_bytes(),
    ];
    for line in lines {
        assert_eq!(
            json_depth(line),
            reference(line),
            "{}",
            String::from_utf8_lossy(line)
        );
    }
    let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
    assert_eq!(json_depth(deep.as_bytes()), 200);
}
