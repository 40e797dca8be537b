//! Which topics have a broadcast subscriber, readable without asking the broker: a task event
//! nobody listens to is not encoded, copied and routed (most of a turn's events are published on
//! three topics, of which one or two have a listener).
//!
//! The broker changes the set while it handles a subscription, before the subscriber's
//! `subscribe` call returns; so an event appended after that return sees the listener, and its
//! publish reaches the broker after the subscription. A subscription the broker drops is taken
//! out here too; one counted a moment too long only costs a publish nobody receives.

use crate::fast_map::FastMap;
use crate::topic::Topic;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{PoisonError, RwLock};

/// The broadcast subscriptions of one broker, by concrete topic and by pattern.
#[derive(Debug, Default)]
pub(crate) struct Listeners {
    set: RwLock<Set>,
    /// Subscriptions counted in `set`: none, and no topic is wanted (asked without the lock).
    count: AtomicUsize,
}

#[derive(Debug, Default)]
struct Set {
    /// Subscriptions to one concrete topic, counted.
    exact: FastMap<Topic, usize>,
    /// Pattern subscriptions (`events.agent.>`), one entry each.
    patterns: Vec<Topic>,
}

impl Listeners {
    /// Counts a subscription to `pattern`.
    pub(crate) fn add(&self, pattern: &Topic) {
        let mut set = self.set.write().unwrap_or_else(PoisonError::into_inner);
        if pattern.is_pattern() {
            set.patterns.push(pattern.clone());
        } else {
            *set.exact.entry(pattern.clone()).or_default() += 1;
        }
        self.count.fetch_add(1, Ordering::SeqCst);
    }

    /// Takes one subscription to `pattern` out.
    pub(crate) fn remove(&self, pattern: &Topic) {
        let mut set = self.set.write().unwrap_or_else(PoisonError::into_inner);
        let removed = if pattern.is_pattern() {
            let found = set.patterns.iter().position(|p| p == pattern);
            found.map(|i| set.patterns.swap_remove(i)).is_some()
        } else if let Some(n) = set.exact.get_mut(pattern) {
            *n -= 1;
            if *n == 0 {
                set.exact.remove(pattern);
            }
            true
        } else {
            false
        };
        if removed {
            self.count.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Whether no subscription is counted: then no topic is wanted.
    pub(crate) fn none(&self) -> bool {
        self.count.load(Ordering::SeqCst) == 0
    }

    /// Whether any subscription would receive an event published on `topic`.
    pub(crate) fn wants(&self, topic: &Topic) -> bool {
        let set = self.set.read().unwrap_or_else(PoisonError::into_inner);
        set.exact.contains_key(topic) || set.patterns.iter().any(|p| p.matches(topic))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Topic {
        Topic::parse(s).unwrap()
    }

    #[test]
    fn a_topic_is_wanted_while_a_subscription_to_it_or_a_matching_pattern_lasts() {
        let l = Listeners::default();
        assert!(l.none());
        assert!(!l.wants(&t("events.agent.a")));
        l.add(&t("events.agent.a"));
        l.add(&t("events.agent.a"));
        l.add(&t("events.>"));
        l.remove(&t("events.agent.a"));
        assert!(l.wants(&t("events.agent.a")));
        l.remove(&t("events.agent.a"));
        assert!(l.wants(&t("events.agent.a")), "the pattern still matches");
        assert!(!l.wants(&t("tasks.lifecycle")));
        l.remove(&t("events.>"));
        assert!(!l.wants(&t("events.agent.a")));
        l.remove(&t("events.>"));
        l.remove(&t("events.agent.a"));
        assert!(
            !l.wants(&t("events.agent.a")),
            "removing more than was added is harmless"
        );
        assert!(l.none(), "and leaves the count at none");
        l.add(&t("events.task.x"));
        assert!(!l.none());
    }
}
