//! The promises of [`BlobMedium`], as checks any medium can run: the directory of blobs and
//! the PostgreSQL store's table run the same ones, so whichever keeps a server's blobs, a
//! capped original stored by one replica is read whole by another.
//!
//! Each check takes `handles`, which opens a new handle on one fresh medium every time it is
//! called, as each replica opens its own. A medium's tests run them all with
//! [`blob_medium_conformance!`](crate::blob_medium_conformance), one `#[test]` per check.
//! The checks panic on a broken promise (test code, shipped so another crate's tests can call
//! them).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::{Blob, BlobError, BlobMedium, BlobRef};

/// Opens a new handle on the medium under test (see the module docs).
pub type Handles<'a> = &'a dyn Fn() -> Box<dyn BlobMedium>;

/// Runs every check as its own `#[test]`. `$fixture` is a function returning
/// `Option<impl Fn() -> Box<dyn BlobMedium>>` that makes a fresh medium per call; `None` means
/// the backend is not available here and the check is skipped (the fixture says so).
#[macro_export]
macro_rules! blob_medium_conformance {
    ($fixture:path) => {
        $crate::blob_medium_conformance!(@checks $fixture;
            the_same_bytes_stored_twice_are_one_blob,
            a_missing_blob_is_an_error_naming_it,
            a_large_blob_comes_back_whole,
            another_handle_reads_what_one_stored,
            empty_and_binary_blobs_come_back_byte_for_byte,
            concurrent_puts_of_one_blob_store_it_once,
        );
    };
    (@checks $fixture:path; $($check:ident),* $(,)?) => {
        $(
            #[test]
            fn $check() {
                if let Some(handles) = $fixture() {
                    $crate::blobs::conformance::$check(&handles);
                }
            }
        )*
    };
}

fn put(medium: &dyn BlobMedium, bytes: &[u8]) -> (BlobRef, bool) {
    let reference = BlobRef::of(bytes);
    let written = medium.put(Blob::new(&reference, bytes)).unwrap();
    (reference, written)
}

/// Bytes that do not repeat (so no layer can shrink them by compression and hide a cut).
fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut state = seed | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 24) as u8
        })
        .collect()
}

/// Storing the same bytes again writes nothing and lists one blob.
pub fn the_same_bytes_stored_twice_are_one_blob(handles: Handles<'_>) {
    let medium = handles();
    let (first, written) = put(medium.as_ref(), b"hello");
    assert!(written, "the first put stores the blob");
    assert_eq!(
        first.to_string(),
        "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
    );
    let (second, written) = put(medium.as_ref(), b"hello");
    assert_eq!(second, first);
    assert!(!written, "the second put of the same bytes writes nothing");
    assert_eq!(medium.list().unwrap(), vec![first.clone()]);
    assert!(medium.contains(&first).unwrap());
    assert_eq!(medium.get(&first).unwrap(), b"hello");
}

/// Reading a blob that was never stored is [`BlobError::Missing`], naming the blob and the
/// place.
pub fn a_missing_blob_is_an_error_naming_it(handles: Handles<'_>) {
    let medium = handles();
    put(medium.as_ref(), b"something else");
    let absent = BlobRef::of(b"never stored");
    assert!(!medium.contains(&absent).unwrap());
    let e = medium.get(&absent).unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, BlobError::Missing { .. }), "{text}");
    assert!(text.contains(&absent.to_string()), "{text}");
    assert!(
        text.contains(&medium.describe().display().to_string()),
        "{text}"
    );
}

/// An 8 MiB blob (a tool output far over any line limit) comes back whole.
pub fn a_large_blob_comes_back_whole(handles: Handles<'_>) {
    let medium = handles();
    let bytes = noise(8 * 1024 * 1024 + 17, 7);
    let (reference, written) = put(medium.as_ref(), &bytes);
    assert!(written);
    let back = medium.get(&reference).unwrap();
    assert_eq!(back.len(), bytes.len());
    assert!(back == bytes, "the large blob came back changed");
}

/// What one handle stores, another reads (replicas share blobs).
pub fn another_handle_reads_what_one_stored(handles: Handles<'_>) {
    let writer = handles();
    let reader = handles();
    let (reference, _) = put(writer.as_ref(), b"stored by one replica");
    assert!(reader.contains(&reference).unwrap());
    assert_eq!(reader.get(&reference).unwrap(), b"stored by one replica");
    assert_eq!(reader.list().unwrap(), vec![reference]);
}

/// No byte is special: the empty string, NUL and invalid UTF-8 round-trip.
pub fn empty_and_binary_blobs_come_back_byte_for_byte(handles: Handles<'_>) {
    let medium = handles();
    let binary: Vec<u8> = (0..=255u8).chain([0, 0xff, 0xfe, 0]).collect();
    let (empty, _) = put(medium.as_ref(), b"");
    let (bin, _) = put(medium.as_ref(), &binary);
    assert_eq!(medium.get(&empty).unwrap(), b"");
    assert_eq!(medium.get(&bin).unwrap(), binary);
    let mut expected = vec![empty, bin];
    expected.sort();
    assert_eq!(medium.list().unwrap(), expected);
}

/// Several handles storing the same blob at once: no error, one blob, exactly one of them
/// reports having stored it.
pub fn concurrent_puts_of_one_blob_store_it_once(handles: Handles<'_>) {
    let bytes = noise(256 * 1024, 11);
    let media: Vec<Box<dyn BlobMedium>> = (0..4).map(|_| handles()).collect();
    let written: Vec<bool> = std::thread::scope(|scope| {
        let running: Vec<_> = media
            .iter()
            .map(|m| scope.spawn(|| put(m.as_ref(), &bytes).1))
            .collect();
        running.into_iter().map(|t| t.join().unwrap()).collect()
    });
    assert_eq!(
        written.iter().filter(|w| **w).count(),
        1,
        "exactly one put stored it: {written:?}"
    );
    let reference = BlobRef::of(&bytes);
    assert_eq!(media[0].list().unwrap(), vec![reference.clone()]);
    assert!(media[3].get(&reference).unwrap() == bytes);
}
