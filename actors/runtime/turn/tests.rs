//! The turn loop's guards: `limits.max_iterations`, the identical-call limit and
//! `limits.turn_timeout` each stop the loop with their own [`TurnError`], and no guard lets more
//! tool calls run than it allows.

use super::{PromptSource, TurnDeps, TurnError, TurnInput, run_turn};
use crate::model::{ChatModel, ChatRequest, ModelError, ModelReply, ToolCall};
use crate::tools::{Tool, ToolContext, ToolOutput, ToolSet};
use async_trait::async_trait;
use clawbus_core::config::Limits;
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// A model that never answers: every reply asks for `calls_per_reply` calls to `count`, with
/// arguments that change per reply (`{"n": <reply>}`) unless `same_args`.
struct Looping {
    replies: AtomicU32,
    calls_per_reply: u32,
    same_args: bool,
    /// The finish reason of every reply: `tool_calls`, or `length` (cut off by `max_tokens`).
    finish: &'static str,
}

impl Looping {
    fn new(calls_per_reply: u32, same_args: bool) -> Arc<Self> {
        Arc::new(Self {
            replies: AtomicU32::new(0),
            calls_per_reply,
            same_args,
            finish: "tool_calls",
        })
    }

    /// Every reply a tool call cut off by the output-token limit.
    fn cut_off() -> Arc<Self> {
        Arc::new(Self {
            replies: AtomicU32::new(0),
            calls_per_reply: 1,
            same_args: false,
            finish: "length",
        })
    }

    fn replies(&self) -> u32 {
        self.replies.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl ChatModel for Looping {
    async fn complete(&self, _: &ChatRequest) -> Result<ModelReply, ModelError> {
        let reply = self.replies.fetch_add(1, Ordering::SeqCst) + 1;
        let n = if self.same_args { 1 } else { reply };
        let tool_calls = (0..self.calls_per_reply)
            .map(|i| ToolCall {
                id: format!("call-{reply}-{i}"),
                name: "count".to_string(),
                arguments: json!({ "n": n }).to_string(),
            })
            .collect();
        Ok(ModelReply {
            text: None,
            tool_calls,
            finish_reason: Some(self.finish.to_string()),
            usage: None,
            model: None,
            served_model: None,
        })
    }
}

/// A tool that counts its calls as they start and as they finish, optionally taking `delay`.
#[derive(Clone, Default)]
struct Count {
    started: Arc<AtomicU32>,
    finished: Arc<AtomicU32>,
    delay: Duration,
}

#[async_trait]
impl Tool for Count {
    fn name(&self) -> &'static str {
        "count"
    }
    fn description(&self) -> &'static str {
        "Counts."
    }
    fn parameters(&self) -> serde_json::Value {
        json!({ "type": "object", "properties": { "n": { "type": "integer" } } })
    }
    async fn call(&self, _: &ToolContext, _: serde_json::Value) -> ToolOutput {
        self.started.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(self.delay).await;
        self.finished.fetch_add(1, Ordering::SeqCst);
        ToolOutput::ok("counted")
    }
}

impl Count {
    fn started(&self) -> u32 {
        self.started.load(Ordering::SeqCst)
    }
    fn finished(&self) -> u32 {
        self.finished.load(Ordering::SeqCst)
    }
}

fn deps(model: Arc<Looping>, tool: &Count, limits: Limits) -> TurnDeps {
    TurnDeps {
        model,
        model_name: "m".to_string(),
        model_label: "scripted/m".to_string(),
        tools: ToolSet::default().with(tool.clone()),
        limits,
        clock: Arc::new(bus::SystemClock),
    }
}

fn input(dir: &tempfile::TempDir) -> TurnInput {
    let prompt: Arc<dyn PromptSource> = Arc::new("You count.".to_string());
    TurnInput {
        prompt,
        history: Vec::new(),
        message: "count forever".to_string(),
        resume: None,
        tool_context: ToolContext {
            workspace: dir.path().canonicalize().unwrap(),
            agent: clawbus_core::ids::AgentId::new("a"),
            session: clawbus_core::ids::SessionKey::parse("agent:a:s").unwrap(),
            channel: "api".into(),
            run: None,
        },
    }
}

/// A bound on each whole turn under real time; the guards end them long before.
const NET: Duration = Duration::from_secs(20);

