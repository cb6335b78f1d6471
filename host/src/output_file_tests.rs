#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;

fn dir_with_input() -> (tempfile::TempDir, PathBuf, Inputs) {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("t.jsonl");
    std::fs::write(&input, b"transcript\n").unwrap();
    let mut inputs = Inputs::new();
    inputs.file("the transcript", &input);
    (dir, input, inputs)
}

#[test]
fn an_input_is_refused_by_any_name_even_with_overwrite() {
    let (dir, input, inputs) = dir_with_input();
    let sub = dir.path().join("sub");
    std::fs::create_dir(&sub).unwrap();
    let dotted = sub.join("..").join("t.jsonl");
    let hard = dir.path().join("hard.jsonl");
    std::fs::hard_link(&input, &hard).unwrap();
    let mut names = vec![input.clone(), dotted, hard];
    #[cfg(unix)]
    {
        let soft = dir.path().join("soft.jsonl");
        std::os::unix::fs::symlink(&input, &soft).unwrap();
        names.push(soft);
    }
    for name in names {
        for overwrite in [false, true] {
            let e = OutputFile::create("--out", &name, &inputs, overwrite).unwrap_err();
            assert!(
                matches!(e, OutputError::SameAsInput { .. }),
                "{name:?}: {e}"
            );
            assert!(e.to_string().contains("the transcript"), "{e}");
            let e = OutputFile::stream("--out", &name, &inputs, overwrite).unwrap_err();
            assert!(
                matches!(e, OutputError::SameAsInput { .. }),
                "{name:?}: {e}"
            );
        }
    }
    assert_eq!(std::fs::read(&input).unwrap(), b"transcript\n");
    // Nothing was left beside it.
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        4 - cfg!(not(unix)) as usize
    );
}

#[test]
fn an_existing_file_needs_overwrite_and_is_replaced_only_on_commit() {
    let (dir, _, inputs) = dir_with_input();
    let out = dir.path().join("notes.txt");
    std::fs::write(&out, b"my notes").unwrap();
    let e = OutputFile::create("--report", &out, &inputs, false).unwrap_err();
    assert!(matches!(e, OutputError::Exists { .. }));
    assert!(e.to_string().contains("--overwrite"), "{e}");
    let e = OutputFile::stream("--events", &out, &inputs, false).unwrap_err();
    assert!(matches!(e, OutputError::Exists { .. }));

    // Abandoned: the old file stays, nothing is left beside it.
    let mut file = OutputFile::create("--report", &out, &inputs, true).unwrap();
    file.write_all(b"half").unwrap();
    drop(file);
    assert_eq!(std::fs::read(&out).unwrap(), b"my notes");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);

    // Streamed over an existing file: still the old content until the commit.
    let mut file = OutputFile::stream("--events", &out, &inputs, true).unwrap();
    file.write_all(b"new\n").unwrap();
    file.flush().unwrap();
    assert_eq!(std::fs::read(&out).unwrap(), b"my notes");
    file.commit().unwrap();
    assert_eq!(std::fs::read(&out).unwrap(), b"new\n");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
}

#[cfg(unix)]
#[test]
fn new_files_are_private_and_replaced_ones_keep_their_mode() {
    use std::os::unix::fs::PermissionsExt;
    let (dir, _, inputs) = dir_with_input();
    let new = dir.path().join("report.html");
    OutputFile::create("--report", &new, &inputs, false)
        .unwrap()
        .write_whole(b"<html>")
        .unwrap();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&new), 0o600);
    let streamed = dir.path().join("events.jsonl");
    let mut file = OutputFile::stream("--events", &streamed, &inputs, false).unwrap();
    file.write_all(b"{}\n").unwrap();
    file.flush().unwrap();
    // Written in place, visible before the commit.
    assert_eq!(std::fs::read(&streamed).unwrap(), b"{}\n");
    file.commit().unwrap();
    assert_eq!(mode(&streamed), 0o600);

    std::fs::set_permissions(&new, std::fs::Permissions::from_mode(0o644)).unwrap();
    OutputFile::create("--report", &new, &inputs, true)
        .unwrap()
        .write_whole(b"<html>2")
        .unwrap();
    assert_eq!(mode(&new), 0o644);
    assert_eq!(std::fs::read(&new).unwrap(), b"<html>2");
}

#[test]
fn a_new_name_taken_meanwhile_is_not_replaced() {
    let (dir, _, inputs) = dir_with_input();
    let out = dir.path().join("table.txt");
    let file = OutputFile::create("--out", &out, &inputs, false).unwrap();
    std::fs::write(&out, b"someone else's").unwrap();
    let e = file.write_whole(b"table").unwrap_err();
    assert!(matches!(e, OutputError::Exists { .. }), "{e}");
    assert_eq!(std::fs::read(&out).unwrap(), b"someone else's");
}

#[test]
fn two_outputs_on_one_file_and_files_of_the_store_are_refused() {
    let (dir, _, mut inputs) = dir_with_input();
    let a = dir.path().join("a.jsonl");
    let b = dir.path().join("sub").join("..").join("a.jsonl");
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let e = inputs
        .check_all(&[("--events", &a), ("--requests-out", &b)], true)
        .unwrap_err();
    assert!(matches!(e, OutputError::SameAsOutput { .. }), "{e}");
    assert!(e.to_string().contains("--events"), "{e}");

    let store = dir.path().join("sessions");
    std::fs::create_dir(&store).unwrap();
    std::fs::write(store.join("sessions.json"), b"{}").unwrap();
    inputs.store(&store);
    let e = inputs
        .check("--events", &store.join("sessions.json"), true)
        .unwrap_err();
    assert!(matches!(e, OutputError::InStore { .. }), "{e}");
    // A new file there is no one's.
    inputs
        .check("--events", &store.join("events.jsonl"), false)
        .unwrap();
    let e = inputs.check("--out", dir.path(), true).unwrap_err();
    assert!(matches!(e, OutputError::IsDirectory { .. }), "{e}");
}

#[test]
fn a_shared_output_commits_once_and_drops_later_writes() {
    let (dir, _, inputs) = dir_with_input();
    let out = dir.path().join("events.jsonl");
    let shared = SharedOutput::new(OutputFile::stream("--events", &out, &inputs, false).unwrap());
    let mut writer = shared.clone();
    writer.write_all(b"one\n").unwrap();
    shared.commit().unwrap();
    writer.write_all(b"two\n").unwrap();
    shared.commit().unwrap();
    assert_eq!(std::fs::read(&out).unwrap(), b"one\n");
}
