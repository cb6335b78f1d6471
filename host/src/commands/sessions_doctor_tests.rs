use super::*;

#[test]
fn blob_references_are_found_after_either_marker_and_nowhere_else() {
    let capped = BlobRef::of(b"a capped tool output");
    let spilled = BlobRef::of(b"a line too long");
    let digest = BlobRef::of(b"an image digest a user pasted");
    let text = format!(
        r#"{{"text":"head [... 4960 more characters truncated; full output: {capped}]"}}
{{"text":"shortened [... truncated; full output: blob {spilled}]"}}
{{"text":"docker pull app@{digest} and full output: sha256:12ab (too short)"}}
{{"text":"again: full output: {capped}]"}}"#
    );
    let found: Vec<BlobRef> = blob_references(text.as_bytes()).into_iter().collect();
    let mut expected = vec![capped, spilled];
    expected.sort();
    assert_eq!(found, expected);
}

#[test]
fn a_named_blob_the_store_lacks_is_reported_and_one_it_holds_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let blobs = FileBlobs::in_sessions_dir(dir.path());
    let held = b"kept".to_vec();
    let held_ref = BlobRef::of(&held);
    blobs
        .put(rampart_sessions::blobs::Blob::new(&held_ref, &held))
        .unwrap();
    let lost = BlobRef::of(b"lost");
    let bytes = format!("full output: {held_ref}] and full output: blob {lost}]");
    let mut out = Vec::new();
    let missing =
        report_missing_blobs("agent:\x1b[2Jkey", bytes.as_bytes(), &blobs, &mut out).unwrap();
    let out = String::from_utf8(out).unwrap();
    assert_eq!(missing, 1, "{out}");
    assert!(
        out.contains(&lost.to_string()) && !out.contains(&held_ref.to_string()),
        "{out}"
    );
    assert!(out.contains("migrate"), "{out}");
    assert!(!out.contains('\x1b'), "the key is escaped: {out:?}");
}
