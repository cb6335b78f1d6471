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
    // Said in the user's terms: what happened and what they can do, no internal API.
    assert!(
        corrupt[0].reason.contains("limit for one line")
            && corrupt[0].reason.contains("shorten its content")
            && !corrupt[0].reason.contains("max_line_bytes"),
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

fn texts_of(loaded: &rampart_sessions::Loaded) -> Vec<String> {
    rampart_sessions::build_session_context(&loaded.tree, rampart_sessions::LeafSelector::Current)
        .messages
        .iter()
        .map(|m| {
            serde_json::to_value(&**m).unwrap()["content"][0]["text"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

/// Issue 12, defect 6: a bad line costs that line and nothing more. Before, the walk from the
/// leaf stopped at the entry whose parent was on the bad line, and everything before it left
/// the active branch. Now the entry is linked around the line (to the lost entry's parent,
/// read from the line's first bytes) and the link is reported.
#[test]
fn a_bad_line_in_the_middle_of_a_chain_costs_only_that_line() {
    let ids = ["a0000001", "a0000002", "a0000003", "a0000004", "a0000005"];
    let mut lines = vec![HEADER.to_string()];
    for (i, id) in ids.iter().enumerate() {
        let parent = i.checked_sub(1).map(|p| ids[p]);
        lines.push(message_line(id, parent, &format!("m{i}")));
    }
    // Three ways to lose line 4 (entry a0000003): invalid JSON after a readable start, a line
    // over the length limit, and bytes with no readable id at all.
    let cut_json = {
        let l = &lines[3];
        format!("{}<<garbage", &l[..l.len() - 30])
    };
    let huge = message_line("a0000003", Some("a0000002"), &"x".repeat(4000));
    let binary = "\u{1}\u{2}not json at all".to_string();
    for (name, bad) in [("cut", cut_json), ("huge", huge), ("binary", binary)] {
        let mut file = lines.clone();
        file[3] = bad;
        let text = file.join("\n") + "\n";
        let options = LoadOptions {
            max_line_bytes: 2048,
            record_corrupt_lines: false,
        };
        let loaded = parse_bytes(text.as_bytes(), &options).unwrap();
        assert_eq!(loaded.report.corrupt_lines.len(), 1, "{name}");
        assert_eq!(
            texts_of(&loaded),
            ["m0", "m1", "m3", "m4"],
            "{name}: only the lost entry is missing from the active branch"
        );
        let bridged = &loaded.report.bridged;
        assert_eq!(bridged.len(), 1, "{name}: {bridged:?}");
        assert_eq!(bridged[0].entry_id, "a0000004", "{name}");
        assert_eq!(bridged[0].lost_parent_id, "a0000003", "{name}");
        assert_eq!(bridged[0].lost_line, 4, "{name}");
        assert_eq!(bridged[0].now_under, "a0000002", "{name}");
        assert!(!loaded.report.is_clean());
    }
}

/// The file itself is never rewritten by the bridge: a session opened for writing links in
/// memory, appends after the leaf, and the bad line stays where it was.
#[test]
fn bridging_changes_nothing_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let text = format!(
        "{HEADER}\n{}\n{{\"type\":\"message\",\"id\":\"a0000002\",\"parentId\":\"a0000001\",<<cut\n{}\n",
        message_line("a0000001", None, "one"),
        message_line("a0000003", Some("a0000002"), "three"),
    );
    fs::write(&path, &text).unwrap();
    let mut session = Session::open(&path, SessionOptions::default()).unwrap();
    assert_eq!(session.context().messages.len(), 2);
    session
        .append_message(AgentMessage::user_text("four", 4))
        .unwrap();
    let after = fs::read_to_string(&path).unwrap();
    assert!(after.starts_with(&text), "the old bytes are untouched");
    drop(session);
    let reopened = Session::open(&path, SessionOptions::default()).unwrap();
    assert_eq!(reopened.context().messages.len(), 3);
}

/// Issue 12, defect 6, import side: a pi import used to keep a `parentId` that pointed
/// nowhere. The imported tree links around the lost line, says so naming file and line, and
/// every `parentId` it would write names an entry it holds.
#[test]
fn a_pi_import_links_around_a_lost_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("source.jsonl");
    let text = format!(
        "{HEADER}\n{}\n{{\"type\":\"message\",\"id\":\"a0000002\",\"parentId\":\"a0000001\",<<cut\n{}\n",
        message_line("a0000001", None, "one"),
        message_line("a0000003", Some("a0000002"), "three"),
    );
    fs::write(&path, &text).unwrap();
    let opened = rampart_sessions::import::open(&path).unwrap().remove(0);
    let ids: Vec<&str> = opened
        .tree
        .entries()
        .iter()
        .map(|e| e.id.as_str())
        .collect();
    for entry in opened.tree.entries() {
        if let Some(parent) = &entry.parent_id {
            assert!(ids.contains(&parent.as_str()), "{} → {parent}", entry.id);
        }
    }
    assert!(
        opened
            .warnings
            .iter()
            .any(|w| w.contains(&format!("{}:4:", path.display())) && w.contains("a0000001")),
        "{:?}",
        opened.warnings
    );
    assert_eq!(
        fs::read_to_string(&path).unwrap(),
        text,
        "the source is only read"
    );
}

/// The last guard: an append whose line the loader would refuse fails with an error naming the
/// size and the limit, and writes nothing (before, it was written and lost on the next load).
#[test]
fn an_append_over_the_line_limit_is_refused_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let options = SessionOptions {
        load: LoadOptions {
            max_line_bytes: 4096,
            record_corrupt_lines: true,
        },
        ..SessionOptions::default()
    };
    let mut session = Session::create(
        &path,
        rampart_sessions::SessionHeader::new("/w"),
        options.clone(),
    )
    .unwrap();
    session
        .append_message(AgentMessage::user_text("small", 1))
        .unwrap();
    let before = fs::read(&path).unwrap();
    let err = session
        .append_message(AgentMessage::user_text("y".repeat(10_000), 2))
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidRequest);
    assert!(err.to_string().contains("4096-byte limit"), "{err}");
    assert_eq!(fs::read(&path).unwrap(), before, "nothing was written");
    assert_eq!(session.context().messages.len(), 1);
    let reloaded = Session::open(&path, options).unwrap();
    assert!(reloaded.report().is_clean());
}
