//! Bad input never panics and never silently loses data: torn and malformed lines are copied
//! to a sidecar (the session file is left as it was), whole-file problems are clear errors.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use rampart_message::AgentMessage;
use rampart_sessions::{
    ErrorKind, LoadOptions, Session, SessionError, SessionOptions, load_file, parse_bytes,
};

const HEADER: &str = r#"{"type":"session","version":3,"id":"6f1c0a8e-6a41-4d8e-9d3e-0c4b8f0e2a11","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}"#;

fn message_line(id: &str, parent: Option<&str>, text: &str) -> String {
    let parent = parent.map_or("null".to_owned(), |p| format!("\"{p}\""));
    format!(
        r#"{{"type":"message","id":"{id}","parentId":{parent},"timestamp":"2026-01-01T00:00:01.000Z","message":{{"role":"user","content":[{{"type":"text","text":"{text}"}}],"timestamp":1}}}}"#
    )
}

fn sidecars(dir: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains(".corrupt-"))
        .collect();
    found.sort();
    found
}

#[test]
fn torn_last_line_is_quarantined_and_the_next_append_starts_a_new_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("torn.jsonl");
    let full = message_line("bbbbbbbb", Some("aaaaaaaa"), "two");
    let torn = &full[..full.len() / 2];
    let content = format!(
        "{HEADER}\n{}\n{torn}",
        message_line("aaaaaaaa", None, "one")
    );
    fs::write(&path, &content).unwrap();

    // A plain load cannot know whether someone is still writing that line.
    let plain = load_file(&path, &LoadOptions::default()).unwrap();
    assert!(plain.report.pending_tail.is_some());
    assert!(plain.report.corrupt_lines.is_empty());
    assert!(sidecars(dir.path()).is_empty());

    // Opening for writing looks again under the lock: now it is torn.
    let mut session = Session::open(&path, SessionOptions::default()).unwrap();
    let corrupt = &session.report().corrupt_lines;
    assert_eq!(corrupt.len(), 1);
    assert_eq!(corrupt[0].line, 3);
    assert!(
        corrupt[0].reason.contains("incomplete"),
        "{}",
        corrupt[0].reason
    );
    let sidecar = corrupt[0].sidecar.clone().unwrap();
    let recorded = fs::read_to_string(&sidecar).unwrap();
    assert!(
        recorded.contains(&path.display().to_string()),
        "names the session file"
    );
    assert!(recorded.contains("record line=3 "), "names the line");
    assert!(recorded.contains(torn), "keeps the bytes verbatim");
    assert_eq!(
        fs::read_to_string(&path).unwrap(),
        content,
        "the session file is untouched"
    );

    let id = session
        .append_message(AgentMessage::user_text("three", 3))
        .unwrap();
    assert_eq!(
        session.tree().get(&id).unwrap().parent_id.as_deref(),
        Some("aaaaaaaa"),
        "the new entry continues from the last good entry"
    );
    drop(session);

    let text = fs::read_to_string(&path).unwrap();
    assert!(text.starts_with(&content), "appends only add bytes");
    assert!(
        text[content.len()..].starts_with('\n'),
        "the torn line was ended first"
    );
    let reloaded = load_file(&path, &LoadOptions::default()).unwrap();
    assert_eq!(reloaded.tree.len(), 2);
    assert_eq!(reloaded.tree.leaf_id(), Some(id.as_str()));
    assert_eq!(reloaded.report.corrupt_lines.len(), 1);
    assert_eq!(reloaded.report.corrupt_lines[0].line, 3);
    // Recognised as already recorded: no second sidecar.
    assert_eq!(sidecars(dir.path()), vec![sidecar]);
}

