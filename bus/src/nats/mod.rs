//! The distributed backend: NATS JetStream through `async-nats`.
//!
//! Several processes connected to one NATS server (or cluster) under one prefix form one bus:
//! - Events and results are core NATS messages on `<prefix>.msg.<topic>`.
//! - Tasks are JetStream messages on `<prefix>.work.<topic>` in the work-queue stream
//!   `<prefix>_work`, published with `Nats-Msg-Id = request_id` (server-side dedup inside the
//!   stream's window); each `consume` pattern is one durable pull consumer that every process
//!   consuming the same pattern shares, so a task goes to one of them.
//! - Task records live in the KV buckets `<prefix>_tasks` (by request id) and `<prefix>_task_ids`
//!   (task id → request id) ([`NatsTaskStore`]); the dedup window beyond the stream's is theirs.
//!
//! Module map: [`connect`](Nats::connect) and its checks here, the task store (`store.rs`), the
//! bus (`bus.rs`), the consumer loop and its acker (`consume.rs`), the key-value store on a bucket
//! ([`NatsKv`], `kv.rs`).

mod advisory;
mod bus;
mod consume;
mod guard;
mod kv;
mod link;
mod log;
mod outbox;
mod store;

pub use self::bus::NatsBus;
pub use self::kv::NatsKv;
pub use self::log::NatsLog;
pub use self::store::NatsTaskStore;

use crate::error::BusError;
use crate::topic::Topic;
use async_nats::jetstream;
use link::Link;
use std::sync::Arc;
use std::time::Duration;

/// The oldest server this backend accepts: per-key TTL (ADR-43) arrived in 2.11.
pub const MIN_SERVER: (u64, u64) = (2, 11);

/// The default subject prefix and name prefix of streams and buckets.
pub const DEFAULT_PREFIX: &str = "cb";

/// How to reach NATS and how to name things there.
#[derive(Debug, Clone)]
pub struct NatsOptions {
    /// The server URL (`nats://host:4222`).
    pub url: String,
    /// One subject token (`[A-Za-z0-9_-]`): every subject, stream and bucket of this system
    /// starts with it, so several systems can share one server.
    pub prefix: String,
    /// How long a delivered task may go without an ack or a progress mark before the server
    /// hands it to another consumer. Running tasks are marked in progress every third of it.
    pub ack_wait: Duration,
    /// Connection attempts before [`Nats::connect`] gives up.
    pub connect_attempts: u32,
}

impl NatsOptions {
    /// Options for `url` with the default prefix, a 30 s ack wait and 3 connection attempts.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            prefix: DEFAULT_PREFIX.to_string(),
            ack_wait: Duration::from_secs(30),
            connect_attempts: 3,
        }
    }
}

/// A checked connection to a JetStream-enabled server, with this system's stream and buckets.
#[derive(Clone)]
pub struct Nats {
    pub(crate) client: async_nats::Client,
    pub(crate) js: jetstream::Context,
    pub(crate) subjects: Subjects,
    pub(crate) ack_wait: Duration,
    pub(crate) link: Arc<Link>,
    url: String,
}

impl std::fmt::Debug for Nats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Nats")
            .field("url", &self.url)
            .field("prefix", &self.subjects.prefix)
            .finish()
    }
}

impl Nats {
    /// Connects (retrying `connect_attempts` times with backoff), checks that the server is
    /// recent enough and has JetStream on, and creates the work stream if it is missing.
    /// Every error names the URL and says what to do.
    pub async fn connect(opts: NatsOptions) -> Result<Self, BusError> {
        let url = opts.url.clone();
        let fail = |what: String| BusError::transport(format!("NATS at {url}"), what);
        if !valid_prefix(&opts.prefix) {
            return Err(fail(format!(
                "prefix {:?} must be one token of A-Z a-z 0-9 _ -",
                opts.prefix
            )));
        }
        let link = Arc::new(Link::new(&opts.url));
        let client = connect_with_retries(&opts, &link).await.map_err(&fail)?;
        // The client's own `Connected` event comes later, from another task.
        link.on_event(async_nats::Event::Connected);
        let version = client.server_info().version;
        if !recent_enough(&version) {
            return Err(fail(format!(
                "nats-server {version} is too old: clawbus needs {}.{} or later (per-key TTL)",
                MIN_SERVER.0, MIN_SERVER.1
            )));
        }
        let js = jetstream::new(client.clone());
        if let Err(e) = js.query_account().await {
            return Err(fail(format!(
                "JetStream is not available ({e}); start nats-server with -js"
            )));
        }
        let subjects = Subjects {
            prefix: opts.prefix.clone(),
        };
        let nats = Self {
            client,
            js,
            subjects,
            ack_wait: opts.ack_wait,
            link,
            url: opts.url,
        };
        let stream = nats.work_stream().await?;
        nats.check_work_stream(&stream.cached_info().config)?;
        Ok(nats)
    }

    /// The server URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The subject prefix.
    pub fn prefix(&self) -> &str {
        &self.subjects.prefix
    }

    /// The work-queue stream of tasks, created when missing; a stream of that name whose
    /// config conflicts is an error naming it.
    pub(crate) async fn work_stream(&self) -> Result<jetstream::stream::Stream, BusError> {
        let config = jetstream::stream::Config {
            name: self.subjects.work_stream(),
            subjects: vec![self.subjects.work_all()],
            retention: jetstream::stream::RetentionPolicy::WorkQueue,
            storage: jetstream::stream::StorageType::File,
            ..Default::default()
        };
        self.js.get_or_create_stream(config).await.map_err(|e| {
            BusError::transport(
                format!(
                    "NATS at {}: stream {}",
                    self.url,
                    self.subjects.work_stream()
                ),
                e,
            )
        })
    }

