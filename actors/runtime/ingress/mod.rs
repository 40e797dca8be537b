//! The one way in: every channel, the cron scheduler and the tools that start work for another
//! run submit through [`Ingress::submit`]. It takes a typed [`Request`] (names already checked:
//! [`clawbus_core::ids::SessionName`], [`clawbus_core::ids::Peer`], [`clawbus_core::ids::ChatType`]), routes it
//! ([`Target`]), builds the [`Origin`] headers and the envelope, submits it under the request's
//! [`Duplicates`] rule, and answers a [`Submitted`] or a typed [`IngressError`] that each channel
//! maps to its wire shape. [`Ingress::wait`] waits for the outcome when the caller wants it.
//!
//! The steps, in order: route ([`Target`] → agent and session key), envelope (topic
//! `agent.<id>`, the text as payload, the origin as headers, the deadline), admit (the bus's
//! idempotency plus the [`Duplicates`] rule).

mod admit;
#[cfg(test)]
mod tests;

pub use admit::Duplicates;

use crate::origin::Origin;
use crate::router::{Inbound, RouteError, Router};
use bus::{Admission, Bus, BusError, Envelope, RequestId, TaskRecord, Topic};
use clawbus_core::ids::{AgentId, SessionKey};
use clawbus_core::task::TaskInput;
use std::sync::Arc;
use std::time::Duration;

/// Where a request goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A named agent, in the session the origin names (its `session_key`, else its
    /// `session_name`, routed here and recorded as its `session_key`, else the agent's own
    /// routing by request id).
    Agent(AgentId),
    /// The router picks the agent (unless `agent` names it) and the session, from the origin's
    /// channel, chat type and peer; the route's session key is set on the origin.
    Routed {
        /// The agent the sender named, if any.
        agent: Option<AgentId>,
    },
    /// A shared topic (`POST /v1/topics/{topic}/tasks`, a broadcast group): whichever
    /// subscriber takes it, in the session the origin names.
    Topic(Topic),
}

/// One piece of work coming in.
#[derive(Debug, Clone)]
pub struct Request {
    /// Where it goes.
    pub target: Target,
    /// Its idempotency key.
    pub request_id: RequestId,
    /// The message for the agent.
    pub text: String,
    /// The envelope's sender (`http`, `channel:<name>`, `agent:<id>`, `cron` …).
    pub from: String,
    /// Where it came from and where it runs (the route fills `session_key` of a routed one).
    pub origin: Origin,
    /// When it is no longer wanted, in ms on the system's clock.
    pub deadline_ms: Option<u64>,
    /// What a request id that is already known answers.
    pub duplicates: Duplicates,
}

impl Request {
    /// A request for `target` with `text`, from `from`, with `origin`: no deadline, the
    /// [`Duplicates::SamePlace`] rule.
    pub fn new(
        target: Target,
        request_id: RequestId,
        text: impl Into<String>,
        from: impl Into<String>,
        origin: Origin,
    ) -> Self {
        Self {
            target,
            request_id,
            text: text.into(),
            from: from.into(),
            origin,
            deadline_ms: None,
            duplicates: Duplicates::SamePlace,
        }
    }
}

/// A request the bus took.
#[derive(Debug, Clone)]
pub struct Submitted {
    /// The agent it went to (`None`: a shared topic's).
    pub agent: Option<AgentId>,
    /// The session key routing chose (`None`: the agent routes by its own rules).
    pub session: Option<SessionKey>,
    /// Its task as it stands now.
    pub task: TaskRecord,
    /// True when the request id was already known: nothing new was started.
    pub duplicate: bool,
}

/// Why a request was not taken.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IngressError {
    /// The request names an agent that does not exist.
    #[error("no agent \"{0}\"")]
    UnknownAgent(String),
    /// No binding, channel default or named agent takes the message.
    #[error("{0}")]
    Unbound(RouteError),
    /// The request id is taken by a task placed elsewhere (another session or lane): the
    /// [`Duplicates::SamePlace`] rule. (Another agent or text is the bus's
    /// [`BusError::Conflict`].)
    #[error("{0}")]
    Conflict(String),
    /// The bus refused the task (a conflict, an invalid task) or failed.
    #[error("{0}")]
    Bus(BusError),
}

impl IngressError {
    fn of_route(e: RouteError) -> Self {
        match e {
            RouteError::UnknownAgent(a) => Self::UnknownAgent(a),
            e => Self::Unbound(e),
        }
    }
}

/// How a wait for a task ended.
#[derive(Debug, Clone)]
pub enum Waited {
    /// The task ended.
    Ended(TaskRecord),
    /// The wait timed out: the task as it stands now.
    Pending(TaskRecord),
}

impl Waited {
    /// The task's record, ended or not.
    pub fn record(&self) -> &TaskRecord {
        match self {
            Self::Ended(r) | Self::Pending(r) => r,
        }
    }
}

/// The ingress pipeline: the bus it submits to and the routing table it consults.
#[derive(Clone)]
pub struct Ingress {
    bus: Arc<dyn Bus>,
    router: Option<Arc<Router>>,
}

