//! The delivery actor on a manual clock: retries are due on the injected clock, bounded, and
//! every outcome is recorded; silent replies are never sent.

use super::*;
use bus::{BusOptions, ManualClock};
use clawbus_runtime::outbox::OutboundMessage;
use clawbus_runtime::outbox::record::DeliveryRecords;
use std::collections::VecDeque;
use std::sync::Mutex;
use tokio::sync::mpsc;

const T0: u64 = 1_700_000_000_000;
const WAIT: Duration = Duration::from_secs(10);

/// A sink that answers from a script (then succeeds) and reports each try.
struct ScriptedSink {
    script: Mutex<VecDeque<Result<(), SendError>>>,
    tries: mpsc::UnboundedSender<String>,
    max_part: usize,
}

#[async_trait::async_trait]
impl Sink for ScriptedSink {
    fn parts(&self, text: &str) -> Vec<String> {
        text.as_bytes()
            .chunks(self.max_part)
            .map(|c| String::from_utf8_lossy(c).into_owned())
            .collect()
    }

    async fn send(&self, _: &OutboundMessage, _: &str, part: &str) -> Result<(), SendError> {
        let _ = self.tries.send(part.to_string());
        let next = self.script.lock().unwrap().pop_front();
        next.unwrap_or(Ok(()))
    }
}

fn transient() -> Result<(), SendError> {
    Err(SendError::Transient {
        reason: "HTTP 500".into(),
        retry_after: None,
    })
}

struct Rig {
    bus: Arc<dyn Bus>,
    handle: DeliveryHandle,
    clock: Arc<ManualClock>,
    records: DeliveryRecords,
    outbox: clawbus_runtime::outbox::Outbox,
    tries: mpsc::UnboundedReceiver<String>,
    _dir: tempfile::TempDir,
}

async fn rig(script: Vec<Result<(), SendError>>, attempts: u32, max_part: usize) -> Rig {
    rig_with_outbox(script, attempts, max_part, Vec::new(), None).await
}

/// A rig whose outbox holds `staged` (as a killed daemon left it) before the actor starts.
async fn rig_with_outbox(
    script: Vec<Result<(), SendError>>,
    attempts: u32,
    max_part: usize,
    staged: Vec<OutboundMessage>,
    node: Option<&str>,
) -> Rig {
    let dir = tempfile::tempdir().unwrap();
    let db = sled::open(dir.path().join("db")).unwrap();
    let bus: Arc<dyn Bus> = bus::open(BusOptions::default(), db.clone()).unwrap().bus;
    let clock = ManualClock::new(T0);
    let mut outbox = clawbus_runtime::outbox::Outbox::open(&db, Default::default()).unwrap();
    if let Some(node) = node {
        outbox = outbox.on_node(node);
    }
    for msg in &staged {
        outbox.stage("demo", msg).await.unwrap();
    }
    let records = outbox.records().clone();
    let (tx, tries) = mpsc::unbounded_channel();
    let sink = Arc::new(ScriptedSink {
        script: Mutex::new(script.into()),
        tries: tx,
        max_part,
    });
    let bus_for_rig = bus.clone();
    let deps = DeliveryDeps {
        bus,
        clock: clock.clone(),
        outbox: outbox.clone(),
        backoff: Backoff {
            first: Duration::from_secs(1),
            max: Duration::from_secs(60),
            attempts,
        },
        jitter: || 1.0,
        metrics: clawbus_runtime::metrics::Metrics::new(),
    };
    let handle = DeliveryHandle::start("demo", sink, deps).await.unwrap();
    Rig {
        bus: bus_for_rig,
        handle,
        clock,
        records,
        outbox,
        tries,
        _dir: dir,
    }
}

fn message(text: &str) -> OutboundMessage {
    OutboundMessage {
        to: Some("42".into()),
        text: text.into(),
        task_id: None,
        job: None,
    }
}

impl Rig {
    async fn next_try(&mut self) -> String {
        tokio::time::timeout(WAIT, self.tries.recv())
            .await
            .expect("a try within the wait")
            .unwrap()
    }

