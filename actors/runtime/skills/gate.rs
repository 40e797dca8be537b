//! Gating: whether a skill's requirements hold here, and in words why not.

use super::{Skill, SkillCatalog};
use std::path::Path;

/// Why `skill` must stay invisible to the model; empty = it may be listed.
pub(super) fn reasons(skill: &Skill, catalog: &SkillCatalog) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(allow) = &catalog.allow
        && !allow.iter().any(|a| a == &skill.name)
    {
        out.push("not in the agent's skills.allow".to_string());
    }
    if skill.always {
        return out;
    }
    let env = &catalog.env;
    let path = env.var("PATH").unwrap_or_default();
    let dirs: Vec<_> = std::env::split_paths(&path).collect();
    let on_path = |bin: &str| dirs.iter().any(|d| is_program(d, bin));
    let req = &skill.requires;
    for bin in req.bins.iter().filter(|b| !on_path(b)) {
        out.push(format!("missing bin {bin}"));
    }
    if !req.any_bins.is_empty() && !req.any_bins.iter().any(|b| on_path(b)) {
        out.push(format!("missing any of bins {}", req.any_bins.join(", ")));
    }
    for name in &req.env {
        if env.var(name).is_none_or(|v| v.is_empty()) {
            out.push(format!("env {name} unset"));
        }
    }
    for key in &req.config {
        if !truthy(lookup(&catalog.settings, key)) {
            out.push(format!("config {key} is falsy"));
        }
    }
    if !skill.os.is_empty() && !skill.os.contains(&env.os) {
        out.push(format!("os {}", skill.os.join(",")));
    }
    out
}

/// Whether `dir/bin` is an executable file; `bin` must be a bare program name.
fn is_program(dir: &Path, bin: &str) -> bool {
    if bin.is_empty() || bin.contains(['/', '\\']) || dir.as_os_str().is_empty() {
        return false;
    }
    let Ok(meta) = std::fs::metadata(dir.join(bin)) else {
        return false;
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        meta.is_file() && meta.permissions().mode() & 0o111 != 0
    }
    #[cfg(not(unix))]
    {
        meta.is_file()
    }
}

/// The value at a dotted path (`web.search.brave_base_url`) of a TOML table.
fn lookup<'a>(table: &'a toml::Table, dotted: &str) -> Option<&'a toml::Value> {
    let mut parts = dotted.split('.');
    let mut value = table.get(parts.next()?)?;
    for part in parts {
        value = value.as_table()?.get(part)?;
    }
    Some(value)
}

/// Falsy: missing, `false`, `""`, `0`, an empty array or table.
fn truthy(value: Option<&toml::Value>) -> bool {
    use toml::Value;
    match value {
        None | Some(Value::Boolean(false)) => false,
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Integer(n)) => *n != 0,
        Some(Value::Float(f)) => *f != 0.0,
        Some(Value::Array(a)) => !a.is_empty(),
        Some(Value::Table(t)) => !t.is_empty(),
        Some(Value::Boolean(true) | Value::Datetime(_)) => true,
    }
}
