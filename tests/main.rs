//! The integration test binary: real sled, real loopback HTTP, real child processes.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod support;

mod scenarios;
