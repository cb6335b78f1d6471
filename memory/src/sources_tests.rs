use super::*;

fn write(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

#[test]
fn lists_memory_files_extra_paths_and_skips_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    write(&ws.join("MEMORY.md"), "root");
    write(&ws.join("memory/a.md"), "a");
    write(&ws.join("memory/sub/b.md"), "b");
    write(&ws.join("memory/notes.txt"), "not markdown");
    write(&ws.join("memory/node_modules/x.md"), "ignored");
    write(&ws.join("memory/.git/y.md"), "ignored");
    write(&ws.join("memory/__pycache__/z.md"), "ignored");
    write(&ws.join("other.md"), "not a memory file");
    write(&ws.join("docs/c.md"), "extra dir");
    write(&dir.path().join("outside/d.md"), "extra file outside");
    write(&ws.join("e.txt"), "extra file, not markdown");
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(ws.join("other.md"), ws.join("memory/link.md")).unwrap();
        std::os::unix::fs::symlink(ws.join("docs"), ws.join("memory/linked-dir")).unwrap();
    }
    let extras = vec![
        PathBuf::from("docs"),
        dir.path().join("outside/d.md"),
        PathBuf::from("e.txt"),
        PathBuf::from("memory"), // already listed: no duplicates
        PathBuf::from("missing"),
    ];
    let (files, problems) = list_memory_files(&ws, &extras);
    assert!(problems.is_empty(), "{problems:?}");
    let names: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
    let outside = dir
        .path()
        .join("outside/d.md")
        .to_string_lossy()
        .replace('\\', "/");
    assert_eq!(
        names,
        vec![
            "MEMORY.md",
            "memory/a.md",
            "memory/sub/b.md",
            "docs/c.md",
            outside.as_str()
        ]
    );
    assert!(files.iter().all(|f| f.source == Source::Memory));
}

#[test]
fn the_same_file_under_two_names_is_listed_once() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    write(&ws.join("memory/a.md"), "a");
    let (files, _) = list_memory_files(
        ws,
        &[PathBuf::from("memory/a.md"), PathBuf::from("./memory")],
    );
    assert_eq!(files.len(), 1);
}

#[test]
fn lists_session_transcripts() {
    let dir = tempfile::tempdir().unwrap();
    write(&dir.path().join("b.jsonl"), "{}");
    write(&dir.path().join("a.jsonl"), "{}");
    write(&dir.path().join("sessions.json"), "{}");
    let (files, problems) = list_session_files(dir.path());
    assert!(problems.is_empty());
    let names: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(names, vec!["sessions/a.jsonl", "sessions/b.jsonl"]);
    assert!(files.iter().all(|f| f.source == Source::Sessions));
    let (none, _) = list_session_files(&dir.path().join("absent"));
    assert!(none.is_empty());
}

#[test]
fn memory_paths_and_lexical_resolution() {
    for ok in [
        "MEMORY.md",
        "memory.md",
        "DREAMS.md",
        "memory/x.md",
        "memory/a/b.md",
    ] {
        assert!(is_memory_path(ok), "{ok}");
    }
    for bad in ["notes.md", "memory/", "memoryx.md", "MEMORY.txt"] {
        assert!(!is_memory_path(bad), "{bad}");
    }
    let base = Path::new("/ws");
    assert_eq!(
        resolve_lexically(base, Path::new("memory/../x.md")),
        PathBuf::from("/ws/x.md")
    );
    assert_eq!(
        resolve_lexically(base, Path::new("/abs/./y.md")),
        PathBuf::from("/abs/y.md")
    );
    assert_eq!(
        index_name(base, Path::new("/ws/memory/a.md")),
        "memory/a.md"
    );
    assert_eq!(
        index_name(base, Path::new("/elsewhere/a.md")),
        "/elsewhere/a.md"
    );
}
