//! Where the full originals of shortened content are kept: byte strings named by their
//! SHA-256, behind one small trait so that a sessions directory and a shared database keep
//! them alike.
//!
//! When a tool result is capped before it enters a session, or a message is too long for one
//! session line, the original must not be lost: it is stored as a blob and the shortened text
//! names it (`blob sha256:<hex>`). Blobs are content-addressed and never change, so a write is
//! idempotent (the same bytes stored twice are one blob) and any replica may read what another
//! stored, in any order.
//!
//! - [`BlobRef`]: a blob's name, `sha256:` and 64 lowercase hex digits;
//! - [`Blob`]: bytes with the name they hash to, so no medium can be handed a wrong name;
//! - [`BlobMedium`]: where blobs are kept (put, get, contains, list);
//! - [`FileBlobs`]: a directory (`<sessions dir>/blobs/ab/ab12…`), one owner-only file each;
//! - the PostgreSQL store (`rampart-store-postgres`) keeps them in a table;
//! - [`conformance`]: the promises every medium keeps, as checks each one runs
//!   ([`blob_medium_conformance!`](crate::blob_medium_conformance)).
#![warn(missing_docs)]

pub mod conformance;

use std::fmt::{self, Debug, Display};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::fsutil::{create_private_dir_all, sync_parent_dir};

/// Why a blob could not be stored or read. Every message names the place (a directory or a
/// store) and, where there is one, the blob.
#[derive(Debug, thiserror::Error)]
pub enum BlobError {
    /// Writing a blob file failed (disk full, permissions).
    #[error("cannot store a blob in `{}`: {source}; check free space and permissions", place.display())]
    Write {
        /// The blob directory.
        place: PathBuf,
        /// The I/O error.
        source: io::Error,
    },
    /// Reading a blob file that exists failed.
    #[error("cannot read blob `{reference}` in `{}`: {source}", place.display())]
    Read {
        /// The blob directory.
        place: PathBuf,
        /// The blob.
        reference: String,
        /// The I/O error.
        source: io::Error,
    },
    /// No blob has that name here.
    #[error(
        "no blob `{reference}` in `{}`; it was never stored here (a sessions directory and a \
         database keep blobs apart: `rampart sessions migrate` copies them)",
        place.display()
    )]
    Missing {
        /// Where it was looked for.
        place: PathBuf,
        /// The name asked for.
        reference: String,
    },
    /// The name is not a blob reference.
    #[error("`{0}` is not a blob reference (expected `sha256:` and 64 hex digits)")]
    BadName(String),
    /// Stored bytes do not hash to their name (a file changed by hand, a torn copy).
    #[error(
        "the blob `{reference}` in `{}` does not hold the bytes its name is the hash of; it was \
         changed or damaged after it was stored, and is not used",
        place.display()
    )]
    Corrupt {
        /// Where it was found.
        place: PathBuf,
        /// Its name.
        reference: String,
    },
    /// A database holding blobs did not answer.
    #[error("the blob store `{}` cannot be reached: could not {operation}: {reason}", place.display())]
    Unavailable {
        /// The store (never with a password).
        place: PathBuf,
        /// What was being done.
        operation: &'static str,
        /// What the client library said.
        reason: String,
    },
    /// A database holding blobs refused an operation.
    #[error("the blob store `{}` could not {operation}: {reason}", place.display())]
    Database {
        /// The store (never with a password).
        place: PathBuf,
        /// What was being done.
        operation: &'static str,
        /// What the database said.
        reason: String,
    },
}

impl BlobError {
    /// Whether the store could not be reached (a retry later may succeed), as opposed to a
    /// blob that is missing, damaged or refused.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, Self::Unavailable { .. })
    }
}

/// A blob's name: the SHA-256 of its bytes, written `sha256:<64 lowercase hex digits>`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BlobRef {
    hex: String,
}