#[test]
fn malformed_lines_anywhere_do_not_stop_the_load() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.jsonl");
    let mut bytes = Vec::new();
    writeln!(bytes, "{HEADER}").unwrap();
    writeln!(bytes, "{}", message_line("aaaaaaaa", None, "one")).unwrap();
    bytes.extend_from_slice(b"{\"type\":\"message\",\"id\":\"\xff\xfe\"}\n"); // invalid UTF-8
    bytes.extend_from_slice(b"not json at all\n");
    bytes.extend_from_slice(b"\x00\x01\x02binary\n");
    writeln!(
        bytes,
        "{}",
        message_line("bbbbbbbb", Some("aaaaaaaa"), "two")
    )
    .unwrap();
    fs::write(&path, &bytes).unwrap();

    let loaded = load_file(&path, &LoadOptions::default()).unwrap();
    assert_eq!(loaded.tree.len(), 2);
    assert_eq!(loaded.tree.leaf_id(), Some("bbbbbbbb"));
    let lines: Vec<u64> = loaded.report.corrupt_lines.iter().map(|c| c.line).collect();
    assert_eq!(lines, [3, 4, 5]);
    assert!(loaded.report.corrupt_lines[0].reason.contains("UTF-8"));
    let sidecar = loaded.report.corrupt_lines[0].sidecar.clone().unwrap();
    let recorded = fs::read(&sidecar).unwrap();
    assert!(recorded.windows(9).any(|w| w == b"\x00\x01\x02binary"));
    assert_eq!(
        fs::read(&path).unwrap(),
        bytes,
        "the session file is untouched"
    );
}

#[cfg(unix)]
#[test]
fn a_read_only_directory_still_loads_and_reports_the_sidecar_problem() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ro.jsonl");
    fs::write(&path, format!("{HEADER}\n{{broken\n")).unwrap();
    let set_mode = |mode| {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(mode)).unwrap();
    };
    set_mode(0o555);
    let loaded = load_file(&path, &LoadOptions::default());
    set_mode(0o755);
    let loaded = loaded.unwrap();
    assert_eq!(loaded.report.corrupt_lines.len(), 1);
    // Root may write anyway; otherwise the failure is reported, not fatal.
    if loaded.report.corrupt_lines[0].sidecar.is_none() {
        assert!(loaded.report.sidecar_error.is_some());
    }
}

#[test]
fn empty_file_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("empty.jsonl");
    fs::write(&path, b"").unwrap();
    let error = load_file(&path, &LoadOptions::default()).unwrap_err();
    assert!(matches!(error, SessionError::EmptyFile { .. }));
    assert_eq!(error.kind(), ErrorKind::NotASession);
    assert!(error.to_string().contains("empty.jsonl"));
    let error = Session::open(&path, SessionOptions::default()).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::NotASession);
}

#[test]
fn binary_file_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("image.png");
    let mut bytes = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR".to_vec();
    bytes.extend((0..4096u32).map(|i| (i * 7919 % 251) as u8));
    fs::write(&path, &bytes).unwrap();
    let error = load_file(&path, &LoadOptions::default()).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::NotASession);
    let text = error.to_string();
    assert!(text.contains("image.png:1"), "{text}");
    assert!(
        text.contains("not UTF-8") || text.contains("binary"),
        "{text}"
    );
}

#[test]
fn invalid_utf8_header_is_a_clear_error() {
    let error =
        parse_bytes(b"{\"type\":\"session\xc3\x28\"}\n", &LoadOptions::default()).unwrap_err();
    assert!(error.to_string().contains("not UTF-8"), "{error}");
}

