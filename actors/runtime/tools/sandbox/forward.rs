//! The forwarder of `network = "allow"`, run inside the sandbox in front of the command.
//!
//! It is the daemon's own executable, bind-mounted read-only at `/run/clawbus/forward` and started in
//! a hidden mode (`<exe> __clawbus-sandbox-forward <socket> <port> -- <command…>`): it listens on
//! `127.0.0.1:<port>` in the sandbox's network namespace, starts the command, pipes every
//! connection to the proxy's unix socket, and exits with the command's status (`128 + n` when a
//! signal ended it, as bubblewrap reports). Re-executing the daemon needs nothing the host may
//! lack (no `socat`, no Python), and the binary is the one that was tested; the libraries it
//! links are the host's, which the sandbox mounts anyway.
//!
//! The wrapper that starts it moves the output to descriptor 3 and its stdout to `/dev/null`, so
//! whatever the executable itself prints on stdout (a test harness's banner) never reaches the
//! command's output; the command gets descriptor 3 back as its stdout. Under `cargo test` the
//! executable is the test binary, which reaches the forwarder through a test entry (see
//! [`Forwarder`]).

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

/// The argument that selects the forwarder mode.
pub const FORWARD_MODE: &str = "__clawbus-sandbox-forward";
/// Where the forwarder executable appears inside the sandbox.
pub(crate) const FORWARDER_PATH: &str = "/run/clawbus/forward";
/// Where the proxy socket appears inside the sandbox.
pub(crate) const SOCKET_PATH: &str = "/run/clawbus/proxy.sock";
/// Starts the forwarder with its stdout on `/dev/null` and the output on descriptor 3.
pub(crate) const OUTER: &str = "exec \"$@\" 3>&1 1>/dev/null";
/// Starts the command with descriptor 3 as its stdout again.
const INNER: &str = "exec \"$@\" 1>&3 3>&-";
/// Exit status when the forwarder itself failed (the command did not run).
const FAILED: u8 = 125;

/// How to start the forwarder: an executable and the arguments before the mode's own.
#[derive(Debug, Clone)]
pub struct Forwarder {
    /// The executable on the host (bind-mounted into the sandbox).
    pub program: PathBuf,
    /// Arguments before [`FORWARD_MODE`] (a test harness's selection of the entry test).
    pub args: Vec<String>,
}

impl Forwarder {
    /// The running executable, which must call [`main_if_asked`] first thing in `main`.
    pub fn current_exe() -> std::io::Result<Self> {
        Ok(Self {
            program: std::env::current_exe()?,
            args: Vec::new(),
        })
    }

    /// `program`, which must call [`main_if_asked`] first thing in `main` (e.g. the `clawbus`
    /// binary from a bench).
    pub fn program(program: impl Into<PathBuf>) -> Self {
        Self {
            program: program.into(),
            args: Vec::new(),
        }
    }

    #[cfg(test)]
    /// The test binary, running only the entry test below.
    pub(crate) fn test_binary() -> Self {
        Self {
            program: std::env::current_exe().unwrap_or_default(),
            args: [
                "--exact",
                "--quiet",
                "--nocapture",
                "--test-threads=1",
                "tools::sandbox::forward::tests::forwarder_entry",
                "--",
            ]
            .map(String::from)
            .to_vec(),
        }
    }
}

/// When this process was started as the forwarder (`argv[1]` is [`FORWARD_MODE`]): runs it and
/// returns its exit status; else `None`. The `clawbus` binary calls this before anything else.
pub fn main_if_asked() -> Option<ExitCode> {
    let mut args = std::env::args_os().skip(1);
    if args.next()? != FORWARD_MODE {
        return None;
    }
    Some(ExitCode::from(run(args.collect())))
}

/// Runs the forwarder with the arguments after [`FORWARD_MODE`]: `<socket> <port> -- <command…>`.
pub(crate) fn run(args: Vec<OsString>) -> u8 {
    let parsed = match &args[..] {
        [socket, port, dashes, program, rest @ ..] if dashes == "--" => port
            .to_str()
            .and_then(|p| p.parse::<u16>().ok())
            .map(|port| (PathBuf::from(socket), port, program.clone(), rest.to_vec())),
        _ => None,
    };
    let Some((socket, port, program, rest)) = parsed else {
        eprintln!("clawbus sandbox forwarder: expected <socket> <port> -- <command…>");
        return FAILED;
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("clawbus sandbox forwarder: {e}");
            return FAILED;
        }
    };
    runtime.block_on(forward(socket, port, program, rest))
}

async fn forward(socket: PathBuf, port: u16, program: OsString, rest: Vec<OsString>) -> u8 {
    let listener =
        match tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], port))).await {
            Ok(l) => l,
            Err(e) => {
                eprintln!("clawbus sandbox forwarder: cannot listen on 127.0.0.1:{port}: {e}");
                return FAILED;
            }
        };
    let mut child = match tokio::process::Command::new("/bin/sh")
        .args(["-c", INNER, "sh"])
        .arg(&program)
        .args(&rest)
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("clawbus sandbox forwarder: cannot start the command: {e}");
            return FAILED;
        }
    };
    let mut conns = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            status = child.wait() => return exit_code(status),
            accepted = listener.accept() => {
                if let Ok((tcp, _)) = accepted {
                    let socket = socket.clone();
                    conns.spawn(async move {
                        if let Ok(mut unix) = tokio::net::UnixStream::connect(&socket).await {
                            let mut tcp = tcp;
                            let _ended = tokio::io::copy_bidirectional(&mut tcp, &mut unix).await;
                        }
                    });
                }
            }
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
}

/// The command's code, or `128 + n` when signal n ended it.
fn exit_code(status: std::io::Result<std::process::ExitStatus>) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match status {
        Ok(s) => match (s.code(), s.signal()) {
            (Some(c), _) => c.clamp(0, 255) as u8,
            (None, Some(sig)) => (128 + sig).clamp(0, 255) as u8,
            (None, None) => FAILED,
        },
        Err(_) => FAILED,
    }
}

#[cfg(test)]
mod tests {
    /// Not a test: the forwarder's entry when the sandbox starts this test binary as its
    /// forwarder ([`super::Forwarder::test_binary`]); does nothing in a normal test run.
    #[test]
    fn forwarder_entry() {
        let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
        if let Some(at) = args.iter().position(|a| a == super::FORWARD_MODE) {
            let code = super::run(args[at + 1..].to_vec());
            std::process::exit(i32::from(code));
        }
    }
}
