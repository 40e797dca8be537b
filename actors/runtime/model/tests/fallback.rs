//! `FallbackModel` against scripted OpenAI-compatible servers, with breakers on a manual clock.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bus::ManualClock;

use crate::model::{
    BreakerPolicy, BreakerState, Breakers, Candidate, ChatMessage, ChatModel, ChatRequest,
    FallbackModel, Fallover, FalloverReason, ModelError, ModelObserver, OpenAiClient, OpenAiConfig,
};
use clawbus_testkit::{ScriptedServer, Turn};

fn client(server: &ScriptedServer, max_retries: u32) -> Arc<dyn ChatModel> {
    Arc::new(
        OpenAiClient::new(OpenAiConfig {
            base_url: server.base_url(),
            api_key: Some("sk-test".into()),
            timeout: Duration::from_secs(10),
            max_retries,
            backoff_base: Duration::from_millis(2),
        })
        .unwrap(),
    )
}

pub(crate) fn ask() -> ChatRequest {
    ChatRequest {
        model: "p-model".into(),
        messages: vec![ChatMessage::user("hi")],
        tools: Default::default(),
    }
}

/// A server answering 503 until `healthy` is set, then text.
pub(crate) async fn flaky(healthy: Arc<AtomicBool>) -> ScriptedServer {
    ScriptedServer::with_responder(move |_| {
        if healthy.load(Ordering::SeqCst) {
            Turn::text("primary answer")
        } else {
            Turn::http_error(503)
        }
    })
    .await
}

pub(crate) async fn always(text: &'static str) -> ScriptedServer {
    ScriptedServer::with_responder(move |_| Turn::text(text)).await
}

/// Primary `primary/p-model` and fallback `backup/b-model`, on `breakers`.
fn chain(
    breakers: &Breakers,
    primary: &ScriptedServer,
    backup: &ScriptedServer,
    primary_retries: u32,
) -> FallbackModel {
    FallbackModel::new(
        Candidate::new(
            "primary",
            "p-model",
            client(primary, primary_retries),
            breakers.for_provider("primary"),
        ),
        vec![Candidate::new(
            "backup",
            "b-model",
            client(backup, 0),
            breakers.for_provider("backup"),
        )],
    )
}

pub(crate) fn manual() -> (Arc<ManualClock>, Breakers) {
    let clock = ManualClock::new(1_000_000);
    let breakers = Breakers::new(BreakerPolicy::default(), clock.clone());
    (clock, breakers)
}

/// Records each fallover as `from -> to: why`.
#[derive(Default)]
struct Moves(Mutex<Vec<String>>);

impl ModelObserver for Moves {
    fn text(&self, _: &str) {}
    fn retry(&self, _: u32, _: Duration, _: &ModelError) {}
    fn fell_over(&self, event: &Fallover<'_>) {
        let why = match event.reason {
            FalloverReason::Failed(ModelError::Http { status, .. }) => format!("HTTP {status}"),
            FalloverReason::Failed(e) => e.to_string(),
            FalloverReason::CircuitOpen { .. } => "circuit open".to_owned(),
        };
        let line = format!("{} -> {}: {why}", event.from, event.to);
        self.0.lock().unwrap().push(line);
    }
}

