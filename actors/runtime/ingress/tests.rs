use super::*;
use crate::origin::Header;
use bus::BusOptions;
use clawbus_core::config::{self, LoadOptions};

struct Fx {
    _dir: tempfile::TempDir,
    ingress: Ingress,
}

/// A pipeline over a fresh bus, routing with agents `writer` (bound to channel `demo`) and
/// `reader`.
fn fx() -> Fx {
    let dir = tempfile::tempdir().unwrap();
    let agents = dir.path().join("agents.d");
    std::fs::create_dir_all(&agents).unwrap();
    std::fs::write(
        agents.join("writer.toml"),
        "[[bindings]]\nchannel = \"demo\"\n",
    )
    .unwrap();
    std::fs::write(agents.join("reader.toml"), "").unwrap();
    let opts = LoadOptions {
        config: dir.path().join("clawbus.toml"),
        agents_dir: agents,
        state_dir: None,
        model_override: None,
    };
    let cfg = config::load(&opts).unwrap_or_else(|r| panic!("{}", r.render()));
    let db = sled::open(dir.path().join("db")).unwrap();
    let bus = bus::open(BusOptions::default(), db).unwrap().bus;
    Fx {
        _dir: dir,
        ingress: Ingress::routed(bus, Arc::new(Router::new(&cfg))),
    }
}

fn rid(s: &str) -> RequestId {
    RequestId::parse(s).unwrap()
}

fn to_writer(id: &str, lane: &str) -> Request {
    let origin = Origin {
        lane: lane.into(),
        ..Origin::api()
    };
    Request::new(
        Target::Agent(AgentId::new("writer")),
        rid(id),
        "hi",
        "http",
        origin,
    )
}

#[actix_rt::test]
async fn a_routed_message_gets_the_bound_agent_its_session_and_its_headers() {
    let fx = fx();
    let origin = Origin {
        channel: "demo".into(),
        chat_type: "direct".into(),
        peer: "alice".into(),
        ..Origin::api()
    };
    let mut req = Request::new(
        Target::Routed { agent: None },
        rid("m1"),
        "hello",
        "channel:demo",
        origin,
    );
    req.deadline_ms = Some(42);
    let s = fx.ingress.submit(req).await.unwrap();
    assert_eq!(s.agent.as_ref().map(AgentId::as_str), Some("writer"));
    assert_eq!(
        s.session.as_ref().map(SessionKey::as_str),
        Some("agent:writer:demo:direct:alice")
    );
    let env = &s.task.envelope;
    assert_eq!(env.topic.as_str(), "agent.writer");
    assert_eq!(env.payload["text"], "hello");
    assert_eq!(env.deadline, Some(42));
    assert_eq!(
        env.headers
            .get(Header::SessionKey.as_str())
            .map(String::as_str),
        Some("agent:writer:demo:direct:alice")
    );
    assert!(!s.duplicate);
}

#[actix_rt::test]
async fn unknown_agents_and_unbound_channels_are_typed_errors() {
    let fx = fx();
    let mut req = to_writer("u1", "main");
    req.target = Target::Agent(AgentId::new("ghost"));
    let e = fx.ingress.submit(req).await.unwrap_err();
    assert!(
        matches!(e, IngressError::UnknownAgent(ref a) if a == "ghost"),
        "{e:?}"
    );
    let origin = Origin {
        channel: "elsewhere".into(),
        chat_type: "direct".into(),
        peer: "bob".into(),
        ..Origin::api()
    };
    let req = Request::new(Target::Routed { agent: None }, rid("u2"), "x", "t", origin);
    let e = fx.ingress.submit(req).await.unwrap_err();
    assert!(matches!(e, IngressError::Unbound(_)), "{e:?}");
}

#[actix_rt::test]
async fn a_duplicate_in_another_lane_conflicts_only_under_the_same_place_rule() {
    let fx = fx();
    fx.ingress.submit(to_writer("d1", "main")).await.unwrap();
    let again = fx.ingress.submit(to_writer("d1", "main")).await.unwrap();
    assert!(again.duplicate);
    let e = fx
        .ingress
        .submit(to_writer("d1", "cron"))
        .await
        .unwrap_err();
    match e {
        IngressError::Conflict(m) => assert!(m.contains("lane \"main\""), "{m}"),
        e => panic!("{e:?}"),
    }
    let mut same_work = to_writer("d1", "cron");
    same_work.duplicates = Duplicates::SameWork;
    assert!(fx.ingress.submit(same_work).await.unwrap().duplicate);
}

#[actix_rt::test]
async fn other_work_under_a_known_request_id_is_joined_only_under_the_join_rule() {
    let fx = fx();
    let first = fx.ingress.submit(to_writer("j1", "main")).await.unwrap();
    let mut other = to_writer("j1", "main");
    other.text = "something else".into();
    let e = fx.ingress.submit(other.clone()).await.unwrap_err();
    assert!(
        matches!(e, IngressError::Bus(BusError::Conflict { .. })),
        "{e:?}"
    );
    other.duplicates = Duplicates::Join;
    let joined = fx.ingress.submit(other).await.unwrap();
    assert!(joined.duplicate);
    assert_eq!(joined.task.task_id, first.task.task_id);
}

#[actix_rt::test]
async fn a_wait_that_times_out_answers_the_task_as_it_stands() {
    let fx = fx();
    let s = fx.ingress.submit(to_writer("w1", "main")).await.unwrap();
    let waited = fx
        .ingress
        .wait(&rid("w1"), Duration::from_millis(1), &s.task)
        .await
        .unwrap();
    assert!(matches!(waited, Waited::Pending(_)));
    assert_eq!(waited.record().task_id, s.task.task_id);
}
