//! clawbus: cooperating AI agents as actors on a pub/sub message bus.
//!
//! This is the root package: the `clawbus` command line ([`cli`]) and `main`. The code lives in
//! crates with one direction of dependency, each re-exported here under its old path:
//!
//! ```text
//! bus  <-  clawbus-core  <-  clawbus-runtime  <-  clawbus-channels  <-  clawbus (cli, main)
//! ```
//!
//! - `bus` (bus/): envelopes, topics, the task store, the [`bus::Bus`] trait and its backends.
//! - `clawbus-core` (actors/core/): [`ids`], [`jobs`], [`config`], [`task`].
//! - `clawbus-runtime` (actors/runtime/): [`metrics`], [`untrusted`], [`secrets`], [`router`],
//!   [`origin`], [`lane`], [`workspace`], [`model`], [`skills`], [`memory`], [`approvals`],
//!   [`coordinator`], [`outbox`], [`cron`], [`tools`], [`prompt`], [`turn`], [`session`],
//!   [`agent`], [`system`].
//! - `clawbus-channels` (actors/channels/): [`channels`] (delivery, Telegram, outbound
//!   webhooks), [`gateway`] (HTTP, WebSocket, OpenAI endpoint, inbound webhooks) and [`daemon`]
//!   (the `Daemon`: the composition root that starts the system and every channel).
//! - `clawbus-testkit` (actors/testkit/): scripted model and Telegram servers for tests and
//!   benchmarks, as `testkit` (cargo feature `testkit`).

pub use clawbus_channels as channels;
pub use clawbus_channels::{daemon, gateway};
pub use clawbus_core::{config, ids, jobs, task};
pub use clawbus_runtime::{
    agent, approvals, coordinator, cron, ingress, lane, mcp, memory, metrics, model, origin,
    outbox, prompt, router, secrets, session, skills, system, tools, turn, untrusted, workspace,
};
#[cfg(feature = "testkit")]
pub use clawbus_testkit as testkit;

pub mod cli;
