//! The log store conformance suite, generic over the store. Every `LogStore` runs all of it.

use bus::log::{LogError, LogStore};
use std::path::Path;
use std::sync::Arc;

/// A store under test over the state in its folder.
pub(crate) struct Fixture {
    pub(crate) store: Arc<dyn LogStore>,
    pub(crate) dir: tempfile::TempDir,
}

/// How a store under test is opened.
pub(crate) trait Opener: 'static {
    /// A store over the state in `dir`.
    async fn open(dir: &Path) -> Arc<dyn LogStore>;
    /// False (after saying why) when the store cannot run here: the test is skipped.
    fn available(_test: &str) -> bool {
        true
    }
}

async fn fresh<O: Opener>() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let store = O::open(dir.path()).await;
    Fixture { store, dir }
}

fn recs(items: &[&str]) -> Vec<Vec<u8>> {
    items.iter().map(|s| s.as_bytes().to_vec()).collect()
}

fn data(log: &[bus::log::LogRecord]) -> Vec<String> {
    log.iter()
        .map(|r| String::from_utf8(r.data.clone()).unwrap())
        .collect()
}

pub(crate) async fn appends_are_read_back_in_order_by_any_handle<O: Opener>() {
    let fx = fresh::<O>().await;
    let log = &fx.store;
    assert!(log.read("tx.s1").await.unwrap().is_empty());
    assert_eq!(log.last("tx.s1").await.unwrap(), 0);
    let first = log
        .append("tx.s1", recs(&["{\"a\":1}", "{\"b\":2}"]), None)
        .await
        .unwrap();
    let second = log
        .append("tx.s1", recs(&["{\"c\":3}"]), None)
        .await
        .unwrap();
    assert!(second > first, "sequences grow with every append");
    let other = O::open(fx.dir.path()).await;
    let read = other.read("tx.s1").await.unwrap();
    assert_eq!(data(&read), ["{\"a\":1}", "{\"b\":2}", "{\"c\":3}"]);
    assert!(read.windows(2).all(|w| w[0].seq <= w[1].seq));
    assert_eq!(read.last().unwrap().seq, second);
    assert_eq!(other.last("tx.s1").await.unwrap(), second);
}

pub(crate) async fn a_fenced_append_fails_once_another_writer_got_in<O: Opener>() {
    let fx = fresh::<O>().await;
    let (one, two) = (fx.store.clone(), O::open(fx.dir.path()).await);
    // Both start from an empty log: the first append naming 0 wins.
    let at = one.append("tx.s", recs(&["one-1"]), Some(0)).await.unwrap();
    let late = two.append("tx.s", recs(&["two-1"]), Some(0)).await;
    assert!(
        matches!(late, Err(LogError::Fenced { expected: 0, actual, .. }) if actual == at),
        "got {late:?}"
    );
    // The second writer takes over from what it read; the first, still naming its own last
    // sequence, is fenced off from then on.
    let read = two.read("tx.s").await.unwrap();
    let taken = two
        .append("tx.s", recs(&["two-2"]), Some(read.last().unwrap().seq))
        .await
        .unwrap();
    let stale = one.append("tx.s", recs(&["one-2"]), Some(at)).await;
    assert!(
        matches!(stale, Err(LogError::Fenced { .. })),
        "got {stale:?}"
    );
    assert_eq!(data(&one.read("tx.s").await.unwrap()), ["one-1", "two-2"]);
    assert_eq!(one.last("tx.s").await.unwrap(), taken);
}

pub(crate) async fn logs_are_apart_and_delete_empties_one<O: Opener>() {
    let fx = fresh::<O>().await;
    let log = &fx.store;
    log.append("tx.a", recs(&["a"]), None).await.unwrap();
    log.append("tx.a.b", recs(&["ab"]), None).await.unwrap();
    log.append("tx.c", recs(&["c"]), None).await.unwrap();
    assert_eq!(data(&log.read("tx.a").await.unwrap()), ["a"]);
    assert_eq!(data(&log.read("tx.a.b").await.unwrap()), ["ab"]);
    log.delete("tx.a").await.unwrap();
    assert!(log.read("tx.a").await.unwrap().is_empty());
    assert_eq!(log.last("tx.a").await.unwrap(), 0);
    assert_eq!(data(&log.read("tx.a.b").await.unwrap()), ["ab"]);
    assert_eq!(data(&log.read("tx.c").await.unwrap()), ["c"]);
    // Deleted is empty again: an append naming 0 starts it anew.
    log.append("tx.a", recs(&["again"]), Some(0)).await.unwrap();
    assert_eq!(data(&log.read("tx.a").await.unwrap()), ["again"]);
}

pub(crate) async fn bad_names_and_records_are_refused<O: Opener>() {
    let fx = fresh::<O>().await;
    let log = &fx.store;
    for bad in ["", ".a", "a.", "a..b", "a/b", "a b", "a*", "a>"] {
        assert!(
            matches!(
                log.append(bad, recs(&["x"]), None).await,
                Err(LogError::InvalidName { .. })
            ),
            "{bad:?}"
        );
    }
    assert!(matches!(
        log.append("tx.s", recs(&["two\nlines"]), None).await,
        Err(LogError::InvalidRecord { .. })
    ));
    assert!(
        log.read("tx.s").await.unwrap().is_empty(),
        "nothing was written"
    );
}

#[macro_export]
macro_rules! log_suite {
    ($opener:ty) => {
        $crate::log_suite!(@tests $opener;
            appends_are_read_back_in_order_by_any_handle,
            a_fenced_append_fails_once_another_writer_got_in,
            logs_are_apart_and_delete_empties_one,
            bad_names_and_records_are_refused,
        );
    };
    (@tests $opener:ty; $($name:ident),* $(,)?) => {
        mod log_suite {
            use super::*;
            $(
                #[tokio::test]
                async fn $name() {
                    if !<$opener as log::Opener>::available(stringify!($name)) {
                        return;
                    }
                    log::$name::<$opener>().await
                }
            )*
        }
    };
}
