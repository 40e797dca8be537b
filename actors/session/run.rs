//! One run of a session, on the tokio pool: slot, transcript, compaction, the turn, the outcome.

use super::compaction;
use super::history::View;
use super::transcript::{Entry, EntryBody, Transcript};
use crate::agent::runtime::AgentRuntime;
use crate::agent::turn::{TurnError, TurnInput, run_turn};
use crate::model::ChatMessage;
use crate::router::SessionKey;
use crate::tools::ToolContext;
use bus::{Delivery, Outcome};
use serde_json::json;
use std::sync::Arc;
use std::time::Instant;

/// What the session actor hands a run.
pub struct RunInput {
    /// The agent's shared parts.
    pub rt: Arc<AgentRuntime>,
    /// The session.
    pub key: SessionKey,
    /// The channel the message came from.
    pub channel: String,
    /// The task (a clone; the session actor keeps one to cancel with).
    pub delivery: Delivery,
    /// The model's view of the conversation so far.
    pub view: View,
    /// The session's transcript.
    pub transcript: Arc<Transcript>,
}

/// What a run reports back to its session actor.
pub struct RunReport {
    /// Transcript entries the run wrote, in order (to update the view).
    pub entries: Vec<Entry>,
    /// The terminal state's name (`succeeded`, `failed`, …), or `skipped`.
    pub state: &'static str,
}

/// Runs one task of the session and completes its delivery after the transcript is on disk.
pub async fn execute(input: RunInput) -> RunReport {
    let RunInput {
        rt,
        key,
        channel,
        delivery,
        mut view,
        transcript,
    } = input;
    let env = delivery.envelope().clone();
    let request_id = env.request_id.to_string();
    let waited = Instant::now();
    let _slot = match rt.run_slot(&env).await {
        Ok(s) => s,
        Err(reason) => {
            let outcome = Outcome::TimedOut { error: reason };
            return finish(
                &rt,
                &delivery,
                &transcript,
                Vec::new(),
                outcome,
                &key,
                &request_id,
                (0, 0),
            )
            .await;
        }
    };
    let wait_ms = waited.elapsed().as_millis() as u64;
    match delivery.start().await {
        Ok(true) => {}
        Ok(false) => {
            return RunReport {
                entries: Vec::new(),
                state: "skipped",
            };
        }
        Err(e) => {
            tracing::error!(agent = %rt.id, session = %key, request_id, error = %e, "Could not mark the task running.");
            return RunReport {
                entries: Vec::new(),
                state: "skipped",
            };
        }
    }
    let Some(text) = env
        .payload
        .get("text")
        .and_then(|t| t.as_str())
        .map(str::to_string)
    else {
        let outcome = Outcome::Failed {
            error: "task payload has no \"text\" string".into(),
        };
        return finish(
            &rt,
            &delivery,
            &transcript,
            Vec::new(),
            outcome,
            &key,
            &request_id,
            (0, 0),
        )
        .await;
    };
    tracing::info!(agent = %rt.id, session = %key, request_id, wait_ms, "Run started.");
    event(
        &rt,
        &env,
        json!({ "phase": "start", "session": key.as_str() }),
    )
    .await;
    let tool_context = ToolContext {
        workspace: rt.workspace.clone(),
        agent: rt.id.to_string(),
        session: key.to_string(),
        channel: channel.clone(),
    };
    let prompt = rt.prompt(&key, &channel);
    let mut entries = Vec::new();

    // The user's message is on disk before the model is called.
    let user = Entry::message(ChatMessage::user(text.clone()), Some(&request_id), false);
    if let Err(e) = transcript.append(std::slice::from_ref(&user)) {
        let outcome = Outcome::Failed {
            error: format!("transcript write failed: {e}"),
        };
        return finish(
            &rt,
            &delivery,
            &transcript,
            entries,
            outcome,
            &key,
            &request_id,
            (0, 0),
        )
        .await;
    }
    let system_chars = prompt.system_prompt().len();
    if compaction::needs_compaction(&rt.def.session, system_chars, &view, &text) {
        tracing::info!(agent = %rt.id, session = %key, tokens = view.estimated_tokens(), "Compacting the session.");
        match compaction::compact(
            &rt.deps,
            &rt.def.session,
            prompt.clone(),
            tool_context.clone(),
            &view,
            &transcript,
        )
        .await
        {
            Ok(written) => {
                for e in &written {
                    view.apply(e);
                }
                entries.extend(written);
            }
            Err(e) => {
                tracing::warn!(agent = %rt.id, session = %key, error = %e, "Compaction failed; running on the full history.")
            }
        }
    }
    entries.push(user);

    let started = Instant::now();
    let result = run_turn(
        &rt.deps,
        TurnInput {
            prompt,
            history: view.messages(),
            message: text,
            tool_context,
        },
    )
    .await;
    let duration_ms = started.elapsed().as_millis() as u64;
    let (outcome, iterations, usage, added) = match result {
        Ok(out) => (
            Outcome::Succeeded {
                result: json!({ "text": out.text, "iterations": out.iterations }),
            },
            out.iterations,
            out.usage,
            out.added,
        ),
        Err(e @ TurnError::TimedOut(_)) => (
            Outcome::TimedOut {
                error: e.to_string(),
            },
            0,
            (0, 0),
            Vec::new(),
        ),
        Err(e) => (
            Outcome::Failed {
                error: e.to_string(),
            },
            0,
            (0, 0),
            Vec::new(),
        ),
    };
    // `added` starts with the user message, already written.
    let new: Vec<Entry> = added
        .into_iter()
        .skip(1)
        .map(|m| Entry::message(m, Some(&request_id), false))
        .collect();
    if let Err(e) = transcript.append(&new) {
        let outcome = Outcome::Failed {
            error: format!("transcript write failed: {e}"),
        };
        return finish(
            &rt,
            &delivery,
            &transcript,
            entries,
            outcome,
            &key,
            &request_id,
            usage,
        )
        .await;
    }
    entries.extend(new);
    let state = outcome.state().as_str();
    tracing::info!(agent = %rt.id, session = %key, request_id, iterations, duration_ms, state, "Turn finished.");
    event(&rt, &env, json!({ "phase": "end", "session": key.as_str(), "state": state, "duration_ms": duration_ms })).await;
    finish(
        &rt,
        &delivery,
        &transcript,
        entries,
        outcome,
        &key,
        &request_id,
        usage,
    )
    .await
}

