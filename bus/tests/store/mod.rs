//! The task store conformance suite, generic over the store. Every `TaskStore` runs all of it.

use bus::{
    BusError, ConflictReason, Envelope, ManualClock, Outcome, RequestId, TaskState, TaskStore,
    Topic,
};
use serde_json::json;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// Start of the manual clock (2026-01-01).
pub(crate) const T0: u64 = 1_767_225_600_000;
/// The dedup window every store under test is opened with.
pub(crate) const WINDOW: Duration = Duration::from_secs(60);

/// How a store under test is opened.
pub(crate) trait Opener: 'static {
    /// Opens (or reopens) the store over the state in `dir`.
    async fn open(dir: &Path, clock: Arc<ManualClock>) -> Arc<dyn TaskStore>;
    /// False (after saying why) when the store cannot run here: the test is skipped.
    fn available(_test: &str) -> bool {
        true
    }
}

fn rid(s: &str) -> RequestId {
    RequestId::parse(s).unwrap()
}

fn task(topic: &str, request_id: &str, text: &str) -> Envelope {
    Envelope::task(
        Topic::parse(topic).unwrap(),
        rid(request_id),
        json!({ "text": text }),
    )
}

async fn fresh<O: Opener>() -> (tempfile::TempDir, Arc<ManualClock>, Arc<dyn TaskStore>) {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let store = O::open(dir.path(), clock.clone()).await;
    (dir, clock, store)
}

pub(crate) async fn first_admit_is_queued_and_durable<O: Opener>() {
    let (dir, clock, store) = fresh::<O>().await;
    let env = task("agent.a", "r-1", "x");
    let a = store.admit(env.clone()).await.unwrap();
    assert!(!a.duplicate);
    assert_eq!((a.task.state, a.task.attempts), (TaskState::Queued, 0));
    assert_eq!(a.task.task_id, env.id);
    drop(store);
    let store = O::open(dir.path(), clock).await;
    let again = store.lookup(&rid("r-1")).await.unwrap().unwrap();
    assert_eq!(again.task_id, env.id, "an admitted task survives a reopen");
}

pub(crate) async fn same_envelope_again_is_a_duplicate<O: Opener>() {
    let (_dir, _clock, store) = fresh::<O>().await;
    let first = store.admit(task("agent.a", "r-dup", "x")).await.unwrap();
    // Another message id and other headers, same work: a duplicate.
    let again = task("agent.a", "r-dup", "x").header("trace", "t-2");
    let second = store.admit(again.clone()).await.unwrap();
    assert!(second.duplicate);
    assert_eq!(second.task.task_id, first.task.task_id);
    let attached = store.attach(&again).await.unwrap().unwrap();
    assert!(attached.duplicate);
    assert_eq!(attached.task.task_id, first.task.task_id);
    assert!(
        store
            .attach(&task("agent.a", "r-unknown", "x"))
            .await
            .unwrap()
            .is_none()
    );
}

pub(crate) async fn reused_request_id_for_other_work_is_a_conflict<O: Opener>() {
    let (_dir, _clock, store) = fresh::<O>().await;
    let first = store.admit(task("agent.a", "r-c", "x")).await.unwrap();
    let other_topic = store.admit(task("agent.b", "r-c", "x")).await.unwrap_err();
    match other_topic {
        BusError::Conflict {
            request_id,
            task_id,
            reason: ConflictReason::OtherTarget { original },
        } => {
            assert_eq!(request_id, rid("r-c"));
            assert_eq!(task_id, first.task.task_id);
            assert_eq!(original.as_str(), "agent.a");
        }
        e => panic!("expected a conflict over the target, got {e:?}"),
    }
    let other_payload = store.admit(task("agent.a", "r-c", "y")).await.unwrap_err();
    assert!(
        matches!(
            other_payload,
            BusError::Conflict {
                reason: ConflictReason::OtherPayload,
                ..
            }
        ),
        "{other_payload:?}"
    );
    assert!(matches!(
        store.attach(&task("agent.a", "r-c", "y")).await,
        Err(BusError::Conflict { .. })
    ));
}

