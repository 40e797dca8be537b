//! clawbus core: what every layer above names, and nothing that runs. It depends on the `bus`
//! crate (for topics) and on no runtime, HTTP server or CLI.
//!
//! - [`ids`]: [`AgentId`](ids::AgentId), [`SessionKey`](ids::SessionKey) (OpenClaw's
//!   `agent:<id>:<channel>:<chatType>:<peer>`), [`Channel`](ids::Channel), the Telegram chat of
//!   a session, the `channel.<name>.out` topic.
//! - [`jobs`]: cron job and heartbeat specs (what config parses, what the scheduler runs):
//!   expressions, schedules and their next fire (DST rules), `HEARTBEAT_OK` / `NO_REPLY`.
//! - [`config`]: `clawbus.toml` and `agents.d/`: parse, validate, report every problem with
//!   file:line:col; the spec types it parses (model parameters, breaker and retry policies,
//!   reply routes, lanes, tools policy, channels, webhooks).
//! - [`task`]: the payloads of an agent task on the bus: [`TaskInput`](task::TaskInput) and
//!   [`TaskResult`](task::TaskResult).

pub mod config;
pub mod ids;
pub mod jobs;
pub mod task;
