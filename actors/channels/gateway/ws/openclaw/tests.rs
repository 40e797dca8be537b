use super::cron::{AddParams, ListParams, Patch, job, page, runs_page};
use super::{fields, run, status};
use bus::{Envelope, Outcome, RequestId, TaskRecord, TaskState, Topic};
use clawbus_runtime::cron::{
    CatchUp, Delivery, DeliveryMode, Job, JobId, JobSource, JobSpec, JobState, JobView, Payload,
    PayloadKind, RunOutcome, RunRecord, Schedule, ScheduleSpec, SessionTarget,
};
use serde_json::{Value, json};

fn read<T: serde::de::DeserializeOwned>(method: &str, mut params: Value) -> Result<T, String> {
    fields::strip(method, &mut params);
    serde_json::from_value(params).map_err(|e| e.to_string())
}

/// The `patch` of `cron.update {id, patch}`, its ignored fields dropped.
fn read_patch(patch: Value) -> Result<Patch, String> {
    let mut p = json!({ "id": "j", "patch": patch });
    fields::strip("cron.update", &mut p);
    serde_json::from_value(p["patch"].take()).map_err(|e| e.to_string())
}

fn stored(name: &str, enabled: bool, schedule: Schedule) -> JobView {
    JobView {
        job: Job {
            id: JobId::parse(name).unwrap(),
            name: name.into(),
            agent: "main".into(),
            schedule,
            payload: Payload {
                kind: PayloadKind::AgentTurn,
                message: "report".into(),
            },
            session: SessionTarget::Isolated,
            delivery: Delivery::default(),
            enabled,
            catch_up: CatchUp::Latest,
            delete_after_run: false,
            created_at: 1_000,
            updated_at: 2_000,
            source: JobSource::Api,
            active_hours: None,
            created_by: None,
        },
        state: JobState {
            next_fire_ms: Some(3_600_000),
            ..JobState::default()
        },
    }
}

fn every_hour() -> Schedule {
    Schedule::Every {
        every_ms: 3_600_000,
        anchor_ms: None,
    }
}

/// What `openclaw cron add --name X --every 1m --session isolated --message ping --agent main
/// --no-deliver` sends (seen on the wire).
fn cli_add() -> Value {
    json!({
        "name": "X", "enabled": true, "agentId": "main",
        "schedule": { "kind": "every", "everyMs": 60000 },
        "sessionTarget": "isolated", "wakeMode": "now",
        "payload": { "kind": "agentTurn", "message": "ping" },
        "delivery": { "mode": "none", "channel": "last" },
    })
}

#[test]
fn the_fields_openclaw_always_sends_are_dropped_top_level_and_nested() {
    let mut p = json!({
        "message": "hi", "agentId": "main", "thinking": "off", "timeout": 600,
        "idempotencyKey": "k",
    });
    let dropped = fields::strip("agent", &mut p);
    assert_eq!(dropped, ["thinking", "timeout"]);
    assert_eq!(
        p,
        json!({ "message": "hi", "agentId": "main", "idempotencyKey": "k" })
    );
    let mut p = cli_add();
    p["payload"]["model"] = json!("gpt");
    let dropped = fields::strip("cron.add", &mut p);
    assert_eq!(dropped, ["wakeMode", "payload.model"]);
    assert_eq!(
        p["payload"],
        json!({ "kind": "agentTurn", "message": "ping" })
    );
    let mut p = json!({
        "limit": 200, "archived": "all", "includeGlobal": true, "includeUnknown": true,
        "configuredAgentsOnly": true, "idempotencyKey": "k",
    });
    fields::strip("sessions.list", &mut p);
    assert_eq!(
        p,
        json!({ "limit": 200, "archived": "all", "idempotencyKey": "k" }),
        "archived is honoured; idempotencyKey is outside the schema: it stays, and is refused"
    );
}

