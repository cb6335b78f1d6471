//! Checks an engine library's file before the OS maps it.
//!
//! Why: `dlopen` maps the segments the file's headers claim. When the file is shorter than
//! they claim (a copy cut short, a build interrupted), touching the missing pages raises
//! SIGBUS, which no error handling can catch: the host dies with exit 135 even for an engine
//! marked `required = false`. Reading the headers first, with ordinary reads, turns that into
//! the usual load error and quarantine line.
//!
//! The check reads only headers (through a read cache, never a mapping, so a file that shrinks
//! meanwhile cannot fault either): the object format (ELF, Mach-O or PE), then that every
//! segment and every section with file contents lies inside the file.

use std::fs::File;
use std::path::Path;

use object::read::ReadCache;
use object::{Object, ObjectSection, ObjectSegment};

/// Why a library file cannot be mapped safely.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Damage {
    /// The file could not be read.
    Unreadable(String),
    /// Not an object file of a known format, or its headers are themselves cut or corrupt.
    NotAnObject(String),
    /// A segment or section claims bytes past the end of the file.
    Truncated {
        /// What claims them (`segment 2`, `section .text`).
        part: String,
        /// Where its contents end, in bytes.
        claimed_end: u64,
        /// The file's length.
        file_len: u64,
    },
}

impl std::fmt::Display for Damage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Unreadable(why) => write!(f, "cannot read it: {why}"),
            Self::NotAnObject(why) => {
                write!(
                    f,
                    "it is not a loadable shared library for this platform (ELF, Mach-O or \
                     PE): {why}"
                )
            }
            Self::Truncated {
                part,
                claimed_end,
                file_len,
            } => write!(
                f,
                "it is cut short: its {part} ends at byte {claimed_end} but the file has only \
                 {file_len} bytes. Rebuild the engine or copy the library again"
            ),
        }
    }
}

/// Checks that `path` is an object file whose segments and sections all lie inside it.
pub fn check(path: &Path) -> Result<(), Damage> {
    let file = File::open(path).map_err(|e| Damage::Unreadable(e.to_string()))?;
    let file_len = file
        .metadata()
        .map_err(|e| Damage::Unreadable(e.to_string()))?
        .len();
    let cache = ReadCache::new(file);
    let inside = |part: String, (offset, size): (u64, u64)| {
        let end = offset.saturating_add(size);
        if end > file_len {
            Err(Damage::Truncated {
                part,
                claimed_end: end,
                file_len,
            })
        } else {
            Ok(())
        }
    };
    // An ELF file's header tables sit at both ends of the file; name a cut through them as
    // such, rather than as "not an object" when the parse below fails on them.
    if let Ok(object::FileKind::Elf64) = object::FileKind::parse(&cache) {
        use object::read::elf::FileHeader;
        if let Ok(header) = object::elf::FileHeader64::<object::Endianness>::parse(&cache)
            && let Ok(endian) = header.endian()
        {
            let table =
                |offset: u64, count: u16, size: u16| (offset, u64::from(count) * u64::from(size));
            inside(
                "program header table".into(),
                table(
                    header.e_phoff(endian),
                    header.e_phnum(endian),
                    header.e_phentsize(endian),
                ),
            )?;
            inside(
                "section header table".into(),
                table(
                    header.e_shoff(endian),
                    header.e_shnum(endian),
                    header.e_shentsize(endian),
                ),
            )?;
        }
    }
    let parsed = object::File::parse(&cache).map_err(|e| Damage::NotAnObject(e.to_string()))?;
    for (i, segment) in parsed.segments().enumerate() {
        inside(format!("segment {i}"), segment.file_range())?;
    }
    for section in parsed.sections() {
        if let Some(range) = section.file_range() {
            let name = section.name().unwrap_or("?");
            inside(format!("section {name}"), range)?;
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#[path = "library_file_tests.rs"]
mod tests;
