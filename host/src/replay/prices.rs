//! `replay --prices FILE` and `serve --prices FILE`: token counts turned into money.
//!
//! The file is TOML, prices in US dollars per million tokens:
//!
//! ```toml
//! input = 3.0     # a prompt token sent to the chat model or read by a compaction
//! output = 15.0   # a token a compaction's summariser wrote
//! ```
//!
//! Why only these two: a replay's answers are the recorded ones (nothing is generated), so the
//! money a context strategy moves is the input it sends and what its compactions read and
//! write. Cached input is priced as input: the cache breaks the summary counts say how much of
//! it a provider's prompt cache could have served.

use std::path::{Path, PathBuf};

use super::summary::{Cost, Summary};

/// Prices per million tokens, in US dollars.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Prices {
    /// An input token.
    pub input: f64,
    /// An output token.
    pub output: f64,
}

/// Why a prices file could not be used; each names the file and what to write.
#[derive(Debug, thiserror::Error)]
pub enum PricesError {
    /// The file could not be read.
    #[error("--prices {}: {source}; check that the file exists and is readable", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not what it should be.
    #[error(
        "--prices {}: {problem}; write `input = 3.0` and `output = 15.0` (US dollars per \
         million tokens)",
        path.display()
    )]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
}

impl Prices {
    /// Reads `path` (see the module docs).
    pub fn read(path: &Path) -> Result<Self, PricesError> {
        let text = std::fs::read_to_string(path).map_err(|source| PricesError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let invalid = |problem: String| PricesError::Invalid {
            path: path.to_path_buf(),
            problem,
        };
        let table: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| invalid(format!("not TOML: {}", e.message())))?;
        if let Some(key) = table.keys().find(|k| *k != "input" && *k != "output") {
            return Err(invalid(format!("unknown key `{key}`")));
        }
        let price = |key: &str| -> Result<f64, PricesError> {
            match table.get(key) {
                None => Err(invalid(format!("no `{key}`"))),
                Some(v) => match v.as_float().or_else(|| v.as_integer().map(|i| i as f64)) {
                    Some(p) if p >= 0.0 && p.is_finite() => Ok(p),
                    _ => Err(invalid(format!(
                        "`{key}` must be a number of dollars, 0 or more"
                    ))),
                },
            }
        };
        Ok(Self {
            input: price("input")?,
            output: price("output")?,
        })
    }

    /// What `input` tokens read and `output` tokens written cost at these prices, in US
    /// dollars (the one formula `replay` and `serve`'s `/ui` both use).
    pub fn usd(&self, input: u64, output: u64) -> f64 {
        (input as f64 * self.input + output as f64 * self.output) / 1e6
    }

    /// What `summary`'s tokens cost at these prices.
    pub fn cost(&self, summary: &Summary) -> Cost {
        let chat_input_usd = self.usd(summary.tokens_sent, 0);
        let compaction_usd = self.usd(
            summary.compaction_input_tokens,
            summary.compaction_output_tokens,
        );
        Cost {
            chat_input_usd,
            compaction_usd,
            total_usd: chat_input_usd + compaction_usd,
        }
    }
}
