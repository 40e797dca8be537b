//! Figures of the flow engine, in one process (`cargo bench --bench flows`): an embedded bus on
//! sled in a temporary folder, an agent that answers every task at once (no model), the engine
//! over the same sled.
//!
//! - **100 independent nodes**: one run's wall time per node, and the same 100 tasks submitted
//!   through the ingress pipeline and awaited without a flow; the difference per node is the
//!   scheduler's overhead (its record writes, events, templates).
//! - **20-deep chain**: the same, one node after the other.
//! - **1,000 flows at once**: 1,000 runs of a 2-node chain started together: wall time per
//!   scheduling step (node) and the RSS growth per run.
//!
//! Figures are printed, never asserted. `--tiny` runs small sizes.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![allow(clippy::disallowed_methods, reason = "a bench measures real time")]

use bus::{Bus, BusOptions, Outcome, RequestId, Topic};
use clawbus::config::flow::{FlowDef, check_text};
use clawbus::flow::{FlowStore, Flows, RunState, SledFlows};
use clawbus::ids::AgentId;
use clawbus::ingress::{Duplicates, Ingress, Request, Target};
use clawbus::origin::Origin;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn main() {
    let (mut wide, mut deep, mut many) = (100, 20, 1_000);
    if std::env::args().any(|a| a == "--tiny") {
        (wide, deep, many) = (5, 3, 10);
    }
    actix_rt::System::new().block_on(async move {
        let dir = tempfile::tempdir().unwrap();
        let db = sled::open(dir.path()).unwrap();
        let opts = BusOptions {
            dedup_window: Duration::from_secs(3600),
            ..BusOptions::default()
        };
        let bus = bus::open(opts, db.clone()).unwrap().bus;
        agent(&bus).await;
        let store: Arc<dyn FlowStore> = Arc::new(SledFlows::open(&db).unwrap());
        let flows = Flows::new(bus.clone(), Arc::new(bus::SystemClock), store, [
            flow(&independent(wide)),
            flow(&chain(deep)),
            flow(&chain(2).replace("name = \"chain\"", "name = \"pair\"")),
        ]);
        let t = run(&flows, "wide").await;
        let base = baseline(&bus, wide, true).await;
        report(&format!("{wide} independent nodes"), t, base, wide);
        let t = run(&flows, "chain").await;
        let base = baseline(&bus, deep, false).await;
        report(&format!("{deep}-deep chain"), t, base, deep);
        let before = rss_bytes();
        let start = Instant::now();
        let mut ids = Vec::new();
        for _ in 0..many {
            ids.push(flows.start_named("pair", &BTreeMap::new(), None).await.unwrap().run.id);
        }
        for id in &ids {
            let r = flows.wait(id, Duration::from_secs(600)).await.unwrap();
            assert_eq!(r.state, RunState::Succeeded);
        }
        let took = start.elapsed();
        let grew = rss_bytes().saturating_sub(before);
        println!(
            "{many} flows of 2 nodes at once: {:.1} ms in all, {:.3} ms per scheduling step (node), RSS +{:.1} KiB per run",
            took.as_secs_f64() * 1e3,
            took.as_secs_f64() * 1e3 / (2 * many) as f64,
            grew as f64 / 1024.0 / many as f64
        );
    });
}

fn report(what: &str, flow: Duration, base: Duration, nodes: usize) {
    let per = |d: Duration| d.as_secs_f64() * 1e3 / nodes as f64;
    println!(
        "{what}: flow {:.3} ms per node, tasks alone {:.3} ms per task, scheduler overhead {:.3} ms per node",
        per(flow),
        per(base),
        per(flow) - per(base)
    );
}

/// An agent `a` that answers every task at once.
async fn agent(bus: &Arc<dyn Bus>) {
    let mut sub = bus.consume(Topic::agent("a")).await.unwrap();
    tokio::spawn(async move {
        while let Some(d) = sub.next().await {
            if d.start().await.unwrap() {
                let result = serde_json::json!({ "text": "ok" });
                d.complete(Outcome::Succeeded { result }).await.unwrap();
            }
        }
    });
}

fn flow(text: &str) -> FlowDef {
    let (def, problems) = check_text(
        std::path::Path::new("bench.toml"),
        text,
        &[AgentId::new("a")],
        &["main".to_string()],
    );
    assert!(problems.is_empty(), "{problems:?}");
    def.unwrap()
}

fn independent(n: usize) -> String {
    let mut s = "[flow]\nname = \"wide\"\n".to_string();
    for i in 0..n {
        s.push_str(&format!(
            "[[node]]\nid = \"n{i}\"\nagent = \"a\"\nprompt = \"go {i}\"\n"
        ));
    }
    s
}

fn chain(n: usize) -> String {
    let mut s = "[flow]\nname = \"chain\"\n".to_string();
    for i in 0..n {
        s.push_str(&format!(
            "[[node]]\nid = \"n{i}\"\nagent = \"a\"\nprompt = \"go {i}\"\n"
        ));
        if i > 0 {
            s.push_str(&format!("depends_on = [\"n{}\"]\n", i - 1));
        }
    }
    s
}

async fn run(flows: &Flows, name: &str) -> Duration {
    let start = Instant::now();
    let s = flows
        .start_named(name, &BTreeMap::new(), None)
        .await
        .unwrap();
    let r = flows
        .wait(&s.run.id, Duration::from_secs(600))
        .await
        .unwrap();
    assert_eq!(r.state, RunState::Succeeded);
    start.elapsed()
}

/// `n` tasks through the ingress pipeline, awaited all together (`parallel`) or one by one.
async fn baseline(bus: &Arc<dyn Bus>, n: usize, parallel: bool) -> Duration {
    let ingress = Ingress::new(bus.clone());
    let one = |i: usize| {
        let ingress = ingress.clone();
        async move {
            let rid = RequestId::parse(&format!("base:{}:{i}", uuid::Uuid::now_v7())).unwrap();
            let req = Request {
                duplicates: Duplicates::Join,
                ..Request::new(
                    Target::Agent(AgentId::new("a")),
                    rid.clone(),
                    "go",
                    "bench",
                    Origin::api(),
                )
            };
            ingress.submit(req).await.unwrap();
            ingress
                .bus()
                .wait(&rid, Duration::from_secs(60))
                .await
                .unwrap();
        }
    };
    let start = Instant::now();
    if parallel {
        futures::future::join_all((0..n).map(one)).await;
    } else {
        for i in 0..n {
            one(i).await;
        }
    }
    start.elapsed()
}

fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}
