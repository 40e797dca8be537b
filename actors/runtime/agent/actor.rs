//! The agent actor: takes its tasks off the bus, routes each to a session actor, keeps the set of
//! live sessions under its cap, and forwards cancellations.

use super::in_flight::TasksInFlight;
use crate::origin::{Origin, OriginError};
use crate::router::{Inbound, RouteError, Router};
use crate::session::runtime::AgentRuntime;
use crate::session::{
    CompactError, CompactHow, Compacted, LiveSessions, RunDone, SessionActor, SessionHandle,
    SessionOpenError, SessionShards,
};
use actix::{Actor, ActorContext, ActorFutureExt, AsyncContext, Context, Handler, StreamHandler};
use bus::{CancelNotice, Delivery, Kind, Outcome};
use clawbus_core::ids::SessionKey;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;
use uuid::Uuid;

/// Limits on the agent's live session actors.
#[derive(Debug, Clone, Copy)]
pub struct SessionLimits {
    /// Live session actors at most (idle ones beyond it are stopped, least recently used first).
    pub max_live: usize,
    /// An idle session actor is stopped after this long.
    pub idle_timeout: Duration,
    /// Bytes of conversation history the live sessions may keep in memory together, about;
    /// past it the least recently used idle ones are stopped (their history stays on disk).
    pub history_cache: usize,
}