#[tokio::test]
async fn max_iterations_stops_the_loop_after_that_many_model_calls() {
    let dir = tempfile::tempdir().unwrap();
    let model = Looping::new(1, false);
    let tool = Count::default();
    let limits = Limits {
        max_iterations: 4,
        ..Limits::default()
    };
    let result = tokio::time::timeout(
        NET,
        run_turn(&deps(model.clone(), &tool, limits), input(&dir)),
    )
    .await
    .expect("the iteration limit ends the turn");
    assert!(
        matches!(result, Err(TurnError::TooManyIterations(4))),
        "{result:?}"
    );
    assert_eq!(model.replies(), 4, "no model call past the limit");
    assert_eq!(tool.started(), 4, "one tool call per model call, no more");
    assert_eq!(tool.finished(), 4);
}

#[tokio::test]
async fn the_same_call_three_times_in_a_row_stops_the_loop_before_the_third_runs() {
    let dir = tempfile::tempdir().unwrap();
    let model = Looping::new(1, true);
    let tool = Count::default();
    let result = tokio::time::timeout(
        NET,
        run_turn(&deps(model.clone(), &tool, Limits::default()), input(&dir)),
    )
    .await
    .expect("the identical-call limit ends the turn");
    match &result {
        Err(TurnError::Repeating(name)) => assert_eq!(name, "count"),
        other => panic!("expected Repeating(\"count\"), got {other:?}"),
    }
    assert_eq!(
        model.replies(),
        3,
        "the third identical request ends the turn"
    );
    assert_eq!(
        tool.started(),
        2,
        "the repeated call is not run a third time"
    );
}

#[tokio::test]
async fn identical_calls_within_one_reply_count_too() {
    let dir = tempfile::tempdir().unwrap();
    let model = Looping::new(5, true);
    let tool = Count::default();
    let result = tokio::time::timeout(
        NET,
        run_turn(&deps(model.clone(), &tool, Limits::default()), input(&dir)),
    )
    .await
    .expect("the identical-call limit ends the turn");
    assert!(
        matches!(&result, Err(TurnError::Repeating(name)) if name == "count"),
        "{result:?}"
    );
    assert_eq!(model.replies(), 1);
    assert_eq!(tool.started(), 2, "the rest of the reply's calls never run");
}

#[tokio::test]
async fn different_calls_are_not_repeats() {
    let dir = tempfile::tempdir().unwrap();
    let model = Looping::new(1, false);
    let tool = Count::default();
    let limits = Limits {
        max_iterations: 6,
        ..Limits::default()
    };
    let result = tokio::time::timeout(
        NET,
        run_turn(&deps(model.clone(), &tool, limits), input(&dir)),
    )
    .await
    .expect("the iteration limit ends the turn");
    assert!(
        matches!(result, Err(TurnError::TooManyIterations(6))),
        "changing arguments is progress, not a repeat: {result:?}"
    );
    assert_eq!(tool.started(), 6);
}

#[tokio::test(start_paused = true)]
async fn turn_timeout_stops_a_turn_stuck_in_a_tool() {
    let dir = tempfile::tempdir().unwrap();
    let model = Looping::new(1, false);
    let tool = Count {
        delay: Duration::from_secs(3600),
        ..Count::default()
    };
    let limits = Limits {
        turn_timeout: Duration::from_secs(30),
        ..Limits::default()
    };
    let begun = bus::Clock::now(&bus::SystemClock);
    // Paused time: the clock jumps to the turn's deadline as soon as everything waits.
    let result = run_turn(&deps(model.clone(), &tool, limits), input(&dir)).await;
    assert!(
        matches!(result, Err(TurnError::TimedOut(d)) if d == Duration::from_secs(30)),
        "{result:?}"
    );
    let took = begun.elapsed();
    assert!(
        took >= Duration::from_secs(30) && took < Duration::from_secs(31),
        "stopped at the timeout, not at the tool's end: {took:?}"
    );
    assert_eq!(model.replies(), 1);
    assert_eq!(tool.started(), 1, "no tool call after the first");
    assert_eq!(tool.finished(), 0, "the stuck call was abandoned");
}

#[tokio::test]
async fn a_call_cut_off_by_max_tokens_never_runs_and_a_second_cut_fails_the_turn() {
    let dir = tempfile::tempdir().unwrap();
    let model = Looping::cut_off();
    let tool = Count::default();
    let result = tokio::time::timeout(
        NET,
        run_turn(&deps(model.clone(), &tool, Limits::default()), input(&dir)),
    )
    .await
    .expect("the second cut-off reply ends the turn");
    match &result {
        Err(e @ TurnError::Truncated(name)) => {
            assert_eq!(name, "count");
            assert!(e.to_string().starts_with("truncated: "), "{e}");
        }
        other => panic!("expected Truncated(\"count\"), got {other:?}"),
    }
    assert_eq!(
        model.replies(),
        2,
        "the model was told once, then the turn ended"
    );
    assert_eq!(
        tool.started(),
        0,
        "a cut-off call never runs, even with valid arguments"
    );
    assert_eq!(
        crate::turn::retry::classify(result.as_ref().unwrap_err()),
        None,
        "a truncated turn is not retried"
    );
}

