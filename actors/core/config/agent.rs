//! Phase two for `agents.d/`: list the agent files and turn each into an [`AgentDef`].

use super::file::{self, AgentFile};
use super::span::{Source, positionless};
use super::validate::{Known, duration, resolve_model, unreadable};
use super::{AgentDef, Limits, ModelRef, Problem};
use crate::ids::AgentId;
use std::path::{Path, PathBuf};

/// Every `*.toml` directly in `dir`, by file name; folders and other files are left alone.
pub(super) fn agent_files(dir: &Path) -> Result<Vec<PathBuf>, Problem> {
    let entries = std::fs::read_dir(dir).map_err(|e| {
        let why = if e.kind() == std::io::ErrorKind::NotFound {
            "agents folder not found".to_string()
        } else {
            format!("cannot read the agents folder: {e}")
        };
        positionless(
            dir,
            "",
            format!("{why} (expected a folder of <id>.toml agent files)"),
        )
    })?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    Ok(files)
}

/// Reads and checks one agent file; `peers` are the ids of every agent file in the folder (for
/// `may_call`).
pub(super) fn agent_file(
    path: &Path,
    agents_dir: &Path,
    peers: &[String],
    default_model: &ModelRef,
    known: &Known,
    gateway_tz: chrono_tz::Tz,
    routes: &super::ReplyRoutes,
) -> (Option<AgentDef>, Vec<Problem>) {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut problems = Vec::new();
    let id =
        AgentId::parse(&stem).map_err(|message| problems.push(positionless(path, "", message)));
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) => {
            problems.push(unreadable(path, &e));
            return (None, problems);
        }
    };
    let src = Source { path, text: &text };
    let mut parsed = file::parse::<AgentFile>(&src);
    let Some(f) = parsed.value.take() else {
        return (None, parsed.merge(problems));
    };
    let model = match &f.model {
        None => default_model.clone(),
        Some(m) => resolve_model(m.get_ref(), known).unwrap_or_else(|message| {
            problems.push(src.at(Some(m.span()), "model", message));
            default_model.clone()
        }),
    };
    let fallbacks = fallbacks(&src, &f, &model, known, &mut problems);
    let limits = limits(&src, &f, &mut problems);
    let retry = super::retry::retry_policy(&src, &f.retry, &limits, &mut problems);
    let tools = super::tools::tools_def(&src, &f.tools, &mut problems);
    let exec = super::exec::exec_def(&src, &f.exec, &mut problems);
    let prompt = super::prompt::prompt_def(&src, &f, &mut problems);
    let session = super::session::session_def(&src, &f.session, &mut problems);
    let bindings = super::session::bindings(&src, &f.bindings, &mut problems);
    let skills = super::skills::agent_skills(&src, &f.skills, &mut problems);
    let now_ms = bus::Clock::now_ms(&bus::SystemClock);
    let cron = super::cron::cron_jobs(&src, &stem, &f, gateway_tz, now_ms, routes, &mut problems);
    let heartbeat = super::cron::heartbeat(&src, &stem, &f, gateway_tz, routes, &mut problems);
    let kind = known.get(&model.provider).copied().flatten();
    let model_params =
        super::model_params::model_params(&src, &f.model_params, &tools, kind, &mut problems);
    let subscribe = super::subscribe::subscriptions(&src, &f.subscribe, &mut problems);
    let may_call = may_call(&src, &stem, &f, peers, agents_dir, &mut problems);
    let sandbox = super::sandbox::sandbox_def(&src, &f.sandbox, &mut problems);
    let problems = parsed.merge(problems);
    let Ok(id) = id else { return (None, problems) };
    let seed = agents_dir.join(id.as_str());
    let def = AgentDef {
        seed_dir: seed.is_dir().then_some(seed),
        id,
        file: path.to_path_buf(),
        description: f.description,
        model,
        fallbacks,
        limits,
        retry,
        tools,
        exec,
        prompt,
        session,
        bindings,
        skills,
        cron,
        heartbeat,
        model_params,
        subscribe,
        may_call,
        sandbox,
    };
    (Some(def), problems)
}

