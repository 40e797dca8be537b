//! What a tool answers: [`ToolOutput`], the structured error [`ToolError`], and the cap that
//! saves an over-long result under the workspace so the agent can page it with `read`.

use std::fmt;
use std::path::Path;

/// Folder under the workspace where over-long results are saved in full.
pub const SPILL_DIR: &str = ".clawbus-tool-output";
/// Saved results kept per workspace; older ones are deleted.
const SPILL_KEEP: usize = 100;
/// Longest error message handed to the model; error outputs are never cut (they stay JSON).
const MAX_ERROR_MESSAGE: usize = 4000;

/// What a tool answers: text for the model, whether it is an error, and images (a screenshot)
/// for models that accept them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    /// The text handed back to the model as the tool result.
    pub text: String,
    /// True when the call failed; `text` is then
    /// `{"error":{"type":…,"message":…,"limit"?:…,"retry_after_ms"?:…,"suggestion"?:…}}`.
    pub is_error: bool,
    /// Images that go with the text to models that accept images (the text must stand alone:
    /// others never see them).
    pub images: Vec<crate::model::ImagePart>,
}

/// A failed call, as the model sees it: a kind it can branch on, a short message without secrets,
/// and optionally when to retry and what to do instead. Full causes go to the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolError {
    /// The kind (`invalid_arguments`, `policy_denied`, …).
    pub kind: String,
    /// What went wrong, naming the entity.
    pub message: String,
    /// When a retry may succeed, in milliseconds.
    pub retry_after_ms: Option<u64>,
    /// What the model should do instead.
    pub suggestion: Option<String>,
    /// The sandbox limit that stopped a command (`memory`, `cpu_time`, `processes`,
    /// `file_size`, `timeout`).
    pub limit: Option<String>,
}

impl ToolError {
    /// An error of `kind` with `message`.
    pub fn new(kind: &str, message: impl fmt::Display) -> Self {
        Self {
            kind: kind.to_string(),
            message: message.to_string(),
            retry_after_ms: None,
            suggestion: None,
            limit: None,
        }
    }

    /// Names the sandbox limit that stopped a command.
    pub fn limit(mut self, limit: impl Into<String>) -> Self {
        self.limit = Some(limit.into());
        self
    }

    /// Adds what the model should do instead.
    pub(crate) fn suggest(mut self, suggestion: impl Into<String>) -> Self {
        self.suggestion = Some(suggestion.into());
        self
    }

    /// Adds when a retry may succeed.
    pub fn retry_after(mut self, ms: u64) -> Self {
        self.retry_after_ms = Some(ms);
        self
    }
}

