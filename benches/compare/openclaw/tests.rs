//! The pure parts of the OpenClaw driver: cache folder, config, CLI output, WS frames, the
//! process tree.

use super::gateway::{self, Proc, parse_cli_turn};
use super::install::cache_dir;
use super::ws;
use super::*;
use serde_json::json;

#[test]
fn cache_dir_prefers_the_flag_then_xdg_then_home() {
    let flag = Path::new("/c");
    assert_eq!(
        cache_dir(Some(flag), Some("/x"), Some("/h")),
        Some(PathBuf::from("/c"))
    );
    assert_eq!(
        cache_dir(None, Some("/x"), Some("/h")),
        Some(PathBuf::from("/x/clawbus-bench"))
    );
    assert_eq!(
        cache_dir(None, Some(" "), Some("/h")),
        Some(PathBuf::from("/h/.cache/clawbus-bench")),
        "an empty XDG_CACHE_HOME counts as unset"
    );
    assert_eq!(cache_dir(None, None, None), None);
}

#[test]
fn config_binds_loopback_with_token_and_calls_nothing_outside() {
    let c = gateway::config(4321, "tok", "http://127.0.0.1:9/v1");
    assert_eq!(c["gateway"]["port"], 4321);
    assert_eq!(c["gateway"]["bind"], "loopback");
    assert_eq!(
        c["gateway"]["auth"],
        json!({ "mode": "token", "token": "tok" })
    );
    assert_eq!(c["models"]["catalogRefresh"]["enabled"], false);
    assert_eq!(c["update"]["checkOnStart"], false);
    assert_eq!(c["discovery"]["mdns"]["mode"], "off");
    let zero = &c["models"]["providers"]["zero"];
    assert_eq!(zero["baseUrl"], "http://127.0.0.1:9/v1");
    assert_eq!(zero["api"], "openai-completions");
    assert_eq!(
        c["agents"]["defaults"]["model"]["primary"],
        format!("zero/{}", zero["models"][0]["id"].as_str().unwrap()),
        "the default model is the provider's one model"
    );
}

#[test]
fn cli_output_is_parsed_after_any_leading_lines() {
    let out = r#"[plugins] loaded
{
  "runId": "r1",
  "status": "ok",
  "summary": "completed",
  "result": { "payloads": [{ "text": "ok", "mediaUrl": null }],
              "meta": { "durationMs": 290, "agentMeta": { "provider": "zero" } } }
}
"#;
    let turn = parse_cli_turn(out).unwrap();
    assert_eq!(turn.run_id, "r1");
    assert_eq!(turn.text, "ok");
    assert_eq!(turn.duration_ms, Some(290.0));
}

#[test]
fn cli_output_that_failed_or_is_not_json_is_an_error_saying_so() {
    let failed = r#"{"runId":"r","status":"error","summary":"model failed","result":{}}"#;
    let e = parse_cli_turn(failed).unwrap_err();
    assert!(e.contains("\"error\"") && e.contains("model failed"), "{e}");
    let e = parse_cli_turn("Gateway not reachable\n").unwrap_err();
    assert!(e.contains("no JSON object"), "{e}");
    let e = parse_cli_turn("{ not json\n").unwrap_err();
    assert!(e.contains("not JSON"), "{e}");
}

#[test]
fn ws_connect_is_a_backend_gateway_client_with_the_token() {
    let p = ws::connect_params("tok");
    assert_eq!(p["client"]["id"], "gateway-client");
    assert_eq!(p["client"]["mode"], "backend");
    assert_eq!(p["auth"]["token"], "tok");
    assert_eq!(
        (p["minProtocol"].clone(), p["maxProtocol"].clone()),
        (json!(4), json!(4))
    );
    assert!(
        p["scopes"]
            .as_array()
            .unwrap()
            .contains(&json!("operator.write"))
    );
}

