//! The system prompt: assembled in layers, stable first so provider prefix caches hit, again
//! before every model call of a turn.
//!
//! In prompt order:
//! 0. `preamble`: one line naming the agent.
//! 1. `soul`: SOUL.md.
//! 2. `workspace`: AGENTS.md, TOOLS.md, IDENTITY.md, USER.md.
//! 3. `memory`: MEMORY.md, yesterday's and today's `memory/YYYY-MM-DD.md` (see [`crate::memory`]).
//! 4. `skills`: the `<available_skills>` XML from a [`SkillsSource`].
//! 5. `history`: earlier messages: sent as chat messages by the turn, not part of this text.
//! 6. `untrusted`: `crate::untrusted::UNTRUSTED_NOTICE`, what the external-content markers mean.
//! 7. `message`: the user's message: a chat message too.
//! 8. `runtime`: agent, session, channel, model, date and time in the agent's time zone; last,
//!    because it changes every call and everything before it stays a cacheable prefix.
//!
//! Files come from the agent's workspace, confined to it and cached by size, mtime and inode
//! (one `stat` per file per call). Each file is capped at `prompt.file_max_chars`, all files
//! together at `prompt.total_max_chars`, the memory layer at `prompt.memory_max_chars`; a cut is
//! marked in the text (`[… truncated: kept 20000 of 35120 chars of AGENTS.md]`). Secret values
//! ([`Secrets`]) are redacted from every layer and, last, from the whole text.
//!
//! [`PromptBuilder`] is the per-agent assembler; [`PromptBuilder::turn`] gives the
//! [`PromptSource`] a turn asks before each model call.

mod assemble;
mod files;
mod report;

#[cfg(test)]
mod tests;

pub use assemble::{SOUL_FILES, WORKSPACE_FILES};
pub use report::{CapsReport, FileReport, LayerReport, PromptReport, SkillsReport, ToolsReport};

use crate::secrets::Secrets;
use crate::untrusted::UNTRUSTED_NOTICE;
use assemble::{Budget, Layer, MemoryNames};
use bus::{Clock, SystemClock};
use chrono::{DateTime, Utc};
use clawbus_core::config::{AgentDef, Config, PromptDef};
use files::FileCache;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Builds the system prompt; asked again before every model call of a turn, so what changed
/// during the turn (a written memory note, a changed skill) is seen by the next call.
pub trait PromptSource: Send + Sync {
    /// The system prompt for the next model call.
    fn system_prompt(&self) -> String;

    /// The length in bytes of the system prompt the next model call would get (what the
    /// compaction check weighs before a turn). By default it assembles one; a source may keep
    /// that text for the next [`PromptSource::system_prompt`], so a turn assembles it once.
    fn system_prompt_len(&self) -> usize {
        self.system_prompt().len()
    }
}

/// A fixed system prompt.
impl PromptSource for String {
    fn system_prompt(&self) -> String {
        self.clone()
    }
}

/// Characters of a session key or channel name shown in the runtime line at most.
const RUNTIME_FIELD_MAX: usize = 200;

/// Gives the skills list for the prompt; asked before every model call.
pub trait SkillsSource: Send + Sync {
    /// The `<available_skills>…</available_skills>` XML for `session` (empty: no skills layer).
    fn skills_xml(&self, session: &str) -> String;
}

/// Any `Fn(session) -> xml` is a skills source.
impl<F: Fn(&str) -> String + Send + Sync> SkillsSource for F {
    fn skills_xml(&self, session: &str) -> String {
        self(session)
    }
}

/// No skills.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoSkills;

impl SkillsSource for NoSkills {
    fn skills_xml(&self, _: &str) -> String {
        String::new()
    }
}

/// Where and for whom a prompt is assembled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnInfo {
    /// The session key.
    pub session: String,
    /// The channel the turn came from (`api`, `cli`, …).
    pub channel: String,
}

/// An assembled system prompt and its breakdown.
#[derive(Debug, Clone, PartialEq)]
pub struct Assembled {
    /// The system prompt.
    pub text: String,
    /// Where its characters go.
    pub report: PromptReport,
}

/// Assembles one agent's system prompt. Cheap to call again: unchanged files come from a cache.
pub struct PromptBuilder {
    agent: String,
    model: String,
    workspace: PathBuf,
    settings: PromptDef,
    clock: Arc<dyn Clock>,
    skills: Arc<dyn SkillsSource>,
    secrets: Secrets,
    cache: FileCache,
    /// The `preamble` layer (it names the agent: the same every turn).
    preamble: String,
    /// The `untrusted` layer.
    untrusted: String,
    /// The memory layer's names of the last day assembled.
    memory_names: std::sync::Mutex<Option<Arc<MemoryNames>>>,
}

