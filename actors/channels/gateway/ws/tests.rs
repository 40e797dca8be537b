use super::frames::{ErrorCode, ErrorShape, EventName, Frame, parse_request};
use super::methods::Method;
use super::outbox::{self, Closed, close_reason};
use crate::gateway::api::Failure;
use axum::http::StatusCode;
use serde_json::{Value, json};
use std::time::Duration;

#[test]
fn a_request_frame_is_read_with_empty_params_when_absent() {
    let req = parse_request(r#"{"type":"req","id":"1","method":"health"}"#).unwrap();
    assert_eq!(req.id, "1");
    assert_eq!(req.method, "health");
    assert_eq!(req.params, json!({}));
    assert_eq!(req.known_method(), Some(Method::Health));
    let req =
        parse_request(r#"{"type":"req","id":"2","method":"agent","params":{"message":"hi"}}"#)
            .unwrap();
    assert_eq!(req.params["message"], "hi");
}

#[test]
fn malformed_frames_are_refused_naming_what_is_wrong_and_keeping_the_id_when_readable() {
    let cases: [(&str, Option<&str>, &str); 7] = [
        ("{not json", None, "frame: not JSON"),
        ("[1,2]", None, "frame: not a JSON object"),
        (
            r#"{"type":"req","method":"health"}"#,
            None,
            "field \"id\": missing",
        ),
        (
            r#"{"type":"req","id":7,"method":"health"}"#,
            None,
            "field \"id\": 7 is not a string",
        ),
        (
            r#"{"type":"res","id":"a","method":"x"}"#,
            Some("a"),
            "field \"type\": \"res\"",
        ),
        (
            r#"{"type":"req","id":"b"}"#,
            Some("b"),
            "field \"method\": missing",
        ),
        (
            r#"{"type":"req","id":"c","method":"x","params":[1]}"#,
            Some("c"),
            "field \"params\": [1] is not an object",
        ),
    ];
    for (text, id, message) in cases {
        let bad = parse_request(text).unwrap_err();
        assert_eq!(bad.id.as_deref(), id, "{text}");
        assert_eq!(bad.error.code, ErrorCode::InvalidRequest, "{text}");
        assert!(
            bad.error.message.starts_with(message),
            "{text}: {}",
            bad.error.message
        );
        let answer: Value = serde_json::from_str(&bad.answer().to_text()).unwrap();
        assert_eq!(answer["type"], "res");
        assert_eq!(answer["ok"], false);
        assert_eq!(answer["id"], id.map_or(Value::Null, |i| json!(i)));
    }
}

#[test]
fn every_method_name_reads_back_as_its_method_and_unknown_names_as_none() {
    for m in Method::ALL {
        assert_eq!(Method::parse(m.as_str()), Some(*m));
    }
    assert_eq!(Method::parse("agent.nope"), None);
    assert!(Method::ALL.len() >= 20);
}

#[test]
fn frames_are_written_in_the_protocols_shape() {
    let ok: Value = serde_json::from_str(&Frame::ok("1", json!({ "a": 1 })).to_text()).unwrap();
    assert_eq!(
        ok,
        json!({ "type": "res", "id": "1", "ok": true, "payload": { "a": 1 } })
    );
    let err = Frame::err(Some("2"), ErrorShape::new(ErrorCode::MethodNotFound, "no"));
    let err: Value = serde_json::from_str(&err.to_text()).unwrap();
    assert_eq!(
        err,
        json!({ "type": "res", "id": "2", "ok": false, "error": { "code": "METHOD_NOT_FOUND", "message": "no" } })
    );
    let event = Frame::Event {
        event: EventName::ExecApprovalRequested,
        payload: json!({}),
        seq: Some(3),
    };
    let event: Value = serde_json::from_str(&event.to_text()).unwrap();
    assert_eq!(
        event,
        json!({ "type": "event", "event": "exec.approval.requested", "payload": {}, "seq": 3 })
    );
    for e in EventName::ALL {
        assert_eq!(serde_json::to_value(e).unwrap(), json!(e.as_str()));
    }
}

#[test]
fn an_http_failure_keeps_its_code_in_the_details() {
    let f = Failure::new(StatusCode::NOT_FOUND, "unknown_task", "no task x");
    let e = ErrorShape::from(f);
    assert_eq!(e.code, ErrorCode::NotFound);
    assert_eq!(e.details, Some(json!({ "code": "unknown_task" })));
    let f = Failure::new(StatusCode::CONFLICT, "already_settled", "answered");
    assert_eq!(ErrorShape::from(f).code, ErrorCode::Conflict);
    let f = Failure::new(StatusCode::SERVICE_UNAVAILABLE, "bus", "down");
    assert_eq!(ErrorShape::from(f).code, ErrorCode::Unavailable);
}

#[test]
fn a_client_that_does_not_read_is_cut_off_past_the_byte_limit() {
    let (out, mut writer) = outbox::outbox(200);
    let mut sent = 0;
    let refused = loop {
        match out.event(EventName::Tick, json!({ "ts": 1 })) {
            Ok(()) => sent += 1,
            Err(Closed) => break true,
        }
        assert!(sent < 100, "the limit must stop the queue");
    };
    assert!(
        refused && sent >= 1,
        "some frames fit, then the limit refuses"
    );
    assert!(out.is_closing(), "the connection is being closed");
    assert!(
        out.event(EventName::Tick, json!({})).is_err(),
        "nothing more is queued"
    );
    let first: Value = serde_json::from_str(&writer.try_next_text().unwrap()).unwrap();
    assert_eq!(first["seq"], 1);
}

#[test]
fn close_reasons_are_cut_to_123_bytes_at_a_char_boundary() {
    let long = "é".repeat(100);
    let cut = close_reason(&long);
    assert!(cut.len() <= 123);
    assert_eq!(cut.len() % 2, 0, "never inside a character");
    assert_eq!(close_reason("short"), "short");
}

#[tokio::test(start_paused = true)]
async fn tick_is_sent_every_interval_with_the_clocks_time() {
    let clock = bus::ManualClock::new(42_000);
    let (out, mut writer) = outbox::outbox(1 << 20);
    let task = tokio::spawn(super::tick(clock.clone(), out.clone()));
    tokio::task::yield_now().await;
    assert!(
        writer.try_next_text().is_none(),
        "no tick before the interval"
    );
    tokio::time::sleep(Duration::from_millis(super::TICK_INTERVAL_MS)).await;
    tokio::task::yield_now().await;
    let tick: Value = serde_json::from_str(&writer.try_next_text().unwrap()).unwrap();
    assert_eq!(
        (tick["event"].as_str(), tick["payload"]["ts"].as_u64()),
        (Some("tick"), Some(42_000))
    );
    clock.advance(Duration::from_secs(30));
    tokio::time::sleep(Duration::from_millis(super::TICK_INTERVAL_MS)).await;
    tokio::task::yield_now().await;
    let tick: Value = serde_json::from_str(&writer.try_next_text().unwrap()).unwrap();
    assert_eq!(tick["payload"]["ts"], 72_000);
    assert_eq!(tick["seq"], 2);
    task.abort();
}
