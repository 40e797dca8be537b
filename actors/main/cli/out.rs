//! Everything the CLI prints on stdout goes through here: a reader that went away
//! (`clawbus sessions | head -1`) ends the command quietly with exit 0, as `head` expects.

use super::EXIT_USAGE;
use std::io::Write;

/// Writes `text` to stdout and flushes it. When stdout is a closed pipe the process exits 0 at
/// once, quietly; any other write error exits 2 with one line on stderr.
pub(crate) fn write(text: &str) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        drop(out);
        gone(&e)
    }
}

/// Writes `value` to stdout as pretty JSON, one line break after it (what `--json` prints).
pub(crate) fn json<T: serde::Serialize + ?Sized>(value: &T) {
    write(&format!(
        "{}\n",
        serde_json::to_string_pretty(value).unwrap_or_default()
    ));
}

/// Ends the process after a failed write to stdout.
pub(crate) fn gone(e: &std::io::Error) -> ! {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        std::process::exit(0)
    }
    eprintln!("error: cannot write to stdout: {e}");
    std::process::exit(i32::from(EXIT_USAGE))
}

/// `println!` for the CLI: see [`write`].
macro_rules! outln {
    () => {
        $crate::cli::out::write("\n")
    };
    ($($arg:tt)*) => {
        $crate::cli::out::write(&format!("{}\n", format_args!($($arg)*)))
    };
}

/// `print!` for the CLI: see [`write`].
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::cli::out::write(&format!($($arg)*))
    };
}

pub(crate) use {out, outln};
