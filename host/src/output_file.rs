//! Output files: what a command writes where the user asked it to (`--events`, `replay
//! --requests-out` and `--report`, `eval --out`, `context show --html`, `sessions export
//! --out`). Every one of them is made here, under one rule:
//!
//! - **An output never replaces an input.** A path that is the same file as something the
//!   command reads (the transcript, `plugins.toml`, a `--prices` file, the session, any file of
//!   the sessions directory) is refused before anything is opened for writing, whatever the
//!   flags: `replay t.jsonl --requests-out t.jsonl` used to truncate the transcript to nothing,
//!   then fail on the empty file. "The same file" is decided on the resolved path and on the
//!   file's identity (device and inode), so a symbolic or hard link to an input counts. Two
//!   outputs naming one file are refused too.
//! - **An existing file is replaced only with `--overwrite`**, and then atomically: the new
//!   content goes to a temporary file beside it (owner-only, removed on a signal, see
//!   [`crate::scratch`]) and is renamed over the old one when complete, so the old file stays
//!   whole until then, and stays as it was if the command fails. A replaced file keeps its
//!   permissions; a new one is owner-only (outputs hold the same conversations as the
//!   sessions).
//! - A new whole file ([`OutputFile::create`]) appears complete or not at all (written aside,
//!   then linked into place only if the name is still free). A new streamed file
//!   ([`OutputFile::stream`]: `--events`, `--requests-out`) is created exclusively and written
//!   as the command runs, so `tail -f` follows it and a crash leaves what was written so far.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::scratch::Registration;

/// Why an output file was refused or could not be written. Each names the flag and the path,
/// and says what to do.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// The output is a file the command reads.
    #[error(
        "{flag} `{path}` is {what} (`{input}`), which this command reads; an output never \
         replaces an input: choose another path"
    )]
    SameAsInput {
        /// The flag that named the output.
        flag: String,
        /// The output's path, as given.
        path: PathBuf,
        /// What the input is ("the transcript").
        what: String,
        /// The input's path, as given.
        input: PathBuf,
    },
    /// Two outputs name the same file.
    #[error("{flag} `{path}` is the same file as {other}; give each output its own path")]
    SameAsOutput {
        /// The flag that named the output.
        flag: String,
        /// The output's path, as given.
        path: PathBuf,
        /// The other output's flag.
        other: String,
    },
    /// The output is an existing file of the sessions directory.
    #[error(
        "{flag} `{path}` is a file of the sessions directory `{store}`; outputs never replace \
         Rampart's sessions: choose a path outside it"
    )]
    InStore {
        /// The flag that named the output.
        flag: String,
        /// The output's path, as given.
        path: PathBuf,
        /// The sessions directory.
        store: PathBuf,
    },
    /// The output exists and `--overwrite` was not given.
    #[error(
        "{flag} `{path}` already exists; pass --overwrite to replace it (the old file stays \
         whole until the new one is complete), or choose another path"
    )]
    Exists {
        /// The flag that named the output.
        flag: String,
        /// The output's path, as given.
        path: PathBuf,
    },
    /// The output is a directory.
    #[error("{flag} `{path}` is a directory; give the path of a file")]
    IsDirectory {
        /// The flag that named the output.
        flag: String,
        /// The output's path, as given.
        path: PathBuf,
    },
    /// Creating the file (or its temporary file beside it) failed.
    #[error(
        "cannot create the {flag} file `{path}`: {source}; check the directory exists and is \
         writable"
    )]
    Create {
        /// The flag that named the output.
        flag: String,
        /// The output's path, as given.
        path: PathBuf,
        /// The system's error.
        source: io::Error,
    },
    /// Writing, syncing or renaming the file into place failed.
    #[error("cannot write the {flag} file `{path}`: {source}")]
    Write {
        /// The flag that named the output.
        flag: String,
        /// The output's path, as given.
        path: PathBuf,
        /// The system's error.
        source: io::Error,
    },
}

/// What a command reads, which its outputs must not replace.
#[derive(Debug, Clone, Default)]
pub struct Inputs {
    files: Vec<(String, PathBuf)>,
    stores: Vec<PathBuf>,
}

impl Inputs {
    /// None yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds the file at `path`, described as `what` in errors ("the transcript").
    pub fn file(&mut self, what: impl Into<String>, path: &Path) -> &mut Self {
        self.files.push((what.into(), path.to_path_buf()));
        self
    }

    /// Adds every existing file of the sessions directory `dir` (the registry, the sessions,
    /// the blobs): Rampart's own store is never an output's place.
    pub fn store(&mut self, dir: &Path) -> &mut Self {
        self.stores.push(dir.to_path_buf());
        self
    }