#[test]
fn a_field_openclaws_schema_does_not_define_is_still_refused() {
    let mut p = cli_add();
    p["bogus"] = json!(1);
    let e = read::<AddParams>("cron.add", p).unwrap_err();
    assert!(e.contains("unknown field `bogus`"), "{e}");
    let mut p = cli_add();
    p["payload"]["bogus"] = json!(1);
    let e = read::<AddParams>("cron.add", p).unwrap_err();
    assert!(e.contains("bogus"), "{e}");
}

#[test]
fn a_cli_cron_add_becomes_the_job_spec_of_the_http_api() {
    let spec = read::<AddParams>("cron.add", cli_add())
        .unwrap()
        .spec("other")
        .unwrap();
    assert_eq!(
        spec,
        JobSpec {
            id: None,
            name: Some("X".into()),
            agent: "main".into(),
            schedule: ScheduleSpec::Every {
                every_ms: 60_000,
                anchor_ms: None
            },
            payload: Payload {
                kind: PayloadKind::AgentTurn,
                message: "ping".into()
            },
            session: SessionTarget::Isolated,
            delivery: Delivery::default(),
            enabled: true,
            catch_up: CatchUp::Latest,
            delete_after_run: false,
        }
    );
    let mut p = cli_add();
    p.as_object_mut().unwrap().remove("agentId");
    let spec = read::<AddParams>("cron.add", p)
        .unwrap()
        .spec("first")
        .unwrap();
    assert_eq!(spec.agent, "first", "no agentId: the default agent");
}

#[test]
fn a_stored_job_reads_as_openclaws_cron_job_and_converts_back_to_the_same_spec() {
    let view = stored("nightly", true, every_hour());
    let shown = job(&view);
    assert_eq!(shown["agentId"], "main");
    assert_eq!(
        shown["schedule"],
        json!({ "kind": "every", "everyMs": 3_600_000 })
    );
    assert_eq!(shown["sessionTarget"], "isolated");
    assert_eq!(shown["wakeMode"], "now");
    assert_eq!(
        shown["payload"],
        json!({ "kind": "agentTurn", "message": "report" })
    );
    assert_eq!(shown["delivery"], json!({ "mode": "none" }));
    assert_eq!(shown["state"]["nextRunAtMs"], 3_600_000);
    assert_eq!(shown["createdAtMs"], 1_000);
    // Back: the job as OpenClaw shows it, given to cron.add, is the same job.
    let mut again = shown.clone();
    for read_only in ["id", "createdAtMs", "updatedAtMs", "state", "nextRunAtMs"] {
        again.as_object_mut().unwrap().remove(read_only);
    }
    let spec = read::<AddParams>("cron.add", again)
        .unwrap()
        .spec("x")
        .unwrap();
    assert_eq!(
        JobSpec { id: None, ..spec },
        JobSpec {
            id: None,
            ..JobSpec::of_job(&view.job)
        }
    );
}

#[test]
fn announce_delivery_and_system_events_convert_both_ways() {
    let mut view = stored("ping", true, every_hour());
    view.job.payload = Payload {
        kind: PayloadKind::SystemEvent,
        message: "wake".into(),
    };
    view.job.delivery = Delivery {
        mode: DeliveryMode::Announce,
        channel: Some("telegram".into()),
        to: Some("42".into()),
    };
    view.job.session = SessionTarget::Main;
    let shown = job(&view);
    assert_eq!(
        shown["payload"],
        json!({ "kind": "systemEvent", "text": "wake" })
    );
    assert_eq!(
        shown["delivery"],
        json!({ "mode": "announce", "channel": "telegram", "to": "42" })
    );
    let patch = read_patch(
        json!({ "payload": shown["payload"], "delivery": shown["delivery"], "sessionTarget": "main" }),
    )
    .unwrap();
    let back = patch.apply(JobSpec::of_job(&stored("p", true, every_hour()).job));
    let back = back.unwrap();
    assert_eq!(back.payload, view.job.payload);
    assert_eq!(back.delivery, view.job.delivery);
    assert_eq!(back.session, SessionTarget::Main);
}

