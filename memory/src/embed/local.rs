//! A static embedding model in model2vec's format, read from a local directory:
//! `model.safetensors` (an `embeddings` tensor, one row per token), `tokenizer.json` and
//! `config.json`. A text's vector is the mean of its tokens' rows, normalised when the config
//! says so (the default), exactly as model2vec computes it: the `model2vec-rs` crate does
//! the work, built without its Hugging Face downloader, so nothing is fetched.
//!
//! Static models embed thousands of chunks a second on one core, which is why this is the
//! provider for machines without an embedding API.

use std::fs;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

use model2vec_rs::model::StaticModel;
use sha2::{Digest, Sha256};

use super::{EmbedError, Embedder};

/// Most tokens of a text that count (model2vec's default); chunks are far shorter.
const MAX_TOKENS: usize = 512;

/// An [`Embedder`] over a model2vec model directory.
pub struct LocalEmbedder {
    model: StaticModel,
    dir: PathBuf,
    name: String,
    key: String,
}

impl std::fmt::Debug for LocalEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalEmbedder")
            .field("dir", &self.dir)
            .field("dims", &self.model.dim())
            .finish()
    }
}

impl LocalEmbedder {
    /// Loads the model in `dir`. Its id is the directory's name; its provider key is a
    /// digest of the weights, so a different model under the same name reindexes.
    pub fn load(dir: &Path) -> Result<Self, EmbedError> {
        let read = |name: &str| {
            let path = dir.join(name);
            fs::read(&path).map_err(|e| EmbedError::Model {
                message: format!("could not read {}: {e}", path.display()),
                path,
            })
        };
        let tokenizer = read("tokenizer.json")?;
        let weights = read("model.safetensors")?;
        let config = read("config.json")?;
        let digest = Sha256::digest(&weights);
        let loaded = catch_unwind(AssertUnwindSafe(|| {
            StaticModel::from_bytes(&tokenizer, &weights, &config, None)
        }));
        let model = match loaded {
            Ok(Ok(model)) => model,
            Ok(Err(e)) => {
                return Err(EmbedError::Model {
                    path: dir.to_path_buf(),
                    message: format!("{e:#}"),
                });
            }
            Err(_) => {
                return Err(EmbedError::Model {
                    path: dir.to_path_buf(),
                    message: "the model files are inconsistent (loading them panicked)".into(),
                });
            }
        };
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| "model2vec".to_string());
        Ok(Self {
            model,
            dir: dir.to_path_buf(),
            name,
            key: crate::chunking::hex(&digest[..8]),
        })
    }

    /// The directory the model was read from.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Embedder for LocalEmbedder {
    fn provider(&self) -> &str {
        "local"
    }

    fn model(&self) -> &str {
        &self.name
    }

    fn dims(&self) -> Option<usize> {
        Some(self.model.dim())
    }

    fn provider_key(&self) -> String {
        self.key.clone()
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let owned: Vec<String> = texts.iter().map(|t| t.to_string()).collect();
        // model2vec-rs panics on a tokenizer failure in its general path; a panic must not
        // take a sync thread down with it.
        catch_unwind(AssertUnwindSafe(|| {
            self.model
                .encode_with_args(&owned, Some(MAX_TOKENS), owned.len())
        }))
        .map_err(|_| EmbedError::Model {
            path: self.dir.clone(),
            message: "the tokenizer failed on a text (model2vec panicked)".into(),
        })
    }
}
