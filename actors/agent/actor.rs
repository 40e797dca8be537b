//! The agent actor's state and handlers.

use super::turn::{TurnDeps, TurnError, TurnInput, run_turn};
use super::workspace;
use crate::ids::AgentId;
use crate::tools::ToolContext;
use actix::{Actor, ActorFutureExt, AsyncContext, Context, StreamHandler, WrapFuture};
use bus::{Bus, Delivery, Envelope, Outcome, Topic};
use serde_json::json;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::Semaphore;
use uuid::Uuid;

/// Runs an agent's turns; each delivery's turn runs on the tokio pool, the actor tracks it.
pub struct AgentActor {
    id: AgentId,
    deps: TurnDeps,
    workspace: PathBuf,
    bus: Arc<dyn Bus>,
    slots: Arc<Semaphore>,
    running: HashMap<Uuid, tokio::task::AbortHandle>,
}

impl AgentActor {
    /// A new actor; start it with `AgentActor::create` and add its task stream.
    pub fn new(
        id: AgentId,
        deps: TurnDeps,
        workspace: PathBuf,
        bus: Arc<dyn Bus>,
        concurrency: usize,
    ) -> Self {
        Self {
            id,
            deps,
            workspace,
            bus,
            slots: Arc::new(Semaphore::new(concurrency.max(1))),
            running: HashMap::new(),
        }
    }
}

impl Actor for AgentActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.set_mailbox_capacity(1024);
    }
}

impl StreamHandler<Delivery> for AgentActor {
    fn handle(&mut self, delivery: Delivery, ctx: &mut Self::Context) {
        let task_id = delivery.envelope().id;
        let job = Job {
            agent: self.id.clone(),
            deps: self.deps.clone(),
            workspace: self.workspace.clone(),
            bus: self.bus.clone(),
            slots: self.slots.clone(),
        };
        let handle = tokio::spawn(job.run(delivery));
        self.running.insert(task_id, handle.abort_handle());
        ctx.spawn(handle.into_actor(self).map(move |res, act, _| {
            act.running.remove(&task_id);
            if let Err(e) = res {
                tracing::error!(task_id = %task_id, error = %e, "Turn task ended abnormally; it will be redelivered.");
            }
        }));
    }

    fn finished(&mut self, _: &mut Self::Context) {
        tracing::info!(agent = %self.id, "Task stream closed; agent stops taking work.");
    }
}

/// Everything one run needs, moved onto the tokio pool.
struct Job {
    agent: AgentId,
    deps: TurnDeps,
    workspace: PathBuf,
    bus: Arc<dyn Bus>,
    slots: Arc<Semaphore>,
}

impl Job {
    async fn run(self, mut delivery: Delivery) {
        let env = delivery.envelope().clone();
        let Ok(_permit) = self.slots.clone().acquire_owned().await else {
            return; // closed semaphore: shutting down; the delivery is redelivered on restart
        };
        match delivery.start().await {
            Ok(true) => {}
            Ok(false) => return,
            Err(e) => {
                tracing::error!(agent = %self.agent, request_id = %env.request_id, error = %e, "Could not mark the task running.");
                return;
            }
        }
        let outcome = self.turn(&env).await;
        let request_id = env.request_id.clone();
        if let Err(e) = delivery.complete(outcome).await {
            tracing::error!(agent = %self.agent, request_id = %request_id, error = %e, "Could not record the outcome; the task will be redelivered.");
        }
    }

    async fn turn(&self, env: &Envelope) -> Outcome {
        let Some(text) = env.payload.get("text").and_then(|t| t.as_str()) else {
            return Outcome::Failed {
                error: "task payload has no \"text\" string".into(),
            };
        };
        let session = match env.headers.get("session") {
            Some(name) => format!("agent:{}:api:direct:{name}", self.agent),
            None => format!("agent:{}:api:task:{}", self.agent, env.request_id),
        };
        self.event(env, json!({ "phase": "start", "session": session }))
            .await;
        let input = TurnInput {
            prompt: Arc::new(workspace::system_prompt(
                &self.workspace,
                self.agent.as_str(),
            )),
            history: Vec::new(),
            message: text.to_string(),
            tool_context: ToolContext {
                workspace: self.workspace.clone(),
                agent: self.agent.to_string(),
                session: session.clone(),
                channel: "api".into(),
            },
        };
        let started = Instant::now();
        let result = run_turn(&self.deps, input).await;
        let duration_ms = started.elapsed().as_millis() as u64;
        let (outcome, iterations) = match result {
            Ok(out) => (
                Outcome::Succeeded {
                    result: json!({ "text": out.text, "iterations": out.iterations }),
                },
                out.iterations,
            ),
            Err(e @ TurnError::TimedOut(_)) => (
                Outcome::TimedOut {
                    error: e.to_string(),
                },
                0,
            ),
            Err(e) => (
                Outcome::Failed {
                    error: e.to_string(),
                },
                0,
            ),
        };
        let state = outcome.state().as_str();
        tracing::info!(
            agent = %self.agent,
            session = %session,
            request_id = %env.request_id,
            iterations,
            duration_ms,
            state,
            "Turn finished."
        );
        self.event(env, json!({ "phase": "end", "session": session, "state": state, "duration_ms": duration_ms }))
            .await;
        outcome
    }

    /// Lifecycle events on `agent.<id>.events`; nobody listening is fine.
    async fn event(&self, env: &Envelope, data: serde_json::Value) {
        let mut ev = Envelope::event(Topic::agent_events(self.agent.as_str()), data);
        ev.request_id = env.request_id.clone();
        if let Err(e) = self.bus.publish(ev).await {
            tracing::debug!(agent = %self.agent, error = %e, "Lifecycle event not published.");
        }
    }
}
