//! A small MCP server written here on `rmcp`'s server side, run over stdio as a child process:
//! this test binary started again on [`serve_on_stdio`] (its stdout then carries the protocol;
//! the harness's own lines on it are not JSON-RPC and the client skips them). Tools: `echo`,
//! `secret_op` (to be denied), `pid`, and `grow`, which adds a tool `extra` and sends
//! `notifications/tools/list_changed`.

use super::*;
use crate::mcp::McpServers;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// The full name of [`serve_on_stdio`], as the harness filters by it.
const SERVE_TEST: &str = "mcp::tests::rust_server::serve_on_stdio";

#[derive(Clone, Default)]
struct Small {
    grown: Arc<AtomicBool>,
}

fn tool(name: &str, about: &str, schema: Value) -> Tool {
    let Value::Object(schema) = schema else {
        unreachable!("an object schema")
    };
    Tool::new(name.to_string(), about.to_string(), Arc::new(schema))
}

impl ServerHandler for Small {
    fn get_info(&self) -> ServerConfig {
        let caps = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .build();
        ServerConfig::new(caps).with_server_info(Implementation::new("small-rust", "1.0"))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let empty = json!({"type": "object", "properties": {}});
        let mut tools = vec![
            tool(
                "echo",
                "Echoes text.",
                json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
            ),
            tool("secret_op", "Must never run.", empty.clone()),
            tool("pid", "This server's process id.", empty.clone()),
            tool("grow", "Adds the tool extra.", empty.clone()),
        ];
        if self.grown.load(Ordering::SeqCst) {
            tools.push(tool("extra", "Exists after grow.", empty));
        }
        Ok(ListToolsResult {
            tools,
            ..Default::default()
        })
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        let text = match request.name.as_ref() {
            "echo" => format!("echo: {}", args["text"].as_str().unwrap_or_default()),
            "secret_op" => "secret op ran".to_string(),
            "pid" => std::process::id().to_string(),
            "extra" => "extra ran".to_string(),
            "grow" => {
                self.grown.store(true, Ordering::SeqCst);
                context
                    .peer
                    .notify_tool_list_changed()
                    .await
                    .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
                "grown".to_string()
            }
            other => return Err(ErrorData::invalid_params(format!("no tool {other}"), None)),
        };
        Ok(CallToolResult::success(vec![ContentBlock::text(text)]).into())
    }
}

/// The server process: does nothing unless this binary was started for it (`--exact` and this
/// test's name, as [`rust_toml`] starts it).
#[tokio::test]
#[ignore = "the server process of the rmcp tests, started by them"]
async fn serve_on_stdio() {
    let args: Vec<String> = std::env::args().collect();
    if !(args.iter().any(|a| a == "--exact") && args.iter().any(|a| a == SERVE_TEST)) {
        return;
    }
    let service = Small::default()
        .serve(rmcp::transport::stdio())
        .await
        .unwrap();
    service.waiting().await.unwrap();
}

/// `[mcp.servers.<name>]` running [`serve_on_stdio`], with `extra` lines (e.g. `start`).
pub(super) fn rust_toml(name: &str, extra: &str) -> String {
    let exe = std::env::current_exe().unwrap().display().to_string();
    format!(
        "[mcp.servers.{name}]\ncommand = {exe:?}\nargs = [\"--ignored\", \"--exact\", {SERVE_TEST:?}, \"--test-threads=1\", \"-q\"]\ntimeout = \"30s\"\n{extra}"
    )
}

/// Waits (bounded) until `mcp` offers tool `name`.
pub(super) async fn offers(mcp: &McpServers, name: &str) {
    let mut changes = mcp.subscribe();
    tokio::time::timeout(BOUND, async {
        while !mcp.tool_names().iter().any(|n| n == name) {
            changes.changed().await.unwrap();
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{name} offered within the bound: {:?}", mcp.tool_names()));
}

#[actix_rt::test]
async fn an_agent_calls_a_tool_of_a_rust_server_and_a_denied_one_is_never_offered_nor_run() {
    use clawbus_testkit::{ScriptedServer, Turn};
    let model = ScriptedServer::start(vec![
        Turn::tool_call("mcp__rs__echo", json!({"text": "hello from rust"})),
        Turn::tool_call("mcp__rs__secret_op", json!({})),
        Turn::text("done"),
    ])
    .await;
    let toml = format!(
        "[providers.mock]\nkind = \"openai\"\nbase_url = \"{}\"\ntimeout = \"10s\"\nmax_retries = 0\n\n[defaults]\nmodel = \"mock/test-model\"\n\n{}",
        model.base_url(),
        rust_toml("rs", "")
    );
    let (_dir, config) = project(
        &toml,
        "[tools]\nallow = [\"group:mcp:rs\"]\ndeny = [\"mcp__rs__secret_op\"]\n",
    );
    run_agent(config, "echo please").await;
    assert_eq!(model.requests().len(), 3, "{:#?}", model.requests());
    let sent = serde_json::to_string(&model.requests()).unwrap();
    let offered = offered(&model.requests()[0]);
    assert!(
        offered.contains(&"mcp__rs__echo".to_string()),
        "{offered:?}"
    );
    assert!(
        !offered.iter().any(|n| n == "mcp__rs__secret_op"),
        "a denied tool is never offered: {offered:?}"
    );
    assert!(
        sent.contains("echo: hello from rust"),
        "the result reached the model: {sent}"
    );
    assert!(
        sent.contains("policy_denied"),
        "the denied call is refused: {sent}"
    );
    assert!(
        !sent.contains("secret op ran"),
        "the denied tool never ran: {sent}"
    );
}

#[tokio::test]
async fn tools_list_changed_refreshes_the_tools_an_agent_is_offered() {
    let (dir, config) = project(&rust_toml("rs", ""), "[tools]\nallow = [\"group:mcp\"]\n");
    let mcp = McpServers::start(&config.mcp).await;
    let live = live_tools(&config, &mcp);
    let before = live.current().await;
    assert!(before.names().contains(&"mcp__rs__grow"), "{before:?}");
    assert!(!before.names().contains(&"mcp__rs__extra"), "{before:?}");
    let grown = call(&before, dir.path(), "mcp__rs__grow", json!({})).await;
    assert!(grown.text.contains("grown"), "{}", grown.text);
    offers(&mcp, "mcp__rs__extra").await;
    let after = live.current().await;
    assert!(after.names().contains(&"mcp__rs__extra"), "{after:?}");
    let extra = call(&after, dir.path(), "mcp__rs__extra", json!({})).await;
    assert!(extra.text.contains("extra ran"), "{}", extra.text);
    mcp.stop().await;
}
