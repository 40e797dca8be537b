//! The index rows' conformance suite, run against each implementation: the sled tree, a
//! key-value store on sled, and a JetStream KV bucket on a real `nats-server` (skipped without
//! one, unless `CI=true`). Two handles on one store stand for two nodes.

use super::{FinishedRun, IndexRows, KvIndex, SessionMeta, SledIndex};
use bus::kv::{KvStore, SledKv};
use bus::nats::{Nats, NatsKv, NatsOptions};
use clawbus_testkit::NatsServer;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// A node's handle on the rows of one store (`fixture` holds the store between handles).
struct Fixture {
    backend: &'static str,
    _dir: tempfile::TempDir,
    db: ::sled::Db,
    prefix: String,
}

impl Fixture {
    /// `None` (with `skipped:` printed) when the backend is NATS and no server can be started.
    fn new(backend: &'static str, test: &str) -> Option<Self> {
        if backend == "nats" && NatsServer::shared_or_skip(test).is_none() {
            return None;
        }
        static N: AtomicU64 = AtomicU64::new(0);
        let dir = tempfile::tempdir().unwrap();
        let db = ::sled::open(dir.path()).unwrap();
        let prefix = format!(
            "idx{}x{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        Some(Self {
            backend,
            _dir: dir,
            db,
            prefix,
        })
    }

    /// The store itself, as a key-value store (`None` for the sled tree).
    async fn kv(&self) -> Option<Arc<dyn KvStore>> {
        match self.backend {
            "sled" => None,
            "kv" => {
                let clock: Arc<dyn bus::Clock> = bus::ManualClock::new(0);
                Some(Arc::new(
                    SledKv::open(&self.db, "kv.sessions", clock).unwrap(),
                ))
            }
            _ => {
                let server = NatsServer::shared_or_skip("session index").unwrap();
                let mut opts = NatsOptions::new(server.url());
                opts.prefix = self.prefix.clone();
                let nats = Nats::connect(opts).await.unwrap();
                Some(Arc::new(NatsKv::open(&nats, "sessions").await.unwrap()))
            }
        }
    }

    /// A new handle (on NATS, a new connection: another node).
    async fn node(&self) -> Arc<dyn IndexRows> {
        match self.kv().await {
            Some(kv) => Arc::new(KvIndex::new(kv)),
            None => Arc::new(SledIndex::open(&self.db).unwrap()),
        }
    }
}

fn run(now_ms: u64, tokens_in: u64, tokens_out: u64) -> FinishedRun {
    FinishedRun {
        now_ms,
        tokens_in,
        tokens_out,
    }
}

async fn the_first_row_made_stands_on_every_node(backend: &'static str) {
    let Some(f) = Fixture::new(backend, "the_first_row_made_stands_on_every_node") else {
        return;
    };
    let (one, two) = (f.node().await, f.node().await);
    let key = "agent:chat:api:direct:a.b/c";
    assert!(two.get(key).await.unwrap().is_none(), "no row yet");
    let first = one.create(SessionMeta::new(key, "chat", 5)).await.unwrap();
    let second = two.create(SessionMeta::new(key, "chat", 9)).await.unwrap();
    assert_eq!(second, first, "the second creator gets the first row back");
    assert_eq!(two.get(key).await.unwrap(), Some(first.clone()));
    assert_eq!(one.get(key).await.unwrap(), Some(first));
}

async fn runs_counted_on_two_nodes_at_once_are_all_kept(backend: &'static str) {
    let Some(f) = Fixture::new(backend, "runs_counted_on_two_nodes_at_once_are_all_kept") else {
        return;
    };
    let (one, two) = (f.node().await, f.node().await);
    let key = "agent:chat:telegram:direct:42";
    one.create(SessionMeta::new(key, "chat", 1)).await.unwrap();
    const EACH: u64 = 15;
    let counting = |node: Arc<dyn IndexRows>, t: u64| async move {
        for i in 0..EACH {
            node.record_run(key, run(t + i, 10, 1)).await.unwrap();
        }
    };
    tokio::join!(counting(one.clone(), 100), counting(two.clone(), 200));
    let row = one.get(key).await.unwrap().unwrap();
    assert_eq!(row.turns, 2 * EACH, "no run lost: {row:?}");
    assert_eq!(
        (row.tokens_in, row.tokens_out),
        (20 * EACH, 2 * EACH),
        "{row:?}"
    );
    assert_eq!(two.get(key).await.unwrap(), Some(row));
}

