use super::*;

fn workspace() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    fs::create_dir_all(ws.join("memory")).unwrap();
    fs::write(ws.join("memory/notes.md"), "line 1\nline 2\nline 3").unwrap();
    fs::write(ws.join("MEMORY.md"), "root memory").unwrap();
    fs::write(ws.join("notes.md"), "not memory").unwrap();
    fs::write(ws.join("memory/data.txt"), "not markdown").unwrap();
    (dir, ws)
}

fn read(
    ws: &Path,
    path: &str,
    from: Option<usize>,
    lines: Option<usize>,
) -> Result<ReadResult, MemoryError> {
    read_memory_file(ws, &[], path, from, lines)
}

#[test]
fn case_19_a_line_range_a_missing_file_and_a_refused_path() {
    let (_d, ws) = workspace();
    let r = read(&ws, "memory/notes.md", Some(2), Some(1)).unwrap();
    assert_eq!(r.text, "line 2");
    assert_eq!(r.path, "memory/notes.md");
    let r = read(&ws, "memory/2099-01-01.md", None, None).unwrap();
    assert_eq!(
        r,
        ReadResult {
            path: "memory/2099-01-01.md".into(),
            text: String::new(),
            exists: false,
        }
    );
    assert!(read(&ws, "memory/notes.md", None, None).unwrap().exists);
    let e = read(&ws, "notes.md", None, None).unwrap_err();
    assert!(
        e.to_string().starts_with("notes.md is not a memory file"),
        "{e}"
    );
    assert_eq!(e.kind(), crate::error::ErrorKind::PathNotAllowed);
}

/// Each refusal says what is wrong with the path, first (not a generic "path required").
#[test]
fn refusals_say_what_is_wrong() {
    let (dir, ws) = workspace();
    let outside = dir.path().join("outside");
    fs::create_dir_all(&outside).unwrap();
    fs::write(outside.join("secret.md"), "secret").unwrap();
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(outside.join("secret.md"), ws.join("memory/link.md")).unwrap();
        std::os::unix::fs::symlink(&outside, ws.join("memory/linked")).unwrap();
    }
    fs::create_dir_all(ws.join("memory/dir.md")).unwrap();
    let cases: &[(&str, &str)] = &[
        ("", "no path given"),
        (
            "../outside/secret.md",
            "../outside/secret.md is outside the agent workspace",
        ),
        ("/etc/passwd", "/etc/passwd is outside the agent workspace"),
        ("notes.md", "notes.md is not a memory file"),
        ("memory/data.txt", "memory/data.txt is not a markdown file"),
        ("memory/dir.md", "memory/dir.md is not a regular file"),
        #[cfg(unix)]
        ("memory/link.md", "memory/link.md is a symbolic link"),
        #[cfg(unix)]
        (
            "memory/linked/secret.md",
            "memory/linked/secret.md goes through a symbolic link (memory/linked)",
        ),
    ];
    for (path, start) in cases {
        let e = read(&ws, path, None, None).unwrap_err();
        assert_eq!(e.kind(), crate::error::ErrorKind::PathNotAllowed, "{path}");
        let message = e.to_string();
        assert!(message.starts_with(start), "{path}: {message}");
        assert!(!message.contains("path required"), "{message}");
    }
}

/// A missing file behind a linked directory is refused, not read as empty: the link is the
/// problem, whatever is (or is not) behind it.
#[cfg(unix)]
#[test]
fn a_missing_file_behind_a_linked_directory_is_refused() {
    let (dir, ws) = workspace();
    let outside = dir.path().join("outside");
    fs::create_dir_all(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, ws.join("memory/linked")).unwrap();
    let e = read(&ws, "memory/linked/nothing.md", None, None).unwrap_err();
    assert_eq!(e.kind(), crate::error::ErrorKind::PathNotAllowed, "{e}");
}

#[test]
fn whole_files_and_ranges() {
    let (_d, ws) = workspace();
    assert_eq!(
        read(&ws, "MEMORY.md", None, None).unwrap().text,
        "root memory"
    );
    assert_eq!(
        read(&ws, "memory/notes.md", Some(0), Some(0)).unwrap().text,
        "line 1\nline 2\nline 3"
    );
    assert_eq!(
        read(&ws, "memory/notes.md", Some(2), None).unwrap().text,
        "line 2\nline 3"
    );
    assert_eq!(
        read(&ws, "memory/notes.md", None, Some(2)).unwrap().text,
        "line 1\nline 2"
    );
    assert_eq!(
        read(&ws, "memory/notes.md", Some(9), Some(1)).unwrap().text,
        ""
    );
    let abs = ws.join("memory/notes.md");
    assert_eq!(
        read(&ws, abs.to_str().unwrap(), Some(3), None)
            .unwrap()
            .text,
        "line 3"
    );
}

#[test]
fn paths_outside_memory_are_refused() {
    let (_d, ws) = workspace();
    for bad in [
        "",
        "  ",
        "memory/../notes.md",
        "../ws/notes.md",
        "memory/data.txt",
        "memory",
        "/etc/passwd",
        "memory/x.MD",
    ] {
        let e = read(&ws, bad, None, None).unwrap_err();
        assert_eq!(
            e.kind(),
            crate::error::ErrorKind::PathNotAllowed,
            "{bad}: {e}"
        );
    }
}

#[cfg(unix)]
#[test]
fn symlinks_are_refused() {
    let (dir, ws) = workspace();
    let outside = dir.path().join("outside");
    fs::create_dir_all(&outside).unwrap();
    fs::write(outside.join("secret.md"), "secret").unwrap();
    std::os::unix::fs::symlink(outside.join("secret.md"), ws.join("memory/link.md")).unwrap();
    std::os::unix::fs::symlink(&outside, ws.join("memory/linked")).unwrap();
    for bad in ["memory/link.md", "memory/linked/secret.md"] {
        let e = read(&ws, bad, None, None).unwrap_err();
        assert_eq!(
            e.kind(),
            crate::error::ErrorKind::PathNotAllowed,
            "{bad}: {e}"
        );
    }
}

#[test]
fn extra_paths_allow_their_files() {
    let (dir, ws) = workspace();
    let docs = dir.path().join("docs");
    fs::create_dir_all(docs.join("sub")).unwrap();
    fs::write(docs.join("sub/a.md"), "extra a").unwrap();
    fs::write(ws.join("single.md"), "single").unwrap();
    let extras = vec![docs.clone(), PathBuf::from("single.md")];
    let r = read_memory_file(
        &ws,
        &extras,
        docs.join("sub/a.md").to_str().unwrap(),
        None,
        None,
    )
    .unwrap();
    assert_eq!(r.text, "extra a");
    assert_eq!(
        read_memory_file(&ws, &extras, "single.md", None, None)
            .unwrap()
            .text,
        "single"
    );
    assert!(read_memory_file(&ws, &extras, "notes.md", None, None).is_err());
}
