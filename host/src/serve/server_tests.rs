use std::path::PathBuf;

use crate::blobs::BlobError;
use crate::persist::PersistError;

use super::*;

/// A capped original that could not be kept because the database did not answer is a 503 with
/// `Retry-After`, as a session append would be (the client's retry is the same turn); a blob
/// the database refused is the server's error.
#[test]
fn an_unreachable_blob_store_answers_503_with_retry_after() {
    let unreachable = TurnError::Persist(PersistError::Blob(BlobError::Unavailable {
        place: PathBuf::from("postgres://rampart@db:5432/rampart"),
        operation: "store a blob",
        reason: "connection refused".into(),
    }));
    let failure = turn_failure(&unreachable);
    assert_eq!(failure.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(failure.retry_after.is_some());
    assert!(
        failure.message.contains("connection refused"),
        "{}",
        failure.message
    );

    let refused = TurnError::Persist(PersistError::Blob(BlobError::Database {
        place: PathBuf::from("postgres://rampart@db:5432/rampart"),
        operation: "store a blob",
        reason: "permission denied for table rampart_blobs".into(),
    }));
    let failure = turn_failure(&refused);
    assert_eq!(failure.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(failure.retry_after.is_none());
}