#[test]
fn what_clawbus_cannot_do_is_refused_naming_the_field() {
    let cases = [
        (
            json!({ "schedule": { "kind": "on-exit", "command": "make" } }),
            "schedule.kind",
        ),
        (json!({ "sessionTarget": "current" }), "sessionTarget"),
        (
            json!({ "payload": { "kind": "script", "script": "x" } }),
            "payload.kind",
        ),
        (
            json!({ "delivery": { "mode": "webhook", "to": "http://x" } }),
            "delivery.mode",
        ),
        (
            json!({ "delivery": { "mode": "announce", "channel": "last" } }),
            "delivery.channel",
        ),
    ];
    for (change, field) in cases {
        let mut p = cli_add();
        for (k, v) in change.as_object().unwrap() {
            p[k] = v.clone();
        }
        let e = read::<AddParams>("cron.add", p)
            .unwrap()
            .spec("main")
            .unwrap_err();
        assert!(e.starts_with(field), "{field}: {e}");
    }
}

#[test]
fn a_patch_changes_only_what_it_names() {
    let base = JobSpec::of_job(&stored("keep", true, every_hour()).job);
    let patch = read_patch(json!({ "enabled": false })).unwrap();
    let changed = patch.apply(base.clone()).unwrap();
    assert_eq!(
        changed,
        JobSpec {
            enabled: false,
            ..base.clone()
        }
    );
    let patch = read_patch(json!({ "payload": { "kind": "agentTurn", "model": "m" } })).unwrap();
    assert_eq!(
        patch.apply(base.clone()).unwrap().payload,
        base.payload,
        "a payload patch without a message keeps it"
    );
}

#[test]
fn cron_list_pages_carry_openclaws_inventory_metadata() {
    let all: Vec<JobView> = (0..5)
        .map(|n| stored(&format!("j{n}"), n != 2, every_hour()))
        .collect();
    let p: ListParams = read(
        "cron.list",
        json!({ "includeDisabled": false, "limit": 2, "offset": 0 }),
    )
    .unwrap();
    let first = page(&all, &p).unwrap();
    assert_eq!(first["total"], 4, "the disabled job is left out: {first}");
    assert_eq!(first["jobs"].as_array().unwrap().len(), 2);
    assert_eq!(first["hasMore"], true);
    assert_eq!(first["nextOffset"], 2);
    assert!(
        first["snapshotRevision"]
            .as_str()
            .is_some_and(|r| !r.is_empty())
    );
    let p: ListParams = read(
        "cron.list",
        json!({ "includeDisabled": true, "limit": 200, "offset": 4 }),
    )
    .unwrap();
    let last = page(&all, &p).unwrap();
    assert_eq!(last["total"], 5);
    assert_eq!(last["hasMore"], false);
    assert_eq!(last["nextOffset"], Value::Null);
    let p: ListParams = read("cron.list", json!({ "limit": 500 })).unwrap();
    assert!(page(&all, &p).unwrap_err().contains("limit"));
}

#[test]
fn runs_read_newest_first_as_run_log_entries() {
    let run = |n: u64, outcome| RunRecord {
        job_id: JobId::parse("j").unwrap(),
        scheduled_ms: n,
        started_ms: n,
        ended_ms: n + 5,
        outcome,
        task_id: None,
        error: None,
    };
    let runs = [run(10, RunOutcome::Failed), run(20, RunOutcome::Succeeded)];
    let p = runs_page(&runs, "job", None, None);
    assert_eq!(p["total"], 2);
    assert_eq!(p["entries"][0]["status"], "ok");
    assert_eq!(p["entries"][0]["ts"], 25);
    assert_eq!(p["entries"][0]["durationMs"], 5);
    assert_eq!(p["entries"][1]["status"], "error");
    assert_eq!(p["entries"][1]["action"], "finished");
    assert_eq!(p["entries"][1]["jobName"], "job");
}

fn record(state: TaskState, outcome: Outcome) -> TaskRecord {
    let env = Envelope::task(
        Topic::agent("main"),
        RequestId::parse("r1").unwrap(),
        json!({}),
    );
    TaskRecord {
        task_id: uuid::Uuid::nil(),
        request_id: RequestId::parse("r1").unwrap(),
        state,
        attempts: 1,
        envelope: env.into(),
        outcome: Some(outcome),
        created_ms: 100,
        updated_ms: 130,
        seq: 1,
        progress: None,
        fingerprint: None,
    }
}

