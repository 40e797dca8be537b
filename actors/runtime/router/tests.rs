use super::*;
use clawbus_core::config::{self, LoadOptions};

fn config_with(files: &[(&str, &str)]) -> (tempfile::TempDir, Config) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("agents.d")).unwrap();
    for (name, text) in files {
        std::fs::write(dir.path().join("agents.d").join(name), text).unwrap();
    }
    let opts = LoadOptions {
        config: dir.path().join("clawbus.toml"),
        agents_dir: dir.path().join("agents.d"),
        state_dir: None,
        model_override: None,
    };
    let cfg = config::load(&opts).unwrap_or_else(|r| panic!("{}", r.render()));
    (dir, cfg)
}

fn inbound(channel: &str, chat: &str, peer: &str) -> Inbound {
    Inbound {
        channel: channel.into(),
        chat_type: chat.into(),
        peer: peer.into(),
        request_id: "r1".into(),
        ..Inbound::default()
    }
}

#[test]
fn session_keys_use_openclaws_format() {
    let a = AgentId::new("main");
    assert_eq!(SessionKey::main(&a).as_str(), "agent:main:main");
    assert_eq!(
        SessionKey::peer(&a, "telegram", "direct", "42").as_str(),
        "agent:main:telegram:direct:42"
    );
    assert_eq!(
        SessionKey::task(&a, "r-9").as_str(),
        "agent:main:api:task:r-9"
    );
    assert_eq!(
        SessionKey::named(&a, "notes").as_str(),
        "agent:main:api:direct:notes"
    );
    assert_eq!(
        SessionKey::peer(&a, "x", "group", "a:b").as_str(),
        "agent:main:x:group:a_b",
        "':' cannot split a key"
    );
    assert_eq!(
        SessionKey::parse("agent:main:api:direct:notes")
            .unwrap()
            .agent(),
        "main"
    );
    assert!(SessionKey::parse("main:notes").is_err());
    assert!(SessionKey::parse("agent::x").is_err());
}

#[test]
fn scripts_get_a_session_per_task_unless_they_name_one() {
    let (_d, cfg) = config_with(&[("writer.toml", "")]);
    let router = Router::new(&cfg);
    let mut m = inbound("api", "task", "script");
    m.agent = Some(AgentId::new("writer"));
    assert_eq!(
        router.route(&m).unwrap().session.as_str(),
        "agent:writer:api:task:r1"
    );
    m.session_name = Some("draft".into());
    assert_eq!(
        router.route(&m).unwrap().session.as_str(),
        "agent:writer:api:direct:draft"
    );
    m.agent = Some(AgentId::new("ghost"));
    assert_eq!(
        router.route(&m).unwrap_err(),
        RouteError::UnknownAgent("ghost".into())
    );
}

#[test]
fn bindings_pick_the_most_specific_agent() {
    let (_d, cfg) = config_with(&[
        ("general.toml", "[[bindings]]\nchannel = \"telegram\"\n"),
        (
            "vip.toml",
            "[[bindings]]\nchannel = \"telegram\"\nchat_type = \"direct\"\npeer = \"7\"\n",
        ),
    ]);
    let router = Router::new(&cfg);
    let vip = router.route(&inbound("telegram", "direct", "7")).unwrap();
    assert_eq!(
        (vip.agent.as_str(), vip.session.as_str()),
        ("vip", "agent:vip:telegram:direct:7")
    );
    assert_eq!(
        router
            .route(&inbound("telegram", "group", "9"))
            .unwrap()
            .agent
            .as_str(),
        "general"
    );
    assert!(matches!(
        router.route(&inbound("slack", "direct", "1")),
        Err(RouteError::Unbound { .. })
    ));
}

#[test]
fn a_conversation_key_records_its_channel() {
    let key = |s: &str| SessionKey::parse(s).unwrap();
    assert_eq!(
        key("agent:a:telegram:group:-100").channel(),
        Some("telegram")
    );
    assert_eq!(key("agent:a:api:task:r:1").channel(), Some("api"));
    assert_eq!(key("agent:a:main").channel(), None);
}
