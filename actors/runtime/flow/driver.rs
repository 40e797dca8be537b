//! The driver of one run: starts every ready node (in parallel), awaits their tasks, applies
//! schemas, retries and the failure policy, and writes the record after every step, until every
//! node has ended. A resumed run re-attaches to its running tasks by their request ids.

use super::event::{FlowEvent, FlowEventKind};
use super::run::{FlowRun, ItemRun, NodeState, RunState};
use super::{Inner, values};
use crate::ingress::{Duplicates, Ingress, Request, Target};
use crate::origin::Origin;
use bus::{BusError, Outcome, RequestId, TaskRecord};
use clawbus_core::config::flow::{NodeDef, OnFailure, schema};
use clawbus_core::config::retry::ErrorClass;
use clawbus_core::ids::SessionKey;
use clawbus_core::task::TaskResult;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;
use tokio::task::JoinSet;

/// How long one wait on the bus lasts before it is renewed.
const WAIT_SLICE: Duration = Duration::from_secs(60);

/// A task of the run ended (or could not be submitted).
struct Done {
    node: String,
    item: usize,
    attempt: u32,
    record: Result<TaskRecord, String>,
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
    tasks: JoinSet<Done>,
    cancel: Arc<Notify>,
}

impl Driver {
    pub(super) fn new(inner: Arc<Inner>, run: FlowRun, cancel: Arc<Notify>) -> Self {
        Self {
            inner,
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

    /// Decides every pending node whose dependencies have ended, and starts the items that may
    /// run: the tasks to submit (already marked running in the record).
    async fn schedule(&mut self) -> Vec<Start> {
        let def = self.run.def.clone();
        let mut starts = Vec::new();
        for node in &def.nodes {
            let state = self.run.nodes.get(&node.id).map(|n| n.state);
            if state == Some(NodeState::Pending) {
                self.decide(node).await;
            }
            if self.run.nodes.get(&node.id).map(|n| n.state) == Some(NodeState::Running) {
                starts.extend(self.start_items(node).await);
            }
        }
        starts
    }

    /// A pending node whose dependencies have all ended: skipped, failed or running.
    async fn decide(&mut self, node: &NodeDef) {
        let mut cause = None;
        for d in &node.depends_on {
            let Some(up) = self.run.nodes.get(d) else {
                continue;
            };
            if !up.state.is_terminal() {
                return;
            }
            let bad =
                up.state == NodeState::Failed || up.cascade || up.state == NodeState::Cancelled;
            if bad && self.run.def.on_failure == OnFailure::SkipDownstream && cause.is_none() {
                let what = if up.state == NodeState::Failed {
                    "failed"
                } else {
                    "did not run"
                };
                cause = Some(format!("upstream node \"{d}\" {what}"));
            }
        }
        let now = self.now();
        let (state, reason, cascade, error) = if let Some(c) = cause {
            (NodeState::Skipped, Some(c), true, None)
        } else if let Some(w) = node.when.as_ref().filter(|w| !values::holds(&self.run, w)) {
            (
                NodeState::Skipped,
                Some(format!("condition is false: {}", w.text)),
                false,
                None,
            )
        } else if self.run.deadline_ms.is_some_and(|d| now >= d) {
            (
                NodeState::Failed,
                None,
                false,
                Some("the flow's timeout passed before this node started".to_string()),
            )
        } else {
            match self.items(node) {
                Ok(items) => {
                    if let Some(n) = self.run.nodes.get_mut(&node.id) {
                        n.items = items;
                        n.state = NodeState::Running;
                        n.started_ms = Some(now);
                    }
                    return;
                }
                Err(e) => (NodeState::Failed, None, false, Some(e)),
            }
        };
        if let Some(n) = self.run.nodes.get_mut(&node.id) {
            n.state = state;
            n.reason = reason.clone();
            n.cascade = cascade;
            n.error = error.clone();
            n.ended_ms = Some(now);
        }
        let why = error.or(reason);
        self.event(
            FlowEventKind::NodeFinished,
            Some(&node.id),
            None,
            None,
            Some(state.as_str().into()),
            why,
        )
        .await;
    }

    /// The items of a node: one, or one per element of its `for_each` list.
    fn items(&self, node: &NodeDef) -> Result<Vec<ItemRun>, String> {
        let Some(r) = &node.for_each else {
            return Ok(vec![ItemRun::pending(Value::Null)]);
        };
        match values::lookup(&self.run, r, &Value::Null) {
            Value::Array(list) => Ok(list.into_iter().map(ItemRun::pending).collect()),
            Value::String(s) => match serde_json::from_str::<Value>(&s) {
                Ok(Value::Array(list)) => Ok(list.into_iter().map(ItemRun::pending).collect()),
                _ => Err(format!("for_each: the value is not a list (got {s:?})")),
            },
            other => Err(format!("for_each: the value is not a list (got {other})")),
        }
    }

    /// Starts pending items of a running node, at most `max_parallel` running at once; a node
    /// whose items have all ended (an empty `for_each`) ends here.
    async fn start_items(&mut self, node: &NodeDef) -> Vec<Start> {
        let mut starts = Vec::new();
        let cap = if node.for_each.is_some() {
            node.max_parallel
        } else {
            1
        };
        let Some(n) = self.run.nodes.get(&node.id) else {
            return starts;
        };
        let running = n
            .items
            .iter()
            .filter(|i| i.state == NodeState::Running)
            .count();
        let pending: Vec<usize> = n
            .items
            .iter()
            .enumerate()
            .filter(|(_, i)| i.state == NodeState::Pending)
            .map(|(i, _)| i)
            .collect();
        for i in pending.into_iter().take(cap.saturating_sub(running)) {
            let item = self
                .run
                .nodes
                .get(&node.id)
                .map(|n| n.items[i].value.clone())
                .unwrap_or_default();
            let prompt = prompt_of(node, &values::render(&self.run, node, &item), None);
            starts.push(self.mark_started(node, i, prompt));
        }
        for s in &starts {
            self.event(
                FlowEventKind::NodeStarted,
                Some(&s.node),
                Some(s.item),
                Some(s.attempt),
                None,
                None,
            )
            .await;
        }
        self.settle(node).await;
        starts
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
            let Some(node) = self.run.def.node(&s.node).cloned() else {
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
            self.tasks.spawn(async move {
                let record = submit_and_wait(&ingress, &run_id, &node, &s, deadline).await;
                Done {
                    node: s.node,
                    item: s.item,
                    attempt: s.attempt,
                    record,
                }
            });
        }
    }

    /// A task ended: the item succeeds (its output checked), retries, or fails.
    async fn finished(&mut self, done: Done) {
        let Some(node) = self.run.def.node(&done.node).cloned() else {
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
        let verdict = judge(&node, done.record);
        let retry = match &verdict {
            Verdict::Retry { class, .. } => {
                self.run.cancelled.is_none()
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

    fn item_end(
        &mut self,
        node: &NodeDef,
        i: usize,
        state: NodeState,
        output: Option<Value>,
        error: Option<String>,
    ) {
        let Some(n) = self.run.nodes.get_mut(&node.id) else {
            return;
        };
        if let Some(it) = n.items.get_mut(i) {
            it.state = state;
            it.output = output;
            it.error = error;
        }
        // A failed item: the rest of a for_each does not start.
        if state == NodeState::Failed {
            for it in n
                .items
                .iter_mut()
                .filter(|it| it.state == NodeState::Pending)
            {
                it.state = NodeState::Cancelled;
            }
        }
    }

    /// Ends a running node whose items have all ended.
    async fn settle(&mut self, node: &NodeDef) {
        let now = self.now();
        let Some(n) = self.run.nodes.get_mut(&node.id) else {
            return;
        };
        if n.state != NodeState::Running || n.items.iter().any(|i| !i.state.is_terminal()) {
            return;
        }
        let failed = n
            .items
            .iter()
            .enumerate()
            .find(|(_, i)| i.state == NodeState::Failed);
        let each = node.for_each.is_some();
        if let Some((i, it)) = failed {
            n.state = NodeState::Failed;
            let e = it.error.clone().unwrap_or_default();
            n.error = Some(if each { format!("item {i}: {e}") } else { e });
        } else if n.items.iter().any(|i| i.state == NodeState::Cancelled) {
            n.state = NodeState::Cancelled;
            n.reason = self.run.cancelled.clone().or(Some("cancelled".into()));
        } else {
            n.state = NodeState::Succeeded;
            n.output = Some(if each {
                Value::Array(
                    n.items
                        .iter()
                        .map(|i| i.output.clone().unwrap_or_default())
                        .collect(),
                )
            } else {
                n.items
                    .first()
                    .and_then(|i| i.output.clone())
                    .unwrap_or_default()
            });
        }
        n.ended_ms = Some(now);
        let (state, why) = (n.state, n.error.clone().or(n.reason.clone()));
        self.event(
            FlowEventKind::NodeFinished,
            Some(&node.id),
            None,
            Some(n_attempts(&self.run, &node.id)),
            Some(state.as_str().into()),
            why,
        )
        .await;
    }
}

fn n_attempts(run: &FlowRun, node: &str) -> u32 {
    run.nodes.get(node).map_or(0, |n| n.attempts)
}

/// The marker between a node's prompt and what the flow adds to it.
const SCHEMA_NOTE: &str = "\n\n---\nAnswer with only a JSON value matching this JSON Schema:\n";
const ERRORS_NOTE: &str = "\n\nYour previous answer did not match it:\n";

/// The prompt without what the flow added (for a retry).
fn base_prompt(prompt: &str) -> String {
    prompt
        .split(SCHEMA_NOTE)
        .next()
        .unwrap_or(prompt)
        .to_string()
}

/// The prompt of an attempt: the node's, then (with a schema) the schema and the previous
/// attempt's validation errors.
fn prompt_of(node: &NodeDef, base: &str, errors: Option<&[String]>) -> String {
    let Some(schema) = &node.output_schema else {
        return base.to_string();
    };
    let mut out = format!("{base}{SCHEMA_NOTE}{schema}");
    if let Some(errors) = errors {
        out.push_str(ERRORS_NOTE);
        for e in errors {
            out.push_str(&format!("- {e}\n"));
        }
    }
    out
}

/// What an ended task means for its item.
enum Verdict {
    Output(Value),
    Cancelled(String),
    Retry {
        /// The failure class (`None`: always tried again while attempts remain — a schema miss).
        class: Option<ErrorClass>,
        error: String,
        /// The validation errors to show the next attempt.
        errors: Option<Vec<String>>,
    },
}

fn judge(node: &NodeDef, record: Result<TaskRecord, String>) -> Verdict {
    let record = match record {
        Ok(r) => r,
        Err(e) => {
            return Verdict::Retry {
                class: Some(ErrorClass::InvalidInput),
                error: e,
                errors: None,
            };
        }
    };
    let failure = |error: String| Verdict::Retry {
        class: Some(classify(&error).unwrap_or(ErrorClass::InvalidInput)),
        error,
        errors: None,
    };
    match record.outcome {
        Some(Outcome::Succeeded { result }) => {
            let text = TaskResult::text_of(&result).unwrap_or_default().to_string();
            let Some(schema) = &node.output_schema else {
                return Verdict::Output(Value::String(text));
            };
            let errors = match schema::parse_answer(&text) {
                Ok(v) => {
                    let errors = schema::validate(schema, &v);
                    if errors.is_empty() {
                        return Verdict::Output(v);
                    }
                    errors
                }
                Err(e) => vec![e],
            };
            Verdict::Retry {
                class: None,
                error: format!(
                    "the output does not match the schema: {}",
                    errors.join("; ")
                ),
                errors: Some(errors),
            }
        }
        Some(Outcome::Cancelled { reason }) => Verdict::Cancelled(reason),
        Some(Outcome::TimedOut { error }) => Verdict::Retry {
            class: Some(ErrorClass::Timeout),
            error,
            errors: None,
        },
        Some(Outcome::Failed { error } | Outcome::DeadLettered { error }) => failure(error),
        None => failure("the task ended without an outcome".into()),
        Some(other) => failure(format!("the task ended {:?}", other.state())),
    }
}

/// The failure class of a task's error text (the model's HTTP status, a timeout).
fn classify(error: &str) -> Option<ErrorClass> {
    let e = error.to_ascii_lowercase();
    let status = e
        .split("http ")
        .nth(1)
        .and_then(|s| s.get(..3))
        .and_then(|s| s.parse::<u16>().ok());
    match status {
        Some(408) => Some(ErrorClass::Timeout),
        Some(429) => Some(ErrorClass::RateLimit),
        Some(401 | 403) => Some(ErrorClass::Auth),
        Some(s) if s >= 500 => Some(ErrorClass::Transient),
        Some(_) => Some(ErrorClass::InvalidInput),
        None if e.contains("timed out") || e.contains("no complete answer") => {
            Some(ErrorClass::Timeout)
        }
        None if e.contains("connect") || e.contains("circuit") => Some(ErrorClass::Transient),
        None => None,
    }
}

/// Submits a node's task through the ingress pipeline (joining one already there under the same
/// request id) and awaits its end.
async fn submit_and_wait(
    ingress: &Ingress,
    run_id: &str,
    node: &NodeDef,
    s: &Start,
    deadline_ms: Option<u64>,
) -> Result<TaskRecord, String> {
    let request_id = RequestId::parse(&s.request_id)?;
    let session = SessionKey::peer(
        &node.agent,
        "flow",
        run_id,
        &format!("{}-{}", node.id, s.item),
    );
    let origin = Origin {
        channel: "flow".into(),
        chat_type: "node".into(),
        peer: format!("{run_id}:{}", node.id),
        session_name: None,
        session_key: Some(session),
        lane: node
            .lane
            .clone()
            .unwrap_or_else(|| clawbus_core::config::MAIN_LANE.into()),
        parent_task: None,
        call_chain: Vec::new(),
        notify_session: None,
        depth: 0,
        members: None,
        // The flow owns the attempts (its policy, its schema retries): one delivery per task.
        max_attempts: Some(1),
    };
    let req = Request {
        deadline_ms,
        duplicates: Duplicates::Join,
        ..Request::new(
            Target::Agent(node.agent.clone()),
            request_id.clone(),
            s.prompt.clone(),
            format!("flow:{run_id}"),
            origin,
        )
    };
    let submitted = ingress.submit(req).await.map_err(|e| e.to_string())?;
    if submitted.task.state.is_terminal() {
        return Ok(submitted.task);
    }
    loop {
        match ingress.bus().wait(&request_id, WAIT_SLICE).await {
            Ok(rec) => return Ok(rec),
            Err(BusError::TimedOut { .. }) => continue,
            Err(e) => return Err(e.to_string()),
        }
    }
}
