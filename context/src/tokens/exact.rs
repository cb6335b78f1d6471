//! Exact BPE counts for OpenAI's o200k_base and cl100k_base, on the `bpe-openai` crate.
//!
//! Why `bpe-openai` (GitHub's `bpe`): it ships both vocabularies inside the crate (its build
//! script turns the bundled files into ready tables, nothing is fetched), its BPE is linear in
//! the input where tiktoken's is quadratic in the length of a piece (a long run without spaces,
//! such as base64 in a tool result, stays cheap), and it counts without building the token list.
//! It was about twice as fast as `tiktoken-rs` on our mixed text.
//!
//! What we add on top, both for speed and both exact:
//! - **Pre-tokenisation fast path.** The tokenizers first split text with a regular expression
//!   (`pat_str` of tiktoken's encodings), which costs more than the BPE itself on code. For a
//!   piece whose characters are all ASCII, [`o200k_piece`] and [`cl100k_piece`] decide the
//!   same split by hand; as soon as a decision would depend on a non-ASCII character they give
//!   up, and the crate's own expression is asked for that one piece, anchored at the same
//!   place. Tests check the two splits agree on random and real text.
//! - **Piece cache.** Pieces repeat, so each thread keeps the counts of recent pieces in a
//!   small direct-mapped table ([`PieceCache`]) that stays in the CPU's cache.
//! - **Whole-piece lookup.** A piece that is itself a vocabulary entry is one token (tiktoken
//!   checks this first too), so a hash lookup answers most new pieces without running the BPE.
//!
//! The vocabularies load lazily, once per process, on the first exact count of each encoding
//! (about 0.15 s for o200k_base in a release build).

use std::cell::RefCell;
use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::LazyLock;

use bpe_openai::Tokenizer;

use super::Encoding;

/// One encoding, loaded: the crate's tokenizer plus our lookup of whole vocabulary entries.
struct Vocabulary {
    encoding: Encoding,
    tokenizer: &'static Tokenizer,
    entries: HashSet<&'static [u8], BuildHasherDefault<BytesHasher>>,
    fast_piece: fn(&[u8]) -> Option<usize>,
}

static O200K_BASE: LazyLock<Vocabulary> =
    LazyLock::new(|| Vocabulary::load(Encoding::O200kBase, bpe_openai::o200k_base(), o200k_piece));
static CL100K_BASE: LazyLock<Vocabulary> = LazyLock::new(|| {
    Vocabulary::load(
        Encoding::Cl100kBase,
        bpe_openai::cl100k_base(),
        cl100k_piece,
    )
});

thread_local! {
    static O200K_CACHE: RefCell<PieceCache> = RefCell::new(PieceCache::default());
    static CL100K_CACHE: RefCell<PieceCache> = RefCell::new(PieceCache::default());
}

fn vocabulary(encoding: Encoding) -> &'static Vocabulary {
    match encoding {
        Encoding::O200kBase => &O200K_BASE,
        Encoding::Cl100kBase => &CL100K_BASE,
    }
}

/// The tokens `text` encodes to, as ordinary text (special-token strings such as
/// `<|endoftext|>` are counted as the text they are, like tiktoken's `encode_ordinary`).
pub(crate) fn count(encoding: Encoding, text: &str) -> u64 {
    vocabulary(encoding).count(text)
}

/// Loads the vocabulary now, so that the first count does not pay for it.
pub(crate) fn preload(encoding: Encoding) {
    let _ = vocabulary(encoding);
}

impl Vocabulary {
    fn load(
        encoding: Encoding,
        tokenizer: &'static Tokenizer,
        fast_piece: fn(&[u8]) -> Option<usize>,
    ) -> Self {
        let bpe = &tokenizer.bpe;
        let n = bpe.num_tokens();
        let mut entries = HashSet::with_capacity_and_hasher(n, BuildHasherDefault::default());
        for id in 0..n {
            if let Ok(id) = u32::try_from(id) {
                entries.insert(bpe.token_bytes(id));
            }
        }
        Self {
            encoding,
            tokenizer,
            entries,
            fast_piece,
        }
    }

