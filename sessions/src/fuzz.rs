//! Fuzz targets for the session loader and the importers: one function per target, each taking
//! arbitrary bytes and **panicking when an invariant breaks** (a panic inside the library is a
//! finding too). The same functions run in two places:
//!
//! - `sessions/tests/fuzz_mutation.rs`, a deterministic mutation fuzzer that CI runs for a
//!   fixed number of iterations on the stable toolchain (`cargo test --workspace`);
//! - `fuzz/` at the repository root, the cargo-fuzz (libFuzzer) targets for deep runs on a
//!   nightly toolchain, outside the workspace.
//!
//! Why a plain public module and not one behind a `fuzzing` feature: CI runs
//! `cargo test --workspace --locked` without feature flags, and the mutation fuzzer (an
//! integration test) must see these functions there; a feature would have to be switched on
//! by a self dev-dependency or left out of CI. The module adds no dependency and no code to
//! any other path; nothing in the crate calls it.
//!
//! The invariants, per target:
//! - [`load_bytes`]: the in-memory loader and the file loader never panic and agree on
//!   whether the bytes are a session; every error names the file (and the line, where it has
//!   one); every corrupt line the report names lies inside the input; contexts build for
//!   every kind of leaf; a loaded session saves, and the saved file loads cleanly to the same
//!   entries; the source file is unchanged (only `<file>.corrupt-*` sidecars may appear); a
//!   [`BranchReader`] reads the file as the load does (same report, same error kind) and
//!   streams the same context messages, leaf, thinking level, model and compaction.
//! - [`import_bytes`]: detection and import agree; every error and every warning names the
//!   input; every item's parent comes before it.
//! - [`open_bytes`]: `import::open` on a file never writes (the source is unchanged and no
//!   file appears next to it); every session it opens saves as a pi v3 file that the loader
//!   and `open` read back whole, or (imports only) the writer refuses a line nested deeper
//!   than the loader reads and writes nothing: an importer wraps a source value in an entry,
//!   so a value at the loader's depth limit comes out one level over it.
//!
//! Scratch files go to a fresh directory under [`std::env::temp_dir`], removed afterwards.
#![warn(missing_docs)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value;

use crate::branch_stream::BranchReader;
use crate::context::{LeafSelector, build_session_context};
use crate::entry::SessionHeader;
use crate::error::SessionError;
use crate::import::{self, ImportError};
use crate::load::{LoadOptions, Loaded, load_file, parse_bytes};
use crate::session::save_session;
use crate::tree::SessionTree;

/// The name [`import_bytes`] gives its input, which every error and warning must carry.
pub const INPUT_NAME: &str = "<fuzz-input>";

/// A fuzz target: takes any bytes, panics when an invariant breaks.
pub type Target = fn(&[u8]);

/// Every target, by name, for harnesses that run them all.
pub const TARGETS: &[(&str, Target)] = &[
    ("load_bytes", load_bytes),
    ("import_bytes", import_bytes),
    ("open_bytes", open_bytes),
];

/// Loads `data` as a session file, in memory and from a file, and checks what came out (see
/// the module docs). Panics on a broken invariant.
pub fn load_bytes(data: &[u8]) {
    let memory_path = Path::new("<memory>");
    let memory = parse_bytes(data, &LoadOptions::default());
    match &memory {
        Ok(loaded) => check_loaded(loaded, memory_path, data.len()),
        Err(e) => check_session_error(e, memory_path),
    }

    let scratch = Scratch::new();
    let source = scratch.write("session.jsonl", data);
    let from_file = load_file(&source, &LoadOptions::default());
    assert_unchanged(&source, data, "load_file");
    for name in scratch.names() {
        assert!(
            name == "session.jsonl" || name.starts_with("session.jsonl.corrupt-"),
            "fuzz invariant: load_file wrote `{name}` next to the session; only corrupt-line \
             sidecars may appear"
        );
    }
    match (&memory, &from_file) {
        (Ok(_), Err(e)) | (Err(e), Ok(_)) => panic!(
            "fuzz invariant: parse_bytes and load_file disagree on whether this is a session: \
             one failed with `{e}`, the other loaded"
        ),
        (Err(a), Err(b)) => assert_eq!(
            a.kind(),
            b.kind(),
            "fuzz invariant: parse_bytes and load_file fail differently: `{a}` / `{b}`"
        ),
        (Ok(_), Ok(_)) => {}
    }
    check_streamed(&source, from_file.as_ref());
    match from_file {
        Ok(loaded) => {
            check_loaded(&loaded, &source, data.len());
            for corrupt in &loaded.report.corrupt_lines {
                if let Some(sidecar) = &corrupt.sidecar {
                    assert!(
                        sidecar.is_file(),
                        "fuzz invariant: corrupt line {} names the sidecar {}, which does not \
                         exist",
                        corrupt.line,
                        sidecar.display()
                    );
                }
            }
            round_trip(
                &scratch,
                "resaved.jsonl",
                &loaded.header,
                &loaded.tree,
                None,
            );
        }
        Err(e) => check_session_error(&e, &source),
    }
}

