//! The coordinator actor: its state (the wait-for graph, the live tree, the deadline heap) and
//! its handlers.

use super::graph::{WaitEdge, WaitGraph};
use super::lifecycle::{self, Seen};
use super::{CoordinatorOptions, CoordinatorStatus, UNWAIT, WAIT, WaitAnswer, outcome_notice};
use crate::origin::Origin;
use actix::prelude::*;
use bus::{
    Bus, BusError, Clock, Delivery, Envelope, Outcome, RequestId, Subscription, TaskRecord,
    TaskState, Topic,
};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::Arc;
use uuid::Uuid;

/// Deadlines of ended tasks the heap may hold beyond twice the followed tasks before it is
/// pruned (so pruning costs O(1) per task, amortised).
pub(super) const PRUNE_SLACK: usize = 64;

/// An unfinished task, as far as the live duties need it.
#[derive(Debug)]
struct Live {
    request_id: RequestId,
    /// Its unfinished children.
    children: Vec<Uuid>,
    parent: Option<Uuid>,
    /// For a broadcast group: its members so far.
    group: Option<Group>,
}

/// A broadcast group's progress: it ends when `expected` members have.
#[derive(Debug)]
struct Group {
    expected: u32,
    ended: Vec<Uuid>,
}

/// The task coordinator (see the module docs).
pub struct Coordinator {
    bus: Arc<dyn Bus>,
    clock: Arc<dyn Clock>,
    opts: CoordinatorOptions,
    graph: WaitGraph,
    live: HashMap<Uuid, Live>,
    deadlines: BinaryHeap<Reverse<(u64, Uuid)>>,
    /// Whether a deadline check is scheduled (only while there are deadlines: an idle
    /// coordinator sets no timer).
    checking: bool,
    timed_out: u64,
    spared: u64,
    cascaded: u64,
}

/// A task's `queued` or `terminal` event, from [`Topic::task_lifecycle`].
struct Lifecycle(Delivery);
/// A request on `coord.>`.
struct Request(Delivery);

/// What it tracks now.
#[derive(Message)]
#[rtype(result = "CoordinatorStatus")]
pub(super) struct Status;

/// Stops the actor.
#[derive(Message)]
#[rtype(result = "()")]
pub(super) struct Stop;

impl Coordinator {
    pub(super) fn new(bus: Arc<dyn Bus>, clock: Arc<dyn Clock>, opts: CoordinatorOptions) -> Self {
        Self {
            bus,
            clock,
            opts,
            graph: WaitGraph::default(),
            live: HashMap::new(),
            deadlines: BinaryHeap::new(),
            checking: false,
            timed_out: 0,
            spared: 0,
            cascaded: 0,
        }
    }

    /// Feeds the subscriptions to the actor.
    pub(super) fn attach(
        &self,
        ctx: &mut Context<Self>,
        lifecycle: Subscription,
        requests: Subscription,
    ) {
        ctx.set_mailbox_capacity(1024);
        ctx.add_stream(futures::StreamExt::map(lifecycle.into_stream(), Lifecycle));
        ctx.add_stream(futures::StreamExt::map(requests.into_stream(), Request));
    }

    /// Follows `record` if it is unfinished: its parent link and its deadline. `parent_state` is
    /// the state of its parent when the parent is not followed (it ended, or came before).
    fn track(
        &mut self,
        record: &TaskRecord,
        parent_state: Option<TaskState>,
        ctx: &mut Context<Self>,
    ) {
        if record.state.is_terminal() || self.live.contains_key(&record.task_id) {
            return;
        }
        let origin = Origin::of(&record.envelope).ok();
        let parent = origin.as_ref().and_then(|o| o.parent_task);
        let group = origin.and_then(|o| o.members).map(|expected| Group {
            expected,
            ended: Vec::new(),
        });
        if let Some(p) = parent {
            match self.live.get_mut(&p) {
                Some(live) => live.children.push(record.task_id),
                None if parent_state == Some(TaskState::Cancelled) => {
                    // Its parent was cancelled before the child was known: it goes too.
                    self.cancel_child(p, record.request_id.clone(), ctx);
                }
                None => {}
            }
        }
        if let Some(deadline) = record.envelope.deadline {
            self.deadlines.push(Reverse((deadline, record.task_id)));
            self.prune_deadlines();
            self.check_later(ctx);
        }
        self.live.insert(
            record.task_id,
            Live {
                request_id: record.request_id.clone(),
                children: Vec::new(),
                parent,
                group,
            },
        );
    }

