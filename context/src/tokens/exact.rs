//! Exact BPE counts for OpenAI's o200k_base and cl100k_base, from OpenAI's own vocabulary
//! files, shipped compressed in this crate.
//!
//! Why our own BPE rather than a crate's prebuilt tables: the tables a fast BPE crate builds
//! (hash maps, three Aho-Corasick automata) take 47 MB for the two encodings and compress only
//! to about 19 MB, which made every binary that counts exactly 50 MB larger; building them at
//! run time took 2.4 s for o200k_base. OpenAI's vocabularies, packed and gzipped, are 1.5 MB,
//! and turning them into a rank table takes tens of milliseconds on first use. The count is tiktoken's own
//! definition (repeatedly merge the adjacent pair of lowest rank, leftmost first), so it is
//! exactly what tiktoken and the API count.
//!
//! The vocabularies (`context/data/*.ranks.gz`, see the README there) are decompressed once
//! per process, on the first exact count of each encoding, behind a [`OnceLock`]: every counter
//! in the process shares that one copy.
//!
//! What makes it fast, all exact:
//! - **Pre-tokenisation fast path.** The tokenizers first split text with a regular expression
//!   (`pat_str` of tiktoken's encodings), which costs more than the BPE itself on code. For a
//!   piece whose characters are all ASCII, [`o200k_piece`] and [`cl100k_piece`] decide the
//!   same split by hand; as soon as a decision would depend on a non-ASCII character they give
//!   up, and the expression ([`Pretokenizer`]) is asked for that one piece, anchored at the same
//!   place. Tests check the two splits agree on random and real text.
//! - **Piece cache.** Pieces repeat, so each thread keeps the counts of recent pieces in a
//!   small direct-mapped table ([`PieceCache`]) that stays in the CPU's cache.
//! - **Whole-piece lookup.** A piece that is itself a vocabulary entry is one token (tiktoken
//!   checks this first too), so a hash lookup answers most new pieces without merging.
//! - **Merging in O(n log n)** for long pieces (a run of base64 in a tool result): a heap of
//!   candidate pairs instead of tiktoken's rescan after every merge, with the same order.

use std::cell::RefCell;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::io::Read;
use std::sync::OnceLock;

use regex_automata::meta::Regex;
use regex_automata::{Anchored, Input};

use super::Encoding;

/// OpenAI's `o200k_base.tiktoken`, packed (every token's length in a byte, then its bytes, in
/// rank order) and gzipped by `data/pack_vocabulary.py`.
static O200K_BASE_GZ: &[u8] = include_bytes!("../../data/o200k_base.ranks.gz");
/// OpenAI's `cl100k_base.tiktoken`, packed the same way.
static CL100K_BASE_GZ: &[u8] = include_bytes!("../../data/cl100k_base.ranks.gz");

/// A token's rank: its id, and the order in which BPE merges (lower first).
type Rank = u32;

/// Every vocabulary entry's rank, with the two-byte entries also in a flat table: a merge
/// starts by looking up every adjacent pair of bytes, and an array index is much cheaper than
/// hashing a slice.
struct Ranks {
    entries: HashMap<&'static [u8], Rank, BuildHasherDefault<BytesHasher>>,
    /// By `first << 8 | second`; `Rank::MAX` where the pair is no entry.
    pairs: Box<[Rank]>,
}

impl Ranks {
    fn new(entries: HashMap<&'static [u8], Rank, BuildHasherDefault<BytesHasher>>) -> Self {
        let mut pairs = vec![Rank::MAX; 1 << 16].into_boxed_slice();
        for (token, &rank) in &entries {
            if let [a, b] = token[..] {
                pairs[usize::from(a) << 8 | usize::from(b)] = rank;
            }
        }
        Self { entries, pairs }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.len()
    }

    fn contains(&self, bytes: &[u8]) -> bool {
        self.entries.contains_key(bytes)
    }

    /// The rank of `bytes`, `Rank::MAX` when they are no entry.
    #[inline]
    fn get(&self, bytes: &[u8]) -> Rank {
        match bytes {
            [a, b] => self
                .pairs
                .get(usize::from(*a) << 8 | usize::from(*b))
                .copied()
                .unwrap_or(Rank::MAX),
            _ => self.entries.get(bytes).copied().unwrap_or(Rank::MAX),
        }
    }
}

