//! The log store on JetStream: one stream per kind of log, `<prefix>_log_<kind>` over the
//! subjects `<prefix>.log.<kind>.>`, a subject per log. An append is one message on the log's
//! subject (its records joined by newlines), published with `Nats-Expected-Last-Subject-Sequence`
//! on the sequence it found the log at, so its checks and its write are one step. It carries
//! `Clawbus-Lease`, the highest lease revision stamped on the log so far (its own or the one
//! before), which a stamped append older than it is refused on.
//!
//! An append over the server's `max_payload` is split: its earlier parts go first, unfenced, to
//! `<log subject>.~part` (outside every log's subject: `~` is not in the names' alphabet), and
//! the message on the log's subject, the last part, lists their sequences in `Clawbus-Parts`; it
//! alone is fenced, so the append goes in whole or not at all (parts of a refused one are deleted,
//! or left unread). A read is an ordered consumer filtered on the log's subject, up to the last
//! sequence seen when it began, fetching the parts a message lists.

use super::Nats;
use crate::error::BusError;
use crate::log::{
    Fence, LogError, LogRecord, LogStore, MAX_APPEND_BYTES, check_name, check_records,
};
use async_nats::jetstream::consumer::{DeliverPolicy, pull};
use async_nats::jetstream::context::PublishErrorKind;
use async_nats::jetstream::message::PublishMessage;
use async_nats::jetstream::stream::{self, LastRawMessageErrorKind};
use async_trait::async_trait;
use futures::StreamExt as _;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A bound on each message of a read (the server has them all; never a synchronisation device).
const READ_STEP: Duration = Duration::from_secs(10);

/// The header holding the highest lease revision stamped on the log up to this append.
const LEASE_HEADER: &str = "Clawbus-Lease";
/// The header of a split append: the stream sequences of its earlier parts, in order.
const PARTS_HEADER: &str = "Clawbus-Parts";
/// The last token of the subject the earlier parts of a log's split appends go to.
const PARTS_TOKEN: &str = "~part";
/// Room left under `max_payload` for a message's headers.
const HEADER_ROOM: usize = 8 * 1024;
/// How many unfenced appends in a row may lose the race to another writer before one fails.
const UNFENCED_TRIES: usize = 16;
/// How many logs' tails a handle remembers (forgotten all at once past it).
const KNOWN_TAILS: usize = 4096;

/// Where a log stood when this handle last wrote or read it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Tail {
    /// The last sequence (0: empty).
    seq: u64,
    /// The highest lease revision stamped on it (0: none).
    lease: u64,
}

/// Logs of one kind, shared by every node under the prefix.
#[derive(Clone)]
pub struct NatsLog {
    nats: Nats,
    stream: stream::Stream,
    base: String,
    /// The tails this handle knows, so a fenced append on the sequence it last saw needs no
    /// look-up first.
    tails: Arc<Mutex<HashMap<String, Tail>>>,
}

impl std::fmt::Debug for NatsLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NatsLog").field("base", &self.base).finish()
    }
}

impl NatsLog {
    /// Opens the logs of `kind` (`[a-z0-9_]`), creating their stream when missing.
    pub async fn open(nats: &Nats, kind: &str) -> Result<Self, BusError> {
        let prefix = &nats.subjects.prefix;
        let base = format!("{prefix}.log.{kind}");
        let name = format!("{prefix}_log_{kind}");
        let config = stream::Config {
            name: name.clone(),
            subjects: vec![format!("{base}.>")],
            storage: stream::StorageType::File,
            allow_direct: true,
            ..Default::default()
        };
        let stream = nats.js.get_or_create_stream(config).await.map_err(|e| {
            BusError::transport(format!("NATS at {}: stream {name}", nats.url()), e)
        })?;
        Ok(Self {
            nats: nats.clone(),
            stream,
            base,
            tails: Arc::new(Mutex::new(HashMap::new())),
        })
    }

    fn subject(&self, name: &str) -> String {
        format!("{}.{name}", self.base)
    }

    fn parts_subject(&self, name: &str) -> String {
        format!("{}.{name}.{PARTS_TOKEN}", self.base)
    }

    /// Fails at once, naming the server, while the link is down (rather than wait for a
    /// request's timeout and maybe land late, after the caller was told it failed).
    fn up(&self, what: impl FnOnce() -> String) -> Result<(), LogError> {
        if self.nats.link.is_connected() {
            return Ok(());
        }
        Err(LogError::storage(
            what(),
            format!(
                "NATS at {} not connected (reconnecting with backoff); try again",
                self.nats.url()
            ),
        ))
    }

