//! The architecture's rules that a compiler does not check (ARCHITECTURE.md): no two source
//! files of a crate import from each other.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module path of a source file under `src`: `compaction/run.rs` is `compaction::run`,
/// `hygiene/mod.rs` is `hygiene`, `lib.rs` is the crate root.
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts
}

/// The code of `text` without comments and without its test module (which may use anything).
fn code(text: &str) -> String {
    let mut out = Vec::new();
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i].trim_start();
        if line == "#[cfg(test)]" {
            let next = lines[i + 1..lines.len().min(i + 4)].join("\n");
            if next.contains("mod tests") {
                break;
            }
            // A test-only item of one line (`mod test_support;`).
            i += 2;
            continue;
        }
        if !line.starts_with("//") {
            out.push(lines[i]);
        }
        i += 1;
    }
    out.join("\n")
}

/// The `crate::…` and `super::…` paths `code` names, brace groups expanded, relative to `me`.
fn paths(code: &str, me: &[String]) -> Vec<Vec<String>> {
    // `super` of `a/b.rs` (`a::b`) and of `a/b/mod.rs` (also `a::b`) is `a` either way.
    let parent: Vec<String> = me[..me.len().saturating_sub(1)].to_vec();
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    for (start, root) in code
        .match_indices("crate::")
        .map(|(i, _)| (i, "crate"))
        .chain(code.match_indices("super::").map(|(i, _)| (i, "super")))
    {
        if start > 0 && (bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_') {
            continue;
        }
        let rest = &code[start + root.len() + 2..];
        let end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':' || c == '{'))
            .unwrap_or(rest.len());
        let mut base: Vec<String> = if root == "super" {
            parent.clone()
        } else {
            Vec::new()
        };
        let text = &rest[..end];
        let (head, group) = match text.find('{') {
            Some(b) => (
                &text[..b],
                Some(&rest[b + 1..rest[b..].find('}').map_or(rest.len(), |e| b + e)]),
            ),
            None => (text, None),
        };
        base.extend(
            head.split("::")
                .filter(|p| !p.is_empty())
                .map(str::to_string),
        );
        match group {
            None => out.push(base),
            Some(items) => {
                for item in items.split(',') {
                    let item = item.split(" as ").next().unwrap_or("").trim();
                    let mut p = base.clone();
                    p.extend(
                        item.split("::")
                            .filter(|s| !s.is_empty() && *s != "self")
                            .map(str::to_string),
                    );
                    out.push(p);
                }
            }
        }
    }
    out
}

fn import_loops(crate_dir: &str) -> Vec<String> {
    let src = workspace().join(crate_dir).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let modules: BTreeMap<Vec<String>, PathBuf> = files
        .iter()
        .filter(|f| {
            let name = f.file_name().unwrap().to_string_lossy();
            !name.ends_with("_tests.rs") && name != "test_support.rs"
        })
        .map(|f| (module_of(&src, f), f.clone()))
        .collect();
    let mut uses: BTreeMap<&PathBuf, BTreeSet<&PathBuf>> = BTreeMap::new();
    for (me, file) in &modules {
        let text = code(&fs::read_to_string(file).unwrap());
        for path in paths(&text, me) {
            // The longest prefix that names a file is the file the path reaches into.
            for k in (1..=path.len()).rev() {
                if let Some(target) = modules.get(&path[..k])
                    && target != file
                {
                    uses.entry(file).or_default().insert(target);
                    break;
                }
            }
        }
    }
    let mut loops = Vec::new();
    for (a, targets) in &uses {
        for b in targets {
            if a < b && uses.get(b).is_some_and(|t| t.contains(a)) {
                loops.push(format!(
                    "{} <-> {}",
                    a.strip_prefix(&src).unwrap().display(),
                    b.strip_prefix(&src).unwrap().display()
                ));
            }
        }
    }
    loops
}

/// Dependencies between files go one way: two files that import from each other are one
/// concept split in two, or two concepts tangled. Move what both need to where it belongs.
#[test]
fn no_two_files_import_from_each_other() {
    for krate in [
        "message",
        "engine-api",
        "context",
        "engine-test",
        "sessions",
        "stores/postgres",
        "providers",
        "host",
    ] {
        let loops = import_loops(krate);
        assert!(loops.is_empty(), "{krate}: import loops: {loops:#?}");
    }
}

/// The checker sees a loop when there is one (so the test above cannot pass by seeing nothing).
#[test]
fn the_loop_checker_finds_a_loop() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("fake/src");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("lib.rs"), "mod a;\nmod b;\n").unwrap();
    fs::write(src.join("a.rs"), "use crate::b::B;\npub struct A;\n").unwrap();
    fs::write(src.join("b.rs"), "use super::a::A;\npub struct B;\n").unwrap();
    // An absolute path replaces the workspace root in `import_loops`.
    let loops = import_loops(dir.path().join("fake").to_str().unwrap());
    assert_eq!(loops, ["a.rs <-> b.rs"]);
}
