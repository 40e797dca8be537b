//! Bad HTTP input: every refusal has the `{error: {code, message}}` shape and says what was wrong.

use crate::support::{NET, Project};
use serde_json::Value;

#[actix_rt::test]
async fn bad_requests_are_refused_with_the_error_shape_naming_the_mistake() {
    let project = Project::new();
    project.write("agents.d/echo.toml", "");
    let daemon = project.start().await;
    let http = reqwest::Client::new();
    let tasks = format!("{}/v1/agents/echo/tasks", daemon.url());
    let json = |body: &str| {
        http.post(&tasks)
            .header("content-type", "application/json")
            .body(body.to_string())
    };
    let cases = [
        (
            http.post(&tasks).body(r#"{"text":"hi"}"#),
            400,
            "invalid_body",
            "Content-Type: application/json",
        ),
        (
            json(r#"{"text":"hi","colour":1}"#),
            400,
            "invalid_body",
            "unknown field `colour`",
        ),
        (
            json(r#"{"text":3}"#),
            400,
            "invalid_body",
            "text: invalid type",
        ),
        (json(r#"{"text":"  "}"#), 400, "invalid_body", "text: empty"),
        (
            http.get(format!("{}/v1/approvals?state=bogus", daemon.url())),
            400,
            "invalid_query",
            "unknown variant `bogus`",
        ),
        (
            http.get(format!("{}/v1/sessions?agnt=echo", daemon.url())),
            400,
            "invalid_query",
            "unknown query parameter \"agnt\"",
        ),
        (
            http.get(format!("{}/v1/nothing", daemon.url())),
            404,
            "no_route",
            "no route GET /v1/nothing",
        ),
        (
            http.delete(format!("{}/v1/agents", daemon.url())),
            405,
            "method_not_allowed",
            "/v1/agents does not take DELETE",
        ),
    ];
    for (i, (request, status, code, words)) in cases.into_iter().enumerate() {
        let r = request
            .bearer_auth(daemon.token())
            .timeout(NET)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), status, "case {i}");
        let body: Value = r.json().await.unwrap_or(Value::Null);
        assert_eq!(body["error"]["code"], code, "case {i}: {body}");
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(words), "case {i}: {body}");
    }
    daemon.shutdown().await;
}
