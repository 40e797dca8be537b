//! Flow engine tests: a real local bus over a temporary sled, agents that consume their topics
//! and answer as each test says (or hold a task until the test ends it), the injected clock.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod nested;
mod policies;
mod running;

use super::*;
use bus::{BusOptions, Delivery, ManualClock, Outcome, Topic};
use clawbus_core::ids::AgentId;
use std::path::Path;
use std::sync::Mutex;

/// A bound on every wait (never reached when the tests pass).
pub(super) const BOUND: Duration = Duration::from_secs(10);

/// What an agent does with a task, by its prompt.
#[derive(Clone)]
pub(super) enum Act {
    Reply(String),
    Fail(String),
    Hold,
}

type Script = Box<dyn FnMut(&str, &str) -> Act + Send>;

/// A task an agent saw.
#[derive(Debug, Clone)]
pub(super) struct Seen {
    pub agent: String,
    pub text: String,
    pub request_id: String,
}

pub(super) struct Rig {
    pub _dir: tempfile::TempDir,
    pub db: sled::Db,
    pub bus: Arc<dyn Bus>,
    pub clock: Arc<ManualClock>,
    pub seen: Arc<Mutex<Vec<Seen>>>,
    pub held: Arc<Mutex<Vec<(Seen, Delivery)>>>,
    pub script: Arc<Mutex<Script>>,
    /// The most tasks held at once.
    pub peak: Arc<Mutex<usize>>,
}

impl Rig {
    /// Agents `researcher` and `writer`; by default each answers `echo: <prompt>`.
    pub(super) async fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let db = sled::open(dir.path()).unwrap();
        let clock = ManualClock::new(1_700_000_000_000);
        let opts = BusOptions {
            dedup_window: Duration::from_secs(86_400),
            max_attempts: 3,
            clock: clock.clone(),
            ..BusOptions::default()
        };
        let bus = bus::open(opts, db.clone()).unwrap().bus;
        let script: Script = Box::new(|_, text| Act::Reply(format!("echo: {text}")));
        let rig = Self {
            _dir: dir,
            db,
            bus,
            clock,
            seen: Arc::default(),
            held: Arc::default(),
            script: Arc::new(Mutex::new(script)),
            peak: Arc::default(),
        };
        for a in ["researcher", "writer"] {
            rig.agent(a).await;
        }
        rig
    }

    async fn agent(&self, id: &'static str) {
        let mut sub = self.bus.consume(Topic::agent(id)).await.unwrap();
        let (seen, held, script, peak) = (
            self.seen.clone(),
            self.held.clone(),
            self.script.clone(),
            self.peak.clone(),
        );
        tokio::spawn(async move {
            while let Some(d) = sub.next().await {
                if !d.start().await.unwrap() {
                    continue;
                }
                let env = d.envelope();
                let s = Seen {
                    agent: id.to_string(),
                    text: env.payload["text"].as_str().unwrap_or_default().to_string(),
                    request_id: env.request_id.to_string(),
                };
                seen.lock().unwrap().push(s.clone());
                let act = (script.lock().unwrap())(id, &s.text);
                let outcome = match act {
                    Act::Reply(text) => Outcome::Succeeded {
                        result: serde_json::json!({ "text": text }),
                    },
                    Act::Fail(error) => Outcome::Failed { error },
                    Act::Hold => {
                        let mut h = held.lock().unwrap();
                        h.push((s, d));
                        let mut p = peak.lock().unwrap();
                        *p = (*p).max(h.len());
                        continue;
                    }
                };
                d.complete(outcome).await.unwrap();
            }
        });
    }

    pub(super) fn script(&self, f: impl FnMut(&str, &str) -> Act + Send + 'static) {
        *self.script.lock().unwrap() = Box::new(f);
    }

    pub(super) fn engine(&self, flows: &[FlowDef]) -> Flows {
        let store: Arc<dyn FlowStore> = Arc::new(SledFlows::open(&self.db).unwrap());
        let bus: Arc<dyn Bus> = self.bus.clone();
        Flows::new(bus, self.clock.clone(), store, flows.to_vec())
    }

    /// Waits until `n` tasks are held, then answers them (taken in hold order).
    pub(super) async fn held(&self, n: usize) -> Vec<(Seen, Delivery)> {
        tokio::time::timeout(BOUND, async {
            loop {
                {
                    let mut h = self.held.lock().unwrap();
                    if h.len() >= n {
                        return h.drain(..n).collect::<Vec<_>>();
                    }
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        })
        .await
        .unwrap_or_else(|_| panic!("{n} tasks were never held at once"))
    }

    /// The prompts `agent` saw, in order.
    pub(super) fn prompts(&self) -> Vec<String> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .map(|s| s.text.clone())
            .collect()
    }
}

/// Ends a held task with `text`.
pub(super) async fn reply(d: Delivery, text: &str) {
    d.complete(Outcome::Succeeded {
        result: serde_json::json!({ "text": text }),
    })
    .await
    .unwrap();
}

/// A flow from its text, checked against the rig's agents.
pub(super) fn flow(text: &str) -> FlowDef {
    let agents = ["researcher", "writer"].map(AgentId::new);
    let (def, problems) = clawbus_core::config::flow::check_text(
        Path::new("t.toml"),
        text,
        &agents,
        &["main".to_string()],
    );
    assert!(problems.is_empty(), "{problems:?}");
    def.unwrap()
}

/// Waits for a run to end.
pub(super) async fn ended(f: &Flows, run: &str) -> FlowRun {
    let r = f.wait(run, BOUND).await.unwrap();
    assert!(r.state.is_terminal(), "the run did not end: {r:#?}");
    r
}

pub(super) fn no_inputs() -> BTreeMap<String, Value> {
    BTreeMap::new()
}
