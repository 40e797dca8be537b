//! The system prompt as the model receives it: layers in order, reassembled before every model
//! call, secrets kept out; and `clawbus prompt` reporting where the characters go.

use crate::support::{Project, post_task, roles};
use clawbus::testkit::{ScriptedServer, Turn};
use serde_json::{Value, json};
use std::path::Path;
use std::process::{Command, Stdio};

fn system_of(request: &Value) -> String {
    assert_eq!(request["messages"][0]["role"], "system");
    request["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_string()
}

fn at(text: &str, needle: &str) -> usize {
    text.find(needle)
        .unwrap_or_else(|| panic!("{needle:?} must be in the system prompt:\n{text}"))
}

#[actix_rt::test]
async fn layers_are_in_order_and_reassembled_before_every_model_call() {
    let server = ScriptedServer::start(vec![
        Turn::tool_call(
            "write",
            json!({ "path": "MEMORY.md", "content": "- The user's cat is called Miso.\n" }),
        ),
        Turn::text("Noted."),
    ])
    .await;
    let project = Project::new();
    project
        .with_mock_provider(&server.base_url(), "5s", 0)
        .write("agents.d/keeper.toml", "timezone = \"Europe/Berlin\"\n")
        .write("agents.d/keeper/SOUL.md", "soul: calm and exact\n")
        .write(
            "agents.d/keeper/AGENTS.md",
            "agents: keep notes in MEMORY.md\n",
        )
        .write("agents.d/keeper/TOOLS.md", "tools: prefer write\n")
        .write("agents.d/keeper/USER.md", "user: likes cats\n")
        .write("agents.d/keeper/MEMORY.md", "- nothing yet\n");
    let daemon = project.start().await;
    let (status, body) = post_task(
        &daemon,
        "keeper",
        json!({ "text": "my cat is called Miso", "wait": true }),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["state"], "succeeded", "{body}");

    let reqs = server.requests();
    assert_eq!(reqs.len(), 2, "one call for the tool, one for the answer");
    let first = system_of(&reqs[0]);
    let order = [
        "soul: calm and exact",
        "agents: keep notes in MEMORY.md",
        "tools: prefer write",
        "user: likes cats",
        "## MEMORY.md\n- nothing yet",
        "EXTERNAL_UNTRUSTED_CONTENT",
        "# Runtime\nagent=keeper ",
    ];
    let positions: Vec<usize> = order.iter().map(|n| at(&first, n)).collect();
    assert!(
        positions.windows(2).all(|w| w[0] < w[1]),
        "layers stable first: {order:?} at {positions:?}\n{first}"
    );
    let runtime = first.trim_end().lines().last().unwrap();
    assert!(
        runtime.starts_with("agent=keeper session=agent:keeper:")
            && runtime.contains(" channel=api model=mock/test-model time=")
            && runtime.contains("(Europe/Berlin, "),
        "the runtime line comes last: {runtime}"
    );
    assert!(
        !first.contains("my cat is called Miso"),
        "the message is not part of the system prompt"
    );
    assert_eq!(roles(&reqs[0]), ["system", "user"]);
    assert_eq!(reqs[0]["messages"][1]["content"], "my cat is called Miso");

    let second = system_of(&reqs[1]);
    assert!(
        second.contains("## MEMORY.md\n- The user's cat is called Miso.")
            && !second.contains("- nothing yet"),
        "the second call sees the memory the first call's tool wrote:\n{second}"
    );
    let prefix = &first[..at(&first, "## MEMORY.md")];
    assert!(
        second.starts_with(prefix),
        "everything before the changed layer is byte-identical (cacheable prefix)"
    );
    daemon.shutdown().await;
}

/// Every file under `dir`, except the agents' workspaces (where the test planted the secret).
fn state_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.file_name().is_some_and(|n| n == "workspaces") {
            continue;
        }
        if path.is_dir() {
            state_files(&path, out);
        } else {
            out.push(path);
        }
    }
}