async fn listings_show_every_nodes_rows_by_agent_most_recent_first(backend: &'static str) {
    let test = "listings_show_every_nodes_rows_by_agent_most_recent_first";
    let Some(f) = Fixture::new(backend, test) else {
        return;
    };
    let (one, two) = (f.node().await, f.node().await);
    for (node, key, agent) in [
        (&one, "agent:a:api:direct:old", "a"),
        (&two, "agent:a:api:direct:new", "a"),
        (&two, "agent:b:api:direct:x", "b"),
    ] {
        node.create(SessionMeta::new(key, agent, 1)).await.unwrap();
    }
    one.record_run("agent:a:api:direct:new", run(50, 0, 0))
        .await
        .unwrap();
    one.record_run("agent:b:api:direct:x", run(20, 0, 0))
        .await
        .unwrap();
    let keys = |rows: Vec<SessionMeta>| rows.into_iter().map(|m| m.key).collect::<Vec<_>>();
    for node in [&one, &two] {
        assert_eq!(
            keys(node.list(None).await.unwrap()),
            [
                "agent:a:api:direct:new",
                "agent:b:api:direct:x",
                "agent:a:api:direct:old"
            ]
        );
        assert_eq!(
            keys(node.list(Some("a")).await.unwrap()),
            ["agent:a:api:direct:new", "agent:a:api:direct:old"]
        );
    }
}

async fn a_run_for_a_missing_or_unreadable_row_is_an_error_and_changes_nothing(
    backend: &'static str,
) {
    let test = "a_run_for_a_missing_or_unreadable_row_is_an_error_and_changes_nothing";
    let Some(f) = Fixture::new(backend, test) else {
        return;
    };
    let node = f.node().await;
    let key = "agent:a:api:direct:x";
    assert!(node.record_run(key, run(1, 2, 3)).await.is_err());
    assert!(node.get(key).await.unwrap().is_none(), "no row made");
    // A row written by another version of the index: not a `SessionMeta` this build reads.
    let odd = br#"{"key":"agent:a:api:direct:x"}"#.to_vec();
    let read_back = match f.kv().await {
        Some(kv) => {
            let k = super::kv::store_key(key);
            kv.put(&k, odd.clone()).await.unwrap();
            kv.get(&k).await.unwrap().map(|e| e.value)
        }
        None => {
            let tree = f.db.open_tree("sessions").unwrap();
            tree.insert(key, odd.clone()).unwrap();
            tree.get(key).unwrap().map(|v| v.to_vec())
        }
    };
    assert_eq!(read_back.as_deref(), Some(&odd[..]));
    assert!(
        node.record_run(key, run(1, 2, 3)).await.is_err(),
        "the problem is reported"
    );
    let after = match f.kv().await {
        Some(kv) => kv
            .get(&super::kv::store_key(key))
            .await
            .unwrap()
            .map(|e| e.value),
        None => {
            f.db.open_tree("sessions")
                .unwrap()
                .get(key)
                .unwrap()
                .map(|v| v.to_vec())
        }
    };
    assert_eq!(
        after.as_deref(),
        Some(&odd[..]),
        "the row (the session's link to its transcript) is not deleted"
    );
}

async fn an_archive_mark_is_set_and_cleared_without_losing_counts(backend: &'static str) {
    let test = "an_archive_mark_is_set_and_cleared_without_losing_counts";
    let Some(f) = Fixture::new(backend, test) else {
        return;
    };
    let (one, two) = (f.node().await, f.node().await);
    let key = "agent:a:api:direct:x";
    assert_eq!(
        one.set_archived(key, Some(7)).await.unwrap(),
        None,
        "no row"
    );
    one.create(SessionMeta::new(key, "a", 1)).await.unwrap();
    one.record_run(key, run(5, 3, 2)).await.unwrap();
    let archived = two.set_archived(key, Some(7)).await.unwrap().unwrap();
    assert_eq!(archived.archived_ms, Some(7));
    assert!(archived.is_archived());
    assert_eq!((archived.turns, archived.tokens_in), (1, 3), "{archived:?}");
    assert_eq!(one.get(key).await.unwrap(), Some(archived));
    one.record_run(key, run(9, 1, 1)).await.unwrap();
    let cleared = two.set_archived(key, None).await.unwrap().unwrap();
    assert!(!cleared.is_archived());
    assert_eq!(cleared.turns, 2, "the run counted while archived stays");
    // The listing carries the mark; filtering is the reader's.
    one.set_archived(key, Some(11)).await.unwrap();
    let listed = two.list(None).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].archived_ms, Some(11));
}

