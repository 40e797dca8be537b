use super::*;
use futures::poll;
use std::collections::BTreeMap;
use std::sync::atomic::AtomicUsize;
use std::task::Poll;
use tokio::time::timeout;

/// A safety net for awaits; never a synchronisation device.
const NET: Duration = Duration::from_secs(20);

fn start(caps: &[(&str, usize)]) -> (Lanes, Metrics) {
    start_on(caps, Arc::new(bus::SystemClock))
}

/// Lanes keeping time on `clock`.
fn start_on(caps: &[(&str, usize)], clock: Arc<dyn bus::Clock>) -> (Lanes, Metrics) {
    let def = LanesDef {
        caps: caps.iter().map(|(n, c)| (n.to_string(), *c)).collect(),
        warn_after: Duration::from_secs(2),
    };
    let metrics = Metrics::new();
    (Lanes::start(&def, metrics.clone(), clock), metrics)
}

async fn status(lanes: &Lanes, lane: &str) -> LaneStatus {
    let all = lanes.status().await.unwrap();
    all.into_iter().find(|s| s.name == lane).unwrap()
}

fn id(n: u128) -> Uuid {
    Uuid::from_u128(n)
}

#[test]
fn acquire_future_is_send() {
    fn is_send<T: Send>(_: &T) {}
    let system = actix::System::new();
    system.block_on(async {
        let (lanes, _) = start(&[("main", 1)]);
        let fut = lanes.acquire("main", Ticket::new(id(1)));
        is_send(&fut);
    });
}

#[actix_rt::test]
async fn fifty_runs_on_a_lane_of_four_reach_exactly_four_at_once_and_all_complete() {
    let (lanes, metrics) = start(&[("main", 4)]);
    let active = Arc::new(AtomicUsize::new(0));
    let max = Arc::new(AtomicUsize::new(0));
    // Runs hold their slot until four are in at once, so the cap is reached, not just respected.
    let (open, gate) = tokio::sync::watch::channel(false);
    let mut runs = Vec::new();
    for n in 0..50 {
        let (lanes, active, max, open, mut gate) = (
            lanes.clone(),
            active.clone(),
            max.clone(),
            open.clone(),
            gate.clone(),
        );
        runs.push(tokio::spawn(async move {
            let permit = lanes.acquire("main", Ticket::new(id(n))).await.unwrap();
            let now = active.fetch_add(1, Ordering::SeqCst) + 1;
            max.fetch_max(now, Ordering::SeqCst);
            if now == 4 {
                open.send_replace(true);
            }
            gate.wait_for(|&o| o).await.unwrap();
            active.fetch_sub(1, Ordering::SeqCst);
            drop(permit);
        }));
    }
    for run in runs {
        timeout(NET, run).await.unwrap().unwrap();
    }
    assert_eq!(
        max.load(Ordering::SeqCst),
        4,
        "at most and at least 4 runs held main at once"
    );
    let main = status(&lanes, "main").await;
    assert!(
        main.holding.is_empty() && main.waiting.is_empty(),
        "{main:?}"
    );
    let text = metrics.render_prometheus();
    assert!(
        text.contains("clawbus_lane_wait_seconds_count{lane=\"main\"} 50\n"),
        "{text}"
    );
    assert!(
        text.contains("clawbus_lane_active{lane=\"main\"} 0\n"),
        "{text}"
    );
}

#[actix_rt::test]
async fn waiters_are_served_in_arrival_order() {
    let (lanes, _) = start(&[("main", 1)]);
    let first = lanes.acquire("main", Ticket::new(id(0))).await.unwrap();
    let mut waiting = Vec::new();
    for n in 1..=5 {
        let mut fut = Box::pin(lanes.acquire("main", Ticket::new(id(n))));
        assert!(poll!(&mut fut).is_pending());
        waiting.push(fut);
    }
    assert_eq!(
        status(&lanes, "main").await.waiting,
        (1..=5).map(id).collect::<Vec<_>>()
    );
    drop(first);
    for (n, fut) in (1..=5).zip(waiting) {
        let permit = timeout(NET, fut).await.unwrap().unwrap();
        assert_eq!(permit.run_id(), id(n), "FIFO");
        assert!(!permit.is_shared());
    }
}

