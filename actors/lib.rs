//! clawbus: cooperating AI agents as actors on a pub/sub message bus.
//!
//! Module map:
//! - [`config`]: `clawbus.toml` and `agents.d/` — parse, validate, report every problem with file:line:col.
//! - [`model`]: chat-completion clients (OpenAI-compatible streaming, built-in scripted rules).
//! - [`tools`]: the tools an agent may call, confined to its workspace.
//! - [`secrets`]: secret values, redacted from every tool output and model error.
//! - [`untrusted`]: the markers around external content (web pages, search results).
//! - [`lane`]: global lanes — named concurrency caps (`main`, `cron`, `subagent`) with FIFO queues.
//! - [`metrics`]: counters, gauges and histograms rendered for Prometheus (`GET /metrics`).
//! - [`prompt`]: the system prompt, assembled in layers within caps before every model call.
//! - [`memory`]: MEMORY.md and daily logs; the `memory_search` and `memory_get` tools.
//! - [`skills`]: `SKILL.md` folders — sources, gating, per-session snapshots, the prompt's skill list.
//! - [`agent`]: the agent actor and its tool-call loop.
//! - [`approvals`]: requests for a person's approval (exec in `ask` mode), stored in sled, answered from the CLI or HTTP.
//! - [`coordinator`]: the task coordinator — the wait-for graph, deadlines, cascading cancel.
//! - [`cron`]: the cron scheduler — jobs in sled, leases, missed fires, backoff, run history.
//! - [`router`]: session keys and the routing of inbound messages to agents.
//! - [`session`]: session actors (the session lane), JSONL transcripts, the session index, compaction.
//! - [`origin`]: the typed origin a channel sets on a task (channel, peer, session, lane, parent).
//! - [`system`]: the composition root — stores, bus, lanes, agents — and the graceful drain.
//! - [`gateway`]: the HTTP channel: the API with token auth, channel inbound, task event streams.
//! - [`cli`]: the `clawbus` command line.
//! - `testkit`: a scripted OpenAI-compatible server for tests and benchmarks (cargo feature `testkit`).

pub mod agent;
pub mod approvals;
pub mod channels;
pub mod cli;
pub mod config;
pub mod coordinator;
pub mod cron;
pub mod gateway;
pub mod ids;
pub mod lane;
pub mod memory;
pub mod metrics;
pub mod model;
pub mod origin;
pub mod prompt;
pub mod router;
pub mod secrets;
pub mod session;
pub mod skills;
pub mod system;
#[cfg(any(test, feature = "testkit"))]
pub mod testkit;
pub mod tools;
pub mod untrusted;
