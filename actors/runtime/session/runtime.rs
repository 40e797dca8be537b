//! What every session of one agent shares: its definition, model, tools, workspace, stores.

use crate::lane::{LaneError, LanePermit, Lanes, Ticket};
use crate::session::index::SessionIndex;
use crate::turn::{PromptSource, TurnDeps};
use bus::{Bus, Clock, Envelope};
use clawbus_core::config::AgentDef;
use clawbus_core::ids::AgentId;
use clawbus_core::ids::SessionKey;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The shared, immutable part of an agent: handed to each of its session actors.
pub struct AgentRuntime {
    /// The agent's id.
    pub id: AgentId,
    /// Its validated definition.
    pub def: AgentDef,
    /// Model, tools and limits for turns.
    pub deps: TurnDeps,
    /// The agent's workspace folder (canonical).
    pub workspace: PathBuf,
    /// The bus.
    pub bus: Arc<dyn Bus>,
    /// The state folder (transcripts live under `sessions/`).
    pub state_dir: PathBuf,
    /// The session index.
    pub index: SessionIndex,
    /// The global lanes; a run takes a `main` slot after leaving its session lane.
    pub lanes: Lanes,
    /// The metrics registry (turns by outcome, live sessions).
    pub metrics: crate::metrics::Metrics,
    /// Assembles the system prompt (files cached by stamp, secrets redacted).
    pub prompt: Arc<crate::prompt::PromptBuilder>,
    /// The one clock of the process.
    pub clock: Arc<dyn Clock>,
    /// Runs in flight, and whether the daemon is shutting down.
    pub drain: super::drain::Drain,
    /// The prices of the agent's model and fallbacks that have one
    /// (`[prices."<provider>/<model>"]`), by `provider/model`.
    pub prices: std::collections::BTreeMap<String, clawbus_core::config::Price>,
    /// Which finished tasks' replies go back out, and the outbox they wait in until delivered.
    pub outbox: crate::outbox::Outbox,
    /// On a shared bus, the session leases a run takes before it starts; `None` on the embedded
    /// bus (one process: the session actor alone keeps a session's runs apart).
    pub leases: Option<super::lease::SessionLeases>,
}

impl AgentRuntime {
    /// The system prompt source for one run, asked again before every model call.
    pub fn prompt(&self, session: &SessionKey, channel: &str) -> Arc<dyn PromptSource> {
        self.prompt.turn(session.as_str(), channel)
    }

    /// Takes a slot in the run's lane (`lane`, from the envelope's origin) for a run that has
    /// left its session lane; waits at most until the envelope's deadline. Dropping the future
    /// leaves the lane's queue at once.
    pub(crate) async fn run_slot(
        &self,
        env: &Envelope,
        lane: &str,
    ) -> Result<LanePermit, LaneError> {
        let mut ticket = Ticket::new(env.id);
        if let Some(deadline_ms) = env.deadline {
            let left = Duration::from_millis(deadline_ms.saturating_sub(self.clock.now_ms()));
            ticket = ticket.deadline(bus::Deadline::after(self.clock.as_ref(), left));
        }
        self.lanes.acquire(lane, ticket).await
    }
}
