//! Approval requests: a tool (an `exec` in `ask` mode) asks a person, and waits.
//!
//! [`Approvals::ask`] records the request (sled tree `approvals` in the daemon's database on the
//! embedded bus; on a shared bus a key-value store every node shares, see `store`), publishes it
//! on the bus topic `approvals.<agent>`, and waits for [`Approvals::resolve`] — from
//! `clawbus approvals allow|deny <id>`, `POST /v1/approvals/{id}` or any other caller, on any
//! node of a shared bus (the answer reaches the waiting run through a watch of the store, see
//! `follow`) — until the request's timeout (tokio time), after which it counts as denied and is
//! marked `expired`. Resolving with `always` also stores the request's allowlist entry for that
//! agent (tree `approvals.rules`), so the same command runs without asking from then on.
//!
//! Every state change is published on `approvals.<agent>` as `{event, approval}` with `event` one
//! of `requested`, `allowed`, `denied`, `expired`. Exactly one of the person's answer and the
//! timeout wins (compare-and-swap on the record). Requests still pending when the daemon starts
//! are marked `expired`: nobody waits for them any more (on a shared store, only those past their
//! due time: another node may still wait for the others). Writes rely on sled's periodic flush
//! (no second flusher next to the bus's group commit).

mod follow;
mod rules;
mod store;
#[cfg(test)]
pub(crate) mod tests;

use self::store::{KvRequests, Requests, SledRequests};
use bus::{Bus, Clock, Envelope, Topic};
use dashmap::DashMap;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;

/// The sled tree of requests, keyed by id.
pub(crate) const REQUESTS_TREE: &str = "approvals";
/// The sled tree of entries approved with `always`, keyed by `<agent>\0<entry>`.
pub(crate) const RULES_TREE: &str = "approvals.rules";
/// The key-value store (a JetStream KV bucket on NATS) the requests live in on a shared bus.
pub const SHARED_STORE: &str = "approvals";
/// Settled requests older than this are deleted when the store opens (on a shared store, by
/// their time to live).
const KEEP_SETTLED: Duration = Duration::from_secs(7 * 24 * 3600);

/// Where a request stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalState {
    /// Waiting for a person.
    Pending,
    /// A person allowed it.
    Allowed,
    /// A person denied it.
    Denied,
    /// Nobody answered in time (or the daemon restarted): denied.
    Expired,
}

impl ApprovalState {
    /// The name used in records and output.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Allowed => "allowed",
            Self::Denied => "denied",
            Self::Expired => "expired",
        }
    }
}

impl fmt::Display for ApprovalState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One request, as stored and listed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalRecord {
    /// The request id (a UUIDv7).
    pub id: String,
    /// The agent that asks.
    pub agent: String,
    /// The session of the run that asks.
    pub session: String,
    /// The command as it would run.
    pub command: String,
    /// The exact argv it would run (`argv[0]` as written); empty in records from before it was
    /// kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub argv: Vec<String>,
    /// The task of the run that asks, when it runs as one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    /// The allowlist entry `always` adds (a glob matching exactly this command).
    pub rule: String,
    /// Where it stands.
    pub state: ApprovalState,
    /// Unix ms when asked.
    pub created_ms: u64,
    /// Unix ms after which nobody waits for the answer.
    pub expires_ms: u64,
    /// Unix ms when answered or expired.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved_ms: Option<u64>,
    /// Whether the answer added the entry for good.
    #[serde(default)]
    pub always: bool,
}

/// What a tool asks about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalRequest {
    /// The agent that asks.
    pub agent: String,
    /// The run's session.
    pub session: String,
    /// The command as it would run.
    pub command: String,
    /// The exact argv it would run.
    pub argv: Vec<String>,
    /// The task of the run that asks, if any.
    pub task_id: Option<String>,
    /// The allowlist entry `always` adds.
    pub rule: String,
    /// How long to wait for an answer.
    pub timeout: Duration,
}

/// The answer a waiting tool gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// Allowed; `always` when the entry was added for good.
    Allowed {
        /// Whether the entry was added for good.
        always: bool,
    },
    /// Denied by a person.
    Denied,
    /// Nobody answered in time.
    TimedOut,
}

/// Why an approval operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ApprovalError {
    /// No request has this id.
    #[error("no approval request {0:?}")]
    NotFound(String),
    /// The request was already answered or expired.
    #[error("approval request {id:?} is already {state}")]
    Settled {
        /// The request id.
        id: String,
        /// Its state.
        state: ApprovalState,
    },
    /// sled or serde failed.
    #[error("approvals store: {0}")]
    Storage(String),
}

fn storage(e: impl fmt::Display) -> ApprovalError {
    ApprovalError::Storage(e.to_string())
}

/// The handle to the approvals store; cheap to clone.
#[derive(Clone)]
pub struct Approvals {
    inner: Arc<Inner>,
}

