//! The last step of a run: record how it ended, count it, tell who waits, answer the channel.

use super::{End, Run, RunEnd, RunReport};
use crate::outbox::ReplyTo as _;
use crate::session::transcript::{Entry, EntryBody};
use crate::turn::usage::UsageByModel;
use bus::Outcome;

impl Run {
    /// Tells the session that asked for this task without waiting (an `agent_call` with
    /// `wait: false`) how it ended, as a message that wakes that session. Sent before the
    /// outcome is recorded, under a request id of its own, so it arrives exactly once even if
    /// the process stops in between.
    async fn notify(&self, outcome: &Outcome) {
        let env = self.delivery.envelope();
        let Some(to) = &self.origin.notify_session else {
            return;
        };
        let Some(notice) =
            crate::coordinator::outcome_notice(self.rt.id.as_str(), env.id, to, outcome)
        else {
            return;
        };
        let ingress = crate::ingress::Ingress::new(self.rt.bus.clone());
        if let Err(e) = ingress.submit(notice).await {
            tracing::error!(session = %to, task_id = %env.id, error = %e, "Could not tell the calling session of the outcome.");
        }
    }

    /// Adds a run's usage to `clawbus_tokens_total` and, for a model with a price,
    /// `clawbus_cost_usd_micros_total` (micro-dollars: the counters hold integers), each under
    /// the model that answered.
    fn count_usage(&self, usage_by_model: &UsageByModel) {
        let rt = &self.rt;
        for (model, usage) in usage_by_model.iter() {
            let kinds = [
                ("input", usage.uncached_input_tokens()),
                ("output", usage.completion_tokens),
                ("cache_read", usage.cache_read_tokens),
                ("cache_write", usage.cache_write_tokens),
            ];
            for (kind, n) in kinds {
                rt.metrics
                    .counter(
                        "clawbus_tokens_total",
                        "Model tokens used, by agent, model and kind (input counts uncached prompt tokens).",
                        &[("agent", rt.id.as_str()), ("model", model), ("kind", kind)],
                    )
                    .inc_by(n);
            }
            if let Some(price) = usage_by_model.price(model, &rt.prices) {
                let micros = (usage.cost_usd(price) * 1_000_000.0).round();
                rt.metrics
                    .counter(
                        "clawbus_cost_usd_micros_total",
                        "What model tokens cost at the configured prices, in micro-dollars (USD / 1e6).",
                        &[("agent", rt.id.as_str()), ("model", model)],
                    )
                    .inc_by(micros as u64);
            }
        }
    }

    /// Records a failed run in the transcript, counts it, updates the index, and acknowledges the
    /// outcome: last, so the transcript is on disk before anyone is answered.
    pub(super) async fn finish(&self, end: End) -> RunReport {
        let End {
            mut entries,
            outcome,
            usage,
        } = end;
        let (rt, key, request_id) = (&self.rt, &self.key, self.request_id.as_str());
        let state = outcome.state();
        rt.metrics
            .counter(
                "clawbus_turns_total",
                "Agent runs finished, by outcome.",
                &[("agent", rt.id.as_str()), ("outcome", state.as_str())],
            )
            .inc();
        if let Outcome::Failed { error }
        | Outcome::TimedOut { error }
        | Outcome::DeadLettered { error } = &outcome
        {
            let ended = Entry::new(EntryBody::RunEnded {
                request_id: request_id.to_string(),
                outcome: state,
                reason: error.clone(),
            });
            match self.transcript.record(std::slice::from_ref(&ended)).await {
                Ok(()) => entries.push(ended),
                Err(e) => {
                    tracing::error!(session = %key, error = %e, "Could not record the failed run in the transcript.")
                }
            }
        }
        let total = usage.total();
        let counted = crate::session::index::FinishedRun {
            now_ms: rt.clock.now_ms(),
            tokens_in: total.prompt_tokens,
            tokens_out: total.completion_tokens,
        };
        if let Err(e) = rt.index.record_run(key.as_str(), counted).await {
            tracing::error!(session = %key, error = %e, "Session index not updated.");
        }
        self.count_usage(&usage);
        self.notify(&outcome).await;
        // The reply is staged in the outbox before the outcome is recorded: the outcome's
        // durable write covers it (on a shared store the staging write is stored before the
        // outcome is sent), so a task never ends with its reply neither sent nor pending.
        let reply = rt
            .outbox
            .routes()
            .reply(&self.origin, self.delivery.envelope().id, &outcome);
        if let Some((channel, msg)) = &reply
            && let Err(e) = rt.outbox.stage(channel.as_str(), msg).await
        {
            tracing::error!(session = %key, request_id, channel = %channel, error = %e, "The reply was not staged in the outbox.");
        }
        match self.delivery.complete(outcome).await {
            Ok(()) => {
                if let Some((channel, msg)) = reply {
                    rt.outbox
                        .publish(rt.bus.as_ref(), channel.as_str(), &msg)
                        .await;
                }
            }
            Err(e) => {
                tracing::error!(session = %key, request_id, error = %e, "Could not record the outcome; the task will be redelivered.")
            }
        }
        RunReport {
            base: None,
            entries,
            end: RunEnd::Ended(state),
        }
    }
}