    /// Checks one output (see the module docs); nothing is created.
    pub fn check(&self, flag: &str, path: &Path, overwrite: bool) -> Result<(), OutputError> {
        let err_path = || path.to_path_buf();
        if std::fs::metadata(path).is_ok_and(|m| m.is_dir()) {
            return Err(OutputError::IsDirectory {
                flag: flag.into(),
                path: err_path(),
            });
        }
        for (what, input) in &self.files {
            if same_file(path, input) {
                return Err(OutputError::SameAsInput {
                    flag: flag.into(),
                    path: err_path(),
                    what: what.clone(),
                    input: input.clone(),
                });
            }
        }
        let exists = std::fs::symlink_metadata(path).is_ok();
        if exists {
            let resolved = resolve(path);
            for store in &self.stores {
                let inside = std::fs::canonicalize(store)
                    .ok()
                    .zip(resolved.as_ref())
                    .is_some_and(|(store, out)| out.starts_with(store));
                if inside {
                    return Err(OutputError::InStore {
                        flag: flag.into(),
                        path: err_path(),
                        store: store.clone(),
                    });
                }
            }
            if !overwrite {
                return Err(OutputError::Exists {
                    flag: flag.into(),
                    path: err_path(),
                });
            }
        }
        Ok(())
    }

    /// Checks every output of a command together, before any is created: each as
    /// [`Inputs::check`], and no two naming the same file.
    pub fn check_all(&self, outputs: &[(&str, &Path)], overwrite: bool) -> Result<(), OutputError> {
        for (i, (flag, path)) in outputs.iter().enumerate() {
            self.check(flag, path, overwrite)?;
            if let Some((other, _)) = outputs[..i].iter().find(|(_, p)| same_file(path, p)) {
                return Err(OutputError::SameAsOutput {
                    flag: (*flag).into(),
                    path: path.to_path_buf(),
                    other: (*other).into(),
                });
            }
        }
        Ok(())
    }
}

/// `path` with its directory resolved (links, `..`), whether or not the file exists.
fn resolve(path: &Path) -> Option<PathBuf> {
    if let Ok(p) = std::fs::canonicalize(path) {
        return Some(p);
    }
    let name = path.file_name()?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    std::fs::canonicalize(dir).ok().map(|d| d.join(name))
}

/// Whether `a` and `b` are one file: the same resolved path, or the same device and inode
/// (a hard link, a link through another directory).
fn same_file(a: &Path, b: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if let (Ok(x), Ok(y)) = (std::fs::metadata(a), std::fs::metadata(b))
            && x.dev() == y.dev()
            && x.ino() == y.ino()
        {
            return true;
        }
    }
    matches!((resolve(a), resolve(b)), (Some(x), Some(y)) if x == y)
}

/// An output file being written (see the module docs). Write to it, then
/// [`commit`](OutputFile::commit); dropped without a commit, a file written aside is removed
/// and the target left as it was.
#[derive(Debug)]
pub struct OutputFile {
    flag: String,
    target: PathBuf,
    state: State,
}

#[derive(Debug)]
enum State {
    /// Written to a temporary file beside the target, put in place by the commit.
    Aside {
        writer: BufWriter<tempfile::NamedTempFile>,
        /// Whether the target may be replaced (else the name must still be free).
        replace: bool,
        /// The permissions of the file replaced.
        permissions: Option<std::fs::Permissions>,
        _registration: Registration,
    },
    /// Written in place (a new streamed file).
    Direct(BufWriter<File>),
    /// Committed or failed.
    Done,
}

impl OutputFile {
    /// A whole file (a report, a table, an export) at `path`, for `flag`: checked against
    /// `inputs` (see [`Inputs::check`]), written aside, put in place by the commit.
    pub fn create(
        flag: &str,
        path: &Path,
        inputs: &Inputs,
        overwrite: bool,
    ) -> Result<Self, OutputError> {
        inputs.check(flag, path, overwrite)?;
        Self::aside(flag, path, overwrite)
    }

