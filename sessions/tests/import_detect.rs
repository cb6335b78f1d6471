//! Detection by content: pi versions, unknown formats rejected with an error
//! that lists every supported format, errors that name the file.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use rampart_sessions::import::{
    ImportError, SourceFormat, detect, import_bytes, import_file, import_file_all,
};

/// Deterministic "random" bytes (xorshift), so the test never flakes.
fn noise(len: usize) -> Vec<u8> {
    let mut state: u32 = 0x9E37_79B9;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            state.to_le_bytes()[0]
        })
        .collect()
}

fn assert_unknown(bytes: &[u8], what: &str) {
    match detect(bytes) {
        Err(err @ ImportError::UnknownFormat { .. }) => {
            let message = err.to_string();
            assert!(message.contains("supported formats"), "{what}: {message}");
            for format in SourceFormat::ALL {
                assert!(
                    message.contains(format.name()),
                    "{what}: message does not list {format}: {message}"
                );
            }
        }
        other => panic!("{what}: expected UnknownFormat, got {other:?}"),
    }
}

#[test]
fn unknown_content_is_rejected_with_the_supported_formats() {
    assert_unknown(b"", "empty file");
    assert_unknown(b"  \n\t\n", "whitespace");
    assert_unknown(b"name,role,content\nalice,user,hello\n", "CSV");
    assert_unknown(&noise(4096), "random bytes");
    assert_unknown(b"\xff\xfe{\x00}", "UTF-16 / invalid UTF-8");
    assert_unknown(b"42", "a JSON number");
    assert_unknown(b"{}", "an empty object");
    assert_unknown(b"[]", "an empty array");
    assert_unknown(b"[1, 2, 3]", "an array of numbers");
    assert_unknown(b"{\"hello\": \"world\"}", "an unrelated object");
    assert_unknown(b"{\"a\":1}\n{\"b\":2}\n", "unrelated JSONL");
    assert_unknown(
        b"{\"type\":\"session\",\"version\":7,\"id\":\"x\"}\n",
        "a pi header from the future",
    );
    assert_unknown(b"<html><body>not a transcript</body></html>", "HTML");
}

#[test]
fn a_sidecar_is_explained_not_imported() {
    let sidecar = br#"{"agentType":"general-purpose","description":"Round 2: bob comparison"}"#;
    let err = detect(sidecar).unwrap_err().to_string();
    assert!(err.contains("sidecar"), "{err}");
}

#[test]
fn pi_versions_are_told_apart() {
    let v1 = concat!(
        r#"{"type":"session","id":"d703a1a9","timestamp":"2025-11-20T23:33:50.805Z","cwd":"/w","provider":"anthropic","modelId":"claude-sonnet-4-5","thinkingLevel":"off"}"#,
        "\n",
        r#"{"type":"message","timestamp":"2025-11-20T23:33:01.550Z","message":{"role":"user","content":"hi","timestamp":1}}"#,
        "\n"
    );
    let v2 = concat!(
        r#"{"type":"session","version":2,"id":"d703a1a9","timestamp":"2025-11-20T23:33:50.805Z","cwd":"/w"}"#,
        "\n",
        r#"{"type":"message","id":"a1b2c3d4","parentId":null,"timestamp":"2025-11-20T23:33:01.550Z","message":{"role":"user","content":"hi","timestamp":1}}"#,
        "\n"
    );
    let v3 = concat!(
        r#"{"type":"session","version":3,"id":"8d0416c9","timestamp":"2026-02-12T20:05:20.001Z","cwd":"/w"}"#,
        "\n",
        r#"{"type":"model_change","id":"9e9a3b3a","parentId":null,"timestamp":"2026-02-12T20:05:20.001Z","provider":"ollama","modelId":"qwen3:8b"}"#,
        "\n"
    );
    for (text, format, version) in [
        (v1, SourceFormat::PiV1, 1),
        (v2, SourceFormat::PiV2, 2),
        (v3, SourceFormat::PiV3, 3),
    ] {
        assert_eq!(detect(text.as_bytes()).ok(), Some(format));
        match import_bytes(text.as_bytes(), "session.jsonl") {
            Err(ImportError::NativePiSession { version: v, file }) => {
                assert_eq!(v, version);
                assert_eq!(file, "session.jsonl");
            }
            other => panic!("expected NativePiSession, got {other:?}"),
        }
    }
}

#[test]
fn errors_name_the_file_and_what_to_do() {
    let dir = tempfile::tempdir().unwrap();

    let csv = dir.path().join("export.jsonl");
    std::fs::write(&csv, "a,b\n1,2\n").unwrap();
    let message = import_file(&csv).unwrap_err().to_string();
    assert!(message.contains("export.jsonl"), "{message}");
    assert!(message.contains("Claude Code project JSONL"), "{message}");

    let broken = dir.path().join("run.traj");
    std::fs::write(&broken, "{\n  \"trajectory\": [\n    {\"action\": \"ls\"").unwrap();
    match import_file(&broken) {
        Err(err @ ImportError::InvalidJson { .. }) => {
            let message = err.to_string();
            assert!(message.contains("run.traj:"), "{message}");
            assert!(message.contains("re-export"), "{message}");
        }
        other => panic!("expected InvalidJson, got {other:?}"),
    }

    let missing = dir.path().join("nope.jsonl");
    match import_file_all(&missing) {
        Err(err @ ImportError::Io { .. }) => {
            assert!(err.to_string().contains("nope.jsonl"));
        }
        other => panic!("expected Io, got {other:?}"),
    }
}

#[test]
fn detection_ignores_the_file_name() {
    // A chat-completions array saved as `.jsonl`, a Claude Code line saved
    // as `.json`: both judged by content.
    let dir = tempfile::tempdir().unwrap();
    let chat = dir.path().join("looks-like.jsonl");
    std::fs::write(&chat, r#"[{"role":"user","content":"hi"}]"#).unwrap();
    assert_eq!(import_file(&chat).unwrap().format, SourceFormat::OpenAiChat);
    let cc = dir.path().join("looks-like.json");
    std::fs::write(
        &cc,
        r#"{"type":"user","uuid":"u1","parentUuid":null,"sessionId":"s","timestamp":"2025-07-14T23:04:11.646Z","message":{"role":"user","content":"hi"}}"#,
    )
    .unwrap();
    assert_eq!(import_file(&cc).unwrap().format, SourceFormat::ClaudeCode);
}