async fn a_removed_row_is_gone_on_every_node(backend: &'static str) {
    let Some(f) = Fixture::new(backend, "a_removed_row_is_gone_on_every_node") else {
        return;
    };
    let (one, two) = (f.node().await, f.node().await);
    let key = "agent:a:api:direct:gone";
    assert!(!one.remove(key).await.unwrap(), "nothing to remove");
    let first = one.create(SessionMeta::new(key, "a", 1)).await.unwrap();
    assert!(two.remove(key).await.unwrap());
    assert_eq!(one.get(key).await.unwrap(), None);
    assert!(one.list(None).await.unwrap().is_empty());
    assert!(one.record_run(key, run(2, 0, 0)).await.is_err());
    let again = two.create(SessionMeta::new(key, "a", 3)).await.unwrap();
    assert_ne!(again.session_id, first.session_id, "a fresh session");
    assert_eq!(one.get(key).await.unwrap(), Some(again));
}

#[test]
fn a_row_written_before_archiving_existed_reads_as_not_archived() {
    let old = r#"{"key":"agent:a:api:direct:x","agent":"a","session_id":"0190b4b0-0000-7000-8000-000000000000","created_ms":1,"updated_ms":2,"turns":3,"tokens_in":4,"tokens_out":5}"#;
    let meta: SessionMeta = serde_json::from_str(old).unwrap();
    assert_eq!(meta.archived_ms, None);
    assert!(!meta.is_archived());
    let back = serde_json::to_string(&meta).unwrap();
    assert!(
        !back.contains("archived"),
        "an unarchived row is written as before: {back}"
    );
}

macro_rules! index_suite {
    ($($backend:ident),*) => {
        $(mod $backend {
            #[actix_rt::test]
            async fn the_first_row_made_stands_on_every_node() {
                super::the_first_row_made_stands_on_every_node(stringify!($backend)).await;
            }
            #[actix_rt::test]
            async fn runs_counted_on_two_nodes_at_once_are_all_kept() {
                super::runs_counted_on_two_nodes_at_once_are_all_kept(stringify!($backend)).await;
            }
            #[actix_rt::test]
            async fn listings_show_every_nodes_rows_by_agent_most_recent_first() {
                super::listings_show_every_nodes_rows_by_agent_most_recent_first(
                    stringify!($backend),
                )
                .await;
            }
            #[actix_rt::test]
            async fn an_archive_mark_is_set_and_cleared_without_losing_counts() {
                super::an_archive_mark_is_set_and_cleared_without_losing_counts(
                    stringify!($backend),
                )
                .await;
            }
            #[actix_rt::test]
            async fn a_removed_row_is_gone_on_every_node() {
                super::a_removed_row_is_gone_on_every_node(stringify!($backend)).await;
            }
            #[actix_rt::test]
            async fn a_run_for_a_missing_or_unreadable_row_is_an_error_and_changes_nothing() {
                super::a_run_for_a_missing_or_unreadable_row_is_an_error_and_changes_nothing(
                    stringify!($backend),
                )
                .await;
            }
        })*
    };
}

index_suite!(sled, kv, nats);

/// Two nodes' indexes (each its own sled rows) over one shared store.
fn two_nodes(dir: &std::path::Path) -> [super::SessionIndex; 2] {
    let clock: Arc<dyn bus::Clock> = bus::ManualClock::new(0);
    let shared = ::sled::open(dir.join("shared")).unwrap();
    let kv: Arc<dyn KvStore> = Arc::new(SledKv::open(&shared, "kv.sessions", clock).unwrap());
    [0, 1].map(|n| {
        let db = ::sled::open(dir.join(format!("node{n}"))).unwrap();
        super::SessionIndex::open(&db)
            .unwrap()
            .with_shared(kv.clone())
    })
}