    /// A streamed file (`--events`, `--requests-out`): a new one is created exclusively and
    /// written in place; an existing one (with `overwrite`) is written aside and replaced by
    /// the commit.
    pub fn stream(
        flag: &str,
        path: &Path,
        inputs: &Inputs,
        overwrite: bool,
    ) -> Result<Self, OutputError> {
        inputs.check(flag, path, overwrite)?;
        if std::fs::symlink_metadata(path).is_ok() {
            return Self::aside(flag, path, overwrite);
        }
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        let file = options.open(path).map_err(|source| {
            if source.kind() == io::ErrorKind::AlreadyExists {
                // Created since the check: someone else's now.
                OutputError::Exists {
                    flag: flag.into(),
                    path: path.to_path_buf(),
                }
            } else {
                OutputError::Create {
                    flag: flag.into(),
                    path: path.to_path_buf(),
                    source,
                }
            }
        })?;
        Ok(Self {
            flag: flag.into(),
            target: path.to_path_buf(),
            state: State::Direct(BufWriter::with_capacity(64 << 10, file)),
        })
    }

    fn aside(flag: &str, path: &Path, replace: bool) -> Result<Self, OutputError> {
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "output".into());
        let temp = tempfile::Builder::new()
            .prefix(&format!(".{name}."))
            .suffix(".rampart-tmp")
            .tempfile_in(dir)
            .map_err(|source| OutputError::Create {
                flag: flag.into(),
                path: path.to_path_buf(),
                source,
            })?;
        let registration = Registration::new(temp.path());
        Ok(Self {
            flag: flag.into(),
            target: path.to_path_buf(),
            state: State::Aside {
                writer: BufWriter::with_capacity(64 << 10, temp),
                replace,
                permissions: std::fs::metadata(path).ok().map(|m| m.permissions()),
                _registration: registration,
            },
        })
    }

    /// The path the file is written to, as given.
    pub fn path(&self) -> &Path {
        &self.target
    }

    fn write_error(&self, source: io::Error) -> OutputError {
        OutputError::Write {
            flag: self.flag.clone(),
            path: self.target.clone(),
            source,
        }
    }

    /// Finishes the file: flushed, synced and (when written aside) renamed into place. A new
    /// file's name taken by someone else meanwhile is refused, not replaced.
    pub fn commit(mut self) -> Result<(), OutputError> {
        match std::mem::replace(&mut self.state, State::Done) {
            State::Done => Ok(()),
            State::Direct(mut writer) => {
                writer.flush().map_err(|e| self.write_error(e))?;
                Ok(())
            }
            State::Aside {
                writer,
                replace,
                permissions,
                _registration,
            } => {
                let temp = writer
                    .into_inner()
                    .map_err(|e| self.write_error(e.into_error()))?;
                if let Some(p) = permissions {
                    temp.as_file()
                        .set_permissions(p)
                        .map_err(|e| self.write_error(e))?;
                }
                temp.as_file().sync_all().map_err(|e| self.write_error(e))?;
                let placed = if replace {
                    temp.persist(&self.target).map(drop)
                } else {
                    temp.persist_noclobber(&self.target).map(drop)
                };
                placed.map_err(|e| {
                    if e.error.kind() == io::ErrorKind::AlreadyExists {
                        OutputError::Exists {
                            flag: self.flag.clone(),
                            path: self.target.clone(),
                        }
                    } else {
                        self.write_error(e.error)
                    }
                })?;
                Ok(())
            }
        }
    }

    /// Writes `bytes` as the whole content and commits.
    pub fn write_whole(mut self, bytes: &[u8]) -> Result<(), OutputError> {
        self.write_all(bytes).map_err(|e| self.write_error(e))?;
        self.commit()
    }
}

impl Write for OutputFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match &mut self.state {
            State::Aside { writer, .. } => writer.write(buf),
            State::Direct(writer) => writer.write(buf),
            State::Done => Err(io::Error::other("the output file is already finished")),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match &mut self.state {
            State::Aside { writer, .. } => writer.flush(),
            State::Direct(writer) => writer.flush(),
            State::Done => Ok(()),
        }
    }
}

/// An [`OutputFile`] written from several threads (the `--events` sink, which every engine
/// and the run loop share) and committed once by the command when it ends. Writes after the
/// commit are dropped: the file is closed.
#[derive(Debug, Clone)]
pub struct SharedOutput(Arc<Mutex<Option<OutputFile>>>);

impl SharedOutput {
    /// Shares `file`.
    pub fn new(file: OutputFile) -> Self {
        Self(Arc::new(Mutex::new(Some(file))))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<OutputFile>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Commits the file (see [`OutputFile::commit`]); later calls do nothing.
    pub fn commit(&self) -> Result<(), OutputError> {
        let file = self.lock().take();
        file.map_or(Ok(()), OutputFile::commit)
    }
}

impl Write for SharedOutput {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self.lock().as_mut() {
            Some(file) => file.write(buf),
            None => Ok(buf.len()),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self.lock().as_mut() {
            Some(file) => file.flush(),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
#[path = "output_file_tests.rs"]
mod tests;