/// Detects and imports `data` with every importer (through [`import::import_bytes`]) and
/// checks the result (see the module docs). Panics on a broken invariant.
pub fn import_bytes(data: &[u8]) {
    let detected = import::detect_named(data, INPUT_NAME);
    let imported = import::import_bytes(data, INPUT_NAME);
    match (&detected, &imported) {
        (Ok(format), Err(ImportError::NativePiSession { version, .. })) => assert_eq!(
            format.pi_version(),
            Some(*version),
            "fuzz invariant: detected as {format}, imported as a pi v{version} file"
        ),
        (Ok(format), Err(e)) => {
            panic!("fuzz invariant: detected as {format}, but the import failed: {e}")
        }
        (Err(e), Ok(_)) => {
            panic!("fuzz invariant: detection failed with `{e}`, but the import succeeded")
        }
        (Ok(format), Ok(sessions)) => {
            assert!(
                format.pi_version().is_none(),
                "fuzz invariant: pi v{:?} content was imported instead of refused",
                format.pi_version()
            );
            for session in sessions {
                assert_eq!(
                    session.format, *format,
                    "fuzz invariant: detected as {format}, imported as {}",
                    session.format
                );
            }
        }
        (Err(_), Err(_)) => {}
    }
    if let Err(e) = &detected {
        check_import_error(e, INPUT_NAME);
    }
    match imported {
        Err(e) => check_import_error(&e, INPUT_NAME),
        Ok(sessions) => {
            for session in &sessions {
                for (index, item) in session.items.iter().enumerate() {
                    if let Some(parent) = item.parent {
                        assert!(
                            parent < index,
                            "fuzz invariant: item {index} has parent {parent}, not before it"
                        );
                    }
                }
                for warning in &session.warnings {
                    assert!(
                        warning.starts_with(INPUT_NAME),
                        "fuzz invariant: a warning does not name the input: {warning}"
                    );
                }
            }
        }
    }
}

