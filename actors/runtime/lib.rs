//! clawbus runtime: everything that runs one agent's work, below the channels. It names the bus
//! only through its trait ([`bus::Bus`]) and depends on no HTTP server and no CLI.
//!
//! Module map, bottom to top (a module imports only those above it in this list, and the core):
//! - [`metrics`]: counters, gauges and histograms rendered for Prometheus (`GET /metrics`).
//! - `untrusted`: the markers around external content (web pages, search results).
//! - [`secrets`]: secret values, redacted from every tool output and model error.
//! - [`router`]: the routing of inbound messages to agents and session keys.
//! - [`origin`]: the typed origin a channel sets on a task (channel, peer, session, lane, parent).
//! - [`ingress`]: the one way work comes in — route, origin, envelope, admission, wait — for
//!   every channel, the cron scheduler and the tools that start work.
//! - [`lane`]: global lanes — named concurrency caps (`main`, `cron`, `subagent`) with FIFO queues.
//! - [`workspace`]: an agent's workspace folder, seeded on first start; `confine` keeps paths in it.
//! - [`model`]: chat-completion clients (OpenAI-compatible and Anthropic streaming, fallback,
//!   circuit breakers, built-in scripted rules).
//! - [`skills`]: `SKILL.md` folders — sources, gating, per-session snapshots, the prompt's skill list.
//! - [`memory`]: MEMORY.md and daily logs, indexed for search.
//! - [`approvals`]: requests for a person's approval (exec in `ask` mode), stored in sled.
//! - [`coordinator`]: the task coordinator — the wait-for graph, deadlines, cascading cancel.
//! - [`outbox`]: replies and announcements waiting to be delivered, and where a reply goes.
//! - [`cron`]: the cron scheduler — jobs in sled, leases, missed fires, backoff, run history.
//! - [`flow`]: flows — task graphs of agents from `flows.d/`, run node by node through the
//!   ingress pipeline, stored and resumed after a restart.
//! - [`tools`]: the tools an agent may call, confined to its workspace.
//! - [`mcp`]: MCP servers as tool sources (`[mcp.servers.<name>]`, stdio, `mcp__<server>__<tool>`).
//! - [`prompt`]: the system prompt, assembled in layers within caps before every model call.
//! - [`turn`]: one turn — prompt → model → tools → model … — with its retry rules and usage.
//! - [`session`]: session actors (the session lane), one run of a task, JSONL transcripts, the
//!   session index, compaction, the drain.
//! - [`agent`]: the agent actor (consumes `agent.<id>`), its tool policy and the session tools.
//! - [`system`]: the composition root of the runtime — stores, bus, lanes, agents, cron,
//!   coordinator — and the graceful shutdown. Channels attach to it.

// Path shims: the core's modules under their own names, so `clawbus_core::config::…` reads as before.
pub use clawbus_core::{config, ids, jobs, task};

pub mod agent;
pub mod approvals;
pub mod coordinator;
pub mod cron;
pub mod flow;
pub mod ingress;
pub mod lane;
pub mod mcp;
pub mod memory;
pub mod metrics;
pub mod model;
pub mod origin;
pub mod outbox;
pub mod prompt;
pub mod router;
pub mod secrets;
pub mod session;
pub mod skills;
pub mod system;
pub mod tools;
pub mod turn;
pub(crate) mod untrusted;
pub mod workspace;
