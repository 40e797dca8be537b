use super::*;
use bus::{Bus, BusOptions, Clock, Subscription, SystemClock};

/// How long a test waits for an event that must come.
pub(crate) const NET: Duration = Duration::from_secs(20);

/// A store over a real bus and sled (the approval tests here and the `exec` ones in tools).
pub(crate) struct Fx {
    dir: tempfile::TempDir,
    db: sled::Db,
    pub(crate) bus: Arc<dyn Bus>,
    pub(crate) approvals: Approvals,
}

pub(crate) async fn fx() -> Fx {
    let dir = tempfile::tempdir().unwrap();
    let db = sled::open(dir.path().join("db")).unwrap();
    let bus = bus::open(BusOptions::default(), db.clone()).unwrap().bus;
    let approvals = Approvals::open(&db, bus.clone(), Arc::new(SystemClock)).unwrap();
    Fx {
        dir,
        db,
        bus,
        approvals,
    }
}

fn request(timeout: Duration) -> ApprovalRequest {
    ApprovalRequest {
        agent: "coder".into(),
        session: "s1".into(),
        command: "touch made".into(),
        argv: vec!["touch".into(), "made".into()],
        task_id: None,
        rule: "touch made".into(),
        timeout,
    }
}

impl Fx {
    pub(crate) async fn events(&self) -> Subscription {
        self.bus
            .subscribe(Topic::parse("approvals.>").unwrap())
            .await
            .unwrap()
    }
}

/// The next approval event: (`event`, record).
pub(crate) async fn next(sub: &mut Subscription) -> (String, ApprovalRecord) {
    let d = tokio::time::timeout(NET, sub.next())
        .await
        .expect("an approval event")
        .expect("the subscription is open");
    let p = &d.envelope().payload;
    assert_eq!(d.envelope().topic.as_str(), "approvals.coder");
    (
        p["event"].as_str().unwrap().to_string(),
        serde_json::from_value(p["approval"].clone()).unwrap(),
    )
}

#[actix_rt::test]
async fn an_answer_reaches_the_waiter_and_is_recorded() {
    let f = fx().await;
    let mut sub = f.events().await;
    let waiter = tokio::spawn({
        let a = f.approvals.clone();
        async move { a.ask(request(NET)).await }
    });
    let (event, rec) = next(&mut sub).await;
    assert_eq!(
        (event.as_str(), rec.state),
        ("requested", ApprovalState::Pending)
    );
    assert_eq!(
        f.approvals.list().await.unwrap(),
        std::slice::from_ref(&rec),
        "listed while pending"
    );
    let answered = f.approvals.resolve(&rec.id, true, false).await.unwrap();
    assert_eq!(answered.state, ApprovalState::Allowed);
    assert_eq!(
        waiter.await.unwrap().unwrap(),
        Answer::Allowed { always: false }
    );
    assert_eq!(next(&mut sub).await.0, "allowed");
    let again = f.approvals.resolve(&rec.id, false, false).await;
    assert!(
        matches!(
            again,
            Err(ApprovalError::Settled {
                state: ApprovalState::Allowed,
                ..
            })
        ),
        "{again:?}"
    );
    assert!(f.approvals.rules("coder").unwrap().is_empty(), "not always");
    assert!(matches!(
        f.approvals.resolve("nope", true, false).await,
        Err(ApprovalError::NotFound(_))
    ));
}

#[actix_rt::test]
async fn no_answer_in_time_is_a_denial_and_the_request_expires() {
    let f = fx().await;
    let mut sub = f.events().await;
    let answer = f
        .approvals
        .ask(request(Duration::from_millis(100)))
        .await
        .unwrap();
    assert_eq!(answer, Answer::TimedOut);
    let (_, rec) = next(&mut sub).await;
    assert_eq!(next(&mut sub).await.0, "expired");
    let stored = f.approvals.get(&rec.id).await.unwrap().unwrap();
    assert_eq!(stored.state, ApprovalState::Expired);
    assert!(matches!(
        f.approvals.resolve(&rec.id, true, true).await,
        Err(ApprovalError::Settled {
            state: ApprovalState::Expired,
            ..
        })
    ));
    assert!(f.approvals.rules("coder").unwrap().is_empty());
}

#[actix_rt::test]
async fn requests_left_pending_by_an_earlier_run_expire_on_open() {
    let f = fx().await;
    let mut sub = f.events().await;
    let waiter = tokio::spawn({
        let a = f.approvals.clone();
        async move { a.ask(request(NET)).await }
    });
    let (_, rec) = next(&mut sub).await;
    waiter.abort();
    let reopened = Approvals::open(&f.db, f.bus.clone(), Arc::new(SystemClock)).unwrap();
    assert_eq!(
        reopened.get(&rec.id).await.unwrap().unwrap().state,
        ApprovalState::Expired
    );
    drop(f.dir);
}

