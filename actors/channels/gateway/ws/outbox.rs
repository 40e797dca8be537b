//! What one connection sends: frames queued in order for its writer task, bounded in bytes.
//!
//! Answers and events share one queue so a client reads them in the order they were made. The
//! bytes waiting in it are counted; a frame that would take them past `maxBufferedBytes` is not
//! queued and the connection is closed (1008, "slow consumer") at once, ahead of what waits.

use super::frames::{EventName, Frame};
use axum::extract::ws::{CloseFrame, Message, WebSocket};
use futures::SinkExt as _;
use futures::stream::SplitSink;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;
use tokio::sync::{mpsc, watch};

/// Close code: a normal end.
pub(super) const CLOSE_NORMAL: u16 = 1000;
/// Close code: a policy was broken (wrong token, handshake, slow consumer).
pub(super) const CLOSE_POLICY: u16 = 1008;
/// Close code: a frame was larger than `maxPayload`.
pub(super) const CLOSE_TOO_BIG: u16 = 1009;
/// Close code: the protocol was not followed (a binary frame before `connect`, a bad version).
pub(super) const CLOSE_PROTOCOL: u16 = 1002;
/// Close code: the server is going away (shutdown).
pub(super) const CLOSE_GOING_AWAY: u16 = 1001;
/// Close code: the server is too busy now; try again later.
pub(super) const CLOSE_TRY_AGAIN: u16 = 1013;
/// How long a close frame may take to go out before the socket is dropped.
const CLOSE_WRITE: Duration = Duration::from_secs(2);

/// Why a frame was not queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the connection is closing")]
pub(super) struct Closed;

enum Out {
    Text(String),
    Close(u16, String),
}

/// The sending half of a connection; cheap to clone.
#[derive(Clone)]
pub(super) struct Outbox {
    tx: mpsc::UnboundedSender<Out>,
    queued: Arc<AtomicUsize>,
    limit: usize,
    seq: Arc<AtomicU64>,
    abort: Arc<watch::Sender<Option<(u16, String)>>>,
}

/// The writer side: drains an [`Outbox`] into the socket.
pub(super) struct Writer {
    rx: mpsc::UnboundedReceiver<Out>,
    queued: Arc<AtomicUsize>,
    abort: watch::Receiver<Option<(u16, String)>>,
}

/// A new outbox bounded at `limit` queued bytes, and its writer.
pub(super) fn outbox(limit: usize) -> (Outbox, Writer) {
    let (tx, rx) = mpsc::unbounded_channel();
    let queued = Arc::new(AtomicUsize::new(0));
    let (abort_tx, abort_rx) = watch::channel(None);
    (
        Outbox {
            tx,
            queued: queued.clone(),
            limit,
            seq: Arc::new(AtomicU64::new(0)),
            abort: Arc::new(abort_tx),
        },
        Writer {
            rx,
            queued,
            abort: abort_rx,
        },
    )
}

impl Outbox {
    /// Queues a frame; past the byte limit the connection is closed instead.
    pub(super) fn send(&self, frame: &Frame) -> Result<(), Closed> {
        if self.is_closing() {
            return Err(Closed);
        }
        let text = frame.to_text();
        let n = text.len();
        let before = self.queued.fetch_add(n, Ordering::SeqCst);
        if before + n > self.limit {
            self.queued.fetch_sub(n, Ordering::SeqCst);
            tracing::warn!(
                queued = before,
                limit = self.limit,
                "WebSocket client reads too slowly; disconnecting it."
            );
            self.abort(
                CLOSE_POLICY,
                format!(
                    "slow consumer: more than {} bytes queued (maxBufferedBytes)",
                    self.limit
                ),
            );
            return Err(Closed);
        }
        self.tx.send(Out::Text(text)).map_err(|_| Closed)
    }

    /// Queues an event, numbered with the connection's event counter.
    pub(super) fn event(&self, event: EventName, payload: serde_json::Value) -> Result<(), Closed> {
        let seq = self.seq.fetch_add(1, Ordering::SeqCst) + 1;
        self.send(&Frame::Event {
            event,
            payload,
            seq: Some(seq),
        })
    }

    /// Closes after the frames already queued.
    pub(super) fn close(&self, code: u16, reason: impl Into<String>) {
        let _ = self.tx.send(Out::Close(code, reason.into()));
    }

    /// Closes now, dropping what is queued.
    pub(super) fn abort(&self, code: u16, reason: impl Into<String>) {
        self.abort.send_replace(Some((code, reason.into())));
    }

    /// True once the connection is being closed.
    pub(super) fn is_closing(&self) -> bool {
        self.abort.borrow().is_some() || self.tx.is_closed()
    }

    /// Resolves when the writer has stopped (the socket is closed or broken).
    pub(super) async fn closed(&self) {
        self.tx.closed().await;
    }
}

impl Writer {
    /// The next queued frame's text, when one waits (tests read the queue without a socket).
    #[cfg(test)]
    pub(super) fn try_next_text(&mut self) -> Option<String> {
        match self.rx.try_recv() {
            Ok(Out::Text(t)) => {
                self.queued.fetch_sub(t.len(), Ordering::SeqCst);
                Some(t)
            }
            Ok(Out::Close(code, reason)) => Some(format!("close {code} {reason}")),
            Err(_) => None,
        }
    }

    /// Sends queued frames until a close, an abort or a broken socket.
    pub(super) async fn run(mut self, mut sink: SplitSink<WebSocket, Message>) {
        // Once every outbox is gone no abort can come: what is queued is still sent.
        let mut abortable = true;
        loop {
            let next = tokio::select! {
                biased;
                changed = self.abort.changed(), if abortable => match changed {
                    Ok(()) => self.abort.borrow().clone().map(|(c, r)| Out::Close(c, r)),
                    Err(_) => {
                        abortable = false;
                        continue;
                    }
                },
                out = self.rx.recv() => out,
            };
            match next {
                Some(Out::Text(text)) => {
                    let n = text.len();
                    let sent = sink.send(Message::Text(text.into())).await;
                    self.queued.fetch_sub(n, Ordering::SeqCst);
                    if sent.is_err() {
                        break;
                    }
                }
                Some(Out::Close(code, reason)) => {
                    let frame = CloseFrame {
                        code,
                        reason: close_reason(&reason).into(),
                    };
                    let _ =
                        tokio::time::timeout(CLOSE_WRITE, sink.send(Message::Close(Some(frame))))
                            .await;
                    break;
                }
                None => {
                    let _ = tokio::time::timeout(CLOSE_WRITE, sink.close()).await;
                    break;
                }
            }
        }
        self.rx.close();
    }
}

/// A close reason fits in 123 bytes (RFC 6455 §5.5): longer ones are cut at a char boundary.
pub(super) fn close_reason(reason: &str) -> &str {
    let mut end = reason.len().min(123);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    &reason[..end]
}