    fn count(&self, text: &str) -> u64 {
        let cache = match self.encoding {
            Encoding::O200kBase => &O200K_CACHE,
            Encoding::Cl100kBase => &CL100K_CACHE,
        };
        // The cache is per thread; while a thread is being torn down it is gone, and counting
        // goes on without it.
        cache
            .try_with(|cache| match cache.try_borrow_mut() {
                Ok(mut cache) => self.count_with(text, Some(&mut cache)),
                Err(_) => self.count_with(text, None),
            })
            .unwrap_or_else(|_| self.count_with(text, None))
    }

    fn count_with(&self, text: &str, mut cache: Option<&mut PieceCache>) -> u64 {
        let bytes = text.as_bytes();
        let mut total = 0u64;
        let mut pos = 0;
        while pos < bytes.len() {
            let rest = &bytes[pos..];
            let len = match (self.fast_piece)(rest) {
                Some(len) => len,
                None => self.regex_piece(text, pos),
            }
            .clamp(1, rest.len());
            let piece = &rest[..len];
            total += match cache.as_deref_mut() {
                Some(cache) => cache.count(piece, |piece| self.count_piece(piece)),
                None => self.count_piece(piece),
            };
            pos += len;
        }
        total
    }

    /// The tokens of one piece: one if the piece is a vocabulary entry, else the BPE's count.
    fn count_piece(&self, piece: &[u8]) -> u64 {
        if self.entries.contains(piece) {
            1
        } else {
            self.tokenizer.bpe.count(piece) as u64
        }
    }

    /// The length of the piece starting at `pos`, by the crate's own expression. Matching on
    /// the rest of the text is matching at `pos`: the expressions look neither behind nor at
    /// the start. Should it find nothing (every character matches some branch, so it cannot),
    /// the rest is one piece rather than lost.
    fn regex_piece(&self, text: &str, pos: usize) -> usize {
        let rest_len = text.len() - pos;
        text.get(pos..)
            .and_then(|rest| self.tokenizer.split(rest).next())
            .map_or(rest_len, str::len)
    }
}

// ---------------------------------------------------------------------------
// The piece cache
// ---------------------------------------------------------------------------

/// Slots in a thread's piece cache (a power of two).
const CACHE_SLOTS: usize = 4_096;
/// log2 of [`CACHE_SLOTS`]: the slot index is the top bits of the hash.
const CACHE_BITS: u32 = 12;
/// Words of piece a slot holds.
const CACHE_WORDS: usize = 3;
/// The longest piece a slot holds; longer pieces are rare and are counted every time.
const CACHE_PIECE: usize = CACHE_WORDS * 8;

/// One cached piece, zero-padded into words, and its count: 32 bytes, half a cache line.
/// `len == 0` is empty (a piece is never empty).
#[derive(Clone, Copy, Default)]
struct Slot {
    words: [u64; CACHE_WORDS],
    len: u8,
    tokens: u8,
}

/// A direct-mapped cache of recent pieces and their counts, one per thread and encoding.
///
/// Why: words repeat (a few thousand pieces make up most of any text), and both the vocabulary
/// lookup and the BPE walk large tables with a cache miss or more per step. 128 KB of recent
/// pieces stays in the CPU's cache, so a repeated piece costs a hash and three word compares.
/// Per thread, so it needs no lock; exact, because a hit compares the whole piece.
struct PieceCache {
    slots: Box<[Slot]>,
}

impl Default for PieceCache {
    fn default() -> Self {
        Self {
            slots: vec![Slot::default(); CACHE_SLOTS].into_boxed_slice(),
        }
    }
}

impl PieceCache {
    fn count(&mut self, piece: &[u8], count: impl FnOnce(&[u8]) -> u64) -> u64 {
        let Some(words) = piece_words(piece) else {
            return count(piece);
        };
        let len = piece.len() as u8; // at most CACHE_PIECE
        let [w0, w1, w2] = words;
        let hash = u64::from(len).wrapping_mul(0xD6E8_FEB8_6659_FD93)
            ^ w0.wrapping_mul(0x9E37_79B9_7F4A_7C15)
            ^ w1.wrapping_mul(0xC2B2_AE3D_27D4_EB4F)
            ^ w2.wrapping_mul(0x1656_67B1_9E37_79F9);
        // The top bits of a product depend on every bit of its input; the low ones do not.
        let index = (hash >> (64 - CACHE_BITS)) as usize;
        let Some(slot) = self.slots.get_mut(index) else {
            return count(piece);
        };
        if slot.len == len && slot.words[0] == w0 && slot.words[1] == w1 && slot.words[2] == w2 {
            return u64::from(slot.tokens);
        }
        let tokens = count(piece);
        if let Ok(small) = u8::try_from(tokens) {
            *slot = Slot {
                words,
                len,
                tokens: small,
            };
        }
        tokens
    }
}

