//! [`FallbackModel`]: an agent's model and its `fallbacks`, tried in order.
//!
//! Each model is first asked through its own client, with that provider's retries. When the call
//! still fails with an error that [falls over](ModelError::falls_over) (rate limit, overload, 5xx,
//! timeout, connection failure), the next model is asked the same request; an error that does not
//! fall over (authentication, invalid request) ends the call. A model whose provider's
//! [`Breaker`] is open is skipped without a request. Every move is logged at WARN with both models
//! and told to the observer ([`ModelObserver::fell_over`]).

use std::borrow::Cow;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tracing::{info, warn};

use super::breaker::Breaker;
use super::{ChatModel, ChatRequest, ModelError, ModelObserver, ModelReply, Unobserved};

/// One model of the chain: its client and its provider's breaker.
pub struct Candidate {
    /// `provider/model`, for logs and events.
    label: String,
    /// The model name sent to the provider.
    model: String,
    client: Arc<dyn ChatModel>,
    breaker: Arc<Breaker>,
}

impl std::fmt::Debug for Candidate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Candidate")
            .field("label", &self.label)
            .field("breaker", &self.breaker.state())
            .finish_non_exhaustive()
    }
}

impl Candidate {
    /// Model `model` of `provider`, called through `client`, guarded by `breaker` (the provider's,
    /// from `super::Breakers::for_provider`).
    pub fn new(
        provider: &str,
        model: &str,
        client: Arc<dyn ChatModel>,
        breaker: Arc<Breaker>,
    ) -> Self {
        Self {
            label: format!("{provider}/{model}"),
            model: model.to_owned(),
            client,
            breaker,
        }
    }

    /// `provider/model`.
    pub fn label(&self) -> &str {
        &self.label
    }
}

/// Why a [`FallbackModel`] moved to the next model.
#[derive(Debug, Clone, Copy)]
pub enum FalloverReason<'a> {
    /// The call failed with this error, after the provider's own retries.
    Failed(&'a ModelError),
    /// The provider's circuit breaker is open for this long still; no request was sent.
    CircuitOpen {
        /// Time left of the cool-down.
        retry_in: Duration,
    },
}

impl std::fmt::Display for FalloverReason<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Failed(error) => write!(f, "{error}"),
            Self::CircuitOpen { retry_in } => {
                write!(f, "circuit open for {} ms more", retry_in.as_millis())
            }
        }
    }
}

/// One move of a [`FallbackModel`] from a model to the next.
#[derive(Debug, Clone, Copy)]
pub struct Fallover<'a> {
    /// The model left, as `provider/model`.
    pub from: &'a str,
    /// The model tried next, as `provider/model`.
    pub to: &'a str,
    /// Why.
    pub reason: FalloverReason<'a>,
}

/// A model skipped because its provider's breaker was open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// `provider/model`.
    pub model: String,
    /// Time left of the cool-down when it was skipped.
    pub retry_in: Duration,
}

/// The skipped models of [`ModelError::CircuitOpen`], for its message.
pub(super) fn skipped_list(skipped: &[Skipped]) -> String {
    let mut out = String::new();
    for (i, s) in skipped.iter().enumerate() {
        let sep = if i == 0 { "" } else { ", " };
        let _ = write!(out, "{sep}{} (for {}s more)", s.model, s.retry_in.as_secs());
    }
    out
}

/// A primary model and its fallbacks, tried in order (see the module documentation).
#[derive(Debug)]
pub struct FallbackModel {
    /// Primary first; never empty.
    chain: Vec<Candidate>,
}

impl FallbackModel {
    /// `primary`, then each of `fallbacks` in order.
    pub fn new(primary: Candidate, fallbacks: Vec<Candidate>) -> Self {
        let mut chain = Vec::with_capacity(1 + fallbacks.len());
        chain.push(primary);
        chain.extend(fallbacks);
        Self { chain }
    }

    /// The models, primary first, as `provider/model`.
    pub fn labels(&self) -> impl Iterator<Item = &str> {
        self.chain.iter().map(Candidate::label)
    }

    /// Tells the observer and the log that the call moves from model `i` to the next one.
    fn move_on(&self, i: usize, reason: FalloverReason<'_>, observer: &dyn ModelObserver) {
        let (Some(from), Some(to)) = (self.chain.get(i), self.chain.get(i + 1)) else {
            return;
        };
        match reason {
            FalloverReason::Failed(error) => warn!(
                from = %from.label, to = %to.label, %error,
                "Model call failed; falling over to the next model."
            ),
            FalloverReason::CircuitOpen { retry_in } => warn!(
                from = %from.label, to = %to.label, retry_in_s = retry_in.as_secs(),
                "Circuit breaker open; skipping to the next model."
            ),
        }
        observer.fell_over(&Fallover {
            from: &from.label,
            to: &to.label,
            reason,
        });
    }
}

#[async_trait]
impl ChatModel for FallbackModel {
    async fn complete(&self, req: &ChatRequest) -> Result<ModelReply, ModelError> {
        self.complete_observed(req, &Unobserved).await
    }

    async fn complete_observed(
        &self,
        req: &ChatRequest,
        observer: &dyn ModelObserver,
    ) -> Result<ModelReply, ModelError> {
        let mut skipped = Vec::new();
        let mut last_error = None;
        for (i, candidate) in self.chain.iter().enumerate() {
            if let Err(retry_in) = candidate.breaker.check() {
                skipped.push(Skipped {
                    model: candidate.label.clone(),
                    retry_in,
                });
                self.move_on(i, FalloverReason::CircuitOpen { retry_in }, observer);
                continue;
            }
            let request = if candidate.model == req.model {
                Cow::Borrowed(req)
            } else {
                Cow::Owned(ChatRequest {
                    model: candidate.model.clone(),
                    ..req.clone()
                })
            };
            match candidate.client.complete_observed(&request, observer).await {
                Ok(mut reply) => {
                    candidate.breaker.record_success();
                    reply.model = Some(candidate.label.clone());
                    if i > 0 {
                        info!(model = %candidate.label, "A fallback model answered.");
                    }
                    return Ok(reply);
                }
                Err(error) if !error.falls_over() => return Err(error),
                Err(error) => {
                    candidate.breaker.record_failure();
                    self.move_on(i, FalloverReason::Failed(&error), observer);
                    last_error = Some(error);
                }
            }
        }
        Err(last_error.unwrap_or(ModelError::CircuitOpen { skipped }))
    }
}
