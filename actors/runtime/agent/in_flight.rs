//! The tasks an agent has handed to its sessions and not yet heard back about.

use clawbus_core::ids::SessionKey;
use std::collections::HashMap;
use uuid::Uuid;

/// Which session each unfinished task went to (for cancellation), and how many of its
/// deliveries are queued or running there: a redelivery (the next attempt, the same task id)
/// can arrive before the run that asked for it has ended, and each ends with its own report.
#[derive(Debug, Default)]
pub(super) struct TasksInFlight(HashMap<Uuid, (SessionKey, u32)>);

impl TasksInFlight {
    /// A delivery of `task_id` was queued in session `key`.
    pub(super) fn queued(&mut self, task_id: Uuid, key: SessionKey) {
        self.0.entry(task_id).or_insert((key, 0)).1 += 1;
    }

    /// The session `task_id` went to, while a delivery of it is queued or running.
    pub(super) fn session_of(&self, task_id: &Uuid) -> Option<&SessionKey> {
        self.0.get(task_id).map(|(key, _)| key)
    }

    /// A run of `task_id` ended: the session it ran in, or `None` when none was counted.
    pub(super) fn ended(&mut self, task_id: &Uuid) -> Option<SessionKey> {
        match self.0.get_mut(task_id) {
            Some((key, runs)) if *runs > 1 => {
                *runs -= 1;
                Some(key.clone())
            }
            Some(_) => self.0.remove(task_id).map(|(key, _)| key),
            None => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_redelivery_queued_before_its_first_run_ended_is_counted_and_ends_on_its_own() {
        let mut tasks = TasksInFlight::default();
        let key = SessionKey::parse("agent:a:s").unwrap();
        let id = Uuid::now_v7();
        tasks.queued(id, key.clone());
        // The run asked for its next attempt, which arrived before the run reported its end.
        tasks.queued(id, key.clone());
        assert_eq!(tasks.ended(&id), Some(key.clone()), "the first run's end");
        assert_eq!(tasks.session_of(&id), Some(&key), "still cancellable");
        assert_eq!(
            tasks.ended(&id),
            Some(key),
            "the second run's end counts too"
        );
        assert_eq!(tasks.session_of(&id), None);
        assert_eq!(tasks.ended(&id), None);
    }
}
