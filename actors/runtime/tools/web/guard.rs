//! Which addresses `web_fetch` may connect to, decided before every connection.
//!
//! [`classify`] names the non-public range an address lies in (loopback, private, link-local
//! incl. the cloud metadata address, CGNAT, unique-local, unspecified, multicast, broadcast,
//! documentation, …), looking through IPv4-mapped, IPv4-compatible, NAT64 and 6to4 IPv6 forms.
//! [`resolve`] turns a URL into the one socket address the request will use: it resolves the host
//! once, refuses the URL when any address is not public, and returns the checked address for the
//! caller to pin the connection to (no second lookup, so no DNS-rebinding window).
//!
//! Hosts listed in `[web] allow_private_hosts` skip the range check. The match is on the URL's
//! host exactly as the URL parser normalises it: allowing `127.0.0.1` does not allow
//! `localhost`, `127.0.0.2` or `[::1]`.

use reqwest::Url;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Why a URL may not be fetched.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GuardError {
    /// Not `http` or `https`.
    #[error("scheme \"{0}\" is not allowed (only http and https)")]
    Scheme(String),
    /// The URL has no host (e.g. `http:///x`).
    #[error("the URL has no host")]
    NoHost,
    /// The host is (or resolves to) an address in a non-public range.
    #[error("host \"{host}\" is {addr}, a {range} address; only public addresses may be fetched")]
    Forbidden {
        /// The host as written in the URL.
        host: String,
        /// The offending address.
        addr: IpAddr,
        /// The range it lies in (`loopback`, `private`, …).
        range: &'static str,
    },
    /// The name did not resolve.
    #[error("host \"{host}\" could not be resolved: {source}")]
    Unresolved {
        /// The host name.
        host: String,
        /// What the resolver said.
        source: Unresolvable,
    },
}

/// Why a host name gave no address to check.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Unresolvable {
    /// The resolver failed.
    #[error(transparent)]
    Lookup(std::io::Error),
    /// The resolver answered no address.
    #[error("no address")]
    NoAddress,
}

/// Where one request goes: the checked address, and the name to pin to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    /// The host name to pin to `addr` (`None` when the URL's host is an IP literal).
    pub domain: Option<String>,
    /// The address that was checked; the connection must go there.
    pub addr: SocketAddr,
    /// Whether the host was in `allow_private_hosts` (the range check was skipped).
    pub allowed: bool,
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.domain {
            Some(d) => write!(f, "{d} ({})", self.addr),
            None => write!(f, "{}", self.addr),
        }
    }
}

/// Resolves `url`'s host once and checks every address; returns the address to connect to.
pub(crate) async fn resolve(
    url: &Url,
    allow_private_hosts: &[String],
) -> Result<Target, GuardError> {
    let scheme = url.scheme();
    if scheme != "http" && scheme != "https" {
        return Err(GuardError::Scheme(scheme.to_string()));
    }
    let host = url.host_str().ok_or(GuardError::NoHost)?;
    let port = url.port_or_known_default().unwrap_or(80);
    let allowed = allow_private_hosts.iter().any(|h| h == host);
    let literal = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if let Ok(ip) = literal.parse::<IpAddr>() {
        if !allowed {
            check(host, ip)?;
        }
        return Ok(Target {
            domain: None,
            addr: SocketAddr::new(ip, port),
            allowed,
        });
    }
    resolve_name(host, port, allowed).await
}

/// Resolves the name `host` once and checks every address (skipped when `allowed`); returns the
/// address to connect to. The sandbox's network proxy uses this for every `CONNECT`.
pub(crate) async fn resolve_name(
    host: &str,
    port: u16,
    allowed: bool,
) -> Result<Target, GuardError> {
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host, port))
        .await
        .map_err(|e| GuardError::Unresolved {
            host: host.to_string(),
            source: Unresolvable::Lookup(e),
        })?
        .collect();
    checked(host, addrs, allowed)
}

