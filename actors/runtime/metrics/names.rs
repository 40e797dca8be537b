//! What Prometheus accepts as metric and label names; `prometheus-client` renders whatever it is
//! given, so a wrong name is caught here, at registration.

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
