//! The session actor: its queue is the session lane; one run at a time, in arrival order.

use super::compaction::Compacted;
use super::history::View;
use super::run;
use super::run::{RunEnd, RunInput, RunReport, execute};
use super::runtime::AgentRuntime;
use super::transcript::{Entry, EntryBody, Transcript};
use super::{
    CancelRun, Compact, CompactError, Enqueue, LiveInfo, LiveSessions, RunDone, SessionState, Stop,
};
use crate::origin::Origin;
use actix::{
    Actor, ActorContext, ActorFutureExt, AsyncContext, Context, Handler, Recipient,
    ResponseActFuture, WrapFuture,
};
use bus::{Delivery, Outcome, TaskState};
use clawbus_core::ids::SessionKey;
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use uuid::Uuid;

/// Why a session could not be opened.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionOpenError {
    /// The session index could not be read or written.
    #[error("session index, {key}: {cause}")]
    Index {
        /// The session.
        key: SessionKey,
        /// The store's error.
        #[source]
        cause: super::index::IndexError,
    },
    /// The transcript could not be opened or started.
    #[error("transcript {}: {cause}", path.display())]
    Transcript {
        /// The file.
        path: std::path::PathBuf,
        /// The I/O error.
        #[source]
        cause: std::io::Error,
    },
}

/// The number the next session actor of the process gets (see [`LiveInfo::actor`]).
static NEXT_ACTOR: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// Removes the live entry of session `key` if actor `actor` published it: another actor of the
/// same session may have opened since (and published its own).
pub(super) fn leave_live(live: &LiveSessions, key: &str, actor: u64) {
    live.remove_if(key, |_, l| l.actor == actor);
}

/// One live session.
pub struct SessionActor {
    key: SessionKey,
    /// The transcript this actor writes (its index row's, as it was opened).
    session_id: Uuid,
    /// This actor's number, for its live entry (see [`LiveInfo::actor`]).
    actor: u64,
    /// This node's index row was made when the actor opened and its session is not yet in the
    /// cluster's rows: the first run enters it as it is (see `SessionIndex::enter`).
    new_row: Arc<AtomicBool>,
    rt: Arc<AgentRuntime>,
    transcript: Arc<Transcript>,
    /// The model's view of the conversation. Shared with the run in progress, which copies it
    /// only once it holds a lane slot: runs waiting for a slot hold no copy of the history.
    view: Arc<View>,
    queue: VecDeque<(Delivery, Origin)>,
    current: Option<Current>,
    /// A compaction asked for between runs is in progress: runs wait for it.
    compacting: bool,
    live: LiveSessions,
    done: Recipient<RunDone>,
    stopping: bool,
}

struct Current {
    delivery: Delivery,
    abort: tokio::task::AbortHandle,
    /// Set when the run was cancelled: why. The run counts as running until its task has
    /// really stopped (it may be between two awaits on another thread, writing lines).
    cancelled: Option<String>,
}

