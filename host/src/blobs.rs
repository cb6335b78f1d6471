//! The blob store: full originals of anything the host shortened, kept by content hash.
//!
//! When a tool result is capped before it enters a session, the original must not be lost
//! (OpenClaw drops it). It goes here, named by its SHA-256, in `<sessions dir>/blobs/`. The capped
//! message names the blob, so a person or a tool can read the whole output later. Content
//! addressing makes writes idempotent: the same output stored twice is one file.

use std::io::Write;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// Why a blob could not be stored or read.
#[derive(Debug, thiserror::Error)]
pub enum BlobError {
    /// Writing failed (disk full, permissions).
    #[error("cannot store a blob in `{}`: {source}; check free space and permissions", dir.display())]
    Write {
        /// The blob directory.
        dir: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// No blob has that name.
    #[error("no blob `{name}` in `{}`", dir.display())]
    Missing {
        /// The blob directory.
        dir: PathBuf,
        /// The name asked for.
        name: String,
    },
    /// The name is not a blob reference this store writes.
    #[error("`{0}` is not a blob reference (expected `sha256:` and 64 hex digits)")]
    BadName(String),
}

/// A content-addressed store of byte strings.
#[derive(Debug, Clone)]
pub struct BlobStore {
    dir: PathBuf,
}

impl BlobStore {
    /// The store under `sessions_dir/blobs`.
    pub fn in_sessions_dir(sessions_dir: &Path) -> Self {
        Self {
            dir: sessions_dir.join("blobs"),
        }
    }

    /// The directory blobs live in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Stores `bytes` and returns their reference, `sha256:<hex>`. Storing the same bytes again
    /// writes nothing.
    pub fn put(&self, bytes: &[u8]) -> Result<String, BlobError> {
        let hex = hex_digest(bytes);
        let path = self.path_of_hex(&hex);
        if path.is_file() {
            return Ok(format!("sha256:{hex}"));
        }
        let write = |path: &Path| -> std::io::Result<()> {
            let parent = path.parent().unwrap_or(&self.dir);
            // Owner-only, as the sessions whose content the blobs hold.
            rampart_sessions::create_private_dir_all(parent)?;
            // Temp file, fsync, rename: a crash never leaves a half blob under the final name.
            let mut tmp = tempfile_in(parent)?;
            tmp.1.write_all(bytes)?;
            tmp.1.sync_all()?;
            std::fs::rename(&tmp.0, path)?;
            if let Ok(dir) = std::fs::File::open(parent) {
                let _ = dir.sync_all();
            }
            Ok(())
        };
        write(&path).map_err(|source| BlobError::Write {
            dir: self.dir.clone(),
            source,
        })?;
        tracing::debug!(blob = %hex, bytes = bytes.len(), dir = %self.dir.display(), "blob stored");
        Ok(format!("sha256:{hex}"))
    }

    /// Reads a blob by reference.
    pub fn get(&self, reference: &str) -> Result<Vec<u8>, BlobError> {
        let path = self.path_of(reference)?;
        std::fs::read(&path).map_err(|_| BlobError::Missing {
            dir: self.dir.clone(),
            name: reference.to_string(),
        })
    }

    /// The file a reference names.
    pub fn path_of(&self, reference: &str) -> Result<PathBuf, BlobError> {
        let hex = reference
            .strip_prefix("sha256:")
            .filter(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
            .ok_or_else(|| BlobError::BadName(reference.to_string()))?;
        Ok(self.path_of_hex(&hex.to_ascii_lowercase()))
    }

    fn path_of_hex(&self, hex: &str) -> PathBuf {
        // Two-character fan-out keeps directories small.
        self.dir.join(&hex[..2]).join(hex)
    }
}

fn hex_digest(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut out = String::with_capacity(64);
    for b in digest {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

fn tempfile_in(dir: &Path) -> std::io::Result<(PathBuf, std::fs::File)> {
    for attempt in 0..100u32 {
        let name = format!(".tmp-{}-{}-{attempt}", std::process::id(), rand_suffix());
        let path = dir.join(name);
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        match options.open(&path) {
            Ok(f) => return Ok((path, f)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::other("could not create a temporary file"))
}

fn rand_suffix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn put_is_content_addressed_and_idempotent() {
        let dir = tempfile::tempdir().unwrap();
        let store = BlobStore::in_sessions_dir(dir.path());
        let a = store.put(b"hello").unwrap();
        assert_eq!(
            a,
            "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
        );
        assert_eq!(store.put(b"hello").unwrap(), a);
        assert_eq!(store.get(&a).unwrap(), b"hello");
        assert!(store.get("sha256:00").is_err());
        let files: Vec<_> = walk(store.dir());
        assert_eq!(files.len(), 1, "{files:?}");
    }

    fn walk(dir: &Path) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                out.extend(walk(&p))
            } else {
                out.push(p)
            }
        }
        out
    }
}