impl BlobRef {
    /// The name of `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        let digest = Sha256::digest(bytes);
        let mut hex = String::with_capacity(64);
        for b in digest {
            use std::fmt::Write as _;
            let _ = write!(hex, "{b:02x}");
        }
        Self { hex }
    }

    /// Reads `sha256:<hex>` (hex digits in either case); anything else is
    /// [`BlobError::BadName`].
    pub fn parse(text: &str) -> Result<Self, BlobError> {
        text.strip_prefix("sha256:")
            .and_then(Self::from_hex)
            .ok_or_else(|| BlobError::BadName(text.to_owned()))
    }

    /// The name whose 64 hex digits are `hex`, if they are.
    pub fn from_hex(hex: &str) -> Option<Self> {
        (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit())).then(|| Self {
            hex: hex.to_ascii_lowercase(),
        })
    }

    /// The 64 lowercase hex digits.
    pub fn hex(&self) -> &str {
        &self.hex
    }
}

impl Display for BlobRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", self.hex)
    }
}

/// Bytes with the name they hash to. Only [`Blob::new`] and [`Blob::checked`] make one, so a
/// medium is never handed bytes under another blob's name.
#[derive(Clone, Copy)]
pub struct Blob<'a> {
    reference: &'a BlobRef,
    bytes: &'a [u8],
}

impl Debug for Blob<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Blob")
            .field("reference", &self.reference.to_string())
            .field("bytes", &self.bytes.len())
            .finish()
    }
}

impl<'a> Blob<'a> {
    /// `bytes` under `reference`, which the caller computed with [`BlobRef::of`] of them.
    /// Named so that a caller that hashed once does not hash again; a mismatch is a bug in
    /// the caller, caught in debug builds.
    pub fn new(reference: &'a BlobRef, bytes: &'a [u8]) -> Self {
        debug_assert_eq!(&BlobRef::of(bytes), reference, "a blob under a wrong name");
        Self { reference, bytes }
    }

    /// `bytes` under `reference` when they hash to it (bytes read from elsewhere, such as a
    /// store being migrated); [`BlobError::Corrupt`] naming `place` otherwise.
    pub fn checked(
        reference: &'a BlobRef,
        bytes: &'a [u8],
        place: &Path,
    ) -> Result<Self, BlobError> {
        if &BlobRef::of(bytes) != reference {
            return Err(BlobError::Corrupt {
                place: place.to_owned(),
                reference: reference.to_string(),
            });
        }
        Ok(Self { reference, bytes })
    }

    /// Its name.
    pub fn reference(&self) -> &'a BlobRef {
        self.reference
    }

    /// Its bytes.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }
}

/// Where blobs are kept (see the module docs). Every operation is idempotent and safe to run
/// from several processes at once; a blob, once stored, is durable before `put` returns (a
/// session line naming it is written after).
pub trait BlobMedium: Send + Sync + Debug {
    /// What messages call this place (a directory, or a store's name without a password).
    fn describe(&self) -> &Path;

    /// Stores `blob`; storing one that is there already writes nothing. Returns whether this
    /// call stored it.
    fn put(&self, blob: Blob<'_>) -> Result<bool, BlobError>;

    /// The bytes of `reference`; [`BlobError::Missing`] when it is not here.
    fn get(&self, reference: &BlobRef) -> Result<Vec<u8>, BlobError>;

    /// Whether `reference` is here.
    fn contains(&self, reference: &BlobRef) -> Result<bool, BlobError>;

    /// Every blob here, by name (for copying them elsewhere and for reports).
    fn list(&self) -> Result<Vec<BlobRef>, BlobError>;

    /// The file holding `reference`, for a medium on this machine's file system; `None` for
    /// a database (a person reads it with `rampart sessions blob`).
    fn file_of(&self, reference: &BlobRef) -> Option<PathBuf> {
        let _ = reference;
        None
    }
}

/// Blobs as files in a directory: `<dir>/<first two hex digits>/<hex>`, owner-only, each
/// written under a temporary name, synced, and moved into place, so a crash never leaves half a
/// blob under its name.
#[derive(Debug, Clone)]
pub struct FileBlobs {
    dir: PathBuf,
}

impl FileBlobs {
    /// Blobs in `dir` (created, owner-only, on the first write).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// Blobs in `<sessions_dir>/blobs`, where a sessions directory keeps them.
    pub fn in_sessions_dir(sessions_dir: &Path) -> Self {
        Self::new(sessions_dir.join("blobs"))
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, reference: &BlobRef) -> PathBuf {
        // Two-character fan-out keeps directories small.
        let hex = reference.hex();
        self.dir.join(&hex[..2]).join(hex)
    }