#[actix_rt::test]
async fn a_dropped_waiter_leaves_the_queue_at_once_and_the_next_live_waiter_gets_the_slot() {
    let (lanes, metrics) = start(&[("main", 1)]);
    let holder = lanes.acquire("main", Ticket::new(id(1))).await.unwrap();
    let mut second = Box::pin(lanes.acquire("main", Ticket::new(id(2))));
    let mut third = Box::pin(lanes.acquire("main", Ticket::new(id(3))));
    assert!(poll!(&mut second).is_pending());
    assert!(poll!(&mut third).is_pending());
    assert_eq!(status(&lanes, "main").await.waiting, [id(2), id(3)]);

    drop(second); // the caller gave up
    let main = status(&lanes, "main").await;
    assert_eq!(
        main.waiting,
        [id(3)],
        "the dropped waiter is gone from the queue at once"
    );
    let text = metrics.render_prometheus();
    assert!(
        text.contains("clawbus_lane_queued{lane=\"main\"} 1\n"),
        "{text}"
    );
    assert!(
        text.contains("clawbus_lane_abandoned_total{lane=\"main\",reason=\"dropped\"} 1\n"),
        "{text}"
    );

    drop(holder);
    let permit = timeout(NET, third).await.unwrap().unwrap();
    assert_eq!(
        permit.run_id(),
        id(3),
        "the release goes to the next live waiter"
    );
    let main = status(&lanes, "main").await;
    assert_eq!(main.holding, [id(3)]);
    assert!(main.waiting.is_empty());
}

#[actix_rt::test]
async fn a_cancel_signal_ends_the_wait_and_the_others_proceed() {
    let (lanes, _) = start(&[("main", 1)]);
    let holder = lanes.acquire("main", Ticket::new(id(1))).await.unwrap();
    let (cancel, cancelled) = oneshot::channel::<()>();
    let ticket = Ticket::new(id(2)).cancel_on(async move {
        let _ = cancelled.await;
    });
    let mut second = Box::pin(lanes.acquire("main", ticket));
    let mut third = Box::pin(lanes.acquire("main", Ticket::new(id(3))));
    assert!(poll!(&mut second).is_pending());
    assert!(poll!(&mut third).is_pending());
    cancel.send(()).unwrap();
    let err = timeout(NET, second).await.unwrap().unwrap_err();
    assert_eq!(
        err,
        LaneError::Cancelled {
            lane: "main".into()
        }
    );
    assert_eq!(status(&lanes, "main").await.waiting, [id(3)]);
    drop(holder);
    assert_eq!(timeout(NET, third).await.unwrap().unwrap().run_id(), id(3));
}

#[actix_rt::test]
async fn cancel_waiting_by_run_id_ends_that_runs_wait_only() {
    let (lanes, _) = start(&[("main", 1)]);
    let _holder = lanes.acquire("main", Ticket::new(id(1))).await.unwrap();
    let mut second = Box::pin(lanes.acquire("main", Ticket::new(id(2))));
    let mut third = Box::pin(lanes.acquire("main", Ticket::new(id(3))));
    assert!(poll!(&mut second).is_pending());
    assert!(poll!(&mut third).is_pending());
    assert_eq!(lanes.cancel_waiting(id(2)).await.unwrap(), 1);
    assert_eq!(
        lanes.cancel_waiting(id(1)).await.unwrap(),
        0,
        "a holder is not waiting"
    );
    let err = timeout(NET, second).await.unwrap().unwrap_err();
    assert!(matches!(err, LaneError::Cancelled { .. }), "{err}");
    assert_eq!(status(&lanes, "main").await.waiting, [id(3)]);
}

