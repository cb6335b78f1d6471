use super::*;

/// A fresh directory per check; every handle opens it again, as a process would.
fn file_blobs() -> Option<impl Fn() -> Box<dyn BlobMedium>> {
    let dir = tempfile::tempdir().unwrap();
    Some(move || Box::new(FileBlobs::in_sessions_dir(dir.path())) as Box<dyn BlobMedium>)
}

mod conformance {
    crate::blob_medium_conformance!(super::file_blobs);
}

#[test]
fn a_reference_reads_either_case_and_refuses_anything_else() {
    let hex = "2CF24DBA5FB0A30E26E83B2AC5B9E29E1B161E5C1FA7425E73043362938B9824";
    let r = BlobRef::parse(&format!("sha256:{hex}")).unwrap();
    assert_eq!(r, BlobRef::of(b"hello"));
    assert_eq!(r.hex(), hex.to_ascii_lowercase());
    for bad in [
        "sha256:00",
        "md5:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824",
        "sha256:../../../../etc/passwd000000000000000000000000000000000000000000",
        "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824",
    ] {
        let e = BlobRef::parse(bad).unwrap_err();
        assert!(matches!(e, BlobError::BadName(ref n) if n == bad), "{e}");
        assert!(e.to_string().contains("64 hex digits"), "{e}");
    }
}

#[test]
fn bytes_under_another_name_are_refused_as_corrupt() {
    let other = BlobRef::of(b"other");
    let e = Blob::checked(&other, b"hello", Path::new("/somewhere")).unwrap_err();
    assert!(matches!(e, BlobError::Corrupt { .. }), "{e}");
    assert!(e.to_string().contains(&other.to_string()), "{e}");
    assert!(e.to_string().contains("/somewhere"), "{e}");
    let hello = BlobRef::of(b"hello");
    assert_eq!(
        Blob::checked(&hello, b"hello", Path::new("/x"))
            .unwrap()
            .bytes(),
        b"hello"
    );
}

#[test]
fn files_are_fanned_out_owner_only_and_list_skips_what_is_not_a_blob() {
    let dir = tempfile::tempdir().unwrap();
    let blobs = FileBlobs::in_sessions_dir(dir.path());
    let r = BlobRef::of(b"hello");
    assert!(blobs.put(Blob::new(&r, b"hello")).unwrap());
    let file = blobs.file_of(&r).unwrap();
    assert_eq!(file, dir.path().join("blobs").join("2c").join(r.hex()));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let mode = std::fs::metadata(file.parent().unwrap())
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o700);
    }
    // A temporary file a crash left, a stray file, a blob in the wrong fan-out directory.
    std::fs::write(file.parent().unwrap().join(".tmp-123"), b"half").unwrap();
    std::fs::write(dir.path().join("blobs").join("notes.txt"), b"x").unwrap();
    let elsewhere = BlobRef::of(b"elsewhere");
    std::fs::write(file.parent().unwrap().join(elsewhere.hex()), b"elsewhere").unwrap();
    assert_eq!(blobs.list().unwrap(), vec![r]);
}

#[test]
fn a_directory_never_written_lists_no_blobs() {
    let dir = tempfile::tempdir().unwrap();
    let blobs = FileBlobs::new(dir.path().join("absent"));
    assert!(blobs.list().unwrap().is_empty());
    assert!(
        !dir.path().join("absent").exists(),
        "listing created nothing"
    );
}

#[test]
fn a_write_that_fails_names_the_directory() {
    let dir = tempfile::tempdir().unwrap();
    // A file where the blob directory should be.
    let place = dir.path().join("blobs");
    std::fs::write(&place, b"not a directory").unwrap();
    let blobs = FileBlobs::new(&place);
    let r = BlobRef::of(b"x");
    let e = blobs.put(Blob::new(&r, b"x")).unwrap_err();
    assert!(matches!(e, BlobError::Write { .. }), "{e}");
    assert!(e.to_string().contains(&place.display().to_string()), "{e}");
}
