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
            text: String::new()
        }
    );
    let e = read(&ws, "notes.md", None, None).unwrap_err();
    assert!(e.to_string().starts_with("path required"), "{e}");
    assert_eq!(e.kind(), crate::error::ErrorKind::PathNotAllowed);
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
