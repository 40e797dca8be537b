//! The delivery actor on a manual clock: retries are due on the injected clock, bounded, and
//! every outcome is recorded; silent replies are never sent.

use super::*;
use crate::channels::OutboundMessage;
use bus::{LocalBus, LocalOptions, ManualClock};
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
    handle: DeliveryHandle,
    clock: Arc<ManualClock>,
    records: DeliveryRecords,
    tries: mpsc::UnboundedReceiver<String>,
    _dir: tempfile::TempDir,
}

async fn rig(script: Vec<Result<(), SendError>>, attempts: u32, max_part: usize) -> Rig {
    let dir = tempfile::tempdir().unwrap();
    let db = sled::open(dir.path().join("db")).unwrap();
    let bus: Arc<dyn Bus> =
        Arc::new(LocalBus::with_db(db.clone(), LocalOptions::default()).unwrap());
    let clock = ManualClock::new(T0);
    let records = DeliveryRecords::open(&db).unwrap();
    let (tx, tries) = mpsc::unbounded_channel();
    let sink = Arc::new(ScriptedSink {
        script: Mutex::new(script.into()),
        tries: tx,
        max_part,
    });
    let deps = DeliveryDeps {
        bus,
        clock: clock.clone(),
        records: records.clone(),
        backoff: Backoff {
            first: Duration::from_secs(1),
            max: Duration::from_secs(60),
            attempts,
        },
        jitter: || 1.0,
        metrics: crate::metrics::Metrics::new(),
    };
    let handle = DeliveryHandle::start("demo", sink, deps).await.unwrap();
    Rig {
        handle,
        clock,
        records,
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
                let r = self.records.list().unwrap();
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