impl Moves {
    fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

#[tokio::test]
async fn a_503_after_the_retries_falls_over_to_the_fallback() {
    let primary = flaky(Arc::new(AtomicBool::new(false))).await;
    let backup = always("backup answer").await;
    let (_clock, breakers) = manual();
    let model = chain(&breakers, &primary, &backup, 2);
    let moves = Moves::default();
    let reply = model.complete_observed(&ask(), &moves).await.unwrap();
    assert_eq!(reply.text.as_deref(), Some("backup answer"));
    assert_eq!(primary.request_count(), 3, "the first try and two retries");
    assert_eq!(
        backup.requests()[0]["model"],
        "b-model",
        "the fallback's own model name"
    );
    assert_eq!(
        moves.take(),
        ["primary/p-model -> backup/b-model: HTTP 503"]
    );
    let status = breakers.for_provider("primary").status();
    assert_eq!((status.state, status.failures), (BreakerState::Closed, 1));
}

#[tokio::test]
async fn auth_and_invalid_request_errors_do_not_fall_over() {
    for status in [401, 403, 400, 404, 422] {
        let primary = ScriptedServer::with_responder(move |_| Turn::http_error(status)).await;
        let backup = always("backup answer").await;
        let (_clock, breakers) = manual();
        let model = chain(&breakers, &primary, &backup, 2);
        let moves = Moves::default();
        let err = model.complete_observed(&ask(), &moves).await.unwrap_err();
        assert!(
            matches!(err, ModelError::Http { status: s, .. } if s == status),
            "{err}"
        );
        assert_eq!(primary.request_count(), 1, "HTTP {status} is not retried");
        assert_eq!(
            backup.request_count(),
            0,
            "HTTP {status} must not fall over"
        );
        assert!(moves.take().is_empty());
        assert_eq!(breakers.for_provider("primary").status().failures, 0);
    }
}

#[test]
fn errors_that_fall_over_are_classified() {
    let http = |status| ModelError::Http {
        status,
        body: String::new(),
        target: "t".into(),
    };
    for status in [408, 429, 500, 502, 503, 504, 529] {
        assert!(http(status).falls_over(), "{status}");
    }
    for status in [400, 401, 403, 404, 409, 413, 422] {
        assert!(!http(status).falls_over(), "{status}");
    }
    let timeout = ModelError::TimedOut {
        after: Duration::from_secs(1),
        target: "t".into(),
    };
    assert!(timeout.falls_over());
    assert!(ModelError::Connect("refused".into()).falls_over());
    assert!(!ModelError::Protocol("bad".into()).falls_over());
    assert!(!ModelError::Config("bad".into()).falls_over());
}

#[tokio::test]
async fn the_breaker_opens_after_five_failures_and_closes_after_a_success() {
    let healthy = Arc::new(AtomicBool::new(false));
    let primary = flaky(healthy.clone()).await;
    let backup = always("backup answer").await;
    let (clock, breakers) = manual();
    let model = chain(&breakers, &primary, &backup, 0);
    let moves = Moves::default();
    let breaker = breakers.for_provider("primary");
    for n in 1..=5 {
        assert_eq!(breaker.state(), BreakerState::Closed, "before failure {n}");
        let reply = model.complete_observed(&ask(), &moves).await.unwrap();
        assert_eq!(reply.text.as_deref(), Some("backup answer"));
    }
    assert_eq!(primary.request_count(), 5);
    assert_eq!(breaker.state(), BreakerState::Open);
    moves.take();

    // During the cool-down the primary receives nothing.
    for _ in 0..3 {
        model.complete_observed(&ask(), &moves).await.unwrap();
        clock.advance(Duration::from_secs(9));
    }
    assert_eq!(primary.request_count(), 5, "skipped while open");
    assert_eq!(
        moves.take()[0],
        "primary/p-model -> backup/b-model: circuit open"
    );
    assert_eq!(backup.request_count(), 8);

    // After 30 s it is half-open: the next call goes to the primary, which now answers.
    clock.advance(Duration::from_secs(4));
    assert_eq!(breaker.state(), BreakerState::HalfOpen);
    healthy.store(true, Ordering::SeqCst);
    let reply = model.complete_observed(&ask(), &moves).await.unwrap();
    assert_eq!(reply.text.as_deref(), Some("primary answer"));
    assert_eq!(primary.request_count(), 6);
    let status = breaker.status();
    assert_eq!((status.state, status.failures), (BreakerState::Closed, 0));
    assert!(moves.take().is_empty());
}

#[tokio::test]
async fn a_failed_half_open_call_reopens_for_twice_as_long() {
    let primary = flaky(Arc::new(AtomicBool::new(false))).await;
    let backup = always("backup answer").await;
    let (clock, breakers) = manual();
    let model = chain(&breakers, &primary, &backup, 0);
    for _ in 0..5 {
        model.complete(&ask()).await.unwrap();
    }
    clock.advance(Duration::from_secs(30));
    model.complete(&ask()).await.unwrap();
    assert_eq!(
        primary.request_count(),
        6,
        "the half-open call went through"
    );
    let status = breakers.for_provider("primary").status();
    assert_eq!(status.state, BreakerState::Open);
    assert_eq!(status.retry_in, Some(Duration::from_secs(60)));
    clock.advance(Duration::from_secs(59));
    model.complete(&ask()).await.unwrap();
    assert_eq!(primary.request_count(), 6, "still open after 59 s");
}

#[tokio::test]
async fn every_breaker_open_fails_fast_and_a_real_error_is_kept() {
    let primary = flaky(Arc::new(AtomicBool::new(false))).await;
    let backup = ScriptedServer::with_responder(|_| Turn::http_error(529)).await;
    let (_clock, breakers) = manual();
    let model = chain(&breakers, &primary, &backup, 0);
    for _ in 0..5 {
        let err = model.complete(&ask()).await.unwrap_err();
        assert!(matches!(err, ModelError::Http { status: 529, .. }), "{err}");
    }
    let err = model.complete(&ask()).await.unwrap_err();
    assert!(matches!(&err, ModelError::CircuitOpen { skipped } if skipped.len() == 2));
    assert_eq!(
        err.to_string(),
        "every model was skipped, its provider's circuit breaker open: primary/p-model (for 30s more), backup/b-model (for 30s more)"
    );
    assert_eq!((primary.request_count(), backup.request_count()), (5, 5));
}

#[tokio::test]
async fn agents_share_a_providers_breaker() {
    let primary = flaky(Arc::new(AtomicBool::new(false))).await;
    let backup = always("backup answer").await;
    let (_clock, breakers) = manual();
    let first = chain(&breakers, &primary, &backup, 0);
    let second = chain(&breakers, &primary, &backup, 0);
    for _ in 0..3 {
        first.complete(&ask()).await.unwrap();
    }
    for _ in 0..2 {
        second.complete(&ask()).await.unwrap();
    }
    assert_eq!(breakers.for_provider("primary").state(), BreakerState::Open);
    first.complete(&ask()).await.unwrap();
    assert_eq!(primary.request_count(), 5);
    let states: Vec<_> = breakers
        .statuses()
        .into_iter()
        .map(|s| (s.provider, s.state))
        .collect();
    assert_eq!(
        states,
        [
            ("backup".to_owned(), BreakerState::Closed),
            ("primary".to_owned(), BreakerState::Open)
        ]
    );
}

#[test]
fn breaker_states_are_a_gauge() {
    let (clock, breakers) = manual();
    let metrics = crate::metrics::Metrics::new();
    let early = breakers.for_provider("early");
    breakers.attach_metrics(&metrics);
    let late = breakers.for_provider("late");
    for _ in 0..5 {
        late.record_failure();
    }
    let text = metrics.render_prometheus();
    assert!(
        text.contains("clawbus_model_breaker_state{provider=\"early\"} 0\n"),
        "{text}"
    );
    assert!(
        text.contains("clawbus_model_breaker_state{provider=\"late\"} 2\n"),
        "{text}"
    );
    clock.advance(Duration::from_secs(30));
    assert!(late.check().is_ok());
    assert!(
        metrics
            .render_prometheus()
            .contains("clawbus_model_breaker_state{provider=\"late\"} 1\n")
    );
    late.record_success();
    early.record_failure();
    let text = metrics.render_prometheus();
    assert!(text.contains("clawbus_model_breaker_state{provider=\"late\"} 0\n"));
}

#[test]
fn the_cool_down_doubles_up_to_five_minutes() {
    let (clock, breakers) = manual();
    let b = breakers.for_provider("p");
    for _ in 0..4 {
        b.record_failure();
    }
    assert!(b.check().is_ok(), "four failures leave it closed");
    b.record_failure();
    let mut expected = 30;
    for _ in 0..6 {
        assert_eq!(b.check(), Err(Duration::from_secs(expected)));
        clock.advance(Duration::from_secs(expected));
        assert!(b.check().is_ok(), "half-open after {expected} s");
        b.record_failure();
        expected = (expected * 2).min(300);
    }
    assert_eq!(b.check(), Err(Duration::from_secs(300)));
    clock.advance(Duration::from_secs(300));
    assert!(b.check().is_ok());
    b.record_success();
    for _ in 0..5 {
        b.record_failure();
    }
    assert_eq!(
        b.check(),
        Err(Duration::from_secs(30)),
        "a success resets it"
    );
}
