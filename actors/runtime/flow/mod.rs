//! Flows: task graphs of agents (`flows.d/<name>.toml`, checked by
//! [`clawbus_core::config::flow`]). Each node is a task submitted through the ingress pipeline
//! with the request id `flow:<runId>:<node>:<item>:<attempt>`, so a node never runs twice for one
//! run, even across a crash; the coordinator handles its deadline (clipped to the flow's) and
//! cancel like any task.
//!
//! - `run`: the stored run ([`FlowRun`]) and the node states.
//! - `store`: [`FlowStore`] and its sled trees ([`SledFlows`]); cancels are sticky.
//! - `driver`: one run's loop — ready nodes in parallel, `when`, schemas with retries that carry
//!   the validation errors, `retry_on`/`abort_on`, the failure policy, `for_each` with
//!   `max_parallel`, results in item order.
//! - `values`: what template and condition references mean in a run.
//! - `event`: what a run publishes on `events.flow.<runId>`.
//! - `starts`: the start topic, where a task (a cron job's `flow` payload) starts a run.
//!
//! A node may run a whole other flow (`flow = "name"`): its item starts a child run under the
//! item's request id and awaits it; a cancel of the parent cancels the child.
//!
//! A run is driven by a tokio task rather than an actor: the record is its one owner's state and
//! every decision is written to the store before a task is submitted, so a restart
//! ([`Flows::resume`]) continues from the record without re-running finished nodes.

mod driver;
pub(crate) mod event;
pub(crate) mod run;
mod starts;
pub(crate) mod store;
#[cfg(test)]
mod tests;
mod values;

pub use event::{FlowEvent, FlowEventKind};
pub use run::{FlowRun, ItemRun, NodeRun, NodeState, RunState};
pub use store::{FlowStore, FlowStoreError, SledFlows};

use bus::{Bus, BusError, Clock, Envelope};
use clawbus_core::config::flow::{FlowDef, resolve_inputs};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::task::JoinSet;

/// Why a flow request was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FlowError {
    /// No flow by that name.
    #[error("no flow \"{0}\"")]
    UnknownFlow(String),
    /// No run by that id.
    #[error("no flow run \"{0}\"")]
    UnknownRun(String),
    /// The inputs do not fit the flow.
    #[error("{0}")]
    Inputs(String),
    /// The request id already started a run of another flow.
    #[error("request id \"{request_id}\" already started a run of flow \"{flow}\"")]
    Conflict {
        /// The request id.
        request_id: String,
        /// The flow it started.
        flow: String,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] FlowStoreError),
}

/// A run that was started (or found, for a request id seen before).
#[derive(Debug, Clone)]
pub struct Started {
    /// The run as it stands.
    pub run: FlowRun,
    /// True when the request id had started it before: nothing new was started.
    pub duplicate: bool,
}

pub(crate) struct Inner {
    bus: Arc<dyn Bus>,
    clock: Arc<dyn Clock>,
    store: Arc<dyn FlowStore>,
    defs: BTreeMap<String, FlowDef>,
    cancels: Mutex<HashMap<String, Arc<Notify>>>,
    drivers: Mutex<JoinSet<()>>,
}

impl Inner {
    async fn publish(&self, e: FlowEvent) {
        let Ok(topic) = event::topic(&e.run_id) else {
            return;
        };
        let payload = match serde_json::to_value(&e) {
            Ok(p) => p,
            Err(err) => {
                tracing::warn!(error = %err, "flow: an event was not encoded");
                return;
            }
        };
        if let Err(err) = self.bus.publish(Envelope::event(topic, payload)).await {
            tracing::warn!(run = %e.run_id, error = %err, "flow: an event was not published");
        }
    }

    fn forget(&self, run_id: &str) {
        if let Ok(mut c) = self.cancels.lock() {
            c.remove(run_id);
        }
    }
}

/// The flow engine: starts, resumes, reports on and cancels runs. Cheap to clone.
#[derive(Clone)]
pub struct Flows {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Flows {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Flows")
            .field("flows", &self.inner.defs.len())
            .finish()
    }
}

