use crate::tools::web::guard::{GuardError, classify, resolve};
use reqwest::Url;
use std::net::IpAddr;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[test]
fn every_non_public_ipv4_range_is_named() {
    for (addr, range) in [
        ("0.0.0.0", "unspecified (\"this network\")"),
        ("0.1.2.3", "unspecified (\"this network\")"),
        ("10.0.0.1", "private"),
        ("10.255.255.255", "private"),
        ("100.64.0.1", "carrier-grade NAT"),
        ("100.127.255.254", "carrier-grade NAT"),
        ("127.0.0.1", "loopback"),
        ("127.0.0.2", "loopback"),
        ("127.255.255.254", "loopback"),
        ("169.254.0.1", "link-local"),
        ("169.254.169.254", "link-local (cloud metadata)"),
        ("172.16.0.1", "private"),
        ("172.31.255.255", "private"),
        ("192.0.0.8", "IETF protocol assignment"),
        ("192.0.2.1", "documentation"),
        ("192.168.1.1", "private"),
        ("198.18.0.1", "benchmarking"),
        ("198.51.100.7", "documentation"),
        ("203.0.113.9", "documentation"),
        ("224.0.0.1", "multicast"),
        ("239.255.255.250", "multicast"),
        ("240.0.0.1", "reserved"),
        ("255.255.255.255", "broadcast"),
    ] {
        assert_eq!(classify(ip(addr)), Some(range), "{addr}");
    }
}

#[test]
fn public_addresses_next_to_the_ranges_pass() {
    for addr in [
        "8.8.8.8",
        "1.1.1.1",
        "9.255.255.255",
        "11.0.0.1",
        "100.63.255.255",
        "100.128.0.1",
        "126.255.255.255",
        "128.0.0.1",
        "169.253.255.255",
        "169.255.0.1",
        "172.15.255.255",
        "172.32.0.1",
        "192.167.255.255",
        "192.169.0.1",
        "223.255.255.255",
        "2606:4700:4700::1111",
        "2a00:1450:4001:80b::200e",
        "::ffff:8.8.8.8",
        "64:ff9b::808:808",
        "2002:808:808::1",
    ] {
        assert_eq!(classify(ip(addr)), None, "{addr} is public");
    }
}

#[test]
fn every_non_public_ipv6_range_is_refused() {
    for (addr, range) in [
        ("::", "unspecified"),
        ("::1", "loopback"),
        ("fc00::1", "unique-local"),
        ("fd12:3456::1", "unique-local"),
        ("fd00:ec2::254", "unique-local"),
        ("fe80::1", "link-local"),
        ("febf::1", "link-local"),
        ("fec0::1", "site-local"),
        ("ff02::1", "multicast"),
        ("2001:db8::1", "documentation"),
        ("2001:0:4136:e378::1", "Teredo tunnel"),
        ("100::1", "discard-only"),
        ("64:ff9b:1::1", "NAT64 local-use"),
        ("::7f00:1", "IPv4-compatible (deprecated)"),
        ("::ffff:127.0.0.1", "loopback"),
        ("::ffff:169.254.169.254", "link-local (cloud metadata)"),
        ("::ffff:10.1.2.3", "private"),
        ("::ffff:0.0.0.0", "unspecified (\"this network\")"),
        ("64:ff9b::7f00:1", "loopback"),
        ("64:ff9b::a9fe:a9fe", "link-local (cloud metadata)"),
        ("2002:7f00:1::1", "loopback"),
        ("2002:c0a8:101::1", "private"),
    ] {
        assert_eq!(classify(ip(addr)), Some(range), "{addr}");
    }
}

async fn refused(url: &str, allow: &[&str]) -> GuardError {
    let allow: Vec<String> = allow.iter().map(|s| s.to_string()).collect();
    let parsed = Url::parse(url).unwrap_or_else(|e| panic!("{url}: {e}"));
    match resolve(&parsed, &allow).await {
        Err(e) => e,
        Ok(t) => panic!("{url} must be refused, got {t}"),
    }
}

