//! The key-value store conformance suite, generic over the store. Every `KvStore` runs all of it.

use bus::kv::{KvError, KvEvent, KvStore, LeaseError, Leases};
use bus::{Clock, ManualClock};
use futures::StreamExt as _;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// A safety net for awaits that must not hang a failing test; never a synchronisation device.
pub(crate) const NET: Duration = Duration::from_secs(10);
/// Start of the manual clock (2026-01-01).
pub(crate) const T0: u64 = 1_767_225_600_000;

/// A store under test, with the clock of the embedded one.
pub(crate) struct Fixture {
    pub(crate) store: Arc<dyn KvStore>,
    pub(crate) clock: Arc<ManualClock>,
    pub(crate) dir: tempfile::TempDir,
}

/// How a store under test is opened.
pub(crate) trait Opener: 'static {
    /// A fresh store over the state in `dir`.
    async fn open(dir: &Path, clock: Arc<ManualClock>) -> Arc<dyn KvStore>;
    /// A second handle on the same state (another connection, where there is one).
    async fn again(fx: &Fixture) -> Arc<dyn KvStore>;
    /// Returns once `ttl` has run out for `key`, written with it: the embedded store moves its
    /// clock on; the distributed one waits for the server's expiry marker.
    async fn outlive(fx: &Fixture, key: &str, ttl: Duration);
    /// The clock leases time their waits and renewals on: the embedded store's manual clock
    /// (which also decides its expiries); real time for a store whose server decides them.
    fn lease_clock(fx: &Fixture) -> Arc<dyn Clock> {
        fx.clock.clone()
    }
    /// Lets `by` pass for a lease's timers: moves the manual clock once a task waits on it; a
    /// store on real time does nothing (time passes by itself).
    async fn tick(fx: &Fixture, by: Duration) {
        tokio::time::timeout(NET, fx.clock.timers_at_least(1))
            .await
            .expect("a task waits on the clock");
        fx.clock.advance(by);
    }
    /// Returns once a task waits on the lease clock (the manual one); a store on real time
    /// cannot tell, and returns at once.
    async fn waiting(fx: &Fixture) {
        tokio::time::timeout(NET, fx.clock.timers_at_least(1))
            .await
            .expect("a task waits on the clock");
    }
    /// False (after saying why) when the store cannot run here: the test is skipped.
    fn available(_test: &str) -> bool {
        true
    }
}

async fn fresh<O: Opener>() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let store = O::open(dir.path(), clock.clone()).await;
    Fixture { store, clock, dir }
}

pub(crate) async fn create_only_when_absent<O: Opener>() {
    let fx = fresh::<O>().await;
    let kv = &fx.store;
    let rev = kv.create("lease.a", b"one".to_vec(), None).await.unwrap();
    let again = kv.create("lease.a", b"two".to_vec(), None).await;
    assert!(
        matches!(again, Err(KvError::Exists { .. })),
        "a second create must fail, got {again:?}"
    );
    let got = kv.get("lease.a").await.unwrap().unwrap();
    assert_eq!((got.value.as_slice(), got.revision), (&b"one"[..], rev));
    assert!(kv.get("lease.b").await.unwrap().is_none());
}

pub(crate) async fn update_and_delete_compare_the_revision<O: Opener>() {
    let fx = fresh::<O>().await;
    let kv = &fx.store;
    let r1 = kv.create("job.x", b"1".to_vec(), None).await.unwrap();
    let r2 = kv.update("job.x", b"2".to_vec(), r1, None).await.unwrap();
    assert!(r2 > r1, "revisions grow");
    let stale = kv.update("job.x", b"3".to_vec(), r1, None).await;
    assert!(
        matches!(stale, Err(KvError::WrongRevision { expected, .. }) if expected == r1),
        "an update naming an old revision must fail, got {stale:?}"
    );
    assert!(matches!(
        kv.delete("job.x", Some(r1)).await,
        Err(KvError::WrongRevision { .. })
    ));
    kv.delete("job.x", Some(r2)).await.unwrap();
    assert!(kv.get("job.x").await.unwrap().is_none());
    assert!(
        matches!(
            kv.update("job.x", b"4".to_vec(), r2, None).await,
            Err(KvError::WrongRevision { .. })
        ),
        "a deleted key has no revision to update"
    );
    let r3 = kv.create("job.x", b"5".to_vec(), None).await.unwrap();
    assert!(r3 > r2, "a deleted key can be created again");
    let r4 = kv.put("job.x", b"6".to_vec()).await.unwrap();
    assert_eq!(kv.get("job.x").await.unwrap().unwrap().revision, r4);
}