/// `piece` as little-endian words, zero-padded, or `None` when it is longer than a slot holds.
/// Built with whole-word loads (a short tail from two overlapping halves) and kept in
/// registers: writing bytes to a buffer and reading it back as words stalls the CPU.
#[inline]
fn piece_words(piece: &[u8]) -> Option<[u64; CACHE_WORDS]> {
    if piece.len() > CACHE_PIECE {
        return None;
    }
    let word = |at: usize| match piece.get(at..at + 8) {
        Some(full) => <[u8; 8]>::try_from(full).map_or(0, u64::from_le_bytes),
        None => piece.get(at..).map_or(0, tail_word),
    };
    Some([word(0), word(8), word(16)])
}

/// Up to seven bytes as a zero-padded little-endian word.
#[inline]
fn tail_word(tail: &[u8]) -> u64 {
    match (tail.first_chunk::<4>(), tail.last_chunk::<4>()) {
        (Some(first), Some(last)) => {
            let low = u64::from(u32::from_le_bytes(*first));
            let high = u64::from(u32::from_le_bytes(*last));
            // The halves overlap on equal bytes, so OR-ing them is exact.
            low | (high << (8 * (tail.len() - 4)))
        }
        _ => tail
            .iter()
            .enumerate()
            .fold(0, |word, (i, &b)| word | (u64::from(b) << (8 * i))),
    }
}

// ---------------------------------------------------------------------------
// The ASCII pre-tokeniser
// ---------------------------------------------------------------------------
//
// The expressions, in tiktoken's spelling (alternatives tried in order, first match wins):
//
// cl100k_base:
//   1 (?i:'s|'t|'re|'ve|'m|'ll|'d)
//   2 [^\r\n\p{L}\p{N}]?\p{L}+
//   3 \p{N}{1,3}
//   4  ?[^\s\p{L}\p{N}]+[\r\n]*
//   5 \s*[\r\n]+
//   6 \s+(?!\S)
//   7 \s+
//
// o200k_base:
//   1 [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//   2 [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//   3 \p{N}{1,3}
//   4  ?[^\s\p{L}\p{N}]+[\r\n/]*
//   5-7 as cl100k_base
//
// Over ASCII the classes are simple: letters are A-Z (Lu) and a-z (Ll), digits 0-9, `\s` is
// \t \n \v \f \r and space, everything else (punctuation, symbols, other controls) is neither.
// A non-ASCII character could be any of them (a letter, a mark, a digit, a space, a letter that
// matches `s` without case), so the matchers return `None` whenever the answer depends on one.

const UPPER: u8 = 0;
const LOWER: u8 = 1;
const DIGIT: u8 = 2;
/// `\r` or `\n`.
const NEWLINE: u8 = 3;
/// Whitespace other than a newline: \t, \v, \f, space.
const SPACE: u8 = 4;
/// Neither a letter, a digit nor whitespace.
const OTHER: u8 = 5;
/// A byte of a non-ASCII character.
const HIGH: u8 = 6;
/// Past the end of the text.
const END: u8 = 7;

static CLASS: [u8; 256] = class_table();

const fn class_table() -> [u8; 256] {
    let mut table = [OTHER; 256];
    let mut b = 0;
    while b < 256 {
        table[b] = match b as u8 {
            b'A'..=b'Z' => UPPER,
            b'a'..=b'z' => LOWER,
            b'0'..=b'9' => DIGIT,
            b'\r' | b'\n' => NEWLINE,
            b'\t' | 0x0B | 0x0C | b' ' => SPACE,
            0x80..=0xFF => HIGH,
            _ => OTHER,
        };
        b += 1;
    }
    table
}

#[inline]
fn class(bytes: &[u8], i: usize) -> u8 {
    match bytes.get(i) {
        Some(&b) => CLASS[usize::from(b)],
        None => END,
    }
}

#[inline]
fn is_letter(class: u8) -> bool {
    class == UPPER || class == LOWER
}

