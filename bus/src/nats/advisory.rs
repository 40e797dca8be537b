//! Dead letters from JetStream: a task message delivered `max_deliver` times without an ack
//! (each node that took it died, or let it go) is not delivered again; the server announces it
//! on `$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.<stream>.<consumer>` and keeps the message
//! in the work-queue stream (NATS-FACTS §2).
//!
//! Every node listens in one queue group, so one of them takes each advisory: it reads the
//! message by its stream sequence, records the task `dead_lettered` in the shared store (whose
//! terminal event the coordinator hears, and `clawbus tasks list --state dead_lettered` shows),
//! replies to its poster, and deletes the message.

use super::consume::Shared;
use crate::envelope::{Envelope, Kind};
use crate::task::Outcome;
use futures::StreamExt as _;
use std::sync::{Arc, Weak};

/// What the advisory says (the fields used here).
#[derive(Debug, serde::Deserialize)]
struct MaxDeliveries {
    stream_seq: u64,
    deliveries: u64,
}

/// The advisory subject of the work stream's consumers.
pub(super) fn subject(stream: &str) -> String {
    format!("$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.{stream}.*")
}

/// Listens for the advisories of the work stream until the bus goes; one node of the cluster
/// takes each one.
pub(super) async fn listen(shared: Weak<Shared>) {
    let Some(strong) = shared.upgrade() else {
        return;
    };
    let nats = &strong.nats;
    let stream = nats.subjects.work_stream();
    let group = format!("{}_dead_letters", nats.subjects.prefix);
    let mut sub = match nats.client.queue_subscribe(subject(&stream), group).await {
        Ok(sub) => sub,
        Err(e) => {
            tracing::error!(error = %e, "Cannot listen for JetStream's max-deliveries advisories; such tasks stay unfinished.");
            return;
        }
    };
    drop(strong);
    while let Some(msg) = sub.next().await {
        let Some(shared) = shared.upgrade() else {
            return; // the bus is gone
        };
        match serde_json::from_slice::<MaxDeliveries>(&msg.payload) {
            Ok(advisory) => dead_letter(&shared, &advisory).await,
            Err(e) => {
                tracing::warn!(subject = %msg.subject, error = %e, "Unreadable max-deliveries advisory.");
            }
        }
    }
}

/// Records the task behind `advisory` dead-lettered, replies to its poster, and deletes its
/// message from the stream.
async fn dead_letter(shared: &Arc<Shared>, advisory: &MaxDeliveries) {
    let seq = advisory.stream_seq;
    let stream = match shared.nats.work_stream().await {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(seq, error = %e, "Dead letter not recorded: the work stream is unreachable.");
            return;
        }
    };
    let raw = match stream.get_raw_message(seq).await {
        Ok(m) => m,
        Err(e) => {
            // Already taken by another listener (or deleted): nothing left to do.
            tracing::debug!(seq, error = %e, "Max-delivered message already gone.");
            return;
        }
    };
    let env = match serde_json::from_slice::<Envelope>(&raw.payload) {
        Ok(env) if env.kind == Kind::Task => Some(env),
        _ => None,
    };
    if let Some(env) = env {
        let error = format!(
            "gave up after {} attempts (JetStream max deliveries)",
            advisory.deliveries
        );
        tracing::warn!(request_id = %env.request_id, deliveries = advisory.deliveries, "Task dead-lettered.");
        match shared
            .store
            .complete(&env.request_id, Outcome::DeadLettered { error })
            .await
        {
            Ok(done) if done.recorded => reply(shared, &env, &done.task),
            Ok(_) => {} // it had ended: the message was only left unacked
            Err(e) => {
                tracing::error!(request_id = %env.request_id, error = %e, "Dead letter not recorded; the message stays in the stream.");
                return;
            }
        }
    }
    if let Err(e) = stream.delete_message(seq).await {
        tracing::debug!(seq, error = %e, "Max-delivered message not deleted (another node did).");
    }
}

fn reply(shared: &Shared, env: &Envelope, record: &crate::task::TaskRecord) {
    let Some(reply_to) = &env.reply_to else {
        return;
    };
    let mut reply = Envelope::event(
        reply_to.clone(),
        serde_json::to_value(record).unwrap_or_default(),
    );
    reply.kind = Kind::Result;
    reply.request_id = env.request_id.clone();
    if shared.out.send(reply).is_err() {
        tracing::warn!(request_id = %env.request_id, "Reply not published: the bus is closing.");
    }
}
