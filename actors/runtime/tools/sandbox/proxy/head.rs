//! A proxy request's head, read with bounds and parsed: `CONNECT host:port` or an absolute-form
//! `GET http://host[:port]/path`, and the head to send on for the latter.

use tokio::io::{AsyncRead, AsyncReadExt};

/// The most bytes of a request head (request line and headers).
pub(crate) const MAX_HEAD_BYTES: usize = 16 * 1024;
/// The most header lines of a request.
pub(crate) const MAX_HEADERS: usize = 64;

/// Why a request head was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum HeadError {
    /// Past [`MAX_HEAD_BYTES`] or [`MAX_HEADERS`].
    #[error("request head too large (at most {MAX_HEAD_BYTES} bytes and {MAX_HEADERS} headers)")]
    TooLarge,
    /// The client closed before the head ended.
    #[error("the client closed the connection before the request head ended")]
    Closed,
    /// Not an HTTP/1 proxy request.
    #[error("malformed proxy request: {0}")]
    Malformed(&'static str),
}

/// Where a request goes and what to send there first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Request {
    /// `CONNECT` (a tunnel) or a plain HTTP request.
    pub tunnel: bool,
    /// The host as the client wrote it (lower case, without brackets or a trailing dot).
    pub host: String,
    /// The port.
    pub port: u16,
    /// For a plain request: the head to send to the server (origin-form target, no proxy
    /// headers, `Connection: close`) followed by the body bytes already read; for a tunnel: the
    /// bytes the client sent after the head.
    pub forward: Vec<u8>,
}

/// Reads a head from `client` (at most [`MAX_HEAD_BYTES`]) and parses it.
pub(crate) async fn read(client: &mut (impl AsyncRead + Unpin)) -> Result<Request, HeadError> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 2048];
    loop {
        if let Some(end) = find_end(&buf) {
            let rest = buf.split_off(end + 4);
            buf.truncate(end);
            return parse(&buf, rest);
        }
        if buf.len() >= MAX_HEAD_BYTES {
            return Err(HeadError::TooLarge);
        }
        let room = (MAX_HEAD_BYTES + 4 - buf.len()).min(chunk.len());
        let n = client
            .read(&mut chunk[..room])
            .await
            .map_err(|_| HeadError::Closed)?;
        if n == 0 {
            return Err(HeadError::Closed);
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn find_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n")
}

/// Parses a complete head (`head` ends before the blank line); `rest` is what followed it.
pub(crate) fn parse(head: &[u8], rest: Vec<u8>) -> Result<Request, HeadError> {
    if head.len() > MAX_HEAD_BYTES {
        return Err(HeadError::TooLarge);
    }
    let text = std::str::from_utf8(head).map_err(|_| HeadError::Malformed("not UTF-8"))?;
    let mut lines = text.split("\r\n");
    let line = lines.next().unwrap_or_default();
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(HeadError::Malformed("bad request line"));
    };
    if version != "HTTP/1.1" && version != "HTTP/1.0" {
        return Err(HeadError::Malformed("not HTTP/1"));
    }
    let headers: Vec<(&str, &str)> = lines
        .map(|l| {
            l.split_once(':')
                .map(|(k, v)| (k.trim(), v.trim()))
                .filter(|(k, _)| !k.is_empty() && !k.contains(' '))
                .ok_or(HeadError::Malformed("bad header line"))
        })
        .collect::<Result<_, _>>()?;
    if headers.len() > MAX_HEADERS {
        return Err(HeadError::TooLarge);
    }
    if method == "CONNECT" {
        let (host, port) = authority(target)?;
        return Ok(Request {
            tunnel: true,
            host,
            port,
            forward: rest,
        });
    }
    if !method.bytes().all(|b| b.is_ascii_uppercase()) || method.is_empty() {
        return Err(HeadError::Malformed("bad method"));
    }
    let after = target.strip_prefix("http://").ok_or(HeadError::Malformed(
        "a plain request must name an http:// URL (use CONNECT for https)",
    ))?;
    let (auth, path) = match after.find(['/', '?']) {
        Some(i) => (&after[..i], &after[i..]),
        None => (after, "/"),
    };
    if auth.contains('@') {
        return Err(HeadError::Malformed("credentials in the URL"));
    }
    let (host, port) = match auth.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(':') && (!h.starts_with('[') || h.ends_with(']')) => {
            (h, p.parse().map_err(|_| HeadError::Malformed("bad port"))?)
        }
        _ => (auth, 80),
    };
    let host = clean_host(host)?;
    let path = if path.starts_with('?') {
        format!("/{path}")
    } else {
        path.to_string()
    };
    let mut out = format!("{method} {path} {version}\r\n");
    for (k, v) in &headers {
        let lower = k.to_ascii_lowercase();
        if lower.starts_with("proxy-") || lower == "connection" || lower == "keep-alive" {
            continue;
        }
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str("Connection: close\r\n\r\n");
    let mut forward = out.into_bytes();
    forward.extend_from_slice(&rest);
    Ok(Request {
        tunnel: false,
        host,
        port,
        forward,
    })
}

/// `host:port` of a `CONNECT` (the port is required).
fn authority(target: &str) -> Result<(String, u16), HeadError> {
    let (host, port) = target
        .rsplit_once(':')
        .ok_or(HeadError::Malformed("CONNECT needs host:port"))?;
    let port: u16 = port.parse().map_err(|_| HeadError::Malformed("bad port"))?;
    Ok((clean_host(host)?, port))
}

/// Lower case, brackets of an IPv6 literal and one trailing dot removed; only the characters of
/// a name or an address.
fn clean_host(host: &str) -> Result<String, HeadError> {
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    let host = host.strip_suffix('.').unwrap_or(host);
    let ok = !host.is_empty()
        && host.len() <= 253
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-.:_".contains(&b));
    if !ok {
        return Err(HeadError::Malformed("bad host"));
    }
    Ok(host.to_ascii_lowercase())
}
