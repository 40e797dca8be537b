//! `clawbus tail [PATTERN]`: bus traffic matching a topic pattern, one JSON line per message,
//! until interrupted.

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
pub fn run(global: &Global, args: TailArgs) -> ExitCode {
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
    match client.stream(&path, |data| outln!("{data}")) {
        Ok(()) => ExitCode::SUCCESS,
        Err(code) => code,
    }
}
