//! The log store on JetStream: one stream per kind of log, `<prefix>_log_<kind>` over the
//! subjects `<prefix>.log.<kind>.>`, a subject per log. An append is one message (its records
//! joined by newlines, at most the server's `max_payload`), published with
//! `Nats-Expected-Last-Subject-Sequence` when fenced; a read is an ordered consumer filtered on
//! the log's subject, up to the last sequence seen when it began.

use super::Nats;
use crate::error::BusError;
use crate::log::{LogError, LogRecord, LogStore, check_name, check_records};
use async_nats::jetstream::consumer::{DeliverPolicy, pull};
use async_nats::jetstream::context::PublishErrorKind;
use async_nats::jetstream::message::PublishMessage;
use async_nats::jetstream::stream::{self, LastRawMessageErrorKind};
use async_trait::async_trait;
use futures::StreamExt as _;
use std::time::Duration;

/// A bound on each message of a read (the server has them all; never a synchronisation device).
const READ_STEP: Duration = Duration::from_secs(10);

/// Logs of one kind, shared by every node under the prefix.
#[derive(Clone)]
pub struct NatsLog {
    nats: Nats,
    stream: stream::Stream,
    base: String,
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
        })
    }

    fn subject(&self, name: &str) -> String {
        format!("{}.{name}", self.base)
    }
}

#[async_trait]
impl LogStore for NatsLog {
    async fn append(
        &self,
        name: &str,
        records: Vec<Vec<u8>>,
        expected: Option<u64>,
    ) -> Result<u64, LogError> {
        check_name(name)?;
        check_records(name, &records)?;
        if records.is_empty() {
            let last = self.last(name).await?;
            return match expected {
                Some(e) if e != last => Err(LogError::Fenced {
                    name: name.to_string(),
                    expected: e,
                    actual: last,
                }),
                _ => Ok(last),
            };
        }
        let payload = records.join(&b'\n');
        let max = self.nats.client.server_info().max_payload;
        if payload.len() > max {
            return Err(LogError::InvalidRecord {
                name: name.to_string(),
                reason: format!(
                    "an append of {} bytes is over the server's max_payload of {max}",
                    payload.len()
                ),
            });
        }
        let mut message = PublishMessage::build().payload(payload.into());
        if let Some(expected) = expected {
            message = message.expected_last_subject_sequence(expected);
        }
        let sent = self.nats.js.send_publish(self.subject(name), message).await;
        let acked = match sent {
            Ok(pending) => pending.await,
            Err(e) => Err(e),
        };
        match acked {
            Ok(ack) => Ok(ack.sequence),
            Err(e) if e.kind() == PublishErrorKind::WrongLastSequence => Err(LogError::Fenced {
                name: name.to_string(),
                expected: expected.unwrap_or(0),
                actual: self.last(name).await.unwrap_or(0),
            }),
            Err(e) => Err(LogError::storage(format!("append to {name}"), e)),
        }
    }

    async fn read(&self, name: &str) -> Result<Vec<LogRecord>, LogError> {
        check_name(name)?;
        let last = self.last(name).await?;
        if last == 0 {
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
            out.extend(message.payload.split(|&b| b == b'\n').map(|r| LogRecord {
                seq,
                data: r.to_vec(),
            }));
            if seq >= last {
                return Ok(out);
            }
        }
    }

    async fn last(&self, name: &str) -> Result<u64, LogError> {
        check_name(name)?;
        match self
            .stream
            .get_last_raw_message_by_subject(&self.subject(name))
            .await
        {
            Ok(m) => Ok(m.sequence),
            Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => Ok(0),
            Err(e) => Err(LogError::storage(format!("last of {name}"), e)),
        }
    }

    async fn delete(&self, name: &str) -> Result<(), LogError> {
        check_name(name)?;
        self.stream
            .purge()
            .filter(self.subject(name))
            .await
            .map_err(|e| LogError::storage(format!("delete {name}"), e))?;
        Ok(())
    }
}