#[actix_rt::test]
async fn a_grant_to_a_waiter_that_just_left_is_given_back() {
    let (lanes, _) = start(&[("main", 1)]);
    let holder = lanes.acquire("main", Ticket::new(id(1))).await.unwrap();
    let mut second = Box::pin(lanes.acquire("main", Ticket::new(id(2))));
    assert!(poll!(&mut second).is_pending());
    drop(holder);
    // The actor grants the slot to the second waiter, which is dropped before it looks.
    assert_eq!(status(&lanes, "main").await.holding, [id(2)]);
    drop(second);
    let main = status(&lanes, "main").await;
    assert!(
        main.holding.is_empty() && main.waiting.is_empty(),
        "{main:?}"
    );
    let _third = timeout(NET, lanes.acquire("main", Ticket::new(id(3))))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        status(&lanes, "main").await.holding,
        [id(3)],
        "the slot was free again"
    );
}

#[actix_rt::test]
async fn a_deadline_bounds_the_wait_and_the_slot_accounting_stays_right() {
    tokio::time::pause();
    let (lanes, metrics) = start(&[("main", 1)]);
    let holder = lanes.acquire("main", Ticket::new(id(1))).await.unwrap();
    let deadline = bus::Deadline::after(&bus::SystemClock, Duration::from_secs(5));
    let waited = lanes
        .acquire("main", Ticket::new(id(2)).deadline(deadline))
        .await;
    let text = waited.as_ref().err().map(ToString::to_string);
    match waited {
        Err(LaneError::DeadlineExceeded {
            lane,
            waited,
            queued,
        }) => {
            assert_eq!(lane, "main");
            assert!(waited >= Duration::from_secs(5), "{waited:?}");
            assert!(queued, "the run was queued behind the busy slot");
            assert!(text.is_some_and(|t| t.contains("no free slot")));
        }
        other => panic!("expected DeadlineExceeded, got {other:?}"),
    }
    let main = status(&lanes, "main").await;
    assert_eq!(main.holding, [id(1)], "the holder keeps its slot");
    assert!(main.waiting.is_empty(), "the expired waiter left the queue");
    let past = lanes
        .acquire(
            "main",
            Ticket::new(id(3)).deadline(bus::Deadline::after(&bus::SystemClock, Duration::ZERO)),
        )
        .await;
    assert!(matches!(past, Err(LaneError::DeadlineExceeded { .. })));
    drop(holder);
    // A deadline already gone when the run asks is no lack of slots, even with a slot free.
    let free = bus::Deadline::at(bus::Clock::now(&bus::SystemClock) - Duration::from_millis(1));
    match lanes
        .acquire("main", Ticket::new(id(5)).deadline(free))
        .await
    {
        Err(e @ LaneError::DeadlineExceeded { queued: false, .. }) => {
            let text = e.to_string();
            assert!(!text.contains("no free slot"), "{text}");
            assert!(
                text.contains("deadline passed before its turn started"),
                "{text}"
            );
        }
        other => panic!("expected DeadlineExceeded before the lane, got {other:?}"),
    }
    let next = lanes.acquire("main", Ticket::new(id(4))).await.unwrap();
    assert_eq!(status(&lanes, "main").await.holding, [id(4)]);
    drop(next);
    status(&lanes, "main").await; // the release is processed before this answer
    let text = metrics.render_prometheus();
    assert!(
        text.contains("clawbus_lane_abandoned_total{lane=\"main\",reason=\"deadline\"} 1\n"),
        "{text}"
    );
    assert!(
        text.contains("clawbus_lane_active{lane=\"main\"} 0\n"),
        "{text}"
    );
}