impl SessionActor {
    /// Opens the session's transcript (creating the session on first use) and rebuilds its view.
    pub fn open(
        key: SessionKey,
        rt: Arc<AgentRuntime>,
        live: LiveSessions,
        done: Recipient<RunDone>,
    ) -> Result<Self, SessionOpenError> {
        let (meta, made) = rt
            .index
            .get_or_create(key.as_str(), rt.id.as_str(), rt.clock.now_ms())
            .map_err(|cause| SessionOpenError::Index {
                key: key.clone(),
                cause,
            })?;
        let path = Transcript::path_for(&rt.state_dir, rt.id.as_str(), &meta.session_id);
        let transcript_err = |cause| SessionOpenError::Transcript {
            path: path.clone(),
            cause,
        };
        // Off a shared bus the view is what the file holds: built line by line as it is read.
        let shared = rt.leases.as_ref().map(|l| l.transcripts().clone());
        let mut view = View::default();
        let (transcript, read) = Transcript::open_each(&path, |e| {
            if shared.is_none() {
                view.apply_owned(e);
            }
        })
        .map_err(transcript_err)?;
        let mut transcript = transcript.with_clock(rt.clock.clone());
        if read.entries == 0 {
            // On a shared bus: the first line of this node's copy.
            let first = Entry::new(EntryBody::Session {
                version: 1,
                key: key.to_string(),
                agent: rt.id.to_string(),
            });
            transcript
                .append(std::slice::from_ref(&first))
                .map_err(transcript_err)?;
        }
        if let Some(log) = shared {
            // The session's transcript is its shared log: the first run reads it (under the
            // session's lease) and writes its first line if it has none.
            let name = super::lease::log_name(rt.id.as_str(), key.as_str());
            transcript = transcript.with_shared(log, name);
        }
        // The view's vector keeps the room its pushes left (not fitted): the session opens for
        // a task whose lines come next, and a fitted vector would be copied whole to grow by them.
        tracing::debug!(session = %key, entries = read.entries, torn_bytes = read.torn_bytes, "Session loaded.");
        Ok(Self {
            key,
            session_id: meta.session_id,
            actor: NEXT_ACTOR.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            new_row: Arc::new(AtomicBool::new(made)),
            rt,
            transcript: Arc::new(transcript),
            view: Arc::new(view),
            queue: VecDeque::new(),
            current: None,
            compacting: false,
            live,
            done,
            stopping: false,
        })
    }

    /// The transcript id the session was opened with.
    pub fn session_id(&self) -> Uuid {
        self.session_id
    }

    /// What its history takes in memory, about (see `View::bytes`): counted against the
    /// agent's history cache from the moment the session opens.
    pub fn history_bytes(&self) -> usize {
        self.view.bytes()
    }

    fn publish_state(&self) {
        let state = if self.current.is_some() || self.compacting {
            SessionState::Processing
        } else {
            SessionState::Idle
        };
        self.live.insert(
            self.key.to_string(),
            LiveInfo {
                state,
                queued: self.queue.len(),
                session_id: self.session_id,
                actor: self.actor,
            },
        );
    }

    fn live_gauge(&self) -> crate::metrics::Gauge {
        self.rt.metrics.gauge(
            "clawbus_live_sessions",
            "Live session actors.",
            &[("agent", self.rt.id.as_str())],
        )
    }

    /// Starts the next queued run when none is running.
    fn pump(&mut self, ctx: &mut Context<Self>) {
        if self.current.is_some() || self.compacting {
            return;
        }
        let Some((delivery, origin)) = self.queue.pop_front() else {
            self.publish_state();
            if self.stopping {
                ctx.stop();
            }
            return;
        };
        let task_id = delivery.envelope().id;
        let input = RunInput {
            rt: self.rt.clone(),
            key: self.key.clone(),
            origin,
            delivery: delivery.clone(),
            view: self.view.clone(),
            transcript: self.transcript.clone(),
            new_row: self.new_row.clone(),
        };
        // Boxed first: the run's future is large, and the task then holds a pointer to it
        // instead of being copied into the task's cell.
        let handle = tokio::spawn(Box::pin(execute(input)));
        self.rt.drain.track(&delivery, handle.abort_handle());
        self.current = Some(Current {
            delivery,
            abort: handle.abort_handle(),
            cancelled: None,
        });
        tracing::info!(session = %self.key, task_id = %task_id, queued = self.queue.len(), reason = "run_started", "Session processing.");
        self.publish_state();
        ctx.spawn(handle.into_actor(self).map(move |res, act, ctx| {
            act.run_ended(task_id, res, ctx);
        }));
    }