/// Records a failed run in the transcript, updates the index, and acknowledges the outcome.
#[allow(clippy::too_many_arguments)]
async fn finish(
    rt: &AgentRuntime,
    delivery: &Delivery,
    transcript: &Transcript,
    mut entries: Vec<Entry>,
    outcome: Outcome,
    key: &SessionKey,
    request_id: &str,
    usage: (u64, u64),
) -> RunReport {
    let state = outcome.state().as_str();
    rt.metrics
        .counter(
            "clawbus_turns_total",
            "Agent runs finished, by outcome.",
            &[("agent", rt.id.as_str()), ("outcome", state)],
        )
        .inc();
    if let Outcome::Failed { error } | Outcome::TimedOut { error } = &outcome {
        let ended = Entry::new(EntryBody::RunEnded {
            request_id: request_id.to_string(),
            outcome: state.to_string(),
            reason: error.clone(),
        });
        match transcript.append(std::slice::from_ref(&ended)) {
            Ok(()) => entries.push(ended),
            Err(e) => {
                tracing::error!(session = %key, error = %e, "Could not record the failed run in the transcript.")
            }
        }
    }
    if let Err(e) = rt
        .index
        .record_run(key.as_str(), now_ms(), usage.0, usage.1)
    {
        tracing::error!(session = %key, error = %e, "Session index not updated.");
    }
    if let Err(e) = delivery.complete(outcome).await {
        tracing::error!(session = %key, request_id, error = %e, "Could not record the outcome; the task will be redelivered.");
    }
    RunReport { entries, state }
}

/// Lifecycle events on `agent.<id>.events`; nobody listening is fine.
async fn event(rt: &AgentRuntime, env: &bus::Envelope, data: serde_json::Value) {
    let mut ev = bus::Envelope::event(bus::Topic::agent_events(rt.id.as_str()), data);
    ev.request_id = env.request_id.clone();
    if let Err(e) = rt.bus.publish(ev).await {
        tracing::debug!(agent = %rt.id, error = %e, "Lifecycle event not published.");
    }
}

/// Unix milliseconds now.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
