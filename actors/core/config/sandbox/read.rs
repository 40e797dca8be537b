//! `[sandbox]` as written, read into a [`SandboxDef`] with every value's position.

use super::{Bind, Choice, Origin, SandboxDef, Set};
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
    pub workspace: Option<Spanned<String>>,
    pub network: Option<Spanned<String>>,
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
            let mut message = format!(
                "unknown value {:?} (expected one of: {})",
                v.get_ref(),
                expected.join(", ")
            );
            if field == "backend" && matches!(v.get_ref().as_str(), "docker" | "podman") {
                message = format!(
                    "backend {:?} is not supported yet (expected \"bwrap\")",
                    v.get_ref()
                );
            }
            if field == "network" && v.get_ref() == "allow" {
                message = "network = \"allow\" (a domain allowlist) is not supported yet (expected \"none\" or \"host\")".to_string();
            }
            at(field, v.span(), message)
        }
    }
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