impl PromptBuilder {
    /// A builder for agent `agent` on model `model` (`provider/model`), reading `workspace`
    /// (absolute and canonical, as `workspace::prepare` returns it), with the real
    /// clock, no skills and no secrets.
    pub fn new(agent: &str, model: &str, workspace: PathBuf, settings: PromptDef) -> Self {
        Self {
            agent: agent.to_string(),
            model: model.to_string(),
            workspace,
            settings,
            clock: Arc::new(SystemClock),
            skills: Arc::new(NoSkills),
            secrets: Secrets::default(),
            cache: FileCache::default(),
            preamble: format!(
                "You are the agent \"{agent}\" of clawbus. Your workspace files, memory and skills follow; the runtime line at the end says where and when you are.\n"
            ),
            untrusted: format!("# Untrusted content\n{UNTRUSTED_NOTICE}\n"),
            memory_names: std::sync::Mutex::new(None),
        }
    }

    /// The builder of agent `def`, redacting the secrets of `config` (the values, read from
    /// the environment now, of every provider's `api_key_env`).
    pub fn for_agent(def: &AgentDef, config: &Config, workspace: PathBuf) -> Self {
        Self::new(
            def.id.as_str(),
            &def.model.to_string(),
            workspace,
            def.prompt.clone(),
        )
        .with_secrets(Secrets::from_config(config))
    }

    /// Takes the time of the runtime line and the date of the daily logs from `clock`.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Takes the skills list from `skills`.
    pub fn with_skills(mut self, skills: Arc<dyn SkillsSource>) -> Self {
        self.skills = skills;
        self
    }

    /// Redacts `secrets` (replacing the set taken from the config: start from
    /// `Secrets::from_config(..)` and add names, e.g. the skills' `requires.env`).
    pub fn with_secrets(mut self, secrets: Secrets) -> Self {
        self.secrets = secrets;
        self
    }

    /// The workspace the files are read from.
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// The [`PromptSource`] of one turn: reassembles on every call.
    pub fn turn(
        self: &Arc<Self>,
        session: impl Into<String>,
        channel: impl Into<String>,
    ) -> Arc<TurnPrompt> {
        Arc::new(TurnPrompt {
            builder: self.clone(),
            info: TurnInfo {
                session: session.into(),
                channel: channel.into(),
            },
            ahead: std::sync::Mutex::new(None),
        })
    }

    /// Assembles the system prompt now, with its breakdown.
    pub fn assemble(&self, info: &TurnInfo) -> Assembled {
        let composed = self.compose(info);
        let report = self.report(info, &composed);
        Assembled {
            text: composed.text,
            report,
        }
    }

    /// Assembles the system prompt's text now (what a turn sends; [`PromptBuilder::assemble`]
    /// also says where its characters go).
    pub fn assemble_text(&self, info: &TurnInfo) -> String {
        self.compose(info).text
    }

    /// The memory layer's names of `date` (made when the day changes).
    fn memory_names(&self, date: chrono::NaiveDate) -> Arc<MemoryNames> {
        let mut kept = self
            .memory_names
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match kept.as_ref() {
            Some(names) if names.date == date => names.clone(),
            _ => kept.insert(Arc::new(MemoryNames::of(date))).clone(),
        }
    }

    /// The text and what the report is made of.
    fn compose(&self, info: &TurnInfo) -> Composed {
        let now = DateTime::<Utc>::from_timestamp_millis(self.clock.now_ms() as i64)
            .unwrap_or_default()
            .with_timezone(&self.settings.timezone);
        let ws = &self.workspace;
        let mut files = Vec::new();
        let mut budget = Budget::new(&self.settings);
        let preamble = Layer {
            name: "preamble",
            text: self.preamble.clone(),
        };
        let soul = assemble::file_layer(
            "soul",
            "Soul",
            SOUL_FILES,
            ws,
            &self.cache,
            &mut budget,
            &mut files,
        );
        let workspace = assemble::file_layer(
            "workspace",
            "Workspace",
            WORKSPACE_FILES,
            ws,
            &self.cache,
            &mut budget,
            &mut files,
        );
        let names = self.memory_names(now.date_naive());
        let memory = assemble::memory_layer(&names, ws, &self.cache, &mut budget, &mut files);
        let xml = self.skills.skills_xml(&info.session);
        let xml = xml.trim();
        let skills = Layer {
            name: "skills",
            text: if xml.is_empty() {
                String::new()
            } else {
                format!("# Skills\n{}\n{xml}\n", crate::skills::PROMPT_HINT)
            },
        };
        let untrusted = Layer {
            name: "untrusted",
            text: self.untrusted.clone(),
        };
        let runtime = Layer {
            name: "runtime",
            text: format!(
                "# Runtime\nagent={} session={} channel={} model={} time={} ({}, {})\n",
                self.agent,
                one_line(&info.session),
                one_line(&info.channel),
                self.model,
                now.format("%Y-%m-%d %H:%M:%S %Z"),
                self.settings.timezone.name(),
                now.format("%A"),
            ),
        };
        let mut redacted = false;
        let mut layers = [
            preamble, soul, workspace, memory, skills, untrusted, runtime,
        ];
        for layer in &mut layers {
            if let std::borrow::Cow::Owned(clean) = self.secrets.redact(&layer.text) {
                layer.text = clean;
                redacted = true;
            }
        }
        let mut text = String::new();
        for layer in layers.iter().filter(|l| !l.text.is_empty()) {
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(&layer.text);
        }
        // Last: nothing a layer boundary split may slip through.
        if let std::borrow::Cow::Owned(clean) = self.secrets.redact(&text) {
            text = clean;
            redacted = true;
        }
        Composed {
            text,
            now,
            layers,
            files,
            redacted,
        }
    }

