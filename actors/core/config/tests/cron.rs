//! `[[cron]]`, `[heartbeat]` and `[gateway] timezone`: parsed into specs, every bad value
//! reported with file:line:col.

use super::Fixture;
use crate::config::load;
use crate::jobs::{DeliveryMode, PayloadKind, ScheduleSpec, SessionTarget};

#[test]
fn cron_tables_and_heartbeat_become_specs() {
    let fx = Fixture::new();
    fx.write(
        "clawbus.toml",
        "[gateway]\ntimezone = \"Asia/Shanghai\"\n[channels.telegram]\ntoken_env = \"TG_TOKEN\"\n[webhooks.ops]\nagent = \"ops\"\nsecret_env = \"OPS_SECRET\"\ndeliver_url = \"http://127.0.0.1:9/hook\"\n",
    );
    fx.write(
        "agents.d/ops.toml",
        r#"timezone = "Europe/Paris"
[[cron]]
id = "daily"
cron = "0 9 * * 1-5"
message = "Summarise the inbox"
announce = "telegram:42"
[[cron]]
id = "tick"
every = "10m"
system_event = "check the queue"
session = "main"
catch_up = "none"
[heartbeat]
every = "1h"
active_hours = "08:00-22:00"
to = "webhook:ops"
"#,
    );
    let config = load(&fx.opts()).unwrap();
    assert_eq!(config.gateway.timezone, chrono_tz::Asia::Shanghai);
    let ops = config.agent("ops").unwrap();
    assert_eq!(ops.cron.len(), 2);
    let daily = &ops.cron[0];
    assert_eq!(daily.id.as_deref(), Some("ops--daily"));
    assert_eq!(daily.agent, "ops");
    assert_eq!(
        daily.schedule,
        ScheduleSpec::Cron {
            expr: "0 9 * * 1-5".into(),
            tz: None
        }
    );
    assert_eq!(daily.delivery.mode, DeliveryMode::Announce);
    assert_eq!(daily.delivery.channel.as_deref(), Some("telegram"));
    assert_eq!(daily.delivery.to.as_deref(), Some("42"));
    let tick = &ops.cron[1];
    assert_eq!(tick.payload.kind, PayloadKind::SystemEvent);
    assert_eq!(tick.session, SessionTarget::Main);
    assert_eq!(
        tick.schedule,
        ScheduleSpec::Every {
            every_ms: 600_000,
            anchor_ms: None
        }
    );
    let hb = &ops.heartbeat;
    assert_eq!(hb.every_ms, 3_600_000);
    let hours = hb.active_hours.as_ref().unwrap();
    assert_eq!((hours.start_min, hours.end_min), (480, 1320));
    assert_eq!(
        hours.tz, "Europe/Paris",
        "the agent's timezone is the default"
    );
    assert_eq!(hb.delivery.channel.as_deref(), Some("webhook"));
}

#[test]
fn check_reports_bad_cron_tables_with_file_line_col() {
    let fx = Fixture::new();
    fx.write("clawbus.toml", "[gateway]\ntimezone = \"Mars/Olympus\"\n");
    fx.write(
        "agents.d/ops.toml",
        r#"[[cron]]
id = "a"
cron = "61 * * * *"
message = "x"
[[cron]]
id = "b"
cron = "0 9 * * *"
tz = "Nowhere/City"
message = "x"
[[cron]]
id = "c"
at = "2001-01-01T00:00:00Z"
message = "x"
[[cron]]
id = "a"
every = "10m"
message = "x"
[[cron]]
id = "e"
message = "no schedule"
[heartbeat]
active_hours = "8-22"
"#,
    );
    let lines = fx.lines(&fx.errors(&fx.opts()));
    let expected = [
        "clawbus.toml:2:12: field \"gateway.timezone\": unknown timezone \"Mars/Olympus\"",
        "agents.d/ops.toml:3:8: field \"cron[0].cron\": invalid cron expression \"61 * * * *\"",
        "agents.d/ops.toml:8:6: field \"cron[1].tz\": unknown timezone \"Nowhere/City\"",
        "agents.d/ops.toml:12:6: field \"cron[2].at\": 2001-01-01T00:00:00Z is in the past",
        "agents.d/ops.toml:15:6: field \"cron[3].id\": duplicate cron id \"a\"",
        "agents.d/ops.toml:19:6: field \"cron[4].every\": expected exactly one of every",
        "agents.d/ops.toml:22:16: field \"heartbeat.active_hours\": invalid active hours \"8-22\"",
    ];
    for want in expected {
        assert!(
            lines.iter().any(|l| l.starts_with(want)),
            "missing {want:?} in {lines:#?}"
        );
    }
    assert_eq!(lines.len(), expected.len(), "{lines:#?}");
}

#[test]
fn check_rejects_announcements_to_channels_that_do_not_deliver_with_file_line_col() {
    let fx = Fixture::new();
    fx.write(
        "clawbus.toml",
        "[webhooks.ci]\nagent = \"ops\"\nsecret_env = \"CI_SECRET\"\ndeliver_url = \"http://127.0.0.1:9/hook\"\n",
    );
    fx.write(
        "agents.d/ops.toml",
        r#"[[cron]]
id = "a"
every = "1h"
message = "x"
announce = "telegram:42"
[[cron]]
id = "b"
every = "1h"
message = "x"
announce = "webhook:deploys"
[[cron]]
id = "c"
every = "1h"
message = "x"
announce = "webhook:ci"
[heartbeat]
to = "slack:ops"
"#,
    );
    let lines = fx.lines(&fx.errors(&fx.opts()));
    let expected = [
        "agents.d/ops.toml:5:12: field \"cron[0].announce\": channel \"telegram\" is not configured",
        "agents.d/ops.toml:10:12: field \"cron[1].announce\": no webhook \"deploys\" with a deliver_url (expected one of: ci)",
        "agents.d/ops.toml:17:6: field \"heartbeat.to\": channel \"slack\" has no delivery",
    ];
    for want in expected {
        assert!(
            lines.iter().any(|l| l.starts_with(want)),
            "missing {want:?} in {lines:#?}"
        );
    }
    assert_eq!(lines.len(), expected.len(), "{lines:#?}");
}

#[test]
fn the_cron_section_sets_the_limits_on_jobs_models_add() {
    let fx = Fixture::new();
    fx.write("agents.d/ops.toml", "");
    let config = load(&fx.opts()).unwrap();
    assert_eq!(config.cron, crate::config::CronDef::default());
    assert_eq!(config.cron.min_interval, std::time::Duration::from_secs(60));
    assert_eq!(config.cron.max_agent_jobs, 10);
    fx.write(
        "clawbus.toml",
        "[cron]\nmin_interval = \"5m\"\nmax_agent_jobs = 3\n",
    );
    let config = load(&fx.opts()).unwrap();
    assert_eq!(
        config.cron.min_interval,
        std::time::Duration::from_secs(300)
    );
    assert_eq!(config.cron.max_agent_jobs, 3);
    fx.write(
        "clawbus.toml",
        "[cron]\nmin_interval = \"soon\"\nmax_agent_jobs = -1\n",
    );
    let lines = fx.lines(&fx.errors(&fx.opts()));
    for want in [
        "clawbus.toml:2:16: field \"cron.min_interval\": invalid duration \"soon\"",
        "clawbus.toml:3:18: field \"cron.max_agent_jobs\": -1 is out of range",
    ] {
        assert!(
            lines.iter().any(|l| l.starts_with(want)),
            "{want}: {lines:#?}"
        );
    }
}