    /// Refuses a work stream whose config another program (or an older clawbus) left
    /// different from this one's: it would lose tasks (other retention) or miss them (other
    /// subjects).
    fn check_work_stream(&self, found: &jetstream::stream::Config) -> Result<(), BusError> {
        let want_subjects = vec![self.subjects.work_all()];
        let mut wrong = Vec::new();
        if found.retention != jetstream::stream::RetentionPolicy::WorkQueue {
            wrong.push(format!(
                "retention is {:?}, clawbus needs WorkQueue",
                found.retention
            ));
        }
        if found.subjects != want_subjects {
            wrong.push(format!(
                "subjects are {:?}, clawbus needs {want_subjects:?}",
                found.subjects
            ));
        }
        if wrong.is_empty() {
            return Ok(());
        }
        Err(BusError::transport(
            format!("NATS at {}: stream {}", self.url, found.name),
            format!(
                "its config conflicts with this clawbus: {}; delete it (`nats stream rm {}`) or use another prefix",
                wrong.join("; "),
                found.name
            ),
        ))
    }

    /// How the link to the server stands.
    pub fn link(&self) -> crate::backend::LinkStatus {
        self.link.status()
    }

    /// The KV bucket `<prefix>_<name>` (one value per key), created when missing.
    pub(crate) async fn bucket(&self, name: &str) -> Result<jetstream::kv::Store, BusError> {
        let bucket = format!("{}_{name}", self.subjects.prefix);
        if let Ok(store) = self.js.get_key_value(&bucket).await {
            return Ok(store);
        }
        let config = jetstream::kv::Config {
            bucket: bucket.clone(),
            history: 1,
            storage: jetstream::stream::StorageType::File,
            ..Default::default()
        };
        self.js
            .create_key_value(config)
            .await
            .map_err(|e| BusError::transport(format!("NATS at {}: bucket {bucket}", self.url), e))
    }
}

async fn connect_with_retries(
    opts: &NatsOptions,
    link: &Arc<Link>,
) -> Result<async_nats::Client, String> {
    let mut delay = Duration::from_millis(200);
    let attempts = opts.connect_attempts.max(1);
    let mut last = String::new();
    for attempt in 1..=attempts {
        let (on_event, on_retry) = (link.clone(), link.clone());
        let connecting = async_nats::ConnectOptions::new()
            .connection_timeout(Duration::from_secs(5))
            // Reconnect without end, with a backoff of our own, logged; the link keeps the state.
            .max_reconnects(None)
            .reconnect_delay_callback(move |attempt| on_retry.backoff(attempt))
            .event_callback(move |event| {
                on_event.on_event(event);
                async {}
            })
            .connect(opts.url.as_str());
        match connecting.await {
            Ok(client) => return Ok(client),
            Err(e) => {
                last = e.to_string();
                tracing::warn!(url = %opts.url, attempt, attempts, error = %e, "NATS not reachable.");
            }
        }
        if attempt < attempts {
            tokio::time::sleep(delay).await;
            delay *= 2;
        }
    }
    Err(format!("cannot connect after {attempts} attempts: {last}"))
}

/// True for `major.minor[.patch…]` at least [`MIN_SERVER`].
pub(crate) fn recent_enough(version: &str) -> bool {
    let mut parts = version
        .trim_start_matches('v')
        .split(['.', '-'])
        .map(|p| p.parse::<u64>().ok());
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(major), Some(minor)) => (major, minor) >= MIN_SERVER,
        _ => false,
    }
}

fn valid_prefix(prefix: &str) -> bool {
    !prefix.is_empty()
        && prefix
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// How topics map to subjects, streams and consumers under one prefix.
#[derive(Debug, Clone)]
pub(crate) struct Subjects {
    pub(crate) prefix: String,
}

impl Subjects {
    /// The subject of events and results on `topic` (a pattern maps to a pattern).
    pub(crate) fn msg(&self, topic: &Topic) -> String {
        format!("{}.msg.{topic}", self.prefix)
    }

    /// The subject of tasks on `topic` (a pattern maps to a pattern).
    pub(crate) fn work(&self, topic: &Topic) -> String {
        format!("{}.work.{topic}", self.prefix)
    }

    fn work_all(&self) -> String {
        format!("{}.work.>", self.prefix)
    }

    pub(crate) fn work_stream(&self) -> String {
        format!("{}_work", self.prefix)
    }

    /// The durable consumer every process consuming `pattern` shares.
    pub(crate) fn durable(&self, pattern: &Topic) -> String {
        let mut name = format!("{}_", self.prefix);
        for c in pattern.as_str().chars() {
            match c {
                '.' => name.push('_'),
                '*' => name.push_str("STAR"),
                '>' => name.push_str("REST"),
                c if c.is_ascii_alphanumeric() || c == '-' || c == '_' => name.push(c),
                c => name.push_str(&format!("={:02X}", u32::from(c))),
            }
        }
        name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_before_2_11_are_too_old() {
        assert!(recent_enough("2.11.0"));
        assert!(recent_enough("2.15.1"));
        assert!(recent_enough("v3.0.0"));
        assert!(!recent_enough("2.9.10"));
        assert!(!recent_enough("2.10.24"));
        assert!(!recent_enough("garbage"));
    }

    #[test]
    fn topics_map_one_to_one_under_the_prefix() {
        let s = Subjects {
            prefix: "cb".into(),
        };
        let t = Topic::parse("agent.a").unwrap_or_else(|_| Topic::inbox());
        assert_eq!(s.msg(&t), "cb.msg.agent.a");
        assert_eq!(s.work(&t), "cb.work.agent.a");
        let p = Topic::parse("agent.*").unwrap_or_else(|_| Topic::inbox());
        assert_eq!(s.durable(&p), "cb_agent_STAR");
    }
}