pub(crate) async fn start_complete_first_outcome_wins<O: Opener>() {
    let (_dir, _clock, store) = fresh::<O>().await;
    let r = rid("r-run");
    store.admit(task("agent.a", "r-run", "x")).await.unwrap();
    let running = store.start(&r, 1).await.unwrap().unwrap();
    assert_eq!((running.state, running.attempts), (TaskState::Running, 1));
    let marked = store.progress(&r, json!({ "step": 1 })).await.unwrap();
    assert_eq!(marked.unwrap().progress, Some(json!({ "step": 1 })));
    let won = store
        .complete(
            &r,
            Outcome::Succeeded {
                result: json!("ok"),
            },
        )
        .await
        .unwrap();
    assert!(won.recorded);
    assert_eq!(won.task.state, TaskState::Succeeded);
    let lost = store
        .complete(
            &r,
            Outcome::Cancelled {
                reason: "late".into(),
            },
        )
        .await
        .unwrap();
    assert!(!lost.recorded, "the first outcome wins");
    assert_eq!(lost.task.result(), Some(&json!("ok")));
    assert!(store.start(&r, 2).await.unwrap().is_none());
    assert!(store.progress(&r, json!(2)).await.unwrap().is_none());
    assert!(store.requeue(&r).await.unwrap().is_none());
}

pub(crate) async fn failed_is_retried_by_a_repost_inside_the_window<O: Opener>() {
    let (_dir, clock, store) = fresh::<O>().await;
    let r = rid("r-f");
    let first = store.admit(task("agent.a", "r-f", "x")).await.unwrap();
    store.start(&r, 1).await.unwrap();
    store
        .complete(&r, Outcome::Failed { error: "no".into() })
        .await
        .unwrap();
    clock.advance(WINDOW);
    // Other work under the id is still a conflict, not a retry.
    assert!(matches!(
        store.admit(task("agent.a", "r-f", "y")).await,
        Err(BusError::Conflict { .. })
    ));
    let again = store.admit(task("agent.a", "r-f", "x")).await.unwrap();
    assert!(!again.duplicate, "the same work again is an explicit retry");
    assert_eq!(again.task.task_id, first.task.task_id);
    assert_eq!(
        (again.task.state, again.task.attempts),
        (TaskState::Queued, 1)
    );
    assert!(again.task.outcome.is_none());
    // Dead-lettered work is retried the same way; a timed-out task is answered from the store.
    store
        .complete(&r, Outcome::DeadLettered { error: "x".into() })
        .await
        .unwrap();
    assert!(
        !store
            .admit(task("agent.a", "r-f", "x"))
            .await
            .unwrap()
            .duplicate
    );
    store
        .complete(
            &r,
            Outcome::TimedOut {
                error: "late".into(),
            },
        )
        .await
        .unwrap();
    assert!(
        store
            .admit(task("agent.a", "r-f", "x"))
            .await
            .unwrap()
            .duplicate
    );
}

pub(crate) async fn expired_request_id_is_a_new_task<O: Opener>() {
    let (_dir, clock, store) = fresh::<O>().await;
    let r = rid("r-exp");
    let old = store.admit(task("agent.a", "r-exp", "x")).await.unwrap();
    store
        .complete(&r, Outcome::Failed { error: "no".into() })
        .await
        .unwrap();
    clock.advance(WINDOW + Duration::from_secs(1));
    assert!(store.lookup(&r).await.unwrap().is_none());
    assert!(
        store
            .attach(&task("agent.a", "r-exp", "x"))
            .await
            .unwrap()
            .is_none()
    );
    // Even other work may take an expired request id.
    let new = store.admit(task("agent.b", "r-exp", "y")).await.unwrap();
    assert!(!new.duplicate);
    assert_ne!(new.task.task_id, old.task.task_id);
    assert_eq!(
        store
            .by_task_id(new.task.task_id)
            .await
            .unwrap()
            .map(|t| t.task_id),
        Some(new.task.task_id)
    );
    assert!(store.by_task_id(old.task.task_id).await.unwrap().is_none());
    // A running task never expires; an ended one does.
    store.admit(task("agent.a", "r-live", "x")).await.unwrap();
    store.start(&rid("r-live"), 1).await.unwrap();
    store
        .complete(
            &rid("r-exp"),
            Outcome::Succeeded {
                result: json!(null),
            },
        )
        .await
        .unwrap();
    clock.advance(WINDOW + Duration::from_secs(1));
    assert_eq!(store.expire().await.unwrap(), 1);
    assert!(store.lookup(&rid("r-live")).await.unwrap().is_some());
}

pub(crate) async fn requeue_puts_a_running_task_back<O: Opener>() {
    let (_dir, _clock, store) = fresh::<O>().await;
    let r = rid("r-rq");
    store.admit(task("agent.a", "r-rq", "x")).await.unwrap();
    store.start(&r, 1).await.unwrap();
    let back = store.requeue(&r).await.unwrap().unwrap();
    assert_eq!((back.state, back.attempts), (TaskState::Queued, 1));
    let again = store.start(&r, 2).await.unwrap().unwrap();
    assert_eq!(again.attempts, 2);
}