/// Can start a piece as the optional `[^\r\n\p{L}\p{N}]` before letters.
#[inline]
fn is_prefix(class: u8) -> bool {
    class == SPACE || class == OTHER
}

/// The outcome of matching `(?i:'s|'t|'re|'ve|'m|'ll|'d)` at an apostrophe.
enum Contraction {
    Len(usize),
    No,
    Unknown,
}

fn contraction(bytes: &[u8], at: usize) -> Contraction {
    let second = |want: u8| match bytes.get(at + 2) {
        Some(&b) if b >= 0x80 => Contraction::Unknown,
        Some(&b) if b.to_ascii_lowercase() == want => Contraction::Len(3),
        _ => Contraction::No,
    };
    match bytes.get(at + 1) {
        // `ſ` (U+017F) matches `s` without case, so a non-ASCII letter here is undecided.
        Some(&b) if b >= 0x80 => Contraction::Unknown,
        Some(&b) => match b.to_ascii_lowercase() {
            b's' | b't' | b'm' | b'd' => Contraction::Len(2),
            b'r' | b'v' => second(b'e'),
            b'l' => second(b'l'),
            _ => Contraction::No,
        },
        None => Contraction::No,
    }
}

/// `\p{N}{1,3}` at the start of `bytes`, which is a digit.
fn digits(bytes: &[u8]) -> Option<usize> {
    let mut i = 1;
    while i < 3 {
        match class(bytes, i) {
            DIGIT => i += 1,
            HIGH => return None,
            _ => break,
        }
    }
    Some(i)
}

/// ` ?[^\s\p{L}\p{N}]+` then `trail*`, from `start` (the first symbol).
fn symbols(bytes: &[u8], start: usize, trail: impl Fn(u8) -> bool) -> Option<usize> {
    let mut i = start + 1;
    loop {
        match class(bytes, i) {
            OTHER => i += 1,
            HIGH => return None,
            _ => break,
        }
    }
    // A non-ASCII character is none of \r \n /, so the trail needs no care.
    while bytes.get(i).is_some_and(|&b| trail(b)) {
        i += 1;
    }
    Some(i)
}

/// Alternatives 5 to 7 at whitespace: up to the last newline of the run; else the whole run at
/// the end of the text; else the run but its last character (which then starts the next
/// piece, as `\s+(?!\S)` wants); else the one character.
fn whitespace(bytes: &[u8]) -> Option<usize> {
    let mut i = 0;
    let mut last_newline = None;
    loop {
        match class(bytes, i) {
            SPACE => i += 1,
            NEWLINE => {
                last_newline = Some(i);
                i += 1;
            }
            HIGH => return None,
            _ => break,
        }
    }
    Some(match last_newline {
        Some(nl) => nl + 1,
        None if i >= bytes.len() || i == 1 => i,
        None => i - 1,
    })
}

/// The length of cl100k_base's first piece of `bytes`, or `None` when it depends on a
/// non-ASCII character.
pub(crate) fn cl100k_piece(bytes: &[u8]) -> Option<usize> {
    let c0 = class(bytes, 0);
    if c0 == HIGH || c0 == END {
        return None;
    }
    if bytes[0] == b'\'' {
        match contraction(bytes, 0) {
            Contraction::Len(n) => return Some(n),
            Contraction::Unknown => return None,
            Contraction::No => {}
        }
    }
    let c1 = class(bytes, 1);
    let letters_from = if is_letter(c0) {
        Some(0)
    } else if is_prefix(c0) {
        if c1 == HIGH {
            return None;
        }
        is_letter(c1).then_some(1)
    } else {
        None
    };
    if let Some(start) = letters_from {
        let mut i = start + 1;
        loop {
            match class(bytes, i) {
                UPPER | LOWER => i += 1,
                HIGH => return None,
                _ => break,
            }
        }
        return Some(i);
    }
    if c0 == DIGIT {
        return digits(bytes);
    }
    if c0 == OTHER {
        return symbols(bytes, 0, |b| b == b'\r' || b == b'\n');
    }
    if bytes[0] == b' ' && c1 == OTHER {
        return symbols(bytes, 1, |b| b == b'\r' || b == b'\n');
    }
    whitespace(bytes)
}

