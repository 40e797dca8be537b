//! `[sandbox]` as written, read into a [`SandboxDef`] with every value's position.

use super::{Bind, Choice, NetworkMode, Origin, SandboxBackend, SandboxDef, Set};
use crate::config::Problem;
use crate::config::duration::DurationText;
use crate::config::is_env_name;
use crate::config::span::Source;
use serde::Deserialize;
use std::path::PathBuf;
use std::time::Duration;
use toml::Spanned;

/// `[sandbox]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(in crate::config) struct SandboxFile {
    pub mode: Option<Spanned<String>>,
    pub backend: Option<Spanned<String>>,
    pub image: Option<Spanned<String>>,
    pub workspace: Option<Spanned<String>>,
    pub network: Option<Spanned<String>>,
    pub allow_domains: Option<Spanned<Vec<Spanned<String>>>>,
    pub cpu_seconds: Option<Spanned<i64>>,
    pub memory_mb: Option<Spanned<i64>>,
    pub max_processes: Option<Spanned<i64>>,
    pub max_file_mb: Option<Spanned<i64>>,
    pub max_open_files: Option<Spanned<i64>>,
    pub timeout: Option<Spanned<DurationText>>,
    pub env: Option<Spanned<Vec<Spanned<String>>>>,
    pub binds: Option<Spanned<Vec<Spanned<String>>>>,
}

/// The settings of one file's `[sandbox]`, each remembering its position; unset ones default.
pub(in crate::config) fn sandbox_def(
    src: &Source,
    f: &SandboxFile,
    problems: &mut Vec<Problem>,
) -> SandboxDef {
    let mut def = SandboxDef::default();
    let mut at = |field: &str, span: std::ops::Range<usize>, message: String| {
        problems.push(src.at(Some(span), format!("sandbox.{field}"), message));
    };
    let origin = |span: std::ops::Range<usize>| {
        let p = src.at(Some(span), "", "");
        Some(Origin {
            path: p.path,
            line: p.line,
            col: p.col,
        })
    };
    choose(&f.mode, "mode", &mut def.mode, &mut at, &origin);
    choose(&f.backend, "backend", &mut def.backend, &mut at, &origin);
    choose(
        &f.workspace,
        "workspace",
        &mut def.workspace,
        &mut at,
        &origin,
    );
    choose(&f.network, "network", &mut def.network, &mut at, &origin);
    let limits: [Limit<'_>; 5] = [
        (
            &f.cpu_seconds,
            "cpu_seconds",
            &mut def.cpu_seconds,
            86_400,
            "seconds",
        ),
        (
            &f.memory_mb,
            "memory_mb",
            &mut def.memory_mb,
            1 << 20,
            "MiB",
        ),
        (
            &f.max_processes,
            "max_processes",
            &mut def.max_processes,
            1 << 16,
            "processes",
        ),
        (
            &f.max_file_mb,
            "max_file_mb",
            &mut def.max_file_mb,
            1 << 20,
            "MiB",
        ),
        (
            &f.max_open_files,
            "max_open_files",
            &mut def.max_open_files,
            1 << 20,
            "files",
        ),
    ];
    for (value, field, slot, max, unit) in limits {
        let Some(v) = value else { continue };
        match *v.get_ref() {
            n @ 1.. if n <= max => {
                *slot = Set {
                    value: n as u64,
                    origin: origin(v.span()),
                }
            }
            n => at(
                field,
                v.span(),
                format!("{n} is out of range (expected 1 to {max} {unit})"),
            ),
        }
    }
    if let Some(t) = &f.timeout {
        match crate::config::parse_duration(&t.get_ref().0) {
            Ok(d) if !d.is_zero() && d <= Duration::from_secs(86_400) => {
                def.timeout = Set {
                    value: d,
                    origin: origin(t.span()),
                }
            }
            Ok(_) => at(
                "timeout",
                t.span(),
                format!(
                    "{:?} is out of range (expected more than 0 and at most 24h)",
                    t.get_ref().0
                ),
            ),
            Err(message) => at("timeout", t.span(), message.to_string()),
        }
    }
    if let Some(list) = &f.env {
        let mut names = Vec::new();
        for name in list.get_ref() {
            if is_env_name(name.get_ref()) {
                names.push(name.get_ref().clone());
            } else {
                at(
                    "env",
                    name.span(),
                    format!(
                        "{:?} is not an environment variable name (expected [A-Z_][A-Z0-9_]*)",
                        name.get_ref()
                    ),
                );
            }
        }
        def.env = Set {
            value: names,
            origin: origin(list.span()),
        };
    }
    if let Some(list) = &f.allow_domains {
        let mut patterns = Vec::new();
        for entry in list.get_ref() {
            match domain_pattern(entry.get_ref()) {
                Ok(p) => patterns.push(p),
                Err(message) => at("allow_domains", entry.span(), message),
            }
        }
        def.allow_domains = Set {
            value: patterns,
            origin: origin(list.span()),
        };
    }
    if let Some(image) = &f.image {
        let text = image.get_ref();
        let ok = !text.is_empty()
            && text.len() <= 255
            && !text.starts_with('-')
            && text
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-/:@".contains(c));
        if ok {
            def.image = Set {
                value: text.clone(),
                origin: origin(image.span()),
            };
        } else {
            at(
                "image",
                image.span(),
                format!(
                    "{text:?} is not an image reference (expected e.g. \"debian:bookworm-slim\")"
                ),
            );
        }
    }
    if let Some(list) = &f.binds {
        let mut binds = Vec::new();
        for entry in list.get_ref() {
            match bind(entry.get_ref()) {
                Ok(b) => binds.push(b),
                Err(message) => at("binds", entry.span(), message),
            }
        }
        def.binds = Set {
            value: binds,
            origin: origin(list.span()),
        };
    }
    def
}

