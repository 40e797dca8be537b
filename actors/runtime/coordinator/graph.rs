//! The wait-for graph: which task waits on which, with the agent that runs each.
//!
//! An edge `waiter → callee` stands for a waiting `agent_call`: the waiter's turn is paused until
//! the callee task ends. Adding an edge is refused when it would close a cycle, in either of two
//! ways:
//!
//! - **a task cycle**: the callee already (transitively) waits on the waiter. Each call runs in
//!   a session of its own, so this happens only when a call joins a task that already exists by
//!   its request id — for instance two scripts' root tasks whose calls join each other's work.
//!   The chain of waiting agents on the envelope cannot see it: the joined task's chain was set
//!   by whoever posted it first, in another tree.
//! - **an agent cycle**: the callee's agent is the waiter's agent or the agent of a task that
//!   (transitively) waits on the waiter (`a → b → a`). This is the rule the envelope's call chain
//!   applies inside one tree; the graph applies it across joins too.

use std::collections::{HashMap, HashSet};
use uuid::Uuid;

/// A waiting call: `waiter` (run by `waiter_agent`) waits on `callee` (run by `callee_agent`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WaitEdge {
    /// The task whose turn waits.
    pub waiter: Uuid,
    /// The agent running it.
    pub waiter_agent: String,
    /// The task it waits on.
    pub callee: Uuid,
    /// The agent that task is posted to.
    pub callee_agent: String,
}

/// A refused edge: the agents around the cycle it would close, first and last the same.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("waiting on agent \"{}\" would close the cycle {}", .agents.last().map(String::as_str).unwrap_or_default(), .agents.join(" → "))]
pub struct Cycle {
    /// The agents around the cycle, outermost waiter first; the last repeats the one it closes on.
    pub agents: Vec<String>,
}

/// The live wait-for graph.
#[derive(Debug, Default)]
pub struct WaitGraph {
    /// Waiter → the tasks it waits on (a turn may wait on several calls at once).
    out: HashMap<Uuid, Vec<Uuid>>,
    /// Callee → the tasks waiting on it.
    into: HashMap<Uuid, Vec<Uuid>>,
    /// The agent of every task with an edge.
    agent: HashMap<Uuid, String>,
}

impl WaitGraph {
    /// Adds `edge`, or refuses it with the cycle it would close (the graph is then unchanged).
    pub fn add(&mut self, edge: &WaitEdge) -> Result<(), Cycle> {
        if let Some(path) = self.path(edge.callee, edge.waiter) {
            // callee … waiter, then waiter → callee closes it.
            let mut agents = vec![edge.waiter_agent.clone()];
            agents.extend(path.iter().map(|t| self.agent_of(*t, edge)));
            return Err(Cycle { agents });
        }
        if let Some(upstream) =
            self.upstream_run_by(edge.waiter, &edge.waiter_agent, &edge.callee_agent)
        {
            let mut agents: Vec<String> =
                upstream.iter().map(|t| self.agent_of(*t, edge)).collect();
            agents.push(edge.callee_agent.clone());
            return Err(Cycle { agents });
        }
        self.out.entry(edge.waiter).or_default().push(edge.callee);
        self.into.entry(edge.callee).or_default().push(edge.waiter);
        self.agent.insert(edge.waiter, edge.waiter_agent.clone());
        self.agent.insert(edge.callee, edge.callee_agent.clone());
        Ok(())
    }

    /// Removes one `waiter → callee` edge (its wait ended).
    pub fn remove(&mut self, waiter: Uuid, callee: Uuid) {
        remove_one(&mut self.out, waiter, callee);
        remove_one(&mut self.into, callee, waiter);
        self.forget_if_isolated(waiter);
        self.forget_if_isolated(callee);
    }

    /// Removes every edge into and out of `task` (it ended).
    pub(crate) fn remove_task(&mut self, task: Uuid) {
        for callee in self.out.remove(&task).unwrap_or_default() {
            remove_one(&mut self.into, callee, task);
            self.forget_if_isolated(callee);
        }
        for waiter in self.into.remove(&task).unwrap_or_default() {
            remove_one(&mut self.out, waiter, task);
            self.forget_if_isolated(waiter);
        }
        self.agent.remove(&task);
    }

    /// How many waits are registered.
    pub fn edges(&self) -> usize {
        self.out.values().map(Vec::len).sum()
    }

    fn agent_of(&self, task: Uuid, edge: &WaitEdge) -> String {
        match self.agent.get(&task) {
            Some(a) => a.clone(),
            None if task == edge.waiter => edge.waiter_agent.clone(),
            None => edge.callee_agent.clone(),
        }
    }

    fn forget_if_isolated(&mut self, task: Uuid) {
        if !self.out.contains_key(&task) && !self.into.contains_key(&task) {
            self.agent.remove(&task);
        }
    }

    /// A path `from … to` along wait edges (both ends included), if there is one.
    fn path(&self, from: Uuid, to: Uuid) -> Option<Vec<Uuid>> {
        search(from, to, |t| self.out.get(&t))
    }

    /// The tasks from one run by `agent` down to `task` (run by `task_agent`; both included),
    /// following the waiters of `task` upwards: `task` itself when `agent` runs it.
    fn upstream_run_by(&self, task: Uuid, task_agent: &str, agent: &str) -> Option<Vec<Uuid>> {
        let runs = |t: Uuid| {
            let of = if t == task {
                Some(task_agent)
            } else {
                self.agent.get(&t).map(String::as_str)
            };
            of == Some(agent)
        };
        let mut seen = HashSet::from([task]);
        let mut stack = vec![vec![task]];
        while let Some(path) = stack.pop() {
            let Some(&last) = path.last() else { continue };
            if runs(last) {
                return Some(path.into_iter().rev().collect());
            }
            for &w in self.into.get(&last).into_iter().flatten() {
                if seen.insert(w) {
                    let mut longer = path.clone();
                    longer.push(w);
                    stack.push(longer);
                }
            }
        }
        None
    }
}

/// Depth-first search for a path `from … to` over `next`.
fn search<'a>(
    from: Uuid,
    to: Uuid,
    next: impl Fn(Uuid) -> Option<&'a Vec<Uuid>>,
) -> Option<Vec<Uuid>> {
    let mut seen = HashSet::from([from]);
    let mut stack = vec![vec![from]];
    while let Some(path) = stack.pop() {
        let Some(&last) = path.last() else { continue };
        if last == to {
            return Some(path);
        }
        for &n in next(last).into_iter().flatten() {
            if seen.insert(n) {
                let mut longer = path.clone();
                longer.push(n);
                stack.push(longer);
            }
        }
    }
    None
}

fn remove_one(map: &mut HashMap<Uuid, Vec<Uuid>>, key: Uuid, value: Uuid) {
    if let Some(list) = map.get_mut(&key) {
        if let Some(pos) = list.iter().position(|v| *v == value) {
            list.swap_remove(pos);
        }
        if list.is_empty() {
            map.remove(&key);
        }
    }
}
