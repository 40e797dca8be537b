//! Scheduler tests: injected clock, a real local bus over a temporary sled, a fake agent.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod firing;
mod heartbeat;
mod leases;
mod recover;
mod schedule;
mod spec;
mod store;
mod sync;

use super::*;
use bus::{Bus, BusOptions, Delivery, Envelope, ManualClock, Outcome, Topic};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A bound on every wait in these tests (never reached when they pass).
pub(crate) const BOUND: Duration = Duration::from_secs(10);

/// Unix ms of an RFC 3339 time.
pub(crate) fn ms(s: &str) -> u64 {
    chrono::DateTime::parse_from_rfc3339(s)
        .unwrap()
        .timestamp_millis() as u64
}

/// What the fake agent does with the next task.
#[derive(Clone)]
pub(crate) enum Act {
    Reply(&'static str),
    Fail,
    Hold,
}

/// A bus, its clock and store, and a fake agent `a` that acts as told (default: reply "done").
pub(crate) struct Rig {
    pub _dir: tempfile::TempDir,
    pub db: sled::Db,
    pub bus: Arc<dyn Bus>,
    pub clock: Arc<ManualClock>,
    pub acts: Arc<Mutex<VecDeque<Act>>>,
    pub seen: Arc<Mutex<Vec<Envelope>>>,
    pub held: Arc<Mutex<Vec<Delivery>>>,
}

impl Rig {
    pub(crate) async fn new(start: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let db = sled::open(dir.path()).unwrap();
        let clock = ManualClock::new(ms(start));
        let opts = BusOptions {
            dedup_window: Duration::from_secs(30 * 86_400),
            max_attempts: 3,
            clock: clock.clone(),
            ..BusOptions::default()
        };
        let bus = bus::open(opts, db.clone()).unwrap().bus;
        let rig = Self {
            _dir: dir,
            db,
            bus,
            clock,
            acts: Arc::default(),
            seen: Arc::default(),
            held: Arc::default(),
        };
        rig.agent().await;
        rig
    }

    async fn agent(&self) {
        let mut sub = self.bus.consume(Topic::agent("a")).await.unwrap();
        let (acts, seen, held) = (self.acts.clone(), self.seen.clone(), self.held.clone());
        tokio::spawn(async move {
            while let Some(d) = sub.next().await {
                seen.lock().unwrap().push(d.envelope().clone());
                if !d.start().await.unwrap() {
                    continue;
                }
                let act = acts
                    .lock()
                    .unwrap()
                    .pop_front()
                    .unwrap_or(Act::Reply("done"));
                let outcome = match act {
                    Act::Reply(text) => Outcome::Succeeded {
                        result: serde_json::json!({ "text": text }),
                    },
                    Act::Fail => Outcome::Failed {
                        error: "boom".into(),
                    },
                    Act::Hold => {
                        held.lock().unwrap().push(d);
                        continue;
                    }
                };
                d.complete(outcome).await.unwrap();
            }
        });
    }

    pub(crate) fn act(&self, act: Act) {
        self.acts.lock().unwrap().push_back(act);
    }

    pub(crate) fn tasks_seen(&self) -> usize {
        self.seen.lock().unwrap().len()
    }

    pub(crate) fn settings(&self) -> Settings {
        Settings::new(chrono_tz::Europe::Paris, ["a".to_string()])
    }

    pub(crate) fn scheduler(&self, owner: &str) -> Scheduler {
        let bus: Arc<dyn bus::Bus> = self.bus.clone();
        Scheduler::new(&self.db, bus, self.clock.clone(), owner, self.settings()).unwrap()
    }

    /// A scheduler `owner` on node `node` (a life of that node).
    pub(crate) fn scheduler_on(&self, owner: &str, node: &str) -> Scheduler {
        let bus: Arc<dyn bus::Bus> = self.bus.clone();
        let settings = self.settings().with_node(node);
        Scheduler::new(&self.db, bus, self.clock.clone(), owner, settings).unwrap()
    }

    /// Ends the oldest held task with `outcome` (waiting, bounded, for the agent to hold one).
    pub(crate) async fn complete_held(&self, outcome: Outcome) {
        let d = tokio::time::timeout(BOUND, async {
            loop {
                let first = {
                    let mut held = self.held.lock().unwrap();
                    (!held.is_empty()).then(|| held.remove(0))
                };
                match first {
                    Some(d) => return d,
                    None => tokio::time::sleep(Duration::from_millis(2)).await,
                }
            }
        })
        .await
        .expect("the agent holds a task");
        d.complete(outcome).await.unwrap();
    }

    /// The workspaces folder heartbeats read from (`<tmp>/workspaces`).
    pub(crate) fn workspaces(&self) -> std::path::PathBuf {
        self._dir.path().join("workspaces")
    }

    /// A scheduler whose heartbeats read [`Rig::workspaces`].
    pub(crate) fn scheduler_with_workspaces(&self, owner: &str) -> Scheduler {
        let bus: Arc<dyn bus::Bus> = self.bus.clone();
        let settings = self.settings().with_workspaces(self.workspaces());
        Scheduler::new(&self.db, bus, self.clock.clone(), owner, settings).unwrap()
    }

    pub(crate) fn clock_now(&self) -> u64 {
        bus::Clock::now_ms(&*self.clock)
    }

    pub(crate) fn advance(&self, by: Duration) {
        self.clock.advance(by);
    }
}

/// A spec for agent `a`.
pub(crate) fn spec(schedule: ScheduleSpec) -> JobSpec {
    JobSpec {
        id: None,
        name: Some("t".into()),
        agent: "a".into(),
        schedule,
        payload: Payload {
            kind: PayloadKind::AgentTurn,
            message: "ping".into(),
        },
        session: SessionTarget::Isolated,
        delivery: crate::cron::Delivery::default(),
        enabled: true,
        catch_up: CatchUp::Latest,
        delete_after_run: false,
    }
}

/// An `every` spec anchored at `anchor`.
pub(crate) fn every(every_ms: u64, anchor: u64) -> JobSpec {
    spec(ScheduleSpec::Every {
        every_ms,
        anchor_ms: Some(anchor),
    })
}

/// Ticks and waits for the runs it started.
pub(crate) async fn tick(s: &Scheduler) -> TickReport {
    let r = s.tick().await;
    assert!(s.wait_idle(BOUND).await, "runs did not end");
    r
}

/// The outcomes of a job's history, oldest first.
pub(crate) async fn outcomes(s: &Scheduler, id: &JobId) -> Vec<RunOutcome> {
    s.runs(id)
        .await
        .unwrap()
        .iter()
        .map(|r| r.outcome)
        .collect()
}
