//! Where a request body's conversation array is (`messages`, or a Responses body's `input`), by
//! its bytes: the byte range of each element, found by a scanner that reads strings and
//! brackets and nothing else.
//!
//! Why: a client re-sends its whole conversation on every request, and all but the newest
//! messages are byte for byte what it sent last time. Knowing where each message's bytes are
//! lets [`super::inbound_memo`] recognise the part it has decoded before with a `memcmp` and
//! hand only the rest to the JSON parser.
//!
//! The scanner does not validate: it only has to be right about well-formed bodies, because
//! every byte it does not compare with bytes that parsed before is parsed by `serde_json`
//! (which rejects what is malformed). On anything unusual (a key written with escapes, a
//! second `messages` key, no array, a body that is not an object) it answers `None` and the
//! body is parsed whole.

use std::ops::Range;

/// The top-level conversation array (`messages` or `input`) of a JSON object body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageSlices {
    /// The byte range of the array, brackets included.
    pub array: Range<usize>,
    /// Where the first element starts (the array's `]` when it has none).
    pub start: usize,
    /// How many leading elements were recognised by their bytes ([`index_known`]) and not
    /// scanned; they end at `known_end`.
    pub known: usize,
    /// Where the recognised elements end (`start` when none were).
    pub known_end: usize,
    /// The byte range of each element after the recognised ones, in order (no surrounding
    /// whitespace or commas).
    pub elements: Vec<Range<usize>>,
}

impl MessageSlices {
    /// How many elements the array holds.
    pub fn len(&self) -> usize {
        self.known + self.elements.len()
    }

    /// Whether the array is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes of every element, from the first one's start to the last one's end.
    pub fn all(&self) -> Range<usize> {
        let end = self.elements.last().map_or(self.known_end, |last| last.end);
        self.start..end
    }
}

/// The array under `key` in `body`, or `None` when the body is not an object with exactly one
/// plainly written `key` whose value is an array.
pub fn index(body: &[u8], key: &str) -> Option<MessageSlices> {
    index_known(body, key, |_| None)
}

/// [`index`], where `known` may recognise the leading elements without their being scanned:
/// given the bytes from the first element on, it answers how many bytes and elements it
/// knows. They are taken only when a `,` follows them: at least one element is left to scan.
/// Why: a request re-sends what the last one sent, and the bytes of those elements are
/// compared with the kept ones anyway; scanning them again was a tenth of a request.
pub fn index_known(
    body: &[u8],
    key_name: &str,
    known: impl FnOnce(&[u8]) -> Option<(usize, usize)>,
) -> Option<MessageSlices> {
    let mut known = Some(known);
    let mut at = skip_ws(body, 0);
    if body.get(at) != Some(&b'{') {
        return None;
    }
    at = skip_ws(body, at + 1);
    let mut found = None;
    if body.get(at) == Some(&b'}') {
        return None;
    }
    loop {
        if body.get(at) != Some(&b'"') {
            return None;
        }
        let key_end = string_end(body, at)?;
        let key = &body[at + 1..key_end - 1];
        // A key written with escapes could spell the array's: such bodies are parsed whole.
        if key.contains(&b'\\') {
            return None;
        }
        at = skip_ws(body, key_end);
        if body.get(at) != Some(&b':') {
            return None;
        }
        at = skip_ws(body, at + 1);
        if key == key_name.as_bytes() {
            if found.is_some() || body.get(at) != Some(&b'[') {
                return None;
            }
            let (slices, end) = array_elements(body, at, known.take()?)?;
            found = Some(slices);
            at = end;
        } else {
            at = value_end(body, at)?;
        }
        at = skip_ws(body, at);
        match body.get(at) {
            Some(b',') => at = skip_ws(body, at + 1),
            Some(b'}') => break,
            _ => return None,
        }
    }
    // Nothing but whitespace may follow the object.
    if skip_ws(body, at + 1) != body.len() {
        return None;
    }
    found
}

/// The elements of the array opening at `open`, and the offset after its `]`.
fn array_elements(
    body: &[u8],
    open: usize,
    known: impl FnOnce(&[u8]) -> Option<(usize, usize)>,
) -> Option<(MessageSlices, usize)> {
    let mut elements = Vec::new();
    let start = skip_ws(body, open + 1);
    let mut at = start;
    let slices = |elements, known, known_end, close: usize| MessageSlices {
        array: open..close + 1,
        start,
        known,
        known_end,
        elements,
    };
    if body.get(at) == Some(&b']') {
        return Some((slices(elements, 0, start, at), at + 1));
    }
    let (mut count, mut known_end) = (0, start);
    if let Some((len, n)) = known(&body[start..]) {
        let after = skip_ws(body, start + len);
        if n > 0 && body.get(after) == Some(&b',') {
            (count, known_end) = (n, start + len);
            at = skip_ws(body, after + 1);
        }
    }
    loop {
        let end = value_end(body, at)?;
        elements.push(at..end);
        at = skip_ws(body, end);
        match body.get(at) {
            Some(b',') => at = skip_ws(body, at + 1),
            Some(b']') => return Some((slices(elements, count, known_end, at), at + 1)),
            _ => return None,
        }
    }
}

fn skip_ws(body: &[u8], mut at: usize) -> usize {
    while matches!(body.get(at), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        at += 1;
    }
    at
}

/// The offset after the string opening at `open` (a `"`): the first quote not escaped, found
/// with `memchr` and told apart from an escaped one by the backslashes before it (an odd
/// number escapes it). Stopping at every backslash instead made escaped code, a newline every
/// few dozen bytes, the scanner's slowest input.
fn string_end(body: &[u8], open: usize) -> Option<usize> {
    let mut at = open + 1;
    loop {
        at += memchr::memchr(b'"', body.get(at..)?)?;
        let backslashes = body[open + 1..at]
            .iter()
            .rev()
            .take_while(|&&b| b == b'\\')
            .count();
        if backslashes % 2 == 0 {
            return Some(at + 1);
        }
        at += 1;
    }
}

/// The offset after the value starting at `start`.
fn value_end(body: &[u8], start: usize) -> Option<usize> {
    match body.get(start)? {
        b'"' => string_end(body, start),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut at = start;
            loop {
                match body.get(at)? {
                    b'"' => {
                        at = string_end(body, at)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(at + 1);
                        }
                    }
                    _ => {}
                }
                at += 1;
            }
        }
        _ => {
            // A number, `true`, `false` or `null`: up to the next delimiter.
            let rest = &body[start..];
            let len = rest
                .iter()
                .position(|b| matches!(b, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r'))
                .unwrap_or(rest.len());
            (len > 0).then_some(start + len)
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "raw_messages_tests.rs"]
mod tests;
