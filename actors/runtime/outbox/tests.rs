//! The shared outbox's claims, expiry and adoption, against a key-value store on sled (time on
//! a manual clock) and a JetStream KV bucket on a real `nats-server` (skipped without one,
//! unless `CI=true`). Two outboxes on one store, each with its own database, stand for two
//! nodes; a node's heartbeat is its key in the nodes store.

use super::{DeliveryRecord, DeliveryState, OutboundMessage, Outbox, SharedOutbox};
use bus::kv::{KvStore, SledKv};
use bus::nats::{Nats, NatsKv, NatsOptions};
use bus::{Clock, ManualClock};
use clawbus_testkit::NatsServer;
use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

const CLAIM_TTL: Duration = Duration::from_secs(1);
/// The longest wait for a lapsed claim to show (JetStream expires keys on its own timer).
const LAPSE_WITHIN: Duration = Duration::from_secs(20);

/// The stores two nodes share, and each node's own database.
struct Cluster {
    _dir: tempfile::TempDir,
    manual: Option<Arc<ManualClock>>,
    nodes: Arc<dyn KvStore>,
    outboxes: [Outbox; 2],
}

impl Cluster {
    /// `None` (with `skipped:` printed) when the backend is NATS and no server can be started.
    async fn new(backend: &str, test: &str) -> Option<Self> {
        static N: AtomicU64 = AtomicU64::new(0);
        let dir = tempfile::tempdir().unwrap();
        let shared = sled::open(dir.path().join("shared")).unwrap();
        let manual = (backend == "kv").then(|| ManualClock::new(1_700_000_000_000));
        let clock: Arc<dyn Clock> = match &manual {
            Some(m) => m.clone(),
            None => Arc::new(bus::SystemClock),
        };
        let server = match backend {
            "nats" => Some(NatsServer::shared_or_skip(test)?),
            _ => None,
        };
        let prefix = format!(
            "obx{}x{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        // One connection per node on NATS; one store on sled.
        let open = async |name: &str| -> Arc<dyn KvStore> {
            match server {
                Some(server) => {
                    let mut opts = NatsOptions::new(server.url());
                    opts.prefix = prefix.clone();
                    let nats = Nats::connect(opts).await.unwrap();
                    let kv: Arc<dyn KvStore> = Arc::new(NatsKv::open(&nats, name).await.unwrap());
                    kv
                }
                None => {
                    let kv = SledKv::open(&shared, &format!("kv.{name}"), clock.clone()).unwrap();
                    let kv: Arc<dyn KvStore> = Arc::new(kv);
                    kv
                }
            }
        };
        let (outbox_kv, nodes, records) = if server.is_some() {
            (None, open("nodes").await, None)
        } else {
            (
                Some(open("outbox").await),
                open("nodes").await,
                Some(open("deliveries").await),
            )
        };
        let mut outboxes = Vec::new();
        for n in 1..=2 {
            let own = sled::open(dir.path().join(format!("n{n}"))).unwrap();
            let kv = match &outbox_kv {
                Some(kv) => kv.clone(),
                None => open("outbox").await,
            };
            let rec = match &records {
                Some(kv) => kv.clone(),
                None => open("deliveries").await,
            };
            let node = format!("n{n}");
            let shared = SharedOutbox::new(
                kv,
                nodes.clone(),
                |node| format!("node.{node}"),
                clock.clone(),
                node.clone(),
                format!("{node}/life"),
                CLAIM_TTL,
            );
            outboxes.push(
                Outbox::open(&own, Default::default())
                    .unwrap()
                    .with_shared(shared, rec),
            );
        }
        for n in ["n1", "n2"] {
            nodes
                .put(&format!("node.{n}"), b"{}".to_vec())
                .await
                .unwrap();
        }
        Some(Self {
            _dir: dir,
            manual,
            nodes,
            outboxes: outboxes.try_into().ok().unwrap(),
        })
    }

    /// Node `node` dies: its heartbeat goes.
    async fn dies(&self, node: &str) {
        self.nodes
            .delete(&format!("node.{node}"), None)
            .await
            .unwrap();
    }

    /// What `outbox` adopts once the claims lapsed (the manual clock moved past their time to
    /// live; on NATS, polled until the server expired them).
    async fn adopted_after_lapse(&self, outbox: &Outbox) -> Vec<OutboundMessage> {
        if let Some(clock) = &self.manual {
            clock.advance(CLAIM_TTL + Duration::from_millis(1));
            return adoptable(outbox).await;
        }
        // Polled every 100 ms, up to LAPSE_WITHIN.
        let mut found = Vec::new();
        for _ in 0..LAPSE_WITHIN.as_millis() / 100 {
            found = adoptable(outbox).await;
            if !found.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        found
    }
}

async fn adoptable(outbox: &Outbox) -> Vec<OutboundMessage> {
    outbox.adoptable("webhook", &HashSet::new()).await.unwrap()
}

fn reply(n: u128) -> OutboundMessage {
    OutboundMessage {
        to: Some("deploys".into()),
        text: format!("reply {n}"),
        task_id: Some(uuid::Uuid::from_u128(n)),
        job: None,
    }
}

fn delivered(msg: &OutboundMessage) -> DeliveryRecord {
    DeliveryRecord {
        channel: "webhook".into(),
        to: "deploys".into(),
        task_id: msg.task_id,
        job: None,
        state: DeliveryState::Delivered,
        attempts: 1,
        parts: 1,
        error: None,
        ended_ms: 1,
    }
}

/// Node 1 stages and claims a reply; node 2 can neither claim nor adopt it while the claim is
/// renewed. Node 1 dies mid-delivery (its claim no longer renewed): once the claim lapsed node
/// 2 adopts it, claims it (node 1 can no longer), delivers and records it; the record shows on
/// node 1 too, and nothing is left to adopt or resume.
async fn a_lapsed_claim_is_adopted_by_another_node_once(backend: &str) {
    let test = "a_lapsed_claim_is_adopted_by_another_node_once";
    let Some(c) = Cluster::new(backend, test).await else {
        return;
    };
    let [one, two] = &c.outboxes;
    let msg = reply(1);
    one.stage("webhook", &msg).await.unwrap();
    assert_eq!(
        one.pending("webhook").await.unwrap(),
        std::slice::from_ref(&msg),
        "node 1's own"
    );
    assert!(
        two.pending("webhook").await.unwrap().is_empty(),
        "not node 2's"
    );
    assert!(adoptable(two).await.is_empty(), "node 1 is alive");

    let claim = one.claim("webhook", &msg).await.unwrap().expect("claimed");
    assert!(
        two.claim("webhook", &msg).await.unwrap().is_none(),
        "held by node 1"
    );
    assert!(adoptable(two).await.is_empty(), "the claim is live");

    claim.abandon();
    let found = c.adopted_after_lapse(two).await;
    assert_eq!(
        found,
        std::slice::from_ref(&msg),
        "adopted once the claim lapsed"
    );
    let taken = two
        .claim("webhook", &msg)
        .await
        .unwrap()
        .expect("node 2 claims it");
    assert!(
        one.claim("webhook", &msg).await.unwrap().is_none(),
        "node 2's now"
    );
    assert!(adoptable(one).await.is_empty(), "node 2's claim is live");

    two.settle("webhook", &msg, &delivered(&msg), taken).await;
    let seen = one.records().list(10).await.unwrap();
    assert_eq!(seen, [delivered(&msg)], "node 2's record, seen from node 1");
    assert!(one.pending("webhook").await.unwrap().is_empty());
    assert!(adoptable(one).await.is_empty());
    assert!(
        one.claim("webhook", &msg).await.unwrap().is_none(),
        "delivered: nothing to claim"
    );
}

/// An entry whose node died before claiming it is adopted at once by the other node (never
/// while its node is alive), in the order the entries were staged.
async fn entries_of_a_node_that_died_before_claiming_are_adopted_in_order(backend: &str) {
    let test = "entries_of_a_node_that_died_before_claiming_are_adopted_in_order";
    let Some(c) = Cluster::new(backend, test).await else {
        return;
    };
    let [one, two] = &c.outboxes;
    let staged = [reply(3), reply(2)];
    for msg in &staged {
        one.stage("webhook", msg).await.unwrap();
    }
    // Staged again (a repeated hand-over): one entry, its place kept.
    one.stage("webhook", &staged[0]).await.unwrap();
    assert!(adoptable(two).await.is_empty(), "node 1 is alive");
    c.dies("n1").await;
    assert_eq!(adoptable(two).await, staged, "in the order staged");
    let in_hand: HashSet<String> = staged[0].delivery_id().into_iter().collect();
    assert_eq!(
        two.adoptable("webhook", &in_hand).await.unwrap(),
        [staged[1].clone()],
        "one being delivered here is left out"
    );
    for msg in &staged {
        let claim = two.claim("webhook", msg).await.unwrap().expect("claimed");
        two.settle("webhook", msg, &delivered(msg), claim).await;
    }
    assert!(adoptable(two).await.is_empty());
    assert_eq!(one.records().list(10).await.unwrap().len(), 2);
}

mod kv {
    #[tokio::test]
    async fn a_lapsed_claim_is_adopted_by_another_node_once() {
        super::a_lapsed_claim_is_adopted_by_another_node_once("kv").await;
    }

    #[tokio::test]
    async fn entries_of_a_node_that_died_before_claiming_are_adopted_in_order() {
        super::entries_of_a_node_that_died_before_claiming_are_adopted_in_order("kv").await;
    }
}

mod nats {
    #[tokio::test]
    async fn a_lapsed_claim_is_adopted_by_another_node_once() {
        super::a_lapsed_claim_is_adopted_by_another_node_once("nats").await;
    }

    #[tokio::test]
    async fn entries_of_a_node_that_died_before_claiming_are_adopted_in_order() {
        super::entries_of_a_node_that_died_before_claiming_are_adopted_in_order("nats").await;
    }
}