    fn run_ended(
        &mut self,
        task_id: Uuid,
        res: Result<RunReport, tokio::task::JoinError>,
        ctx: &mut Context<Self>,
    ) {
        self.rt.drain.untrack(task_id);
        let Some(current) = self
            .current
            .take_if(|c| c.delivery.envelope().id == task_id)
        else {
            return;
        };
        match (res, current.cancelled) {
            (_, Some(reason)) => {
                // Nothing writes to the transcript any more: record the cancel after the run's
                // own lines, and rebuild the view from disk (the run may have written some).
                let request_id = current.delivery.envelope().request_id.to_string();
                let ended = Entry::new(EntryBody::RunEnded {
                    request_id,
                    outcome: TaskState::Cancelled,
                    reason,
                });
                if self.transcript.is_shared() {
                    let transcript = self.transcript.clone();
                    let key = self.key.clone();
                    actix::spawn(async move {
                        if let Err(e) = transcript.record(std::slice::from_ref(&ended)).await {
                            tracing::error!(session = %key, error = %e, "Could not record the cancel in the transcript.");
                        }
                    });
                } else if let Err(e) = self.transcript.append(std::slice::from_ref(&ended)) {
                    tracing::error!(session = %self.key, error = %e, "Could not record the cancel in the transcript.");
                }
                tracing::info!(session = %self.key, task_id = %task_id, reason = "run_cancelled", "Running turn cancelled.");
                self.reload_view();
            }
            (Ok(report), None) if report.end == RunEnd::LeaseLost => {
                tracing::warn!(session = %self.key, task_id = %task_id, reason = "run_lease_lost", "Session idle; its run stopped when its lease was lost.");
                self.reload_view();
            }
            (Ok(report), None) => {
                if let Some(base) = report.base {
                    self.view = Arc::new(base);
                }
                for e in &report.entries {
                    Arc::make_mut(&mut self.view).apply(e);
                }
                let reason = match report.end {
                    RunEnd::Ended(TaskState::Succeeded) => "run_completed",
                    RunEnd::Released => "run_released",
                    RunEnd::Retrying => "run_retrying",
                    RunEnd::Skipped => "run_skipped",
                    RunEnd::Ended(_) => "run_failed",
                    RunEnd::LeaseLost => "run_lease_lost",
                };
                tracing::info!(session = %self.key, task_id = %task_id, end = ?report.end, reason, "Session idle.");
            }
            (Err(e), None) => {
                tracing::error!(session = %self.key, task_id = %task_id, error = %e, reason = "run_failed", "Run task ended abnormally; it will be redelivered.");
                self.reload_view();
            }
        }
        drop(current.delivery);
        self.done.do_send(RunDone {
            key: self.key.to_string(),
            task_id,
            history_bytes: self.view.bytes(),
        });
        self.pump(ctx);
    }

    /// Re-reads the view from disk after a run that did not report its entries.
    fn reload_view(&mut self) {
        if self.transcript.is_shared() {
            // The next run reads the shared log whole before it starts.
            self.transcript.forget();
            return;
        }
        let mut view = View::default();
        match Transcript::open_each(self.transcript.path(), |e| view.apply_owned(e)) {
            Ok(_) => self.view = Arc::new(view),
            Err(e) => {
                tracing::error!(session = %self.key, error = %e, "Transcript reload failed; keeping the old view.")
            }
        }
    }
}

impl Actor for SessionActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.set_mailbox_capacity(256);
        self.publish_state();
        self.live_gauge().inc();
    }

    fn stopped(&mut self, _: &mut Self::Context) {
        leave_live(&self.live, self.key.as_str(), self.actor);
        self.live_gauge().dec();
        tracing::debug!(session = %self.key, "Session actor stopped; its state stays on disk.");
    }
}

impl Handler<Enqueue> for SessionActor {
    type Result = ();
    fn handle(&mut self, msg: Enqueue, ctx: &mut Context<Self>) {
        self.queue.push_back((msg.delivery, msg.origin));
        self.stopping = false;
        self.pump(ctx);
        self.publish_state();
    }
}

