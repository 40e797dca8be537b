//! Approval requests: a tool (an `exec` in `ask` mode) asks a person, and waits.
//!
//! [`Approvals::ask`] records the request in sled (tree `approvals`, in the daemon's database),
//! publishes it on the bus topic `approvals.<agent>`, and waits for [`Approvals::resolve`] — from
//! `clawbus approvals allow|deny <id>`, `POST /v1/approvals/{id}` or any other caller — until the
//! request's timeout (tokio time), after which it counts as denied and is marked `expired`.
//! Resolving with `always` also stores the request's allowlist entry for that agent (tree
//! `approvals.rules`), so the same command runs without asking from then on.
//!
//! Every state change is published on `approvals.<agent>` as `{event, approval}` with `event` one
//! of `requested`, `allowed`, `denied`, `expired`. Exactly one of the person's answer and the
//! timeout wins (compare-and-swap on the record). Requests still pending when the daemon starts
//! are marked `expired`: nobody waits for them any more. Writes rely on sled's periodic flush
//! (no second flusher next to the bus's group commit).

#[cfg(test)]
pub(crate) mod tests;

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
/// Settled requests older than this are deleted when the store opens.
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
    requests: sled::Tree,
    rules: sled::Tree,
    bus: Arc<dyn Bus>,
    clock: Arc<dyn Clock>,
    waiting: DashMap<String, oneshot::Sender<Answer>>,
}

impl Approvals {
    /// Opens the store in `db`, expiring requests left pending by an earlier run.
    pub fn open(
        db: &sled::Db,
        bus: Arc<dyn Bus>,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, ApprovalError> {
        let requests = db.open_tree(REQUESTS_TREE).map_err(storage)?;
        let rules = db.open_tree(RULES_TREE).map_err(storage)?;
        let now = clock.now_ms();
        for item in requests.iter() {
            let (key, bytes) = item.map_err(storage)?;
            let mut rec: ApprovalRecord = serde_json::from_slice(&bytes).map_err(storage)?;
            let settled_ms = rec.resolved_ms.unwrap_or(rec.created_ms);
            if rec.state == ApprovalState::Pending {
                rec.state = ApprovalState::Expired;
                rec.resolved_ms = Some(now);
                let bytes = serde_json::to_vec(&rec).map_err(storage)?;
                requests.insert(key, bytes).map_err(storage)?;
            } else if now.saturating_sub(settled_ms) > KEEP_SETTLED.as_millis() as u64 {
                requests.remove(key).map_err(storage)?;
            }
        }
        Ok(Self {
            inner: Arc::new(Inner {
                requests,
                rules,
                bus,
                clock,
                waiting: DashMap::new(),
            }),
        })
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
        if let Err(e) = self.put(&rec) {
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
        let (rec, won) = self.transition(id, |rec, now| {
            rec.state = ApprovalState::Expired;
            rec.resolved_ms = Some(now);
        })?;
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
        let (rec, won) = self.transition(id, |rec, now| {
            rec.state = if allow {
                ApprovalState::Allowed
            } else {
                ApprovalState::Denied
            };
            rec.always = allow && always;
            rec.resolved_ms = Some(now);
        })?;
        if !won {
            return Err(ApprovalError::Settled {
                id: id.to_string(),
                state: rec.state,
            });
        }
        if rec.always {
            self.inner
                .rules
                .insert(rule_key(&rec.agent, &rec.rule), rec.id.as_bytes())
                .map_err(storage)?;
        }
        let answer = if allow {
            Answer::Allowed { always: rec.always }
        } else {
            Answer::Denied
        };
        if let Some((_, tx)) = self.inner.waiting.remove(id) {
            // The waiter may have timed out this instant; the record already says what happened.
            let _ = tx.send(answer);
        }
        tracing::info!(approval = %id, agent = %rec.agent, state = %rec.state, always = rec.always, "Approval answered.");
        self.publish(rec.state.as_str(), &rec).await;
        Ok(rec)
    }

    /// Moves a pending record on with `change`; `false` when it was no longer pending.
    fn transition(
        &self,
        id: &str,
        change: impl Fn(&mut ApprovalRecord, u64),
    ) -> Result<(ApprovalRecord, bool), ApprovalError> {
        loop {
            let Some(old) = self.inner.requests.get(id).map_err(storage)? else {
                return Err(ApprovalError::NotFound(id.to_string()));
            };
            let mut rec: ApprovalRecord = serde_json::from_slice(&old).map_err(storage)?;
            if rec.state != ApprovalState::Pending {
                return Ok((rec, false));
            }
            change(&mut rec, self.inner.clock.now_ms());
            let new = serde_json::to_vec(&rec).map_err(storage)?;
            match self
                .inner
                .requests
                .compare_and_swap(id, Some(old), Some(new))
                .map_err(storage)?
            {
                Ok(()) => return Ok((rec, true)),
                Err(_) => continue,
            }
        }
    }

    /// Every request, newest first.
    pub fn list(&self) -> Result<Vec<ApprovalRecord>, ApprovalError> {
        let mut out = Vec::new();
        for item in self.inner.requests.iter().rev() {
            let (_, bytes) = item.map_err(storage)?;
            out.push(serde_json::from_slice(&bytes).map_err(storage)?);
        }
        Ok(out)
    }

    /// One request.
    pub fn get(&self, id: &str) -> Result<Option<ApprovalRecord>, ApprovalError> {
        match self.inner.requests.get(id).map_err(storage)? {
            Some(bytes) => Ok(Some(serde_json::from_slice(&bytes).map_err(storage)?)),
            None => Ok(None),
        }
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

    fn put(&self, rec: &ApprovalRecord) -> Result<(), ApprovalError> {
        let bytes = serde_json::to_vec(rec).map_err(storage)?;
        self.inner
            .requests
            .insert(rec.id.as_bytes(), bytes)
            .map_err(storage)?;
        Ok(())
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

fn rule_key(agent: &str, rule: &str) -> Vec<u8> {
    let mut key = agent.as_bytes().to_vec();
    key.push(0);
    key.extend_from_slice(rule.as_bytes());
    key
}
