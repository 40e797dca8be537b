//! A server's stdout read with a bound on one line (one JSON-RPC message): a line that passes
//! [`MAX_LINE_BYTES`] without a newline ends the read with an error, so the SDK's transport
//! closes and the server's calls fail at once (instead of the SDK dropping the line and the
//! call waiting for its timeout), and the process is stopped. The daemon never holds more than
//! the bound of it.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, ReadBuf};

/// The longest line a server may send: far above any tool result the output cap lets through,
/// far below what would hurt the daemon.
pub(crate) const MAX_LINE_BYTES: usize = 8 * 1024 * 1024;

/// An [`AsyncRead`] that fails once a line grows past `max` bytes; `tripped` says it did.
pub(crate) struct BoundedLines<R> {
    inner: R,
    max: usize,
    /// Bytes since the last newline.
    line: usize,
    tripped: Arc<AtomicBool>,
}

impl<R> BoundedLines<R> {
    /// Reads `inner` with lines of at most `max` bytes; `tripped` is set when one is longer.
    pub(crate) fn new(inner: R, max: usize, tripped: Arc<AtomicBool>) -> Self {
        Self {
            inner,
            max,
            line: 0,
            tripped,
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for BoundedLines<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.tripped.load(Ordering::Relaxed) {
            return Poll::Ready(Err(too_long(self.max)));
        }
        let before = buf.filled().len();
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {}
            other => return other,
        }
        let mut line = this.line;
        let mut over = false;
        for b in &buf.filled()[before..] {
            if *b == b'\n' {
                line = 0;
            } else {
                line += 1;
                over |= line > this.max;
            }
        }
        this.line = line;
        if over {
            this.tripped.store(true, Ordering::Relaxed);
            buf.set_filled(before);
            return Poll::Ready(Err(too_long(this.max)));
        }
        Poll::Ready(Ok(()))
    }
}

fn too_long(max: usize) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("a line from the server is longer than {max} bytes"),
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use tokio::io::AsyncReadExt;

    #[tokio::test]
    async fn lines_within_the_bound_pass_and_a_longer_one_fails_the_read() {
        let tripped = Arc::new(AtomicBool::new(false));
        let text = b"12345\n1234\n123456\nrest".to_vec();
        let mut r = BoundedLines::new(&text[..], 5, tripped.clone());
        let mut out = Vec::new();
        let e = r.read_to_end(&mut out).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        assert!(tripped.load(Ordering::Relaxed));
        let ok = Arc::new(AtomicBool::new(false));
        let mut r = BoundedLines::new(&b"12345\n12345\n"[..], 5, ok.clone());
        let mut out = Vec::new();
        r.read_to_end(&mut out).await.unwrap();
        assert_eq!(out.len(), 12);
        assert!(!ok.load(Ordering::Relaxed));
    }
}
