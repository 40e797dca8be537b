//! The cron scheduler: jobs that make agents act on their own, at most once per fire, in the
//! right timezone.
//!
//! - [`job`]: [`Job`] in OpenClaw's shape; [`spec`]: [`JobSpec`], checked into a job.
//! - [`expr`]: 5/6-field cron expressions; [`schedule`]: the next fire, DST rules.
//! - [`state`]: leases, failures, backoff, run records; [`store`]: the sled trees.
//! - [`scheduler`]: [`Scheduler::tick`], the firing step; `fire`/`finish`: one run; `recover`:
//!   the leases found on start ([`Scheduler::recover`]).
//! - [`admin`]: add, update, remove, enable, run now, list, history; [`handle`]: the loop;
//!   `limits`: what the `cron` tool may add (minimum interval, per-agent cap).
//! - [`event`]: what is published on `events.cron.<jobId>`.
//! - [`heartbeat`]: per-agent heartbeats (`HEARTBEAT.md`, active hours, `HEARTBEAT_OK`).
//! - [`sync`]: the jobs declared in agent files (`[[cron]]`, `[heartbeat]`) synced into the store.

pub use clawbus_core::jobs::{expr, job, schedule, spec};

pub mod admin;
pub mod event;
mod finish;
pub mod fire;
pub mod flat;
pub mod handle;
pub mod heartbeat;
mod limits;
mod reclaim;
mod recover;
pub mod scheduler;
pub mod settings;
pub mod state;
pub mod store;
pub mod sync;
#[cfg(test)]
pub(crate) mod tests;

pub use admin::CronError;
pub use event::{CronEvent, CronEventKind};
pub use flat::{FlatError, FlatSpec};
pub use handle::SchedulerHandle;
pub use heartbeat::HeartbeatSpec;
pub use job::{
    ActiveHours, CatchUp, Delivery, DeliveryMode, Job, JobId, JobSource, Payload, PayloadKind,
    Schedule, SessionTarget, created_by_agent, human_ms,
};
pub use schedule::Compiled;
pub use scheduler::{Fired, JobView, Scheduler, Skipped, TickReport};
pub use settings::Settings;
pub use spec::{JobSpec, ScheduleSpec, SpecContext, SpecError};
pub use state::{JobState, Lease, RunOutcome, RunRecord};
pub use store::{CronStore, StoreError};
pub use sync::{Declared, SyncReport};
