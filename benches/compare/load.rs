//! The clawbus scenarios under load: N concurrent turns, and memory per idle session.

use super::REQUEST;
use super::daemon::post;
use super::report::{Row, Scenario, Stat};
use super::turns::Ctx;
use serde_json::json;
use std::time::{Duration, Instant};

/// For each concurrency level N: N turns on distinct sessions at once, `sizes.repeats` times;
/// rows for the batch's total time, its slowest turn and the daemon's RSS after.
pub(super) fn concurrent(c: &Ctx) -> Vec<Row> {
    let (rt, d) = (c.rt, c.d);
    let mut rows = Vec::new();
    for &n in &c.sizes.concurrency {
        let mut totals = Vec::new();
        let mut slowest = Vec::new();
        for r in 0..c.sizes.repeats {
            let t = Instant::now();
            let lat: Vec<Duration> = rt.block_on(async {
                let all = (0..n).map(|i| async move {
                    let body = json!({ "text": format!("hello c{n}-{r}-{i}"), "wait": true,
                                       "session": format!("c{n}-{r}-{i}"), "timeout_ms": 60_000 });
                    let t = Instant::now();
                    let v = post(c.http, d, "main", &body).await;
                    (v, t.elapsed())
                });
                let res = tokio::time::timeout(REQUEST, futures::future::join_all(all))
                    .await
                    .unwrap_or_else(|_| panic!("{n} concurrent turns took over {REQUEST:?}"));
                res.into_iter()
                    .map(|(v, e)| {
                        d.check(v["state"] == "succeeded", &format!("concurrent: {v}"));
                        e
                    })
                    .collect()
            });
            totals.push(t.elapsed());
            slowest.push(lat.into_iter().max().unwrap_or_default());
        }
        rows.push(Row::new(
            Scenario::ConcurrentTotal(n),
            format!("{n} concurrent turns, distinct sessions: total"),
            "ms",
            Stat::ms(&totals),
        ));
        rows.push(Row::new(
            Scenario::ConcurrentSlowest(n),
            format!("{n} concurrent turns: slowest turn"),
            "ms",
            Stat::ms(&slowest),
        ));
        rows.push(Row::new(
            Scenario::ConcurrentRss(n),
            format!("{n} concurrent turns: RSS after"),
            "MiB",
            Stat::of(vec![d.rss_mib()]),
        ));
    }
    rows
}

/// RSS growth over `sizes.sessions` turns on new sessions (64 in flight), per session.
pub(super) fn idle_sessions(c: &Ctx) -> Row {
    let (d, sessions) = (c.d, c.sizes.sessions);
    let before = d.rss_mib();
    c.rt.block_on(async {
        use futures::StreamExt;
        let work = futures::stream::iter(0..sessions)
            .map(|i| async move {
                let body = json!({ "text": format!("hi {i}"), "wait": true,
                                   "session": format!("idle-{i}"), "timeout_ms": 60_000 });
                post(c.http, d, "main", &body).await
            })
            .buffer_unordered(64)
            .for_each(|v| {
                d.check(v["state"] == "succeeded", &format!("idle session: {v}"));
                async {}
            });
        tokio::time::timeout(REQUEST * 5, work)
            .await
            .unwrap_or_else(|_| panic!("{sessions} session turns took too long"));
    });
    std::thread::sleep(Duration::from_millis(500));
    let per = (d.rss_mib() - before).max(0.0) * 1024.0 / sessions as f64;
    Row::new(
        Scenario::IdleSession,
        format!("memory per idle session ({sessions} sessions)"),
        "KiB",
        Stat::of(vec![per]),
    )
}
