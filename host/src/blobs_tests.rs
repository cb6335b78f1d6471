use super::*;

#[test]
fn put_is_content_addressed_and_idempotent() {
    let dir = tempfile::tempdir().unwrap();
    let store = BlobStore::in_sessions_dir(dir.path());
    let a = store.put(b"hello").unwrap();
    assert_eq!(
        a,
        "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
    );
    assert_eq!(store.put(b"hello").unwrap(), a);
    assert_eq!(store.get(&a).unwrap(), b"hello");
    assert!(matches!(
        store.get("sha256:00").unwrap_err(),
        BlobError::BadName(_)
    ));
    let files: Vec<_> = walk(&dir.path().join("blobs"));
    assert_eq!(files.len(), 1, "{files:?}");
    assert_eq!(store.place(), dir.path().join("blobs"));
}

#[test]
fn a_person_is_told_the_file_of_a_blob_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let store = BlobStore::in_sessions_dir(dir.path());
    let a = store.put(b"hello").unwrap();
    let file = store.path_of(&a).unwrap().unwrap();
    assert_eq!(std::fs::read(&file).unwrap(), b"hello");
    assert_eq!(store.where_to_read(&a).unwrap(), file.display().to_string());
}

#[test]
fn a_missing_blob_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = BlobStore::in_sessions_dir(dir.path());
    let absent = BlobRef::of(b"absent").to_string();
    let e = store.get(&absent).unwrap_err();
    assert!(matches!(e, BlobError::Missing { .. }), "{e}");
    assert!(e.to_string().contains(&absent), "{e}");
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p))
        } else {
            out.push(p)
        }
    }
    out
}