#[actix_rt::test]
async fn a_queued_wait_ends_when_its_deadline_passes_on_the_manual_clock_and_not_before() {
    let clock = bus::ManualClock::new(1_000_000);
    let (lanes, metrics) = start_on(&[("main", 1)], clock.clone());
    let holder = lanes.acquire("main", Ticket::new(id(1))).await.unwrap();
    let deadline = bus::Deadline::after(clock.as_ref(), Duration::from_secs(5));
    let mut waiting = Box::pin(lanes.acquire("main", Ticket::new(id(2)).deadline(deadline)));
    assert!(poll!(&mut waiting).is_pending());
    assert_eq!(status(&lanes, "main").await.waiting, [id(2)], "queued");
    clock.advance(Duration::from_millis(4_999));
    assert!(poll!(&mut waiting).is_pending(), "not before the deadline");
    assert_eq!(status(&lanes, "main").await.waiting, [id(2)]);
    clock.advance(Duration::from_millis(1));
    match timeout(NET, waiting).await.unwrap() {
        Err(LaneError::DeadlineExceeded { waited, queued, .. }) => {
            assert_eq!(waited, Duration::from_secs(5), "measured on the clock");
            assert!(queued);
        }
        other => panic!("expected DeadlineExceeded, got {other:?}"),
    }
    assert!(status(&lanes, "main").await.waiting.is_empty());
    assert_eq!(clock.live_timers(), 0, "the wait's timer is gone with it");
    // A wait that gets its slot is measured on the clock too.
    let mut next = Box::pin(lanes.acquire("main", Ticket::new(id(3))));
    assert!(poll!(&mut next).is_pending());
    assert_eq!(status(&lanes, "main").await.waiting, [id(3)]);
    clock.advance(Duration::from_secs(3));
    drop(holder);
    let permit = timeout(NET, next).await.unwrap().unwrap();
    assert_eq!(permit.waited(), Duration::from_secs(3));
    let text = metrics.render_prometheus();
    assert!(
        text.contains("clawbus_lane_abandoned_total{lane=\"main\",reason=\"deadline\"} 1\n"),
        "{text}"
    );
}

#[actix_rt::test]
async fn a_long_wait_is_measured_in_the_wait_histogram() {
    tokio::time::pause();
    let (lanes, metrics) = start(&[("main", 1)]);
    let holder = lanes.acquire("main", Ticket::new(id(1))).await.unwrap();
    let mut second = Box::pin(lanes.acquire("main", Ticket::new(id(2))));
    assert!(poll!(&mut second).is_pending());
    tokio::time::advance(Duration::from_secs(3)).await;
    drop(holder);
    let permit = timeout(NET, second).await.unwrap().unwrap();
    assert!(permit.waited() >= Duration::from_secs(3));
    let text = metrics.render_prometheus();
    assert!(
        text.contains("clawbus_lane_wait_seconds_bucket{lane=\"main\",le=\"2\"} 1\n"),
        "{text}"
    );
    assert!(
        text.contains("clawbus_lane_wait_seconds_bucket{lane=\"main\",le=\"5\"} 2\n"),
        "{text}"
    );
    assert!(
        text.contains("clawbus_lane_capacity{lane=\"main\"} 1\n"),
        "{text}"
    );
}

#[actix_rt::test]
async fn nested_work_on_the_cron_lane_of_one_completes_without_deadlock() {
    tokio::time::pause(); // a deadlock would end at the safety net at once, not after 20 s
    let (lanes, _) = start(&[("cron", 1), ("subagent", 8)]);
    let run = {
        let lanes = lanes.clone();
        async move {
            let outer = lanes.acquire("cron", Ticket::new(id(1))).await.unwrap();
            let token = outer.token();
            let nested_lanes = lanes.clone();
            let nested = tokio::spawn(async move {
                let permit = nested_lanes
                    .acquire("cron", Ticket::new(id(2)).parent(token))
                    .await
                    .unwrap();
                assert!(permit.is_shared(), "nested work shares the parent's slot");
                let main = status(&nested_lanes, "cron").await;
                assert_eq!(main.holding, [id(1)], "no second slot is taken");
                "nested done"
            });
            let answer = nested.await.unwrap();
            drop(outer);
            answer
        }
    };
    assert_eq!(timeout(NET, run).await.unwrap(), "nested done");
    let cron = status(&lanes, "cron").await;
    assert!(
        cron.holding.is_empty() && cron.waiting.is_empty(),
        "{cron:?}"
    );
}

