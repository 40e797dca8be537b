//! What the stores' crash tests share: a child process (this test binary, running one test)
//! that prints a line for each write it has had acknowledged, killed with SIGKILL once enough
//! are printed; and a reopen that waits for sled to let go of the database.

use std::path::Path;

/// Set in the child process: the folder it writes into.
pub(crate) const CHILD_DIR: &str = "CLAWBUS_TEST_CRASH_CHILD_DIR";
/// How the child starts an acknowledgement line; it ends the line with ` .`, which tells a
/// whole line from one cut by the kill.
pub(crate) const ACKED: &str = "acked ";
/// How many tasks write in the child at once.
pub(crate) const WRITERS: usize = 64;
/// How many acknowledgements the child prints before it is killed.
pub(crate) const KILL_AFTER: usize = 400;

/// The folder to write into, in the child process; `None` in the parent.
pub(crate) fn child_dir() -> Option<std::path::PathBuf> {
    std::env::var_os(CHILD_DIR).map(Into::into)
}

/// Runs test `test` of this binary as a child writing into `dir`, and kills it with SIGKILL (no
/// destructor, no last flush) once it has printed [`KILL_AFTER`] acknowledgements; answers
/// every acknowledgement it printed, parsed by `parse` (the text after [`ACKED`], before ` .`).
pub(crate) fn acknowledged_until_killed<T>(
    test: &str,
    dir: &Path,
    parse: impl Fn(&str) -> Option<T>,
) -> Vec<T> {
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_DIR, dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let lines = read_lines(child.stdout.take().unwrap());
    let acked_line = |line: &str| parse(line.strip_prefix(ACKED)?.strip_suffix(" .")?);
    let mut acked = Vec::new();
    let bound = std::time::Duration::from_secs(120);
    while acked.len() < KILL_AFTER {
        let line = lines
            .recv_timeout(bound)
            .expect("the child acknowledges writes");
        acked.extend(acked_line(&line));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    // Lines written before the kill were acknowledged too.
    acked.extend(lines.iter().filter_map(|l| acked_line(&l)));
    acked
}

/// Prints one acknowledgement line at once (the parent reads it before the kill).
pub(crate) fn say_acked(text: &str) {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{ACKED}{text} .").unwrap();
    out.flush().unwrap();
}

/// The child's lines, read on a thread of their own, so the parent's wait for them is bounded.
fn read_lines(out: std::process::ChildStdout) -> std::sync::mpsc::Receiver<String> {
    use std::io::BufRead as _;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(out).lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    rx
}

/// Retries `open` while the database is still locked by a handle being dropped (bounded): sled
/// releases its file lock from a background thread shortly after the last handle is dropped.
#[allow(
    clippy::disallowed_methods,
    reason = "sled lets go of its file lock in real time: the wait for it is bounded in real time"
)]
pub(crate) fn when_released<T, E: std::fmt::Display>(open: impl Fn() -> Result<T, E>) -> T {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        match open() {
            Ok(opened) => return opened,
            Err(e) if std::time::Instant::now() < deadline && e.to_string().contains("lock") => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(e) => panic!("the database must open: {e}"),
        }
    }
}