/// A run enters its session in the cluster's rows: a row new on its node as it is; one the
/// node kept after the cluster's row was removed (a delete on another node) as a fresh session
/// (a new id, no runs, the node's row following it); counts from before the cluster had rows
/// come along once, and not again after a delete.
#[actix_rt::test]
async fn a_run_enters_a_new_row_as_it_is_and_a_row_deleted_elsewhere_as_a_fresh_session() {
    let dir = tempfile::tempdir().unwrap();
    let [one, two] = two_nodes(dir.path());
    let key = "agent:chat:api:direct:gone";
    let (mine, made) = one.get_or_create(key, "chat", 5).unwrap();
    assert!(made);
    assert!(!one.enter(key, "chat", 5, true).await.unwrap());
    assert_eq!(
        two.get(key).await.unwrap(),
        Some(mine.clone()),
        "entered as it is"
    );
    one.record_run(key, run(6, 1, 1)).await.unwrap();

    assert!(two.remove(key).await.unwrap(), "deleted on node 2");
    let (kept, made) = one.get_or_create(key, "chat", 7).unwrap();
    assert!(
        !made && kept.session_id == mine.session_id,
        "node 1 kept its row"
    );
    assert!(
        one.enter(key, "chat", 8, false).await.unwrap(),
        "a fresh one"
    );
    let fresh = two.get(key).await.unwrap().unwrap();
    assert_ne!(fresh.session_id, mine.session_id, "{fresh:?}");
    assert_eq!((fresh.turns, fresh.created_ms), (0, 8), "{fresh:?}");
    assert_eq!(one.local_session_id(key).unwrap(), Some(fresh.session_id));
    assert!(
        !one.enter(key, "chat", 9, false).await.unwrap(),
        "entered once"
    );

    let old = "agent:chat:api:direct:old";
    one.get_or_create(old, "chat", 1).unwrap();
    one.local.record_run(old, run(2, 30, 3)).await.unwrap();
    assert!(!one.enter(old, "chat", 10, false).await.unwrap());
    let carried = two.get(old).await.unwrap().unwrap();
    assert_eq!((carried.turns, carried.tokens_in), (1, 30), "{carried:?}");
    assert_eq!(
        one.local.row(old).unwrap().unwrap().turns,
        0,
        "counted once"
    );
    two.remove(old).await.unwrap();
    assert!(one.enter(old, "chat", 11, false).await.unwrap());
    assert_eq!(
        two.get(old).await.unwrap().unwrap().turns,
        0,
        "not carried again"
    );
}

/// Counts of runs that finish while NATS is away are held, in order, and recorded once it is
/// back: none lost, and a count made once it is back queues behind them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counts_of_runs_finished_while_nats_is_away_are_recorded_once_it_is_back() {
    let test = "counts_of_runs_finished_while_nats_is_away_are_recorded_once_it_is_back";
    let Some(mut server) = NatsServer::start_or_skip(test) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let nats = Nats::connect(NatsOptions::new(server.url())).await.unwrap();
    let kv: Arc<dyn KvStore> = Arc::new(NatsKv::open(&nats, "sessions").await.unwrap());
    let db = ::sled::open(dir.path()).unwrap();
    let index = super::SessionIndex::open(&db).unwrap().with_shared(kv);
    let key = "agent:chat:api:direct:away";
    index.get_or_create(key, "chat", 1).unwrap();
    index.enter(key, "chat", 1, true).await.unwrap();
    index.record_run(key, run(2, 10, 1)).await.unwrap();

    server.stop().unwrap();
    tokio::time::timeout(std::time::Duration::from_secs(60), async {
        while nats.link().connected {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    })
    .await
    .unwrap();
    for t in [3, 4] {
        index.record_run(key, run(t, 10, 1)).await.unwrap();
    }
    server.start_again().unwrap();
    index.record_run(key, run(5, 10, 1)).await.unwrap();
    tokio::time::timeout(std::time::Duration::from_secs(60), async {
        loop {
            if let Ok(Some(row)) = index.get(key).await
                && row.turns == 4
            {
                return row;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await
    .map(|row| {
        assert_eq!((row.tokens_in, row.updated_ms), (40, 5), "{row:?}");
    })
    .expect("the held counts reach the cluster's row");
    assert!(!index.held.any(), "nothing left held");
}
