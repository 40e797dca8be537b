//! The log store conformance suite against files.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod log;

use bus::log::{Fence, FilesLog, LogStore};
use std::path::Path;
use std::sync::Arc;

struct Files;

impl log::Opener for Files {
    async fn open(dir: &Path) -> Arc<dyn LogStore> {
        Arc::new(FilesLog::open(dir.join("logs")))
    }
}

log_suite!(Files);

/// A line torn by a crash mid-append is not a record, and the next append starts a line of its
/// own after cutting it.
#[tokio::test]
async fn a_torn_last_line_is_cut_before_the_next_append() {
    let dir = tempfile::tempdir().unwrap();
    let log = FilesLog::open(dir.path());
    log.append("tx.s", vec![b"one".to_vec()], Fence::NONE)
        .await
        .unwrap();
    let path = dir.path().join("tx").join("s.jsonl");
    std::fs::write(&path, b"one\ntor").unwrap();
    let again = FilesLog::open(dir.path());
    assert_eq!(again.last("tx.s").await.unwrap(), 1);
    again
        .append("tx.s", vec![b"two".to_vec()], Fence::at(1))
        .await
        .unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"one\ntwo\n");
}