/// Why a task could not reach a session.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(super) enum TaskRouteError {
    /// An origin header was malformed.
    #[error(transparent)]
    Origin(#[from] OriginError),
    /// The router found no session for it.
    #[error(transparent)]
    Route(#[from] RouteError),
    /// Ingress routed it to a session of another agent.
    #[error("session {key} does not belong to agent \"{agent}\"")]
    ForeignSession {
        /// The key on the envelope.
        key: SessionKey,
        /// This agent.
        agent: String,
    },
    /// The session could not be opened.
    #[error(transparent)]
    Session(#[from] SessionOpenError),
    /// The session vanished between its start and its use (a bug).
    #[error("session {0} vanished")]
    Vanished(SessionKey),
}

struct Live {
    handle: SessionHandle,
    /// The transcript id the actor was opened with.
    session_id: Uuid,
    last_used: Instant,
    /// Runs sent to the session that have not reported back.
    pending: usize,
    /// The size of its history in memory, as its last run reported it.
    history_bytes: usize,
}

/// Routes an agent's tasks to its sessions.
pub struct AgentActor {
    rt: Arc<AgentRuntime>,
    router: Arc<Router>,
    limits: SessionLimits,
    live: LiveSessions,
    shards: SessionShards,
    sessions: HashMap<SessionKey, Live>,
    /// Which session each unfinished task went to, per delivery queued or running.
    tasks: TasksInFlight,
}

impl AgentActor {
    /// A new agent actor; start it with `AgentActor::create` and add its task and cancel streams.
    pub fn new(
        rt: Arc<AgentRuntime>,
        router: Arc<Router>,
        limits: SessionLimits,
        live: LiveSessions,
        shards: SessionShards,
    ) -> Self {
        Self {
            rt,
            router,
            limits,
            live,
            shards,
            sessions: HashMap::new(),
            tasks: TasksInFlight::default(),
        }
    }

    /// Routes a task to its session key: the key chosen at ingress when the channel routed it,
    /// else the router's answer for this agent.
    fn route(&self, delivery: &Delivery) -> Result<(SessionKey, Origin), TaskRouteError> {
        let env = delivery.envelope();
        let origin = Origin::of(env)?;
        if let Some(key) = &origin.session_key {
            if key.agent() != self.rt.id.as_str() {
                return Err(TaskRouteError::ForeignSession {
                    key: key.clone(),
                    agent: self.rt.id.to_string(),
                });
            }
            return Ok((key.clone(), origin));
        }
        // A task from a shared topic: a session of its own per request.
        if env.topic != bus::Topic::agent(self.rt.id.as_str()) {
            let key =
                SessionKey::shared_topic(&self.rt.id, env.topic.as_str(), env.request_id.as_str());
            return Ok((key, origin));
        }
        let inbound = Inbound {
            channel: origin.channel.to_string(),
            chat_type: origin.chat_type.clone(),
            peer: origin.peer.clone(),
            agent: Some(self.rt.id.clone()),
            session_name: origin.session_name.clone(),
            request_id: env.request_id.to_string(),
        };
        let route = self.router.route(&inbound)?;
        Ok((route.session, origin))
    }

    /// The live session for `key`, started (and loaded from disk) if needed.
    fn session(
        &mut self,
        key: &SessionKey,
        ctx: &mut Context<Self>,
    ) -> Result<&mut Live, TaskRouteError> {
        self.drop_if_deleted(key);
        if !self.sessions.contains_key(key) {
            self.make_room();
            let actor = SessionActor::open(
                key.clone(),
                self.rt.clone(),
                self.live.clone(),
                ctx.address().recipient(),
            )?;
            let session_id = actor.session_id();
            // The history read from disk counts against the cache from now, not from the
            // session's first run's end: sessions opened for tasks still waiting would
            // otherwise hold histories the cache does not see.
            let history_bytes = actor.history_bytes();
            let handle = SessionHandle::new(self.shards.start_session(actor));
            self.sessions.insert(
                key.clone(),
                Live {
                    handle,
                    session_id,
                    last_used: self.rt.clock.now(),
                    pending: 0,
                    history_bytes,
                },
            );
            self.trim_histories(Some(key));
        }
        self.sessions
            .get_mut(key)
            .ok_or_else(|| TaskRouteError::Vanished(key.clone()))
    }

    /// Stops the idle live actor of `key` when its session was deleted (or replaced) since it
    /// opened: its index row is gone or names another transcript. The next task then opens a
    /// fresh session instead of carrying on the deleted one's state.
    fn drop_if_deleted(&mut self, key: &SessionKey) {
        let Some(live) = self.sessions.get(key).filter(|l| l.pending == 0) else {
            return;
        };
        let current = match self.rt.index.local_session_id(key.as_str()) {
            Ok(id) => id,
            Err(e) => {
                tracing::warn!(session = %key, error = %e, "Session index unreadable; the live session carries on.");
                return;
            }
        };
        if current == Some(live.session_id) {
            return;
        }
        if let Some(l) = self.sessions.remove(key) {
            tracing::debug!(agent = %self.rt.id, session = %key, "Session deleted since it opened; its live actor is stopped.");
            l.handle.stop();
        }
    }

    /// Stops least recently used idle sessions until there is room for one more.
    fn make_room(&mut self) {
        while self.sessions.len() >= self.limits.max_live {
            let victim = self
                .sessions
                .iter()
                .filter(|(_, l)| l.pending == 0)
                .min_by_key(|(_, l)| l.last_used)
                .map(|(k, _)| k.clone());
            let Some(key) = victim else {
                tracing::warn!(agent = %self.rt.id, live = self.sessions.len(), "Every live session is busy; over the cap until one is idle.");
                return;
            };
            if let Some(l) = self.sessions.remove(&key) {
                tracing::debug!(agent = %self.rt.id, session = %key, "Idle session evicted to stay under the live cap.");
                l.handle.stop();
            }
        }
    }

    /// Stops least recently used idle sessions while the histories of the live ones together
    /// exceed the history cache; never `keep` (a session just opened for a task).
    fn trim_histories(&mut self, keep: Option<&SessionKey>) {
        let mut total: usize = self.sessions.values().map(|l| l.history_bytes).sum();
        while total > self.limits.history_cache {
            let victim = self
                .sessions
                .iter()
                .filter(|(k, l)| l.pending == 0 && l.history_bytes > 0 && Some(*k) != keep)
                .min_by_key(|(_, l)| l.last_used)
                .map(|(k, _)| k.clone());
            let Some(key) = victim else { return };
            if let Some(l) = self.sessions.remove(&key) {
                tracing::debug!(agent = %self.rt.id, session = %key, bytes = l.history_bytes, "Idle session stopped to keep the histories in memory under the cache.");
                total -= l.history_bytes;
                l.handle.stop();
            }
        }
    }

    /// Stops the sessions idle for the idle timeout, by the clock.
    fn evict_idle(&mut self) {
        let cutoff = self.limits.idle_timeout;
        let now = self.rt.clock.now();
        let stale: Vec<SessionKey> = self
            .sessions
            .iter()
            .filter(|(_, l)| l.pending == 0 && now.saturating_duration_since(l.last_used) >= cutoff)
            .map(|(k, _)| k.clone())
            .collect();
        for key in stale {
            if let Some(l) = self.sessions.remove(&key) {
                tracing::debug!(agent = %self.rt.id, session = %key, "Session idle too long; actor stopped.");
                l.handle.stop();
            }
        }
    }

    /// Sweeps idle sessions once a tenth of the idle timeout (1 s to 60 s) has passed on the
    /// clock, then schedules the next sweep, for as long as the actor runs.
    fn sweep_later(&self, ctx: &mut Context<Self>) {
        let every =
            (self.limits.idle_timeout / 10).clamp(Duration::from_secs(1), Duration::from_secs(60));
        let timer = actix::fut::wrap_future(self.rt.clock.sleep(every));
        ctx.spawn(timer.map(|(), act: &mut Self, ctx| {
            act.evict_idle();
            act.sweep_later(ctx);
        }));
    }
}

impl Actor for AgentActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.set_mailbox_capacity(4096);
        self.sweep_later(ctx);
    }
}

