//! The agent on the injected clock: a whole system on a manual clock evicts an idle session
//! actor once its idle time has passed, not before, and a task waiting for a lane slot times out
//! when its deadline passes on the clock, not before.

use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

/// A whole system on a manual clock: one `echo` agent (the built-in scripted model), one session
/// shard, `idle_timeout = "100s"` (so a sweep every 10 s of the clock) and one `main` slot.
async fn system_on(clock: Arc<bus::ManualClock>) -> (tempfile::TempDir, crate::system::Clawbus) {
    system_with(clock, "").await
}

/// [`system_on`] with more `[sessions]` settings.
async fn system_with(
    clock: Arc<bus::ManualClock>,
    sessions: &str,
) -> (tempfile::TempDir, crate::system::Clawbus) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("agents.d")).unwrap();
    std::fs::write(dir.path().join("agents.d/echo.toml"), "").unwrap();
    std::fs::write(
        dir.path().join("clawbus.toml"),
        format!("[sessions]\nidle_timeout = \"100s\"\n{sessions}\n[lanes]\nmain = 1\n"),
    )
    .unwrap();
    let config =
        clawbus_core::config::load(&clawbus_core::config::LoadOptions::in_folder(dir.path()))
            .unwrap();
    let opts = crate::system::SystemOptions {
        clock,
        shards: Some(1),
    };
    let system = crate::system::Clawbus::start(config, opts).await.unwrap();
    (dir, system)
}

/// A safety net for the waits below; never a synchronisation device.
const BOUND: Duration = Duration::from_secs(20);

/// Posts "hi" to the echo agent in session `session`, with an optional deadline (clock ms).
async fn post(
    system: &crate::system::Clawbus,
    session: &str,
    deadline: Option<u64>,
) -> bus::RequestId {
    let origin = crate::origin::Origin {
        session_name: Some(session.to_string()),
        ..crate::origin::Origin::api()
    };
    let mut env = origin.apply(bus::Envelope::task(
        bus::Topic::agent("echo"),
        bus::RequestId::random(),
        json!({ "text": "hi" }),
    ));
    env.deadline = deadline;
    let request_id = env.request_id.clone();
    system.bus().submit(env).await.unwrap();
    request_id
}

