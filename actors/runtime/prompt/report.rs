//! Where the prompt's characters go: per layer, per file, skills and tool schemas
//! (OpenClaw's `systemPromptReport`).

use crate::tools::ToolSet;
use serde::Serialize;

/// The breakdown of one assembled system prompt.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PromptReport {
    /// The agent.
    pub agent: String,
    /// The session key the prompt was assembled for.
    pub session: String,
    /// The channel the turn came from.
    pub channel: String,
    /// `provider/model`.
    pub model: String,
    /// The agent's time zone (IANA).
    pub timezone: String,
    /// The time in the runtime line, RFC 3339 in the agent's time zone.
    pub time: String,
    /// Characters of the whole system prompt.
    pub system_prompt_chars: usize,
    /// Every layer in prompt order, including those that travel as messages (`history`,
    /// `message`, whose characters are only known to the turn).
    pub layers: Vec<LayerReport>,
    /// Every workspace and memory file the prompt looked for.
    pub files: Vec<FileReport>,
    /// The skills list.
    pub skills: SkillsReport,
    /// The tool schemas sent beside the prompt, when the caller filled it in.
    pub tools: Option<ToolsReport>,
    /// The caps in force.
    pub caps: CapsReport,
    /// Whether a secret value was found and redacted.
    pub redacted: bool,
}

/// One layer of the prompt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LayerReport {
    /// `preamble`, `soul`, `workspace`, `memory`, `skills`, `history`, `untrusted`, `message`,
    /// `runtime`.
    pub name: &'static str,
    /// Characters this layer adds (headings included); 0 when absent.
    pub chars: usize,
    /// `system` (part of the system prompt) or `messages` (sent as chat messages).
    pub placement: &'static str,
}

/// One workspace or memory file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileReport {
    /// Workspace-relative path.
    pub path: String,
    /// The layer it belongs to (`soul`, `workspace`, `memory`).
    pub layer: &'static str,
    /// Whether the file exists.
    pub present: bool,
    /// Characters of the file (trailing whitespace trimmed).
    pub chars: usize,
    /// Characters of it that went into the prompt.
    pub injected_chars: usize,
    /// Whether it was cut.
    pub truncated: bool,
    /// Which cap cut it: `file`, `memory` or `total`.
    pub cut_by: Option<&'static str>,
}

/// The skills list layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
pub struct SkillsReport {
    /// `<skill>` entries in the list.
    pub count: usize,
    /// Characters of the list (the XML alone).
    pub chars: usize,
}

/// The tool schemas offered with the prompt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolsReport {
    /// The tool names, in order.
    pub names: Vec<String>,
    /// Characters of the `tools` array as the model client sends it.
    pub schema_chars: usize,
}

impl ToolsReport {
    /// Names and schema characters of `tools`, serialised as the OpenAI-compatible client does
    /// (`{"type":"function","function":{name, description, parameters}}` per tool).
    pub fn of(tools: &ToolSet) -> Self {
        let schemas = tools.schemas();
        let array: Vec<serde_json::Value> = schemas
            .iter()
            .map(|(name, description, parameters)| {
                serde_json::json!({
                    "type": "function",
                    "function": { "name": name, "description": description, "parameters": parameters }
                })
            })
            .collect();
        Self {
            names: schemas.into_iter().map(|(name, _, _)| name).collect(),
            schema_chars: serde_json::Value::Array(array).to_string().chars().count(),
        }
    }
}

/// The caps the prompt was assembled under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CapsReport {
    /// One workspace file.
    pub file_max_chars: usize,
    /// All workspace and memory files together.
    pub total_max_chars: usize,
    /// The memory layer.
    pub memory_max_chars: usize,
}

impl PromptReport {
    /// The report as a human reads it.
    pub fn render(&self) -> String {
        let mut lines = vec![
            format!(
                "agent {}  session {}  channel {}  model {}",
                self.agent, self.session, self.channel, self.model
            ),
            format!("time {} ({})", self.time, self.timezone),
            format!("system prompt: {} chars", self.system_prompt_chars),
            "\nlayers:".to_string(),
        ];
        for l in &self.layers {
            let chars = if l.placement == "system" {
                format!("{:>8} chars", l.chars)
            } else {
                format!("{:>8}   (sent as messages)", "-")
            };
            lines.push(format!("  {:<10} {chars}", l.name));
        }
        lines.push("\nfiles:".to_string());
        for f in &self.files {
            let state = match (f.present, f.cut_by) {
                (false, _) => "missing".to_string(),
                (true, Some(cap)) => {
                    format!(
                        "truncated by the {cap} cap ({} of {})",
                        f.injected_chars, f.chars
                    )
                }
                (true, None) => "whole".to_string(),
            };
            lines.push(format!(
                "  {:<28} {:<9} {:>8} chars  {state}",
                f.path, f.layer, f.injected_chars
            ));
        }
        lines.push(format!(
            "\nskills: {} listed, {} chars",
            self.skills.count, self.skills.chars
        ));
        lines.push(match &self.tools {
            Some(t) => format!(
                "tools: {} ({}), schemas {} chars",
                t.names.len(),
                t.names.join(", "),
                t.schema_chars
            ),
            None => "tools: not reported".to_string(),
        });
        lines.push(format!(
            "caps: file {} / total {} / memory {} chars",
            self.caps.file_max_chars, self.caps.total_max_chars, self.caps.memory_max_chars
        ));
        if self.redacted {
            lines.push("secrets: at least one secret value was redacted".to_string());
        }
        let mut out = lines.join("\n");
        out.push('\n');
        out
    }
}
