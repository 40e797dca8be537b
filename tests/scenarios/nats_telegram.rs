//! A Telegram channel over three `clawbus up` nodes on one NATS JetStream (a real
//! `nats-server`), against the fake Bot API: one node polls at a time (the channel's lease), a
//! holder killed with SIGKILL is replaced once its lease expires, a holder stopped cleanly hands
//! over at once, the offset is the cluster's, and every message is answered exactly once.

use super::system::{Child, spawn_up, stop};
use crate::support::{Project, eventually, eventually_within, get_json, last_user};
use clawbus::testkit::{FakeBotApi, NatsServer, ScriptedServer, Turn};
use std::collections::BTreeMap;
use std::time::Duration;

const TOKEN: &str = "123456:TEST-token";
const CHAT: i64 = 42;

/// Node `id` on `nats` in `project`, polling the fake through a base URL of its own (so the
/// fake tells the nodes' polls apart); leases live 3 s.
async fn node(
    project: &Project,
    model: &ScriptedServer,
    fake: &FakeBotApi,
    nats: &NatsServer,
    id: &str,
) -> Child {
    let extra = format!(
        "[bus]\nack_wait = \"3s\"\nsession_lease_ttl = \"3s\"\n\n[channels.telegram]\ntoken_env = \"TEST_TG_TOKEN\"\nbase_url = \"{}\"\nallow_chats = [{CHAT}]\nagent = \"assistant\"\npoll_timeout = \"1s\"\n",
        fake.base_url_for(id)
    );
    project
        .with_mock_and(&model.base_url(), &extra)
        .write("agents.d/assistant.toml", "");
    let mut cmd = project.clawbus();
    cmd.args(["up", "--port", "0", "--bus", nats.url(), "--node-id", id])
        .env("TEST_TG_TOKEN", TOKEN);
    spawn_up(project, cmd).await
}

/// The callers that polled so far.
fn pollers(fake: &FakeBotApi) -> Vec<String> {
    fake.polls_by().into_keys().collect()
}

/// How many times the chat got each text.
fn replies(fake: &FakeBotApi) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for m in fake.sent().into_iter().filter(|m| m.chat_id == CHAT) {
        *out.entry(m.text).or_default() += 1;
    }
    out
}

async fn answered(fake: &FakeBotApi, text: &str, within: Duration) {
    let want = format!("re: {text}");
    eventually_within(within, &format!("the chat got {want:?}"), async || {
        replies(fake).contains_key(&want)
    })
    .await;
}

/// Three nodes: the first reply shows one poller; three messages answered; the holder is
/// killed with SIGKILL and a second node polls once the lease expires, from the shared offset;
/// that holder is stopped cleanly and the third takes over. Every message became one task and
/// got one reply, and no two long polls were ever held at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_telegram_channel_polls_on_one_node_and_another_takes_over_when_it_dies() {
    let test = "a_telegram_channel_polls_on_one_node_and_another_takes_over_when_it_dies";
    let Some(nats) = NatsServer::start_or_skip(test) else {
        return;
    };
    let fake = FakeBotApi::start(TOKEN, 1000).await.unwrap();
    let model =
        ScriptedServer::with_responder(|req| Turn::text(format!("re: {}", last_user(req)))).await;
    let projects = [Project::new(), Project::new(), Project::new()];
    let mut nodes: BTreeMap<String, Child> = BTreeMap::new();
    for (i, project) in projects.iter().enumerate() {
        let id = format!("n{}", i + 1);
        let child = node(project, &model, &fake, &nats, &id).await;
        nodes.insert(id, child);
    }
    let net = Duration::from_secs(30);
    let mut sent = Vec::new();
    for k in 1..=3 {
        let text = format!("m{k}");
        fake.push_message(CHAT, "private", &text);
        answered(&fake, &text, net).await;
        sent.push(text);
    }
    let first = pollers(&fake);
    assert_eq!(first.len(), 1, "one node polls: {:?}", fake.polls_by());
    let holder = first[0].clone();

    super::durable::kill9(nodes.remove(&holder).unwrap());
    #[allow(
        clippy::disallowed_methods,
        reason = "a printed figure: the nodes' leases expire in real time"
    )]
    let killed = std::time::Instant::now();
    eventually("another node polls after the kill", async || {
        pollers(&fake).len() == 2
    })
    .await;
    // A figure, not a check: about the lease's time to live (3 s) at most.
    eprintln!(
        "Telegram channel taken over {} ms after the holder's kill -9",
        killed.elapsed().as_millis()
    );
    for k in 4..=5 {
        let text = format!("m{k}");
        fake.push_message(CHAT, "private", &text);
        sent.push(text);
    }
    for text in &sent[3..] {
        answered(&fake, text, Duration::from_secs(20)).await;
    }
    let second: Vec<String> = pollers(&fake)
        .into_iter()
        .filter(|p| *p != holder)
        .collect();
    assert_eq!(second.len(), 1, "one node took over: {:?}", fake.polls_by());
    let successor = second[0].clone();

    // A clean stop releases the lease: the last node takes over without waiting for it to
    // expire.
    stop(nodes.remove(&successor).unwrap()).await;
    fake.push_message(CHAT, "private", "m6");
    sent.push("m6".into());
    answered(&fake, "m6", net).await;
    assert_eq!(
        fake.polls_by().len(),
        3,
        "the third node polls: {:?}",
        fake.polls_by()
    );

    // One more round trip after the last reply: a reply sent twice would be in by now.
    fake.push_message(CHAT, "private", "last");
    sent.push("last".into());
    answered(&fake, "last", net).await;
    let got = replies(&fake);
    for text in &sent {
        assert_eq!(
            got.get(&format!("re: {text}")),
            Some(&1),
            "{text} answered exactly once: {got:?}"
        );
    }
    assert_eq!(got.len(), sent.len(), "no other message: {got:?}");
    assert_eq!(
        fake.max_concurrent_polls(),
        1,
        "never two long polls at once"
    );
    let offsets = fake.offsets();
    assert!(
        offsets.windows(2).all(|w| w[0] <= w[1]),
        "each holder went on from the shared offset, never back: {offsets:?}"
    );
    let survivor = nodes.values().next().unwrap();
    let mut tasks = serde_json::Value::Null;
    eventually(
        "every message is one task in the shared store",
        async || {
            tasks = get_json(survivor, "/v1/tasks?agent=assistant").await;
            tasks["tasks"].as_array().map(Vec::len) == Some(sent.len())
        },
    )
    .await;
    let mut ids: Vec<&str> = tasks["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["request_id"].as_str().unwrap())
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), sent.len(), "one task per update: {tasks}");
    assert!(ids.iter().all(|id| id.starts_with("telegram:")), "{ids:?}");
    assert_eq!(model.request_count(), sent.len(), "each ran once");
    for (_, n) in nodes {
        stop(n).await;
    }
}
