//! The log store conformance suite, generic over the store. Every `LogStore` runs all of it.

use bus::log::{Fence, LogError, LogStore};
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
        .append("tx.s1", recs(&["{\"a\":1}", "{\"b\":2}"]), Fence::NONE)
        .await
        .unwrap();
    let second = log
        .append("tx.s1", recs(&["{\"c\":3}"]), Fence::NONE)
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
    let at = one
        .append("tx.s", recs(&["one-1"]), Fence::at(0))
        .await
        .unwrap();
    let late = two.append("tx.s", recs(&["two-1"]), Fence::at(0)).await;
    assert!(
        matches!(late, Err(LogError::Fenced { expected: 0, actual, .. }) if actual == at),
        "got {late:?}"
    );
    // The second writer takes over from what it read; the first, still naming its own last
    // sequence, is fenced off from then on.
    let read = two.read("tx.s").await.unwrap();
    let taken = two
        .append(
            "tx.s",
            recs(&["two-2"]),
            Fence::at(read.last().unwrap().seq),
        )
        .await
        .unwrap();
    let stale = one.append("tx.s", recs(&["one-2"]), Fence::at(at)).await;
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
    log.append("tx.a", recs(&["a"]), Fence::NONE).await.unwrap();
    log.append("tx.a.b", recs(&["ab"]), Fence::NONE)
        .await
        .unwrap();
    log.append("tx.c", recs(&["c"]), Fence::NONE).await.unwrap();
    assert_eq!(data(&log.read("tx.a").await.unwrap()), ["a"]);
    assert_eq!(data(&log.read("tx.a.b").await.unwrap()), ["ab"]);
    log.delete("tx.a").await.unwrap();
    assert!(log.read("tx.a").await.unwrap().is_empty());
    assert_eq!(log.last("tx.a").await.unwrap(), 0);
    assert_eq!(data(&log.read("tx.a.b").await.unwrap()), ["ab"]);
    assert_eq!(data(&log.read("tx.c").await.unwrap()), ["c"]);
    // Deleted is empty again: an append naming 0 starts it anew.
    log.append("tx.a", recs(&["again"]), Fence::at(0))
        .await
        .unwrap();
    assert_eq!(data(&log.read("tx.a").await.unwrap()), ["again"]);
}

pub(crate) async fn bad_names_and_records_are_refused<O: Opener>() {
    let fx = fresh::<O>().await;
    let log = &fx.store;
    for bad in ["", ".a", "a.", "a..b", "a/b", "a b", "a*", "a>"] {
        assert!(
            matches!(
                log.append(bad, recs(&["x"]), Fence::NONE).await,
                Err(LogError::InvalidName { .. })
            ),
            "{bad:?}"
        );
    }
    assert!(matches!(
        log.append("tx.s", recs(&["two\nlines"]), Fence::NONE).await,
        Err(LogError::InvalidRecord { .. })
    ));
    assert!(
        log.read("tx.s").await.unwrap().is_empty(),
        "nothing was written"
    );
}

pub(crate) async fn a_stamped_append_older_than_the_logs_latest_lease_is_refused<O: Opener>() {
    let fx = fresh::<O>().await;
    let (old, new) = (fx.store.clone(), O::open(fx.dir.path()).await);
    let at = old
        .append("tx.s", recs(&["old-1"]), Fence::at(0).with_lease(5))
        .await
        .unwrap();
    // The lease passed to a newer holder, which appends after what it read.
    let taken = new
        .append("tx.s", recs(&["new-1"]), Fence::at(at).with_lease(7))
        .await
        .unwrap();
    // The old holder, even naming the right sequence (it read the log again), is refused.
    let stale = old
        .append("tx.s", recs(&["old-2"]), Fence::at(taken).with_lease(5))
        .await;
    assert!(
        matches!(
            stale,
            Err(LogError::LeaseBehind {
                lease: 5,
                latest: 7,
                ..
            })
        ),
        "got {stale:?}"
    );
    // An unstamped append neither checks nor lowers the stamp: the old holder stays refused.
    let plain = new
        .append("tx.s", recs(&["plain"]), Fence::NONE)
        .await
        .unwrap();
    let still = old
        .append("tx.s", recs(&["old-3"]), Fence::at(plain).with_lease(6))
        .await;
    assert!(
        matches!(
            still,
            Err(LogError::LeaseBehind {
                lease: 6,
                latest: 7,
                ..
            })
        ),
        "got {still:?}"
    );
    // The holder's own revision, or a later one, goes in.
    new.append("tx.s", recs(&["new-2"]), Fence::at(plain).with_lease(7))
        .await
        .unwrap();
    let last = old.last("tx.s").await.unwrap();
    old.append("tx.s", recs(&["next"]), Fence::at(last).with_lease(9))
        .await
        .unwrap();
    assert_eq!(
        data(&new.read("tx.s").await.unwrap()),
        ["old-1", "new-1", "plain", "new-2", "next"]
    );
}

pub(crate) async fn an_append_over_a_message_limit_is_read_back_whole_and_one_over_the_cap_is_refused<
    O: Opener,
>() {
    let fx = fresh::<O>().await;
    let log = &fx.store;
    let at = log
        .append("tx.s", recs(&["small"]), Fence::at(0).with_lease(3))
        .await
        .unwrap();
    // 2.5 MiB in one record and 1.5 MiB in another: over NATS's default max_payload (1 MiB).
    let big: Vec<u8> = (0..(5 << 19)).map(|i| b'a' + (i % 26) as u8).collect();
    let other = vec![b'z'; 3 << 19];
    let after = log
        .append(
            "tx.s",
            vec![big.clone(), other.clone()],
            Fence::at(at).with_lease(3),
        )
        .await
        .unwrap();
    assert!(after > at);
    let again = O::open(fx.dir.path()).await;
    let read = again.read("tx.s").await.unwrap();
    assert_eq!(read.len(), 3);
    assert_eq!(read[0].data, b"small");
    assert!(read[1].data == big, "the big record is read back whole");
    assert!(read[2].data == other);
    assert_eq!(read[2].seq, after);
    assert_eq!(again.last("tx.s").await.unwrap(), after);
    // A fenced-off big append leaves nothing behind.
    let stale = log.append("tx.s", vec![big.clone()], Fence::at(at)).await;
    assert!(
        matches!(stale, Err(LogError::Fenced { .. })),
        "got {stale:?}"
    );
    // Over the cap: refused before anything is written.
    let huge = vec![b'h'; bus::log::MAX_APPEND_BYTES + 1];
    assert!(matches!(
        log.append("tx.s", vec![huge], Fence::at(after)).await,
        Err(LogError::InvalidRecord { .. })
    ));
    log.append("tx.s", recs(&["end"]), Fence::at(after))
        .await
        .unwrap();
    assert_eq!(again.read("tx.s").await.unwrap().len(), 4);
}

#[macro_export]
macro_rules! log_suite {
    ($opener:ty) => {
        $crate::log_suite!(@tests $opener;
            appends_are_read_back_in_order_by_any_handle,
            a_fenced_append_fails_once_another_writer_got_in,
            logs_are_apart_and_delete_empties_one,
            bad_names_and_records_are_refused,
            a_stamped_append_older_than_the_logs_latest_lease_is_refused,
            an_append_over_a_message_limit_is_read_back_whole_and_one_over_the_cap_is_refused,
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
