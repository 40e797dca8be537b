//! The lifecycle events ([`bus::Topic::task_lifecycle`]) as the coordinator reads them: only the
//! fields it acts on. A succeeded or failed task's outcome (a result can be large) is skipped
//! unread; a cancelled or timed-out one, which the poster is told, is decoded whole.

use bus::{Envelope, Outcome};
use serde::Deserialize;
use uuid::Uuid;

/// What a lifecycle event tells the coordinator.
#[derive(Debug, PartialEq)]
pub(super) enum Seen {
    /// The task was admitted.
    Queued(Uuid),
    /// The task ended; with its outcome when it was ended from outside (cancelled or timed out),
    /// else without (its own run ended it).
    Ended(Uuid, Option<Outcome>),
    /// Any other event: nothing to do.
    Other,
}

/// A task event's head: its task and its kind, the rest ignored.
#[derive(Deserialize)]
struct Head<'a> {
    task_id: Uuid,
    #[serde(borrow)]
    event: Kind<'a>,
}

/// A task event's kind and, for the terminal event, its outcome's state.
#[derive(Deserialize)]
struct Kind<'a> {
    #[serde(rename = "type", borrow)]
    kind: &'a str,
    #[serde(default, borrow)]
    outcome: Option<State<'a>>,
}

/// An outcome's state, the rest ignored.
#[derive(Deserialize)]
struct State<'a> {
    #[serde(borrow)]
    state: &'a str,
}

/// Reads a lifecycle event from its envelope (as [`bus::TaskEvent::to_envelope`] puts it).
pub(super) fn read(env: &Envelope) -> Result<Seen, serde_json::Error> {
    let head = Head::deserialize(&env.payload)?;
    Ok(match (head.event.kind, head.event.outcome) {
        ("queued", _) => Seen::Queued(head.task_id),
        (
            "terminal",
            Some(State {
                state: "cancelled" | "timed_out",
            }),
        ) => {
            let outcome = &env.payload["event"]["outcome"];
            Seen::Ended(head.task_id, Some(Outcome::deserialize(outcome)?))
        }
        ("terminal", Some(_)) => Seen::Ended(head.task_id, None),
        ("terminal", None) => return Err(serde::de::Error::missing_field("outcome")),
        _ => Seen::Other,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bus::{RequestId, TaskEvent, TaskEventKind, Topic};
    use serde_json::json;

    fn envelope(event: TaskEventKind) -> Envelope {
        TaskEvent {
            task_id: Uuid::from_u128(7),
            request_id: RequestId::parse("r1").unwrap(),
            topic: Topic::agent("main"),
            seq: 1,
            ts_ms: 5,
            event,
        }
        .to_envelope(Topic::task_lifecycle())
        .unwrap()
    }

    #[test]
    fn an_event_reads_as_its_task_and_only_an_end_from_outside_keeps_its_outcome() {
        let id = Uuid::from_u128(7);
        assert_eq!(
            read(&envelope(TaskEventKind::Queued)).unwrap(),
            Seen::Queued(id)
        );
        let ended = |outcome| read(&envelope(TaskEventKind::Terminal { outcome })).unwrap();
        let big = json!({ "text": "x".repeat(10_000), "usage": { "m": { "input": 1 } } });
        assert_eq!(
            ended(Outcome::Succeeded { result: big }),
            Seen::Ended(id, None)
        );
        assert_eq!(
            ended(Outcome::Failed {
                error: "boom".into()
            }),
            Seen::Ended(id, None)
        );
        for outcome in [
            Outcome::Cancelled {
                reason: "asked".into(),
            },
            Outcome::TimedOut {
                error: "late".into(),
            },
        ] {
            assert_eq!(ended(outcome.clone()), Seen::Ended(id, Some(outcome)));
        }
        assert_eq!(
            read(&envelope(TaskEventKind::Started { attempt: 1 })).unwrap(),
            Seen::Other
        );
    }

    #[test]
    fn an_event_without_a_task_or_an_end_without_an_outcome_is_not_understood() {
        let mut env = envelope(TaskEventKind::Queued);
        env.payload = json!({ "event": { "type": "queued" } });
        assert!(read(&env).is_err());
        env.payload = json!({ "task_id": Uuid::from_u128(7), "event": { "type": "terminal" } });
        assert!(read(&env).is_err());
        env.payload = json!({
            "task_id": Uuid::from_u128(7),
            "event": { "type": "terminal", "outcome": { "state": "cancelled" } },
        });
        assert!(read(&env).is_err());
    }
}