/// Tasks from the bus.
pub(super) struct Task(pub Delivery);
/// Cancellation notices from the bus.
pub(super) struct Cancelled(pub Delivery);

impl StreamHandler<Task> for AgentActor {
    fn handle(&mut self, Task(delivery): Task, ctx: &mut Self::Context) {
        if delivery.envelope().kind != Kind::Task {
            return;
        }
        let task_id = delivery.envelope().id;
        let now = self.rt.clock.now();
        let routed = self.route(&delivery).and_then(|(key, origin)| {
            let live = self.session(&key, ctx)?;
            live.pending += 1;
            live.last_used = now;
            live.handle.enqueue(delivery.clone(), origin);
            Ok(key)
        });
        match routed {
            Ok(key) => {
                self.tasks.queued(task_id, key);
            }
            Err(error) => {
                tracing::error!(agent = %self.rt.id, task_id = %task_id, error = %error, "Task could not be routed to a session.");
                let error = error.to_string();
                actix::spawn(async move {
                    if let Err(e) = delivery.complete(Outcome::Failed { error }).await {
                        tracing::error!(error = %e, "Could not record the routing failure.");
                    }
                });
            }
        }
    }

    fn finished(&mut self, ctx: &mut Self::Context) {
        tracing::info!(agent = %self.rt.id, "Task stream closed; agent stops.");
        ctx.stop();
    }
}

impl StreamHandler<Cancelled> for AgentActor {
    fn handle(&mut self, Cancelled(notice): Cancelled, ctx: &mut Self::Context) {
        let Some(CancelNotice {
            task_id, reason, ..
        }) = CancelNotice::from_payload(&notice.envelope().payload)
        else {
            return;
        };
        let Some(key) = self.tasks.session_of(&task_id).cloned() else {
            return;
        };
        let Some(live) = self.sessions.get(&key) else {
            return;
        };
        let handle = live.handle.clone();
        ctx.spawn(actix::fut::wrap_future(async move {
            handle.cancel(task_id, reason).await;
        }));
    }

    fn finished(&mut self, _: &mut Self::Context) {}
}

/// Test-only: the runs each live session has pending (one entry per live session actor).
#[cfg(test)]
#[derive(actix::Message)]
#[rtype(result = "Vec<usize>")]
pub(super) struct PendingRuns;