pub(crate) async fn a_key_with_a_ttl_is_gone_after_it_and_can_be_taken_again<O: Opener>() {
    let fx = fresh::<O>().await;
    let kv = &fx.store;
    let ttl = Duration::from_secs(1);
    kv.create("lease.t", b"holder-1".to_vec(), Some(ttl))
        .await
        .unwrap();
    assert!(matches!(
        kv.create("lease.t", b"holder-2".to_vec(), Some(ttl)).await,
        Err(KvError::Exists { .. })
    ));
    O::outlive(&fx, "lease.t", ttl).await;
    assert!(kv.get("lease.t").await.unwrap().is_none(), "expired");
    let rev = kv
        .create("lease.t", b"holder-2".to_vec(), Some(ttl))
        .await
        .unwrap();
    assert_eq!(kv.get("lease.t").await.unwrap().unwrap().revision, rev);
    // Taken again over the expiry marker, it must still expire (a create over a marker that
    // dropped the TTL would hold the lease for ever).
    O::outlive(&fx, "lease.t", ttl).await;
    assert!(kv.get("lease.t").await.unwrap().is_none(), "expired again");
}

pub(crate) async fn a_lease_is_renewed_and_released_by_its_revision<O: Opener>() {
    let fx = fresh::<O>().await;
    let kv = &fx.store;
    let ttl = Some(Duration::from_secs(30));
    let r1 = kv.create("lease.r", b"me".to_vec(), ttl).await.unwrap();
    let r2 = kv.update("lease.r", b"me".to_vec(), r1, ttl).await.unwrap();
    let other = O::again(&fx).await;
    assert!(
        matches!(
            other.create("lease.r", b"you".to_vec(), ttl).await,
            Err(KvError::Exists { .. })
        ),
        "a held lease is seen as held on another handle"
    );
    assert!(matches!(
        other.delete("lease.r", Some(r1)).await,
        Err(KvError::WrongRevision { .. })
    ));
    kv.delete("lease.r", Some(r2)).await.unwrap();
    other
        .create("lease.r", b"you".to_vec(), ttl)
        .await
        .expect("a released lease can be taken by another handle");
}

pub(crate) async fn watch_sees_changes_under_its_prefix_in_order<O: Opener>() {
    let fx = fresh::<O>().await;
    let kv = &fx.store;
    let mut watch = kv.watch("jobs.").await.unwrap();
    kv.put("jobs.a", b"1".to_vec()).await.unwrap();
    kv.put("other.x", b"no".to_vec()).await.unwrap();
    kv.create("jobs.b", b"2".to_vec(), None).await.unwrap();
    kv.delete("jobs.a", None).await.unwrap();
    let mut seen = Vec::new();
    for _ in 0..3 {
        let ev = tokio::time::timeout(NET, watch.next())
            .await
            .expect("a watch event in time")
            .unwrap()
            .unwrap();
        seen.push(match ev {
            KvEvent::Put(e) => format!("put {} {}", e.key, String::from_utf8_lossy(&e.value)),
            KvEvent::Deleted { key } => format!("deleted {key}"),
        });
    }
    assert_eq!(seen, ["put jobs.a 1", "put jobs.b 2", "deleted jobs.a"]);
}

pub(crate) async fn keys_lists_live_keys_under_a_prefix<O: Opener>() {
    let fx = fresh::<O>().await;
    let kv = &fx.store;
    for k in ["jobs.c", "jobs.a", "jobs.b", "other.a"] {
        kv.put(k, b"v".to_vec()).await.unwrap();
    }
    kv.delete("jobs.b", None).await.unwrap();
    assert_eq!(kv.keys("jobs.").await.unwrap(), ["jobs.a", "jobs.c"]);
    let mut all = kv.keys("").await.unwrap();
    all.sort();
    assert_eq!(all, ["jobs.a", "jobs.c", "other.a"]);
}

pub(crate) async fn bad_keys_and_ttls_are_refused<O: Opener>() {
    let fx = fresh::<O>().await;
    let kv = &fx.store;
    for bad in ["", "a:b", "a b", ".a", "a.", "a..b", "a*", "a>"] {
        assert!(
            matches!(kv.get(bad).await, Err(KvError::InvalidKey { .. })),
            "{bad:?} must be refused"
        );
    }
    let short = kv
        .create("lease.s", b"x".to_vec(), Some(Duration::from_millis(500)))
        .await;
    assert!(
        matches!(short, Err(KvError::InvalidTtl { .. })),
        "{short:?}"
    );
    assert!(matches!(
        kv.watch("jobs").await,
        Err(KvError::InvalidKey { .. })
    ));
}

/// Two holders of the leases in one store, on two handles (two nodes).
async fn two_holders<O: Opener>(fx: &Fixture, ttl: Duration) -> (Leases, Leases) {
    let clock = O::lease_clock(fx);
    let a = Leases::new(fx.store.clone(), clock.clone(), "node-a", ttl);
    let b = Leases::new(O::again(fx).await, clock, "node-b", ttl);
    (a, b)
}

pub(crate) async fn a_lease_has_one_holder_and_a_released_one_goes_to_a_waiter_at_once<
    O: Opener,