/// The length of o200k_base's first piece of `bytes`, or `None` when it depends on a
/// non-ASCII character.
pub(crate) fn o200k_piece(bytes: &[u8]) -> Option<usize> {
    let c0 = class(bytes, 0);
    if c0 == HIGH || c0 == END {
        return None;
    }
    let c1 = class(bytes, 1);
    let letters_from = if is_letter(c0) {
        Some(0)
    } else if is_prefix(c0) {
        if c1 == HIGH {
            return None;
        }
        is_letter(c1).then_some(1)
    } else {
        None
    };
    if let Some(start) = letters_from {
        // Upper case then lower case (alternative 1), or upper case alone (alternative 2):
        // either way the piece runs to the end of the lower-case letters after the capitals.
        let mut i = start;
        loop {
            match class(bytes, i) {
                UPPER => i += 1,
                HIGH => return None,
                _ => break,
            }
        }
        loop {
            match class(bytes, i) {
                LOWER => i += 1,
                HIGH => return None,
                _ => break,
            }
        }
        if bytes.get(i) == Some(&b'\'') {
            match contraction(bytes, i) {
                Contraction::Len(n) => i += n,
                Contraction::Unknown => return None,
                Contraction::No => {}
            }
        }
        return Some(i);
    }
    let trail = |b: u8| b == b'\r' || b == b'\n' || b == b'/';
    if c0 == DIGIT {
        return digits(bytes);
    }
    if c0 == OTHER {
        return symbols(bytes, 0, trail);
    }
    if bytes[0] == b' ' && c1 == OTHER {
        return symbols(bytes, 1, trail);
    }
    whitespace(bytes)
}

/// A multiply-xor hash over eight bytes at a time. Why not SipHash: the lookup runs once per
/// piece, and vocabulary entries are not chosen by an attacker. The slice length is hashed
/// first (the standard `Hash` for slices does that), so zero-padding the last word is
/// unambiguous.
#[derive(Default)]
struct BytesHasher(u64);

