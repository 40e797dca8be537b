use super::stop_around;
use crate::Channel;
use std::sync::{Arc, Mutex};

type Log = Arc<Mutex<Vec<String>>>;

/// Records its steps; `input` says whether it stops input (like the Telegram poller) or keeps
/// it through the drain (like the HTTP port).
struct Recorder {
    name: &'static str,
    input: bool,
    log: Log,
}

fn push(log: &Log, step: String) {
    if let Ok(mut l) = log.lock() {
        l.push(step);
    }
}

#[async_trait::async_trait]
impl Channel for Recorder {
    fn name(&self) -> &str {
        self.name
    }

    async fn stop_input(&self) {
        if self.input {
            push(&self.log, format!("{} input", self.name));
        }
    }

    async fn stop(self: Box<Self>) {
        push(&self.log, format!("{} stop", self.name));
    }
}

#[tokio::test]
async fn input_stops_before_the_drain_and_channels_stop_after_it_last_started_first() {
    let log = Log::default();
    let channel = |name, input| -> Box<dyn Channel> {
        Box::new(Recorder {
            name,
            input,
            log: log.clone(),
        })
    };
    let channels = vec![channel("telegram", true), channel("http", false)];
    let drained = stop_around(channels, async {
        push(&log, "drain".into());
        7
    })
    .await;
    assert_eq!(drained, 7);
    let steps = log.lock().map(|l| l.clone()).unwrap_or_default();
    assert_eq!(
        steps,
        ["telegram input", "drain", "http stop", "telegram stop"]
    );
}