impl From<ToolError> for ToolOutput {
    fn from(e: ToolError) -> Self {
        // Built by hand so the key order stays type, message, retry_after_ms, suggestion.
        let quote = |s: &str| serde_json::Value::from(s).to_string();
        let mut message = e.message;
        if message.len() > MAX_ERROR_MESSAGE {
            let mut cut = MAX_ERROR_MESSAGE;
            while !message.is_char_boundary(cut) {
                cut -= 1;
            }
            message.truncate(cut);
            message.push('…');
        }
        let mut text = format!(
            r#"{{"error":{{"type":{},"message":{}"#,
            quote(&e.kind),
            quote(&message)
        );
        if let Some(limit) = &e.limit {
            text.push_str(&format!(r#","limit":{}"#, quote(limit)));
        }
        if let Some(ms) = e.retry_after_ms {
            text.push_str(&format!(r#","retry_after_ms":{ms}"#));
        }
        if let Some(s) = &e.suggestion {
            text.push_str(&format!(r#","suggestion":{}"#, quote(s)));
        }
        text.push_str("}}");
        Self {
            text,
            is_error: true,
            images: Vec::new(),
        }
    }
}

impl ToolOutput {
    /// A successful result.
    pub fn ok(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            is_error: false,
            images: Vec::new(),
        }
    }

    /// This output with `image` added.
    pub fn with_image(mut self, image: crate::model::ImagePart) -> Self {
        self.images.push(image);
        self
    }

    /// A failed result the model can act on: `{"error":{"type":kind,"message":message}}`.
    /// The message must be short and hold no secrets; full causes go to the log. See
    /// [`ToolError`] for the optional fields.
    pub fn error(kind: &str, message: impl fmt::Display) -> Self {
        ToolError::new(kind, message).into()
    }

    /// A failed result with a suggestion of what to do instead.
    pub(crate) fn error_with_suggestion(
        kind: &str,
        message: impl fmt::Display,
        suggestion: impl Into<String>,
    ) -> Self {
        ToolError::new(kind, message).suggest(suggestion).into()
    }

    /// Cuts `text` to at most `max_bytes` bytes of UTF-8, at a char boundary, and appends
    /// `\n[truncated: N of M bytes shown]`. Text that fits is left alone.
    pub fn truncated(self, max_bytes: usize) -> Self {
        self.cut(max_bytes, "")
    }

    /// Like [`truncated`](Self::truncated), but first saves the whole text under
    /// `<workspace>/.clawbus-tool-output/<uuid>.txt` and names that file in the note:
    /// `[truncated: N of M bytes shown; full output at <path>]` (the path relative to the
    /// workspace, readable with `read` and its offset/limit). Error outputs are left whole.
    /// Blocking file I/O: call it off the async threads.
    pub fn capped(self, max_bytes: usize, workspace: &Path) -> Self {
        if self.is_error || self.text.len() <= max_bytes {
            return self;
        }
        match spill(workspace, &self.text) {
            Ok(rel) => self.cut(max_bytes, &format!("; full output at {rel}")),
            Err(e) => {
                tracing::warn!(workspace = %workspace.display(), error = %e, "Could not save the full tool output.");
                self.cut(max_bytes, "; the full output could not be saved")
            }
        }
    }

    fn cut(mut self, max_bytes: usize, tail: &str) -> Self {
        let total = self.text.len();
        if total <= max_bytes {
            return self;
        }
        let mut cut = max_bytes;
        while !self.text.is_char_boundary(cut) {
            cut -= 1;
        }
        self.text.truncate(cut);
        self.text.push_str(&format!(
            "\n[truncated: {cut} of {total} bytes shown{tail}]"
        ));
        self
    }
}

/// Writes `text` to a new file under the spill folder; returns its workspace-relative path.
/// The folder must really be inside the workspace: a symlink planted in its place (by a command
/// or an unpacked archive) would have outputs written, and old files pruned, elsewhere.
fn spill(workspace: &Path, text: &str) -> std::io::Result<String> {
    use std::io::Write;
    let outside =
        |e: super::ConfineError| std::io::Error::new(std::io::ErrorKind::PermissionDenied, e);
    let dir = super::confine(workspace, SPILL_DIR).map_err(outside)?;
    std::fs::create_dir_all(&dir)?;
    // Checked again once it exists: nothing may have turned it into a way out meanwhile.
    let dir = super::confine(workspace, SPILL_DIR).map_err(outside)?;
    let name = format!("{}.txt", uuid::Uuid::now_v7());
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NOFOLLOW);
    }
    options.open(dir.join(&name))?.write_all(text.as_bytes())?;
    prune(&dir);
    Ok(format!("{SPILL_DIR}/{name}"))
}

/// Keeps the newest [`SPILL_KEEP`] files (names are time-ordered UUIDv7s).
fn prune(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut names: Vec<_> = entries
        .filter_map(Result::ok)
        .map(|e| e.file_name())
        .filter(|n| n.to_string_lossy().ends_with(".txt"))
        .collect();
    if names.len() <= SPILL_KEEP {
        return;
    }
    names.sort();
    for old in &names[..names.len() - SPILL_KEEP] {
        if let Err(e) = std::fs::remove_file(dir.join(old)) {
            tracing::debug!(file = ?old, error = %e, "Could not delete an old saved tool output.");
        }
    }
}
