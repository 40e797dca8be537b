//! Running a judged command: clean environment, workspace as cwd, its own process group, one pipe
//! for stdout and stderr with a size cap, and the whole group killed on timeout.

use std::ffi::OsString;
use std::io;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::AsyncReadExt;

/// After the command ended (or was killed), how long its output may take to drain. Only a
/// process that left the group (`setsid`) and kept the pipe open makes this wait.
const DRAIN_GRACE: Duration = Duration::from_secs(2);

/// What to run and how.
#[derive(Debug, Clone)]
pub(crate) struct Spec {
    /// The resolved executable.
    pub program: PathBuf,
    /// The argv; `argv[0]` is passed as written.
    pub argv: Vec<String>,
    /// The working directory.
    pub cwd: PathBuf,
    /// The whole environment of the child.
    pub env: Vec<(String, OsString)>,
    /// When the group is killed.
    pub timeout: Duration,
    /// Bytes of output kept; the rest is counted and dropped.
    pub max_output: usize,
}

/// How the command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Exit {
    /// It exited with this code.
    Code(i32),
    /// A signal ended it.
    Signal(i32),
    /// It ran past the timeout; its group was killed.
    TimedOut,
}

/// The outcome of a run.
#[derive(Debug, Clone)]
pub(crate) struct Finished {
    /// How it ended.
    pub exit: Exit,
    /// stdout and stderr as interleaved by the child, at most `max_output` bytes.
    pub output: Vec<u8>,
    /// Bytes it wrote in all.
    pub total: u64,
    /// From spawn to the end of the output.
    pub elapsed: Duration,
}

/// Makes this process non-dumpable, once, before its first child: a command running as the same
/// user can then neither read `/proc/<daemon>/environ` (where the provider keys are) nor
/// `/proc/<daemon>/mem`, nor attach a debugger. Children are dumpable again after `exec`.
pub(crate) fn protect_parent() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        #[cfg(target_os = "linux")]
        if let Err(e) =
            rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
        {
            tracing::warn!(error = %e, "Could not make the process non-dumpable; commands may read its environment.");
        }
    });
}

/// Runs `spec`; `Err` only when the child could not be started.
pub(crate) async fn run(spec: Spec) -> io::Result<Finished> {
    protect_parent();
    #[allow(
        clippy::disallowed_methods,
        reason = "a child process's elapsed time is real time"
    )]
    let started = Instant::now();
    // Close-on-exec, like std's own pipes: only the child's stdout/stderr copies survive exec.
    let (reader, writer) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
    let mut cmd = tokio::process::Command::new(&spec.program);
    cmd.arg0(&spec.argv[0])
        .args(&spec.argv[1..])
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .current_dir(&spec.cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::from(writer.try_clone()?))
        .stderr(Stdio::from(writer))
        .process_group(0)
        .kill_on_drop(true);
    let mut child = cmd.spawn()?;
    // Our copies of the pipe's write end must go, or the output never ends.
    drop(cmd);
    let pgid = child.id().and_then(|id| i32::try_from(id).ok());
    let reader = tokio::net::unix::pipe::Receiver::from_owned_fd(reader)?;
    let buffer = Arc::new(Mutex::new((Vec::new(), 0u64)));
    let mut drain = tokio::spawn(collect(reader, buffer.clone(), spec.max_output));

    let exit = match tokio::time::timeout(spec.timeout, child.wait()).await {
        Ok(Ok(status)) => match (status.code(), status.signal()) {
            (Some(code), _) => Exit::Code(code),
            (None, Some(sig)) => Exit::Signal(sig),
            (None, None) => Exit::Code(-1),
        },
        Ok(Err(e)) => {
            kill_group(pgid);
            return Err(e);
        }
        Err(_) => {
            kill_group(pgid);
            if let Err(e) = child.wait().await {
                tracing::warn!(error = %e, "Could not reap a killed command.");
            }
            Exit::TimedOut
        }
    };
    // Nothing the command started outlives it: background children in its group go too.
    kill_group(pgid);
    if tokio::time::timeout(DRAIN_GRACE, &mut drain).await.is_err() {
        tracing::warn!(program = %spec.program.display(), "Output still open after the command ended (a process left its group?); stopped reading.");
        drain.abort();
    }
    let (output, total) = match buffer.lock() {
        Ok(mut b) => (std::mem::take(&mut b.0), b.1),
        Err(poisoned) => {
            let mut b = poisoned.into_inner();
            (std::mem::take(&mut b.0), b.1)
        }
    };
    Ok(Finished {
        exit,
        output,
        total,
        elapsed: started.elapsed(),
    })
}

/// Reads until every writer closed the pipe, keeping at most `max` bytes.
async fn collect(
    mut reader: tokio::net::unix::pipe::Receiver,
    buffer: Arc<Mutex<(Vec<u8>, u64)>>,
    max: usize,
) {
    let mut chunk = vec![0u8; 16 * 1024];
    loop {
        match reader.read(&mut chunk).await {
            Ok(0) => return,
            Ok(n) => {
                let mut b = match buffer.lock() {
                    Ok(b) => b,
                    Err(poisoned) => poisoned.into_inner(),
                };
                let room = max.saturating_sub(b.0.len());
                let keep = n.min(room);
                b.0.extend_from_slice(&chunk[..keep]);
                b.1 += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                tracing::debug!(error = %e, "Reading command output failed.");
                return;
            }
        }
    }
}

/// SIGKILL to every process of the group; a group already gone is fine.
fn kill_group(pgid: Option<i32>) {
    let Some(pid) = pgid.and_then(rustix::process::Pid::from_raw) else {
        return;
    };
    match rustix::process::kill_process_group(pid, rustix::process::Signal::KILL) {
        Ok(()) => {}
        Err(e) if e == rustix::io::Errno::SRCH => {}
        Err(e) => {
            tracing::warn!(pgid = pid.as_raw_nonzero().get(), error = %e, "Could not kill a command's process group.")
        }
    }
}
