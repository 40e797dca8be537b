//! `Delivery` settlement, against a backend side that can fail.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use async_trait::async_trait;
use bus::backend::Acker;
use bus::{BusError, Delivery, Envelope, Outcome, RequestId, Settle, Topic};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A backend whose store fails every settlement, counting redelivery requests.
#[derive(Default)]
struct BrokenStore {
    abandoned: AtomicUsize,
}

#[async_trait]
impl Acker for BrokenStore {
    async fn start(&self, _: &Envelope) -> Result<bool, BusError> {
        Ok(true)
    }
    async fn settle(&self, _: &Envelope, _: Settle) -> Result<(), BusError> {
        Err(BusError::storage("flush", "no space left on device"))
    }
    fn abandon(&self, _: &Envelope) {
        self.abandoned.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn a_settlement_the_store_did_not_take_leaves_the_task_to_be_redelivered() {
    let store = Arc::new(BrokenStore::default());
    let env = Envelope::task(
        Topic::parse("agent.a").unwrap(),
        RequestId::parse("r-broken").unwrap(),
        serde_json::json!({ "text": "x" }),
    );
    let delivery = Delivery::new(env, Some(store.clone()));
    let outcome = Outcome::Succeeded {
        result: serde_json::json!("done"),
    };
    assert!(futures::executor::block_on(delivery.complete(outcome)).is_err());
    assert!(!delivery.is_settled(), "a failed settlement does not count");
    drop(delivery);
    assert_eq!(
        store.abandoned.load(Ordering::SeqCst),
        1,
        "dropped unsettled, the task is handed back for redelivery instead of hanging as running"
    );
}