/// Writes `data` to a file and opens it with [`import::open`] (the path `rampart sessions
/// import` and `rampart replay` take), then saves and reloads each session (see the module
/// docs). Panics on a broken invariant.
pub fn open_bytes(data: &[u8]) {
    let scratch = Scratch::new();
    let source = scratch.write("transcript.jsonl", data);
    let opened = import::open(&source);
    assert_unchanged(&source, data, "import::open");
    let names = scratch.names();
    assert!(
        names.len() == 1,
        "fuzz invariant: import::open wrote next to its source (it must only read): {names:?}"
    );
    let sessions = match opened {
        Err(e) => {
            let text = e.to_string();
            assert!(
                text.contains(&source.display().to_string()),
                "fuzz invariant: an open error does not name the file: {text}"
            );
            return;
        }
        Ok(sessions) => sessions,
    };
    // The same bytes through the importers alone give as many sessions (pi files go through
    // the loader instead, which `load_bytes` covers).
    if let Ok(format) = import::detect(data)
        && format.pi_version().is_none()
    {
        match import::import_bytes(data, INPUT_NAME) {
            Ok(imported) => assert_eq!(
                imported.len(),
                sessions.len(),
                "fuzz invariant: import::open and import_bytes found different session counts"
            ),
            Err(e) => panic!("fuzz invariant: import::open succeeded, import_bytes failed: {e}"),
        }
    }
    for (index, session) in sessions.iter().enumerate() {
        // An importer wraps a source value in an entry, so a source value nested as deep as
        // the loader reads becomes a line nested deeper. The writer refuses such a line
        // instead of writing what the loader would lose; that refusal, and only it, is
        // accepted for imported formats (a pi file's entries were read, so they fit).
        let refusal = session.format.pi_version().is_none().then_some(TOO_DEEP);
        let Some(saved) = round_trip(
            &scratch,
            &format!("opened-{index}.jsonl"),
            &session.header,
            &session.tree,
            refusal,
        ) else {
            continue;
        };
        // The saved file is a pi v3 session, and `open` reads it back whole.
        match import::open(&saved) {
            Ok(again) => {
                assert_eq!(
                    again.len(),
                    1,
                    "fuzz invariant: a saved import reopens as several"
                );
                assert_eq!(
                    again[0].format,
                    import::SourceFormat::PiV3,
                    "fuzz invariant: a saved import is not read back as pi v3"
                );
                assert_eq!(
                    again[0].tree.len(),
                    session.tree.len(),
                    "fuzz invariant: a saved import reopens with another entry count"
                );
            }
            Err(e) => panic!("fuzz invariant: a saved import cannot be reopened: {e}"),
        }
    }
}

/// Checks a successful load of `len` bytes from `path`.
fn check_loaded(loaded: &Loaded, path: &Path, len: usize) {
    let report = &loaded.report;
    let tree = &loaded.tree;
    let len = len as u64;
    assert_eq!(
        report.path, path,
        "fuzz invariant: the report names another file"
    );
    assert!(
        report.bytes <= len,
        "fuzz invariant: the report accounts for {} bytes of {len}",
        report.bytes
    );
    assert_eq!(
        report.entries,
        tree.len(),
        "fuzz invariant: the report counts other entries than the tree holds"
    );
    for corrupt in &report.corrupt_lines {
        assert!(
            corrupt.line >= 1 && corrupt.line <= report.lines.max(1),
            "fuzz invariant: corrupt line {} is outside the {} lines read",
            corrupt.line,
            report.lines
        );
        assert!(
            corrupt.offset.saturating_add(corrupt.length) <= len,
            "fuzz invariant: corrupt line {} ({} bytes at {}) ends past the input",
            corrupt.line,
            corrupt.length,
            corrupt.offset
        );
        assert!(
            !corrupt.reason.is_empty(),
            "fuzz invariant: corrupt line {} has no reason",
            corrupt.line
        );
    }
    for duplicate in &report.duplicate_ids {
        assert!(
            tree.contains_id(&duplicate.id),
            "fuzz invariant: duplicate id {} is not in the tree",
            duplicate.id
        );
    }
    for bridge in &report.bridged {
        assert!(
            tree.contains_id(&bridge.entry_id) && tree.contains_id(&bridge.now_under),
            "fuzz invariant: bridge {bridge:?} names an entry the tree does not hold"
        );
    }
    if let Some(tail) = &report.pending_tail {
        assert!(
            tail.offset.saturating_add(tail.length) <= len,
            "fuzz invariant: the pending tail {tail:?} ends past the input"
        );
    }
    assert_eq!(
        tree.leaf_index(),
        tree.len().checked_sub(1),
        "fuzz invariant: after a load the leaf is not the last entry"
    );
    check_tree(tree);
    if let Err(e) = loaded.header.to_json_line() {
        panic!("fuzz invariant: a loaded header cannot be written: {e}");
    }
}

