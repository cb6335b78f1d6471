use super::*;

/// This test binary is itself an object file of this platform: whole, it passes; cut inside
/// its loaded segments, it is refused as truncated, naming the part and both sizes.
#[test]
fn a_whole_object_passes_and_a_cut_copy_is_refused() {
    let exe = std::env::current_exe().unwrap();
    check(&exe).unwrap();
    let bytes = std::fs::read(&exe).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cut = dir.path().join("cut");
    std::fs::write(&cut, &bytes[..bytes.len() / 3]).unwrap();
    match check(&cut) {
        Err(Damage::Truncated {
            claimed_end,
            file_len,
            ..
        }) => {
            assert_eq!(file_len, (bytes.len() / 3) as u64);
            assert!(claimed_end > file_len);
        }
        // A cut inside the section header table is caught while parsing the headers.
        Err(Damage::NotAnObject(_)) => {}
        other => panic!("a cut copy was not refused: {other:?}"),
    }
}

#[test]
fn text_and_tiny_files_are_not_objects() {
    let dir = tempfile::tempdir().unwrap();
    for (name, body) in [
        ("empty", &b""[..]),
        ("text", &b"hello, I am not a library\n"[..]),
        ("elf-magic-only", &b"\x7fELF"[..]),
    ] {
        let path = dir.path().join(name);
        std::fs::write(&path, body).unwrap();
        let err = check(&path).unwrap_err();
        assert!(matches!(err, Damage::NotAnObject(_)), "{name}: {err:?}");
        assert!(
            err.to_string().contains("not a loadable shared library"),
            "{err}"
        );
    }
}