    /// Where the characters of `composed` go.
    fn report(&self, info: &TurnInfo, composed: &Composed) -> PromptReport {
        let Composed {
            text,
            now,
            layers,
            files,
            redacted,
        } = composed;
        let skills = layers.iter().find(|l| l.name == "skills");
        let xml = skills.map_or("", |l| skills_xml_of(&l.text));
        let skills_report = SkillsReport {
            count: memchr::memmem::find_iter(xml.as_bytes(), b"<skill")
                .filter(|&at| matches!(xml.as_bytes().get(at + 6), Some(b'>' | b' ')))
                .count(),
            chars: xml.chars().count(),
        };
        let mut layer_reports: Vec<LayerReport> = layers.iter().map(Layer::report).collect();
        let at = |name: &str| layer_reports.iter().position(|l| l.name == name);
        let messages = |name| LayerReport {
            name,
            chars: 0,
            placement: "messages",
        };
        if let Some(i) = at("untrusted") {
            layer_reports.insert(i, messages("history"));
            layer_reports.insert(i + 2, messages("message"));
        }
        PromptReport {
            agent: self.agent.clone(),
            session: info.session.clone(),
            channel: info.channel.clone(),
            model: self.model.clone(),
            timezone: self.settings.timezone.name().to_string(),
            time: now.to_rfc3339(),
            system_prompt_chars: text.chars().count(),
            layers: layer_reports,
            files: files.clone(),
            skills: skills_report,
            tools: None,
            caps: CapsReport {
                file_max_chars: self.settings.file_max_chars,
                total_max_chars: self.settings.total_max_chars,
                memory_max_chars: self.settings.memory_max_chars,
            },
            redacted: *redacted,
        }
    }
}

/// What [`PromptBuilder::compose`] made: the text, and what its report is made of.
struct Composed {
    text: String,
    now: DateTime<chrono_tz::Tz>,
    layers: [Layer; 7],
    files: Vec<FileReport>,
    redacted: bool,
}

/// The skills XML inside the skills layer's text (after its heading and hint).
fn skills_xml_of(layer: &str) -> &str {
    let body = layer
        .strip_prefix("# Skills\n")
        .and_then(|rest| rest.strip_prefix(crate::skills::PROMPT_HINT))
        .unwrap_or(layer);
    body.trim()
}

/// A turn's prompt: the agent's builder plus the session and channel.
pub struct TurnPrompt {
    builder: Arc<PromptBuilder>,
    info: TurnInfo,
    /// The text [`PromptSource::system_prompt_len`] assembled, given to the next
    /// [`PromptSource::system_prompt`] (the turn's first model call, moments later) once.
    ahead: std::sync::Mutex<Option<String>>,
}

impl PromptSource for TurnPrompt {
    fn system_prompt(&self) -> String {
        let ahead = self
            .ahead
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        ahead.unwrap_or_else(|| self.assemble())
    }

    fn system_prompt_len(&self) -> usize {
        let text = self.assemble();
        let len = text.len();
        *self
            .ahead
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(text);
        len
    }
}

impl TurnPrompt {
    fn assemble(&self) -> String {
        #[allow(
            clippy::disallowed_methods,
            reason = "a log-only timing: how long assembling the prompt took"
        )]
        let started = std::time::Instant::now();
        let text = self.builder.assemble_text(&self.info);
        tracing::debug!(
            agent = %self.builder.agent,
            session = %self.info.session,
            bytes = text.len(),
            micros = started.elapsed().as_micros() as u64,
            "System prompt assembled."
        );
        text
    }
}

/// A caller-given value on one line and at most [`RUNTIME_FIELD_MAX`] chars, so it cannot
/// start lines of its own in the system prompt.
fn one_line(s: &str) -> String {
    if s.len() <= RUNTIME_FIELD_MAX && !s.chars().any(char::is_control) {
        return s.to_string();
    }
    let flat: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    assemble::head(&flat, RUNTIME_FIELD_MAX).to_string()
}