/// Reads `source` with a [`BranchReader`] and checks it agrees with the load of it (`loaded`):
/// the same error kind, or the same report and, for the last entry and a sample of others as
/// leaf, the same messages, leaf, thinking level, model and compaction as
/// [`build_session_context`] gives.
fn check_streamed(source: &Path, loaded: std::result::Result<&Loaded, &SessionError>) {
    // No sidecar (`load_file` wrote them already) and none named: compare the rest.
    let options = LoadOptions {
        record_corrupt_lines: false,
        ..LoadOptions::default()
    };
    let reader = BranchReader::open(source, &options);
    let (loaded, reader) = match (loaded, reader) {
        (Err(a), Err(b)) => {
            assert_eq!(
                a.kind(),
                b.kind(),
                "fuzz invariant: load_file and BranchReader fail differently: `{a}` / `{b}`"
            );
            return;
        }
        (Ok(_), Err(e)) => {
            panic!("fuzz invariant: BranchReader fails (`{e}`) on a file load_file loads")
        }
        (Err(e), Ok(_)) => {
            panic!("fuzz invariant: BranchReader reads a file load_file refuses (`{e}`)")
        }
        (Ok(loaded), Ok(None)) => {
            assert!(
                loaded.report.migration.is_some(),
                "fuzz invariant: BranchReader refused a v3 file"
            );
            return;
        }
        (Ok(loaded), Ok(Some(reader))) => (loaded, reader),
    };
    let mut expected = loaded.report.clone();
    expected.sidecar_error = None;
    for corrupt in &mut expected.corrupt_lines {
        corrupt.sidecar = None;
    }
    assert_eq!(
        reader.report(),
        &expected,
        "fuzz invariant: BranchReader reports the file unlike load_file"
    );
    let tree = &loaded.tree;
    let n = tree.len();
    let sample: Vec<usize> = (0..n)
        .step_by((n / 8).max(1))
        .chain(n.checked_sub(1))
        .collect();
    let ids: Vec<&str> = sample
        .iter()
        .map(|&i| tree.entries()[i].id.as_str())
        .collect();
    let leaves = [
        LeafSelector::Current,
        LeafSelector::Null,
        LeafSelector::Id("no-such"),
    ]
    .into_iter()
    .chain(ids.iter().map(|id| LeafSelector::Id(id)));
    for (asked, leaf) in leaves.enumerate() {
        // The tree memoises per-entry figures (model, thinking level, last compaction); on a
        // branch through a parent cycle, which only a damaged file holds, they depend on which
        // entry was asked first. The first question (a fresh tree, as `sessions show` asks it)
        // must agree; later ones only off cycles.
        if asked > 0 && on_a_cycle(tree, leaf) {
            continue;
        }
        let context = build_session_context(tree, leaf);
        let branch = match reader.branch(leaf) {
            Ok(branch) => branch,
            Err(e) => {
                panic!("fuzz invariant: BranchReader cannot read the branch at {leaf:?}: {e}")
            }
        };
        let streamed: Vec<_> = branch
            .messages()
            .map(|m| match m {
                Ok(m) => m,
                Err(e) => panic!("fuzz invariant: BranchReader cannot read a message: {e}"),
            })
            .collect();
        let what = |field: &str| {
            format!(
                "fuzz invariant: BranchReader's branch at {leaf:?} has another {field} than the loaded context"
            )
        };
        assert_eq!(
            branch.leaf_id(),
            context.leaf_id.as_deref(),
            "{}",
            what("leaf")
        );
        assert_eq!(
            branch.thinking_level(),
            context.thinking_level,
            "{}",
            what("thinking level")
        );
        assert_eq!(branch.model(), context.model.as_ref(), "{}", what("model"));
        assert_eq!(
            branch.compaction_id(),
            context.compaction_id.as_deref(),
            "{}",
            what("compaction")
        );
        assert_eq!(
            branch.len(),
            streamed.len(),
            "{}",
            what("count of messages read")
        );
        assert_eq!(
            streamed.len(),
            context.messages.len(),
            "{}",
            what("count of messages")
        );
        for (i, (a, b)) in streamed.iter().zip(&context.messages).enumerate() {
            assert_eq!(a, b, "{}", what(&format!("message {i}")));
        }
    }
}

