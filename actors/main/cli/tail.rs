//! `clawbus tail [PATTERN]`: bus traffic matching a topic pattern, one JSON line per message,
//! until interrupted. Once the subscription is live it says so on stderr, one line:
//! `tail: subscribed to 'PATTERN'` ([`ready_line`]); stdout carries only the messages.

use super::Global;
use super::client::{GatewayClient, usage};
use super::out::outln;
use clap::Args;
use std::process::ExitCode;
use std::time::Duration;

/// Flags of `clawbus tail`.
#[derive(Debug, Args)]
pub struct TailArgs {
    /// The topic pattern (`events.task.>`, `agent.*`); `>` for everything.
    #[arg(default_value = ">")]
    pub pattern: String,
}

/// Prints each message on the bus matching the pattern as one JSON line.
pub(super) fn run(global: &Global, args: TailArgs) -> ExitCode {
    if let Err(e) = bus::Topic::parse(&args.pattern) {
        return usage(format!("pattern {:?}: {e}", args.pattern));
    }
    let client = match GatewayClient::connect(global, Duration::from_secs(10)) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let path = format!(
        "/v1/bus/tail?pattern={}",
        super::client::segment(&args.pattern)
    );
    // The gateway subscribes before it answers: once the answer's head is in, it is live.
    let ready = || eprintln!("{}", ready_line(&args.pattern));
    match client.stream_opened(&path, ready, |data| outln!("{data}")) {
        Ok(()) => ExitCode::SUCCESS,
        Err(code) => code,
    }
}

/// The line `clawbus tail` prints on stderr once its subscription is live (scripts and tests wait
/// for it before they publish).
pub(super) fn ready_line(pattern: &str) -> String {
    format!("tail: subscribed to '{pattern}'")
}
