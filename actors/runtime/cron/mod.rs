//! The cron scheduler: jobs that make agents act on their own, at most once per fire, in the
//! right timezone.
//!
//! - [`job`]: [`Job`] in OpenClaw's shape; [`spec`]: [`JobSpec`], checked into a job.
//! - [`expr`]: 5/6-field cron expressions; [`schedule`]: the next fire, DST rules.
//! - `state`: leases, failures, backoff, run records; `store`: [`CronStore`] over a
//!   [`CronBackend`]: sled trees ([`SledCron`]) or a shared key-value store ([`KvCron`]).
//! - `scheduler`: [`Scheduler::tick`], the firing step; `fire`/`finish`: one run; `recover`:
//!   the leases found on start ([`Scheduler::recover`]).
//! - `admin`: add, update, remove, enable, run now, list, history; `handle`: the loop;
//!   `limits`: what the `cron` tool may add (minimum interval, per-agent cap).
//! - `event`: what is published on `events.cron.<jobId>`.
//! - `heartbeat`: per-agent heartbeats (`HEARTBEAT.md`, active hours, `HEARTBEAT_OK`).
//! - `sync`: the jobs declared in agent files (`[[cron]]`, `[heartbeat]`) synced into the store.

pub use clawbus_core::jobs::{expr, job, schedule, spec};

pub(crate) mod admin;
pub(crate) mod event;
mod finish;
pub(crate) mod fire;
pub(crate) mod flat;
pub(crate) mod handle;
pub(crate) mod heartbeat;
mod limits;
mod reclaim;
mod recover;
pub(crate) mod scheduler;
pub(crate) mod settings;
pub(crate) mod state;
pub(crate) mod store;
pub(crate) mod sync;
#[cfg(test)]
pub(crate) mod tests;

pub use admin::CronError;
pub use clawbus_core::jobs::heartbeat::HeartbeatSpec;
pub use event::{CronEvent, CronEventKind};
pub use flat::{FlatError, FlatSpec};
pub use handle::SchedulerHandle;
pub use job::{
    ActiveHours, CatchUp, Delivery, DeliveryMode, Job, JobId, JobSource, Payload, PayloadKind,
    Schedule, SessionTarget, created_by_agent, human_ms,
};
pub use schedule::Compiled;
pub use scheduler::{Fired, JobView, Scheduler, Skipped, TickReport};
pub use settings::Settings;
pub use spec::{JobSpec, ScheduleSpec, SpecContext, SpecError};
pub use state::{JobState, Lease, RunOutcome, RunRecord};
pub use store::{CronBackend, CronStore, KvCron, SledCron, StateVersion, StoreError};
pub use sync::{Declared, SyncReport};
