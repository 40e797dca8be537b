//! The bus conformance suite and the task store suite against NATS JetStream, on a real
//! `nats-server` (≥ 2.11) on loopback; each test gets its own prefix (streams, buckets, subjects),
//! derived from its state folder so a "restart" over the same folder finds the same state.
#![cfg(feature = "nats")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod conformance;
mod store;

use bus::nats::{Nats, NatsBus, NatsOptions, NatsTaskStore};
use bus::{Bus as _, Clock, ManualClock, Outcome, RequestId, TaskState, TaskStore};
use clawbus_testkit::NatsServer;
use std::hash::{Hash as _, Hasher as _};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// Short, so a task whose process died comes back quickly; running ones are marked every third.
const ACK_WAIT: Duration = Duration::from_secs(1);

fn prefix_of(dir: &Path) -> String {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    dir.hash(&mut h);
    format!("t{:016x}", h.finish())
}

fn server() -> &'static NatsServer {
    NatsServer::shared_or_skip("nats").expect("checked by `available` first")
}

async fn connect(dir: &Path) -> Nats {
    let mut opts = NatsOptions::new(server().url());
    opts.prefix = prefix_of(dir);
    opts.ack_wait = ACK_WAIT;
    Nats::connect(opts).await.expect("NATS must connect")
}

struct OnNats;

impl conformance::Backend for OnNats {
    type Bus = NatsBus;
    async fn open(dir: &Path, clock: Arc<ManualClock>, window: Duration) -> NatsBus {
        NatsBus::open(connect(dir).await, clock, window, 3)
            .await
            .expect("the NATS bus must open")
    }
    fn available(test: &str) -> bool {
        NatsServer::shared_or_skip(test).is_some()
    }
}

conformance_suite!(OnNats);

impl store::Opener for OnNats {
    async fn open(dir: &Path, clock: Arc<ManualClock>) -> Arc<dyn TaskStore> {
        let clock: Arc<dyn Clock> = clock;
        Arc::new(
            NatsTaskStore::open(&connect(dir).await, clock, store::WINDOW)
                .await
                .expect("the NATS task store must open"),
        )
    }
    fn available(test: &str) -> bool {
        NatsServer::shared_or_skip(test).is_some()
    }
}

store_suite!(OnNats);

fn rid(s: &str) -> RequestId {
    RequestId::parse(s).unwrap()
}

/// Two connections stand for two nodes: a task finished through one is seen by a `wait` on the
/// other, and a duplicate posted on the second is answered from the stored result.
#[actix_rt::test]
async fn wait_on_one_connection_sees_a_task_finished_through_another() {
    if NatsServer::shared_or_skip("wait_on_one_connection_sees_a_task_finished_through_another")
        .is_none()
    {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(conformance::T0);
    let window = Duration::from_secs(3600);
    let node1 = NatsBus::open(connect(dir.path()).await, clock.clone(), window, 3)
        .await
        .unwrap();
    let node2 = NatsBus::open(connect(dir.path()).await, clock.clone(), window, 3)
        .await
        .unwrap();
    let mut work = node2.consume(conformance::topic("agent.a")).await.unwrap();
    let admitted = node1
        .submit(conformance::task("agent.a", "r-x", "hi"))
        .await
        .unwrap();
    let waiter = {
        let node1 = node1.clone();
        actix_rt::spawn(async move { node1.wait(&rid("r-x"), conformance::NET).await })
    };
    let d = tokio::time::timeout(conformance::NET, work.next())
        .await
        .unwrap()
        .unwrap();
    assert!(d.start().await.unwrap());
    d.complete(Outcome::Succeeded {
        result: serde_json::json!("done on node 2"),
    })
    .await
    .unwrap();
    let seen = waiter.await.unwrap().unwrap();
    assert_eq!(seen.task_id, admitted.task.task_id);
    assert_eq!(
        (seen.state, seen.result().cloned()),
        (TaskState::Succeeded, Some(serde_json::json!("done on node 2"))),
        "node 1's wait must see the outcome node 2 recorded"
    );
    // Half an hour on (by the store's clock), node 2 answers the stored result from KV: the
    // stream's dedup window only guards a publish sent twice.
    clock.advance(Duration::from_secs(1800));
    let again = node2
        .submit(conformance::task("agent.a", "r-x", "hi"))
        .await
        .unwrap();
    assert!(again.duplicate, "a duplicate is answered from the KV store");
    assert_eq!(again.task.result(), seen.result());
}