impl std::fmt::Debug for Ingress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ingress")
            .field("routed", &self.router.is_some())
            .finish()
    }
}

impl Ingress {
    /// A pipeline submitting to `bus` without a routing table: only [`Target::Agent`] requests
    /// for agents the caller knows (the tools, the cron scheduler).
    pub fn new(bus: Arc<dyn Bus>) -> Self {
        Self { bus, router: None }
    }

    /// A pipeline that routes with `router` and refuses agents it does not know (the channels).
    pub fn routed(bus: Arc<dyn Bus>, router: Arc<Router>) -> Self {
        Self {
            bus,
            router: Some(router),
        }
    }

    /// The bus it submits to.
    pub fn bus(&self) -> &Arc<dyn Bus> {
        &self.bus
    }

    /// Routes, builds the envelope and submits it: the one way work comes in.
    pub async fn submit(&self, req: Request) -> Result<Submitted, IngressError> {
        let Request {
            target,
            request_id,
            text,
            from,
            mut origin,
            deadline_ms,
            duplicates,
        } = req;
        let (topic, agent) = self.route(target, &mut origin, &request_id)?;
        let mut env = origin
            .apply(Envelope::task(topic, request_id, TaskInput::new(text).to_payload()).from(from));
        env.deadline = deadline_ms;
        let Admission { task, duplicate } =
            admit::admit(self.bus.as_ref(), env, duplicates).await?;
        Ok(Submitted {
            agent,
            session: origin.session_key,
            task,
            duplicate,
        })
    }

    /// Submits a stored task's envelope again as its next attempt (`POST /v1/tasks/{id}/retry`):
    /// the same request id, topic, text and origin, a fresh message id, as re-posting the same
    /// request would. The bus answers whether the task may run again.
    pub async fn resubmit(&self, stored: &Envelope) -> Result<Admission, IngressError> {
        let mut again = stored.clone();
        again.id = uuid::Uuid::now_v7();
        self.bus.submit(again).await.map_err(IngressError::Bus)
    }

    /// The topic and the agent a request goes to; a routed one's session key is set on
    /// `origin`.
    fn route(
        &self,
        target: Target,
        origin: &mut Origin,
        request_id: &RequestId,
    ) -> Result<(Topic, Option<AgentId>), IngressError> {
        match (target, &self.router) {
            (Target::Agent(agent), Some(router)) if !router.knows(&agent) => {
                Err(IngressError::UnknownAgent(agent.to_string()))
            }
            (Target::Agent(agent), router) => {
                // A named session is routed here, as the agent would route it: the task records
                // its session key (its view, the dashboard and the WebSocket events show it).
                if let (Some(router), Some(name), None) =
                    (router, &origin.session_name, &origin.session_key)
                {
                    let inbound = Inbound {
                        channel: origin.channel.to_string(),
                        chat_type: origin.chat_type.clone(),
                        peer: origin.peer.clone(),
                        agent: Some(agent.clone()),
                        session_name: Some(name.clone()),
                        request_id: request_id.to_string(),
                    };
                    let route = router.route(&inbound).map_err(IngressError::of_route)?;
                    origin.session_key = Some(route.session);
                }
                Ok((Topic::agent(agent.as_str()), Some(agent)))
            }
            (Target::Topic(topic), _) => Ok((topic, None)),
            (Target::Routed { agent }, router) => {
                let inbound = Inbound {
                    channel: origin.channel.to_string(),
                    chat_type: origin.chat_type.clone(),
                    peer: origin.peer.clone(),
                    agent,
                    session_name: None,
                    request_id: request_id.to_string(),
                };
                let unrouted = Router::default();
                let router = router.as_deref().unwrap_or(&unrouted);
                let route = router.route(&inbound).map_err(IngressError::of_route)?;
                origin.session_key = Some(route.session);
                Ok((Topic::agent(route.agent.as_str()), Some(route.agent)))
            }
        }
    }

    /// Waits at most `timeout` for the task of `request_id` to end; on a timeout answers the
    /// task as it stands then (`fallback` when the store no longer knows it).
    pub async fn wait(
        &self,
        request_id: &RequestId,
        timeout: Duration,
        fallback: &TaskRecord,
    ) -> Result<Waited, IngressError> {
        if fallback.state.is_terminal() {
            return Ok(Waited::Ended(fallback.clone()));
        }
        let waited = if fallback.request_id == *request_id {
            self.bus.wait_admitted(fallback, timeout).await
        } else {
            self.bus.wait(request_id, timeout).await
        };
        match waited {
            Ok(rec) => Ok(Waited::Ended(rec)),
            Err(BusError::TimedOut { .. }) => match self.bus.lookup(request_id).await {
                Ok(rec) => Ok(Waited::Pending(rec.unwrap_or_else(|| fallback.clone()))),
                Err(e) => Err(IngressError::Bus(e)),
            },
            Err(e) => Err(IngressError::Bus(e)),
        }
    }
}
