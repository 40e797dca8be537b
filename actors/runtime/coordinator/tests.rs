use super::*;
use crate::origin::Origin;
use bus::{Bus, BusOptions, ManualClock, Outcome, RequestId, TaskState};
use clawbus_core::ids::SessionKey;
use serde_json::json;
use uuid::Uuid;

const BOUND: Duration = Duration::from_secs(10);

fn edge(waiter: Uuid, wa: &str, callee: Uuid, ca: &str) -> WaitEdge {
    WaitEdge {
        waiter,
        waiter_agent: wa.into(),
        callee,
        callee_agent: ca.into(),
    }
}

fn ids<const N: usize>() -> [Uuid; N] {
    std::array::from_fn(|_| Uuid::now_v7())
}

#[test]
fn a_call_back_to_a_waiting_agent_closes_a_cycle() {
    let [t1, t2, t3] = ids();
    let mut g = WaitGraph::default();
    g.add(&edge(t1, "a", t2, "b")).unwrap();
    let cycle = g.add(&edge(t2, "b", t3, "a")).unwrap_err();
    assert_eq!(cycle.agents, ["a", "b", "a"]);
    assert!(cycle.to_string().contains("a → b → a"), "{cycle}");
    assert_eq!(g.edges(), 1, "a refused wait is not registered");
}

#[test]
fn a_three_agent_cycle_is_named_in_order() {
    let [t1, t2, t3, t4] = ids();
    let mut g = WaitGraph::default();
    g.add(&edge(t1, "a", t2, "b")).unwrap();
    g.add(&edge(t2, "b", t3, "c")).unwrap();
    let cycle = g.add(&edge(t3, "c", t4, "a")).unwrap_err();
    assert_eq!(cycle.agents, ["a", "b", "c", "a"]);
}

#[test]
fn a_self_call_that_waits_is_a_cycle() {
    let [t1, t2] = ids();
    let cycle = WaitGraph::default()
        .add(&edge(t1, "a", t2, "a"))
        .unwrap_err();
    assert_eq!(cycle.agents, ["a", "a"]);
}

/// The case the envelope's call chain cannot see: two trees joined by request ids. `c`'s task
/// t3 waits on `a`'s task t4 (chain [c]); `b`'s root task t2 joins t4 by its request id; t4 then
/// calls `b` joining t2. t4's chain is [c]: no `b` in it, yet t2 and t4 wait on each other.
#[test]
fn a_cycle_through_joined_tasks_of_two_trees_is_refused() {
    let [t2, t3, t4] = ids();
    let mut g = WaitGraph::default();
    g.add(&edge(t3, "c", t4, "a")).unwrap();
    g.add(&edge(t2, "b", t4, "a")).unwrap();
    let cycle = g.add(&edge(t4, "a", t2, "b")).unwrap_err();
    assert_eq!(cycle.agents, ["a", "b", "a"]);
}

#[test]
fn waits_that_ended_no_longer_count() {
    let [t1, t2, t3] = ids();
    let mut g = WaitGraph::default();
    g.add(&edge(t1, "a", t2, "b")).unwrap();
    g.remove(t1, t2);
    g.add(&edge(t2, "b", t3, "a")).unwrap();
    g.remove_task(t3);
    assert_eq!(g.edges(), 0);
    // Independent trees: a waits on b in one, b on a in the other — no cycle.
    let [u1, u2, u3, u4] = ids();
    g.add(&edge(u1, "a", u2, "b")).unwrap();
    g.add(&edge(u3, "b", u4, "a")).unwrap();
}

struct Rig {
    _dir: tempfile::TempDir,
    bus: Arc<dyn Bus>,
    clock: Arc<ManualClock>,
    coord: CoordinatorHandle,
}

