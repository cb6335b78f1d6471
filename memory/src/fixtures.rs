//! Generated inputs for tests and benchmarks, made on the spot so nothing is downloaded: a
//! model2vec model directory built from a word list, and markdown notes of any size.
//!
//! The model is a real model2vec directory (`model.safetensors` with an `embeddings`
//! tensor, a BERT-style WordPiece or a WordLevel `tokenizer.json`, `config.json`), so
//! [`crate::LocalEmbedder`] loads it through the same code as a downloaded one. Its rows
//! are pseudo-random, except that words given as synonyms share a row: a query for one finds
//! notes that only use the other, which keyword search cannot do.

use std::fs;
use std::io;
use std::path::Path;

use serde_json::{Map, Value, json};

/// A small deterministic random generator (SplitMix64), enough for fixtures.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `[0, n)` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }

    /// A float in `[-1, 1)`.
    pub fn signed_unit(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
}

/// Which tokenizer the generated model has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenizerKind {
    /// BERT-style: `BertNormalizer`, `BertPreTokenizer`, WordPiece (what real model2vec
    /// models use; model2vec-rs reads it with its own fast tokenizer).
    WordPiece,
    /// Lower-casing, whitespace pre-tokenizer, WordLevel (read through `tokenizers`).
    WordLevel,
}

/// A model to generate.
#[derive(Debug, Clone)]
pub struct FixtureModel {
    /// The vocabulary (lower case); `[PAD]` and `[UNK]` are added in front.
    pub words: Vec<String>,
    /// Pairs of words given the same vector.
    pub synonyms: Vec<(String, String)>,
    /// Vector length.
    pub dims: usize,
    /// Seed of the rows.
    pub seed: u64,
    /// The tokenizer.
    pub tokenizer: TokenizerKind,
}

impl FixtureModel {
    /// A WordPiece model over `words`.
    pub fn new(words: &[&str], dims: usize) -> Self {
        Self {
            words: words.iter().map(|w| w.to_lowercase()).collect(),
            synonyms: Vec::new(),
            dims,
            seed: 7,
            tokenizer: TokenizerKind::WordPiece,
        }
    }

