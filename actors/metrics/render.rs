//! The Prometheus text exposition format 0.0.4: names, escaping, numbers, one family at a time.

use super::{Family, Labels, Series};
use std::fmt::Write;

/// `[a-zA-Z_:][a-zA-Z0-9_:]*`.
pub(super) fn is_metric_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

/// `[a-zA-Z_][a-zA-Z0-9_]*`, not starting with the reserved `__`.
pub(super) fn is_label_name(s: &str) -> bool {
    let mut chars = s.chars();
    !s.starts_with("__")
        && chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// HELP text: backslash and newline escaped.
fn escape_help(s: &str) -> String {
    s.replace('\\', "\\\\").replace('\n', "\\n")
}

/// Label values: backslash, double quote and newline escaped.
fn escape_value(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// A float as Prometheus reads it: `+Inf`, `-Inf`, `NaN`, else the shortest exact decimal.
pub(super) fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".to_string()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.to_string()
    } else {
        format!("{v}")
    }
}

/// `{a="1",b="2"}` with `extra` appended last, or nothing when there are no labels at all.
fn label_set(labels: &Labels, extra: Option<(&str, &str)>) -> String {
    let mut parts: Vec<String> = labels
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", escape_value(v)))
        .collect();
    if let Some((k, v)) = extra {
        parts.push(format!("{k}=\"{}\"", escape_value(v)));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!("{{{}}}", parts.join(","))
    }
}

/// Appends `# HELP`, `# TYPE` and every sample of one family.
pub(super) fn family(out: &mut String, name: &str, family: &Family) {
    // Writing to a String cannot fail; the results are ignored for that reason only.
    let _ = writeln!(out, "# HELP {name} {}", escape_help(&family.help));
    let _ = writeln!(out, "# TYPE {name} {}", family.kind.as_str());
    for (labels, series) in &family.series {
        match series {
            Series::Counter(c) => {
                let _ = writeln!(out, "{name}{} {}", label_set(labels, None), c.get());
            }
            Series::Gauge(g) => {
                let _ = writeln!(out, "{name}{} {}", label_set(labels, None), g.get());
            }
            Series::Histogram(h) => {
                let data = h.snapshot();
                let mut cumulative = 0;
                for (i, bound) in data.bounds.iter().enumerate() {
                    cumulative += data.counts.get(i).copied().unwrap_or(0);
                    let le = number(*bound);
                    let set = label_set(labels, Some(("le", &le)));
                    let _ = writeln!(out, "{name}_bucket{set} {cumulative}");
                }
                let set = label_set(labels, Some(("le", "+Inf")));
                let _ = writeln!(out, "{name}_bucket{set} {}", data.count);
                let plain = label_set(labels, None);
                let _ = writeln!(out, "{name}_sum{plain} {}", number(data.sum));
                let _ = writeln!(out, "{name}_count{plain} {}", data.count);
            }
        }
    }
}