impl BytesHasher {
    #[inline]
    fn mix(&mut self, word: u64) {
        self.0 = (self.0 ^ word)
            .rotate_left(23)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

impl Hasher for BytesHasher {
    fn finish(&self) -> u64 {
        // Fold the high half of a wide product down: the table indexes with the low bits,
        // which a plain multiply fills from the low input bits alone.
        let product = u128::from(self.0) * 0xA076_1D64_78BD_642F;
        (product as u64) ^ ((product >> 64) as u64)
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.mix(u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            self.mix(u64::from_le_bytes(word));
        }
    }

    fn write_usize(&mut self, n: usize) {
        self.mix(n as u64);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn fast_split(encoding: Encoding, text: &str) -> Vec<&str> {
        let v = vocabulary(encoding);
        let mut out = Vec::new();
        let mut pos = 0;
        while pos < text.len() {
            let len = match (v.fast_piece)(&text.as_bytes()[pos..]) {
                Some(len) => len,
                None => v.regex_piece(text, pos),
            };
            out.push(&text[pos..pos + len]);
            pos += len;
        }
        out
    }

    fn regex_split(encoding: Encoding, text: &str) -> Vec<&str> {
        vocabulary(encoding).tokenizer.split(text).collect()
    }

    fn assert_same_split(text: &str) {
        for encoding in [Encoding::O200kBase, Encoding::Cl100kBase] {
            assert_eq!(
                fast_split(encoding, text),
                regex_split(encoding, text),
                "{encoding:?} on {text:?}"
            );
        }
    }

    #[test]
    fn known_splits() {
        assert_eq!(
            fast_split(Encoding::Cl100kBase, "Hello world, it's  me!\n\n  x"),
            [
                "Hello", " world", ",", " it", "'s", " ", " me", "!\n\n", " ", " x"
            ]
        );
        assert_eq!(
            fast_split(Encoding::O200kBase, "Hello world, it's  me!\n\n  x"),
            [
                "Hello", " world", ",", " it's", " ", " me", "!\n\n", " ", " x"
            ]
        );
        assert_eq!(
            fast_split(Encoding::O200kBase, "HTTPServer helloWorld 12345"),
            ["HTTPServer", " hello", "World", " ", "123", "45"]
        );
    }

    #[test]
    fn edge_cases_agree_with_the_expressions() {
        for text in [
            "",
            " ",
            "  ",
            "\n",
            " \n ",
            "a  ",
            "a \t\n\r\n  b",
            "'s 'S 're 'RE 'll 'l 'x '",
            "don't DON'T I'm we'll they've she'd",
            "x'ſ",
            "'ſ",
            "a'r",
            "a're",
            "}\n/x",
            "}\n//\n",
            " ...'s",
            "\u{0B}\u{0C}x\u{1F}y\u{7F}",
            "fn main() {\n    let x = 1;\n}\n",
            "café naïve Ａbc 中文 日本語、テスト 한국어",
            "a\u{301}b",
            "x\u{A0}y \u{3000}z",
            "12\u{B2}3",
            "1\u{663}",
            "\u{1F600}abc",
        ] {
            assert_same_split(text);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        #[test]
        fn random_text_agrees_with_the_expressions(
            chars in proptest::collection::vec(proptest::sample::select(vec![
                'a', 'b', 'z', 'A', 'Q', 'Z', 's', 'S', 't', 'r', 'e', 'E', 'v', 'l', 'L', 'm',
                'd', 'D', '0', '5', '9', ' ', ' ', '\t', '\n', '\r', '\u{0B}', '\u{0C}',
                '\u{1F}', '\u{7F}', '\'', '/', '.', '{', '}', '(', '_', '-', '"', 'é', 'ſ',
                'K', '中', '。', '\u{3000}', '\u{A0}', '\u{85}', '\u{301}', '²', '٣', '😀',
                'Ａ', 'ǅ', 'ʰ',
            ]), 0..48)
        ) {
            let text: String = chars.into_iter().collect();
            for encoding in [Encoding::O200kBase, Encoding::Cl100kBase] {
                prop_assert_eq!(fast_split(encoding, &text), regex_split(encoding, &text));
            }
        }

        #[test]
        fn printable_ascii_agrees(text in "[ -~\t\n\r]{0,64}") {
            for encoding in [Encoding::O200kBase, Encoding::Cl100kBase] {
                prop_assert_eq!(fast_split(encoding, &text), regex_split(encoding, &text));
            }
        }
    }

    #[test]
    fn counts_equal_the_crates_own() {
        let text =
            "The quick brown fox's HTTPServer said: \"上下文窗口\" — fn x() { 42 }\n\n\tdone";
        for encoding in [Encoding::O200kBase, Encoding::Cl100kBase] {
            let own = vocabulary(encoding).tokenizer.count(text) as u64;
            // Cold cache, warm cache, and no cache at all.
            assert_eq!(count(encoding, text), own, "{encoding:?}");
            assert_eq!(count(encoding, text), own, "{encoding:?}");
            assert_eq!(vocabulary(encoding).count_with(text, None), own);
        }
    }

    #[test]
    fn the_piece_cache_never_confuses_pieces() {
        let mut cache = PieceCache::default();
        let mut calls = 0;
        let mut count = |piece: &[u8], tokens: u64| {
            cache.count(piece, |_| {
                calls += 1;
                tokens
            })
        };
        assert_eq!(count(b"hello", 1), 1);
        assert_eq!(count(b"hello", 9), 1, "a hit");
        assert_eq!(count(b"hellp", 2), 2, "same length, other bytes");
        assert_eq!(count(b"hell", 3), 3, "a prefix");
        let long = [b'x'; CACHE_PIECE + 1];
        assert_eq!(count(&long, 4), 4);
        assert_eq!(count(&long, 5), 5, "long pieces are not cached");
        let longest = [b'y'; CACHE_PIECE];
        assert_eq!(count(&longest, 6), 6);
        assert_eq!(count(&longest, 0), 6, "the longest piece a slot holds");
        assert_eq!(count(b"big", 300), 300);
        assert_eq!(count(b"big", 7), 7, "counts over 255 are not cached");
        assert_eq!(calls, 8);
    }

    #[test]
    fn piece_words_are_exact() {
        for len in 0..=CACHE_PIECE {
            let piece: Vec<u8> = (1..=len as u8).collect();
            let words = piece_words(&piece).unwrap();
            let mut bytes = [0u8; CACHE_PIECE];
            for (i, w) in words.iter().enumerate() {
                bytes[i * 8..i * 8 + 8].copy_from_slice(&w.to_le_bytes());
            }
            assert_eq!(&bytes[..len], &piece[..]);
            assert!(bytes[len..].iter().all(|&b| b == 0), "{len}");
        }
        assert!(piece_words(&[0; CACHE_PIECE + 1]).is_none());
    }
}
