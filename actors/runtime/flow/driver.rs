//! The driver of one run: starts every ready node (in parallel), awaits their tasks, applies
//! schemas, retries and the failure policy, and writes the record after every step, until every
//! node has ended. A resumed run re-attaches to its running tasks by their request ids.

use super::Inner;
use super::event::{FlowEvent, FlowEventKind};
use super::run::{FlowRun, NodeState, RunState};
use crate::ingress::Ingress;
use bus::{RequestId, TaskRecord};
use clawbus_core::config::flow::{FlowDef, NodeDef};
use std::sync::Arc;
use tokio::sync::Notify;
use tokio::task::JoinSet;

mod child;
mod nodes;
mod task;

use task::{Verdict, base_prompt, judge, prompt_of, submit_and_wait};

/// A task of the run ended (or could not be submitted).
struct Done {
    node: String,
    item: usize,
    attempt: u32,
    ended: Ended,
}

/// How a node's task ended: an agent's task record, or (a node that runs a flow) the child run's
/// verdict.
enum Ended {
    Task(Box<Result<TaskRecord, task::NodeTaskError>>),
    Child(Verdict),
}

/// A task to submit: its node, item, request id, prompt.
struct Start {
    node: String,
    item: usize,
    attempt: u32,
    request_id: String,
    prompt: String,
}

pub(super) struct Driver {
    inner: Arc<Inner>,
    run: FlowRun,
    /// The run's flow (the record's snapshot), shared so a step does not copy it.
    def: Arc<FlowDef>,
    tasks: JoinSet<Done>,
    cancel: Arc<Notify>,
}

impl Driver {
    pub(super) fn new(inner: Arc<Inner>, run: FlowRun, cancel: Arc<Notify>) -> Self {
        Self {
            inner,
            def: Arc::new(run.def.clone()),
            run,
            tasks: JoinSet::new(),
            cancel,
        }
    }

    /// Runs to the end (or until the task is aborted: the record holds where it stood).
    pub(super) async fn drive(mut self) {
        self.event(FlowEventKind::RunStarted, None, None, None, None, None)
            .await;
        // Resumed: the tasks that were running are awaited again under their request ids.
        let resumed: Vec<Start> = self.running_items();
        self.submit(resumed);
        loop {
            if let Err(e) = self.check_cancel().await {
                tracing::warn!(run = %self.run.id, error = %e, "flow: could not read the cancel");
            }
            let starts = if self.run.cancelled.is_none() {
                self.schedule().await
            } else {
                Vec::new()
            };
            self.save();
            self.submit(starts);
            if self.tasks.is_empty() {
                break;
            }
            tokio::select! {
                done = self.tasks.join_next() => match done {
                    Some(Ok(done)) => self.finished(done).await,
                    Some(Err(e)) => tracing::warn!(run = %self.run.id, error = %e, "flow: a task waiter stopped"),
                    None => {}
                },
                () = self.cancel.notified() => {}
            }
            // Tasks that ended meanwhile are taken in the same step: one record write for all.
            while let Some(done) = self.tasks.try_join_next() {
                match done {
                    Ok(done) => self.finished(done).await,
                    Err(e) => {
                        tracing::warn!(run = %self.run.id, error = %e, "flow: a task waiter stopped")
                    }
                }
            }
        }
        self.finish().await;
    }

    /// Writes the record; a failure is logged (the run goes on: its tasks are keyed by request id).
    fn save(&self) {
        if let Err(e) = self.inner.store.put(&self.run) {
            tracing::error!(run = %self.run.id, error = %e, "flow: the run record was not written");
        }
    }