    /// Drops the deadlines of tasks that ended, once they outnumber the followed tasks: a task
    /// that ends in time leaves its deadline in the heap until it passes, so without this the
    /// heap would follow the volume of work over the longest deadline, not the work in flight.
    fn prune_deadlines(&mut self) {
        if self.deadlines.len() <= 2 * self.live.len() + PRUNE_SLACK {
            return;
        }
        let live = &self.live;
        self.deadlines
            .retain(|Reverse((_, id))| live.contains_key(id));
    }

    /// Forgets an ended task; a cancelled one takes its unfinished children with it, and a task
    /// ended from outside (cancelled, timed out) is announced to the session that posted it.
    /// `outcome` is `None` for an end whose outcome was not read (one its run reported).
    fn ended(&mut self, task_id: Uuid, outcome: Option<&Outcome>, ctx: &mut Context<Self>) {
        self.graph.remove_task(task_id);
        let Some(live) = self.live.remove(&task_id) else {
            return;
        };
        if let Some(parent_id) = live.parent {
            self.member_ended(parent_id, task_id, ctx);
        }
        if matches!(outcome, Some(Outcome::Cancelled { .. })) {
            for child in &live.children {
                if let Some(c) = self.live.get(child) {
                    self.cancel_child(task_id, c.request_id.clone(), ctx);
                }
            }
        }
        if let Some(outcome @ (Outcome::Cancelled { .. } | Outcome::TimedOut { .. })) = outcome {
            let bus = self.bus.clone();
            let outcome = outcome.clone();
            ctx.spawn(fut::wrap_future(tell_poster(bus, task_id, outcome)));
        }
    }

    /// Task `child` of `parent_id` ended: it leaves the parent's children, and a broadcast group
    /// whose every member has ended ends with their answers.
    fn member_ended(&mut self, parent_id: Uuid, child: Uuid, ctx: &mut Context<Self>) {
        let Some(parent) = self.live.get_mut(&parent_id) else {
            return;
        };
        parent.children.retain(|c| *c != child);
        let Some(group) = parent.group.as_mut() else {
            return;
        };
        if !group.ended.contains(&child) {
            group.ended.push(child);
        }
        if group.ended.len() < group.expected as usize {
            return;
        }
        let (bus, request_id, members) = (
            self.bus.clone(),
            parent.request_id.clone(),
            group.ended.clone(),
        );
        ctx.spawn(fut::wrap_future(async move {
            let outcome = super::group::outcome(bus.as_ref(), &members).await;
            if let Err(e) = bus.end(&request_id, outcome).await {
                tracing::error!(group = %parent_id, error = %e, "Could not end a broadcast group.");
            }
        }));
    }

    fn cancel_child(&mut self, parent: Uuid, child: RequestId, ctx: &mut Context<Self>) {
        self.cascaded += 1;
        let bus = self.bus.clone();
        ctx.spawn(fut::wrap_future(async move {
            let reason = format!("its parent task {parent} was cancelled");
            if let Err(e) = bus.cancel(&child, &reason).await {
                tracing::error!(parent = %parent, request_id = %child, error = %e, "Could not cancel a child with its parent.");
            }
        }));
    }

    /// Checks the deadlines once `tick` has passed on the clock, then schedules the next check,
    /// for as long as there are deadlines (a manual clock's advance drives it in tests).
    fn check_later(&mut self, ctx: &mut Context<Self>) {
        if self.checking || self.deadlines.is_empty() {
            return;
        }
        self.checking = true;
        let timer = fut::wrap_future(self.clock.sleep(self.opts.tick));
        ctx.spawn(timer.map(|(), act: &mut Self, ctx| {
            act.checking = false;
            act.check_deadlines(ctx);
            act.check_later(ctx);
        }));
    }