/// One numeric limit as read: the value, its field, where it goes, its maximum and unit.
type Limit<'a> = (
    &'a Option<Spanned<i64>>,
    &'a str,
    &'a mut Set<u64>,
    i64,
    &'a str,
);

/// Reads one named choice into `slot`, or reports it.
fn choose<T: Choice>(
    value: &Option<Spanned<String>>,
    field: &str,
    slot: &mut Set<T>,
    at: &mut impl FnMut(&str, std::ops::Range<usize>, String),
    origin: &impl Fn(std::ops::Range<usize>) -> Option<Origin>,
) {
    let Some(v) = value else { return };
    match T::ALL.iter().find(|c| c.as_str() == v.get_ref()) {
        Some(c) => {
            *slot = Set {
                value: *c,
                origin: origin(v.span()),
            }
        }
        None => {
            let expected: Vec<&str> = T::ALL.iter().map(|c| c.as_str()).collect();
            let message = format!(
                "unknown value {:?} (expected one of: {})",
                v.get_ref(),
                expected.join(", ")
            );
            at(field, v.span(), message)
        }
    }
}

/// The problems of an agent's effective sandbox (its settings over `clawbus.toml`'s) that no
/// single file shows, placed at the line that set `network`.
pub(in crate::config) fn merged_problems(def: &SandboxDef, file: &std::path::Path) -> Vec<Problem> {
    let mut out = Vec::new();
    if def.network.value != NetworkMode::Allow {
        return out;
    }
    let (path, line, col) = match &def.network.origin {
        Some(o) => (o.path.clone(), o.line, o.col),
        None => (file.to_path_buf(), 0, 0),
    };
    let mut push = |message: String| {
        out.push(Problem {
            path: path.clone(),
            line,
            col,
            field: "sandbox.network".to_string(),
            message,
        })
    };
    if def.allow_domains.value.is_empty() {
        push("network = \"allow\" needs the names it allows (expected sandbox.allow_domains = [\"example.com\", \"*.example.org\"], not empty)".to_string());
    }
    if def.backend.value != SandboxBackend::Bwrap {
        push(format!(
            "network = \"allow\" is not supported with backend \"{}\" yet (expected backend = \"bwrap\", or network = \"none\" or \"host\")",
            def.backend.value
        ));
    }
    out
}

/// One `allow_domains` entry: a domain name (`example.com`) or a wildcard over the names below
/// one (`*.example.com`), in lower case.
fn domain_pattern(text: &str) -> Result<String, String> {
    let expected = "(expected a domain name such as \"example.com\" or \"*.example.com\"; no scheme, port, path or IP address)";
    let lower = text.to_ascii_lowercase();
    let name = lower.strip_prefix("*.").unwrap_or(&lower);
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
    };
    if name.len() > 253 || !name.split('.').all(label_ok) {
        return Err(format!("{text:?} is not a domain pattern {expected}"));
    }
    if name.parse::<std::net::Ipv4Addr>().is_ok()
        || name
            .split('.')
            .all(|l| l.chars().all(|c| c.is_ascii_digit()))
    {
        return Err(format!(
            "{text:?} is an IP address, not a domain {expected}"
        ));
    }
    Ok(lower)
}

/// `"/abs/path:ro"` or `"/abs/path:rw"`.
fn bind(text: &str) -> Result<Bind, String> {
    let expected = "(expected an absolute host path followed by :ro or :rw, e.g. \"/opt/data:ro\")";
    let (path, writable) = match text.rsplit_once(':') {
        Some((p, "ro")) => (p, false),
        Some((p, "rw")) => (p, true),
        _ => return Err(format!("{text:?} has no :ro or :rw {expected}")),
    };
    let path = PathBuf::from(path);
    if !path.is_absolute() {
        return Err(format!("{text:?} is not an absolute path {expected}"));
    }
    if path
        .components()
        .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        return Err(format!("{text:?} contains \"..\" {expected}"));
    }
    Ok(Bind { path, writable })
}
