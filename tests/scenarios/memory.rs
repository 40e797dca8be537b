//! Memory through a real turn: the model searches its notes, then reads a line range.

use crate::support::{Project, post_task};
use clawbus::testkit::{ScriptedServer, Turn};
use serde_json::{Value, json};

fn tool_result(request: &Value, nth: usize) -> Value {
    let content = request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .nth(nth)
        .unwrap_or_else(|| panic!("tool result {nth} in {request}"))["content"]
        .as_str()
        .unwrap()
        .to_string();
    serde_json::from_str(&content).unwrap_or_else(|_| panic!("JSON tool result: {content}"))
}

#[actix_rt::test]
async fn the_model_finds_a_note_by_keyword_and_reads_its_lines() {
    let today = chrono::Utc::now().date_naive();
    let day = |ago: i64| {
        let d = today - chrono::Duration::days(ago);
        format!("memory/{}.md", d.format("%Y-%m-%d"))
    };
    let (recent, old) = (day(3), day(20));
    let server = ScriptedServer::start(vec![
        Turn::tool_call(
            "memory_search",
            json!({ "query": "dentist appointment", "k": 3 }),
        ),
        Turn::tool_call(
            "memory_get",
            json!({ "path": recent, "from_line": 4, "to_line": 5 }),
        ),
        Turn::text("Tuesday at 9."),
    ])
    .await;
    let project = Project::new();
    let note = "# Health\nDentist appointment moved to Tuesday 09:00.\n";
    project
        .with_mock_provider(&server.base_url(), "5s", 0)
        .write("agents.d/keeper.toml", "")
        .write(&format!("agents.d/keeper/{old}"), note)
        .write(
            &format!("agents.d/keeper/{recent}"),
            &format!("# Errands\nBuy stamps.\n\n{note}"),
        )
        .write(
            "agents.d/keeper/memory/topics.md",
            "The appointment book is in the top drawer.\n",
        );
    let daemon = project.start().await;
    let (_, body) = post_task(
        &daemon,
        "keeper",
        json!({ "text": "when is the dentist?", "wait": true }),
    )
    .await;
    assert_eq!(body["state"], "succeeded", "{body}");
    let reqs = server.requests();
    assert_eq!(reqs.len(), 3);

    let found = tool_result(&reqs[1], 0);
    let results = found["results"].as_array().unwrap();
    let hits: Vec<(&str, u64, u64)> = results
        .iter()
        .map(|r| {
            (
                r["path"].as_str().unwrap(),
                r["from_line"].as_u64().unwrap(),
                r["to_line"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        hits,
        [
            (recent.as_str(), 4, 5),
            (old.as_str(), 1, 2),
            ("memory/topics.md", 1, 1)
        ],
        "both keywords before one; the same note newer before older: {found}"
    );
    assert!(results[0]["score"].as_f64() > results[1]["score"].as_f64());

    let got = tool_result(&reqs[2], 1);
    assert_eq!(got["path"], recent.as_str());
    assert_eq!(
        got["text"],
        "# Health\nDentist appointment moved to Tuesday 09:00."
    );
    assert_eq!(got["total_lines"], 5);
    daemon.shutdown().await;
}
