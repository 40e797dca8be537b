//! The `browser` tool in whole turns with a real headless Chromium: a scripted model opens a
//! form, types into the field by the ref the snapshot gave, submits, and reads the next page;
//! the browser is gone once the daemon stops. Skipped with a printed reason when no Chromium is
//! found, failed instead under `CI=true`.

use crate::support::{Project, post_task, tool_results};
use clawbus::ids::AgentId;
use clawbus::testkit::{FixtureSite, ScriptedServer, Turn, chromium_or_skip, processes_naming};
use serde_json::{Value, json};

/// The ref on the first snapshot line that holds `needle`.
fn ref_of(snapshot: &str, needle: &str) -> Option<String> {
    let line = snapshot
        .lines()
        .find(|l| l.contains(needle) && l.contains("[ref="))?;
    let at = line.find("[ref=")? + 5;
    Some(line[at..].split(']').next()?.to_string())
}

#[actix_rt::test]
async fn an_agent_fills_a_form_by_ref_and_its_browser_stops_with_the_daemon() {
    let test = "an_agent_fills_a_form_by_ref_and_its_browser_stops_with_the_daemon";
    let Some(exe) = chromium_or_skip(test) else {
        return;
    };
    let site = FixtureSite::start().await;
    let form = site.url("/form");
    let server = ScriptedServer::with_responder(move |req: &Value| {
        let results = tool_results(req);
        match results.len() {
            0 => Turn::tool_call("browser", json!({ "action": "open", "url": form })),
            1 => match ref_of(&results[0], "textbox \"Query\"") {
                Some(r) => Turn::tool_call(
                    "browser",
                    json!({ "action": "act", "ref": r, "kind": "type", "text": "from the model", "submit": true }),
                ),
                None => Turn::text(format!("no field in: {}", results[0])),
            },
            _ => Turn::text("done"),
        }
    })
    .await;
    let project = Project::new();
    project
        .write(
            "clawbus.toml",
            &format!(
                "[providers.mock]\nkind = \"openai\"\nbase_url = \"{}\"\ntimeout = \"30s\"\nmax_retries = 0\n\n[defaults]\nmodel = \"mock/test-model\"\n\n[browser]\nexecutable = \"{}\"\ntest_allow_origins = [\"{}\"]\n",
                server.base_url(),
                exe.display(),
                site.origin()
            ),
        )
        .write(
            "agents.d/surfer.toml",
            "description = \"Browses.\"\n[tools]\nprofile = \"full\"\n",
        )
        .write("agents.d/coder.toml", "description = \"Codes.\"\n");
    let daemon = project.start().await;
    let (status, body) = post_task(
        &daemon,
        "surfer",
        json!({ "text": "send the form", "wait": true }),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["state"], "succeeded", "{body}");
    let last = server.requests().last().cloned().unwrap();
    let offered = crate::support::offered_tools(&server.requests()[0]);
    assert!(offered.contains(&"browser".to_string()), "{offered:?}");
    let results = tool_results(&last);
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(
        results[1].contains("You sent: from the model"),
        "the act answers the submitted page: {}",
        results[1]
    );
    assert!(
        results[1].contains("<<<EXTERNAL_UNTRUSTED_CONTENT"),
        "{}",
        results[1]
    );

    // The coding profile does not offer it.
    let (status, body) = post_task(&daemon, "coder", json!({ "text": "hi", "wait": true })).await;
    assert_eq!(status, 200, "{body}");
    let coder_offered = crate::support::offered_tools(&server.requests().last().cloned().unwrap());
    assert!(
        !coder_offered.contains(&"browser".to_string()),
        "{coder_offered:?}"
    );

    let surfer = AgentId::parse("surfer").unwrap();
    assert!(daemon.system().browsers().pid(&surfer).await.is_some());
    let profile = project.state_dir().join("browser/surfer/profile");
    assert!(!processes_naming(&profile).is_empty(), "the browser runs");
    assert!(
        project
            .state_dir()
            .join("browser/surfer/status.json")
            .is_file()
    );
    // The operator's view: `clawbus browser status`, as text and as JSON.
    let pid = daemon.system().browsers().pid(&surfer).await.unwrap();
    let mut cmd = project.clawbus();
    cmd.args(["browser", "status"]);
    let out = crate::support::run_cmd(cmd).await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains(&format!("surfer: pid {pid} running, ")) && text.contains(" MiB, 1 tab(s)"),
        "{text}"
    );
    assert!(
        text.contains(&format!("  t1 \"Result\" {}", site.url("/result?q="))),
        "the tab with its title and URL: {text}"
    );
    let mut cmd = project.clawbus();
    cmd.args(["browser", "status", "--json"]);
    let out = crate::support::run_cmd(cmd).await;
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    let b = &json["browsers"][0];
    assert_eq!(b["agent"], "surfer", "{json}");
    assert_eq!(b["pid"], pid, "{json}");
    assert_eq!(b["running"], true, "{json}");
    assert!(b["rss_bytes"].as_u64().unwrap() > 0, "{json}");
    assert_eq!(b["tabs"].as_array().unwrap().len(), 1, "{json}");
    daemon.shutdown().await;
    assert_eq!(
        processes_naming(&profile),
        Vec::<u32>::new(),
        "no Chromium is left after the daemon stopped"
    );
}
