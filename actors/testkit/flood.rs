//! [`Flood`]: a hostile model server's answer that never ends, for the response-cap tests of both
//! fake servers ([`Turn::Flood`](super::Turn::Flood), [`AnthropicTurn::Flood`](super::AnthropicTurn::Flood)).
//!
//! Each shape sends a short head, then the same chunk again and again until the client hangs up
//! or [`FLOOD_LIMIT`] bytes went out, whichever comes first: the server stops by itself.

use std::convert::Infallible;

use axum::body::Body;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;

/// The most bytes one flood sends before it ends by itself.
pub const FLOOD_LIMIT: usize = 256 * 1024 * 1024;

/// Bytes per chunk of a flood.
const CHUNK: usize = 64 * 1024;

/// The shape of an answer that never ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flood {
    /// A 200 event stream of `data: ` followed by bytes with no line end.
    EndlessLine,
    /// A 200 event stream of `data:` lines with no blank line between them: one event without end.
    EndlessEvent,
    /// A 500 whose body never ends.
    EndlessErrorBody,
    /// A 200 JSON completion (not a stream) whose body never ends.
    EndlessJsonBody,
}

impl Flood {
    /// Every shape, for tests that try each.
    pub const ALL: [Flood; 4] = [
        Flood::EndlessLine,
        Flood::EndlessEvent,
        Flood::EndlessErrorBody,
        Flood::EndlessJsonBody,
    ];

    /// Status, content type, head and the chunk repeated after it.
    fn parts(self) -> (StatusCode, &'static str, String, String) {
        let fill = |unit: &str| unit.repeat(CHUNK / unit.len());
        match self {
            Flood::EndlessLine => (
                StatusCode::OK,
                "text/event-stream",
                "data: ".to_owned(),
                fill("x"),
            ),
            Flood::EndlessEvent => (
                StatusCode::OK,
                "text/event-stream",
                String::new(),
                fill("data: xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n"),
            ),
            Flood::EndlessErrorBody => (
                StatusCode::INTERNAL_SERVER_ERROR,
                "application/json",
                "{\"error\":{\"message\":\"".to_owned(),
                fill("x"),
            ),
            Flood::EndlessJsonBody => (
                StatusCode::OK,
                "application/json",
                "{\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\""
                    .to_owned(),
                fill("x"),
            ),
        }
    }

    /// The answer: the head, then chunks until the client hangs up or [`FLOOD_LIMIT`] is sent.
    /// `guard` is held until the body ends or is dropped.
    pub(super) fn response<G: Send + Sync + 'static>(self, guard: G) -> Response {
        let (status, content_type, head, chunk) = self.parts();
        let repeats = FLOOD_LIMIT / chunk.len();
        let chunks = std::iter::once(head).chain(std::iter::repeat_n(chunk, repeats));
        let stream = futures::stream::iter(chunks).map(move |c| {
            let _held = &guard;
            Ok::<_, Infallible>(c)
        });
        (
            status,
            [(header::CONTENT_TYPE, content_type)],
            Body::from_stream(stream),
        )
            .into_response()
    }
}