#[actix_rt::test]
async fn the_shared_slot_is_freed_only_when_parent_and_nested_permits_are_gone() {
    let (lanes, _) = start(&[("cron", 1)]);
    let outer = lanes.acquire("cron", Ticket::new(id(1))).await.unwrap();
    let nested = lanes
        .acquire("cron", Ticket::new(id(2)).parent(outer.token()))
        .await
        .unwrap();
    let mut other = Box::pin(lanes.acquire("cron", Ticket::new(id(3))));
    assert!(poll!(&mut other).is_pending());
    drop(outer);
    assert_eq!(
        status(&lanes, "cron").await.holding,
        [id(1)],
        "the nested run still holds it"
    );
    assert!(matches!(poll!(&mut other), Poll::Pending));
    let stale = nested.token();
    drop(nested);
    let permit = timeout(NET, other).await.unwrap().unwrap();
    assert_eq!(permit.run_id(), id(3));
    assert!(!stale.holds("cron"), "a token holds no slot of its own");
    let mut late = Box::pin(lanes.acquire("cron", Ticket::new(id(4)).parent(stale)));
    assert!(
        poll!(&mut late).is_pending(),
        "once the parent's slot is gone, nested work queues"
    );
    assert_eq!(status(&lanes, "cron").await.waiting, [id(4)]);
}

#[actix_rt::test]
async fn nested_work_on_another_lane_queues_and_work_back_on_the_first_shares_through_the_chain() {
    let (lanes, _) = start(&[("cron", 1), ("subagent", 1)]);
    let busy = lanes.acquire("subagent", Ticket::new(id(9))).await.unwrap();
    let outer = lanes.acquire("cron", Ticket::new(id(1))).await.unwrap();
    let mut child = Box::pin(lanes.acquire("subagent", Ticket::new(id(2)).parent(outer.token())));
    assert!(
        poll!(&mut child).is_pending(),
        "another lane is not shared: the child queues"
    );
    assert_eq!(status(&lanes, "subagent").await.waiting, [id(2)]);
    drop(busy);
    let child = timeout(NET, child).await.unwrap().unwrap();
    assert!(!child.is_shared());
    assert!(child.token().holds("cron") && child.token().holds("subagent"));
    let grandchild = timeout(
        NET,
        lanes.acquire("cron", Ticket::new(id(3)).parent(child.token())),
    )
    .await
    .unwrap()
    .unwrap();
    assert!(
        grandchild.is_shared(),
        "work back on the cron lane shares the ancestor's slot"
    );
    assert_eq!(status(&lanes, "cron").await.holding, [id(1)]);
}

#[actix_rt::test]
async fn an_unknown_lane_is_an_error_naming_the_configured_lanes() {
    let (lanes, _) = start(&[("main", 4), ("cron", 1)]);
    let err = lanes.acquire("nope", Ticket::new(id(1))).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "unknown lane \"nope\" (configured: cron, main)"
    );
    assert!(status(&lanes, "main").await.waiting.is_empty());
}

#[test]
fn default_lanes_are_main_cron_and_subagent() {
    let def = LanesDef::default();
    let caps: BTreeMap<&str, usize> = def.caps.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    assert_eq!(
        caps,
        BTreeMap::from([("cron", 1), ("main", 4), ("subagent", 8)])
    );
    assert_eq!(def.warn_after, Duration::from_secs(2));
}
