//! The bus conformance suite and the task store suite against NATS JetStream, on a real
//! `nats-server` (≥ 2.11) on loopback; each test gets its own prefix (streams, buckets, subjects),
//! derived from its state folder so a "restart" over the same folder finds the same state.
#![cfg(feature = "nats")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod conformance;
mod nats_faults;
mod store;

use bus::nats::{Nats, NatsBus, NatsKv, NatsLog, NatsOptions, NatsTaskStore};
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
        (
            TaskState::Succeeded,
            Some(serde_json::json!("done on node 2"))
        ),
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

mod kv;

impl kv::Opener for OnNats {
    async fn open(dir: &Path, _clock: Arc<ManualClock>) -> Arc<dyn bus::kv::KvStore> {
        Arc::new(NatsKv::open(&connect(dir).await, "kv").await.unwrap())
    }
    async fn again(fx: &kv::Fixture) -> Arc<dyn bus::kv::KvStore> {
        Self::open(fx.dir.path(), fx.clock.clone()).await
    }
    /// Waits for the server's marker of `key`'s expiry (per-key TTL, ≥ 2.11), watched on a
    /// connection of its own.
    async fn outlive(fx: &kv::Fixture, key: &str, _ttl: Duration) {
        let other = Self::open(fx.dir.path(), fx.clock.clone()).await;
        let prefix = match key.rfind('.') {
            Some(i) => &key[..=i],
            None => "",
        };
        let mut watch = other.watch(prefix).await.unwrap();
        if other.get(key).await.unwrap().is_none() {
            return;
        }
        loop {
            let ev = tokio::time::timeout(kv::NET, futures::StreamExt::next(&mut watch))
                .await
                .expect("the server must remove the key after its TTL")
                .unwrap()
                .unwrap();
            if matches!(&ev, bus::kv::KvEvent::Deleted { key: k } if k == key) {
                return;
            }
        }
    }
    /// The server decides expiries in real time: leases time their renewals on it too.
    fn lease_clock(_fx: &kv::Fixture) -> Arc<dyn Clock> {
        Arc::new(bus::SystemClock)
    }
    async fn tick(_fx: &kv::Fixture, _by: Duration) {}
    async fn waiting(_fx: &kv::Fixture) {}
    fn available(test: &str) -> bool {
        NatsServer::shared_or_skip(test).is_some()
    }
}

kv_suite!(OnNats);

/// A task goes into the work stream with `Nats-Msg-Id` = its request id, and a second publish
/// of that id inside the stream's window is dropped by the server.
#[actix_rt::test]
async fn a_task_is_published_with_its_request_id_as_nats_msg_id() {
    if NatsServer::shared_or_skip("a_task_is_published_with_its_request_id_as_nats_msg_id")
        .is_none()
    {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let nats = connect(dir.path()).await;
    let bus = NatsBus::open(
        nats,
        ManualClock::new(conformance::T0),
        Duration::from_secs(60),
        3,
    )
    .await
    .unwrap();
    bus.submit(conformance::task("agent.a", "r-msgid", "x"))
        .await
        .unwrap();
    let client = async_nats::connect(server().url()).await.unwrap();
    let js = async_nats::jetstream::new(client);
    let stream = js
        .get_stream(format!("{}_work", prefix_of(dir.path())))
        .await
        .unwrap();
    let stored = stream.get_raw_message(1).await.unwrap();
    let id = stored
        .headers
        .get("Nats-Msg-Id")
        .map(|v| v.as_str().to_string());
    assert_eq!(id.as_deref(), Some("r-msgid"));
    let again = async_nats::jetstream::message::PublishMessage::build()
        .message_id("r-msgid")
        .payload(stored.payload.clone());
    let ack = js
        .send_publish(stored.subject.to_string(), again)
        .await
        .unwrap()
        .await
        .unwrap();
    assert!(
        ack.duplicate,
        "the stream drops a second publish of the same request id"
    );
}

mod log;

impl log::Opener for OnNats {
    /// A new connection each time: another node on the same logs.
    async fn open(dir: &Path) -> Arc<dyn bus::log::LogStore> {
        Arc::new(NatsLog::open(&connect(dir).await, "tx").await.unwrap())
    }
    fn available(test: &str) -> bool {
        NatsServer::shared_or_skip(test).is_some()
    }
}

log_suite!(OnNats);