    /// Ends every followed task whose deadline the clock has passed.
    fn check_deadlines(&mut self, ctx: &mut Context<Self>) {
        let now = self.clock.now_ms();
        while let Some(Reverse((deadline, task_id))) = self.deadlines.peek().copied() {
            if deadline > now {
                break;
            }
            self.deadlines.pop();
            let Some(live) = self.live.get(&task_id) else {
                continue; // it ended in time
            };
            let (bus, request_id) = (self.bus.clone(), live.request_id.clone());
            tracing::warn!(task_id = %task_id, %request_id, deadline, now, "Deadline passed; the coordinator ends the task.");
            let ending = async move {
                let outcome = Outcome::TimedOut {
                    error: format!(
                        "the task's deadline passed ({} ms ago) before it ended",
                        now.saturating_sub(deadline)
                    ),
                };
                // The run sends its outcome notice just before it records its outcome: once the
                // notice is in, the run has ended and its own outcome is the one to keep, so
                // the session is never told one outcome while the record holds another.
                if let Some(notice) = super::notice::notice_id(task_id)
                    && let Ok(Some(_)) = bus.lookup(&notice).await
                {
                    tracing::debug!(task_id = %task_id, "Overdue task already told its outcome; the run records it.");
                    return Overdue::AlreadyTold;
                }
                match bus.end(&request_id, outcome).await {
                    Ok(record) => Overdue::Ended(Box::new(record)),
                    Err(e) => {
                        tracing::error!(task_id = %task_id, error = %e, "Could not end an overdue task.");
                        Overdue::NotEnded
                    }
                }
            };
            ctx.spawn(fut::wrap_future(ending).map(
                move |overdue, act: &mut Self, ctx| match overdue {
                    Overdue::AlreadyTold => act.spared += 1,
                    Overdue::NotEnded => {}
                    Overdue::Ended(record) if record.state == TaskState::TimedOut => {
                        act.timed_out += 1;
                    }
                    // It had ended already, and its terminal event never came (a lagging
                    // subscription): forget it now.
                    Overdue::Ended(record) => {
                        if let Some(outcome) = &record.outcome {
                            act.ended(task_id, Some(outcome), ctx);
                        }
                    }
                },
            ));
        }
    }

    fn answer_wait(&mut self, env: &Envelope, ctx: &mut Context<Self>) {
        let edge: WaitEdge = match serde_json::from_value(env.payload.clone()) {
            Ok(e) => e,
            Err(e) => {
                tracing::warn!(error = %e, "Malformed wait request ignored.");
                return;
            }
        };
        let answer = match self.graph.add(&edge) {
            Ok(()) => WaitAnswer::Granted,
            Err(cycle) => {
                tracing::info!(waiter = %edge.waiter, callee = %edge.callee, cycle = %cycle.agents.join(" → "), "Wait refused: it would close a cycle.");
                WaitAnswer::Deadlock {
                    cycle: cycle.agents,
                }
            }
        };
        let Some(reply_to) = env.reply_to.clone() else {
            return;
        };
        let Ok(payload) = serde_json::to_value(&answer) else {
            return;
        };
        let bus = self.bus.clone();
        ctx.spawn(fut::wrap_future(async move {
            if let Err(e) = bus.publish(Envelope::event(reply_to, payload)).await {
                tracing::warn!(error = %e, "Could not answer a wait request.");
            }
        }));
    }
}

/// What became of an overdue task.
enum Overdue {
    /// Ended by [`Bus::end`]: the record as it stands (timed out, or already ended before).
    Ended(Box<TaskRecord>),
    /// Its run had already sent its outcome notice, so the run's outcome is kept.
    AlreadyTold,
    /// The store could not be written; logged.
    NotEnded,
}

/// Announces a task ended from outside to the session that posted it, if one did.
async fn tell_poster(bus: Arc<dyn Bus>, task_id: Uuid, outcome: Outcome) {
    let record = match bus.task(task_id).await {
        Ok(Some(r)) => r,
        Ok(None) => return,
        Err(e) => {
            tracing::error!(task_id = %task_id, error = %e, "Could not read an ended task to tell its poster.");
            return;
        }
    };
    let Ok(origin) = Origin::of(&record.envelope) else {
        return;
    };
    let Some(to) = origin.notify_session else {
        return;
    };
    let agent = origin
        .session_key
        .as_ref()
        .map(|k| k.agent().to_string())
        .unwrap_or_else(|| record.envelope.topic.to_string());
    let Some(notice) = outcome_notice(&agent, task_id, &to, &outcome) else {
        return;
    };
    match crate::ingress::Ingress::new(bus.clone())
        .submit(notice)
        .await
    {
        // Already told (by the run, or by an earlier notice): exactly once.
        Ok(_) | Err(crate::ingress::IngressError::Bus(BusError::Conflict { .. })) => {}
        Err(e) => {
            tracing::error!(task_id = %task_id, session = %to, error = %e, "Could not tell the posting session how the task ended.")
        }
    }
}