    /// Waits until the pending delivery has settled its last try (not in flight).
    async fn settled(&self) -> Vec<PendingView> {
        tokio::time::timeout(WAIT, async {
            loop {
                let pending = self.handle.pending().await.unwrap();
                if pending.iter().all(|p| !p.in_flight) {
                    return pending;
                }
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("the try settles")
    }

    async fn records(&self) -> Vec<DeliveryRecord> {
        tokio::time::timeout(WAIT, async {
            loop {
                let r = self.records.list(usize::MAX).await.unwrap();
                if !r.is_empty() {
                    return r;
                }
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("a record")
    }
}

#[test]
fn backoff_doubles_up_to_the_cap_and_honours_retry_after() {
    let b = Backoff {
        first: Duration::from_secs(1),
        max: Duration::from_secs(5),
        attempts: 6,
    };
    let waits: Vec<u64> = (1..=5).map(|n| b.delay(n, 1.0, None).as_secs()).collect();
    assert_eq!(waits, [1, 2, 4, 5, 5]);
    assert_eq!(b.delay(1, 0.8, None), Duration::from_millis(800));
    assert_eq!(
        b.delay(1, 9.0, None),
        Duration::from_millis(1200),
        "jitter is clamped"
    );
    assert_eq!(
        b.delay(1, 1.0, Some(Duration::from_secs(30))),
        Duration::from_secs(30),
        "the server's retry_after wins when longer"
    );
    assert!(!b.exhausted(5) && b.exhausted(6));
}

#[actix_rt::test]
async fn a_failed_try_is_retried_when_the_injected_clock_says_so() {
    let mut rig = rig(vec![transient(), transient()], 5, 100).await;
    rig.handle.enqueue(message("hello")).await.unwrap();
    assert_eq!(rig.next_try().await, "hello");
    let pending = rig.settled().await;
    assert_eq!(
        pending[0].due_ms,
        T0 + 1000,
        "first retry after the base wait"
    );

    // Not due yet: a tick starts nothing.
    rig.clock.advance(Duration::from_millis(999));
    rig.handle.tick().await.unwrap();
    assert!(!rig.handle.pending().await.unwrap()[0].in_flight);

    rig.clock.advance(Duration::from_millis(1));
    rig.handle.tick().await.unwrap();
    assert_eq!(rig.next_try().await, "hello");
    let pending = rig.settled().await;
    assert_eq!(
        pending[0].due_ms,
        T0 + 1000 + 2000,
        "the wait doubles after the second failure"
    );
    rig.clock.advance(Duration::from_secs(2));
    rig.handle.tick().await.unwrap();
    assert_eq!(rig.next_try().await, "hello");
    let records = rig.records().await;
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].state, DeliveryState::Delivered);
    assert_eq!(records[0].attempts, 3);
    assert!(rig.handle.pending().await.unwrap().is_empty());
}

#[actix_rt::test]
async fn the_last_allowed_try_failing_is_recorded_never_dropped() {
    let mut rig = rig(vec![transient(), transient(), transient()], 2, 100).await;
    rig.handle.enqueue(message("hello")).await.unwrap();
    rig.next_try().await;
    rig.settled().await;
    rig.clock.advance(Duration::from_secs(1));
    rig.handle.tick().await.unwrap();
    rig.next_try().await;
    let records = rig.records().await;
    assert_eq!(records[0].state, DeliveryState::Failed);
    assert_eq!(records[0].attempts, 2);
    assert_eq!(records[0].error.as_deref(), Some("HTTP 500"));
    assert!(rig.handle.pending().await.unwrap().is_empty());
}

#[actix_rt::test]
async fn a_permanent_failure_ends_at_once_and_parts_go_in_order() {
    let permanent = Err(SendError::Permanent {
        reason: "chat not found".into(),
    });
    let mut rig = rig(vec![Ok(()), permanent], 5, 3).await;
    rig.handle.enqueue(message("abcdef")).await.unwrap();
    assert_eq!(rig.next_try().await, "abc");
    assert_eq!(rig.next_try().await, "def");
    let records = rig.records().await;
    assert_eq!(records[0].state, DeliveryState::Failed);
    assert_eq!(records[0].attempts, 2);
    assert_eq!(records[0].parts, 2);
}

#[actix_rt::test]
async fn no_reply_and_heartbeat_acks_are_never_sent() {
    let mut rig = rig(vec![], 5, 100).await;
    for text in [
        "NO_REPLY",
        "  NO_REPLY\n",
        "HEARTBEAT_OK",
        "HEARTBEAT_OK all quiet",
        "",
    ] {
        rig.handle.enqueue(message(text)).await.unwrap();
    }
    rig.handle.enqueue(message("real news")).await.unwrap();
    assert_eq!(
        rig.next_try().await,
        "real news",
        "only the real text is sent"
    );
    assert!(rig.tries.try_recv().is_err());
}

fn reply(task: u128, text: &str) -> OutboundMessage {
    OutboundMessage {
        task_id: Some(uuid::Uuid::from_u128(task)),
        ..message(text)
    }
}

#[actix_rt::test]
async fn pending_outbox_entries_are_delivered_in_order_on_start_and_then_removed() {
    let staged = vec![reply(1, "first"), reply(2, "second")];
    let mut rig = rig_with_outbox(Vec::new(), 5, 100, staged, None).await;
    assert_eq!(rig.next_try().await, "first");
    assert_eq!(rig.next_try().await, "second");
    tokio::time::timeout(WAIT, async {
        while rig.records.list(usize::MAX).await.unwrap().len() < 2 {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("both recorded");
    assert!(rig.outbox.pending("demo").await.unwrap().is_empty());
}

#[actix_rt::test]
async fn a_reply_handed_over_twice_is_one_outbox_entry_and_one_delivery() {
    // Held in retries, so the second hand-over finds the first still being delivered.
    let mut rig = rig(vec![transient()], 5, 100).await;
    rig.outbox.stage("demo", &reply(7, "once")).await.unwrap();
    rig.outbox.stage("demo", &reply(7, "once")).await.unwrap();
    assert_eq!(rig.outbox.pending("demo").await.unwrap().len(), 1);
    rig.handle.enqueue(reply(7, "once")).await.unwrap();
    assert_eq!(rig.next_try().await, "once");
    rig.handle.enqueue(reply(7, "once")).await.unwrap();
    assert_eq!(rig.settled().await.len(), 1, "one delivery");
    rig.clock.advance(Duration::from_secs(1));
    rig.handle.tick().await.unwrap();
    assert_eq!(rig.next_try().await, "once");
    assert_eq!(rig.records().await.len(), 1);
    assert!(rig.outbox.pending("demo").await.unwrap().is_empty());
    assert!(rig.tries.try_recv().is_err(), "no third try");
}

#[actix_rt::test]
async fn a_message_to_a_channel_without_delivery_actor_is_recorded_no_channel() {
    // The task's `delivery_failed` event is covered by the cron scenario (a real task).
    let dir = tempfile::tempdir().unwrap();
    let db = sled::open(dir.path().join("db")).unwrap();
    let bus = bus::open(BusOptions::default(), db.clone()).unwrap().bus;
    let outbox = clawbus_runtime::outbox::Outbox::open(&db, Default::default()).unwrap();
    let clock: Arc<dyn Clock> = ManualClock::new(T0);
    outbox
        .hand_over(&*bus, &clock, "telegram", reply(9, "hello"))
        .await;
    let records = outbox.records().list(usize::MAX).await.unwrap();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].state, DeliveryState::Failed);
    assert_eq!(records[0].error.as_deref(), Some("no_channel"));
    assert!(
        outbox.pending("telegram").await.unwrap().is_empty(),
        "not staged"
    );
}

/// On a shared bus every node's delivery actor hears `channel.<name>.out`: a message another
/// node's outbox staged and published is that node's to send, one this node's outbox published
/// is sent here (and one that names no node, from the embedded bus, too).
#[actix_rt::test]
async fn a_message_staged_on_another_node_is_left_to_that_node() {
    let mut rig = rig_with_outbox(Vec::new(), 3, 100, Vec::new(), Some("n1")).await;
    let dir = tempfile::tempdir().unwrap();
    let db = sled::open(dir.path().join("db")).unwrap();
    let n2 = clawbus_runtime::outbox::Outbox::open(&db, Default::default())
        .unwrap()
        .on_node("n2");
    n2.publish(&*rig.bus, "demo", &message("from n2")).await;
    rig.outbox
        .publish(&*rig.bus, "demo", &message("from n1"))
        .await;
    assert_eq!(rig.next_try().await, "from n1");
    assert!(
        rig.tries.try_recv().is_err(),
        "the message n2 published (heard first) was not sent here"
    );
    let headless = clawbus_runtime::outbox::Outbox::open(&db, Default::default()).unwrap();
    headless
        .publish(&*rig.bus, "demo", &message("from one node"))
        .await;
    assert_eq!(rig.next_try().await, "from one node");
}