impl Handler<CancelRun> for SessionActor {
    type Result = bool;
    fn handle(&mut self, msg: CancelRun, _: &mut Context<Self>) -> bool {
        let outcome = Outcome::Cancelled {
            reason: msg.reason.clone(),
        };
        if let Some(pos) = self
            .queue
            .iter()
            .position(|(d, _)| d.envelope().id == msg.task_id)
        {
            if let Some((delivery, _)) = self.queue.remove(pos) {
                settle(delivery, outcome);
            }
            tracing::info!(session = %self.key, task_id = %msg.task_id, "Queued run cancelled; it left the session lane.");
            self.done.do_send(RunDone {
                key: self.key.to_string(),
                task_id: msg.task_id,
                history_bytes: self.view.bytes(),
            });
            self.publish_state();
            return true;
        }
        let Some(current) = self
            .current
            .as_mut()
            .filter(|c| c.delivery.envelope().id == msg.task_id)
        else {
            return false;
        };
        if current.cancelled.is_none() {
            // The outcome is recorded now; the session moves on once the run has stopped
            // (`run_ended`), so no two runs of the session ever overlap.
            current.cancelled = Some(msg.reason);
            current.abort.abort();
            settle(current.delivery.clone(), outcome);
        }
        true
    }
}

impl Handler<Stop> for SessionActor {
    type Result = ();
    fn handle(&mut self, _: Stop, ctx: &mut Context<Self>) {
        if self.current.is_none() && self.queue.is_empty() && !self.compacting {
            ctx.stop();
        } else {
            self.stopping = true;
        }
    }
}

impl Handler<Compact> for SessionActor {
    type Result = ResponseActFuture<Self, Result<Compacted, CompactError>>;

    /// Runs the compaction off the session's thread (its model call, its synced write) while
    /// new runs queue behind it; the view takes the compaction record when it is written.
    fn handle(&mut self, msg: Compact, _: &mut Context<Self>) -> Self::Result {
        let key = self.key.to_string();
        let refused = if self.current.is_some() || self.compacting {
            Some(CompactError::Running { key: key.clone() })
        } else if !self.queue.is_empty() {
            Some(CompactError::Queued { key: key.clone() })
        } else {
            None
        };
        if let Some(e) = refused {
            return Box::pin(actix::fut::ready(Err(e)));
        }
        self.compacting = true;
        self.publish_state();
        let (rt, view, transcript) = (
            self.rt.clone(),
            View::clone(&self.view),
            self.transcript.clone(),
        );
        let session = self.key.clone();
        let work =
            tokio::spawn(
                async move { run::compact(&rt, &session, &transcript, view, msg.how).await },
            );
        Box::pin(work.into_actor(self).map(move |joined, act, ctx| {
            act.compacting = false;
            let joined = joined.unwrap_or_else(|e| {
                Err(CompactError::Failed {
                    key,
                    error: e.to_string(),
                })
            });
            let done = match joined {
                Ok((base, done, entry)) => {
                    if let Some(base) = base {
                        act.view = Arc::new(base);
                    }
                    if let Some(e) = &entry {
                        Arc::make_mut(&mut act.view).apply(e);
                    }
                    tracing::info!(session = %act.key, compacted = done.compacted, kept = done.kept, tokens_before = done.tokens_before, tokens_after = done.tokens_after, "Session compacted on request.");
                    Ok(done)
                }
                Err(e) => {
                    tracing::warn!(session = %act.key, error = %e, "Compaction on request not done; the history is as it was.");
                    Err(e)
                }
            };
            act.pump(ctx);
            done
        }))
    }
}

/// Completes a delivery in the background; the first outcome wins, so a late one is harmless.
fn settle(delivery: Delivery, outcome: Outcome) {
    actix::spawn(async move {
        if let Err(e) = delivery.complete(outcome).await {
            tracing::error!(error = %e, "Could not record a cancel outcome.");
        }
    });
}