impl Actor for Coordinator {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        // The unfinished tasks already in the store (from before a restart), before any event:
        // the subscriptions were made first, so nothing slips between.
        let bus = self.bus.clone();
        ctx.wait(
            fut::wrap_future(async move { bus.tasks().await }).map(
                |all, act: &mut Self, ctx| match all {
                    Ok(all) => {
                        let states: HashMap<Uuid, TaskState> =
                            all.iter().map(|r| (r.task_id, r.state)).collect();
                        for r in &all {
                            let parent = super::tree::parent_of(r).and_then(|p| states.get(&p));
                            act.track(r, parent.copied(), ctx);
                        }
                        // Broadcast members that ended while no coordinator was running.
                        for r in all.iter().filter(|r| r.state.is_terminal()) {
                            if let Some(p) = super::tree::parent_of(r) {
                                act.member_ended(p, r.task_id, ctx);
                            }
                        }
                        tracing::info!(live = act.live.len(), "Task coordinator started.");
                    }
                    Err(e) => {
                        tracing::error!(error = %e, "Task coordinator could not read the store; it follows new tasks only.")
                    }
                },
            ),
        );
        self.check_later(ctx);
    }
}

impl StreamHandler<Lifecycle> for Coordinator {
    fn handle(&mut self, Lifecycle(delivery): Lifecycle, ctx: &mut Context<Self>) {
        let seen = match lifecycle::read(delivery.envelope()) {
            Ok(seen) => seen,
            Err(e) => {
                tracing::warn!(error = %e, "Lifecycle event not understood.");
                return;
            }
        };
        match seen {
            Seen::Ended(task_id, outcome) => self.ended(task_id, outcome.as_ref(), ctx),
            Seen::Queued(task_id) if !self.live.contains_key(&task_id) => {
                // The record (deadline, parent) is in the store: read it before the next event,
                // so a parent's cancel that follows finds its child.
                let bus = self.bus.clone();
                ctx.wait(
                    fut::wrap_future(async move {
                        let record = bus.task(task_id).await?;
                        let parent = match record.as_ref().and_then(super::tree::parent_of) {
                            Some(p) => bus.task(p).await?.map(|r| r.state),
                            None => None,
                        };
                        Ok::<_, BusError>(record.map(|r| (r, parent)))
                    })
                    .map(move |read, act: &mut Self, ctx| match read {
                        Ok(Some((record, parent))) => act.track(&record, parent, ctx),
                        Ok(None) => {}
                        Err(e) => {
                            tracing::error!(task_id = %task_id, error = %e, "Could not read a new task; its deadline is not watched.")
                        }
                    }),
                );
            }
            _ => {}
        }
    }

    fn finished(&mut self, ctx: &mut Context<Self>) {
        tracing::info!("Task lifecycle stream closed; the coordinator stops.");
        ctx.stop();
    }
}

impl StreamHandler<Request> for Coordinator {
    fn handle(&mut self, Request(delivery): Request, ctx: &mut Context<Self>) {
        let env = delivery.envelope();
        if env.topic == Topic::coordinator(WAIT) {
            self.answer_wait(env, ctx);
        } else if env.topic == Topic::coordinator(UNWAIT) {
            match serde_json::from_value::<WaitEdge>(env.payload.clone()) {
                Ok(edge) => self.graph.remove(edge.waiter, edge.callee),
                Err(e) => tracing::warn!(error = %e, "Malformed unwait notice ignored."),
            }
        } else {
            tracing::warn!(topic = %env.topic, "Unknown coordinator request ignored.");
        }
    }

    fn finished(&mut self, _: &mut Context<Self>) {}
}

impl Handler<Status> for Coordinator {
    type Result = MessageResult<Status>;
    fn handle(&mut self, _: Status, _: &mut Context<Self>) -> Self::Result {
        MessageResult(CoordinatorStatus {
            live: self.live.len(),
            waits: self.graph.edges(),
            deadlines: self.deadlines.len(),
            timed_out: self.timed_out,
            spared: self.spared,
            cascaded: self.cascaded,
        })
    }
}

impl Handler<Stop> for Coordinator {
    type Result = ();
    fn handle(&mut self, _: Stop, ctx: &mut Context<Self>) {
        ctx.stop();
    }
}