/// Whether the walk from `leaf` to the root meets an entry twice.
fn on_a_cycle(tree: &SessionTree, leaf: LeafSelector<'_>) -> bool {
    let start = match leaf {
        LeafSelector::Id(id) => tree.index_of(id).or(tree.len().checked_sub(1)),
        LeafSelector::Null => None,
        _ => tree.leaf_index(),
    };
    let mut seen = BTreeSet::new();
    let mut current = start;
    while let Some(at) = current {
        if !seen.insert(at) {
            return true;
        }
        current = tree.parent_index(at);
    }
    false
}

/// Walks, branches and builds contexts over `tree`.
fn check_tree(tree: &SessionTree) {
    let n = tree.len();
    // Every entry of a small tree, the first and last 32 of a big one: walks are O(depth).
    let sample: Vec<usize> = if n <= 96 {
        (0..n).collect()
    } else {
        (0..32).chain(n / 2..n / 2 + 1).chain(n - 32..n).collect()
    };
    for &index in &sample {
        if let Some(parent) = tree.parent_index(index) {
            assert!(
                parent < n,
                "fuzz invariant: entry {index} has parent {parent} of {n}"
            );
        }
        let path = tree.path_to(index);
        assert!(
            path.last() == Some(&index) && path.len() <= n,
            "fuzz invariant: the path to entry {index} is {path:?}"
        );
        let entry = &tree.entries()[index];
        let context = build_session_context(tree, LeafSelector::Id(&entry.id));
        check_context(tree, &context);
        if let Err(e) = entry.to_json_line() {
            panic!(
                "fuzz invariant: loaded entry {} cannot be written: {e}",
                entry.id
            );
        }
        let _ = tree.children(&entry.id);
    }
    for selector in [
        LeafSelector::Current,
        LeafSelector::Last,
        LeafSelector::Id("no-such-entry"),
    ] {
        check_context(tree, &build_session_context(tree, selector));
    }
    let none = build_session_context(tree, LeafSelector::Null);
    assert!(
        none.messages.is_empty(),
        "fuzz invariant: the null leaf has messages"
    );
    let _ = tree.active_branch();
    let mut branched = tree.clone();
    if let Some(first) = tree.entries().first() {
        assert!(
            branched.branch(&first.id),
            "fuzz invariant: cannot branch at an entry"
        );
        check_context(
            tree,
            &build_session_context(&branched, LeafSelector::Current),
        );
    }
    branched.reset_leaf();
    assert!(
        build_session_context(&branched, LeafSelector::Current)
            .messages
            .is_empty(),
        "fuzz invariant: a reset leaf has messages"
    );
}

fn check_context(tree: &SessionTree, context: &crate::context::SessionContext) {
    assert_eq!(
        context.messages.len(),
        context.entry_indices.len(),
        "fuzz invariant: a context's messages and entry indices differ in length"
    );
    for &index in &context.entry_indices {
        assert!(
            index < tree.len(),
            "fuzz invariant: a context names entry {index} of {}",
            tree.len()
        );
    }
    let _ = context.message_list();
}

/// What the writer says when it refuses a line nested deeper than the loader reads.
const TOO_DEEP: &str = "levels the loader reads";

/// Saves `header` and `tree` as `name` in `scratch`, loads the file again and checks that the
/// same entries came back, cleanly. Returns the saved file; `None` when the save was refused
/// with an error containing `accepted_refusal` (and wrote nothing).
fn round_trip(
    scratch: &Scratch,
    name: &str,
    header: &SessionHeader,
    tree: &SessionTree,
    accepted_refusal: Option<&str>,
) -> Option<PathBuf> {
    let target = scratch.path(name);
    if let Err(e) = save_session(&target, header, tree) {
        let text = e.to_string();
        match accepted_refusal {
            Some(accepted) if text.contains(accepted) => {
                assert!(
                    !target.exists(),
                    "fuzz invariant: a refused save left {}",
                    target.display()
                );
                return None;
            }
            _ => panic!("fuzz invariant: a loaded session cannot be saved: {text}"),
        }
    }
    let options = LoadOptions {
        record_corrupt_lines: false,
        ..LoadOptions::default()
    };
    let again = match load_file(&target, &options) {
        Ok(again) => again,
        Err(e) => panic!("fuzz invariant: a saved session does not load: {e}"),
    };
    let report = &again.report;
    assert!(
        report.corrupt_lines.is_empty() && report.pending_tail.is_none(),
        "fuzz invariant: a saved session reloads with corrupt lines: {:?}",
        report.corrupt_lines
    );
    assert_eq!(
        again.tree.len(),
        tree.len(),
        "fuzz invariant: a saved session reloads with another entry count"
    );
    for (before, after) in tree.entries().iter().zip(again.tree.entries()) {
        let (a, b) = (to_value(before), to_value(after));
        assert!(
            a == b,
            "fuzz invariant: entry {} changed in a save and reload:\n{a}\n{b}",
            before.id
        );
    }
    let (a, b) = (header_value(header), header_value(&again.header));
    // A v1/v2 header is upgraded in memory; its saved form declares v3.
    assert!(
        a == b || header.format_version() < crate::entry::CURRENT_VERSION,
        "fuzz invariant: the header changed in a save and reload:\n{a}\n{b}"
    );
    Some(target)
}

