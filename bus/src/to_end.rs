//! Work that runs to its end even when its caller stops waiting for it.
//!
//! The work is polled in the caller's own task, so a submit or a completion costs no hand-off to
//! another task and back (a spawned task, its scheduling, and the wake of the caller when it
//! ends: 4 % of a bus task's instructions, counted by callgrind on `cargo bench -p bus --bench
//! tasks`).
//! Only when the caller drops it before its end is the rest of it spawned, to end there.

use crate::error::BusError;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::runtime::Handle;

/// `work`, polled by its caller; dropped before its end, the rest of it runs on a task of its own.
/// A panic in the work ends it as [`BusError::Closed`] (as a spawned task's panic would).
pub(crate) struct ToEnd<F: Future + Send + 'static> {
    work: Option<Pin<Box<F>>>,
    /// Where the rest goes when the caller stops waiting (taken when the work is made, so a drop
    /// outside the runtime's threads still finds it).
    runtime: Handle,
}

impl<F: Future + Send + 'static> ToEnd<F> {
    /// The work, to be awaited. Must be called inside a tokio runtime.
    pub(crate) fn new(work: F) -> Self {
        Self {
            work: Some(Box::pin(work)),
            runtime: Handle::current(),
        }
    }
}

impl<T, F> Future for ToEnd<F>
where
    F: Future<Output = Result<T, BusError>> + Send + 'static,
{
    type Output = Result<T, BusError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Some(work) = self.work.as_mut() else {
            return Poll::Ready(Err(BusError::Closed("polled after its end".into())));
        };
        let polled = catch_unwind(AssertUnwindSafe(|| work.as_mut().poll(cx)));
        let ended = match polled {
            Ok(Poll::Pending) => return Poll::Pending,
            Ok(Poll::Ready(out)) => out,
            Err(panic) => Err(BusError::Closed(format!(
                "stopped before its end: {}",
                panic_text(panic.as_ref())
            ))),
        };
        self.work = None;
        Poll::Ready(ended)
    }
}

impl<F: Future + Send + 'static> Drop for ToEnd<F> {
    fn drop(&mut self) {
        // Dropped only when the caller stopped waiting before the end: the rest still runs.
        if let Some(work) = self.work.take() {
            let rest = RestOf(work);
            self.runtime.spawn(rest);
        }
    }
}

/// The rest of a work whose caller left: run for its effects, its answer dropped.
struct RestOf<F>(Pin<Box<F>>);

impl<F: Future> Future for RestOf<F> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.0.as_mut().poll(cx).map(|_| ())
    }
}

/// What a panic said, when it said it as text.
fn panic_text(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a panic")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    #[tokio::test]
    async fn work_dropped_before_its_end_still_ends() {
        let ended = Arc::new(AtomicBool::new(false));
        let (go, wait) = tokio::sync::oneshot::channel::<()>();
        let (done_tx, done_rx) = tokio::sync::oneshot::channel::<()>();
        let flag = ended.clone();
        {
            let mut work = std::pin::pin!(ToEnd::new(async move {
                wait.await.ok();
                flag.store(true, Ordering::SeqCst);
                done_tx.send(()).ok();
                Ok::<_, BusError>(())
            }));
            assert!(futures::poll!(work.as_mut()).is_pending());
        }
        assert!(!ended.load(Ordering::SeqCst), "not ended before it may");
        go.send(()).unwrap();
        done_rx.await.unwrap();
        assert!(ended.load(Ordering::SeqCst), "ended after its caller left");
    }

    #[tokio::test]
    async fn work_awaited_to_its_end_answers_and_runs_once() {
        let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = runs.clone();
        let answer = ToEnd::new(async move {
            counted.fetch_add(1, Ordering::SeqCst);
            Ok::<_, BusError>(7)
        })
        .await
        .unwrap();
        assert_eq!(answer, 7);
        assert_eq!(runs.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_panic_in_the_work_is_an_error_not_a_panic_of_the_caller() {
        let answer = ToEnd::new(async {
            if true {
                panic!("store broke");
            }
            Ok::<(), BusError>(())
        })
        .await;
        match answer {
            Err(BusError::Closed(text)) => assert!(text.contains("store broke"), "{text}"),
            other => panic!("{other:?}"),
        }
    }
}