/// Polls `check` until it holds (bounded by [`BOUND`]).
async fn until(what: &str, mut check: impl AsyncFnMut() -> bool) {
    let polled = tokio::time::timeout(BOUND, async {
        while !check().await {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert!(polled.is_ok(), "timed out waiting until {what}");
}

/// The pending runs of each live session of `agent`, as the agent actor holds them.
async fn pending(agent: &super::AgentHandle) -> Vec<usize> {
    agent.addr.send(super::actor::PendingRuns).await.unwrap()
}

/// Advances the manual clock and waits (bounded) until every timer it made due has fired.
async fn advance(clock: &bus::ManualClock, by: Duration) {
    clock.advance(by);
    tokio::time::timeout(BOUND, clock.settle()).await.unwrap();
}

#[actix_rt::test]
async fn an_idle_session_actor_is_evicted_once_its_idle_time_passes_on_the_clock_not_before() {
    let clock = bus::ManualClock::new(1_000_000);
    let (_dir, system) = system_on(clock.clone()).await;
    let agent = &system.agents()[0];
    let request_id = post(&system, "s", None).await;
    let done = system.bus().wait(&request_id, BOUND).await.unwrap();
    assert_eq!(done.state, bus::TaskState::Succeeded);
    until("the run reported back to its agent", async || {
        pending(agent).await == [0]
    })
    .await;
    // 99 s idle on the clock: the sweep due at 10 s ran now, and kept the session.
    advance(&clock, Duration::from_secs(99)).await;
    assert_eq!(
        pending(agent).await,
        [0],
        "not evicted before its idle time"
    );
    assert_eq!(system.live().len(), 1);
    // 109 s: the next sweep (a tenth of the idle time later) finds it idle past 100 s.
    advance(&clock, Duration::from_secs(10)).await;
    assert!(pending(agent).await.is_empty(), "evicted");
    until("the session actor stopped", async || {
        system.live().is_empty()
    })
    .await;
    system.shutdown(BOUND).await;
}

/// How many runs wait for a `main` slot.
async fn main_waiting(system: &crate::system::Clawbus) -> usize {
    let lanes = system.lanes().status().await.unwrap();
    lanes
        .iter()
        .find(|l| l.name == "main")
        .map_or(0, |l| l.waiting.len())
}

#[actix_rt::test]
async fn a_task_waiting_for_a_slot_times_out_when_its_deadline_passes_on_the_clock_not_before() {
    use bus::Clock;
    let clock = bus::ManualClock::new(1_000_000);
    let (_dir, system) = system_on(clock.clone()).await;
    let held = system
        .lanes()
        .acquire("main", crate::lane::Ticket::new(uuid::Uuid::now_v7()))
        .await
        .unwrap();
    let request_id = post(&system, "d", Some(clock.now_ms() + 30_000)).await;
    until("the run waits for the main slot", async || {
        main_waiting(&system).await == 1
    })
    .await;
    advance(&clock, Duration::from_secs(29)).await;
    assert_eq!(
        main_waiting(&system).await,
        1,
        "still waiting before its deadline"
    );
    let record = system.bus().lookup(&request_id).await.unwrap().unwrap();
    assert!(!record.state.is_terminal(), "{:?}", record.state);
    advance(&clock, Duration::from_secs(1)).await;
    let record = system.bus().wait(&request_id, BOUND).await.unwrap();
    assert_eq!(record.state, bus::TaskState::TimedOut, "{record:?}");
    until("the run left the lane queue", async || {
        main_waiting(&system).await == 0
    })
    .await;
    drop(held);
    system.shutdown(BOUND).await;
}

/// The history bytes of each live session of `agent`, as the agent actor holds them.
async fn history_bytes(agent: &super::AgentHandle) -> Vec<usize> {
    agent.addr.send(super::actor::HistoryBytes).await.unwrap()
}

/// What one echo turn's history takes in memory, from a system with the default cache.
async fn one_turns_history(clock: &Arc<bus::ManualClock>) -> usize {
    let (_probe_dir, probe) = system_on(clock.clone()).await;
    let request_id = post(&probe, "probe", None).await;
    probe.bus().wait(&request_id, BOUND).await.unwrap();
    until("the probe's run reported its history", async || {
        history_bytes(&probe.agents()[0])
            .await
            .iter()
            .any(|b| *b > 0)
    })
    .await;
    let one = history_bytes(&probe.agents()[0]).await[0];
    probe.shutdown(BOUND).await;
    one
}

/// One echo turn's history in memory, and a system whose history cache holds two and a half
/// of them.
async fn system_with_room_for_two_and_a_half_turns(
    clock: &Arc<bus::ManualClock>,
) -> (usize, tempfile::TempDir, crate::system::Clawbus) {
    let one = one_turns_history(clock).await;
    let cache = format!("history_cache = {}\n", 2 * one + one / 2);
    let (dir, system) = system_with(clock.clone(), &cache).await;
    (one, dir, system)
}

#[actix_rt::test]
async fn live_histories_past_the_cache_stop_the_least_recently_used_idle_sessions() {
    let clock = bus::ManualClock::new(1_000_000);
    let (one, _dir, system) = system_with_room_for_two_and_a_half_turns(&clock).await;
    let agent = &system.agents()[0];
    let turn = async |session: &str| {
        clock.advance(Duration::from_millis(1));
        let request_id = post(&system, session, None).await;
        let record = system.bus().wait(&request_id, BOUND).await.unwrap();
        assert_eq!(record.state, bus::TaskState::Succeeded, "{record:?}");
    };
    turn("a").await;
    turn("b").await;
    until("a and b stay live within the cache", async || {
        history_bytes(agent).await == [one, one]
    })
    .await;
    turn("c").await;
    until("a, idle longest, stopped for c", async || {
        history_bytes(agent).await == [one, one]
    })
    .await;
    // a comes back from disk with its first turn: two turns now (its vector, rebuilt to fit,
    // grew by one step), so b, idle longest, stops for it and c still fits.
    turn("a").await;
    until(
        "a is live with both its turns, and c beside it",
        async || {
            let live = history_bytes(agent).await;
            live.len() == 2
                && live.contains(&one)
                && live.iter().any(|&both| both > one && both < 3 * one / 2)
        },
    )
    .await;
    system.shutdown(BOUND).await;
}

/// A session opened from disk counts its history against the cache at once, while its task
/// still waits for a slot: the least recently used idle session stops then, not only after the
/// run ends (runs waiting for slots would otherwise hold histories the cache does not see).
#[actix_rt::test]
async fn a_session_opened_from_disk_counts_its_history_before_its_run_ends() {
    let clock = bus::ManualClock::new(1_000_000);
    let (one, _dir, system) = system_with_room_for_two_and_a_half_turns(&clock).await;
    let agent = &system.agents()[0];
    for session in ["a", "b", "c"] {
        clock.advance(Duration::from_millis(1));
        let request_id = post(&system, session, None).await;
        system.bus().wait(&request_id, BOUND).await.unwrap();
    }
    until("a, idle longest, stopped for c", async || {
        history_bytes(agent).await == [one, one]
    })
    .await;
    let held = system
        .lanes()
        .acquire("main", crate::lane::Ticket::new(uuid::Uuid::now_v7()))
        .await
        .unwrap();
    clock.advance(Duration::from_millis(1));
    let request_id = post(&system, "a", None).await;
    until("a's run waits for the main slot", async || {
        main_waiting(&system).await == 1
    })
    .await;
    let live = history_bytes(agent).await;
    assert_eq!(live.len(), 2, "b stopped when a opened: {live:?}");
    assert!(
        live.iter().all(|b| *b > 0),
        "a's history read from disk is counted while its run waits: {live:?}"
    );
    drop(held);
    let record = system.bus().wait(&request_id, BOUND).await.unwrap();
    assert_eq!(record.state, bus::TaskState::Succeeded, "{record:?}");
    system.shutdown(BOUND).await;
}