    async fn finish(&mut self) {
        let state = self.run.outcome().unwrap_or(RunState::Failed);
        if self.run.nodes.values().any(|n| !n.state.is_terminal()) {
            let now = self.now();
            for n in self
                .run
                .nodes
                .values_mut()
                .filter(|n| !n.state.is_terminal())
            {
                n.state = NodeState::Failed;
                n.error = Some("the run ended before this node could".into());
                n.ended_ms = Some(now);
            }
        }
        self.run.state = state;
        self.run.ended_ms = Some(self.now());
        self.save();
        let store = self.inner.store.clone();
        match tokio::task::spawn_blocking(move || store.sync()).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::error!(run = %self.run.id, error = %e, "flow: the end of the run was not synced")
            }
            Err(e) => tracing::error!(run = %self.run.id, error = %e, "flow: the sync stopped"),
        }
        let error = self.run.cancelled.clone();
        self.event(
            FlowEventKind::RunFinished,
            None,
            None,
            None,
            Some(state.as_str().into()),
            error,
        )
        .await;
        tracing::info!(run = %self.run.id, flow = %self.run.def.name, state = state.as_str(), "Flow run ended.");
        self.inner.forget(&self.run.id);
    }

    fn now(&self) -> u64 {
        self.inner.clock.now_ms()
    }

    async fn event(
        &self,
        kind: FlowEventKind,
        node: Option<&str>,
        item: Option<usize>,
        attempt: Option<u32>,
        state: Option<String>,
        error: Option<String>,
    ) {
        let e = FlowEvent {
            run_id: self.run.id.clone(),
            kind,
            node: node.map(str::to_string),
            item,
            attempt,
            state,
            error,
        };
        self.inner.publish(e).await;
    }

    /// Takes up a cancel recorded in the store: running tasks are cancelled, nothing else starts.
    async fn check_cancel(&mut self) -> Result<(), super::store::FlowStoreError> {
        if self.run.cancelled.is_some() {
            return Ok(());
        }
        let Some(reason) = self.inner.store.cancelled(&self.run.id)? else {
            return Ok(());
        };
        self.run.cancelled = Some(reason.clone());
        let now = self.now();
        let mut running = Vec::new();
        for (id, n) in &mut self.run.nodes {
            for it in n.items.iter_mut() {
                match it.state {
                    NodeState::Pending => it.state = NodeState::Cancelled,
                    NodeState::Running => running.extend(it.request_id.clone()),
                    _ => {}
                }
            }
            if n.state == NodeState::Pending {
                n.state = NodeState::Cancelled;
                n.reason = Some(format!("the run was cancelled: {reason}"));
                n.ended_ms = Some(now);
                tracing::debug!(run = %self.run.id, node = %id, "flow: node cancelled before it started");
            }
        }
        for rid in running {
            // A node that runs a flow: its child run is cancelled (and its tasks with it).
            match self.inner.store.claimed(&rid) {
                Ok(Some(child)) => {
                    let flows = super::Flows {
                        inner: self.inner.clone(),
                    };
                    if let Err(e) = flows.cancel(&child, &reason).await {
                        tracing::warn!(run = %child, error = %e, "flow: a child run was not cancelled");
                    }
                    continue;
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(request_id = %rid, error = %e, "flow: a child run was not looked up")
                }
            }
            if let Ok(rid) = RequestId::parse(&rid)
                && let Err(e) = self.inner.bus.cancel(&rid, &reason).await
            {
                tracing::warn!(request_id = %rid, error = %e, "flow: a node's task was not cancelled");
            }
        }
        Ok(())
    }

    /// The items that are running (after a restart: to await again).
    fn running_items(&self) -> Vec<Start> {
        let mut out = Vec::new();
        for (id, n) in &self.run.nodes {
            for (i, it) in n.items.iter().enumerate() {
                if let (NodeState::Running, Some(rid), Some(prompt)) =
                    (it.state, &it.request_id, &it.prompt)
                {
                    out.push(Start {
                        node: id.clone(),
                        item: i,
                        attempt: it.attempt,
                        request_id: rid.clone(),
                        prompt: prompt.clone(),
                    });
                }
            }
        }
        out
    }

    /// Marks item `i` running with its next attempt and `prompt`.
    fn mark_started(&mut self, node: &NodeDef, i: usize, prompt: String) -> Start {
        let run_id = self.run.id.clone();
        let n = self
            .run
            .nodes
            .entry(node.id.clone())
            .or_insert_with(super::run::NodeRun::pending);
        n.attempts += 1;
        let it = &mut n.items[i];
        it.attempt += 1;
        it.state = NodeState::Running;
        let request_id = format!("flow:{run_id}:{}:{i}:{}", node.id, it.attempt);
        it.request_id = Some(request_id.clone());
        it.prompt = Some(prompt.clone());
        Start {
            node: node.id.clone(),
            item: i,
            attempt: it.attempt,
            request_id,
            prompt,
        }
    }

    /// Spawns a waiter per task: submit (joining a task already there), then await its end.
    fn submit(&mut self, starts: Vec<Start>) {
        for s in starts {
            let Some(node) = self.def.node(&s.node).cloned() else {
                continue;
            };
            let ingress = Ingress::new(self.inner.bus.clone());
            let now = self.now();
            let deadline = [
                node.timeout
                    .map(|t| now.saturating_add(t.as_millis() as u64)),
                self.run.deadline_ms,
            ]
            .into_iter()
            .flatten()
            .min();
            let run_id = self.run.id.clone();
            let flows = super::Flows {
                inner: self.inner.clone(),
            };
            self.tasks.spawn(async move {
                let ended = if node.flow.is_some() {
                    Ended::Child(child::run(&flows, &run_id, &node, &s, deadline).await)
                } else {
                    Ended::Task(Box::new(
                        submit_and_wait(&ingress, &run_id, &node, &s, deadline).await,
                    ))
                };
                Done {
                    node: s.node,
                    item: s.item,
                    attempt: s.attempt,
                    ended,
                }
            });
        }
    }

    /// A task ended: the item succeeds (its output checked), retries, or fails.
    async fn finished(&mut self, done: Done) {
        let Some(node) = self.def.node(&done.node).cloned() else {
            return;
        };
        let Some(it) = self
            .run
            .nodes
            .get(&done.node)
            .and_then(|n| n.items.get(done.item))
        else {
            return;
        };
        if it.attempt != done.attempt || it.state != NodeState::Running {
            return;
        }
        let prompt = it.prompt.clone().unwrap_or_default();
        let verdict = match done.ended {
            Ended::Task(record) => judge(&node, *record),
            Ended::Child(verdict) => verdict,
        };
        let retry = match &verdict {
            Verdict::Retry { class, .. } => {
                let now = self.now();
                self.run.cancelled.is_none()
                    && self.run.deadline_ms.is_none_or(|d| now < d)
                    && done.attempt < node.max_attempts
                    && class
                        .is_none_or(|c| node.retry_on.contains(&c) && !node.abort_on.contains(&c))
            }
            _ => false,
        };
        match verdict {
            Verdict::Output(v) => {
                self.item_end(&node, done.item, NodeState::Succeeded, Some(v), None)
            }
            Verdict::Cancelled(reason) => {
                self.item_end(&node, done.item, NodeState::Cancelled, None, Some(reason))
            }
            Verdict::Retry { error, errors, .. } if retry => {
                self.event(
                    FlowEventKind::NodeRetrying,
                    Some(&node.id),
                    Some(done.item),
                    Some(done.attempt),
                    None,
                    Some(error),
                )
                .await;
                let base = base_prompt(&prompt);
                let next = prompt_of(&node, &base, errors.as_deref());
                let start = self.mark_started(&node, done.item, next);
                self.save();
                self.submit(vec![start]);
                return;
            }
            Verdict::Retry { error, .. } => {
                self.item_end(&node, done.item, NodeState::Failed, None, Some(error))
            }
        }
        self.settle(&node).await;
    }
}

fn n_attempts(run: &FlowRun, node: &str) -> u32 {
    run.nodes.get(node).map_or(0, |n| n.attempts)
}