>() {
    let fx = fresh::<O>().await;
    let (a, b) = two_holders::<O>(&fx, Duration::from_secs(30)).await;
    let key = "session.s-1";
    let held = a
        .try_acquire(key)
        .await
        .unwrap()
        .expect("a free key is taken");
    assert!(held.is_held());
    assert!(
        b.try_acquire(key).await.unwrap().is_none(),
        "a held lease is not taken on another handle"
    );
    assert_eq!(b.holder_of(key).await.unwrap().as_deref(), Some("node-a"));
    // A waiter is woken by the release: the clock never moves, so no poll gets it.
    let waiter = {
        let b = b.clone();
        tokio::spawn(async move { b.acquire(key, Duration::from_secs(600)).await })
    };
    O::waiting(&fx).await;
    let first = held.revision();
    held.release().await.unwrap();
    let taken = tokio::time::timeout(NET, waiter)
        .await
        .expect("the waiter takes the released lease without the clock moving")
        .unwrap()
        .unwrap();
    assert!(
        taken.first_revision() > first,
        "the next holder's revision fences the last one's writes"
    );
    assert_eq!(b.holder_of(key).await.unwrap().as_deref(), Some("node-b"));
    // A wait bounded by the clock ends with who holds it.
    let c = {
        let a = a.clone();
        tokio::spawn(async move { a.acquire(key, Duration::from_secs(2)).await })
    };
    O::tick(&fx, Duration::from_secs(3)).await;
    let busy = tokio::time::timeout(NET, c)
        .await
        .expect("a bounded wait ends")
        .unwrap();
    assert!(
        matches!(&busy, Err(LeaseError::Busy { holder, .. }) if holder == "node-b"),
        "{busy:?}"
    );
    taken.release().await.unwrap();
    assert!(b.holder_of(key).await.unwrap().is_none());
}

pub(crate) async fn a_kept_lease_outlives_its_ttl_and_an_abandoned_one_expires_and_fences<
    O: Opener,
>() {
    let fx = fresh::<O>().await;
    let ttl = Duration::from_secs(3);
    let (a, b) = two_holders::<O>(&fx, ttl).await;
    let key = "session.s-2";
    let mut held = a.try_acquire(key).await.unwrap().unwrap();
    // Made after the take: it sees the renewals only.
    let mut renewals = O::again(&fx).await.watch("session.").await.unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let keeper = tokio::spawn(async move {
        tokio::select! {
            lost = held.keep() => Err(lost),
            _ = stopped => Ok(held),
        }
    });
    // Four renewals a third of the TTL apart: the lease has lived past its TTL.
    for n in 1..=4 {
        O::tick(&fx, ttl / 3).await;
        loop {
            let ev = tokio::time::timeout(NET, renewals.next())
                .await
                .unwrap_or_else(|_| panic!("renewal {n} in time"))
                .unwrap()
                .unwrap();
            if matches!(&ev, KvEvent::Put(e) if e.key == key) {
                break;
            }
        }
    }
    assert!(
        b.try_acquire(key).await.unwrap().is_none(),
        "a lease kept renewed is still held past its TTL"
    );
    stop.send(()).unwrap();
    let mut abandoned = tokio::time::timeout(NET, keeper)
        .await
        .unwrap()
        .unwrap()
        .expect("the lease was never lost while kept");
    let last = abandoned.revision();
    assert!(
        last > abandoned.first_revision(),
        "renewals move the revision"
    );
    // No more renewals: the store lets it go after its TTL, and another holder takes it.
    O::outlive(&fx, key, ttl).await;
    assert!(
        !abandoned.is_held(),
        "the old holder knows it no longer holds it"
    );
    let next = tokio::time::timeout(NET, b.acquire(key, Duration::from_secs(60)))
        .await
        .expect("the expired lease is taken")
        .unwrap();
    assert!(
        next.first_revision() > last,
        "revisions fence the old holder"
    );
    assert!(
        matches!(abandoned.renew().await, Err(LeaseError::Lost { .. })),
        "the old holder's renewal finds it lost"
    );
    assert!(
        matches!(abandoned.release().await, Err(LeaseError::Lost { .. })),
        "the old holder's release must not remove the new holder's lease"
    );
    assert_eq!(b.holder_of(key).await.unwrap().as_deref(), Some("node-b"));
}

/// Instantiates every test of the suite for a store.
#[macro_export]
macro_rules! kv_suite {
    ($opener:ty) => {
        $crate::kv_suite!(@tests $opener;
            create_only_when_absent,
            update_and_delete_compare_the_revision,
            a_key_with_a_ttl_is_gone_after_it_and_can_be_taken_again,
            a_lease_is_renewed_and_released_by_its_revision,
            watch_sees_changes_under_its_prefix_in_order,
            keys_lists_live_keys_under_a_prefix,
            bad_keys_and_ttls_are_refused,
            a_lease_has_one_holder_and_a_released_one_goes_to_a_waiter_at_once,
            a_kept_lease_outlives_its_ttl_and_an_abandoned_one_expires_and_fences,
        );
    };
    (@tests $opener:ty; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $name() {
                if !<$opener as kv::Opener>::available(stringify!($name)) {
                    return;
                }
                kv::$name::<$opener>().await
            }
        )*
    };
}
