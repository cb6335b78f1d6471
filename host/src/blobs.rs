//! The blob store: full originals of anything the host shortened, kept by content hash.
//!
//! When a tool result is capped before it enters a session, the original must not be lost
//! (OpenClaw drops it). It goes here, named by its SHA-256 (`sha256:<hex>`), and the capped
//! message names the blob, so a person or a tool can read the whole output later
//! (`rampart sessions blob REF`). Content addressing makes writes idempotent: the same output
//! stored twice is one blob.
//!
//! Where the blobs are is a [`BlobMedium`] of `rampart-sessions`: `<sessions dir>/blobs/` for a
//! sessions directory, the `rampart_blobs` table for a PostgreSQL store (so every replica reads
//! what another stored). Callers see only [`BlobStore::put`] and [`BlobStore::get`].

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rampart_sessions::blobs::{Blob, BlobMedium, FileBlobs};
pub use rampart_sessions::blobs::{BlobError, BlobRef};

/// A content-addressed store of byte strings, on a directory or a database.
#[derive(Debug, Clone)]
pub struct BlobStore {
    medium: Arc<dyn BlobMedium>,
}

impl BlobStore {
    /// The store under `sessions_dir/blobs`.
    pub fn in_sessions_dir(sessions_dir: &Path) -> Self {
        Self::on(Arc::new(FileBlobs::in_sessions_dir(sessions_dir)))
    }

    /// The store on `medium` (what a `SharedStore` hands out with `blobs()`).
    pub fn on(medium: Arc<dyn BlobMedium>) -> Self {
        Self { medium }
    }

    /// Where the blobs are kept, as messages name it (a directory, or a store's name).
    pub fn place(&self) -> &Path {
        self.medium.describe()
    }

    /// The medium behind the store.
    pub fn medium(&self) -> &Arc<dyn BlobMedium> {
        &self.medium
    }

    /// Stores `bytes` and returns their reference, `sha256:<hex>`. Storing the same bytes again
    /// writes nothing.
    pub fn put(&self, bytes: &[u8]) -> Result<String, BlobError> {
        let reference = BlobRef::of(bytes);
        self.medium.put(Blob::new(&reference, bytes))?;
        Ok(reference.to_string())
    }

    /// Reads a blob by reference.
    pub fn get(&self, reference: &str) -> Result<Vec<u8>, BlobError> {
        self.medium.get(&BlobRef::parse(reference)?)
    }

    /// The file a reference names, when the blobs are files on this machine; `None` for a
    /// database (see [`where_to_read`](Self::where_to_read)).
    pub fn path_of(&self, reference: &str) -> Result<Option<PathBuf>, BlobError> {
        Ok(self.medium.file_of(&BlobRef::parse(reference)?))
    }

    /// Where a person finds the blob `reference`: its file, or, in a database, the command
    /// that prints it.
    pub fn where_to_read(&self, reference: &str) -> Result<String, BlobError> {
        let parsed = BlobRef::parse(reference)?;
        Ok(match self.medium.file_of(&parsed) {
            Some(file) => file.display().to_string(),
            None => format!(
                "`rampart sessions --store {} blob {parsed}`",
                self.medium.describe().display()
            ),
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "blobs_tests.rs"]
mod tests;
