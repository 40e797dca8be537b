//! Faults on NATS: a task JetStream stops delivering becomes a dead letter; a server that is
//! too old, or a work stream whose config conflicts, is refused at connect naming the URL; while
//! the server is away a submit is refused at once and an outcome waits in the local outbox.

use super::{connect, prefix_of, rid, server};
use crate::conformance::{NET, T0, task, topic};
use bus::nats::{Nats, NatsBus, NatsOptions};
use bus::{Bus as _, ManualClock, Outcome, TaskState};
use clawbus_testkit::NatsServer;
use std::io::{BufRead as _, BufReader, Write as _};
use std::time::Duration;

/// Every delivery of the task is dropped unsettled (its node died) until JetStream's max
/// deliveries: the server stops delivering it and announces it; the advisory's listener records
/// the dead letter in the shared store (what `clawbus tasks list --state dead_lettered` lists),
/// answers a waiter, and deletes the message from the stream.
#[actix_rt::test]
async fn a_task_past_jetstreams_max_deliveries_is_dead_lettered_from_the_advisory() {
    if NatsServer::shared_or_skip(
        "a_task_past_jetstreams_max_deliveries_is_dead_lettered_from_the_advisory",
    )
    .is_none()
    {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let window = Duration::from_secs(3600);
    // One delivery allowed: the first drop is the last.
    let bus = NatsBus::open(connect(dir.path()).await, clock, window, 1)
        .await
        .unwrap();
    let mut work = bus.consume(topic("agent.a")).await.unwrap();
    bus.submit(task("agent.a", "r-dead", "x")).await.unwrap();
    let d = tokio::time::timeout(NET, work.next())
        .await
        .unwrap()
        .unwrap();
    assert!(d.start().await.unwrap());
    drop(d); // dropped unsettled: handed back, and JetStream has no delivery left for it
    let record = bus.wait(&rid("r-dead"), NET).await.unwrap();
    assert_eq!(record.state, TaskState::DeadLettered, "{record:?}");
    let error = match &record.outcome {
        Some(Outcome::DeadLettered { error }) => error.clone(),
        other => panic!("a dead letter's outcome: {other:?}"),
    };
    assert!(error.contains("JetStream max deliveries"), "{error}");
    let listed = bus.tasks().await.unwrap();
    assert!(
        listed
            .iter()
            .any(|t| t.request_id == rid("r-dead") && t.state == TaskState::DeadLettered),
        "the store lists it dead-lettered"
    );
    let client = async_nats::connect(server().url()).await.unwrap();
    let js = async_nats::jetstream::new(client);
    let name = format!("{}_work", prefix_of(dir.path()));
    let mut stream = js.get_stream(&name).await.unwrap();
    let mut left = u64::MAX;
    for _ in 0..100 {
        left = stream.info().await.unwrap().state.messages;
        if left == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        left, 0,
        "the max-delivered message is deleted from the stream"
    );
}

/// A work stream left by something else, with another retention: refused, naming the URL, the
/// stream and what differs.
#[actix_rt::test]
async fn a_work_stream_whose_config_conflicts_is_refused_naming_the_url() {
    if NatsServer::shared_or_skip("a_work_stream_whose_config_conflicts_is_refused_naming_the_url")
        .is_none()
    {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let prefix = prefix_of(dir.path());
    let client = async_nats::connect(server().url()).await.unwrap();
    let js = async_nats::jetstream::new(client);
    js.create_stream(async_nats::jetstream::stream::Config {
        name: format!("{prefix}_work"),
        subjects: vec![format!("{prefix}.work.>")],
        ..Default::default()
    })
    .await
    .unwrap();
    let mut opts = NatsOptions::new(server().url());
    opts.prefix = prefix.clone();
    let e = Nats::connect(opts).await.unwrap_err().to_string();
    assert!(
        e.contains(&format!("NATS at {}: stream {prefix}_work", server().url()))
            && e.contains("retention is Limits, clawbus needs WorkQueue"),
        "{e}"
    );
}

/// A server that says it is 2.9.10 (a loopback stand-in speaking the protocol's greeting):
/// refused, naming the URL, the version and the one needed.
#[actix_rt::test]
async fn a_server_older_than_2_11_is_refused_naming_the_url_and_version() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("nats://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            std::thread::spawn(move || {
                let info = r#"INFO {"server_id":"OLD","server_name":"old","version":"2.9.10","go":"go1.19","host":"127.0.0.1","port":4222,"headers":true,"max_payload":1048576,"proto":1}"#;
                if write!(conn, "{info}\r\n").is_err() {
                    return;
                }
                let Ok(read) = conn.try_clone() else { return };
                for line in BufReader::new(read).lines().map_while(Result::ok) {
                    if line.starts_with("PING") && conn.write_all(b"PONG\r\n").is_err() {
                        return;
                    }
                }
            });
        }
    });
    let mut opts = NatsOptions::new(&url);
    opts.connect_attempts = 1;
    let e = Nats::connect(opts).await.unwrap_err().to_string();
    assert!(
        e.contains(&format!("NATS at {url}"))
            && e.contains("nats-server 2.9.10 is too old")
            && e.contains("2.11 or later"),
        "{e}"
    );
}