#[test]
fn the_end_of_an_agent_run_reads_as_openclaws_final_answer() {
    let ok = record(
        TaskState::Succeeded,
        Outcome::Succeeded {
            result: json!({ "text": "pong" }),
        },
    );
    let v = run::final_answer(&ok, "agent:main:main", "main");
    assert_eq!(v["status"], "ok");
    assert_eq!(v["summary"], "completed");
    assert_eq!(v["result"]["payloads"], json!([{ "text": "pong" }]));
    assert_eq!(v["result"]["meta"]["durationMs"], 30);
    assert_eq!(
        v["result"]["meta"]["agentMeta"]["sessionKey"],
        "agent:main:main"
    );
    let failed = record(
        TaskState::Failed,
        Outcome::Failed {
            error: "model down".into(),
        },
    );
    let v = run::final_answer(&failed, "agent:main:main", "main");
    assert_eq!(v["status"], "error");
    assert_eq!(v["summary"], "model down");
    assert_eq!(v["result"]["payloads"], json!([]));
}

#[test]
fn transcript_entries_read_as_chat_history_messages() {
    let entries = [
        json!({ "id": "a", "ts": 1, "type": "session", "key": "agent:main:main" }),
        json!({ "id": "b", "ts": 2, "type": "message", "request_id": "k1", "message": { "role": "user", "content": "hi" } }),
        json!({ "id": "c", "ts": 3, "type": "message", "request_id": "k1", "message": { "role": "assistant", "content": "pong" } }),
        json!({ "id": "d", "ts": 4, "type": "message", "message": { "role": "tool", "content": "out" } }),
    ];
    let m: Vec<Value> = super::sessions::numbered(&entries)
        .into_iter()
        .map(|n| n.message)
        .collect();
    assert_eq!(m.len(), 3, "only messages: {m:?}");
    assert_eq!(
        m[0],
        json!({
            "id": "b", "role": "user", "content": [{ "type": "text", "text": "hi" }], "timestamp": 2,
            "idempotencyKey": "k1",
            "__openclaw": { "id": "b", "seq": 1, "idempotencyKey": "k1" },
        }),
        "a user message carries its request id as the client's idempotency key"
    );
    assert_eq!(m[1]["content"][0]["text"], "pong");
    assert_eq!(m[1]["__openclaw"], json!({ "id": "c", "seq": 2 }));
    assert_eq!(m[2]["role"], "toolResult");
    assert_eq!(m[2]["__openclaw"]["seq"], 3);

    // The same message as a `session.message` event, while its run is active and after.
    let n = super::sessions::numbered(&entries);
    let row = json!({ "key": "agent:main:main", "sessionId": "s1", "updatedAt": 9 });
    let ev =
        super::sessions::session_message("agent:main:main", "main", "r1", &n[0], Some(row), true);
    assert_eq!(ev["message"], m[0]);
    assert_eq!(ev["messageId"], "b");
    assert_eq!(ev["messageSeq"], 1);
    assert_eq!(ev["sessionId"], "s1");
    assert_eq!(ev["session"]["key"], "agent:main:main");
    assert_eq!(
        (&ev["hasActiveRun"], &ev["activeRunIds"]),
        (&json!(true), &json!(["r1"]))
    );
    let ended =
        super::sessions::session_message("agent:main:main", "main", "r1", &n[1], None, false);
    assert_eq!(
        (&ended["hasActiveRun"], &ended["activeRunIds"]),
        (&json!(false), &json!([]))
    );
    assert_eq!(ended["message"]["role"], "assistant");
}