/// An agent file's model settings reach the model that `build_model` builds.
mod build_model {
    use crate::model::BreakerState;
    use crate::model::tests::fallback::{always, ask, flaky, manual};
    use crate::model::tests::params::{rounds, without};
    use crate::turn::{build_model, build_model_with};
    use clawbus_testkit::{AnthropicServer, AnthropicTurn, AnthropicUsage};
    use serde_json::json;
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;
    use std::time::Duration;

    /// From `agents.d/<id>.toml` and `clawbus.toml`: `fallbacks` and the provider's `breaker_*`
    /// reach the model `build_model_with` makes, guarded by the registry it is given.
    #[tokio::test]
    async fn agent_file_fallbacks_and_provider_breaker_settings_are_used_by_build_model() {
        let primary = flaky(Arc::new(AtomicBool::new(false))).await;
        let backup = always("backup answer").await;
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("agents.d")).unwrap();
        std::fs::write(
            dir.path().join("clawbus.toml"),
            format!(
                "[providers.fb-test-primary]\nkind = \"openai\"\nbase_url = \"{}\"\nmax_retries = 0\n\
                 breaker_failures = 1\nbreaker_cooldown = \"1h\"\nbreaker_max_cooldown = \"2h\"\n\
                 [providers.fb-test-backup]\nkind = \"openai\"\nbase_url = \"{}\"\nmax_retries = 0\n",
                primary.base_url(),
                backup.base_url()
            ),
        )
        .unwrap();
        std::fs::write(
            dir.path().join("agents.d/a.toml"),
            "model = \"fb-test-primary/p-model\"\nfallbacks = [\"fb-test-backup/b-model\"]\n",
        )
        .unwrap();
        let config = clawbus_core::config::load(&clawbus_core::config::LoadOptions {
            config: dir.path().join("clawbus.toml"),
            agents_dir: dir.path().join("agents.d"),
            state_dir: None,
            model_override: None,
        })
        .unwrap();
        let (_clock, breakers) = manual();
        let model = build_model_with(config.agent("a").unwrap(), &config, &breakers).unwrap();
        let reply = model.complete(&ask()).await.unwrap();
        assert_eq!(reply.text.as_deref(), Some("backup answer"));
        assert_eq!(primary.request_count(), 1);
        assert_eq!(backup.requests()[0]["model"], "b-model");
        let status = breakers.for_provider("fb-test-primary").status();
        assert_eq!(status.state, BreakerState::Open, "open after one failure");
        assert_eq!(status.retry_in, Some(Duration::from_secs(3600)));
    }

    /// From `agents.d/<id>.toml` to the wire: the agent's `[model_params]` and the provider's kind
    /// reach the request `build_model` makes.
    #[tokio::test]
    async fn agent_file_params_reach_the_anthropic_request_through_build_model() {
        let server = AnthropicServer::start(vec![AnthropicTurn::text(
            &["hi"],
            AnthropicUsage::default(),
        )])
        .await
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("agents.d")).unwrap();
        std::fs::write(
            dir.path().join("clawbus.toml"),
            format!(
                "[providers.claude]\nkind = \"anthropic\"\nbase_url = \"{}\"\nmax_retries = 0\nmax_tokens = 777\n",
                server.base_url()
            ),
        )
        .unwrap();
        std::fs::write(
            dir.path().join("agents.d/a.toml"),
            "model = \"claude/claude-test\"\n[model_params]\ntemperature = 0.5\nstop = \"END\"\ntool_choice = \"read\"\nextra = { top_k = 5 }\n",
        )
        .unwrap();
        let config = clawbus_core::config::load(&clawbus_core::config::LoadOptions {
            config: dir.path().join("clawbus.toml"),
            agents_dir: dir.path().join("agents.d"),
            state_dir: None,
            model_override: None,
        })
        .unwrap();
        let model = build_model(config.agent("a").unwrap(), &config).unwrap();
        let (first, _) = rounds();
        model.complete(&first).await.unwrap();
        let body = &server.requests()[0].body;
        assert_eq!(
            without(body, &["messages", "model", "stream", "system", "tools"]),
            json!({
                "max_tokens": 777, "temperature": 0.5, "stop_sequences": ["END"],
                "tool_choice": {"type": "tool", "name": "read"}, "top_k": 5,
            })
        );
    }
}