struct Inner {
    requests: Arc<dyn Requests>,
    /// This node's copy of the entries approved with `always` (on a shared store, of every
    /// node's: see `rules`), read by each `exec` that checks its allowlist.
    rules: sled::Tree,
    /// On a shared store: where the entries approved with `always` are kept for every node.
    shared_rules: Option<rules::SharedRules>,
    bus: Arc<dyn Bus>,
    clock: Arc<dyn Clock>,
    /// The runs of this process waiting for an answer, by request id.
    waiting: DashMap<String, oneshot::Sender<Answer>>,
    /// On a shared store: the task that hands other nodes' answers to the runs waiting here;
    /// stopped with the store.
    follower: std::sync::OnceLock<tokio::task::AbortHandle>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some(follower) = self.follower.get() {
            follower.abort();
        }
    }
}

impl Approvals {
    /// Opens the store in `db`, expiring requests left pending by an earlier run.
    pub fn open(
        db: &sled::Db,
        bus: Arc<dyn Bus>,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, ApprovalError> {
        let requests = SledRequests::open(db, clock.now_ms())?;
        let rules = db.open_tree(RULES_TREE).map_err(storage)?;
        Ok(Self {
            inner: Arc::new(Inner {
                requests: Arc::new(requests),
                rules,
                shared_rules: None,
                bus,
                clock,
                waiting: DashMap::new(),
                follower: std::sync::OnceLock::new(),
            }),
        })
    }

    /// Opens the store on `kv`, which other nodes share (a JetStream KV bucket on NATS): every
    /// node lists every request and may answer it, and a run waiting here learns an answer
    /// given anywhere (a watch of the store). Requests still pending past their due time (their
    /// node went away) are marked `expired`; a request is removed a week after it settled (its
    /// time to live). Entries approved with `always` are the cluster's: kept in `kv` for every
    /// node, and copied into `db` (this node's entries from before go to `kv` first), so a node
    /// started later does not ask again.
    pub async fn open_shared(
        db: &sled::Db,
        kv: Arc<dyn bus::kv::KvStore>,
        bus: Arc<dyn Bus>,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, ApprovalError> {
        let rules = db.open_tree(RULES_TREE).map_err(storage)?;
        // Watching before anything is asked: no answer goes by unseen.
        let watch = kv.watch(store::KV_PREFIX).await.map_err(storage)?;
        let shared_rules = rules::SharedRules { kv: kv.clone() };
        shared_rules.sync(&rules).await?;
        let inner = Arc::new(Inner {
            requests: Arc::new(KvRequests { kv: kv.clone() }),
            rules,
            shared_rules: Some(shared_rules),
            bus,
            clock,
            waiting: DashMap::new(),
            follower: std::sync::OnceLock::new(),
        });
        let follower = follow::spawn(Arc::downgrade(&inner), kv, watch);
        // Just made: nobody else has set it.
        let _ = inner.follower.set(follower);
        let approvals = Self { inner };
        let now = approvals.inner.clock.now_ms();
        for rec in approvals.list().await? {
            if rec.state == ApprovalState::Pending && rec.expires_ms < now {
                approvals.expire(&rec.id).await?;
            }
        }
        Ok(approvals)
    }

    /// Records `req`, publishes it, and waits for the answer or the timeout.
    pub async fn ask(&self, req: ApprovalRequest) -> Result<Answer, ApprovalError> {
        let now = self.inner.clock.now_ms();
        let rec = ApprovalRecord {
            id: uuid::Uuid::now_v7().to_string(),
            agent: req.agent,
            session: req.session,
            command: req.command,
            argv: req.argv,
            task_id: req.task_id,
            rule: req.rule,
            state: ApprovalState::Pending,
            created_ms: now,
            expires_ms: now + req.timeout.as_millis() as u64,
            resolved_ms: None,
            always: false,
        };
        let (tx, rx) = oneshot::channel();
        // Registered before the record exists, so no answer can come without a listener.
        self.inner.waiting.insert(rec.id.clone(), tx);
        if let Err(e) = self.inner.requests.create(&rec).await {
            self.inner.waiting.remove(&rec.id);
            return Err(e);
        }
        tracing::info!(approval = %rec.id, agent = %rec.agent, command = %rec.command, timeout_ms = req.timeout.as_millis() as u64, "Approval requested.");
        self.publish("requested", &rec).await;
        // The wait runs on the clock its `expires_ms` was set by.
        let expired = self.inner.clock.sleep(req.timeout);
        let answer = tokio::select! {
            biased;
            answer = rx => Some(answer),
            () = expired => None,
        };
        match answer {
            Some(Ok(answer)) => Ok(answer),
            // The sender went without an answer: only when the store is going away.
            Some(Err(_)) => Ok(Answer::Denied),
            None => {
                self.inner.waiting.remove(&rec.id);
                self.expire(&rec.id).await
            }
        }
    }

    /// Marks a timed-out request expired, unless an answer got there first.
    async fn expire(&self, id: &str) -> Result<Answer, ApprovalError> {
        let (rec, won) = self
            .transition(id, |rec, now| {
                rec.state = ApprovalState::Expired;
                rec.resolved_ms = Some(now);
            })
            .await?;
        if !won {
            return Ok(match rec.state {
                ApprovalState::Allowed => Answer::Allowed { always: rec.always },
                _ => Answer::Denied,
            });
        }
        tracing::info!(approval = %id, agent = %rec.agent, "Approval request expired unanswered.");
        self.publish("expired", &rec).await;
        Ok(Answer::TimedOut)
    }

    /// Answers request `id`; with `always` and `allow`, its entry is added for the agent.
    pub async fn resolve(
        &self,
        id: &str,
        allow: bool,
        always: bool,
    ) -> Result<ApprovalRecord, ApprovalError> {
        let (rec, won) = self
            .transition(id, |rec, now| {
                rec.state = if allow {
                    ApprovalState::Allowed
                } else {
                    ApprovalState::Denied
                };
                rec.always = allow && always;
                rec.resolved_ms = Some(now);
            })
            .await?;
        if !won {
            return Err(ApprovalError::Settled {
                id: id.to_string(),
                state: rec.state,
            });
        }
        self.inner.answered(&rec)?;
        if let Some(shared) = self.inner.shared_rules.as_ref().filter(|_| rec.always) {
            // The nodes up now learn it from the request's record as well; this is for those
            // that start later.
            if let Err(e) = shared.keep(&rec).await {
                tracing::warn!(approval = %id, agent = %rec.agent, error = %e, "Entry approved with always not kept for the other nodes; they may ask again.");
            }
        }
        tracing::info!(approval = %id, agent = %rec.agent, state = %rec.state, always = rec.always, "Approval answered.");
        self.publish(rec.state.as_str(), &rec).await;
        Ok(rec)
    }

    /// Moves a pending record on with `change`; `false` when it was no longer pending.
    async fn transition(
        &self,
        id: &str,
        change: impl Fn(&mut ApprovalRecord, u64),
    ) -> Result<(ApprovalRecord, bool), ApprovalError> {
        loop {
            let Some((mut rec, version)) = self.inner.requests.get(id).await? else {
                return Err(ApprovalError::NotFound(id.to_string()));
            };
            if rec.state != ApprovalState::Pending {
                return Ok((rec, false));
            }
            change(&mut rec, self.inner.clock.now_ms());
            // Lost to another answer (or the timeout): read again, and find it settled.
            if self.inner.requests.swap(version, &rec).await? {
                return Ok((rec, true));
            }
        }
    }

    /// Every request, newest first.
    pub async fn list(&self) -> Result<Vec<ApprovalRecord>, ApprovalError> {
        self.inner.requests.list().await
    }

    /// One request.
    pub async fn get(&self, id: &str) -> Result<Option<ApprovalRecord>, ApprovalError> {
        Ok(self.inner.requests.get(id).await?.map(|(rec, _)| rec))
    }

    /// The entries approved with `always` for `agent`.
    pub fn rules(&self, agent: &str) -> Result<Vec<String>, ApprovalError> {
        let prefix = rule_key(agent, "");
        let mut out = Vec::new();
        for item in self.inner.rules.scan_prefix(&prefix) {
            let (key, _) = item.map_err(storage)?;
            let rule = String::from_utf8_lossy(&key[prefix.len()..]).into_owned();
            out.push(rule);
        }
        Ok(out)
    }

    /// `{event, approval}` on `approvals.<agent>`; nobody listening is fine.
    async fn publish(&self, event: &str, rec: &ApprovalRecord) {
        let topic = match Topic::parse(&format!("approvals.{}", rec.agent)) {
            Ok(t) => t,
            Err(e) => {
                tracing::warn!(agent = %rec.agent, error = %e, "No approvals topic for this agent.");
                return;
            }
        };
        let env = Envelope::event(
            topic,
            serde_json::json!({ "event": event, "approval": rec }),
        )
        .from("approvals");
        if let Err(e) = self.inner.bus.publish(env).await {
            tracing::warn!(approval = %rec.id, error = %e, "Approval event not published.");
        }
    }
}

impl Inner {
    /// A settled request reaches the run waiting for it here, if any (once: the waiter is
    /// taken), and an entry approved with `always` is kept for its agent.
    fn answered(&self, rec: &ApprovalRecord) -> Result<(), ApprovalError> {
        let answer = match rec.state {
            ApprovalState::Pending => return Ok(()),
            ApprovalState::Allowed => Answer::Allowed { always: rec.always },
            ApprovalState::Denied => Answer::Denied,
            ApprovalState::Expired => Answer::TimedOut,
        };
        if rec.always {
            self.rules
                .insert(rule_key(&rec.agent, &rec.rule), rec.id.as_bytes())
                .map_err(storage)?;
        }
        if let Some((_, tx)) = self.waiting.remove(&rec.id) {
            // The waiter may have timed out this instant; the record already says what happened.
            let _ = tx.send(answer);
        }
        Ok(())
    }
}

/// The key of `rule` of `agent` in the tree of entries approved with `always`.
fn rule_key(agent: &str, rule: &str) -> Vec<u8> {
    let mut key = agent.as_bytes().to_vec();
    key.push(0);
    key.extend_from_slice(rule.as_bytes());
    key
}