#[test]
fn status_counts_sessions_by_agent_and_tasks_by_status() {
    let row = |key: &str, agent: &str, updated_ms| crate::gateway::sessions::SessionRow {
        key: key.into(),
        agent: agent.into(),
        session_id: "s".into(),
        state: "idle".into(),
        live: false,
        queued: 0,
        turns: 1,
        updated_ms,
        tokens_in: 1,
        tokens_out: 2,
        archived_ms: None,
    };
    let rows = [
        row("agent:a:main", "a", 10),
        row("agent:b:main", "b", 30),
        row("agent:a:x", "a", 20),
    ];
    let input = status::StatusInput {
        agents: vec!["a".into(), "b".into()],
        model: "mock/m".into(),
        sessions: &rows,
        tasks: vec![TaskState::Succeeded, TaskState::Running, TaskState::Failed],
        now_ms: 100,
    };
    let s = status::status(&input);
    assert_eq!(s["sessions"]["count"], 3);
    assert_eq!(s["sessions"]["recent"][0]["key"], "agent:b:main");
    assert_eq!(s["sessions"]["byAgent"][0]["agentId"], "a");
    assert_eq!(s["sessions"]["byAgent"][0]["count"], 2);
    assert_eq!(s["sessions"]["byAgent"][0]["recent"][0]["key"], "agent:a:x");
    assert_eq!(s["sessions"]["byAgent"][0]["recent"][0]["age"], 80);
    assert_eq!(s["tasks"]["total"], 3);
    assert_eq!(s["tasks"]["active"], 1);
    assert_eq!(s["tasks"]["failures"], 1);
    assert_eq!(s["tasks"]["byStatus"]["succeeded"], 1);
    assert_eq!(s["heartbeat"]["defaultAgentId"], "a");
    let h = status::health(&[], &input, "/state/db");
    assert_eq!(h["ok"], true);
    assert_eq!(h["agents"][1]["sessions"]["count"], 1);
    assert_eq!(h["agents"][0]["isDefault"], true);
    assert_eq!(h["sessions"]["path"], "/state/db");
}

#[test]
fn agent_delivery_fields_are_taken_out_and_a_channel_that_does_not_deliver_is_named() {
    use super::delivery::{DeliveryAsk, Resolved, from_event};
    use clawbus_core::config::ReplyRoutes;
    let mut p = json!({
        "message": "hi", "deliver": true, "channel": "webhook", "to": "ignored",
        "replyChannel": "slack", "replyTo": "#reports", "bestEffortDeliver": false,
    });
    let ask = DeliveryAsk::take(&mut p);
    assert_eq!(
        p,
        json!({ "message": "hi" }),
        "what is left is read as a run's params"
    );
    let routes = ReplyRoutes::default();
    let refused = ask.resolve(&routes).unwrap_err().message;
    assert!(
        refused.contains("\"slack\"") && refused.contains("no delivery"),
        "the reply channel wins over channel, and is named: {refused}"
    );
    let no_channel = DeliveryAsk::take(&mut json!({ "deliver": true, "to": "42" }));
    assert!(
        no_channel
            .resolve(&routes)
            .unwrap_err()
            .message
            .contains("no channel named")
    );
    let no_target = DeliveryAsk::take(&mut json!({ "deliver": true, "channel": "telegram" }));
    assert!(
        no_target
            .resolve(&routes)
            .unwrap_err()
            .message
            .contains("needs a target")
    );
    let best = DeliveryAsk::take(&mut json!({
        "deliver": true, "channel": "telegram", "to": "42", "bestEffortDeliver": true,
    }));
    assert_eq!(best.resolve(&routes).unwrap(), Resolved::Dropped);
    let not_asked = DeliveryAsk::take(&mut json!({ "channel": "slack", "to": "x" }));
    assert_eq!(not_asked.resolve(&routes).unwrap(), Resolved::NotAsked);

    let sent = from_event(&bus::events::TaskEventKind::Delivered {
        target: "webhook:deploys".into(),
        attempts: 1,
    })
    .unwrap();
    assert_eq!(sent["status"], "sent");
    assert_eq!(sent["succeeded"], true);
    let failed = from_event(&bus::events::TaskEventKind::DeliveryFailed {
        target: "telegram:42".into(),
        attempts: 3,
        reason: "HTTP 403".into(),
    })
    .unwrap();
    assert_eq!(failed["status"], "failed");
    assert_eq!(failed["errorMessage"], "HTTP 403");
}
