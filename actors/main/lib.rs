//! clawbus: cooperating AI agents as actors on a pub/sub message bus.
//!
//! This is the root package: the `clawbus` command line ([`cli`]) and `main`. The code lives in
//! crates with one direction of dependency:
//!
//! ```text
//! bus  <-  clawbus-core  <-  clawbus-runtime  <-  clawbus-channels  <-  clawbus (cli, main)
//! ```
//!
//! - `bus` (bus/): envelopes, topics, the task store, the [`bus::Bus`] trait and its backends.
//! - `clawbus-core` (actors/core/): ids, cron job types, the configuration, task payloads.
//! - `clawbus-runtime` (actors/runtime/): sessions, lanes, agents, tools, prompt, models, the
//!   coordinator, cron, flows and the runtime's composition root.
//! - `clawbus-channels` (actors/channels/): the gateway (HTTP, WebSocket, OpenAI endpoint,
//!   inbound webhooks), Telegram, outbound webhooks, delivery, and the [`daemon`] that starts the
//!   system and every channel.
//! - `clawbus-testkit` (actors/testkit/): scripted model and Telegram servers for tests and
//!   benchmarks, as `testkit` (cargo feature `testkit`).
//!
//! The modules re-exported here are the ones the CLI, the integration tests and the benches
//! name; everything else is reached through its own crate.

pub use clawbus_channels::{daemon, gateway};
pub use clawbus_core::{config, ids, task};
pub use clawbus_runtime::{
    agent, coordinator, cron, flow, ingress, mcp, memory, model, origin, prompt, secrets, skills,
    system, tools, workspace,
};
#[cfg(feature = "testkit")]
pub use clawbus_testkit as testkit;

pub mod cli;
pub mod resident;

/// The allocator of every binary of this package (the daemon and CLI, their tests and benches):
/// mimalloc. Against glibc's malloc it takes about a third of the instructions per allocation
/// and free, which were a third of a turn's instructions; with the purge delay
/// [`resident::tune_allocator`] sets, memory under sustained load stays within glibc's
/// (BENCHMARKS.md, "The allocator and the start's pages").
///
/// Not in this crate's own unit-test build: that build links this crate once more as a
/// dev-dependency, whose allocator it then uses.
#[cfg(not(test))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