#[test]
fn ws_answers_give_the_payload_or_the_error_with_its_code() {
    let ok = json!({ "type": "res", "id": "1", "ok": true, "payload": { "runId": "r" } });
    assert_eq!(ws::payload("agent", ok).unwrap()["runId"], "r");
    let refused = json!({ "type": "res", "id": "2", "ok": false, "error": {
        "code": "FORBIDDEN", "message": "missing scope: operator.write",
        "details": { "code": "MISSING_SCOPE" } } });
    let e = ws::payload("agent", refused).unwrap_err().to_string();
    assert!(
        e.contains("`agent`") && e.contains("FORBIDDEN") && e.contains("MISSING_SCOPE"),
        "{e}"
    );
}

#[test]
fn a_finished_run_gives_its_reply_and_tools() {
    let done = json!({ "status": "ok",
        "terminalReceipt": { "successfulToolNames": ["read"] },
        "terminalReply": { "disposition": "visible", "text": "done" } });
    assert_eq!(ws::reply_text(&done), "done");
    assert_eq!(ws::tools_used(&done), vec!["read"]);
    assert!(ws::tools_used(&json!({})).is_empty());
}

#[test]
fn tree_rss_sums_the_root_and_its_descendants_only() {
    let p = |pid, ppid, rss_kib| Proc { pid, ppid, rss_kib };
    let procs = [
        p(1, 0, 5),
        p(10, 1, 1000),
        p(11, 10, 100),
        p(12, 11, 10),
        p(13, 1, 7),
    ];
    assert_eq!(gateway::tree_rss_kib(10, &procs), 1110);
    let mut d = gateway::descendants(10, &procs);
    d.sort();
    assert_eq!(d, vec![11, 12]);
}

#[test]
fn ansi_colours_are_stripped_from_logs() {
    let log = b"\x1b[90m2026-12-01\x1b[39m \x1b[36m[gateway]\x1b[39m ready";
    assert_eq!(gateway::strip_ansi(log), b"2026-12-01 [gateway] ready");
}

#[test]
fn openclaw_sizes_are_capped_and_never_above_clawbus() {
    let s = super::super::Sizes {
        starts: 10,
        turns: 200,
        calls: 50,
        concurrency: vec![20, 200],
        repeats: 5,
        sessions: 5_000,
        bus_tasks: 1,
        bus_runs: 1,
        fsyncs: 1,
        idle_wait: Duration::from_secs(3),
    };
    let o = OpenClawSizes::from(&s);
    assert_eq!(
        (o.starts, o.cli_turns, o.ws_turns, o.tool_turns),
        (3, 20, 50, 10)
    );
    assert_eq!(o.concurrency, vec![(20, 3), (200, 1)]);
    let tiny = OpenClawSizes::from(&super::super::Sizes {
        turns: 2,
        starts: 1,
        ..s
    });
    assert_eq!((tiny.starts, tiny.cli_turns, tiny.ws_turns), (1, 2, 2));
}

#[test]
fn the_note_reports_install_and_failures_on_one_line() {
    let o = Outcome {
        cache: PathBuf::from("/c"),
        install: Some(InstallOutcome::Installed {
            node: Duration::from_secs(7),
            openclaw: Duration::from_secs(31),
        }),
        sizes: OpenClawSizes {
            starts: 3,
            cli_turns: 20,
            ws_turns: 50,
            tool_turns: 10,
            concurrency: vec![(20, 3)],
            idle_wait: Duration::from_secs(3),
        },
        figures: Vec::new(),
        problems: vec!["CliTurn: turn via CLI: bad\nsecond line".into()],
        cli_gateway_ms: Some(Stat::of(vec![250.0])),
    };
    let note = o.note();
    assert!(
        note.contains("installed into /c in 38.0 s (node 7.0 s, openclaw 31.0 s)"),
        "{note}"
    );
    assert!(
        note.contains("Failed: CliTurn: turn via CLI: bad second line."),
        "{note}"
    );
    assert!(!note.contains('\n'), "{note}");
    assert!(note.contains("`durationMs` was 250.0 ms"), "{note}");
    assert_eq!(o.json()["install"]["seconds"], 38.0);
}