/// While the server is away, a submit is refused at once (nothing admitted, nothing to lose),
/// the link says so, and an outcome recorded meanwhile waits in the local outbox and reaches the
/// store once the server is back: the task ends once, with that outcome.
#[actix_rt::test]
async fn while_the_server_is_away_submits_are_refused_and_outcomes_wait_in_the_outbox() {
    let Some(mut nats) = NatsServer::start_or_skip(
        "while_the_server_is_away_submits_are_refused_and_outcomes_wait_in_the_outbox",
    ) else {
        return;
    };
    let mut opts = NatsOptions::new(nats.url());
    opts.prefix = "away".into();
    let conn = Nats::connect(opts).await.unwrap();
    let bus = NatsBus::open(conn, ManualClock::new(T0), Duration::from_secs(3600), 3)
        .await
        .unwrap();
    let mut work = bus.consume(topic("agent.a")).await.unwrap();
    bus.submit(task("agent.a", "r-run", "x")).await.unwrap();
    let d = tokio::time::timeout(NET, work.next())
        .await
        .unwrap()
        .unwrap();
    assert!(d.start().await.unwrap());
    nats.stop().unwrap();
    let mut link = bus.link().unwrap();
    for _ in 0..200 {
        if !link.connected {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        link = bus.link().unwrap();
    }
    assert!(!link.connected, "the link sees the server gone: {link:?}");
    assert_eq!(link.disconnects, 1, "{link:?}");
    let refused = bus
        .submit(task("agent.a", "r-refused", "y"))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains(&format!("NATS at {}", nats.url())) && refused.contains("not connected"),
        "{refused}"
    );
    // The run ends while the server is away: its outcome is parked, not lost.
    let result = serde_json::json!("done while away");
    d.complete(Outcome::Succeeded {
        result: result.clone(),
    })
    .await
    .unwrap();
    assert_eq!(bus.link().unwrap().parked, 1, "one outcome waits");
    nats.start_again().unwrap();
    // While the link is down a wait fails at once (as a submit does): wait for the link first.
    tokio::time::timeout(NET, async {
        while !bus.link().unwrap().connected {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap();
    let record = bus.wait(&rid("r-run"), NET).await.unwrap();
    assert_eq!(record.state, TaskState::Succeeded);
    assert_eq!(record.result(), Some(&result));
    assert_eq!(bus.link().unwrap().parked, 0);
    assert!(
        bus.lookup(&rid("r-refused")).await.unwrap().is_none(),
        "the refused task was never admitted"
    );
    let back = bus.link().unwrap();
    assert!(back.connected && back.disconnects == 1, "{back:?}");
}

/// A durable consumer an older clawbus made (deliveries without end, another ack wait) is
/// brought to this node's settings when the node starts consuming: the max deliveries that
/// dead-letters a task, and the ack wait the node marks progress against.
#[actix_rt::test]
async fn a_consumer_made_with_old_settings_is_updated_when_a_node_starts() {
    if NatsServer::shared_or_skip("a_consumer_made_with_old_settings_is_updated_when_a_node_starts")
        .is_none()
    {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let prefix = prefix_of(dir.path());
    let nats = connect(dir.path()).await; // creates the work stream
    let client = async_nats::connect(server().url()).await.unwrap();
    let js = async_nats::jetstream::new(client);
    let stream = js.get_stream(format!("{prefix}_work")).await.unwrap();
    let durable = format!("{prefix}_agent_a");
    let old = async_nats::jetstream::consumer::pull::Config {
        durable_name: Some(durable.clone()),
        filter_subject: format!("{prefix}.work.agent.a"),
        ack_wait: Duration::from_secs(30),
        max_deliver: -1,
        ..Default::default()
    };
    stream.create_consumer(old).await.unwrap();
    let bus = NatsBus::open(nats, ManualClock::new(T0), Duration::from_secs(60), 3)
        .await
        .unwrap();
    let mut work = bus.consume(topic("agent.a")).await.unwrap();
    let mut consumer: async_nats::jetstream::consumer::PullConsumer =
        stream.get_consumer(&durable).await.unwrap();
    let config = consumer.info().await.unwrap().config.clone();
    assert_eq!(
        config.max_deliver, 3,
        "max deliveries is the bus's attempts"
    );
    assert_eq!(
        config.ack_wait,
        super::ACK_WAIT,
        "the ack wait is the node's"
    );
    assert_eq!(
        config.filter_subject,
        format!("{prefix}.work.agent.a"),
        "the rest of the consumer is kept"
    );
    // Tasks still come through the updated consumer.
    bus.submit(task("agent.a", "r-upd", "x")).await.unwrap();
    let d = tokio::time::timeout(NET, work.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(d.envelope().request_id, rid("r-upd"));
}