/// 100 MB on one line: without a header it is refused at once; after a header it is skipped
/// (copied to the sidecar by range) and the rest loads. Memory stays bounded either way
/// because the line is never buffered whole.
#[test]
fn a_100_mb_single_line() {
    let dir = tempfile::tempdir().unwrap();
    let hundred_mb = 100 << 20;

    let alone = dir.path().join("one-line.jsonl");
    {
        let mut out = std::io::BufWriter::new(fs::File::create(&alone).unwrap());
        let chunk = vec![b'a'; 1 << 20];
        for _ in 0..100 {
            out.write_all(&chunk).unwrap();
        }
        out.write_all(b"\n").unwrap();
    }
    let error = load_file(&alone, &LoadOptions::default()).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::NotASession);
    assert!(
        error
            .to_string()
            .contains(&format!("{hundred_mb} bytes long")),
        "{error}"
    );

    let session = dir.path().join("big-line.jsonl");
    {
        let mut out = std::io::BufWriter::new(fs::File::create(&session).unwrap());
        writeln!(out, "{HEADER}").unwrap();
        writeln!(out, "{}", message_line("aaaaaaaa", None, "before")).unwrap();
        out.write_all(br#"{"type":"custom","id":"bbbbbbbb","parentId":"aaaaaaaa","timestamp":"t","customType":"blob","data":""#)
            .unwrap();
        let chunk = vec![b'z'; 1 << 20];
        for _ in 0..100 {
            out.write_all(&chunk).unwrap();
        }
        out.write_all(b"\"}\n").unwrap();
        writeln!(
            out,
            "{}",
            message_line("cccccccc", Some("aaaaaaaa"), "after")
        )
        .unwrap();
    }
    let loaded = load_file(&session, &LoadOptions::default()).unwrap();
    assert_eq!(loaded.tree.len(), 2);
    let corrupt = &loaded.report.corrupt_lines;
    assert_eq!(corrupt.len(), 1);
    assert_eq!(corrupt[0].line, 3);
    assert!(corrupt[0].length > hundred_mb);
    assert!(
        corrupt[0].reason.contains("max_line_bytes"),
        "{}",
        corrupt[0].reason
    );
    let sidecar = corrupt[0].sidecar.clone().unwrap();
    assert!(fs::metadata(&sidecar).unwrap().len() > corrupt[0].length);

    // With a higher limit the same line loads.
    let generous = LoadOptions {
        max_line_bytes: 200 << 20,
        record_corrupt_lines: false,
    };
    let loaded = load_file(&session, &generous).unwrap();
    assert_eq!(loaded.tree.len(), 3);
}

#[test]
fn replaced_file_is_a_conflict_not_a_silent_write() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    fs::write(&path, format!("{HEADER}\n")).unwrap();
    let mut session = Session::open(&path, SessionOptions::default()).unwrap();
    let other = dir.path().join("other.jsonl");
    fs::write(&other, format!("{HEADER}\n")).unwrap();
    fs::rename(&other, &path).unwrap();
    let error = session
        .append_message(AgentMessage::user_text("x", 1))
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Conflict);
    assert_eq!(fs::read_to_string(&path).unwrap(), format!("{HEADER}\n"));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Arbitrary bytes: never a panic; non-empty input is loaded or refused with an error.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
        let result = parse_bytes(&bytes, &LoadOptions::default());
        if bytes.is_empty() {
            let empty = matches!(result, Err(SessionError::EmptyFile { .. }));
            prop_assert!(empty);
        } else if let Err(error) = result {
            prop_assert!(!error.to_string().is_empty());
        }
    }

    /// After a valid header, any mix of lines loads; every non-blank line is either an entry
    /// or a reported corrupt line.
    #[test]
    fn any_lines_after_a_header_load(
        lines in proptest::collection::vec(
            prop_oneof![
                proptest::collection::vec(any::<u8>(), 0..200)
                    .prop_map(|mut v| { v.retain(|b| *b != b'\n'); v }),
                (0u32..1000).prop_map(|n| message_line(&format!("{n:08x}"), None, "t").into_bytes()),
            ],
            0..20,
        ),
        tiny_limit in any::<bool>(),
    ) {
        let mut bytes = format!("{HEADER}\n").into_bytes();
        for line in &lines {
            bytes.extend_from_slice(line);
            bytes.push(b'\n');
        }
        let options = LoadOptions {
            max_line_bytes: if tiny_limit { 150 } else { 1 << 20 },
            record_corrupt_lines: false,
        };
        let loaded = parse_bytes(&bytes, &options).unwrap();
        let non_blank = lines
            .iter()
            .filter(|l| !l.iter().all(u8::is_ascii_whitespace))
            .count();
        prop_assert_eq!(
            loaded.tree.len() + loaded.report.corrupt_lines.len(),
            non_blank
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// The same through the file path, sidecars included.
    #[test]
    fn arbitrary_files_never_panic(bytes in proptest::collection::vec(any::<u8>(), 1..4096)) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fuzz.jsonl");
        fs::write(&path, &bytes).unwrap();
        let _ = load_file(&path, &LoadOptions::default());
        let mut with_header = format!("{HEADER}\n").into_bytes();
        with_header.extend_from_slice(&bytes);
        fs::write(&path, &with_header).unwrap();
        prop_assert!(load_file(&path, &LoadOptions::default()).is_ok());
        prop_assert!(Session::open(&path, SessionOptions::default()).is_ok());
    }
}
