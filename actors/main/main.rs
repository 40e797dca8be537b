//! The `clawbus` binary.

use clap::Parser;
use clawbus_channels::gateway::logs::LogRing;
use std::io::Write;
use std::process::ExitCode;

/// Each log line goes to stderr and to the in-memory ring OpenClaw's `logs.tail` reads.
struct Tee<A, B>(A, B);

impl<A: Write, B: Write> Write for Tee<A, B> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write_all(buf)?;
        self.1.write_all(buf)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()?;
        self.1.flush()
    }
}

fn main() -> ExitCode {
    clawbus::resident::tune_allocator();
    // Inside a sandbox with `network = "allow"`, this executable is the forwarder.
    if let Some(code) = clawbus::tools::sandbox::forward::main_if_asked() {
        return code;
    }
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(|| Tee(std::io::stderr(), LogRing::global().writer()))
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    clawbus::cli::run(clawbus::cli::Cli::parse())
}
