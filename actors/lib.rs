//! clawbus: cooperating AI agents as actors on a pub/sub message bus.
//!
//! Module map:
//! - [`config`]: `clawbus.toml` and `agents.d/` — parse, validate, report every problem with file:line:col.
//! - [`model`]: chat-completion clients (OpenAI-compatible streaming, built-in scripted rules).
//! - [`tools`]: the tools an agent may call, confined to its workspace.
//! - [`agent`]: the agent actor and its tool-call loop.
//! - [`gateway`]: the composition root and the HTTP API with token auth.
//! - [`cli`]: the `clawbus` command line.
//! - [`testkit`]: a scripted OpenAI-compatible server for tests and benchmarks.

pub mod agent;
pub mod cli;
pub mod config;
pub mod gateway;
pub mod ids;
pub mod model;
pub mod testkit;
pub mod tools;