#[tokio::test]
async fn every_spelling_of_a_forbidden_address_is_refused() {
    for (url, addr) in [
        ("http://127.0.0.1/", "127.0.0.1"),
        ("http://127.1/", "127.0.0.1"),
        ("http://2130706433/", "127.0.0.1"),
        ("http://0177.0.0.1/", "127.0.0.1"),
        ("http://0x7f.0.0.1/", "127.0.0.1"),
        ("http://0x7f000001/", "127.0.0.1"),
        ("http://0.0.0.0:8080/", "0.0.0.0"),
        ("http://0/", "0.0.0.0"),
        ("http://[::1]/", "::1"),
        ("http://[::]/", "::"),
        ("http://[::ffff:127.0.0.1]/", "::ffff:127.0.0.1"),
        ("http://[::ffff:7f00:1]/", "::ffff:127.0.0.1"),
        (
            "http://[::ffff:169.254.169.254]/latest/meta-data/",
            "::ffff:169.254.169.254",
        ),
        (
            "http://169.254.169.254/latest/meta-data/",
            "169.254.169.254",
        ),
        ("http://2852039166/", "169.254.169.254"),
        ("https://10.0.0.1/", "10.0.0.1"),
        ("http://[fe80::1]/", "fe80::1"),
        ("http://[fd00::1]/", "fd00::1"),
        ("http://100.100.100.200/", "100.100.100.200"),
    ] {
        match refused(url, &[]).await {
            GuardError::Forbidden { addr: a, .. } => assert_eq!(a, ip(addr), "{url}"),
            other => panic!("{url}: expected Forbidden, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn a_name_that_resolves_to_loopback_is_refused() {
    match refused("http://localhost:9/", &[]).await {
        GuardError::Forbidden { host, range, .. } => {
            assert_eq!(host, "localhost");
            assert_eq!(range, "loopback");
        }
        other => panic!("expected Forbidden, got {other:?}"),
    }
}

#[tokio::test]
async fn only_http_and_https_are_allowed() {
    for url in [
        "file:///etc/passwd",
        "ftp://example.com/x",
        "gopher://example.com/",
        "data:text/plain,hi",
    ] {
        assert!(
            matches!(refused(url, &["example.com"]).await, GuardError::Scheme(_)),
            "{url}"
        );
    }
}

#[tokio::test]
async fn the_allow_list_matches_the_exact_host_only() {
    let allow = ["127.0.0.1".to_string()];
    let ok = resolve(&Url::parse("http://127.0.0.1:8080/x").unwrap(), &allow)
        .await
        .unwrap();
    assert!(ok.allowed);
    assert_eq!(ok.addr, "127.0.0.1:8080".parse().unwrap());
    assert_eq!(ok.domain, None, "an IP literal needs no pinning");
    // The same address written another way normalises to the listed host.
    let same = resolve(&Url::parse("http://2130706433:8080/").unwrap(), &allow)
        .await
        .unwrap();
    assert_eq!(same.addr, ok.addr);
    // Other loopback addresses and names are not listed.
    for url in [
        "http://127.0.0.2:8080/",
        "http://localhost:8080/",
        "http://[::1]:8080/",
        "http://[::ffff:127.0.0.1]:8080/",
    ] {
        assert!(
            matches!(
                refused(url, &["127.0.0.1"]).await,
                GuardError::Forbidden { .. }
            ),
            "{url}"
        );
    }
}

#[tokio::test]
async fn an_allowed_name_is_pinned_to_the_address_it_resolved_to() {
    let allow = ["localhost".to_string()];
    let t = resolve(&Url::parse("http://localhost:1234/").unwrap(), &allow)
        .await
        .unwrap();
    assert_eq!(t.domain.as_deref(), Some("localhost"));
    assert!(t.addr.ip().is_loopback(), "{t}");
    assert_eq!(t.addr.port(), 1234);
}

#[tokio::test]
async fn public_literals_pass_without_a_lookup() {
    let t = resolve(&Url::parse("https://93.184.215.14/").unwrap(), &[])
        .await
        .unwrap();
    assert_eq!(t.addr, "93.184.215.14:443".parse().unwrap());
    assert!(!t.allowed);
    let t = resolve(&Url::parse("http://[2606:4700::1111]/").unwrap(), &[])
        .await
        .unwrap();
    assert_eq!(t.addr.port(), 80);
}
