//! The scheduler's settings.

use chrono_tz::Tz;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

/// How a scheduler runs. Build with [`Settings::new`] (the timezone is never assumed).
#[derive(Debug, Clone)]
pub struct Settings {
    /// The timezone of cron schedules that name none: the gateway's configured one.
    pub default_tz: Tz,
    /// The agents jobs may run on.
    pub agents: BTreeSet<String>,
    /// How long a lease holds without renewal (renewed every third of it while the run lives).
    pub lease_ttl: Duration,
    /// How long a run is awaited before it is cancelled and recorded `timed_out`.
    pub run_timeout: Duration,
    /// A fire at most this late is on time; later it is missed, and the job's catch-up policy
    /// decides whether it runs.
    pub misfire_grace: Duration,
    /// The longest the loop sleeps between ticks (so wall-clock jumps are noticed).
    pub max_sleep: Duration,
    /// The agents' workspaces (`<state>/workspaces`), where heartbeats read
    /// `<agent>/HEARTBEAT.md`; `None`: every heartbeat is skipped.
    pub workspaces: Option<PathBuf>,
    /// Where announcements are handed over (staged, or recorded failed for a channel with no
    /// delivery actor); `None`: they are only published.
    pub outbox: Option<crate::outbox::Outbox>,
    /// The node this scheduler runs on, stable across restarts (the daemon's store names it):
    /// on start, the leases a previous life of the node left are taken over at once instead of
    /// lapsing. `None`: no previous life is recognised.
    pub node: Option<String>,
    /// The shortest interval between two fires of a job a model adds or reschedules through
    /// the `cron` tool (`[cron] min_interval`).
    pub min_interval: Duration,
    /// The most jobs a model may have created for one agent through the `cron` tool
    /// (`[cron] max_agent_jobs`).
    pub max_agent_jobs: usize,
}

pub(crate) use clawbus_core::config::cron_limits::{DEFAULT_MAX_AGENT_JOBS, DEFAULT_MIN_INTERVAL};

impl Settings {
    /// Sets where heartbeats read `HEARTBEAT.md` (`<workspaces>/<agent>/HEARTBEAT.md`).
    pub(crate) fn with_workspaces(mut self, dir: impl Into<PathBuf>) -> Self {
        self.workspaces = Some(dir.into());
        self
    }

    /// Sets where announcements are handed over.
    pub(crate) fn with_outbox(mut self, outbox: crate::outbox::Outbox) -> Self {
        self.outbox = Some(outbox);
        self
    }

    /// Sets the node this scheduler runs on (see [`Settings::node`]).
    pub(crate) fn with_node(mut self, node: impl Into<String>) -> Self {
        self.node = Some(node.into());
        self
    }

    /// Sets the limits on the jobs models add through the `cron` tool.
    pub(crate) fn with_tool_limits(
        mut self,
        min_interval: Duration,
        max_agent_jobs: usize,
    ) -> Self {
        self.min_interval = min_interval;
        self.max_agent_jobs = max_agent_jobs;
        self
    }

    /// Defaults: lease 5 min, run timeout 30 min, grace 60 s, sleep at most 60 s; models may add
    /// jobs at most every minute, 10 per agent.
    pub fn new(default_tz: Tz, agents: impl IntoIterator<Item = String>) -> Self {
        Self {
            default_tz,
            agents: agents.into_iter().collect(),
            lease_ttl: Duration::from_secs(300),
            run_timeout: Duration::from_secs(1800),
            misfire_grace: Duration::from_secs(60),
            max_sleep: Duration::from_secs(60),
            workspaces: None,
            outbox: None,
            node: None,
            min_interval: DEFAULT_MIN_INTERVAL,
            max_agent_jobs: DEFAULT_MAX_AGENT_JOBS,
        }
    }

    pub(crate) fn lease_ttl_ms(&self) -> u64 {
        ms(self.lease_ttl)
    }

    pub(crate) fn misfire_grace_ms(&self) -> u64 {
        ms(self.misfire_grace)
    }
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