/// One shared store: on a key-value store on sled, or on a JetStream KV bucket (`nats`,
/// skipped without a server unless `CI=true`).
struct Store {
    dir: tempfile::TempDir,
    db: sled::Db,
    bus: Arc<dyn Bus>,
    clock: Arc<dyn Clock>,
    nats: Option<&'static clawbus_testkit::NatsServer>,
    prefix: String,
}

impl Store {
    /// Node `n` on the store, with a database of its own (its own copy of `always` entries).
    async fn node(&self, n: usize) -> Approvals {
        self.node_seeded(n, |_| {}).await
    }

    /// Node `n`, its database given to `seed` before it opens the store.
    async fn node_seeded(&self, n: usize, seed: impl FnOnce(&sled::Db)) -> Approvals {
        let own = sled::open(self.dir.path().join(format!("node{n}"))).unwrap();
        seed(&own);
        let kv: Arc<dyn bus::kv::KvStore> = match self.nats {
            Some(server) => {
                let mut opts = bus::nats::NatsOptions::new(server.url());
                opts.prefix = self.prefix.clone();
                let nats = bus::nats::Nats::connect(opts).await.unwrap();
                Arc::new(bus::nats::NatsKv::open(&nats, SHARED_STORE).await.unwrap())
            }
            None => Arc::new(
                bus::kv::SledKv::open(&self.db, "kv.approvals", self.clock.clone()).unwrap(),
            ),
        };
        Approvals::open_shared(&own, kv, self.bus.clone(), self.clock.clone())
            .await
            .unwrap()
    }
}

/// Two handles on one shared store, each its own node; `store` opens more.
struct Cluster {
    store: Store,
    bus: Arc<dyn Bus>,
    nodes: [Approvals; 2],
}