/// `may_call`: each entry the id of another agent file in the folder, listed once.
fn may_call(
    src: &Source,
    me: &str,
    f: &AgentFile,
    peers: &[String],
    agents_dir: &Path,
    problems: &mut Vec<Problem>,
) -> Vec<AgentId> {
    let mut out: Vec<AgentId> = Vec::with_capacity(f.may_call.len());
    for name in &f.may_call {
        let text = name.get_ref().as_str();
        let problem = if text == me {
            Some(format!(
                "\"{text}\" is this agent: it never calls itself with agent_call (a waiting call would wait on itself), and sessions_spawn on itself needs no entry"
            ))
        } else if !peers.iter().any(|p| p == text) {
            Some(format!(
                "no agent \"{text}\" (expected the id of a file in {}: {})",
                agents_dir.display(),
                peers.join(", ")
            ))
        } else if out.iter().any(|a| a.as_str() == text) {
            Some(format!("\"{text}\" is listed twice"))
        } else {
            None
        };
        match problem {
            Some(message) => problems.push(src.at(Some(name.span()), "may_call", message)),
            None => match AgentId::parse(text) {
                Ok(id) => out.push(id),
                Err(message) => problems.push(src.at(Some(name.span()), "may_call", message)),
            },
        }
    }
    out
}

/// `fallbacks`: each a model ref of a known provider, none repeating the model or another.
fn fallbacks(
    src: &Source,
    f: &AgentFile,
    model: &ModelRef,
    known: &Known,
    problems: &mut Vec<Problem>,
) -> Vec<ModelRef> {
    let mut out: Vec<ModelRef> = Vec::with_capacity(f.fallbacks.len());
    for (i, text) in f.fallbacks.iter().enumerate() {
        let field = format!("fallbacks[{i}]");
        match resolve_model(text.get_ref(), known) {
            Ok(m) if m == *model || out.contains(&m) => {
                let message = format!("{m} is already tried before this fallback");
                problems.push(src.at(Some(text.span()), &field, message));
            }
            Ok(m) => out.push(m),
            Err(message) => problems.push(src.at(Some(text.span()), &field, message)),
        }
    }
    out
}

fn limits(src: &Source, f: &AgentFile, problems: &mut Vec<Problem>) -> Limits {
    let mut limits = Limits::default();
    let l = &f.limits;
    if let Some(n) = &l.max_iterations {
        if (1..=200).contains(n.get_ref()) {
            limits.max_iterations = *n.get_ref();
        } else {
            let message = format!("{} is out of range (expected 1 to 200)", n.get_ref());
            problems.push(src.at(Some(n.span()), "limits.max_iterations", message));
        }
    }
    limits.turn_timeout = duration(
        src,
        &l.turn_timeout,
        "limits.turn_timeout",
        limits.turn_timeout,
        problems,
    );
    if let Some(n) = &l.tool_result_max_chars {
        if *n.get_ref() > 0 {
            limits.tool_result_max_chars = *n.get_ref();
        } else {
            let message = "0 is out of range (expected at least 1)";
            problems.push(src.at(Some(n.span()), "limits.tool_result_max_chars", message));
        }
    }
    if let Some(n) = &l.max_attempts {
        // The bus gives up on a task after 5 deliveries whatever the agent says.
        if (1..=5).contains(n.get_ref()) {
            limits.max_attempts = *n.get_ref();
        } else {
            let message = format!("{} is out of range (expected 1 to 5)", n.get_ref());
            problems.push(src.at(Some(n.span()), "limits.max_attempts", message));
        }
    }
    limits.retry_backoff = duration(
        src,
        &l.retry_backoff,
        "limits.retry_backoff",
        limits.retry_backoff,
        problems,
    );
    limits.retry_backoff_max = duration(
        src,
        &l.retry_backoff_max,
        "limits.retry_backoff_max",
        limits.retry_backoff_max,
        problems,
    );
    if limits.retry_backoff_max < limits.retry_backoff {
        let at = l.retry_backoff_max.as_ref().map(|d| d.span());
        problems.push(src.at(
            at,
            "limits.retry_backoff_max",
            format!(
                "{:?} is shorter than limits.retry_backoff ({:?}) (expected at least as long)",
                limits.retry_backoff_max, limits.retry_backoff
            ),
        ));
    }
    limits
}