impl Rig {
    async fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new(1_000_000);
        let opts = BusOptions {
            clock: clock.clone(),
            ..BusOptions::default()
        };
        let db = sled::open(dir.path()).unwrap();
        let bus = bus::open(opts, db).unwrap().bus;
        let coord = CoordinatorHandle::start(
            bus.clone(),
            clock.clone(),
            CoordinatorOptions {
                tick: Duration::from_millis(10),
            },
        )
        .await
        .unwrap();
        Self {
            _dir: dir,
            bus,
            clock,
            coord,
        }
    }

    /// Posts a task to `topic` (nobody consumes it) with `origin` and an optional deadline.
    async fn post(&self, topic: &str, origin: Origin, deadline: Option<u64>) -> bus::TaskRecord {
        let mut env = origin.apply(Envelope::task(
            Topic::parse(topic).unwrap(),
            RequestId::random(),
            json!({ "text": "work" }),
        ));
        env.deadline = deadline;
        let live = self.coord.status().await.live;
        let task = self.bus.submit(env).await.unwrap().task;
        // Followed once the coordinator has read it.
        self.until(|s| s.live > live).await;
        task
    }

    /// The outcome notice of `task`, once it is on the bus (a bounded wait).
    async fn notice_of(&self, task: &bus::TaskRecord) -> bus::TaskRecord {
        let notice = super::notice::notice_id(task.task_id).unwrap();
        tokio::time::timeout(BOUND, async {
            loop {
                if let Some(r) = self.bus.lookup(&notice).await.unwrap() {
                    return r;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .unwrap()
    }

    /// The tasks addressed to agent `agent` (the notices its sessions were told).
    async fn tasks_to(&self, agent: &str) -> Vec<bus::TaskRecord> {
        let all = self.bus.tasks().await.unwrap();
        all.into_iter()
            .filter(|r| r.envelope.topic == Topic::agent(agent))
            .collect()
    }

    /// Waits (bounded) until the coordinator's status satisfies `done`.
    async fn until(&self, done: impl Fn(&super::CoordinatorStatus) -> bool) {
        tokio::time::timeout(BOUND, async {
            while !done(&self.coord.status().await) {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .unwrap();
    }

    async fn state(&self, request_id: &RequestId) -> TaskState {
        self.bus.wait(request_id, BOUND).await.unwrap().state
    }
}

#[actix_rt::test]
async fn waits_register_over_the_bus_and_a_closing_one_is_refused() {
    let rig = Rig::new().await;
    let bus: &dyn Bus = rig.bus.as_ref();
    let [t2, t3, t4] = ids();
    register_wait(bus, &edge(t3, "c", t4, "a")).await.unwrap();
    register_wait(bus, &edge(t2, "b", t4, "a")).await.unwrap();
    assert_eq!(rig.coord.status().await.waits, 2);
    let refused = register_wait(bus, &edge(t4, "a", t2, "b")).await;
    match refused {
        Err(WaitError::Deadlock(cycle)) => assert_eq!(cycle.agents, ["a", "b", "a"]),
        other => panic!("expected a deadlock, got {other:?}"),
    }
    end_wait(bus, &edge(t2, "b", t4, "a")).await;
    register_wait(bus, &edge(t4, "a", t2, "b"))
        .await
        .expect("the wait that closed the cycle ended");
}

#[actix_rt::test]
async fn an_overdue_task_nobody_runs_ends_timed_out_and_its_session_is_told_once() {
    let rig = Rig::new().await;
    let parent_session = SessionKey::parse("agent:boss:main").unwrap();
    let origin = Origin {
        notify_session: Some(parent_session.clone()),
        session_key: Some(SessionKey::parse("agent:helper:subagent:x").unwrap()),
        ..Origin::api()
    };
    let now = rig.clock.now_ms();
    let task = rig.post("agent.helper", origin, Some(now + 60_000)).await;
    rig.clock.advance(Duration::from_secs(59));
    // The check the advance made due has run (the deadline check runs on the clock's timer).
    tokio::time::timeout(BOUND, rig.clock.settle())
        .await
        .unwrap();
    assert_eq!(rig.coord.status().await.timed_out, 0, "not yet due");
    let record = rig.bus.lookup(&task.request_id).await.unwrap().unwrap();
    assert_eq!(record.state, TaskState::Queued);
    rig.clock.advance(Duration::from_secs(2));
    assert_eq!(rig.state(&task.request_id).await, TaskState::TimedOut);
    let told = rig.notice_of(&task).await;
    assert_eq!(told.envelope.topic, Topic::agent("boss"));
    let text = told.envelope.payload["text"].as_str().unwrap();
    assert!(text.contains("timed_out"), "{text}");
    rig.until(|s| s.timed_out == 1).await;
    assert_eq!(rig.tasks_to("boss").await.len(), 1, "told exactly once");
}

#[actix_rt::test]
async fn an_overdue_task_whose_run_already_announced_its_outcome_keeps_that_outcome() {
    let rig = Rig::new().await;
    let parent_session = SessionKey::parse("agent:boss:main").unwrap();
    let origin = Origin {
        notify_session: Some(parent_session.clone()),
        session_key: Some(SessionKey::parse("agent:helper:subagent:z").unwrap()),
        ..Origin::api()
    };
    let now = rig.clock.now_ms();
    let task = rig.post("agent.helper", origin, Some(now + 60_000)).await;
    // The run ended in time and sent its notice; the deadline passes before it records.
    let success = bus::Outcome::Succeeded {
        result: json!({ "text": "done" }),
    };
    let notice = outcome_notice("helper", task.task_id, &parent_session, &success).unwrap();
    crate::ingress::Ingress::new(rig.bus.clone())
        .submit(notice)
        .await
        .unwrap();
    rig.clock.advance(Duration::from_secs(61));
    rig.until(|s| s.spared == 1).await;
    let record = rig.bus.lookup(&task.request_id).await.unwrap().unwrap();
    assert_eq!(
        record.state,
        TaskState::Queued,
        "left for its run to record"
    );
    assert_eq!(rig.coord.status().await.timed_out, 0);
    let notices = rig.tasks_to("boss").await;
    assert_eq!(notices.len(), 1, "told exactly once");
    let text = notices[0].envelope.payload["text"].as_str().unwrap();
    assert!(text.contains("succeeded"), "{text}");
}

#[actix_rt::test]
async fn cancelling_a_task_cancels_its_unfinished_descendants() {
    let rig = Rig::new().await;
    let root = rig.post("agent.a", Origin::api(), None).await;
    let child_of = |p: Uuid| Origin {
        parent_task: Some(p),
        ..Origin::api()
    };
    let child = rig.post("agent.b", child_of(root.task_id), None).await;
    let grandchild = rig.post("agent.c", child_of(child.task_id), None).await;
    let other = rig.post("agent.d", Origin::api(), None).await;
    rig.bus
        .cancel(&root.request_id, "by request")
        .await
        .unwrap();
    assert_eq!(rig.state(&child.request_id).await, TaskState::Cancelled);
    assert_eq!(
        rig.state(&grandchild.request_id).await,
        TaskState::Cancelled
    );
    let still = rig.bus.lookup(&other.request_id).await.unwrap().unwrap();
    assert_eq!(still.state, TaskState::Queued, "an unrelated task runs on");
    assert_eq!(rig.coord.status().await.cascaded, 2);
}

#[actix_rt::test]
async fn a_cancelled_subagent_is_announced_to_its_parent_session_once() {
    let rig = Rig::new().await;
    let origin = Origin {
        notify_session: Some(SessionKey::parse("agent:boss:main").unwrap()),
        session_key: Some(SessionKey::parse("agent:helper:subagent:y").unwrap()),
        ..Origin::api()
    };
    let task = rig.post("agent.helper", origin, None).await;
    rig.bus
        .cancel(&task.request_id, "by request")
        .await
        .unwrap();
    rig.bus.cancel(&task.request_id, "again").await.unwrap();
    let told = rig.notice_of(&task).await;
    let text = told.envelope.payload["text"].as_str().unwrap();
    assert!(
        text.contains("agent \"helper\"") && text.contains("(cancelled): cancelled (by request)"),
        "{text}"
    );
    assert_eq!(rig.tasks_to("boss").await.len(), 1, "told exactly once");
}

#[actix_rt::test]
async fn deadlines_of_tasks_that_ended_in_time_do_not_pile_up() {
    let rig = Rig::new().await;
    let far = rig.clock.now_ms() + 3_600_000;
    for _ in 0..300 {
        let task = rig.post("agent.a", Origin::api(), Some(far)).await;
        let done = Outcome::Succeeded {
            result: json!("ok"),
        };
        rig.bus.end(&task.request_id, done).await.unwrap();
        rig.until(|s| s.live == 0).await;
    }
    let status = rig.coord.status().await;
    assert!(
        status.deadlines <= 2 * status.live + super::actor::PRUNE_SLACK + 1,
        "the heap holds the deadlines of the work in flight, not of every task that ended: {} \
         deadlines for {} live tasks",
        status.deadlines,
        status.live
    );
}