/// Calls `shot` once, then answers; keeps every request it was sent.
#[derive(Default)]
struct ShotOnce {
    seen: std::sync::Mutex<Vec<ChatRequest>>,
}

#[async_trait]
impl ChatModel for ShotOnce {
    async fn complete(&self, req: &ChatRequest) -> Result<ModelReply, ModelError> {
        let mut seen = self.seen.lock().unwrap();
        seen.push(req.clone());
        let tool_calls = if seen.len() == 1 {
            vec![ToolCall {
                id: "s1".into(),
                name: "shot".into(),
                arguments: "{}".into(),
            }]
        } else {
            Vec::new()
        };
        Ok(ModelReply {
            text: tool_calls.is_empty().then(|| "seen".to_string()),
            tool_calls,
            finish_reason: Some("stop".into()),
            usage: None,
            model: None,
            served_model: None,
        })
    }
}

/// A tool whose output carries an image.
struct Shot;

#[async_trait]
impl Tool for Shot {
    fn name(&self) -> &'static str {
        "shot"
    }
    fn description(&self) -> &'static str {
        "Takes a picture."
    }
    fn parameters(&self) -> serde_json::Value {
        json!({ "type": "object" })
    }
    async fn call(&self, _: &ToolContext, _: serde_json::Value) -> ToolOutput {
        ToolOutput::ok("saved shot.png").with_image(crate::model::ImagePart::png(b"png"))
    }
}

#[tokio::test]
async fn a_tool_outputs_image_goes_with_its_result_to_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let model = Arc::new(ShotOnce::default());
    let deps = TurnDeps {
        tools: ToolSet::default().with(Shot),
        ..deps(Looping::new(1, false), &Count::default(), Limits::default())
    };
    let deps = TurnDeps {
        model: model.clone(),
        ..deps
    };
    let out = tokio::time::timeout(NET, run_turn(&deps, input(&dir)))
        .await
        .expect("the turn ends")
        .unwrap();
    assert_eq!(out.text, "seen");
    let seen = model.seen.lock().unwrap();
    let result = seen[1]
        .messages
        .iter()
        .find(|m| m.tool_call_id.as_deref() == Some("s1"))
        .expect("the tool result is sent");
    assert_eq!(result.content.as_deref(), Some("saved shot.png"));
    assert_eq!(result.images, [crate::model::ImagePart::png(b"png")]);
}

/// A model that answers at once, keeping every request.
#[derive(Default)]
struct Answers {
    seen: std::sync::Mutex<Vec<ChatRequest>>,
}

#[async_trait]
impl ChatModel for Answers {
    async fn complete(&self, req: &ChatRequest) -> Result<ModelReply, ModelError> {
        self.seen.lock().unwrap().push(req.clone());
        Ok(ModelReply {
            text: Some("answered".into()),
            tool_calls: Vec::new(),
            finish_reason: Some("stop".into()),
            usage: None,
            model: None,
            served_model: None,
        })
    }
}

#[tokio::test]
async fn a_history_with_a_call_a_cancelled_run_left_unanswered_is_sent_answered() {
    use crate::model::{ChatMessage, Role};
    let dir = tempfile::tempdir().unwrap();
    let model = Arc::new(Answers::default());
    let deps = TurnDeps {
        model: model.clone(),
        ..deps(Looping::new(1, false), &Count::default(), Limits::default())
    };
    let call = ToolCall {
        id: "cut".into(),
        name: "count".into(),
        arguments: "{}".into(),
    };
    let history = vec![
        ChatMessage::user("count slowly"),
        ChatMessage::assistant(None, vec![call]),
    ];
    let out = tokio::time::timeout(
        NET,
        run_turn(
            &deps,
            TurnInput {
                history,
                ..input(&dir)
            },
        ),
    )
    .await
    .expect("the turn ends")
    .unwrap();
    assert_eq!(out.text, "answered");
    let seen = model.seen.lock().unwrap();
    let roles: Vec<Role> = seen[0].messages.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [
            Role::System,
            Role::User,
            Role::Assistant,
            Role::Tool,
            Role::User
        ]
    );
    assert_eq!(seen[0].messages[3].tool_call_id.as_deref(), Some("cut"));
}