    /// Writes `model.safetensors`, `tokenizer.json` and `config.json` into `dir`.
    pub fn write(&self, dir: &Path) -> io::Result<()> {
        fs::create_dir_all(dir)?;
        let mut vocab: Vec<String> = vec!["[PAD]".into(), "[UNK]".into()];
        for w in &self.words {
            if !vocab.contains(w) {
                vocab.push(w.clone());
            }
        }
        let mut rng = Rng::new(self.seed);
        let mut rows: Vec<Vec<f32>> = vocab
            .iter()
            .map(|_| (0..self.dims).map(|_| rng.signed_unit()).collect())
            .collect();
        for (a, b) in &self.synonyms {
            let (ia, ib) = (
                vocab.iter().position(|w| w == a),
                vocab.iter().position(|w| w == b),
            );
            if let (Some(ia), Some(ib)) = (ia, ib) {
                rows[ib] = rows[ia].clone();
            }
        }
        let mut data = Vec::with_capacity(vocab.len() * self.dims * 4);
        for row in &rows {
            for x in row {
                data.extend_from_slice(&x.to_le_bytes());
            }
        }
        fs::write(
            dir.join("model.safetensors"),
            safetensors_bytes("embeddings", vocab.len(), self.dims, &data),
        )?;
        let vocab_map: Map<String, Value> = vocab
            .iter()
            .enumerate()
            .map(|(i, w)| (w.clone(), json!(i)))
            .collect();
        let tokenizer = match self.tokenizer {
            TokenizerKind::WordPiece => json!({
                "version": "1.0",
                "truncation": null,
                "padding": null,
                "added_tokens": [
                    {"id": 0, "content": "[PAD]", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
                    {"id": 1, "content": "[UNK]", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}
                ],
                "normalizer": {"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true, "strip_accents": null, "lowercase": true},
                "pre_tokenizer": {"type": "BertPreTokenizer"},
                "post_processor": null,
                "decoder": null,
                "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##", "max_input_chars_per_word": 100, "vocab": vocab_map}
            }),
            TokenizerKind::WordLevel => json!({
                "version": "1.0",
                "truncation": null,
                "padding": null,
                "added_tokens": [],
                "normalizer": {"type": "Lowercase"},
                "pre_tokenizer": {"type": "Whitespace"},
                "post_processor": null,
                "decoder": null,
                "model": {"type": "WordLevel", "vocab": vocab_map, "unk_token": "[UNK]"}
            }),
        };
        fs::write(dir.join("tokenizer.json"), serde_json::to_vec(&tokenizer)?)?;
        let config = json!({"model_type": "model2vec", "normalize": true, "hidden_dim": self.dims});
        fs::write(dir.join("config.json"), serde_json::to_vec(&config)?)?;
        Ok(())
    }
}

/// A safetensors file holding one `F32` tensor of `rows × cols`.
pub fn safetensors_bytes(name: &str, rows: usize, cols: usize, data: &[u8]) -> Vec<u8> {
    let header = json!({
        name: {"dtype": "F32", "shape": [rows, cols], "data_offsets": [0, data.len()]}
    })
    .to_string();
    let mut header = header.into_bytes();
    // The data starts 8-byte aligned.
    while !header.len().is_multiple_of(8) {
        header.push(b' ');
    }
    let mut out = Vec::with_capacity(8 + header.len() + data.len());
    out.extend_from_slice(&(header.len() as u64).to_le_bytes());
    out.extend_from_slice(&header);
    out.extend_from_slice(data);
    out
}

/// `n` distinct pronounceable lower-case words (`"bakumo"`, …), the same for the same `n`.
pub fn vocabulary(n: usize) -> Vec<String> {
    const CONSONANTS: &[u8] = b"bdfgklmnprstvz";
    const VOWELS: &[u8] = b"aeiou";
    let syllables: Vec<String> = CONSONANTS
        .iter()
        .flat_map(|c| {
            VOWELS
                .iter()
                .map(move |v| format!("{}{}", *c as char, *v as char))
        })
        .collect();
    let s = syllables.len();
    let mut out = Vec::with_capacity(n);
    let mut i = 0usize;
    while out.len() < n {
        // Two syllables first, then three: 70 × 70 = 4,900 two-syllable words.
        let word = if i < s * s {
            format!("{}{}", syllables[i / s], syllables[i % s])
        } else {
            let j = i - s * s;
            format!(
                "{}{}{}",
                syllables[(j / (s * s)) % s],
                syllables[(j / s) % s],
                syllables[j % s]
            )
        };
        out.push(word);
        i += 1;
    }
    out
}

/// Markdown notes of about `total_bytes` in all: dated daily notes (`memory/2025-…md`) of
/// headings, bullets and paragraphs, words drawn from `words` with a skew towards the
/// first ones (as in real text, a few words are common and most are rare).
pub fn generate_notes(total_bytes: usize, words: &[String], seed: u64) -> Vec<(String, String)> {
    let mut rng = Rng::new(seed);
    let mut notes = Vec::new();
    let mut written = 0;
    let mut day = 0u32;
    let pick = |rng: &mut Rng| -> &str {
        // Squaring a uniform draw favours low indices.
        let u = rng.below(1 << 20) as f64 / f64::from(1u32 << 20);
        &words[((u * u) * words.len() as f64) as usize % words.len().max(1)]
    };
    while written < total_bytes && !words.is_empty() {
        let (y, m, d) = (2020 + day / 336, 1 + (day / 28) % 12, 1 + day % 28);
        let name = format!("memory/{y:04}-{m:02}-{d:02}.md");
        let mut text = format!("# Notes {y:04}-{m:02}-{d:02}\n\n");
        let target = 4_000 + rng.below(12_000);
        while text.len() < target {
            match rng.below(4) {
                0 => {
                    text.push_str("## ");
                    for _ in 0..2 + rng.below(3) {
                        text.push_str(pick(&mut rng));
                        text.push(' ');
                    }
                    text.push_str("\n\n");
                }
                1 => {
                    for _ in 0..2 + rng.below(4) {
                        text.push_str("- ");
                        for _ in 0..4 + rng.below(8) {
                            text.push_str(pick(&mut rng));
                            text.push(' ');
                        }
                        text.push('\n');
                    }
                    text.push('\n');
                }
                _ => {
                    for _ in 0..20 + rng.below(40) {
                        text.push_str(pick(&mut rng));
                        text.push(if rng.below(12) == 0 { '.' } else { ' ' });
                        if rng.below(15) == 0 {
                            text.push('\n');
                        }
                    }
                    text.push_str("\n\n");
                }
            }
        }
        written += text.len();
        notes.push((name, text));
        day += 1;
    }
    notes
}
