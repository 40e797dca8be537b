//! How one `[mcp.servers.<name>]` is reached: `command` (+ `args`, `env`) for stdio, or `url`
//! (+ `headers_env`) for Streamable HTTP; exactly one of `command` and `url`.

use super::mcp::{McpServerFile, McpTransport};
use super::span::Source;
use super::{Problem, is_env_name};
use std::collections::BTreeMap;
use std::ops::Range;

/// The server's transport, with every problem of its fields pushed to `problems` (in place).
pub(super) fn transport(
    src: &Source,
    n: &str,
    name_span: Range<usize>,
    s: &McpServerFile,
    problems: &mut Vec<Problem>,
) -> McpTransport {
    match (&s.command, &s.url) {
        (Some(_), Some(url)) => {
            problems.push(src.at(
                Some(url.span()),
                format!("mcp.servers.{n}.url"),
                "both command and url are set (expected exactly one: command for a stdio server, url for an HTTP one)",
            ));
            stdio(src, n, name_span, s, problems)
        }
        (None, Some(url)) => http(src, n, url, s, problems),
        _ => stdio(src, n, name_span, s, problems),
    }
}

fn stdio(
    src: &Source,
    n: &str,
    name_span: Range<usize>,
    s: &McpServerFile,
    problems: &mut Vec<Problem>,
) -> McpTransport {
    let command = match &s.command {
        None => {
            problems.push(src.at(
                Some(name_span),
                format!("mcp.servers.{n}.command"),
                "missing (expected the program that runs the server, e.g. \"npx\" or \"/usr/bin/python3\", or a url for an HTTP server)",
            ));
            String::new()
        }
        Some(c) if c.get_ref().trim().is_empty() => {
            problems.push(src.at(
                Some(c.span()),
                format!("mcp.servers.{n}.command"),
                "empty (expected the program that runs the server)",
            ));
            String::new()
        }
        Some(c) => c.get_ref().clone(),
    };
    if let Some((header, _)) = s.headers_env.iter().next() {
        problems.push(src.at(
            Some(header.span()),
            format!("mcp.servers.{n}.headers_env"),
            "only for a server with a url (a stdio server takes env)",
        ));
    }
    let mut env = Vec::new();
    for v in &s.env {
        if is_env_name(v.get_ref()) {
            env.push(v.get_ref().clone());
        } else {
            problems.push(not_a_name(src, v.span(), &format!("mcp.servers.{n}.env")));
        }
    }
    McpTransport::Stdio {
        command,
        args: s.args.clone(),
        env,
    }
}

fn http(
    src: &Source,
    n: &str,
    url: &toml::Spanned<String>,
    s: &McpServerFile,
    problems: &mut Vec<Problem>,
) -> McpTransport {
    if let Some(v) = s.env.first() {
        problems.push(src.at(
            Some(v.span()),
            format!("mcp.servers.{n}.env"),
            "only for a server with a command (an HTTP server takes headers_env)",
        ));
    }
    if let Err(why) = check_url(url.get_ref()) {
        problems.push(src.at(Some(url.span()), format!("mcp.servers.{n}.url"), why));
    }
    let mut headers_env = BTreeMap::new();
    for (header, var) in &s.headers_env {
        let field = format!("mcp.servers.{n}.headers_env");
        if !is_header_name(header.get_ref()) {
            problems.push(src.at(
                Some(header.span()),
                &field,
                format!("{:?} is not an HTTP header name", header.get_ref()),
            ));
        } else if RESERVED_HEADERS
            .iter()
            .any(|r| header.get_ref().eq_ignore_ascii_case(r))
        {
            problems.push(src.at(
                Some(header.span()),
                &field,
                format!("{:?} is set by the MCP client itself (expected another header, e.g. Authorization)", header.get_ref()),
            ));
        } else if !is_env_name(var.get_ref()) {
            problems.push(not_a_name(src, var.span(), &field));
        } else {
            headers_env.insert(header.get_ref().clone(), var.get_ref().clone());
        }
    }
    McpTransport::Http {
        url: url.get_ref().clone(),
        headers_env,
    }
}

/// Headers the Streamable HTTP client sets itself.
const RESERVED_HEADERS: &[&str] = &[
    "accept",
    "content-type",
    "host",
    "content-length",
    "mcp-session-id",
    "mcp-protocol-version",
    "last-event-id",
];

/// The value is not echoed: a misplaced secret must not end up in a terminal or a log.
fn not_a_name(src: &Source, span: Range<usize>, field: &str) -> Problem {
    src.at(
        Some(span),
        field,
        "not an environment variable name (expected the NAME of a variable to pass, [A-Z_][A-Z0-9_]*, never its value)",
    )
}

/// `https://…` anywhere, `http://…` only to a loopback host (headers may carry credentials),
/// never a user or password in the URL (they belong in `headers_env`).
fn check_url(text: &str) -> Result<(), String> {
    let url = url::Url::parse(text).map_err(|e| format!("not a URL ({e})"))?;
    if !url.username().is_empty() || url.password().is_some() {
        return Err(
            "has a user or password (expected them in headers_env, never in the file)".into(),
        );
    }
    let loopback = match url.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    };
    match url.scheme() {
        "https" => Ok(()),
        "http" if loopback => Ok(()),
        "http" => Err(format!(
            "http:// to {:?}, which is not loopback (expected https://, or http:// to 127.0.0.1, [::1] or localhost)",
            url.host_str().unwrap_or_default()
        )),
        other => Err(format!("scheme {other:?} (expected https:// or http://)")),
    }
}

/// An HTTP header name: one or more token characters (RFC 9110).
fn is_header_name(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}