#[actix_rt::test]
async fn a_planted_secret_never_reaches_a_model_request_or_the_state_files() {
    let unique = format!(
        "{}_{}",
        std::process::id(),
        uuid::Uuid::new_v4().simple().to_string().to_uppercase()
    );
    let var = format!("TEST_PLANTED_KEY_{unique}");
    let secret = format!("sk-planted-{}", uuid::Uuid::new_v4().simple());
    let server = ScriptedServer::start(vec![
        Turn::tool_calls(vec![
            ("memory_get", json!({ "path": "MEMORY.md" })),
            ("read", json!({ "path": "AGENTS.md" })),
            ("memory_search", json!({ "query": "deploy key" })),
        ]),
        Turn::text("done"),
    ])
    .await;
    let project = Project::new();
    project
        .write(
            "clawbus.toml",
            &format!(
                "[providers.mock]\nkind = \"openai\"\nbase_url = \"{}\"\napi_key_env = \"{var}\"\ntimeout = \"5s\"\nmax_retries = 0\n\n[defaults]\nmodel = \"mock/test-model\"\n",
                server.base_url()
            ),
        )
        .write("agents.d/keeper.toml", "")
        .write(
            "agents.d/keeper/AGENTS.md",
            &format!("Never share the deploy key {secret}.\n"),
        )
        .write(
            "agents.d/keeper/MEMORY.md",
            &format!("- deploy key: {secret}\n"),
        );
    // The daemon runs as a child: the test cannot set its own environment without `unsafe`.
    let mut child = project
        .clawbus()
        .env(&var, &secret)
        .args(["up", "--port", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let line = crate::support::first_line_async(child.stdout.take().unwrap()).await;
    let url = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("the daemon announces its address: {line:?}"))
        .to_string();
    let mut post = project.clawbus();
    post.args([
        "post",
        "agent.keeper",
        "what is in memory?",
        "--wait",
        "--json",
        "--url",
        &url,
    ]);
    let out = crate::support::run_cmd(post).await;
    let stopped = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(stopped.success());
    let exit = crate::support::wait_child_async(child).await;
    assert!(exit.success(), "clean shutdown, got {exit}");
    let reply: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    assert_eq!(
        reply["state"],
        "succeeded",
        "{reply} {}",
        String::from_utf8_lossy(&out.stderr)
    );

    let reqs = server.requests();
    assert_eq!(reqs.len(), 2, "a tool round and the answer");
    for (i, req) in reqs.iter().enumerate() {
        let text = req.to_string();
        assert!(
            !text.contains(&secret),
            "request {i} must not carry the secret:\n{text}"
        );
    }
    let system = system_of(&reqs[0]);
    assert!(
        system.contains(&format!("[REDACTED:{var}]")),
        "the redaction is visible where the secret was:\n{system}"
    );
    let tool_results: Vec<&Value> = reqs[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .collect();
    assert_eq!(tool_results.len(), 3);
    for result in &tool_results {
        let content = result["content"].as_str().unwrap();
        assert!(
            content.contains(&format!("[REDACTED:{var}]")),
            "each tool read the secret and had it redacted: {content}"
        );
    }
    let mut files = Vec::new();
    state_files(&project.state_dir(), &mut files);
    assert!(!files.is_empty());
    for file in files {
        let bytes = std::fs::read(&file).unwrap();
        assert!(
            !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
            "{} must not hold the secret",
            file.display()
        );
    }
}

#[test]
fn prompt_json_reports_chars_per_layer_file_skills_and_tools() {
    let project = Project::new();
    project
        .write(
            "agents.d/writer.toml",
            "timezone = \"Asia/Tokyo\"\n\n[prompt]\nfile_max_chars = 1000\n",
        )
        .write("agents.d/writer/SOUL.md", "You write short, clear prose.\n")
        .write("agents.d/writer/AGENTS.md", &"x".repeat(1500))
        .write("agents.d/writer/MEMORY.md", "- prefers British spelling\n")
        .write(
            "agents.d/writer/skills/haiku/SKILL.md",
            "---\nname: haiku\ndescription: Write a haiku about anything.\n---\nCount syllables: 5, 7, 5.\n",
        );
    let out = project
        .clawbus()
        .args(["prompt", "--agent", "writer", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let report = &v["report"];
    let system = v["system_prompt"].as_str().unwrap();
    assert_eq!(
        report["system_prompt_chars"].as_u64().unwrap() as usize,
        system.chars().count()
    );
    let layer = |name: &str| -> (u64, String) {
        let l = report["layers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["name"] == name)
            .unwrap_or_else(|| panic!("layer {name} is reported: {report}"));
        (
            l["chars"].as_u64().unwrap(),
            l["placement"].as_str().unwrap().to_string(),
        )
    };
    for name in [
        "preamble",
        "soul",
        "workspace",
        "memory",
        "untrusted",
        "runtime",
    ] {
        let (chars, placement) = layer(name);
        assert!(chars > 0, "layer {name} has characters: {report}");
        assert_eq!(placement, "system");
    }
    assert_eq!(layer("history").1, "messages");
    assert_eq!(layer("message").1, "messages");
    let summed: u64 = report["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["chars"].as_u64().unwrap())
        .sum();
    assert!(summed <= report["system_prompt_chars"].as_u64().unwrap());

    let agents = report["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"] == "AGENTS.md")
        .unwrap();
    assert_eq!(agents["chars"], 1500);
    assert_eq!(agents["injected_chars"], 1000);
    assert_eq!(agents["truncated"], true);
    assert_eq!(agents["cut_by"], "file");
    assert!(system.contains("[… truncated: kept 1000 of 1500 chars of AGENTS.md]"));
    assert_eq!(report["timezone"], "Asia/Tokyo");
    assert!(report["time"].as_str().unwrap().ends_with("+09:00"));
    assert_eq!(report["caps"]["file_max_chars"], 1000);
    let tools: Vec<&str> = report["tools"]["names"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    assert!(
        tools.contains(&"memory_search") && tools.contains(&"memory_get"),
        "{tools:?}"
    );
    assert!(report["tools"]["schema_chars"].as_u64().unwrap() > 100);
    assert_eq!(report["skills"]["count"], 1, "the seeded skill is listed");
    assert!(system.contains("<name>haiku</name>"));
    assert!(layer("skills").0 > report["skills"]["chars"].as_u64().unwrap());

    let text = project
        .clawbus()
        .args([
            "prompt",
            "--agent",
            "writer",
            "--session",
            "agent:writer:cli:direct:me",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&text.stdout);
    assert!(text.status.success());
    assert!(
        stdout.contains("session=agent:writer:cli:direct:me channel=cli"),
        "{stdout}"
    );
    assert!(
        stdout.contains("layers:") && stdout.contains("truncated by the file cap"),
        "{stdout}"
    );

    let unknown = project
        .clawbus()
        .args(["prompt", "--agent", "nobody"])
        .output()
        .unwrap();
    assert_eq!(unknown.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("no agent \"nobody\""));
}

#[test]
fn a_bad_timezone_or_cap_is_reported_with_its_line() {
    let project = Project::new();
    project.write(
        "agents.d/clock.toml",
        "timezone = \"Europe/Berln\"\n\n[prompt]\ntotal_max_chars = 0\n",
    );
    let out = project.clawbus().arg("check").output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains(
            "clock.toml:1:12: field \"timezone\": unknown time zone \"Europe/Berln\" (expected an IANA name"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("clock.toml:4:19: field \"prompt.total_max_chars\": 0 is out of range"),
        "{stdout}"
    );
}