impl Flows {
    /// An engine over `store` for the flows `defs` (no run is resumed yet: [`Flows::resume`]).
    pub fn new(
        bus: Arc<dyn Bus>,
        clock: Arc<dyn Clock>,
        store: Arc<dyn FlowStore>,
        defs: impl IntoIterator<Item = FlowDef>,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                bus,
                clock,
                store,
                defs: defs.into_iter().map(|d| (d.name.clone(), d)).collect(),
                cancels: Mutex::default(),
                drivers: Mutex::new(JoinSet::new()),
            }),
        }
    }

    /// Drives again every run the store holds as running (after a restart): their finished
    /// nodes are not run again, their running tasks are awaited under their request ids.
    pub fn resume(&self) -> Result<usize, FlowError> {
        let runs: Vec<FlowRun> = self
            .inner
            .store
            .list()?
            .into_iter()
            .filter(|r| !r.state.is_terminal())
            .collect();
        let n = runs.len();
        for run in runs {
            tracing::info!(run = %run.id, flow = %run.def.name, "Flow run resumed.");
            self.spawn(run);
        }
        Ok(n)
    }

    /// The flows it knows, by name.
    pub fn defs(&self) -> impl Iterator<Item = &FlowDef> {
        self.inner.defs.values()
    }

    /// The flow named `name`.
    pub fn def(&self, name: &str) -> Option<&FlowDef> {
        self.inner.defs.get(name)
    }

    /// Starts a run of the flow `name` (see [`Flows::start`]).
    pub async fn start_named(
        &self,
        name: &str,
        inputs: &BTreeMap<String, Value>,
        request_id: Option<String>,
    ) -> Result<Started, FlowError> {
        let def = self
            .def(name)
            .cloned()
            .ok_or_else(|| FlowError::UnknownFlow(name.to_string()))?;
        self.start(def, inputs, request_id).await
    }

    /// Starts a run of `def` with `inputs` (checked against its declared types). A request id
    /// seen before answers the run it started, starting nothing.
    pub async fn start(
        &self,
        def: FlowDef,
        inputs: &BTreeMap<String, Value>,
        request_id: Option<String>,
    ) -> Result<Started, FlowError> {
        self.start_within(def, inputs, request_id, None).await
    }

    /// [`Flows::start`] with the run's deadline clipped to `deadline_ms` (epoch ms): a child run
    /// started by a node never outlives its parent's node or flow.
    pub(crate) async fn start_within(
        &self,
        def: FlowDef,
        inputs: &BTreeMap<String, Value>,
        request_id: Option<String>,
        deadline_ms: Option<u64>,
    ) -> Result<Started, FlowError> {
        let inputs = resolve_inputs(&def, inputs).map_err(FlowError::Inputs)?;
        let fresh = uuid::Uuid::now_v7().simple().to_string();
        let run_id = match &request_id {
            Some(rid) => self.inner.store.claim(rid, &fresh)?,
            None => fresh.clone(),
        };
        // A request id tied to a run whose record never came (the process died between the
        // two writes, which follow each other with nothing in between): that run starts now.
        let earlier = if run_id != fresh {
            self.wait_record(&run_id).await?
        } else {
            None
        };
        if let Some(run) = earlier {
            if run.def.name != def.name {
                return Err(FlowError::Conflict {
                    request_id: request_id.unwrap_or_default(),
                    flow: run.def.name,
                });
            }
            return Ok(Started {
                run,
                duplicate: true,
            });
        }
        let mut run = FlowRun::new(run_id, request_id, def, inputs, self.inner.clock.now_ms());
        run.deadline_ms = [run.deadline_ms, deadline_ms].into_iter().flatten().min();
        self.inner.store.put(&run)?;
        let store = self.inner.store.clone();
        tokio::task::spawn_blocking(move || store.sync())
            .await
            .map_err(|e| FlowStoreError::Storage(e.to_string()))??;
        tracing::info!(run = %run.id, flow = %run.def.name, "Flow run started.");
        self.spawn(run.clone());
        Ok(Started {
            run,
            duplicate: false,
        })
    }

    /// The record of a run whose request id was claimed: written just after the claim by
    /// another caller (`None` when it never comes).
    async fn wait_record(&self, run_id: &str) -> Result<Option<FlowRun>, FlowError> {
        for _ in 0..200 {
            if let Some(run) = self.inner.store.get(run_id)? {
                return Ok(Some(run));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        Ok(None)
    }

    fn spawn(&self, run: FlowRun) {
        let notify = Arc::new(Notify::new());
        if let Ok(mut c) = self.inner.cancels.lock() {
            c.insert(run.id.clone(), notify.clone());
        }
        let d = driver::Driver::new(self.inner.clone(), run, notify);
        if let Ok(mut drivers) = self.inner.drivers.lock() {
            // Reap the drivers that ended, so the set does not grow with every run.
            while drivers.try_join_next().is_some() {}
            drivers.spawn(d.drive());
        }
    }

    /// A run by id.
    pub fn get(&self, run_id: &str) -> Result<Option<FlowRun>, FlowError> {
        Ok(self.inner.store.get(run_id)?)
    }

    /// Every run, oldest first.
    pub fn runs(&self) -> Result<Vec<FlowRun>, FlowError> {
        Ok(self.inner.store.list()?)
    }

    /// Cancels a run: its running tasks are cancelled and nothing else starts, even a node
    /// whose dependency finishes after the cancel. The cancel is stored first, so it holds
    /// across a restart. A run that has ended is answered as it is.
    pub async fn cancel(&self, run_id: &str, reason: &str) -> Result<FlowRun, FlowError> {
        let run = self
            .get(run_id)?
            .ok_or_else(|| FlowError::UnknownRun(run_id.to_string()))?;
        if run.state.is_terminal() {
            return Ok(run);
        }
        self.inner.store.cancel(run_id, reason)?;
        let notify = self
            .inner
            .cancels
            .lock()
            .ok()
            .and_then(|c| c.get(run_id).cloned());
        if let Some(n) = notify {
            n.notify_one();
        }
        Ok(self.get(run_id)?.unwrap_or(run))
    }

    /// Waits at most `timeout` for a run to end: the run as it stands then.
    pub async fn wait(&self, run_id: &str, timeout: Duration) -> Result<FlowRun, FlowError> {
        let topic = event::topic(run_id).map_err(|e| FlowError::UnknownRun(e.to_string()))?;
        let mut events = self
            .inner
            .bus
            .subscribe(topic)
            .await
            .map_err(|e: BusError| FlowStoreError::Storage(e.to_string()))?;
        let ended = async {
            // The record is read once, then again only when the run says it finished.
            let mut check = true;
            loop {
                if check {
                    match self.get(run_id)? {
                        Some(r) if r.state.is_terminal() => return Ok(r),
                        Some(_) => {}
                        None => return Err(FlowError::UnknownRun(run_id.to_string())),
                    }
                }
                check = match events.next().await {
                    Some(d) => serde_json::from_value::<FlowEvent>(d.envelope().payload.clone())
                        .map_or(true, |e| e.kind == FlowEventKind::RunFinished),
                    None => {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        true
                    }
                };
            }
        };
        match tokio::time::timeout(timeout, ended).await {
            Ok(r) => r,
            Err(_) => self
                .get(run_id)?
                .ok_or_else(|| FlowError::UnknownRun(run_id.to_string())),
        }
    }

    /// Subscribes to a run's events.
    pub async fn events(&self, run_id: &str) -> Result<bus::Subscription, BusError> {
        let topic = event::topic(run_id)?;
        self.inner.bus.subscribe(topic).await
    }

    /// Stops every driver (their runs stay running in the store and resume on the next start).
    pub fn stop(&self) {
        if let Ok(mut d) = self.inner.drivers.lock() {
            d.abort_all();
        }
    }
}
