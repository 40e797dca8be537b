//! The cron job types (OpenClaw's shape) and their specs, without the scheduler: what config
//! parses and the scheduler (`cron`) runs.
//!
//! - [`job`]: [`Job`] and its parts; [`spec`]: [`JobSpec`], checked into a job.
//! - [`expr`]: 5/6-field cron expressions; [`schedule`]: the next fire, DST rules.
//! - [`heartbeat`]: [`HeartbeatSpec`], `HEARTBEAT_OK`, `NO_REPLY`, active hours.

pub mod expr;
pub mod heartbeat;
pub mod job;
pub mod schedule;
pub mod spec;

pub use expr::CronExprError;
pub use heartbeat::{HeartbeatSpec, HoursError};
pub use job::{
    ActiveHours, CatchUp, Delivery, DeliveryMode, FlowStart, Job, JobId, JobIdError, JobSource,
    Payload, PayloadKind, Schedule, SessionTarget,
};
pub use schedule::ScheduleError;
pub use spec::{JobSpec, ScheduleSpec, SpecContext, SpecError};