    fn write(&self, path: &Path, bytes: &[u8]) -> io::Result<bool> {
        let parent = path.parent().unwrap_or(&self.dir);
        // Owner-only, as the sessions whose content the blobs hold.
        create_private_dir_all(parent)?;
        // tempfile creates the file 0600.
        let mut tmp = tempfile::Builder::new()
            .prefix(".tmp-")
            .tempfile_in(parent)?;
        tmp.write_all(bytes)?;
        tmp.as_file().sync_all()?;
        match tmp.persist_noclobber(path) {
            Ok(_) => {}
            // Another writer stored the same bytes first: content-addressed, so nothing to do.
            Err(e) if e.error.kind() == io::ErrorKind::AlreadyExists => return Ok(false),
            Err(e) => return Err(e.error),
        }
        let _ = sync_parent_dir(path);
        Ok(true)
    }
}

impl BlobMedium for FileBlobs {
    fn describe(&self) -> &Path {
        &self.dir
    }

    fn put(&self, blob: Blob<'_>) -> Result<bool, BlobError> {
        let path = self.path(blob.reference());
        if path.is_file() {
            return Ok(false);
        }
        let written = self
            .write(&path, blob.bytes())
            .map_err(|source| BlobError::Write {
                place: self.dir.clone(),
                source,
            })?;
        if written {
            tracing::debug!(blob = %blob.reference(), bytes = blob.bytes().len(), dir = %self.dir.display(), "blob stored");
        }
        Ok(written)
    }

    fn get(&self, reference: &BlobRef) -> Result<Vec<u8>, BlobError> {
        std::fs::read(self.path(reference)).map_err(|source| {
            if source.kind() == io::ErrorKind::NotFound {
                BlobError::Missing {
                    place: self.dir.clone(),
                    reference: reference.to_string(),
                }
            } else {
                BlobError::Read {
                    place: self.dir.clone(),
                    reference: reference.to_string(),
                    source,
                }
            }
        })
    }

    fn contains(&self, reference: &BlobRef) -> Result<bool, BlobError> {
        Ok(self.path(reference).is_file())
    }

    /// Files named as blobs in their fan-out directory; temporary files and anything else
    /// left there are not blobs.
    fn list(&self) -> Result<Vec<BlobRef>, BlobError> {
        let read_err = |source: io::Error| BlobError::Read {
            place: self.dir.clone(),
            reference: "(the list of blobs)".to_owned(),
            source,
        };
        let fans = match std::fs::read_dir(&self.dir) {
            Ok(fans) => fans,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(read_err(e)),
        };
        let mut found = Vec::new();
        for fan in fans {
            let fan = fan.map_err(read_err)?;
            let fan_name = fan.file_name().to_string_lossy().into_owned();
            if fan_name.len() != 2 || !fan.file_type().map_err(read_err)?.is_dir() {
                continue;
            }
            for file in std::fs::read_dir(fan.path()).map_err(read_err)? {
                let file = file.map_err(read_err)?;
                let name = file.file_name().to_string_lossy().into_owned();
                if let Some(reference) = BlobRef::from_hex(&name)
                    && name.starts_with(&fan_name)
                    && name == reference.hex()
                    && file.file_type().map_err(read_err)?.is_file()
                {
                    found.push(reference);
                }
            }
        }
        found.sort();
        Ok(found)
    }

    fn file_of(&self, reference: &BlobRef) -> Option<PathBuf> {
        Some(self.path(reference))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "blobs_tests.rs"]
mod tests;
