//! DNS rebinding: a name that answers a public address when the guard checks it and a private
//! one when the connection is made. The check layer (request interception) is given a resolver
//! that answers a public address, the proxy one that answers loopback, and Chromium itself is
//! told the name is loopback (`--host-resolver-rules`): were the connection not pinned to what
//! the proxy checked, Chromium would reach the tripwire.

use super::{def, kind, rig_net};
use crate::tools::browser::chromium::Net;
use crate::tools::sandbox::proxy::{FakeDns, Resolver};
use clawbus_testkit::{FixtureSite, Tripwire, chromium_or_skip};
use serde_json::json;
use std::net::IpAddr;
use std::sync::Arc;

const NAME: &str = "rebind.test";

fn answers(ip: &str) -> Resolver {
    Resolver::Fake(Arc::new(FakeDns {
        pinned: Vec::new(),
        answers: vec![(NAME.into(), ip.parse::<IpAddr>().unwrap())],
    }))
}

#[tokio::test]
async fn a_name_that_rebinds_to_loopback_after_the_check_is_refused_at_the_connection() {
    let Some(exe) = chromium_or_skip(
        "a_name_that_rebinds_to_loopback_after_the_check_is_refused_at_the_connection",
    ) else {
        return;
    };
    let site = FixtureSite::start().await;
    let trip = Tripwire::start().await;
    let net = Net {
        check: answers("93.184.216.34"),
        connect: answers("127.0.0.1"),
        args: vec![format!("--host-resolver-rules=MAP {NAME} 127.0.0.1")],
    };
    let r = rig_net(def(exe, &site), net);
    let port = trip.addr.port();
    // Plain http: the proxy answers the refusal in place of the page.
    let page = r
        .ok(json!({ "action": "open", "url": format!("http://{NAME}:{port}/rebound") }))
        .await;
    assert!(
        page.contains("is 127.0.0.1, a loopback address"),
        "the proxy refused the rebound name: {page}"
    );
    // https goes through CONNECT, refused the same way: the navigation fails.
    let tunnel = r
        .call(json!({ "action": "navigate", "url": format!("https://{NAME}:{port}/tunnel") }))
        .await;
    assert_eq!(kind(&tunnel), "network", "{}", tunnel.text);
    // A page's own fetch() of the name is refused too.
    r.ok(json!({ "action": "navigate", "url": site.url("/form") }))
        .await;
    let script = format!(
        "fetch('http://{NAME}:{port}/from-fetch').then(r => r.text()).catch(e => 'failed: ' + e)"
    );
    let b = r
        .pool
        .running(&clawbus_core::ids::AgentId::parse("a").unwrap())
        .await
        .unwrap();
    let (session, _) = b.tab("t1").unwrap();
    let answer = crate::tools::browser::chromium::evaluate(
        &b.cdp,
        &session,
        &script,
        std::time::Duration::from_secs(20),
    )
    .await
    .unwrap();
    drop(b);
    assert!(
        !answer
            .as_str()
            .unwrap_or_default()
            .contains("secret from loopback"),
        "{answer}"
    );
    assert_eq!(
        trip.seen(),
        Vec::<String>::new(),
        "nothing reached the loopback server"
    );
    r.pool.stop_all().await;
}