fn to_value(entry: &crate::entry::Entry) -> Value {
    match serde_json::to_value(entry) {
        Ok(value) => value,
        Err(e) => panic!("fuzz invariant: entry {} cannot be written: {e}", entry.id),
    }
}

fn header_value(header: &SessionHeader) -> Value {
    match serde_json::to_value(header) {
        Ok(value) => value,
        Err(e) => panic!("fuzz invariant: a header cannot be written: {e}"),
    }
}

/// Every session error names its file, and the line where the variant has one.
fn check_session_error(error: &SessionError, path: &Path) {
    let text = error.to_string();
    let file = path.display().to_string();
    assert_eq!(
        error.path(),
        path,
        "fuzz invariant: the error is about another file: {text}"
    );
    assert!(
        text.contains(&file),
        "fuzz invariant: the error does not name the file: {text}"
    );
    let line = match error {
        SessionError::NotASession { line, .. } => Some(*line),
        SessionError::UnsupportedVersion { .. } => Some(1),
        _ => None,
    };
    if let Some(line) = line {
        assert!(
            text.contains(&format!("{file}:{line}")),
            "fuzz invariant: the error does not name the line: {text}"
        );
    }
}

/// Every import error names its input, and the line where the variant has one.
fn check_import_error(error: &ImportError, name: &str) {
    let text = error.to_string();
    assert!(
        text.contains(name),
        "fuzz invariant: the import error does not name the input: {text}"
    );
    if let ImportError::InvalidJson { line, column, .. } = error {
        assert!(
            text.contains(&format!("{name}:{line}:{column}")),
            "fuzz invariant: the import error does not name the line: {text}"
        );
    }
}

fn assert_unchanged(path: &Path, data: &[u8], what: &str) {
    match std::fs::read(path) {
        Ok(now) => assert!(
            now == data,
            "fuzz invariant: {what} changed its source file ({} bytes before, {} after)",
            data.len(),
            now.len()
        ),
        Err(e) => panic!("fuzz invariant: {what} removed or hid its source file: {e}"),
    }
}

/// A fresh directory for one target run, removed when dropped.
struct Scratch {
    dir: PathBuf,
}

impl Scratch {
    fn new() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let base = std::env::temp_dir();
        for _ in 0..100 {
            let dir = base.join(format!(
                "rampart-fuzz-{}-{}",
                std::process::id(),
                NEXT.fetch_add(1, Ordering::Relaxed)
            ));
            match std::fs::create_dir(&dir) {
                Ok(()) => return Self { dir },
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => panic!("fuzz setup: cannot create {}: {e}", dir.display()),
            }
        }
        panic!(
            "fuzz setup: no free scratch directory name under {}",
            base.display()
        );
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn write(&self, name: &str, data: &[u8]) -> PathBuf {
        let path = self.path(name);
        if let Err(e) = std::fs::write(&path, data) {
            panic!("fuzz setup: cannot write {}: {e}", path.display());
        }
        path
    }

    /// The names of the files in the directory.
    fn names(&self) -> BTreeSet<String> {
        match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries
                .filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect(),
            Err(e) => panic!("fuzz setup: cannot list {}: {e}", self.dir.display()),
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