async fn cluster(backend: &str, test: &str) -> Option<Cluster> {
    let dir = tempfile::tempdir().unwrap();
    let db = sled::open(dir.path().join("db")).unwrap();
    let bus = bus::open(BusOptions::default(), db.clone()).unwrap().bus;
    let nats = match backend {
        "nats" => Some(clawbus_testkit::NatsServer::shared_or_skip(test)?),
        _ => None,
    };
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let prefix = format!(
        "appr{}x{}",
        std::process::id(),
        N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    let store = Store {
        dir,
        db,
        bus: bus.clone(),
        clock: Arc::new(SystemClock),
        nats,
        prefix,
    };
    let nodes = [store.node(0).await, store.node(1).await];
    Some(Cluster { store, bus, nodes })
}

/// Asked on node 1, listed and answered on node 2 (`always`), the answer reaches the run
/// waiting on node 1, the entry is kept where the run asked, and a second answer on either
/// node is refused: answered once.
async fn a_request_asked_on_one_node_is_answered_on_another(backend: &str) {
    let test = "a_request_asked_on_one_node_is_answered_on_another";
    let Some(c) = cluster(backend, test).await else {
        return;
    };
    let [one, two] = &c.nodes;
    let mut sub = c
        .bus
        .subscribe(Topic::parse("approvals.>").unwrap())
        .await
        .unwrap();
    let waiter = tokio::spawn({
        let a = one.clone();
        async move { a.ask(request(NET)).await }
    });
    let (_, rec) = next(&mut sub).await;
    let listed = two.list().await.unwrap();
    assert_eq!(listed, std::slice::from_ref(&rec), "node 2 lists it");
    assert_eq!(two.get(&rec.id).await.unwrap(), Some(rec.clone()));
    let answered = two.resolve(&rec.id, true, true).await.unwrap();
    assert_eq!(answered.state, ApprovalState::Allowed);
    let answer = tokio::time::timeout(NET, waiter)
        .await
        .expect("the answer reaches node 1")
        .unwrap()
        .unwrap();
    assert_eq!(answer, Answer::Allowed { always: true });
    assert_eq!(
        one.rules("coder").unwrap(),
        ["touch made"],
        "kept where asked"
    );
    for node in [one, two] {
        let again = node.resolve(&rec.id, false, false).await;
        assert!(
            matches!(
                again,
                Err(ApprovalError::Settled {
                    state: ApprovalState::Allowed,
                    ..
                })
            ),
            "{again:?}"
        );
        assert_eq!(
            node.get(&rec.id).await.unwrap().unwrap().state,
            ApprovalState::Allowed
        );
    }
}

/// Asked on node 1 and answered `always` on node 2: a third node started after lists the
/// entry among its agent's approved ones (it does not ask again), and so does a node whose
/// database had an entry of its own from before: that one is offered to the others too.
async fn an_always_answer_is_remembered_by_a_node_started_after(backend: &str) {
    let test = "an_always_answer_is_remembered_by_a_node_started_after";
    let Some(c) = cluster(backend, test).await else {
        return;
    };
    let [one, two] = &c.nodes;
    let mut sub = c
        .bus
        .subscribe(Topic::parse("approvals.>").unwrap())
        .await
        .unwrap();
    let waiter = tokio::spawn({
        let a = one.clone();
        async move { a.ask(request(NET)).await }
    });
    let (_, rec) = next(&mut sub).await;
    two.resolve(&rec.id, true, true).await.unwrap();
    let answer = tokio::time::timeout(NET, waiter).await.unwrap().unwrap();
    assert_eq!(answer.unwrap(), Answer::Allowed { always: true });
    let third = c.store.node(2).await;
    assert_eq!(
        third.rules("coder").unwrap(),
        ["touch made"],
        "not asked again"
    );

    let fourth = c
        .store
        .node_seeded(3, |own| {
            own.open_tree(RULES_TREE)
                .unwrap()
                .insert(
                    rule_key("coder", "ls -l"),
                    "0190a0b0-0000-7000-8000-000000000001",
                )
                .unwrap();
        })
        .await;
    assert_eq!(fourth.rules("coder").unwrap(), ["ls -l", "touch made"]);
    let fifth = c.store.node(4).await;
    assert_eq!(
        fifth.rules("coder").unwrap(),
        ["ls -l", "touch made"],
        "the fourth node's own entry is the cluster's"
    );
}

/// Both nodes answer one request at once, one allowing and one denying: exactly one answer
/// is applied, and it is the one the waiting run gets.
async fn two_nodes_answering_at_once_apply_one_answer(backend: &str) {
    let test = "two_nodes_answering_at_once_apply_one_answer";
    let Some(c) = cluster(backend, test).await else {
        return;
    };
    let [one, two] = &c.nodes;
    for round in 0..5 {
        let mut sub = c
            .bus
            .subscribe(Topic::parse("approvals.>").unwrap())
            .await
            .unwrap();
        let waiter = tokio::spawn({
            let a = one.clone();
            async move { a.ask(request(NET)).await }
        });
        // The answer of the round before may be published after its waiter had it.
        let rec = loop {
            let (event, rec) = next(&mut sub).await;
            if event == "requested" {
                break rec;
            }
        };
        let (allow, deny) = tokio::join!(
            one.resolve(&rec.id, true, false),
            two.resolve(&rec.id, false, false)
        );
        let applied = usize::from(allow.is_ok()) + usize::from(deny.is_ok());
        assert_eq!(
            applied, 1,
            "round {round}: one answer applied: {allow:?} {deny:?}"
        );
        let expected = if allow.is_ok() {
            Answer::Allowed { always: false }
        } else {
            Answer::Denied
        };
        let answer = tokio::time::timeout(NET, waiter)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(answer, expected, "round {round}");
    }
}

macro_rules! shared_suite {
    ($($backend:ident),*) => {
        $(mod $backend {
            #[actix_rt::test]
            async fn a_request_asked_on_one_node_is_answered_on_another() {
                super::a_request_asked_on_one_node_is_answered_on_another(stringify!($backend))
                    .await;
            }
            #[actix_rt::test]
            async fn an_always_answer_is_remembered_by_a_node_started_after() {
                super::an_always_answer_is_remembered_by_a_node_started_after(
                    stringify!($backend),
                )
                .await;
            }
            #[actix_rt::test]
            async fn two_nodes_answering_at_once_apply_one_answer() {
                super::two_nodes_answering_at_once_apply_one_answer(stringify!($backend)).await;
            }
        })*
    };
}

shared_suite!(kv, nats);

/// A request left pending on a shared store by a node that went away is marked `expired` when
/// a node opens the store, once past its due time; one still within it stays pending (its node
/// may still wait for it).
#[actix_rt::test]
async fn a_shared_request_past_its_due_time_expires_when_a_node_opens_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let db = sled::open(dir.path().join("db")).unwrap();
    let bus = bus::open(BusOptions::default(), db.clone()).unwrap().bus;
    let clock: Arc<dyn Clock> = bus::ManualClock::new(1_000_000);
    let kv: Arc<dyn bus::kv::KvStore> =
        Arc::new(bus::kv::SledKv::open(&db, "kv.approvals", clock.clone()).unwrap());
    let pending = |id: &str, expires_ms: u64| ApprovalRecord {
        id: id.to_string(),
        agent: "coder".into(),
        session: "s1".into(),
        command: "touch made".into(),
        argv: Vec::new(),
        task_id: None,
        rule: "touch made".into(),
        state: ApprovalState::Pending,
        created_ms: 900_000,
        expires_ms,
        resolved_ms: None,
        always: false,
    };
    let requests = store::KvRequests { kv: kv.clone() };
    requests.create(&pending("gone", 999_999)).await.unwrap();
    requests.create(&pending("alive", 1_060_000)).await.unwrap();
    let node = Approvals::open_shared(&db, kv, bus, clock).await.unwrap();
    let state = |rec: Option<ApprovalRecord>| rec.unwrap().state;
    assert_eq!(
        state(node.get("gone").await.unwrap()),
        ApprovalState::Expired
    );
    assert_eq!(
        state(node.get("alive").await.unwrap()),
        ApprovalState::Pending
    );
    assert!(
        node.get("no.such").await.unwrap().is_none(),
        "not a request id"
    );
}