    fn known_tail(&self, name: &str) -> Option<Tail> {
        self.tails.lock().ok()?.get(name).copied()
    }

    fn remember(&self, name: &str, tail: Option<Tail>) {
        if let Ok(mut tails) = self.tails.lock() {
            match tail {
                Some(tail) => {
                    if tails.len() >= KNOWN_TAILS {
                        tails.clear();
                    }
                    tails.insert(name.to_string(), tail);
                }
                None => {
                    tails.remove(name);
                }
            }
        }
    }

    /// The log's tail: known here when it is at `at`, else looked up.
    async fn tail(&self, name: &str, at: Option<u64>) -> Result<Tail, LogError> {
        if let Some(known) = self.known_tail(name).filter(|t| Some(t.seq) == at) {
            return Ok(known);
        }
        match self
            .stream
            .get_last_raw_message_by_subject(&self.subject(name))
            .await
        {
            Ok(m) => Ok(Tail {
                seq: m.sequence,
                lease: lease_of(m.headers.get(LEASE_HEADER).map(|v| v.as_str())),
            }),
            Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => Ok(Tail::default()),
            Err(e) => Err(LogError::storage(format!("last of {name}"), e)),
        }
    }

    /// Publishes the earlier parts of an append too big for one message; their sequences.
    async fn publish_parts(&self, name: &str, parts: &[&[u8]]) -> Result<Vec<u64>, LogError> {
        let mut seqs = Vec::with_capacity(parts.len());
        for part in parts {
            let sent = self
                .nats
                .js
                .publish(self.parts_subject(name), part.to_vec().into())
                .await;
            let acked = match sent {
                Ok(pending) => pending.await,
                Err(e) => Err(e),
            };
            match acked {
                Ok(ack) => seqs.push(ack.sequence),
                Err(e) => {
                    self.drop_parts(&seqs).await;
                    return Err(LogError::storage(format!("append a part to {name}"), e));
                }
            }
        }
        Ok(seqs)
    }

    /// Deletes the parts of an append that did not go in (best effort: they are never read).
    async fn drop_parts(&self, seqs: &[u64]) {
        for &seq in seqs {
            if let Err(e) = self.stream.delete_message(seq).await {
                tracing::debug!(seq, error = %e, "Part of a refused log append left in the stream.");
            }
        }
    }

    /// The payload of a message: its own, after the parts it lists.
    async fn joined(&self, name: &str, message: &async_nats::Message) -> Result<Vec<u8>, LogError> {
        let Some(parts) = message.headers.as_ref().and_then(|h| h.get(PARTS_HEADER)) else {
            return Ok(message.payload.to_vec());
        };
        let what = || format!("read {name}");
        let mut out = Vec::new();
        for seq in parts.as_str().split(',') {
            let seq: u64 = seq
                .trim()
                .parse()
                .map_err(|e| LogError::storage(what(), e))?;
            let part = self
                .stream
                .get_raw_message(seq)
                .await
                .map_err(|e| LogError::storage(what(), e))?;
            if out.len() + part.payload.len() + message.payload.len() > MAX_APPEND_BYTES {
                return Err(LogError::storage(
                    what(),
                    format!("an append is over the limit of {MAX_APPEND_BYTES} bytes"),
                ));
            }
            out.extend_from_slice(&part.payload);
        }
        out.extend_from_slice(&message.payload);
        Ok(out)
    }
}

/// The lease revision in a `Clawbus-Lease` header; 0 when none.
fn lease_of(header: Option<&str>) -> u64 {
    header.and_then(|v| v.trim().parse().ok()).unwrap_or(0)
}