pub(crate) async fn unfinished_come_in_admission_order<O: Opener>() {
    let (_dir, _clock, store) = fresh::<O>().await;
    let ids: Vec<String> = (0..10).rev().map(|i| format!("r-o{i}")).collect();
    for r in &ids {
        store.admit(task("agent.a", r, r)).await.unwrap();
    }
    store
        .complete(&rid("r-o5"), Outcome::Failed { error: "x".into() })
        .await
        .unwrap();
    let seen: Vec<String> = store
        .unfinished()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.request_id.to_string())
        .collect();
    let expected: Vec<String> = ids.into_iter().filter(|r| r != "r-o5").collect();
    assert_eq!(seen, expected);
}

pub(crate) async fn odd_request_ids_are_kept_apart<O: Opener>() {
    let (dir, clock, store) = fresh::<O>().await;
    let odd = [
        "x/y:z*>+?#%",
        "x_2Fy",
        "x.y",
        "x_2Ey",
        "a..b",
        "_",
        "~!\"'`",
    ];
    for (i, r) in odd.iter().enumerate() {
        let a = store
            .admit(task("agent.a", r, &i.to_string()))
            .await
            .unwrap();
        assert!(!a.duplicate, "{r:?} must not collide with another id");
    }
    drop(store);
    let store = O::open(dir.path(), clock).await;
    for (i, r) in odd.iter().enumerate() {
        let t = store.lookup(&rid(r)).await.unwrap().unwrap();
        assert_eq!(t.request_id.as_str(), *r);
        assert_eq!(t.envelope.payload["text"], i.to_string());
        assert_eq!(
            store
                .by_task_id(t.task_id)
                .await
                .unwrap()
                .map(|x| x.request_id),
            Some(rid(r))
        );
    }
}

pub(crate) async fn reopen_keeps_every_record<O: Opener>() {
    let (dir, clock, store) = fresh::<O>().await;
    store.admit(task("agent.a", "r-q", "x")).await.unwrap();
    store.admit(task("agent.a", "r-s", "x")).await.unwrap();
    store.start(&rid("r-s"), 1).await.unwrap();
    store.admit(task("agent.a", "r-d", "x")).await.unwrap();
    store
        .complete(
            &rid("r-d"),
            Outcome::Succeeded {
                result: json!("done"),
            },
        )
        .await
        .unwrap();
    drop(store);
    let store = O::open(dir.path(), clock).await;
    let state = |r: &'static str| {
        let store = store.clone();
        async move { store.lookup(&rid(r)).await.unwrap().unwrap().state }
    };
    assert_eq!(state("r-q").await, TaskState::Queued);
    assert_eq!(state("r-s").await, TaskState::Running);
    assert_eq!(state("r-d").await, TaskState::Succeeded);
    assert_eq!(store.unfinished().await.unwrap().len(), 2);
}

/// Instantiates every store conformance test for an opener.
#[macro_export]
macro_rules! store_suite {
    ($opener:ty) => {
        $crate::store_suite!(@tests $opener;
            first_admit_is_queued_and_durable,
            same_envelope_again_is_a_duplicate,
            reused_request_id_for_other_work_is_a_conflict,
            start_complete_first_outcome_wins,
            failed_is_retried_by_a_repost_inside_the_window,
            expired_request_id_is_a_new_task,
            requeue_puts_a_running_task_back,
            unfinished_come_in_admission_order,
            list_holds_every_task_in_the_window_in_admission_order,
            odd_request_ids_are_kept_apart,
            reopen_keeps_every_record,
        );
    };
    (@tests $opener:ty; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $name() {
                if !<$opener as store::Opener>::available(stringify!($name)) {
                    return;
                }
                store::$name::<$opener>().await
            }
        )*
    };
}

pub(crate) async fn list_holds_every_task_in_the_window_in_admission_order<O: Opener>() {
    let (_dir, clock, store) = fresh::<O>().await;
    for r in ["r-l2", "r-l1", "r-l3"] {
        store.admit(task("agent.a", r, r)).await.unwrap();
    }
    let done = RequestId::parse("r-l1").unwrap();
    store
        .complete(&done, Outcome::Failed { error: "x".into() })
        .await
        .unwrap();
    let listed: Vec<String> = store
        .list()
        .await
        .unwrap()
        .iter()
        .map(|r| r.request_id.to_string())
        .collect();
    assert_eq!(
        listed,
        ["r-l2", "r-l1", "r-l3"],
        "ended tasks too, in admission order"
    );
    clock.advance(store.window() + Duration::from_secs(1));
    let left: Vec<String> = store
        .list()
        .await
        .unwrap()
        .iter()
        .map(|r| r.request_id.to_string())
        .collect();
    assert_eq!(
        left,
        ["r-l2", "r-l3"],
        "an ended task past the window is not listed"
    );
}