/// One encoding, loaded: the rank of every vocabulary entry, the pre-tokeniser and its ASCII
/// fast path.
struct Vocabulary {
    encoding: Encoding,
    ranks: Ranks,
    pre: Pretokenizer,
    fast_piece: fn(&[u8]) -> Option<usize>,
}

static O200K_BASE: OnceLock<Vocabulary> = OnceLock::new();
static CL100K_BASE: OnceLock<Vocabulary> = OnceLock::new();

thread_local! {
    static O200K_CACHE: RefCell<PieceCache> = RefCell::new(PieceCache::default());
    static CL100K_CACHE: RefCell<PieceCache> = RefCell::new(PieceCache::default());
}

fn vocabulary(encoding: Encoding) -> &'static Vocabulary {
    match encoding {
        Encoding::O200kBase => O200K_BASE.get_or_init(|| {
            Vocabulary::load(
                Encoding::O200kBase,
                O200K_BASE_GZ,
                &o200k_patterns(),
                o200k_piece,
            )
        }),
        Encoding::Cl100kBase => CL100K_BASE.get_or_init(|| {
            Vocabulary::load(
                Encoding::Cl100kBase,
                CL100K_BASE_GZ,
                &cl100k_patterns(),
                cl100k_piece,
            )
        }),
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

/// Why an embedded vocabulary could not be read. It is part of the binary, so this is a broken
/// build, never bad input: the count panics with it rather than return a wrong number.
#[derive(Debug, thiserror::Error)]
enum VocabularyError {
    #[error("the embedded {0} vocabulary does not decompress: {1}")]
    Gzip(&'static str, std::io::Error),
    #[error("the embedded {name} vocabulary ends inside token {rank}")]
    Truncated { name: &'static str, rank: usize },
    #[error("the pre-tokeniser of {0} does not compile: {1}")]
    Pattern(&'static str, Box<regex_automata::meta::BuildError>),
}

impl Vocabulary {
    fn load(
        encoding: Encoding,
        gz: &'static [u8],
        patterns: &[(&str, bool)],
        fast_piece: fn(&[u8]) -> Option<usize>,
    ) -> Self {
        match Self::try_load(encoding, gz, patterns, fast_piece) {
            Ok(vocabulary) => vocabulary,
            Err(e) => panic!("{e}; rebuild rampart-context from an intact source"),
        }
    }

    fn try_load(
        encoding: Encoding,
        gz: &'static [u8],
        patterns: &[(&str, bool)],
        fast_piece: fn(&[u8]) -> Option<usize>,
    ) -> Result<Self, VocabularyError> {
        let name = encoding.name();
        let packed = decompress(gz).map_err(|e| VocabularyError::Gzip(name, e))?;
        // One allocation for every entry, kept for the life of the process (the vocabulary
        // lives in a static), so the table can hold plain slices of it.
        let packed: &'static [u8] = packed.leak();
        let tokens = unpack(packed).map_err(|rank| VocabularyError::Truncated { name, rank })?;
        let mut table =
            HashMap::with_capacity_and_hasher(tokens.len(), BuildHasherDefault::default());
        for (rank, token) in (0..).zip(tokens) {
            table.insert(token, rank);
        }
        let ranks = Ranks::new(table);
        let pre = Pretokenizer::new(patterns).map_err(|e| VocabularyError::Pattern(name, e))?;
        Ok(Self {
            encoding,
            ranks,
            pre,
            fast_piece,
        })
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

    /// The tokens of one piece: one if the piece is a vocabulary entry, else what merging it
    /// leaves.
    fn count_piece(&self, piece: &[u8]) -> u64 {
        if self.ranks.contains(piece) {
            1
        } else {
            merged_count(&self.ranks, piece) as u64
        }
    }

    /// The length of the piece starting at `pos`, by the encoding's expression. Matching on
    /// the rest of the text is matching at `pos`: the expressions look neither behind nor at
    /// the start. Should it find nothing (every character matches some branch, so it cannot),
    /// the rest is one piece rather than lost.
    fn regex_piece(&self, text: &str, pos: usize) -> usize {
        let rest_len = text.len() - pos;
        text.get(pos..)
            .and_then(|rest| self.pre.first(rest))
            .unwrap_or(rest_len)
    }
}

/// The packed vocabulary, inflated.
fn decompress(gz: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut packed = Vec::new();
    flate2::read::GzDecoder::new(gz).read_to_end(&mut packed)?;
    Ok(packed)
}

/// The tokens of a packed vocabulary, in rank order. `Err` is the rank of a token the data
/// ends inside of.
fn unpack(packed: &[u8]) -> Result<Vec<&[u8]>, usize> {
    let mut tokens = Vec::with_capacity(packed.len() / 6);
    let mut rest = packed;
    while let Some((&len, after)) = rest.split_first() {
        let len = usize::from(len);
        let token = after.get(..len).ok_or(tokens.len())?;
        tokens.push(token);
        rest = &after[len..];
    }
    Ok(tokens)
}

// ---------------------------------------------------------------------------
// Merging
// ---------------------------------------------------------------------------

/// Pieces at least this long are merged with a heap; shorter ones by rescanning, which is
/// faster while a piece fits in a few cache lines.
const HEAP_FROM: usize = 64;

/// The tokens `piece` (not itself an entry) merges into.
fn merged_count(ranks: &Ranks, piece: &[u8]) -> usize {
    if piece.len() < 2 {
        piece.len()
    } else if piece.len() < HEAP_FROM {
        merge_by_scan(ranks, piece)
    } else {
        merge_by_heap(ranks, piece)
    }
}

/// tiktoken's `byte_pair_merge`: parts start as single bytes; while some adjacent pair is an
/// entry, merge the pair of lowest rank (the leftmost of equals). Returns how many parts are
/// left. Quadratic in the piece's length, so only for pieces shorter than [`HEAP_FROM`], whose
/// parts fit in an array on the stack.
fn merge_by_scan(ranks: &Ranks, piece: &[u8]) -> usize {
    let n = piece.len();
    if n >= HEAP_FROM {
        return merge_by_heap(ranks, piece);
    }
    // (start of the part, rank of the part merged with the next one), then two sentinels.
    let mut parts = [(0usize, Rank::MAX); HEAP_FROM + 1];
    for (i, part) in parts.iter_mut().enumerate().take(n + 1) {
        *part = (
            i,
            piece
                .get(i..i + 2)
                .map_or(Rank::MAX, |pair| ranks.get(pair)),
        );
    }
    let mut len = n + 1;
    // The rank of part `i` merged with part `i + 1`, once they are merged with `i + 2` too:
    // the pair the merge makes.
    let pair_after = |parts: &[(usize, Rank)], len: usize, i: usize| {
        if i + 3 < len {
            ranks.get(&piece[parts[i].0..parts[i + 3].0])
        } else {
            Rank::MAX
        }
    };
    loop {
        let mut best = (Rank::MAX, 0);
        for (i, &(_, rank)) in parts[..len - 1].iter().enumerate() {
            if rank < best.0 {
                best = (rank, i);
            }
        }
        if best.0 == Rank::MAX {
            break;
        }
        let i = best.1;
        if i > 0 {
            parts[i - 1].1 = pair_after(&parts, len, i - 1);
        }
        parts[i].1 = pair_after(&parts, len, i);
        parts.copy_within(i + 2..len, i + 1);
        len -= 1;
    }
    len - 1
}

/// The same merges as [`merge_by_scan`], in O(n log n): candidate pairs wait in a heap ordered
/// by (rank, start), which is tiktoken's order (lowest rank, then leftmost). A candidate whose
/// parts have changed since it was pushed is stale: it is known by the pair's end, which a
/// merge of either part moves, and skipped.
fn merge_by_heap(ranks: &Ranks, piece: &[u8]) -> usize {
    let n = piece.len();
    // For the part starting at byte `i`: where it ends (`end[i]`), where the part before it
    // starts (`prev[i]`); `alive[i]` while a part starts there.
    let mut end: Vec<usize> = (1..=n).collect();
    let mut prev: Vec<usize> = (0..n).map(|i| i.wrapping_sub(1)).collect();
    let mut alive = vec![true; n];
    let mut heap: BinaryHeap<Reverse<(Rank, usize, usize)>> = BinaryHeap::with_capacity(n);
    let push = |heap: &mut BinaryHeap<Reverse<(Rank, usize, usize)>>, start: usize, stop: usize| {
        let rank = ranks.get(&piece[start..stop]);
        if rank != Rank::MAX {
            heap.push(Reverse((rank, start, stop)));
        }
    };
    for i in 0..n - 1 {
        push(&mut heap, i, i + 2);
    }
    let mut parts = n;
    while let Some(Reverse((_, start, stop))) = heap.pop() {
        let right = end[start];
        // Stale: the left part is gone, or it or its right neighbour has grown.
        if !alive[start] || right >= n || end[right] != stop {
            continue;
        }
        alive[right] = false;
        end[start] = stop;
        parts -= 1;
        if stop < n {
            prev[stop] = start;
            push(&mut heap, start, end[stop]);
        }
        if start > 0 {
            push(&mut heap, prev[start], stop);
        }
    }
    parts
}

// ---------------------------------------------------------------------------
// The pre-tokeniser's expressions
// ---------------------------------------------------------------------------

/// cl100k_base's expression (tiktoken's `pat_str`), as alternatives of one multi-pattern
/// expression. `\s+(?!\S)` has no look-ahead in this engine: it is written `\s+\s`, marked
/// `true`, and the piece it matches gives back its last character (see [`Pretokenizer`]).
fn cl100k_patterns() -> Vec<(&'static str, bool)> {
    vec![
        (
            "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+$",
            false,
        ),
        ("\\s+\\s", true),
        ("\\s+", false),
    ]
}

/// o200k_base's expression, written as [`cl100k_patterns`] explains.
fn o200k_patterns() -> Vec<(&'static str, bool)> {
    vec![
        (
            concat!(
                "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
                "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
                "|\\p{N}{1,3}",
                "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*",
                "|\\s*[\\r\\n]+",
                "|\\s+$",
            ),
            false,
        ),
        ("\\s+\\s", true),
        ("\\s+", false),
    ]
}

/// tiktoken's split with an engine that has no look-ahead: the alternatives are patterns of
/// one expression, matched anchored at the piece's start, and a match of a pattern marked as
/// a look-ahead gives back its last character. The same construction as the `bpe-openai`
/// crate's (MIT), which checks it against tiktoken.
struct Pretokenizer {
    regex: Regex,
    lookahead: Vec<bool>,
}

impl Pretokenizer {
    fn new(patterns: &[(&str, bool)]) -> Result<Self, Box<regex_automata::meta::BuildError>> {
        let (expressions, lookahead): (Vec<&str>, Vec<bool>) = patterns.iter().copied().unzip();
        Ok(Self {
            regex: Regex::new_many(&expressions).map_err(Box::new)?,
            lookahead,
        })
    }

    /// The length of the first piece of `text`, `None` when nothing matches.
    fn first(&self, text: &str) -> Option<usize> {
        let found = self.regex.find(Input::new(text).anchored(Anchored::Yes))?;
        let mut end = found.range().end;
        if self
            .lookahead
            .get(found.pattern().as_usize())
            .copied()
            .unwrap_or(false)
        {
            let last = text.get(..end)?.chars().next_back()?;
            end -= last.len_utf8();
        }
        Some(end)
    }

    /// Every piece of `text`, in order.
    #[cfg(test)]
    fn split<'t>(&self, text: &'t str) -> Vec<&'t str> {
        let mut pieces = Vec::new();
        let mut pos = 0;
        while pos < text.len() {
            let len = self
                .first(&text[pos..])
                .filter(|&n| n > 0)
                .unwrap_or(text.len() - pos);
            pieces.push(&text[pos..pos + len]);
            pos += len;
        }
        pieces
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
        vocabulary(encoding).pre.split(text)
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

    /// English, code, numbers, scripts from Latin to Hangul, emoji, whitespace runs,
    /// contractions, and long pieces (base64, hex, random letters, repeated letters, Chinese)
    /// that take the heap merge: 6,782 bytes.
    const FIXED_TEXT: &str = include_str!("../../tests/data/exact_counts.txt");

    #[test]
    fn counts_are_the_ones_bpe_openai_gave_before_the_vocabularies_were_compressed() {
        // Counted by the `bpe-openai` 0.3.2 crate (checked against tiktoken by its own tests)
        // that this module used before it read the compressed rank files itself.
        for (encoding, before) in [(Encoding::O200kBase, 3_556), (Encoding::Cl100kBase, 3_873)] {
            // Cold cache, warm cache, and no cache at all.
            assert_eq!(count(encoding, FIXED_TEXT), before, "{encoding:?}");
            assert_eq!(count(encoding, FIXED_TEXT), before, "{encoding:?}");
            assert_eq!(vocabulary(encoding).count_with(FIXED_TEXT, None), before);
        }
    }

    /// Standard base64 with padding, as `.tiktoken` files write tokens.
    fn base64(bytes: &[u8]) -> String {
        const ALPHABET: &[u8; 64] =
            b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut out = String::new();
        for chunk in bytes.chunks(3) {
            let word = chunk
                .iter()
                .enumerate()
                .fold(0u32, |w, (i, &b)| w | u32::from(b) << (16 - 8 * i));
            for i in 0..4 {
                if i <= chunk.len() {
                    out.push(char::from(ALPHABET[(word >> (18 - 6 * i) & 63) as usize]));
                } else {
                    out.push('=');
                }
            }
        }
        out
    }

    #[test]
    fn the_embedded_vocabularies_are_openais_files() {
        use sha2::{Digest, Sha256};
        // Written back as `.tiktoken` text, each is the file tiktoken downloads: these are the
        // hashes it checks (`tiktoken_ext/openai_public.py`).
        for (gz, entries, sha256) in [
            (
                O200K_BASE_GZ,
                199_998,
                "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
            ),
            (
                CL100K_BASE_GZ,
                100_256,
                "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
            ),
        ] {
            let packed = decompress(gz).unwrap();
            let tokens = unpack(&packed).unwrap();
            assert_eq!(tokens.len(), entries);
            let mut hash = Sha256::new();
            for (rank, token) in tokens.iter().enumerate() {
                hash.update(format!("{} {rank}\n", base64(token)).as_bytes());
            }
            let digest: String = hash.finalize().iter().map(|b| format!("{b:02x}")).collect();
            assert_eq!(digest, sha256);
        }
        assert_eq!(vocabulary(Encoding::O200kBase).ranks.len(), 199_998);
        assert_eq!(vocabulary(Encoding::Cl100kBase).ranks.len(), 100_256);
    }

    #[test]
    fn a_truncated_vocabulary_names_the_token_it_ends_in() {
        assert_eq!(
            unpack(&[1, b'a', 2, b'b', b'c']),
            Ok(vec![&b"a"[..], b"bc"])
        );
        assert_eq!(unpack(&[1, b'a', 3, b'b']), Err(1));
        assert_eq!(base64(b"!"), "IQ==");
        assert_eq!(base64(b"hey"), "aGV5");
        assert_eq!(base64(b"hi"), "aGk=");
    }

    /// The token ids of `text`: tiktoken's pieces and merges, each part's rank.
    fn encode(encoding: Encoding, text: &str) -> Vec<Rank> {
        let v = vocabulary(encoding);
        let mut ids = Vec::new();
        for piece in v.pre.split(text) {
            let piece = piece.as_bytes();
            let mut starts: Vec<usize> = (0..=piece.len()).collect();
            // tiktoken's loop, keeping the parts: merge the lowest-ranked adjacent pair.
            loop {
                let best = (0..starts.len().saturating_sub(2))
                    .map(|i| (v.ranks.get(&piece[starts[i]..starts[i + 2]]), i))
                    .min();
                match best {
                    Some((rank, i)) if rank != Rank::MAX => {
                        starts.remove(i + 1);
                    }
                    _ => break,
                }
            }
            ids.extend(starts.windows(2).map(|w| v.ranks.get(&piece[w[0]..w[1]])));
        }
        ids
    }

    #[test]
    fn the_vocabularies_give_the_published_token_ids() {
        // (text, o200k_base ids, cl100k_base ids), as tiktoken and OpenAI's cookbook give them.
        let known: &[(&str, &[Rank], &[Rank])] = &[
            ("hello world", &[24912, 2375], &[15339, 1917]),
            (
                "antidisestablishmentarianism",
                &[493, 129901, 376, 160388, 21203, 2367],
                &[519, 85342, 34500, 479, 8997, 2191],
            ),
            (
                "お誕生日おめでとう",
                &[8930, 9697, 243, 128225, 8930, 17693, 4344, 48669],
                &[33334, 45918, 243, 21990, 9080, 33334, 62004, 16556, 78699],
            ),
            (
                "<|endoftext|>",
                &[27, 91, 419, 1440, 919, 91, 29],
                &[27, 91, 8862, 728, 428, 91, 29],
            ),
        ];
        for &(text, o200k, cl100k) in known {
            assert_eq!(encode(Encoding::O200kBase, text), o200k, "{text:?}");
            assert_eq!(encode(Encoding::Cl100kBase, text), cl100k, "{text:?}");
        }
    }

    #[test]
    fn known_counts() {
        for (encoding, text, tokens) in [
            (Encoding::O200kBase, "hello world", 2),
            (Encoding::Cl100kBase, "hello world", 2),
            (Encoding::Cl100kBase, "antidisestablishmentarianism", 6),
            (Encoding::O200kBase, "", 0),
        ] {
            assert_eq!(count(encoding, text), tokens, "{encoding:?} {text:?}");
        }
    }

    /// tiktoken's `byte_pair_merge` as tiktoken writes it (a vector, `remove`), for any length.
    fn tiktoken_merge(ranks: &Ranks, piece: &[u8]) -> usize {
        let mut parts: Vec<(usize, Rank)> = (0..piece.len() - 1)
            .map(|i| (i, ranks.get(&piece[i..i + 2])))
            .collect();
        parts.push((piece.len() - 1, Rank::MAX));
        parts.push((piece.len(), Rank::MAX));
        let get = |parts: &Vec<(usize, Rank)>, i: usize| {
            if i + 3 < parts.len() {
                ranks.get(&piece[parts[i].0..parts[i + 3].0])
            } else {
                Rank::MAX
            }
        };
        let mut min =
            parts[..parts.len() - 1]
                .iter()
                .enumerate()
                .fold(
                    (Rank::MAX, 0),
                    |m, (i, &(_, r))| if r < m.0 { (r, i) } else { m },
                );
        while min.0 != Rank::MAX {
            let i = min.1;
            if i > 0 {
                parts[i - 1].1 = get(&parts, i - 1);
            }
            parts[i].1 = get(&parts, i);
            parts.remove(i + 1);
            min = parts[..parts.len() - 1].iter().enumerate().fold(
                (Rank::MAX, 0),
                |m, (i, &(_, r))| if r < m.0 { (r, i) } else { m },
            );
        }
        parts.len() - 1
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        /// Both merges make tiktoken's merges: they leave as many parts as tiktoken's own
        /// algorithm, on pieces short and long, from a small alphabet (many merges), from
        /// letters, or of any bytes.
        #[test]
        fn merges_are_tiktokens(
            piece in proptest::collection::vec(
                prop_oneof![
                    proptest::sample::select(b"aeinrst ".to_vec()),
                    proptest::sample::select(b"abcdefghijklmnopqrstuvwxyz".to_vec()),
                    any::<u8>(),
                ],
                2..400,
            )
        ) {
            for encoding in [Encoding::O200kBase, Encoding::Cl100kBase] {
                let ranks = &vocabulary(encoding).ranks;
                let expected = tiktoken_merge(ranks, &piece);
                prop_assert_eq!(merge_by_heap(ranks, &piece), expected);
                prop_assert_eq!(merged_count(ranks, &piece), expected);
                let short = &piece[..piece.len().min(HEAP_FROM - 1)];
                if short.len() >= 2 {
                    prop_assert_eq!(merge_by_scan(ranks, short), tiktoken_merge(ranks, short));
                }
            }
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
