//! `subscribe` of agent files: shared topics, checked and placed.

use super::Fixture;
use crate::config::load;

#[test]
fn shared_topics_are_loaded_without_repeats() {
    let fx = Fixture::new();
    fx.write(
        "agents.d/a.toml",
        "subscribe = [\"team.research\", \"team.write\", \"team.research\"]\n",
    );
    let config = load(&fx.opts()).unwrap();
    let topics: Vec<&str> = config
        .agent("a")
        .unwrap()
        .subscribe
        .iter()
        .map(|t| t.as_str())
        .collect();
    assert_eq!(topics, ["team.research", "team.write"]);
}

#[test]
fn reserved_patterned_and_malformed_topics_are_refused_in_place() {
    let fx = Fixture::new();
    fx.write(
        "agents.d/a.toml",
        "subscribe = [\"agent.b\", \"events.task.x\", \"team.*\", \"team..x\", \"ok.topic\"]\n",
    );
    let report = fx.errors(&fx.opts());
    let lines = fx.lines(&report);
    assert_eq!(lines.len(), 4, "{lines:#?}");
    assert!(
        lines[0].contains("agents.d/a.toml:1:14: field \"subscribe\""),
        "{lines:#?}"
    );
    assert!(lines[0].contains("reserved \"agent.\""), "{lines:#?}");
    assert!(lines[1].contains("reserved \"events.\""), "{lines:#?}");
    assert!(lines[2].contains("is a pattern"), "{lines:#?}");
    assert!(lines[3].contains("empty token"), "{lines:#?}");
}