#[async_trait]
impl LogStore for NatsLog {
    async fn append(
        &self,
        name: &str,
        records: Vec<Vec<u8>>,
        fence: Fence,
    ) -> Result<u64, LogError> {
        check_name(name)?;
        check_records(name, &records)?;
        self.up(|| format!("append to {name}"))?;
        let payload = records.join(&b'\n');
        let chunk = self
            .nats
            .client
            .server_info()
            .max_payload
            .saturating_sub(HEADER_ROOM)
            .max(1);
        let mut tries = 0;
        loop {
            tries += 1;
            let tail = self.tail(name, fence.last).await?;
            if let Some(expected) = fence.last.filter(|&e| e != tail.seq) {
                self.remember(name, None);
                return Err(LogError::Fenced {
                    name: name.to_string(),
                    expected,
                    actual: tail.seq,
                });
            }
            if let Some(lease) = fence.lease.filter(|&l| l < tail.lease) {
                return Err(LogError::LeaseBehind {
                    name: name.to_string(),
                    lease,
                    latest: tail.lease,
                });
            }
            if records.is_empty() {
                return Ok(tail.seq);
            }
            let stamp = tail.lease.max(fence.lease.unwrap_or(0));
            let pieces: Vec<&[u8]> = payload.chunks(chunk).collect();
            let (last_piece, earlier) = pieces
                .split_last()
                .map_or((&[][..], &[][..]), |(l, e)| (*l, e));
            let parts = self.publish_parts(name, earlier).await?;
            let mut message = PublishMessage::build()
                .payload(last_piece.to_vec().into())
                .expected_last_subject_sequence(tail.seq);
            if stamp > 0 {
                message = message.header(LEASE_HEADER, stamp.to_string().as_str());
            }
            if !parts.is_empty() {
                let listed = parts
                    .iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(",");
                message = message.header(PARTS_HEADER, listed.as_str());
            }
            let sent = self.nats.js.send_publish(self.subject(name), message).await;
            let acked = match sent {
                Ok(pending) => pending.await,
                Err(e) => Err(e),
            };
            match acked {
                Ok(ack) => {
                    self.remember(
                        name,
                        Some(Tail {
                            seq: ack.sequence,
                            lease: stamp,
                        }),
                    );
                    return Ok(ack.sequence);
                }
                Err(e) if e.kind() == PublishErrorKind::WrongLastSequence => {
                    self.drop_parts(&parts).await;
                    self.remember(name, None);
                    if fence.last.is_none() && tries < UNFENCED_TRIES {
                        // Unfenced: another writer got in between the look-up and the
                        // publish; go again from where the log is now.
                        continue;
                    }
                    return Err(LogError::Fenced {
                        name: name.to_string(),
                        expected: tail.seq,
                        actual: self.tail(name, None).await.map_or(0, |t| t.seq),
                    });
                }
                Err(e) => {
                    // The answer may be lost with the append in: what it is, is looked up next.
                    self.remember(name, None);
                    return Err(LogError::storage(format!("append to {name}"), e));
                }
            }
        }
    }

    async fn read(&self, name: &str) -> Result<Vec<LogRecord>, LogError> {
        check_name(name)?;
        self.up(|| format!("read {name}"))?;
        let last = self.tail(name, None).await?;
        if last.seq == 0 {
            return Ok(Vec::new());
        }
        let what = || format!("read {name}");
        let consumer = self
            .stream
            .create_consumer(pull::OrderedConfig {
                filter_subject: self.subject(name),
                deliver_policy: DeliverPolicy::All,
                ..Default::default()
            })
            .await
            .map_err(|e| LogError::storage(what(), e))?;
        let mut messages = consumer
            .messages()
            .await
            .map_err(|e| LogError::storage(what(), e))?;
        let mut out = Vec::new();
        loop {
            let next = tokio::time::timeout(READ_STEP, messages.next())
                .await
                .map_err(|e| LogError::storage(what(), e))?;
            let Some(message) = next else {
                return Err(LogError::storage(what(), "the read ended early"));
            };
            let message = message.map_err(|e| LogError::storage(what(), e))?;
            let seq = message
                .info()
                .map_err(|e| LogError::storage(what(), e.to_string()))?
                .stream_sequence;
            let payload = self.joined(name, &message).await?;
            out.extend(payload.split(|&b| b == b'\n').map(|r| LogRecord {
                seq,
                data: r.to_vec(),
            }));
            if seq >= last.seq {
                let lease = lease_of(
                    message
                        .headers
                        .as_ref()
                        .and_then(|h| h.get(LEASE_HEADER))
                        .map(|v| v.as_str()),
                );
                self.remember(name, Some(Tail { seq, lease }));
                return Ok(out);
            }
        }
    }

    async fn last(&self, name: &str) -> Result<u64, LogError> {
        check_name(name)?;
        self.up(|| format!("last of {name}"))?;
        Ok(self.tail(name, None).await?.seq)
    }

    async fn delete(&self, name: &str) -> Result<(), LogError> {
        check_name(name)?;
        self.remember(name, None);
        for subject in [self.subject(name), self.parts_subject(name)] {
            self.stream
                .purge()
                .filter(subject)
                .await
                .map_err(|e| LogError::storage(format!("delete {name}"), e))?;
        }
        Ok(())
    }
}
