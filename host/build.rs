//! Names the commit the binary was built from, for `rampart --version`
//! (`rampart 0.1.0 (1a2b3c4d)`, `-dirty` when the work tree differed from it).
//!
//! Why: a bug report that says "0.1.0" does not say which build; the commit does. Outside a
//! git checkout (a source package, `cargo install` from a registry) the commit is `unknown`.
//! The script is re-run when HEAD, the branch it points to or the index move; an edit to a
//! tracked file alone shows as `-dirty` only from the next of those (or `cargo clean`).

use std::path::Path;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    String::from_utf8(out.stdout)
        .ok()
        .map(|s| s.trim().to_owned())
}

fn main() {
    let commit = match git(&["rev-parse", "--short=8", "HEAD"]) {
        Some(hash) if !hash.is_empty() => {
            // Tracked files only: build products and scratch files are not a change to the source.
            // No optional locks: status must not rewrite the index this script watches.
            let dirty = git(&[
                "--no-optional-locks",
                "status",
                "--porcelain",
                "--untracked-files=no",
            ])
            .is_some_and(|s| !s.is_empty());
            for path in ["HEAD", "index", "packed-refs"] {
                watch(git(&["rev-parse", "--git-path", path]));
            }
            if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
                watch(git(&["rev-parse", "--git-path", &branch]));
            }
            if dirty { format!("{hash}-dirty") } else { hash }
        }
        _ => "unknown".to_owned(),
    };
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rustc-env=RAMPART_COMMIT={commit}");
}

/// Re-runs the script when `path` (relative to this crate, as git prints it) changes.
fn watch(path: Option<String>) {
    if let Some(path) = path {
        let path = Path::new(&path);
        if path.exists() {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
}
