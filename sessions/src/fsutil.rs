//! Durable file replacement: the only way this crate ever puts a whole file in place.
//!
//! A new file is written under a temporary name in the same directory, flushed and fsynced,
//! then moved into place with one rename (or hard link, when the target must not exist yet),
//! and the directory is fsynced so the new name itself survives a power cut. At every instant
//! the target path holds either the complete old content or the complete new content.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

/// Fsyncs the directory containing `path`, making a create or rename in it durable. A no-op
/// where directories cannot be opened for syncing (Windows).
pub(crate) fn sync_parent_dir(path: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        let dir = match path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir,
            _ => Path::new("."),
        };
        File::open(dir)?.sync_all()
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        Ok(())
    }
}

/// Makes the files `options` creates readable and writable by their owner only (0600 on
/// Unix): session files, their sidecars and the registry hold the user's conversations, so
/// they are as private as `sessions.json` always was.
pub(crate) fn owner_only(options: &mut OpenOptions) -> &mut OpenOptions {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options
}

/// Creates `dir` and its missing parents, each one this creates owner-only (0700 on Unix);
/// existing directories are left as they are.
pub fn create_private_dir_all(dir: &Path) -> io::Result<()> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir)
}

/// A temporary name next to `target` (same directory, so the final rename is atomic).
fn temp_path_for(target: &Path) -> PathBuf {
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "session".to_owned());
    let unique: u32 = rand::random();
    target.with_file_name(format!(".{name}.tmp-{}-{unique:08x}", std::process::id()))
}

/// How [`write_atomically`] puts the new file in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Place {
    /// Replace whatever is at the target (rename).
    Replace,
    /// Fail with `AlreadyExists` if the target exists (hard link, then drop the temp name).
    CreateNew,
}

/// Writes a file at `target` through `write`, atomically and durably (see the module docs).
/// On any error the temporary file is removed and the target is untouched.
pub(crate) fn write_atomically(
    target: &Path,
    place: Place,
    write: impl FnOnce(&mut BufWriter<File>) -> io::Result<()>,
) -> io::Result<()> {
    let temp = temp_path_for(target);
    let result = (|| {
        let file = owner_only(OpenOptions::new().write(true).create_new(true)).open(&temp)?;
        // A file replaced keeps its permissions (the user may have opened it up); a new one
        // stays owner-only.
        if place == Place::Replace
            && let Ok(meta) = fs::metadata(target)
        {
            file.set_permissions(meta.permissions())?;
        }
        let mut out = BufWriter::with_capacity(1 << 20, file);
        write(&mut out)?;
        let file = out.into_inner().map_err(io::IntoInnerError::into_error)?;
        file.sync_all()?;
        drop(file);
        match place {
            Place::Replace => fs::rename(&temp, target)?,
            Place::CreateNew => {
                fs::hard_link(&temp, target)?;
                fs::remove_file(&temp)?;
            }
        }
        sync_parent_dir(target)
    })();
    if result.is_err() {
        // Best effort: a leftover temp file is clutter, not damage.
        let _ = fs::remove_file(&temp);
    }
    result
}

/// Keeps the file at `original` under a new name `backup` without touching its bytes: a hard
/// link where the filesystem allows it, otherwise a durable copy. Fails with `AlreadyExists`
/// if `backup` exists.
pub(crate) fn keep_as(original: &Path, backup: &Path) -> io::Result<()> {
    match fs::hard_link(original, backup) {
        Ok(()) => {}
        Err(error) if error.kind() == io::ErrorKind::AlreadyExists => return Err(error),
        Err(_) => {
            let mut source = File::open(original)?;
            let mut copy =
                owner_only(OpenOptions::new().write(true).create_new(true)).open(backup)?;
            io::copy(&mut source, &mut copy)?;
            copy.flush()?;
            copy.sync_all()?;
        }
    }
    sync_parent_dir(backup)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn replace_and_create_new() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("a.jsonl");
        write_atomically(&target, Place::CreateNew, |w| w.write_all(b"one")).unwrap();
        let again = write_atomically(&target, Place::CreateNew, |w| w.write_all(b"two"));
        assert_eq!(again.unwrap_err().kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(fs::read(&target).unwrap(), b"one");
        write_atomically(&target, Place::Replace, |w| w.write_all(b"three")).unwrap();
        assert_eq!(fs::read(&target).unwrap(), b"three");
        let failed = write_atomically(&target, Place::Replace, |_| Err(io::Error::other("x")));
        assert!(failed.is_err());
        assert_eq!(fs::read(&target).unwrap(), b"three");
        // No temp files are left behind.
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
        keep_as(&target, &dir.path().join("a.bak")).unwrap();
        assert_eq!(fs::read(dir.path().join("a.bak")).unwrap(), b"three");
    }

    #[cfg(unix)]
    #[test]
    fn new_files_and_dirs_are_owner_only_and_a_replaced_file_keeps_its_mode() {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        let dir = tempfile::tempdir().unwrap();
        let nested = dir.path().join("a").join("b");
        create_private_dir_all(&nested).unwrap();
        assert_eq!(mode(&dir.path().join("a")), 0o700);
        assert_eq!(mode(&nested), 0o700);
        let target = nested.join("s.jsonl");
        write_atomically(&target, Place::CreateNew, |w| w.write_all(b"one")).unwrap();
        assert_eq!(mode(&target), 0o600);
        fs::set_permissions(&target, fs::Permissions::from_mode(0o640)).unwrap();
        write_atomically(&target, Place::Replace, |w| w.write_all(b"two")).unwrap();
        assert_eq!(mode(&target), 0o640);
    }
}