/// Test-only: the history bytes each live session reported (one entry per live session actor).
#[cfg(test)]
#[derive(actix::Message)]
#[rtype(result = "Vec<usize>")]
pub(super) struct HistoryBytes;

#[cfg(test)]
impl Handler<HistoryBytes> for AgentActor {
    type Result = Vec<usize>;
    fn handle(&mut self, _: HistoryBytes, _: &mut Context<Self>) -> Vec<usize> {
        self.sessions.values().map(|l| l.history_bytes).collect()
    }
}

#[cfg(test)]
impl Handler<PendingRuns> for AgentActor {
    type Result = Vec<usize>;
    fn handle(&mut self, _: PendingRuns, _: &mut Context<Self>) -> Vec<usize> {
        self.sessions.values().map(|l| l.pending).collect()
    }
}

/// Compacts one of the agent's sessions between runs (`sessions compact`), opening it from disk
/// when it is not live. On the embedded bus a session with no index row is not created: it is
/// refused as unknown.
#[derive(actix::Message)]
#[rtype(result = "Result<Compacted, CompactError>")]
pub struct CompactSession {
    /// The session.
    pub key: SessionKey,
    /// Summarise, or keep the last messages.
    pub how: CompactHow,
}

impl Handler<CompactSession> for AgentActor {
    type Result = actix::ResponseActFuture<Self, Result<Compacted, CompactError>>;

    /// The session counts as busy meanwhile, so it is never evicted (and opened twice) while it
    /// writes its compaction.
    fn handle(&mut self, msg: CompactSession, ctx: &mut Context<Self>) -> Self::Result {
        let CompactSession { key, how } = msg;
        let name = key.to_string();
        let now = self.rt.clock.now();
        // On a shared bus the caller found the session in the cluster's index: this node may
        // not have run it yet, and enters it as a run here would.
        let known = match self.rt.leases {
            Some(_) => Ok(Some(Uuid::nil())),
            None => self.rt.index.local_session_id(key.as_str()),
        };
        let opened = match known {
            Ok(Some(_)) => self.session(&key, ctx).map_err(|e| CompactError::Failed {
                key: name.clone(),
                error: e.to_string(),
            }),
            Ok(None) => Err(CompactError::Unknown { key: name.clone() }),
            Err(e) => Err(CompactError::Failed {
                key: name.clone(),
                error: format!("session index: {e}"),
            }),
        };
        let handle = match opened {
            Ok(live) => {
                live.pending += 1;
                live.last_used = now;
                live.handle.clone()
            }
            Err(e) => return Box::pin(actix::fut::ready(Err(e))),
        };
        let work = async move { handle.compact(&name, how).await };
        Box::pin(
            actix::fut::wrap_future(work).map(move |done, act: &mut Self, _| {
                if let Some(live) = act.sessions.get_mut(&key) {
                    live.pending = live.pending.saturating_sub(1);
                    live.last_used = act.rt.clock.now();
                }
                done
            }),
        )
    }
}

/// Stops the agent: its task and cancel streams close, and its sessions with it.
#[derive(actix::Message)]
#[rtype(result = "()")]
pub struct StopAgent;

impl Handler<StopAgent> for AgentActor {
    type Result = ();
    fn handle(&mut self, _: StopAgent, ctx: &mut Context<Self>) {
        for (_, live) in self.sessions.drain() {
            live.handle.stop();
        }
        ctx.stop();
    }
}

impl Handler<RunDone> for AgentActor {
    type Result = ();
    fn handle(&mut self, msg: RunDone, _: &mut Context<Self>) {
        if let Some(key) = self.tasks.ended(&msg.task_id) {
            if let Some(live) = self.sessions.get_mut(&key) {
                live.pending = live.pending.saturating_sub(1);
                live.last_used = self.rt.clock.now();
                live.history_bytes = msg.history_bytes;
            }
            self.trim_histories(None);
        }
    }
}
