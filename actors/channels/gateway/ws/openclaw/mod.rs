//! The one conversion layer between OpenClaw's shapes (what its clients send and read on the
//! WebSocket, as `packages/gateway-protocol/src/schema/` of its npm package defines them) and
//! the HTTP API's own shapes.
//!
//! - [`fields`]: the fields OpenClaw's schema defines that clawbus has no concept for: accepted,
//!   logged at debug and dropped, per method; what is left is read with `deny_unknown_fields`, so
//!   a field the schema does not define is still refused.
//! - [`cron`]: jobs, pages, runs and the add/update params, both ways.
//! - [`delivery`]: `agent`'s delivery fields to the target its reply also goes to, and
//!   `deliveryStatus`.
//! - [`run`]: the final `res` of `agent` (`{runId, status, summary, result:{payloads, meta}}`).
//! - [`sessions`]: session rows and `chat.history` messages.
//! - [`skills`]: `skills.status` and the other catalogs the Control UI reads (`chat.metadata`,
//!   `plugins.catalog.browse`).
//! - [`status`]: `status`, `health` and `system-presence` as OpenClaw's CLI reads them.
//! - [`tasks`]: `tasks.list`'s params and OpenClaw's `TaskSummary` rows.
//! - [`ui`]: what the Control UI reads (agents, identities, empty catalogs).

pub(super) mod approvals;
pub(super) mod cron;
pub(super) mod delivery;
pub(super) mod fields;
pub(super) mod run;
pub(super) mod sessions;
pub(super) mod skills;
pub(super) mod status;
pub(super) mod tasks;
#[cfg(test)]
mod tests;
pub(super) mod ui;