/// The first of `addrs` (what `host` resolved to) once every one is public (unless `allowed`).
pub(crate) fn checked(
    host: &str,
    addrs: Vec<SocketAddr>,
    allowed: bool,
) -> Result<Target, GuardError> {
    let Some(first) = addrs.first().copied() else {
        return Err(GuardError::Unresolved {
            host: host.to_string(),
            source: Unresolvable::NoAddress,
        });
    };
    if !allowed {
        // Every address must be public: a name that mixes public and private addresses is an
        // attack on whichever one a client picks.
        for a in &addrs {
            check(host, a.ip())?;
        }
    }
    Ok(Target {
        domain: Some(host.to_string()),
        addr: first,
        allowed,
    })
}

/// `Err` naming the range when `addr` is not public.
pub(crate) fn check(host: &str, addr: IpAddr) -> Result<(), GuardError> {
    match classify(addr) {
        None => Ok(()),
        Some(range) => Err(GuardError::Forbidden {
            host: host.to_string(),
            addr,
            range,
        }),
    }
}

/// The non-public range `addr` lies in, or `None` for a public address.
pub(crate) fn classify(addr: IpAddr) -> Option<&'static str> {
    match addr {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

fn classify_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = ip.octets();
    let range = match (a, b, c) {
        _ if ip == Ipv4Addr::new(169, 254, 169, 254) => "link-local (cloud metadata)",
        _ if ip.is_broadcast() => "broadcast",
        (0, _, _) => "unspecified (\"this network\")",
        (10, _, _) => "private",
        (100, 64..=127, _) => "carrier-grade NAT",
        (127, _, _) => "loopback",
        (169, 254, _) => "link-local",
        (172, 16..=31, _) => "private",
        (192, 0, 0) => "IETF protocol assignment",
        (192, 0, 2) | (198, 51, 100) | (203, 0, 113) => "documentation",
        (192, 88, 99) => "6to4 relay anycast",
        (192, 168, _) => "private",
        (198, 18..=19, _) => "benchmarking",
        (224..=239, _, _) => "multicast",
        (240..=255, _, _) => "reserved",
        _ => return None,
    };
    Some(range)
}

fn classify_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let s = ip.segments();
    if ip.is_unspecified() {
        return Some("unspecified");
    }
    if ip.is_loopback() {
        return Some("loopback");
    }
    // Forms that embed an IPv4 address are judged by that address (its range is the answer).
    // ::ffff:a.b.c.d (IPv4-mapped): the socket layer connects to a.b.c.d itself.
    if let Some(v4) = ip.to_ipv4_mapped() {
        return classify_v4(v4);
    }
    // ::a.b.c.d (IPv4-compatible) is deprecated and never legitimately used: refused outright.
    if s[..6] == [0, 0, 0, 0, 0, 0] {
        return Some("IPv4-compatible (deprecated)");
    }
    // 64:ff9b::/96 (NAT64) embeds an IPv4 address in the last 32 bits.
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return classify_v4(embedded(s[6], s[7]));
    }
    // 2002::/16 (6to4) embeds an IPv4 address in bits 16..48.
    if s[0] == 0x2002 {
        return classify_v4(embedded(s[1], s[2]));
    }
    let range = match s[0] {
        0x0064 if s[1] == 0xff9b && s[2] == 1 => "NAT64 local-use",
        0x0100 if s[1..4] == [0, 0, 0] => "discard-only",
        0x2001 if s[1] == 0 => "Teredo tunnel",
        0x2001 if s[1] == 0x0db8 => "documentation",
        0x3fff if s[1] <= 0x0fff => "documentation",
        x if x & 0xfe00 == 0xfc00 => "unique-local",
        x if x & 0xffc0 == 0xfe80 => "link-local",
        x if x & 0xffc0 == 0xfec0 => "site-local",
        x if x & 0xff00 == 0xff00 => "multicast",
        _ => return None,
    };
    Some(range)
}

fn embedded(hi: u16, lo: u16) -> Ipv4Addr {
    Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo))
}
